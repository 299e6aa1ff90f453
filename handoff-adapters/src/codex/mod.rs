//! OpenAI Codex CLI (`codex exec`).
//!
//! Isolation is Codex's own: `--sandbox read-only|workspace-write`, approvals `never`, user
//! config and exec-policy rules ignored, `--strict-config` so a pinned key the installed version
//! does not know is an error instead of silently ignored. Events come as JSONL on stdout
//! (`--json`); the answer is the schema-constrained last message (`--output-last-message`).
//! A worker that may ask for nested advice runs under a permission profile of the same
//! filesystem policy instead, whose network reaches Unix sockets (see `nested_overrides`).

mod sessions;
mod transcript;

use std::collections::BTreeMap;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, AnswerSource, GrantCapabilities, Invocation, InvocationError, McpServer, Observation,
    OutputError, Preflight, ProbeEnv, Provider, ProviderSpec, RawOutput, Receiver, ReceiverReport,
    ReceiverRequest, Request, RunDir, Sessions, StdinSource, Usage, UsageSource, agent_env,
};
use handoff_core::{
    CarriedSession, CarryTarget, SessionQuery, SessionRef, StoreEnv, Transcript, TranscriptError,
    now_iso,
};
use serde::Deserialize;
use serde_json::json;

use crate::claude::sessions::blocking;
use crate::common::{
    PROVIDER_DEFAULT_STR, json_lines, mcp_secret, one_line, receiver_grants, toml_array,
    toml_string,
};
use crate::probe;

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

/// The permission profile a worker that may ask for nested advice runs under.
const NESTED_PROFILE: &str = "handoff_nested";

/// The `--config` overrides that replace `--sandbox` for a worker that may ask for nested
/// advice. Codex's Linux sandbox denies `connect()` on every socket while the network is
/// restricted, and its permission profiles cannot allow one Unix socket by path there, so the
/// profile keeps the filesystem policy of the sandbox mode and routes the network through
/// Codex's managed proxy with no domain allowed (its own network namespace: no direct
/// connection, no reachable host) while Unix sockets may connect. `--sandbox` would override
/// the profile, so it is not passed.
fn nested_overrides(write: bool) -> Vec<String> {
    let p = NESTED_PROFILE;
    vec![
        format!("default_permissions={}", toml_string(p)),
        format!(
            "permissions.{p}.extends={}",
            toml_string(if write { ":workspace" } else { ":read-only" })
        ),
        format!("permissions.{p}.network.enabled=true"),
        format!("permissions.{p}.network.domains={{}}"),
        format!("permissions.{p}.network.dangerously_allow_all_unix_sockets=true"),
        // Without the managed proxy an enabled network is the host's, unfiltered.
        "features.network_proxy=true".to_owned(),
    ]
}

/// Whether a user override touches the permission profiles the nested overrides define.
fn touches_permissions(o: &str) -> bool {
    let key = o.split_once('=').map_or(o, |(k, _)| k).trim();
    let first = key.split('.').next().unwrap_or("");
    matches!(first, "default_permissions" | "permissions")
}

/// Codex strict structured outputs: every object lists all its properties as required (the
/// formerly optional ones become nullable) and forbids additional properties. Only subschema
/// positions are walked, so a property that happens to be called `properties` stays a property.
pub fn strict_schema(schema: &serde_json::Value) -> serde_json::Value {
    fn node(v: &mut serde_json::Value) {
        let Some(map) = v.as_object_mut() else { return };
        let required: Vec<String> = map
            .get("required")
            .and_then(|r| r.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(serde_json::Value::Object(props)) = map.get_mut("properties") {
            for (name, prop) in props.iter_mut() {
                node(prop);
                if !required.contains(name) {
                    *prop = nullable(std::mem::take(prop));
                }
            }
            let names: Vec<serde_json::Value> = props.keys().map(|k| json!(k)).collect();
            map.insert("required".into(), serde_json::Value::Array(names));
            map.insert("additionalProperties".into(), json!(false));
        }
        for key in ["items", "not"] {
            if let Some(child) = map.get_mut(key) {
                node(child);
            }
        }
        if let Some(child @ serde_json::Value::Object(_)) = map.get_mut("additionalProperties") {
            node(child);
        }
        for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
            if let Some(serde_json::Value::Array(items)) = map.get_mut(key) {
                items.iter_mut().for_each(node);
            }
        }
        for key in ["$defs", "definitions"] {
            if let Some(serde_json::Value::Object(defs)) = map.get_mut(key) {
                defs.values_mut().for_each(node);
            }
        }
    }
    fn nullable(prop: serde_json::Value) -> serde_json::Value {
        let mut p = prop;
        if let Some(serde_json::Value::Array(values)) = p.get_mut("enum") {
            if !values.contains(&serde_json::Value::Null) {
                values.push(serde_json::Value::Null);
            }
        } else if p.get("const").is_some() {
            return json!({"anyOf": [p, {"type": "null"}]});
        }
        match p.get("type").cloned() {
            Some(serde_json::Value::String(t)) => {
                p["type"] = json!([t, "null"]);
                p
            }
            Some(serde_json::Value::Array(mut ts)) => {
                if !ts.contains(&json!("null")) {
                    ts.push(json!("null"));
                }
                p["type"] = serde_json::Value::Array(ts);
                p
            }
            _ if p.get("enum").is_some() => p,
            _ => json!({"anyOf": [p, {"type": "null"}]}),
        }
    }
    let mut s = schema.clone();
    node(&mut s);
    s
}

fn mcp_overrides(
    run: &RunDir,
    env: &mut BTreeMap<String, String>,
    secrets: &mut Vec<String>,
) -> Result<(Vec<String>, Vec<String>), InvocationError> {
    let mut args = Vec::new();
    let mut names = Vec::new();
    let Some(mcp) = &run.mcp else {
        return Ok((args, names));
    };
    for (i, server) in mcp.servers.iter().enumerate() {
        let key = format!("mcp_servers.{}", toml_key(server.name()));
        names.push(server.name().to_owned());
        match server {
            McpServer::Stdio(s) => {
                args.push(format!("{key}.command={}", toml_string(&s.command)));
                args.push(format!("{key}.args={}", toml_array(&s.args)));
                let mut vars = Vec::new();
                for (target, reference) in &s.env {
                    let value = mcp_secret(run, &reference.from_env)?;
                    if env.contains_key(target) || target.starts_with("HANDOFF_") {
                        return Err(InvocationError::Unsupported(format!(
                            "MCP server '{}' sets {target}, which Codex's own environment already uses",
                            s.name
                        )));
                    }
                    env.insert(target.clone(), value.clone());
                    secrets.push(value);
                    vars.push(target.clone());
                }
                args.push(format!("{key}.env_vars={}", toml_array(&vars)));
            }
            McpServer::Http(r) | McpServer::Sse(r) => {
                args.push(format!("{key}.url={}", toml_string(&r.url)));
                let mut headers = r.headers.iter();
                match (headers.next(), headers.next()) {
                    (None, _) => {}
                    (Some((name, reference)), None)
                        if name.eq_ignore_ascii_case("authorization") =>
                    {
                        let value = mcp_secret(run, &reference.from_env)?;
                        // Codex adds "Bearer " itself: pass the bare token.
                        let token = value
                            .strip_prefix("Bearer ")
                            .or_else(|| value.strip_prefix("bearer "))
                            .unwrap_or(&value)
                            .to_owned();
                        let var = format!("HANDOFF_MCP_BEARER_{i}");
                        if env.contains_key(&var) {
                            return Err(InvocationError::Unsupported(format!(
                                "MCP server '{}' needs {var}, which another server already uses",
                                r.name
                            )));
                        }
                        args.push(format!("{key}.bearer_token_env_var={}", toml_string(&var)));
                        env.insert(var, token.clone());
                        secrets.push(value);
                        secrets.push(token);
                    }
                    _ => {
                        return Err(InvocationError::Unsupported(format!(
                            "Codex can only send an Authorization header to MCP server '{}'",
                            r.name
                        )));
                    }
                }
            }
        }
    }
    Ok((args, names))
}

fn toml_key(name: &str) -> String {
    if name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        name.to_owned()
    } else {
        toml_string(name)
    }
}

impl Codex {
    fn plan(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let mut env = agent_env(spec, &run.parent_env);
        let mut secrets = Vec::new();
        let (mcp_args, mcp_names) = mcp_overrides(run, &mut env, &mut secrets)?;
        let schema_path = run.file("provider-output.schema.json");
        let answer_path = run.file("provider-result.json");
        let write = request.writes();
        let mut args: Vec<String> = [
            "exec",
            "--json",
            "--ephemeral",
            "--ignore-user-config",
            "--ignore-rules",
            "--strict-config",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for pin in PINNED {
            args.push("--config".into());
            args.push((*pin).into());
        }
        for o in mcp_args {
            args.push("--config".into());
            args.push(o);
        }
        // The user's own overrides (endpoints, providers); pinned keys were refused when the
        // configuration was read.
        for o in &run.agent_config.config {
            args.push("--config".into());
            args.push(o.clone());
        }
        let sandbox = if write {
            "workspace-write"
        } else {
            "read-only"
        };
        // Without a shell the worker cannot run the nested command: nothing is opened.
        let nested = run.nested.as_ref().filter(|_| request.grants.resolved.bash);
        if nested.is_some() {
            if let Some(o) = run
                .agent_config
                .config
                .iter()
                .find(|o| touches_permissions(o))
            {
                return Err(InvocationError::Unsupported(format!(
                    "the Codex override {o:?} would change the permission profile a worker \
                     asking for nested advice runs under"
                )));
            }
            for o in nested_overrides(write) {
                args.push("--config".into());
                args.push(o);
            }
        } else {
            args.extend(["--sandbox".into(), sandbox.into()]);
        }
        args.extend([
            "--cd".into(),
            request.cwd.clone(),
            "--output-schema".into(),
            schema_path.to_string(),
            "--output-last-message".into(),
            answer_path.to_string(),
        ]);
        let sel = &request.selection.resolved;
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if sel.effort != PROVIDER_DEFAULT_STR {
            args.extend([
                "--config".into(),
                format!("model_reasoning_effort={}", toml_string(&sel.effort)),
            ]);
        }
        if !request.grants.resolved.bash {
            args.extend(["--disable".into(), "shell_tool".into()]);
        }
        args.push("-".into());

        let schema = strict_schema(&run.output_schema);
        let mut policy = json!({
            "enforcement": "native-filesystem-sandbox",
            "filesystem": sandbox,
            "approvals": "never",
            "ephemeral": true,
            "userConfiguration": "ignored",
            "execPolicyRules": "ignored",
            "projectDocs": "not loaded (project_doc_max_bytes=0)",
            "nativeFilesystemIsolation": true,
            "network": "blocked",
            "webSearch": "disabled",
            "bash": if request.grants.resolved.bash { "sandboxed" } else { "disabled (shell_tool)" },
            "mcpServers": mcp_names,
            "environment": "allowlist",
        });
        if let Some(nested) = nested {
            policy["network"] =
                json!("own namespace through Codex's managed proxy, no domain allowed");
            policy["nestedAdvice"] = json!({
                "endpoint": nested.endpoint,
                "handoffExe": nested.handoff_exe,
                "sandbox": format!(
                    "permission profile {NESTED_PROFILE} (extends {}), the filesystem policy of --sandbox {sandbox}",
                    if write { ":workspace" } else { ":read-only" }
                ),
                "network": "enabled through Codex's managed proxy with an empty allowlist: no domain, no direct connection",
                "unixSockets": "all (dangerously_allow_all_unix_sockets): Codex's Linux sandbox cannot allow one Unix socket by path",
                "environment": "HANDOFF_SUPERVISOR_CONTEXT reaches commands (shell_environment_policy default)",
            });
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
            files: vec![handoff_core::PrivateFile {
                path: schema_path,
                contents: serde_json::to_vec_pretty(&schema).unwrap_or_default(),
            }],
            answer: AnswerSource::File(answer_path),
            policy,
            secrets,
        })
    }
}

/// Whether a pinned key keeps the project's instruction files (AGENTS.md) away from the agent.
fn hides_project_docs(pin: &str) -> bool {
    pin.starts_with("project_doc_")
}

impl Codex {
    /// A continuation receiver: the delegated plan's containment (Codex's sandbox by role,
    /// approvals never, network and web search off, user config and exec-policy rules ignored,
    /// strict config), without what belongs to a bounded delegated run. Left out: `--ephemeral`
    /// (the session is the hand-over: it must land in `$CODEX_HOME/sessions` for
    /// `codex resume`), `--output-schema` and `--output-last-message` (a receiver answers in its
    /// own words), and the pins that hide the project's AGENTS.md: the task's new owner works
    /// by the project's own instructions.
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let env = agent_env(spec, &run.parent_env);
        let grants = receiver_grants(request.role);
        if request.resume.as_ref().is_some_and(|r| r.fork) {
            return Err(InvocationError::Unsupported(
                "Codex cannot fork a session into a chosen id: carry a copy and resume that"
                    .to_owned(),
            ));
        }
        // `codex exec resume` takes the options of `codex exec` except `--sandbox` and
        // `--cd`: the sandbox mode is set by its config key and the worktree is the process's
        // working directory.
        let mut args: Vec<String> = vec!["exec".to_owned()];
        if request.resume.is_some() {
            args.push("resume".to_owned());
        }
        args.extend(
            [
                "--json",
                "--ignore-user-config",
                "--ignore-rules",
                "--strict-config",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        for pin in PINNED.iter().filter(|p| !hides_project_docs(p)) {
            args.push("--config".into());
            args.push((*pin).into());
        }
        for o in &run.agent_config.config {
            args.push("--config".into());
            args.push(o.clone());
        }
        let sandbox = if grants.write {
            "workspace-write"
        } else {
            "read-only"
        };
        if request.resume.is_some() {
            args.extend([
                "--config".into(),
                format!("sandbox_mode={}", toml_string(sandbox)),
            ]);
        } else {
            args.extend([
                "--sandbox".into(),
                sandbox.into(),
                "--cd".into(),
                request.cwd.to_string(),
            ]);
        }
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(effort) = &request.effort {
            args.extend([
                "--config".into(),
                format!("model_reasoning_effort={}", toml_string(effort)),
            ]);
        }
        if let Some(from) = &request.resume {
            args.push(from.session_id.clone());
        }
        args.push("-".into());
        let mut policy = json!({
            "role": request.role.as_str(),
            "enforcement": "native-filesystem-sandbox",
            "filesystem": sandbox,
            "approvals": "never",
            "ephemeral": false,
            "sessionPersistence": true,
            "sessionStore": "the user's ($CODEX_HOME/sessions)",
            "userConfiguration": "ignored",
            "execPolicyRules": "ignored",
            "projectDocs": "loaded: AGENTS.md applies to the task's owner",
            "nativeFilesystemIsolation": true,
            "network": "blocked",
            "webSearch": "disabled",
            "bash": "sandboxed",
            "structuredResult": "none: the receiver answers in its own words",
            "mcpServers": [],
            "environment": "allowlist",
        });
        if let Some(from) = &request.resume {
            policy["resume"] = json!({
                "session": from.session_id,
                "fork": "none: the carried session is resumed in place (codex exec resume)",
                "sandbox": format!("sandbox_mode={sandbox} (codex exec resume has no --sandbox)"),
                "cwd": "the process's working directory (codex exec resume has no --cd)",
            });
            policy["sessionId"] = json!(from.session_id);
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

/// The oldest Codex a carried conversation is resumed with: `codex exec resume` with `--json`
/// and the receiver's switches (`--ignore-user-config`, `--ignore-rules`, `--strict-config`)
/// is in every release from there on, and the rollout layout the writer produces was checked
/// against 0.128.0 (a public parser specification of `codex-rs/rollout` at that tag) and 0.171.0
/// (our real-CLI tests); older releases are refused rather than guessed at.
pub const MIN_RESUME_VERSION: (u64, u64, u64) = (0, 128, 0);

/// Reads a receiver's `--json` events: the session is `thread.started`'s `thread_id`, the last
/// message the last `agent_message` item; `turn.failed` (or an `error` event before any
/// completed turn, or no completed turn at all) is a failure. Non-fatal warnings arrive as
/// `error` *items* and are not failures.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut failure: Option<String> = None;
    let mut last_error: Option<String> = None;
    let mut completed = false;
    for value in json_lines(&raw.stdout).flatten() {
        let str_at = |p: &str| value.pointer(p).and_then(|v| v.as_str()).map(str::to_owned);
        match value.get("type").and_then(|t| t.as_str()) {
            Some("thread.started") => {
                if let Some(id) = str_at("/thread_id").filter(|s| !s.is_empty()) {
                    report.session_id = Some(id);
                }
            }
            Some("item.completed") if str_at("/item/type").as_deref() == Some("agent_message") => {
                if let Some(text) = str_at("/item/text") {
                    report.last_message = Some(text);
                }
            }
            Some("turn.completed") => completed = true,
            Some("turn.failed") => {
                failure = Some(
                    str_at("/error/message")
                        .or_else(|| last_error.clone())
                        .unwrap_or_else(|| "turn failed".into()),
                );
            }
            Some("error") => last_error = str_at("/message"),
            _ => {}
        }
    }
    report.failure = failure
        .or_else(|| (!completed).then_some(last_error).flatten())
        .or_else(|| (!completed).then(|| "Codex ended without completing the turn".to_owned()))
        .map(|f| one_line(&f, 1024));
    report
}

/// One line of `codex exec --json`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "turn.completed")]
    TurnCompleted { usage: Option<CodexUsage> },
    #[serde(rename = "turn.failed")]
    TurnFailed { error: Option<ErrorBody> },
    #[serde(rename = "error")]
    Error { message: Option<String> },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: Item },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
struct CodexUsage {
    input_tokens: Option<u64>,
    cached_input_tokens: Option<u64>,
    cache_write_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

/// Reads Codex's event stream and answer file.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut usage: Option<Usage> = None;
    let mut failure: Option<String> = None;
    let mut last_error: Option<String> = None;
    let mut last_message: Option<String> = None;
    let mut completed = false;
    for line in raw.stdout.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // Codex prints only JSONL here; anything else is not ours to judge (the answer file is).
        let Ok(event) = serde_json::from_slice::<Event>(line) else {
            continue;
        };
        match event {
            Event::TurnCompleted { usage: u } => {
                completed = true;
                let u = u.unwrap_or_default();
                let acc = usage.get_or_insert(Usage {
                    source: UsageSource::ProviderEnvelope,
                    input_tokens: Some(0),
                    output_tokens: Some(0),
                    total_tokens: Some(0),
                    cache_read_tokens: Some(0),
                    cache_write_tokens: Some(0),
                    cost_usd: None,
                });
                let add = |a: &mut Option<u64>, b: Option<u64>| {
                    *a = Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0)))
                };
                add(&mut acc.input_tokens, u.input_tokens);
                add(&mut acc.output_tokens, u.output_tokens);
                add(&mut acc.cache_read_tokens, u.cached_input_tokens);
                add(&mut acc.cache_write_tokens, u.cache_write_input_tokens);
                acc.total_tokens = Some(
                    acc.input_tokens
                        .unwrap_or(0)
                        .saturating_add(acc.output_tokens.unwrap_or(0)),
                );
            }
            Event::TurnFailed { error } => {
                failure = Some(
                    error
                        .and_then(|e| e.message)
                        .or_else(|| last_error.clone())
                        .unwrap_or_else(|| "turn failed".into()),
                );
            }
            Event::Error { message } => last_error = message,
            Event::ItemCompleted { item } if item.kind == "agent_message" => {
                last_message = item.text;
            }
            Event::ItemCompleted { .. } | Event::Other => {}
        }
    }
    if let Some(message) = failure {
        return Ok(Observation::AgentFailure { message, usage });
    }
    if !completed && let Some(message) = last_error {
        return Ok(Observation::AgentFailure { message, usage });
    }
    let payload = match (&raw.answer_file, last_message) {
        (Some(bytes), _) if !bytes.iter().all(u8::is_ascii_whitespace) => bytes.clone(),
        (_, Some(text)) => text.into_bytes(),
        _ => return Err(OutputError::Missing),
    };
    Ok(Observation::Answer { payload, usage })
}

#[async_trait]
impl Provider for Codex {
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
        crate::progress::codex(line)
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

impl Receiver for Codex {
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
            "resume".to_owned(),
            session_id.to_owned(),
        ]
    }

    fn resume_support(&self, version: Option<&str>) -> Result<(), String> {
        crate::claude::sessions::at_least("Codex", version, MIN_RESUME_VERSION)
    }
}

#[async_trait]
impl Sessions for Codex {
    fn read_transcript(
        &self,
        path: &Utf8Path,
    ) -> Result<handoff_core::Transcript, handoff_core::TranscriptError> {
        crate::codex::transcript::read(path)
    }

    async fn find_session(
        &self,
        store: &StoreEnv,
        query: &SessionQuery,
    ) -> Result<Option<SessionRef>, TranscriptError> {
        let (store, query) = (store.clone(), query.clone());
        blocking(move || crate::codex::sessions::find(&store, &query)).await
    }

    async fn write_session(
        &self,
        store: &StoreEnv,
        transcript: &Transcript,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        let (store, transcript, target) = (store.clone(), transcript.clone(), target.clone());
        blocking(move || crate::codex::sessions::write(&store, &transcript, &target, &now_iso()))
            .await
    }

    async fn copy_session(
        &self,
        store: &StoreEnv,
        source: &SessionRef,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        let (store, source, target) = (store.clone(), source.clone(), target.clone());
        blocking(move || crate::codex::sessions::copy(&store, &source, &target, &now_iso())).await
    }
}
