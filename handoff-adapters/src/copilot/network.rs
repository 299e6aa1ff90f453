//! What Copilot may reach under handoff's sandbox, which gives it a network namespace of its own
//! and a filtering proxy (Copilot honours `HTTPS_PROXY` and `HTTP_PROXY`): the user's own model
//! provider (BYOK, `COPILOT_PROVIDER_BASE_URL`) or GitHub's Copilot service, and any public host
//! only when the web is granted or MCP servers run.

use std::collections::BTreeMap;

use handoff_core::sandbox::proxy::{Endpoint, NetworkSpec};
use serde_json::Value;

/// GitHub's hosts a Copilot login and its model calls use, without a provider of the user's.
const GITHUB: &[(&str, &str)] = &[
    ("api.githubcopilot.com", "GitHub Copilot's model API"),
    ("*.githubcopilot.com", "GitHub Copilot's model API"),
    ("api.github.com", "the GitHub login's Copilot token"),
    ("github.com", "the GitHub login"),
];

/// The network of one run: `env` the agent's environment (the provider's base URL), `mcp` the
/// run's `mcpServers` table, `web` whether the web is granted, `offline` whether Copilot runs
/// with `COPILOT_OFFLINE` (no GitHub service at all).
pub(super) fn network(
    env: &BTreeMap<String, String>,
    mcp: &Value,
    web: bool,
    offline: bool,
) -> NetworkSpec {
    let mut endpoints = Vec::new();
    let base = env
        .get("COPILOT_PROVIDER_BASE_URL")
        .filter(|u| !u.trim().is_empty());
    if let Some(url) = base {
        endpoints.extend(Endpoint::from_url(
            url,
            "the model provider (COPILOT_PROVIDER_BASE_URL)",
        ));
    }
    if !offline {
        endpoints.extend(
            GITHUB
                .iter()
                .filter_map(|(host, why)| Endpoint::from_url(&format!("https://{host}"), why)),
        );
    }
    let unnamed = base
        .filter(|u| Endpoint::from_url(u, "").is_none())
        .map(|_| "the provider's base URL is not one handoff can name an endpoint for");
    crate::common::proxied_network(endpoints, mcp, web, unnamed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hosts(n: &NetworkSpec) -> Vec<String> {
        n.endpoints
            .iter()
            .map(|e| format!("{}:{}", e.host, e.port))
            .collect()
    }

    #[test]
    fn byok_offline_reaches_only_its_provider() {
        let env = [(
            "COPILOT_PROVIDER_BASE_URL".to_owned(),
            "http://127.0.0.1:18091/v1".to_owned(),
        )]
        .into();
        let n = network(&env, &json!({}), false, true);
        assert_eq!(hosts(&n), ["127.0.0.1:18091"]);
        assert_eq!(n.public_hosts, None);
    }

    #[test]
    fn github_login_reaches_githubs_hosts() {
        let n = network(&BTreeMap::new(), &json!({}), false, false);
        assert!(hosts(&n).contains(&"api.githubcopilot.com:443".to_owned()));
        assert!(hosts(&n).contains(&"github.com:443".to_owned()));
        assert_eq!(n.public_hosts, None);
    }

    #[test]
    fn web_and_mcp_open_what_they_need() {
        let mcp =
            json!({"docs": {"url": "https://mcp.example.com/rpc"}, "local": {"command": "x"}});
        let n = network(&BTreeMap::new(), &mcp, false, false);
        assert!(hosts(&n).contains(&"mcp.example.com:443".to_owned()));
        assert!(n.public_hosts.is_some());
        let n = network(&BTreeMap::new(), &json!({}), true, false);
        assert_eq!(n.public_hosts.as_deref(), Some("web tools granted"));
    }
}
