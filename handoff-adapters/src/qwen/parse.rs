//! Reading a delegated Qwen run: the closing `result` event of its stream-json output holds the
//! answer (`result`), the failure (`is_error` with `error.message`, e.g. `[API Error: 401 …]`)
//! and the token counts. A fatal error ends the run without one: the turn limit (exit code 53)
//! with a line on stderr, JSON (`{"error":{"type","message","code"}}`) or text.

use handoff_core::{FailureReason, Observation, OutputError, RawOutput, Usage, UsageSource};
use serde::Deserialize;
use serde_json::Value;

use crate::common::{failure_from_text, json_lines, one_line};

/// The exit code of a run stopped at `--max-session-turns`.
pub const TURN_LIMIT_EXIT: i32 = 53;

/// The closing `result` event.
#[derive(Debug, Deserialize)]
struct ResultEvent {
    subtype: Option<String>,
    is_error: Option<bool>,
    result: Option<String>,
    usage: Option<QwenUsage>,
    error: Option<Value>,
}

/// Token counts, in the OpenAI sense: the input counts include the cached ones.
#[derive(Debug, Deserialize)]
struct QwenUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    total_tokens: Option<u64>,
}

fn usage_of(ev: &ResultEvent) -> Option<Usage> {
    let u = ev.usage.as_ref()?;
    Some(Usage {
        source: UsageSource::ProviderEnvelope,
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        total_tokens: u.total_tokens.or(match (u.input_tokens, u.output_tokens) {
            (Some(i), Some(o)) => Some(i.saturating_add(o)),
            _ => None,
        }),
        cache_read_tokens: u.cache_read_input_tokens,
        cache_write_tokens: None,
        cost_usd: None,
        premium_requests: None,
    })
}

/// A fatal error Qwen printed on stderr: the message of a JSON error line, else the first line
/// that is not one of its notices.
fn stderr_error(stderr: &[u8]) -> Option<(String, Option<Value>)> {
    let text = String::from_utf8_lossy(stderr);
    for line in text.lines() {
        if let Ok(v) = serde_json::from_str::<Value>(line.trim())
            && let Some(message) = v.pointer("/error/message").and_then(Value::as_str)
        {
            return Some((message.to_owned(), Some(v)));
        }
    }
    text.lines()
        .map(str::trim)
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("Ripgrep not available")
                && !l.starts_with("Warning: running headless")
        })
        .map(|l| (l.to_owned(), None))
}

/// Reads Qwen's stream-json (or `-o json`, one array) output.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut result: Option<Value> = None;
    for v in json_lines(&raw.stdout) {
        let Some(v) = v else {
            return Err(OutputError::Envelope {
                reason: "stdout has a line that is not JSON".into(),
            });
        };
        let events = match v {
            Value::Array(items) => items,
            other => vec![other],
        };
        result = events
            .into_iter()
            .rev()
            .find(|e| e.get("type").and_then(Value::as_str) == Some("result"))
            .or(result);
    }
    let Some(result) = result else {
        return no_result(raw);
    };
    let ev: ResultEvent = serde_json::from_value(result).map_err(|e| OutputError::Envelope {
        reason: format!("malformed result event: {e}"),
    })?;
    let usage = usage_of(&ev);
    if ev.is_error == Some(true) {
        let detail = ev
            .error
            .as_ref()
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| ev.result.clone())
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "no detail".into());
        let message = match ev.subtype.as_deref() {
            Some(s) if s != "success" => format!("{s}: {detail}"),
            _ => detail,
        };
        return Ok(failure_from_text(
            message.chars().take(1024).collect(),
            usage,
        ));
    }
    match ev.result {
        Some(text) => Ok(Observation::Answer {
            payload: text.into_bytes(),
            usage,
        }),
        None => Err(OutputError::Missing),
    }
}

/// A run that ended without a `result` event: the turn limit, another fatal error on stderr,
/// or no answer.
fn no_result(raw: &RawOutput) -> Result<Observation, OutputError> {
    let error = stderr_error(&raw.stderr);
    if raw.exit_code == Some(TURN_LIMIT_EXIT) {
        let said = error.map_or_else(|| "Qwen stopped at its turn limit".to_owned(), |e| e.0);
        return Ok(Observation::AgentFailure {
            message: format!("max_turns: {}", one_line(&said, 1000)),
            usage: None,
            reason: FailureReason::classify([], None, "", None),
        });
    }
    match error {
        Some((message, Some(v))) if raw.exit_code != Some(0) => {
            let message = one_line(&message, 1024);
            let reason = crate::common::error_object_reason(&v, &message);
            Ok(Observation::AgentFailure {
                message,
                usage: None,
                reason,
            })
        }
        Some((message, None)) if raw.exit_code != Some(0) => {
            Ok(failure_from_text(one_line(&message, 1024), None))
        }
        _ => Err(OutputError::Envelope {
            reason: "Qwen ended without a result event".into(),
        }),
    }
}
