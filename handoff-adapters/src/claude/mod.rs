//! Claude Code (`claude -p`).
//!
//! Isolation: `--safe-mode` (no CLAUDE.md, hooks, plugins, user MCP), a tool allowlist with
//! `--permission-mode dontAsk`, and Claude's native bash sandbox forced on with
//! `failIfUnavailable` (so a machine without bubblewrap/socat refuses instead of running
//! unsandboxed). A worker that may ask for nested advice gets a sandbox whose Bash may also write
//! its mailbox's `in/` (see `invocation::settings`). Output is `stream-json`: the final `result` event is
//! the envelope whose `structured_output` is the answer (validated by Claude against
//! `--json-schema`).

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
    ProbeEnv, Provider, ProviderSpec, RawOutput, Receiver, Request, RunDir, Sessions, TurnDefaults,
    file_identity, locate_on_path,
};

use crate::probe;
pub use invocation::SHARED_AREAS;
use invocation::settings;
use parse::{parse, runtime_check};

/// The Claude Code adapter.
#[derive(Debug, Default, Clone)]
pub struct Claude;

/// Static facts about Claude Code.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::CLAUDE,
    executable: "claude",
    extra_dirs: &[
        "~/.local/bin",
        "~/.claude/local",
        "/opt/homebrew/bin",
        "/usr/local/bin",
    ],
    // As listed by `claude --help` (2.1.197).
    effort: &["low", "medium", "high", "xhigh", "max"],
    advice_effort: Some("max"),
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
    native_bash_sandbox: true,
    env_passthrough: &[
        "CLAUDE_CONFIG_DIR",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_CUSTOM_HEADERS",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_*",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_MAX_RETRIES",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "CLOUD_ML_REGION",
        "AWS_*",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "API_TIMEOUT_MS",
        "DISABLE_TELEMETRY",
    ],
});

/// Flags `claude --help` must mention (`--max-turns` is proven by the behaviour probe, since
/// the help text omits it).
pub const REQUIRED_FLAGS: &[&str] = &[
    "--allowedTools",
    "--disable-slash-commands",
    "--json-schema",
    "--mcp-config",
    "--no-chrome",
    "--no-session-persistence",
    "--output-format",
    "--permission-mode",
    "--safe-mode",
    "--settings",
    "--strict-mcp-config",
    "--tools",
    "--verbose",
];

/// Claude Code's message when its sandbox can't start.
const SANDBOX_UNAVAILABLE: &str = "sandbox required but unavailable";

const EMPTY_MCP: &str = r#"{"mcpServers":{}}"#;

/// What Claude Code's bash sandbox (2.1.197) protects by name in the working directory: it
/// mounts `/dev/null` or an empty directory over each one that does not exist. Once the
/// worktree itself is denied writing those mount points cannot be created, and every sandboxed
/// command fails (`bwrap: Can't create file at <cwd>/.gitconfig: Read-only file system`);

#[async_trait]
impl Provider for Claude {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn sandbox_artifacts(&self) -> Option<&'static handoff_core::SandboxArtifacts> {
        Some(&crate::compat::CLAUDE)
    }

    fn tested_versions(&self) -> Option<handoff_core::TestedRange> {
        crate::compat::tested("claude")
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        parse(raw)
    }

    fn runtime_check(&self, raw: &RawOutput) -> Option<String> {
        runtime_check(raw)
    }

    /// Never: its own bash sandbox holds its runs (handoff's only for a confined adviser).
    fn asks_for_handoff_sandbox(&self) -> bool {
        false
    }

    fn isolation(&self, shape: &handoff_core::RunShape) -> handoff_core::Isolation {
        invocation::isolation(shape)
    }

    fn progress(&self, line: &[u8]) -> Vec<handoff_core::ProgressEvent> {
        progress::events(line)
    }

    fn preflight_key(&self, probe: &ProbeEnv) -> Option<Vec<String>> {
        // The sandbox needs bubblewrap and socat from PATH: their presence is part of the outcome.
        Some(
            ["bwrap", "socat"]
                .iter()
                .map(|t| match locate_on_path(t, &probe.env) {
                    Some(p) => file_identity(&p),
                    None => format!("{t}:missing"),
                })
                .collect(),
        )
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        let version = match probe::version_and_flags(exe, probe, &["--help"], REQUIRED_FLAGS).await
        {
            Ok(v) => v,
            Err(failed) => return failed,
        };
        let fail = |failure: String| Preflight {
            version: Some(version.clone()),
            failure: Some(failure),
        };
        let settings = settings(probe.scratch.as_str(), false, None).to_string();
        let args = [
            "--safe-mode",
            "--settings",
            &settings,
            "--strict-mcp-config",
            "--mcp-config",
            EMPTY_MCP,
            "--disable-slash-commands",
            "--no-session-persistence",
            "--permission-mode",
            "dontAsk",
            "--tools",
            "Read",
            "--allowedTools",
            "Read",
            "--max-turns",
            "1",
            "-p",
            "--output-format",
            "json",
            "--json-schema",
            "handoff-invalid-json",
        ];
        static SCHEMA_REFUSED: std::sync::LazyLock<Option<regex::Regex>> =
            std::sync::LazyLock::new(|| {
                regex::Regex::new(r"(?is)json-schema.{0,200}(invalid|JSON)").ok()
            });
        match probe::run(exe, &args, probe, b"").await {
            Ok(out) => {
                let text = out.text();
                if let Some(line) = probe::line_with(&text, SANDBOX_UNAVAILABLE) {
                    return fail(line);
                }
                let refused = SCHEMA_REFUSED.as_ref().is_some_and(|re| re.is_match(&text));
                if out.code != Some(0) && refused {
                    Preflight {
                        version: Some(version),
                        failure: None,
                    }
                } else {
                    fail(format!(
                        "the --json-schema/--max-turns probe did not behave as expected (exit {:?}): {}",
                        out.code,
                        probe::first_line(&text).unwrap_or_default()
                    ))
                }
            }
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
