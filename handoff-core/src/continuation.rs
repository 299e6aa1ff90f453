//! Receivers of a continuation: the agent that takes a task over, started by `handoff continue`.
//!
//! A delegated run is bounded and ephemeral and answers with a result contract. A receiver is the
//! opposite: it is the task's new owner, so its session is persisted by its own CLI and can be
//! resumed interactively afterwards, and it answers in its own words. Adapters plan its process
//! ([`crate::Receiver::receiver_invocation`]), read its session id and last message back
//! ([`crate::Receiver::parse_receiver`]) and say how a person resumes it
//! ([`crate::Receiver::resume_command`]).

use std::collections::BTreeMap;

use camino::Utf8PathBuf;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::AgentId;
use crate::task::{HandoffId, Route, TaskAgent, TaskId};

/// What the receiver may do in the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiverRole {
    /// Carries the work on: edits files and runs commands in the worktree.
    Implement,
    /// Reviews the work: reads and runs read-only commands; must leave the worktree unchanged.
    Review,
}

impl ReceiverRole {
    /// The role's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiverRole::Implement => "implement",
            ReceiverRole::Review => "review",
        }
    }

    /// Parses a role name.
    pub fn parse(s: &str) -> Option<ReceiverRole> {
        match s {
            "implement" => Some(ReceiverRole::Implement),
            "review" => Some(ReceiverRole::Review),
            _ => None,
        }
    }

    /// Whether the receiver may change the worktree.
    pub fn writes(self) -> bool {
        self == ReceiverRole::Implement
    }
}

/// Everything an adapter needs to plan a receiver's first turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiverRequest {
    /// The receiving agent.
    pub target: AgentId,
    /// Absolute path of the worktree it continues in (its process cwd).
    pub cwd: Utf8PathBuf,
    /// What it may do there.
    pub role: ReceiverRole,
    /// The model, or `None` for the CLI's (or the configuration's) default.
    pub model: Option<String>,
    /// The effort, or `None` for the CLI's default; already checked against the spec.
    pub effort: Option<String>,
    /// A fresh lowercase hyphenated UUID. CLIs that accept a caller-chosen session id use it;
    /// others report their own.
    pub session_id: String,
    /// The carried session the first turn resumes, if any; `None` starts a new session.
    pub resume: Option<crate::carry::ResumeFrom>,
}

/// What the receiver's first turn left behind, as its adapter reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiverReport {
    /// The persisted session the turn ran in, when the output names one.
    pub session_id: Option<String>,
    /// The receiver's last message to the user, if any.
    pub last_message: Option<String>,
    /// Why the turn failed, in one line, when the CLI reported a failure (API error, refusal,
    /// unreadable output).
    pub failure: Option<String>,
}

/// How a person picks the receiver's session up interactively.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeCommand {
    /// The directory to run it in.
    #[schemars(with = "String")]
    pub cwd: Utf8PathBuf,
    /// Variables that select the account the session belongs to (empty for the default one).
    pub env: BTreeMap<String, String>,
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The same as one POSIX shell line (`cd … && [env K=V …] …`), quoted.
    pub shell: String,
}

impl ResumeCommand {
    /// A resume command running `argv` in `cwd` with `env` added to the user's environment.
    pub fn new(
        cwd: Utf8PathBuf,
        env: BTreeMap<String, String>,
        argv: Vec<String>,
    ) -> ResumeCommand {
        let mut words: Vec<String> = Vec::new();
        if !env.is_empty() {
            words.push("env".into());
            words.extend(env.iter().map(|(k, v)| shell_word(&format!("{k}={v}"))));
        }
        words.extend(argv.iter().map(|a| shell_word(a)));
        let shell = format!("cd {} && {}", shell_word(cwd.as_str()), words.join(" "));
        ResumeCommand {
            cwd,
            env,
            argv,
            shell,
        }
    }
}

/// The schema version of `handoff continue`'s result.
pub const CONTINUE_SCHEMA: &str = "handoff.continue.v1";

/// How `handoff continue` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ContinueOutcome {
    /// The receiver was started and its first turn completed: the task is the receiver's now
    /// (exit 0).
    Started,
    /// The receiver did not start or its first turn failed: the task stays with its provider and
    /// the message was not delivered (exit 1).
    NotStarted,
    /// A review receiver changed the worktree (exit 10); its changes are left for the user.
    ReviewChanged,
    /// Checkpointed and the note written; no receiver was started (`--note-only`, exit 0).
    NoteWritten,
    /// Everything was validated and planned; nothing was changed (`--dry-run`, exit 0).
    DryRun,
    /// Refused before anything changed (exit 5).
    Rejected,
    /// The receiver ran but did not continue the carried conversation (its store shows no turn
    /// after it, or the source was changed meanwhile): the receiver's session is kept, the
    /// task stays with its provider (exit 1).
    NotContinued,
}

/// Who the task goes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueTarget {
    /// The receiving agent CLI.
    pub provider: AgentId,
    /// The model, or null for the CLI's default.
    pub model: Option<String>,
    /// The effort, or null for the CLI's default.
    pub effort: Option<String>,
    /// The account, or null for the CLI's default login.
    pub account: Option<String>,
    /// What the receiver may do.
    pub role: ReceiverRole,
}

/// The worktree the receiver works in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueWorktree {
    /// Its root.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// Its branch.
    pub branch: String,
    /// Whether it was made for this handoff (`--new-thread`).
    pub created: bool,
}

/// The checkpoint the receiver starts from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueCheckpoint {
    /// The commit; null in a dry run that would make a new one.
    pub commit: Option<String>,
    /// Whether a new commit was (or, in a dry run, would be) made; false when HEAD already held
    /// everything.
    pub created: bool,
    /// Repository-relative paths the new commit holds.
    pub committed: Vec<String>,
    /// Paths left uncommitted (untracked files, ignored ones excluded).
    pub uncommitted: Vec<String>,
    /// The hooks and hook-manager files that changed since the task's first event, because of
    /// which the commit runs no hooks (absent when hooks run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks_skipped: Vec<String>,
}

/// The branch pushed with `--push`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinuePush {
    /// The remote's name.
    pub remote: String,
    /// The branch.
    pub branch: String,
    /// Whether it was pushed (false in a dry run).
    pub pushed: bool,
}

/// The note the receiver reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueNote {
    /// Where it is (outside the repository); in a dry run, where it would be.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// `sha256:<hex>` of the rendered note; null in a dry run.
    pub digest: Option<String>,
}

/// The receiver's process and session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueReceiver {
    /// The command line run (or, in a dry run, that would run), secrets masked.
    pub argv: Vec<String>,
    /// First line of the CLI's `--version`.
    pub version: Option<String>,
    /// The adapter's policy receipt.
    pub policy: serde_json::Value,
    /// The persisted session the receiver works in.
    pub session_id: Option<String>,
    /// How to resume that session interactively.
    pub resume: Option<ResumeCommand>,
    /// The receiver's last message.
    pub last_message: Option<String>,
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// For a review receiver: whether the worktree's fingerprint was unchanged by its turn.
    pub worktree_unchanged: Option<bool>,
    /// For a review receiver that changed the worktree: the paths it changed.
    pub changed: Vec<String>,
}

/// What `handoff continue` prints: one JSON line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueResult {
    /// `handoff.continue.v1`.
    pub schema_version: String,
    /// How it ended.
    pub outcome: ContinueOutcome,
    /// The process exit code.
    pub exit_code: u8,
    /// Why it was rejected or not started, in one line.
    pub reason: Option<String>,
    /// The task (the new one with `--new-thread`); null when rejected before it was known.
    pub task_id: Option<TaskId>,
    /// The original task, with `--new-thread`.
    pub parent_task_id: Option<TaskId>,
    /// The handoff row in the timeline; null in a dry run or when rejected.
    pub handoff_id: Option<HandoffId>,
    /// How the task was handed over.
    pub route: Option<Route>,
    /// Who had the task.
    pub source: Option<TaskAgent>,
    /// Who gets it.
    pub target: Option<ContinueTarget>,
    /// Where the receiver works.
    pub worktree: Option<ContinueWorktree>,
    /// The checkpoint.
    pub checkpoint: Option<ContinueCheckpoint>,
    /// The push, with `--push`.
    pub push: Option<ContinuePush>,
    /// The note.
    pub note: Option<ContinueNote>,
    /// The `--message` text, and whether the receiver got it.
    pub message: Option<ContinueMessage>,
    /// The receiver.
    pub receiver: Option<ContinueReceiver>,
    /// The conversation carried to the receiver (in a dry run: the prediction).
    pub carry: Option<ContinueCarry>,
    /// Whether the receiver really continued.
    pub continuity: Option<Continuity>,
    /// With `--on`: the other machine and what happened there.
    pub remote: Option<ContinueRemote>,
    /// With a destination phrase: how it was read.
    pub destination: Option<ContinueDestination>,
}

/// How a destination phrase (`"codex gpt-5 high on devbox"`) was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueDestination {
    /// The phrase as given.
    pub phrase: String,
    /// The agent it names.
    pub agent: AgentId,
    /// The model it names, if any.
    pub model: Option<String>,
    /// The effort it names, if any.
    pub effort: Option<String>,
    /// The other machine it names (`on <machine>[:<path>]`), if any.
    pub on: Option<String>,
    /// Whether it says this machine (`on this machine`, `here`, `locally`).
    pub this_machine: bool,
}

/// The other machine of `--on`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueRemote {
    /// The ssh destination.
    pub destination: String,
    /// The repository's path there.
    pub path: String,
    /// Whether handoff cloned it there (false: it was there and was fetched).
    pub cloned: bool,
    /// `handoff --version` there.
    pub handoff_version: Option<String>,
    /// The receiver's CLI there.
    pub receiver_cli: Option<String>,
    /// The branch's head on the git remote, as the other machine sees it.
    pub branch_head: Option<String>,
    /// The task in the other machine's store.
    pub task_id: Option<String>,
    /// The handoff in the other machine's store.
    pub handoff_id: Option<String>,
    /// How to see the task's timeline there.
    pub log: Option<String>,
}

/// How the conversation reaches the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CarryMode {
    /// Same CLI, same directory: its own fork of the source session.
    NativeFork,
    /// Same CLI: a lossless copy of the source session under a new id, re-rooted.
    NativeCopy,
    /// Another CLI: written into its store from the neutral transcript.
    Converted,
}

/// Where the carried conversation came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CarrySource {
    /// The CLI that wrote it.
    pub provider: AgentId,
    /// Its session id.
    pub session_id: String,
    /// The file it was read from.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// How it was found: `flag` (`--session <id>`), `file` (`--session <path>`),
    /// `environment` (the calling agent's session variable), `timeline` (the task's last
    /// receiver) or `latest` (the newest session that ran in the worktree).
    pub found: String,
    /// Messages read.
    pub messages: u64,
}

/// The bounded recap sent with the note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueRecap {
    /// Where it is (next to the note); in a dry run, where it would be.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Messages kept whole.
    pub whole: u64,
    /// Older messages shortened to their first line.
    pub extracted: u64,
    /// Oldest messages left out.
    pub omitted: u64,
}

/// The conversation carried to the receiver, or why it was not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueCarry {
    /// Whether the receiver resumes the conversation (in a dry run: would).
    pub carried: bool,
    /// How; null when not carried.
    pub mode: Option<CarryMode>,
    /// The source session; null when none was found.
    pub source: Option<CarrySource>,
    /// The session the receiver resumes; null when not carried or when its CLI picks the id.
    pub session_id: Option<String>,
    /// Whether the receiver's CLI forks the source itself.
    pub fork: bool,
    /// Files written into the receiver's store (in a dry run: that would be).
    #[schemars(with = "Vec<String>")]
    pub files: Vec<Utf8PathBuf>,
    /// Their size in bytes.
    pub bytes: u64,
    /// Messages carried.
    pub messages: u64,
    /// What the reader or writer skipped.
    pub warnings: Vec<String>,
    /// Why it was not carried, in one line.
    pub reason: Option<String>,
    /// An earlier carried copy of the same source for the same receiver CLI that this one
    /// replaced (its session id).
    pub replaced: Option<String>,
    /// The recap sent with the note.
    pub recap: Option<ContinueRecap>,
    /// Secrets masked in the note, the recap and the converted transcript.
    pub secrets_masked: u64,
}

/// The continuity verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ContinuityResult {
    /// The receiver's own store shows it resumed the carried session and wrote a turn after it.
    Continued,
    /// handoff could not tell: the receiver was still starting, or its store can't be read.
    Inconclusive,
    /// The receiver did not continue the carried conversation, or the source changed under it.
    NotContinued,
    /// The receiver starts from the note (and recap) alone, as asked.
    FreshAgent,
}

impl ContinuityResult {
    /// The result's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ContinuityResult::Continued => "continued",
            ContinuityResult::Inconclusive => "inconclusive",
            ContinuityResult::NotContinued => "not-continued",
            ContinuityResult::FreshAgent => "fresh-agent",
        }
    }
}

/// What was checked to decide continuity; null when not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinuityChecks {
    /// The source session still holds, unchanged, what was carried (it may have grown).
    pub original_appended: Option<bool>,
    /// The receiver's store holds the carried session, its messages unchanged.
    pub session_resumed: Option<bool>,
    /// The receiver wrote a prompt and an answer after the carried messages.
    pub turn_after_carried: Option<bool>,
}

/// The probe: a question the receiver answers from what it knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinuityProbe {
    /// The question asked.
    pub question: String,
    /// The receiver's answer; null when it gave none.
    pub answer: Option<String>,
    /// The answer against the note's Current state and Next steps.
    pub comparison: crate::carry::ProbeComparison,
}

/// Whether the receiver really continued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Continuity {
    /// The verdict.
    pub result: ContinuityResult,
    /// Why, in one line.
    pub reason: String,
    /// What to do now, when anything.
    pub next: Option<String>,
    /// The receiver's last message.
    pub last_message: Option<String>,
    /// The probe, when asked.
    pub probe: Option<ContinuityProbe>,
    /// The checks.
    pub checks: ContinuityChecks,
}

/// The user's message to the receiver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueMessage {
    /// The text.
    pub text: String,
    /// Whether it was delivered as part of the receiver's first prompt.
    pub sent: bool,
}

impl ContinueResult {
    /// An empty result with `outcome` and `exit_code`.
    pub fn new(outcome: ContinueOutcome, exit_code: u8) -> ContinueResult {
        ContinueResult {
            schema_version: CONTINUE_SCHEMA.into(),
            outcome,
            exit_code,
            reason: None,
            task_id: None,
            parent_task_id: None,
            handoff_id: None,
            route: None,
            source: None,
            target: None,
            worktree: None,
            checkpoint: None,
            push: None,
            note: None,
            message: None,
            receiver: None,
            carry: None,
            continuity: None,
            remote: None,
            destination: None,
        }
    }
}

/// `s` as one POSIX shell word (shlex): bare when it is made of safe characters, else quoted.
pub fn shell_word(s: &str) -> String {
    // A NUL byte can't be passed to a program at all; the empty word stands for it, which no
    // command here accepts.
    shlex::try_quote(s).map_or_else(|_| "''".to_owned(), |q| q.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip() {
        for role in [ReceiverRole::Implement, ReceiverRole::Review] {
            assert_eq!(ReceiverRole::parse(role.as_str()), Some(role));
        }
        assert_eq!(ReceiverRole::parse("build"), None);
        assert!(ReceiverRole::Implement.writes());
        assert!(!ReceiverRole::Review.writes());
    }

    #[test]
    fn resume_commands_quote_what_needs_it() {
        let c = ResumeCommand::new(
            "/tmp/my repo".into(),
            BTreeMap::new(),
            vec!["claude".into(), "--resume".into(), "it's".into()],
        );
        assert_eq!(c.shell, r#"cd '/tmp/my repo' && claude --resume "it's""#);
        let env = BTreeMap::from([("CODEX_HOME".to_owned(), "/h/codex work".to_owned())]);
        let c = ResumeCommand::new(
            "/r".into(),
            env,
            vec!["codex".into(), "resume".into(), "t".into()],
        );
        assert_eq!(
            c.shell,
            "cd /r && env 'CODEX_HOME=/h/codex work' codex resume t"
        );
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("a-b_c/d.e"), "a-b_c/d.e");
        assert_eq!(shell_word("a\0b"), "''");
    }
}
