//! A delegated `opencode run`: configuration roots of its own in the run directory, a dedicated
//! primary agent with an explicit permission table, the private MCP servers and the user's
//! provider table, all inline in `OPENCODE_CONFIG_CONTENT`.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, Request, RunDir, StdinSource, agent_env,
};
use serde_json::{Value, json};

use super::{OpenCode, READER, SPEC, WRITER};
use crate::common::{PROVIDER_DEFAULT_STR, ResolvedMcp, render_mcp};

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

/// What a run of `shape` can do under the configuration [`OpenCode::plan`] builds. OpenCode
/// has no sandbox: its bash tool runs any command, so with bash nothing is confined. Without
/// it the permission table holds: `external_directory` denied keeps the file tools in the
/// worktree, `edit` is allowed only to writing runs, the web tools only when granted.
pub(super) fn isolation(shape: &handoff_core::RunShape) -> handoff_core::Isolation {
    use handoff_core::{FilesystemRead, FilesystemWrite, Isolation, Network, UnixSockets};
    let g = &shape.grants;
    if g.bash {
        // A shell and no sandbox: everything is open but its processes, which handoff's
        // reaper contains.
        return Isolation {
            process: handoff_core::process_containment(),
            ..Isolation::unconfined()
        };
    }
    Isolation {
        enforcement: handoff_core::Enforcement::None,
        filesystem_write: if g.write {
            FilesystemWrite::Worktree
        } else {
            FilesystemWrite::None
        },
        filesystem_read: FilesystemRead::Worktree,
        network: if g.web_search {
            Network::Web
        } else {
            Network::None
        },
        unix_sockets: UnixSockets::None,
        process: handoff_core::process_containment(),
    }
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
pub(super) fn isolated_env(
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

pub(super) fn config_dirs(root: &Utf8Path) -> Vec<Utf8PathBuf> {
    ["home", "config", "cache", "state"]
        .iter()
        .map(|d| root.join(d))
        .collect()
}

impl OpenCode {
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
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
                "mailbox": nested.mailbox,
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
