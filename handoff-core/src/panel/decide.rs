//! The panel's status and exit code, from its members' (one pure function, [`decide_panel`]),
//! and each member's verdict.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::{Status, Verdict, exit};
use crate::output::Severity;
use crate::result::HandoffResult;

use super::merge::rank;

/// What one member thinks of the work under review.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum MemberVerdict {
    /// Good as it is: the member succeeded and raised nothing above `low`.
    Approve,
    /// Needs changes: the member succeeded and raised at least one `medium` or worse finding.
    ChangesRequested,
    /// No opinion: the member did not succeed.
    Unsure,
}

impl MemberVerdict {
    /// A member's verdict, from its result. The provider-output contract carries no verdict of
    /// its own, so it is read from the status and the findings: not `succeeded` → `unsure`;
    /// any finding `medium`, `high` or `blocker` → `changes-requested`; otherwise `approve`.
    pub fn of(result: &HandoffResult) -> MemberVerdict {
        if result.status != Status::Succeeded {
            MemberVerdict::Unsure
        } else if result
            .output
            .findings
            .iter()
            .any(|f| rank(f.severity) >= rank(Severity::Medium))
        {
            MemberVerdict::ChangesRequested
        } else {
            MemberVerdict::Approve
        }
    }

    /// How cautious the verdict is: ties for the majority go to the more cautious one.
    pub(crate) fn caution(self) -> u8 {
        match self {
            MemberVerdict::ChangesRequested => 2,
            MemberVerdict::Unsure => 1,
            MemberVerdict::Approve => 0,
        }
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
