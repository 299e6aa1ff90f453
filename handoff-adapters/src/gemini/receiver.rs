//! Gemini as a continuation receiver: a headless turn whose session Gemini keeps in the user's
//! own store, where `gemini --resume <id>` (run in the worktree) finds it.
//!
//! Under handoff's sandbox the turn runs like a delegated run (handoff's settings, the filtering
//! proxy) in a Gemini directory private to it, mounted where the user's is, with the `chats/`
//! folder of the user's project folder for the worktree mounted writable on top: the session
//! lands in the user's store, and nothing else of the user's Gemini configuration is visible to
//! the turn or writable by it. A project with no folder in the user's store yet gets one (its
//! `.project_root`, which Gemini adopts). Without the sandbox the turn runs in the user's own
//! Gemini home, as the user would run Gemini (their settings then select its auth).

use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, PrivateFile, RawOutput, Receiver,
    ReceiverReport, ReceiverRequest, RunDir, StdinSource, agent_env,
};
use serde_json::{Value, json};

use super::invocation::{
    DEFAULT_MODEL, POLICY_FILE, base_args, base_settings, denied_tools, deny_policy, granted_tools,
    home,
};
use super::sessions::{gemini_dir, new_project_dir, project_dir};
use super::{Gemini, SPEC};
use crate::common::{effective_env, json_lines, one_line, receiver_grants};
use crate::store::plain_id;

impl Gemini {
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        if request.resume.as_ref().is_some_and(|r| r.fork) {
            return Err(InvocationError::Unsupported(
                "Gemini cannot fork a session into a chosen id".to_owned(),
            ));
        }
        let g = receiver_grants(request.role);
        let base = agent_env(spec, &run.parent_env);
        let user = effective_env(&base, run);
        let session = request
            .resume
            .as_ref()
            .map_or(request.session_id.as_str(), |r| r.session_id.as_str());
        if !plain_id(session) {
            return Err(InvocationError::Unsupported(format!(
                "'{session}' is not a Gemini session id"
            )));
        }
        let user_gemini = gemini_dir(&user).ok_or_else(|| {
            InvocationError::Unsupported(
                "a gemini receiver needs GEMINI_CLI_HOME or an absolute HOME: its session is kept there"
                    .into(),
            )
        })?;
        let model = request
            .model
            .clone()
            .or_else(|| run.agent_config.model.clone())
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
        let denied = denied_tools(g.write, g.bash, g.web_search);

        let mut args = base_args(&model);
        let root = run.file("gemini");
        let policy_path = root.join(POLICY_FILE);
        args.extend(["--admin-policy".into(), policy_path.to_string()]);
        match &request.resume {
            Some(from) => args.extend(["--resume".into(), from.session_id.clone()]),
            None => args.extend(["--session-id".into(), request.session_id.clone()]),
        }
        let mut files = vec![PrivateFile {
            path: policy_path,
            contents: deny_policy(&denied).into_bytes(),
        }];
        let mut dirs = vec![root.clone()];
        let mut env = base.clone();
        env.insert("GEMINI_CLI_NO_RELAUNCH".into(), "true".into());
        env.insert("GEMINI_SANDBOX".into(), "false".into());
        env.insert("NO_COLOR".into(), "1".into());

        // The user's project folder for the worktree, made now when it has none.
        let (user_project, new) = match project_dir(&user_gemini, &request.cwd) {
            Some(dir) => (dir, false),
            None => (new_project_dir(&user_gemini, &request.cwd), true),
        };
        let user_chats = user_project.join("chats");
        dirs.push(user_chats.clone());
        if new {
            files.push(PrivateFile {
                path: user_project.join(".project_root"),
                contents: request.cwd.as_str().as_bytes().to_vec(),
            });
        }

        let sandbox = run.handoff_sandbox.then(|| {
            // The user's Gemini directory as the turn sees it: a directory private to the run
            // mounted at its place (handoff's settings, the worktree's project), with the chats
            // folder of the user's project folder on top. Gemini's home stays the user's, so
            // the session lands where `gemini --resume` finds it.
            let private = home(&root).join(".gemini");
            let slug = user_project.file_name().unwrap_or("project").to_owned();
            let project = private.join("tmp").join(&slug);
            let mut settings = base_settings(&user);
            settings["tools"]["core"] = json!(granted_tools(g.write, g.bash, g.web_search));
            files.extend([
                PrivateFile {
                    path: private.join("settings.json"),
                    contents: serde_json::to_vec_pretty(&settings).unwrap_or_default(),
                },
                PrivateFile {
                    path: private.join("projects.json"),
                    contents: json!({"projects": {request.cwd.as_str(): slug}})
                        .to_string()
                        .into_bytes(),
                },
                PrivateFile {
                    path: project.join(".project_root"),
                    contents: request.cwd.as_str().as_bytes().to_vec(),
                },
            ]);
            dirs.extend([
                home(&root),
                private.clone(),
                project.clone(),
                project.join("chats"),
            ]);
            let bind = |source: camino::Utf8PathBuf, dest| handoff_core::sandbox::Bind {
                source,
                dest,
                writable: true,
                secret: false,
            };
            let mut network = super::network::network(&user, &serde_json::Map::new(), false);
            network.public_hosts = Some(
                "a receiver takes a whole task over: its shell may need any public host".into(),
            );
            handoff_core::sandbox::SandboxSpec {
                binds: vec![
                    bind(private, user_gemini.clone()),
                    bind(user_chats.clone(), user_chats.clone()),
                ],
                state: "a Gemini directory private to the turn mounted over yours, with the \
                        chats folder of your project's folder of your store (tmp/<slug>/chats) \
                        mounted writable on top"
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
            "model": model,
            "approvalMode": "yolo",
            "deny": denied,
            "denyTier": "admin (--admin-policy)",
            "sessionPersistence": true,
            "sessionStore": user_chats,
            "geminiHome": if sandbox.is_some() {
                "private to the turn, mounted over yours; only your project's chats folder is mounted into it"
            } else {
                "yours: without handoff's sandbox Gemini runs as you would run it"
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

/// Reads a receiver's events: the session from the `init` event, the last message from the
/// assistant's text after its last tool call, a `result` with `status: "error"` as a failure,
/// and a turn without a `result` event as one too.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut text = String::new();
    let mut finished = false;
    for v in json_lines(&raw.stdout).flatten() {
        match v.get("type").and_then(Value::as_str) {
            Some("init") => {
                report.session_id = v
                    .get("session_id")
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned);
            }
            Some("message") if v.get("role").and_then(Value::as_str) == Some("assistant") => {
                if v.get("delta").and_then(Value::as_bool) != Some(true) {
                    text.clear();
                }
                text.push_str(v.get("content").and_then(Value::as_str).unwrap_or_default());
            }
            Some("tool_use" | "tool_result") => {
                if !text.trim().is_empty() {
                    report.last_message = Some(std::mem::take(&mut text));
                }
                text.clear();
            }
            Some("result") => {
                finished = true;
                if v.get("status").and_then(Value::as_str) == Some("error") {
                    let message = v
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("Gemini reported an error");
                    report.failure = Some(one_line(message, 1024));
                }
            }
            _ => {}
        }
    }
    if !text.trim().is_empty() {
        report.last_message = Some(text);
    }
    if !finished && report.failure.is_none() {
        let stderr = String::from_utf8_lossy(&raw.stderr);
        report.failure = Some(one_line(
            crate::probe::first_line(&stderr)
                .as_deref()
                .unwrap_or("Gemini ended without a result event"),
            1024,
        ));
    }
    report
}

impl Receiver for Gemini {
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

    /// `gemini --resume <id>`, with the configuration's model.
    fn resume_command(&self, session_id: &str, config: &AgentConfig) -> Vec<String> {
        crate::common::resume_by_id(SPEC.executable, session_id, config)
    }

    /// Every Gemini whose `--help` passes preflight resumes by id (`--resume`).
    fn resume_support(&self, _version: Option<&str>) -> Result<(), String> {
        Ok(())
    }

    /// Run against the real CLI (0.61.0): a carried conversation resumed, its own session
    /// carried on.
    fn verified(&self) -> handoff_core::Verified {
        handoff_core::Verified::Real
    }
}
