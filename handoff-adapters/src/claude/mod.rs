//! Claude Code (`claude -p`).
//!
//! Isolation: `--safe-mode` (no CLAUDE.md, hooks, plugins, user MCP), a tool allowlist with
//! `--permission-mode dontAsk`, and Claude's native bash sandbox forced on with
//! `failIfUnavailable` (so a machine without bubblewrap/socat refuses instead of running
//! unsandboxed). A worker that may ask for nested advice gets a sandbox whose Bash reaches the
//! supervisor's socket (see `settings`). Output is `stream-json`: the final `result` event is
//! the envelope whose `structured_output` is the answer (validated by Claude against
//! `--json-schema`).

pub(crate) mod sessions;
mod transcript;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, AnswerSource, GrantCapabilities, GrantsResolved, Invocation, InvocationError,
    NestedAccess, Observation, OutputError, Preflight, PrivateFile, ProbeEnv, Provider,
    ProviderSpec, RawOutput, Receiver, ReceiverReport, ReceiverRequest, Request, RunDir, Sessions,
    StdinSource, TurnDefaults, Usage, UsageSource, agent_env, file_identity,
};
use handoff_core::{
    CarriedSession, CarryTarget, SessionQuery, SessionRef, StoreEnv, Transcript, TranscriptError,
    now_iso,
};
use serde::Deserialize;
use serde_json::json;

use crate::claude::sessions::blocking;
use crate::common::{
    PROVIDER_DEFAULT_STR, ResolvedMcp, json_lines, one_line, receiver_grants, render_mcp,
};
use crate::probe;

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
/// denied by name before the worktree, they are mounted while that is still possible.
const PROTECTED_IN_CWD: &[&str] = &[
    ".gitconfig",
    ".gitmodules",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".ripgreprc",
    ".mcp.json",
    ".vscode",
    ".idea",
    ".claude/commands",
    ".claude/agents",
];

/// Whether Claude Code's sandbox must allow every Unix socket to allow one: on Linux its
/// seccomp filter blocks creating Unix sockets and cannot tell them apart by path
/// (`allowUnixSockets` is macOS-only), so only `allowAllUnixSockets` lifts it.
const UNIX_SOCKETS_ALL_OR_NONE: bool = cfg!(target_os = "linux");

/// The `--settings` JSON: native sandbox on, no fallback to unsandboxed commands, the worktree
/// the only readable (and, for writing runs, writable) place. A read-only worktree is denied
/// after Claude's own protected names, so that its sandboxed Bash can start at all. A worker
/// that may ask for nested advice must reach the supervisor's socket from its sandboxed Bash:
/// that socket is allowed (on Linux, Unix sockets as a whole).
pub fn settings(cwd: &str, write: bool, nested: Option<&NestedAccess>) -> serde_json::Value {
    let mut deny_write: Vec<String> = Vec::new();
    if !write {
        let root = Utf8Path::new(cwd);
        deny_write.extend(PROTECTED_IN_CWD.iter().map(|p| root.join(p).to_string()));
        deny_write.push(cwd.to_owned());
    }
    let mut network = json!({"allowedDomains": []});
    if let Some(n) = nested {
        network["allowUnixSockets"] = json!([n.endpoint]);
        if UNIX_SOCKETS_ALL_OR_NONE {
            network["allowAllUnixSockets"] = json!(true);
        }
    }
    json!({
        "sandbox": {
            "enabled": true,
            "failIfUnavailable": true,
            "allowUnsandboxedCommands": false,
            "excludedCommands": [],
            "filesystem": {
                "allowRead": [cwd],
                "allowWrite": if write { vec![cwd] } else { vec![] },
                "denyRead": [],
                "denyWrite": deny_write,
            },
            "network": network,
        }
    })
}

/// The policy receipt's account of what a nested-advice worker's sandbox opens.
fn nested_receipt(nested: &NestedAccess) -> serde_json::Value {
    json!({
        "endpoint": nested.endpoint,
        "handoffExe": nested.handoff_exe,
        "unixSockets": if UNIX_SOCKETS_ALL_OR_NONE {
            "all (sandbox.network.allowAllUnixSockets): Claude Code's Linux sandbox cannot filter Unix sockets by path; TCP stays blocked"
        } else {
            "the endpoint only (sandbox.network.allowUnixSockets)"
        },
        "filesystem": "unchanged: the endpoint and the handoff binary are readable already",
        "environment": "HANDOFF_SUPERVISOR_CONTEXT reaches sandboxed commands",
    })
}

/// The tool list for a run (same for `--tools` and `--allowedTools`).
pub fn tools(request: &Request, mcp_names: &[String]) -> Vec<String> {
    tools_for(&request.grants.resolved, mcp_names)
}

/// The tool list for a set of grants.
fn tools_for(g: &GrantsResolved, mcp_names: &[String]) -> Vec<String> {
    let mut t: Vec<String> = if g.write {
        vec!["Edit", "Glob", "Grep", "Read", "Write"]
    } else {
        vec!["Glob", "Grep", "Read"]
    }
    .into_iter()
    .map(String::from)
    .collect();
    if g.bash {
        t.push("Bash".into());
    }
    if g.web_search {
        t.push("WebSearch".into());
        t.push("WebFetch".into());
    }
    t.extend(mcp_names.iter().map(|n| format!("mcp__{n}__*")));
    t
}

fn mcp_file(
    run: &RunDir,
    secrets: &mut Vec<String>,
) -> Result<Option<(PrivateFile, Vec<String>)>, InvocationError> {
    if run.mcp.is_none() {
        return Ok(None);
    }
    let (servers, names) = render_mcp(run, secrets, |server| match server {
        ResolvedMcp::Stdio { command, args, env } => {
            json!({"command": command, "args": args, "env": env})
        }
        ResolvedMcp::Remote {
            transport,
            url,
            headers,
        } => json!({"type": transport, "url": url, "headers": headers}),
    })?;
    // Secret values go into a 0600 file inside the private run directory (removed after the
    // run), never into argv.
    let file = PrivateFile {
        path: run.file("claude-mcp.json"),
        contents: serde_json::to_vec(&json!({"mcpServers": servers})).unwrap_or_default(),
    };
    Ok(Some((file, names)))
}

/// Claude's validator refuses unregistered draft URIs: drop `$schema` and `$id`.
pub fn claude_schema(schema: &serde_json::Value) -> serde_json::Value {
    let mut s = schema.clone();
    if let Some(obj) = s.as_object_mut() {
        obj.remove("$schema");
        obj.remove("$id");
    }
    s
}

impl Claude {
    fn plan(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let mut env = agent_env(spec, &run.parent_env);
        // A run must not update the CLI under itself.
        env.insert("DISABLE_AUTOUPDATER".into(), "1".into());
        let mut secrets = Vec::new();
        let mcp = mcp_file(run, &mut secrets)?;
        let mcp_names = mcp.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
        let write = request.writes();
        let tool_list = tools(request, &mcp_names).join(",");
        // Without Bash the worker cannot run the nested command: nothing is opened.
        let nested = run.nested.as_ref().filter(|_| request.grants.resolved.bash);
        let sel = &request.selection.resolved;
        let turns = sel
            .max_turns
            .unwrap_or(SPEC.max_turns.map_or(12, |d| d.handoff));
        let mut args: Vec<String> = vec![
            "--safe-mode".into(),
            "--settings".into(),
            settings(&request.cwd, write, nested).to_string(),
            "--strict-mcp-config".into(),
            "--mcp-config".into(),
            mcp.as_ref()
                .map(|(f, _)| f.path.to_string())
                .unwrap_or_else(|| EMPTY_MCP.into()),
            "--disable-slash-commands".into(),
            "--no-session-persistence".into(),
            "--no-chrome".into(),
            "--permission-mode".into(),
            "dontAsk".into(),
            "--tools".into(),
            tool_list.clone(),
            "--allowedTools".into(),
            tool_list.clone(),
            "--max-turns".into(),
            turns.to_string(),
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
            "--json-schema".into(),
            claude_schema(&run.output_schema).to_string(),
        ];
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if sel.effort != PROVIDER_DEFAULT_STR {
            args.extend(["--effort".into(), sel.effort.clone()]);
        }
        let mut policy = json!({
            "enforcement": if write { "native-bash-sandbox-plus-file-tool-permissions" } else { "read-only-tool-allowlist" },
            "approvals": "never (dontAsk)",
            "safeMode": true,
            "nativeFilesystemIsolation": false,
            "nativeBashSandbox": request.grants.resolved.bash,
            "sandboxFailIfUnavailable": true,
            "fileToolConfinement": if write { "worktree writable, everything else by tool permission" } else { "read-only tools only" },
            "toolAllowlist": tools(request, &mcp_names),
            "maxTurns": turns,
            "network": "sandboxed commands have no network; web tools only when granted",
            "structuredResult": "native JSON Schema (StructuredOutput) in the stream-json result event",
            "mcpServers": mcp_names,
            "sessionPersistence": false,
            "environment": "allowlist",
        });
        if let Some(nested) = nested {
            policy["nestedAdvice"] = nested_receipt(nested);
        } else if let Some(nested) = &run.nested {
            policy["nestedAdvice"] = json!({
                "endpoint": nested.endpoint,
                "handoffExe": nested.handoff_exe,
                "opened": "nothing: without a shell the worker cannot run the nested command",
            });
        }
        Ok(Invocation {
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs: vec![],
            files: mcp.map(|(f, _)| vec![f]).unwrap_or_default(),
            answer: AnswerSource::Stdout,
            policy,
            secrets,
        })
    }
}

impl Claude {
    /// A continuation receiver: the delegated plan's containment (bash sandbox that fails
    /// closed, tool allowlist, no approvals, no MCP servers, no browser), without what belongs
    /// to a bounded delegated run. Left out: `--no-session-persistence` (the session is the
    /// hand-over), `--json-schema` (a receiver answers in its own words), `--max-turns` (an
    /// owner's first turn is bounded by its time budget, not cut short), and `--safe-mode`,
    /// which also hides the project's CLAUDE.md and settings: the task's new owner works by the
    /// project's own instructions, as the user's later `claude --resume` will.
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let mut env = agent_env(spec, &run.parent_env);
        env.insert("DISABLE_AUTOUPDATER".into(), "1".into());
        let grants = receiver_grants(request.role);
        let write = grants.write;
        let tool_names = tools_for(&grants, &[]);
        let tool_list = tool_names.join(",");
        let mut args: Vec<String> = vec![
            "--settings".into(),
            settings(request.cwd.as_str(), write, None).to_string(),
            "--strict-mcp-config".into(),
            "--mcp-config".into(),
            EMPTY_MCP.into(),
            "--disable-slash-commands".into(),
            "--no-chrome".into(),
            "--permission-mode".into(),
            "dontAsk".into(),
            "--tools".into(),
            tool_list.clone(),
            "--allowedTools".into(),
            tool_list,
        ];
        args.extend(session_args(request));
        args.extend([
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
        ]);
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(effort) = &request.effort {
            args.extend(["--effort".into(), effort.clone()]);
        }
        let mut policy = json!({
            "role": request.role.as_str(),
            "enforcement": if write { "native-bash-sandbox-plus-file-tool-permissions" } else { "read-only-tool-allowlist" },
            "approvals": "never (dontAsk)",
            "safeMode": false,
            "projectInstructions": "loaded: CLAUDE.md and project settings apply to the task's owner (no --safe-mode)",
            "nativeFilesystemIsolation": false,
            "nativeBashSandbox": true,
            "sandboxFailIfUnavailable": true,
            "fileToolConfinement": if write { "worktree writable, everything else by tool permission" } else { "read-only tools only" },
            "toolAllowlist": tool_names,
            "maxTurns": "none: bounded by the receiver's time budget",
            "network": "sandboxed commands have no network; no web tools",
            "structuredResult": "none: the receiver answers in its own words",
            "mcpServers": [],
            "sessionPersistence": true,
            "sessionId": request.session_id,
            "sessionStore": "the user's (~/.claude/projects or CLAUDE_CONFIG_DIR)",
            "environment": "allowlist",
        });
        if let Some(from) = &request.resume {
            policy["resume"] = if from.fork {
                json!({"session": from.session_id, "fork": "native (--fork-session): the resumed session is left as it was"})
            } else {
                json!({"session": from.session_id, "fork": "none: the session is resumed in place"})
            };
            policy["sessionId"] = json!(if from.fork {
                &request.session_id
            } else {
                &from.session_id
            });
        }
        Ok(Invocation {
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone(),
            stdin: StdinSource::Prompt,
            dirs: vec![],
            files: vec![],
            answer: AnswerSource::Stdout,
            policy,
            secrets: vec![],
        })
    }
}

/// The arguments that pick the receiver's session: a new one with the chosen id; a carried
/// one resumed in place (`--resume <id>`, which keeps its id); or one forked natively into the
/// chosen id (`--resume <id> --fork-session --session-id <new>`), which leaves it unchanged.
fn session_args(request: &ReceiverRequest) -> Vec<String> {
    match &request.resume {
        None => vec!["--session-id".into(), request.session_id.clone()],
        Some(from) if from.fork => vec![
            "--resume".into(),
            from.session_id.clone(),
            "--fork-session".into(),
            "--session-id".into(),
            request.session_id.clone(),
        ],
        Some(from) => vec!["--resume".into(), from.session_id.clone()],
    }
}

/// The oldest Claude Code a carried conversation is resumed with. `--resume`,
/// `--fork-session` and `--session-id` are all in every 2.x release; the session lines the
/// writer produces follow the 2.x layout (checked by public sources against 2.1.139 to
/// 2.1.239, and by our real-CLI tests against 2.1.197), so 1.x is not accepted.
pub const MIN_RESUME_VERSION: (u64, u64, u64) = (2, 0, 0);

/// Reads a receiver's `stream-json` output: the session id from any event that names it (the
/// `init` event first, the `result` event last), the last message from the `result` event (or
/// the last assistant text), a failure from an error result or a missing one.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut result: Option<Result<ResultEvent, String>> = None;
    for value in json_lines(&raw.stdout).flatten() {
        if let Some(id) = value.get("session_id").and_then(|v| v.as_str())
            && !id.is_empty()
        {
            report.session_id = Some(id.to_owned());
        }
        match value.get("type").and_then(|t| t.as_str()) {
            // An API error comes as a synthetic assistant message: not the receiver's words.
            Some("assistant")
                if value.pointer("/message/model").and_then(|m| m.as_str())
                    != Some("<synthetic>") =>
            {
                let text = value
                    .pointer("/message/content")
                    .and_then(|c| c.as_array())
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(|t| t.as_str()) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(|t| t.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n");
                if !text.trim().is_empty() {
                    report.last_message = Some(text);
                }
            }
            Some("result") => {
                result = Some(serde_json::from_value(value).map_err(|e| e.to_string()));
            }
            _ => {}
        }
    }
    let text = || {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&raw.stderr),
            String::from_utf8_lossy(&raw.stdout)
        )
    };
    match result {
        None => {
            report.failure = Some(
                probe::line_with_ci(&text(), SANDBOX_UNAVAILABLE)
                    .unwrap_or_else(|| "Claude ended without a result event".into()),
            );
        }
        Some(Err(e)) => {
            report.failure = Some(one_line(&format!("malformed result event: {e}"), 1024))
        }
        Some(Ok(ev)) if ev.is_error == Some(true) => {
            let detail = ev
                .errors
                .as_ref()
                .map(|e| e.join("; "))
                .filter(|s| !s.trim().is_empty())
                .or_else(|| ev.result.clone().filter(|s| !s.trim().is_empty()))
                .unwrap_or_else(|| "no detail".into());
            let message = match ev.subtype.as_deref() {
                Some(s) if s != "success" => format!("{s}: {detail}"),
                _ => detail,
            };
            report.failure = Some(one_line(&message, 1024));
        }
        Some(Ok(ev)) => {
            if let Some(r) = ev.result.filter(|r| !r.trim().is_empty()) {
                report.last_message = Some(r);
            }
        }
    }
    report
}

/// The final `result` event of Claude's stream (also the whole `--output-format json` output).
#[derive(Debug, Deserialize)]
struct ResultEvent {
    subtype: Option<String>,
    is_error: Option<bool>,
    result: Option<String>,
    errors: Option<Vec<String>>,
    structured_output: Option<serde_json::Value>,
    usage: Option<ClaudeUsage>,
    total_cost_usd: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct ClaudeUsage {
    input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

fn usage_of(ev: &ResultEvent) -> Option<Usage> {
    let u = ev.usage.as_ref()?;
    let read = u.cache_read_input_tokens.unwrap_or(0);
    let write = u.cache_creation_input_tokens.unwrap_or(0);
    let input = u
        .input_tokens
        .map(|i| i.saturating_add(read).saturating_add(write));
    Some(Usage {
        source: UsageSource::ProviderEnvelope,
        input_tokens: input,
        output_tokens: u.output_tokens,
        total_tokens: match (input, u.output_tokens) {
            (Some(i), Some(o)) => Some(i.saturating_add(o)),
            _ => None,
        },
        cache_read_tokens: u.cache_read_input_tokens,
        cache_write_tokens: u.cache_creation_input_tokens,
        cost_usd: ev.total_cost_usd,
    })
}

/// Reads Claude's `stream-json` (or single `json`) output.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut result: Option<ResultEvent> = None;
    for line in raw.stdout.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_slice(line).map_err(|_| OutputError::Envelope {
                reason: "stdout has a line that is not JSON".into(),
            })?;
        if value.get("type").and_then(|t| t.as_str()) == Some("result") {
            result = Some(
                serde_json::from_value(value).map_err(|e| OutputError::Envelope {
                    reason: format!("malformed result event: {e}"),
                })?,
            );
        }
    }
    let Some(ev) = result else {
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&raw.stderr),
            String::from_utf8_lossy(&raw.stdout)
        );
        if let Some(line) = probe::line_with_ci(&text, SANDBOX_UNAVAILABLE) {
            return Ok(Observation::Unavailable { message: line });
        }
        return Err(OutputError::Envelope {
            reason: "Claude ended without a result event".into(),
        });
    };
    let usage = usage_of(&ev);
    if ev.is_error == Some(true) {
        // A sandbox that can't start is reported inside the result event when the CLI got far
        // enough to emit one: that is "not run", not the agent failing.
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&raw.stderr),
            ev.result.as_deref().unwrap_or_default()
        );
        if let Some(line) = probe::line_with_ci(&text, SANDBOX_UNAVAILABLE) {
            return Ok(Observation::Unavailable { message: line });
        }
        let detail = ev
            .errors
            .as_ref()
            .map(|e| e.join("; "))
            .filter(|s| !s.trim().is_empty())
            .or_else(|| ev.result.clone().filter(|s| !s.trim().is_empty()))
            .unwrap_or_else(|| "no detail".into());
        let message = match ev.subtype.as_deref() {
            Some(s) if s != "success" => format!("{s}: {detail}"),
            _ => detail,
        };
        return Ok(Observation::AgentFailure {
            message: message.chars().take(1024).collect(),
            usage,
        });
    }
    let payload = match (ev.structured_output, ev.result) {
        (Some(v @ serde_json::Value::Object(_)), _) => serde_json::to_vec(&v).unwrap_or_default(),
        (_, Some(text)) => text.into_bytes(),
        _ => return Err(OutputError::Missing),
    };
    Ok(Observation::Answer { payload, usage })
}

/// Signs in stderr that the sandbox was not applied although the run went on. Only stderr is
/// read: stdout carries the model's own words, which may discuss sandboxes freely.
pub fn runtime_check(raw: &RawOutput) -> Option<String> {
    static RE: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)sandbox.{0,200}(failed|unable|unavailable|unsupported|continu(e|ing) without|could not be applied|not enforced)",
        )
        .ok()
    });
    let stderr = String::from_utf8_lossy(&raw.stderr);
    if stderr.contains("refusing to start") {
        return None; // it did not run at all: reported as not_run by `parse`
    }
    let re = RE.as_ref()?;
    stderr.lines().find(|l| re.is_match(l)).map(|l| {
        format!(
            "Claude Code reported that its sandbox was not enforced: {}",
            l.trim()
        )
    })
}

fn which(name: &str, probe: &ProbeEnv) -> Option<camino::Utf8PathBuf> {
    probe
        .env
        .get("PATH")?
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| camino::Utf8PathBuf::from(d).join(name))
        .find(|p| handoff_core::is_executable(p))
}

#[async_trait]
impl Provider for Claude {
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

    fn progress(&self, line: &[u8]) -> Vec<handoff_core::ProgressEvent> {
        crate::progress::claude(line)
    }

    fn preflight_key(&self, probe: &ProbeEnv) -> Option<Vec<String>> {
        // The sandbox needs bubblewrap and socat from PATH: their presence is part of the outcome.
        Some(
            ["bwrap", "socat"]
                .iter()
                .map(|t| match which(t, probe) {
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

impl Receiver for Claude {
    fn receiver_invocation(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        self.receiver_plan(request, run)
    }

    fn parse_receiver(&self, raw: &RawOutput) -> ReceiverReport {
        parse_receiver(raw)
    }

    fn resume_command(&self, session_id: &str) -> Vec<String> {
        vec![
            SPEC.executable.to_owned(),
            "--resume".to_owned(),
            session_id.to_owned(),
        ]
    }

    fn resume_support(&self, version: Option<&str>) -> Result<(), String> {
        crate::claude::sessions::at_least("Claude Code", version, MIN_RESUME_VERSION)
    }

    fn native_fork(&self) -> bool {
        true
    }
}

#[async_trait]
impl Sessions for Claude {
    fn read_transcript(
        &self,
        path: &Utf8Path,
    ) -> Result<handoff_core::Transcript, handoff_core::TranscriptError> {
        crate::claude::transcript::read(path)
    }

    async fn find_session(
        &self,
        store: &StoreEnv,
        query: &SessionQuery,
    ) -> Result<Option<SessionRef>, TranscriptError> {
        let (store, query) = (store.clone(), query.clone());
        blocking(move || crate::claude::sessions::find(&store, &query)).await
    }

    async fn write_session(
        &self,
        store: &StoreEnv,
        transcript: &Transcript,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        let (store, transcript, target) = (store.clone(), transcript.clone(), target.clone());
        blocking(move || crate::claude::sessions::write(&store, &transcript, &target, &now_iso()))
            .await
    }

    async fn copy_session(
        &self,
        store: &StoreEnv,
        source: &SessionRef,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        let (store, source, target) = (store.clone(), source.clone(), target.clone());
        blocking(move || crate::claude::sessions::copy(&store, &source, &target)).await
    }
}
