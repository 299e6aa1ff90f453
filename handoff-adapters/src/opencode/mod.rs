//! OpenCode (`opencode --pure run --format json`).
//!
//! OpenCode has no native sandbox; isolation is its permission system plus configuration roots
//! that belong to the run. Every configuration root (HOME, XDG config/cache/state) points into the
//! private run directory, project configuration and plugins are disabled, and the whole
//! configuration — a dedicated primary agent with an explicit permission table, the private MCP
//! servers, the user's provider table — arrives inline in `OPENCODE_CONFIG_CONTENT`. Preflight
//! asks the installed OpenCode to print the configuration it resolved (`debug config`) and
//! checks that the agent and its permissions are exactly ours. The data directory (logins and
//! sessions) is the user's own, so existing logins keep working.
//!
//! Output is NDJSON events; the last `text` event is the answer, `step_finish` events carry
//! token counts and cost, an `error` event is the CLI reporting its own failure.
//!
//! Sessions are reached through the CLI only (`export`, `import`, `session list`, `run
//! --session [--fork]`): see `sessions.rs` for what real OpenCode does with them.

mod export;
mod invocation;
mod network;
mod parse;
mod progress;
mod receiver;
mod sessions;
mod transcript;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, GrantCapabilities, Invocation, InvocationError, Observation, OutputError, Preflight,
    ProbeEnv, Provider, ProviderSpec, RawOutput, Receiver, Request, RunDir, Sessions,
};
use serde_json::{Value, json};

use crate::probe;

use invocation::{config_dirs, inline_config, isolated_env, permission};
use parse::parse;

/// The OpenCode adapter.
#[derive(Debug, Default, Clone)]
pub struct OpenCode;

/// Agent names in the generated configuration.
pub const WRITER: &str = "handoff_writer";

/// The read-only agent.
pub const READER: &str = "handoff_reader";

/// Static facts about OpenCode.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::OPENCODE,
    executable: "opencode",
    extra_dirs: &[
        "~/.opencode/bin",
        "~/.local/bin",
        "/opt/homebrew/bin",
        "/usr/local/bin",
    ],
    effort: &["minimal", "low", "medium", "high", "max"],
    advice_effort: None,
    max_turns: None,
    grants: GrantCapabilities {
        bash: true,
        bash_disable: true,
        web_search: true,
        mcp: true,
        write: true,
        nested_source: true,
    },
    native_filesystem_isolation: false,
    native_bash_sandbox: false,
    env_passthrough: &[
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_GENERATIVE_AI_API_KEY",
        "MISTRAL_API_KEY",
        "DEEPSEEK_API_KEY",
        "XAI_API_KEY",
        "AWS_*",
        "AZURE_*",
    ],
});

/// Flags the two help texts must list.
pub const REQUIRED_TOP: &[&str] = &["--pure"];

/// Flags `opencode run --help` must list.
pub const REQUIRED_RUN: &[&str] = &["--agent", "--dir", "--format", "--model", "--variant"];

#[async_trait]
impl Provider for OpenCode {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn tested_versions(&self) -> Option<handoff_core::TestedRange> {
        crate::compat::tested("opencode")
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    fn isolation(&self, shape: &handoff_core::RunShape) -> handoff_core::Isolation {
        invocation::isolation(shape)
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        parse(raw)
    }

    fn progress(&self, line: &[u8]) -> Vec<handoff_core::ProgressEvent> {
        progress::events(line)
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        let version = match probe::version_and_flags(exe, probe, &["--help"], REQUIRED_TOP).await {
            Ok(v) => v,
            Err(failed) => return failed,
        };
        let fail = |failure: String| Preflight {
            version: Some(version.clone()),
            failure: Some(failure),
        };
        match probe::missing_flags(exe, &["run", "--help"], REQUIRED_RUN, probe).await {
            Ok(m) if m.is_empty() => {}
            Ok(m) => {
                return fail(format!(
                    "`opencode run --help` does not list {}",
                    m.join(", ")
                ));
            }
            Err(e) => return fail(e),
        }
        // Both agents, with their default permissions, must resolve exactly as generated.
        for (agent, write) in [(WRITER, true), (READER, false)] {
            let perm = permission(write, true, false, &[]);
            let config = inline_config(agent, &perm, json!({}), None);
            let root = probe.scratch.join(format!("opencode-probe-{agent}"));
            for d in config_dirs(&root) {
                if let Err(e) = std::fs::create_dir_all(&d) {
                    return fail(format!("cannot create {d}: {e}"));
                }
            }
            let env = isolated_env(&probe.env, &root, &config, &perm, None);
            let probe_env = ProbeEnv {
                env,
                scratch: probe.scratch.clone(),
            };
            match probe::run(exe, &["--pure", "debug", "config"], &probe_env, b"").await {
                Ok(out) if out.code == Some(0) => {
                    if let Err(e) = check_resolved(&out.stdout, agent, &perm) {
                        return fail(format!(
                            "OpenCode did not resolve handoff's {agent} policy: {e}"
                        ));
                    }
                }
                Ok(out) => {
                    return fail(format!(
                        "`opencode --pure debug config` exited with {:?}: {}",
                        out.code,
                        probe::first_line(&out.text()).unwrap_or_default()
                    ));
                }
                Err(e) => return fail(e),
            }
        }
        Preflight {
            version: Some(version),
            failure: None,
        }
    }

    fn receiver(&self) -> Option<&dyn Receiver> {
        Some(self)
    }

    fn state_to_import(&self, stdout: &[u8]) -> Option<String> {
        sessions::session_of_run(stdout).map(|id| carried(&id))
    }

    async fn import_sandboxed_state(
        &self,
        state: &handoff_core::SandboxedState<'_>,
    ) -> Result<Option<String>, String> {
        let Some(id) = sessions::session_of_run(state.stdout) else {
            return Ok(None);
        };
        // OpenCode files an imported session at the directory it runs in: the worktree.
        if !state.cwd.is_dir() {
            return Err(format!(
                "the worktree {} is gone: the session cannot be filed there",
                state.cwd
            ));
        }
        // OpenCode reads and writes its data directory (database, logs) as it exports, outside
        // the sandbox: a symlink the agent left there, or in its place, would take those
        // writes elsewhere.
        if let Some(data) = state.env.get("XDG_DATA_HOME") {
            let data = camino::Utf8Path::new(data);
            sessions::real_dirs_below(state.run_dir, data)?;
            sessions::plain_tree(data)?;
        }
        // The run directory was the agent's to write: nothing in it is trusted now. The
        // scratch is a new directory of a random name (nothing the agent planted is reused,
        // nor a symlink followed), and both commands get configuration roots made here, after
        // the run, never the run's own (where the agent could have put a plugin for OpenCode
        // to load outside the sandbox).
        let dir = tempfile::Builder::new()
            .prefix("session-import-")
            .tempdir_in(state.run_dir)
            .map_err(|e| format!("cannot create a directory in {}: {e}", state.run_dir))?;
        let scratch = camino::Utf8Path::from_path(dir.path())
            .ok_or("the run directory is not UTF-8")?
            .to_owned();
        let roots = scratch.join("roots");
        let mut clean = state.env.clone();
        for d in invocation::config_dirs(&roots) {
            std::fs::create_dir_all(&d).map_err(|e| format!("cannot create {d}: {e}"))?;
        }
        for (var, dir) in [
            ("HOME", "home"),
            ("XDG_CONFIG_HOME", "config"),
            ("OPENCODE_CONFIG_DIR", "config"),
            ("XDG_CACHE_HOME", "cache"),
            ("XDG_STATE_HOME", "state"),
        ] {
            clean.insert(var.into(), roots.join(dir).to_string());
        }
        let private = handoff_core::StoreEnv {
            vars: clean.clone(),
            executable: Some(state.executable.to_owned()),
            scratch: Some(scratch.clone()),
        };
        // The user's store: the same environment with the user's own data directory.
        let mut vars = clean;
        match invocation::user_data_dir(&handoff_core::agent_env(&SPEC, state.parent_env)) {
            Some(d) => vars.insert("XDG_DATA_HOME".into(), d.to_string()),
            None => vars.remove("XDG_DATA_HOME"),
        };
        // A scratch of its own: the user's store is asked while the run's session is exported.
        let user_scratch = scratch.join("user");
        std::fs::create_dir(&user_scratch)
            .map_err(|e| format!("cannot create {user_scratch}: {e}"))?;
        let user = handoff_core::StoreEnv {
            vars,
            executable: Some(state.executable.to_owned()),
            scratch: Some(user_scratch),
        };
        let imported = sessions::import_private(&private, &user, &id, state.cwd).await;
        drop(dir);
        imported
            .map(|id| Some(carried(&id)))
            .map_err(|e| e.to_string())
    }

    fn sessions(&self) -> Option<&dyn Sessions> {
        Some(self)
    }
}

/// What an import of session `id` carries, as the receipt says it.
fn carried(id: &str) -> String {
    format!("session {id} in the user's OpenCode store")
}

/// Checks what `opencode debug config` resolved against what we asked for.
pub fn check_resolved(text: &str, agent: &str, expected_permission: &Value) -> Result<(), String> {
    let start = text.find('{').ok_or("`debug config` printed no JSON")?;
    let c: Value = serde_json::from_str(text[start..].trim())
        .map_err(|e| format!("`debug config` printed invalid JSON: {e}"))?;
    let a = c
        .pointer(&format!("/agent/{agent}"))
        .ok_or_else(|| format!("the resolved configuration has no agent {agent}"))?;
    if a.get("mode").and_then(Value::as_str) != Some("primary") {
        return Err(format!("agent {agent} did not resolve as a primary agent"));
    }
    if a.get("tools").is_some() {
        return Err(format!(
            "agent {agent} resolved with a tools table of its own"
        ));
    }
    if a.get("permission") != Some(expected_permission)
        || c.get("permission") != Some(expected_permission)
    {
        return Err("the resolved permissions differ from handoff's".into());
    }
    for (key, want) in [
        ("share", json!("disabled")),
        ("snapshot", json!(false)),
        ("instructions", json!([])),
        ("mcp", json!({})),
        ("plugin", json!([])),
    ] {
        if c.get(key) != Some(&want) {
            return Err(format!(
                "the resolved configuration has {key} = {}",
                c.get(key).unwrap_or(&Value::Null)
            ));
        }
    }
    Ok(())
}
