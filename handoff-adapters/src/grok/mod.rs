//! Grok (xAI's `grok` CLI, headless with `--prompt-file`).
//!
//! Isolation is Grok's own named sandbox profile (`--sandbox workspace|read-only`), a permission
//! mode that never asks (`auto` for writing runs, `dontAsk` for read-only ones), an explicit
//! built-in tool list with deny rules for everything not granted (MCP tools always denied),
//! planning, sub-agents and memory off, and a turn limit. The answer is constrained natively by
//! `--json-schema` and arrives in Grok's one-object JSON envelope (`structuredOutput`, else
//! `text`), with token usage and cost.
//!
//! The community `@vibe-kit/grok-cli` installs an executable with the same name but none of
//! these controls (it runs every tool unconfined); preflight recognises it by its help text and
//! refuses it without ever passing it a flag it does not have, naming the agent
//! `grok-community` that runs it under handoff's own sandbox.

mod invocation;
mod parse;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, GrantCapabilities, Invocation, InvocationError, Observation, OutputError, Preflight,
    ProbeEnv, Provider, ProviderSpec, RawOutput, Request, RunDir, TurnDefaults,
};

use crate::common::sandbox_lines;
use crate::probe::{self, mentions};

use parse::{parse, runtime_check};

/// The Grok adapter.
#[derive(Debug, Default, Clone)]
pub struct Grok;

/// Static facts about Grok.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::GROK,
    executable: "grok",
    extra_dirs: &["~/.grok/bin", "/opt/homebrew/bin", "/usr/local/bin"],
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
        mcp: false,
        write: true,
        nested_source: true,
    },
    native_filesystem_isolation: true,
    native_bash_sandbox: true,
    env_passthrough: &["GROK_API_KEY", "XAI_API_KEY"],
});

/// Flags `grok --help` must mention. `--verbatim` is on every run's argv; the reference did not
/// check it, so a Grok without it failed at run time instead of in preflight.
pub const REQUIRED_FLAGS: &[&str] = &[
    "--allow",
    "--cwd",
    "--deny",
    "--disable-web-search",
    "--json-schema",
    "--max-turns",
    "--no-memory",
    "--no-plan",
    "--no-subagents",
    "--permission-mode",
    "--prompt-file",
    "--sandbox",
    "--tools",
    "--verbatim",
];

/// Whether `help` is the community `@vibe-kit/grok-cli` (0.0.x, "A conversational AI CLI tool
/// powered by Grok with text editor capabilities", `--max-tool-rounds`, `-k/--api-key`,
/// `-u/--base-url`) rather than xAI's CLI: none of xAI's control flags, and one of its marks.
pub fn is_community_grok(help: &str) -> bool {
    let lacks_controls = ["--sandbox", "--permission-mode", "--json-schema"]
        .iter()
        .all(|f| !mentions(help, f));
    let marked = help.contains("A conversational AI CLI tool powered by Grok")
        || mentions(help, "--max-tool-rounds")
        || (mentions(help, "--api-key") && mentions(help, "--base-url"));
    lacks_controls && marked
}

/// Why the community CLI is refused, and how to use it instead.
pub const COMMUNITY_REASON: &str = "this `grok` is the community vibe-kit Grok CLI (npm @vibe-kit/grok-cli), not xAI's grok CLI: it has no --sandbox, --permission-mode or --json-schema and runs every tool unconfined, so the agent `grok` does not drive it; use the agent `grok-community` (--harness grok-community), which runs it under handoff's own sandbox, or install xAI's grok CLI";

#[async_trait]
impl Provider for Grok {
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

    fn runtime_check(&self, raw: &RawOutput) -> Option<String> {
        runtime_check(raw)
    }

    // A headless grok run leaves nothing behind but its stdout: there is no session for the
    // user to resume, so grok cannot own a task.
    fn why_no_receiver(&self) -> &str {
        "the grok CLI keeps no sessions, so there would be nothing to resume"
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
        let fail = |failure: String| Preflight {
            version: Some(version.clone()),
            failure: Some(failure),
        };
        let help = match probe::run(exe, &["--help"], probe, b"").await {
            Ok(out) if out.code == Some(0) => out.text(),
            Ok(out) => {
                return fail(format!(
                    "`{exe} --help` exited with {:?}: {}",
                    out.code,
                    probe::first_line(&out.text()).unwrap_or_default()
                ));
            }
            Err(e) => return fail(e),
        };
        // The community CLI is recognised before any probe that would pass it flags it lacks.
        if is_community_grok(&help) {
            return fail(COMMUNITY_REASON.into());
        }
        let missing: Vec<&str> = REQUIRED_FLAGS
            .iter()
            .copied()
            .filter(|f| !mentions(&help, f))
            .collect();
        if !missing.is_empty() {
            return fail(format!(
                "`grok --help` does not list {}; this version is not supported",
                missing.join(", ")
            ));
        }
        // Each sandbox profile must be accepted, and schema parsing must happen locally: an
        // invalid --json-schema is refused before any model call or login.
        let prompt = probe.scratch.join("grok-probe-prompt.txt");
        if let Err(e) = std::fs::write(&prompt, "handoff capability probe\n") {
            return fail(format!("cannot write {prompt}: {e}"));
        }
        static SCHEMA_REFUSED: std::sync::LazyLock<Option<regex::Regex>> =
            std::sync::LazyLock::new(|| {
                regex::Regex::new(r"(?is)json-schema.{0,160}invalid JSON").ok()
            });
        let mut outcome = None;
        for profile in ["workspace", "read-only"] {
            let args = [
                "--sandbox",
                profile,
                "--prompt-file",
                prompt.as_str(),
                "--json-schema",
                "handoff-invalid-json",
            ];
            let failure = match probe::run(exe, &args, probe, b"").await {
                Ok(out) => {
                    let text = out.text();
                    let refused = SCHEMA_REFUSED.as_ref().is_some_and(|re| re.is_match(&text));
                    if let Some(line) = sandbox_lines(&text).first() {
                        Some(format!(
                            "Grok's {profile} sandbox is not usable: {}",
                            line.trim()
                        ))
                    } else if out.code != Some(0) && refused {
                        None
                    } else {
                        Some(format!(
                            "the --sandbox {profile} / --json-schema probe did not behave as expected (exit {:?}): {}",
                            out.code,
                            probe::first_line(&text).unwrap_or_default()
                        ))
                    }
                }
                Err(e) => Some(e),
            };
            if failure.is_some() {
                outcome = failure;
                break;
            }
        }
        let _ = std::fs::remove_file(&prompt);
        match outcome {
            Some(f) => fail(f),
            None => Preflight {
                version: Some(version),
                failure: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn community_help_is_recognised() {
        let community = "Usage: grok [options] [command] [message...]\n\nA conversational AI CLI tool powered by Grok with text editor capabilities\n  -k, --api-key <key>\n  -u, --base-url <url>\n  --max-tool-rounds <rounds>\n";
        assert!(is_community_grok(community));
        assert!(!is_community_grok(
            "--sandbox <p>\n--permission-mode <m>\n--json-schema <s>\n--api-key\n--base-url"
        ));
        assert!(!is_community_grok("Usage: grok\n"));
    }
}
