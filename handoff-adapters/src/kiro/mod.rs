//! Kiro CLI (`kiro-cli chat --no-interactive`).
//!
//! Kiro has no native sandbox and no structured output. Isolation is its tool-permission
//! allowlist: exactly the tools the grants allow are trusted (`--trust-tools=fs_read[,fs_write]
//! [,execute_bash]`), never `--trust-all-tools`; in non-interactive mode an untrusted tool can't
//! be approved by anyone, so it is not run. A read-only run is therefore read-only by permission
//! only, and handoff's final-state comparison of the worktree is the actual guarantee
//! (`mutationGuarantee: final-state-detection-only`). MCP is refused (no isolated MCP surface
//! was proved), and so is web search (no control for it).
//!
//! Output is the chat transcript, ANSI-decorated: tool-use notes, then a `> ` marker before the
//! model's final message, which may open with a sentence of narrative before the JSON answer.
//! See [`extract_answer`] for the exact rule used to read it.

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, AnswerSource, GrantCapabilities, Invocation, InvocationError, Observation,
    OutputError, Preflight, ProbeEnv, Provider, ProviderSpec, RawOutput, Request, RunDir,
    StdinSource, agent_env,
};
use serde_json::json;

use crate::common::PROVIDER_DEFAULT_STR;
use crate::probe;

/// The Kiro adapter.
#[derive(Debug, Default, Clone)]
pub struct Kiro;

/// Static facts about Kiro.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::KIRO,
    executable: "kiro-cli",
    extra_dirs: &["~/.local/bin", "/opt/homebrew/bin", "/usr/local/bin"],
    effort: &["low", "medium", "high", "xhigh", "max"],
    advice_effort: Some("max"),
    max_turns: None,
    grants: GrantCapabilities {
        bash: true,
        bash_disable: true,
        web_search: false,
        mcp: false,
        write: true,
        nested_source: true,
    },
    native_filesystem_isolation: false,
    native_bash_sandbox: false,
    env_passthrough: &["KIRO_API_KEY"],
});

/// Flags `kiro-cli chat --help` must mention. The reference also required
/// `--require-mcp-startup`, which no run uses (Kiro's MCP is refused): a Kiro that dropped or
/// renamed it would have been reported unusable for no reason, so it is not required here.
pub const REQUIRED_FLAGS: &[&str] = &[
    "--effort",
    "--model",
    "--no-interactive",
    "--trust-tools",
    "--wrap",
];

/// The trusted tools of a run, in order: `fs_read`, then `fs_write` (writing runs), then
/// `execute_bash` (bash granted).
pub fn trusted_tools(request: &Request) -> Vec<&'static str> {
    let g = &request.grants.resolved;
    let mut t = vec!["fs_read"];
    if g.write {
        t.push("fs_write");
    }
    if g.bash {
        t.push("execute_bash");
    }
    t
}

impl Kiro {
    fn plan(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        // Validation refuses these before a plan is made; refusing here too keeps the plan
        // fail-closed if a caller skips validation.
        if run.mcp.as_ref().is_some_and(|m| !m.servers.is_empty()) {
            return Err(InvocationError::Unsupported(
                "Kiro private MCP isolation was not proved; --mcp-config is unsupported for kiro"
                    .into(),
            ));
        }
        if request.grants.resolved.web_search {
            return Err(InvocationError::Unsupported(
                "webSearch is unsupported for kiro".into(),
            ));
        }
        let mut env = agent_env(spec, &run.parent_env);
        // Plain output: fewer escape sequences to strip, no terminal-width wrapping.
        env.insert("NO_COLOR".into(), "1".into());
        env.insert("TERM".into(), "dumb".into());
        let tools = trusted_tools(request);
        let mut args: Vec<String> = vec![
            "chat".into(),
            "--no-interactive".into(),
            "--wrap".into(),
            "never".into(),
            format!("--trust-tools={}", tools.join(",")),
        ];
        let sel = &request.selection.resolved;
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if sel.effort != PROVIDER_DEFAULT_STR {
            args.extend(["--effort".into(), sel.effort.clone()]);
        }
        let write = request.writes();
        let policy = json!({
            "enforcement": "tool-permission-allowlist",
            "filesystem": if write { "permission-only-workspace-write" } else { "permission-only-read-only-intent" },
            "trustedTools": tools,
            "trustAllTools": false,
            "untrustedTools": "not run (no one can approve them in --no-interactive mode)",
            "nativeFilesystemIsolation": false,
            "nativeBashSandbox": false,
            "mutationGuarantee": "final-state-detection-only",
            "bash": if request.grants.resolved.bash { "trusted, unsandboxed" } else { "not trusted" },
            "webSearch": "unsupported",
            "mcpServers": [],
            "structuredResult": "driver-extracted: the one JSON object ending the final `> ` answer block",
            "environment": "allowlist",
        });
        Ok(Invocation {
            program: run.executable.clone(),
            args,
            env,
            // Kiro has no directory flag: it works in its process's directory.
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs: vec![],
            files: vec![],
            answer: AnswerSource::Stdout,
            policy,
            secrets: vec![],
        })
    }
}

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

/// The final answer block: everything after the `> ` that starts the last line beginning with
/// `> ` (at the start of the text or right after a `\n`). `None` without such a line.
///
/// A line of a JSON object can't start with `> ` (a JSON string holds no raw newline), so the
/// JSON answer is never cut by this rule; a quoted `> ` line inside the model's narrative only
/// moves the block start further down, still before the JSON.
pub fn answer_block(text: &[u8]) -> Option<&[u8]> {
    let mut found = None;
    if text.starts_with(b"> ") {
        found = Some(2);
    }
    for (i, w) in text.windows(3).enumerate() {
        if w == b"\n> " {
            found = Some(i + 3);
        }
    }
    found.map(|start| &text[start..])
}

/// Where the JSON object ending at `end` (exclusive, `text[end - 1] == b'}'`) begins: a
/// backward scan that counts braces outside strings. A `"` toggles "inside a string" unless an
/// odd number of backslashes precedes it; for any valid JSON text this tracks strings exactly,
/// and it is linear in the length of the text.
fn object_start(text: &[u8], end: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = end;
    while i > 0 {
        i -= 1;
        match text[i] {
            b'"' => {
                let backslashes = text[..i].iter().rev().take_while(|b| **b == b'\\').count();
                if backslashes % 2 == 0 {
                    in_string = !in_string;
                }
            }
            _ if in_string => {}
            b'}' => depth += 1,
            b'{' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Reads Kiro's answer out of its (ANSI-stripped) transcript. The rule, exactly:
///
/// 1. The answer block is the text after the last line-start `> ` marker ([`answer_block`]).
/// 2. Trailing whitespace is ignored; the block must then end with `}`: anything after the
///    object (a closing code fence, a second paragraph, a tool note) is refused.
/// 3. The object is the balanced `{…}` ending at that `}` ([`object_start`]); its bytes are
///    the payload, checked against the provider-output contract by the engine (so schema drift,
///    invalid UTF-8 and malformed JSON get their own precise errors).
/// 4. Whatever precedes the object in the block is narrative and is ignored, but it must not
///    contain another answer: a `"schemaVersion"` key before the object means two candidate
///    answers, and that is refused rather than guessed.
///
/// The reference instead scanned the whole text forward for `{"schemaVersion":…` openings and
/// brace-matched each one (quadratic in the worst case, and ambiguous about which of several
/// candidates wins); this rule looks only at the final block and its end.
pub fn extract_answer(text: &[u8]) -> Result<&[u8], OutputError> {
    let block = answer_block(text).ok_or_else(|| OutputError::Envelope {
        reason: "Kiro printed no `> ` answer marker".into(),
    })?;
    let end = block
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    if end == 0 {
        return Err(OutputError::Missing);
    }
    if block[end - 1] != b'}' {
        return Err(OutputError::NotOneObject);
    }
    let start = object_start(block, end).ok_or(OutputError::NotOneObject)?;
    let preamble = &block[..start];
    if preamble
        .windows(b"\"schemaVersion\"".len())
        .any(|w| w == b"\"schemaVersion\"")
    {
        return Err(OutputError::Envelope {
            reason: "Kiro's answer block holds more than one answer object".into(),
        });
    }
    Ok(&block[start..end])
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

/// Reads Kiro's transcript.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let text = strip_ansi(&raw.stdout);
    match extract_answer(&text) {
        Ok(payload) => Ok(Observation::Answer {
            payload: payload.to_vec(),
            // Kiro reports no usage: the model's self-report is recorded by the engine.
            usage: None,
        }),
        Err(e) => {
            // No answer object, but Kiro said why: the agent's own failure.
            match reported_error(&raw.stderr).or_else(|| reported_error(&raw.stdout)) {
                Some(message) => Ok(Observation::AgentFailure {
                    message,
                    usage: None,
                }),
                None => Err(e),
            }
        }
    }
}

#[async_trait]
impl Provider for Kiro {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        parse(raw)
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        match probe::version_and_flags(exe, probe, &["chat", "--help"], REQUIRED_FLAGS).await {
            Ok(version) => Preflight {
                version: Some(version),
                failure: None,
            },
            Err(failed) => failed,
        }
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
    fn the_object_ends_the_block() {
        let text = b"tool note\n> Done.\n\n{\"schemaVersion\":\"x\",\"r\":\"a } \\\" {\"}\n";
        assert_eq!(
            extract_answer(text).ok(),
            Some(&b"{\"schemaVersion\":\"x\",\"r\":\"a } \\\" {\"}"[..])
        );
        assert!(matches!(
            extract_answer(b"> {\"a\":1}\n```\n"),
            Err(OutputError::NotOneObject)
        ));
        assert!(matches!(
            extract_answer(b"{\"a\":1}"),
            Err(OutputError::Envelope { .. })
        ));
        assert!(matches!(
            extract_answer(b"> \"a\"}"),
            Err(OutputError::NotOneObject)
        ));
    }
}
