//! OpenCode sessions, through its `export` and `import` commands.
//!
//! OpenCode (≥ 1.2) keeps sessions in SQLite (`$XDG_DATA_HOME/opencode/opencode.db`); handoff
//! never opens that database and reaches it only through the CLI:
//!
//! - `opencode export <id>` prints the session as one JSON document, `{info, messages:[{info,
//!   parts}]}` (stdout; `Exporting session: <id>` goes to stderr). An unknown id exits 1 with
//!   `Session not found: <id>`. It works from any directory.
//! - `opencode session list --format json` lists `{id, title, updated, created, projectId,
//!   directory}` of the sessions of the *project* of the current directory (a Git repository's
//!   root commit, else `global`, which every non-Git directory shares), newest first.
//! - `opencode import <file>` (the file's path resolved from the process's directory) keeps the
//!   ids in the file and prints `Imported session: <id>`. The session is filed under the
//!   project and directory the *import runs in*, whatever the file says. Importing an id that
//!   exists already updates only that session's project and directory (it re-roots it); its
//!   messages and parts are inserted only when their ids are new, so a message id that exists
//!   in another session stays there. A message that fails OpenCode's schema (a user message
//!   needs `agent` and `model`, an assistant one `mode`, `path`, `tokens` and the rest) stops
//!   the import with exit 1 *after* the session row was written: handoff deletes that partial
//!   session (`opencode session delete <id>`; the id is its own, fresh).
//! - `opencode run --session <id>` resumes a session, imported ones included: the model is sent
//!   every earlier turn, tool calls and their results too. It must run in the session's own
//!   directory: from another directory (`--dir` or not) the turn is answered by the model but
//!   the command never ends (seen with 1.18.33). Without `--model` the session's last user
//!   message names the model, so a carried session records a real one.
//! - `--session <id> --fork` copies the whole session into a new one (its own `ses_…` id, which
//!   can't be chosen; title `<title> (fork #1)`), leaves the source untouched, and continues the
//!   copy; the copy keeps the *source's* directory and project, so it is used only when the
//!   receiver works in the source's own directory (`native_fork`). Elsewhere a copy is exported,
//!   given fresh ids and imported in the receiver's directory ([`copy`]).
//!
//! Ids are `<prefix>_` + 12 hex digits of `(ms × 4096 + counter) mod 2⁴⁸` + 14 base-62
//! characters; session ids use the bitwise complement of the number (newest sort first),
//! message and part ids the number itself (oldest first).
//!
//! Reading an export: text parts are text (OpenCode's `synthetic` and `ignored` parts, which it
//! writes itself, are left out); `reasoning` parts are the reasoning OpenCode shows its user
//! (the model's summaries or thinking text, `--thinking`), read as reasoning summaries, while
//! their `metadata` (encrypted or signed reasoning) is never read; a `tool` part is a bounded
//! call and, when it finished, a result in a user-role message of its own (as the Claude Code
//! and Codex readers shape them), the assistant's turn continuing in a new message; `file`
//! parts are a one-line mention; step, snapshot, patch, compaction, retry and agent parts are
//! bookkeeping and skipped, and compaction summaries (assistant messages with `summary`) are
//! skipped as the messages they summarise are still there.

use std::collections::BTreeMap;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, CarriedSession, CarryTarget, MAX_TOOL_TEXT_BYTES, Message, Part, Role, SessionQuery,
    SessionRef, StoreEnv, TRANSCRIPT_SCHEMA, Transcript, TranscriptError, TranscriptSource,
    bounded,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How long one OpenCode command (export, import, list, delete, debug config) may take.
pub(crate) const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// The oldest OpenCode that can take a carried session: `import`, `run --session` and
/// `run --fork` (1.2.24).
pub(crate) const MIN_RESUME_VERSION: (u64, u64, u64) = (1, 2, 24);

/// The OpenCode version written into a carried session: the release its format was checked
/// against with the real CLI.
pub(crate) const FORMAT_VERSION: &str = "1.18.33";

/// Largest export read, in bytes.
const MAX_EXPORT_BYTES: u64 = 512 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Reading

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
fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

/// `ms` since the epoch as ISO-8601 UTC with milliseconds; `None` out of range.
pub(crate) fn iso_from_ms(ms: i64) -> Option<String> {
    // Years 0000 to 9999 only.
    if !(-62_167_219_200_000..=253_402_300_799_999).contains(&ms) {
        return None;
    }
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, rest) = (in_day / 3_600_000, in_day % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, milli) = (rest / 1000, rest % 1000);
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z"
    ))
}

/// ISO-8601 UTC (`YYYY-MM-DDTHH:MM:SS[.fff…](Z|±HH:MM)`) as ms since the epoch.
pub(crate) fn ms_from_iso(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, m, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut milli = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        let frac = s.get(i..i + digits.min(3))?;
        milli = format!("{frac:0<3}").parse().ok()?;
        i += digits;
    }
    let offset_min = match b.get(i) {
        None | Some(b'Z') | Some(b'z') => 0,
        Some(b'+') | Some(b'-') => {
            let sign = if b[i] == b'-' { -1 } else { 1 };
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6).unwrap_or(0);
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    // Days from civil (proleptic Gregorian).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + m - offset_min) * 60_000 + sec * 1000 + milli)
}

// ---------------------------------------------------------------------------------------------
// Ids

/// OpenCode's base-62 alphabet.
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Makes fresh OpenCode ids, in increasing order, from a start time and a seed.
pub(crate) struct IdGen {
    ms: u64,
    counter: u64,
    seed: Vec<u8>,
    n: u64,
}

impl IdGen {
    /// Ids from `now_ms` on, their random part drawn from `seed` (a fresh UUID and the time).
    pub(crate) fn new(now_ms: u64, seed: &str) -> IdGen {
        IdGen {
            ms: now_ms,
            counter: 0,
            seed: seed.as_bytes().to_vec(),
            n: 0,
        }
    }

    fn next_number(&mut self) -> u64 {
        self.counter += 1;
        if self.counter >= 4096 {
            self.ms += 1;
            self.counter = 1;
        }
        (self.ms.wrapping_mul(4096).wrapping_add(self.counter)) & 0xFFFF_FFFF_FFFF
    }

    fn random(&mut self) -> String {
        self.n += 1;
        let mut h = Sha256::new();
        h.update(&self.seed);
        h.update(self.n.to_be_bytes());
        h.finalize()
            .iter()
            .take(14)
            .map(|b| char::from(BASE62[usize::from(*b) % 62]))
            .collect()
    }

    /// A session id (`ses_`, descending).
    pub(crate) fn session(&mut self) -> String {
        let v = !self.next_number() & 0xFFFF_FFFF_FFFF;
        format!("ses_{v:012x}{}", self.random())
    }

    /// A message (`msg_`) or part (`prt_`) id, ascending.
    pub(crate) fn ascending(&mut self, prefix: &str) -> String {
        let v = self.next_number();
        format!("{prefix}_{v:012x}{}", self.random())
    }
}

/// Whether `id` has the shape of an OpenCode session id (and is safe as an argument).
pub(crate) fn is_session_id(id: &str) -> bool {
    id.strip_prefix("ses_").is_some_and(|rest| {
        !rest.is_empty() && rest.len() <= 64 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

// ---------------------------------------------------------------------------------------------
// Writing a neutral transcript

/// A neutral part as the text a carried session holds (tool calls, results and reasoning are
/// tagged text: OpenCode's tool parts can't be forged safely for another vendor's tools).
fn part_text(p: &Part) -> String {
    match p {
        Part::Text { text } => text.clone(),
        Part::ToolCall { name, input, .. } => format!("[tool call {name}] {input}"),
        Part::ToolResult {
            output, is_error, ..
        } => {
            let tag = if *is_error {
                "tool error"
            } else {
                "tool result"
            };
            format!("[{tag}] {output}")
        }
        Part::Reasoning { text } => format!("[reasoning summary] {text}"),
    }
}

/// `provider/model` split in two.
fn split_model(model: &str) -> Option<(String, String)> {
    let (p, m) = model.split_once('/')?;
    (!p.is_empty() && !m.is_empty()).then(|| (p.to_owned(), m.to_owned()))
}

/// The export document of a new session holding `transcript`, filed at `cwd`; user messages
/// name `model` (`provider/model`), the one OpenCode then continues with. Pure.
pub(crate) fn build_export(
    transcript: &Transcript,
    cwd: &Utf8Path,
    model: (&str, &str),
    ids: &mut IdGen,
    now: u64,
) -> (String, Value) {
    let session_id = ids.session();
    let mut messages: Vec<Value> = Vec::new();
    let mut last_user: Option<String> = None;
    let mut time = 0u64;
    let mut first_time: Option<u64> = None;
    let mut stamp = |at: Option<&str>| -> u64 {
        // Times never go back, so OpenCode's order by time is the transcript's.
        // A message without a time follows the one before it.
        let t = at
            .and_then(ms_from_iso)
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(if time == 0 { now } else { time + 1 });
        time = t.max(time + 1);
        time
    };
    let source = &transcript.source;
    for m in &transcript.messages {
        let texts: Vec<String> = m
            .parts
            .iter()
            .map(part_text)
            .filter(|t| !t.is_empty())
            .collect();
        if texts.is_empty() {
            continue;
        }
        if m.role == Role::Assistant && last_user.is_none() {
            // OpenCode's assistant messages answer a user message.
            let t = stamp(m.at.as_deref());
            let opening = format!(
                "(The conversation carried from {} session {} begins with the agent's message below.)",
                source.provider, source.session_id
            );
            let id = ids.ascending("msg");
            messages.push(user_message(&session_id, &id, t, model, &[opening], ids));
            last_user = Some(id);
        }
        let t = stamp(m.at.as_deref());
        first_time.get_or_insert(t);
        let id = ids.ascending("msg");
        match m.role {
            Role::User => {
                messages.push(user_message(&session_id, &id, t, model, &texts, ids));
                last_user = Some(id);
            }
            Role::Assistant => {
                let (provider_id, model_id) =
                    m.model.as_deref().and_then(split_model).unwrap_or_else(|| {
                        (
                            m.provider.to_string(),
                            m.model.clone().unwrap_or_else(|| "unknown".to_owned()),
                        )
                    });
                let info = json!({
                    "id": id,
                    "sessionID": session_id,
                    "role": "assistant",
                    "time": {"created": t, "completed": t},
                    "parentID": last_user.clone().unwrap_or_default(),
                    "modelID": model_id,
                    "providerID": provider_id,
                    "mode": "build",
                    "agent": "build",
                    "path": {"cwd": cwd.as_str(), "root": cwd.as_str()},
                    "cost": 0,
                    "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
                    "finish": "stop",
                });
                let parts = text_parts(&session_id, &id, &texts, Some(t), ids);
                messages.push(json!({"info": info, "parts": parts}));
            }
        }
    }
    let created = first_time.unwrap_or(now).min(now);
    let title = format!(
        "Carried from {} session {}",
        source.provider,
        source.session_id.chars().take(40).collect::<String>()
    );
    let doc = json!({
        "info": {
            "id": session_id,
            "slug": "handoff-carried",
            "projectID": "global",
            "directory": cwd.as_str(),
            "title": title,
            "version": FORMAT_VERSION,
            "time": {"created": created, "updated": now.max(created)},
        },
        "messages": messages,
    });
    (session_id, doc)
}

/// Text parts of message `id`, fresh ids in order; assistant parts carry their time.
fn text_parts(
    session_id: &str,
    id: &str,
    texts: &[String],
    time: Option<u64>,
    ids: &mut IdGen,
) -> Vec<Value> {
    texts
        .iter()
        .map(|text| {
            let mut part = json!({
                "id": ids.ascending("prt"),
                "sessionID": session_id,
                "messageID": id,
                "type": "text",
                "text": text,
            });
            if let Some(t) = time {
                part["time"] = json!({"start": t, "end": t});
            }
            part
        })
        .collect()
}

fn user_message(
    session_id: &str,
    id: &str,
    t: u64,
    model: (&str, &str),
    texts: &[String],
    ids: &mut IdGen,
) -> Value {
    let parts = text_parts(session_id, id, texts, None, ids);
    json!({
        "info": {
            "id": id,
            "sessionID": session_id,
            "role": "user",
            "time": {"created": t},
            "agent": "build",
            "model": {"providerID": model.0, "modelID": model.1},
        },
        "parts": parts,
    })
}

/// A copy of the export `doc` as a new session: fresh ids for the session, its messages and
/// parts (parents and references remapped), filed at `cwd` (the recorded `path.cwd`/`root` of
/// each message re-rooted from the source's directory). Pure.
pub(crate) fn recopy(doc: &Value, cwd: &Utf8Path, ids: &mut IdGen) -> Option<(String, Value)> {
    let mut doc = doc.clone();
    let session_id = ids.session();
    let old_dir = doc
        .pointer("/info/directory")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let info = doc.get_mut("info")?.as_object_mut()?;
    info.insert("id".into(), json!(session_id));
    info.insert("directory".into(), json!(cwd.as_str()));
    for key in ["parentID", "share", "revert", "path"] {
        info.remove(key);
    }
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    let messages = doc.get_mut("messages")?.as_array_mut()?;
    // New message ids first, so parents that come later still map.
    for m in messages.iter() {
        if let Some(old) = m.pointer("/info/id").and_then(Value::as_str) {
            let new = ids.ascending("msg");
            map.insert(old.to_owned(), new);
        }
    }
    let reroot = |v: &mut Value| {
        if let (Some(s), Some(old)) = (v.as_str(), old_dir.as_deref())
            && let Some(rest) = s.strip_prefix(old)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            *v = json!(format!("{cwd}{rest}"));
        }
    };
    for m in messages.iter_mut() {
        let Some(info) = m.get_mut("info").and_then(Value::as_object_mut) else {
            continue;
        };
        let new_id = info
            .get("id")
            .and_then(Value::as_str)
            .and_then(|old| map.get(old))
            .cloned();
        let Some(new_id) = new_id else { continue };
        info.insert("id".into(), json!(new_id));
        info.insert("sessionID".into(), json!(session_id));
        if let Some(parent) = info.get("parentID").and_then(Value::as_str) {
            let mapped = map.get(parent).cloned().unwrap_or_default();
            info.insert("parentID".into(), json!(mapped));
        }
        if let Some(path) = info.get_mut("path").and_then(Value::as_object_mut) {
            for key in ["cwd", "root"] {
                if let Some(v) = path.get_mut(key) {
                    reroot(v);
                }
            }
        }
        if let Some(parts) = m.get_mut("parts").and_then(Value::as_array_mut) {
            for p in parts.iter_mut() {
                if let Some(p) = p.as_object_mut() {
                    p.insert("id".into(), json!(ids.ascending("prt")));
                    p.insert("sessionID".into(), json!(session_id));
                    p.insert("messageID".into(), json!(new_id));
                }
            }
        }
    }
    Some((session_id, doc))
}

// ---------------------------------------------------------------------------------------------
// The CLI

/// What one OpenCode command printed.
struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Output {
    /// The first line of its errors (colour codes removed), for a message.
    fn why(&self) -> String {
        let text = strip_ansi(&format!("{}\n{}", self.stderr, self.stdout));
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("Exporting session"))
            .map(|l| l.chars().take(300).collect())
            .unwrap_or_else(|| format!("exit {:?}", self.code))
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The environment of an OpenCode command: the store's variables, with colour, updates and
/// sharing off.
fn cli_env(store: &StoreEnv) -> BTreeMap<String, String> {
    let mut env = store.vars.clone();
    for (k, v) in [
        ("NO_COLOR", "1"),
        ("TERM", "dumb"),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ("OPENCODE_AUTO_SHARE", "false"),
    ] {
        env.insert(k.into(), v.into());
    }
    env
}

fn executable(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    store.executable.clone().ok_or_else(|| {
        TranscriptError::Unsupported(
            "OpenCode's executable is not known: its sessions are reached through it".to_owned(),
        )
    })
}

fn scratch(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    store.scratch.clone().ok_or_else(|| {
        TranscriptError::Unsupported(
            "no scratch directory to export OpenCode's session into".to_owned(),
        )
    })
}

/// Runs `opencode --pure <args…>` in `cwd` with `env` as its whole environment, stdout to
/// `stdout_file` when given, killed after [`CLI_TIMEOUT`].
async fn run(
    exe: &Utf8Path,
    args: &[&str],
    cwd: &Utf8Path,
    env: &BTreeMap<String, String>,
    stdout_file: Option<&Utf8Path>,
) -> Result<Output, TranscriptError> {
    let mut argv: Vec<String> = vec!["--pure".to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let mut expr = duct::cmd(exe.as_std_path(), &argv)
        .dir(cwd.as_std_path())
        .full_env(env)
        .stdin_null()
        .stderr_capture()
        .unchecked();
    expr = match stdout_file {
        Some(f) => expr.stdout_path(f.as_std_path()),
        None => expr.stdout_capture(),
    };
    let shown = format!("opencode {}", args.join(" "));
    let exe = exe.to_owned();
    let io = move |message: String| TranscriptError::Io {
        path: exe.clone(),
        message,
    };
    tokio::task::spawn_blocking(move || {
        let handle = expr
            .start()
            .map_err(|e| io(format!("cannot run `{shown}`: {e}")))?;
        match handle.wait_timeout(CLI_TIMEOUT) {
            Ok(Some(out)) => Ok(Output {
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
            Ok(None) => {
                let _ = handle.kill();
                Err(io(format!(
                    "`{shown}` did not finish within {}s",
                    CLI_TIMEOUT.as_secs()
                )))
            }
            Err(e) => Err(io(format!("`{shown}` failed: {e}"))),
        }
    })
    .await
    .map_err(|e| TranscriptError::Unsupported(format!("the OpenCode task failed: {e}")))?
}

/// A directory to run commands in that are not tied to one: the scratch directory.
fn neutral_dir(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    scratch(store)
}

/// Exports session `id` into the scratch directory: `Ok(None)` when OpenCode has no such
/// session.
async fn export(store: &StoreEnv, id: &str) -> Result<Option<SessionRef>, TranscriptError> {
    if !is_session_id(id) {
        return Ok(None);
    }
    let exe = executable(store)?;
    let dir = scratch(store)?;
    let file = dir.join(format!("opencode-export-{id}.json"));
    let out = run(&exe, &["export", id], &dir, &cli_env(store), Some(&file)).await?;
    if out.code != Some(0) {
        let _ = std::fs::remove_file(&file);
        if strip_ansi(&out.stderr).contains("Session not found") {
            return Ok(None);
        }
        return Err(TranscriptError::Io {
            path: exe,
            message: format!("`opencode export {id}` failed: {}", out.why()),
        });
    }
    let transcript = read(&file)?;
    Ok(Some(SessionRef {
        provider: AgentId::OPENCODE,
        session_id: transcript.source.session_id,
        path: file,
        cwd: transcript.source.cwd,
    }))
}

/// Finds a session: by id (`opencode export`), or the newest one whose directory is `cwd`
/// (`opencode session list` run in `cwd`, whose project it lists).
pub(crate) async fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    match query {
        SessionQuery::Id(id) => export(store, id).await,
        SessionQuery::Latest { cwd } => {
            if !cwd.is_dir() {
                return Ok(None);
            }
            let exe = executable(store)?;
            let out = run(
                &exe,
                &["session", "list", "--format", "json"],
                cwd,
                &cli_env(store),
                None,
            )
            .await?;
            if out.code != Some(0) {
                return Err(TranscriptError::Io {
                    path: exe,
                    message: format!("`opencode session list` failed: {}", out.why()),
                });
            }
            let Some(id) = newest_in(&out.stdout, cwd) else {
                return Ok(None);
            };
            export(store, &id).await
        }
    }
}

/// The id of the most recently updated session listed in `list` (`session list --format
/// json`) whose directory is `cwd`.
pub(crate) fn newest_in(list: &str, cwd: &Utf8Path) -> Option<String> {
    let start = list.find('[')?;
    let sessions: Vec<Value> = serde_json::from_str(list[start..].trim()).ok()?;
    let canon = |p: &Utf8Path| p.canonicalize_utf8().unwrap_or_else(|_| p.to_owned());
    let want = canon(cwd);
    sessions
        .iter()
        .filter(|s| {
            s.get("directory")
                .and_then(Value::as_str)
                .is_some_and(|d| Utf8Path::new(d) == cwd || canon(Utf8Path::new(d)) == want)
        })
        .filter_map(|s| {
            let id = s.get("id").and_then(Value::as_str)?;
            let updated = s
                .get("updated")
                .or_else(|| s.get("created"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            is_session_id(id).then(|| (updated, id.to_owned()))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, id)| id)
}

/// The model a carried session's user messages name: the target's, else the one OpenCode
/// resolves from the user's configuration in `cwd`.
async fn carried_model(
    store: &StoreEnv,
    target: &CarryTarget,
) -> Result<(String, String), TranscriptError> {
    let named = match &target.model {
        Some(m) => m.clone(),
        None => {
            let exe = executable(store)?;
            let dir = if target.cwd.is_dir() {
                target.cwd.clone()
            } else {
                neutral_dir(store)?
            };
            let out = run(&exe, &["debug", "config"], &dir, &cli_env(store), None).await?;
            let model = out
                .stdout
                .find('{')
                .and_then(|i| serde_json::from_str::<Value>(out.stdout[i..].trim()).ok())
                .and_then(|c| c.get("model").and_then(Value::as_str).map(str::to_owned));
            model.ok_or_else(|| {
                TranscriptError::Unsupported(
                    "OpenCode has no default model to record in the carried session: choose one \
                     (provider/model) for the receiver"
                        .to_owned(),
                )
            })?
        }
    };
    split_model(&named).ok_or_else(|| {
        TranscriptError::Unsupported(format!(
            "OpenCode names models provider/model; '{named}' is not one"
        ))
    })
}

/// Writes `doc` into the scratch directory and, unless a dry run, imports it in `cwd`:
/// the id OpenCode reports is the carried session's.
async fn import(
    store: &StoreEnv,
    session_id: String,
    doc: &Value,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    let dir = scratch(store)?;
    let file = dir.join(format!("opencode-import-{session_id}.json"));
    let bytes = serde_json::to_vec_pretty(doc).map_err(|e| TranscriptError::Io {
        path: file.clone(),
        message: e.to_string(),
    })?;
    write_new(&file, &bytes)?;
    let carried = CarriedSession {
        session_id: session_id.clone(),
        files: vec![file.clone()],
        bytes: bytes.len() as u64,
    };
    if target.dry_run {
        return Ok(carried);
    }
    if !target.cwd.is_dir() {
        return Err(TranscriptError::Io {
            path: target.cwd.clone(),
            message: "the receiver's directory does not exist".to_owned(),
        });
    }
    let exe = executable(store)?;
    let env = cli_env(store);
    let out = run(&exe, &["import", file.as_str()], &target.cwd, &env, None).await?;
    let reported = out
        .stdout
        .lines()
        .find_map(|l| {
            strip_ansi(l)
                .trim()
                .strip_prefix("Imported session:")
                .map(|s| s.trim().to_owned())
        })
        .filter(|id| is_session_id(id));
    match (out.code, reported) {
        (Some(0), Some(id)) => Ok(CarriedSession {
            session_id: id,
            ..carried
        }),
        _ => {
            // The session row may be written before a message failed: remove that partial
            // session (its id is the fresh one handoff made).
            let _ = run(
                &exe,
                &["session", "delete", &session_id],
                &target.cwd,
                &env,
                None,
            )
            .await;
            Err(TranscriptError::Io {
                path: exe,
                message: format!("`opencode import` failed: {}", out.why()),
            })
        }
    }
}

/// Creates `path` (never overwriting) holding `bytes`, 0600.
fn write_new(path: &Utf8Path, bytes: &[u8]) -> Result<(), TranscriptError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |e: std::io::Error| TranscriptError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)
}

/// Writes `transcript` as a new OpenCode session filed at `target.cwd`.
pub(crate) async fn write(
    store: &StoreEnv,
    transcript: &Transcript,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    let (provider, model) = carried_model(store, target).await?;
    let now = now_ms();
    let mut ids = IdGen::new(now, &format!("{}:{now}", target.session_id));
    let (session_id, doc) =
        build_export(transcript, &target.cwd, (&provider, &model), &mut ids, now);
    import(store, session_id, &doc, target).await
}

/// Copies OpenCode session `source` into a new session filed at `target.cwd`: exported, given
/// fresh ids, re-rooted and imported. The source is only read.
pub(crate) async fn copy(
    store: &StoreEnv,
    source: &SessionRef,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    let exported = if source.path.is_file() && read(&source.path).is_ok() {
        source.path.clone()
    } else {
        export(store, &source.session_id)
            .await?
            .ok_or_else(|| TranscriptError::Io {
                path: source.path.clone(),
                message: format!("OpenCode has no session {}", source.session_id),
            })?
            .path
    };
    let bytes = std::fs::read(&exported).map_err(|e| TranscriptError::Io {
        path: exported.clone(),
        message: e.to_string(),
    })?;
    let start = bytes.iter().position(|b| *b == b'{').unwrap_or(0);
    let doc: Value =
        serde_json::from_slice(&bytes[start..]).map_err(|e| TranscriptError::Malformed {
            path: exported.clone(),
            message: e.to_string(),
        })?;
    let now = now_ms();
    let mut ids = IdGen::new(now, &format!("{}:{now}", target.session_id));
    let (session_id, doc) =
        recopy(&doc, &target.cwd, &mut ids).ok_or_else(|| TranscriptError::Malformed {
            path: exported.clone(),
            message: "not an OpenCode export".to_owned(),
        })?;
    import(store, session_id, &doc, target).await
}

/// A version's first three numbers, from `--version`'s first line (`1.18.33`, `opencode
/// 1.18.33`, `v1.2.24-beta`).
pub(crate) fn version_triple(line: &str) -> Option<(u64, u64, u64)> {
    let word = line.split_whitespace().find(|w| {
        w.trim_start_matches('v')
            .starts_with(|c: char| c.is_ascii_digit())
    })?;
    let mut nums = word
        .trim_start_matches('v')
        .split(|c: char| !c.is_ascii_digit())
        .map(str::parse::<u64>);
    Some((nums.next()?.ok()?, nums.next()?.ok()?, nums.next()?.ok()?))
}

/// Whether OpenCode `version` can take a carried session.
pub(crate) fn resume_support(version: Option<&str>) -> Result<(), String> {
    let (a, b, c) = MIN_RESUME_VERSION;
    let need = format!("{a}.{b}.{c}");
    let Some(line) = version.map(str::trim).filter(|v| !v.is_empty()) else {
        return Err(format!(
            "OpenCode's version is unknown; carrying a conversation into it needs {need} or newer"
        ));
    };
    match version_triple(line) {
        Some(v) if v >= MIN_RESUME_VERSION => Ok(()),
        Some((x, y, z)) => Err(format!(
            "OpenCode {x}.{y}.{z} is too old to take a carried conversation (import, run --session, --fork): it needs {need} or newer"
        )),
        None => Err(format!(
            "OpenCode's version '{}' can't be read; carrying a conversation into it needs {need} or newer",
            clip(line)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_convert_both_ways() {
        assert_eq!(
            iso_from_ms(1_796_119_057_238).as_deref(),
            Some("2026-12-01T09:57:37.238Z")
        );
        assert_eq!(iso_from_ms(0).as_deref(), Some("1970-01-01T00:00:00.000Z"));
        assert_eq!(
            ms_from_iso("2026-12-01T09:57:37.238Z"),
            Some(1_796_119_057_238)
        );
        assert_eq!(ms_from_iso("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(
            ms_from_iso("2024-02-29T00:00:00.5Z"),
            Some(1_709_164_800_500)
        );
        assert_eq!(ms_from_iso("nonsense"), None);
        for ms in [0, 1, 951_782_400_000, 1_709_164_800_500, 4_102_444_800_000] {
            assert_eq!(iso_from_ms(ms).and_then(|s| ms_from_iso(&s)), Some(ms));
        }
    }

    #[test]
    fn ids_have_opencodes_shape_and_order() {
        let mut ids = IdGen::new(1_796_119_057_133, "seed");
        let s = ids.session();
        assert!(s.starts_with("ses_dcef62d12ffe"), "{s}");
        assert_eq!(s.len(), 4 + 12 + 14);
        assert!(is_session_id(&s));
        let a = ids.ascending("msg");
        let b = ids.ascending("msg");
        assert!(a < b && a.starts_with("msg_23109d2ed002"), "{a} {b}");
        assert!(!is_session_id("--help") && !is_session_id("ses_") && !is_session_id("ses_a/b"));
    }

    #[test]
    fn versions() {
        assert!(resume_support(Some("1.18.33")).is_ok());
        assert!(resume_support(Some("opencode v1.2.24")).is_ok());
        assert!(
            resume_support(Some("1.2.23"))
                .unwrap_err()
                .contains("1.2.24")
        );
        assert!(resume_support(None).is_err());
        assert!(resume_support(Some("dev")).is_err());
    }
}
