//! Codex's session store: finding a rollout, writing a carried conversation as a new rollout,
//! and copying a rollout into a new thread.
//!
//! Layout: `${CODEX_HOME:-$HOME/.codex}/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`
//! (or `.jsonl.zst`), and `archived_sessions/` beside it. Codex finds a thread by the id at the
//! end of the file name, in any day folder; it is not tied to a directory, but the `cwd` of the
//! thread's `session_meta` is where it works.
//!
//! A written conversation follows the items Codex itself records for a turn: `task_started`,
//! the user's `message` (`input_text`) with its `user_message` event, each assistant `message`
//! (`output_text`) with its `agent_message` event, and `task_complete`. As for Claude Code,
//! tool calls, results and reasoning are tagged text (a `function_call` and its output, or a
//! reasoning item without Codex's encrypted content, can't be forged safely), and each
//! written message names its provider and model in a `handoff` object the reader honours. No
//! `turn_context` is written: it would pin a foreign model (and sandbox) on the resumed thread.

use std::io::{BufRead, BufReader, Read};

use async_trait::async_trait;
use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, CarriedSession, CarryTarget, Message, Role, SessionQuery, SessionRef, Sessions,
    StoreEnv, Transcript, TranscriptError, now_iso,
};
use serde_json::{Value, json};

use super::Codex;
use crate::store::{
    MARKER, blocking, carried_messages, derived_uuid, field_text, io_error, marker, part_text,
    plain_id, refuse_existing, rewrite_line, write_new,
};

/// The Codex version written into a carried rollout's `session_meta`: the release the format
/// was checked against with the real CLI.
pub(crate) const CODEX_CLI_VERSION: &str = "0.171.0";

/// Most rollouts whose first line is read when looking for the latest one of a directory.
const MAX_SCAN_FILES: usize = 2_000;

/// Most directory entries listed when looking a thread up by id.
const MAX_LIST_ENTRIES: usize = 200_000;

/// The first bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// `${CODEX_HOME:-$HOME/.codex}`.
fn codex_home(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    if let Some(dir) = store.var("CODEX_HOME") {
        return Ok(Utf8PathBuf::from(dir));
    }
    store.home().map(|h| h.join(".codex")).ok_or_else(|| {
        TranscriptError::Unsupported(
            "cannot find Codex's sessions: neither CODEX_HOME nor HOME is set".to_owned(),
        )
    })
}

/// The entries of `dir` (none when it does not exist), sorted by name, newest-named first.
fn entries_desc(dir: &Utf8Path) -> Vec<(String, Utf8PathBuf, bool)> {
    let mut out: Vec<(String, Utf8PathBuf, bool)> = dir
        .read_dir_utf8()
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().to_owned(), e.path().to_owned(), is_dir)
        })
        .collect();
    out.sort_by(|a, b| b.0.cmp(&a.0));
    out
}

/// The thread id at the end of a rollout's file name.
fn rollout_id(name: &str) -> Option<&str> {
    let stem = name
        .strip_suffix(".jsonl.zst")
        .or_else(|| name.strip_suffix(".jsonl"))?;
    if !stem.starts_with("rollout-") {
        return None;
    }
    let id = stem.get(stem.len().checked_sub(36)?..)?;
    (id.chars().filter(|c| *c == '-').count() == 4).then_some(id)
}

/// The rollouts under `sessions/` (day folders newest first, files newest-named first), then
/// those in `archived_sessions/` when `archived`; at most `limit` entries are listed.
fn rollouts(home: &Utf8Path, archived: bool, limit: usize) -> Vec<Utf8PathBuf> {
    let mut out = Vec::new();
    let mut listed = 0usize;
    let sessions = home.join("sessions");
    'years: for (_, year, d) in entries_desc(&sessions) {
        if !d {
            continue;
        }
        for (_, month, d) in entries_desc(&year) {
            if !d {
                continue;
            }
            for (_, day, d) in entries_desc(&month) {
                if !d {
                    continue;
                }
                for (name, path, d) in entries_desc(&day) {
                    listed += 1;
                    if listed > limit {
                        break 'years;
                    }
                    if !d && rollout_id(&name).is_some() {
                        out.push(path);
                    }
                }
            }
        }
    }
    if archived {
        for (name, path, d) in entries_desc(&home.join("archived_sessions")) {
            if !d && rollout_id(&name).is_some() {
                out.push(path);
            }
        }
    }
    out
}

/// The first line of a rollout (decompressed when it is zstd), as JSON.
fn first_record(path: &Utf8Path) -> Option<Value> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut magic = [0u8; 4];
    let n = file.read(&mut magic).ok()?;
    let head = std::io::Cursor::new(magic[..n].to_vec()).chain(file);
    let mut line = Vec::new();
    if n == 4 && magic == ZSTD_MAGIC {
        let decoder = ruzstd::decoding::StreamingDecoder::new(head).ok()?;
        BufReader::new(decoder).read_until(b'\n', &mut line).ok()?;
    } else {
        BufReader::new(head).read_until(b'\n', &mut line).ok()?;
    }
    serde_json::from_slice(line.trim_ascii()).ok()
}

/// A rollout's thread id and cwd, from its `session_meta`.
fn meta(path: &Utf8Path) -> Option<(Option<String>, Option<String>)> {
    let record = first_record(path)?;
    if record.get("type").and_then(Value::as_str) != Some("session_meta") {
        return None;
    }
    let p = record.get("payload")?;
    let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
    Some((s("id"), s("cwd")))
}

/// Finds a Codex rollout: by id, the file whose name ends in it (in `sessions/` or
/// `archived_sessions/`); the latest for a directory, among the newest
/// [`MAX_SCAN_FILES`] rollouts in `sessions/` whose `session_meta` names that cwd, the one
/// modified last. Never writes.
pub(crate) fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    let home = codex_home(store)?;
    let found = match query {
        SessionQuery::Id(id) => {
            if !plain_id(id) {
                return Ok(None);
            }
            let id = id.to_ascii_lowercase();
            rollouts(&home, true, MAX_LIST_ENTRIES)
                .into_iter()
                .find(|p| {
                    p.file_name()
                        .and_then(rollout_id)
                        .is_some_and(|i| i.eq_ignore_ascii_case(&id))
                })
        }
        SessionQuery::Latest { cwd } => {
            let cwd = cwd.as_str().trim_end_matches('/');
            let mut best: Option<(std::time::SystemTime, Utf8PathBuf)> = None;
            for path in rollouts(&home, false, MAX_LIST_ENTRIES)
                .into_iter()
                .take(MAX_SCAN_FILES)
            {
                let Some((_, Some(ran))) = meta(&path) else {
                    continue;
                };
                if ran.trim_end_matches('/') != cwd {
                    continue;
                }
                let modified = std::fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                if best.as_ref().is_none_or(|(t, _)| modified > *t) {
                    best = Some((modified, path));
                }
            }
            best.map(|(_, p)| p)
        }
    };
    Ok(found.map(|path| {
        let (id, cwd) = meta(&path).unwrap_or((None, None));
        let id = id
            .or_else(|| path.file_name().and_then(rollout_id).map(str::to_owned))
            .unwrap_or_default();
        SessionRef {
            provider: AgentId::CODEX,
            session_id: id,
            path,
            cwd: cwd.map(Utf8PathBuf::from),
        }
    }))
}

/// `YYYY/MM/DD` and `YYYY-MM-DDThh-mm-ss` of an ISO-8601 time (`now`).
fn stamps(now: &str) -> Result<(String, String), TranscriptError> {
    let ok = now.len() >= 19
        && now.is_char_boundary(19)
        && now.as_bytes()[4] == b'-'
        && now.as_bytes()[10] == b'T';
    if !ok {
        return Err(TranscriptError::Unsupported(format!(
            "'{now}' is not an ISO-8601 time"
        )));
    }
    let day = format!("{}/{}/{}", &now[..4], &now[5..7], &now[8..10]);
    let file = now[..19].replace(':', "-");
    Ok((day, file))
}

/// Where a new rollout of `id` created at `now` goes.
fn rollout_path(home: &Utf8Path, id: &str, now: &str) -> Result<Utf8PathBuf, TranscriptError> {
    let (day, stamp) = stamps(now)?;
    Ok(home
        .join("sessions")
        .join(day)
        .join(format!("rollout-{stamp}-{id}.jsonl")))
}

/// The lines of a rollout holding `messages`, for `target`, created at `now` (which also
/// stands in for the times messages lack).
///
/// Turns: a turn opens at the first message and at each user message that follows an
/// assistant message (unless it holds only tool results, which belong to the assistant's
/// turn), so consecutive user messages share a turn and consecutive assistant messages answer
/// in one; a conversation that starts with the assistant opens with a turn that has no user
/// message. Every message stays its own item.
pub(crate) fn render(messages: &[&Message], target: &CarryTarget, now: &str) -> String {
    let id = &target.session_id;
    let mut out = String::new();
    let mut line = |at: &str, kind: &str, payload: Value| {
        out.push_str(&json!({"timestamp": at, "type": kind, "payload": payload}).to_string());
        out.push('\n');
    };
    line(
        now,
        "session_meta",
        json!({
            "id": id,
            "timestamp": now,
            "cwd": target.cwd,
            "originator": "handoff",
            "cli_version": CODEX_CLI_VERSION,
            "source": "cli",
        }),
    );
    let mut turn: Option<(String, Option<String>)> = None;
    let mut turns = 0usize;
    let mut last_role: Option<Role> = None;
    for m in messages {
        let at = m.at.as_deref().unwrap_or(now);
        // Tool results answer the assistant's calls: they stay in its turn.
        let results_only = m
            .parts
            .iter()
            .all(|p| matches!(p, handoff_core::Part::ToolResult { .. }));
        let opens = turn.is_none()
            || (m.role == Role::User && last_role == Some(Role::Assistant) && !results_only);
        if opens {
            if let Some((turn_id, last)) = turn.take() {
                line(
                    at,
                    "event_msg",
                    json!({"type": "task_complete", "turn_id": turn_id, "last_agent_message": last}),
                );
            }
            turns += 1;
            let turn_id = derived_uuid(&format!("{id}/turn/{turns}"));
            line(
                at,
                "event_msg",
                json!({
                    "type": "task_started",
                    "turn_id": turn_id,
                    "model_context_window": null,
                    "collaboration_mode_kind": "default",
                }),
            );
            turn = Some((turn_id, None));
        }
        let texts: Vec<String> = m.parts.iter().filter_map(part_text).collect();
        let joined = texts.join("\n\n");
        match m.role {
            Role::User => {
                let content: Vec<Value> = texts
                    .iter()
                    .map(|t| json!({"type": "input_text", "text": t}))
                    .collect();
                let mut item = json!({"type": "message", "role": "user", "content": content});
                item[MARKER] = marker(m);
                line(at, "response_item", item);
                line(
                    at,
                    "event_msg",
                    json!({
                        "type": "user_message",
                        "message": joined,
                        "images": [],
                        "local_images": [],
                        "text_elements": [],
                    }),
                );
            }
            Role::Assistant => {
                let content: Vec<Value> = texts
                    .iter()
                    .map(|t| json!({"type": "output_text", "text": t, "annotations": []}))
                    .collect();
                let mut item = json!({"type": "message", "role": "assistant", "content": content});
                item[MARKER] = marker(m);
                line(at, "response_item", item);
                line(
                    at,
                    "event_msg",
                    json!({"type": "agent_message", "message": joined}),
                );
                if let Some((_, last)) = turn.as_mut() {
                    *last = Some(joined);
                }
            }
        }
        last_role = Some(m.role);
    }
    if let Some((turn_id, last)) = turn {
        let at = messages.last().and_then(|m| m.at.as_deref()).unwrap_or(now);
        line(
            at,
            "event_msg",
            json!({"type": "task_complete", "turn_id": turn_id, "last_agent_message": last}),
        );
    }
    out
}

/// A new thread's id must be a UUID.
fn check_thread_id(id: &str) -> Result<(), TranscriptError> {
    if plain_id(id) && id.len() == 36 {
        Ok(())
    } else {
        Err(TranscriptError::Unsupported(format!(
            "'{id}' can't name a Codex thread: it needs a UUID"
        )))
    }
}

/// Writes `transcript` as a new Codex thread `target.session_id` created at `now`, working in
/// `target.cwd` (see [`render`]). An empty conversation is refused.
pub(crate) fn write(
    store: &StoreEnv,
    transcript: &Transcript,
    target: &CarryTarget,
    now: &str,
) -> Result<CarriedSession, TranscriptError> {
    check_thread_id(&target.session_id)?;
    let messages = carried_messages(transcript)?;
    let home = codex_home(store)?;
    let path = rollout_path(&home, &target.session_id, now)?;
    let text = render(&messages, target, now);
    refuse_existing(&path)?;
    if !target.dry_run {
        write_new(&path, text.as_bytes())?;
    }
    Ok(CarriedSession {
        session_id: target.session_id.clone(),
        files: vec![path],
        bytes: text.len() as u64,
    })
}

/// A rollout's text, decompressed when it is zstd.
fn rollout_bytes(path: &Utf8Path) -> Result<Vec<u8>, TranscriptError> {
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    if !bytes.starts_with(&ZSTD_MAGIC) {
        return Ok(bytes);
    }
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let before = rest.len();
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(&mut rest)
            .map_err(|e| io_error(path, format!("not a readable zstd stream: {e}")))?;
        decoder
            .read_to_end(&mut out)
            .map_err(|e| io_error(path, format!("the zstd stream is damaged: {e}")))?;
        if rest.len() == before {
            break;
        }
    }
    Ok(out)
}

/// One copied line. The thread's own `session_meta` (the first) gets the new id, the source
/// as `forked_from_id` and the new cwd; later `session_meta` lines (a fork's ancestors) and
/// every `turn_context` get the new cwd; `thread_id`/`session_id` fields naming the source
/// thread name the new one.
fn copy_line(raw: &str, first_meta: &mut bool, from_id: &str, id: &str, cwd: &str) -> String {
    let Ok(Value::Object(original)) = serde_json::from_str::<Value>(raw) else {
        return raw.to_owned();
    };
    let kind = original.get("type").and_then(Value::as_str).unwrap_or("");
    let Some(Value::Object(payload)) = original.get("payload") else {
        return raw.to_owned();
    };
    let mut edited = payload.clone();
    let mut subs: Vec<(String, String)> = Vec::new();
    let mut set = |edited: &mut serde_json::Map<String, Value>, key: &str, new: Value| {
        match payload.get(key) {
            Some(old) if old == &new => {}
            Some(old) => subs.push((field_text(key, old), field_text(key, &new))),
            None => subs.push((
                "\"payload\":{".to_owned(),
                format!("\"payload\":{{{},", field_text(key, &new)),
            )),
        }
        edited.insert(key.to_owned(), new);
    };
    let new_id = Value::String(id.to_owned());
    let new_cwd = Value::String(cwd.to_owned());
    match kind {
        "session_meta" if *first_meta => {
            *first_meta = false;
            let source = payload
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or(from_id)
                .to_owned();
            set(&mut edited, "id", new_id.clone());
            if payload.contains_key("session_id") {
                set(&mut edited, "session_id", new_id);
            }
            set(&mut edited, "forked_from_id", Value::String(source));
            set(&mut edited, "cwd", new_cwd);
        }
        "session_meta" | "turn_context" => {
            if payload.contains_key("cwd") {
                set(&mut edited, "cwd", new_cwd);
            }
        }
        _ => {
            for key in ["thread_id", "session_id"] {
                if payload.get(key).and_then(Value::as_str) == Some(from_id) {
                    set(&mut edited, key, new_id.clone());
                }
            }
        }
    }
    if edited == *payload {
        return raw.to_owned();
    }
    let mut record = original.clone();
    record.insert("payload".to_owned(), Value::Object(edited));
    rewrite_line(raw, &Value::Object(record), &subs)
}

/// Copies the Codex rollout `source` into a new thread `target.session_id`: a new plain
/// `.jsonl` rollout (a compressed source is written decompressed) holding every line, with
/// the thread's id, `forked_from_id` and cwd rewritten (see [`copy_line`]). The source is only
/// read.
pub(crate) fn copy(
    store: &StoreEnv,
    source: &SessionRef,
    target: &CarryTarget,
    now: &str,
) -> Result<CarriedSession, TranscriptError> {
    check_thread_id(&target.session_id)?;
    let home = codex_home(store)?;
    let path = rollout_path(&home, &target.session_id, now)?;
    let bytes = rollout_bytes(&source.path)?;
    let mut first_meta = true;
    let mut out = Vec::with_capacity(bytes.len() + 256);
    for raw in bytes.split_inclusive(|b| *b == b'\n') {
        let body = raw.strip_suffix(b"\n").unwrap_or(raw);
        match std::str::from_utf8(body) {
            Ok(text) => out.extend_from_slice(
                copy_line(
                    text,
                    &mut first_meta,
                    &source.session_id,
                    &target.session_id,
                    target.cwd.as_str(),
                )
                .as_bytes(),
            ),
            Err(_) => out.extend_from_slice(body),
        }
        out.push(b'\n');
    }
    refuse_existing(&path)?;
    if !target.dry_run {
        write_new(&path, &out)?;
    }
    Ok(CarriedSession {
        session_id: target.session_id.clone(),
        files: vec![path],
        bytes: out.len() as u64,
    })
}

#[async_trait]
impl Sessions for Codex {
    fn read_transcript(
        &self,
        path: &Utf8Path,
    ) -> Result<handoff_core::Transcript, handoff_core::TranscriptError> {
        super::transcript::read(path)
    }

    async fn find_session(
        &self,
        store: &StoreEnv,
        query: &SessionQuery,
    ) -> Result<Option<SessionRef>, TranscriptError> {
        let (store, query) = (store.clone(), query.clone());
        blocking(move || find(&store, &query)).await
    }

    async fn write_session(
        &self,
        store: &StoreEnv,
        transcript: &Transcript,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        let (store, transcript, target) = (store.clone(), transcript.clone(), target.clone());
        blocking(move || write(&store, &transcript, &target, &now_iso())).await
    }

    async fn copy_session(
        &self,
        store: &StoreEnv,
        source: &SessionRef,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        let (store, source, target) = (store.clone(), source.clone(), target.clone());
        blocking(move || copy(&store, &source, &target, &now_iso())).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_rollout_names() {
        let id = "01a2308e-9a92-7fa1-9b83-fc8f4a0751d4";
        assert_eq!(
            rollout_id(&format!("rollout-2026-12-01T07-43-01-{id}.jsonl")),
            Some(id)
        );
        assert_eq!(
            rollout_id(&format!("rollout-2026-12-01T07-43-01-{id}.jsonl.zst")),
            Some(id)
        );
        assert_eq!(rollout_id(&format!("{id}.jsonl")), None);
    }

    #[test]
    fn stamps_name_the_day_and_the_file() {
        assert_eq!(
            stamps("2026-12-01T07:43:01.848Z").unwrap(),
            ("2026/12/01".to_owned(), "2026-12-01T07-43-01".to_owned())
        );
        assert!(stamps("yesterday").is_err());
    }

    #[test]
    fn copied_lines_keep_their_bytes_where_nothing_changes() {
        let mut first = true;
        let raw =
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"old","cwd":"/a","z":1}}"#;
        let out = copy_line(raw, &mut first, "old", "new", "/b");
        assert_eq!(
            out,
            r#"{"timestamp":"t","type":"session_meta","payload":{"forked_from_id":"old","id":"new","cwd":"/b","z":1}}"#
        );
        let raw = r#"{"type":"event_msg","payload":{"type":"x","thread_id":"old"}}"#;
        assert_eq!(
            copy_line(raw, &mut first, "old", "new", "/b"),
            r#"{"type":"event_msg","payload":{"type":"x","thread_id":"new"}}"#
        );
        let raw = r#"{"type":"event_msg",  "payload":{"type":"y"}}"#;
        assert_eq!(copy_line(raw, &mut first, "old", "new", "/b"), raw);
    }
}
