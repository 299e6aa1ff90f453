//! Live progress from `codex exec --json`, one line at a time.

use handoff_core::ProgressEvent;
use serde_json::Value;

use crate::common::{json_line, string_field};

/// One `--json` line of `codex exec`: a started turn, a started command or tool call, and the
/// files of a completed file change.
pub(super) fn events(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json_line(line) else {
        return Vec::new();
    };
    let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
    if kind == "turn.started" {
        return vec![ProgressEvent::Turn];
    }
    let Some(item) = v.get("item") else {
        return Vec::new();
    };
    let item_type = item.get("type").and_then(Value::as_str).unwrap_or_default();
    match (kind, item_type) {
        ("item.started", "command_execution") => {
            vec![ProgressEvent::tool(
                "shell",
                string_field(item, &["command"]),
            )]
        }
        ("item.started", "mcp_tool_call") => vec![ProgressEvent::tool(
            string_field(item, &["tool"]).unwrap_or("mcp"),
            string_field(item, &["server"]),
        )],
        ("item.started", "web_search") => {
            vec![ProgressEvent::tool(
                "web_search",
                string_field(item, &["query"]),
            )]
        }
        ("item.completed", "file_change") => item
            .get("changes")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|c| c.get("path").and_then(Value::as_str))
            .map(ProgressEvent::file)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::progress_checks::{all, assert_garbage_gives_nothing};

    #[test]
    fn codex_commands_and_file_changes() {
        let stream = r#"{"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'cargo test'","status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'cargo test'","exit_code":0}}
{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/r/a.rs","kind":"update"},{"path":"/r/b.rs","kind":"add"}],"status":"completed"}}
{"type":"item.started","item":{"id":"item_3","type":"mcp_tool_call","server":"docs","tool":"search"}}
{"type":"item.completed","item":{"id":"item_4","type":"agent_message","text":"Done."}}"#;
        assert_eq!(
            all(events, stream),
            [
                "thinking",
                "shell: /bin/bash -lc 'cargo test'",
                "edited /r/a.rs",
                "edited /r/b.rs",
                "search: docs"
            ]
        );
    }

    #[test]
    fn recorded_real_stream() {
        assert_eq!(
            all(
                events,
                include_str!("../../tests/it/fixtures/codex-write.out")
            ),
            [
                "thinking",
                "shell: /bin/bash -lc 'printf %s \"hello from codex tool call\" > $SCRATCH/repo-codex/hello.txt'"
            ]
        );
    }

    #[test]
    fn garbage_gives_nothing() {
        assert_garbage_gives_nothing(events);
    }
}
