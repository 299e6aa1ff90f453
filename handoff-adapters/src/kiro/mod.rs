//! Kiro CLI (`kiro-cli chat --no-interactive`).
//!
//! Kiro has no native sandbox and no structured output. Isolation is its tool-permission
//! allowlist: exactly the tools the grants allow are trusted (`--trust-tools=fs_read[,fs_write]
//! [,execute_bash]`), never `--trust-all-tools`; in non-interactive mode an untrusted tool can't
//! be approved by anyone, so it is not run. A read-only run is therefore read-only by permission
//! only, and handoff's final-state comparison of the worktree is the actual guarantee
//! (`mutationGuarantee: final-state-detection-only`). MCP is refused (no isolated MCP surface
//! was proved), and so is web search (no control for it).
//!
//! Output is the chat transcript, ANSI-decorated: tool-use notes, then a `> ` marker before the
//! model's final message, which may open with a sentence of narrative before the JSON answer.
//! See [`parse::extract_answer`] for the exact rule used to read it.

mod invocation;
mod parse;
mod receiver;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, GrantCapabilities, Invocation, InvocationError, Observation, OutputError, Preflight,
    ProbeEnv, Provider, ProviderSpec, RawOutput, Request, RunDir,
};

use crate::probe;

use parse::parse;

/// The Kiro adapter.
#[derive(Debug, Default, Clone)]
pub struct Kiro;

/// Static facts about Kiro.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::KIRO,
    executable: "kiro-cli",
    extra_dirs: &["~/.local/bin", "/opt/homebrew/bin", "/usr/local/bin"],
    effort: &["low", "medium", "high", "xhigh", "max"],
    advice_effort: Some("max"),
    max_turns: None,
    grants: GrantCapabilities {
        bash: true,
        bash_disable: true,
        web_search: false,
        mcp: false,
        write: true,
        nested_source: true,
    },
    native_filesystem_isolation: false,
    native_bash_sandbox: false,
    env_passthrough: &["KIRO_API_KEY"],
});

/// Flags `kiro-cli chat --help` must mention. The reference also required
/// `--require-mcp-startup`, which no run uses (Kiro's MCP is refused): a Kiro that dropped or
/// renamed it would have been reported unusable for no reason, so it is not required here.
pub const REQUIRED_FLAGS: &[&str] = &[
    "--effort",
    "--model",
    "--no-interactive",
    "--trust-tools",
    "--wrap",
];

#[async_trait]
impl Provider for Kiro {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    fn isolation(&self, shape: &handoff_core::RunShape) -> handoff_core::Isolation {
        invocation::isolation(shape)
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        parse(raw)
    }

    fn receiver(&self) -> Option<&dyn handoff_core::Receiver> {
        Some(self)
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        match probe::version_and_flags(exe, probe, &["chat", "--help"], REQUIRED_FLAGS).await {
            Ok(version) => Preflight {
                version: Some(version),
                failure: None,
            },
            Err(failed) => failed,
        }
    }
}
