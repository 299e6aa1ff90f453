//! Qwen Code (`qwen`, headless with the prompt on stdin and `-o stream-json`).
//!
//! Qwen Code is a fork of Gemini CLI whose headless output follows Claude Code's stream-json:
//! a `system`/`init` event, `assistant` and `user` messages, and a closing `result` event that
//! carries the answer, the session and the token counts (never a cost).
//!
//! Qwen has sandboxes of its own (containers, and a bubblewrap execution sandbox for its shell
//! tool); none is relied on. It runs under handoff's own sandbox instead. Its configuration
//! root (`QWEN_HOME`) is private to the run, so nothing of the user's Qwen configuration (MCP
//! servers, hooks, extensions, memories, skills) is loaded; handoff's own settings arrive as
//! the system settings file (`QWEN_CODE_SYSTEM_SETTINGS_PATH`), which outranks a project's
//! `.qwen/settings.json`: the managed auto-memory side call is off, and the effort is set there
//! (`model.generationConfig.reasoning.effort`), since no flag carries it.
//!
//! The tools are an allowlist (`--core-tools`) with a blocklist (`--exclude-tools`) of the
//! tools Qwen adds beside it (sub-agents, goals, worktrees, cron, deferred tool search); the
//! run's own MCP servers arrive with `--mcp-config` from a private file, allowlisted by name
//! (`--allowed-mcp-server-names`), their tools then offered directly. Array flags take every
//! word after them, so the prompt goes on stdin.
//!
//! A continuation receiver runs a headless turn whose session lands in the user's own store
//! (`receiver.rs`); the store is read and written as `projects/<cwd slug>/chats/<id>.jsonl`
//! (`sessions.rs`).

mod invocation;
mod network;
mod parse;
mod progress;
mod receiver;
mod sessions;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, GrantCapabilities, Invocation, InvocationError, Observation, OutputError, Preflight,
    ProbeEnv, Provider, ProviderSpec, RawOutput, Request, RunDir, TurnDefaults,
};

use crate::probe;

/// The Qwen Code adapter.
#[derive(Debug, Default, Clone)]
pub struct Qwen;

/// Static facts about Qwen Code.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::QWEN,
    executable: "qwen",
    extra_dirs: &["~/.local/bin", "/opt/homebrew/bin", "/usr/local/bin"],
    effort: &["low", "medium", "high"],
    advice_effort: None,
    max_turns: Some(TurnDefaults {
        handoff: 12,
        advice: 32,
    }),
    grants: GrantCapabilities {
        bash: true,
        bash_disable: true,
        web_search: true,
        mcp: true,
        write: true,
        nested_source: true,
    },
    native_filesystem_isolation: false,
    native_bash_sandbox: false,
    env_passthrough: &[
        // Its OpenAI-compatible provider (any such server, or Alibaba Cloud's DashScope). Keys
        // of its other providers (Anthropic's, Gemini's) are meant for other CLIs: they reach
        // Qwen only through its configuration (`[agents.qwen] env` or `pass_env`).
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "DASHSCOPE_API_KEY",
        "QWEN_DEFAULT_AUTH_TYPE",
        "QWEN_MODEL",
    ],
});

/// Flags `qwen --help` must list: every one a run's argv can carry.
pub const REQUIRED_FLAGS: &[&str] = &[
    "--allowed-mcp-server-names",
    "--approval-mode",
    "--core-tools",
    "--exclude-tools",
    "--max-session-turns",
    "--mcp-config",
    "--model",
    "--output-format",
    "--resume",
    "--session-id",
];

#[async_trait]
impl Provider for Qwen {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn tested_versions(&self) -> Option<handoff_core::TestedRange> {
        crate::compat::tested("qwen")
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    fn isolation(&self, shape: &handoff_core::RunShape) -> handoff_core::Isolation {
        invocation::isolation(shape)
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        parse::parse(raw)
    }

    fn progress(&self, line: &[u8]) -> Vec<handoff_core::ProgressEvent> {
        progress::events(line)
    }

    fn receiver(&self) -> Option<&dyn handoff_core::Receiver> {
        Some(self)
    }

    fn sessions(&self) -> Option<&dyn handoff_core::Sessions> {
        Some(self)
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        match probe::version_and_flags(exe, probe, &["--help"], REQUIRED_FLAGS).await {
            Ok(version) => Preflight {
                version: Some(version),
                failure: None,
            },
            Err(failed) => failed,
        }
    }
}
