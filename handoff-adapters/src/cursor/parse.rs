//! Reading a Cursor run: the `result` text of its JSON result envelope, or sandbox trouble on
//! stderr.

use handoff_core::{Observation, OutputError, RawOutput};
use serde_json::Value;

use crate::common::{failure_from_text, no_stdout, sandbox_block};

/// Reads Cursor's stdout: exactly one JSON result envelope. `is_error: true` or a `subtype`
/// other than `success` is the agent's own failure; otherwise `is_error` must be `false` and
/// the trimmed `result` string is the answer.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let trimmed = raw.stdout.trim_ascii();
    if trimmed.is_empty() {
        return no_stdout(raw);
    }
    let value: Value = serde_json::from_slice(trimmed).map_err(|e| OutputError::Envelope {
        reason: format!("Cursor's stdout is not exactly one JSON envelope: {e}"),
    })?;
    if value.get("type").and_then(Value::as_str) != Some("result") {
        return Err(OutputError::Envelope {
            reason: "Cursor's stdout is not a result envelope".into(),
        });
    }
    let subtype = value.get("subtype").and_then(Value::as_str);
    let is_error = value.get("is_error").and_then(Value::as_bool);
    if is_error == Some(true) || subtype.is_some_and(|s| s != "success") {
        let detail = ["error", "result", "message"]
            .iter()
            .filter_map(|k| value.get(*k))
            .map(|v| match v {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string()),
                Value::Null => String::new(),
                other => other.to_string(),
            })
            .find(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "no detail".into());
        let message = match subtype {
            Some(s) if s != "success" => format!("{s}: {detail}"),
            _ => detail,
        };
        return Ok(failure_from_text(
            message.chars().take(1024).collect(),
            None,
        ));
    }
    if subtype.is_none() || is_error.is_none() {
        return Err(OutputError::Envelope {
            reason: "Cursor's result envelope lacks subtype or is_error".into(),
        });
    }
    match value.get("result") {
        Some(Value::String(text)) => Ok(Observation::Answer {
            payload: text.trim().as_bytes().to_vec(),
            // Cursor reports no usage: the model's self-report is recorded by the engine.
            usage: None,
        }),
        _ => Err(OutputError::Envelope {
            reason: "Cursor's result envelope has no result text".into(),
        }),
    }
}

/// Signs on stderr that the sandbox was not applied although the run went on (see
/// `grok::sandbox_block`). The reference ran its regex over stdout too, where the model's own
/// answer lives, so a review that merely discussed a sandbox failure was falsely blocked; only
/// stderr is read here.
pub fn runtime_check(raw: &RawOutput) -> Option<String> {
    static DISABLED: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)sandbox.{0,200}disabled").ok());
    if let Some(reason) = sandbox_block(raw, "Cursor") {
        return Some(reason);
    }
    let stderr = String::from_utf8_lossy(&raw.stderr);
    let re = DISABLED.as_ref()?;
    stderr.lines().find(|l| re.is_match(l)).map(|l| {
        format!(
            "Cursor reported that its requested sandbox was not enforced: {}",
            l.trim()
        )
    })
}
