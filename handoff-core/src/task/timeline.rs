//! The records of a task's timeline: turns, checkpoints, checks, delegated runs, handoffs and
//! fork markers.

use camino::Utf8PathBuf;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{HandoffId, TaskId};
use crate::names::{AgentId, Mode, Operation, Status};

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
    /// Where it ran when it was sent to another machine (`--on`): the host's name, else its
    /// ssh destination; absent for a run here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub host: Option<String>,
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
