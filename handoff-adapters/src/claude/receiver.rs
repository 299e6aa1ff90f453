//! Claude Code as a continuation receiver: a headless first turn whose session Claude Code keeps
//! (`--session-id`, `--resume`, `--fork-session`), read back from its `stream-json` output.

use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, RawOutput, Receiver, ReceiverReport,
    ReceiverRequest, RunDir, StdinSource, agent_env,
};
use serde_json::json;

use super::invocation::{settings, tools_for};
use super::parse::ResultEvent;
use super::{Claude, EMPTY_MCP, SANDBOX_UNAVAILABLE, SPEC};
use crate::common::{json_lines, one_line, receiver_grants};
use crate::probe;

impl Claude {
    /// A continuation receiver: the delegated plan's containment (bash sandbox that fails
    /// closed, tool allowlist, no approvals, no MCP servers, no browser), without what belongs
    /// to a bounded delegated run. Left out: `--no-session-persistence` (the session is the
    /// hand-over), `--json-schema` (a receiver answers in its own words), `--max-turns` (an
    /// owner's first turn is bounded by its time budget, not cut short), and `--safe-mode`,
    /// which also hides the project's CLAUDE.md and settings: the task's new owner works by the
    /// project's own instructions, as the user's later `claude --resume` will.
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let mut env = agent_env(spec, &run.parent_env);
        env.insert("DISABLE_AUTOUPDATER".into(), "1".into());
        env.insert(super::invocation::TMPDIR_VAR.into(), run.temp().to_string());
        let grants = receiver_grants(request.role);
        let write = grants.write;
        let tool_names = tools_for(&grants, &[]);
        let tool_list = tool_names.join(",");
        let mut args: Vec<String> = vec![
            "--settings".into(),
            settings(request.cwd.as_str(), write, None).to_string(),
            "--strict-mcp-config".into(),
            "--mcp-config".into(),
            EMPTY_MCP.into(),
            "--disable-slash-commands".into(),
            "--no-chrome".into(),
            "--permission-mode".into(),
            "dontAsk".into(),
            "--tools".into(),
            tool_list.clone(),
            "--allowedTools".into(),
            tool_list,
        ];
        args.extend(session_args(request));
        args.extend([
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
        ]);
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(effort) = &request.effort {
            args.extend(["--effort".into(), effort.clone()]);
        }
        let mut policy = json!({
            "role": request.role.as_str(),
            "enforcement": if write { "native-bash-sandbox-plus-file-tool-permissions" } else { "read-only-tool-allowlist" },
            "approvals": "never (dontAsk)",
            "safeMode": false,
            "projectInstructions": "loaded: CLAUDE.md and project settings apply to the task's owner (no --safe-mode)",
            "nativeFilesystemIsolation": false,
            "nativeBashSandbox": true,
            "sandboxFailIfUnavailable": true,
            "fileToolConfinement": if write { "worktree writable, everything else by tool permission" } else { "read-only tools only" },
            "toolAllowlist": tool_names,
            "maxTurns": "none: bounded by the receiver's time budget",
            "network": "sandboxed commands have no network; no web tools",
            "structuredResult": "none: the receiver answers in its own words",
            "mcpServers": [],
            "sessionPersistence": true,
            "sessionId": request.session_id,
            "sessionStore": "the user's (~/.claude/projects or CLAUDE_CONFIG_DIR)",
            "environment": "allowlist",
        });
        if let Some(from) = &request.resume {
            policy["resume"] = if from.fork {
                json!({"session": from.session_id, "fork": "native (--fork-session): the resumed session is left as it was"})
            } else {
                json!({"session": from.session_id, "fork": "none: the session is resumed in place"})
            };
            policy["sessionId"] = json!(if from.fork {
                &request.session_id
            } else {
                &from.session_id
            });
        }
        Ok(Invocation {
            sandbox: None,
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

/// The arguments that pick the receiver's session: a new one with the chosen id; a carried
/// one resumed in place (`--resume <id>`, which keeps its id); or one forked natively into the
/// chosen id (`--resume <id> --fork-session --session-id <new>`), which leaves it unchanged.
fn session_args(request: &ReceiverRequest) -> Vec<String> {
    match &request.resume {
        None => vec!["--session-id".into(), request.session_id.clone()],
        Some(from) if from.fork => vec![
            "--resume".into(),
            from.session_id.clone(),
            "--fork-session".into(),
            "--session-id".into(),
            request.session_id.clone(),
        ],
        Some(from) => vec!["--resume".into(), from.session_id.clone()],
    }
}

/// The oldest Claude Code a carried conversation is resumed with. `--resume`,
/// `--fork-session` and `--session-id` are all in every 2.x release; the session lines the
/// writer produces follow the 2.x layout (checked by public sources against 2.1.139 to
/// 2.1.239, and by our real-CLI tests against 2.1.197), so 1.x is not accepted.
pub const MIN_RESUME_VERSION: (u64, u64, u64) = (2, 0, 0);

/// Reads a receiver's `stream-json` output: the session id from any event that names it (the
/// `init` event first, the `result` event last), the last message from the `result` event (or
/// the last assistant text), a failure from an error result or a missing one.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut result: Option<Result<ResultEvent, String>> = None;
    for value in json_lines(&raw.stdout).flatten() {
        if let Some(id) = value.get("session_id").and_then(|v| v.as_str())
            && !id.is_empty()
        {
            report.session_id = Some(id.to_owned());
        }
        match value.get("type").and_then(|t| t.as_str()) {
            // An API error comes as a synthetic assistant message: not the receiver's words.
            Some("assistant")
                if value.pointer("/message/model").and_then(|m| m.as_str())
                    != Some("<synthetic>") =>
            {
                let text = value
                    .pointer("/message/content")
                    .and_then(|c| c.as_array())
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(|t| t.as_str()) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(|t| t.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n");
                if !text.trim().is_empty() {
                    report.last_message = Some(text);
                }
            }
            Some("result") => {
                result = Some(serde_json::from_value(value).map_err(|e| e.to_string()));
            }
            _ => {}
        }
    }
    let text = || {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&raw.stderr),
            String::from_utf8_lossy(&raw.stdout)
        )
    };
    match result {
        None => {
            report.failure = Some(
                probe::line_with_ci(&text(), SANDBOX_UNAVAILABLE)
                    .unwrap_or_else(|| "Claude ended without a result event".into()),
            );
        }
        Some(Err(e)) => {
            report.failure = Some(one_line(&format!("malformed result event: {e}"), 1024))
        }
        Some(Ok(ev)) if ev.is_error == Some(true) => {
            let detail = ev
                .errors
                .as_ref()
                .map(|e| e.join("; "))
                .filter(|s| !s.trim().is_empty())
                .or_else(|| ev.result.clone().filter(|s| !s.trim().is_empty()))
                .unwrap_or_else(|| "no detail".into());
            let message = match ev.subtype.as_deref() {
                Some(s) if s != "success" => format!("{s}: {detail}"),
                _ => detail,
            };
            report.failure = Some(one_line(&message, 1024));
        }
        Some(Ok(ev)) => {
            if let Some(r) = ev.result.filter(|r| !r.trim().is_empty()) {
                report.last_message = Some(r);
            }
        }
    }
    report
}

impl Receiver for Claude {
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

    fn resume_command(&self, session_id: &str, _config: &AgentConfig) -> Vec<String> {
        vec![
            SPEC.executable.to_owned(),
            "--resume".to_owned(),
            session_id.to_owned(),
        ]
    }

    fn resume_support(&self, version: Option<&str>) -> Result<(), String> {
        crate::store::at_least("Claude Code", version, MIN_RESUME_VERSION)
    }

    /// Run against the real CLI in `cargo xtask e2e-real`.
    fn verified(&self) -> handoff_core::Verified {
        handoff_core::Verified::Real
    }

    fn native_fork(&self) -> bool {
        true
    }
}
