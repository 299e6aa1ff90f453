//! Claude Code held by handoff's own sandbox ([`handoff_core::RunShape::confined`]): a nested
//! adviser for a worker that reads only its worktree (OpenCode, Copilot under handoff's
//! sandbox), which Claude Code's own configuration cannot match, since its Read tool reads any
//! path.
//!
//! Under handoff's sandbox it sees the worktree (its snapshot), the system directories and its
//! own install, with a home and configuration directory private to the run: none of the
//! user's files, so none of Claude Code's stored login either. Its credentials come from the
//! environment only (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN` from
//! `claude setup-token`); without one the run is refused before it starts. A login's refresh
//! token is never copied in: Claude Code rotates it as it refreshes, and a copy that rotated
//! would log the user out. It reaches its model's endpoint through handoff's filtering proxy;
//! its own bash sandbox is off (it cannot start inside), so a granted shell runs under
//! handoff's and shares the CLI's network.

use std::collections::BTreeMap;

use handoff_core::sandbox::proxy::{Endpoint, NetworkSpec};
use handoff_core::sandbox::{SandboxSpec, packages::Packages};
use handoff_core::{InvocationError, Isolation, RunDir, RunShape};
use serde_json::json;

/// The variables that carry a credential Claude Code reads from its environment.
pub const CREDENTIAL_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// Anthropic's API, when no base URL names another.
const ANTHROPIC_API: &str = "https://api.anthropic.com";

/// Whether a run of `shape` is held by handoff's sandbox.
pub(super) fn applies(shape: &RunShape) -> bool {
    shape.confined && shape.handoff_sandbox
}

/// What a run of `shape` can do under handoff's sandbox: it writes the worktree only when the
/// mode writes, reads nothing of the user's outside it, and its processes die with the run's
/// PID namespace. Its shell shares the CLI's network namespace, so it reaches the model's
/// endpoints (any public host when the web is granted); without a shell, only the web tools
/// reach anything.
pub(super) fn isolation(shape: &RunShape) -> Isolation {
    // Held by handoff's sandbox, the CLI's shell shares its network namespace, as Copilot's.
    crate::common::proxied_shell_isolation(shape)
}

/// The `--settings` JSON under handoff's sandbox: Claude Code's own bash sandbox off, since
/// handoff's holds the whole CLI and Claude Code's cannot start inside it.
pub(super) fn settings() -> serde_json::Value {
    json!({"sandbox": {"enabled": false}})
}

/// Prepares `env` (the agent's environment) for the run under handoff's sandbox and returns
/// the sandbox it asks for, with the directories to make: a home and configuration directory
/// private to the run, no non-essential traffic, and the model's endpoint. Refused when the
/// environment carries no credential, or names a cloud provider whose endpoints cannot be
/// named.
pub(super) fn plan(
    run: &RunDir,
    env: &mut BTreeMap<String, String>,
    web: bool,
) -> Result<(SandboxSpec, Vec<camino::Utf8PathBuf>), InvocationError> {
    let refuse = |why: String| InvocationError::Unsupported(why);
    // What the CLI will see: the environment passed on, with the configuration's variables
    // (`pass_env`, then `env`), which the engine applies after this.
    let seen = crate::common::effective_env(env, run);
    if !CREDENTIAL_VARS
        .iter()
        .any(|v| seen.get(*v).is_some_and(|s| !s.trim().is_empty()))
    {
        return Err(refuse(format!(
            "claude would run under handoff's sandbox here (to be no less isolated than the \
             run that asks), which does not carry Claude Code's stored login: give it {} \
             (`claude setup-token` makes an OAuth token)",
            CREDENTIAL_VARS.join(", ")
        )));
    }
    for cloud in ["CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"] {
        if seen.get(cloud).is_some_and(|v| !v.is_empty() && v != "0") {
            return Err(refuse(format!(
                "claude under handoff's sandbox reaches only a named model endpoint, and \
                 {cloud} names none"
            )));
        }
    }
    let home = run.path.join("claude-home");
    let config = home.join(".claude");
    env.insert("HOME".into(), home.to_string());
    env.insert("CLAUDE_CONFIG_DIR".into(), config.to_string());
    env.insert(
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
        "1".into(),
    );
    let base = seen
        .get("ANTHROPIC_BASE_URL")
        .filter(|u| !u.trim().is_empty())
        .cloned();
    let (url, why) = match &base {
        Some(url) => (url.as_str(), "the model API (ANTHROPIC_BASE_URL)"),
        None => (ANTHROPIC_API, "Anthropic's API"),
    };
    let endpoint = Endpoint::from_url(url, why);
    let public_hosts = if web {
        Some("web tools granted".to_owned())
    } else if endpoint.is_none() {
        Some("the base URL is not one handoff can name an endpoint for".to_owned())
    } else {
        None
    };
    let spec = SandboxSpec {
        binds: Vec::new(),
        state: "a home and Claude Code configuration directory private to the run; credentials \
                from the environment only"
            .into(),
        offline_shell: false,
        network: Some(NetworkSpec {
            endpoints: endpoint.into_iter().collect(),
            public_hosts,
            transparent: false,
        }),
        packages: None::<Packages>,
    };
    Ok((spec, vec![home, config]))
}

/// The policy receipt's account of the confinement.
pub(super) fn receipt() -> serde_json::Value {
    json!({
        "by": "handoff's sandbox, asked for by the supervisor: the adviser would otherwise read more than the worker that asked",
        "nativeBashSandbox": "off: it cannot start inside handoff's",
        "home": "private to the run (HOME, CLAUDE_CONFIG_DIR); the user's Claude Code configuration and stored login are not visible",
        "credentials": CREDENTIAL_VARS,
        "nonEssentialTraffic": "disabled",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::{FilesystemRead, FilesystemWrite, Network};

    fn run() -> RunDir {
        RunDir {
            path: "/run/x".into(),
            executable: "/usr/bin/claude".into(),
            prompt: String::new(),
            output_schema: serde_json::Value::Null,
            mcp: None,
            parent_env: BTreeMap::new(),
            agent_config: Default::default(),
            nested: None,
            handoff_sandbox: true,
            confined: true,
        }
    }

    #[test]
    fn without_a_credential_in_the_environment_it_is_refused() {
        let mut env = BTreeMap::new();
        let err = plan(&run(), &mut env, false).unwrap_err().to_string();
        assert!(
            err.contains("does not carry Claude Code's stored login"),
            "{err}"
        );
        assert!(err.contains("CLAUDE_CODE_OAUTH_TOKEN"), "{err}");
    }

    #[test]
    fn it_reaches_only_its_model_endpoint_from_a_private_home() {
        let mut env: BTreeMap<String, String> = [
            ("ANTHROPIC_API_KEY".to_owned(), "sk-x".to_owned()),
            (
                "ANTHROPIC_BASE_URL".to_owned(),
                "http://127.0.0.1:18090".to_owned(),
            ),
            ("CLAUDE_CONFIG_DIR".to_owned(), "/home/u/.claude".to_owned()),
        ]
        .into();
        let (spec, dirs) = plan(&run(), &mut env, false).unwrap();
        let network = spec.network.unwrap();
        let hosts: Vec<String> = network
            .endpoints
            .iter()
            .map(|e| format!("{}:{}", e.host, e.port))
            .collect();
        assert_eq!(hosts, ["127.0.0.1:18090"]);
        assert_eq!(network.public_hosts, None);
        assert_eq!(env["CLAUDE_CONFIG_DIR"], "/run/x/claude-home/.claude");
        assert_eq!(env["HOME"], "/run/x/claude-home");
        assert_eq!(dirs.len(), 2);
        // Anthropic's own API without a base URL.
        let mut env: BTreeMap<String, String> =
            [("CLAUDE_CODE_OAUTH_TOKEN".to_owned(), "t".to_owned())].into();
        let (spec, _) = plan(&run(), &mut env, false).unwrap();
        assert_eq!(spec.network.unwrap().endpoints[0].host, "api.anthropic.com");
    }

    #[test]
    fn the_configurations_variables_count() {
        let mut r = run();
        r.agent_config.env = [
            ("ANTHROPIC_API_KEY".to_owned(), "sk-x".to_owned()),
            (
                "ANTHROPIC_BASE_URL".to_owned(),
                "http://127.0.0.1:9".to_owned(),
            ),
        ]
        .into();
        let (spec, _) = plan(&r, &mut BTreeMap::new(), false).unwrap();
        assert_eq!(spec.network.unwrap().endpoints[0].port, 9);
        let mut r = run();
        r.agent_config.pass_env = vec!["CLAUDE_CODE_OAUTH_TOKEN".to_owned()];
        r.parent_env = [("CLAUDE_CODE_OAUTH_TOKEN".to_owned(), "t".to_owned())].into();
        assert!(plan(&r, &mut BTreeMap::new(), false).is_ok());
    }

    #[test]
    fn a_cloud_provider_is_refused() {
        let mut env: BTreeMap<String, String> = [
            ("ANTHROPIC_API_KEY".to_owned(), "sk-x".to_owned()),
            ("CLAUDE_CODE_USE_BEDROCK".to_owned(), "1".to_owned()),
        ]
        .into();
        assert!(plan(&run(), &mut env, false).is_err());
    }

    #[test]
    fn without_a_shell_or_the_web_it_reaches_nothing_and_reads_only_the_worktree() {
        let mut shape = RunShape::new(None, false, false, false);
        shape.confined = true;
        let i = isolation(&shape);
        assert_eq!(i.filesystem_read, FilesystemRead::Worktree);
        assert_eq!(i.filesystem_write, FilesystemWrite::None);
        assert_eq!(i.network, Network::None);
        shape.grants.bash = true;
        assert_eq!(isolation(&shape).network, Network::ModelEndpoints);
    }
}
