//! Gemini CLI (`gemini`, headless with the prompt on stdin and `--output-format stream-json`).
//!
//! Gemini CLI has a sandbox of its own (`--sandbox`), which on Linux runs the CLI in a docker
//! or podman container from an image it fetches; it is not used. Gemini runs under handoff's
//! own sandbox instead, its way to the model through handoff's filtering proxy (it honours
//! `HTTPS_PROXY` and `HTTP_PROXY`, loopback included).
//!
//! Effort, the turn limit and MCP servers are settings, not flags: every run gets a Gemini home
//! of its own (`GEMINI_CLI_HOME`, under which Gemini keeps `.gemini/`) whose `settings.json`
//! carries them, so nothing of the user's `~/.gemini` (settings, MCP servers, extensions,
//! hooks, skills) is loaded. The tools are an explicit list (`tools.core`) backed by deny
//! rules of the admin tier (`--admin-policy`), which the model never sees and no workspace
//! policy outranks. The model is always named (`-m`): without one, Gemini first asks a
//! routing model about every turn.
//!
//! With a base URL of the user's (`GOOGLE_GEMINI_BASE_URL`) Gemini CLI 0.61 selects an auth
//! type it then refuses ("Invalid auth method selected"); the settings select the API key's
//! (`security.auth.selectedType`), which honours the base URL too.
//!
//! Output is JSONL events; the assistant's text after the last tool call is the answer, a
//! `result` event with `status: "error"` the CLI's own failure (an API error quotes the API's
//! body), and the `init` event names the session. Gemini ends a run over its turn limit with
//! exit code 53.
//!
//! A continuation receiver runs a headless turn whose session lands in the user's own store
//! (`receiver.rs`); the store is read and written as `~/.gemini/tmp/<slug>/chats/*.jsonl`
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

pub use invocation::{DEFAULT_MODEL, thinking_budget};

/// The Gemini CLI adapter.
#[derive(Debug, Default, Clone)]
pub struct Gemini;

/// Static facts about Gemini CLI.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::GEMINI,
    executable: "gemini",
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
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_VERTEX_BASE_URL",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_APPLICATION_CREDENTIALS",
        // Where the user's Gemini keeps its sessions (a continuation's store); a delegated run
        // sets its own.
        "GEMINI_CLI_HOME",
    ],
});

/// Flags `gemini --help` must list: every one a run's argv can carry.
pub const REQUIRED_FLAGS: &[&str] = &[
    "--admin-policy",
    "--allowed-mcp-server-names",
    "--approval-mode",
    "--extensions",
    "--model",
    "--output-format",
    "--skip-trust",
];

#[async_trait]
impl Provider for Gemini {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn tested_versions(&self) -> Option<handoff_core::TestedRange> {
        crate::compat::tested("gemini")
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    fn isolation(&self, shape: &handoff_core::RunShape) -> handoff_core::Isolation {
        crate::common::proxied_shell_isolation(shape)
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

    /// Even `gemini --version` writes into its home (`projects.json` temporaries): the probes
    /// get a home in the probe's scratch directory, never the user's `~/.gemini`.
    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        let mut probe = probe.clone();
        probe.env.insert(
            "GEMINI_CLI_HOME".into(),
            probe.scratch.join("gemini-home").to_string(),
        );
        match probe::version_and_flags(exe, &probe, &["--help"], REQUIRED_FLAGS).await {
            Ok(version) => Preflight {
                version: Some(version),
                failure: None,
            },
            Err(failed) => failed,
        }
    }
}
