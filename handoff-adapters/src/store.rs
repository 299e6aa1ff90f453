//! What the session stores share: the tagged text that carries tool calls, results and
//! reasoning, the `handoff` marker of a carried message, stable ids, atomic no-clobber writes,
//! and the version check of a CLI that resumes a carried conversation. The Claude Code and Codex
//! stores use them.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

use camino::Utf8Path;
use handoff_core::{
    AgentId, MAX_TOOL_TEXT_BYTES, Message, Part, Role, Transcript, TranscriptError, bounded,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The key of the object that marks a line (Claude Code) or response item (Codex) written by
/// handoff: `{"provider": …, "model": …}`.
pub(crate) const MARKER: &str = "handoff";

/// The marker of a carried message.
pub(crate) fn marker(m: &Message) -> Value {
    match m.role {
        Role::User => json!({"provider": m.provider.as_str()}),
        Role::Assistant => json!({"provider": m.provider.as_str(), "model": m.model}),
    }
}

/// The provider and model a marker names (`None` when the value is not a marker). The model
/// is `Some` only when the marker has a `model` key: `Some(None)` is a recorded "unknown".
pub(crate) fn read_marker(v: Option<&Value>) -> Option<(AgentId, Option<Option<String>>)> {
    let m = v?.as_object()?;
    let provider = AgentId::parse(m.get("provider")?.as_str()?)?;
    let model = m.get("model").map(|v| v.as_str().map(str::to_owned));
    Some((provider, model))
}

const CALL_OPEN: &str = "[Tool call: ";
const CALL_CLOSE: &str = "\n[/Tool call]";
const RESULT_OPEN: &str = "[Tool result";
const ERROR_OPEN: &str = "[Tool error";
const RESULT_CLOSE: &str = "\n[/Tool result]";
const REASONING: &str = "[Reasoning] ";

/// A part as the text a receiver reads: text as is, reasoning as `[Reasoning] …`, tool calls
/// and results as tagged blocks (`[Tool call: name (id …)]`, input, `[/Tool call]`), their
/// text bounded to [`MAX_TOOL_TEXT_BYTES`]. `None` for a text part with nothing in it.
pub(crate) fn part_text(part: &Part) -> Option<String> {
    let id = |id: &Option<String>| {
        id.as_ref()
            .map(|i| format!(" (id {i})"))
            .unwrap_or_default()
    };
    match part {
        Part::Text { text } => (!text.trim().is_empty()).then(|| text.clone()),
        Part::Reasoning { text } => Some(format!("{REASONING}{text}")),
        Part::ToolCall {
            name,
            id: call,
            input,
        } => Some(format!(
            "{CALL_OPEN}{name}{}]\n{}{CALL_CLOSE}",
            id(call),
            bounded(input, MAX_TOOL_TEXT_BYTES)
        )),
        Part::ToolResult {
            id: call,
            output,
            is_error,
        } => Some(format!(
            "{}{}]\n{}{RESULT_CLOSE}",
            if *is_error { ERROR_OPEN } else { RESULT_OPEN },
            id(call),
            bounded(output, MAX_TOOL_TEXT_BYTES)
        )),
    }
}

/// The part a carried text block stands for: the inverse of [`part_text`]. Only read from
/// lines that carry the marker, so a person's own words are never taken for a tool call.
pub(crate) fn text_part(text: String) -> Part {
    if let Some(rest) = text.strip_prefix(REASONING) {
        return Part::Reasoning {
            text: rest.to_owned(),
        };
    }
    if let Some((header, body)) = tagged(&text, CALL_OPEN, CALL_CLOSE) {
        let (name, id) = split_id(header);
        return Part::ToolCall {
            name: name.to_owned(),
            id,
            input: body.to_owned(),
        };
    }
    for (open, is_error) in [(RESULT_OPEN, false), (ERROR_OPEN, true)] {
        if let Some((header, body)) = tagged(&text, open, RESULT_CLOSE)
            && (header.is_empty() || header.starts_with(" (id "))
        {
            let (_, id) = split_id(header);
            return Part::ToolResult {
                id,
                output: body.to_owned(),
                is_error,
            };
        }
    }
    Part::Text { text }
}

/// `open` + header + `]\n` + body + `close`: the header and the body.
fn tagged<'a>(text: &'a str, open: &str, close: &str) -> Option<(&'a str, &'a str)> {
    let inner = text.strip_prefix(open)?.strip_suffix(close)?;
    let (header, body) = inner.split_once("]\n")?;
    Some((header, body))
}

/// `name (id X)` → (`name`, `Some(X)`); `name` → (`name`, `None`).
fn split_id(header: &str) -> (&str, Option<String>) {
    if let Some(head) = header.strip_suffix(')')
        && let Some(at) = head.rfind(" (id ")
    {
        return (&head[..at], Some(head[at + 5..].to_owned()));
    }
    (header, None)
}

/// A UUID-shaped id (version 4 layout) derived from `seed`: lines of a written session get
/// stable ids that no other session shares, as the session id they derive from is fresh.
pub(crate) fn derived_uuid(seed: &str) -> String {
    let h = Sha256::digest(seed.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Whether `id` can name a session file: a plain name, no separators or dot-names.
pub(crate) fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

pub(crate) fn io_error(path: &Utf8Path, e: impl std::fmt::Display) -> TranscriptError {
    TranscriptError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// The messages worth writing: those with at least one part that has something to say. An
/// empty conversation is refused: there is nothing for a receiver to resume.
pub(crate) fn carried_messages(transcript: &Transcript) -> Result<Vec<&Message>, TranscriptError> {
    let messages: Vec<&Message> = transcript
        .messages
        .iter()
        .filter(|m| m.parts.iter().any(|p| part_text(p).is_some()))
        .collect();
    if messages.is_empty() {
        return Err(TranscriptError::Malformed {
            path: transcript.source.path.clone(),
            message: "nothing to carry: the conversation has no message with content".to_owned(),
        });
    }
    Ok(messages)
}

/// Creates `dir` and its missing parents, each new one private (0700).
pub(crate) fn private_dirs(dir: &Utf8Path) -> Result<(), TranscriptError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_error(dir, e))
}

/// Fails when `path` already exists: a carried session never replaces a file.
pub(crate) fn refuse_existing(path: &Utf8Path) -> Result<(), TranscriptError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Err(io_error(
            path,
            "the file already exists; a carried session never replaces one",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error(path, e)),
    }
}

/// Writes `bytes` to `path` atomically and without replacing anything: a private (0600)
/// temporary file in the same folder, linked to its name only if that name is free.
pub(crate) fn write_new(path: &Utf8Path, bytes: &[u8]) -> Result<(), TranscriptError> {
    let dir = path
        .parent()
        .ok_or_else(|| io_error(path, "no parent folder"))?;
    private_dirs(dir)?;
    refuse_existing(path)?;
    let name = path.file_name().unwrap_or("session");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io_error(&tmp, e))?;
        f.write_all(bytes).map_err(|e| io_error(&tmp, e))?;
        f.sync_all().map_err(|e| io_error(&tmp, e))?;
        // A hard link fails when the name is taken: no window in which a file written by
        // someone else could be replaced.
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(io_error(
                path,
                "the file already exists; a carried session never replaces one",
            )),
            // File systems without hard links: check, then rename.
            Err(_) => {
                refuse_existing(path)?;
                std::fs::rename(&tmp, path).map_err(|e| io_error(path, e))
            }
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

/// [`handoff_core::Sessions`] for an agent whose session store is read and written by
/// blocking functions of the module that invokes it: `read(path)`, `find(store, query)`,
/// `write(store, transcript, target, now)` and `copy(store, source, target)`. The three that
/// touch the store run off the async runtime ([`blocking`]); `now` is the time of the call.
macro_rules! blocking_sessions {
    ($agent:ty) => {
        #[async_trait::async_trait]
        impl handoff_core::Sessions for $agent {
            fn read_transcript(
                &self,
                path: &camino::Utf8Path,
            ) -> Result<handoff_core::Transcript, handoff_core::TranscriptError> {
                read(path)
            }

            async fn find_session(
                &self,
                store: &handoff_core::StoreEnv,
                query: &handoff_core::SessionQuery,
            ) -> Result<Option<handoff_core::SessionRef>, handoff_core::TranscriptError> {
                let (store, query) = (store.clone(), query.clone());
                $crate::store::blocking(move || find(&store, &query)).await
            }

            async fn write_session(
                &self,
                store: &handoff_core::StoreEnv,
                transcript: &handoff_core::Transcript,
                target: &handoff_core::CarryTarget,
            ) -> Result<handoff_core::CarriedSession, handoff_core::TranscriptError> {
                let (store, transcript, target) =
                    (store.clone(), transcript.clone(), target.clone());
                $crate::store::blocking(move || {
                    write(&store, &transcript, &target, &handoff_core::now_iso())
                })
                .await
            }

            async fn copy_session(
                &self,
                store: &handoff_core::StoreEnv,
                source: &handoff_core::SessionRef,
                target: &handoff_core::CarryTarget,
            ) -> Result<handoff_core::CarriedSession, handoff_core::TranscriptError> {
                let (store, source, target) = (store.clone(), source.clone(), target.clone());
                $crate::store::blocking(move || copy(&store, &source, &target)).await
            }
        }
    };
}
pub(crate) use blocking_sessions;

/// Runs blocking store work off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, TranscriptError> + Send + 'static,
) -> Result<T, TranscriptError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TranscriptError::Unsupported(format!("the store task failed: {e}")))?
}

/// A line with some of its string fields replaced. The raw text is edited in place when that
/// gives exactly the `edited` record (the usual compact JSON), so everything else in the line
/// stays byte for byte; otherwise the edited record is written out.
pub(crate) fn rewrite_line(raw: &str, edited: &Value, subs: &[(String, String)]) -> String {
    let mut text = raw.to_owned();
    for (from, to) in subs {
        text = text.replace(from.as_str(), to.as_str());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if &v == edited => text,
        _ => edited.to_string(),
    }
}

/// `"key":<value as JSON>`, as compact JSON writes it.
pub(crate) fn field_text(key: &str, value: &Value) -> String {
    format!("{}:{}", Value::String(key.to_owned()), value)
}

/// The first `x.y.z` in a `--version` line (`2.1.197 (Claude Code)`, `codex-cli 0.171.0`),
/// with a leading `v` and a pre-release or build suffix allowed.
pub(crate) fn version_triple(line: &str) -> Option<(u64, u64, u64)> {
    line.split_whitespace().find_map(|word| {
        let word = word.strip_prefix('v').unwrap_or(word);
        let core = word.split(['-', '+']).next()?;
        let mut it = core.split('.');
        let v = (
            it.next()?.parse().ok()?,
            it.next()?.parse().ok()?,
            it.next()?.parse().ok()?,
        );
        it.next().is_none().then_some(v)
    })
}

/// Whether `version` (a `--version` line) is at least `min`; else the one-line reason.
pub(crate) fn at_least(
    cli: &str,
    version: Option<&str>,
    min: (u64, u64, u64),
) -> Result<(), String> {
    let need = format!("{}.{}.{}", min.0, min.1, min.2);
    let Some(line) = version.map(str::trim).filter(|v| !v.is_empty()) else {
        return Err(format!(
            "{cli}'s version is unknown; resuming a carried conversation needs {need} or newer"
        ));
    };
    match version_triple(line) {
        Some(v) if v >= min => Ok(()),
        Some((a, b, c)) => Err(format!(
            "{cli} {a}.{b}.{c} is too old to resume a carried conversation: it needs {need} or newer"
        )),
        None => Err(format!(
            "cannot read {cli}'s version from '{line}'; resuming a carried conversation needs {need} or newer"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_the_first_line() {
        assert_eq!(version_triple("2.1.197 (Claude Code)"), Some((2, 1, 197)));
        assert_eq!(version_triple("codex-cli 0.171.0"), Some((0, 171, 0)));
        assert_eq!(
            version_triple("codex-cli 0.172.0-alpha.3"),
            Some((0, 172, 0))
        );
        assert_eq!(version_triple("v1.2.3"), Some((1, 2, 3)));
        assert_eq!(version_triple("claude"), None);
        assert_eq!(version_triple("1.2"), None);
        assert!(at_least("Codex", Some("codex-cli 0.171.0"), (0, 128, 0)).is_ok());
        let old = at_least("Codex", Some("codex-cli 0.99.1"), (0, 128, 0)).unwrap_err();
        assert!(old.contains("0.99.1") && old.contains("0.128.0"), "{old}");
        assert!(at_least("Codex", Some("garbage"), (0, 128, 0)).is_err());
        assert!(at_least("Codex", None, (0, 128, 0)).is_err());
    }

    #[test]
    fn derived_ids_are_uuid_shaped_and_stable() {
        let a = derived_uuid("s/0");
        assert_eq!(a, derived_uuid("s/0"));
        assert_ne!(a, derived_uuid("s/1"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn tagged_text_reads_back() {
        for part in [
            Part::Reasoning { text: "why".into() },
            Part::ToolCall {
                name: "Write".into(),
                id: Some("toolu_1".into()),
                input: "{\"a\":1}\n[/Tool call]".into(),
            },
            Part::ToolCall {
                name: "Bash".into(),
                id: None,
                input: String::new(),
            },
            Part::ToolResult {
                id: Some("c1".into()),
                output: "ok".into(),
                is_error: false,
            },
            Part::ToolResult {
                id: None,
                output: "boom".into(),
                is_error: true,
            },
        ] {
            assert_eq!(text_part(part_text(&part).unwrap()), part);
        }
    }
}
