//! OpenCode (`opencode --pure run --format json`).
//!
//! OpenCode has no native sandbox; isolation is its permission system plus configuration roots
//! that belong to the run. Every configuration root (HOME, XDG config/cache/state) points into the
//! private run directory, project configuration and plugins are disabled, and the whole
//! configuration — a dedicated primary agent with an explicit permission table, the private MCP
//! servers, the user's provider table — arrives inline in `OPENCODE_CONFIG_CONTENT`. Preflight
//! asks the installed OpenCode to print the configuration it resolved (`debug config`) and
//! checks that the agent and its permissions are exactly ours. The data directory (logins and
//! sessions) is the user's own, so existing logins keep working.
//!
//! Output is NDJSON events; the last `text` event is the answer, `step_finish` events carry
//! token counts and cost, an `error` event is the CLI reporting its own failure.
//!
//! Sessions are reached through the CLI only (`export`, `import`, `session list`, `run
//! --session [--fork]`): see `sessions.rs` for what real OpenCode does with them.

mod sessions;

use std::collections::BTreeMap;

use async_trait::async_trait;
use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, AnswerSource, GrantCapabilities, Invocation, InvocationError, Observation,
    OutputError, Preflight, ProbeEnv, Provider, ProviderSpec, RawOutput, Receiver, ReceiverReport,
    ReceiverRequest, Request, RunDir, Sessions, StdinSource, Usage, UsageSource, agent_env,
};
use handoff_core::{
    CarriedSession, CarryTarget, SessionQuery, SessionRef, StoreEnv, Transcript, TranscriptError,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::common::{
    PROVIDER_DEFAULT_STR, ResolvedMcp, json_lines, one_line, receiver_grants, render_mcp,
};
use crate::probe;

/// The OpenCode adapter.
#[derive(Debug, Default, Clone)]
pub struct OpenCode;

/// Agent names in the generated configuration.
pub const WRITER: &str = "handoff_writer";
/// The read-only agent.
pub const READER: &str = "handoff_reader";

/// Static facts about OpenCode.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::OPENCODE,
    executable: "opencode",
    extra_dirs: &[
        "~/.opencode/bin",
        "~/.local/bin",
        "/opt/homebrew/bin",
        "/usr/local/bin",
    ],
    effort: &["minimal", "low", "medium", "high", "max"],
    advice_effort: None,
    max_turns: None,
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
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_GENERATIVE_AI_API_KEY",
        "MISTRAL_API_KEY",
        "DEEPSEEK_API_KEY",
        "XAI_API_KEY",
        "AWS_*",
        "AZURE_*",
    ],
});

/// Flags the two help texts must list.
pub const REQUIRED_TOP: &[&str] = &["--pure"];
/// Flags `opencode run --help` must list.
pub const REQUIRED_RUN: &[&str] = &["--agent", "--dir", "--format", "--model", "--variant"];

/// The permission table of a run: everything denied unless listed.
pub fn permission(write: bool, bash: bool, web: bool, mcp_servers: &[String]) -> Value {
    let allow = |b: bool| if b { "allow" } else { "deny" };
    let mut p = serde_json::Map::new();
    p.insert("*".into(), json!("deny"));
    p.insert("bash".into(), json!(allow(bash)));
    p.insert("edit".into(), json!(allow(write)));
    p.insert("external_directory".into(), json!("deny"));
    p.insert("glob".into(), json!("allow"));
    p.insert("grep".into(), json!("allow"));
    p.insert("list".into(), json!("allow"));
    p.insert("lsp".into(), json!("deny"));
    p.insert("question".into(), json!("deny"));
    p.insert("read".into(), json!("allow"));
    p.insert("skill".into(), json!("deny"));
    p.insert("task".into(), json!("deny"));
    p.insert("todowrite".into(), json!("deny"));
    p.insert("webfetch".into(), json!(allow(web)));
    p.insert("websearch".into(), json!(allow(web)));
    // The reference left MCP tools under the blanket deny, so granted servers were unusable:
    // each granted server's tools (`<server>_<tool>`) are allowed by name.
    // OpenCode names those tools after the server name with every character outside
    // `[A-Za-z0-9_-]` replaced by `_`, so the rule must use the same form.
    for s in mcp_servers {
        let prefix: String = s
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        p.insert(format!("{prefix}_*"), json!("allow"));
    }
    Value::Object(p)
}

/// The inline configuration (`OPENCODE_CONFIG_CONTENT`) for one agent.
pub fn inline_config(
    agent: &str,
    permission: &Value,
    mcp: Value,
    provider: Option<Value>,
) -> Value {
    let mut c = json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "snapshot": false,
        "instructions": [],
        "plugin": [],
        "mcp": mcp,
        "permission": permission,
        "agent": {
            agent: {
                "description": "handoff delegated agent",
                "mode": "primary",
                "permission": permission,
            }
        },
    });
    if let (Some(obj), Some(p)) = (c.as_object_mut(), provider) {
        obj.insert("provider".into(), p);
    }
    c
}

fn mcp_table(
    run: &RunDir,
    secrets: &mut Vec<String>,
) -> Result<(Value, Vec<String>), InvocationError> {
    let (servers, names) = render_mcp(run, secrets, |server| match server {
        ResolvedMcp::Stdio { command, args, env } => {
            let mut argv = vec![command.to_owned()];
            argv.extend(args.iter().cloned());
            json!({"type": "local", "command": argv, "environment": env, "enabled": true})
        }
        ResolvedMcp::Remote { url, headers, .. } => {
            json!({"type": "remote", "url": url, "headers": headers, "enabled": true})
        }
    })?;
    Ok((Value::Object(servers), names))
}

/// The isolated environment: configuration roots inside `root`, the user's data directory
/// (logins, sessions) kept.
fn isolated_env(
    base: &BTreeMap<String, String>,
    root: &Utf8Path,
    config: &Value,
    permission: &Value,
) -> BTreeMap<String, String> {
    let mut env = base.clone();
    let data = base
        .get("XDG_DATA_HOME")
        .filter(|d| d.starts_with('/'))
        .cloned()
        .or_else(|| base.get("HOME").map(|h| format!("{h}/.local/share")));
    env.insert("HOME".into(), root.join("home").to_string());
    env.insert("XDG_CONFIG_HOME".into(), root.join("config").to_string());
    env.insert("XDG_CACHE_HOME".into(), root.join("cache").to_string());
    env.insert("XDG_STATE_HOME".into(), root.join("state").to_string());
    if let Some(d) = data {
        env.insert("XDG_DATA_HOME".into(), d);
    }
    env.insert(
        "OPENCODE_CONFIG_DIR".into(),
        root.join("config").to_string(),
    );
    env.insert("OPENCODE_CONFIG_CONTENT".into(), config.to_string());
    env.insert("OPENCODE_PERMISSION".into(), permission.to_string());
    for (k, v) in [
        ("OPENCODE_PURE", "1"),
        ("OPENCODE_DISABLE_PROJECT_CONFIG", "1"),
        ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
        ("OPENCODE_DISABLE_CLAUDE_CODE", "1"),
        ("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
        ("OPENCODE_AUTO_SHARE", "false"),
        ("OPENCODE_ENABLE_EXA", "false"),
        ("NO_COLOR", "1"),
        ("TERM", "dumb"),
    ] {
        env.insert(k.into(), v.into());
    }
    env
}

/// Switches a receiver keeps from the delegated environment: no external or default plugins
/// (a plugin can answer permission requests itself), no updates, downloads or sharing. Not
/// `OPENCODE_DISABLE_PROJECT_CONFIG`: OpenCode 1.18 then also leaves the project's AGENTS.md
/// out, which the task's new owner works by.
const RECEIVER_SWITCHES: &[(&str, &str)] = &[
    ("OPENCODE_PURE", "1"),
    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
    ("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"),
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_AUTO_SHARE", "false"),
    ("OPENCODE_ENABLE_EXA", "false"),
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
];

fn config_dirs(root: &Utf8Path) -> Vec<Utf8PathBuf> {
    ["home", "config", "cache", "state"]
        .iter()
        .map(|d| root.join(d))
        .collect()
}

impl OpenCode {
    fn plan(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let g = &request.grants.resolved;
        let mut secrets = Vec::new();
        let (mcp, names) = mcp_table(run, &mut secrets)?;
        let agent = if g.write { WRITER } else { READER };
        let perm = permission(g.write, g.bash, g.web_search, &names);
        let provider = run
            .agent_config
            .provider
            .as_ref()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null));
        let config = inline_config(agent, &perm, mcp, provider);
        let root = run.file("opencode");
        let env = isolated_env(&agent_env(spec, &run.parent_env), &root, &config, &perm);

        let mut args: Vec<String> = vec![
            "--pure".into(),
            "run".into(),
            "--agent".into(),
            agent.into(),
            "--dir".into(),
            request.cwd.clone(),
            "--format".into(),
            "json".into(),
        ];
        let sel = &request.selection.resolved;
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if sel.effort != PROVIDER_DEFAULT_STR {
            args.extend(["--variant".into(), sel.effort.clone()]);
        }
        let mut policy = json!({
            "enforcement": "preflighted-tool-permission-policy",
            "agent": agent,
            "permission": perm,
            "nativeFilesystemIsolation": false,
            "configurationRoots": "private to the run (HOME, XDG config/cache/state); data directory kept for logins",
            "projectConfiguration": "disabled",
            "plugins": "disabled",
            "structuredResult": "driver-normalized from the last text event",
            "mcpServers": names,
            "environment": "allowlist",
        });
        if let Some(nested) = &run.nested {
            // OpenCode has no sandbox to open: its bash tool runs commands with the agent's
            // own environment, the supervisor context included.
            policy["nestedAdvice"] = json!({
                "endpoint": nested.endpoint,
                "handoffExe": nested.handoff_exe,
                "opened": "nothing: OpenCode has no sandbox",
                "environment": "HANDOFF_SUPERVISOR_CONTEXT reaches the bash tool",
            });
        }
        Ok(Invocation {
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            files: Vec::new(),
            dirs: config_dirs(&root),
            answer: AnswerSource::Stdout,
            policy,
            secrets,
        })
    }
}

impl OpenCode {
    /// A continuation receiver: the delegated plan's permission policy (the role's agent with
    /// an explicit table, everything else denied; no plugins), in the user's own HOME and XDG
    /// directories rather than private ones, so that the session lands in the user's
    /// `opencode.db` under the configuration their later `opencode --session` resolves too. The
    /// inline configuration is OpenCode's last layer: the user's and the project's files cannot
    /// change the entries of the role's table (they can only name tools it leaves to `*`).
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let g = receiver_grants(request.role);
        let agent = if g.write { WRITER } else { READER };
        let perm = permission(g.write, g.bash, g.web_search, &[]);
        let provider = run
            .agent_config
            .provider
            .as_ref()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null));
        let config = inline_config(agent, &perm, json!({}), provider);
        let mut env = agent_env(spec, &run.parent_env);
        env.insert("OPENCODE_CONFIG_CONTENT".into(), config.to_string());
        env.insert("OPENCODE_PERMISSION".into(), perm.to_string());
        for (k, v) in RECEIVER_SWITCHES {
            env.insert((*k).into(), (*v).into());
        }
        let mut args: Vec<String> = vec![
            "--pure".into(),
            "run".into(),
            "--agent".into(),
            agent.into(),
            "--dir".into(),
            request.cwd.to_string(),
            "--format".into(),
            "json".into(),
        ];
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(effort) = &request.effort {
            args.extend(["--variant".into(), effort.clone()]);
        }
        if let Some(from) = &request.resume {
            if !crate::opencode::sessions::is_session_id(&from.session_id) {
                return Err(InvocationError::Unsupported(format!(
                    "'{}' is not an OpenCode session id",
                    from.session_id
                )));
            }
            args.extend(["--session".into(), from.session_id.clone()]);
            if from.fork {
                args.push("--fork".into());
            }
        }
        let mut policy = json!({
            "role": request.role.as_str(),
            "enforcement": "preflighted-tool-permission-policy",
            "agent": agent,
            "permission": perm,
            "nativeFilesystemIsolation": false,
            "configurationRoots": "the user's (HOME and XDG directories): the session lands in their opencode.db",
            "projectConfiguration": "loaded (AGENTS.md, opencode.json): handoff's inline agent and permission table are the last layer",
            "plugins": "disabled",
            "structuredResult": "none: the receiver answers in its own words",
            "mcpServers": [],
            "sessionPersistence": true,
            "sessionStore": "the user's ($XDG_DATA_HOME/opencode/opencode.db)",
            "environment": "allowlist",
        });
        if let Some(from) = &request.resume {
            policy["resume"] = json!({
                "sessionId": from.session_id,
                "fork": if from.fork {
                    "OpenCode's own --fork: a copy under an id OpenCode chooses (reported from its events); the resumed session is left as it was"
                } else {
                    "none: the carried copy is resumed in place"
                },
                "cwd": "the session's own directory (OpenCode resumes a session only where it is filed)",
            });
        }
        Ok(Invocation {
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone(),
            stdin: StdinSource::Prompt,
            files: Vec::new(),
            dirs: Vec::new(),
            answer: AnswerSource::Stdout,
            policy,
            secrets: Vec::new(),
        })
    }
}

/// Reads a receiver's `--format json` events: the session is the events' `sessionID`, the last
/// message the last `text` part; an `error` event is a failure, and so is a run that never
/// finished a step with `reason: "stop"`.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut stopped = false;
    for value in json_lines(&raw.stdout).flatten() {
        if report.session_id.is_none()
            && let Some(id) = value.get("sessionID").and_then(Value::as_str)
            && !id.is_empty()
        {
            report.session_id = Some(id.to_owned());
        }
        match value.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = value.pointer("/part/text").and_then(Value::as_str) {
                    report.last_message = Some(text.to_owned());
                }
            }
            Some("step_finish") => {
                stopped = value.pointer("/part/reason").and_then(Value::as_str) == Some("stop");
            }
            Some("error") => {
                let e = value.get("error");
                let message = e
                    .and_then(|e| {
                        e.pointer("/data/message")
                            .or_else(|| e.get("message"))
                            .or_else(|| e.get("name"))
                    })
                    .and_then(Value::as_str)
                    .unwrap_or("OpenCode reported an error");
                report.failure = Some(one_line(message, 1024));
            }
            _ => {}
        }
    }
    if report.failure.is_none() && !stopped {
        report.failure = Some("OpenCode ended without finishing its turn".into());
    }
    report
}

/// One line of `opencode run --format json`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "text")]
    Text { part: TextPart },
    #[serde(rename = "step_finish")]
    StepFinish { part: StepPart },
    #[serde(rename = "error")]
    Error { error: Option<Value> },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct TextPart {
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
struct StepPart {
    tokens: Option<Tokens>,
    cost: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct Tokens {
    input: Option<u64>,
    output: Option<u64>,
    cache: Option<CacheTokens>,
}

#[derive(Debug, Deserialize)]
struct CacheTokens {
    read: Option<u64>,
    write: Option<u64>,
}

/// Reads OpenCode's event stream.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut last_text: Option<String> = None;
    let mut usage: Option<Usage> = None;
    let mut session: Option<String> = None;
    for line in raw.stdout.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = serde_json::from_slice(line).map_err(|_| OutputError::Envelope {
            reason: "stdout has a line that is not JSON".into(),
        })?;
        match value.get("sessionID").and_then(Value::as_str) {
            Some(id) if session.as_deref().is_none_or(|s| s == id) => {
                session = Some(id.to_owned());
            }
            Some(_) => {
                return Err(OutputError::Envelope {
                    reason: "events from more than one session".into(),
                });
            }
            None => {
                return Err(OutputError::Envelope {
                    reason: "an event without a sessionID".into(),
                });
            }
        }
        let event: Event = serde_json::from_value(value).map_err(|e| OutputError::Envelope {
            reason: format!("malformed event: {e}"),
        })?;
        match event {
            Event::Text { part } => last_text = part.text,
            Event::StepFinish { part } => {
                let u = usage.get_or_insert(Usage {
                    source: UsageSource::ProviderEnvelope,
                    input_tokens: Some(0),
                    output_tokens: Some(0),
                    total_tokens: Some(0),
                    cache_read_tokens: Some(0),
                    cache_write_tokens: Some(0),
                    cost_usd: Some(0.0),
                });
                let t = part.tokens.as_ref();
                let add = |a: &mut Option<u64>, b: Option<u64>| {
                    *a = Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0)))
                };
                let read = t.and_then(|t| t.cache.as_ref()).and_then(|c| c.read);
                let write = t.and_then(|t| t.cache.as_ref()).and_then(|c| c.write);
                add(
                    &mut u.input_tokens,
                    Some(
                        t.and_then(|t| t.input)
                            .unwrap_or(0)
                            .saturating_add(read.unwrap_or(0))
                            .saturating_add(write.unwrap_or(0)),
                    ),
                );
                add(&mut u.output_tokens, t.and_then(|t| t.output));
                add(&mut u.cache_read_tokens, read);
                add(&mut u.cache_write_tokens, write);
                u.total_tokens = Some(
                    u.input_tokens
                        .unwrap_or(0)
                        .saturating_add(u.output_tokens.unwrap_or(0)),
                );
                u.cost_usd = Some(u.cost_usd.unwrap_or(0.0) + part.cost.unwrap_or(0.0));
            }
            Event::Error { error } => {
                let message = error
                    .as_ref()
                    .and_then(|e| {
                        e.pointer("/data/message")
                            .or_else(|| e.get("message"))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .or_else(|| e.get("name").and_then(Value::as_str).map(str::to_owned))
                    })
                    .unwrap_or_else(|| "OpenCode reported an error".into());
                return Ok(Observation::AgentFailure { message, usage });
            }
            Event::Other => {}
        }
    }
    match last_text {
        Some(text) => Ok(Observation::Answer {
            payload: text.into_bytes(),
            usage,
        }),
        None => Err(OutputError::Missing),
    }
}

/// Checks what `opencode debug config` resolved against what we asked for.
pub fn check_resolved(text: &str, agent: &str, expected_permission: &Value) -> Result<(), String> {
    let start = text.find('{').ok_or("`debug config` printed no JSON")?;
    let c: Value = serde_json::from_str(text[start..].trim())
        .map_err(|e| format!("`debug config` printed invalid JSON: {e}"))?;
    let a = c
        .pointer(&format!("/agent/{agent}"))
        .ok_or_else(|| format!("the resolved configuration has no agent {agent}"))?;
    if a.get("mode").and_then(Value::as_str) != Some("primary") {
        return Err(format!("agent {agent} did not resolve as a primary agent"));
    }
    if a.get("tools").is_some() {
        return Err(format!(
            "agent {agent} resolved with a tools table of its own"
        ));
    }
    if a.get("permission") != Some(expected_permission)
        || c.get("permission") != Some(expected_permission)
    {
        return Err("the resolved permissions differ from handoff's".into());
    }
    for (key, want) in [
        ("share", json!("disabled")),
        ("snapshot", json!(false)),
        ("instructions", json!([])),
        ("mcp", json!({})),
        ("plugin", json!([])),
    ] {
        if c.get(key) != Some(&want) {
            return Err(format!(
                "the resolved configuration has {key} = {}",
                c.get(key).unwrap_or(&Value::Null)
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl Provider for OpenCode {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        parse(raw)
    }

    fn progress(&self, line: &[u8]) -> Vec<handoff_core::ProgressEvent> {
        crate::progress::opencode(line)
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        let version = match probe::version_and_flags(exe, probe, &["--help"], REQUIRED_TOP).await {
            Ok(v) => v,
            Err(failed) => return failed,
        };
        let fail = |failure: String| Preflight {
            version: Some(version.clone()),
            failure: Some(failure),
        };
        match probe::missing_flags(exe, &["run", "--help"], REQUIRED_RUN, probe).await {
            Ok(m) if m.is_empty() => {}
            Ok(m) => {
                return fail(format!(
                    "`opencode run --help` does not list {}",
                    m.join(", ")
                ));
            }
            Err(e) => return fail(e),
        }
        // Both agents, with their default permissions, must resolve exactly as generated.
        for (agent, write) in [(WRITER, true), (READER, false)] {
            let perm = permission(write, true, false, &[]);
            let config = inline_config(agent, &perm, json!({}), None);
            let root = probe.scratch.join(format!("opencode-probe-{agent}"));
            for d in config_dirs(&root) {
                if let Err(e) = std::fs::create_dir_all(&d) {
                    return fail(format!("cannot create {d}: {e}"));
                }
            }
            let env = isolated_env(&probe.env, &root, &config, &perm);
            let probe_env = ProbeEnv {
                env,
                scratch: probe.scratch.clone(),
            };
            match probe::run(exe, &["--pure", "debug", "config"], &probe_env, b"").await {
                Ok(out) if out.code == Some(0) => {
                    if let Err(e) = check_resolved(&out.stdout, agent, &perm) {
                        return fail(format!(
                            "OpenCode did not resolve handoff's {agent} policy: {e}"
                        ));
                    }
                }
                Ok(out) => {
                    return fail(format!(
                        "`opencode --pure debug config` exited with {:?}: {}",
                        out.code,
                        probe::first_line(&out.text()).unwrap_or_default()
                    ));
                }
                Err(e) => return fail(e),
            }
        }
        Preflight {
            version: Some(version),
            failure: None,
        }
    }

    fn receiver(&self) -> Option<&dyn Receiver> {
        Some(self)
    }

    fn sessions(&self) -> Option<&dyn Sessions> {
        Some(self)
    }
}

impl Receiver for OpenCode {
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
            "--session".to_owned(),
            session_id.to_owned(),
        ]
    }

    fn resume_support(&self, version: Option<&str>) -> Result<(), String> {
        crate::opencode::sessions::resume_support(version)
    }

    /// OpenCode's `run --session <id> --fork` copies a session and leaves it as it was, but the
    /// fork's id is OpenCode's own, so the continuity check could not know which session to
    /// read before the turn ends: handoff copies OpenCode sessions itself instead
    /// ([`Sessions::copy_session`], fresh ids, same content), and the receiver resumes the copy.
    fn native_fork(&self) -> bool {
        false
    }
}

#[async_trait]
impl Sessions for OpenCode {
    fn read_transcript(&self, path: &Utf8Path) -> Result<Transcript, TranscriptError> {
        crate::opencode::sessions::read(path)
    }

    async fn find_session(
        &self,
        store: &StoreEnv,
        query: &SessionQuery,
    ) -> Result<Option<SessionRef>, TranscriptError> {
        crate::opencode::sessions::find(store, query).await
    }

    async fn write_session(
        &self,
        store: &StoreEnv,
        transcript: &Transcript,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        crate::opencode::sessions::write(store, transcript, target).await
    }

    async fn copy_session(
        &self,
        store: &StoreEnv,
        source: &SessionRef,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        crate::opencode::sessions::copy(store, source, target).await
    }
}
