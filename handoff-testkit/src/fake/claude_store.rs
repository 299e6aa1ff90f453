//! Claude Code's session store, kept in its real format:
//! `${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/<slug(cwd)>/<session-id>.jsonl`, one JSON object
//! per line, appended as the session runs.
//!
//! A turn is `queue-operation` enqueue and dequeue lines, the `user` line of the prompt, the
//! conversation lines of the answer (the `assistant` and tool-result `user` lines of the
//! stream-json output, in the transcript's envelope), then a `last-prompt` line. Conversation
//! lines chain through `parentUuid` to the previous line's `uuid`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::json::{J, obj};
use super::receiver::{canonical, safe_id};
use super::util;

/// The directory holding `projects/`: `CLAUDE_CONFIG_DIR`, else `$HOME/.claude`.
pub(crate) fn config_dir() -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("CLAUDE_CONFIG_DIR") {
        return Some(PathBuf::from(dir));
    }
    non_empty("HOME").map(|h| PathBuf::from(h).join(".claude"))
}

/// The project folder name of directory `path`: every character that is not an ASCII letter or
/// digit becomes `-` (one per UTF-16 unit, as Claude Code's JavaScript replaces them); a name
/// longer than 200 characters is cut there and suffixed with `-` and a base-36 hash of the path.
pub(crate) fn slug(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            for _ in 0..c.len_utf16() {
                out.push('-');
            }
        }
    }
    if out.len() <= 200 {
        return out;
    }
    let mut hash: i32 = 0;
    for unit in path.encode_utf16() {
        hash = hash
            .wrapping_shl(5)
            .wrapping_sub(hash)
            .wrapping_add(i32::from(unit));
    }
    format!("{}-{}", &out[..200], base36(i64::from(hash).unsigned_abs()))
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if n == 0 {
        return "0".to_owned();
    }
    let mut digits = Vec::new();
    while n > 0 {
        digits.push(DIGITS[usize::try_from(n % 36).unwrap_or(0)]);
        n /= 36;
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// The project folder of `cwd` under `config`.
pub(crate) fn project_dir(config: &Path, cwd: &Path) -> PathBuf {
    config
        .join("projects")
        .join(slug(&canonical(cwd).to_string_lossy()))
}

/// Every `projects/*/<id>.jsonl`.
fn all_named(config: &Path, id: &str) -> Vec<PathBuf> {
    if !safe_id(id) {
        return Vec::new();
    }
    let name = format!("{id}.jsonl");
    let Ok(entries) = std::fs::read_dir(config.join("projects")) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path().join(&name))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// Whether a session named `id` exists in any project folder.
pub(crate) fn exists(config: &Path, id: &str) -> bool {
    !all_named(config, id).is_empty()
}

/// The session `id` as resumable from `cwd`: the file in `cwd`'s project folder, else one in
/// another folder whose lines record `cwd` as their directory. Sessions of other directories are
/// not found, as in Claude Code.
pub(crate) fn find(config: &Path, cwd: &Path, id: &str) -> Option<PathBuf> {
    if !safe_id(id) {
        return None;
    }
    let own = project_dir(config, cwd).join(format!("{id}.jsonl"));
    if own.is_file() {
        return Some(own);
    }
    let cwd = canonical(cwd);
    all_named(config, id)
        .into_iter()
        .find(|p| recorded_cwd(&read_lines(p)).is_some_and(|c| canonical(Path::new(&c)) == cwd))
}

/// The lines of a session file that are JSON objects.
pub(crate) fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read(path)
        .map(|bytes| {
            bytes
                .split(|b| *b == b'\n')
                .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
                .filter(Value::is_object)
                .collect()
        })
        .unwrap_or_default()
}

fn recorded_cwd(lines: &[Value]) -> Option<String> {
    lines
        .iter()
        .find_map(|l| l.get("cwd").and_then(Value::as_str).map(str::to_owned))
}

/// The `uuid` of the last line of the main conversation (sidechains left out).
pub(crate) fn last_uuid(lines: &[Value]) -> Option<String> {
    lines
        .iter()
        .rev()
        .filter(|l| l.get("isSidechain").and_then(Value::as_bool) != Some(true))
        .find_map(|l| l.get("uuid").and_then(Value::as_str).map(str::to_owned))
}

/// The text of the last assistant line of the main conversation that has text (API error
/// placeholders left out).
pub(crate) fn last_assistant_text(lines: &[Value]) -> Option<String> {
    lines.iter().rev().find_map(|l| {
        if l.get("type").and_then(Value::as_str) != Some("assistant")
            || l.get("isSidechain").and_then(Value::as_bool) == Some(true)
            || l.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true)
        {
            return None;
        }
        let content = l.get("message")?.get("content")?;
        let text = match content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        (!text.trim().is_empty()).then_some(text)
    })
}

/// Copies session `src` (id `src_id`) to `dest` as session `new_id`: every line that names the
/// session names the new one; the rest is kept byte for byte.
pub(crate) fn fork(src: &Path, src_id: &str, dest: &Path, new_id: &str) -> std::io::Result<()> {
    let bytes = std::fs::read(src)?;
    let text = String::from_utf8_lossy(&bytes);
    let from = format!("\"sessionId\":\"{src_id}\"");
    let to = format!("\"sessionId\":\"{new_id}\"");
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if body.contains(&from) {
            out.push_str(&body.replace(&from, &to));
        } else if let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(body)
            && map.get("sessionId").and_then(Value::as_str) == Some(src_id)
        {
            map.insert("sessionId".to_owned(), Value::from(new_id));
            out.push_str(&Value::Object(map).to_string());
        } else {
            out.push_str(body);
        }
        out.push_str(end);
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir)?;
    }
    util::write_atomic(dest, out.as_bytes())
}

/// Appends `lines` to the session file `path` (created if missing) in one write.
pub(crate) fn append(path: &Path, lines: &[J]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut text = String::new();
    // A file that does not end its last line gets one first, so lines never run together.
    if std::fs::read(path).is_ok_and(|b| !b.is_empty() && !b.ends_with(b"\n")) {
        text.push('\n');
    }
    for line in lines {
        text.push_str(&line.render());
        text.push('\n');
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// What every conversation line of a session records about where it ran.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    pub(crate) session_id: String,
    pub(crate) cwd: String,
    pub(crate) version: String,
    pub(crate) git_branch: String,
    pub(crate) permission_mode: String,
}

impl Envelope {
    fn tail(&self, line: &mut J) {
        line.push("userType", "external");
        line.push("entrypoint", "sdk-cli");
        line.push("cwd", &self.cwd);
        line.push("sessionId", &self.session_id);
        line.push("version", &self.version);
        line.push("gitBranch", &self.git_branch);
    }

    /// The lines that open a turn: the queued prompt and its `user` line (chained to `parent`).
    /// Returns them and the `uuid` of the `user` line.
    pub(crate) fn prompt_lines(
        &self,
        parent: Option<&str>,
        prompt_id: &str,
        prompt: &str,
    ) -> (Vec<J>, String) {
        let uuid = util::uuid();
        let enqueue = obj! {
            "type" => "queue-operation",
            "operation" => "enqueue",
            "timestamp" => util::iso_now(),
            "sessionId" => &self.session_id,
            "content" => prompt,
        };
        let dequeue = obj! {
            "type" => "queue-operation",
            "operation" => "dequeue",
            "timestamp" => util::iso_now(),
            "sessionId" => &self.session_id,
        };
        let mut user = obj! {
            "parentUuid" => parent,
            "isSidechain" => false,
            "promptId" => prompt_id,
            "type" => "user",
            "message" => obj! { "role" => "user", "content" => prompt },
            "uuid" => &uuid,
            "timestamp" => util::iso_now(),
            "permissionMode" => &self.permission_mode,
            "promptSource" => "sdk",
        };
        self.tail(&mut user);
        (vec![enqueue, dequeue, user], uuid)
    }

    /// The transcript lines of a turn's stream-json `assistant` and `user` events, chained from
    /// `parent`, then the `last-prompt` line.
    pub(crate) fn answer_lines(
        &self,
        parent: &str,
        prompt_id: &str,
        prompt: &str,
        events: &[J],
    ) -> Vec<J> {
        let mut out = Vec::new();
        let mut parent = parent.to_owned();
        let mut last_assistant: Option<String> = None;
        for event in events {
            let kind = event.str_field("type").unwrap_or("");
            if kind != "assistant" && kind != "user" {
                continue;
            }
            let uuid = event
                .str_field("uuid")
                .map_or_else(util::uuid, str::to_owned);
            let mut message = event.get("message").cloned().unwrap_or(J::Null);
            let mut line = obj! { "parentUuid" => &parent, "isSidechain" => false };
            if kind == "user" {
                line.push("promptId", prompt_id);
                line.push("type", "user");
                line.push("message", message);
                line.push("uuid", &uuid);
                line.push("timestamp", util::iso_now());
                if let Some(result) = event.get("tool_use_result") {
                    line.push("toolUseResult", result.clone());
                }
                if let Some(a) = &last_assistant {
                    line.push("sourceToolAssistantUUID", a);
                }
            } else {
                let uses_tool = matches!(
                    message.get("content"),
                    Some(J::Arr(blocks)) if blocks.iter().any(|b| b.str_field("type") == Some("tool_use"))
                );
                let stop = if event.get("error").is_some() {
                    "stop_sequence"
                } else if uses_tool {
                    "tool_use"
                } else {
                    "end_turn"
                };
                message.set("stop_reason", stop);
                line.push("message", message);
                line.push("requestId", util::short_id("req_"));
                line.push("type", "assistant");
                line.push("uuid", &uuid);
                line.push("timestamp", util::iso_now());
                if let Some(error) = event.get("error") {
                    line.push("error", error.clone());
                    line.push("isApiErrorMessage", true);
                }
                last_assistant = Some(uuid.clone());
            }
            self.tail(&mut line);
            out.push(line);
            parent = uuid;
        }
        out.push(obj! {
            "type" => "last-prompt",
            "lastPrompt" => prompt,
            "leafUuid" => &parent,
            "sessionId" => &self.session_id,
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::json::arr;

    fn envelope(id: &str) -> Envelope {
        Envelope {
            session_id: id.to_owned(),
            cwd: "/w/repo".to_owned(),
            version: "2.1.197".to_owned(),
            git_branch: "main".to_owned(),
            permission_mode: "dontAsk".to_owned(),
        }
    }

    fn assistant_event(text: &str) -> J {
        obj! {
            "type" => "assistant",
            "message" => obj! {
                "id" => "msg_1",
                "type" => "message",
                "role" => "assistant",
                "model" => "m",
                "content" => arr![obj! { "type" => "text", "text" => text }],
                "stop_reason" => J::Null,
            },
            "session_id" => "x",
            "uuid" => "a-uuid",
        }
    }

    fn parse(lines: &[J]) -> Vec<Value> {
        lines
            .iter()
            .map(|l| serde_json::from_str(&l.render()).unwrap())
            .collect()
    }

    #[test]
    fn slugs_as_claude_code_makes_them() {
        assert_eq!(slug("/home/u/my_proj.v2"), "-home-u-my-proj-v2");
        assert_eq!(slug("C:\\Users\\x"), "C--Users-x");
        assert_eq!(slug("/tmp/é"), "-tmp--");
        assert_eq!(slug("/tmp/😀"), "-tmp---");
        let long = format!("/{}", "a".repeat(250));
        let s = slug(&long);
        assert!(s.starts_with(&format!("-{}", "a".repeat(199))), "{s}");
        assert_eq!(s.as_bytes()[200], b'-');
        assert!(
            s[201..]
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
        );
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36 * 36), "100");
    }

    #[test]
    fn a_turn_is_a_chained_prompt_and_answer() {
        let e = envelope("s1");
        let (opening, user) = e.prompt_lines(None, "p1", "Finish the parser.");
        let answer = e.answer_lines(
            &user,
            "p1",
            "Finish the parser.",
            &[assistant_event("Done.")],
        );
        let lines = parse(&[opening, answer].concat());
        let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "queue-operation",
                "queue-operation",
                "user",
                "assistant",
                "last-prompt"
            ]
        );
        let (u, a) = (&lines[2], &lines[3]);
        assert!(u["parentUuid"].is_null());
        assert_eq!(u["message"]["content"], "Finish the parser.");
        assert_eq!(u["uuid"], user.as_str());
        assert_eq!(a["parentUuid"], user.as_str());
        assert_eq!(a["message"]["stop_reason"], "end_turn");
        for l in [u, a] {
            assert_eq!(l["sessionId"], "s1");
            assert_eq!(l["cwd"], "/w/repo");
            assert_eq!(l["version"], "2.1.197");
            assert_eq!(l["gitBranch"], "main");
            assert_eq!(l["isSidechain"], false);
        }
        assert_eq!(lines[4]["leafUuid"], a["uuid"]);
        assert_eq!(last_uuid(&lines).as_deref(), a["uuid"].as_str());
        assert_eq!(last_assistant_text(&lines).as_deref(), Some("Done."));
    }

    #[test]
    fn forks_rename_the_session_and_keep_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("a.jsonl");
        let other = r#"{"type":"mode","mode":"normal"}"#;
        let spaced = r#"{"type": "user", "sessionId": "a", "uuid": "u1"}"#;
        std::fs::write(
            &src,
            format!("{{\"type\":\"user\",\"sessionId\":\"a\",\"uuid\":\"u0\"}}\n{other}\n{spaced}"),
        )
        .unwrap();
        let dest = tmp.path().join("p/b.jsonl");
        fork(&src, "a", &dest, "b").unwrap();
        let text = std::fs::read_to_string(&dest).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], r#"{"type":"user","sessionId":"b","uuid":"u0"}"#);
        assert_eq!(lines[1], other);
        let third: Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(third["sessionId"], "b");
        assert!(text.ends_with('\n'));
        assert!(std::fs::read_to_string(&src).unwrap().contains("\"a\""));
    }

    #[test]
    fn sessions_are_found_from_their_directory_only() {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("claude");
        let repo = tmp.path().join("repo");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        let id = "6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f";
        let path = project_dir(&config, &repo).join(format!("{id}.jsonl"));
        let mut e = envelope(id);
        e.cwd = canonical(&repo).to_string_lossy().into_owned();
        append(&path, &e.prompt_lines(None, "p", "hi").0).unwrap();
        assert_eq!(find(&config, &repo, id), Some(path.clone()));
        assert_eq!(find(&config, &elsewhere, id), None);
        assert_eq!(find(&config, &repo, "../x"), None);
        assert!(exists(&config, id));
        // A folder with another name whose lines record the directory.
        let odd = config.join("projects/odd-name").join(format!("{id}.jsonl"));
        std::fs::create_dir_all(odd.parent().unwrap()).unwrap();
        std::fs::rename(&path, &odd).unwrap();
        assert_eq!(find(&config, &repo, id), Some(odd));
    }
}
