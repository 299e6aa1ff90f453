//! Small helpers shared by the adapters.

use handoff_core::{GrantsResolved, InvocationError, ReceiverRole, RunDir};

/// The sentinel for "leave it to the CLI".
pub const PROVIDER_DEFAULT_STR: &str = handoff_core::PROVIDER_DEFAULT;

/// What a continuation receiver may do, in the grants a delegated run of the same kind gets:
/// an implementer writes the worktree and runs commands (as a `build` run with bash), a
/// reviewer reads and runs commands without writing (as a `review` run with bash). Neither
/// searches the web nor gets MCP servers: nothing in a continuation grants them.
pub fn receiver_grants(role: ReceiverRole) -> GrantsResolved {
    GrantsResolved {
        bash: true,
        web_search: false,
        mcp: false,
        write: role.writes(),
    }
}

/// The non-blank lines of a CLI's stdout, each parsed as JSON when it is JSON (`None` when
/// not): receivers' outputs are read leniently, line by line.
pub fn json_lines(stdout: &[u8]) -> impl Iterator<Item = Option<serde_json::Value>> + '_ {
    stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(|l| serde_json::from_slice(l).ok())
}

/// `s` cut to at most `max` characters, on one line.
pub fn one_line(s: &str, max: usize) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.chars().take(max).collect()
}

/// The value of an MCP secret reference, from handoff's own environment.
pub fn mcp_secret(run: &RunDir, name: &str) -> Result<String, InvocationError> {
    run.parent_env
        .get(name)
        .filter(|v| !v.is_empty())
        .cloned()
        .ok_or_else(|| InvocationError::MissingMcpEnv {
            name: name.to_owned(),
        })
}

/// One MCP server of the run, with its secret references resolved.
pub enum ResolvedMcp<'a> {
    /// A local process.
    Stdio {
        /// Absolute program path.
        command: &'a str,
        /// Its arguments.
        args: &'a [String],
        /// Its environment, values resolved.
        env: serde_json::Map<String, serde_json::Value>,
    },
    /// A remote server.
    Remote {
        /// `http` or `sse`.
        transport: &'static str,
        /// Its URL.
        url: &'a str,
        /// Its headers, values resolved.
        headers: serde_json::Map<String, serde_json::Value>,
    },
}

/// Renders every MCP server of the run with `render`, after resolving its secret references
/// from handoff's environment (each value, and the bare token of an HTTP credential, is added
/// to `secrets`). Returns the rendered servers by name, and the names in descriptor order.
pub fn render_mcp(
    run: &RunDir,
    secrets: &mut Vec<String>,
    render: impl Fn(ResolvedMcp<'_>) -> serde_json::Value,
) -> Result<(serde_json::Map<String, serde_json::Value>, Vec<String>), InvocationError> {
    use handoff_core::McpServer;
    let mut servers = serde_json::Map::new();
    let mut names = Vec::new();
    for server in run.mcp.iter().flat_map(|m| &m.servers) {
        let resolved = match server {
            McpServer::Stdio(s) => {
                let mut env = serde_json::Map::new();
                for (k, r) in &s.env {
                    let v = mcp_secret(run, &r.from_env)?;
                    secrets.push(v.clone());
                    env.insert(k.clone(), serde_json::Value::String(v));
                }
                ResolvedMcp::Stdio {
                    command: &s.command,
                    args: &s.args,
                    env,
                }
            }
            McpServer::Http(r) | McpServer::Sse(r) => {
                let mut headers = serde_json::Map::new();
                for (k, reference) in &r.headers {
                    let v = mcp_secret(run, &reference.from_env)?;
                    secrets.extend(secret_forms(&v));
                    headers.insert(k.clone(), serde_json::Value::String(v));
                }
                ResolvedMcp::Remote {
                    transport: if matches!(server, McpServer::Http(_)) {
                        "http"
                    } else {
                        "sse"
                    },
                    url: &r.url,
                    headers,
                }
            }
        };
        names.push(server.name().to_owned());
        servers.insert(server.name().to_owned(), render(resolved));
    }
    Ok((servers, names))
}

/// A secret value and, for an HTTP credential like `Bearer <token>`, the bare token too: both
/// must be masked wherever they appear.
pub fn secret_forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_owned()];
    if let Some((scheme, token)) = value.split_once(' ')
        && matches!(
            scheme.to_ascii_lowercase().as_str(),
            "bearer" | "basic" | "token"
        )
        && !token.trim().is_empty()
    {
        forms.push(token.trim().to_owned());
    }
    forms
}

/// A TOML basic string.
pub fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML array of basic strings.
pub fn toml_array(items: &[String]) -> String {
    let inner: Vec<String> = items.iter().map(|s| toml_string(s)).collect();
    format!("[{}]", inner.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_strings_escape() {
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(toml_array(&["x".into(), "y z".into()]), "[\"x\",\"y z\"]");
    }
}
