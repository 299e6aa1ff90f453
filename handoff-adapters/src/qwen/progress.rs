//! Live progress from `qwen -o stream-json`, one line at a time.

use handoff_core::ProgressEvent;
use serde_json::Value;

use crate::common::{json_line, string_field};

/// Tools that write the file named by their input.
const WRITERS: [&str; 2] = ["write_file", "edit"];

/// One event line: an `assistant` message is a turn; each of its `tool_use` blocks a tool call
/// (file tools name their file).
pub(super) fn events(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json_line(line) else {
        return Vec::new();
    };
    if v.get("type").and_then(Value::as_str) != Some("assistant") {
        return Vec::new();
    }
    let mut out = vec![ProgressEvent::Turn];
    let blocks = v.pointer("/message/content").and_then(Value::as_array);
    for block in blocks.into_iter().flatten() {
        if block.get("type").and_then(Value::as_str) != Some("tool_use") {
            continue;
        }
        let name = block.get("name").and_then(Value::as_str).unwrap_or("tool");
        let input = block.get("input").cloned().unwrap_or(Value::Null);
        let path = string_field(&input, &["file_path", "path"]);
        match path {
            Some(p) if WRITERS.contains(&name) => out.push(ProgressEvent::file(p)),
            _ => out.push(ProgressEvent::tool(
                name,
                path.or_else(|| string_field(&input, &["command", "pattern", "url"])),
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::progress_checks::{all, assert_garbage_gives_nothing};

    #[test]
    fn qwen_turns_and_tools() {
        let recorded = include_str!("../../tests/it/fixtures/qwen-write.out");
        assert_eq!(
            all(events, recorded),
            ["thinking", "edited $SCRATCH/work/out.txt", "thinking"]
        );
        let shell = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"run_shell_command","input":{"command":"ls -la"}}]}}"#;
        assert_eq!(
            all(events, shell),
            ["thinking", "run_shell_command: ls -la"]
        );
    }

    #[test]
    fn garbage_gives_nothing() {
        assert_garbage_gives_nothing(events);
    }
}
