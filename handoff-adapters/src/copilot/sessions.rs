//! Copilot's sessions: `$COPILOT_HOME/session-state/<id>/events.jsonl` (else under
//! `~/.copilot`), one event a line (`{type, data, id, timestamp, parentId}`), found by id or as
//! the newest session that started in a directory, read into a neutral transcript, and
//! written for a carried conversation.
//!
//! What real Copilot 1.0.102 does with them (checked against the binary): `--resume <id>` loads
//! a session from its `session-state/<id>/` folder alone (the `session-store.db` index is not
//! needed), re-sends its `user.message` and `assistant.message` events to the model, and
//! refuses a file whose events lack a UUID `id` ("invalid session event envelope"). A carried
//! session is therefore a `session.start` event and one event per message, every id a UUID
//! derived from the new session's; tool calls and results travel as tagged text, each carried
//! event marked `handoff` so that reading it back restores them.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, CarriedSession, CarryTarget, MAX_TOOL_TEXT_BYTES, Message, Part, Role, SessionQuery,
    SessionRef, StoreEnv, TRANSCRIPT_SCHEMA, Transcript, TranscriptError, TranscriptSource,
    bounded,
};
use serde_json::{Value, json};

use super::Copilot;
use crate::store::{
    MARKER, carried_messages, derived_uuid, io_error, marker, part_text, plain_id, read_marker,
    text_part, write_new,
};

/// The session file of a session folder.
pub const EVENTS: &str = "events.jsonl";

/// The Copilot version a carried session says wrote it.
const CARRIED_VERSION: &str = "1.0.102";

/// Most session folders looked at when finding the newest one of a directory.
const MAX_SCAN_ENTRIES: usize = 100_000;

/// `$COPILOT_HOME`, else `~/.copilot`.
pub fn copilot_home(vars: &std::collections::BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    vars.get("COPILOT_HOME")
        .filter(|d| d.starts_with('/'))
        .map(Utf8PathBuf::from)
        .or_else(|| crate::common::home_dir(vars).map(|h| h.join(".copilot")))
}

fn session_root(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    copilot_home(&store.vars)
        .map(|h| h.join("session-state"))
        .ok_or_else(|| {
            TranscriptError::Unsupported(
                "cannot find Copilot's sessions: neither COPILOT_HOME nor HOME is set".to_owned(),
            )
        })
}

/// The `session.start` event of a session file (its first line), if it has one.
fn start_of(path: &Utf8Path) -> Option<Value> {
    use std::io::{BufRead as _, Read as _};
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file.take(1 << 20))
        .read_line(&mut line)
        .ok()?;
    let v: Value = serde_json::from_str(line.trim()).ok()?;
    (v.get("type").and_then(Value::as_str) == Some("session.start")).then_some(v)
}

fn session_ref(id: &str, path: Utf8PathBuf) -> SessionRef {
    let cwd = start_of(&path).and_then(|s| {
        s.pointer("/data/context/cwd")
            .and_then(Value::as_str)
            .map(Utf8PathBuf::from)
    });
    SessionRef {
        provider: AgentId::COPILOT,
        session_id: id.to_owned(),
        path,
        cwd,
    }
}

/// Finds a session: by id, or the newest one whose `session.start` names `cwd`.
pub(crate) fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    let root = session_root(store)?;
    match query {
        SessionQuery::Id(id) => {
            if !plain_id(id) {
                return Ok(None);
            }
            let path = root.join(id).join(EVENTS);
            Ok(path.is_file().then(|| session_ref(id, path)))
        }
        SessionQuery::Latest { cwd } => {
            let mut newest: Option<(std::time::SystemTime, SessionRef)> = None;
            let entries = root.read_dir_utf8().into_iter().flatten().flatten();
            for entry in entries.take(MAX_SCAN_ENTRIES) {
                let id = entry.file_name().to_owned();
                let path = entry.path().join(EVENTS);
                let Ok(meta) = std::fs::metadata(&path) else {
                    continue;
                };
                let found = session_ref(&id, path);
                if found.cwd.as_deref() != Some(cwd.as_path()) {
                    continue;
                }
                let at = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                if newest.as_ref().is_none_or(|(t, _)| at > *t) {
                    newest = Some((at, found));
                }
            }
            Ok(newest.map(|(_, r)| r))
        }
    }
}

/// Reads the session file at `path`. Never writes.
pub(crate) fn read(path: &Utf8Path) -> Result<Transcript, TranscriptError> {
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    parse(path, &bytes)
}

fn message(role: Role, model: Option<String>, ev: &Value, parts: Vec<Part>) -> Message {
    let (provider, model) = match read_marker(ev.pointer(&format!("/data/{MARKER}"))) {
        Some((provider, carried)) => (provider, carried.unwrap_or(model)),
        None => (AgentId::COPILOT, model),
    };
    Message {
        role,
        provider,
        model,
        at: ev
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned),
        source_id: ev.get("id").and_then(Value::as_str).map(str::to_owned),
        parts,
    }
}

/// The parts of a text: tagged blocks restored when the event is one handoff carried.
fn text_parts(text: &str, carried: bool) -> Vec<Part> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    if carried {
        text.split("\n\n")
            .filter(|t| !t.trim().is_empty())
            .map(|t| text_part(t.to_owned()))
            .collect()
    } else {
        vec![Part::Text {
            text: text.to_owned(),
        }]
    }
}

/// Parses the bytes of the session file at `path`.
pub(crate) fn parse(path: &Utf8Path, bytes: &[u8]) -> Result<Transcript, TranscriptError> {
    let mut messages = Vec::new();
    let mut warnings = Vec::new();
    let mut bad = 0usize;
    let mut read_lines = 0usize;
    let mut session_id = None;
    let mut cwd = None;
    for line in bytes.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(ev @ Value::Object(_)) = serde_json::from_slice::<Value>(line) else {
            bad += 1;
            continue;
        };
        read_lines += 1;
        let data = ev.get("data").cloned().unwrap_or(Value::Null);
        let carried = data.get(MARKER).is_some();
        let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or_default();
        match ev.get("type").and_then(Value::as_str).unwrap_or_default() {
            "session.start" => {
                session_id = data
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                cwd = data
                    .pointer("/context/cwd")
                    .and_then(Value::as_str)
                    .map(Utf8PathBuf::from);
            }
            "user.message" => {
                let parts = text_parts(text("content"), carried);
                if !parts.is_empty() {
                    messages.push(message(Role::User, None, &ev, parts));
                }
            }
            "assistant.message" => {
                let mut parts = text_parts(text("content"), carried);
                for call in data
                    .get("toolRequests")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let input = match call.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Null) | None => String::new(),
                        Some(v) => v.to_string(),
                    };
                    parts.push(Part::ToolCall {
                        name: call
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        id: call
                            .get("toolCallId")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        input: bounded(&input, MAX_TOOL_TEXT_BYTES),
                    });
                }
                let model = data.get("model").and_then(Value::as_str).map(str::to_owned);
                if !parts.is_empty() {
                    messages.push(message(Role::Assistant, model, &ev, parts));
                }
            }
            "tool.execution_complete" => {
                let ok = data.get("success").and_then(Value::as_bool) != Some(false);
                let output = data
                    .pointer("/result/content")
                    .or_else(|| data.pointer("/error/message"))
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default();
                let part = Part::ToolResult {
                    id: data
                        .get("toolCallId")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    output: bounded(&output, MAX_TOOL_TEXT_BYTES),
                    is_error: !ok,
                };
                messages.push(message(Role::User, None, &ev, vec![part]));
            }
            // Its system prompt, turn markers, usage records and the like: not conversation.
            _ => {}
        }
    }
    if read_lines == 0 {
        return Err(TranscriptError::Malformed {
            path: path.to_owned(),
            message: "no line is a Copilot session event".to_owned(),
        });
    }
    if bad > 0 {
        warnings.push(format!("skipped {bad} line(s) that are not JSON events"));
    }
    let session_id = session_id
        .or_else(|| {
            path.parent()
                .and_then(Utf8Path::file_name)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".to_owned());
    Ok(Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::COPILOT,
            session_id,
            path: path.to_owned(),
            cwd,
        },
        messages,
        warnings,
    })
}

/// The events of a carried session: `session.start`, then one `user.message` or
/// `assistant.message` per message, its parts as text, every id derived from the session's.
pub(crate) fn carried_events(
    transcript: &Transcript,
    target: &CarryTarget,
    now: &str,
) -> Result<String, TranscriptError> {
    let messages = carried_messages(transcript)?;
    let id = &target.session_id;
    let mut parent = Value::Null;
    let mut out = String::new();
    let mut push = |n: usize, kind: &str, data: Value, out: &mut String| {
        let event_id = derived_uuid(&format!("{id}/{n}"));
        let ev = json!({
            "type": kind,
            "data": data,
            "id": event_id,
            "timestamp": now,
            "parentId": parent,
        });
        parent = Value::String(event_id);
        out.push_str(&ev.to_string());
        out.push('\n');
    };
    push(
        0,
        "session.start",
        json!({
            "sessionId": id,
            "version": 1,
            "producer": "copilot-agent",
            "copilotVersion": CARRIED_VERSION,
            "startTime": now,
            "selectedModel": target.model,
            "context": {"cwd": target.cwd},
        }),
        &mut out,
    );
    for (n, m) in messages.iter().enumerate() {
        let text: Vec<String> = m.parts.iter().filter_map(part_text).collect();
        let text = text.join("\n\n");
        let (kind, data) = match m.role {
            Role::User => ("user.message", json!({"content": text, MARKER: marker(m)})),
            Role::Assistant => (
                "assistant.message",
                json!({
                    "messageId": derived_uuid(&format!("{id}/message/{n}")),
                    "content": text,
                    "toolRequests": [],
                    MARKER: marker(m),
                }),
            ),
        };
        push(n + 1, kind, data, &mut out);
    }
    Ok(out)
}

fn write(
    store: &StoreEnv,
    transcript: &Transcript,
    target: &CarryTarget,
    now: &str,
) -> Result<CarriedSession, TranscriptError> {
    if !plain_id(&target.session_id) {
        return Err(TranscriptError::Unsupported(format!(
            "'{}' cannot name a Copilot session",
            target.session_id
        )));
    }
    let path = session_root(store)?.join(&target.session_id).join(EVENTS);
    let text = carried_events(transcript, target, now)?;
    if !target.dry_run {
        write_new(&path, text.as_bytes())?;
    }
    Ok(CarriedSession {
        session_id: target.session_id.clone(),
        files: vec![path],
        bytes: text.len() as u64,
    })
}

/// A copy of one of Copilot's own sessions under a new id: every event as it was, but the
/// `session.start`'s id and directory.
fn copy(
    store: &StoreEnv,
    source: &SessionRef,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    if !plain_id(&target.session_id) {
        return Err(TranscriptError::Unsupported(format!(
            "'{}' cannot name a Copilot session",
            target.session_id
        )));
    }
    let text = std::fs::read_to_string(&source.path).map_err(|e| io_error(&source.path, e))?;
    let mut out = String::with_capacity(text.len());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(mut v) if v.get("type").and_then(Value::as_str) == Some("session.start") => {
                v["data"]["sessionId"] = json!(target.session_id);
                v["data"]["context"] = json!({"cwd": target.cwd});
                out.push_str(&v.to_string());
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    let path = session_root(store)?.join(&target.session_id).join(EVENTS);
    if !target.dry_run {
        write_new(&path, out.as_bytes())?;
    }
    Ok(CarriedSession {
        session_id: target.session_id.clone(),
        files: vec![path],
        bytes: out.len() as u64,
    })
}

crate::store::blocking_sessions!(Copilot);
