//! Gemini's sessions: `~/.gemini/tmp/<slug>/chats/session-<YYYY-MM-DDTHH-mm>-<id8>.jsonl`
//! (under `$GEMINI_CLI_HOME` when set), found by id or as the newest session of the project at
//! a directory, read into a neutral transcript, and written for a carried conversation.
//!
//! What Gemini CLI 0.61.0 writes (read off the real binary): a header line
//! `{sessionId, projectHash, startTime, lastUpdated, kind}`; message records
//! `{id, timestamp, type: "user"|"gemini"|…, content, thoughts, tokens, model, toolCalls}`, a
//! record with an id already seen replacing the earlier one; and `{"$set": {…}}` patches, whose
//! `messages` replaces the whole list. Each project folder holds its root in `.project_root`.
//! The first user record of a session is the environment Gemini set up
//! (`<session_context>…`), not the person's words; tool results are user records of
//! `functionResponse` parts, and a `gemini` record names its calls in `toolCalls`.
//!
//! `gemini --resume <id>` looks for the session among the `chats/` of the project folder of its
//! working directory: the one `projects.json` names, else any folder whose `.project_root` is
//! that directory, which it then adopts. A carried session is therefore written into that
//! folder (made, with its `.project_root`, when the project has none): a header and one record
//! per message, tool calls and results as tagged text, each record marked `handoff` so that
//! reading it back restores who said it.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, MAX_TOOL_TEXT_BYTES, Message, Part, Role, SessionQuery, SessionRef, StoreEnv,
    TRANSCRIPT_SCHEMA, Transcript, TranscriptError, TranscriptSource, bounded,
};
use serde_json::Value;

use super::Gemini;
use crate::store::{
    MARKER, carried_messages, derived_uuid, io_error, marker, part_text, plain_id, read_marker,
    text_part, write_new,
};

/// Most project and chat entries looked at when finding a session.
const MAX_SCAN_ENTRIES: usize = 100_000;

/// The text Gemini opens a session with: its set-up context, not conversation.
const CONTEXT_OPEN: &str = "<session_context>";

/// `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub fn gemini_dir(vars: &std::collections::BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    vars.get("GEMINI_CLI_HOME")
        .filter(|d| d.starts_with('/'))
        .map(Utf8PathBuf::from)
        .or_else(|| crate::common::home_dir(vars))
        .map(|h| h.join(".gemini"))
}

fn projects_root(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    gemini_dir(&store.vars)
        .map(|d| d.join("tmp"))
        .ok_or_else(|| {
            TranscriptError::Unsupported(
                "cannot find Gemini's sessions: neither GEMINI_CLI_HOME nor HOME is set".to_owned(),
            )
        })
}

/// The root a project folder was made for (its `.project_root`).
fn project_root(dir: &Utf8Path) -> Option<Utf8PathBuf> {
    let text = std::fs::read_to_string(dir.join(".project_root")).ok()?;
    Some(Utf8PathBuf::from(text.trim()))
}

/// The session files of a project folder, with their modification times.
fn chats(dir: &Utf8Path, budget: &mut usize) -> Vec<(std::time::SystemTime, Utf8PathBuf)> {
    let mut out = Vec::new();
    for entry in dir
        .join("chats")
        .read_dir_utf8()
        .into_iter()
        .flatten()
        .flatten()
    {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let name = entry.file_name();
        if !(name.starts_with("session-") && name.ends_with(".jsonl")) {
            continue;
        }
        if let Ok(meta) = std::fs::metadata(entry.path())
            && meta.is_file()
        {
            out.push((
                meta.modified().unwrap_or(std::time::UNIX_EPOCH),
                entry.path().to_owned(),
            ));
        }
    }
    out
}

/// The header of a session file (its first line), when it is one of a main session.
fn header(path: &Utf8Path) -> Option<Value> {
    use std::io::{BufRead as _, Read as _};
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file.take(1 << 20))
        .read_line(&mut line)
        .ok()?;
    let v: Value = serde_json::from_str(line.trim()).ok()?;
    let main = v
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(|k| k == "main");
    (v.get("sessionId").is_some_and(Value::is_string) && main).then_some(v)
}

fn session_ref(path: Utf8PathBuf, cwd: Option<Utf8PathBuf>) -> Option<SessionRef> {
    let id = header(&path)?
        .get("sessionId")
        .and_then(Value::as_str)?
        .to_owned();
    Some(SessionRef {
        provider: AgentId::GEMINI,
        session_id: id,
        path,
        cwd,
    })
}

/// Finds a session: by id in any project, or the newest main session of the project at `cwd`.
pub(crate) fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    let root = projects_root(store)?;
    let mut budget = MAX_SCAN_ENTRIES;
    let projects: Vec<Utf8PathBuf> = root
        .read_dir_utf8()
        .into_iter()
        .flatten()
        .flatten()
        .take(MAX_SCAN_ENTRIES)
        .map(|e| e.path().to_owned())
        .filter(|p| p.is_dir())
        .collect();
    match query {
        SessionQuery::Id(id) => {
            let Some(short) = id.get(..8).filter(|_| crate::store::plain_id(id)) else {
                return Ok(None);
            };
            let suffix = format!("-{short}.jsonl");
            for dir in projects {
                for (_, path) in chats(&dir, &mut budget) {
                    if !path.as_str().ends_with(&suffix) {
                        continue;
                    }
                    if let Some(found) = session_ref(path, project_root(&dir))
                        && found.session_id == *id
                    {
                        return Ok(Some(found));
                    }
                }
            }
            Ok(None)
        }
        SessionQuery::Latest { cwd } => {
            let mut candidates: Vec<_> = projects
                .iter()
                .filter(|dir| project_root(dir).as_deref() == Some(cwd.as_path()))
                .flat_map(|dir| chats(dir, &mut budget))
                .collect();
            candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
            Ok(candidates
                .into_iter()
                .find_map(|(_, path)| session_ref(path, Some(cwd.clone()))))
        }
    }
}

/// The messages of a session file as Gemini would load them: records in order, a repeated id
/// replacing its earlier record, a `$set` of `messages` replacing them all.
fn records(bytes: &[u8], bad: &mut usize) -> (Option<Value>, Vec<Value>) {
    let mut head = None;
    let mut list: Vec<Value> = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(line) else {
            *bad += 1;
            continue;
        };
        if let Some(set) = v.get("$set") {
            if let Some(messages) = set.get("messages").and_then(Value::as_array) {
                list = messages.clone();
            }
            continue;
        }
        if v.get("type").is_none() {
            if v.get("sessionId").is_some() && head.is_none() {
                head = Some(v);
            }
            continue;
        }
        let id = v.get("id").and_then(Value::as_str).map(str::to_owned);
        match list
            .iter_mut()
            .find(|m| id.is_some() && m.get("id").and_then(Value::as_str) == id.as_deref())
        {
            Some(slot) => *slot = v,
            None => list.push(v),
        }
    }
    (head, list)
}

/// A record's content as parts: a string, or `{text}` and `functionResponse` parts.
fn content_parts(content: Option<&Value>, parts: &mut Vec<Part>) {
    match content {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            parts.push(Part::Text { text: s.clone() })
        }
        Some(Value::Array(items)) => {
            for item in items {
                if let Some(text) = item.get("text").and_then(Value::as_str) {
                    if !text.trim().is_empty() && !text.trim_start().starts_with(CONTEXT_OPEN) {
                        parts.push(Part::Text {
                            text: text.to_owned(),
                        });
                    }
                } else if let Some(r) = item.get("functionResponse") {
                    let response = r.get("response").cloned().unwrap_or(Value::Null);
                    let (output, is_error) = match (response.get("output"), response.get("error")) {
                        (Some(Value::String(s)), _) => (s.clone(), false),
                        (_, Some(e)) => (
                            e.as_str().map_or_else(|| e.to_string(), str::to_owned),
                            true,
                        ),
                        _ => (response.to_string(), false),
                    };
                    parts.push(Part::ToolResult {
                        id: r.get("id").and_then(Value::as_str).map(str::to_owned),
                        output: bounded(&output, MAX_TOOL_TEXT_BYTES),
                        is_error,
                    });
                }
            }
        }
        _ => {}
    }
}

/// Parses the bytes of the session file at `path`.
pub(crate) fn parse(path: &Utf8Path, bytes: &[u8]) -> Result<Transcript, TranscriptError> {
    let mut bad = 0usize;
    let (head, list) = records(bytes, &mut bad);
    if head.is_none() && list.is_empty() {
        return Err(TranscriptError::Malformed {
            path: path.to_owned(),
            message: "no line is a Gemini session record".to_owned(),
        });
    }
    let mut warnings = Vec::new();
    if bad > 0 {
        warnings.push(format!("skipped {bad} line(s) that are not JSON records"));
    }
    let mut messages = Vec::new();
    for m in &list {
        let role = match m.get("type").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("gemini") => Role::Assistant,
            // Info, warnings and errors Gemini showed: not conversation.
            _ => continue,
        };
        let carried = read_marker(m.get(MARKER));
        let mut parts = Vec::new();
        match (&carried, m.get("content")) {
            // Carried by handoff: each part's text, tagged blocks restored.
            (Some(_), Some(Value::String(text))) => parts.extend(
                text.split("\n\n")
                    .filter(|t| !t.trim().is_empty())
                    .map(|t| text_part(t.to_owned())),
            ),
            (Some(_), Some(Value::Array(items))) => parts.extend(
                items
                    .iter()
                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                    .filter(|t| !t.trim().is_empty())
                    .map(|t| text_part(t.to_owned())),
            ),
            (_, content) => content_parts(content, &mut parts),
        }
        for call in m
            .get("toolCalls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let input = call.get("args").map(Value::to_string).unwrap_or_default();
            parts.push(Part::ToolCall {
                name: call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                input: bounded(&input, MAX_TOOL_TEXT_BYTES),
            });
        }
        if parts.is_empty() {
            continue;
        }
        let own = m.get("model").and_then(Value::as_str).map(str::to_owned);
        let (provider, model) = match carried {
            Some((provider, model)) => (provider, model.unwrap_or(own)),
            None => (AgentId::GEMINI, own),
        };
        messages.push(Message {
            role,
            provider,
            model,
            at: m
                .get("timestamp")
                .and_then(Value::as_str)
                .map(str::to_owned),
            source_id: m.get("id").and_then(Value::as_str).map(str::to_owned),
            parts,
        });
    }
    let session_id = head
        .as_ref()
        .and_then(|h| h.get("sessionId").and_then(Value::as_str))
        .map_or_else(|| "unknown".to_owned(), str::to_owned);
    let cwd = path
        .parent()
        .and_then(Utf8Path::parent)
        .and_then(project_root);
    Ok(Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::GEMINI,
            session_id,
            path: path.to_owned(),
            cwd,
        },
        messages,
        warnings,
    })
}

/// Reads the session file at `path`. Never writes.
pub(crate) fn read(path: &Utf8Path) -> Result<Transcript, TranscriptError> {
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    parse(path, &bytes)
}

/// The project folder `gemini` run in `cwd` uses under `tmp`: the one `projects.json` maps it
/// to, else one whose `.project_root` names it; `None` when it has none yet.
pub(crate) fn project_dir(gemini: &Utf8Path, cwd: &Utf8Path) -> Option<Utf8PathBuf> {
    let tmp = gemini.join("tmp");
    let registered = std::fs::read_to_string(gemini.join("projects.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| {
            v.pointer("/projects")?
                .get(cwd.as_str())?
                .as_str()
                .map(str::to_owned)
        })
        .filter(|slug| plain_id(slug))
        .map(|slug| tmp.join(slug))
        .filter(|dir| project_root(dir).is_none_or(|r| r == cwd));
    registered.or_else(|| {
        tmp.read_dir_utf8()
            .into_iter()
            .flatten()
            .flatten()
            .take(MAX_SCAN_ENTRIES)
            .map(|e| e.path().to_owned())
            .find(|dir| project_root(dir).as_deref() == Some(cwd))
    })
}

/// A new project folder for `cwd`: its base name made a slug, numbered past the folders that
/// belong to other projects.
pub(crate) fn new_project_dir(gemini: &Utf8Path, cwd: &Utf8Path) -> Utf8PathBuf {
    let base: String = cwd
        .file_name()
        .unwrap_or("project")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let tmp = gemini.join("tmp");
    (0..)
        .map(|n| {
            if n == 0 {
                tmp.join(&base)
            } else {
                tmp.join(format!("{base}-{n}"))
            }
        })
        .find(|dir| !dir.exists())
        .unwrap_or_else(|| tmp.join(base))
}

/// The lines of a carried session: its header, then one record per message.
pub(crate) fn carried_records(
    transcript: &Transcript,
    target: &handoff_core::CarryTarget,
    now: &str,
) -> Result<String, TranscriptError> {
    use sha2::Digest as _;
    let messages = carried_messages(transcript)?;
    let id = &target.session_id;
    let hash = format!("{:x}", sha2::Sha256::digest(target.cwd.as_str().as_bytes()));
    let mut out = serde_json::json!({
        "sessionId": id,
        "projectHash": hash,
        "startTime": now,
        "lastUpdated": now,
        "kind": "main",
    })
    .to_string();
    out.push('\n');
    for (n, m) in messages.iter().enumerate() {
        let texts: Vec<String> = m.parts.iter().filter_map(part_text).collect();
        let text = texts.join("\n\n");
        let record_id = derived_uuid(&format!("{id}/{n}"));
        let record = match m.role {
            // A user turn is a list of parts: one text part each.
            Role::User => serde_json::json!({
                "id": record_id,
                "timestamp": now,
                "type": "user",
                "content": texts.iter().map(|t| serde_json::json!({"text": t})).collect::<Vec<_>>(),
                MARKER: marker(m),
            }),
            Role::Assistant => serde_json::json!({
                "id": record_id,
                "timestamp": now,
                "type": "gemini",
                "content": text,
                "thoughts": [],
                "model": target.model.clone().or_else(|| m.model.clone()),
                MARKER: marker(m),
            }),
        };
        out.push_str(&record.to_string());
        out.push('\n');
    }
    Ok(out)
}

/// `2026-12-06T23-52`: the minute a session file's name carries.
fn file_minute(now: &str) -> String {
    now.chars()
        .take(16)
        .map(|c| if c == ':' { '-' } else { c })
        .collect()
}

fn write(
    store: &StoreEnv,
    transcript: &Transcript,
    target: &handoff_core::CarryTarget,
    now: &str,
) -> Result<handoff_core::CarriedSession, TranscriptError> {
    let short = target
        .session_id
        .get(..8)
        .filter(|_| plain_id(&target.session_id))
        .ok_or_else(|| {
            TranscriptError::Unsupported(format!(
                "'{}' cannot name a Gemini session",
                target.session_id
            ))
        })?;
    let gemini = projects_root(store)?
        .parent()
        .map(Utf8Path::to_owned)
        .unwrap_or_default();
    let text = carried_records(transcript, target, now)?;
    let (dir, new) = match project_dir(&gemini, &target.cwd) {
        Some(dir) => (dir, false),
        None => (new_project_dir(&gemini, &target.cwd), true),
    };
    let path = dir
        .join("chats")
        .join(format!("session-{}-{short}.jsonl", file_minute(now)));
    let mut files = vec![path.clone()];
    if !target.dry_run {
        if new {
            let root = dir.join(".project_root");
            write_new(&root, target.cwd.as_str().as_bytes())?;
            files.push(root);
        }
        write_new(&path, text.as_bytes())?;
    }
    Ok(handoff_core::CarriedSession {
        session_id: target.session_id.clone(),
        files,
        bytes: text.len() as u64,
    })
}

crate::store::blocking_sessions!(Gemini);

/// One of Gemini's own sessions under a new id: read and written again as carried.
fn copy(
    store: &StoreEnv,
    source: &SessionRef,
    target: &handoff_core::CarryTarget,
) -> Result<handoff_core::CarriedSession, TranscriptError> {
    write(
        store,
        &read(&source.path)?,
        target,
        &handoff_core::now_iso(),
    )
}
