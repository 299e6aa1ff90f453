//! OpenAI Codex CLI (`codex exec`).
//!
//! Isolation is Codex's own: `--sandbox read-only|workspace-write`, approvals `never`, user
//! config and exec-policy rules ignored, `--strict-config` so a pinned key the installed version
//! does not know is an error instead of silently ignored. Events come as JSONL on stdout
//! (`--json`); the answer is the schema-constrained last message (`--output-last-message`).
//! A worker that may ask for nested advice runs under a permission profile of the same
//! filesystem policy instead, plus its mailbox's `in/` writable (see
//! `invocation::nested_overrides`).

mod confined;
mod invocation;
mod parse;
mod progress;
mod receiver;
mod sessions;
mod transcript;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, GrantCapabilities, Invocation, InvocationError, Observation, OutputError, Preflight,
    ProbeEnv, Provider, ProviderSpec, RawOutput, Receiver, Request, RunDir, Sessions,
};

use crate::probe;

pub use invocation::strict_schema;
use parse::parse;

/// The Codex adapter.
#[derive(Debug, Default, Clone)]
pub struct Codex;

/// Static facts about Codex.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::CODEX,
    executable: "codex",
    extra_dirs: &["/opt/homebrew/bin", "/usr/local/bin", "~/.codex/bin"],
    // The values Codex's `model_reasoning_effort` knows. The reference also allowed `max`,
    // which Codex does not have; advice therefore defaults to `xhigh`, the highest real value.
    effort: &["minimal", "low", "medium", "high", "xhigh"],
    advice_effort: Some("xhigh"),
    max_turns: None,
    grants: GrantCapabilities {
        bash: true,
        bash_disable: true,
        web_search: false,
        mcp: true,
        write: true,
        nested_source: true,
    },
    native_filesystem_isolation: true,
    native_bash_sandbox: true,
    env_passthrough: &[
        "CODEX_HOME",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_ORGANIZATION",
        "OPENAI_PROJECT",
        "CODEX_API_KEY",
        "AZURE_OPENAI_API_KEY",
    ],
});

/// Config keys pinned on every run (`--config key=value`), in order.
pub const PINNED: &[&str] = &[
    "approval_policy=\"never\"",
    "project_doc_max_bytes=0",
    "project_doc_fallback_filenames=[]",
    "project_root_markers=[\".git\"]",
    "sandbox_workspace_write.network_access=false",
    // Without this Codex still offers the model its built-in web search tool.
    "web_search=\"disabled\"",
];

/// Flags `codex exec --help` must mention.
pub const REQUIRED_FLAGS: &[&str] = &[
    "--config",
    "--strict-config",
    "--sandbox",
    "--cd",
    "--ephemeral",
    "--ignore-user-config",
    "--ignore-rules",
    "--disable",
    "--output-schema",
    "--output-last-message",
    "--json",
];

const PROBE_SENTINEL: &str = "handoff_capability_probe_unknown";

#[async_trait]
impl Provider for Codex {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn sandbox_artifacts(&self) -> Option<&'static handoff_core::SandboxArtifacts> {
        Some(&crate::compat::CODEX)
    }

    fn tested_versions(&self) -> Option<handoff_core::TestedRange> {
        crate::compat::tested("codex")
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    /// Never: its own sandbox holds its runs (handoff's only for a confined adviser).
    fn asks_for_handoff_sandbox(&self) -> bool {
        false
    }

    fn isolation(&self, shape: &handoff_core::RunShape) -> handoff_core::Isolation {
        invocation::isolation(shape)
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        parse(raw)
    }

    fn progress(&self, line: &[u8]) -> Vec<handoff_core::ProgressEvent> {
        progress::events(line)
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        let version =
            match probe::version_and_flags(exe, probe, &["exec", "--help"], REQUIRED_FLAGS).await {
                Ok(v) => v,
                Err(failed) => return failed,
            };
        let fail = |failure: String| Preflight {
            version: Some(version.clone()),
            failure: Some(failure),
        };
        // Every pinned key must be accepted and only the sentinel refused: proves the pins
        // are understood by this version, without auth or network.
        let sentinel = format!("{PROBE_SENTINEL}=true");
        let mut args = vec!["exec", "--strict-config", "--ignore-user-config"];
        for pin in PINNED {
            args.push("--config");
            args.push(pin);
        }
        args.extend(["--config", &sentinel, "--ephemeral", "-"]);
        match probe::run(exe, &args, probe, b"").await {
            Ok(out) if out.code != Some(0) && out.text().contains(PROBE_SENTINEL) => {
                let text = out.text();
                let others = PINNED
                    .iter()
                    .filter_map(|p| p.split('=').next())
                    .find(|k| text.contains(&format!("`{k}`")));
                match others {
                    Some(k) => fail(format!("Codex refuses the pinned config key `{k}`")),
                    None => Preflight {
                        version: Some(version),
                        failure: None,
                    },
                }
            }
            Ok(out) => fail(format!(
                "the strict-config probe did not behave as expected (exit {:?}): {}",
                out.code,
                probe::first_line(&out.text()).unwrap_or_default()
            )),
            Err(e) => fail(e),
        }
    }

    fn receiver(&self) -> Option<&dyn Receiver> {
        Some(self)
    }

    fn sessions(&self) -> Option<&dyn Sessions> {
        Some(self)
    }
}
