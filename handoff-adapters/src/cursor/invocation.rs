//! A Cursor agent run inside `cursor-agent sandbox run`: the worktree the one writable (or a
//! read-only) path, Cursor's state and MCP configuration in the private run directory.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, PrivateFile, Request, RunDir, StdinSource, agent_env,
};
use serde_json::json;

use super::{Cursor, SPEC, STATE_DIR};
use crate::common::{PROVIDER_DEFAULT_STR, ResolvedMcp, render_mcp};

/// Cursor's private state root (`<run>/cursor-sandbox/home`).
fn home(run: &RunDir) -> Utf8PathBuf {
    run.file(STATE_DIR).join("home")
}

fn mcp_config(
    run: &RunDir,
    secrets: &mut Vec<String>,
) -> Result<Option<(PrivateFile, Vec<String>)>, InvocationError> {
    if run.mcp.as_ref().is_none_or(|m| m.servers.is_empty()) {
        return Ok(None);
    }
    let (servers, names) = render_mcp(run, secrets, |server| match server {
        ResolvedMcp::Stdio { command, args, env } => {
            json!({"command": command, "args": args, "env": env})
        }
        ResolvedMcp::Remote { url, headers, .. } => json!({"url": url, "headers": headers}),
    })?;
    // Secret values go into a 0600 file inside the private run directory (removed after the
    // run), never into argv or the environment.
    let file = PrivateFile {
        path: home(run).join(".cursor").join("mcp.json"),
        contents: serde_json::to_vec(&json!({"mcpServers": servers})).unwrap_or_default(),
    };
    Ok(Some((file, names)))
}

/// Cursor's state roots inside `home`: HOME itself and the four XDG roots.
fn state_env(env: &mut BTreeMap<String, String>, home: &Utf8Path) {
    env.insert("HOME".into(), home.to_string());
    for (var, dir) in [
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
    ] {
        env.insert(var.into(), home.join(dir).to_string());
    }
}

/// What a run of `shape` can do under the configuration [`Cursor::plan`] builds: the whole
/// agent runs inside `cursor-agent sandbox run`, always with a shell. Preflight proves only the
/// worktree's path flag, so the temporary directories count as writable; `--network` opens
/// every host, and nothing known of the sandbox closes Unix sockets.
pub(super) fn isolation(shape: &handoff_core::RunShape) -> handoff_core::Isolation {
    use handoff_core::{FilesystemRead, FilesystemWrite, Isolation, Network, UnixSockets};
    Isolation {
        enforcement: handoff_core::Enforcement::Native,
        filesystem_write: if shape.writes() {
            FilesystemWrite::WorktreeAndTemp
        } else {
            FilesystemWrite::Temp
        },
        filesystem_read: FilesystemRead::Anywhere,
        network: Network::Any,
        unix_sockets: UnixSockets::All,
        process: handoff_core::process_containment(),
    }
}

impl Cursor {
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let g = &request.grants.resolved;
        // The sandbox's path flags take comma-separated lists: a comma in the worktree path
        // would split it into other paths. Refused before launch (the reference threw at launch
        // and reported failed/2).
        if request.cwd.contains(',') {
            return Err(InvocationError::Unsupported(format!(
                "cursor's sandbox takes comma-separated path lists, so --cwd {} (which contains a comma) cannot be confined",
                request.cwd
            )));
        }
        // Validation refuses these before a plan is made; refusing here too keeps the plan
        // fail-closed if a caller skips validation.
        let sel = &request.selection.resolved;
        if sel.effort != PROVIDER_DEFAULT_STR {
            return Err(InvocationError::Unsupported(
                "--effort is unsupported for cursor".into(),
            ));
        }
        if !g.bash {
            return Err(InvocationError::Unsupported(
                "bash=false is unsupported for cursor".into(),
            ));
        }
        if g.web_search {
            return Err(InvocationError::Unsupported(
                "webSearch is unsupported for cursor".into(),
            ));
        }
        let write = request.writes();
        let mut secrets = Vec::new();
        let mcp = mcp_config(run, &mut secrets)?;
        let mcp_names = mcp.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
        let home = home(run);
        let mut env = agent_env(spec, &run.parent_env);
        state_env(&mut env, &home);
        let mut dirs = vec![run.file(STATE_DIR), home.clone()];
        dirs.extend(
            ["config", "cache", "state", "data"]
                .iter()
                .map(|d| home.join(d)),
        );
        if mcp.is_some() {
            dirs.push(home.join(".cursor"));
        }
        let paths_flag = if write {
            "--allow-paths"
        } else {
            "--readonly-paths"
        };
        // The process starts in the worktree and `sandbox run` hands that directory to the
        // command it runs, so the agent needs no `/usr/bin/env -C <cwd>` (GNU coreutils ≥ 8.28
        // only; missing from BSD and macOS `env`) as the reference used. The worktree is the
        // path the sandbox grants, so starting there is within what it allows.
        let mut args: Vec<String> = vec![
            "sandbox".into(),
            "run".into(),
            "--sandbox".into(),
            "--network".into(),
            paths_flag.into(),
            request.cwd.clone(),
            run.executable.to_string(),
            "-p".into(),
            "--output-format".into(),
            "json".into(),
        ];
        if write {
            args.push("--force".into());
        }
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if mcp.is_some() {
            args.push("--approve-mcps".into());
        }
        let policy = json!({
            "enforcement": "native-command-sandbox",
            "filesystem": if write { "target-worktree-write" } else { "target-worktree-read-only" },
            "sandboxPaths": {"flag": paths_flag, "paths": [request.cwd]},
            "applyMode": if write { "force" } else { "force-omitted-native-read-only" },
            "nativeFilesystemIsolation": true,
            "nativeBashSandbox": true,
            "network": "enabled (--network)",
            "webSearch": "unsupported",
            "bash": "always available inside the sandbox (Cursor cannot withhold it)",
            "workingDirectory": "process cwd is the worktree (no env -C)",
            "providerState": "HOME and XDG roots are private to the run; file-based Cursor logins there are not visible, so use CURSOR_API_KEY or a keychain login",
            "mcpServers": mcp_names,
            "approveMcps": mcp.is_some(),
            "projectConfiguration": "the worktree's own .cursor/ configuration stays visible to Cursor (its MCP servers, if any, run inside the same sandbox and are approved too when --approve-mcps is given)",
            "structuredResult": "driver-read from the result text of Cursor's JSON envelope (schema in the prompt)",
            "environment": "allowlist",
        });
        Ok(Invocation {
            sandbox: None,
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
