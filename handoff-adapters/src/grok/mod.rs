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
//! refuses it without ever passing it a flag it does not have.

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, AnswerSource, GrantCapabilities, Invocation, InvocationError, Observation,
    OutputError, Preflight, PrivateFile, ProbeEnv, Provider, ProviderSpec, RawOutput, Request,
    RunDir, StdinSource, TurnDefaults, Usage, UsageSource, agent_env,
};
use serde_json::{Value, json};

use crate::common::PROVIDER_DEFAULT_STR;
use crate::kiro::reported_error;
use crate::probe::{self, mentions};

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

/// The name of the prompt file in the run directory.
pub const PROMPT_FILE: &str = "request.txt";

/// Sandbox trouble as Grok words it.
static SANDBOX_FAILURE: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(
    || {
        regex::Regex::new(
            r"(?i)sandbox.{0,200}(failed|unable|unavailable|unsupported|not applied|not enforced|could not be applied|refusing to start|continu(e|ing) without)",
        )
        .ok()
    },
);

/// Grok going on although its sandbox was not applied.
static CONTINUED: std::sync::LazyLock<Option<regex::Regex>> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)continu(e|ing) without").ok());

/// The lines of `text` that report sandbox trouble.
fn sandbox_lines(text: &str) -> Vec<&str> {
    let Some(re) = SANDBOX_FAILURE.as_ref() else {
        return Vec::new();
    };
    text.lines().filter(|l| re.is_match(l)).collect()
}

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

/// Why the community CLI is refused.
pub const COMMUNITY_REASON: &str = "this `grok` is the community vibe-kit Grok CLI (npm @vibe-kit/grok-cli), not xAI's grok CLI: it has no --sandbox, --permission-mode or --json-schema and runs every tool unconfined, so it is not supported; install xAI's grok CLI";

/// The built-in tools of a run: `Read, Grep`, `Edit` (writing runs), `Bash` (bash granted),
/// `WebSearch, WebFetch` (web granted).
pub fn tools(request: &Request) -> Vec<&'static str> {
    let g = &request.grants.resolved;
    let mut t = vec!["Read", "Grep"];
    if g.write {
        t.push("Edit");
    }
    if g.bash {
        t.push("Bash");
    }
    if g.web_search {
        t.extend(["WebSearch", "WebFetch"]);
    }
    t
}

/// The deny rules of a run: `Bash(*)` without bash, `Edit(*)` when read-only, always
/// `MCPTool(*)`, `WebFetch(*)` without web.
pub fn deny_rules(request: &Request) -> Vec<&'static str> {
    let g = &request.grants.resolved;
    let mut d = Vec::new();
    if !g.bash {
        d.push("Bash(*)");
    }
    if !g.write {
        d.push("Edit(*)");
    }
    d.push("MCPTool(*)");
    if !g.web_search {
        d.push("WebFetch(*)");
    }
    d
}

impl Grok {
    fn plan(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        // Validation refuses MCP before a plan is made; refusing here too keeps the plan
        // fail-closed if a caller skips validation.
        if run.mcp.as_ref().is_some_and(|m| !m.servers.is_empty()) {
            return Err(InvocationError::Unsupported(
                "Grok private MCP isolation was not proved; --mcp-config is unsupported for grok"
                    .into(),
            ));
        }
        let g = &request.grants.resolved;
        let write = request.writes();
        let sel = &request.selection.resolved;
        let turns = sel
            .max_turns
            .unwrap_or(SPEC.max_turns.map_or(12, |d| d.handoff));
        let prompt_file = run.file(PROMPT_FILE);
        let profile = if write { "workspace" } else { "read-only" };
        let permission_mode = if write { "auto" } else { "dontAsk" };
        let tool_list = tools(request);
        let denies = deny_rules(request);
        let allows: Vec<&str> = if g.web_search {
            vec!["WebFetch(*)"]
        } else {
            vec![]
        };
        let mut args: Vec<String> = vec![
            "--prompt-file".into(),
            prompt_file.to_string(),
            "--cwd".into(),
            request.cwd.clone(),
            "--sandbox".into(),
            profile.into(),
            "--permission-mode".into(),
            permission_mode.into(),
            "--no-plan".into(),
            "--no-subagents".into(),
            "--no-memory".into(),
            "--max-turns".into(),
            turns.to_string(),
            "--json-schema".into(),
            run.output_schema.to_string(),
            "--verbatim".into(),
        ];
        if !g.web_search {
            args.push("--disable-web-search".into());
        }
        args.extend(["--tools".into(), tool_list.join(",")]);
        for rule in &denies {
            args.extend(["--deny".into(), (*rule).into()]);
        }
        for rule in &allows {
            args.extend(["--allow".into(), (*rule).into()]);
        }
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if sel.effort != PROVIDER_DEFAULT_STR {
            args.extend(["--effort".into(), sel.effort.clone()]);
        }
        let policy = json!({
            "enforcement": "native-named-sandbox",
            "sandboxProfile": profile,
            "permissionMode": permission_mode,
            "approvals": "never",
            "plan": false,
            "subagents": false,
            "memory": false,
            "maxTurns": turns,
            "tools": tool_list,
            "allow": allows,
            "deny": denies,
            "nativeFilesystemIsolation": true,
            "nativeBashSandbox": g.bash,
            "readScope": "provider-profile-defined-and-broader-than-cwd",
            "writableLocations": if write { json!(["cwd", "provider-state", "temporary-directories"]) } else { json!([]) },
            "webSearch": if g.web_search { "enabled (WebSearch, WebFetch)" } else { "disabled" },
            "mcpServers": [],
            "structuredResult": "native --json-schema in Grok's JSON envelope",
            "environment": "allowlist",
        });
        Ok(Invocation {
            program: run.executable.clone(),
            args,
            env: agent_env(spec, &run.parent_env),
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Null,
            dirs: vec![],
            files: vec![PrivateFile {
                path: prompt_file,
                contents: run.prompt.clone().into_bytes(),
            }],
            answer: AnswerSource::Stdout,
            policy,
            secrets: vec![],
        })
    }
}

/// A non-negative integer field.
fn count(obj: &Value, key: &str) -> Option<u64> {
    obj.get(key).and_then(Value::as_u64)
}

/// Usage from Grok's envelope: input = `input_tokens` + `cache_read_input_tokens`, output =
/// `output_tokens`, cost = `total_cost_usd`. Grok's `total_tokens` includes the cache reads; an
/// envelope whose total disagrees with input + output is not trusted (as in the reference) and
/// gives no usage.
pub fn envelope_usage(envelope: &Value) -> Option<Usage> {
    let u = envelope.get("usage")?;
    let read = count(u, "cache_read_input_tokens");
    let input = count(u, "input_tokens")?.saturating_add(read.unwrap_or(0));
    let output = count(u, "output_tokens")?;
    let total = input.saturating_add(output);
    if count(u, "total_tokens").is_some_and(|t| t != total) {
        return None;
    }
    Some(Usage {
        source: UsageSource::ProviderEnvelope,
        input_tokens: Some(input),
        output_tokens: Some(output),
        total_tokens: Some(total),
        cache_read_tokens: read,
        cache_write_tokens: None,
        cost_usd: envelope
            .get("total_cost_usd")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0),
    })
}

/// A CLI error value as text: a string, or an object's `message`, else its JSON.
fn error_text(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    };
    let text = if text.trim().is_empty() {
        "no detail".to_owned()
    } else {
        text
    };
    text.chars().take(1024).collect()
}

/// What a blank stdout means: a sandbox that could not start (`Unavailable`), an error Grok
/// reported on stderr (`AgentFailure`), or no answer at all.
pub(crate) fn no_stdout(raw: &RawOutput) -> Result<Observation, OutputError> {
    let stderr = String::from_utf8_lossy(&raw.stderr);
    if raw.exit_code != Some(0)
        && let Some(line) = sandbox_lines(&stderr).first()
    {
        return Ok(Observation::Unavailable {
            message: line.trim().chars().take(1024).collect(),
        });
    }
    match reported_error(&raw.stderr) {
        Some(message) => Ok(Observation::AgentFailure {
            message,
            usage: None,
        }),
        None => Err(OutputError::Missing),
    }
}

/// Reads Grok's stdout: exactly one JSON value.
///
/// - A provider-output object itself (`schemaVersion` at the top) is the answer.
/// - Otherwise it must be Grok's envelope object. An `error` in it is the agent's own failure.
///   Else `structuredOutput` (an object) is the answer; else a non-blank `text` (Grok 0.2.103
///   reports `structuredOutputError` while `text` holds a valid answer, which the engine then
///   checks); else a `structuredOutputError` is the agent's own failure; else no answer.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let trimmed = raw.stdout.trim_ascii();
    if trimmed.is_empty() {
        return no_stdout(raw);
    }
    let value: Value = serde_json::from_slice(trimmed).map_err(|e| OutputError::Envelope {
        reason: format!("Grok's stdout is not exactly one JSON value: {e}"),
    })?;
    let Value::Object(obj) = &value else {
        return Err(OutputError::Envelope {
            reason: "Grok's stdout is not a JSON object".into(),
        });
    };
    if obj.contains_key("schemaVersion") {
        return Ok(Observation::Answer {
            payload: trimmed.to_vec(),
            usage: None,
        });
    }
    let usage = envelope_usage(&value);
    if let Some(err) = obj.get("error").filter(|e| !e.is_null()) {
        return Ok(Observation::AgentFailure {
            message: error_text(err),
            usage,
        });
    }
    if let Some(v @ Value::Object(_)) = obj.get("structuredOutput") {
        return Ok(Observation::Answer {
            payload: serde_json::to_vec(v).unwrap_or_default(),
            usage,
        });
    }
    if let Some(Value::String(text)) = obj.get("text")
        && !text.trim().is_empty()
    {
        return Ok(Observation::Answer {
            payload: text.clone().into_bytes(),
            usage,
        });
    }
    if let Some(err) = obj.get("structuredOutputError").filter(|e| !e.is_null()) {
        return Ok(Observation::AgentFailure {
            message: format!("structured output failed: {}", error_text(err))
                .chars()
                .take(1024)
                .collect(),
            usage,
        });
    }
    Err(OutputError::Missing)
}

/// The block verdict shared with Cursor: a stderr line naming sandbox trouble means the run
/// was not isolated as planned, unless the CLI evidently refused to run at all (it exited
/// non-zero with nothing on stdout and did not say it went on without the sandbox), which
/// `parse` reports as `Unavailable`. Only stderr is read: stdout carries the model's own words,
/// which may discuss sandboxes freely.
pub(crate) fn sandbox_block(raw: &RawOutput, agent: &str) -> Option<String> {
    let stderr = String::from_utf8_lossy(&raw.stderr);
    let lines = sandbox_lines(&stderr);
    let first = lines.first()?;
    let continued = lines
        .iter()
        .find(|l| CONTINUED.as_ref().is_some_and(|re| re.is_match(l)));
    let refused = raw.exit_code != Some(0) && raw.stdout.trim_ascii().is_empty();
    match continued {
        Some(line) => Some(format!(
            "{agent} reported that its requested sandbox was not enforced: {}",
            line.trim()
        )),
        None if refused => None,
        None => Some(format!(
            "{agent} reported that its requested sandbox was not enforced: {}",
            first.trim()
        )),
    }
}

/// See [`sandbox_block`].
pub fn runtime_check(raw: &RawOutput) -> Option<String> {
    sandbox_block(raw, "Grok")
}

#[async_trait]
impl Provider for Grok {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
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
