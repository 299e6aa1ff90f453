//! The rule that a nested adviser is never less isolated than the worker that asks for it, and
//! how the supervisor keeps it: an adviser that would be weaker runs with fewer grants when
//! that is enough; else under handoff's own sandbox (with as few grants withheld as that
//! needs) when its adapter can run so; and is refused only when neither is enough.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Dimension, Isolation, RunShape, WeakerDimension};
use crate::provider::Provider;
use crate::request::{GrantKind, GrantsResolved};

/// The grants the supervisor may withhold from an adviser, in the order they are withheld.
pub const WITHHELD_ORDER: [GrantKind; 3] = [GrantKind::Bash, GrantKind::WebSearch, GrantKind::Mcp];

/// What a nested adviser runs under, decided against its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// The adviser, with the grants it asked for, is at least as isolated as its caller on
    /// every dimension: it runs as asked.
    AsConfigured(Isolation),
    /// With the grants it asked for the adviser would be weaker; with some of them withheld,
    /// or under handoff's sandbox ([`Attenuation::handoff_sandbox`]), it is not: it runs with
    /// `grants`, under `isolation`.
    Attenuated {
        /// The isolation it runs under.
        isolation: Isolation,
        /// The grants it runs with.
        grants: GrantsResolved,
        /// What was withheld and why.
        attenuation: Attenuation,
    },
    /// No lowering of its grants makes the adviser as isolated as its caller: the request is
    /// refused before anything starts. Each dimension on which it stays weaker with every
    /// grant it could lose withheld, with both levels.
    Refused(Vec<WeakerDimension>),
}

/// Grants withheld from a nested adviser so that it is no less isolated than the worker that
/// asked for it (`dag.nodes[].attenuated`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attenuation {
    /// The grants withheld (`bash`, `webSearch`, `mcp`), in that order; at least one unless
    /// `handoffSandbox`.
    pub withheld: Vec<GrantKind>,
    /// Why: each dimension on which the adviser, with the grants it asked for, was weaker than
    /// the worker that asked; at least one.
    pub because: Vec<WeakerLevel>,
    /// The adviser runs under handoff's own sandbox, which its adapter would not ask for by
    /// itself (an agent with a sandbox of its own whose reach no lowering of grants narrows
    /// enough); `withheld` may then be empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handoff_sandbox: bool,
}

/// A dimension on which an adviser as asked was weaker than its caller, with both levels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WeakerLevel {
    /// The dimension.
    pub dimension: Dimension,
    /// The caller's level.
    pub caller: String,
    /// The adviser's level with the grants it asked for.
    pub asked: String,
}

impl From<WeakerDimension> for WeakerLevel {
    fn from(w: WeakerDimension) -> WeakerLevel {
        WeakerLevel {
            dimension: w.dimension,
            caller: w.caller.to_owned(),
            asked: w.target.to_owned(),
        }
    }
}

/// Whether `grants` holds `grant`.
fn holds(grants: &GrantsResolved, grant: GrantKind) -> bool {
    match grant {
        GrantKind::Bash => grants.bash,
        GrantKind::WebSearch => grants.web_search,
        GrantKind::Mcp => grants.mcp,
    }
}

/// `grants` without each of `withheld`.
fn without(grants: &GrantsResolved, withheld: &[GrantKind]) -> GrantsResolved {
    let mut g = grants.clone();
    for w in withheld {
        match w {
            GrantKind::Bash => g.bash = false,
            GrantKind::WebSearch => g.web_search = false,
            GrantKind::Mcp => g.mcp = false,
        }
    }
    g
}

/// The sets of grants that may be withheld from `grants`, fewest first, and among as many, in
/// [`WITHHELD_ORDER`] (the shell before web search before MCP). The shell is withheld only
/// when `shell_optional` (the CLI can run without one).
fn candidates(grants: &GrantsResolved, shell_optional: bool) -> Vec<Vec<GrantKind>> {
    let can_lose: Vec<GrantKind> = WITHHELD_ORDER
        .into_iter()
        .filter(|&g| holds(grants, g))
        .filter(|&g| g != GrantKind::Bash || shell_optional)
        .collect();
    let n = can_lose.len();
    let mut sets: Vec<Vec<GrantKind>> = (1u32..(1 << n))
        .map(|mask| {
            (0..n)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| can_lose[i])
                .collect()
        })
        .collect();
    // Fewest first; among as many, the one whose grants come first in the order.
    let key = |s: &Vec<GrantKind>| -> (usize, Vec<usize>) {
        let pos = s
            .iter()
            .map(|g| WITHHELD_ORDER.iter().position(|o| o == g).unwrap_or(0))
            .collect();
        (s.len(), pos)
    };
    sets.sort_by_key(key);
    sets
}

/// Picks what a nested adviser of shape `asked` on `provider` runs under, against `caller`:
/// as asked when that is not weaker on any dimension; else with the fewest grants withheld
/// (the shell, web search, MCP servers, tried in that order) that leave it no weaker; else,
/// where handoff's sandbox can run, under it ([`RunShape::confined`]) with the fewest grants
/// withheld that that still needs; else a refusal naming each dimension on which it stays
/// weaker with all of them withheld.
pub fn confine(caller: &Isolation, provider: &dyn Provider, asked: &RunShape) -> Confinement {
    decide(
        caller,
        asked,
        provider.spec().grants.bash_disable,
        |shape| provider.isolation(shape),
    )
}

/// [`confine`] over a ranking function: `rank` gives the isolation of a shape, and the shell
/// may be withheld only when `shell_optional`.
pub(crate) fn decide(
    caller: &Isolation,
    asked: &RunShape,
    shell_optional: bool,
    rank: impl Fn(&RunShape) -> Isolation,
) -> Confinement {
    let configured = rank(asked);
    let weaker = configured.weaker_dimensions(caller);
    if weaker.is_empty() {
        return Confinement::AsConfigured(configured);
    }
    let sets = candidates(&asked.grants, shell_optional);
    let lowered = |withheld: &[GrantKind], confined: bool| RunShape {
        grants: without(&asked.grants, withheld),
        confined,
        ..asked.clone()
    };
    // First with fewer grants as configured; then, where handoff's sandbox can run, under it,
    // with as few grants withheld as that still needs (none first).
    let mut tries: Vec<(&[GrantKind], bool)> = sets.iter().map(|s| (&s[..], false)).collect();
    if asked.handoff_sandbox && !asked.confined {
        tries.push((&[], true));
        tries.extend(sets.iter().map(|s| (&s[..], true)));
    }
    for (withheld, confined) in tries {
        let shape = lowered(withheld, confined);
        let isolation = rank(&shape);
        if isolation.weaker_than(caller).is_empty() {
            return Confinement::Attenuated {
                isolation,
                grants: shape.grants,
                attenuation: Attenuation {
                    withheld: withheld.to_vec(),
                    because: weaker.into_iter().map(WeakerLevel::from).collect(),
                    handoff_sandbox: confined,
                },
            };
        }
    }
    // Every grant that could go, gone: what is still weaker is what refuses the adviser.
    let least = sets
        .last()
        .map_or_else(|| configured, |all| rank(&lowered(all, false)));
    Confinement::Refused(least.weaker_dimensions(caller))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::{FilesystemRead, FilesystemWrite, Network, UnixSockets};

    /// A review worker in a read-only native sandbox: writes nothing, no network, no socket.
    fn sealed() -> Isolation {
        Isolation {
            enforcement: super::super::Enforcement::Native,
            filesystem_write: FilesystemWrite::None,
            filesystem_read: FilesystemRead::Anywhere,
            network: Network::None,
            unix_sockets: UnixSockets::None,
            process: super::super::ProcessContainment::Reaper,
        }
    }

    /// An adviser whose shell writes temporary directories and whose web tools reach any host.
    fn adviser(shape: &RunShape) -> Isolation {
        let g = &shape.grants;
        Isolation {
            filesystem_write: if g.bash {
                FilesystemWrite::Temp
            } else {
                FilesystemWrite::None
            },
            network: if g.web_search {
                Network::Web
            } else {
                Network::None
            },
            ..sealed()
        }
    }

    fn asked(bash: bool, web: bool, mcp: bool) -> RunShape {
        let mut s = RunShape::new(None, bash, web, true);
        s.grants.mcp = mcp;
        s
    }

    fn levels(v: &[WeakerLevel]) -> Vec<(Dimension, &str, &str)> {
        v.iter()
            .map(|w| (w.dimension, w.caller.as_str(), w.asked.as_str()))
            .collect()
    }

    #[test]
    fn an_adviser_no_weaker_runs_as_asked() {
        let caller = Isolation {
            filesystem_write: FilesystemWrite::Temp,
            network: Network::Web,
            ..sealed()
        };
        let shape = asked(true, true, true);
        assert_eq!(
            decide(&caller, &shape, true, adviser),
            Confinement::AsConfigured(adviser(&shape))
        );
    }

    #[test]
    fn only_the_grants_that_make_it_weaker_are_withheld() {
        // The shell alone: the shell goes, web search and MCP stay.
        let caller = Isolation {
            network: Network::Web,
            ..sealed()
        };
        match decide(&caller, &asked(true, true, true), true, adviser) {
            Confinement::Attenuated {
                isolation,
                grants,
                attenuation,
            } => {
                assert_eq!(attenuation.withheld, vec![GrantKind::Bash]);
                assert_eq!(
                    levels(&attenuation.because),
                    vec![(Dimension::FilesystemWrite, "none", "temp")]
                );
                assert!(!grants.bash && grants.web_search && grants.mcp);
                assert_eq!(isolation.filesystem_write, FilesystemWrite::None);
            }
            other => panic!("{other:?}"),
        }
        // Web search alone, though the shell comes first in the order: only as far as needed.
        let caller = Isolation {
            filesystem_write: FilesystemWrite::Temp,
            ..sealed()
        };
        match decide(&caller, &asked(true, true, false), true, adviser) {
            Confinement::Attenuated {
                grants,
                attenuation,
                ..
            } => {
                assert_eq!(attenuation.withheld, vec![GrantKind::WebSearch]);
                assert!(grants.bash && !grants.web_search);
            }
            other => panic!("{other:?}"),
        }
        // Both, named in the order.
        match decide(&sealed(), &asked(true, true, false), true, adviser) {
            Confinement::Attenuated { attenuation, .. } => {
                assert_eq!(
                    attenuation.withheld,
                    vec![GrantKind::Bash, GrantKind::WebSearch]
                );
                assert_eq!(
                    levels(&attenuation.because),
                    vec![
                        (Dimension::FilesystemWrite, "none", "temp"),
                        (Dimension::Network, "none", "web"),
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_ranking_that_depends_on_mcp_loses_mcp_last() {
        let rank = |s: &RunShape| Isolation {
            unix_sockets: if s.grants.mcp {
                UnixSockets::All
            } else {
                UnixSockets::None
            },
            ..adviser(s)
        };
        match decide(&sealed(), &asked(true, false, true), true, rank) {
            Confinement::Attenuated {
                grants,
                attenuation,
                ..
            } => {
                assert_eq!(attenuation.withheld, vec![GrantKind::Bash, GrantKind::Mcp]);
                assert!(!grants.bash && !grants.mcp);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn what_no_lowering_fixes_is_refused_naming_what_stays_weaker() {
        let caller = Isolation {
            filesystem_read: FilesystemRead::Worktree,
            ..sealed()
        };
        // Reads anywhere whatever it holds: the shell's write is not named, reading is.
        match decide(&caller, &asked(true, false, false), true, adviser) {
            Confinement::Refused(w) => {
                assert_eq!(w.len(), 1);
                assert_eq!(
                    w[0].to_string(),
                    "filesystem read anywhere (caller: worktree)"
                );
            }
            other => panic!("{other:?}"),
        }
        // A CLI that cannot run without its shell keeps it, and is refused for it.
        match decide(&sealed(), &asked(true, false, false), false, adviser) {
            Confinement::Refused(w) => {
                assert_eq!(w[0].to_string(), "filesystem write temp (caller: none)");
            }
            other => panic!("{other:?}"),
        }
    }

    /// An adviser that reads anywhere unless handoff's sandbox holds it, whose shell under that
    /// sandbox reaches the model's endpoints.
    fn confinable(shape: &RunShape) -> Isolation {
        if shape.confined && shape.handoff_sandbox {
            return Isolation {
                enforcement: super::super::Enforcement::Handoff,
                filesystem_read: FilesystemRead::Worktree,
                network: if shape.grants.bash {
                    Network::ModelEndpoints
                } else {
                    Network::None
                },
                ..sealed()
            };
        }
        adviser(shape)
    }

    #[test]
    fn where_no_lowering_is_enough_handoffs_sandbox_holds_the_adviser() {
        // A worker that reads only its worktree: no grant narrows what the adviser reads.
        let caller = Isolation {
            filesystem_read: FilesystemRead::Worktree,
            ..sealed()
        };
        match decide(&caller, &asked(true, false, false), true, confinable) {
            Confinement::Attenuated {
                isolation,
                grants,
                attenuation,
            } => {
                assert!(attenuation.handoff_sandbox);
                // Under the sandbox the shell still reaches the model's endpoints: it goes too.
                assert_eq!(attenuation.withheld, vec![GrantKind::Bash]);
                assert!(!grants.bash);
                assert_eq!(isolation.filesystem_read, FilesystemRead::Worktree);
                let json = serde_json::to_value(&attenuation).unwrap();
                assert_eq!(json["handoffSandbox"], true);
            }
            other => panic!("{other:?}"),
        }
        // Nothing to withhold once held: withheld is empty.
        match decide(&caller, &asked(false, false, false), true, confinable) {
            Confinement::Attenuated { attenuation, .. } => {
                assert!(attenuation.handoff_sandbox && attenuation.withheld.is_empty());
            }
            other => panic!("{other:?}"),
        }
        // Where handoff's sandbox cannot run, the adviser is refused as before.
        let mut shape = asked(false, false, false);
        shape.handoff_sandbox = false;
        assert!(matches!(
            decide(&caller, &shape, true, confinable),
            Confinement::Refused(_)
        ));
    }

    #[test]
    fn grant_kinds_read_in_json_as_the_grants_do() {
        let json = serde_json::to_value(Attenuation {
            withheld: WITHHELD_ORDER.to_vec(),
            because: vec![WeakerLevel {
                dimension: Dimension::FilesystemWrite,
                caller: "none".into(),
                asked: "temp".into(),
            }],
            handoff_sandbox: false,
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "withheld": ["bash", "webSearch", "mcp"],
                "because": [{"dimension": "filesystemWrite", "caller": "none", "asked": "temp"}],
            })
        );
    }
}
