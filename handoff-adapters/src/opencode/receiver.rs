//! OpenCode as a continuation receiver: an `opencode run` whose session OpenCode keeps
//! (`--session` for a carried one), read back from its `--format json` events.

use std::collections::BTreeMap;

use camino::Utf8PathBuf;
use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, RawOutput, Receiver, ReceiverReport,
    ReceiverRequest, RunDir, StdinSource, agent_env,
};
use serde_json::{Value, json};

use super::export::is_session_id;
use super::invocation::{inline_config, permission};
use super::transcript::clip;
use super::{OpenCode, READER, SPEC, WRITER};
use crate::common::{json_lines, one_line, receiver_grants};

/// Switches a receiver keeps from the delegated environment: no external or default plugins
/// (a plugin can answer permission requests itself), no updates, downloads or sharing. Not
/// `OPENCODE_DISABLE_PROJECT_CONFIG`: OpenCode 1.18 then also leaves the project's AGENTS.md
/// out, which the task's new owner works by.
const RECEIVER_SWITCHES: &[(&str, &str)] = &[
    ("OPENCODE_PURE", "1"),
    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
    ("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"),
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_AUTO_SHARE", "false"),
    ("OPENCODE_ENABLE_EXA", "false"),
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
];

impl OpenCode {
    /// A continuation receiver: the delegated plan's permission policy (the role's agent with
    /// an explicit table, everything else denied; no plugins), in the user's own HOME and XDG
    /// directories rather than private ones, so that the session lands in the user's
    /// `opencode.db` under the configuration their later `opencode --session` resolves too. The
    /// inline configuration is OpenCode's last layer: the user's and the project's files cannot
    /// change the entries of the role's table (they can only name tools it leaves to `*`).
    fn receiver_plan(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let g = receiver_grants(request.role);
        let agent = if g.write { WRITER } else { READER };
        let perm = permission(g.write, g.bash, g.web_search, &[]);
        let provider = run
            .agent_config
            .provider
            .as_ref()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null));
        let config = inline_config(agent, &perm, json!({}), provider);
        let mut env = agent_env(spec, &run.parent_env);
        env.insert("OPENCODE_CONFIG_CONTENT".into(), config.to_string());
        env.insert("OPENCODE_PERMISSION".into(), perm.to_string());
        for (k, v) in RECEIVER_SWITCHES {
            env.insert((*k).into(), (*v).into());
        }
        let mut args: Vec<String> = vec![
            "--pure".into(),
            "run".into(),
            "--agent".into(),
            agent.into(),
            "--dir".into(),
            request.cwd.to_string(),
            "--format".into(),
            "json".into(),
        ];
        if let Some(model) = &request.model {
            args.extend(["--model".into(), model.clone()]);
        }
        if let Some(effort) = &request.effort {
            args.extend(["--variant".into(), effort.clone()]);
        }
        if let Some(from) = &request.resume {
            if !is_session_id(&from.session_id) {
                return Err(InvocationError::Unsupported(format!(
                    "'{}' is not an OpenCode session id",
                    from.session_id
                )));
            }
            args.extend(["--session".into(), from.session_id.clone()]);
            if from.fork {
                args.push("--fork".into());
            }
        }
        let mut policy = json!({
            "role": request.role.as_str(),
            "enforcement": "preflighted-tool-permission-policy",
            "agent": agent,
            "permission": perm,
            "nativeFilesystemIsolation": false,
            "configurationRoots": "the user's (HOME and XDG directories): the session lands in their opencode.db",
            "projectConfiguration": "loaded (AGENTS.md, opencode.json): handoff's inline agent and permission table are the last layer",
            "plugins": "disabled",
            "structuredResult": "none: the receiver answers in its own words",
            "mcpServers": [],
            "sessionPersistence": true,
            "sessionStore": "the user's ($XDG_DATA_HOME/opencode/opencode.db)",
            "environment": "allowlist",
        });
        if let Some(from) = &request.resume {
            policy["resume"] = json!({
                "sessionId": from.session_id,
                "fork": if from.fork {
                    "OpenCode's own --fork: a copy under an id OpenCode chooses (reported from its events); the resumed session is left as it was"
                } else {
                    "none: the carried copy is resumed in place"
                },
                "cwd": "the session's own directory (OpenCode resumes a session only where it is filed)",
            });
        }
        let sandbox = run.handoff_sandbox.then(|| {
            let network = super::network::receiver_network(
                request.model.as_deref(),
                config.get("provider"),
                &env,
            );
            receiver_sandbox(&env, network)
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
            files: Vec::new(),
            dirs: Vec::new(),
            answer: AnswerSource::Stdout,
            policy,
            secrets: Vec::new(),
        })
    }
}

/// What a receiver needs in handoff's sandbox: OpenCode's own directories of the user, in
/// place, so that the session lands in the user's store. Its configuration, data, cache and
/// state are writable for the CLI and hidden from its model's commands (which see empty
/// directories); the logins and the tools it downloaded are read-only. The CLI reaches
/// `network` through handoff's proxy.
fn receiver_sandbox(
    env: &BTreeMap<String, String>,
    network: handoff_core::sandbox::proxy::NetworkSpec,
) -> handoff_core::sandbox::SandboxSpec {
    use handoff_core::sandbox::{Bind, SandboxSpec};
    let xdg = |var: &str, fallback: &str| {
        crate::common::xdg_dir(env, var, fallback).map(|d| d.join("opencode"))
    };
    let bind = |path: Utf8PathBuf, writable: bool, secret: bool| Bind {
        source: path.clone(),
        dest: path,
        writable,
        secret,
    };
    // OpenCode makes and writes its configuration, cache and state directories as it starts
    // (its plugins' packages among them): the CLI may, its model's commands see none of them.
    let mut binds = Vec::new();
    for (var, fallback) in [
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_STATE_HOME", ".local/state"),
    ] {
        if let Some(dir) = xdg(var, fallback) {
            binds.push(bind(dir, true, true));
        }
    }
    if let Some(data) = xdg("XDG_DATA_HOME", ".local/share") {
        binds.push(bind(data.clone(), true, true));
        binds.push(bind(data.join("auth.json"), false, true));
        binds.push(bind(data.join("mcp-auth.json"), false, true));
        binds.push(bind(data.join("bin"), false, false));
    }
    SandboxSpec {
        binds,
        state: "the user's own OpenCode directories in place (the session lands in their \
                store): configuration, data, cache and state writable for the CLI and empty to \
                its commands; logins and downloaded tools read-only"
            .into(),
        offline_shell: true,
        network: Some(network),
        // A receiver runs in the user's own cache, where packages land as without handoff.
        packages: None,
    }
}

/// Reads a receiver's `--format json` events: the session is the events' `sessionID`, the last
/// message the last `text` part; an `error` event is a failure, and so is a run that never
/// finished a step with `reason: "stop"`.
pub fn parse_receiver(raw: &RawOutput) -> ReceiverReport {
    let mut report = ReceiverReport::default();
    let mut stopped = false;
    for value in json_lines(&raw.stdout).flatten() {
        if report.session_id.is_none()
            && let Some(id) = value.get("sessionID").and_then(Value::as_str)
            && !id.is_empty()
        {
            report.session_id = Some(id.to_owned());
        }
        match value.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = value.pointer("/part/text").and_then(Value::as_str) {
                    report.last_message = Some(text.to_owned());
                }
            }
            Some("step_finish") => {
                stopped = value.pointer("/part/reason").and_then(Value::as_str) == Some("stop");
            }
            Some("error") => {
                let e = value.get("error");
                let message = e
                    .and_then(|e| {
                        e.pointer("/data/message")
                            .or_else(|| e.get("message"))
                            .or_else(|| e.get("name"))
                    })
                    .and_then(Value::as_str)
                    .unwrap_or("OpenCode reported an error");
                report.failure = Some(one_line(message, 1024));
            }
            _ => {}
        }
    }
    if report.failure.is_none() && !stopped {
        report.failure = Some("OpenCode ended without finishing its turn".into());
    }
    report
}

impl Receiver for OpenCode {
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
            "--session".to_owned(),
            session_id.to_owned(),
        ]
    }

    /// The configuration's model providers, as inline configuration, with every value under a
    /// credential-named key left out (OpenCode reads those from the provider's own variables,
    /// or from `{env:NAME}` references, which are kept).
    fn resume_env(&self, config: &AgentConfig) -> BTreeMap<String, String> {
        let Some(table) = &config.provider else {
            return BTreeMap::new();
        };
        let mut value = serde_json::to_value(table).unwrap_or(Value::Null);
        strip_credentials(&mut value);
        BTreeMap::from([(
            "OPENCODE_CONFIG_CONTENT".to_owned(),
            json!({ "provider": value }).to_string(),
        )])
    }

    fn resume_support(&self, version: Option<&str>) -> Result<(), String> {
        resume_support(version)
    }

    /// Run against the real CLI in `cargo xtask e2e-real`.
    fn verified(&self) -> handoff_core::Verified {
        handoff_core::Verified::Real
    }

    /// OpenCode's `run --session <id> --fork` copies a session and leaves it as it was, but the
    /// fork's id is OpenCode's own, so the continuity check could not know which session to
    /// read before the turn ends: handoff copies OpenCode sessions itself instead
    /// ([`handoff_core::Sessions::copy_session`], fresh ids, same content), and the receiver resumes the copy.
    fn native_fork(&self) -> bool {
        false
    }
}

/// The oldest OpenCode that can take a carried session: `import`, `run --session` and
/// `run --fork` (1.2.24).
pub(crate) const MIN_RESUME_VERSION: (u64, u64, u64) = (1, 2, 24);

/// A version's first three numbers, from `--version`'s first line (`1.18.33`, `opencode
/// 1.18.33`, `v1.2.24-beta`).
pub(crate) fn version_triple(line: &str) -> Option<(u64, u64, u64)> {
    let word = line.split_whitespace().find(|w| {
        w.trim_start_matches('v')
            .starts_with(|c: char| c.is_ascii_digit())
    })?;
    let mut nums = word
        .trim_start_matches('v')
        .split(|c: char| !c.is_ascii_digit())
        .map(str::parse::<u64>);
    Some((nums.next()?.ok()?, nums.next()?.ok()?, nums.next()?.ok()?))
}

/// Whether OpenCode `version` can take a carried session.
pub(crate) fn resume_support(version: Option<&str>) -> Result<(), String> {
    let (a, b, c) = MIN_RESUME_VERSION;
    let need = format!("{a}.{b}.{c}");
    let Some(line) = version.map(str::trim).filter(|v| !v.is_empty()) else {
        return Err(format!(
            "OpenCode's version is unknown; carrying a conversation into it needs {need} or newer"
        ));
    };
    match version_triple(line) {
        Some(v) if v >= MIN_RESUME_VERSION => Ok(()),
        Some((x, y, z)) => Err(format!(
            "OpenCode {x}.{y}.{z} is too old to take a carried conversation (import, run --session, --fork): it needs {need} or newer"
        )),
        None => Err(format!(
            "OpenCode's version '{}' can't be read; carrying a conversation into it needs {need} or newer",
            clip(line)
        )),
    }
}

/// Removes every string under a credential-named key that is not an `{env:…}` reference.
fn strip_credentials(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|k, v| {
                !(handoff_core::credential_name(k)
                    && v.as_str().is_some_and(|s| !s.starts_with("{env:")))
            });
            map.values_mut().for_each(strip_credentials);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_credentials),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(resume_support(Some("1.18.33")).is_ok());
        assert!(resume_support(Some("opencode v1.2.24")).is_ok());
        assert!(
            resume_support(Some("1.2.23"))
                .unwrap_err()
                .contains("1.2.24")
        );
        assert!(resume_support(None).is_err());
        assert!(resume_support(Some("dev")).is_err());
    }
}
