//! Reading a delegated `opencode run`: NDJSON events whose last `text` is the answer,
//! `step_finish` events carrying token counts and cost, and `error` events the CLI's own
//! failure.

use handoff_core::{Observation, OutputError, RawOutput, Usage, UsageSource};
use serde::Deserialize;
use serde_json::Value;

/// One line of `opencode run --format json`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "text")]
    Text { part: TextPart },
    #[serde(rename = "step_finish")]
    StepFinish { part: StepPart },
    #[serde(rename = "error")]
    Error { error: Option<Value> },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct TextPart {
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
struct StepPart {
    tokens: Option<Tokens>,
    cost: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct Tokens {
    input: Option<u64>,
    output: Option<u64>,
    cache: Option<CacheTokens>,
}

#[derive(Debug, Deserialize)]
struct CacheTokens {
    read: Option<u64>,
    write: Option<u64>,
}

/// Reads OpenCode's event stream.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut last_text: Option<String> = None;
    let mut usage: Option<Usage> = None;
    let mut session: Option<String> = None;
    for line in raw.stdout.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = serde_json::from_slice(line).map_err(|_| OutputError::Envelope {
            reason: "stdout has a line that is not JSON".into(),
        })?;
        match value.get("sessionID").and_then(Value::as_str) {
            Some(id) if session.as_deref().is_none_or(|s| s == id) => {
                session = Some(id.to_owned());
            }
            Some(_) => {
                return Err(OutputError::Envelope {
                    reason: "events from more than one session".into(),
                });
            }
            None => {
                return Err(OutputError::Envelope {
                    reason: "an event without a sessionID".into(),
                });
            }
        }
        let event: Event = serde_json::from_value(value).map_err(|e| OutputError::Envelope {
            reason: format!("malformed event: {e}"),
        })?;
        match event {
            Event::Text { part } => last_text = part.text,
            Event::StepFinish { part } => {
                let u = usage.get_or_insert(Usage {
                    source: UsageSource::ProviderEnvelope,
                    input_tokens: Some(0),
                    output_tokens: Some(0),
                    total_tokens: Some(0),
                    cache_read_tokens: Some(0),
                    cache_write_tokens: Some(0),
                    cost_usd: Some(0.0),
                    premium_requests: None,
                });
                let t = part.tokens.as_ref();
                let add = |a: &mut Option<u64>, b: Option<u64>| {
                    *a = Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0)))
                };
                let read = t.and_then(|t| t.cache.as_ref()).and_then(|c| c.read);
                let write = t.and_then(|t| t.cache.as_ref()).and_then(|c| c.write);
                add(
                    &mut u.input_tokens,
                    Some(
                        t.and_then(|t| t.input)
                            .unwrap_or(0)
                            .saturating_add(read.unwrap_or(0))
                            .saturating_add(write.unwrap_or(0)),
                    ),
                );
                add(&mut u.output_tokens, t.and_then(|t| t.output));
                add(&mut u.cache_read_tokens, read);
                add(&mut u.cache_write_tokens, write);
                u.total_tokens = Some(
                    u.input_tokens
                        .unwrap_or(0)
                        .saturating_add(u.output_tokens.unwrap_or(0)),
                );
                u.cost_usd = Some(u.cost_usd.unwrap_or(0.0) + part.cost.unwrap_or(0.0));
            }
            Event::Error { error } => {
                let message = error
                    .as_ref()
                    .and_then(|e| {
                        e.pointer("/data/message")
                            .or_else(|| e.get("message"))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                            .or_else(|| e.get("name").and_then(Value::as_str).map(str::to_owned))
                    })
                    .unwrap_or_else(|| "OpenCode reported an error".into());
                let reason = match &error {
                    Some(e) => crate::common::error_object_reason(e, &message),
                    None => handoff_core::FailureReason::from_text(&message),
                };
                return Ok(Observation::AgentFailure {
                    message,
                    usage,
                    reason,
                });
            }
            Event::Other => {}
        }
    }
    match last_text {
        Some(text) => Ok(Observation::Answer {
            payload: text.into_bytes(),
            usage,
        }),
        None => Err(OutputError::Missing),
    }
}
