//! A headless Qwen run: the prompt on stdin, stream-json events on stdout, a configuration root
//! private to the run, handoff's settings as the system settings file, and the tools as an
//! allowlist with a blocklist of everything Qwen adds beside it.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AnswerSource, Enforcement, FilesystemRead, FilesystemWrite, Invocation, InvocationError,
    Isolation, Network, PrivateFile, ProcessContainment, Request, RunDir, RunShape, StdinSource,
    UnixSockets, agent_env,
};
use serde_json::{Value, json};

use super::{Qwen, SPEC};
use crate::common::{PROVIDER_DEFAULT_STR, ResolvedMcp, ToolSet, render_mcp};

/// The tools every run has: reading and searching files.
pub const READ_TOOLS: &[&str] = &["read_file", "glob", "grep_search"];

/// The file-writing tools, for writing runs.
pub const WRITE_TOOLS: &[&str] = &["write_file", "edit"];

/// The shell tool, when the shell is granted.
pub const SHELL_TOOLS: &[&str] = &["run_shell_command"];

/// The web tools, when the web is granted.
pub const WEB_TOOLS: &[&str] = &["web_fetch", "web_search"];

/// Built-in tools no run gets, which Qwen offers beside an allowlist: sub-agents (some of
/// which run other agent CLIs), skills, goals, tasks and teams, worktrees, cron and loops,
/// memory, notebooks, images, the deferred tool search (MCP tools are offered directly
/// instead), MCP resources, and asking the user.
pub const NEVER_TOOLS: &[&str] = &[
    "agent",
    "list_agents",
    "create_sub_session",
    "send_message",
    "skill",
    "workflow",
    "exec",
    "monitor",
    "notebook_edit",
    "todo_write",
    "save_memory",
    "tool_call",
    "tool_search",
    "read_mcp_resource",
    "enter_worktree",
    "exit_worktree",
    "enter_plan_mode",
    "exit_plan_mode",
    "ask_user_question",
    "cron_create",
    "cron_list",
    "cron_delete",
    "loop_wakeup",
    "task_create",
    "task_update",
    "task_list",
    "task_stop",
    "team_create",
    "team_delete",
    "team_plan_approval",
    "request_shutdown",
    "get_goal",
    "update_goal",
    "propose_goal",
    "report_findings",
    "record_artifact",
    "record_source",
    "artifact",
    "image_gen",
    "zoom_image",
    "display_image",
    "lsp",
];

/// The system settings file of a run, in its Qwen directory.
pub const SETTINGS_FILE: &str = "system-settings.json";

/// The MCP configuration `--mcp-config` reads, in its Qwen directory.
pub const MCP_FILE: &str = "mcp-config.json";

/// The run's built-in tools, by grant.
pub(crate) const TOOLS: ToolSet = ToolSet {
    read: READ_TOOLS,
    write: WRITE_TOOLS,
    shell: SHELL_TOOLS,
    web: WEB_TOOLS,
    never: NEVER_TOOLS,
};

/// handoff's Qwen settings, as the system settings file (which outranks the user's and the
/// project's): no managed auto-memory (its extraction is a second model call with write and
/// shell tools after every turn), no hooks, no auto-update, no telemetry, and the effort when
/// one is asked for.
pub fn settings(effort: Option<&str>) -> Value {
    let mut s = json!({
        "memory": {"enableManagedAutoMemory": false},
        "disableAllHooks": true,
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
        "telemetry": {"enabled": false},
        "privacy": {"usageStatisticsEnabled": false},
    });
    if let Some(effort) = effort {
        s["model"] = json!({"generationConfig": {"reasoning": {"effort": effort}}});
    }
    s
}

/// The directories of the run's Qwen root: its `QWEN_HOME`.
pub(super) fn home(root: &Utf8Path) -> Utf8PathBuf {
    root.join("home")
}

/// What a run of `shape` can do under the configuration [`Qwen::plan`] builds.
///
/// Under handoff's sandbox the model writes the worktree only in writing runs (never its git
/// directories), reads nothing of the user's files outside it, and its processes die with the
/// run's PID namespace. Qwen's shell runs `bash -c` itself (not `$SHELL`), so its commands
/// share the CLI's network: a namespace where only the model's endpoints have an address, or
/// the host's network when the web or MCP servers are granted.
///
/// Without handoff's sandbox a shell leaves everything open but its processes; without one,
/// Qwen's tools read anywhere, write (where granted) wherever a path points, and reach the web
/// only when granted.
pub(super) fn isolation(shape: &RunShape) -> Isolation {
    let g = &shape.grants;
    if !shape.handoff_sandbox {
        if g.bash {
            return Isolation {
                process: handoff_core::process_containment(),
                ..Isolation::unconfined()
            };
        }
        return Isolation {
            enforcement: Enforcement::None,
            filesystem_write: if g.write {
                FilesystemWrite::Anywhere
            } else {
                FilesystemWrite::None
            },
            filesystem_read: FilesystemRead::Anywhere,
            network: if g.web_search {
                Network::Web
            } else {
                Network::None
            },
            unix_sockets: UnixSockets::None,
            process: handoff_core::process_containment(),
        };
    }
    let host = super::network::host_network(g.web_search, g.mcp);
    Isolation {
        enforcement: Enforcement::Handoff,
        filesystem_write: if g.write {
            FilesystemWrite::Worktree
        } else {
            FilesystemWrite::None
        },
        filesystem_read: FilesystemRead::Worktree,
        network: match (host, g.bash, g.web_search) {
            (true, true, _) => Network::Any,
            (true, false, true) => Network::Web,
            (false, true, _) => Network::ModelEndpoints,
            (_, false, _) => Network::None,
        },
        unix_sockets: UnixSockets::None,
        process: ProcessContainment::PidNamespace,
    }
}

/// The run's MCP servers as `--mcp-config` reads them (`{"mcpServers": …}`), and their names.
fn mcp_config(
    run: &RunDir,
    secrets: &mut Vec<String>,
) -> Result<(Value, Vec<String>), InvocationError> {
    let (servers, names) = render_mcp(run, secrets, |server| match server {
        ResolvedMcp::Stdio { command, args, env } => json!({
            "command": command,
            "args": args,
            "env": env,
            "trust": true,
        }),
        ResolvedMcp::Remote {
            transport,
            url,
            headers,
        } => {
            let key = if transport == "http" {
                "httpUrl"
            } else {
                "url"
            };
            json!({ key: url, "headers": headers, "trust": true })
        }
    })?;
    Ok((json!({ "mcpServers": servers }), names))
}

/// The common arguments and environment of a Qwen process: stream-json out, every granted tool
/// approved (what is not granted is not offered), handoff's settings file.
pub(super) fn base_args(turns: Option<u32>, model: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = ["--output-format", "stream-json", "--approval-mode", "yolo"]
        .map(String::from)
        .to_vec();
    if let Some(turns) = turns {
        args.extend(["--max-session-turns".into(), turns.to_string()]);
    }
    if let Some(model) = model {
        args.extend(["--model".into(), model.to_owned()]);
    }
    args
}

/// The environment every Qwen process gets beside the allowlisted one: the settings file,
/// no colour, and its yolo notice silenced (handoff's receipt says what confines it).
pub(super) fn base_env(env: &mut std::collections::BTreeMap<String, String>, settings: &Utf8Path) {
    env.insert(
        "QWEN_CODE_SYSTEM_SETTINGS_PATH".into(),
        settings.to_string(),
    );
    env.insert("QWEN_CODE_SUPPRESS_YOLO_WARNING".into(), "1".into());
    env.insert("NO_COLOR".into(), "1".into());
    env.insert("TERM".into(), "dumb".into());
}

impl Qwen {
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
        let root = run.file("qwen");
        let home = home(&root);
        let settings_path = root.join(SETTINGS_FILE);
        let effort = (sel.effort != PROVIDER_DEFAULT_STR).then_some(sel.effort.as_str());
        let model = (sel.model != PROVIDER_DEFAULT_STR).then_some(sel.model.as_str());
        let turns = sel
            .max_turns
            .unwrap_or(spec.max_turns.map_or(12, |d| d.handoff));
        let base = agent_env(spec, &run.parent_env);
        let user = crate::common::effective_env(&base, run);

        let mut env = base.clone();
        env.insert("QWEN_HOME".into(), home.to_string());
        base_env(&mut env, &settings_path);
        let mut files = vec![
            PrivateFile {
                path: settings_path,
                contents: settings(effort).to_string().into_bytes(),
            },
            // An empty user settings file: Qwen warns about a QWEN_HOME without one.
            PrivateFile {
                path: home.join("settings.json"),
                contents: b"{}".to_vec(),
            },
        ];
        let mut args = base_args(Some(turns), model);
        let tools = TOOLS.granted(write, g.bash, g.web_search);
        let refused = TOOLS.refused(write, g.bash, g.web_search);
        args.push(format!("--core-tools={}", tools.join(",")));
        args.push(format!("--exclude-tools={}", refused.join(",")));
        // Always given, so that a project's `.qwen/settings.json` starts no server of its own:
        // empty, it allows none.
        args.push(format!("--allowed-mcp-server-names={}", servers.join(",")));
        if !servers.is_empty() {
            let path = root.join(MCP_FILE);
            files.push(PrivateFile {
                path: path.clone(),
                contents: mcp.to_string().into_bytes(),
            });
            args.push(format!("--mcp-config={path}"));
        }

        if run.handoff_sandbox {
            // Qwen resolves its home directory as it starts, and the user's is not mounted.
            env.insert("HOME".into(), home.to_string());
        }
        let sandbox = run
            .handoff_sandbox
            .then(|| handoff_core::sandbox::SandboxSpec {
                binds: Vec::new(),
                state: "a Qwen home private to the run (sessions, settings, usage logs)".into(),
                // Qwen's shell runs `bash -c`, not `$SHELL`: a wrapper would not be used.
                offline_shell: false,
                network: super::network::network(&user, g.web_search, !servers.is_empty()),
                packages: None,
            });
        let mut policy = json!({
            "enforcement": "handoff-sandbox-and-tool-policy",
            "nativeFilesystemIsolation": false,
            "nativeSandbox": "not used: Qwen's own sandboxes (containers, a bubblewrap execution sandbox for its shell) are not relied on",
            "qwenHome": "private to the run: no user configuration, MCP servers, hooks, extensions, memories or skills",
            "settings": "handoff's, as the system settings file: no managed auto-memory call, no hooks",
            "approvalMode": "yolo",
            "coreTools": tools,
            "excludeTools": refused,
            "mcpServers": servers,
            "maxTurns": turns,
            "effort": effort.map_or(json!("provider default"), |e| json!({"setting": "model.generationConfig.reasoning.effort", "value": e})),
            "prompt": "stdin",
            "structuredResult": "driver-normalized from the result event",
            "environment": "allowlist",
        });
        if sandbox.is_none() {
            policy["sandbox"] = handoff_core::sandbox::unavailable_receipt();
        }
        if let Some(nested) = &run.nested {
            policy["nestedAdvice"] =
                crate::common::nested_receipt(nested, sandbox.is_some(), "Qwen");
        }
        Ok(Invocation {
            sandbox,
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs: vec![root, home],
            files,
            answer: AnswerSource::Stdout,
            policy,
            secrets,
        })
    }
}
