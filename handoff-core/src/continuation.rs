//! Receivers of a continuation: the agent that takes a task over, started by `handoff continue`.
//!
//! A delegated run is bounded and ephemeral and answers with a result contract. A receiver is the
//! opposite: it is the task's new owner, so its session is persisted by its own CLI and can be
//! resumed interactively afterwards, and it answers in its own words. Adapters plan its process
//! ([`crate::Provider::receiver_invocation`]), read its session id and last message back
//! ([`crate::Provider::parse_receiver`]) and say how a person resumes it
//! ([`crate::Provider::resume_command`]).

use camino::Utf8PathBuf;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::AgentId;

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
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The same as one POSIX shell line (`cd … && …`), quoted.
    pub shell: String,
}

impl ResumeCommand {
    /// A resume command running `argv` in `cwd`.
    pub fn new(cwd: Utf8PathBuf, argv: Vec<String>) -> ResumeCommand {
        let line = argv
            .iter()
            .map(|a| shell_word(a))
            .collect::<Vec<_>>()
            .join(" ");
        let shell = format!("cd {} && {line}", shell_word(cwd.as_str()));
        ResumeCommand { cwd, argv, shell }
    }
}

/// `s` as one POSIX shell word: bare when it is made of safe characters, else single-quoted.
pub fn shell_word(s: &str) -> String {
    let safe = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b));
    if safe {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
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
            vec!["claude".into(), "--resume".into(), "it's".into()],
        );
        assert_eq!(c.shell, r"cd '/tmp/my repo' && claude --resume 'it'\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("a-b_c/d.e"), "a-b_c/d.e");
    }
}
