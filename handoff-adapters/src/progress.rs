//! Live progress from the agents' event streams: Claude Code's `stream-json`, Codex's `--json`
//! and OpenCode's `--format json`, one line at a time. Lines that are not JSON, or say nothing
//! worth showing, give no events.

use handoff_core::ProgressEvent;
use serde_json::Value;

/// Tools that write the file named by their input.
const CLAUDE_WRITERS: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];
const OPENCODE_WRITERS: [&str; 3] = ["write", "edit", "patch"];

fn json(line: &[u8]) -> Option<Value> {
    serde_json::from_slice(line).ok()
}

fn text<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str))
}

/// One `stream-json` line of Claude Code: an assistant message is a turn, each `tool_use` in
/// it a tool call (file tools name their file).
pub fn claude(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json(line) else {
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
        let path = text(&input, &["file_path", "notebook_path"]);
        match path {
            Some(p) if CLAUDE_WRITERS.contains(&name) => events.push(ProgressEvent::file(p)),
            _ => events.push(ProgressEvent::tool(
                name,
                path.or_else(|| text(&input, &["command", "pattern", "url", "query"])),
            )),
        }
    }
    events
}

/// One `--json` line of `codex exec`: a started turn, a started command or tool call, and the
/// files of a completed file change.
pub fn codex(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json(line) else {
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
            vec![ProgressEvent::tool("shell", text(item, &["command"]))]
        }
        ("item.started", "mcp_tool_call") => vec![ProgressEvent::tool(
            text(item, &["tool"]).unwrap_or("mcp"),
            text(item, &["server"]),
        )],
        ("item.started", "web_search") => {
            vec![ProgressEvent::tool("web_search", text(item, &["query"]))]
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

/// One `--format json` line of `opencode run`: a step is a turn, a `tool_use` a tool call
/// (file tools name their file).
pub fn opencode(line: &[u8]) -> Vec<ProgressEvent> {
    let Some(v) = json(line) else {
        return Vec::new();
    };
    match v.get("type").and_then(Value::as_str) {
        Some("step_start") => vec![ProgressEvent::Turn],
        Some("tool_use") => {
            let part = v.get("part").cloned().unwrap_or(Value::Null);
            let name = part.get("tool").and_then(Value::as_str).unwrap_or("tool");
            let input = part.pointer("/state/input").cloned().unwrap_or(Value::Null);
            let path = text(&input, &["filePath", "path"]);
            match path {
                Some(p) if OPENCODE_WRITERS.contains(&name) => vec![ProgressEvent::file(p)],
                _ => vec![ProgressEvent::tool(
                    name,
                    path.or_else(|| text(&input, &["command", "pattern", "url"])),
                )],
            }
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(f: fn(&[u8]) -> Vec<ProgressEvent>, text: &str) -> Vec<String> {
        text.lines()
            .flat_map(|l| f(l.as_bytes()))
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn claude_turns_tools_and_files() {
        let stream = r#"{"type":"system","subtype":"init","session_id":"s"}
{"type":"assistant","message":{"content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test\nmore"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Write","input":{"file_path":"/r/src/a.rs","content":"x"}},{"type":"tool_use","id":"t3","name":"Grep","input":{"pattern":"fn main"}}]}}
not json
{"type":"result","subtype":"success"}"#;
        assert_eq!(
            all(claude, stream),
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
    fn codex_commands_and_file_changes() {
        let stream = r#"{"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'cargo test'","status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'cargo test'","exit_code":0}}
{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/r/a.rs","kind":"update"},{"path":"/r/b.rs","kind":"add"}],"status":"completed"}}
{"type":"item.started","item":{"id":"item_3","type":"mcp_tool_call","server":"docs","tool":"search"}}
{"type":"item.completed","item":{"id":"item_4","type":"agent_message","text":"Done."}}"#;
        assert_eq!(
            all(codex, stream),
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
    fn opencode_steps_and_tools() {
        let recorded = include_str!("../tests/it/fixtures/opencode-write.out");
        assert_eq!(
            all(opencode, recorded),
            [
                "thinking",
                "edited $SCRATCH/repo-opencode/hello.txt",
                "thinking"
            ]
        );
        let bash =
            r#"{"type":"tool_use","part":{"tool":"bash","state":{"input":{"command":"ls -la"}}}}"#;
        assert_eq!(all(opencode, bash), ["bash: ls -la"]);
    }

    #[test]
    fn recorded_real_streams() {
        assert_eq!(
            all(
                claude,
                include_str!("../tests/it/fixtures/claude-write.out")
            ),
            [
                "thinking",
                "edited $SCRATCH/repo-claude/hello.txt",
                "thinking"
            ]
        );
        assert_eq!(
            all(codex, include_str!("../tests/it/fixtures/codex-write.out")),
            [
                "thinking",
                "shell: /bin/bash -lc 'printf %s \"hello from codex tool call\" > $SCRATCH/repo-codex/hello.txt'"
            ]
        );
    }

    #[test]
    fn garbage_gives_nothing() {
        for f in [claude, codex, opencode] {
            for line in [
                "",
                "{",
                "[]",
                "null",
                r#"{"type":"assistant","message":7}"#,
                "\u{0}",
            ] {
                let _ = f(line.as_bytes());
            }
            assert!(f(b"{}").is_empty());
        }
    }
}
