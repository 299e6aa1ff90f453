//! Reading a headless community Grok run: one OpenAI-style chat message per line
//! (`{"role":"user"|"assistant"|"tool", "content": …, "tool_calls"?: […]}`); the answer is the
//! content of the last assistant message.

use handoff_core::{Observation, OutputError, RawOutput};
use serde::Deserialize;

use crate::common::{failure_from_text, reported_error, strip_ansi};

/// One line of the CLI's stdout.
#[derive(Debug, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// The prompt, echoed.
    User {},
    /// The model's words, with the tool calls it made in that turn.
    Assistant {
        /// Its text (`null` for a turn that only calls tools).
        #[serde(default)]
        content: Option<String>,
        /// The calls made in that turn.
        #[serde(default)]
        tool_calls: Vec<serde_json::Value>,
    },
    /// A tool's result.
    Tool {},
    /// Any other role.
    #[serde(other)]
    Other,
}

/// How the CLI words an error of its model provider (HTTP status, refused connection, …) in
/// place of the model's answer, exiting 0.
pub const API_ERROR_PREFIX: &str = "Sorry, I encountered an error:";

/// How the CLI words running out of tool rounds (`--max-tool-rounds`), exiting 0.
pub const MAX_ROUNDS: &str = "Maximum tool execution rounds reached";

/// How the CLI words an error of its own headless driver (it then exits 1).
pub const DRIVER_ERROR_PREFIX: &str = "Error:";

/// The CLI's own failure, when `content` (of its last assistant message) is one.
pub fn failure(content: &str) -> Option<String> {
    let text = content.trim();
    let failed = text.starts_with(API_ERROR_PREFIX)
        || text.starts_with(MAX_ROUNDS)
        || text.starts_with(DRIVER_ERROR_PREFIX);
    failed.then(|| text.chars().take(1024).collect())
}

/// A failure the CLI printed on stderr before any message (`❌ Error: API key required …`).
fn stderr_failure(stderr: &[u8]) -> Option<String> {
    reported_error(stderr).or_else(|| {
        let text = strip_ansi(stderr);
        String::from_utf8_lossy(&text)
            .lines()
            .map(|l| l.trim_start_matches(|c: char| !c.is_ascii_alphanumeric()))
            .find(|l| l.starts_with(DRIVER_ERROR_PREFIX))
            .map(|l| l.chars().take(1024).collect())
    })
}

/// Reads the CLI's stdout.
///
/// - Lines that are not JSON messages are ignored (a CLI or library notice); so are user and
///   tool messages.
/// - The last assistant message decides: its content is the answer (checked against the
///   provider-output contract by the engine), unless it is the CLI's wording of a failure
///   ([`failure`]): an API error, the tool-round limit or a driver error is the agent's own
///   failure. A last assistant message without content, or one that still calls tools (the
///   run ended mid-turn), is no answer.
/// - No assistant message at all: a failure the CLI printed on stderr, else no answer.
///
/// The CLI reports no token usage.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let last = raw
        .stdout
        .split(|b| *b == b'\n')
        .rev()
        .filter_map(|line| serde_json::from_slice::<Message>(line.trim_ascii()).ok())
        .find_map(|m| match m {
            Message::Assistant {
                content,
                tool_calls,
            } => Some((content, tool_calls)),
            _ => None,
        });
    let Some((content, tool_calls)) = last else {
        return match stderr_failure(&raw.stderr) {
            Some(message) => Ok(failure_from_text(message, None)),
            None => Err(OutputError::Missing),
        };
    };
    let content = content.unwrap_or_default();
    if let Some(message) = failure(&content) {
        return Ok(failure_from_text(message, None));
    }
    // A turn that still called tools was not the last one the CLI meant to play.
    if content.trim().is_empty() || !tool_calls.is_empty() {
        return Err(OutputError::Missing);
    }
    Ok(Observation::Answer {
        payload: content.into_bytes(),
        usage: None,
    })
}
