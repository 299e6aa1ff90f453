//! A panel: several agents asked the same read-only question, their answers put side by side.
//!
//! An entry point parses the members ([`parse_members`]), runs each one as a read-only run of
//! its own, and hands the results to [`PanelResult::assemble`], which merges the findings,
//! computes the agreement and decides the panel's status and exit code ([`decide_panel`]).
//! Everything here is pure: no process, no clock, no file.
//!
//! # Members
//!
//! `--harness codex,claude:opus,opencode`: comma-separated entries, each an agent registered
//! with handoff, optionally followed by `:model`. The same agent may sit more than once with
//! different models; the same agent with the same model (or twice without one) is refused, as
//! are an empty entry, an unknown agent, a model `--model` would refuse and more than
//! [`MAX_PANEL_MEMBERS`] entries. A member's id is its entry as written, trimmed: `codex`,
//! `claude:opus`.
//!
//! # Merging findings
//!
//! See [`merge_findings`] for the rule: deterministic, and independent of the order of the
//! members and of their findings.
//!
//! # Agreement
//!
//! [`Agreement`] lists the findings only one member raised (indices into `findings`), each
//! member's status and verdict ([`member_verdict`]: the `verdict` its answer stated, else read
//! from its findings; `unsure` when it did not succeed), the majority verdict of the members that succeeded
//! (the most common; a tie goes to the more cautious, `changes-requested` before `unsure`
//! before `approve`), the members that succeeded with another verdict, and the members that did
//! not succeed.
//!
//! # Status and exit code
//!
//! See [`decide_panel`]: a policy block of any member (10) before a cancellation (9) before
//! every member `not_run` (3); then `succeeded` 0 when at least the quorum (default: every
//! member) succeeded, else `failed` 2. A malformed member list or quorum is `rejected` 5 before
//! anything runs ([`PanelSpecError`], [`PanelResult::rejected`]).

mod decide;
mod merge;
mod spec;
#[cfg(test)]
pub(crate) mod tests;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::names::{Status, exit};
use crate::output::ReviewVerdict;
use crate::result::{DRIVER_VERSION, DagNode, HandoffResult, Timing, Usage, UsageSource};

pub use decide::{VerdictSource, decide_panel, member_verdict};
pub use merge::{
    GENERAL_CATEGORY, LineRange, PanelFinding, Wording, merge_findings, normalise_category,
    normalise_path, title_tokens, titles_agree,
};
pub use spec::{
    MAX_PANEL_MEMBERS, PanelMember, PanelSpecError, check_quorum, parse_members,
    parse_members_among, render_members,
};

/// Schema version of [`PanelResult`].
pub const PANEL_SCHEMA: &str = "handoff.panel.v1";

/// What a panel prints: every member's result, their findings merged, and how far they agree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PanelResult {
    /// Always [`PANEL_SCHEMA`].
    #[schemars(schema_with = "panel_version")]
    pub schema_version: String,
    /// The handoff version that produced it.
    pub driver_version: String,
    /// The panel's own run id, the root of its DAG; null when it was refused before it began.
    pub run_id: Option<String>,
    /// The panel's outcome.
    pub status: Status,
    /// The panel's exit code.
    pub exit: PanelExit,
    /// How many members had to succeed.
    pub quorum: u32,
    /// One complete result per member, in the order the members were named.
    pub members: Vec<HandoffResult>,
    /// The panel's DAG below its root (the panel, `runId`), in the `handoff.dag.v1` node
    /// shape: each member's node at depth 1 with the panel as its parent, each followed by
    /// the nested advisers it asked, one level deeper than in its own result's DAG. A
    /// member's node carries the hash of its request and of its result as embedded in
    /// `members` (`sha256:` of its compact JSON); a member refused before its request was
    /// built has no node.
    pub nodes: Vec<DagNode>,
    /// The members' findings, merged.
    pub findings: Vec<PanelFinding>,
    /// Where the members agree and where they do not.
    pub agreement: Agreement,
    /// Tokens and cost summed over the members.
    pub usage: Usage,
    /// From the first member's start to the last member's end.
    pub timing: Timing,
    /// One line saying what went wrong, or which members failed; null when every member
    /// succeeded.
    pub message: Option<String>,
}

fn panel_version(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "const": PANEL_SCHEMA})
}

/// The panel's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PanelExit {
    /// handoff's own exit code.
    pub driver: u8,
    /// The panel was interrupted.
    pub cancelled: bool,
}

/// Where a panel's members agree and where they do not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Agreement {
    /// Indices into `findings` of the findings only one member raised.
    pub single_member_findings: Vec<usize>,
    /// Each member's status and verdict, in the order of `members`.
    pub verdicts: Vec<MemberStance>,
    /// The most common verdict of the members that succeeded (ties to the more cautious);
    /// null when none succeeded.
    pub majority: Option<ReviewVerdict>,
    /// Whether any member that succeeded differs from the majority.
    pub verdicts_differ: bool,
    /// The members that succeeded with a verdict other than the majority's.
    pub dissenting: Vec<String>,
    /// The members that did not succeed.
    pub failed: Vec<FailedMember>,
}

/// One member's status and verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberStance {
    /// The member's id.
    pub member: String,
    /// Its run's status.
    pub status: Status,
    /// Its verdict.
    pub verdict: ReviewVerdict,
    /// Where the verdict came from: `stated` in its answer, read from its `findings`, or its
    /// `status` (not succeeded).
    pub verdict_source: VerdictSource,
}

/// A member that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailedMember {
    /// The member's id.
    pub member: String,
    /// Its run's status.
    pub status: Status,
    /// Its run's exit code.
    pub exit: u8,
}

impl Agreement {
    /// The agreement of members (id and result, in order) over their merged findings.
    pub fn of(members: &[(String, &HandoffResult)], findings: &[PanelFinding]) -> Agreement {
        let single_member_findings = findings
            .iter()
            .enumerate()
            .filter(|(_, f)| f.agreed_by.len() == 1)
            .map(|(i, _)| i)
            .collect();
        let verdicts: Vec<MemberStance> = members
            .iter()
            .map(|(id, r)| {
                let (verdict, verdict_source) = member_verdict(r);
                MemberStance {
                    member: id.clone(),
                    status: r.status,
                    verdict,
                    verdict_source,
                }
            })
            .collect();
        let voting = || verdicts.iter().filter(|v| v.status == Status::Succeeded);
        let majority = voting().map(|v| v.verdict).max_by_key(|&candidate| {
            let votes = voting().filter(|v| v.verdict == candidate).count();
            (votes, decide::caution(candidate))
        });
        let dissenting: Vec<String> = voting()
            .filter(|v| Some(v.verdict) != majority)
            .map(|v| v.member.clone())
            .collect();
        let failed = members
            .iter()
            .filter(|(_, r)| r.status != Status::Succeeded)
            .map(|(id, r)| FailedMember {
                member: id.clone(),
                status: r.status,
                exit: r.exit.driver,
            })
            .collect();
        Agreement {
            single_member_findings,
            verdicts,
            majority,
            verdicts_differ: !dissenting.is_empty(),
            dissenting,
            failed,
        }
    }
}

impl PanelResult {
    /// Puts the members' results together under the panel's `run_id`: its DAG nodes, merged
    /// findings, agreement, summed usage, the span of their timing, and the status and exit
    /// code of [`decide_panel`]. `members` are in the order they were named; `quorum` is `None`
    /// for every member; `cancelled` says whether the panel itself was interrupted.
    pub fn assemble(
        run_id: &str,
        members: Vec<(PanelMember, HandoffResult)>,
        quorum: Option<usize>,
        cancelled: bool,
    ) -> PanelResult {
        let ids: Vec<String> = members.iter().map(|(m, _)| m.id()).collect();
        let results: Vec<HandoffResult> = members.into_iter().map(|(_, r)| r).collect();
        let pairs: Vec<(String, &HandoffResult)> = ids.iter().cloned().zip(&results).collect();
        let findings = merge_findings(
            pairs
                .iter()
                .flat_map(|(id, r)| r.output.findings.iter().map(move |f| (id.as_str(), f))),
        );
        let agreement = Agreement::of(&pairs, &findings);
        let outcomes: Vec<(Status, u8)> =
            results.iter().map(|r| (r.status, r.exit.driver)).collect();
        let verdict = decide_panel(&outcomes, quorum, cancelled);
        let quorum_n = quorum.unwrap_or(results.len());
        let message = panel_message(verdict.code(), &pairs, &agreement, quorum_n, cancelled);
        PanelResult {
            schema_version: PANEL_SCHEMA.to_owned(),
            driver_version: DRIVER_VERSION.to_owned(),
            run_id: Some(run_id.to_owned()),
            nodes: panel_nodes(run_id, &results),
            status: verdict.status(),
            exit: PanelExit {
                driver: verdict.code(),
                cancelled,
            },
            quorum: u32::try_from(quorum_n).unwrap_or(u32::MAX),
            usage: sum_usage(results.iter().map(|r| &r.usage)),
            timing: span(results.iter().map(|r| &r.timing)),
            members: results,
            findings,
            agreement,
            message,
        }
    }

    /// A panel refused before any member ran (exit 5), at time `at` (ISO-8601 UTC).
    pub fn rejected(error: &PanelSpecError, at: &str) -> PanelResult {
        PanelResult::refused(error.to_string(), at)
    }

    /// A panel refused before any member ran (exit 5) for `message`: its members, or a
    /// request every member would share, or a worktree it could not hold.
    pub fn refused(message: String, at: &str) -> PanelResult {
        PanelResult {
            schema_version: PANEL_SCHEMA.to_owned(),
            driver_version: DRIVER_VERSION.to_owned(),
            run_id: None,
            nodes: Vec::new(),
            status: Status::Rejected,
            exit: PanelExit {
                driver: exit::USAGE,
                cancelled: false,
            },
            quorum: 0,
            members: Vec::new(),
            findings: Vec::new(),
            agreement: Agreement::of(&[], &[]),
            usage: Usage::not_observed(),
            timing: Timing {
                started_at: at.to_owned(),
                finished_at: at.to_owned(),
                duration_ms: 0,
            },
            message: Some(message),
        }
    }
}

/// The panel's DAG nodes below its root `run_id`: each member's root node re-parented to the
/// panel at depth 1, with its request's and its result's hashes, then its nested advisers one
/// level deeper.
fn panel_nodes(run_id: &str, members: &[HandoffResult]) -> Vec<DagNode> {
    let mut nodes = Vec::new();
    for member in members {
        let Some(dag) = &member.dag else { continue };
        let Some((root, nested)) = dag.nodes.split_first() else {
            continue;
        };
        let mut node = root.clone();
        node.parent_run_id = Some(run_id.to_owned());
        node.depth = 1;
        node.request_hash = member.request_hash.clone();
        node.result_hash = serde_json::to_vec(member).ok().map(|bytes| {
            use sha2::Digest as _;
            format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)))
        });
        nodes.push(node);
        nodes.extend(nested.iter().cloned().map(|mut n| {
            n.depth += 1;
            n
        }));
    }
    nodes
}

fn panel_message(
    code: u8,
    members: &[(String, &HandoffResult)],
    agreement: &Agreement,
    quorum: usize,
    cancelled: bool,
) -> Option<String> {
    let failed = || {
        agreement
            .failed
            .iter()
            .map(|f| format!("{} ({})", f.member, f.status.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let succeeded = members.len() - agreement.failed.len();
    match code {
        exit::USAGE if members.is_empty() => Some("the panel has no member".to_owned()),
        exit::USAGE => Some(format!(
            "the quorum {quorum} must be between 1 and the {} panel members",
            members.len()
        )),
        exit::POLICY_BLOCK => {
            let blocked: Vec<&str> = members
                .iter()
                .filter(|(_, r)| r.exit.driver == exit::POLICY_BLOCK)
                .map(|(id, _)| id.as_str())
                .collect();
            Some(format!("a policy check blocked {}", blocked.join(", ")))
        }
        exit::CANCELLED if cancelled => Some("the panel was cancelled".to_owned()),
        exit::CANCELLED => Some(format!("a member was cancelled: {}", failed())),
        exit::PROVIDER_UNAVAILABLE => Some(format!("no member could run: {}", failed())),
        _ if agreement.failed.is_empty() => None,
        _ => Some(format!(
            "{succeeded} of {} members succeeded (quorum {quorum}); not succeeded: {}",
            members.len(),
            failed()
        )),
    }
}

/// Sums each count over the members that reported it; null when none did. The source is
/// `provider-output` when any summed member's numbers came from the model's own answer,
/// `provider-envelope` when they all came from the agent CLI, and otherwise `not-reported` when
/// any member's answer carried no usage, else `not-observed`.
fn sum_usage<'a>(usages: impl Iterator<Item = &'a Usage> + Clone) -> Usage {
    let sum = |field: fn(&Usage) -> Option<u64>| {
        usages
            .clone()
            .filter_map(field)
            .reduce(|a, b| a.saturating_add(b))
    };
    let has_numbers = |u: &Usage| {
        [
            u.input_tokens,
            u.output_tokens,
            u.total_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
        ]
        .iter()
        .any(Option::is_some)
            || u.cost_usd.is_some()
    };
    let counted: Vec<UsageSource> = usages
        .clone()
        .filter(|u| has_numbers(u))
        .map(|u| u.source)
        .collect();
    let source = if counted.contains(&UsageSource::ProviderOutput) {
        UsageSource::ProviderOutput
    } else if !counted.is_empty() {
        UsageSource::ProviderEnvelope
    } else if usages.clone().any(|u| u.source == UsageSource::NotReported) {
        UsageSource::NotReported
    } else {
        UsageSource::NotObserved
    };
    Usage {
        source,
        input_tokens: sum(|u| u.input_tokens),
        output_tokens: sum(|u| u.output_tokens),
        total_tokens: sum(|u| u.total_tokens),
        cache_read_tokens: sum(|u| u.cache_read_tokens),
        cache_write_tokens: sum(|u| u.cache_write_tokens),
        cost_usd: usages
            .clone()
            .filter_map(|u| u.cost_usd)
            .reduce(|a, b| a + b),
        premium_requests: usages
            .clone()
            .filter_map(|u| u.premium_requests)
            .reduce(|a, b| a + b),
    }
}

/// From the earliest start to the latest end (timestamps sort as text); the duration is the
/// span between them, or the longest member's when a timestamp does not parse.
fn span<'a>(timings: impl Iterator<Item = &'a Timing> + Clone) -> Timing {
    let started_at = timings
        .clone()
        .map(|t| t.started_at.as_str())
        .min()
        .unwrap_or_default()
        .to_owned();
    let finished_at = timings
        .clone()
        .map(|t| t.finished_at.as_str())
        .max()
        .unwrap_or_default()
        .to_owned();
    let parse = |s: &str| OffsetDateTime::parse(s, &Rfc3339).ok();
    let duration_ms = match (parse(&started_at), parse(&finished_at)) {
        (Some(a), Some(b)) if b >= a => u64::try_from((b - a).whole_milliseconds()).ok(),
        _ => None,
    }
    .unwrap_or_else(|| timings.map(|t| t.duration_ms).max().unwrap_or(0));
    Timing {
        started_at,
        finished_at,
        duration_ms,
    }
}
