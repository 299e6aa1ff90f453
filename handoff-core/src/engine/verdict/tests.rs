//! The verdict's order, case by case.
use super::*;
use crate::names::Status;

const BUILD: bool = true;
const READ_ONLY: bool = false;

fn agent() -> AgentId {
    AgentId::CODEX
}

fn answered(exit_code: Option<i32>, status: ProviderStatus) -> Ended {
    Ended::Answered {
        agent: agent(),
        exit_code,
        status,
    }
}

fn completed() -> Ended {
    answered(Some(0), ProviderStatus::Completed)
}

fn failure() -> Ended {
    Ended::AgentFailure {
        agent: agent(),
        message: "rate limited".into(),
        reason: FailureReason::new(FailureCause::RateLimited),
    }
}

fn timed_out() -> Ended {
    Ended::TimedOut { budget_ms: 1500 }
}

fn unchanged() -> Option<After> {
    Some(After::Compared {
        changed: false,
        files: Vec::new(),
        git_programs: Vec::new(),
    })
}

fn changed(files: &[&str]) -> Option<After> {
    Some(After::Compared {
        changed: true,
        files: files.iter().map(|f| (*f).to_owned()).collect(),
        git_programs: files
            .iter()
            .filter(|f| f.starts_with(".git/hooks/"))
            .map(|f| (*f).to_owned())
            .collect(),
    })
}

fn unreadable() -> Option<After> {
    Some(After::Unreadable("git exploded".into()))
}

fn unnamed() -> Option<After> {
    Some(After::Unnamed("the states file was altered".into()))
}

fn evidence(ended: Ended, after: Option<After>, writes: bool) -> Evidence {
    Evidence {
        ended,
        after,
        writes,
        allow_git_config: false,
        shared: false,
        task: if writes { "build" } else { "review" },
        result_file: None,
    }
}

fn live(mut e: Evidence) -> Evidence {
    e.shared = true;
    e.task = "advice";
    e
}

fn unwritable(mut e: Evidence) -> Evidence {
    e.result_file = Some("cannot write /r.json: disk full".into());
    e
}

/// (what the row shows, the evidence, the verdict, the message).
fn table() -> Vec<(&'static str, Evidence, Verdict, Option<&'static str>)> {
    use Verdict as V;
    vec![
        // One row per exit code (and per way to reach it).
        (
            "0: a build that answered completed and changed the worktree",
            evidence(completed(), changed(&["src/a.rs"]), BUILD),
            V::SUCCEEDED,
            None,
        ),
        (
            "0: a review that answered completed and changed nothing",
            evidence(
                answered(None, ProviderStatus::Completed),
                unchanged(),
                READ_ONLY,
            ),
            V::SUCCEEDED,
            None,
        ),
        (
            "2: the agent reported its own failure",
            evidence(failure(), changed(&["a"]), BUILD),
            V::AGENT_FAILED,
            Some("codex reported a failure: rate limited"),
        ),
        (
            "2: the agent answered failed",
            evidence(
                answered(Some(0), ProviderStatus::Failed),
                unchanged(),
                READ_ONLY,
            ),
            V::AGENT_FAILED,
            Some("codex reported that the task failed"),
        ),
        (
            "2: the agent answered blocked",
            evidence(
                answered(Some(0), ProviderStatus::Blocked),
                unchanged(),
                READ_ONLY,
            ),
            V::AGENT_BLOCKED,
            Some("codex reported that it is blocked"),
        ),
        (
            "3: the CLI is missing",
            evidence(
                Ended::NotRun("codex was not found on PATH".into()),
                unchanged(),
                BUILD,
            ),
            V::NOT_RUN,
            Some("codex was not found on PATH"),
        ),
        (
            "5: the request was refused before the worktree was read",
            evidence(
                Ended::Rejected("--mode is required".into()),
                None,
                READ_ONLY,
            ),
            V::REJECTED,
            Some("--mode is required"),
        ),
        (
            "7: the answer breaks the contract",
            evidence(
                Ended::InvalidOutput("not JSON".into()),
                unchanged(),
                READ_ONLY,
            ),
            V::INVALID_OUTPUT,
            Some("not JSON"),
        ),
        (
            "7: too much output",
            evidence(
                Ended::OutputLimit { stream: "stdout" },
                unchanged(),
                READ_ONLY,
            ),
            V::INVALID_OUTPUT,
            Some("the agent wrote more than 1 MiB to stdout and was stopped"),
        ),
        (
            "7: the result file can't be written",
            unwritable(evidence(completed(), changed(&["a"]), BUILD)),
            V::INVALID_OUTPUT,
            Some("cannot write /r.json: disk full"),
        ),
        (
            "7: a success whose worktree can't be read afterwards",
            evidence(completed(), unreadable(), BUILD),
            V::INVALID_OUTPUT,
            Some("cannot fingerprint the worktree after the run: git exploded"),
        ),
        (
            "10: a review changed the worktree, the changed paths unknown",
            evidence(completed(), unnamed(), READ_ONLY),
            V::POLICY_BLOCKED,
            Some(
                "the worktree changed during the read-only review (which paths cannot be told: the \
                 states file was altered)",
            ),
        ),
        (
            "7: a build changed the worktree, the changed paths unknown",
            evidence(completed(), unnamed(), BUILD),
            V::INVALID_OUTPUT,
            Some(
                "the worktree changed, but which paths did cannot be told: the states file \
                 was altered",
            ),
        ),
        (
            "8: the time budget expired",
            evidence(timed_out(), unchanged(), READ_ONLY),
            V::TIMED_OUT,
            Some("the agent exceeded its time budget of 1500 ms and was killed"),
        ),
        (
            "9: a signal before the agent started",
            evidence(Ended::Cancelled(Signal::BeforeStart), None, BUILD),
            V::CANCELLED,
            Some("cancelled by a signal before the agent started"),
        ),
        (
            "9: a signal while waiting for the worktree",
            evidence(
                Ended::Cancelled(Signal::WaitingForWorktree),
                unchanged(),
                BUILD,
            ),
            V::CANCELLED,
            Some("cancelled by a signal while waiting for the worktree"),
        ),
        (
            "9: a signal while the agent ran",
            evidence(Ended::Cancelled(Signal::DuringRun), unchanged(), BUILD),
            V::CANCELLED,
            Some("cancelled by a signal; the agent was stopped"),
        ),
        (
            "10: isolation was not enforced",
            evidence(
                Ended::NotIsolated("the sandbox did not start".into()),
                unchanged(),
                READ_ONLY,
            ),
            V::POLICY_BLOCKED,
            Some("the sandbox did not start"),
        ),
        (
            "10: a build without a git-visible change",
            evidence(completed(), unchanged(), BUILD),
            V::POLICY_BLOCKED,
            Some("build completed without a git-visible change"),
        ),
        (
            "10: a review that changed the worktree",
            evidence(completed(), changed(&["a", "b"]), READ_ONLY),
            V::POLICY_BLOCKED,
            Some("the worktree changed during the read-only review (a, b)"),
        ),
        (
            "10: the live worktree of an adviser changed",
            live(evidence(completed(), changed(&["a"]), READ_ONLY)),
            V::POLICY_BLOCKED,
            Some(
                "the worktree changed while read-only advice worked on it live (a): the \
                 adviser or another process, such as one the asking worker left running, \
                 changed it",
            ),
        ),
        // Precedence: a non-zero exit over the answer.
        (
            "a non-zero exit wins over an answer of completed",
            evidence(
                answered(Some(1), ProviderStatus::Completed),
                changed(&["a"]),
                BUILD,
            ),
            V::AGENT_FAILED,
            Some("codex exited with code 1"),
        ),
        (
            "a non-zero exit wins over an answer of blocked",
            evidence(
                answered(Some(3), ProviderStatus::Blocked),
                unchanged(),
                READ_ONLY,
            ),
            V::AGENT_FAILED,
            Some("codex exited with code 3"),
        ),
        // Precedence: a build without a change only turns a success into 10.
        (
            "an agent failure stays 2 when a build changed nothing",
            evidence(failure(), unchanged(), BUILD),
            V::AGENT_FAILED,
            Some("codex reported a failure: rate limited"),
        ),
        (
            "an answer of blocked stays 2 when a build changed nothing",
            evidence(
                answered(Some(0), ProviderStatus::Blocked),
                unchanged(),
                BUILD,
            ),
            V::AGENT_BLOCKED,
            Some("codex reported that it is blocked"),
        ),
        (
            "a timeout stays 8 when a build changed nothing",
            evidence(timed_out(), unchanged(), BUILD),
            V::TIMED_OUT,
            Some("the agent exceeded its time budget of 1500 ms and was killed"),
        ),
        (
            "a cancellation stays 9 when a build changed nothing",
            evidence(Ended::Cancelled(Signal::DuringRun), unchanged(), BUILD),
            V::CANCELLED,
            Some("cancelled by a signal; the agent was stopped"),
        ),
        (
            "a build that changed the worktree is not policy-blocked",
            evidence(
                answered(Some(0), ProviderStatus::Failed),
                changed(&["a"]),
                BUILD,
            ),
            V::AGENT_FAILED,
            Some("codex reported that the task failed"),
        ),
        (
            "no git check without a fingerprint before",
            evidence(completed(), None, BUILD),
            V::SUCCEEDED,
            None,
        ),
        // Precedence: a read-only run that changed the worktree overrides everything.
        (
            "a mutation overrides a timeout",
            evidence(timed_out(), changed(&["x"]), READ_ONLY),
            V::POLICY_BLOCKED,
            Some(
                "the worktree changed during the read-only review (x); before that: the agent \
                 exceeded its time budget of 1500 ms and was killed",
            ),
        ),
        (
            "a mutation overrides a cancellation",
            evidence(
                Ended::Cancelled(Signal::DuringRun),
                changed(&["x"]),
                READ_ONLY,
            ),
            V::POLICY_BLOCKED,
            Some(
                "the worktree changed during the read-only review (x); before that: cancelled by a \
                 signal; the agent was stopped",
            ),
        ),
        (
            "a mutation overrides an agent failure",
            evidence(failure(), changed(&["x"]), READ_ONLY),
            V::POLICY_BLOCKED,
            Some(
                "the worktree changed during the read-only review (x); before that: codex reported a \
                 failure: rate limited",
            ),
        ),
        (
            "a mutation overrides invalid output",
            evidence(
                Ended::InvalidOutput("prose".into()),
                changed(&["x"]),
                READ_ONLY,
            ),
            V::POLICY_BLOCKED,
            Some("the worktree changed during the read-only review (x); before that: prose"),
        ),
        (
            "a mutation overrides not_run",
            evidence(
                Ended::NotRun("spawn failed".into()),
                changed(&["x"]),
                READ_ONLY,
            ),
            V::POLICY_BLOCKED,
            Some("the worktree changed during the read-only review (x); before that: spawn failed"),
        ),
        (
            "a mutation overrides a rejection after the worktree was read",
            evidence(
                Ended::Rejected("worktree busy".into()),
                changed(&["x"]),
                READ_ONLY,
            ),
            V::POLICY_BLOCKED,
            Some(
                "the worktree changed during the read-only review (x); before that: worktree busy",
            ),
        ),
        (
            "a mutation overrides isolation not enforced, with both messages",
            evidence(
                Ended::NotIsolated("no sandbox".into()),
                changed(&["x"]),
                READ_ONLY,
            ),
            V::POLICY_BLOCKED,
            Some("the worktree changed during the read-only review (x); before that: no sandbox"),
        ),
        (
            "a mutation lists five paths and counts the rest",
            evidence(
                completed(),
                changed(&["a", "b", "c", "d", "e", "f", "g"]),
                READ_ONLY,
            ),
            V::POLICY_BLOCKED,
            Some("the worktree changed during the read-only review (a, b, c, d, e and 2 more)"),
        ),
        (
            "a mutation git sees without a path",
            evidence(completed(), changed(&[]), READ_ONLY),
            V::POLICY_BLOCKED,
            Some("the worktree changed during the read-only review (git state changed)"),
        ),
        // Precedence: an unreadable worktree only turns a success into 7.
        (
            "an unreadable worktree keeps an agent failure",
            evidence(failure(), unreadable(), BUILD),
            V::AGENT_FAILED,
            Some(
                "codex reported a failure: rate limited; cannot fingerprint the worktree \
                 after the run: git exploded",
            ),
        ),
        (
            "an unreadable worktree keeps a timeout",
            evidence(timed_out(), unreadable(), READ_ONLY),
            V::TIMED_OUT,
            Some(
                "the agent exceeded its time budget of 1500 ms and was killed; cannot \
                 fingerprint the worktree after the run: git exploded",
            ),
        ),
        (
            "an unreadable worktree keeps a cancellation",
            evidence(Ended::Cancelled(Signal::DuringRun), unreadable(), READ_ONLY),
            V::CANCELLED,
            Some(
                "cancelled by a signal; the agent was stopped; cannot fingerprint the \
                 worktree after the run: git exploded",
            ),
        ),
        // Precedence: an unwritable result file makes everything 7 but a policy block.
        (
            "an unwritable result file overrides a cancellation",
            unwritable(evidence(
                Ended::Cancelled(Signal::DuringRun),
                unchanged(),
                READ_ONLY,
            )),
            V::INVALID_OUTPUT,
            Some("cancelled by a signal; the agent was stopped; cannot write /r.json: disk full"),
        ),
        (
            "an unwritable result file overrides a timeout",
            unwritable(evidence(timed_out(), unchanged(), READ_ONLY)),
            V::INVALID_OUTPUT,
            Some(
                "the agent exceeded its time budget of 1500 ms and was killed; cannot \
                 write /r.json: disk full",
            ),
        ),
        (
            "an unwritable result file overrides a rejection",
            unwritable(evidence(
                Ended::Rejected("bad --mode".into()),
                None,
                READ_ONLY,
            )),
            V::INVALID_OUTPUT,
            Some("bad --mode; cannot write /r.json: disk full"),
        ),
        (
            "an unwritable result file overrides an agent failure",
            unwritable(evidence(failure(), unchanged(), BUILD)),
            V::INVALID_OUTPUT,
            Some("codex reported a failure: rate limited; cannot write /r.json: disk full"),
        ),
        (
            "an unwritable result file keeps a mutation's block",
            unwritable(evidence(completed(), changed(&["x"]), READ_ONLY)),
            V::POLICY_BLOCKED,
            Some(
                "the worktree changed during the read-only review (x); cannot write /r.json: disk full",
            ),
        ),
        (
            "an unwritable result file keeps a build's block",
            unwritable(evidence(completed(), unchanged(), BUILD)),
            V::POLICY_BLOCKED,
            Some(
                "build completed without a git-visible change; cannot write /r.json: disk \
                 full",
            ),
        ),
        (
            "an unwritable result file keeps isolation's block",
            unwritable(evidence(
                Ended::NotIsolated("no sandbox".into()),
                unchanged(),
                READ_ONLY,
            )),
            V::POLICY_BLOCKED,
            Some("no sandbox; cannot write /r.json: disk full"),
        ),
        (
            "an unreadable worktree and an unwritable result file",
            unwritable(evidence(completed(), unreadable(), BUILD)),
            V::INVALID_OUTPUT,
            Some(
                "cannot fingerprint the worktree after the run: git exploded; cannot \
                 write /r.json: disk full",
            ),
        ),
        // Messages.
        (
            "an empty message is no message",
            evidence(Ended::NotRun(String::new()), None, READ_ONLY),
            V::NOT_RUN,
            None,
        ),
    ]
}

#[test]
fn decides_every_row_of_the_table() {
    for (row, evidence, verdict, message) in table() {
        let d = decide(&evidence);
        assert_eq!(d.verdict, verdict, "{row}");
        assert_eq!(d.message.as_deref(), message, "{row}");
    }
}

#[test]
fn a_rejected_input_names_its_field_while_the_run_stays_rejected() {
    let rejected = Ended::InputRejected(InputRejection::new(
        "--mode",
        "--mode must be one of build, phase, review, verify; got \"x\"",
    ));
    let d = decide(&evidence(rejected.clone(), None, READ_ONLY));
    assert_eq!(d.verdict, Verdict::REJECTED);
    assert_eq!(d.rejected_field, Some("--mode"));
    assert_eq!(
        d.message.as_deref(),
        Some("--mode must be one of build, phase, review, verify; got \"x\"")
    );
    let mut unwritten = evidence(rejected, None, READ_ONLY);
    unwritten.result_file = Some("cannot write the result file".into());
    let d = decide(&unwritten);
    assert_eq!(d.verdict, Verdict::INVALID_OUTPUT);
    assert_eq!(d.rejected_field, None);
    let d = decide(&evidence(
        Ended::Rejected("worktree busy".into()),
        None,
        READ_ONLY,
    ));
    assert_eq!(d.rejected_field, None);
}

#[test]
fn every_documented_exit_code_is_reached() {
    let codes: std::collections::BTreeSet<u8> = table()
        .into_iter()
        .map(|(_, e, _, _)| decide(&e).verdict.code())
        .collect();
    assert_eq!(
        codes.into_iter().collect::<Vec<_>>(),
        [0, 2, 3, 5, 7, 8, 9, 10]
    );
}

#[test]
fn verdicts_pair_status_and_code_as_documented() {
    for (verdict, status, code) in [
        (Verdict::SUCCEEDED, Status::Succeeded, 0),
        (Verdict::AGENT_FAILED, Status::Failed, 2),
        (Verdict::AGENT_BLOCKED, Status::Blocked, 2),
        (Verdict::NOT_RUN, Status::NotRun, 3),
        (Verdict::REJECTED, Status::Rejected, 5),
        (Verdict::INVALID_OUTPUT, Status::Failed, 7),
        (Verdict::TIMED_OUT, Status::TimedOut, 8),
        (Verdict::CANCELLED, Status::Cancelled, 9),
        (Verdict::POLICY_BLOCKED, Status::Blocked, 10),
    ] {
        assert_eq!((verdict.status(), verdict.code()), (status, code));
    }
}
