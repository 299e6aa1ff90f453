//! A headless Copilot run: the prompt on stdin, JSONL events on stdout, a configuration root
//! private to the run, an explicit tool list with deny rules for what is not granted, and the
//! token counts in a usage file.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, PrivateFile, Request, RunDir, StdinSource, agent_env,
};
use serde_json::{Value, json};

use super::{Copilot, SPEC};
use crate::common::{PROVIDER_DEFAULT_STR, ResolvedMcp, ToolSet, render_mcp};

/// The tools every run has: reading and searching files.
pub const READ_TOOLS: &[&str] = &["view", "grep", "glob"];

/// The file-writing tools, for writing runs.
pub const WRITE_TOOLS: &[&str] = &["create", "edit"];

/// The shell tools, when the shell is granted.
pub const SHELL_TOOLS: &[&str] = &["bash", "read_bash", "write_bash", "stop_bash", "list_bash"];

/// The web tools, when the web is granted.
pub const WEB_TOOLS: &[&str] = &["web_fetch"];

/// Built-in tools no run gets: sub-agents, skills, its own databases and documentation fetcher,
/// GitHub's code search. Named only when MCP servers make the list a blocklist.
pub const NEVER_TOOLS: &[&str] = &[
    "task",
    "read_agent",
    "list_agents",
    "write_agent",
    "skill",
    "sql",
    "session_store_sql",
    "fetch_copilot_cli_documentation",
    "semantic_code_search",
];

/// Credentials stripped from the environment of the commands and MCP servers the model runs
/// (`--secret-env-vars`), and redacted from Copilot's output.
pub const SECRET_VARS: &[&str] = &[
    "COPILOT_PROVIDER_API_KEY",
    "COPILOT_PROVIDER_BEARER_TOKEN",
    "COPILOT_GITHUB_TOKEN",
];

/// The usage file `--usage-output-file` writes, in the run's Copilot directory.
pub const USAGE_FILE: &str = "usage.json";

/// The MCP configuration `--additional-mcp-config @<file>` reads.
pub const MCP_FILE: &str = "mcp-config.json";

/// The run's built-in tools, by grant.
pub(crate) const TOOLS: ToolSet = ToolSet {
    read: READ_TOOLS,
    write: WRITE_TOOLS,
    shell: SHELL_TOOLS,
    web: WEB_TOOLS,
    never: NEVER_TOOLS,
};

/// The `--deny-tool` rules of a run: Copilot's permission kinds that are not granted.
pub fn deny_rules(write: bool, bash: bool, web: bool) -> Vec<&'static str> {
    [(!write, "write"), (!bash, "shell"), (!web, "url")]
        .into_iter()
        .filter_map(|(deny, rule)| deny.then_some(rule))
        .collect()
}

/// The user's Copilot package cache, where Copilot extracts its package on a first run
/// (`pkg/<platform>/<version>/`): `COPILOT_PKG_CACHE_HOME`, else `COPILOT_CACHE_HOME`, else
/// `$XDG_CACHE_HOME/copilot`, else `~/.cache/copilot`.
pub fn user_package_cache(env: &BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    ["COPILOT_PKG_CACHE_HOME", "COPILOT_CACHE_HOME"]
        .iter()
        .find_map(|k| env.get(*k).filter(|d| d.starts_with('/')))
        .map(Utf8PathBuf::from)
        .or_else(|| {
            crate::common::xdg_dir(env, "XDG_CACHE_HOME", ".cache").map(|c| c.join("copilot"))
        })
}

/// Whether the user's environment points Copilot at a model provider of their own (BYOK).
pub fn byok(env: &BTreeMap<String, String>) -> bool {
    env.get("COPILOT_PROVIDER_BASE_URL")
        .is_some_and(|u| !u.trim().is_empty())
}

/// The directories of the run's Copilot root: its `COPILOT_HOME` and its cache.
pub(super) fn roots(root: &Utf8Path) -> (Utf8PathBuf, Utf8PathBuf) {
    (root.join("home"), root.join("cache"))
}

/// The run's MCP servers as `--additional-mcp-config` reads them (`{"mcpServers": …}`), every
/// tool of each allowed, and their names.
fn mcp_config(
    run: &RunDir,
    secrets: &mut Vec<String>,
) -> Result<(Value, Vec<String>), InvocationError> {
    let (servers, names) = render_mcp(run, secrets, |server| match server {
        ResolvedMcp::Stdio { command, args, env } => json!({
            "type": "local",
            "command": command,
            "args": args,
            "env": env,
            "tools": ["*"],
        }),
        ResolvedMcp::Remote {
            transport,
            url,
            headers,
        } => json!({
            "type": transport,
            "url": url,
            "headers": headers,
            "tools": ["*"],
        }),
    })?;
    Ok((json!({ "mcpServers": servers }), names))
}

impl Copilot {
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let g = &request.grants.resolved;
        let write = request.writes();
        let sel = &request.selection.resolved;
        let mut secrets = Vec::new();
        let (mcp, servers) = mcp_config(run, &mut secrets)?;
        let root = run.file("copilot");
        let (home, cache) = roots(&root);
        let usage_file = root.join(USAGE_FILE);
        let base = agent_env(spec, &run.parent_env);
        // What Copilot will see once the user's configuration (`[agents.copilot]`) is applied:
        // their provider and package cache decide the network and the mounts.
        let user = crate::common::effective_env(&base, run);
        let offline = byok(&user) && !g.web_search;

        let mut env = base.clone();
        env.insert("COPILOT_HOME".into(), home.to_string());
        env.insert("COPILOT_CACHE_HOME".into(), cache.to_string());
        env.insert("COPILOT_AUTO_UPDATE".into(), "false".into());
        env.insert("NO_COLOR".into(), "1".into());
        env.insert("TERM".into(), "dumb".into());
        if offline {
            env.insert("COPILOT_OFFLINE".into(), "true".into());
        }
        let mut dirs = vec![root.clone(), home.clone(), cache.clone()];
        let mut files = Vec::new();

        let mut args: Vec<String> = [
            "--output-format",
            "json",
            "--no-ask-user",
            "--no-custom-instructions",
            "--no-auto-update",
            "--disable-builtin-mcps",
            "--allow-all-tools",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!("--secret-env-vars={}", SECRET_VARS.join(",")));
        args.extend(["--usage-output-file".into(), usage_file.to_string()]);
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if sel.effort != PROVIDER_DEFAULT_STR {
            args.extend(["--reasoning-effort".into(), sel.effort.clone()]);
        }
        let (tool_list, tool_mode) = if servers.is_empty() {
            args.push("--available-tools".into());
            let t = TOOLS.granted(write, g.bash, g.web_search);
            args.extend(t.iter().map(|s| (*s).to_owned()));
            (t, "allowlist (--available-tools)")
        } else {
            args.push("--excluded-tools".into());
            let t = TOOLS.refused(write, g.bash, g.web_search);
            args.extend(t.iter().map(|s| (*s).to_owned()));
            (
                t,
                "blocklist (--excluded-tools): the MCP servers' tools are not known in advance",
            )
        };
        let denies = deny_rules(write, g.bash, g.web_search);
        for rule in &denies {
            args.extend(["--deny-tool".into(), (*rule).into()]);
        }
        if !servers.is_empty() {
            let path = root.join(MCP_FILE);
            files.push(PrivateFile {
                path: path.clone(),
                contents: mcp.to_string().into_bytes(),
            });
            args.extend(["--additional-mcp-config".into(), format!("@{path}")]);
        }
        let turns = sel
            .max_turns
            .unwrap_or(spec.max_turns.map_or(12, |d| d.handoff));

        let sandbox = run.handoff_sandbox.then(|| {
            // The package Copilot extracted outside the sandbox (by the preflight, or the
            // user's own runs), read-only where the run's package cache points.
            let pkg = root.join("pkg");
            dirs.push(pkg.clone());
            env.insert("COPILOT_PKG_CACHE_HOME".into(), pkg.to_string());
            let binds = user_package_cache(&user)
                .map(|user| handoff_core::sandbox::Bind {
                    source: user.join("pkg"),
                    dest: pkg.join("pkg"),
                    writable: false,
                    secret: false,
                })
                .into_iter()
                .collect();
            handoff_core::sandbox::SandboxSpec {
                binds,
                state: "a Copilot home private to the run (sessions, logs, settings); the \
                        extracted package of the user's cache mounted read-only"
                    .into(),
                // Copilot's shell runs `/bin/bash`, not `$SHELL`: a wrapper would not be used.
                offline_shell: false,
                network: Some(super::network::network(
                    &user,
                    &mcp["mcpServers"],
                    g.web_search,
                    offline,
                )),
                packages: None,
            }
        });

        let mut policy = json!({
            "enforcement": "handoff-sandbox-and-tool-policy",
            "nativeFilesystemIsolation": false,
            "nativeSandbox": "not used: Copilot's --sandbox needs slirp4netns, tun and iptables and confines file edits only best-effort",
            "copilotHome": "private to the run: no user configuration, MCP servers, hooks, plugins or trusted folders",
            "tools": tool_list,
            "toolList": tool_mode,
            "deny": denies,
            "allowAllTools": true,
            "customInstructions": "disabled",
            "builtinMcpServers": "disabled",
            "mcpServers": servers,
            "maxTurns": turns,
            "turnLimit": "enforced by handoff: the CLI is stopped as a turn past the limit starts",
            "offline": offline,
            "secretEnvVars": SECRET_VARS,
            "usage": "token counts from --usage-output-file; premium requests as Copilot counts them, never as USD",
            "structuredResult": "driver-normalized from the last assistant message",
            "environment": "allowlist",
        });
        if sandbox.is_none() {
            policy["sandbox"] = handoff_core::sandbox::unavailable_receipt();
        }
        if let Some(nested) = &run.nested {
            policy["nestedAdvice"] =
                crate::common::nested_receipt(nested, sandbox.is_some(), "Copilot");
        }
        Ok(Invocation {
            sandbox,
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs,
            files,
            answer: AnswerSource::StdoutWithReport(usage_file),
            policy,
            secrets,
        })
    }
}
