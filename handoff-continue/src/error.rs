//! Errors typed by when they happen.
//!
//! Whether anything changed decides the exit code, so the type says it: a [`Rejection`] can
//! only be made before the first change (exit 5, "nothing changed"), a [`Failed`] names the
//! phase after it that failed (exit 1, "the receiver did not start"). Neither converts from a
//! bare `String`, so `?` cannot turn a failure after the checkpoint into a rejection:
//!
//! ```compile_fail,E0277
//! use handoff_continue::Failed;
//!
//! fn push_after_the_checkpoint() -> Result<(), Failed> {
//!     let pushed: Result<(), String> = Err("git push failed".into());
//!     pushed?; // no `From<String> for Failed`: name the phase with `.failed(Phase::Push)`
//!     Ok(())
//! }
//! ```
//!
//! ```compile_fail,E0277
//! use handoff_continue::{Failed, Rejection};
//!
//! fn after_the_checkpoint() -> Result<(), Failed> {
//!     let refused: Result<(), Rejection> = Err(Rejection::new("--to", "unknown provider"));
//!     refused?; // a rejection cannot be reported once something changed
//!     Ok(())
//! }
//! ```
//!
//! The same code with the phase named compiles:
//!
//! ```
//! use handoff_continue::{Failed, OrFail, Phase};
//!
//! fn push_after_the_checkpoint() -> Result<(), Failed> {
//!     let pushed: Result<(), String> = Err("git push failed".into());
//!     pushed.failed(Phase::Push)?;
//!     Ok(())
//! }
//! assert_eq!(push_after_the_checkpoint().unwrap_err().phase, Phase::Push);
//! ```

use std::fmt;

/// A request refused before anything changed: which input, and why (one line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Rejection {
    /// The flag or input that was refused (`--to`, `note`, `repository`, `--on`…).
    pub field: &'static str,
    /// Why, as one line for a person.
    pub reason: String,
}

impl Rejection {
    /// A rejection of `field`.
    pub fn new(field: &'static str, reason: impl Into<String>) -> Rejection {
        Rejection {
            field,
            reason: reason.into(),
        }
    }
}

/// The phase of a continuation or checkpoint that failed after something changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Making the checkpoint commit.
    Checkpoint,
    /// Creating or updating the task in the task store.
    Record,
    /// Adding the new thread's worktree and branch.
    Worktree,
    /// Pushing the checkpoint.
    Push,
    /// Rendering or writing the note and the recap.
    Note,
    /// Writing the conversation into the receiver's store.
    Carry,
    /// Starting the receiver or its first turn.
    Receive,
    /// The other machine (`--on`).
    Remote,
}

impl Phase {
    /// The phase's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Checkpoint => "checkpoint",
            Phase::Record => "record",
            Phase::Worktree => "worktree",
            Phase::Push => "push",
            Phase::Note => "note",
            Phase::Carry => "carry",
            Phase::Receive => "receive",
            Phase::Remote => "remote",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure after something changed (a commit, a task, a note, a carried session).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failed {
    /// Where it failed.
    pub phase: Phase,
    /// What happened, as one line for a person.
    pub message: String,
}

impl Failed {
    /// A failure in `phase`.
    pub fn new(phase: Phase, message: impl Into<String>) -> Failed {
        Failed {
            phase,
            message: message.into(),
        }
    }
}

/// How a continuation stopped before it finished.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContinueError {
    /// Refused before anything changed (exit 5).
    #[error("{0}")]
    Rejected(Rejection),
    /// Failed after a change; the task stays where it was (exit 1).
    #[error("{0}")]
    Failed(Failed),
    /// Stopped by a signal (exit 9).
    #[error("{0}")]
    Cancelled(String),
}

impl From<Rejection> for ContinueError {
    fn from(r: Rejection) -> Self {
        ContinueError::Rejected(r)
    }
}

impl From<Failed> for ContinueError {
    fn from(f: Failed) -> Self {
        ContinueError::Failed(f)
    }
}

/// Names the input a failed check refuses: `check(x).rejected("--to")?`.
pub trait OrReject<T> {
    /// The error as a [`Rejection`] of `field`.
    fn rejected(self, field: &'static str) -> Result<T, Rejection>;
}

impl<T, E: fmt::Display> OrReject<T> for Result<T, E> {
    fn rejected(self, field: &'static str) -> Result<T, Rejection> {
        self.map_err(|e| Rejection::new(field, e.to_string()))
    }
}

/// Names the phase a failed step belongs to: `git.run(…).failed(Phase::Push)?`.
pub trait OrFail<T> {
    /// The error as a [`Failed`] in `phase`.
    fn failed(self, phase: Phase) -> Result<T, Failed>;
}

impl<T, E: fmt::Display> OrFail<T> for Result<T, E> {
    fn failed(self, phase: Phase) -> Result<T, Failed> {
        self.map_err(|e| Failed::new(phase, e.to_string()))
    }
}

/// Why a checkpoint was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// Refused, nothing changed (exit 5).
    #[error("{0}")]
    Rejected(Rejection),
    /// Git or the store failed while committing or recording (exit 1).
    #[error("{0}")]
    Failed(Failed),
}

impl From<Rejection> for CheckpointError {
    fn from(r: Rejection) -> Self {
        CheckpointError::Rejected(r)
    }
}

impl From<Failed> for CheckpointError {
    fn from(f: Failed) -> Self {
        CheckpointError::Failed(f)
    }
}
