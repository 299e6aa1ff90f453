//! Codex rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, or the
//! same zstd-compressed as `.jsonl.zst`.
//!
//! Each line is `{timestamp, type, payload}`. `session_meta` names the thread (id, cwd,
//! provider); `turn_context` names the model of the turns that follow; `response_item` lines are
//! the conversation as the model saw it; `event_msg` lines repeat the same conversation for user
//! interfaces and are not read, so nothing is counted twice; `compacted` lines (a summary that
//! replaced older context) are not read either, as the items they summarise are still in the file.
//!
//! Messages: each person's prompt is one user message; consecutive items of one assistant turn
//! (text, reasoning summaries, tool calls) are one assistant message. Tool outputs are their own
//! user-role message, as the Responses API sends them back to the model and as Claude Code
//! records them, so transcripts read from either CLI have the same shape; the assistant's turn
//! then continues in a new message.
//!
//! A message handoff carried in from another CLI (it has a `handoff` object naming its
//! provider and model) is read as the message it was: its tagged text blocks become the tool
//! calls, results and reasoning they stand for, and it joins no other message.

use std::collections::BTreeMap;
use std::io::Read;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, MAX_TOOL_TEXT_BYTES, Message, Part, Role, TRANSCRIPT_SCHEMA, Transcript,
    TranscriptError, TranscriptSource, bounded,
};
use serde::Deserialize;
use serde_json::Value;

use crate::store::{MARKER, read_marker, text_part as carried_part};

/// The first bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Wrappers of the text Codex injects as user messages before the person's prompt: the
/// environment (cwd, sandbox, shell), the user's instructions and the project's AGENTS.md. They
/// are Codex's context for the model, not something the person said, and the receiver gets its
/// own.
const INJECTED_PREFIXES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions for ",
];

#[derive(Deserialize)]
struct Line {
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    payload: Value,
}

/// Reads the rollout at `path`. Never writes.
pub(crate) fn read(path: &Utf8Path) -> Result<Transcript, TranscriptError> {
    let bytes = std::fs::read(path).map_err(|e| TranscriptError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    parse(path, &bytes)
}

/// Parses the bytes of the rollout at `path` (compressed or not).
fn parse(path: &Utf8Path, bytes: &[u8]) -> Result<Transcript, TranscriptError> {
    let mut reader = Reader::default();
    let text;
    let bytes = if bytes.starts_with(&ZSTD_MAGIC) {
        text = decompress(bytes, &mut reader.warnings).map_err(|message| {
            TranscriptError::Malformed {
                path: path.to_owned(),
                message,
            }
        })?;
        &text[..]
    } else {
        bytes
    };

    let lines: Vec<(usize, &[u8])> = bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let mut read_lines = 0;
    for (i, (number, raw)) in lines.iter().enumerate() {
        match serde_json::from_slice::<Line>(raw) {
            Ok(line) => {
                read_lines += 1;
                reader.line(line);
            }
            Err(_) if i + 1 == lines.len() && read_lines > 0 => reader.warnings.push(format!(
                "the last line ({}) is cut off or not JSON; it was skipped",
                number + 1
            )),
            Err(_) => reader.bad_lines.push(number + 1),
        }
    }
    if read_lines == 0 {
        return Err(TranscriptError::Malformed {
            path: path.to_owned(),
            message: "no line is a Codex rollout record".to_owned(),
        });
    }
    reader.finish(path)
}

/// The decompressed content of one or more zstd frames. Data after a broken frame is dropped
/// with a warning; a first frame that can't be decoded at all is an error.
fn decompress(bytes: &[u8], warnings: &mut Vec<String>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let before = rest.len();
        let decoded = match ruzstd::decoding::StreamingDecoder::new(&mut rest) {
            Ok(mut decoder) => decoder
                .read_to_end(&mut out)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = decoded {
            if out.is_empty() {
                return Err(format!("not a readable zstd stream: {e}"));
            }
            warnings.push(format!(
                "the compressed stream is cut off or damaged ({e}); read what came before"
            ));
            break;
        }
        if rest.len() == before {
            break;
        }
    }
    Ok(out)
}

#[derive(Default)]
struct Reader {
    session_id: Option<String>,
    cwd: Option<Utf8PathBuf>,
    model: Option<String>,
    messages: Vec<Message>,
    /// The message that the next item of the same kind joins.
    open: Option<Message>,
    warnings: Vec<String>,
    bad_lines: Vec<usize>,
    unknown: BTreeMap<String, usize>,
}

impl Reader {
    fn line(&mut self, line: Line) {
        let at = line.timestamp;
        let p = line.payload;
        match line.kind.as_str() {
            "session_meta" => {
                // A forked thread repeats its parent's meta after its own: the first one wins.
                if self.session_id.is_none() {
                    self.session_id = str_field(&p, "id");
                    self.cwd = str_field(&p, "cwd").map(Utf8PathBuf::from);
                }
                if self.model.is_none() {
                    self.model = str_field(&p, "model");
                }
            }
            "turn_context" => {
                if let Some(model) = str_field(&p, "model") {
                    self.model = Some(model);
                }
            }
            "response_item" => self.item(p, at),
            // UI events, compaction summaries, and Codex's bookkeeping of the model's context
            // and token use: nothing of the conversation that the response items lack.
            "event_msg" | "compacted" | "world_state" | "token_usage_record" => {}
            other => *self.unknown.entry(format!("record '{other}'")).or_default() += 1,
        }
    }

    fn item(&mut self, p: Value, at: Option<String>) {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
        let id = str_field(&p, "id");
        match kind {
            "message" => {
                let role = p.get("role").and_then(Value::as_str).unwrap_or("");
                let texts: Vec<String> = p
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| str_field(c, "text"))
                    .collect();
                if let Some((provider, model)) = read_marker(p.get(MARKER))
                    && let Some(role) = match role {
                        "user" => Some(Role::User),
                        "assistant" => Some(Role::Assistant),
                        _ => None,
                    }
                {
                    // A message handoff carried in: its own message, its tagged text the
                    // tool calls, results and reasoning it stands for.
                    self.close();
                    self.messages.push(Message {
                        role,
                        provider,
                        model: match role {
                            Role::Assistant => model.unwrap_or_else(|| self.model.clone()),
                            Role::User => None,
                        },
                        at,
                        source_id: id,
                        parts: texts.into_iter().map(carried_part).collect(),
                    });
                    return;
                }
                match role {
                    "user" => {
                        let parts: Vec<Part> = texts
                            .into_iter()
                            .filter(|t| !is_injected(t))
                            .map(|text| Part::Text { text })
                            .collect();
                        if !parts.is_empty() {
                            self.close();
                            self.messages.push(Message {
                                role: Role::User,
                                provider: AgentId::CODEX,
                                model: None,
                                at,
                                source_id: id,
                                parts,
                            });
                        }
                    }
                    "assistant" => {
                        let parts = texts.into_iter().map(|text| Part::Text { text });
                        self.assistant(at, id).extend(parts);
                    }
                    // Developer and system messages are Codex's own instructions to the model
                    // (permissions, sandbox, collaboration mode), not the conversation.
                    "developer" | "system" => {}
                    other => {
                        *self
                            .unknown
                            .entry(format!("message role '{other}'"))
                            .or_default() += 1
                    }
                }
            }
            "reasoning" => {
                // Only the summaries Codex showed; `encrypted_content` and raw `content` are
                // hidden reasoning and are never read.
                let parts: Vec<Part> = p
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|s| str_field(s, "text"))
                    .filter(|t| !t.trim().is_empty())
                    .map(|text| Part::Reasoning { text })
                    .collect();
                if !parts.is_empty() {
                    self.assistant(at, id).extend(parts);
                }
            }
            "function_call" | "custom_tool_call" => {
                let name = str_field(&p, "name").unwrap_or_default();
                let input = match p.get("arguments").or_else(|| p.get("input")) {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                let call = Part::ToolCall {
                    name,
                    id: str_field(&p, "call_id").or(id.clone()),
                    input: bounded(&input, MAX_TOOL_TEXT_BYTES),
                };
                self.assistant(at, id).push(call);
            }
            "local_shell_call" | "web_search_call" => {
                let name = if kind == "local_shell_call" {
                    "local_shell"
                } else {
                    "web_search"
                };
                let input = p.get("action").map(Value::to_string).unwrap_or_default();
                let call = Part::ToolCall {
                    name: name.to_owned(),
                    id: str_field(&p, "call_id").or(id.clone()),
                    input: bounded(&input, MAX_TOOL_TEXT_BYTES),
                };
                self.assistant(at, id).push(call);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let (output, is_error) = tool_output(p.get("output"));
                let result = Part::ToolResult {
                    id: str_field(&p, "call_id"),
                    output: bounded(&output, MAX_TOOL_TEXT_BYTES),
                    is_error,
                };
                self.tool_results(at).push(result);
            }
            // Codex's undo snapshots and encrypted compaction summaries: not conversation.
            "ghost_snapshot" | "compaction" | "compaction_summary" => {}
            other => {
                *self
                    .unknown
                    .entry(format!("response item '{other}'"))
                    .or_default() += 1
            }
        }
    }

    /// The open assistant message's parts, opening one if needed.
    fn assistant(&mut self, at: Option<String>, id: Option<String>) -> &mut Vec<Part> {
        self.open(Role::Assistant, at, id)
    }

    /// The open tool-output message's parts (user role), opening one if needed.
    fn tool_results(&mut self, at: Option<String>) -> &mut Vec<Part> {
        self.open(Role::User, at, None)
    }

    /// The parts of the open message of `role`; an open message of the other role is closed.
    fn open(&mut self, role: Role, at: Option<String>, id: Option<String>) -> &mut Vec<Part> {
        if self.open.as_ref().is_some_and(|m| m.role != role) {
            self.close();
        }
        let model = match role {
            Role::Assistant => self.model.clone(),
            Role::User => None,
        };
        let open = self.open.get_or_insert_with(|| Message {
            role,
            provider: AgentId::CODEX,
            model,
            at,
            source_id: id,
            parts: Vec::new(),
        });
        &mut open.parts
    }

    fn close(&mut self) {
        if let Some(m) = self.open.take() {
            self.messages.push(m);
        }
    }

    fn finish(mut self, path: &Utf8Path) -> Result<Transcript, TranscriptError> {
        self.close();
        let mut warnings = Vec::new();
        if !self.bad_lines.is_empty() {
            let list: Vec<String> = self.bad_lines.iter().map(ToString::to_string).collect();
            warnings.push(format!(
                "skipped {} line(s) that are not rollout records: {}",
                self.bad_lines.len(),
                list.join(", ")
            ));
        }
        for (what, n) in &self.unknown {
            warnings.push(format!("skipped {n} unknown {what}"));
        }
        warnings.append(&mut self.warnings);
        let Some(session_id) = self.session_id.or_else(|| id_from_file_name(path)) else {
            return Err(TranscriptError::Malformed {
                path: path.to_owned(),
                message: "no session_meta record and no thread id in the file name".to_owned(),
            });
        };
        Ok(Transcript {
            schema_version: TRANSCRIPT_SCHEMA.to_owned(),
            source: TranscriptSource {
                provider: AgentId::CODEX,
                session_id,
                path: path.to_owned(),
                cwd: self.cwd,
            },
            messages: self.messages,
            warnings,
        })
    }
}

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    INJECTED_PREFIXES.iter().any(|p| t.starts_with(p))
}

/// A tool output's text and whether it reports a failure. Codex records it as a string, as
/// `{content, success}`, or as a list of content items (text and images).
fn tool_output(output: Option<&Value>) -> (String, bool) {
    match output {
        Some(Value::String(s)) => (s.clone(), false),
        Some(Value::Array(items)) => (content_text(items), false),
        Some(Value::Object(o)) => {
            let text = match o.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(items)) => content_text(items),
                _ => Value::Object(o.clone()).to_string(),
            };
            let failed = o.get("success").and_then(Value::as_bool) == Some(false);
            (text, failed)
        }
        Some(other) => (other.to_string(), false),
        None => (String::new(), false),
    }
}

fn content_text(items: &[Value]) -> String {
    items
        .iter()
        .map(|i| str_field(i, "text").unwrap_or_else(|| "[non-text content]".to_owned()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The thread id at the end of `rollout-<time>-<thread id>.jsonl[.zst]`.
fn id_from_file_name(path: &Utf8Path) -> Option<String> {
    let name = path.file_name()?;
    let stem = name
        .strip_suffix(".jsonl.zst")
        .or_else(|| name.strip_suffix(".jsonl"))?;
    let id = stem.get(stem.len().checked_sub(36)?..)?;
    (stem.starts_with("rollout-") && id.chars().filter(|c| *c == '-').count() == 4)
        .then(|| id.to_owned())
}
