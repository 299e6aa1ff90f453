//! handoff-git: git evidence for handoff, read with [gix](https://docs.rs/gix).
//!
//! [`GitWorkspace`] implements [`handoff_core::Workspace`]: it discovers the repository that
//! contains a directory and takes a content-addressed [`Fingerprint`](handoff_core::Fingerprint)
//! of the worktree and of the repository state next to it, so that a fingerprint taken before an
//! agent ran and one taken after it can be compared with
//! [`Fingerprint::compare`](handoff_core::Fingerprint::compare).
//!
//! # What a fingerprint covers
//!
//! One entry per key, with a state string that is equal iff nothing about the entry changed:
//!
//! * every **index entry** (`tracked …`): its stage(s), mode, object id and user-visible flags
//!   (intent-to-add, skip-worktree, assume-unchanged) — never the index's raw bytes or stat
//!   cache — together with the state of the same path in the worktree where it differs;
//! * every **untracked, not ignored file** (`untracked …`), each file of an untracked directory
//!   individually, like `git status -uall`; with [`GitWorkspace::with_ignored`], every
//!   **ignored file** too (`ignored …`);
//! * the **git directory**: [`HEAD_ENTRY`] (the branch HEAD names, or its commit when detached),
//!   every ref by name whether loose or packed (`.git/refs/heads/main`, `.git/refs/tags/v1`,
//!   `.git/refs/stash`), the pseudo-refs commands leave behind (`.git/ORIG_HEAD`,
//!   `.git/MERGE_HEAD`, `.git/FETCH_HEAD`, …), `.git/config` (and `config.worktree`),
//!   everything below `.git/info/` and `.git/hooks/`, the hooks of a `core.hooksPath`
//!   directory, and the linked worktrees (`.git/worktrees/<id>`).
//!
//! The worktree state of a path is its git mode (`100644`, `100755`, `120000` for a symlink) and
//! git blob id (of the target text, for a symlink), or `missing`, `dir`, `other`; a nested
//! repository (a checked-out submodule, or an untracked repository inside the worktree) is
//! represented by the digest of its own fingerprint. A commit moves a branch, so it shows as
//! `.git/refs/heads/<branch>`; switching branches shows as [`HEAD_ENTRY`].
//!
//! Refs that another linked worktree of the same repository has checked out (its HEAD's branch,
//! or the branch a rebase there will move) are left out — that worktree's own work moves them —
//! and listed in [`Fingerprint::excluded_refs`](handoff_core::Fingerprint::excluded_refs).
//! Other worktrees' HEADs and indexes are never part of a fingerprint.
//!
//! # How it is read
//!
//! Like git, the index's stat data is trusted: a tracked file whose `lstat` matches what the
//! index recorded, and that is not racily clean, has the content the index says, and is not
//! read. Everything else (changed or racily clean tracked files, untracked files, the git
//! directory's files) is hashed, in parallel, streamed in chunks. Taking a fingerprint only
//! reads: nothing is written to the index or anywhere under `.git`.
//!
//! # Snapshots
//!
//! [`Workspace::snapshot`](handoff_core::Workspace::snapshot) copies a worktree as it is now
//! (tracked files as modified, untracked files that are not ignored; deleted and ignored ones
//! left out) into a new repository: one detached commit on top of the source's HEAD, checked
//! out with a clean index, for a nested adviser to read while the agent that owns the worktree
//! keeps writing. The new repository borrows the source's objects through
//! `objects/info/alternates` and stores only what is new in its own object database; nothing
//! is written to the source repository. Submodules stay gitlinks (checked out as empty
//! directories), skip-worktree entries keep the index's content, untracked nested repositories
//! are left out, and the snapshot's `info/attributes` turns off end-of-line conversion and
//! filters, as its files hold the worktree's bytes.
#![deny(missing_docs)]

mod command;
mod detailed;
mod gitdir;
mod gitfs;
mod hash;
mod ignore_rules;
mod ignored_trees;
mod index_file;
mod nested;
mod objects;
mod par;
mod paths;
mod programs;
mod repo;
mod repo_state;
mod runner;
mod saved;
mod scan;
mod snapshot;
mod staged;
mod state;
#[cfg(test)]
mod testing;
mod trust;
mod untracked;
mod workspace;

pub use detailed::DetailedFingerprint;
pub use gitdir::HEAD_ENTRY;
pub use programs::{Neutralised, RepoPrograms, config_state};
pub use repo_state::repo_state;
pub use runner::{
    FORCED_CONFIG, Git, GitError, KEPT_ENV, PrivateIndex, TRANSPORTS, Trust, split_z, tail,
};
pub use saved::{Judged, Kept, MAX_SAVED_BYTES, SavedError, diff, read_saved, save};
pub use workspace::GitWorkspace;
