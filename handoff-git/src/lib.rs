//! handoff-git: git evidence for handoff, read with [gix](https://docs.rs/gix).
//!
//! [`GitWorkspace`] implements [`handoff_core::Workspace`]: it discovers the repository that
//! contains a directory and takes a content-addressed [`Fingerprint`](handoff_core::Fingerprint)
//! of the whole worktree, so that a fingerprint taken before an agent ran and one taken after it
//! can be compared with [`Fingerprint::compare`](handoff_core::Fingerprint::compare).
//!
//! # What a fingerprint covers
//!
//! One entry per path, keyed by its repository-relative path with `/` separators:
//!
//! * every **index entry** — its stage(s), mode, object id and user-visible flags, together with
//!   the state of the same path in the worktree;
//! * every **untracked, not ignored file** (each file of an untracked directory individually, like
//!   `git status -uall`), with its worktree state;
//! * the pseudo-entry [`HEAD_ENTRY`] (`.git/HEAD`): the commit HEAD resolves to and the branch it
//!   names, so committing or switching branches is a change even when no file differs.
//!
//! The worktree state of a path is its kind (file, symlink, directory, nested repository, missing),
//! for files the executable bit, and the SHA-256 of the content (of the target text for symlinks).
//! It never depends on timestamps or on the index's stat cache, so `git status` refreshing the
//! index is not a change. Ignored files are left out entirely. A nested repository (a checked-out
//! submodule or an untracked repository inside the worktree) is represented by its own digest.
//!
//! Taking a fingerprint only reads: nothing is written to the index or anywhere under `.git`.
#![deny(missing_docs)]

mod paths;
mod status;
mod workspace;
mod worktree;

pub use workspace::{GitWorkspace, HEAD_ENTRY};
