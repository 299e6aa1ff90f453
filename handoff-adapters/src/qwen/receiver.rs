//! Qwen as a continuation receiver: a headless turn whose session Qwen keeps in the user's own
//! store, where `qwen --resume <id>` finds it from the same directory.
//!
//! Under handoff's sandbox the turn runs with a Qwen home private to it mounted where the
//! user's is, and one folder of the user's store mounted writable on top: the directory's own
//! sessions, `projects/<slug>/chats/`. Nothing else of the user's Qwen configuration is visible
//! to the turn or writable by it. Without the sandbox the turn runs in the user's own Qwen
//! home, as the user would run Qwen. Either way handoff's settings are the system settings file
//! (no managed auto-memory call, no hooks), and a project's MCP servers are not started.

use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, PrivateFile, RawOutput, Receiver,
    ReceiverReport, ReceiverRequest, RunDir, StdinSource, agent_env,
};
use serde_json::{Value, json};

use super::invocation::{SETTINGS_FILE, TOOLS, base_args, base_env, settings};
use super::sessions::{chats_dir, qwen_home};
use super::{Qwen, SPEC};
use crate::common::{json_lines, one_line, receiver_grants};
use crate::store::plain_id;

impl Qwen {
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        if request.resume.as_ref().is_some_and(|r| r.fork) {
            return Err(InvocationError::Unsupported(
                "Qwen cannot fork a session into a chosen id".to_owned(),
            ));
        }
        let g = receiver_grants(request.role);
        let base = agent_env(spec, &run.parent_env);
        let user = crate::common::effective_env(&base, run);
        let session = request
            .resume
            .as_ref()
            .map_or(request.session_id.as_str(), |r| r.session_id.as_str());
        if !plain_id(session) {
            return Err(InvocationError::Unsupported(format!(
                "'{session}' is not a Qwen session id"
            )));
        }
        let user_home = qwen_home(&user).ok_or_else(|| {
            InvocationError::Unsupported(
                "a qwen receiver needs QWEN_HOME or an absolute HOME: its session is kept there"
                    .into(),
            )
        })?;
        let user_chats = chats_dir(&user_home, &request.cwd);
        let root = run.file("qwen");
        let settings_path = root.join(SETTINGS_FILE);

        let mut env = base.clone();
        base_env(&mut env, &settings_path);
        let mut args = base_args(None, request.model.as_deref());
        args.push(format!(
            "--core-tools={}",
            TOOLS.granted(g.write, g.bash, g.web_search).join(",")
        ));
        args.push(format!(
            "--exclude-tools={}",
            TOOLS.refused(g.write, g.bash, g.web_search).join(",")
        ));
        args.push("--allowed-mcp-server-names=".into());
        match &request.resume {
            Some(from) => args.extend(["--resume".into(), from.session_id.clone()]),
            None => args.extend(["--session-id".into(), request.session_id.clone()]),
        }
        let mut files = vec![PrivateFile {
            path: settings_path,
            contents: settings(request.effort.as_deref()).to_string().into_bytes(),
        }];
        let mut dirs = vec![root.clone()];
        let sandbox = run.handoff_sandbox.then(|| {
            // The user's Qwen home as the turn sees it: a directory private to the run mounted
            // at its place, with the directory's sessions folder of the real one on top.
            let home = super::invocation::home(&root);
            dirs.extend([
                home.clone(),
                chats_dir(&home, &request.cwd),
                user_chats.clone(),
            ]);
            files.push(PrivateFile {
                path: home.join("settings.json"),
                contents: b"{}".to_vec(),
            });
            let bind = |source, dest| handoff_core::sandbox::Bind {
                source,
                dest,
                writable: true,
                secret: false,
            };
            handoff_core::sandbox::SandboxSpec {
                binds: vec![
                    bind(home, user_home.clone()),
                    bind(user_chats.clone(), user_chats.clone()),
                ],
                state: "a Qwen home private to the turn mounted over yours, with the directory's \
                        own sessions folder of your store (projects/<slug>/chats) mounted \
                        writable on top"
                    .into(),
                offline_shell: false,
                // A receiver takes a whole task over: its shell may need any public host.
                network: None,
                packages: None,
            }
        });
        let mut policy = json!({
            "role": request.role.as_str(),
            "enforcement": "handoff-sandbox-and-tool-policy",
            "nativeFilesystemIsolation": false,
            "approvalMode": "yolo",
            "coreTools": TOOLS.granted(g.write, g.bash, g.web_search),
            "settings": "handoff's, as the system settings file: no managed auto-memory call, no hooks",
            "mcpServers": "none: a project's servers are not started",
            "sessionPersistence": true,
            "sessionStore": user_chats,
            "qwenHome": if sandbox.is_some() {
                "private to the turn; only the directory's sessions folder of your store is mounted into it"
            } else {
                "yours: without handoff's sandbox Qwen runs as you would run it"
            },
            "structuredResult": "none: the receiver answers in its own words",
            "environment": "allowlist",
        });
        if sandbox.is_none() {
            policy["sandbox"] = handoff_core::sandbox::unavailable_receipt();
        }
        Ok(Invocation {
            sandbox,
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone(),
            stdin: StdinSource::Prompt,
            dirs,
            files,
            answer: AnswerSource::Stdout,
            policy,
            secrets: Vec::new(),
        })
    }
}

/// Reads a receiver's events: the session from any event's `session_id`, the last message
/// from the `result` event (else the last assistant text), an error result as a failure, and
/// a turn without a `result` event as one too.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut finished = false;
    for v in json_lines(&raw.stdout).flatten() {
        if let Some(id) = v
            .get("session_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            report.session_id = Some(id.to_owned());
        }
        match v.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                let blocks = v.pointer("/message/content").and_then(Value::as_array);
                let text: Vec<&str> = blocks
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect();
                if !text.concat().trim().is_empty() {
                    report.last_message = Some(text.join("\n"));
                }
            }
            Some("result") => {
                finished = true;
                if v.get("is_error").and_then(Value::as_bool) == Some(true) {
                    let message = v
                        .pointer("/error/message")
                        .or_else(|| v.get("result"))
                        .and_then(Value::as_str)
                        .unwrap_or("Qwen reported an error");
                    report.failure = Some(one_line(message, 1024));
                } else if let Some(text) = v
                    .get("result")
                    .and_then(Value::as_str)
                    .filter(|t| !t.trim().is_empty())
                {
                    report.last_message = Some(text.to_owned());
                }
            }
            _ => {}
        }
    }
    if !finished && report.failure.is_none() {
        report.failure = Some(crate::common::unfinished_turn(
            raw,
            "Qwen ended without a result event",
        ));
    }
    report
}

impl Receiver for Qwen {
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

    /// `qwen --resume <id>` (from the session's directory), with the configuration's model.
    fn resume_command(&self, session_id: &str, config: &AgentConfig) -> Vec<String> {
        crate::common::resume_by_id(SPEC.executable, session_id, config)
    }

    /// Every Qwen whose `--help` passes preflight resumes by id (`--resume`).
    fn resume_support(&self, _version: Option<&str>) -> Result<(), String> {
        Ok(())
    }

    /// Run against the real CLI (0.24.4): a carried OpenCode conversation resumed, its own
    /// session carried to OpenCode.
    fn verified(&self) -> handoff_core::Verified {
        handoff_core::Verified::Real
    }
}
