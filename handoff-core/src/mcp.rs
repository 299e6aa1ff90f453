//! The MCP descriptor: a private set of MCP servers for one run, secrets by reference only.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Schema version of [`McpDescriptor`] written by handoff.
pub const MCP_SCHEMA: &str = "handoff.mcp.v1";
/// The reference's version, also accepted on input.
pub const MCP_SCHEMA_V03: &str = "handoff.mcp.v0.3";
/// Largest accepted descriptor file.
pub const MAX_MCP_BYTES: usize = 256_000;

/// A set of MCP servers for one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpDescriptor {
    /// [`MCP_SCHEMA`] or [`MCP_SCHEMA_V03`].
    pub schema_version: String,
    /// The servers, names unique.
    #[schemars(length(max = 32))]
    pub servers: Vec<McpServer>,
}

/// One MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "transport", rename_all = "lowercase")]
pub enum McpServer {
    /// A local process speaking MCP on stdio.
    Stdio(StdioServer),
    /// A remote server over streamable HTTP.
    Http(RemoteServer),
    /// A remote server over server-sent events.
    Sse(RemoteServer),
}

/// A stdio server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StdioServer {
    /// Server name.
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"))]
    pub name: String,
    /// Absolute path of the program.
    pub command: String,
    /// Its arguments.
    #[schemars(length(max = 64))]
    pub args: Vec<String>,
    /// Environment variables for it, by reference.
    pub env: BTreeMap<String, SecretRef>,
}

/// A remote server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoteServer {
    /// Server name.
    #[schemars(regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"))]
    pub name: String,
    /// `https://` URL without user info or fragment.
    pub url: String,
    /// HTTP headers, by reference.
    pub headers: BTreeMap<String, SecretRef>,
}

/// A value taken from handoff's own environment at launch; never a literal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// The environment variable that holds the value.
    pub from_env: String,
}

impl McpServer {
    /// The server's name.
    pub fn name(&self) -> &str {
        match self {
            McpServer::Stdio(s) => &s.name,
            McpServer::Http(r) | McpServer::Sse(r) => &r.name,
        }
    }

    /// Every environment variable this server's configuration refers to.
    pub fn env_refs(&self) -> Vec<&str> {
        let map = match self {
            McpServer::Stdio(s) => &s.env,
            McpServer::Http(r) | McpServer::Sse(r) => &r.headers,
        };
        map.values().map(|r| r.from_env.as_str()).collect()
    }
}

fn valid_server_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// `^[A-Z_][A-Z0-9_]{0,127}$`.
pub fn valid_env_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_uppercase() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
}

fn valid_header_name(n: &str) -> bool {
    let b = n.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

fn valid_absolute_path(p: &str) -> bool {
    p.starts_with('/')
        && p.len() <= 4096
        && !p.chars().any(char::is_control)
        && p[1..]
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

fn valid_url(u: &str) -> bool {
    let Some(rest) = u.strip_prefix("https://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    u.len() <= 4096
        && !authority.is_empty()
        && !authority.contains('@')
        && !u.contains('#')
        && !u.chars().any(|c| c.is_control() || c.is_whitespace())
}

impl McpDescriptor {
    /// Parses and checks a descriptor (ours or the reference's version).
    pub fn parse(bytes: &[u8]) -> Result<McpDescriptor, String> {
        if bytes.len() > MAX_MCP_BYTES {
            return Err(format!(
                "MCP descriptor is larger than {MAX_MCP_BYTES} bytes"
            ));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| "MCP descriptor is not UTF-8")?;
        let d: McpDescriptor =
            serde_json::from_str(text).map_err(|e| format!("MCP descriptor is invalid: {e}"))?;
        d.check()?;
        Ok(d)
    }

    fn check(&self) -> Result<(), String> {
        if self.schema_version != MCP_SCHEMA && self.schema_version != MCP_SCHEMA_V03 {
            return Err(format!(
                "MCP descriptor schemaVersion must be {MCP_SCHEMA:?} or {MCP_SCHEMA_V03:?}"
            ));
        }
        if self.servers.len() > 32 {
            return Err("MCP descriptor lists more than 32 servers".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for s in &self.servers {
            let name = s.name();
            if !valid_server_name(name) {
                return Err(format!("invalid MCP server name {name:?}"));
            }
            if !names.insert(name) {
                return Err(format!("duplicate MCP server name {name:?}"));
            }
            match s {
                McpServer::Stdio(st) => {
                    if !valid_absolute_path(&st.command) {
                        return Err(format!(
                            "MCP server {name:?}: command must be an absolute normalized path"
                        ));
                    }
                    if st.args.len() > 64 || st.args.iter().any(|a| a.len() > 4096) {
                        return Err(format!("MCP server {name:?}: too many or too long args"));
                    }
                    if st.env.len() > 64 {
                        return Err(format!("MCP server {name:?}: more than 64 env entries"));
                    }
                    for k in st.env.keys() {
                        if !valid_env_name(k) {
                            return Err(format!("MCP server {name:?}: invalid env name {k:?}"));
                        }
                    }
                }
                McpServer::Http(r) | McpServer::Sse(r) => {
                    if !valid_url(&r.url) {
                        return Err(format!(
                            "MCP server {name:?}: url must be https:// without user info or fragment"
                        ));
                    }
                    if r.headers.len() > 64 {
                        return Err(format!("MCP server {name:?}: more than 64 headers"));
                    }
                    for k in r.headers.keys() {
                        if !valid_header_name(k) {
                            return Err(format!("MCP server {name:?}: invalid header name {k:?}"));
                        }
                    }
                }
            }
            for r in s.env_refs() {
                if !valid_env_name(r) {
                    return Err(format!(
                        "MCP server {name:?}: fromEnv {r:?} is not a valid variable name"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Server names in order.
    pub fn names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name().to_owned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_reference_example() {
        let d = McpDescriptor::parse(
            br#"{"schemaVersion":"handoff.mcp.v0.3","servers":[
            {"name":"local-docs","transport":"stdio","command":"/usr/bin/env","args":["node","/a/server.mjs"],"env":{"TOKEN":{"fromEnv":"DOCS_MCP_TOKEN"}}},
            {"name":"remote-search","transport":"http","url":"https://mcp.example.com/rpc","headers":{"Authorization":{"fromEnv":"SEARCH_MCP_AUTH"}}}]}"#,
        )
        .unwrap();
        assert_eq!(d.names(), vec!["local-docs", "remote-search"]);
    }

    #[test]
    fn refuses_literals_relative_commands_and_plain_http() {
        for bad in [
            r#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"a","transport":"stdio","command":"/bin/x","args":[],"env":{"T":"literal"}}]}"#,
            r#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"a","transport":"stdio","command":"bin/x","args":[],"env":{}}]}"#,
            r#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"a","transport":"http","url":"http://x","headers":{}}]}"#,
            r#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"a","transport":"http","url":"https://u:p@x","headers":{}}]}"#,
            r#"{"schemaVersion":"handoff.mcp.v2","servers":[]}"#,
            r#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"a","transport":"stdio","command":"/x","args":[],"env":{}},{"name":"a","transport":"stdio","command":"/x","args":[],"env":{}}]}"#,
        ] {
            assert!(McpDescriptor::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
