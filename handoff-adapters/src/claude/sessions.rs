//! Claude Code's session store: finding a session, writing a carried conversation as a new
//! session, and copying a session into a new one (the pieces the Codex store shares are in
//! `store.rs`).
//!
//! Layout: `${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/<slug(cwd)>/<session id>.jsonl`, one
//! JSON record per line. Claude Code looks a session up only in the folder of the directory it
//! runs in, so a session written for a receiver goes into the folder of the receiver's cwd.
//!
//! A written conversation is lossy but resumable: every neutral message becomes one `user` or
//! `assistant` line on a `uuid`/`parentUuid` chain. Only text is written as content blocks:
//! reasoning becomes `[Reasoning] …` text (Claude Code only accepts its own signed thinking),
//! tool calls and results become bounded, tagged text blocks (a `tool_use` id and its
//! `tool_result` can't be forged safely). Each written line carries a `handoff` object naming
//! the provider (and, for assistant lines, the model) that wrote the message; the reader turns
//! such lines back into the same neutral messages.

use std::io::{BufRead, BufReader};

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, CarriedSession, CarryTarget, Message, Role, SessionQuery, SessionRef, StoreEnv,
    Transcript, TranscriptError,
};
use serde_json::{Value, json};

use super::Claude;
use super::transcript::read;
use crate::store::{
    MARKER, carried_messages, derived_uuid, field_text, io_error, marker, part_text, plain_id,
    refuse_existing, rewrite_line, write_new,
};

/// The Claude Code version written into carried lines: the release the format was checked
/// against with the real CLI.
pub(crate) const CLAUDE_LINE_VERSION: &str = "2.1.197";

/// Longest folder name Claude Code uses before it shortens it with a hash.
const MAX_SLUG: usize = 200;

/// Most lines read from one session to find the directory it ran in.
const MAX_HEAD_LINES: usize = 400;

/// The text of the hidden line that opens a carried conversation whose first message is the
/// assistant's: the Messages API wants a user turn first. It is a meta line, which the reader
/// leaves out, so reading the session back gives the carried messages only.
const ASSISTANT_FIRST_PREFACE: &str = "The conversation below was carried over from an earlier session; it starts with the assistant's message.";

/// Claude Code's folder name for the directory `path`: every UTF-16 unit that is not an ASCII
/// letter or digit becomes `-`; names longer than 200 are cut and suffixed with `-` and the
/// base-36 absolute value of the Java-style 32-bit hash of the path.
pub(crate) fn claude_slug(path: &str) -> String {
    let mut s = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c);
        } else {
            for _ in 0..c.len_utf16() {
                s.push('-');
            }
        }
    }
    if s.len() <= MAX_SLUG {
        return s;
    }
    let mut h: i32 = 0;
    for unit in path.encode_utf16() {
        h = h
            .wrapping_shl(5)
            .wrapping_sub(h)
            .wrapping_add(i32::from(unit));
    }
    let mut n = i64::from(h).unsigned_abs();
    let mut digits = Vec::new();
    loop {
        let d = (n % 36) as u8;
        digits.push(if d < 10 { b'0' + d } else { b'a' + d - 10 });
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    format!("{}-{}", &s[..MAX_SLUG], String::from_utf8_lossy(&digits))
}

/// `${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects`.
fn projects_root(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    if let Some(dir) = store.var("CLAUDE_CONFIG_DIR") {
        return Ok(Utf8PathBuf::from(dir).join("projects"));
    }
    store
        .home()
        .map(|h| h.join(".claude/projects"))
        .ok_or_else(|| {
            TranscriptError::Unsupported(
                "cannot find Claude Code's sessions: neither CLAUDE_CONFIG_DIR nor HOME is set"
                    .to_owned(),
            )
        })
}

/// The sub-folders of `dir` (none when it does not exist).
fn folders(dir: &Utf8Path) -> Result<Vec<Utf8PathBuf>, TranscriptError> {
    let entries = match dir.read_dir_utf8() {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir, e)),
    };
    let mut out: Vec<Utf8PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path().to_owned())
        .collect();
    out.sort();
    Ok(out)
}

/// The main session files of a project folder (`<id>.jsonl`; not `agent-*` sidechains), newest
/// first.
fn session_files(dir: &Utf8Path) -> Vec<(std::time::SystemTime, Utf8PathBuf)> {
    let mut out: Vec<(std::time::SystemTime, Utf8PathBuf)> = dir
        .read_dir_utf8()
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            n.ends_with(".jsonl") && !n.starts_with("agent-") && !n.starts_with('.')
        })
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            let modified = meta.modified().ok()?;
            meta.is_file().then(|| (modified, e.path().to_owned()))
        })
        .collect();
    out.sort_by(|a, b| b.cmp(a));
    out
}

/// The `cwd` values of a session's first lines, in order, without repeats.
fn recorded_cwds(path: &Utf8Path, stop_at: Option<&str>) -> Vec<String> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for line in BufReader::new(file).lines().take(MAX_HEAD_LINES) {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(cwd) = v.get("cwd").and_then(Value::as_str)
            && !out.iter().any(|c| c == cwd)
        {
            out.push(cwd.to_owned());
            if stop_at.is_some_and(|s| s == cwd) {
                break;
            }
        }
    }
    out
}

fn same_dir(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// The project folder for `cwd`: one whose sessions ran there (Claude Code's own folder when
/// the slug rule differs from ours), else the slug folder.
fn project_folder(root: &Utf8Path, cwd: &str) -> Result<Utf8PathBuf, TranscriptError> {
    let slug = root.join(claude_slug(cwd));
    if slug.is_dir() {
        return Ok(slug);
    }
    for dir in folders(root)? {
        if let Some((_, newest)) = session_files(&dir).into_iter().next()
            && recorded_cwds(&newest, Some(cwd))
                .iter()
                .any(|c| same_dir(c, cwd))
        {
            return Ok(dir);
        }
    }
    Ok(slug)
}

fn session_ref(path: Utf8PathBuf, id: String) -> SessionRef {
    let cwd = recorded_cwds(&path, None)
        .into_iter()
        .next()
        .map(Utf8PathBuf::from);
    SessionRef {
        provider: AgentId::CLAUDE,
        session_id: id,
        path,
        cwd,
    }
}

/// Finds a Claude Code session: by id, the newest `projects/*/<id>.jsonl`; the latest for a
/// directory, the most recently modified session in its folder (or any folder whose sessions
/// ran there) whose lines name that directory. Never writes.
pub(crate) fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    let root = projects_root(store)?;
    match query {
        SessionQuery::Id(id) => {
            if !plain_id(id) || id.starts_with("agent-") {
                return Ok(None);
            }
            let mut found: Vec<(std::time::SystemTime, Utf8PathBuf)> = folders(&root)?
                .into_iter()
                .map(|d| d.join(format!("{id}.jsonl")))
                .filter_map(|p| {
                    let meta = std::fs::metadata(&p).ok()?;
                    meta.is_file()
                        .then(|| (meta.modified().unwrap_or(std::time::UNIX_EPOCH), p))
                })
                .collect();
            found.sort_by(|a, b| b.cmp(a));
            Ok(found
                .into_iter()
                .next()
                .map(|(_, p)| session_ref(p, id.clone())))
        }
        SessionQuery::Latest { cwd } => {
            let cwd = cwd.as_str();
            let slug = root.join(claude_slug(cwd));
            let mut candidates: Vec<(std::time::SystemTime, Utf8PathBuf)> = Vec::new();
            for dir in folders(&root)? {
                let files = session_files(&dir);
                let ours = dir == slug
                    || files.first().is_some_and(|(_, newest)| {
                        recorded_cwds(newest, Some(cwd))
                            .iter()
                            .any(|c| same_dir(c, cwd))
                    });
                if ours {
                    candidates.extend(files);
                }
            }
            candidates.sort_by(|a, b| b.cmp(a));
            for (_, path) in candidates {
                if recorded_cwds(&path, Some(cwd))
                    .iter()
                    .any(|c| same_dir(c, cwd))
                {
                    let id = path.file_stem().unwrap_or_default().to_owned();
                    return Ok(Some(SessionRef {
                        provider: AgentId::CLAUDE,
                        session_id: id,
                        path,
                        cwd: Some(Utf8PathBuf::from(cwd)),
                    }));
                }
            }
            Ok(None)
        }
    }
}

/// The lines of a Claude Code session holding `messages`, for `target`. `now` stands in for
/// the times messages lack.
pub(crate) fn render(messages: &[&Message], target: &CarryTarget, now: &str) -> String {
    let id = &target.session_id;
    let cwd = target.cwd.as_str();
    let mut out = String::new();
    let mut parent: Option<String> = None;
    let line = |record: Value, out: &mut String| {
        out.push_str(&record.to_string());
        out.push('\n');
    };
    if messages.first().is_some_and(|m| m.role == Role::Assistant) {
        let uuid = derived_uuid(&format!("{id}/preface"));
        let at = messages[0].at.as_deref().unwrap_or(now);
        line(
            json!({
                "parentUuid": null,
                "isSidechain": false,
                "isMeta": true,
                "type": "user",
                "message": {"role": "user", "content": ASSISTANT_FIRST_PREFACE},
                "uuid": uuid,
                "timestamp": at,
                "userType": "external",
                "entrypoint": "cli",
                "cwd": cwd,
                "sessionId": id,
                "version": CLAUDE_LINE_VERSION,
            }),
            &mut out,
        );
        parent = Some(uuid);
    }
    for (n, m) in messages.iter().enumerate() {
        let uuid = derived_uuid(&format!("{id}/{n}"));
        let texts: Vec<String> = m.parts.iter().filter_map(part_text).collect();
        let blocks: Vec<Value> = texts
            .iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect();
        let at = m.at.as_deref().unwrap_or(now);
        let mut record = json!({
            "parentUuid": parent,
            "isSidechain": false,
            "uuid": uuid,
            "timestamp": at,
            "userType": "external",
            "entrypoint": "cli",
            "cwd": cwd,
            "sessionId": id,
            "version": CLAUDE_LINE_VERSION,
        });
        record[MARKER] = marker(m);
        match m.role {
            Role::User => {
                record["type"] = json!("user");
                record["message"] = json!({"role": "user", "content": blocks});
            }
            Role::Assistant => {
                let message_id = format!(
                    "msg_{}",
                    derived_uuid(&format!("{id}/{n}/message")).replace('-', "")
                );
                record["type"] = json!("assistant");
                record["message"] = json!({
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": m.model.as_deref().unwrap_or("unknown"),
                    "content": blocks,
                    "stop_reason": "end_turn",
                    "stop_sequence": null,
                    "usage": {
                        "input_tokens": 0,
                        "output_tokens": 0,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                });
            }
        }
        line(record, &mut out);
        parent = Some(uuid);
    }
    out
}

/// A new session's id must be usable as a file name.
fn check_session_id(id: &str) -> Result<(), TranscriptError> {
    if plain_id(id) {
        Ok(())
    } else {
        Err(TranscriptError::Unsupported(format!(
            "'{id}' can't name a Claude Code session"
        )))
    }
}

/// Writes `transcript` as a new Claude Code session `target.session_id` in the project folder
/// of `target.cwd` (see [`render`] for the lines). Consecutive messages of one role stay
/// separate lines (the Messages API joins consecutive turns of a role); a conversation that
/// starts with the assistant gets a hidden opening user line; an empty one is refused.
pub(crate) fn write(
    store: &StoreEnv,
    transcript: &Transcript,
    target: &CarryTarget,
    now: &str,
) -> Result<CarriedSession, TranscriptError> {
    check_session_id(&target.session_id)?;
    let messages = carried_messages(transcript)?;
    let root = projects_root(store)?;
    let path =
        project_folder(&root, target.cwd.as_str())?.join(format!("{}.jsonl", target.session_id));
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

/// One line of a copied session: its `sessionId` and `cwd` (top level) re-rooted.
fn copy_line(raw: &str, session_id: &str, cwd: &str) -> String {
    let Ok(Value::Object(original)) = serde_json::from_str::<Value>(raw) else {
        return raw.to_owned();
    };
    let mut edited = original.clone();
    let mut subs = Vec::new();
    for (key, new) in [("sessionId", session_id), ("cwd", cwd)] {
        if let Some(old) = original.get(key) {
            let new = Value::String(new.to_owned());
            subs.push((field_text(key, old), field_text(key, &new)));
            edited.insert(key.to_owned(), new);
        }
    }
    if subs.is_empty() {
        return raw.to_owned();
    }
    rewrite_line(raw, &Value::Object(edited), &subs)
}

/// The bytes of a copied session file.
fn copied(bytes: &[u8], session_id: &str, cwd: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 256);
    for raw in bytes.split_inclusive(|b| *b == b'\n') {
        let body = raw.strip_suffix(b"\n").unwrap_or(raw);
        match std::str::from_utf8(body) {
            Ok(text) => out.extend_from_slice(copy_line(text, session_id, cwd).as_bytes()),
            Err(_) => out.extend_from_slice(body),
        }
        out.push(b'\n');
    }
    out
}

/// Copies the Claude Code session `source` into a new session `target.session_id` in the
/// project folder of `target.cwd`: every line as it was, with `sessionId` and `cwd` re-rooted.
/// Its companion folder (`<id>/`: sub-agent transcripts, externalised tool results) is copied
/// alongside, its session files re-rooted the same way. The source is only read.
pub(crate) fn copy(
    store: &StoreEnv,
    source: &SessionRef,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    check_session_id(&target.session_id)?;
    let root = projects_root(store)?;
    let folder = project_folder(&root, target.cwd.as_str())?;
    let id = &target.session_id;
    let cwd = target.cwd.as_str();
    let main = folder.join(format!("{id}.jsonl"));
    let bytes = std::fs::read(&source.path).map_err(|e| io_error(&source.path, e))?;
    let mut plan: Vec<(Utf8PathBuf, Vec<u8>)> = vec![(main, copied(&bytes, id, cwd))];
    let companion = source.path.with_extension("");
    if companion.is_dir() {
        let to = folder.join(id);
        let mut stack = vec![companion.clone()];
        while let Some(dir) = stack.pop() {
            for e in dir
                .read_dir_utf8()
                .map_err(|e| io_error(&dir, e))?
                .flatten()
            {
                let p = e.path().to_owned();
                let ty = e.file_type().map_err(|e| io_error(&p, e))?;
                if ty.is_dir() {
                    stack.push(p);
                } else if ty.is_file() {
                    let rel = p.strip_prefix(&companion).unwrap_or(&p).to_owned();
                    let data = std::fs::read(&p).map_err(|e| io_error(&p, e))?;
                    let data = if p.extension() == Some("jsonl") {
                        copied(&data, id, cwd)
                    } else {
                        data
                    };
                    plan.push((to.join(rel), data));
                }
            }
        }
    }
    for (path, _) in &plan {
        refuse_existing(path)?;
    }
    if !target.dry_run {
        for (i, (path, data)) in plan.iter().enumerate() {
            if let Err(e) = write_new(path, data) {
                // All or nothing: what this copy wrote already goes again.
                for (written, _) in &plan[..i] {
                    let _ = std::fs::remove_file(written);
                }
                if let Some((main, _)) = plan.first() {
                    let _ = std::fs::remove_dir_all(main.with_extension(""));
                }
                return Err(e);
            }
        }
    }
    Ok(CarriedSession {
        session_id: id.clone(),
        bytes: plan.iter().map(|(_, d)| d.len() as u64).sum(),
        files: plan.into_iter().map(|(p, _)| p).collect(),
    })
}

crate::store::blocking_sessions!(Claude);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_claude_codes_rule() {
        assert_eq!(claude_slug("/home/u/my_proj.v2"), "-home-u-my-proj-v2");
        assert_eq!(claude_slug("C:\\Users\\x"), "C--Users-x");
        assert_eq!(claude_slug("/tmp/日本"), "-tmp---");
        assert_eq!(claude_slug("/a/😀"), "-a---", "one '-' per UTF-16 unit");
        let long = format!("/{}", "a".repeat(300));
        let slug = claude_slug(&long);
        assert!(slug.starts_with(&format!("-{}", "a".repeat(199))));
        assert_eq!(slug.as_bytes()[200], b'-');
        assert!(slug[201..].chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
