//! Small helpers shared by the adapters.

use handoff_core::{
    GrantsResolved, InvocationError, Observation, OutputError, RawOutput, ReceiverRole, RunDir,
};

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

/// One line of a CLI's event stream, when it is JSON.
pub fn json_line(line: &[u8]) -> Option<serde_json::Value> {
    serde_json::from_slice(line).ok()
}

/// The first of `keys` whose value in `v` is a string.
pub fn string_field<'a>(v: &'a serde_json::Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(serde_json::Value::as_str))
}

/// `s` cut to at most `max` characters, on one line.
pub fn one_line(s: &str, max: usize) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.chars().take(max).collect()
}

/// A receiver's turn that ended without its closing event: the first line of its stderr, else
/// `unfinished`, on one line.
pub fn unfinished_turn(raw: &RawOutput, unfinished: &str) -> String {
    let stderr = String::from_utf8_lossy(&raw.stderr);
    one_line(
        crate::probe::first_line(&stderr)
            .as_deref()
            .unwrap_or(unfinished),
        1024,
    )
}

/// `<executable> --resume <id>`, with the configuration's model (`--model`): how a person
/// resumes a receiver's session in a CLI that resumes by id (Copilot, Gemini, Qwen).
pub fn resume_by_id(
    executable: &str,
    session_id: &str,
    config: &handoff_core::AgentConfig,
) -> Vec<String> {
    let mut argv = vec![
        executable.to_owned(),
        "--resume".to_owned(),
        session_id.to_owned(),
    ];
    if let Some(model) = &config.model {
        argv.extend(["--model".to_owned(), model.clone()]);
    }
    argv
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

/// A CLI's built-in tools by grant: what a run is given (an allowlist) and what it is refused
/// by name (a blocklist), from the same lists.
pub(crate) struct ToolSet {
    /// Reading and searching files: every run.
    pub(crate) read: &'static [&'static str],
    /// Writing files: writing runs.
    pub(crate) write: &'static [&'static str],
    /// The shell, when granted.
    pub(crate) shell: &'static [&'static str],
    /// The web, when granted.
    pub(crate) web: &'static [&'static str],
    /// Tools no run gets.
    pub(crate) never: &'static [&'static str],
}

impl ToolSet {
    /// The tools a run is given, by grant.
    pub(crate) fn granted(&self, write: bool, bash: bool, web: bool) -> Vec<&'static str> {
        let mut t = self.read.to_vec();
        for (on, group) in [(write, self.write), (bash, self.shell), (web, self.web)] {
            if on {
                t.extend(group);
            }
        }
        t
    }

    /// The tools a run is refused by name: everything known that is not granted.
    pub(crate) fn refused(&self, write: bool, bash: bool, web: bool) -> Vec<&'static str> {
        let mut t = self.never.to_vec();
        for (on, group) in [(write, self.write), (bash, self.shell), (web, self.web)] {
            if !on {
                t.extend(group);
            }
        }
        t
    }
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

// What more than one CLI prints: terminal decoration, its own errors, sandbox trouble.

/// Terminal decoration removed, line ends unified: every escape sequence is dropped (CSI
/// `ESC [ params intermediates final`, OSC `ESC ] … BEL|ESC \`, and the other `ESC
/// intermediates final` forms), and every `\r` becomes `\n` (so a spinner line rewritten with
/// `\r` ends there). Works on bytes: invalid UTF-8 is kept as is for the contract check to
/// report.
pub fn strip_ansi(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    let n = input.len();
    while i < n {
        match input[i] {
            0x1b => {
                i += 1;
                match input.get(i) {
                    Some(b'[') => {
                        i += 1;
                        while i < n && (0x30..=0x3f).contains(&input[i]) {
                            i += 1;
                        }
                        while i < n && (0x20..=0x2f).contains(&input[i]) {
                            i += 1;
                        }
                        if i < n && (0x40..=0x7e).contains(&input[i]) {
                            i += 1;
                        }
                    }
                    Some(b']') => {
                        i += 1;
                        while i < n {
                            if input[i] == 0x07 {
                                i += 1;
                                break;
                            }
                            if input[i] == 0x1b && input.get(i + 1) == Some(&b'\\') {
                                i += 2;
                                break;
                            }
                            i += 1;
                        }
                    }
                    Some(_) => {
                        while i < n && (0x20..=0x2f).contains(&input[i]) {
                            i += 1;
                        }
                        if i < n && (0x30..=0x7e).contains(&input[i]) {
                            i += 1;
                        }
                    }
                    None => {}
                }
            }
            b'\r' => {
                out.push(b'\n');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The first line (ANSI-stripped, trimmed) that starts with `error:` in any case, e.g. Kiro's
/// `Error: Service error: 500 …` or Grok's `Error: xAI API error (500): …`: an agent CLI
/// reporting its own failure. At most 1024 characters.
pub fn reported_error(bytes: &[u8]) -> Option<String> {
    let text = strip_ansi(bytes);
    String::from_utf8_lossy(&text)
        .lines()
        .map(str::trim)
        .find(|l| l.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("error:")))
        .map(|l| l.chars().take(1024).collect())
}

/// Sandbox trouble as Grok words it.
static SANDBOX_FAILURE: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(
    || {
        regex::Regex::new(
            r"(?i)sandbox.{0,200}(failed|unable|unavailable|unsupported|not applied|not enforced|could not be applied|refusing to start|continu(e|ing) without)",
        )
        .ok()
    },
);

/// Grok going on although its sandbox was not applied.
static CONTINUED: std::sync::LazyLock<Option<regex::Regex>> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)continu(e|ing) without").ok());

/// The lines of `text` that report sandbox trouble.
pub fn sandbox_lines(text: &str) -> Vec<&str> {
    let Some(re) = SANDBOX_FAILURE.as_ref() else {
        return Vec::new();
    };
    text.lines().filter(|l| re.is_match(l)).collect()
}

/// The agent's own failure, classified from what it said (for CLIs that report no error
/// fields): the cause its text names, `other` when none.
pub fn failure_from_text(message: String, usage: Option<handoff_core::Usage>) -> Observation {
    let reason = handoff_core::FailureReason::from_text(&message);
    Observation::AgentFailure {
        message,
        usage,
        reason,
    }
}

/// Why an error object says the run failed: its identifiers (`type`, `code`, `name`,
/// `error_type`, also one level down under `error`/`data`, and in the API's own body an AI SDK
/// error quotes as `responseBody`), HTTP status (`status`, `statusCode`, `status_code`) and
/// retry time (`retry_after`, `retryAfter`, `retry_after_seconds`, `resets_in_seconds`, a
/// quoted `retry-after` response header) first, then `text`.
pub fn error_object_reason(v: &serde_json::Value, text: &str) -> handoff_core::FailureReason {
    let mut scopes = vec![v.clone()];
    for key in ["error", "data"] {
        if let Some(inner) = v.get(key).filter(|i| i.is_object()) {
            scopes.push(inner.clone());
            if let Some(deeper) = inner.get("error").filter(|i| i.is_object()) {
                scopes.push(deeper.clone());
            }
        }
    }
    let mut header_retry = None;
    for scope in scopes.clone() {
        if let Some(body) = scope
            .get("responseBody")
            .and_then(serde_json::Value::as_str)
            .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
        {
            if let Some(inner) = body.get("error").filter(|i| i.is_object()) {
                scopes.insert(0, inner.clone());
            }
            scopes.push(body);
        }
        if let Some(headers) = scope
            .get("responseHeaders")
            .and_then(serde_json::Value::as_object)
        {
            header_retry = header_retry.or_else(|| {
                headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
                    .and_then(|(_, v)| v.as_str())
                    .and_then(|v| v.trim().parse::<u64>().ok())
            });
        }
    }
    let codes: Vec<&str> = scopes
        .iter()
        .flat_map(|s| {
            ["code", "type", "error_type", "errorType", "name"]
                .into_iter()
                .filter_map(|k| s.get(k).and_then(serde_json::Value::as_str))
        })
        .collect();
    let number = |keys: &[&str]| {
        scopes.iter().find_map(|s| {
            keys.iter().find_map(|k| {
                let v = s.get(*k)?;
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|t| t.trim().parse().ok()))
            })
        })
    };
    let status = number(&["status", "statusCode", "status_code", "http_status"])
        .and_then(|n| u16::try_from(n).ok());
    let retry = number(&[
        "retry_after_seconds",
        "retry_after",
        "retryAfter",
        "resets_in_seconds",
    ])
    .or(header_retry);
    handoff_core::FailureReason::classify(codes, status, text, retry)
}

/// What a blank stdout means: a sandbox that could not start (`Unavailable`), an error Grok
/// reported on stderr (`AgentFailure`), or no answer at all.
pub fn no_stdout(raw: &RawOutput) -> Result<Observation, OutputError> {
    let stderr = String::from_utf8_lossy(&raw.stderr);
    if raw.exit_code != Some(0)
        && let Some(line) = sandbox_lines(&stderr).first()
    {
        return Ok(Observation::Unavailable {
            message: line.trim().chars().take(1024).collect(),
        });
    }
    match reported_error(&raw.stderr) {
        Some(message) => Ok(failure_from_text(message, None)),
        None => Err(OutputError::Missing),
    }
}

/// The block verdict shared with Cursor: a stderr line naming sandbox trouble means the run
/// was not isolated as planned, unless the CLI evidently refused to run at all (it exited
/// non-zero with nothing on stdout and did not say it went on without the sandbox), which
/// `parse` reports as `Unavailable`. Only stderr is read: stdout carries the model's own words,
/// which may discuss sandboxes freely.
pub fn sandbox_block(raw: &RawOutput, agent: &str) -> Option<String> {
    let stderr = String::from_utf8_lossy(&raw.stderr);
    let lines = sandbox_lines(&stderr);
    let first = lines.first()?;
    let continued = lines
        .iter()
        .find(|l| CONTINUED.as_ref().is_some_and(|re| re.is_match(l)));
    let refused = raw.exit_code != Some(0) && raw.stdout.trim_ascii().is_empty();
    match continued {
        Some(line) => Some(format!(
            "{agent} reported that its requested sandbox was not enforced: {}",
            line.trim()
        )),
        None if refused => None,
        None => Some(format!(
            "{agent} reported that its requested sandbox was not enforced: {}",
            first.trim()
        )),
    }
}

/// Checks every adapter's progress reader shares.
#[cfg(test)]
pub mod progress_checks {
    use handoff_core::ProgressEvent;

    /// The events of every line of `text`, as shown.
    pub fn all(f: fn(&[u8]) -> Vec<ProgressEvent>, text: &str) -> Vec<String> {
        text.lines()
            .flat_map(|l| f(l.as_bytes()))
            .map(|e| e.to_string())
            .collect()
    }

    /// Lines that are not events, or not JSON at all, give nothing and never panic.
    pub fn assert_garbage_gives_nothing(f: fn(&[u8]) -> Vec<ProgressEvent>) {
        for line in [
            "",
            "{",
            "[]",
            "null",
            r#"{"type":"assistant","message":7}"#,
            "\u{0}",
        ] {
            let _ = f(line.as_bytes());
        }
        assert!(f(b"{}").is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_is_stripped() {
        assert_eq!(
            strip_ansi(b"\x1b[32m> \x1b[0mhi\x1b]0;title\x07 there\x1b(B\r\n"),
            b"> hi there\n\n"
        );
        assert_eq!(strip_ansi(b"a\x1b"), b"a");
        assert_eq!(strip_ansi(b"\x1b[38;5;141mX\x1b[K"), b"X");
    }

    #[test]
    fn toml_strings_escape() {
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(toml_array(&["x".into(), "y z".into()]), "[\"x\",\"y z\"]");
    }
}

/// The receipt of a nested-advice worker whose bash tool carries the supervisor context: under
/// handoff's sandbox (`sandboxed`), the mailbox read-only but for its `in/`; without it, nothing
/// opened since `agent` runs unconfined.
pub fn nested_receipt(
    nested: &handoff_core::NestedAccess,
    sandboxed: bool,
    agent: &str,
) -> serde_json::Value {
    if sandboxed {
        serde_json::json!({
            "mailbox": nested.mailbox,
            "handoffExe": nested.handoff_exe,
            "writable": [nested.inbox()],
            "readable": [nested.outbox()],
            "unixSockets": "none: the supervisor is reached through the mailbox",
            "environment": "HANDOFF_SUPERVISOR_CONTEXT reaches the bash tool",
        })
    } else {
        serde_json::json!({
            "mailbox": nested.mailbox,
            "handoffExe": nested.handoff_exe,
            "opened": format!("nothing: {agent} runs unconfined without handoff's sandbox"),
            "environment": "HANDOFF_SUPERVISOR_CONTEXT reaches the bash tool",
        })
    }
}

/// An absolute `HOME` of `env`.
pub(crate) fn home_dir(
    env: &std::collections::BTreeMap<String, String>,
) -> Option<camino::Utf8PathBuf> {
    env.get("HOME")
        .filter(|h| h.starts_with('/'))
        .map(camino::Utf8PathBuf::from)
}

/// An XDG base directory of `env`: `var` when it is absolute, else `~/<fallback>` (e.g.
/// `XDG_DATA_HOME`, `.local/share`).
pub(crate) fn xdg_dir(
    env: &std::collections::BTreeMap<String, String>,
    var: &str,
    fallback: &str,
) -> Option<camino::Utf8PathBuf> {
    env.get(var)
        .filter(|d| d.starts_with('/'))
        .map(camino::Utf8PathBuf::from)
        .or_else(|| home_dir(env).map(|h| h.join(fallback)))
}

/// `base` (the allowlisted environment) with the agent's configuration applied as the engine
/// will apply it: `pass_env` names from handoff's environment, then `env`.
pub fn effective_env(
    base: &std::collections::BTreeMap<String, String>,
    run: &RunDir,
) -> std::collections::BTreeMap<String, String> {
    let mut env = base.clone();
    for name in &run.agent_config.pass_env {
        if let Some(v) = run.parent_env.get(name) {
            env.insert(name.clone(), v.clone());
        }
    }
    env.extend(
        run.agent_config
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    env
}

/// What a run of `shape` can do for a CLI that runs under handoff's sandbox with handoff's
/// filtering proxy, and whose shell tool runs `/bin/bash` itself (not `$SHELL`), so its
/// commands share the CLI's network namespace (GitHub Copilot CLI, Gemini CLI).
///
/// Under handoff's sandbox the model writes the worktree only in writing runs (never its git
/// directories), reads nothing of the user's files outside it, and its processes die with the
/// run's PID namespace. The shell's commands reach what handoff's proxy lets the CLI reach:
/// the model's endpoints, and any public host when the web is granted.
///
/// Without handoff's sandbox, a shell leaves everything open but its processes; without one,
/// the CLI's tools keep to the worktree and the temporary directory when writing, and the web
/// tools reach the web only when granted.
pub fn proxied_shell_isolation(shape: &handoff_core::RunShape) -> handoff_core::Isolation {
    use handoff_core::{
        Enforcement, FilesystemRead, FilesystemWrite, Isolation, Network, ProcessContainment,
        UnixSockets,
    };
    let g = &shape.grants;
    let tools_network = if g.web_search {
        Network::Web
    } else {
        Network::None
    };
    if shape.handoff_sandbox {
        return Isolation {
            enforcement: Enforcement::Handoff,
            filesystem_write: if g.write {
                FilesystemWrite::Worktree
            } else {
                FilesystemWrite::None
            },
            filesystem_read: FilesystemRead::Worktree,
            network: match (g.bash, g.web_search) {
                (true, true) => Network::Any,
                (true, false) => Network::ModelEndpoints,
                (false, _) => tools_network,
            },
            unix_sockets: UnixSockets::None,
            process: ProcessContainment::PidNamespace,
        };
    }
    if g.bash {
        return Isolation {
            process: handoff_core::process_containment(),
            ..Isolation::unconfined()
        };
    }
    Isolation {
        enforcement: Enforcement::None,
        filesystem_write: if g.write {
            FilesystemWrite::WorktreeAndTemp
        } else {
            FilesystemWrite::None
        },
        filesystem_read: FilesystemRead::Anywhere,
        network: tools_network,
        unix_sockets: UnixSockets::None,
        process: handoff_core::process_containment(),
    }
}

/// The network of a CLI behind handoff's filtering proxy: `endpoints` (its model's), those of
/// the remote servers in `mcp` (an `mcpServers` table: `httpUrl` or `url`), and any public
/// host when the web is granted, a local MCP server runs (it may call its service), or the
/// model's base URL is one no endpoint can name (`unnamed`, the reason said so).
pub fn proxied_network(
    mut endpoints: Vec<handoff_core::sandbox::proxy::Endpoint>,
    mcp: &serde_json::Value,
    web: bool,
    unnamed: Option<&str>,
) -> handoff_core::sandbox::proxy::NetworkSpec {
    use handoff_core::sandbox::proxy::Endpoint;
    let mut local_mcp = false;
    for (name, server) in mcp.as_object().into_iter().flatten() {
        match server
            .get("httpUrl")
            .or_else(|| server.get("url"))
            .and_then(serde_json::Value::as_str)
        {
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
        unnamed.map(str::to_owned)
    };
    handoff_core::sandbox::proxy::NetworkSpec {
        endpoints,
        public_hosts,
        transparent: false,
    }
}
