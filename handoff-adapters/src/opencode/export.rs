//! A conversation written as an OpenCode export, for `opencode import`: a neutral transcript as
//! a new session, or a copy of an export under fresh ids.
//!
//! Ids are `<prefix>_` + 12 hex digits of `(ms × 4096 + counter) mod 2⁴⁸` + 14 base-62
//! characters; session ids use the bitwise complement of the number (newest sort first),
//! message and part ids the number itself (oldest first).

use std::collections::BTreeMap;

use camino::Utf8Path;
use handoff_core::{Part, Role, Transcript};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The OpenCode version written into a carried session: the release its format was checked
/// against with the real CLI.
pub(crate) const FORMAT_VERSION: &str = "1.18.33";

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

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

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
pub(super) fn split_model(model: &str) -> Option<(String, String)> {
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

#[cfg(test)]
mod tests {
    use super::super::transcript::iso_from_ms;
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
}
