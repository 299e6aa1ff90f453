//! Live progress from `gemini --output-format stream-json`, one line at a time.

use handoff_core::ProgressEvent;
use serde_json::Value;

use crate::common::{json_line, string_field};

/// Tools that write the file named by their input.
const WRITERS: [&str; 2] = ["write_file", "replace"];

/// One event line: a `tool_use` is a tool call (file tools name their file).
pub(super) fn events(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json_line(line) else {
        return Vec::new();
    };
    if v.get("type").and_then(Value::as_str) != Some("tool_use") {
        return Vec::new();
    }
    let name = v.get("tool_name").and_then(Value::as_str).unwrap_or("tool");
    let input = v.get("parameters").cloned().unwrap_or(Value::Null);
    let path = string_field(&input, &["file_path", "dir_path", "path"]);
    match path {
        Some(p) if WRITERS.contains(&name) => vec![ProgressEvent::file(p)],
        _ => vec![ProgressEvent::tool(
            name,
            path.or_else(|| string_field(&input, &["command", "pattern", "url", "query"])),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::progress_checks::{all, assert_garbage_gives_nothing};

    #[test]
    fn gemini_tools() {
        let recorded = include_str!("../../tests/it/fixtures/gemini-write.out");
        assert_eq!(
            all(events, recorded),
            ["edited /tmp/gemini-e2e/repo/out.txt"]
        );
        let shell = r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"x","parameters":{"command":"ls -la"}}"#;
        assert_eq!(all(events, shell), ["run_shell_command: ls -la"]);
    }

    #[test]
    fn garbage_gives_nothing() {
        assert_garbage_gives_nothing(events);
    }
}
