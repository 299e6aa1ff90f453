//! Reading a Grok run: its one-object JSON envelope (`structuredOutput`, else `text`) with token
//! usage and cost, an error it reported, or sandbox trouble on stderr.

use handoff_core::{Observation, OutputError, RawOutput, Usage, UsageSource};
use serde_json::Value;

use crate::common::{no_stdout, sandbox_block};

/// A non-negative integer field.
fn count(obj: &Value, key: &str) -> Option<u64> {
    obj.get(key).and_then(Value::as_u64)
}

/// Usage from Grok's envelope: input = `input_tokens` + `cache_read_input_tokens`, output =
/// `output_tokens`, cost = `total_cost_usd`. Grok's `total_tokens` includes the cache reads; an
/// envelope whose total disagrees with input + output is not trusted (as in the reference) and
/// gives no usage.
pub fn envelope_usage(envelope: &Value) -> Option<Usage> {
    let u = envelope.get("usage")?;
    let read = count(u, "cache_read_input_tokens");
    let input = count(u, "input_tokens")?.saturating_add(read.unwrap_or(0));
    let output = count(u, "output_tokens")?;
    let total = input.saturating_add(output);
    if count(u, "total_tokens").is_some_and(|t| t != total) {
        return None;
    }
    Some(Usage {
        source: UsageSource::ProviderEnvelope,
        input_tokens: Some(input),
        output_tokens: Some(output),
        total_tokens: Some(total),
        cache_read_tokens: read,
        cache_write_tokens: None,
        cost_usd: envelope
            .get("total_cost_usd")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0),
        premium_requests: None,
    })
}

/// A CLI error value as text: a string, or an object's `message`, else its JSON.
fn error_text(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    };
    let text = if text.trim().is_empty() {
        "no detail".to_owned()
    } else {
        text
    };
    text.chars().take(1024).collect()
}

/// Reads Grok's stdout: exactly one JSON value.
///
/// - A provider-output object itself (`schemaVersion` at the top) is the answer.
/// - Otherwise it must be Grok's envelope object. An `error` in it is the agent's own failure.
///   Else `structuredOutput` (an object) is the answer; else a non-blank `text` (Grok 0.2.103
///   reports `structuredOutputError` while `text` holds a valid answer, which the engine then
///   checks); else a `structuredOutputError` is the agent's own failure; else no answer.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let trimmed = raw.stdout.trim_ascii();
    if trimmed.is_empty() {
        return no_stdout(raw);
    }
    let value: Value = serde_json::from_slice(trimmed).map_err(|e| OutputError::Envelope {
        reason: format!("Grok's stdout is not exactly one JSON value: {e}"),
    })?;
    let Value::Object(obj) = &value else {
        return Err(OutputError::Envelope {
            reason: "Grok's stdout is not a JSON object".into(),
        });
    };
    if obj.contains_key("schemaVersion") {
        return Ok(Observation::Answer {
            payload: trimmed.to_vec(),
            usage: None,
        });
    }
    let usage = envelope_usage(&value);
    if let Some(err) = obj.get("error").filter(|e| !e.is_null()) {
        let message = error_text(err);
        let reason = crate::common::error_object_reason(err, &message);
        return Ok(Observation::AgentFailure {
            message,
            usage,
            reason,
        });
    }
    if let Some(v @ Value::Object(_)) = obj.get("structuredOutput") {
        return Ok(Observation::Answer {
            payload: serde_json::to_vec(v).unwrap_or_default(),
            usage,
        });
    }
    if let Some(Value::String(text)) = obj.get("text")
        && !text.trim().is_empty()
    {
        return Ok(Observation::Answer {
            payload: text.clone().into_bytes(),
            usage,
        });
    }
    if let Some(err) = obj.get("structuredOutputError").filter(|e| !e.is_null()) {
        return Ok(Observation::AgentFailure {
            message: format!("structured output failed: {}", error_text(err))
                .chars()
                .take(1024)
                .collect(),
            usage,
            reason: handoff_core::FailureReason::new(handoff_core::FailureCause::Other),
        });
    }
    Err(OutputError::Missing)
}

/// See [`sandbox_block`].
pub fn runtime_check(raw: &RawOutput) -> Option<String> {
    sandbox_block(raw, "Grok")
}
