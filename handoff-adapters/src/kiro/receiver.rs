//! Kiro as a continuation receiver: a `kiro-cli chat --no-interactive` turn under handoff's own
//! sandbox, with the delegated run's trusted tools for its role, whose conversation Kiro keeps
//! for the directory it ran in.
//!
//! What this relies on, from the recorded `kiro-cli chat --help` and Kiro's documentation
//! (kiro.dev/docs/cli/headless, kiro.dev/docs/cli/chat/session-management):
//! - Kiro saves a chat, headless or not, under the directory it started in (in its data
//!   directory's database, or in `~/.kiro/sessions/` for its newer engines);
//! - `kiro-cli chat --resume` "resumes the previous conversation from this directory";
//! - a headless chat prints its answer after a `> ` marker and no conversation id.
//!
//! So a Kiro receiver reports no session id; the command that resumes it is `kiro-cli chat
//! --resume` in the worktree, which resumes the worktree's newest conversation: the receiver's,
//! until someone starts another Kiro chat there. Kiro's store can't be written by handoff, so a
//! conversation is never carried into it: a Kiro receiver starts from the note and a recap
//! (`--fallback fresh-agent`).

use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, RawOutput, Receiver, ReceiverReport,
    ReceiverRequest, RunDir, StdinSource, agent_env,
};
use serde_json::json;

use super::parse::answer_block;
use super::{Kiro, SPEC};
use crate::common::{one_line, receiver_grants, strip_ansi};

impl Kiro {
    /// A continuation receiver: the delegated plan's containment for a run with a shell
    /// (`fs_read` and `execute_bash` trusted, `fs_write` for `implement` only, never
    /// `--trust-all-tools`), under handoff's own sandbox, which is required: Kiro has no
    /// sandbox of its own, and a receiver's turn is a whole task's worth of shell.
    pub(super) fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        if !run.handoff_sandbox {
            return Err(InvocationError::Unsupported(
                "kiro receives a continuation only under handoff's own sandbox (bubblewrap), \
                 which cannot run here: Kiro has no sandbox of its own"
                    .into(),
            ));
        }
        if request.resume.is_some() {
            return Err(InvocationError::Unsupported(
                "kiro resumes only the newest conversation of a directory, never a chosen one"
                    .into(),
            ));
        }
        let grants = receiver_grants(request.role);
        let mut tools = vec!["fs_read"];
        if grants.write {
            tools.push("fs_write");
        }
        if grants.bash {
            tools.push("execute_bash");
        }
        let mut env = agent_env(spec, &run.parent_env);
        env.insert("NO_COLOR".into(), "1".into());
        env.insert("TERM".into(), "dumb".into());
        let mut args: Vec<String> = vec![
            "chat".into(),
            "--no-interactive".into(),
            "--wrap".into(),
            "never".into(),
            format!("--trust-tools={}", tools.join(",")),
        ];
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(effort) = &request.effort {
            args.extend(["--effort".into(), effort.clone()]);
        }
        let mut sandbox = super::invocation::sandbox_spec(&env);
        // Newer Kiro engines keep sessions in `~/.kiro/sessions/`: writable in place, above the
        // read-only `~/.kiro`, so that the receiver's conversation outlives it.
        if let Some(home) = crate::common::home_dir(&env) {
            sandbox.binds.push(handoff_core::sandbox::Bind {
                source: home.join(".kiro/sessions"),
                dest: home.join(".kiro/sessions"),
                writable: true,
                secret: false,
            });
        }
        sandbox.state = "Kiro's data directory (logins, conversations) and ~/.kiro/sessions \
                         writable in place; the rest of ~/.kiro read-only"
            .into();
        let policy = json!({
            "enforcement": "tool-permission-allowlist",
            "role": request.role.as_str(),
            "filesystem": if grants.write { "permission-only-workspace-write" } else { "permission-only-read-only-intent" },
            "trustedTools": tools,
            "trustAllTools": false,
            "untrustedTools": "not run (no one can approve them in --no-interactive mode)",
            "bash": "trusted, under handoff's sandbox",
            "sessionPersistence": "Kiro keeps the conversation for the worktree; resume it there with `kiro-cli chat --resume`",
            "carriedConversation": "none: Kiro's store cannot be written, so the receiver starts from the note and a recap (fresh-agent)",
            "environment": "allowlist",
        });
        Ok(Invocation {
            sandbox: Some(sandbox),
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone(),
            stdin: StdinSource::Prompt,
            dirs: Vec::new(),
            files: Vec::new(),
            answer: AnswerSource::Stdout,
            policy,
            secrets: Vec::new(),
        })
    }
}

/// Reads a Kiro receiver's transcript: its last message is the text after the last
/// line-start `> ` marker, escape sequences removed. No marker, or nothing after it, is a
/// failure (Kiro's own error, when it printed one on stderr, names it). Kiro prints no
/// conversation id.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let text = strip_ansi(&raw.stdout);
    match answer_block(&text).map(|b| String::from_utf8_lossy(b).trim().to_owned()) {
        Some(answer) if !answer.is_empty() => report.last_message = Some(answer),
        _ => {
            let stderr = String::from_utf8_lossy(&strip_ansi(&raw.stderr))
                .trim()
                .to_owned();
            report.failure = Some(one_line(
                if stderr.is_empty() {
                    "Kiro printed no `> ` answer"
                } else {
                    &stderr
                },
                1024,
            ));
        }
    }
    report
}

impl Receiver for Kiro {
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

    /// Kiro cannot resume a chosen conversation: the worktree's newest, as
    /// [`Receiver::resume_latest`].
    fn resume_command(&self, _session_id: &str, _config: &AgentConfig) -> Vec<String> {
        latest()
    }

    fn resume_latest(&self, _config: &AgentConfig) -> Option<Vec<String>> {
        Some(latest())
    }

    fn resume_support(&self, _version: Option<&str>) -> Result<(), String> {
        Err("kiro resumes only the newest conversation of a directory, never a chosen one".into())
    }

    fn level(&self) -> handoff_core::ReceiverLevel {
        handoff_core::ReceiverLevel::FreshAgent
    }
}

/// `kiro-cli chat --resume`: the previous conversation of the directory it runs in.
fn latest() -> Vec<String> {
    vec![SPEC.executable.to_owned(), "chat".into(), "--resume".into()]
}
