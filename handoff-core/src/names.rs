//! The product's vocabulary: agent ids, model names, operations, modes, statuses and exit codes.

use std::borrow::Cow;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of an agent CLI handoff can drive (`codex`, `claude`, …, or an embedder's own).
///
/// Lowercase ASCII letters, digits and `-`, starting with a letter, at most 32 bytes.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(try_from = "String", into = "String")]
#[schemars(with = "AgentIdSchema")]
pub struct AgentId(Cow<'static, str>);

#[derive(JsonSchema)]
#[schemars(transparent)]
#[allow(dead_code)]
struct AgentIdSchema(
    #[schemars(regex(pattern = r"^[a-z][a-z0-9-]{0,31}$"), length(min = 1, max = 32))] String,
);

impl AgentId {
    /// OpenAI Codex CLI.
    pub const CODEX: AgentId = AgentId(Cow::Borrowed("codex"));
    /// xAI Grok CLI.
    pub const GROK: AgentId = AgentId(Cow::Borrowed("grok"));
    /// The community Grok CLI (`@vibe-kit/grok-cli`), run under handoff's own sandbox.
    pub const GROK_COMMUNITY: AgentId = AgentId(Cow::Borrowed("grok-community"));
    /// Kiro CLI.
    pub const KIRO: AgentId = AgentId(Cow::Borrowed("kiro"));
    /// Claude Code.
    pub const CLAUDE: AgentId = AgentId(Cow::Borrowed("claude"));
    /// OpenCode.
    pub const OPENCODE: AgentId = AgentId(Cow::Borrowed("opencode"));
    /// Cursor agent.
    pub const CURSOR: AgentId = AgentId(Cow::Borrowed("cursor"));
    /// GitHub Copilot CLI.
    pub const COPILOT: AgentId = AgentId(Cow::Borrowed("copilot"));
    /// Gemini CLI.
    pub const GEMINI: AgentId = AgentId(Cow::Borrowed("gemini"));

    /// Qwen Code.
    pub const QWEN: AgentId = AgentId(Cow::Borrowed("qwen"));

    /// The ten agents handoff ships adapters for, in the reference order (the community
    /// Grok CLI after xAI's, then GitHub Copilot CLI, Gemini CLI and Qwen Code).
    pub const BUILTIN: [AgentId; 10] = [
        AgentId::CODEX,
        AgentId::GROK,
        AgentId::GROK_COMMUNITY,
        AgentId::KIRO,
        AgentId::CLAUDE,
        AgentId::OPENCODE,
        AgentId::CURSOR,
        AgentId::COPILOT,
        AgentId::GEMINI,
        AgentId::QWEN,
    ];

    /// A compile-time id for an embedder's provider. The caller guarantees the syntax.
    pub const fn from_static(id: &'static str) -> AgentId {
        AgentId(Cow::Borrowed(id))
    }

    /// Parses and checks an id.
    pub fn parse(s: &str) -> Option<AgentId> {
        let ok = !s.is_empty()
            && s.len() <= 32
            && s.as_bytes()[0].is_ascii_lowercase()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        ok.then(|| AgentId(Cow::Owned(s.to_owned())))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for AgentId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        AgentId::parse(&value).ok_or_else(|| format!("invalid agent id '{value}'"))
    }
}

impl From<AgentId> for String {
    fn from(value: AgentId) -> Self {
        value.0.into_owned()
    }
}

/// Checks a `--model` value: 1–256 bytes, no surrounding whitespace, no control characters,
/// not starting with `-` (it would read as a flag).
pub fn check_model(m: &str) -> Result<(), String> {
    if m.is_empty() || m.len() > 256 {
        return Err("--model must be 1-256 bytes".into());
    }
    if m.trim() != m {
        return Err("--model must not start or end with whitespace".into());
    }
    if m.chars().any(char::is_control) {
        return Err("--model must not contain control characters".into());
    }
    if m.starts_with('-') {
        return Err("--model must not start with '-'".into());
    }
    Ok(())
}

/// What the caller asks of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// A read-only opinion.
    Advice,
    /// A bounded task in a mode.
    Handoff,
}

/// The kind of task a handoff is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Implement a bounded change (must change the worktree).
    Build,
    /// Complete one implementation phase (must change the worktree).
    Phase,
    /// Review code or a plan (must not change the worktree).
    Review,
    /// Check a claim or a change (must not change the worktree).
    Verify,
}

impl Mode {
    /// All modes, in documentation order.
    pub const ALL: [Mode; 4] = [Mode::Build, Mode::Phase, Mode::Review, Mode::Verify];

    /// Whether the mode may write the worktree.
    pub fn writes(self) -> bool {
        matches!(self, Mode::Build | Mode::Phase)
    }

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Build => "build",
            Mode::Phase => "phase",
            Mode::Review => "review",
            Mode::Verify => "verify",
        }
    }

    /// Parses a mode name.
    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

impl Operation {
    /// The operation's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Advice => "advice",
            Operation::Handoff => "handoff",
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The agent finished and every check passed.
    Succeeded,
    /// The agent said it was blocked, or a policy check stopped the run.
    Blocked,
    /// The agent failed, or its output was not what the contract says.
    Failed,
    /// The per-node timeout expired.
    TimedOut,
    /// handoff was interrupted (SIGINT/SIGTERM).
    Cancelled,
    /// The request was refused before any agent started.
    Rejected,
    /// The agent CLI is missing or failed its preflight.
    NotRun,
}

impl Status {
    /// The status's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Succeeded => "succeeded",
            Status::Blocked => "blocked",
            Status::Failed => "failed",
            Status::TimedOut => "timed_out",
            Status::Cancelled => "cancelled",
            Status::Rejected => "rejected",
            Status::NotRun => "not_run",
        }
    }
}

/// The documented exit codes of `handoff`.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// The agent failed or said it was blocked.
    pub const PROVIDER_FAILED: u8 = 2;
    /// The agent CLI is unavailable (missing, failed preflight, could not start).
    pub const PROVIDER_UNAVAILABLE: u8 = 3;
    /// The request was rejected before anything ran.
    pub const USAGE: u8 = 5;
    /// The agent's output, or the result file, is not what the contract says.
    pub const INVALID_OUTPUT: u8 = 7;
    /// The per-node timeout expired.
    pub const TIMEOUT: u8 = 8;
    /// The run was cancelled by a signal.
    pub const CANCELLED: u8 = 9;
    /// A policy check blocked the run (build without change, read-only run that mutated).
    pub const POLICY_BLOCK: u8 = 10;
}

/// A status together with the exit code it is reported with. Only the documented pairs can be
/// built, so a result can never carry an inconsistent pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    status: Status,
    code: u8,
}

impl Verdict {
    /// `succeeded`, 0.
    pub const SUCCEEDED: Verdict = Verdict::new(Status::Succeeded, exit::OK);
    /// `failed`, 2: the agent ran and reported failure.
    pub const AGENT_FAILED: Verdict = Verdict::new(Status::Failed, exit::PROVIDER_FAILED);
    /// `blocked`, 2: the agent said it was blocked.
    pub const AGENT_BLOCKED: Verdict = Verdict::new(Status::Blocked, exit::PROVIDER_FAILED);
    /// `not_run`, 3.
    pub const NOT_RUN: Verdict = Verdict::new(Status::NotRun, exit::PROVIDER_UNAVAILABLE);
    /// `rejected`, 5.
    pub const REJECTED: Verdict = Verdict::new(Status::Rejected, exit::USAGE);
    /// `failed`, 7: output (or the result file) is not what the contract says.
    pub const INVALID_OUTPUT: Verdict = Verdict::new(Status::Failed, exit::INVALID_OUTPUT);
    /// `timed_out`, 8.
    pub const TIMED_OUT: Verdict = Verdict::new(Status::TimedOut, exit::TIMEOUT);
    /// `cancelled`, 9.
    pub const CANCELLED: Verdict = Verdict::new(Status::Cancelled, exit::CANCELLED);
    /// `blocked`, 10: a policy check stopped the run.
    pub const POLICY_BLOCKED: Verdict = Verdict::new(Status::Blocked, exit::POLICY_BLOCK);

    const fn new(status: Status, code: u8) -> Verdict {
        Verdict { status, code }
    }

    /// The status.
    pub fn status(self) -> Status {
        self.status
    }

    /// The exit code.
    pub fn code(self) -> u8 {
        self.code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_are_checked() {
        assert!(AgentId::parse("codex").is_some());
        assert!(AgentId::parse("my-agent2").is_some());
        for bad in ["", "Codex", "2x", "a b", "a_b", &"a".repeat(33)] {
            assert!(AgentId::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn statuses_serialize_as_documented() {
        let s = serde_json::to_string(&Status::TimedOut).unwrap();
        assert_eq!(s, "\"timed_out\"");
        assert_eq!(
            serde_json::to_string(&Status::NotRun).unwrap(),
            "\"not_run\""
        );
    }
}
