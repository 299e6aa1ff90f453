//! The panel's status and exit code, from its members' (one pure function, [`decide_panel`]),
//! and each member's verdict.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::{Status, Verdict, exit};
use crate::output::{ReviewVerdict, Severity};
use crate::result::HandoffResult;

use super::merge::rank;

/// Where a member's verdict came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictSource {
    /// The member's answer stated it (the provider-output `verdict`).
    Stated,
    /// The member succeeded without stating one: read from its findings, `changes-requested`
    /// when any is `medium` or worse, else `approve`.
    Findings,
    /// The member did not succeed: `unsure`, whatever it said.
    Status,
}

/// A member's verdict and where it came from: not `succeeded` → `unsure` (`status`); the
/// verdict its answer stated (`stated`); otherwise read from its findings (`findings`): any
/// `medium`, `high` or `blocker` → `changes-requested`, else `approve`.
pub fn member_verdict(result: &HandoffResult) -> (ReviewVerdict, VerdictSource) {
    if result.status != Status::Succeeded {
        (ReviewVerdict::Unsure, VerdictSource::Status)
    } else if let Some(stated) = result.output.verdict {
        (stated, VerdictSource::Stated)
    } else if result
        .output
        .findings
        .iter()
        .any(|f| rank(f.severity) >= rank(Severity::Medium))
    {
        (ReviewVerdict::ChangesRequested, VerdictSource::Findings)
    } else {
        (ReviewVerdict::Approve, VerdictSource::Findings)
    }
}

/// How cautious a verdict is: ties for the majority go to the more cautious one.
pub(crate) fn caution(verdict: ReviewVerdict) -> u8 {
    match verdict {
        ReviewVerdict::ChangesRequested => 2,
        ReviewVerdict::Unsure => 1,
        ReviewVerdict::Approve => 0,
    }
}

/// The panel's status and exit code from its members' statuses and exit codes, the quorum
/// (`None`: every member) and whether the panel itself was interrupted. First rule that holds:
///
/// 1. no member, or a quorum of 0 or above the number of members → `rejected` 5;
/// 2. any member exited 10 (a policy check blocked it) → `blocked` 10;
/// 3. the panel was interrupted, or any member was cancelled (exit 9) → `cancelled` 9;
/// 4. every member is `not_run` → `not_run` 3;
/// 5. at least `quorum` members `succeeded` → `succeeded` 0 (the others are named in the
///    agreement);
/// 6. otherwise → `failed` 2.
pub fn decide_panel(members: &[(Status, u8)], quorum: Option<usize>, cancelled: bool) -> Verdict {
    let quorum = quorum.unwrap_or(members.len());
    if members.is_empty() || quorum == 0 || quorum > members.len() {
        return Verdict::REJECTED;
    }
    if members.iter().any(|&(_, code)| code == exit::POLICY_BLOCK) {
        return Verdict::POLICY_BLOCKED;
    }
    if cancelled
        || members
            .iter()
            .any(|&(s, code)| s == Status::Cancelled || code == exit::CANCELLED)
    {
        return Verdict::CANCELLED;
    }
    if members.iter().all(|&(s, _)| s == Status::NotRun) {
        return Verdict::NOT_RUN;
    }
    let succeeded = members
        .iter()
        .filter(|&&(s, _)| s == Status::Succeeded)
        .count();
    if succeeded >= quorum {
        Verdict::SUCCEEDED
    } else {
        Verdict::AGENT_FAILED
    }
}
