//! Cursor as a continuation receiver: a `cursor-agent -p` turn inside `cursor-agent sandbox
//! run`, as a delegated run is contained, but in the user's own HOME, so that Cursor keeps the
//! chat where `cursor-agent --resume=<chatId>` finds it.
//!
//! What this relies on, from Cursor's documentation (cursor.com/docs/cli/using and
//! cursor.com/docs/cli/reference/output-format) and the recorded `--help`:
//! - `-p --output-format stream-json` prints one JSON event per line, every one with the chat's
//!   `session_id` (the first a `system`/`init` event), and ends a finished turn with a `result`
//!   event (`subtype`, `is_error`, `result`); a turn that fails may end without one;
//! - `--resume [chatId]` goes on with a chat, headless or interactive; the interactive form the
//!   documentation gives is `cursor-agent --resume="<chatId>"`;
//! - chats live under `~/.cursor/chats/<md5 of the directory>/<chatId>/` (a SQLite store no
//!   one else writes) and transcripts under `~/.cursor/projects/`.
//!
//! Cursor's store can't be written by handoff, so a conversation is never carried into it: a
//! Cursor receiver starts from the note and a recap (`--fallback fresh-agent`), and its own
//! chat is the evidence a person resumes.

use camino::Utf8PathBuf;
use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, RawOutput, Receiver, ReceiverReport,
    ReceiverRequest, RunDir, StdinSource, agent_env,
};
use serde_json::json;

use super::{Cursor, SPEC};
use crate::common::one_line;

/// Where Cursor keeps what a receiver's chat needs, under HOME: its chats and their
/// transcripts. Only these (and the worktree for `implement`) are writable in its sandbox;
/// the rest of `~/.cursor` (its MCP servers, its settings) stays read-only, so that no receiver
/// plants configuration for the next Cursor run.
const CHAT_DIRS: [&str; 2] = [".cursor/chats", ".cursor/projects"];

impl Cursor {
    /// A continuation receiver: the delegated plan's containment (Cursor's own sandbox with
    /// the network, the worktree writable for `implement` and read-only for `review`,
    /// `--force` only for `implement`), without what belongs to a bounded delegated run: the
    /// private HOME (the chat must outlive the run) and the result contract.
    pub(super) fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        if request.effort.is_some() {
            return Err(InvocationError::Unsupported(
                "--effort is unsupported for cursor".into(),
            ));
        }
        if request.resume.as_ref().is_some_and(|r| r.fork) {
            return Err(InvocationError::Unsupported(
                "Cursor cannot fork a chat into a chosen id".to_owned(),
            ));
        }
        let env = agent_env(spec, &run.parent_env);
        let home = crate::common::home_dir(&env).ok_or_else(|| {
            InvocationError::Unsupported(
                "a cursor receiver needs an absolute HOME: Cursor keeps its chats under it".into(),
            )
        })?;
        let chats: Vec<Utf8PathBuf> = CHAT_DIRS.iter().map(|d| home.join(d)).collect();
        let write = request.role.writes();
        let mut writable: Vec<String> = chats.iter().map(ToString::to_string).collect();
        if write {
            writable.insert(0, request.cwd.to_string());
        }
        // The sandbox's path flags take comma-separated lists: a comma in a path would split it.
        if let Some(bad) = writable
            .iter()
            .chain(std::iter::once(&request.cwd.to_string()))
            .find(|p| p.contains(','))
        {
            return Err(InvocationError::Unsupported(format!(
                "cursor's sandbox takes comma-separated path lists, so {bad} (which contains a comma) cannot be confined"
            )));
        }
        let mut args: Vec<String> = vec![
            "sandbox".into(),
            "run".into(),
            "--sandbox".into(),
            "--network".into(),
            "--allow-paths".into(),
            writable.join(","),
        ];
        if !write {
            args.extend(["--readonly-paths".into(), request.cwd.to_string()]);
        }
        args.extend([
            run.executable.to_string(),
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
        ]);
        if write {
            args.push("--force".into());
        }
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(resume) = &request.resume {
            args.push(format!("--resume={}", resume.session_id));
        }
        let policy = json!({
            "enforcement": "native-command-sandbox",
            "role": request.role.as_str(),
            "filesystem": if write { "target-worktree-write" } else { "target-worktree-read-only" },
            "sandboxPaths": {"allow": writable, "readonly": if write { json!([]) } else { json!([request.cwd]) }},
            "applyMode": if write { "force" } else { "force-omitted-native-read-only" },
            "network": "enabled (--network)",
            "bash": "always available inside the sandbox (Cursor cannot withhold it)",
            "sessionPersistence": "Cursor keeps the chat under ~/.cursor/chats; resume it with `cursor-agent --resume=<chatId>`",
            "carriedConversation": "none: Cursor's chat store cannot be written, so the receiver starts from the note and a recap (fresh-agent)",
            "providerState": "the user's HOME: Cursor's login and chats; only ~/.cursor/chats and ~/.cursor/projects are writable in its sandbox (all of them: the receiver can write any of your Cursor chats, not only its own)",
            "environment": "allowlist",
        });
        Ok(Invocation {
            sandbox: None,
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone(),
            stdin: StdinSource::Prompt,
            // Nothing is made in the user's HOME (a dry run plans the receiver too): a Cursor
            // that has run here has its chat directories.
            dirs: Vec::new(),
            files: Vec::new(),
            answer: AnswerSource::Stdout,
            policy,
            secrets: Vec::new(),
        })
    }
}

/// Reads a Cursor receiver's `stream-json` output: the chat id from any event's `session_id`,
/// the last message from the `result` event (else the last `assistant` text). A turn without
/// a successful `result` event is a failure, named by the result's text, else by the first
/// line Cursor printed that is not an event (a workspace-trust notice, say).
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut finished: Option<bool> = None;
    let mut result_text: Option<String> = None;
    let mut stray: Option<String> = None;
    let stdout = String::from_utf8_lossy(&raw.stdout);
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            stray.get_or_insert_with(|| line.to_owned());
            continue;
        };
        if report.session_id.is_none()
            && let Some(id) = value
                .get("session_id")
                .and_then(|v| v.as_str())
                .filter(|s| !s.is_empty())
        {
            report.session_id = Some(id.to_owned());
        }
        match value.get("type").and_then(|t| t.as_str()) {
            Some("assistant") => {
                let text: Vec<&str> = value
                    .pointer("/message/content")
                    .and_then(|c| c.as_array())
                    .into_iter()
                    .flatten()
                    .filter(|part| part.get("type").and_then(|t| t.as_str()) == Some("text"))
                    .filter_map(|part| part.get("text").and_then(|t| t.as_str()))
                    .collect();
                if !text.is_empty() {
                    report.last_message = Some(text.concat());
                }
            }
            Some("result") => {
                let ok = value.get("subtype").and_then(|s| s.as_str()) == Some("success")
                    && value.get("is_error").and_then(serde_json::Value::as_bool) != Some(true);
                finished = Some(ok);
                result_text = value
                    .get("result")
                    .and_then(|r| r.as_str())
                    .map(str::to_owned);
            }
            _ => {}
        }
    }
    match finished {
        Some(true) => {
            if let Some(text) = result_text.filter(|t| !t.trim().is_empty()) {
                report.last_message = Some(text);
            }
        }
        Some(false) => {
            report.failure = Some(one_line(
                result_text
                    .as_deref()
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or("Cursor reported an error"),
                1024,
            ));
        }
        None => {
            report.failure = Some(one_line(
                &stray.unwrap_or_else(|| "Cursor ended without a result".to_owned()),
                1024,
            ));
        }
    }
    report
}

impl Receiver for Cursor {
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

    /// `cursor-agent --resume=<chatId>`, the interactive form Cursor's documentation gives.
    fn resume_command(&self, session_id: &str, _config: &AgentConfig) -> Vec<String> {
        vec![SPEC.executable.to_owned(), format!("--resume={session_id}")]
    }

    /// Every Cursor whose `--help` passes preflight has `--resume [chatId]`.
    fn resume_support(&self, _version: Option<&str>) -> Result<(), String> {
        Ok(())
    }

    fn level(&self) -> handoff_core::ReceiverLevel {
        handoff_core::ReceiverLevel::FreshAgent
    }
}
