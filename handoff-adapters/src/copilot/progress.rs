//! Live progress from `copilot --output-format json`, one line at a time.

use handoff_core::ProgressEvent;
use serde_json::Value;

use crate::common::{json_line, string_field};

/// Tools that write the file named by their input.
const WRITERS: [&str; 2] = ["create", "edit"];

/// One event line: `assistant.turn_start` is a turn (the count handoff's turn limit keeps), a
/// `tool.execution_start` a tool call (file tools name their file).
pub(super) fn events(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json_line(line) else {
        return Vec::new();
    };
    match v.get("type").and_then(Value::as_str) {
        Some("assistant.turn_start") => vec![ProgressEvent::Turn],
        Some("tool.execution_start") => {
            let data = v.get("data").cloned().unwrap_or(Value::Null);
            let name = data
                .get("toolName")
                .and_then(Value::as_str)
                .unwrap_or("tool");
            let input = data.get("arguments").cloned().unwrap_or(Value::Null);
            let path = string_field(&input, &["path"]);
            match path {
                Some(p) if WRITERS.contains(&name) => vec![ProgressEvent::file(p)],
                _ => vec![ProgressEvent::tool(
                    name,
                    path.or_else(|| string_field(&input, &["command", "pattern", "url"])),
                )],
            }
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::progress_checks::{all, assert_garbage_gives_nothing};

    #[test]
    fn copilot_turns_and_tools() {
        let recorded = include_str!("../../tests/it/fixtures/copilot-write.out");
        assert_eq!(
            all(events, recorded),
            ["thinking", "edited out.txt", "thinking"]
        );
        let bash = r#"{"type":"tool.execution_start","data":{"toolName":"bash","arguments":{"command":"ls -la"}}}"#;
        assert_eq!(all(events, bash), ["bash: ls -la"]);
    }

    #[test]
    fn garbage_gives_nothing() {
        assert_garbage_gives_nothing(events);
    }
}
