//! A headless community Grok run (`grok -d <worktree> --max-tool-rounds N -p <prompt>`), always
//! under handoff's own sandbox.

use handoff_core::sandbox::SandboxSpec;
use handoff_core::sandbox::proxy::Endpoint;
use handoff_core::{
    AnswerSource, Enforcement, FilesystemRead, FilesystemWrite, Invocation, InvocationError,
    Isolation, Network, ProcessContainment, Request, RunDir, RunShape, StdinSource, UnixSockets,
    agent_env,
};
use serde_json::json;

use super::{GrokCommunity, SPEC};
use crate::common::PROVIDER_DEFAULT_STR;

/// The directory in the run directory that is the CLI's `HOME` (and its working directory
/// before it changes into the worktree).
pub const HOME_DIR: &str = "grok-home";

/// The largest prompt the CLI can take: it reads it from its command line, where Linux limits
/// one argument to 128 KiB (terminating NUL included).
pub const MAX_PROMPT_BYTES: usize = 128 * 1024 - 1;

/// The tools the CLI offers its model, every one approved without asking in headless mode.
pub const TOOLS: [&str; 7] = [
    "view_file",
    "create_file",
    "str_replace_editor",
    "bash",
    "search",
    "create_todo_list",
    "update_todo_list",
];

/// Why a run cannot be planned without handoff's sandbox.
pub const NO_SANDBOX: &str = "the community grok CLI has no sandbox of its own and approves every tool, bash included, so handoff runs it only under its own sandbox (bubblewrap), and that sandbox cannot run here; install bubblewrap (Debian: apt-get install bubblewrap) where unprivileged user namespaces are allowed, or choose another agent";

/// What a run of `shape` can do under the configuration [`GrokCommunity::plan`] builds. Under
/// handoff's sandbox its tools write the worktree only in writing runs (never its git
/// directories; `HOME` and `/tmp` are private to the run and vanish with it), read nothing of
/// the user's files outside it, and its processes die with the run's PID namespace. Its bash
/// tool runs commands with `/bin/sh` from the CLI's own process, so they share the CLI's
/// network namespace, where only the model endpoint has an address (tunnelled through
/// handoff's proxy). Without that sandbox no run is planned; the ranking is then what the CLI
/// alone would give: nothing confined.
pub(super) fn isolation(shape: &RunShape) -> Isolation {
    if !shape.handoff_sandbox {
        return Isolation::unconfined();
    }
    Isolation {
        enforcement: Enforcement::Handoff,
        filesystem_write: if shape.grants.write {
            FilesystemWrite::Worktree
        } else {
            FilesystemWrite::None
        },
        filesystem_read: FilesystemRead::Worktree,
        // A network namespace of its own, where the relay stands in for the model endpoint
        // alone; the proxy's socket is the one Unix socket its commands can reach.
        network: Network::ModelEndpoints,
        unix_sockets: UnixSockets::Named,
        process: ProcessContainment::PidNamespace,
    }
}

/// The CLI's default API, when `GROK_BASE_URL` names none.
const DEFAULT_BASE_URL: &str = "https://api.x.ai/v1";

/// The model endpoint the CLI calls: `GROK_BASE_URL` (the configuration's `env` first, which
/// the engine applies over the agent's environment), else xAI's API.
fn endpoint(
    config: &std::collections::BTreeMap<String, String>,
    env: &std::collections::BTreeMap<String, String>,
) -> Option<Endpoint> {
    let url = [config, env]
        .iter()
        .find_map(|m| m.get("GROK_BASE_URL").filter(|u| !u.is_empty()))
        .map_or(DEFAULT_BASE_URL, String::as_str);
    Endpoint::from_url(url, "the model API (GROK_BASE_URL, else xAI's)")
}

fn unsupported(what: &str) -> InvocationError {
    InvocationError::Unsupported(format!("{what} is unsupported for grok-community"))
}

impl GrokCommunity {
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        // Validation refuses most of these before a plan is made; refusing here too keeps the
        // plan fail-closed if a caller skips validation.
        if !run.handoff_sandbox {
            return Err(InvocationError::Unsupported(NO_SANDBOX.into()));
        }
        let g = &request.grants.resolved;
        if run.mcp.as_ref().is_some_and(|m| !m.servers.is_empty()) {
            return Err(unsupported("--mcp-config"));
        }
        if g.web_search {
            return Err(unsupported("webSearch"));
        }
        if !g.bash {
            return Err(unsupported("bash=false (its bash tool cannot be withheld)"));
        }
        let sel = &request.selection.resolved;
        if sel.effort != PROVIDER_DEFAULT_STR {
            return Err(unsupported("--effort"));
        }
        if run.prompt.len() > MAX_PROMPT_BYTES {
            return Err(InvocationError::Unsupported(format!(
                "the prompt is {} bytes; the community grok CLI takes its prompt as one \
                 command-line argument, at most {MAX_PROMPT_BYTES} bytes",
                run.prompt.len()
            )));
        }
        let turns = sel
            .max_turns
            .unwrap_or(spec.max_turns.map_or(12, |d| d.handoff));
        let home = run.file(HOME_DIR);
        let mut env = agent_env(spec, &run.parent_env);
        env.insert("HOME".into(), home.to_string());
        // The model only through the environment: `-k/-u` would be saved into the CLI's
        // settings file, and the environment wins over settings.
        if sel.model != PROVIDER_DEFAULT_STR {
            env.insert("GROK_MODEL".into(), sel.model.clone());
        }
        env.insert("NO_COLOR".into(), "1".into());
        env.insert("TERM".into(), "dumb".into());
        let args: Vec<String> = vec![
            "-d".into(),
            request.cwd.clone(),
            "--max-tool-rounds".into(),
            turns.to_string(),
            "-p".into(),
            run.prompt.clone(),
        ];
        let write = request.writes();
        let mut policy = json!({
            "enforcement": "handoff-sandbox-required",
            "approvals": "none asked: the CLI approves every tool itself in headless mode",
            "tools": TOOLS,
            "filesystem": if write {
                "worktree read-write under handoff's sandbox"
            } else {
                "worktree read-only under handoff's sandbox"
            },
            "nativeFilesystemIsolation": false,
            "nativeBashSandbox": false,
            "mutationGuarantee": "handoff-sandbox-and-final-state",
            "bash": "always offered (no control withholds it); runs with /bin/sh inside handoff's sandbox, sharing the CLI's network",
            "maxToolRounds": turns,
            "webSearch": "unsupported",
            "mcpServers": [],
            "home": "a directory private to the run: nothing is written to the user's ~/.grok, and no settings of theirs are read",
            "workingDirectory": "the CLI starts in its private HOME (so it loads no .env from the worktree) and changes into the worktree with -d",
            "projectSettings": "the worktree's .grok/settings.json is read by the CLI (model, MCP servers), and written with its defaults when missing (a build then shows it among its changes); whatever it starts runs inside handoff's sandbox",
            "prompt": "command line (-p)",
            "credentials": "GROK_API_KEY / GROK_BASE_URL / GROK_MODEL from the environment only",
            "sessions": "none: the CLI keeps no sessions",
            "structuredResult": "driver-read: the content of the last assistant message",
            "environment": "allowlist",
        });
        if let Some(nested) = &run.nested {
            // Its bash tool runs commands with the CLI's own environment, the supervisor
            // context included; handoff's sandbox mounts the mailbox read-only and its in/
            // writable.
            policy["nestedAdvice"] = json!({
                "mailbox": nested.mailbox,
                "handoffExe": nested.handoff_exe,
                "writable": [nested.inbox()],
                "readable": [nested.outbox()],
                "environment": "HANDOFF_SUPERVISOR_CONTEXT reaches the bash tool",
            });
        }
        Ok(Invocation {
            sandbox: Some(SandboxSpec {
                binds: Vec::new(),
                state: "none kept: HOME is a directory private to the run, removed with it (the \
                        CLI keeps no sessions)"
                    .into(),
                // Its bash tool runs `/bin/sh -c` from Node's child_process, not `$SHELL`.
                offline_shell: false,
                // Node's `fetch` ignores the proxy variables: the endpoint is reached at an
                // address of its own in the namespace.
                network: Some(handoff_core::sandbox::proxy::NetworkSpec {
                    endpoints: endpoint(&run.agent_config.env, &env).into_iter().collect(),
                    public_hosts: None,
                    transparent: true,
                }),
                packages: None,
            }),
            program: run.executable.clone(),
            args,
            env,
            cwd: home.clone(),
            stdin: StdinSource::Null,
            dirs: vec![home],
            files: Vec::new(),
            answer: AnswerSource::Stdout,
            policy,
            secrets: Vec::new(),
        })
    }
}
