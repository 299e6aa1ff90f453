//! How isolated an agent run is, dimension by dimension, and the rule that a nested adviser is
//! never less isolated than the worker that asks for it.
//!
//! Five dimensions, each an ordered set of levels, strongest first: what the agent's model can
//! write ([`FilesystemWrite`]) and read ([`FilesystemRead`]) through its tools, which hosts its
//! tools reach ([`Network`]), which Unix sockets they can connect to ([`UnixSockets`]), and
//! whether its processes die with the run ([`ProcessContainment`]). An [`Isolation`] is one
//! level per dimension plus who holds those levels ([`Enforcement`]).
//!
//! Levels describe what the model can make happen, since the model is the adversary. Every
//! agent CLI talks to its own model provider; that connection is not the model's to direct and
//! counts for no agent. MCP servers are the user's own programs, granted by name and attenuated
//! as a subset of the asking worker's, and are not ranked here.
//!
//! The adapter knows the configuration it builds, so [`crate::Provider::isolation`] ranks each
//! [`RunShape`] (mode, grants, whether the run may ask for advice). [`table`] lists every shape
//! of every registered agent in one place; the README's isolation table is its rendering
//! ([`render_markdown`]), compared by a test.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::Mode;
use crate::provider::{Provider, Registry};
use crate::request::{DelegationMode, GrantsResolved, Request};

/// Declares a level enum: strongest variant first (so `<` means stronger), kebab-case in JSON,
/// [`Level::name`] for messages.
macro_rules! levels {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
            JsonSchema,
        )]
        #[serde(rename_all = "kebab-case")]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every level, strongest first.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The level as it reads in JSON.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

levels! {
    /// Where the agent's model can write, through its tools or the commands it runs.
    FilesystemWrite {
        /// Nowhere.
        None = "none",
        /// Only temporary directories and the CLI's own log directories (e.g. Claude Code's
        /// sandboxed shell: `/tmp/claude`, `~/.claude/debug`, `~/.npm/_logs`): never the
        /// worktree or the user's files.
        Temp = "temp",
        /// The worktree only.
        Worktree = "worktree",
        /// The worktree and temporary directories (`/tmp`, `$TMPDIR`).
        WorktreeAndTemp = "worktree-and-temp",
        /// Anywhere the user can write (`~/.bashrc` included).
        Anywhere = "anywhere",
    }
}

levels! {
    /// What the agent's model can read.
    FilesystemRead {
        /// The worktree, plus what the system needs to run programs; nothing of the user's
        /// home directory.
        Worktree = "worktree",
        /// Everything the user can read (`~/.ssh` included).
        Anywhere = "anywhere",
    }
}

levels! {
    /// Which hosts the agent's tools reach (the CLI's own connection to its model provider
    /// aside, which every agent has).
    Network {
        /// None: commands run without network and no web tool is offered.
        None = "none",
        /// Only the model provider's endpoints, through a filtering proxy.
        ModelEndpoints = "model-endpoints",
        /// Any host, but only through the CLI's own web search and fetch tools.
        Web = "web",
        /// Any host, from any command the model runs.
        Any = "any",
    }
}

levels! {
    /// Which Unix sockets the agent's commands can connect to.
    UnixSockets {
        /// None.
        None = "none",
        /// One socket, named by its path. No adapter ranks a run here today: the supervisor is
        /// reached through a mailbox directory, not a socket; the level is kept for a sandbox
        /// that allows one socket by path.
        Named = "named",
        /// Every socket the user can reach (a Docker socket, an SSH agent, the session bus).
        All = "all",
    }
}

levels! {
    /// Whether everything the agent starts dies with the run.
    ProcessContainment {
        /// The run has a PID namespace of its own: nothing it starts outlives it.
        PidNamespace = "pid-namespace",
        /// handoff is the subreaper of the run and kills every descendant, `setsid` escapees
        /// included.
        Reaper = "reaper",
        /// handoff kills the run's process group; a process that calls `setsid` escapes it.
        ProcessGroup = "process-group",
    }
}

levels! {
    /// Who holds the levels of an [`Isolation`].
    Enforcement {
        /// The CLI's own sandbox (Codex's, Claude Code's bash sandbox, Grok's, Cursor's).
        Native = "native",
        /// handoff's own sandbox around the CLI (bubblewrap / sandbox-exec).
        Handoff = "handoff",
        /// No sandbox: only the CLI's tool permissions (what it offers and auto-approves).
        None = "none",
    }
}

/// One dimension of isolation.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Dimension {
    /// [`FilesystemWrite`].
    FilesystemWrite,
    /// [`FilesystemRead`].
    FilesystemRead,
    /// [`Network`].
    Network,
    /// [`UnixSockets`].
    UnixSockets,
    /// [`ProcessContainment`].
    Process,
}

impl Dimension {
    /// Every dimension, in the order of [`Isolation`]'s fields.
    pub const ALL: [Dimension; 5] = [
        Dimension::FilesystemWrite,
        Dimension::FilesystemRead,
        Dimension::Network,
        Dimension::UnixSockets,
        Dimension::Process,
    ];

    /// The dimension in words.
    pub fn words(self) -> &'static str {
        match self {
            Dimension::FilesystemWrite => "filesystem write",
            Dimension::FilesystemRead => "filesystem read",
            Dimension::Network => "network",
            Dimension::UnixSockets => "unix sockets",
            Dimension::Process => "processes",
        }
    }
}

impl std::fmt::Display for Dimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.words())
    }
}

/// How isolated one run is: a level per dimension, and who holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Isolation {
    /// Who holds the levels below.
    pub enforcement: Enforcement,
    /// Where the model can write.
    pub filesystem_write: FilesystemWrite,
    /// What the model can read.
    pub filesystem_read: FilesystemRead,
    /// Which hosts its tools reach.
    pub network: Network,
    /// Which Unix sockets its commands reach.
    pub unix_sockets: UnixSockets,
    /// Whether its processes die with the run.
    pub process: ProcessContainment,
}

/// A dimension on which a target is weaker than its caller, with both levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeakerDimension {
    /// The dimension.
    pub dimension: Dimension,
    /// The caller's level.
    pub caller: &'static str,
    /// The target's level.
    pub target: &'static str,
}

impl std::fmt::Display for WeakerDimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} (caller: {})",
            self.dimension, self.target, self.caller
        )
    }
}

/// How the processes of every run are contained: one answer for every agent. On Linux each
/// agent runs under handoff's reaper ([`crate::reaper`]; every run with advice has the handoff
/// binary it needs), elsewhere only its process group is killed.
pub fn process_containment() -> ProcessContainment {
    if crate::reaper::AVAILABLE {
        ProcessContainment::Reaper
    } else {
        ProcessContainment::ProcessGroup
    }
}

impl Isolation {
    /// No isolation at all: what a provider that does not rank its runs is taken to be.
    pub fn unconfined() -> Isolation {
        Isolation {
            enforcement: Enforcement::None,
            filesystem_write: FilesystemWrite::Anywhere,
            filesystem_read: FilesystemRead::Anywhere,
            network: Network::Any,
            unix_sockets: UnixSockets::All,
            process: ProcessContainment::ProcessGroup,
        }
    }

    /// The level of `dimension`, as it reads in JSON.
    pub fn level(&self, dimension: Dimension) -> &'static str {
        match dimension {
            Dimension::FilesystemWrite => self.filesystem_write.name(),
            Dimension::FilesystemRead => self.filesystem_read.name(),
            Dimension::Network => self.network.name(),
            Dimension::UnixSockets => self.unix_sockets.name(),
            Dimension::Process => self.process.name(),
        }
    }

    /// The dimensions on which `self` (the target) is weaker than `caller`, in the order of
    /// [`Dimension::ALL`]. Empty when `self` is at least as isolated on every dimension.
    pub fn weaker_than(&self, caller: &Isolation) -> Vec<Dimension> {
        let weaker = [
            self.filesystem_write > caller.filesystem_write,
            self.filesystem_read > caller.filesystem_read,
            self.network > caller.network,
            self.unix_sockets > caller.unix_sockets,
            self.process > caller.process,
        ];
        Dimension::ALL
            .into_iter()
            .zip(weaker)
            .filter_map(|(d, w)| w.then_some(d))
            .collect()
    }

    /// [`Isolation::weaker_than`] with both levels of each dimension.
    pub fn weaker_dimensions(&self, caller: &Isolation) -> Vec<WeakerDimension> {
        self.weaker_than(caller)
            .into_iter()
            .map(|dimension| WeakerDimension {
                dimension,
                caller: caller.level(dimension),
                target: self.level(dimension),
            })
            .collect()
    }
}

/// What a run looks like to the isolation an adapter configures: its mode, its grants and
/// whether it may ask for nested advice (which lets its shell write its mailbox's `in/`: the
/// supervisor's channel, which adapters do not rank as a write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunShape {
    /// The mode; `None` for advice.
    pub mode: Option<Mode>,
    /// The resolved grants (`write` follows the mode).
    pub grants: GrantsResolved,
    /// Whether the run may ask for nested advice (delegation `advice-only`).
    pub nested: bool,
    /// Whether handoff's own sandbox can run here ([`crate::sandbox::bubblewrap_here`]), for
    /// an adapter that asks for it.
    pub handoff_sandbox: bool,
    /// Whether handoff's own sandbox holds the agent although its adapter would not ask for it
    /// (an agent with a sandbox of its own): a nested adviser confined so that it is no less
    /// isolated than the worker that asked ([`confine`]). Only where `handoff_sandbox`; an
    /// adapter that cannot run so ranks it as it ranks the run without.
    pub confined: bool,
}

impl RunShape {
    /// The shape of a validated request on `provider`: whether handoff's sandbox can run is
    /// found out only for a CLI that asks for it ([`Provider::asks_for_handoff_sandbox`]).
    pub fn on(request: &Request, provider: &dyn Provider) -> RunShape {
        RunShape {
            handoff_sandbox: provider.asks_for_handoff_sandbox()
                && crate::sandbox::bubblewrap_here().is_some(),
            ..RunShape::without_sandbox_probe(request)
        }
    }

    /// The shape of a validated request, with whether handoff's sandbox can run here.
    pub fn of(request: &Request) -> RunShape {
        RunShape {
            handoff_sandbox: crate::sandbox::bubblewrap_here().is_some(),
            ..RunShape::without_sandbox_probe(request)
        }
    }

    fn without_sandbox_probe(request: &Request) -> RunShape {
        RunShape {
            mode: request.mode,
            grants: request.grants.resolved.clone(),
            nested: request.delegation.mode == DelegationMode::AdviceOnly,
            handoff_sandbox: false,
            confined: false,
        }
    }

    /// A shape with bash and web search as given, no MCP, `write` from the mode, where
    /// handoff's own sandbox can run (as the documented table assumes).
    pub fn new(mode: Option<Mode>, bash: bool, web_search: bool, nested: bool) -> RunShape {
        RunShape {
            mode,
            grants: GrantsResolved {
                bash,
                web_search,
                mcp: false,
                write: mode.is_some_and(Mode::writes),
            },
            nested,
            handoff_sandbox: true,
            confined: false,
        }
    }

    /// Whether the run may write the worktree.
    pub fn writes(&self) -> bool {
        self.grants.write
    }
}

/// The isolation `request` runs under, as its target's adapter ranks it; `None` when the
/// target is not registered.
pub fn of_request(registry: &Registry, request: &Request) -> Option<Isolation> {
    registry
        .get(&request.target.harness)
        .map(|p| p.isolation(&RunShape::on(request, p.as_ref())))
}

mod confine;
mod table;

pub use confine::{Attenuation, Confinement, WeakerLevel, confine};
pub use table::{IsolationCase, IsolationRow, cases, cases_where, render_markdown, table};

#[cfg(test)]
mod tests {
    use super::*;

    fn iso(
        write: FilesystemWrite,
        read: FilesystemRead,
        network: Network,
        unix: UnixSockets,
    ) -> Isolation {
        Isolation {
            enforcement: Enforcement::Native,
            filesystem_write: write,
            filesystem_read: read,
            network,
            unix_sockets: unix,
            process: ProcessContainment::Reaper,
        }
    }

    #[test]
    fn levels_are_ordered_strongest_first() {
        assert!(FilesystemWrite::ALL.windows(2).all(|p| p[0] < p[1]));
        assert!(FilesystemRead::ALL.windows(2).all(|p| p[0] < p[1]));
        assert!(Network::ALL.windows(2).all(|p| p[0] < p[1]));
        assert!(UnixSockets::ALL.windows(2).all(|p| p[0] < p[1]));
        assert!(ProcessContainment::ALL.windows(2).all(|p| p[0] < p[1]));
        assert!(FilesystemWrite::None < FilesystemWrite::Temp);
        assert!(FilesystemWrite::Temp < FilesystemWrite::Worktree);
        assert!(FilesystemWrite::WorktreeAndTemp < FilesystemWrite::Anywhere);
        assert!(Network::ModelEndpoints < Network::Web);
        assert!(UnixSockets::Named < UnixSockets::All);
        assert!(ProcessContainment::PidNamespace < ProcessContainment::Reaper);
        assert!(ProcessContainment::Reaper < ProcessContainment::ProcessGroup);
    }

    #[test]
    fn levels_read_in_json_as_they_are_named() {
        for l in FilesystemWrite::ALL {
            assert_eq!(serde_json::to_value(l).unwrap(), l.name());
        }
        for l in Network::ALL {
            assert_eq!(serde_json::to_value(l).unwrap(), l.name());
        }
        for l in ProcessContainment::ALL {
            assert_eq!(serde_json::to_value(l).unwrap(), l.name());
        }
        for l in Enforcement::ALL {
            assert_eq!(serde_json::to_value(l).unwrap(), l.name());
        }
        let json = serde_json::to_value(Isolation::unconfined()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "enforcement": "none",
                "filesystemWrite": "anywhere",
                "filesystemRead": "anywhere",
                "network": "any",
                "unixSockets": "all",
                "process": "process-group",
            })
        );
        assert_eq!(
            serde_json::to_value(Dimension::UnixSockets).unwrap(),
            "unixSockets"
        );
    }

    #[test]
    fn every_agent_runs_under_the_reaper_where_there_is_one() {
        let expected = if crate::reaper::AVAILABLE {
            ProcessContainment::Reaper
        } else {
            ProcessContainment::ProcessGroup
        };
        assert_eq!(process_containment(), expected);
        assert_eq!(
            Isolation::unconfined().process,
            ProcessContainment::ProcessGroup
        );
    }

    #[test]
    fn a_target_is_weaker_only_where_its_level_is_weaker() {
        use FilesystemRead as R;
        use FilesystemWrite as W;
        let caller = iso(W::None, R::Anywhere, Network::None, UnixSockets::All);
        // Equal: nothing weaker, in both directions.
        assert!(caller.weaker_than(&caller).is_empty());
        // Stronger on every dimension: nothing weaker.
        let strong = iso(W::None, R::Worktree, Network::None, UnixSockets::None);
        assert!(strong.weaker_than(&caller).is_empty());
        assert_eq!(
            caller.weaker_than(&strong),
            vec![Dimension::FilesystemRead, Dimension::UnixSockets]
        );
        // Stronger on one, weaker on another: the weaker one is named.
        let mixed = iso(W::Temp, R::Worktree, Network::None, UnixSockets::None);
        assert_eq!(mixed.weaker_than(&caller), vec![Dimension::FilesystemWrite]);
        // Unconfined against the caller: every dimension it is weaker on, in order.
        assert_eq!(
            Isolation::unconfined().weaker_than(&caller),
            vec![
                Dimension::FilesystemWrite,
                Dimension::Network,
                Dimension::Process
            ]
        );
        // Enforcement alone is not a dimension.
        let policy_only = Isolation {
            enforcement: Enforcement::None,
            ..caller
        };
        assert!(policy_only.weaker_than(&caller).is_empty());
        // A process level weaker than the caller's is named too.
        let contained = Isolation {
            process: ProcessContainment::PidNamespace,
            ..caller
        };
        assert_eq!(caller.weaker_than(&contained), vec![Dimension::Process]);
    }

    #[test]
    fn weaker_dimensions_carry_both_levels_and_read_as_one_line() {
        let caller = iso(
            FilesystemWrite::None,
            FilesystemRead::Anywhere,
            Network::None,
            UnixSockets::All,
        );
        let weaker = Isolation::unconfined().weaker_dimensions(&caller);
        assert_eq!(
            weaker,
            vec![
                WeakerDimension {
                    dimension: Dimension::FilesystemWrite,
                    caller: "none",
                    target: "anywhere",
                },
                WeakerDimension {
                    dimension: Dimension::Network,
                    caller: "none",
                    target: "any",
                },
                WeakerDimension {
                    dimension: Dimension::Process,
                    caller: "reaper",
                    target: "process-group",
                },
            ]
        );
        assert_eq!(
            weaker[0].to_string(),
            "filesystem write anywhere (caller: none)"
        );
    }
}
