//! Continuation records: tasks, their timelines, and the [`TaskStore`] trait that keeps them.
//!
//! A [`Task`] is the work a user carries from one agent to another: it belongs to a project,
//! a worktree and a branch, and names the agent currently working on it. Its timeline is an
//! append-only list of [`TimelineEntry`]s in the order the store accepted them: turns
//! attributed to the provider and model that wrote them, handoffs, checkpoints, checks and
//! delegated runs. Core defines the records, their validation and the trait; the database
//! lives in another crate.

use std::borrow::Cow;
use std::fmt;

use camino::{Utf8Path, Utf8PathBuf};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::names::{AgentId, Mode, Operation, Status};
use crate::timestamp::{is_iso, now_iso};

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

/// A provider and the model it ran, as written in the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentRef {
    /// The agent CLI.
    pub provider: AgentId,
    /// The model, or null when unknown or the CLI's default.
    #[schemars(length(min = 1, max = 256))]
    pub model: Option<String>,
}

/// One turn (or a summarized run of turns) of an agent on the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Turn {
    /// Who wrote it.
    pub author: AgentRef,
    /// What happened, in a line or a paragraph.
    pub summary: String,
}

/// A reviewed commit of the task's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checkpoint {
    /// The commit (lowercase hex object id).
    #[schemars(regex(pattern = r"^([0-9a-f]{40}|[0-9a-f]{64})$"))]
    pub commit: String,
    /// The agent whose work it holds.
    pub author: AgentRef,
    /// The commit message.
    pub message: String,
    /// Repository-relative paths the commit holds, in order.
    pub committed: Vec<String>,
    /// Paths deliberately left out of it, in order.
    pub uncommitted: Vec<String>,
}

/// A check (test, lint, build) run against a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckRun {
    /// The command line as run.
    #[schemars(length(min = 1))]
    pub command: String,
    /// Its exit code, or null when it was killed by a signal.
    pub exit_code: Option<i32>,
    /// The commit it tested (lowercase hex object id).
    #[schemars(regex(pattern = r"^([0-9a-f]{40}|[0-9a-f]{64})$"))]
    pub commit: String,
}

/// A delegated run (advice or a bounded handoff) made while working on the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegatedRun {
    /// The run's id.
    #[schemars(length(min = 1, max = 256))]
    pub run_id: String,
    /// `advice` or `handoff`.
    pub operation: Operation,
    /// The mode; null for advice.
    pub mode: Option<Mode>,
    /// The agent that ran.
    pub target: AgentId,
    /// How it ended.
    pub status: Status,
    /// The exit code handoff reported.
    pub exit_code: u8,
    /// Where the result file was written, if anywhere.
    #[schemars(with = "Option<String>")]
    pub result_path: Option<Utf8PathBuf>,
    /// `sha256:<hex>` of the result, if known.
    #[schemars(length(min = 1, max = 256))]
    pub result_hash: Option<String>,
}

/// How the receiving agent was given the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    /// The receiver continues in the same worktree and branch.
    SameThread,
    /// The receiver works on a new task, worktree and branch forked from the checkpoint.
    NewThread,
    /// Only the note was written; no receiver was started.
    NoteOnly,
}

impl Route {
    /// All routes, in documentation order.
    pub const ALL: [Route; 3] = [Route::SameThread, Route::NewThread, Route::NoteOnly];

    /// The route's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::SameThread => "same-thread",
            Route::NewThread => "new-thread",
            Route::NoteOnly => "note-only",
        }
    }

    /// Parses a route name.
    pub fn parse(s: &str) -> Option<Route> {
        Route::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// What a handoff transferred to the receiver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffContext {
    /// Absolute path of the handoff note.
    #[schemars(with = "Option<String>")]
    pub note_path: Option<Utf8PathBuf>,
    /// `sha256:<hex>` of the note as delivered.
    #[schemars(length(min = 1, max = 256))]
    pub note_digest: Option<String>,
    /// How many transcript messages were carried; null when no transcript was.
    pub transcript_messages: Option<u64>,
    /// The user's message to the receiver.
    pub message: Option<String>,
    /// Anything else worth keeping about the transfer (free-form, adapter-specific).
    pub details: Option<serde_json::Map<String, serde_json::Value>>,
}

/// How a handoff ended, as far as handoff knows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "state", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HandoffOutcome {
    /// Recorded; the receiver has not been started yet.
    Pending,
    /// The receiver was started.
    Started,
    /// The receiver could not be started.
    NotStarted {
        /// Why, in one line.
        reason: String,
    },
    /// A dry run: everything was prepared, nothing was started.
    DryRun,
    /// The note was written for the target; no receiver was started (`--note-only`).
    NoteWritten,
}

impl HandoffOutcome {
    /// The outcome's name.
    pub fn as_str(&self) -> &'static str {
        match self {
            HandoffOutcome::Pending => "pending",
            HandoffOutcome::Started => "started",
            HandoffOutcome::NotStarted { .. } => "not-started",
            HandoffOutcome::DryRun => "dry-run",
            HandoffOutcome::NoteWritten => "note-written",
        }
    }

    /// The outcome from its name and, for `not-started`, its reason.
    pub fn from_parts(name: &str, reason: Option<String>) -> Option<HandoffOutcome> {
        match (name, reason) {
            ("pending", None) => Some(HandoffOutcome::Pending),
            ("started", None) => Some(HandoffOutcome::Started),
            ("not-started", Some(reason)) => Some(HandoffOutcome::NotStarted { reason }),
            ("dry-run", None) => Some(HandoffOutcome::DryRun),
            ("note-written", None) => Some(HandoffOutcome::NoteWritten),
            _ => None,
        }
    }

    /// The reason of a `not-started` outcome.
    pub fn reason(&self) -> Option<&str> {
        match self {
            HandoffOutcome::NotStarted { reason } => Some(reason),
            _ => None,
        }
    }
}

/// A handoff to record: from which agent to which, with what, by which route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewHandoff {
    /// The agent handing the task off.
    pub source: AgentRef,
    /// The agent receiving it.
    pub target: AgentRef,
    /// What was transferred.
    pub context: HandoffContext,
    /// How the receiver gets the task.
    pub route: Route,
}

/// A handoff as stored: recorded as `pending`, finished later with its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffRow {
    /// `handoff-<uuid>`.
    pub id: HandoffId,
    /// The agent handing the task off.
    pub source: AgentRef,
    /// The agent receiving it.
    pub target: AgentRef,
    /// What was transferred.
    pub context: HandoffContext,
    /// How the receiver gets the task.
    pub route: Route,
    /// How it ended.
    pub outcome: HandoffOutcome,
    /// When it was recorded.
    pub started_at: String,
    /// When its outcome was set; null while pending.
    pub finished_at: Option<String>,
}

/// The first entry of a forked task after the copied timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkMarker {
    /// The original task.
    pub from: TaskId,
    /// The last entry of the original's timeline that was copied; null when it was empty.
    pub through_seq: Option<u64>,
}

/// What a timeline entry records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TimelineEvent {
    /// An agent's turn.
    Turn(Turn),
    /// A handoff (shared by the copies of a forked timeline).
    Handoff(HandoffRow),
    /// A checkpoint commit.
    Checkpoint(Checkpoint),
    /// A check run against a commit.
    Check(CheckRun),
    /// A delegated run.
    DelegatedRun(DelegatedRun),
    /// The task was forked from another; the entries before this one are a copy.
    Forked(ForkMarker),
}

impl TimelineEvent {
    /// The event's kind, as stored and serialized.
    pub fn kind(&self) -> &'static str {
        match self {
            TimelineEvent::Turn(_) => "turn",
            TimelineEvent::Handoff(_) => "handoff",
            TimelineEvent::Checkpoint(_) => "checkpoint",
            TimelineEvent::Check(_) => "check",
            TimelineEvent::DelegatedRun(_) => "delegated-run",
            TimelineEvent::Forked(_) => "forked",
        }
    }
}

/// One entry of a task's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimelineEntry {
    /// Position in the store: strictly increasing in the order entries were accepted.
    pub seq: u64,
    /// The task whose timeline holds the entry.
    pub task: TaskId,
    /// When it happened (ISO-8601 UTC with milliseconds); copies keep the original's time.
    pub at: String,
    /// What happened.
    pub event: TimelineEvent,
}

/// An entry a caller appends with [`TaskStore::append`]. Handoffs are recorded with
/// [`TaskStore::record_handoff`] and fork markers are written by [`TaskStore::fork_task`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// An agent's turn.
    Turn(Turn),
    /// A checkpoint commit.
    Checkpoint(Checkpoint),
    /// A check run against a commit.
    Check(CheckRun),
    /// A delegated run.
    DelegatedRun(DelegatedRun),
}

impl From<Turn> for Record {
    fn from(value: Turn) -> Self {
        Record::Turn(value)
    }
}

impl From<Checkpoint> for Record {
    fn from(value: Checkpoint) -> Self {
        Record::Checkpoint(value)
    }
}

impl From<CheckRun> for Record {
    fn from(value: CheckRun) -> Self {
        Record::Check(value)
    }
}

impl From<DelegatedRun> for Record {
    fn from(value: DelegatedRun) -> Self {
        Record::DelegatedRun(value)
    }
}

impl From<Record> for TimelineEvent {
    fn from(value: Record) -> Self {
        match value {
            Record::Turn(t) => TimelineEvent::Turn(t),
            Record::Checkpoint(c) => TimelineEvent::Checkpoint(c),
            Record::Check(c) => TimelineEvent::Check(c),
            Record::DelegatedRun(r) => TimelineEvent::DelegatedRun(r),
        }
    }
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

    /// Fails when the store can't be written now (e.g. another process holds its write lock),
    /// so that a command that must record what it does can refuse before it does anything.
    fn check_writable(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        field,
        reason: reason.into(),
    }
}

fn check_absolute(field: &'static str, path: &Utf8Path) -> Result<(), StoreError> {
    if !path.is_absolute() {
        return Err(invalid(field, format!("'{path}' is not an absolute path")));
    }
    if path.as_str().contains('\0') {
        return Err(invalid(field, "contains a NUL byte"));
    }
    Ok(())
}

fn check_name(field: &'static str, value: Option<&str>) -> Result<(), StoreError> {
    match value {
        Some(v) if v.is_empty() || v.len() > MAX_NAME_BYTES => Err(invalid(
            field,
            format!("must be 1 to {MAX_NAME_BYTES} bytes, not {}", v.len()),
        )),
        Some(v) if v.chars().any(char::is_control) => {
            Err(invalid(field, "contains a control character"))
        }
        _ => Ok(()),
    }
}

fn check_commit(field: &'static str, commit: &str) -> Result<(), StoreError> {
    let hex = commit
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex && matches!(commit.len(), 40 | 64) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("'{commit}' is not a lowercase hex object id"),
        ))
    }
}

/// Checks a timestamp is ISO-8601 UTC with milliseconds, as [`now_iso`] writes it
/// (`2025-01-31T12:34:56.789Z`), so that timestamps sort as text, naming a real date and time.
pub fn check_timestamp(field: &'static str, at: &str) -> Result<(), StoreError> {
    if is_iso(at) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("'{at}' is not ISO-8601 UTC with milliseconds"),
        ))
    }
}

impl TaskAgent {
    /// Checks the model and account.
    pub fn validate(&self) -> Result<(), StoreError> {
        check_name("model", self.model.as_deref())?;
        check_name("account", self.account.as_deref())
    }
}

impl AgentRef {
    /// Checks the model.
    pub fn validate(&self) -> Result<(), StoreError> {
        check_name("model", self.model.as_deref())
    }
}

impl NewTask {
    /// Checks paths are absolute and names are well-formed.
    pub fn validate(&self) -> Result<(), StoreError> {
        check_absolute("projectRoot", &self.project_root)?;
        check_absolute("worktree", &self.worktree)?;
        check_name("branch", self.branch.as_deref())?;
        self.agent.validate()
    }
}

impl Fork {
    /// Checks the fork against the task it is made from.
    pub fn validate(&self, original: &Task) -> Result<(), StoreError> {
        check_absolute("worktree", &self.worktree)?;
        check_name("branch", self.branch.as_deref())?;
        if let Some(agent) = &self.agent {
            agent.validate()?;
        }
        if self.worktree == original.worktree {
            return Err(invalid(
                "worktree",
                format!("a new thread needs a new worktree, not '{}'", self.worktree),
            ));
        }
        if self.branch.is_some() && self.branch == original.branch {
            return Err(invalid(
                "branch",
                "a new thread needs a new branch, not the original's",
            ));
        }
        Ok(())
    }
}

impl Record {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<(), StoreError> {
        match self {
            Record::Turn(t) => t.author.validate(),
            Record::Checkpoint(c) => {
                check_commit("commit", &c.commit)?;
                c.author.validate()
            }
            Record::Check(c) => {
                check_commit("commit", &c.commit)?;
                if c.command.is_empty() {
                    return Err(invalid("command", "is empty"));
                }
                Ok(())
            }
            Record::DelegatedRun(r) => {
                check_name("runId", Some(&r.run_id))?;
                check_name("resultHash", r.result_hash.as_deref())?;
                if let Some(path) = &r.result_path {
                    check_absolute("resultPath", path)?;
                }
                Ok(())
            }
        }
    }
}

impl NewHandoff {
    /// Checks the agents and the context.
    pub fn validate(&self) -> Result<(), StoreError> {
        self.source.validate()?;
        self.target.validate()?;
        if let Some(path) = &self.context.note_path {
            check_absolute("notePath", path)?;
        }
        check_name("noteDigest", self.context.note_digest.as_deref())?;
        if self
            .context
            .transcript_messages
            .is_some_and(|n| n > i64::MAX as u64)
        {
            return Err(invalid("transcriptMessages", "too large"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str) -> AgentRef {
        AgentRef {
            provider: AgentId::parse(id).unwrap(),
            model: Some("m-1".into()),
        }
    }

    #[test]
    fn ids_round_trip_and_are_checked() {
        let t = TaskId::generate();
        assert!(t.as_str().starts_with("task-"));
        assert_eq!(TaskId::parse(t.as_str()), Some(t.clone()));
        let h = HandoffId::generate();
        assert_eq!(HandoffId::parse(h.as_str()), Some(h.clone()));
        assert_eq!(TaskId::parse(h.as_str()), None);
        for bad in [
            "",
            "task-",
            "task-not-a-uuid",
            "TASK-00000000-0000-0000-0000-000000000000",
            "task-00000000-0000-0000-0000-00000000000A",
            "task-00000000000000000000000000000000",
            "handoff-00000000-0000-0000-0000-000000000000",
        ] {
            assert!(TaskId::parse(bad).is_none(), "{bad}");
        }
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<TaskId>(&json).unwrap(), t);
        assert!(serde_json::from_str::<TaskId>("\"task-x\"").is_err());
    }

    #[test]
    fn timeline_entries_serialize_with_a_kind_tag() {
        let entries = vec![
            TimelineEvent::Turn(Turn {
                author: agent("claude"),
                summary: "did a thing".into(),
            }),
            TimelineEvent::Handoff(HandoffRow {
                id: HandoffId::generate(),
                source: agent("claude"),
                target: agent("codex"),
                context: HandoffContext {
                    transcript_messages: Some(3),
                    details: Some(serde_json::Map::from_iter([("k".into(), 1.into())])),
                    ..HandoffContext::default()
                },
                route: Route::SameThread,
                outcome: HandoffOutcome::NotStarted {
                    reason: "codex missing".into(),
                },
                started_at: now_iso(),
                finished_at: Some(now_iso()),
            }),
            TimelineEvent::Forked(ForkMarker {
                from: TaskId::generate(),
                through_seq: Some(4),
            }),
            TimelineEvent::DelegatedRun(DelegatedRun {
                run_id: "r1".into(),
                operation: Operation::Handoff,
                mode: Some(Mode::Build),
                target: AgentId::CODEX,
                status: Status::Succeeded,
                exit_code: 0,
                result_path: None,
                result_hash: None,
            }),
        ];
        for event in entries {
            let entry = TimelineEntry {
                seq: 1,
                task: TaskId::generate(),
                at: now_iso(),
                event,
            };
            let json = serde_json::to_value(&entry).unwrap();
            assert_eq!(json["event"]["kind"], entry.event.kind());
            let back: TimelineEntry = serde_json::from_value(json).unwrap();
            assert_eq!(back, entry);
        }
        let outcome = serde_json::to_value(HandoffOutcome::DryRun).unwrap();
        assert_eq!(outcome, serde_json::json!({"state": "dry-run"}));
    }

    #[test]
    fn outcomes_round_trip_through_their_parts() {
        for o in [
            HandoffOutcome::Pending,
            HandoffOutcome::Started,
            HandoffOutcome::NotStarted { reason: "x".into() },
            HandoffOutcome::DryRun,
            HandoffOutcome::NoteWritten,
        ] {
            let back = HandoffOutcome::from_parts(o.as_str(), o.reason().map(str::to_owned));
            assert_eq!(back, Some(o));
        }
        assert_eq!(
            HandoffOutcome::from_parts("started", Some("x".into())),
            None
        );
        assert_eq!(HandoffOutcome::from_parts("not-started", None), None);
        for r in Route::ALL {
            assert_eq!(Route::parse(r.as_str()), Some(r));
        }
    }

    #[test]
    fn timestamps_are_checked() {
        check_timestamp("at", &now_iso()).unwrap();
        check_timestamp("at", "2025-01-31T23:59:60.999Z").unwrap();
        for bad in [
            "",
            "2025-01-31T12:34:56Z",
            "2025-01-31 12:34:56.789Z",
            "2025-13-31T12:34:56.789Z",
            "2025-01-31T24:00:00.000Z",
            "2025-01-31T12:34:56.789+00:00",
            "2025-01-31T12:34:56.7890",
        ] {
            assert!(
                matches!(
                    check_timestamp("at", bad),
                    Err(StoreError::Invalid { field: "at", .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn records_are_validated() {
        let task = NewTask {
            project_root: "relative".into(),
            worktree: "/w".into(),
            branch: None,
            agent: TaskAgent {
                provider: AgentId::CLAUDE,
                model: None,
                account: None,
            },
        };
        assert!(matches!(
            task.validate(),
            Err(StoreError::Invalid {
                field: "projectRoot",
                ..
            })
        ));
        let check = Record::from(CheckRun {
            command: "cargo test".into(),
            exit_code: Some(0),
            commit: "ABC".into(),
        });
        assert!(matches!(
            check.validate(),
            Err(StoreError::Invalid {
                field: "commit",
                ..
            })
        ));
        let turn = Record::from(Turn {
            author: AgentRef {
                provider: AgentId::CODEX,
                model: Some(String::new()),
            },
            summary: String::new(),
        });
        assert!(matches!(
            turn.validate(),
            Err(StoreError::Invalid { field: "model", .. })
        ));
    }

    #[test]
    fn store_errors_are_one_line() {
        let e = StoreError::Locked {
            path: "/s/tasks.sqlite3".into(),
            waited_ms: 5000,
        };
        let msg = e.to_string();
        assert!(!msg.contains('\n'));
        assert!(msg.contains("/s/tasks.sqlite3"));
        assert!(msg.contains("another handoff process"));
    }
}
