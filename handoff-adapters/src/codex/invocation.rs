//! A delegated `codex exec` run: Codex's own sandbox and approvals, the pinned configuration
//! keys, the private MCP servers as `--config` overrides, and the strict output schema of the
//! answer.

use std::collections::BTreeMap;

use handoff_core::{
    AnswerSource, Enforcement, FilesystemRead, FilesystemWrite, Invocation, InvocationError,
    Isolation, McpServer, Network, Request, RunDir, RunShape, StdinSource, UnixSockets, agent_env,
    process_containment,
};
use serde_json::json;

use super::{Codex, PINNED, SPEC};
use crate::common::{PROVIDER_DEFAULT_STR, mcp_secret, toml_array, toml_string};

/// The permission profile a worker that may ask for nested advice runs under.
const NESTED_PROFILE: &str = "handoff_nested";

/// The `--config` overrides that replace `--sandbox` for a worker that may ask for nested
/// advice: a permission profile that extends the sandbox mode's own (`:read-only` or
/// `:workspace`) with one writable path, the mailbox's `in/`. The network and Unix sockets stay
/// as the mode has them: closed. `--add-dir` would be ignored under `--sandbox read-only`, and
/// `--sandbox` would override the profile, so neither is passed.
fn nested_overrides(write: bool, inbox: &str) -> Vec<String> {
    let p = NESTED_PROFILE;
    vec![
        format!("default_permissions={}", toml_string(p)),
        format!(
            "permissions.{p}.extends={}",
            toml_string(parent_profile(write))
        ),
        format!(
            "permissions.{p}.filesystem={{{}={}}}",
            toml_string(inbox),
            toml_string("write")
        ),
    ]
}

/// The built-in permission profile of the sandbox mode.
fn parent_profile(write: bool) -> &'static str {
    if write { ":workspace" } else { ":read-only" }
}

/// What a run of `shape` can do under the configuration [`Codex::plan`] builds: Codex's
/// sandbox holds every command and patch.
pub(super) fn isolation(shape: &RunShape) -> Isolation {
    if super::confined::applies(shape) {
        return super::confined::isolation(shape);
    }
    let g = &shape.grants;
    Isolation {
        enforcement: Enforcement::Native,
        // `workspace-write` writes the worktree and the temporary directories (`/tmp`,
        // `$TMPDIR`); `read-only` writes nothing, patches included.
        filesystem_write: if g.write {
            FilesystemWrite::WorktreeAndTemp
        } else {
            FilesystemWrite::None
        },
        // Both modes read the whole disk.
        filesystem_read: FilesystemRead::Anywhere,
        // Network access off, web search disabled, for a nested worker too.
        network: Network::None,
        // The sandbox denies every Unix socket. A worker that may ask for advice writes its
        // mailbox's `in/` as well: the supervisor's channel, not a place anything else reads,
        // so it does not count as a write.
        unix_sockets: UnixSockets::None,
        process: process_containment(),
    }
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
        if p.get("anyOf")
            .and_then(|a| a.as_array())
            .is_some_and(|a| a.contains(&json!({"type": "null"})))
        {
            return p;
        }
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
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let mut env = agent_env(spec, &run.parent_env);
        let mut secrets = Vec::new();
        let (mcp_args, mcp_names) = mcp_overrides(run, &mut env, &mut secrets)?;
        // Held by handoff's sandbox when the supervisor asked for it (a confined adviser).
        let confined = (run.confined && run.handoff_sandbox)
            .then(|| super::confined::plan(run, &mut env))
            .transpose()?;
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
        if let Some(nested) = nested {
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
            for o in nested_overrides(write, nested.inbox().as_str()) {
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
            policy["nestedAdvice"] = json!({
                "mailbox": nested.mailbox,
                "handoffExe": nested.handoff_exe,
                "writable": [nested.inbox()],
                "readable": [nested.outbox()],
                "sandbox": format!(
                    "permission profile {NESTED_PROFILE}: extends {}, the filesystem policy of --sandbox {sandbox}, plus the mailbox's in/ writable",
                    parent_profile(write)
                ),
                "network": "unchanged: blocked",
                "unixSockets": "none: the sandbox denies every Unix socket",
                "environment": "HANDOFF_SUPERVISOR_CONTEXT reaches commands (shell_environment_policy default)",
            });
        } else if let Some(nested) = &run.nested {
            policy["nestedAdvice"] = json!({
                "mailbox": nested.mailbox,
                "handoffExe": nested.handoff_exe,
                "opened": "nothing: without a shell the worker cannot run the nested command",
            });
        }
        if confined.is_some() {
            policy["enforcement"] = json!("handoff-sandbox-and-native-filesystem-sandbox");
            policy["confined"] = super::confined::receipt();
        }
        let (sandbox, dirs) = confined.map_or((None, Vec::new()), |(s, d)| (Some(s), d));
        Ok(Invocation {
            sandbox,
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs,
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
