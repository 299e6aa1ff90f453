//! Cursor agent transcripts (read only).
//!
//! Each line is `{"role": "user"|"assistant", "message": {"content": [...]}}` with content
//! blocks in the Anthropic style: `text`, `tool_use {id, name, input}`, `tool_result
//! {tool_use_id, content, is_error}`; lines carry no ids, times or model. A user's text may be
//! wrapped in `<user_query>` tags, which are removed. Tool results are their own user-role
//! message (as the Claude Code reader shapes them); `thinking` blocks are hidden reasoning and
//! never read; other lines (`turn_ended` markers) are skipped.
//!
//! Handoff never writes Cursor's store: a conversation can't be carried into Cursor.

use std::collections::BTreeMap;

use camino::Utf8Path;
use handoff_core::{
    AgentId, MAX_TOOL_TEXT_BYTES, Message, Part, Role, TRANSCRIPT_SCHEMA, Transcript,
    TranscriptError, TranscriptSource, bounded,
};
use serde_json::Value;

/// Reads the transcript at `path`. Never writes.
pub(crate) fn read(path: &Utf8Path) -> Result<Transcript, TranscriptError> {
    let bytes = std::fs::read(path).map_err(|e| TranscriptError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    parse(path, &bytes)
}

/// Parses the bytes of the transcript at `path`.
pub(crate) fn parse(path: &Utf8Path, bytes: &[u8]) -> Result<Transcript, TranscriptError> {
    let lines: Vec<(usize, &[u8])> = bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let mut messages: Vec<Message> = Vec::new();
    let mut warnings = Vec::new();
    let mut bad_lines = Vec::new();
    let mut unknown: BTreeMap<String, usize> = BTreeMap::new();
    let mut read_lines = 0;
    for (i, (number, raw)) in lines.iter().enumerate() {
        let value: Value = match serde_json::from_slice(raw) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) | Err(_) if i + 1 == lines.len() && read_lines > 0 => {
                warnings.push(format!(
                    "the last line ({}) is cut off or not JSON; it was skipped",
                    number + 1
                ));
                continue;
            }
            Ok(_) | Err(_) => {
                bad_lines.push(number + 1);
                continue;
            }
        };
        read_lines += 1;
        let role = value.get("role").and_then(Value::as_str);
        let content = value
            .pointer("/message/content")
            .or_else(|| value.get("content"));
        match role {
            Some("user") => user(content, &mut messages, &mut unknown),
            Some("assistant") => assistant(content, &mut messages, &mut unknown),
            Some(other) => {
                *unknown
                    .entry(format!("line(s) of role '{}'", clip(other)))
                    .or_default() += 1
            }
            // Markers such as `turn_ended`: not conversation.
            None => {}
        }
    }
    if read_lines == 0 {
        return Err(TranscriptError::Malformed {
            path: path.to_owned(),
            message: "no line is a Cursor transcript record".to_owned(),
        });
    }
    let mut all = Vec::new();
    if !bad_lines.is_empty() {
        let list: Vec<String> = bad_lines.iter().map(ToString::to_string).collect();
        all.push(format!(
            "skipped {} line(s) that are not transcript records: {}",
            bad_lines.len(),
            list.join(", ")
        ));
    }
    for (what, n) in &unknown {
        all.push(format!("skipped {n} {what}"));
    }
    all.append(&mut warnings);
    let session_id = path
        .file_stem()
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_owned();
    Ok(Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::CURSOR,
            session_id,
            path: path.to_owned(),
            cwd: None,
        },
        messages: all_messages(messages),
        warnings: all,
    })
}

fn all_messages(messages: Vec<Message>) -> Vec<Message> {
    messages
        .into_iter()
        .filter(|m| !m.parts.is_empty())
        .collect()
}

fn message(role: Role, parts: Vec<Part>) -> Message {
    Message {
        role,
        provider: AgentId::CURSOR,
        model: None,
        at: None,
        source_id: None,
        parts,
    }
}

/// The blocks of `content` (a string is one text block).
fn blocks(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

fn user(content: Option<&Value>, out: &mut Vec<Message>, unknown: &mut BTreeMap<String, usize>) {
    let mut texts = Vec::new();
    let mut results = Vec::new();
    for b in blocks(content) {
        match b.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    let t = unwrap_query(t);
                    if !t.trim().is_empty() {
                        texts.push(Part::Text { text: t });
                    }
                }
            }
            "tool_result" => results.push(tool_result(&b)),
            "image" => texts.push(Part::Text {
                text: "[image]".to_owned(),
            }),
            other => {
                *unknown
                    .entry(format!("user block(s) of type '{}'", clip(other)))
                    .or_default() += 1
            }
        }
    }
    if !results.is_empty() {
        out.push(message(Role::User, results));
    }
    if !texts.is_empty() {
        out.push(message(Role::User, texts));
    }
}

fn assistant(
    content: Option<&Value>,
    out: &mut Vec<Message>,
    unknown: &mut BTreeMap<String, usize>,
) {
    let mut parts = Vec::new();
    for b in blocks(content) {
        match b.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => {
                if let Some(t) = b.get("text").and_then(Value::as_str)
                    && !t.trim().is_empty()
                {
                    parts.push(Part::Text { text: t.to_owned() });
                }
            }
            "tool_use" => {
                let input = match b.get("input") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(v) => v.to_string(),
                };
                parts.push(Part::ToolCall {
                    name: b
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    id: b.get("id").and_then(Value::as_str).map(str::to_owned),
                    input: bounded(&input, MAX_TOOL_TEXT_BYTES),
                });
            }
            "tool_result" => {
                // A result recorded on the assistant's line: its own user-role message.
                if !parts.is_empty() {
                    out.push(message(Role::Assistant, std::mem::take(&mut parts)));
                }
                out.push(message(Role::User, vec![tool_result(&b)]));
            }
            // Hidden reasoning is never read.
            "thinking" | "redacted_thinking" => {}
            other => {
                *unknown
                    .entry(format!("assistant block(s) of type '{}'", clip(other)))
                    .or_default() += 1
            }
        }
    }
    if !parts.is_empty() {
        out.push(message(Role::Assistant, parts));
    }
}

fn tool_result(b: &Value) -> Part {
    let output = match b.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.get("text")
                    .and_then(Value::as_str)
                    .map_or_else(|| "[non-text content]".to_owned(), str::to_owned)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    };
    Part::ToolResult {
        id: b
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        output: bounded(&output, MAX_TOOL_TEXT_BYTES),
        is_error: b.get("is_error").and_then(Value::as_bool) == Some(true),
    }
}

/// The text inside a `<user_query>…</user_query>` wrapper, else the text as it is.
fn unwrap_query(t: &str) -> String {
    let trimmed = t.trim();
    trimmed
        .strip_prefix("<user_query>")
        .and_then(|r| r.strip_suffix("</user_query>"))
        .map_or_else(|| t.to_owned(), |inner| inner.trim().to_owned())
}

fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}
