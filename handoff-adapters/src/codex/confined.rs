//! Codex held by handoff's own sandbox ([`handoff_core::RunShape::confined`]): a nested adviser
//! for a worker that reads only its worktree (OpenCode, Copilot under handoff's sandbox),
//! which Codex's own sandbox cannot match, since it reads the whole disk.
//!
//! Under handoff's sandbox the CLI sees the worktree (its snapshot), the system directories
//! and its own install, with a `CODEX_HOME` private to the run (outside `/tmp`, where Codex
//! refuses to place the helper its own sandbox runs through); Codex's own sandbox still holds
//! every command inside it (bubblewrap starts inside bubblewrap), so a command writes nothing
//! and reaches no network. Its credential comes from the environment only: the variable its
//! model provider names (`model_providers.<id>.env_key` in `[agents.codex] config`), or
//! `OPENAI_API_KEY`/`CODEX_API_KEY`. A ChatGPT login (`auth.json`) is never copied in: its
//! tokens rotate as they refresh, and a rotated copy would log the user out. The CLI reaches its
//! provider's endpoint through handoff's filtering proxy.

use std::collections::BTreeMap;

use handoff_core::sandbox::SandboxSpec;
use handoff_core::sandbox::proxy::{Endpoint, NetworkSpec};
use handoff_core::{
    Enforcement, FilesystemRead, FilesystemWrite, InvocationError, Isolation, Network,
    ProcessContainment, RunDir, RunShape, UnixSockets,
};
use serde_json::json;

/// The variables that carry an API key Codex reads from its environment for its own provider.
pub const CREDENTIAL_VARS: &[&str] = &["OPENAI_API_KEY", "CODEX_API_KEY"];

/// OpenAI's API, when no provider names another endpoint.
const OPENAI_API: &str = "https://api.openai.com";

/// Whether a run of `shape` is held by handoff's sandbox.
pub(super) fn applies(shape: &RunShape) -> bool {
    shape.confined && shape.handoff_sandbox
}

/// What a run of `shape` can do held by both sandboxes: handoff's keeps what the CLI reads to
/// the worktree and its processes to a PID namespace; Codex's keeps commands off the network
/// and writing only the worktree in writing modes (its temporary directories are the run's
/// own, gone with it).
pub(super) fn isolation(shape: &RunShape) -> Isolation {
    Isolation {
        enforcement: Enforcement::Handoff,
        filesystem_write: if shape.grants.write {
            FilesystemWrite::Worktree
        } else {
            FilesystemWrite::None
        },
        filesystem_read: FilesystemRead::Worktree,
        network: Network::None,
        unix_sockets: UnixSockets::None,
        process: ProcessContainment::PidNamespace,
    }
}

/// A `key=value` override's value when its key is `key`, read as TOML (a bare word as is).
fn override_value(overrides: &[String], key: &str) -> Option<String> {
    overrides.iter().rev().find_map(|o| {
        let (k, v) = o.split_once('=')?;
        if k.trim() != key {
            return None;
        }
        let parsed: Option<toml::Value> = toml::from_str::<toml::Table>(&format!("v = {v}"))
            .ok()
            .and_then(|mut t| t.remove("v"));
        Some(match parsed {
            Some(toml::Value::String(s)) => s,
            _ => v.trim().to_owned(),
        })
    })
}

/// Prepares `env` for the run held by handoff's sandbox and returns the sandbox it asks for,
/// with the directories to make. Refused when the environment carries no credential.
pub(super) fn plan(
    run: &RunDir,
    env: &mut BTreeMap<String, String>,
) -> Result<(SandboxSpec, Vec<camino::Utf8PathBuf>), InvocationError> {
    // What the CLI will see: the environment passed on, with the configuration's variables
    // (`pass_env`, then `env`), which the engine applies after this.
    let seen = crate::common::effective_env(env, run);
    let set = |var: &str| seen.get(var).is_some_and(|v| !v.trim().is_empty());
    let overrides = &run.agent_config.config;
    let provider = override_value(overrides, "model_provider");
    let key_var = provider
        .as_deref()
        .and_then(|p| override_value(overrides, &format!("model_providers.{p}.env_key")));
    let has_key = match &key_var {
        Some(var) => set(var),
        None => CREDENTIAL_VARS.iter().any(|v| set(v)),
    };
    if !has_key {
        let wanted = key_var.map_or_else(|| CREDENTIAL_VARS.join(" or "), |v| v.clone());
        return Err(InvocationError::Unsupported(format!(
            "codex would run under handoff's sandbox here (to be no less isolated than the run \
             that asks), which does not carry Codex's stored login: give it {wanted} in the \
             environment"
        )));
    }
    let base = provider
        .as_deref()
        .and_then(|p| override_value(overrides, &format!("model_providers.{p}.base_url")))
        .or_else(|| seen.get("OPENAI_BASE_URL").cloned())
        .filter(|u| !u.trim().is_empty());
    let (url, why) = match &base {
        Some(url) => (url.as_str(), "the model provider's base URL"),
        None => (OPENAI_API, "OpenAI's API"),
    };
    let endpoint = Endpoint::from_url(url, why);
    let home = run.path.join("codex-home");
    env.insert("CODEX_HOME".into(), home.to_string());
    let spec = SandboxSpec {
        binds: Vec::new(),
        state: "a CODEX_HOME private to the run; credentials from the environment only".into(),
        offline_shell: false,
        network: Some(NetworkSpec {
            public_hosts: endpoint
                .is_none()
                .then(|| "the base URL is not one handoff can name an endpoint for".to_owned()),
            endpoints: endpoint.into_iter().collect(),
            transparent: false,
        }),
        packages: None,
    };
    Ok((spec, vec![home]))
}

/// The policy receipt's account of the confinement.
pub(super) fn receipt() -> serde_json::Value {
    json!({
        "by": "handoff's sandbox, asked for by the supervisor: the adviser would otherwise read more than the worker that asked",
        "nativeSandbox": "still on inside it: every command is held by both",
        "codexHome": "private to the run; the user's login is not visible",
        "credentials": "the provider's env_key, or OPENAI_API_KEY / CODEX_API_KEY",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: &[&str], env: &[(&str, &str)]) -> RunDir {
        let agent_config = handoff_core::AgentConfig {
            config: config.iter().map(|s| (*s).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Default::default()
        };
        RunDir {
            path: "/run/x".into(),
            executable: "/usr/bin/codex".into(),
            prompt: String::new(),
            output_schema: serde_json::Value::Null,
            mcp: None,
            parent_env: BTreeMap::new(),
            agent_config,
            nested: None,
            handoff_sandbox: true,
            confined: true,
        }
    }

    const PROVIDER: &[&str] = &[
        "model_provider=\"e2e\"",
        "model_providers.e2e.base_url=\"http://127.0.0.1:18092/v1\"",
        "model_providers.e2e.env_key=\"E2E_KEY\"",
    ];

    #[test]
    fn a_provider_of_the_configuration_is_reached_with_its_key() {
        let r = run(PROVIDER, &[("E2E_KEY", "k")]);
        let mut env = BTreeMap::new();
        let (spec, dirs) = plan(&r, &mut env).unwrap();
        let n = spec.network.unwrap();
        assert_eq!(
            (n.endpoints[0].host.as_str(), n.endpoints[0].port),
            ("127.0.0.1", 18092)
        );
        assert_eq!(n.public_hosts, None);
        assert_eq!(env["CODEX_HOME"], "/run/x/codex-home");
        assert_eq!(dirs, ["/run/x/codex-home"]);
    }

    #[test]
    fn without_the_key_it_is_refused() {
        let err = plan(&run(PROVIDER, &[]), &mut BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("give it E2E_KEY"), "{err}");
        let err = plan(&run(&[], &[]), &mut BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("OPENAI_API_KEY or CODEX_API_KEY"), "{err}");
    }

    #[test]
    fn openais_api_without_a_provider() {
        let r = run(&[], &[("OPENAI_API_KEY", "sk")]);
        let (spec, _) = plan(&r, &mut BTreeMap::new()).unwrap();
        assert_eq!(spec.network.unwrap().endpoints[0].host, "api.openai.com");
    }
}
