//! handoff-continue: handing a task itself to another agent, as a library.
//!
//! * [`continue_task`] — checkpoint the work, write a verified handoff note, carry the
//!   conversation into the receiver's own session store, start the receiver, check that it
//!   really continued, and record it all in the task's timeline (what `handoff continue` does);
//! * [`destination`] — the receiver named in one phrase, `"codex gpt-5 high on devbox"`;
//! * [`checkpoint()`] — commit exactly the reviewed files and record the checkpoint;
//! * [`attribute()`] — which provider changed what while it held the task, and the note's
//!   verification commands run as checks.
//!
//! Everything runs against a [`handoff_core::Engine`] (agents, configuration) and a
//! [`handoff_core::TaskStore`] the caller chooses; git runs through [`handoff_git::Git`].
//! Errors are typed by when they happen ([`error`]): a failure after the checkpoint can never
//! be reported as "rejected, nothing changed".
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod attribute;
pub mod carry;
pub mod checkpoint;
mod continuation;
pub mod destination;
pub mod error;
pub mod limit;
mod private;
pub mod ssh;
pub mod timeline;
mod trust;

pub use attribute::{AttributeRequest, Attribution, attribute};
pub use checkpoint::{
    CHECKPOINT_SCHEMA, CheckpointReport, CheckpointRequest, DEFAULT_MESSAGE, WorkCommit,
    checkpoint, work_commit,
};
pub use continuation::{
    ContinueContext, ContinueRequest, DEFAULT_READY_TIMEOUT, DEFAULT_TIMEOUT, Fallback,
    NOT_STARTED, NoteInput, REVIEW_CHANGED, Stopped, continue_task, rejected_result,
    try_continue_task,
};
pub use error::{CheckpointError, ContinueError, Failed, OrFail, OrReject, Phase, Rejection};
pub use private::write_private_file;
