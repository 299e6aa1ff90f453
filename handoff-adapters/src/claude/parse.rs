//! Reading a delegated Claude Code run: the `result` event of its `stream-json` output is the
//! envelope whose `structured_output` is the answer.

use handoff_core::{FailureReason, Observation, OutputError, RawOutput, Usage, UsageSource};
use serde::Deserialize;

use super::SANDBOX_UNAVAILABLE;
use crate::probe;

/// The final `result` event of Claude's stream (also the whole `--output-format json` output).
#[derive(Debug, Deserialize)]
pub(super) struct ResultEvent {
    pub(super) subtype: Option<String>,
    pub(super) is_error: Option<bool>,
    pub(super) result: Option<String>,
    pub(super) errors: Option<Vec<String>>,
    structured_output: Option<serde_json::Value>,
    usage: Option<ClaudeUsage>,
    total_cost_usd: Option<f64>,
    /// The HTTP status of the API error that ended the turn.
    api_error_status: Option<u16>,
    /// The API error body's `error.type` (`rate_limit_error`, `overloaded_error`, …).
    api_error_type: Option<String>,
    /// The API error body's `error.details.error_code`, when it has one.
    api_error_code: Option<String>,
    /// Why the turn ended (`api_error`, `prompt_too_long`, …).
    terminal_reason: Option<String>,
}

/// Why Claude's run failed: the result's API error fields and the class the failing
/// assistant message names (`rate_limit`, `authentication_failed`, `billing_error`, …) first,
/// then the HTTP status, then the text. Claude Code does not pass a `retry-after` on.
fn reason_of(ev: &ResultEvent, message_error: Option<&str>, text: &str) -> FailureReason {
    let ended = ev.terminal_reason.as_deref().filter(|r| *r != "api_error");
    let codes = [
        ev.api_error_code.as_deref(),
        ev.api_error_type.as_deref(),
        message_error,
        ended,
    ];
    FailureReason::classify(codes.into_iter().flatten(), ev.api_error_status, text, None)
}

#[derive(Debug, Deserialize)]
struct ClaudeUsage {
    input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

fn usage_of(ev: &ResultEvent) -> Option<Usage> {
    let u = ev.usage.as_ref()?;
    let read = u.cache_read_input_tokens.unwrap_or(0);
    let write = u.cache_creation_input_tokens.unwrap_or(0);
    let input = u
        .input_tokens
        .map(|i| i.saturating_add(read).saturating_add(write));
    Some(Usage {
        source: UsageSource::ProviderEnvelope,
        input_tokens: input,
        output_tokens: u.output_tokens,
        total_tokens: match (input, u.output_tokens) {
            (Some(i), Some(o)) => Some(i.saturating_add(o)),
            _ => None,
        },
        cache_read_tokens: u.cache_read_input_tokens,
        cache_write_tokens: u.cache_creation_input_tokens,
        cost_usd: ev.total_cost_usd,
        premium_requests: None,
    })
}

/// Reads Claude's `stream-json` (or single `json`) output.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut result: Option<ResultEvent> = None;
    let mut message_error: Option<String> = None;
    for line in raw.stdout.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_slice(line).map_err(|_| OutputError::Envelope {
                reason: "stdout has a line that is not JSON".into(),
            })?;
        if value.get("type").and_then(|t| t.as_str()) == Some("assistant")
            && let Some(class) = value.get("error").and_then(|e| e.as_str())
        {
            message_error = Some(class.to_owned());
        }
        if value.get("type").and_then(|t| t.as_str()) == Some("result") {
            result = Some(
                serde_json::from_value(value).map_err(|e| OutputError::Envelope {
                    reason: format!("malformed result event: {e}"),
                })?,
            );
        }
    }
    let Some(ev) = result else {
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&raw.stderr),
            String::from_utf8_lossy(&raw.stdout)
        );
        if let Some(line) = probe::line_with_ci(&text, SANDBOX_UNAVAILABLE) {
            return Ok(Observation::Unavailable { message: line });
        }
        return Err(OutputError::Envelope {
            reason: "Claude ended without a result event".into(),
        });
    };
    let usage = usage_of(&ev);
    if ev.is_error == Some(true) {
        // A sandbox that can't start is reported inside the result event when the CLI got far
        // enough to emit one: that is "not run", not the agent failing.
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&raw.stderr),
            ev.result.as_deref().unwrap_or_default()
        );
        if let Some(line) = probe::line_with_ci(&text, SANDBOX_UNAVAILABLE) {
            return Ok(Observation::Unavailable { message: line });
        }
        let detail = ev
            .errors
            .as_ref()
            .map(|e| e.join("; "))
            .filter(|s| !s.trim().is_empty())
            .or_else(|| ev.result.clone().filter(|s| !s.trim().is_empty()))
            .unwrap_or_else(|| "no detail".into());
        let message = match ev.subtype.as_deref() {
            Some(s) if s != "success" => format!("{s}: {detail}"),
            _ => detail,
        };
        let reason = reason_of(&ev, message_error.as_deref(), &message);
        return Ok(Observation::AgentFailure {
            message: message.chars().take(1024).collect(),
            usage,
            reason,
        });
    }
    let payload = match (ev.structured_output, ev.result) {
        (Some(v @ serde_json::Value::Object(_)), _) => serde_json::to_vec(&v).unwrap_or_default(),
        (_, Some(text)) => text.into_bytes(),
        _ => return Err(OutputError::Missing),
    };
    Ok(Observation::Answer { payload, usage })
}

/// Signs in stderr that the sandbox was not applied although the run went on. Only stderr is
/// read: stdout carries the model's own words, which may discuss sandboxes freely.
pub fn runtime_check(raw: &RawOutput) -> Option<String> {
    static RE: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)sandbox.{0,200}(failed|unable|unavailable|unsupported|continu(e|ing) without|could not be applied|not enforced)",
        )
        .ok()
    });
    let stderr = String::from_utf8_lossy(&raw.stderr);
    // It did not run at all: reported as not_run by `parse`. 2.1.197 wrote "refusing to
    // start", 2.1.332 "Refusing to start" on a line of its own.
    if stderr.to_ascii_lowercase().contains("refusing to start") {
        return None;
    }
    let re = RE.as_ref()?;
    stderr.lines().find(|l| re.is_match(l)).map(|l| {
        format!(
            "Claude Code reported that its sandbox was not enforced: {}",
            l.trim()
        )
    })
}
