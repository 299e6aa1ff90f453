//! Codex's session store, kept in its real format: one rollout per thread,
//! `${CODEX_HOME:-$HOME/.codex}/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<thread id>.jsonl`,
//! each line `{"timestamp", "ordinal", "type", "payload"}`.
//!
//! A new thread starts with `session_meta`. Each turn then adds `event_msg` `task_started`, the
//! injected `<environment_context>` user message, `turn_context`, the prompt as a `response_item`
//! user message (`input_text`) and an `event_msg` `user_message`; then, when the agent wrote a
//! file, the `function_call` and its `function_call_output`; then the answer as an `event_msg`
//! `agent_message` and a `response_item` assistant message (`output_text`); and
//! `event_msg` `task_complete`. Resuming appends a turn to the same file.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::json::{J, arr, obj};
use super::receiver::safe_id;
use super::util;

/// `CODEX_HOME`, else `$HOME/.codex`.
pub(crate) fn codex_home() -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("CODEX_HOME") {
        return Some(PathBuf::from(dir));
    }
    non_empty("HOME").map(|h| PathBuf::from(h).join(".codex"))
}

/// Where a thread started now is written.
pub(crate) fn new_path(home: &Path, id: &str) -> PathBuf {
    let now = util::iso_now();
    let (y, m, d) = (&now[0..4], &now[5..7], &now[8..10]);
    let time = now[11..19].replace(':', "-");
    home.join("sessions")
        .join(y)
        .join(m)
        .join(d)
        .join(format!("rollout-{y}-{m}-{d}T{time}-{id}.jsonl"))
}

/// The rollout of thread `id`, in any date folder.
pub(crate) fn find(home: &Path, id: &str) -> Option<PathBuf> {
    if !safe_id(id) {
        return None;
    }
    let suffix = format!("-{id}.jsonl");
    let mut stack = vec![home.join("sessions")];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if name.starts_with("rollout-") && name.ends_with(&suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found.pop()
}

/// The records of a rollout that are JSON objects.
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

/// The text of the last assistant message of a rollout.
pub(crate) fn last_assistant_text(lines: &[Value]) -> Option<String> {
    lines.iter().rev().find_map(|l| {
        if l.get("type").and_then(Value::as_str) != Some("response_item") {
            return None;
        }
        let p = l.get("payload")?;
        if p.get("type").and_then(Value::as_str) != Some("message")
            || p.get("role").and_then(Value::as_str) != Some("assistant")
        {
            return None;
        }
        let text = p
            .get("content")?
            .as_array()?
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        (!text.trim().is_empty()).then_some(text)
    })
}

/// A new thread's first record.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) id: String,
    pub(crate) cwd: String,
    pub(crate) cli_version: String,
    pub(crate) model_provider: String,
    pub(crate) git_branch: String,
}

/// One turn, as recorded.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    pub(crate) turn_id: String,
    pub(crate) cwd: String,
    pub(crate) model: String,
    pub(crate) sandbox: String,
    pub(crate) prompt: String,
}

impl Turn {
    /// A turn with a fresh turn id.
    pub(crate) fn new(cwd: &str, model: &str, sandbox: &str, prompt: &str) -> Turn {
        Turn {
            turn_id: super::receiver::codex_thread_id(),
            cwd: cwd.to_owned(),
            model: model.to_owned(),
            sandbox: sandbox.to_owned(),
            prompt: prompt.to_owned(),
        }
    }
}

/// Appends records to a rollout, numbering them on from the records already there.
pub(crate) struct Writer {
    path: PathBuf,
    next: usize,
}

impl Writer {
    /// A writer for the rollout at `path` (which may not exist yet).
    pub(crate) fn open(path: &Path) -> Writer {
        let next = std::fs::read(path)
            .map(|b| {
                b.split(|c| *c == b'\n')
                    .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                    .count()
            })
            .unwrap_or(0);
        Writer {
            path: path.to_owned(),
            next,
        }
    }

    fn record(&mut self, kind: &str, payload: J) -> J {
        let ordinal = self.next;
        self.next += 1;
        obj! {
            "timestamp" => util::iso_now(),
            "ordinal" => ordinal,
            "type" => kind,
            "payload" => payload,
        }
    }

    fn write(&self, records: &[J]) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut text = String::new();
        if std::fs::read(&self.path).is_ok_and(|b| !b.is_empty() && !b.ends_with(b"\n")) {
            text.push('\n');
        }
        for r in records {
            text.push_str(&r.render());
            text.push('\n');
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    }

    /// Writes the `session_meta` that opens a new thread.
    pub(crate) fn start(&mut self, meta: &Meta) -> std::io::Result<()> {
        let payload = obj! {
            "session_id" => &meta.id,
            "id" => &meta.id,
            "timestamp" => util::iso_now(),
            "cwd" => &meta.cwd,
            "runtime_workspace_roots" => arr![&meta.cwd],
            "originator" => "codex_exec",
            "cli_version" => &meta.cli_version,
            "source" => "exec",
            "thread_source" => "user",
            "model_provider" => &meta.model_provider,
            "base_instructions" => obj! {
                "text" => "You are a coding agent running in the Codex CLI, a terminal-based coding assistant.",
            },
            "git" => obj! { "branch" => &meta.git_branch },
        };
        let r = self.record("session_meta", payload);
        self.write(&[r])
    }

    /// Writes the opening of a turn: up to the person's prompt.
    pub(crate) fn begin(&mut self, turn: &Turn) -> std::io::Result<()> {
        let secs = util::now_millis() / 1000;
        let mut records = Vec::new();
        let payload = obj! {
            "type" => "task_started",
            "turn_id" => &turn.turn_id,
            "started_at" => secs,
            "model_context_window" => 258_400,
            "collaboration_mode_kind" => "default",
        };
        records.push(self.record("event_msg", payload));
        let context = format!(
            "<environment_context>\n  <cwd>{}</cwd>\n  <shell>bash</shell>\n</environment_context>",
            turn.cwd
        );
        let payload = obj! {
            "type" => "message",
            "id" => format!("msg_{}", super::receiver::codex_thread_id()),
            "role" => "user",
            "content" => arr![obj! { "type" => "input_text", "text" => context }],
        };
        records.push(self.record("response_item", payload));
        let payload = obj! {
            "turn_id" => &turn.turn_id,
            "cwd" => &turn.cwd,
            "approval_policy" => "never",
            "sandbox_policy" => obj! { "type" => &turn.sandbox },
            "model" => &turn.model,
            "summary" => "none",
        };
        records.push(self.record("turn_context", payload));
        let payload = obj! {
            "type" => "message",
            "id" => format!("msg_{}", super::receiver::codex_thread_id()),
            "role" => "user",
            "content" => arr![obj! { "type" => "input_text", "text" => &turn.prompt }],
        };
        records.push(self.record("response_item", payload));
        let payload = obj! {
            "type" => "user_message",
            "message" => &turn.prompt,
            "images" => arr![],
            "local_images" => arr![],
            "text_elements" => arr![],
        };
        records.push(self.record("event_msg", payload));
        self.write(&records)
    }

    /// Writes the rest of a turn: the command that wrote a file, if any, then the answer
    /// (`None`: the model call failed) and the turn's completion.
    pub(crate) fn finish(
        &mut self,
        turn: &Turn,
        command: Option<&str>,
        answer: Option<&str>,
    ) -> std::io::Result<()> {
        let mut records = Vec::new();
        if let Some(command) = command {
            let call_id = util::short_id("call_");
            let arguments = serde_json::json!({ "cmd": command }).to_string();
            let payload = obj! {
                "type" => "function_call",
                "status" => "completed",
                "id" => util::short_id("fc_"),
                "name" => "exec_command",
                "arguments" => arguments,
                "call_id" => &call_id,
            };
            records.push(self.record("response_item", payload));
            let payload = obj! {
                "type" => "function_call_output",
                "call_id" => &call_id,
                "output" => "Process exited with code 0",
            };
            records.push(self.record("response_item", payload));
        }
        match answer {
            Some(text) => {
                let payload = obj! { "type" => "agent_message", "message" => text };
                records.push(self.record("event_msg", payload));
                let payload = obj! {
                    "type" => "message",
                    "status" => "completed",
                    "id" => util::short_id("msg_"),
                    "role" => "assistant",
                    "content" => arr![obj! {
                        "type" => "output_text",
                        "text" => text,
                        "annotations" => arr![],
                    }],
                };
                records.push(self.record("response_item", payload));
            }
            None => {
                let payload = obj! {
                    "type" => "error",
                    "message" => "unexpected status 500 Internal Server Error: internal error",
                };
                records.push(self.record("event_msg", payload));
            }
        }
        let payload = obj! {
            "type" => "task_complete",
            "turn_id" => &turn.turn_id,
            "last_agent_message" => answer,
        };
        records.push(self.record("event_msg", payload));
        self.write(&records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: &str) -> Meta {
        Meta {
            id: id.to_owned(),
            cwd: "/w/repo".to_owned(),
            cli_version: "0.171.0".to_owned(),
            model_provider: "openai".to_owned(),
            git_branch: "main".to_owned(),
        }
    }

    #[test]
    fn a_new_thread_then_a_resumed_turn() {
        let tmp = tempfile::tempdir().unwrap();
        let id = super::super::receiver::codex_thread_id();
        let path = new_path(tmp.path(), &id);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("rollout-20") && name.ends_with(&format!("-{id}.jsonl")));
        assert_eq!(name.len(), "rollout-YYYY-MM-DDThh-mm-ss-".len() + 36 + 6);
        let mut w = Writer::open(&path);
        w.start(&meta(&id)).unwrap();
        let turn = Turn::new("/w/repo", "fake-model", "workspace-write", "first");
        w.begin(&turn).unwrap();
        w.finish(&turn, Some("touch a"), Some("One.")).unwrap();
        assert_eq!(find(tmp.path(), &id), Some(path.clone()));
        assert_eq!(find(tmp.path(), "0000"), None);
        assert_eq!(find(tmp.path(), "../x"), None);

        let mut w = Writer::open(&path);
        let turn = Turn::new("/w/repo", "fake-model", "read-only", "second");
        w.begin(&turn).unwrap();
        w.finish(&turn, None, Some("Two.")).unwrap();

        let lines = read_lines(&path);
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["ordinal"], i, "{l}");
            assert!(l["timestamp"].as_str().unwrap().ends_with('Z'));
        }
        assert_eq!(lines[0]["type"], "session_meta");
        assert_eq!(lines[0]["payload"]["id"], id.as_str());
        assert_eq!(lines[0]["payload"]["cwd"], "/w/repo");
        assert_eq!(
            lines.iter().filter(|l| l["type"] == "session_meta").count(),
            1
        );
        let said: Vec<(String, String)> = lines
            .iter()
            .filter(|l| l["type"] == "response_item" && l["payload"]["type"] == "message")
            .map(|l| {
                (
                    l["payload"]["role"].as_str().unwrap().to_owned(),
                    l["payload"]["content"][0]["text"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                )
            })
            .filter(|(_, t)| !t.starts_with("<environment_context>"))
            .collect();
        let pairs: Vec<(&str, &str)> = said.iter().map(|(r, t)| (r.as_str(), t.as_str())).collect();
        assert_eq!(
            pairs,
            [
                ("user", "first"),
                ("assistant", "One."),
                ("user", "second"),
                ("assistant", "Two.")
            ]
        );
        let events: Vec<&str> = lines
            .iter()
            .filter(|l| l["type"] == "event_msg")
            .map(|l| l["payload"]["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            events,
            [
                "task_started",
                "user_message",
                "agent_message",
                "task_complete",
                "task_started",
                "user_message",
                "agent_message",
                "task_complete"
            ]
        );
        assert_eq!(last_assistant_text(&lines).as_deref(), Some("Two."));
    }

    #[test]
    fn a_failed_turn_has_no_answer() {
        let tmp = tempfile::tempdir().unwrap();
        let path = new_path(tmp.path(), "t");
        let mut w = Writer::open(&path);
        w.start(&meta("t")).unwrap();
        let turn = Turn::new("/w", "m", "read-only", "go");
        w.begin(&turn).unwrap();
        w.finish(&turn, None, None).unwrap();
        let lines = read_lines(&path);
        assert_eq!(last_assistant_text(&lines), None);
        assert!(lines.last().unwrap()["payload"]["last_agent_message"].is_null());
    }
}
