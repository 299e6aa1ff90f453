//! Live progress from Claude Code's `stream-json`, one line at a time.

use handoff_core::ProgressEvent;
use serde_json::Value;

use crate::common::{json_line, string_field};

/// Tools that write the file named by their input.
const WRITERS: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// One `stream-json` line of Claude Code: an assistant message is a turn, each `tool_use` in
/// it a tool call (file tools name their file).
pub(super) fn events(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json_line(line) else {
        return Vec::new();
    };
    if v.get("type").and_then(Value::as_str) != Some("assistant") {
        return Vec::new();
    }
    let mut events = vec![ProgressEvent::Turn];
    let content = v
        .pointer("/message/content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for part in content {
        if part.get("type").and_then(Value::as_str) != Some("tool_use") {
            continue;
        }
        let name = part.get("name").and_then(Value::as_str).unwrap_or("tool");
        let input = part.get("input").cloned().unwrap_or(Value::Null);
        let path = string_field(&input, &["file_path", "notebook_path"]);
        match path {
            Some(p) if WRITERS.contains(&name) => events.push(ProgressEvent::file(p)),
            _ => events.push(ProgressEvent::tool(
                name,
                path.or_else(|| string_field(&input, &["command", "pattern", "url", "query"])),
            )),
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::progress_checks::{all, assert_garbage_gives_nothing};

    #[test]
    fn claude_turns_tools_and_files() {
        let stream = r#"{"type":"system","subtype":"init","session_id":"s"}
{"type":"assistant","message":{"content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test\nmore"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Write","input":{"file_path":"/r/src/a.rs","content":"x"}},{"type":"tool_use","id":"t3","name":"Grep","input":{"pattern":"fn main"}}]}}
not json
{"type":"result","subtype":"success"}"#;
        assert_eq!(
            all(events, stream),
            [
                "thinking",
                "Bash: cargo test",
                "thinking",
                "edited /r/src/a.rs",
                "Grep: fn main"
            ]
        );
    }

    #[test]
    fn recorded_real_stream() {
        assert_eq!(
            all(
                events,
                include_str!("../../tests/it/fixtures/claude-write.out")
            ),
            [
                "thinking",
                "edited $SCRATCH/repo-claude/hello.txt",
                "thinking"
            ]
        );
    }

    #[test]
    fn garbage_gives_nothing() {
        assert_garbage_gives_nothing(events);
    }
}
