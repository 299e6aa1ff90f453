//! Claude Code sessions: `~/.claude/projects/<slug>/<session-id>.jsonl`.
//!
//! Each line is one record. Conversation records (`user`, `assistant`, and others such as
//! `attachment` or `system`) carry `uuid` and `parentUuid` and form a tree: an edited or rewound
//! prompt starts a new branch. The active branch is the chain from the last conversation message
//! in the file back to the root. Sub-agent (`isSidechain`) and injected (`isMeta`) lines are not
//! part of the dialogue; `thinking` blocks are hidden reasoning and never read. Streaming can
//! write one assistant message (one `message.id`) as several lines: they are merged back.
//!
//! A line handoff carried in from another CLI (it has a `handoff` object naming its provider
//! and model) is read as the message it was: its tagged text blocks become the tool calls,
//! results and reasoning they stand for.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, MAX_TOOL_TEXT_BYTES, Message, Part, Role, TRANSCRIPT_SCHEMA, Transcript,
    TranscriptError, TranscriptSource, bounded,
};
use serde_json::Value;

use crate::store::{MARKER, read_marker, text_part as carried_part};

/// Most warnings kept; the rest are counted in one last warning.
const MAX_WARNINGS: usize = 20;

/// One record that takes part in the conversation tree.
struct Node {
    parent: Option<String>,
    /// Its dialogue message, when it is one (not sidechain, not meta).
    message: Option<Line>,
}

/// A `user` or `assistant` line, already read into parts.
struct Line {
    role: Role,
    /// `message.id` (assistant lines), to merge streamed pieces.
    message_id: Option<String>,
    model: Option<String>,
    /// The provider that wrote it: Claude Code, or the one a carried line names.
    provider: AgentId,
    at: Option<String>,
    uuid: String,
    cwd: Option<String>,
    parts: Vec<Part>,
}

#[derive(Default)]
struct Warnings {
    kept: Vec<String>,
    dropped: usize,
}

impl Warnings {
    fn push(&mut self, w: String) {
        if self.kept.len() < MAX_WARNINGS {
            self.kept.push(w);
        } else {
            self.dropped += 1;
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.dropped > 0 {
            self.kept
                .push(format!("{} more warning(s) left out", self.dropped));
        }
        self.kept
    }
}

/// Reads the Claude Code session at `path` (never writes to it).
pub(crate) fn read(path: &Utf8Path) -> Result<Transcript, TranscriptError> {
    let io = |e: std::io::Error| TranscriptError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut reader = BufReader::new(file);

    let mut warnings = Warnings::default();
    let mut nodes: HashMap<String, Node> = HashMap::new();
    let mut leaf: Option<String> = None;
    let mut session_id: Option<String> = None;
    let mut unknown_blocks: HashSet<String> = HashSet::new();
    let mut buf = Vec::new();
    let mut number = 0usize;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            break;
        }
        number += 1;
        let complete = buf.ends_with(b"\n");
        let text = buf.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let record: Value = match serde_json::from_slice(text) {
            Ok(v) => v,
            Err(e) if !complete => {
                warnings.push(format!("line {number} (the last) is cut off: {e}"));
                continue;
            }
            Err(e) => {
                warnings.push(format!("line {number} is not JSON: {e}"));
                continue;
            }
        };
        let Some(record) = record.as_object() else {
            warnings.push(format!("line {number} is not a JSON object"));
            continue;
        };
        if session_id.is_none() {
            session_id = str_field(record, "sessionId");
        }
        let Some(uuid) = str_field(record, "uuid") else {
            // Queue operations, summaries, titles, modes: not part of the dialogue.
            continue;
        };
        let kind = record.get("type").and_then(Value::as_str).unwrap_or("");
        let role = match kind {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        };
        let flag = |name: &str| record.get(name).and_then(Value::as_bool) == Some(true);
        let message = match role {
            Some(role) if !flag("isSidechain") && !flag("isMeta") => {
                match record.get("message").and_then(Value::as_object) {
                    Some(m) => {
                        let carried = read_marker(record.get(MARKER));
                        let mut parts = parts(role, m.get("content"), &mut unknown_blocks);
                        let mut model = (role == Role::Assistant)
                            .then(|| str_field(m, "model"))
                            .flatten();
                        let mut provider = AgentId::CLAUDE;
                        // A line handoff carried in: its tagged text is the tool calls,
                        // results and reasoning it stands for, and it names who wrote it.
                        if let Some((by, recorded)) = carried {
                            provider = by;
                            if let Some(recorded) = recorded {
                                model = recorded;
                            }
                            parts = parts
                                .into_iter()
                                .map(|p| match p {
                                    Part::Text { text } => carried_part(text),
                                    other => other,
                                })
                                .collect();
                        }
                        Some(Line {
                            role,
                            message_id: str_field(m, "id"),
                            model,
                            provider,
                            at: str_field(record, "timestamp"),
                            uuid: uuid.clone(),
                            cwd: str_field(record, "cwd"),
                            parts,
                        })
                    }
                    None => {
                        warnings.push(format!("line {number}: a {kind} line without a message"));
                        None
                    }
                }
            }
            _ => None,
        };
        if message.is_some() {
            leaf = Some(uuid.clone());
        }
        nodes.insert(
            uuid,
            Node {
                parent: str_field(record, "parentUuid"),
                message,
            },
        );
    }
    let mut unknown: Vec<String> = unknown_blocks.into_iter().collect();
    unknown.sort();
    for kind in unknown {
        warnings.push(format!("skipped content blocks of type '{kind}'"));
    }

    // The active branch: from the last message back to the root.
    let mut chain = Vec::new();
    let mut seen = HashSet::new();
    let mut next = leaf;
    while let Some(uuid) = next {
        if !seen.insert(uuid.clone()) {
            warnings.push(format!("the parent chain loops at {uuid}"));
            break;
        }
        let Some(node) = nodes.remove(&uuid) else {
            warnings.push(format!(
                "the parent chain stops at {uuid}, which is not in the file"
            ));
            break;
        };
        next = node.parent;
        if let Some(line) = node.message {
            chain.push(line);
        }
    }
    chain.reverse();

    let cwd = chain.iter().rev().find_map(|l| l.cwd.clone());
    let mut messages: Vec<Message> = Vec::new();
    let mut last_id: Option<String> = None;
    for line in chain {
        let same = line.role == Role::Assistant
            && line.message_id.is_some()
            && line.message_id == last_id
            && messages.last().is_some_and(|m| m.role == Role::Assistant);
        last_id = line.message_id.clone();
        if same {
            if let Some(m) = messages.last_mut() {
                m.parts.extend(line.parts);
                if m.model.is_none() {
                    m.model = line.model;
                }
            }
            continue;
        }
        messages.push(Message {
            role: line.role,
            provider: line.provider,
            model: line.model,
            at: line.at,
            source_id: Some(line.uuid),
            parts: line.parts,
        });
    }
    // A message of thinking only (or of unknown blocks only) says nothing a receiver can read.
    messages.retain(|m| !m.parts.is_empty());
    if messages.is_empty() {
        return Err(TranscriptError::Malformed {
            path: path.to_owned(),
            message: "no user or assistant message could be read".to_owned(),
        });
    }
    let session_id = session_id
        .or_else(|| path.file_stem().map(str::to_owned))
        .unwrap_or_default();
    Ok(Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::CLAUDE,
            session_id,
            path: path.to_owned(),
            cwd: cwd.map(Utf8PathBuf::from),
        },
        messages,
        warnings: warnings.finish(),
    })
}

fn str_field(object: &serde_json::Map<String, Value>, name: &str) -> Option<String> {
    object.get(name).and_then(Value::as_str).map(str::to_owned)
}

/// The parts of one message's `content` (a string, or a list of blocks).
fn parts(role: Role, content: Option<&Value>, unknown: &mut HashSet<String>) -> Vec<Part> {
    let blocks = match content {
        Some(Value::String(text)) => return text_part(text).into_iter().collect(),
        Some(Value::Array(blocks)) => blocks,
        _ => return Vec::new(),
    };
    let mut parts = Vec::new();
    for block in blocks {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let field = |name: &str| block.get(name).and_then(Value::as_str).map(str::to_owned);
        match kind {
            "text" => parts.extend(field("text").as_deref().and_then(text_part)),
            // Hidden reasoning is never carried.
            "thinking" | "redacted_thinking" => {}
            "tool_use" if role == Role::Assistant => parts.push(Part::ToolCall {
                name: field("name").unwrap_or_default(),
                id: field("id"),
                input: bounded(
                    &block.get("input").map(Value::to_string).unwrap_or_default(),
                    MAX_TOOL_TEXT_BYTES,
                ),
            }),
            "tool_result" => parts.push(Part::ToolResult {
                id: field("tool_use_id"),
                output: bounded(&result_text(block.get("content")), MAX_TOOL_TEXT_BYTES),
                is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
            }),
            other => {
                unknown.insert(if other.is_empty() { "?" } else { other }.to_owned());
            }
        }
    }
    parts
}

fn text_part(text: &str) -> Option<Part> {
    (!text.trim().is_empty()).then(|| Part::Text {
        text: text.to_owned(),
    })
}

/// A tool result's `content`: a string, or blocks whose text is joined (others named).
fn result_text(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                Some(other) => format!("[{other}]"),
                None => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}
