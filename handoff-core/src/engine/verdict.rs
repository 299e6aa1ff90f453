//! Verdict: one pure function, [`decide`], maps what a run established to its status, exit code
//! and message. Every outcome of every run goes through it.
//!
//! The pipeline stops at the first step that fails, so it establishes one [`Ended`]: in
//! pipeline order,
//! 1. the result location is invalid → `rejected` 5 (stdout only);
//! 2. any input or capability problem → `rejected` 5, no process started;
//! 3. `--cwd` is not in a git worktree → `rejected` 5; another root run holds that worktree, or
//!    this process descends from a live root run → `rejected` 5 (with `--wait`: wait; a signal
//!    while waiting → `cancelled` 9); a run with advice whose supervisor can't start →
//!    `not_run` 3;
//! 4. the invocation can't be planned (e.g. an MCP secret variable is unset) → `rejected` 5;
//! 5. the executable is missing or fails preflight → `not_run` 3;
//! 6. a signal arrived before launch → `cancelled` 9;
//! 7. after launch: timeout → `timed_out` 8; signal → `cancelled` 9; more than 1 MiB of output →
//!    `failed` 7; could not start → `not_run` 3;
//! 8. the agent killed its reaper, or the adapter's runtime check finds isolation was not
//!    enforced → `blocked` 10;
//! 9. the CLI refused to start for an environmental reason → `not_run` 3; the agent reported its
//!    own failure → `failed` 2; its answer breaks the contract → `failed` 7; non-zero exit (even
//!    with an answer) or answer status `failed` → `failed` 2; answer status `blocked` →
//!    `blocked` 2; else `succeeded` 0.
//!
//! Then, on top of whichever of those it was, in this order:
//! 10. git after the run, when there was a "before": a writing run that would succeed but left
//!     no git-visible change → `blocked` 10; a read-only run that changed the worktree →
//!     `blocked` 10, whatever happened before (timeout and cancellation included; the earlier
//!     message is kept after it); the worktree can't be fingerprinted → a success becomes
//!     `failed` 7, anything else stays, and the message says so;
//! 11. the result file can't be written → `failed` 7, whatever happened before, except that a
//!     policy `blocked` 10 stays; the message says so.

use crate::input::InputRejection;
use crate::names::{AgentId, Verdict};
use crate::output::ProviderStatus;

/// How far a run got: the first step that stopped it, or the agent's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// An input refused by validation (step 2): the input at fault and the message.
    InputRejected(InputRejection),
    /// Refused before any agent process started, for another reason (steps 1–4).
    Rejected(String),
    /// The agent could not be run: its CLI is missing or fails preflight, its private files or
    /// the supervisor could not be set up, it could not be spawned, or it refused to start for
    /// an environmental reason.
    NotRun(String),
    /// A signal stopped the run.
    Cancelled(Signal),
    /// The agent's process outlived its time budget and was killed.
    TimedOut {
        /// The budget, in milliseconds.
        budget_ms: u128,
    },
    /// The agent wrote too much to one stream and was stopped.
    OutputLimit {
        /// `stdout` or `stderr`.
        stream: &'static str,
    },
    /// The adapter's runtime check found that the agent's isolation was not enforced.
    NotIsolated(String),
    /// The output, or the answer in it, is not what the contract says.
    InvalidOutput(String),
    /// The agent reported its own failure (an API error, a turn limit, …).
    AgentFailure {
        /// The agent.
        agent: AgentId,
        /// What it reported.
        message: String,
    },
    /// The agent answered.
    Answered {
        /// The agent.
        agent: AgentId,
        /// Its exit code, when it exited normally.
        exit_code: Option<i32>,
        /// The status it answered with.
        status: ProviderStatus,
    },
}

/// When a signal stopped the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Before the agent started.
    BeforeStart,
    /// While waiting for another root run to release the worktree.
    WaitingForWorktree,
    /// While the agent ran (it was stopped).
    DuringRun,
}

/// The worktree after the run, compared with the fingerprint taken before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum After {
    /// Compared.
    Compared {
        /// Whether anything git sees changed.
        changed: bool,
        /// The changed paths, sorted.
        files: Vec<String>,
        /// The changed paths that add or change what git runs (hooks, settings that run a
        /// program): a writing run that makes them is blocked unless allowed.
        git_programs: Vec<String>,
    },
    /// The worktree could not be fingerprinted.
    Unreadable(String),
    /// The worktree changed (the digests differ), but which paths did cannot be told: why.
    Unnamed(String),
}

/// Everything the verdict is decided from (not the agent's evidence items: those are
/// [`crate::Evidence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Evidence {
    /// How far the run got.
    pub ended: Ended,
    /// Git after the run; `None` when there was no fingerprint before it to compare with.
    pub after: Option<After>,
    /// Whether the run was to change the worktree (`build`, `phase`).
    pub writes: bool,
    /// Whether the request allows a writing run to add or change what git runs
    /// (`--allow-git-config`).
    pub allow_git_config: bool,
    /// Whether the run worked on a worktree another run works in too (a nested adviser's live
    /// view of the asking worker's worktree): a change there may not be the run's own.
    pub shared: bool,
    /// The run's name in messages: its mode, `advice`, or `run` before the request was known.
    pub task: &'static str,
    /// Why the result file could not be written; `None` when it was, or there is none.
    pub result_file: Option<String>,
}

/// A run's outcome: the status and exit code (a [`Verdict`]) and the one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// The status with its exit code.
    pub verdict: Verdict,
    /// Why, when it is not a plain success.
    pub message: Option<String>,
    /// The input at fault, when the run is rejected because validation refused one.
    pub rejected_field: Option<&'static str>,
}

/// The message so far, taken to follow a block's own as `; before that: …` (empty without one).
fn before_that(message: &mut Option<String>) -> String {
    message
        .take()
        .map(|m| format!("; before that: {m}"))
        .unwrap_or_default()
}

/// The verdict of a run, in the order the module documentation gives.
pub(crate) fn decide(e: &Evidence) -> Decision {
    let (mut verdict, message) = ended(&e.ended);
    let mut message = message.filter(|m| !m.is_empty());

    match &e.after {
        Some(After::Compared {
            changed,
            files,
            git_programs,
        }) => {
            if e.writes && verdict == Verdict::SUCCEEDED && !changed {
                verdict = Verdict::POLICY_BLOCKED;
                message = Some(format!("{} completed without a git-visible change", e.task));
            }
            if e.writes && !e.allow_git_config && !git_programs.is_empty() {
                let prior = before_that(&mut message);
                verdict = Verdict::POLICY_BLOCKED;
                message = Some(format!(
                    "{} added or changed what git runs ({}): a hook or a setting that runs a \
                     program outlives the run; pass --allow-git-config if that is the task{prior}",
                    e.task,
                    summarize(git_programs),
                ));
            }
            if !e.writes && *changed {
                let prior = before_that(&mut message);
                verdict = Verdict::POLICY_BLOCKED;
                message = Some(if e.shared {
                    format!(
                        "the worktree changed while read-only {} worked on it live ({}): the \
                         adviser or another process, such as one the asking worker left \
                         running, changed it{prior}",
                        e.task,
                        summarize(files),
                    )
                } else {
                    format!(
                        "read-only {} changed the worktree ({}){prior}",
                        e.task,
                        summarize(files)
                    )
                });
            }
        }
        Some(After::Unnamed(why)) => {
            if e.writes {
                // A writing run's change that cannot be checked.
                let note =
                    format!("the worktree changed, but which paths did cannot be told: {why}");
                message = Some(join(message, note));
                if verdict == Verdict::SUCCEEDED {
                    verdict = Verdict::INVALID_OUTPUT;
                }
            } else {
                // A read-only run changed the worktree, as with named paths.
                let prior = before_that(&mut message);
                verdict = Verdict::POLICY_BLOCKED;
                message = Some(format!(
                    "read-only {} changed the worktree (which paths cannot be told: {why}){prior}",
                    e.task
                ));
            }
        }
        Some(After::Unreadable(error)) => {
            let note = format!("cannot fingerprint the worktree after the run: {error}");
            message = Some(join(message, note));
            if verdict == Verdict::SUCCEEDED {
                verdict = Verdict::INVALID_OUTPUT;
            }
        }
        None => {}
    }

    if let Some(error) = &e.result_file {
        // stdout still holds the result, with a consistent pair.
        if verdict != Verdict::POLICY_BLOCKED {
            verdict = Verdict::INVALID_OUTPUT;
        }
        message = Some(join(message, error.clone()));
    }
    let rejected_field = match &e.ended {
        Ended::InputRejected(r) if verdict == Verdict::REJECTED => Some(r.field),
        _ => None,
    };
    Decision {
        verdict,
        message,
        rejected_field,
    }
}

/// The verdict and message of the step the run ended at.
fn ended(ended: &Ended) -> (Verdict, Option<String>) {
    match ended {
        Ended::InputRejected(r) => (Verdict::REJECTED, Some(r.reason.clone())),
        Ended::Rejected(m) => (Verdict::REJECTED, Some(m.clone())),
        Ended::NotRun(m) => (Verdict::NOT_RUN, Some(m.clone())),
        Ended::Cancelled(when) => (
            Verdict::CANCELLED,
            Some(
                match when {
                    Signal::BeforeStart => "cancelled by a signal before the agent started",
                    Signal::WaitingForWorktree => {
                        "cancelled by a signal while waiting for the worktree"
                    }
                    Signal::DuringRun => "cancelled by a signal; the agent was stopped",
                }
                .to_owned(),
            ),
        ),
        Ended::TimedOut { budget_ms } => (
            Verdict::TIMED_OUT,
            Some(format!(
                "the agent exceeded its time budget of {budget_ms} ms and was killed"
            )),
        ),
        Ended::OutputLimit { stream } => (
            Verdict::INVALID_OUTPUT,
            Some(format!(
                "the agent wrote more than 1 MiB to {stream} and was stopped"
            )),
        ),
        Ended::NotIsolated(reason) => (Verdict::POLICY_BLOCKED, Some(reason.clone())),
        Ended::InvalidOutput(m) => (Verdict::INVALID_OUTPUT, Some(m.clone())),
        Ended::AgentFailure { agent, message } => (
            Verdict::AGENT_FAILED,
            Some(format!("{agent} reported a failure: {message}")),
        ),
        Ended::Answered {
            agent,
            exit_code,
            status,
        } => match (exit_code.filter(|c| *c != 0), status) {
            (Some(code), _) => (
                Verdict::AGENT_FAILED,
                Some(format!("{agent} exited with code {code}")),
            ),
            (None, ProviderStatus::Completed) => (Verdict::SUCCEEDED, None),
            (None, ProviderStatus::Blocked) => (
                Verdict::AGENT_BLOCKED,
                Some(format!("{agent} reported that it is blocked")),
            ),
            (None, ProviderStatus::Failed) => (
                Verdict::AGENT_FAILED,
                Some(format!("{agent} reported that the task failed")),
            ),
        },
    }
}

fn join(message: Option<String>, more: String) -> String {
    match message {
        Some(m) => format!("{m}; {more}"),
        None => more,
    }
}

fn summarize(files: &[String]) -> String {
    const SHOWN: usize = 5;
    if files.is_empty() {
        return "git state changed".into();
    }
    let mut s = files
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        s.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
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
                    "read-only review changed the worktree (which paths cannot be told: the \
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
                Some("read-only review changed the worktree (a, b)"),
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
                    "read-only review changed the worktree (x); before that: the agent \
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
                    "read-only review changed the worktree (x); before that: cancelled by a \
                     signal; the agent was stopped",
                ),
            ),
            (
                "a mutation overrides an agent failure",
                evidence(failure(), changed(&["x"]), READ_ONLY),
                V::POLICY_BLOCKED,
                Some(
                    "read-only review changed the worktree (x); before that: codex reported a \
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
                Some("read-only review changed the worktree (x); before that: prose"),
            ),
            (
                "a mutation overrides not_run",
                evidence(
                    Ended::NotRun("spawn failed".into()),
                    changed(&["x"]),
                    READ_ONLY,
                ),
                V::POLICY_BLOCKED,
                Some("read-only review changed the worktree (x); before that: spawn failed"),
            ),
            (
                "a mutation overrides a rejection after the worktree was read",
                evidence(
                    Ended::Rejected("worktree busy".into()),
                    changed(&["x"]),
                    READ_ONLY,
                ),
                V::POLICY_BLOCKED,
                Some("read-only review changed the worktree (x); before that: worktree busy"),
            ),
            (
                "a mutation overrides isolation not enforced, with both messages",
                evidence(
                    Ended::NotIsolated("no sandbox".into()),
                    changed(&["x"]),
                    READ_ONLY,
                ),
                V::POLICY_BLOCKED,
                Some("read-only review changed the worktree (x); before that: no sandbox"),
            ),
            (
                "a mutation lists five paths and counts the rest",
                evidence(
                    completed(),
                    changed(&["a", "b", "c", "d", "e", "f", "g"]),
                    READ_ONLY,
                ),
                V::POLICY_BLOCKED,
                Some("read-only review changed the worktree (a, b, c, d, e and 2 more)"),
            ),
            (
                "a mutation git sees without a path",
                evidence(completed(), changed(&[]), READ_ONLY),
                V::POLICY_BLOCKED,
                Some("read-only review changed the worktree (git state changed)"),
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
                Some(
                    "cancelled by a signal; the agent was stopped; cannot write /r.json: disk full",
                ),
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
                Some("read-only review changed the worktree (x); cannot write /r.json: disk full"),
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
}
