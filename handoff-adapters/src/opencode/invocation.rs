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
/// has no sandbox of its own. Where handoff's can run, OpenCode runs under it: its shell
/// writes the worktree only in writing runs (never its git directories), reads nothing of the
/// user's files outside it, its processes die with the run's PID namespace, and its commands
/// run without network (the CLI itself keeps it, for its model provider). Elsewhere, with bash nothing is confined; without it the permission table
/// holds: `external_directory` denied keeps the file tools in the worktree, `edit` is allowed
/// only to writing runs, the web tools only when granted.
pub(super) fn isolation(shape: &handoff_core::RunShape) -> handoff_core::Isolation {
    use handoff_core::{
        Enforcement, FilesystemRead, FilesystemWrite, Isolation, Network, ProcessContainment,
        UnixSockets,
    };
    let g = &shape.grants;
    let write = if g.write {
        FilesystemWrite::Worktree
    } else {
        FilesystemWrite::None
    };
    let tools_network = if g.web_search {
        Network::Web
    } else {
        Network::None
    };
    if shape.handoff_sandbox {
        return Isolation {
            enforcement: Enforcement::Handoff,
            filesystem_write: write,
            filesystem_read: FilesystemRead::Worktree,
            // The CLI keeps the host's network for its model provider; its shell commands run
            // in a network namespace of their own (no network, no abstract Unix sockets).
            network: tools_network,
            unix_sockets: UnixSockets::None,
            process: ProcessContainment::PidNamespace,
        };
    }
    if g.bash {
        // A shell and no sandbox: everything is open but its processes, which handoff's
        // reaper contains.
        return Isolation {
            process: handoff_core::process_containment(),
            ..Isolation::unconfined()
        };
    }
    Isolation {
        enforcement: Enforcement::None,
        filesystem_write: write,
        filesystem_read: FilesystemRead::Worktree,
        network: tools_network,
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

/// The user's data directory (`$XDG_DATA_HOME`, else `~/.local/share`), where OpenCode keeps
/// logins and sessions under `opencode/`.
pub(super) fn user_data_dir(base: &BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    crate::common::xdg_dir(base, "XDG_DATA_HOME", ".local/share")
}

/// The isolated environment: configuration roots inside `root`; the data directory (logins,
/// sessions) the user's own, or `private_data` under handoff's sandbox.
pub(super) fn isolated_env(
    base: &BTreeMap<String, String>,
    root: &Utf8Path,
    config: &Value,
    permission: &Value,
    private_data: Option<&Utf8Path>,
) -> BTreeMap<String, String> {
    let mut env = base.clone();
    let data = match private_data {
        Some(d) => Some(d.to_string()),
        None => user_data_dir(base).map(|d| d.to_string()),
    };
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

/// The provider packages OpenCode carries in its own binary (1.18): it loads them without a
/// download.
const BUNDLED_PROVIDERS: &[&str] = &[
    "@ai-sdk/amazon-bedrock",
    "@ai-sdk/anthropic",
    "@ai-sdk/azure",
    "@ai-sdk/google",
    "@ai-sdk/google-vertex",
    "@ai-sdk/openai",
    "@ai-sdk/openai-compatible",
    "@openrouter/ai-sdk-provider",
    "@ai-sdk/xai",
    "@ai-sdk/mistral",
    "@ai-sdk/groq",
    "@ai-sdk/deepinfra",
    "@ai-sdk/cerebras",
    "@ai-sdk/cohere",
    "@ai-sdk/gateway",
    "@ai-sdk/togetherai",
    "@ai-sdk/perplexity",
    "@ai-sdk/vercel",
    "@ai-sdk/alibaba",
    "gitlab-ai-provider",
    "@ai-sdk/github-copilot",
    "venice-ai-sdk-provider",
];

/// What OpenCode writes into each configuration directory as it starts, and dies when it
/// cannot: written by handoff before the run, so the directories can be read-only to it.
const CONFIG_GITIGNORE: &str =
    "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore";

/// OpenCode's configuration directories under handoff's sandbox (`XDG_CONFIG_HOME`, which is
/// also `OPENCODE_CONFIG_DIR`, and its `opencode/`), read-only to the agent. OpenCode installs
/// its plugin SDK into each configuration directory it can write, fetching it from the npm
/// registry on every run (its configuration roots are new each time); it skips one it cannot
/// write. The plugins are off, so nothing needs it, and nothing the agent writes there is
/// read by a later run. Returns the binds and the `.gitignore` files OpenCode expects there.
pub(super) fn read_only_config(
    root: &Utf8Path,
) -> (
    Vec<handoff_core::sandbox::Bind>,
    Vec<handoff_core::PrivateFile>,
) {
    let config = root.join("config");
    let seeds = [config.clone(), config.join("opencode")]
        .into_iter()
        .map(|d| handoff_core::PrivateFile {
            path: d.join(".gitignore"),
            contents: CONFIG_GITIGNORE.as_bytes().to_vec(),
        })
        .collect();
    let bind = handoff_core::sandbox::Bind {
        source: config.clone(),
        dest: config,
        writable: false,
        secret: false,
    };
    (vec![bind], seeds)
}

/// The provider packages the configuration's provider table names (`npm`) that OpenCode does
/// not carry, which it installs into `$XDG_CACHE_HOME/opencode/packages/<name>` as it starts:
/// shared read-only from handoff's cache ([`handoff_core::sandbox::packages`]) so that no run
/// fetches them again.
pub(super) fn provider_packages(
    providers: Option<&Value>,
    root: &Utf8Path,
) -> Option<handoff_core::sandbox::packages::Packages> {
    let mut names: Vec<String> = providers?
        .as_object()?
        .values()
        .filter_map(|p| p.get("npm")?.as_str())
        .filter(|n| !BUNDLED_PROVIDERS.contains(n))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    (!names.is_empty()).then(|| handoff_core::sandbox::packages::Packages {
        names,
        dest: root.join("cache/opencode/packages"),
    })
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
        let private_data = run.handoff_sandbox.then(|| root.join("data"));
        let base = agent_env(spec, &run.parent_env);
        let env = isolated_env(&base, &root, &config, &perm, private_data.as_deref());
        let mut dirs = config_dirs(&root);
        let mut files = Vec::new();
        let sandbox = private_data.map(|data| {
            let own = data.join("opencode");
            dirs.extend([data.clone(), own.clone()]);
            let (config_binds, seeds) = read_only_config(&root);
            dirs.push(root.join("config/opencode"));
            files.extend(seeds);
            let user = user_data_dir(&base).map(|d| d.join("opencode"));
            let mut binds: Vec<handoff_core::sandbox::Bind> = user
                .iter()
                .flat_map(|user| {
                    // Logins, and the tools OpenCode downloaded and runs: read-only.
                    // The logins are for the CLI, not for its model's commands.
                    [("auth.json", true), ("mcp-auth.json", true), ("bin", false)].map(
                        |(name, secret)| handoff_core::sandbox::Bind {
                            source: user.join(name),
                            dest: own.join(name),
                            writable: false,
                            secret,
                        },
                    )
                })
                .collect();
            binds.extend(config_binds);
            handoff_core::sandbox::SandboxSpec {
                binds,
                state: "a data directory private to the run (logins and downloaded tools \
                        mounted read-only); the run's session is imported into the user's \
                        store afterwards"
                    .into(),
                // OpenCode's bash tool runs commands with `$SHELL -c`.
                offline_shell: true,
                network: Some(super::network::network(
                    &request.selection.resolved.model,
                    config.get("provider"),
                    &config["mcp"],
                    g.web_search,
                )),
                packages: provider_packages(config.get("provider"), &root),
            }
        });

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
            "configurationRoots": if sandbox.is_some() {
                "private to the run (HOME, XDG config/cache/state, data)"
            } else {
                "private to the run (HOME, XDG config/cache/state); data directory kept for logins"
            },
            "projectConfiguration": "disabled",
            "plugins": "disabled",
            "structuredResult": "driver-normalized from the last text event",
            "mcpServers": names,
            "environment": "allowlist",
        });
        if sandbox.is_none() {
            policy["sandbox"] = handoff_core::sandbox::unavailable_receipt();
        }
        if let Some(nested) = &run.nested {
            policy["nestedAdvice"] =
                crate::common::nested_receipt(nested, sandbox.is_some(), "OpenCode");
        }
        Ok(Invocation {
            sandbox,
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            files,
            dirs,
            answer: AnswerSource::Stdout,
            policy,
            secrets,
        })
    }
}
