//! Codex as a continuation receiver: a `codex exec` turn whose thread Codex keeps in
//! `$CODEX_HOME/sessions` (`codex exec resume` for a carried one), read back from its `--json`
//! events.

use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, RawOutput, Receiver, ReceiverReport,
    ReceiverRequest, RunDir, StdinSource, agent_env,
};
use serde_json::json;

use super::{Codex, PINNED, SPEC};
use crate::common::{json_lines, one_line, receiver_grants, toml_string};

/// Whether a pinned key keeps the project's instruction files (AGENTS.md) away from the agent.
fn hides_project_docs(pin: &str) -> bool {
    pin.starts_with("project_doc_")
}

impl Codex {
    /// A continuation receiver: the delegated plan's containment (Codex's sandbox by role,
    /// approvals never, network and web search off, user config and exec-policy rules ignored,
    /// strict config), without what belongs to a bounded delegated run. Left out: `--ephemeral`
    /// (the session is the hand-over: it must land in `$CODEX_HOME/sessions` for
    /// `codex resume`), `--output-schema` and `--output-last-message` (a receiver answers in its
    /// own words), and the pins that hide the project's AGENTS.md: the task's new owner works
    /// by the project's own instructions.
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let env = agent_env(spec, &run.parent_env);
        let grants = receiver_grants(request.role);
        if request.resume.as_ref().is_some_and(|r| r.fork) {
            return Err(InvocationError::Unsupported(
                "Codex cannot fork a session into a chosen id: carry a copy and resume that"
                    .to_owned(),
            ));
        }
        // `codex exec resume` takes the options of `codex exec` except `--sandbox` and
        // `--cd`: the sandbox mode is set by its config key and the worktree is the process's
        // working directory.
        let mut args: Vec<String> = vec!["exec".to_owned()];
        if request.resume.is_some() {
            args.push("resume".to_owned());
        }
        args.extend(
            [
                "--json",
                "--ignore-user-config",
                "--ignore-rules",
                "--strict-config",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        for pin in PINNED.iter().filter(|p| !hides_project_docs(p)) {
            args.push("--config".into());
            args.push((*pin).into());
        }
        for o in &run.agent_config.config {
            args.push("--config".into());
            args.push(o.clone());
        }
        let sandbox = if grants.write {
            "workspace-write"
        } else {
            "read-only"
        };
        if request.resume.is_some() {
            args.extend([
                "--config".into(),
                format!("sandbox_mode={}", toml_string(sandbox)),
            ]);
        } else {
            args.extend([
                "--sandbox".into(),
                sandbox.into(),
                "--cd".into(),
                request.cwd.to_string(),
            ]);
        }
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(effort) = &request.effort {
            args.extend([
                "--config".into(),
                format!("model_reasoning_effort={}", toml_string(effort)),
            ]);
        }
        if let Some(from) = &request.resume {
            args.push(from.session_id.clone());
        }
        args.push("-".into());
        let mut policy = json!({
            "role": request.role.as_str(),
            "enforcement": "native-filesystem-sandbox",
            "filesystem": sandbox,
            "approvals": "never",
            "ephemeral": false,
            "sessionPersistence": true,
            "sessionStore": "the user's ($CODEX_HOME/sessions)",
            "userConfiguration": "ignored",
            "execPolicyRules": "ignored",
            "projectDocs": "loaded: AGENTS.md applies to the task's owner",
            "nativeFilesystemIsolation": true,
            "network": "blocked",
            "webSearch": "disabled",
            "bash": "sandboxed",
            "structuredResult": "none: the receiver answers in its own words",
            "mcpServers": [],
            "environment": "allowlist",
        });
        if let Some(from) = &request.resume {
            policy["resume"] = json!({
                "session": from.session_id,
                "fork": "none: the carried session is resumed in place (codex exec resume)",
                "sandbox": format!("sandbox_mode={sandbox} (codex exec resume has no --sandbox)"),
                "cwd": "the process's working directory (codex exec resume has no --cd)",
            });
            policy["sessionId"] = json!(from.session_id);
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

/// The oldest Codex a carried conversation is resumed with: `codex exec resume` with `--json`
/// and the receiver's switches (`--ignore-user-config`, `--ignore-rules`, `--strict-config`)
/// is in every release from there on, and the rollout layout the writer produces was checked
/// against 0.128.0 (a public parser specification of `codex-rs/rollout` at that tag) and 0.171.0
/// (our real-CLI tests); older releases are refused rather than guessed at.
pub const MIN_RESUME_VERSION: (u64, u64, u64) = (0, 128, 0);

/// Reads a receiver's `--json` events: the session is `thread.started`'s `thread_id`, the last
/// message the last `agent_message` item; `turn.failed` (or an `error` event before any
/// completed turn, or no completed turn at all) is a failure. Non-fatal warnings arrive as
/// `error` *items* and are not failures.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut failure: Option<String> = None;
    let mut last_error: Option<String> = None;
    let mut completed = false;
    for value in json_lines(&raw.stdout).flatten() {
        let str_at = |p: &str| value.pointer(p).and_then(|v| v.as_str()).map(str::to_owned);
        match value.get("type").and_then(|t| t.as_str()) {
            Some("thread.started") => {
                if let Some(id) = str_at("/thread_id").filter(|s| !s.is_empty()) {
                    report.session_id = Some(id);
                }
            }
            Some("item.completed") if str_at("/item/type").as_deref() == Some("agent_message") => {
                if let Some(text) = str_at("/item/text") {
                    report.last_message = Some(text);
                }
            }
            Some("turn.completed") => completed = true,
            Some("turn.failed") => {
                failure = Some(
                    str_at("/error/message")
                        .or_else(|| last_error.clone())
                        .unwrap_or_else(|| "turn failed".into()),
                );
            }
            Some("error") => last_error = str_at("/message"),
            _ => {}
        }
    }
    report.failure = failure
        .or_else(|| (!completed).then_some(last_error).flatten())
        .or_else(|| (!completed).then(|| "Codex ended without completing the turn".to_owned()))
        .map(|f| one_line(&f, 1024));
    report
}

impl Receiver for Codex {
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

    /// `codex [--config k=v]… resume <id>`: the configuration's overrides (a model provider,
    /// its base URL) come along; none carries a credential (those are refused when the
    /// configuration is loaded: Codex reads them from the variable `env_key` names).
    fn resume_command(&self, session_id: &str, config: &AgentConfig) -> Vec<String> {
        let mut argv = vec![SPEC.executable.to_owned()];
        for o in &config.config {
            argv.push("--config".to_owned());
            argv.push(o.clone());
        }
        argv.push("resume".to_owned());
        argv.push(session_id.to_owned());
        argv
    }

    fn resume_support(&self, version: Option<&str>) -> Result<(), String> {
        crate::store::at_least("Codex", version, MIN_RESUME_VERSION)
    }

    /// Run against the real CLI in `cargo xtask e2e-real`.
    fn verified(&self) -> handoff_core::Verified {
        handoff_core::Verified::Real
    }
}
