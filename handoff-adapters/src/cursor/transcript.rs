//! Cursor agent transcripts (read only).
//!
//! Newer Cursor agents write a plain transcript of each chat beside their SQLite chat store:
//! `~/.cursor/projects/<encoded cwd>/agent-transcripts/<id>/<id>.jsonl` (some builds put
//! `<id>.jsonl` directly in `agent-transcripts/`), with subagents' transcripts under a
//! `subagents/` folder, which are not the chat. The encoded cwd is the absolute path without
//! its leading `/`, every `/` a `-`; builds differ on other characters (some turn every
//! character but letters, digits and `-` into `-`), so both forms are looked for.
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

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, MAX_TOOL_TEXT_BYTES, Message, Part, Role, SessionQuery, SessionRef, StoreEnv,
    TRANSCRIPT_SCHEMA, Transcript, TranscriptError, TranscriptSource, bounded,
};
use serde_json::Value;

/// Most transcript folders looked at when finding a chat by id or the newest one.
const MAX_SCAN_ENTRIES: usize = 100_000;

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

// ---------------------------------------------------------------------------------------------
// Finding a transcript

/// `~/.cursor/projects`.
fn projects_root(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    store
        .home()
        .map(|h| h.join(".cursor/projects"))
        .ok_or_else(|| {
            TranscriptError::Unsupported(
                "cannot find Cursor's transcripts: HOME is not set".to_owned(),
            )
        })
}

/// The folder names a project at `cwd` may have under `~/.cursor/projects`.
pub(crate) fn encoded_cwds(cwd: &Utf8Path) -> Vec<String> {
    let path = cwd.as_str().trim_start_matches('/');
    let slashes = path.replace('/', "-");
    let strict: String = path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut out = vec![slashes];
    if !out.contains(&strict) {
        out.push(strict);
    }
    out
}

/// The transcripts in one `agent-transcripts` folder: `<id>/<id>.jsonl` and `<id>.jsonl`
/// (never inside `subagents/`), with their modification times.
fn transcripts_in(dir: &Utf8Path, budget: &mut usize) -> Vec<(std::time::SystemTime, Utf8PathBuf)> {
    let mut out = Vec::new();
    for entry in dir.read_dir_utf8().into_iter().flatten().flatten() {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let name = entry.file_name().to_owned();
        if name == "subagents" {
            continue;
        }
        let path = entry.path().to_owned();
        let file = if path.is_dir() {
            path.join(format!("{name}.jsonl"))
        } else if name.ends_with(".jsonl") {
            path
        } else {
            continue;
        };
        if let Ok(meta) = std::fs::metadata(&file)
            && meta.is_file()
        {
            out.push((meta.modified().unwrap_or(std::time::UNIX_EPOCH), file));
        }
    }
    out
}

/// Finds a transcript: by id in any project, or the newest one of the project at `cwd`.
pub(crate) fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    let root = projects_root(store)?;
    let mut budget = MAX_SCAN_ENTRIES;
    match query {
        SessionQuery::Latest { cwd } => {
            let newest = encoded_cwds(cwd)
                .into_iter()
                .flat_map(|e| transcripts_in(&root.join(e).join("agent-transcripts"), &mut budget))
                .max_by(|a, b| a.0.cmp(&b.0));
            Ok(newest.map(|(_, path)| SessionRef {
                provider: AgentId::CURSOR,
                session_id: path.file_stem().unwrap_or_default().to_owned(),
                path,
                cwd: Some(cwd.clone()),
            }))
        }
        SessionQuery::Id(id) => {
            if id.is_empty()
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Ok(None);
            }
            for project in root.read_dir_utf8().into_iter().flatten().flatten() {
                let dir = project.path().join("agent-transcripts");
                for file in [
                    dir.join(id).join(format!("{id}.jsonl")),
                    dir.join(format!("{id}.jsonl")),
                ] {
                    if file.is_file() {
                        return Ok(Some(SessionRef {
                            provider: AgentId::CURSOR,
                            session_id: id.clone(),
                            path: file,
                            cwd: None,
                        }));
                    }
                }
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    break;
                }
            }
            Ok(None)
        }
    }
}
