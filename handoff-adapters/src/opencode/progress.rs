//! Live progress from `opencode run --format json`, one line at a time.

use handoff_core::ProgressEvent;
use serde_json::Value;

use crate::common::{json_line, string_field};

/// Tools that write the file named by their input.
const WRITERS: [&str; 3] = ["write", "edit", "patch"];

/// One `--format json` line of `opencode run`: a step is a turn, a `tool_use` a tool call
/// (file tools name their file).
pub(super) fn events(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json_line(line) else {
        return Vec::new();
    };
    match v.get("type").and_then(Value::as_str) {
        Some("step_start") => vec![ProgressEvent::Turn],
        Some("tool_use") => {
            let part = v.get("part").cloned().unwrap_or(Value::Null);
            let name = part.get("tool").and_then(Value::as_str).unwrap_or("tool");
            let input = part.pointer("/state/input").cloned().unwrap_or(Value::Null);
            let path = string_field(&input, &["filePath", "path"]);
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
    fn opencode_steps_and_tools() {
        let recorded = include_str!("../../tests/it/fixtures/opencode-write.out");
        assert_eq!(
            all(events, recorded),
            [
                "thinking",
                "edited $SCRATCH/repo-opencode/hello.txt",
                "thinking"
            ]
        );
        let bash =
            r#"{"type":"tool_use","part":{"tool":"bash","state":{"input":{"command":"ls -la"}}}}"#;
        assert_eq!(all(events, bash), ["bash: ls -la"]);
    }

    #[test]
    fn garbage_gives_nothing() {
        assert_garbage_gives_nothing(events);
    }
}
