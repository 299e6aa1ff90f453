//! Reading a headless Gemini run (`--output-format stream-json`): JSONL events `init`,
//! `message`, `tool_use`, `tool_result`, `error` and a closing `result`. The assistant's text
//! after the last tool call is the answer; a `result` with `status: "error"` is the CLI's own
//! failure, whose message quotes the API's error body (`[API Error: {…}]`) when the API failed.
//! Gemini exits with the HTTP status of an API failure (modulo 256) and 53 at its turn limit.

use handoff_core::{FailureReason, Observation, OutputError, RawOutput, Usage, UsageSource};
use serde_json::Value;

/// The token counts of the `result` event's `stats`.
fn usage(stats: Option<&Value>) -> Option<Usage> {
    let stats = stats?;
    let count = |k: &str| stats.get(k).and_then(Value::as_u64);
    let input = count("input_tokens")?;
    let output = count("output_tokens").unwrap_or(0);
    Some(Usage {
        source: UsageSource::ProviderEnvelope,
        input_tokens: Some(input),
        output_tokens: Some(output),
        total_tokens: Some(count("total_tokens").unwrap_or(input.saturating_add(output))),
        cache_read_tokens: count("cached"),
        cache_write_tokens: None,
        cost_usd: None,
        premium_requests: None,
    })
}

/// The HTTP status an exit code stands for: Gemini exits with an API failure's status, which
/// the process's 8 bits keep modulo 256 (401 exits 145).
pub fn http_status_of_exit(code: Option<i32>) -> Option<u16> {
    let code = code?;
    (144..=255)
        .contains(&code)
        .then(|| u16::try_from(code + 256).ok())
        .flatten()
}

/// The API's error body quoted in a message (`[API Error: {"error":{…}}]`), if any.
fn quoted_body(message: &str) -> Option<Value> {
    let start = message.find('{')?;
    let end = message.rfind('}')?;
    let body: Value = serde_json::from_str(message.get(start..=end)?).ok()?;
    body.get("error").filter(|e| e.is_object()).cloned()
}

/// What the Gemini API says of a 429 (`RESOURCE_EXHAUSTED`) when Gemini quotes only its message.
const EXHAUSTED: [&str; 2] = ["Resource has been exhausted", "exceeded your current quota"];

/// Why the run failed: the quoted API body's `code`, the exit code's HTTP status, a 429's own
/// words, the error's type, then the text.
pub fn failure_reason(error: &Value, message: &str, exit_code: Option<i32>) -> FailureReason {
    let body = quoted_body(message);
    let status = body
        .as_ref()
        .and_then(|b| b.get("code").and_then(Value::as_u64))
        .and_then(|c| u16::try_from(c).ok())
        .or_else(|| http_status_of_exit(exit_code))
        .or_else(|| EXHAUSTED.iter().any(|w| message.contains(w)).then_some(429));
    let mut codes: Vec<&str> = Vec::new();
    if let Some(kind) = error.get("type").and_then(Value::as_str) {
        codes.push(kind);
    }
    FailureReason::classify(codes, status, message, None)
}

/// Reads Gemini's event stream.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut text = String::new();
    let mut result: Option<Value> = None;
    for line in raw.stdout.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = serde_json::from_slice(line).map_err(|_| OutputError::Envelope {
            reason: "stdout has a line that is not JSON".into(),
        })?;
        let Some(kind) = value.get("type").and_then(Value::as_str) else {
            return Err(OutputError::Envelope {
                reason: "an event without a type".into(),
            });
        };
        match kind {
            "message" if value.get("role").and_then(Value::as_str) == Some("assistant") => {
                let Some(content) = value.get("content").and_then(Value::as_str) else {
                    return Err(OutputError::Envelope {
                        reason: "an assistant message without content".into(),
                    });
                };
                if value.get("delta").and_then(Value::as_bool) != Some(true) {
                    text.clear();
                }
                text.push_str(content);
            }
            // The answer is what the model says after its last tool call.
            "tool_use" | "tool_result" => text.clear(),
            "result" => {
                if result.is_some() {
                    return Err(OutputError::Envelope {
                        reason: "more than one result event".into(),
                    });
                }
                result = Some(value);
            }
            _ => {}
        }
    }
    let Some(result) = result else {
        if raw.stdout.trim_ascii().is_empty() {
            return crate::common::no_stdout(raw);
        }
        return Err(OutputError::Envelope {
            reason: "Gemini ended without a result event".into(),
        });
    };
    let usage = usage(result.get("stats"));
    match result.get("status").and_then(Value::as_str) {
        Some("success") => {}
        Some("error") => {
            let error = result.get("error").cloned().unwrap_or(Value::Null);
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
                .map_or_else(|| "Gemini reported an error".to_owned(), str::to_owned);
            let reason = failure_reason(&error, &message, raw.exit_code);
            let message: String = message.chars().take(1024).collect();
            return Ok(Observation::AgentFailure {
                message,
                usage,
                reason,
            });
        }
        _ => {
            return Err(OutputError::Envelope {
                reason: "a result event without a known status".into(),
            });
        }
    }
    if let Some(code) = raw.exit_code.filter(|c| *c != 0) {
        return Ok(crate::common::failure_from_text(
            format!("Gemini reported success but exited with code {code}"),
            usage,
        ));
    }
    if text.trim().is_empty() {
        return Err(OutputError::Missing);
    }
    Ok(Observation::Answer {
        payload: text.into_bytes(),
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_name_the_http_status() {
        assert_eq!(http_status_of_exit(Some(145)), Some(401));
        assert_eq!(http_status_of_exit(Some(173)), Some(429));
        assert_eq!(http_status_of_exit(Some(244)), Some(500));
        // 53: Gemini's own turn limit.
        assert_eq!(http_status_of_exit(Some(53)), None);
        assert_eq!(http_status_of_exit(Some(1)), None);
        assert_eq!(http_status_of_exit(None), None);
    }
}
