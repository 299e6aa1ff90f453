//! Continuation records: tasks, their timelines, and the [`TaskStore`] trait that keeps them.
//!
//! A [`Task`] is the work a user carries from one agent to another: it belongs to a project,
//! a worktree and a branch, and names the agent currently working on it. Its timeline is an
//! append-only list of [`TimelineEntry`]s in the order the store accepted them: turns
//! attributed to the provider and model that wrote them, handoffs, checkpoints, checks and
//! delegated runs. Core defines the records, their validation and the trait; the database
//! lives in another crate.
//!
//! Here: ids, tasks and the store; the timeline's records are in `timeline`, the checks every
//! record passes before it is stored in `validate`.

mod timeline;
mod validate;

use std::borrow::Cow;
use std::fmt;

use camino::{Utf8Path, Utf8PathBuf};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

pub use self::timeline::{
    AgentRef, CheckRun, Checkpoint, DelegatedRun, ForkMarker, HandoffContext, HandoffOutcome,
    HandoffRow, NewHandoff, Record, Route, TimelineEntry, TimelineEvent, Turn,
};
pub use self::validate::{check_name, check_timestamp};
use crate::names::AgentId;
use crate::timestamp::now_iso;

/// Longest model, account, branch, run id or digest accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $pattern:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// A new random id.
            pub fn generate() -> $name {
                $name(format!("{}{}", $prefix, uuid::Uuid::new_v4().hyphenated()))
            }

            /// Parses an id: the prefix followed by a lowercase hyphenated UUID.
            pub fn parse(s: &str) -> Option<$name> {
                let uuid = s.strip_prefix($prefix)?;
                let parsed = uuid::Uuid::try_parse(uuid).ok()?;
                (parsed.hyphenated().to_string() == uuid).then(|| $name(s.to_owned()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                $name::parse(&value).ok_or_else(|| format!("invalid id '{value}'"))
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({ "type": "string", "pattern": $pattern })
            }
        }
    };
}

prefixed_id! {
    /// Identifies a task: `task-<uuid>`.
    TaskId, "task-",
    "^task-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
}

prefixed_id! {
    /// Identifies a background job: `job-<uuid>`.
    JobId, "job-",
    "^job-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
}

prefixed_id! {
    /// Identifies a handoff row: `handoff-<uuid>`.
    HandoffId, "handoff-",
    "^handoff-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
}

/// The agent working on a task, and as whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskAgent {
    /// The agent CLI.
    pub provider: AgentId,
    /// The model, or null for the CLI's default.
    #[schemars(length(min = 1, max = 256))]
    pub model: Option<String>,
    /// The account or profile the CLI runs as, when it has several.
    #[schemars(length(min = 1, max = 256))]
    pub account: Option<String>,
}

/// A task to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewTask {
    /// Absolute path of the project's main worktree.
    #[schemars(with = "String")]
    pub project_root: Utf8PathBuf,
    /// Absolute path of the worktree the task is worked on (may equal `projectRoot`).
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The branch, or null on a detached HEAD.
    #[schemars(length(min = 1, max = 256))]
    pub branch: Option<String>,
    /// Who works on it first.
    pub agent: TaskAgent,
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Task {
    /// `task-<uuid>`.
    pub id: TaskId,
    /// Absolute path of the project's main worktree.
    #[schemars(with = "String")]
    pub project_root: Utf8PathBuf,
    /// Absolute path of the worktree the task is worked on.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The branch, or null on a detached HEAD.
    pub branch: Option<String>,
    /// Who works on it now.
    pub agent: TaskAgent,
    /// The task this one was forked from (`--new-thread`).
    pub parent: Option<TaskId>,
    /// ISO-8601 UTC with milliseconds.
    pub created_at: String,
    /// When the task or its timeline last changed.
    pub updated_at: String,
}

/// A new thread for a task: the worktree and branch made from its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fork {
    /// Absolute path of the new linked worktree; must differ from the original's.
    #[schemars(with = "String")]
    pub worktree: Utf8PathBuf,
    /// The new branch; must differ from the original's.
    #[schemars(length(min = 1, max = 256))]
    pub branch: Option<String>,
    /// Who works on the new task; null keeps the original's agent.
    pub agent: Option<TaskAgent>,
}

/// Why the task store could not do what was asked. Every message is one line.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process held the store's write lock for longer than the busy timeout.
    #[error(
        "task store '{path}' is locked: another handoff process has held it for more than {waited_ms} ms"
    )]
    Locked {
        /// The database file.
        path: Utf8PathBuf,
        /// How long this process waited.
        waited_ms: u64,
    },
    /// No record with that id.
    #[error("no {what} '{id}' in the task store")]
    NotFound {
        /// `task` or `handoff`.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// The store was migrated by a newer handoff than this one.
    #[error(
        "task store '{path}' was written by a newer handoff (schema {found} > {supported}); upgrade handoff to use it"
    )]
    NewerSchema {
        /// The database file.
        path: Utf8PathBuf,
        /// The file's schema version.
        found: u32,
        /// The newest version this build knows.
        supported: u32,
    },
    /// The file is an SQLite database of some other program.
    #[error("'{path}' is not a handoff task store (application id {application_id:#x})")]
    NotAStore {
        /// The database file.
        path: Utf8PathBuf,
        /// The file's `PRAGMA application_id`.
        application_id: i32,
    },
    /// A migration failed; the store is left at the version before it.
    #[error("task store '{path}': migration to schema {version} failed: {message}")]
    Migration {
        /// The database file.
        path: Utf8PathBuf,
        /// The version being migrated to.
        version: u32,
        /// The database's message.
        message: String,
    },
    /// A stored value does not read back as its type.
    #[error("task store '{path}' holds an invalid {what}: {message}")]
    Corrupt {
        /// The database file.
        path: Utf8PathBuf,
        /// The column or record.
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A value given to the store breaks the contract.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// The handoff's outcome was set already.
    #[error("handoff '{id}' already finished at {finished_at}")]
    AlreadyFinished {
        /// The handoff.
        id: HandoffId,
        /// When its outcome was set.
        finished_at: String,
    },
    /// The store file exists but is empty (0 bytes): its history is gone. handoff does not
    /// re-create it silently.
    #[error(
        "task store '{path}' is empty (0 bytes): its history is gone; move the file aside to start a new store"
    )]
    Empty {
        /// The database file.
        path: Utf8PathBuf,
    },
    /// Neither `XDG_STATE_HOME` nor `HOME` names an absolute directory.
    #[error("no state directory: neither XDG_STATE_HOME nor HOME is an absolute path")]
    NoStateDir,
    /// The store's directory or file could not be created or opened.
    #[error("task store '{path}': {source}")]
    Io {
        /// The file or directory.
        path: Utf8PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The database reported an error.
    #[error("task store '{path}': {message}")]
    Sqlite {
        /// The database file.
        path: Utf8PathBuf,
        /// The database's message.
        message: String,
    },
}

/// Keeps tasks and their timelines. Implementations must be safe to use from several threads
/// and from several processes on the same store at once; every method is one transaction.
pub trait TaskStore: Send + Sync {
    /// Creates a task with a new id.
    fn create_task(&self, task: &NewTask) -> Result<Task, StoreError>;

    /// The task with this id, or [`StoreError::NotFound`].
    fn task(&self, id: &TaskId) -> Result<Task, StoreError>;

    /// The current task of a worktree: the newest task created in it.
    fn task_for_worktree(&self, worktree: &Utf8Path) -> Result<Option<Task>, StoreError>;

    /// All tasks, or those of one project, oldest first.
    fn tasks(&self, project_root: Option<&Utf8Path>) -> Result<Vec<Task>, StoreError>;

    /// The current task of the worktree at `root` however it is reached: by that path, by its
    /// resolved path, or as the newest task of `project_root` whose worktree resolves to the
    /// same directory. A worktree redirected through a symbolic link (`core.worktree`, a linked
    /// path) is thus still the same task, and does not start a new one that trusts whatever is
    /// there now.
    fn task_at(
        &self,
        root: &Utf8Path,
        project_root: &Utf8Path,
    ) -> Result<Option<Task>, StoreError> {
        if let Some(t) = self.task_for_worktree(root)? {
            return Ok(Some(t));
        }
        let Ok(real) = root.canonicalize_utf8() else {
            return Ok(None);
        };
        if real != root
            && let Some(t) = self.task_for_worktree(&real)?
        {
            return Ok(Some(t));
        }
        Ok(self
            .tasks(Some(project_root))?
            .into_iter()
            .rev()
            .find(|t| t.worktree.canonicalize_utf8().ok().as_ref() == Some(&real)))
    }

    /// Sets who works on the task now.
    fn set_agent(&self, id: &TaskId, agent: &TaskAgent) -> Result<Task, StoreError>;

    /// Appends an entry that happened at `at` (ISO-8601 UTC with milliseconds).
    fn append_at(
        &self,
        task: &TaskId,
        at: &str,
        record: &Record,
    ) -> Result<TimelineEntry, StoreError>;

    /// Appends an entry that happens now.
    fn append(&self, task: &TaskId, record: &Record) -> Result<TimelineEntry, StoreError> {
        self.append_at(task, &now_iso(), record)
    }

    /// The task's timeline, in order.
    fn timeline(&self, task: &TaskId) -> Result<Vec<TimelineEntry>, StoreError>;

    /// Records a `pending` handoff now and appends it to the task's timeline.
    fn record_handoff(&self, task: &TaskId, handoff: &NewHandoff)
    -> Result<HandoffRow, StoreError>;

    /// The handoff with this id, or [`StoreError::NotFound`].
    fn handoff(&self, id: &HandoffId) -> Result<HandoffRow, StoreError>;

    /// Sets a pending handoff's outcome (not `pending`) and finish time (now).
    fn finish_handoff(
        &self,
        id: &HandoffId,
        outcome: &HandoffOutcome,
    ) -> Result<HandoffRow, StoreError>;

    /// Adds `details` to a handoff's details (a key already there is replaced): what was
    /// learnt after it was recorded, such as the continuity check.
    fn add_handoff_details(
        &self,
        id: &HandoffId,
        details: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<HandoffRow, StoreError>;

    /// Makes a new task on a new worktree and branch from `id`: the same project, `parent` set
    /// to `id`, a copy of the original's timeline followed by a [`ForkMarker`]. The original is
    /// left untouched. One transaction.
    fn fork_task(&self, id: &TaskId, fork: &Fork) -> Result<Task, StoreError>;

    /// Keeps handoff's own record of the tracked files of `worktree` as one run left them
    /// ([`crate::StatRecord::as_bytes`]), replacing the one kept before: the next run's "before"
    /// trusts it rather than the index, which an agent may have rewritten in between. A store
    /// that keeps none does nothing.
    fn save_stat_record(&self, worktree: &Utf8Path, record: &[u8]) -> Result<(), StoreError> {
        let _ = (worktree, record);
        Ok(())
    }

    /// The record kept for the worktree that contains `path` (the deepest one), with that
    /// worktree's root.
    fn stat_record(&self, path: &Utf8Path) -> Result<Option<(Utf8PathBuf, Vec<u8>)>, StoreError> {
        let _ = path;
        Ok(None)
    }

    /// Keeps what a later comparison with a saved fingerprint of the worktree at `worktree`
    /// (`handoff fingerprint --json`, then `--diff`) judges by, under the fingerprint's
    /// `digest`: its record ([`crate::StatRecord::as_bytes`]) and its baseline
    /// ([`crate::Baseline::to_bytes`]). Only the most recent few of a worktree are kept. A store
    /// that keeps none does nothing.
    fn save_fingerprint_basis(&self, basis: &crate::FingerprintBasis) -> Result<(), StoreError> {
        let _ = basis;
        Ok(())
    }

    /// What [`TaskStore::save_fingerprint_basis`] kept for the fingerprint with `digest` of the
    /// worktree at `worktree`.
    fn fingerprint_basis(
        &self,
        digest: &str,
        worktree: &Utf8Path,
    ) -> Result<Option<crate::FingerprintBasis>, StoreError> {
        let _ = (digest, worktree);
        Ok(None)
    }

    /// Keeps `state` as what task `task` trusts (its configuration at its first event) unless
    /// it already has one; whether it was kept. A forked task starts with its original's. A
    /// store that keeps none does nothing.
    fn save_config_state(
        &self,
        task: &TaskId,
        state: &crate::ConfigState,
    ) -> Result<bool, StoreError> {
        let _ = (task, state);
        Ok(false)
    }

    /// The configuration state kept for the task, if any.
    fn config_state(&self, task: &TaskId) -> Result<Option<crate::ConfigState>, StoreError> {
        let _ = task;
        Ok(None)
    }

    /// Keeps `state` for `worktree` until a task there takes it over (its first event made no
    /// task), unless the worktree has one; whether it was kept. Saving a task's state takes
    /// over (and removes) its worktree's.
    fn save_worktree_config_state(
        &self,
        worktree: &Utf8Path,
        state: &crate::ConfigState,
    ) -> Result<bool, StoreError> {
        let _ = (worktree, state);
        Ok(false)
    }

    /// The configuration state a worktree keeps for the task it does not have yet.
    fn worktree_config_state(
        &self,
        worktree: &Utf8Path,
    ) -> Result<Option<crate::ConfigState>, StoreError> {
        let _ = worktree;
        Ok(None)
    }

    /// Fails when the store can't be written now (e.g. another process holds its write lock),
    /// so that a command that must record what it does can refuse before it does anything.
    fn check_writable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Records a new background job, `running`.
    fn create_job(&self, job: &crate::NewJob) -> Result<crate::Job, StoreError>;

    /// Records the supervisor of a job (only its `supervisor`; its state is left as it is).
    fn set_job_supervisor(
        &self,
        id: &crate::JobId,
        supervisor: crate::ProcessRef,
    ) -> Result<(), StoreError>;

    /// Records how a job ended: `finished`, its exit code and result line (masked as every
    /// text the store keeps), and the time. A job that ended already keeps its first end.
    fn finish_job(
        &self,
        id: &crate::JobId,
        exit_code: u8,
        result: Option<&str>,
    ) -> Result<crate::Job, StoreError>;

    /// The job with this id, as recorded ([`crate::Job::judged`] tells whether it was lost),
    /// or [`StoreError::NotFound`].
    fn job(&self, id: &crate::JobId) -> Result<crate::Job, StoreError>;

    /// Every job, newest first, as recorded.
    fn jobs(&self) -> Result<Vec<crate::Job>, StoreError>;
}

#[cfg(test)]
mod tests;
