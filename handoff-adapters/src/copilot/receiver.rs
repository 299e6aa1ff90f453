//! Copilot as a continuation receiver: a headless turn whose session Copilot keeps in the
//! user's own store, where `copilot --resume <id>` finds it.
//!
//! Under handoff's sandbox the turn runs like a delegated run (a Copilot home private to it,
//! mounted where the user's is, the extracted package read-only, the filtering proxy), with one
//! folder of the user's store mounted writable on top: the session's own,
//! `session-state/<id>/` (made before the turn when the session is new). Copilot resumes a session from that folder alone, so nothing
//! else of the user's Copilot configuration is visible to the turn or writable by it. Without
//! the sandbox the turn runs in the user's own `COPILOT_HOME`, as the user would run Copilot.

use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, RawOutput, Receiver, ReceiverReport,
    ReceiverRequest, RunDir, StdinSource, agent_env,
};
use serde_json::{Value, json};

use super::invocation::{SECRET_VARS, byok, roots, user_package_cache};
use super::sessions::copilot_home;
use super::{Copilot, SPEC};
use crate::common::{json_lines, one_line, receiver_grants};
use crate::store::plain_id;

impl Copilot {
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        if request.resume.as_ref().is_some_and(|r| r.fork) {
            return Err(InvocationError::Unsupported(
                "Copilot cannot fork a session into a chosen id".to_owned(),
            ));
        }
        let g = receiver_grants(request.role);
        let base = agent_env(spec, &run.parent_env);
        let user = crate::common::effective_env(&base, run);
        let offline = byok(&user);
        let session = request
            .resume
            .as_ref()
            .map_or(request.session_id.as_str(), |r| r.session_id.as_str());
        if !plain_id(session) {
            return Err(InvocationError::Unsupported(format!(
                "'{session}' is not a Copilot session id"
            )));
        }
        let user_home = copilot_home(&user).ok_or_else(|| {
            InvocationError::Unsupported(
                "a copilot receiver needs COPILOT_HOME or an absolute HOME: its session is kept there"
                    .into(),
            )
        })?;
        let user_session = user_home.join("session-state").join(session);

        let mut env = base.clone();
        env.insert("COPILOT_AUTO_UPDATE".into(), "false".into());
        env.insert("NO_COLOR".into(), "1".into());
        env.insert("TERM".into(), "dumb".into());
        if offline {
            env.insert("COPILOT_OFFLINE".into(), "true".into());
        }
        let mut args: Vec<String> = [
            "--output-format",
            "json",
            "--no-ask-user",
            "--no-auto-update",
            "--allow-all-tools",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!("--secret-env-vars={}", SECRET_VARS.join(",")));
        if !g.write {
            args.extend(["--deny-tool".into(), "write".into()]);
        }
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(effort) = &request.effort {
            args.extend(["--reasoning-effort".into(), effort.clone()]);
        }
        match &request.resume {
            Some(from) => args.extend(["--resume".into(), from.session_id.clone()]),
            None => args.extend(["--session-id".into(), request.session_id.clone()]),
        }

        let mut dirs = Vec::new();
        let sandbox = run.handoff_sandbox.then(|| {
            // The user's Copilot home as the turn sees it: a directory private to the run
            // mounted at its place, with the session's own folder of the real one on top.
            // `COPILOT_HOME` stays the user's, so the session is found where it lands.
            let root = run.file("copilot");
            let (home, cache) = roots(&root);
            let pkg = root.join("pkg");
            env.insert("COPILOT_CACHE_HOME".into(), cache.to_string());
            env.insert("COPILOT_PKG_CACHE_HOME".into(), pkg.to_string());
            dirs.extend([
                root.clone(),
                home.clone(),
                home.join("session-state").join(session),
                cache,
                pkg.clone(),
                user_session.clone(),
            ]);
            let bind = |source: camino::Utf8PathBuf, dest, writable| handoff_core::sandbox::Bind {
                source,
                dest,
                writable,
                secret: false,
            };
            let mut binds = vec![
                bind(home, user_home.clone(), true),
                bind(user_session.clone(), user_session.clone(), true),
            ];
            binds.extend(
                user_package_cache(&user).map(|c| bind(c.join("pkg"), pkg.join("pkg"), false)),
            );
            let mut network = super::network::network(&user, &json!({}), true, offline);
            network.public_hosts = Some(
                "a receiver takes a whole task over: its web tool and shell may need any \
                 public host"
                    .into(),
            );
            handoff_core::sandbox::SandboxSpec {
                binds,
                state: "a Copilot home private to the turn mounted over yours, with the \
                        session's own folder of your store (session-state/<id>) mounted writable \
                        on top"
                    .into(),
                offline_shell: false,
                network: Some(network),
                packages: None,
            }
        });
        let mut policy = json!({
            "role": request.role.as_str(),
            "enforcement": "handoff-sandbox-and-tool-policy",
            "nativeFilesystemIsolation": false,
            "allowAllTools": true,
            "deny": if g.write { json!([]) } else { json!(["write"]) },
            "customInstructions": "loaded: the task's new owner works by the project's instructions",
            "sessionPersistence": true,
            "sessionStore": user_session,
            "copilotHome": if sandbox.is_some() {
                "private to the turn; only the session's folder of your store is mounted into it"
            } else {
                "yours: without handoff's sandbox Copilot runs as you would run it"
            },
            "offline": offline,
            "secretEnvVars": SECRET_VARS,
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
            files: Vec::new(),
            answer: AnswerSource::Stdout,
            policy,
            secrets: Vec::new(),
        })
    }
}

/// Reads a receiver's events: the session from the `result` event, the last message from the
/// last `assistant.message` with text, a `session.error` or a non-zero `exitCode` as a
/// failure, and a turn without a `result` event as one too.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut finished = false;
    for v in json_lines(&raw.stdout).flatten() {
        match v.get("type").and_then(Value::as_str) {
            Some("assistant.message") => {
                if let Some(text) = v
                    .pointer("/data/content")
                    .and_then(Value::as_str)
                    .filter(|t| !t.trim().is_empty())
                {
                    report.last_message = Some(text.to_owned());
                }
            }
            Some("session.error") => {
                let message = v
                    .pointer("/data/message")
                    .and_then(Value::as_str)
                    .unwrap_or("Copilot reported an error");
                report.failure = Some(one_line(message, 1024));
            }
            Some("result") => {
                finished = true;
                if let Some(id) = v.get("sessionId").and_then(Value::as_str)
                    && !id.is_empty()
                {
                    report.session_id = Some(id.to_owned());
                }
                if let Some(code) = v
                    .get("exitCode")
                    .and_then(Value::as_i64)
                    .filter(|c| *c != 0)
                    && report.failure.is_none()
                {
                    report.failure = Some(format!("Copilot's turn ended with exit code {code}"));
                }
            }
            _ => {}
        }
    }
    if !finished && report.failure.is_none() {
        report.failure = Some(crate::common::unfinished_turn(
            raw,
            "Copilot ended without a result event",
        ));
    }
    report
}

impl Receiver for Copilot {
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

    /// `copilot --resume <id>`, with the configuration's model.
    fn resume_command(&self, session_id: &str, config: &AgentConfig) -> Vec<String> {
        crate::common::resume_by_id(SPEC.executable, session_id, config)
    }

    /// Every Copilot whose `--help` passes preflight resumes by id (`--resume`).
    fn resume_support(&self, _version: Option<&str>) -> Result<(), String> {
        Ok(())
    }

    /// Run against the real CLI (1.0.102): a carried OpenCode conversation resumed, its own
    /// session carried to OpenCode.
    fn verified(&self) -> handoff_core::Verified {
        handoff_core::Verified::Real
    }
}
