//! A delegated Claude Code run: `--safe-mode`, the tool allowlist, the `--settings` that force
//! the native bash sandbox on, the private MCP file and the `--json-schema` of the answer.

use camino::Utf8Path;
use handoff_core::{
    AnswerSource, Enforcement, FilesystemRead, FilesystemWrite, GrantsResolved, Invocation,
    InvocationError, Isolation, NestedAccess, Network, PrivateFile, Request, RunDir, RunShape,
    StdinSource, UnixSockets, agent_env, process_containment,
};
use serde_json::json;

use super::{Claude, EMPTY_MCP, SPEC};
use crate::common::{PROVIDER_DEFAULT_STR, ResolvedMcp, render_mcp};

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

/// The places Claude Code's bash sandbox lets every command write that outlive a run: its
/// fixed temporary directory (unused once `CLAUDE_CODE_TMPDIR` moves it into the run's own)
/// and the log directories under the home directory it runs with (`~` is Claude Code's own).
/// Denied to the sandbox, never removed: they are the user's.
pub const SHARED_AREAS: &[&str] = &[
    "/tmp/claude",
    "/private/tmp/claude",
    "~/.claude/debug",
    "~/.npm/_logs",
];

/// The `--settings` JSON: native sandbox on, no fallback to unsandboxed commands, the worktree
/// the only readable (and, for writing runs, writable) place, and none of the
/// [`SHARED_AREAS`] writable: what its commands write outside the worktree lands only in the
/// run's own temporary directory. A read-only worktree is denied
/// after Claude's own protected names, so that its sandboxed Bash can start at all. A worker
/// that may ask for nested advice must reach its mailbox from its sandboxed Bash: the
/// mailbox's `in/` is writable and the mailbox readable, and nothing else is opened (no Unix
/// socket, no domain).
pub fn settings(cwd: &str, write: bool, nested: Option<&NestedAccess>) -> serde_json::Value {
    let mut deny_write: Vec<String> = SHARED_AREAS.iter().map(|p| (*p).to_owned()).collect();
    if !write {
        let root = Utf8Path::new(cwd);
        deny_write.extend(PROTECTED_IN_CWD.iter().map(|p| root.join(p).to_string()));
        deny_write.push(cwd.to_owned());
    }
    let mut allow_read = vec![cwd.to_owned()];
    let mut allow_write = if write { vec![cwd.to_owned()] } else { vec![] };
    if let Some(n) = nested {
        allow_read.push(n.mailbox.to_string());
        allow_write.push(n.inbox().to_string());
    }
    json!({
        "sandbox": {
            "enabled": true,
            "failIfUnavailable": true,
            "allowUnsandboxedCommands": false,
            "excludedCommands": [],
            "filesystem": {
                "allowRead": allow_read,
                "allowWrite": allow_write,
                "denyRead": [],
                "denyWrite": deny_write,
            },
            "network": {"allowedDomains": []},
        }
    })
}

/// The variable that moves Claude Code's temporary directory (its sandboxed commands' `TMPDIR`
/// is `<it>/claude-<uid>`).
pub const TMPDIR_VAR: &str = "CLAUDE_CODE_TMPDIR";

/// The policy receipt's account of where sandboxed commands write temporary files.
pub(super) fn temp_receipt(run: &RunDir) -> serde_json::Value {
    json!({
        "dir": run.temp(),
        "variables": ["TMPDIR", TMPDIR_VAR],
        "removed": "with the run",
        "deniedShared": SHARED_AREAS,
    })
}

/// The policy receipt's account of what a nested-advice worker's sandbox opens.
fn nested_receipt(nested: &NestedAccess) -> serde_json::Value {
    json!({
        "mailbox": nested.mailbox,
        "handoffExe": nested.handoff_exe,
        "writable": [nested.inbox()],
        "readable": [nested.outbox()],
        "filesystem": "the mailbox's in/ added to sandbox.filesystem.allowWrite (and the mailbox to allowRead); nothing else",
        "unixSockets": "none: no allowUnixSockets or allowAllUnixSockets, the sandbox blocks every Unix socket",
        "network": "unchanged: no domain",
        "environment": "HANDOFF_SUPERVISOR_CONTEXT reaches sandboxed commands",
    })
}

/// What a run of `shape` can do under the configuration [`Claude::plan`] builds. The bash
/// sandbox ([`settings`]) holds the commands; the file tools are held by the tool allowlist
/// alone, and it names them without a path rule.
pub(super) fn isolation(shape: &RunShape) -> Isolation {
    if super::confined::applies(shape) {
        return super::confined::isolation(shape);
    }
    let g = &shape.grants;
    Isolation {
        enforcement: Enforcement::Native,
        // Write and Edit, allowed by name, write wherever the user can. Without them only the
        // sandboxed Bash writes: the worktree is denied, so are the places its sandbox lets
        // every command write that outlive the run ([`SHARED_AREAS`]), and what is left is
        // its temporary directory, moved into the run's own (`CLAUDE_CODE_TMPDIR`) and
        // removed with it.
        filesystem_write: if g.write {
            FilesystemWrite::Anywhere
        } else {
            FilesystemWrite::None
        },
        // Read, allowed by name, reads any path; the sandbox denies none.
        filesystem_read: FilesystemRead::Anywhere,
        // Sandboxed commands are allowed no domain; WebSearch and WebFetch reach any host.
        network: if g.web_search {
            Network::Web
        } else {
            Network::None
        },
        // The sandbox blocks every Unix socket; a worker that may ask for advice reaches the
        // supervisor through its mailbox, a directory. Its `in/` is the supervisor's channel,
        // not a place anything else reads, so it does not count as a write.
        unix_sockets: UnixSockets::None,
        process: process_containment(),
    }
}

/// The tool list for a run (same for `--tools` and `--allowedTools`).
pub fn tools(request: &Request, mcp_names: &[String]) -> Vec<String> {
    tools_for(&request.grants.resolved, mcp_names)
}

/// The tool list for a set of grants.
pub(super) fn tools_for(g: &GrantsResolved, mcp_names: &[String]) -> Vec<String> {
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
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let mut env = agent_env(spec, &run.parent_env);
        // A run must not update the CLI under itself.
        env.insert("DISABLE_AUTOUPDATER".into(), "1".into());
        // Its sandbox's temporary directory, in the run's own.
        env.insert(TMPDIR_VAR.into(), run.temp().to_string());
        let mut secrets = Vec::new();
        let mcp = mcp_file(run, &mut secrets)?;
        let mcp_names = mcp.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
        let write = request.writes();
        let tool_list = tools(request, &mcp_names).join(",");
        // Held by handoff's sandbox when the supervisor asked for it (a confined adviser).
        let confined = (run.confined && run.handoff_sandbox)
            .then(|| super::confined::plan(run, &mut env, request.grants.resolved.web_search))
            .transpose()?;
        // Without Bash the worker cannot run the nested command: nothing is opened.
        let nested = run.nested.as_ref().filter(|_| request.grants.resolved.bash);
        let sel = &request.selection.resolved;
        let turns = sel
            .max_turns
            .unwrap_or(SPEC.max_turns.map_or(12, |d| d.handoff));
        let mut args: Vec<String> = vec![
            "--safe-mode".into(),
            "--settings".into(),
            match &confined {
                Some(_) => super::confined::settings(),
                None => settings(&request.cwd, write, nested),
            }
            .to_string(),
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
            "temp": temp_receipt(run),
            "structuredResult": "native JSON Schema (StructuredOutput) in the stream-json result event",
            "mcpServers": mcp_names,
            "sessionPersistence": false,
            "environment": "allowlist",
        });
        if confined.is_some() {
            policy["enforcement"] = json!("handoff-sandbox-and-tool-allowlist");
            policy["nativeBashSandbox"] = json!(false);
            policy["sandboxFailIfUnavailable"] = json!(false);
            policy["network"] =
                json!("its model's endpoint through handoff's proxy; web tools only when granted");
            policy["confined"] = super::confined::receipt();
        }
        let (sandbox, dirs) = confined.map_or((None, Vec::new()), |(s, d)| (Some(s), d));
        if let Some(nested) = &run.nested
            && sandbox.is_some()
        {
            policy["nestedAdvice"] = crate::common::nested_receipt(nested, true, "Claude Code");
        } else if let Some(nested) = nested {
            policy["nestedAdvice"] = nested_receipt(nested);
        } else if let Some(nested) = &run.nested {
            policy["nestedAdvice"] = json!({
                "mailbox": nested.mailbox,
                "handoffExe": nested.handoff_exe,
                "opened": "nothing: without a shell the worker cannot run the nested command",
            });
        }
        Ok(Invocation {
            sandbox,
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs,
            files: mcp.map(|(f, _)| vec![f]).unwrap_or_default(),
            answer: AnswerSource::Stdout,
            policy,
            secrets,
        })
    }
}
