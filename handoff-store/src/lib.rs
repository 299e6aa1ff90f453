//! handoff-store: the task store of handoff, an embedded SQLite file.
//!
//! [`SqliteStore`] implements [`handoff_core::TaskStore`]: tasks, their timelines (turns,
//! handoffs, checkpoints, checks, delegated runs, fork markers), handoff rows and background
//! jobs, kept in `$XDG_STATE_HOME/handoff/tasks.sqlite3` (else
//! `~/.local/state/handoff/tasks.sqlite3`, or any path given to [`SqliteStore::open`]). SQLite
//! is compiled in, so a fresh machine needs nothing installed.
//!
//! # Safety under concurrent processes
//!
//! Several `handoff` processes may use one store at once. The file is in WAL mode, so readers
//! never wait for a writer; every write is one `BEGIN IMMEDIATE` transaction, so writers queue
//! on SQLite's write lock instead of failing halfway. A writer waits up to the busy timeout
//! ([`StoreOptions::busy_timeout`], 5 s by default) and then fails with
//! [`StoreError::Locked`](handoff_core::StoreError::Locked), one line naming the file.
//!
//! # Schema
//!
//! The schema is versioned with `PRAGMA user_version` ([`SCHEMA_VERSION`]) and marked as
//! handoff's with `PRAGMA application_id`. Opening a store applies the missing migrations in
//! order, each in its own immediate transaction, and refuses a store written by a newer handoff
//! ([`StoreError::NewerSchema`](handoff_core::StoreError::NewerSchema)) or an SQLite file of
//! another program. The directory is created `0700` and the file `0600`.
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod jobs;
mod location;
mod schema;
mod sql;
mod store;

pub use location::{FILE_NAME, access_problems, default_path};
pub use schema::{APPLICATION_ID, SCHEMA_VERSION};
pub use store::{SqliteStore, StoreOptions};
