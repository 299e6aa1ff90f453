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
use crate::{FailureCause, FailureReason};

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
    /// The agent's CLI is not on `PATH` (not run).
    NotInstalled(String),
    /// The machine the run went to (`--on`) stopped answering.
    HostLost(String),
    /// The agent's CLI failed its preflight, or refused to start for an environmental reason
    /// (not run).
    PreflightFailed(String),
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
        /// Why, as its adapter read it.
        reason: FailureReason,
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
    /// Why the run did not succeed (`None` when it did), and the wait the provider asked for.
    pub reason: Option<FailureReason>,
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
                        "the worktree changed during the read-only {} ({}){prior}",
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
                // The worktree changed during a read-only run, as with named paths.
                let prior = before_that(&mut message);
                verdict = Verdict::POLICY_BLOCKED;
                message = Some(format!(
                    "the worktree changed during the read-only {} (which paths cannot be told: {why}){prior}",
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
    let reason = (verdict != Verdict::SUCCEEDED).then(|| reason(&e.ended, verdict));
    Decision {
        verdict,
        message,
        rejected_field,
        reason,
    }
}

/// Why a run that did not succeed failed: what its end says when the verdict is that end's
/// own (a policy block or a contract failure found afterwards is `other`).
fn reason(ended: &Ended, verdict: Verdict) -> FailureReason {
    if ended_verdict(ended) == verdict {
        own_reason(ended)
    } else {
        FailureReason::new(FailureCause::Other)
    }
}

/// Why the step a run (or a failover attempt) ended at failed, on its own.
pub(super) fn own_reason(ended: &Ended) -> FailureReason {
    let cause = match ended {
        Ended::AgentFailure { reason, .. } => return *reason,
        Ended::NotInstalled(_) => FailureCause::NotInstalled,
        Ended::PreflightFailed(_) => FailureCause::Preflight,
        Ended::HostLost(_) => FailureCause::HostLost,
        Ended::TimedOut { .. } => FailureCause::Timeout,
        _ => FailureCause::Other,
    };
    FailureReason::new(cause)
}

fn ended_verdict(e: &Ended) -> Verdict {
    ended(e).0
}

/// The verdict and message of the step the run ended at (an attempt's own, before anything
/// after it is judged).
pub(super) fn summary(ended: &Ended) -> (Verdict, Option<String>) {
    self::ended(ended)
}

/// The verdict and message of the step the run ended at.
fn ended(ended: &Ended) -> (Verdict, Option<String>) {
    match ended {
        Ended::InputRejected(r) => (Verdict::REJECTED, Some(r.reason.clone())),
        Ended::Rejected(m) => (Verdict::REJECTED, Some(m.clone())),
        Ended::NotRun(m) | Ended::NotInstalled(m) | Ended::PreflightFailed(m) => {
            (Verdict::NOT_RUN, Some(m.clone()))
        }
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
        Ended::HostLost(m) => (Verdict::AGENT_FAILED, Some(m.clone())),
        Ended::InvalidOutput(m) => (Verdict::INVALID_OUTPUT, Some(m.clone())),
        Ended::AgentFailure { agent, message, .. } => (
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
mod tests;
