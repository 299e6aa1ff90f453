//! The community Grok CLI (`@vibe-kit/grok-cli` on npm, headless with `grok -p`), agent id
//! `grok-community`.
//!
//! This CLI has no sandbox, no permission mode and no tool allowlist: in headless mode it
//! approves every tool it has (`view_file`, `create_file`, `str_replace_editor`, `bash`,
//! `search`, the todo tools) without asking. It is therefore only ever run under handoff's own
//! sandbox (bubblewrap): where that sandbox cannot run, the plan is refused, never run
//! unconfined. The sandbox makes the worktree read-only for review, verify and advice and
//! writable for build and phase; `HOME` is a directory private to the run, so nothing lands in
//! the user's `~/.grok`. Its `bash` tool runs commands through Node's `child_process` with
//! `/bin/sh`, not `$SHELL`, so those commands share the CLI's network. The CLI reads the
//! worktree's `.grok/settings.json` (model, MCP servers) and, when there is none, writes one
//! with its defaults: a build's changes then include it (a read-only run's write fails, and the
//! CLI goes on).
//!
//! Controls it cannot honour are refused before anything starts: reasoning effort, web search,
//! MCP servers, `--bash false` (its shell cannot be withheld). Turns map to
//! `--max-tool-rounds`; the model, base URL and key come from `GROK_MODEL`, `GROK_BASE_URL`
//! and `GROK_API_KEY` (never `-m/-u/-k`: the CLI saves `-k/-u` into its settings file).
//!
//! Headless output is one OpenAI-style chat message per line; the answer is the content of the
//! last assistant message. API errors exit 0 with `Sorry, I encountered an error: …` as that
//! content, which is read as the agent's failure ([`parse::parse`]). Token usage is not
//! reported. The CLI keeps no sessions, so it can neither be continued from nor receive a task.
//!
//! xAI's `grok` CLI installs an executable with the same name; preflight tells them apart by
//! the help text ([`crate::is_community_grok`]) and refuses the other one, naming the agent id
//! that drives it.

mod invocation;
mod parse;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, GrantCapabilities, Invocation, InvocationError, Observation, OutputError, Preflight,
    ProbeEnv, Provider, ProviderSpec, RawOutput, Request, RunDir, TurnDefaults,
};

use crate::grok::is_community_grok;
use crate::probe::{self, mentions};

/// The community Grok CLI adapter.
#[derive(Debug, Default, Clone)]
pub struct GrokCommunity;

/// Static facts about the community Grok CLI.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::GROK_COMMUNITY,
    executable: "grok",
    extra_dirs: &["/opt/homebrew/bin", "/usr/local/bin"],
    // No reasoning-effort control.
    effort: &[],
    advice_effort: None,
    // `--max-tool-rounds` (the CLI's own default is 400).
    max_turns: Some(TurnDefaults {
        handoff: 12,
        advice: 32,
    }),
    grants: GrantCapabilities {
        bash: true,
        // No tool allowlist: its bash tool is always offered.
        bash_disable: false,
        // Its requests turn xAI's live search off; it has no web tool.
        web_search: false,
        mcp: false,
        write: true,
        nested_source: true,
    },
    native_filesystem_isolation: false,
    native_bash_sandbox: false,
    env_passthrough: &["GROK_API_KEY", "GROK_BASE_URL", "GROK_MODEL"],
});

/// Flags `grok --help` must mention.
pub const REQUIRED_FLAGS: &[&str] = &["--directory", "--max-tool-rounds", "--prompt"];

/// Why xAI's grok CLI is refused under this agent id.
pub const XAI_REASON: &str = "this `grok` is xAI's grok CLI, not the community vibe-kit Grok CLI (npm @vibe-kit/grok-cli) the agent `grok-community` drives; use the agent `grok` (--harness grok) for it";

#[async_trait]
impl Provider for GrokCommunity {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn tested_versions(&self) -> Option<handoff_core::TestedRange> {
        crate::compat::tested("grok-community")
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

    fn why_no_receiver(&self) -> &str {
        "the community grok CLI keeps no sessions (its stdout is the only transcript), so there would be nothing to resume"
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        let version = match probe::version(exe, probe).await {
            Ok(v) => v,
            Err(e) => {
                return Preflight {
                    version: None,
                    failure: Some(e),
                };
            }
        };
        let failure = match probe::run(exe, &["--help"], probe, b"").await {
            Ok(out) if out.code == Some(0) => check_help(&out.text()),
            Ok(out) => Some(format!(
                "`{exe} --help` exited with {:?}: {}",
                out.code,
                probe::first_line(&out.text()).unwrap_or_default()
            )),
            Err(e) => Some(e),
        };
        Preflight {
            version: Some(version),
            failure,
        }
    }
}

/// What is wrong with the CLI whose help text is `help`, if anything: it must be the
/// community CLI, with every flag a run uses.
pub fn check_help(help: &str) -> Option<String> {
    if !is_community_grok(help) {
        let xai = ["--sandbox", "--permission-mode", "--json-schema"]
            .iter()
            .any(|f| mentions(help, f));
        return Some(if xai {
            XAI_REASON.into()
        } else {
            "`grok --help` is not the community vibe-kit Grok CLI's (npm @vibe-kit/grok-cli); this `grok` is not supported by the agent `grok-community`".into()
        });
    }
    let missing: Vec<&str> = REQUIRED_FLAGS
        .iter()
        .copied()
        .filter(|f| !mentions(help, f))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "`grok --help` does not list {}; this version of the community grok CLI is not supported",
            missing.join(", ")
        )
    })
}
