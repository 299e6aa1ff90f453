//! Qwen's sessions: `$QWEN_HOME/projects/<cwd slug>/chats/<id>.jsonl` (else under `~/.qwen`),
//! the slug the directory with every character but ASCII letters and digits turned into `-`.
//! One record a line, `{uuid, parentUuid, sessionId, timestamp, type, cwd, version, message}`:
//! `user` and `tool_result` records hold `{role:"user", parts}`, `assistant` records
//! `{role:"model", parts}` (Gemini's parts: `text`, `functionCall`, `functionResponse`), and
//! `system` records telemetry and snapshots, not conversation.
//!
//! What real Qwen 0.24.4 does with them (checked against the binary): `--resume <id>` loads the
//! session of that id from the current directory's project folder and re-sends its messages.
//! A carried session is one record per message chained by `parentUuid`, its parts as text,
//! every id a UUID derived from the new session's and each record marked `handoff`, so that
//! reading it back restores the tool calls and results it carries as tagged text.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, CarriedSession, CarryTarget, MAX_TOOL_TEXT_BYTES, Message, Part, Role, SessionQuery,
    SessionRef, StoreEnv, TRANSCRIPT_SCHEMA, Transcript, TranscriptError, TranscriptSource,
    bounded,
};
use serde_json::{Value, json};

use super::Qwen;
use crate::store::{
    MARKER, carried_messages, derived_uuid, io_error, marker, part_text, plain_id, read_marker,
    text_part, write_new,
};

/// The Qwen version a carried session says wrote it.
const CARRIED_VERSION: &str = "0.24.4";

/// `$QWEN_HOME`, else `~/.qwen`.
pub fn qwen_home(vars: &std::collections::BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    vars.get("QWEN_HOME")
        .filter(|d| d.starts_with('/'))
        .map(Utf8PathBuf::from)
        .or_else(|| crate::common::home_dir(vars).map(|h| h.join(".qwen")))
}

/// The name of a directory's project folder: every character but ASCII letters and digits
/// turned into `-`.
pub fn project_slug(cwd: &Utf8Path) -> String {
    cwd.as_str()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The folder of a directory's sessions in a Qwen home.
pub fn chats_dir(home: &Utf8Path, cwd: &Utf8Path) -> Utf8PathBuf {
    home.join("projects").join(project_slug(cwd)).join("chats")
}

fn home_of(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    qwen_home(&store.vars).ok_or_else(|| {
        TranscriptError::Unsupported(
            "cannot find Qwen's sessions: neither QWEN_HOME nor HOME is set".to_owned(),
        )
    })
}

/// The `cwd` of a session file's first record, if it names one.
fn cwd_of(path: &Utf8Path) -> Option<Utf8PathBuf> {
    use std::io::{BufRead as _, Read as _};
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file.take(1 << 20))
        .read_line(&mut line)
        .ok()?;
    let v: Value = serde_json::from_str(line.trim()).ok()?;
    v.get("cwd").and_then(Value::as_str).map(Utf8PathBuf::from)
}

fn session_ref(id: &str, path: Utf8PathBuf) -> SessionRef {
    SessionRef {
        provider: AgentId::QWEN,
        session_id: id.to_owned(),
        cwd: cwd_of(&path),
        path,
    }
}

/// Finds a session: by id in any project folder, or the newest one of `cwd`'s folder.
pub(crate) fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    let home = home_of(store)?;
    match query {
        SessionQuery::Id(id) => {
            if !plain_id(id) {
                return Ok(None);
            }
            let projects = home.join("projects");
            let found = projects
                .read_dir_utf8()
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path().join("chats").join(format!("{id}.jsonl")))
                .find(|p| p.is_file());
            Ok(found.map(|p| session_ref(id, p)))
        }
        SessionQuery::Latest { cwd } => {
            let mut newest: Option<(std::time::SystemTime, SessionRef)> = None;
            let dir = chats_dir(&home, cwd);
            for entry in dir.read_dir_utf8().into_iter().flatten().flatten() {
                let Some(id) = entry.file_name().strip_suffix(".jsonl") else {
                    continue;
                };
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                let found = session_ref(id, entry.path().to_owned());
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

fn message(role: Role, rec: &Value, parts: Vec<Part>) -> Message {
    let model = rec.get("model").and_then(Value::as_str).map(str::to_owned);
    let (provider, model) = match read_marker(rec.get(MARKER)) {
        Some((provider, carried)) => (provider, carried.unwrap_or(model)),
        None => (AgentId::QWEN, model),
    };
    Message {
        role,
        provider,
        model,
        at: rec
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned),
        source_id: rec.get("uuid").and_then(Value::as_str).map(str::to_owned),
        parts,
    }
}

fn as_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The neutral parts of one record's Gemini parts: carried text blocks restored.
fn parts_of(rec: &Value, carried: bool) -> Vec<Part> {
    let mut out = Vec::new();
    let parts = rec.pointer("/message/parts").and_then(Value::as_array);
    for p in parts.into_iter().flatten() {
        if let Some(text) = p.get("text").and_then(Value::as_str) {
            if text.trim().is_empty() {
                continue;
            }
            if p.get("thought").and_then(Value::as_bool) == Some(true) {
                out.push(Part::Reasoning {
                    text: text.to_owned(),
                });
            } else if carried {
                out.extend(
                    text.split("\n\n")
                        .filter(|t| !t.trim().is_empty())
                        .map(|t| text_part(t.to_owned())),
                );
            } else {
                out.push(Part::Text {
                    text: text.to_owned(),
                });
            }
        } else if let Some(call) = p.get("functionCall") {
            out.push(Part::ToolCall {
                name: as_text(call.get("name")),
                id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                input: bounded(&as_text(call.get("args")), MAX_TOOL_TEXT_BYTES),
            });
        } else if let Some(resp) = p.get("functionResponse") {
            let response = resp.get("response");
            let output = response
                .and_then(|r| r.get("output").or_else(|| r.get("error")))
                .or(response);
            let failed = rec
                .pointer("/toolCallResult/status")
                .and_then(Value::as_str)
                == Some("error")
                || response.and_then(|r| r.get("error")).is_some();
            out.push(Part::ToolResult {
                id: resp.get("id").and_then(Value::as_str).map(str::to_owned),
                output: bounded(&as_text(output), MAX_TOOL_TEXT_BYTES),
                is_error: failed,
            });
        }
    }
    out
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
        let Ok(rec @ Value::Object(_)) = serde_json::from_slice::<Value>(line) else {
            bad += 1;
            continue;
        };
        read_lines += 1;
        if session_id.is_none() {
            session_id = rec
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_owned);
            cwd = rec
                .get("cwd")
                .and_then(Value::as_str)
                .map(Utf8PathBuf::from);
        }
        let carried = rec.get(MARKER).is_some();
        let role = match rec.get("type").and_then(Value::as_str).unwrap_or_default() {
            "user" | "tool_result" => Role::User,
            "assistant" => Role::Assistant,
            // Telemetry, attribution snapshots and the like: not conversation.
            _ => continue,
        };
        let parts = parts_of(&rec, carried);
        if !parts.is_empty() {
            messages.push(message(role, &rec, parts));
        }
    }
    if read_lines == 0 {
        return Err(TranscriptError::Malformed {
            path: path.to_owned(),
            message: "no line is a Qwen session record".to_owned(),
        });
    }
    if bad > 0 {
        warnings.push(format!("skipped {bad} line(s) that are not JSON records"));
    }
    let session_id = session_id
        .or_else(|| path.file_stem().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    Ok(Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::QWEN,
            session_id,
            path: path.to_owned(),
            cwd,
        },
        messages,
        warnings,
    })
}

/// The records of a carried session: one `user` or `assistant` record per message, its parts
/// as text, chained by `parentUuid`, every id derived from the session's.
pub(crate) fn carried_records(
    transcript: &Transcript,
    target: &CarryTarget,
    now: &str,
) -> Result<String, TranscriptError> {
    let messages = carried_messages(transcript)?;
    let id = &target.session_id;
    let mut parent = Value::Null;
    let mut out = String::new();
    for (n, m) in messages.iter().enumerate() {
        let text: Vec<String> = m.parts.iter().filter_map(part_text).collect();
        let (kind, role) = match m.role {
            Role::User => ("user", "user"),
            Role::Assistant => ("assistant", "model"),
        };
        let uuid = derived_uuid(&format!("{id}/{n}"));
        let mut rec = json!({
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": id,
            "timestamp": now,
            "type": kind,
            "cwd": target.cwd,
            "version": CARRIED_VERSION,
            "message": {"role": role, "parts": [{"text": text.join("\n\n")}]},
            MARKER: marker(m),
        });
        if m.role == Role::Assistant
            && let Some(model) = &target.model
        {
            rec["model"] = json!(model);
        }
        parent = Value::String(uuid);
        out.push_str(&rec.to_string());
        out.push('\n');
    }
    Ok(out)
}

fn target_path(store: &StoreEnv, target: &CarryTarget) -> Result<Utf8PathBuf, TranscriptError> {
    if !plain_id(&target.session_id) {
        return Err(TranscriptError::Unsupported(format!(
            "'{}' cannot name a Qwen session",
            target.session_id
        )));
    }
    Ok(chats_dir(&home_of(store)?, &target.cwd).join(format!("{}.jsonl", target.session_id)))
}

fn write(
    store: &StoreEnv,
    transcript: &Transcript,
    target: &CarryTarget,
    now: &str,
) -> Result<CarriedSession, TranscriptError> {
    let path = target_path(store, target)?;
    let text = carried_records(transcript, target, now)?;
    if !target.dry_run {
        write_new(&path, text.as_bytes())?;
    }
    Ok(CarriedSession {
        session_id: target.session_id.clone(),
        files: vec![path],
        bytes: text.len() as u64,
    })
}

/// A copy of one of Qwen's own sessions under a new id, in the target directory's project
/// folder: every record as it was, but its session id and directory.
fn copy(
    store: &StoreEnv,
    source: &SessionRef,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    let path = target_path(store, target)?;
    let text = std::fs::read_to_string(&source.path).map_err(|e| io_error(&source.path, e))?;
    let mut out = String::with_capacity(text.len());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(mut v @ Value::Object(_)) => {
                v["sessionId"] = json!(target.session_id);
                v["cwd"] = json!(target.cwd);
                out.push_str(&v.to_string());
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    if !target.dry_run {
        write_new(&path, out.as_bytes())?;
    }
    Ok(CarriedSession {
        session_id: target.session_id.clone(),
        files: vec![path],
        bytes: out.len() as u64,
    })
}

crate::store::blocking_sessions!(Qwen);
