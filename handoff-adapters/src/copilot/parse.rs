//! Reading a headless Copilot run: its JSONL events (`{type, data, id, timestamp, …}`), whose
//! last `assistant.message` without tool requests is the answer, whose `session.error` is the
//! CLI's own failure and whose closing `result` event names the session; and the usage file
//! `--usage-output-file` writes, the only place Copilot reports token counts.

use handoff_core::{Observation, OutputError, RawOutput, Usage, UsageSource};
use serde::Deserialize;
use serde_json::Value;

/// One line of `copilot --output-format json`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "assistant.message")]
    Message { data: MessageData },
    #[serde(rename = "session.error")]
    Error { data: Value },
    #[serde(rename = "result")]
    Result {
        #[serde(rename = "exitCode")]
        exit_code: Option<i64>,
        usage: Option<Value>,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct MessageData {
    content: Option<String>,
    #[serde(rename = "toolRequests", default)]
    tool_requests: Option<Vec<Value>>,
}

/// What Copilot's usage file says, summed over its models.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageReport {
    /// Input tokens, cache reads included (as the provider counted its prompt).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
    /// Premium requests (`totalPremiumRequestCost`), Copilot's billing unit.
    pub premium_requests: Option<f64>,
}

/// A non-negative count.
fn count(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Reads the usage file: `modelMetrics.<model>.usage.{inputTokens, outputTokens,
/// cacheReadTokens, cacheWriteTokens}` summed, and `totalPremiumRequestCost`. `None` when it
/// is not a JSON object with `modelMetrics`.
pub fn usage_report(bytes: &[u8]) -> Option<UsageReport> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let models = v.get("modelMetrics")?.as_object()?;
    let mut r = UsageReport {
        premium_requests: v
            .get("totalPremiumRequestCost")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0),
        ..UsageReport::default()
    };
    for m in models.values() {
        let Some(u) = m.get("usage") else { continue };
        r.input_tokens = r.input_tokens.saturating_add(count(u, "inputTokens"));
        r.output_tokens = r.output_tokens.saturating_add(count(u, "outputTokens"));
        r.cache_read_tokens = r
            .cache_read_tokens
            .saturating_add(count(u, "cacheReadTokens"));
        r.cache_write_tokens = r
            .cache_write_tokens
            .saturating_add(count(u, "cacheWriteTokens"));
    }
    Some(r)
}

/// Usage from the usage file, else the premium requests of the `result` event alone (no
/// tokens: Copilot prints none on stdout).
fn usage(file: Option<&[u8]>, result_usage: Option<&Value>) -> Option<Usage> {
    if let Some(r) = file.and_then(usage_report) {
        return Some(Usage {
            source: UsageSource::ProviderEnvelope,
            input_tokens: Some(r.input_tokens),
            output_tokens: Some(r.output_tokens),
            total_tokens: Some(r.input_tokens.saturating_add(r.output_tokens)),
            cache_read_tokens: Some(r.cache_read_tokens),
            cache_write_tokens: Some(r.cache_write_tokens),
            cost_usd: None,
            premium_requests: r.premium_requests,
        });
    }
    let premium = result_usage?
        .get("premiumRequests")
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)?;
    Some(Usage {
        source: UsageSource::ProviderEnvelope,
        premium_requests: Some(premium),
        ..Usage::not_observed()
    })
}

/// Reads Copilot's event stream and usage file.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut answer: Option<String> = None;
    let mut error: Option<Value> = None;
    let mut result: Option<(Option<i64>, Option<Value>)> = None;
    for line in raw.stdout.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = serde_json::from_slice(line).map_err(|_| OutputError::Envelope {
            reason: "stdout has a line that is not JSON".into(),
        })?;
        if !value.get("type").is_some_and(Value::is_string) {
            return Err(OutputError::Envelope {
                reason: "an event without a type".into(),
            });
        }
        let event: Event = serde_json::from_value(value).map_err(|e| OutputError::Envelope {
            reason: format!("malformed event: {e}"),
        })?;
        match event {
            Event::Message { data } => {
                let tools = data.tool_requests.as_ref().is_some_and(|t| !t.is_empty());
                match data.content {
                    Some(text) if !tools && !text.trim().is_empty() => answer = Some(text),
                    _ => {}
                }
            }
            Event::Error { data } => error = Some(data),
            Event::Result { exit_code, usage } => {
                if result.is_some() {
                    return Err(OutputError::Envelope {
                        reason: "more than one result event".into(),
                    });
                }
                result = Some((exit_code, usage));
            }
            Event::Other => {}
        }
    }
    let result_usage = result.as_ref().and_then(|(_, u)| u.as_ref());
    let usage = usage(raw.answer_file.as_deref(), result_usage);
    if let Some(data) = error {
        let message = data
            .get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty())
            .map_or_else(|| "Copilot reported an error".to_owned(), str::to_owned);
        let message: String = message.chars().take(1024).collect();
        let reason = crate::common::error_object_reason(&data, &message);
        return Ok(Observation::AgentFailure {
            message,
            usage,
            reason,
        });
    }
    let Some((exit_code, _)) = result else {
        if raw.stdout.trim_ascii().is_empty() {
            return crate::common::no_stdout(raw);
        }
        // The stream ended before its result event: the run was cut short.
        return Err(OutputError::Envelope {
            reason: "Copilot ended without a result event".into(),
        });
    };
    if let Some(code) = exit_code.filter(|c| *c != 0) {
        return Ok(crate::common::failure_from_text(
            format!("Copilot's result event reports exit code {code}"),
            usage,
        ));
    }
    match answer {
        Some(text) => Ok(Observation::Answer {
            payload: text.into_bytes(),
            usage,
        }),
        None => Err(OutputError::Missing),
    }
}
