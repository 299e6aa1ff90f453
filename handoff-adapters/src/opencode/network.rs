//! What OpenCode may reach under handoff's sandbox, which gives it a network namespace of its
//! own and a filtering proxy (OpenCode's runtime honours `HTTPS_PROXY` and `HTTP_PROXY`, for
//! plain-HTTP gateways on the loopback too): the model provider's endpoints, OpenCode's own
//! services, and any public host only when web tools are granted or MCP servers run.

use std::collections::BTreeMap;

use handoff_core::sandbox::proxy::{Endpoint, NetworkSpec};
use serde_json::{Map, Value};

use crate::common::PROVIDER_DEFAULT_STR;

/// OpenCode's own services, reached on every run.
const SERVICES: &[(&str, &str)] = &[
    ("models.opencode.ai", "OpenCode's model catalogue"),
    (
        "registry.npmjs.org",
        "the provider packages OpenCode installs into its cache",
    ),
];

/// The API hosts (port 443) of the providers OpenCode knows by name, where no `baseURL` is
/// configured: the host the provider's SDK calls, and the one its login refreshes with.
const PROVIDERS: &[(&str, &[&str])] = &[
    ("anthropic", &["api.anthropic.com", "console.anthropic.com"]),
    (
        "openai",
        &["api.openai.com", "auth.openai.com", "chatgpt.com"],
    ),
    ("google", &["generativelanguage.googleapis.com"]),
    (
        "google-vertex",
        &["*.googleapis.com", "oauth2.googleapis.com"],
    ),
    (
        "google-vertex-anthropic",
        &["*.googleapis.com", "oauth2.googleapis.com"],
    ),
    ("amazon-bedrock", &["*.amazonaws.com"]),
    (
        "azure",
        &["*.openai.azure.com", "*.cognitiveservices.azure.com"],
    ),
    (
        "github-copilot",
        &[
            "api.githubcopilot.com",
            "*.githubcopilot.com",
            "api.github.com",
        ],
    ),
    ("openrouter", &["openrouter.ai"]),
    ("opencode", &["opencode.ai"]),
    ("xai", &["api.x.ai"]),
    ("groq", &["api.groq.com"]),
    ("mistral", &["api.mistral.ai"]),
    ("deepseek", &["api.deepseek.com"]),
    ("togetherai", &["api.together.xyz"]),
    ("fireworks-ai", &["api.fireworks.ai"]),
    ("cerebras", &["api.cerebras.ai"]),
    ("moonshotai", &["api.moonshot.ai"]),
    ("zai", &["api.z.ai"]),
    ("huggingface", &["router.huggingface.co"]),
];

/// The network of one run: `model` as selected (`provider/model`, or the provider default),
/// `providers` the configuration's provider table, `mcp` the run's MCP table, `web` whether
/// web tools are granted.
pub(super) fn network(
    model: &str,
    providers: Option<&Value>,
    mcp: &Value,
    web: bool,
) -> NetworkSpec {
    let mut endpoints: Vec<Endpoint> = SERVICES
        .iter()
        .map(|(host, why)| endpoint(host, 443, why))
        .collect();
    let configured: Vec<(&String, &str)> = providers
        .and_then(Value::as_object)
        .map(|t| {
            t.iter()
                .filter_map(|(id, p)| Some((id, p.pointer("/options/baseURL")?.as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    for (id, url) in &configured {
        if let Some(e) = Endpoint::from_url(url, &format!("provider {id} (its baseURL)")) {
            endpoints.push(e);
        }
    }
    let chosen = (model != PROVIDER_DEFAULT_STR)
        .then(|| model.split_once('/').map(|(p, _)| p))
        .flatten();
    let mut unknown = None;
    match chosen {
        // A provider with a baseURL is reached there only.
        Some(p) if configured.iter().any(|(id, _)| id.as_str() == p) => {}
        Some(p) => match PROVIDERS.iter().find(|(id, _)| *id == p) {
            Some((id, hosts)) => endpoints.extend(known(id, hosts)),
            None => unknown = Some(p.to_owned()),
        },
        // OpenCode picks the model: any provider it knows may be the one.
        None => {
            for (id, hosts) in PROVIDERS {
                endpoints.extend(known(id, hosts));
            }
        }
    }
    let mut local_mcp = false;
    for (name, server) in mcp.as_object().into_iter().flatten() {
        match server.get("url").and_then(Value::as_str) {
            Some(url) => endpoints.extend(Endpoint::from_url(url, &format!("MCP server {name}"))),
            None => local_mcp = true,
        }
    }
    endpoints.sort();
    endpoints.dedup_by(|a, b| a.host == b.host && a.port == b.port);
    let public_hosts = if web {
        Some("web tools granted".to_owned())
    } else if local_mcp {
        Some("the run's MCP servers may call their services".to_owned())
    } else {
        unknown.map(|p| format!("the endpoint of provider {p} is not known to handoff"))
    };
    NetworkSpec {
        endpoints,
        public_hosts,
        transparent: false,
    }
}

/// The network of a continuation receiver. It runs the user's own OpenCode configuration, so
/// the providers and MCP servers of their configuration files (`opencode.json`,
/// `opencode.jsonc`, `config.json` and `$OPENCODE_CONFIG`) are reached too, and any public host,
/// since a project's configuration may name more that handoff does not read.
pub(super) fn receiver_network(
    model: Option<&str>,
    providers: Option<&Value>,
    env: &BTreeMap<String, String>,
) -> NetworkSpec {
    let mut all_providers = Map::new();
    let mut mcp = Map::new();
    for config in user_configs(env) {
        for (key, into) in [("provider", &mut all_providers), ("mcp", &mut mcp)] {
            if let Some(table) = config.get(key).and_then(Value::as_object) {
                into.extend(table.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
    }
    if let Some(table) = providers.and_then(Value::as_object) {
        all_providers.extend(table.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    // Only remote MCP servers bring endpoints: public hosts are open anyway.
    mcp.retain(|_, v| v.get("url").is_some());
    let mut n = network(
        model.unwrap_or(PROVIDER_DEFAULT_STR),
        Some(&Value::Object(all_providers)),
        &Value::Object(mcp),
        false,
    );
    n.public_hosts = Some(
        "a receiver runs your own OpenCode configuration, and its project's, which may name \
         more services"
            .into(),
    );
    n
}

/// The user's OpenCode configuration files that parse, global first.
fn user_configs(env: &BTreeMap<String, String>) -> Vec<Value> {
    let mut files = Vec::new();
    if let Some(dir) = crate::common::xdg_dir(env, "XDG_CONFIG_HOME", ".config") {
        let dir = dir.join("opencode");
        files.extend(["config.json", "opencode.json", "opencode.jsonc"].map(|f| dir.join(f)));
    }
    if let Some(file) = env.get("OPENCODE_CONFIG") {
        files.push(file.into());
    }
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter_map(|text| serde_json::from_str(&strip_jsonc(&text)).ok())
        .collect()
}

/// JSON with comments (`//`, `/* */`) and trailing commas, as OpenCode reads its configuration,
/// made plain JSON.
pub(super) fn strip_jsonc(text: &str) -> String {
    // Comments out first, then the commas before a closing bracket.
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            plain.push(c);
            match c {
                '\\' => plain.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        plain.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                plain.push(' ');
            }
            _ => {
                in_string = c == '"';
                plain.push(c);
            }
        }
    }
    let bytes = plain.as_bytes();
    let mut out = String::with_capacity(plain.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in plain.char_indices() {
        if in_string {
            in_string = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            in_string = true;
        } else if c == ','
            && matches!(
                bytes[i + 1..].iter().find(|b| !b.is_ascii_whitespace()),
                Some(b'}' | b']')
            )
        {
            continue;
        }
        out.push(c);
    }
    out
}

fn endpoint(host: &str, port: u16, why: &str) -> Endpoint {
    Endpoint {
        host: host.into(),
        port,
        why: why.into(),
    }
}

fn known<'a>(id: &'a str, hosts: &'a [&'a str]) -> impl Iterator<Item = Endpoint> + 'a {
    hosts
        .iter()
        .map(move |h| endpoint(h, 443, &format!("provider {id}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(n: &NetworkSpec) -> Vec<String> {
        n.endpoints.iter().map(Endpoint::label).collect()
    }

    #[test]
    fn a_configured_provider_is_reached_at_its_base_url_only() {
        let providers = json!({"gw": {"options": {"baseURL": "http://127.0.0.1:8767/v1"}}});
        let n = network("gw/m", Some(&providers), &json!({}), false);
        assert_eq!(
            labels(&n),
            [
                "127.0.0.1:8767",
                "models.opencode.ai:443",
                "registry.npmjs.org:443"
            ]
        );
        assert_eq!(n.public_hosts, None);
    }

    #[test]
    fn a_known_provider_brings_its_hosts_and_an_unknown_one_opens_public_hosts() {
        let n = network("anthropic/claude-x", None, &json!({}), false);
        assert!(labels(&n).contains(&"api.anthropic.com:443".to_owned()));
        assert!(!labels(&n).contains(&"api.openai.com:443".to_owned()));
        assert_eq!(n.public_hosts, None);
        let n = network("someone/m", None, &json!({}), false);
        assert_eq!(
            n.public_hosts.as_deref(),
            Some("the endpoint of provider someone is not known to handoff")
        );
        let n = network(PROVIDER_DEFAULT_STR, None, &json!({}), false);
        assert!(labels(&n).contains(&"api.openai.com:443".to_owned()));
        assert_eq!(n.public_hosts, None);
    }

    #[test]
    fn web_tools_and_local_mcp_servers_open_public_hosts_and_remote_ones_their_host() {
        let n = network("anthropic/m", None, &json!({}), true);
        assert_eq!(n.public_hosts.as_deref(), Some("web tools granted"));
        let mcp = json!({
            "docs": {"type": "remote", "url": "https://mcp.example.com/sse"},
        });
        let n = network("anthropic/m", None, &mcp, false);
        assert!(labels(&n).contains(&"mcp.example.com:443".to_owned()));
        assert_eq!(n.public_hosts, None);
        let mcp = json!({"fs": {"type": "local", "command": ["fs-mcp"]}});
        let n = network("anthropic/m", None, &mcp, false);
        assert!(n.public_hosts.is_some());
    }

    #[test]
    fn configuration_with_comments_and_trailing_commas_is_read() {
        let text = r#"{
  // a gateway
  "provider": { "gw": { "options": { "baseURL": "http://127.0.0.1:9/v1", }, }, },
  /* "mcp": {} */
  "note": "a // not a comment, nor /* this */, \"quoted\",",
  "list": [1, 2, ],
}"#;
        let v: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(
            v["provider"]["gw"]["options"]["baseURL"],
            "http://127.0.0.1:9/v1"
        );
        assert_eq!(v["note"], "a // not a comment, nor /* this */, \"quoted\",");
        assert_eq!(v["list"], json!([1, 2]));
    }

    #[test]
    fn a_receiver_reaches_the_users_configured_providers_and_public_hosts() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("opencode");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("opencode.jsonc"),
            r#"{ "provider": { "local": { "options": { "baseURL": "http://127.0.0.1:11434/v1" } } },
                 "mcp": { "docs": { "type": "remote", "url": "https://mcp.example.com/x" } } }"#,
        )
        .unwrap();
        let env = BTreeMap::from([(
            "XDG_CONFIG_HOME".to_owned(),
            tmp.path().to_str().unwrap().to_owned(),
        )]);
        let n = receiver_network(Some("local/llama"), None, &env);
        let labels = labels(&n);
        assert!(labels.contains(&"127.0.0.1:11434".to_owned()), "{labels:?}");
        assert!(
            labels.contains(&"mcp.example.com:443".to_owned()),
            "{labels:?}"
        );
        assert!(n.public_hosts.is_some());
    }
}
