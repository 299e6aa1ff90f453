//! What Qwen may reach under handoff's sandbox. Its model client (Node's `fetch`) is not known
//! to honour the proxy variables, so the sandbox gives it a network namespace of its own where
//! each model endpoint is reached at an address of its own, tunnelled through handoff's
//! filtering proxy (a transparent namespace). A run whose tools need public hosts (the web
//! granted, or MCP servers that may call their services) keeps the host's network instead.

use std::collections::BTreeMap;

use handoff_core::sandbox::proxy::{Endpoint, NetworkSpec};

/// The variables that point Qwen at a model server, with what each names.
pub const BASE_URLS: &[(&str, &str)] = &[
    ("OPENAI_BASE_URL", "the OpenAI-compatible model server"),
    (
        "ANTHROPIC_BASE_URL",
        "the Anthropic-compatible model server",
    ),
    ("GOOGLE_GEMINI_BASE_URL", "the Gemini API server"),
];

/// The providers' own hosts, for a run whose environment names no server of its own: Qwen's
/// OAuth service and Alibaba Cloud's DashScope, OpenAI's, Anthropic's and Gemini's APIs.
const DEFAULT_HOSTS: &[(&str, &str)] = &[
    ("chat.qwen.ai", "Qwen's OAuth login"),
    ("portal.qwen.ai", "Qwen's OAuth model API"),
    ("dashscope.aliyuncs.com", "Alibaba Cloud's DashScope API"),
    (
        "dashscope-intl.aliyuncs.com",
        "Alibaba Cloud's DashScope API",
    ),
    ("api.openai.com", "OpenAI's API"),
    ("api.anthropic.com", "Anthropic's API"),
    ("generativelanguage.googleapis.com", "Gemini's API"),
];

/// Whether a run keeps the host's network: its tools may need public hosts.
pub fn host_network(web: bool, mcp: bool) -> bool {
    web || mcp
}

/// The network of one run, `env` the agent's environment (its servers' base URLs); `None`
/// when the run keeps the host's network ([`host_network`]).
pub(super) fn network(env: &BTreeMap<String, String>, web: bool, mcp: bool) -> Option<NetworkSpec> {
    if host_network(web, mcp) {
        return None;
    }
    let mut endpoints: Vec<Endpoint> = BASE_URLS
        .iter()
        .filter_map(|(var, why)| {
            let url = env.get(*var).filter(|u| !u.trim().is_empty())?;
            Endpoint::from_url(url, &format!("{why} ({var})"))
        })
        .collect();
    if endpoints.is_empty() {
        endpoints.extend(
            DEFAULT_HOSTS
                .iter()
                .filter_map(|(host, why)| Endpoint::from_url(&format!("https://{host}"), why)),
        );
    }
    endpoints.sort();
    endpoints.dedup_by(|a, b| a.host == b.host && a.port == b.port);
    Some(NetworkSpec {
        endpoints,
        public_hosts: None,
        transparent: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: &NetworkSpec) -> Vec<String> {
        n.endpoints
            .iter()
            .map(|e| format!("{}:{}", e.host, e.port))
            .collect()
    }

    #[test]
    fn a_server_of_the_users_is_the_only_endpoint() {
        let env = [(
            "OPENAI_BASE_URL".to_owned(),
            "http://127.0.0.1:18091/v1".to_owned(),
        )]
        .into();
        let n = network(&env, false, false).unwrap();
        assert_eq!(hosts(&n), ["127.0.0.1:18091"]);
        assert!(n.transparent);
        assert_eq!(n.public_hosts, None);
    }

    #[test]
    fn without_one_the_providers_hosts() {
        let n = network(&BTreeMap::new(), false, false).unwrap();
        assert!(hosts(&n).contains(&"portal.qwen.ai:443".to_owned()));
        assert!(hosts(&n).contains(&"dashscope.aliyuncs.com:443".to_owned()));
    }

    #[test]
    fn the_web_or_mcp_keep_the_hosts_network() {
        assert!(network(&BTreeMap::new(), true, false).is_none());
        assert!(network(&BTreeMap::new(), false, true).is_none());
    }
}
