//! What Gemini may reach under handoff's sandbox, which gives it a network namespace of its own
//! and a filtering proxy (Gemini honours `HTTPS_PROXY` and `HTTP_PROXY`, loopback included):
//! the Gemini API at the user's base URL (`GOOGLE_GEMINI_BASE_URL`) or Google's, or Vertex AI,
//! and any public host only when the web is granted or MCP servers run.

use std::collections::BTreeMap;

use handoff_core::sandbox::proxy::{Endpoint, NetworkSpec};
use serde_json::{Map, Value};

/// The Gemini API without a base URL of the user's.
const GEMINI_API: &str = "https://generativelanguage.googleapis.com";

/// Vertex AI's hosts without a base URL of the user's, and Google's token exchange for its
/// application default credentials.
const VERTEX: &[(&str, &str)] = &[
    ("aiplatform.googleapis.com", "Vertex AI"),
    ("*-aiplatform.googleapis.com", "Vertex AI (regional)"),
    (
        "oauth2.googleapis.com",
        "Google's credentials for Vertex AI",
    ),
];

/// The network of one run: `env` the agent's environment (endpoint and auth), `mcp` the run's
/// `mcpServers` setting, `web` whether the web is granted.
pub(super) fn network(
    env: &BTreeMap<String, String>,
    mcp: &Map<String, Value>,
    web: bool,
) -> NetworkSpec {
    let set = |k: &str| env.get(k).filter(|u| !u.trim().is_empty());
    let mut endpoints = Vec::new();
    let mut unnamed = false;
    let mut named =
        |url: &str, why: &str, endpoints: &mut Vec<Endpoint>| match Endpoint::from_url(url, why) {
            Some(e) => endpoints.push(e),
            None => unnamed = true,
        };
    if super::invocation::auth_type(env) == "vertex-ai" {
        match set("GOOGLE_VERTEX_BASE_URL") {
            Some(url) => named(url, "Vertex AI (GOOGLE_VERTEX_BASE_URL)", &mut endpoints),
            None => {
                for (host, why) in VERTEX {
                    named(&format!("https://{host}"), why, &mut endpoints);
                }
            }
        }
    } else {
        match set("GOOGLE_GEMINI_BASE_URL") {
            Some(url) => named(
                url,
                "the Gemini API (GOOGLE_GEMINI_BASE_URL)",
                &mut endpoints,
            ),
            None => named(GEMINI_API, "the Gemini API", &mut endpoints),
        }
    }
    let unnamed =
        unnamed.then_some("the model's base URL is not one handoff can name an endpoint for");
    crate::common::proxied_network(endpoints, &Value::Object(mcp.clone()), web, unnamed)
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

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_base_url_is_the_only_endpoint() {
        let n = network(
            &env(&[("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:18082")]),
            &Map::new(),
            false,
        );
        assert_eq!(hosts(&n), ["127.0.0.1:18082"]);
        assert_eq!(n.public_hosts, None);
        let n = network(&BTreeMap::new(), &Map::new(), false);
        assert_eq!(hosts(&n), ["generativelanguage.googleapis.com:443"]);
    }

    #[test]
    fn vertex_reaches_vertex_and_its_token_exchange() {
        let n = network(
            &env(&[("GOOGLE_GENAI_USE_VERTEXAI", "true")]),
            &Map::new(),
            false,
        );
        let h = hosts(&n);
        assert!(
            h.contains(&"aiplatform.googleapis.com:443".to_owned()),
            "{h:?}"
        );
        assert!(h.contains(&"oauth2.googleapis.com:443".to_owned()), "{h:?}");
        assert!(!h.iter().any(|h| h.starts_with("generativelanguage")));
    }

    #[test]
    fn web_and_mcp_open_what_they_need() {
        let mcp =
            json!({"docs": {"httpUrl": "https://mcp.example.com/rpc"}, "local": {"command": "x"}});
        let n = network(&BTreeMap::new(), mcp.as_object().unwrap(), false);
        assert!(hosts(&n).contains(&"mcp.example.com:443".to_owned()));
        assert!(n.public_hosts.is_some());
        let n = network(&BTreeMap::new(), &Map::new(), true);
        assert_eq!(n.public_hosts.as_deref(), Some("web tools granted"));
    }
}
