//! Reading a delegated `codex exec` run: its `--json` events give usage and failures; the answer
//! is the schema-constrained last message it writes to a file.

use handoff_core::{Observation, OutputError, RawOutput, Usage, UsageSource};
use serde::Deserialize;

/// One line of `codex exec --json`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "turn.completed")]
    TurnCompleted { usage: Option<CodexUsage> },
    #[serde(rename = "turn.failed")]
    TurnFailed { error: Option<ErrorBody> },
    #[serde(rename = "error")]
    Error { message: Option<String> },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: Item },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
struct CodexUsage {
    input_tokens: Option<u64>,
    cached_input_tokens: Option<u64>,
    cache_write_input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

/// Reads Codex's event stream and answer file.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let mut usage: Option<Usage> = None;
    let mut failure: Option<String> = None;
    let mut last_error: Option<String> = None;
    let mut last_message: Option<String> = None;
    let mut completed = false;
    for line in raw.stdout.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // Codex prints only JSONL here; anything else is not ours to judge (the answer file is).
        let Ok(event) = serde_json::from_slice::<Event>(line) else {
            continue;
        };
        match event {
            Event::TurnCompleted { usage: u } => {
                completed = true;
                let u = u.unwrap_or_default();
                let acc = usage.get_or_insert(Usage {
                    source: UsageSource::ProviderEnvelope,
                    input_tokens: Some(0),
                    output_tokens: Some(0),
                    total_tokens: Some(0),
                    cache_read_tokens: Some(0),
                    cache_write_tokens: Some(0),
                    cost_usd: None,
                    premium_requests: None,
                });
                let add = |a: &mut Option<u64>, b: Option<u64>| {
                    *a = Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0)))
                };
                add(&mut acc.input_tokens, u.input_tokens);
                add(&mut acc.output_tokens, u.output_tokens);
                add(&mut acc.cache_read_tokens, u.cached_input_tokens);
                add(&mut acc.cache_write_tokens, u.cache_write_input_tokens);
                acc.total_tokens = Some(
                    acc.input_tokens
                        .unwrap_or(0)
                        .saturating_add(acc.output_tokens.unwrap_or(0)),
                );
            }
            Event::TurnFailed { error } => {
                failure = Some(
                    error
                        .and_then(|e| e.message)
                        .or_else(|| last_error.clone())
                        .unwrap_or_else(|| "turn failed".into()),
                );
            }
            Event::Error { message } => last_error = message,
            Event::ItemCompleted { item } if item.kind == "agent_message" => {
                last_message = item.text;
            }
            Event::ItemCompleted { .. } | Event::Other => {}
        }
    }
    if let Some(message) = failure {
        return Ok(crate::common::failure_from_text(message, usage));
    }
    if !completed && let Some(message) = last_error {
        return Ok(crate::common::failure_from_text(message, usage));
    }
    let payload = match (&raw.answer_file, last_message) {
        (Some(bytes), _) if !bytes.iter().all(u8::is_ascii_whitespace) => bytes.clone(),
        (_, Some(text)) => text.into_bytes(),
        _ => return Err(OutputError::Missing),
    };
    Ok(Observation::Answer { payload, usage })
}
