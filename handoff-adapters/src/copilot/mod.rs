//! GitHub Copilot CLI (`copilot`, headless with the prompt on stdin and `--output-format json`).
//!
//! Copilot has a sandbox of its own (`--sandbox`), which needs `slirp4netns`, `/dev/net/tun` and
//! `iptables` and confines its file edits only best-effort; it is not relied on. Copilot runs
//! under handoff's own sandbox instead, its way to the model through handoff's filtering proxy.
//! Its configuration and state root (`COPILOT_HOME`) is private to the run, so nothing of the
//! user's Copilot configuration (MCP servers, hooks, trusted folders, plugins) is loaded; the
//! run's own MCP servers arrive with `--additional-mcp-config`, the built-in GitHub MCP servers
//! are off, and the tools are an explicit list (`--available-tools`, or `--excluded-tools`
//! when MCP servers bring tools whose names are not known in advance) backed by `--deny-tool`
//! rules for writing, the shell and URLs when they are not granted.
//!
//! Copilot has no turn limit: handoff counts its `assistant.turn_start` events and stops it
//! as a turn past the limit starts ([`handoff_core::Provider::turns_counted_by_handoff`]).
//!
//! Output is JSONL events; the last `assistant.message` without tool requests is the answer, a
//! `session.error` the CLI's own failure, and the closing `result` event names the session.
//! Token counts are only in the file `--usage-output-file` writes, next to Copilot's billing
//! units (premium requests, nano-AIU), which are reported as what they are, never as dollars.
//!
//! A continuation receiver runs a headless turn whose session lands in the user's own store
//! (`receiver.rs`); the store is read and written as `session-state/<id>/events.jsonl`
//! (`sessions.rs`).
//!
//! On its first run, Copilot extracts its JavaScript package (about 235 MB) into its package
//! cache. The preflight's `copilot --version`, outside the sandbox, does that into the user's
//! own cache, which the sandboxed run then sees read-only.

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

pub use parse::{UsageReport, usage_report};

/// The GitHub Copilot CLI adapter.
#[derive(Debug, Default, Clone)]
pub struct Copilot;

/// Static facts about the GitHub Copilot CLI.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::COPILOT,
    executable: "copilot",
    extra_dirs: &["~/.local/bin", "/opt/homebrew/bin", "/usr/local/bin"],
    effort: &["none", "minimal", "low", "medium", "high", "xhigh", "max"],
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
        // A GitHub login only as Copilot's own token: `GH_TOKEN` and `GITHUB_TOKEN` usually
        // carry far broader rights than Copilot needs, and are not passed.
        "COPILOT_GITHUB_TOKEN",
        "GH_HOST",
        "COPILOT_MODEL",
        "COPILOT_PROVIDER_*",
        "COPILOT_PKG_CACHE_HOME",
        "COPILOT_CACHE_HOME",
    ],
});

/// Flags `copilot --help` must list: every one a run's argv can carry.
pub const REQUIRED_FLAGS: &[&str] = &[
    "--additional-mcp-config",
    "--allow-all-tools",
    "--available-tools",
    "--deny-tool",
    "--disable-builtin-mcps",
    "--excluded-tools",
    "--model",
    "--no-ask-user",
    "--no-auto-update",
    "--no-custom-instructions",
    "--output-format",
    "--reasoning-effort",
    "--secret-env-vars",
    "--usage-output-file",
];

#[async_trait]
impl Provider for Copilot {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn tested_versions(&self) -> Option<handoff_core::TestedRange> {
        crate::compat::tested("copilot")
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

    fn turns_counted_by_handoff(&self) -> bool {
        true
    }

    fn receiver(&self) -> Option<&dyn handoff_core::Receiver> {
        Some(self)
    }

    fn sessions(&self) -> Option<&dyn handoff_core::Sessions> {
        Some(self)
    }

    /// The extracted package is part of what the preflight leaves: when it is gone, the
    /// preflight runs again (and extracts it again, outside the sandbox).
    fn preflight_key(&self, probe: &ProbeEnv) -> Option<Vec<String>> {
        let cache = invocation::user_package_cache(&probe.env)?;
        let extracted = cache.join("pkg").is_dir();
        Some(vec![format!("package cache {cache} extracted={extracted}")])
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        // `--version` extracts the package into the user's cache on a first run.
        match probe::version_and_flags(exe, probe, &["--help"], REQUIRED_FLAGS).await {
            Ok(version) => Preflight {
                version: Some(version),
                failure: None,
            },
            Err(failed) => failed,
        }
    }
}
