//! A headless Grok run: its named sandbox profile, a permission mode that never asks, an
//! explicit tool list with deny rules for everything not granted, and `--json-schema`.

use handoff_core::{
    AnswerSource, Enforcement, FilesystemRead, FilesystemWrite, Invocation, InvocationError,
    Isolation, Network, PrivateFile, Request, RunDir, RunShape, StdinSource, UnixSockets,
    agent_env, process_containment,
};
use serde_json::json;

use super::{Grok, SPEC};
use crate::common::PROVIDER_DEFAULT_STR;

/// The name of the prompt file in the run directory.
pub const PROMPT_FILE: &str = "request.txt";

/// The built-in tools of a run: `Read, Grep`, `Edit` (writing runs), `Bash` (bash granted),
/// `WebSearch, WebFetch` (web granted).
pub fn tools(request: &Request) -> Vec<&'static str> {
    let g = &request.grants.resolved;
    let mut t = vec!["Read", "Grep"];
    if g.write {
        t.push("Edit");
    }
    if g.bash {
        t.push("Bash");
    }
    if g.web_search {
        t.extend(["WebSearch", "WebFetch"]);
    }
    t
}

/// The deny rules of a run: `Bash(*)` without bash, `Edit(*)` when read-only, always
/// `MCPTool(*)`, `WebFetch(*)` without web.
pub fn deny_rules(request: &Request) -> Vec<&'static str> {
    let g = &request.grants.resolved;
    let mut d = Vec::new();
    if !g.bash {
        d.push("Bash(*)");
    }
    if !g.write {
        d.push("Edit(*)");
    }
    d.push("MCPTool(*)");
    if !g.web_search {
        d.push("WebFetch(*)");
    }
    d
}

/// What a run of `shape` can do under the configuration [`Grok::plan`] builds. Grok's named
/// profiles write the worktree, Grok's own state and the temporary directories (`workspace`) or
/// nothing (`read-only`) and read more than the worktree; nothing known of them confines a
/// command's network or Unix sockets, so a shell counts as reaching both.
pub(super) fn isolation(shape: &RunShape) -> Isolation {
    let g = &shape.grants;
    Isolation {
        enforcement: Enforcement::Native,
        filesystem_write: if g.write {
            FilesystemWrite::WorktreeAndTemp
        } else {
            FilesystemWrite::None
        },
        filesystem_read: FilesystemRead::Anywhere,
        network: match (g.bash, g.web_search) {
            (true, _) => Network::Any,
            (false, true) => Network::Web,
            (false, false) => Network::None,
        },
        unix_sockets: if g.bash {
            UnixSockets::All
        } else {
            UnixSockets::None
        },
        process: process_containment(),
    }
}

impl Grok {
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        // Validation refuses MCP before a plan is made; refusing here too keeps the plan
        // fail-closed if a caller skips validation.
        if run.mcp.as_ref().is_some_and(|m| !m.servers.is_empty()) {
            return Err(InvocationError::Unsupported(
                "Grok private MCP isolation was not proved; --mcp-config is unsupported for grok"
                    .into(),
            ));
        }
        let g = &request.grants.resolved;
        let write = request.writes();
        let sel = &request.selection.resolved;
        let turns = sel
            .max_turns
            .unwrap_or(SPEC.max_turns.map_or(12, |d| d.handoff));
        let prompt_file = run.file(PROMPT_FILE);
        let profile = if write { "workspace" } else { "read-only" };
        let permission_mode = if write { "auto" } else { "dontAsk" };
        let tool_list = tools(request);
        let denies = deny_rules(request);
        let allows: Vec<&str> = if g.web_search {
            vec!["WebFetch(*)"]
        } else {
            vec![]
        };
        let mut args: Vec<String> = vec![
            "--prompt-file".into(),
            prompt_file.to_string(),
            "--cwd".into(),
            request.cwd.clone(),
            "--sandbox".into(),
            profile.into(),
            "--permission-mode".into(),
            permission_mode.into(),
            "--no-plan".into(),
            "--no-subagents".into(),
            "--no-memory".into(),
            "--max-turns".into(),
            turns.to_string(),
            "--json-schema".into(),
            run.output_schema.to_string(),
            "--verbatim".into(),
        ];
        if !g.web_search {
            args.push("--disable-web-search".into());
        }
        args.extend(["--tools".into(), tool_list.join(",")]);
        for rule in &denies {
            args.extend(["--deny".into(), (*rule).into()]);
        }
        for rule in &allows {
            args.extend(["--allow".into(), (*rule).into()]);
        }
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if sel.effort != PROVIDER_DEFAULT_STR {
            args.extend(["--effort".into(), sel.effort.clone()]);
        }
        let policy = json!({
            "enforcement": "native-named-sandbox",
            "sandboxProfile": profile,
            "permissionMode": permission_mode,
            "approvals": "never",
            "plan": false,
            "subagents": false,
            "memory": false,
            "maxTurns": turns,
            "tools": tool_list,
            "allow": allows,
            "deny": denies,
            "nativeFilesystemIsolation": true,
            "nativeBashSandbox": g.bash,
            "readScope": "provider-profile-defined-and-broader-than-cwd",
            "writableLocations": if write { json!(["cwd", "provider-state", "temporary-directories"]) } else { json!([]) },
            "webSearch": if g.web_search { "enabled (WebSearch, WebFetch)" } else { "disabled" },
            "mcpServers": [],
            "structuredResult": "native --json-schema in Grok's JSON envelope",
            "environment": "allowlist",
        });
        Ok(Invocation {
            sandbox: None,
            program: run.executable.clone(),
            args,
            env: agent_env(spec, &run.parent_env),
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Null,
            dirs: vec![],
            files: vec![PrivateFile {
                path: prompt_file,
                contents: run.prompt.clone().into_bytes(),
            }],
            answer: AnswerSource::Stdout,
            policy,
            secrets: vec![],
        })
    }
}
