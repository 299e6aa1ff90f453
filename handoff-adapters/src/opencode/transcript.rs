//! OpenCode sessions as `opencode export` prints them, read into a neutral transcript.
//!
//! Text parts are text (OpenCode's `synthetic` and `ignored` parts, which it
//! writes itself, are left out); `reasoning` parts are the reasoning OpenCode shows its user
//! (the model's summaries or thinking text, `--thinking`), read as reasoning summaries, while
//! their `metadata` (encrypted or signed reasoning) is never read; a `tool` part is a bounded
//! call and, when it finished, a result in a user-role message of its own (as the Claude Code
//! and Codex readers shape them), the assistant's turn continuing in a new message; `file`
//! parts are a one-line mention; step, snapshot, patch, compaction, retry and agent parts are
//! bookkeeping and skipped, and compaction summaries (assistant messages with `summary`) are
//! skipped as the messages they summarise are still there.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, MAX_TOOL_TEXT_BYTES, Message, Part, Role, TRANSCRIPT_SCHEMA, Transcript,
    TranscriptError, TranscriptSource, bounded,
};
use serde_json::Value;

/// Largest export read, in bytes.
pub(super) const MAX_EXPORT_BYTES: u64 = 512 * 1024 * 1024;

/// Reads the export at `path`. Never writes.
pub(crate) fn read(path: &Utf8Path) -> Result<Transcript, TranscriptError> {
    let size = std::fs::metadata(path)
        .map_err(|e| TranscriptError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        })?
        .len();
    if size > MAX_EXPORT_BYTES {
        return Err(TranscriptError::Malformed {
            path: path.to_owned(),
            message: format!("the export is {size} bytes, more than handoff reads"),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| TranscriptError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    parse(path, &bytes)
}

/// Parses the bytes of an export.
pub(crate) fn parse(path: &Utf8Path, bytes: &[u8]) -> Result<Transcript, TranscriptError> {
    let malformed = |message: &str| TranscriptError::Malformed {
        path: path.to_owned(),
        message: message.to_owned(),
    };
    // Anything printed before the document (a notice on stdout) is skipped.
    let start = bytes
        .iter()
        .position(|b| *b == b'{')
        .ok_or_else(|| malformed("no JSON object in the file"))?;
    let doc: Value = serde_json::from_slice(&bytes[start..]).map_err(|e| {
        malformed(&format!(
            "not an OpenCode export (cut off or not JSON: {e})"
        ))
    })?;
    let info = doc
        .get("info")
        .filter(|i| i.is_object())
        .ok_or_else(|| malformed("no session `info` in the export"))?;
    let session_id = str_field(info, "id")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| malformed("the session has no id"))?;
    let cwd = str_field(info, "directory")
        .filter(|d| !d.is_empty())
        .map(Utf8PathBuf::from);
    let mut reader = Reader::default();
    match doc.get("messages") {
        Some(Value::Array(messages)) => {
            for m in messages {
                reader.message(m);
            }
        }
        _ => reader
            .warnings
            .push("the export has no message list".to_owned()),
    }
    let mut warnings = reader.warnings;
    for (what, n) in &reader.unknown {
        warnings.push(format!("skipped {n} {what}"));
    }
    Ok(Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::OPENCODE,
            session_id,
            path: path.to_owned(),
            cwd,
        },
        messages: reader.messages,
        warnings,
    })
}

#[derive(Default)]
struct Reader {
    messages: Vec<Message>,
    warnings: Vec<String>,
    unknown: BTreeMap<String, usize>,
}

impl Reader {
    fn count(&mut self, what: String) {
        *self.unknown.entry(what).or_default() += 1;
    }

    fn message(&mut self, m: &Value) {
        let Some(info) = m.get("info").filter(|i| i.is_object()) else {
            self.count("message(s) without info".to_owned());
            return;
        };
        let id = str_field(info, "id");
        let at = info
            .pointer("/time/created")
            .and_then(Value::as_i64)
            .and_then(iso_from_ms);
        let parts: &[Value] = m
            .get("parts")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        match info.get("role").and_then(Value::as_str) {
            Some("user") => {
                let parts: Vec<Part> = parts.iter().filter_map(|p| self.user_part(p)).collect();
                if !parts.is_empty() {
                    self.messages.push(Message {
                        role: Role::User,
                        provider: AgentId::OPENCODE,
                        model: None,
                        at,
                        source_id: id,
                        parts,
                    });
                }
            }
            Some("assistant") => {
                if info.get("summary").and_then(Value::as_bool) == Some(true) {
                    return;
                }
                let model = match (str_field(info, "providerID"), str_field(info, "modelID")) {
                    (Some(p), Some(m)) if !p.is_empty() => Some(format!("{p}/{m}")),
                    (_, Some(m)) => Some(m),
                    _ => None,
                };
                self.assistant(parts, model, at, id);
            }
            Some(other) => self.count(format!("message(s) of role '{}'", clip(other))),
            None => self.count("message(s) without a role".to_owned()),
        }
    }

    fn user_part(&mut self, p: &Value) -> Option<Part> {
        if skipped_text(p) {
            return None;
        }
        match p.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => str_field(p, "text")
                .filter(|t| !t.is_empty())
                .map(|text| Part::Text { text }),
            "file" => Some(Part::Text {
                text: file_mention(p),
            }),
            "subtask" => Some(Part::Text {
                text: format!(
                    "[subtask {}] {}",
                    str_field(p, "agent").unwrap_or_default(),
                    str_field(p, "prompt").unwrap_or_default()
                ),
            }),
            kind if BOOKKEEPING.contains(&kind) => None,
            other => {
                self.count(format!("part(s) of type '{}'", clip(other)));
                None
            }
        }
    }

    fn assistant(
        &mut self,
        parts: &[Value],
        model: Option<String>,
        at: Option<String>,
        id: Option<String>,
    ) {
        let mut open: Vec<Part> = Vec::new();
        let flush = |reader: &mut Reader, open: &mut Vec<Part>| {
            if !open.is_empty() {
                reader.messages.push(Message {
                    role: Role::Assistant,
                    provider: AgentId::OPENCODE,
                    model: model.clone(),
                    at: at.clone(),
                    source_id: id.clone(),
                    parts: std::mem::take(open),
                });
            }
        };
        for p in parts {
            if skipped_text(p) {
                continue;
            }
            match p.get("type").and_then(Value::as_str).unwrap_or("") {
                "text" => {
                    if let Some(text) = str_field(p, "text").filter(|t| !t.is_empty()) {
                        open.push(Part::Text { text });
                    }
                }
                "reasoning" => {
                    if let Some(text) = str_field(p, "text").filter(|t| !t.trim().is_empty()) {
                        open.push(Part::Reasoning { text });
                    }
                }
                "file" => open.push(Part::Text {
                    text: file_mention(p),
                }),
                "tool" => {
                    let call_id = str_field(p, "callID");
                    let state = p.get("state").unwrap_or(&Value::Null);
                    let input = match state.get("input") {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Null) | None => String::new(),
                        Some(v) => v.to_string(),
                    };
                    open.push(Part::ToolCall {
                        name: str_field(p, "tool").unwrap_or_default(),
                        id: call_id.clone(),
                        input: bounded(&input, MAX_TOOL_TEXT_BYTES),
                    });
                    let result = match state.get("status").and_then(Value::as_str) {
                        Some("completed") => Some((text_of(state.get("output")), false)),
                        Some("error") => Some((text_of(state.get("error")), true)),
                        _ => None,
                    };
                    if let Some((output, is_error)) = result {
                        flush(self, &mut open);
                        self.messages.push(Message {
                            role: Role::User,
                            provider: AgentId::OPENCODE,
                            model: None,
                            at: state
                                .pointer("/time/end")
                                .and_then(Value::as_i64)
                                .and_then(iso_from_ms)
                                .or_else(|| at.clone()),
                            source_id: None,
                            parts: vec![Part::ToolResult {
                                id: call_id,
                                output: bounded(&output, MAX_TOOL_TEXT_BYTES),
                                is_error,
                            }],
                        });
                    }
                }
                kind if BOOKKEEPING.contains(&kind) => {}
                other => self.count(format!("part(s) of type '{}'", clip(other))),
            }
        }
        flush(self, &mut open);
    }
}

/// Part types that are OpenCode's bookkeeping, not conversation.
const BOOKKEEPING: &[&str] = &[
    "step-start",
    "step-finish",
    "snapshot",
    "patch",
    "compaction",
    "retry",
    "agent",
];

/// Text OpenCode wrote itself (`synthetic`) or keeps from the model (`ignored`).
fn skipped_text(p: &Value) -> bool {
    p.get("synthetic").and_then(Value::as_bool) == Some(true)
        || p.get("ignored").and_then(Value::as_bool) == Some(true)
}

fn file_mention(p: &Value) -> String {
    let name = str_field(p, "filename")
        .or_else(|| str_field(p, "url").filter(|u| !u.starts_with("data:")))
        .unwrap_or_else(|| "a file".to_owned());
    match str_field(p, "mime") {
        Some(mime) => format!("[file {name} ({mime})]"),
        None => format!("[file {name}]"),
    }
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A name from the file, kept short for a warning.
pub(super) fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

/// `ms` since the epoch as ISO-8601 UTC with milliseconds; `None` out of range.
pub(crate) fn iso_from_ms(ms: i64) -> Option<String> {
    handoff_core::iso_from_unix_ms(ms)
}
