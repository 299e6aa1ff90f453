//! Claude Code's hooks of the plugin (`hooks/hooks.json`): when a turn ends on an API error,
//! `handoff hook claude-stop-failure` moves the task or says what would (`[failover]`); the
//! next session start says where it went; a prompt is stopped while another agent holds it.

use serde_json::{Value, json};

/// (Claude Code event, `handoff hook` event).
pub(super) const HOOKS: [(&str, &str); 3] = [
    ("StopFailure", "claude-stop-failure"),
    ("SessionStart", "claude-session-start"),
    ("UserPromptSubmit", "claude-prompt-submit"),
];

/// The command a hook runs: handoff found by the plugin's launcher, and nothing (exit 0) when
/// it is not installed, so that a hook never gets in Claude Code's way.
pub(super) fn command(event: &str) -> String {
    super::launcher::hook_command(event)
}

pub(super) fn hooks_json() -> Value {
    let mut events = serde_json::Map::new();
    for (claude, ours) in HOOKS {
        let entry =
            json!({"hooks": [{"type": "command", "command": command(ours), "timeout": 30}]});
        let entry = if claude == "UserPromptSubmit" {
            entry
        } else {
            let mut e = entry;
            e["matcher"] = "".into();
            e
        };
        events.insert(claude.to_owned(), json!([entry]));
    }
    json!({
        "description": "handoff: when Claude Code stops on its limit, hand the task to another agent or say what would ([failover] in handoff's configuration)",
        "hooks": events,
    })
}

/// What is wrong with `hooks/hooks.json` as read back: exactly our three events, each one
/// command hook running its `handoff hook` event.
pub(super) fn problems(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(events) = value.get("hooks").and_then(Value::as_object) else {
        return vec!["has no `hooks` object".into()];
    };
    for (claude, ours) in HOOKS {
        let command = events
            .get(claude)
            .and_then(|e| e.pointer("/0/hooks/0/command"))
            .and_then(Value::as_str);
        if command != Some(super::hooks::command(ours).as_str()) {
            out.push(format!("{claude} does not run `handoff hook {ours}`"));
        }
    }
    if events.len() != HOOKS.len() {
        out.push(format!(
            "registers {} events, not {}",
            events.len(),
            HOOKS.len()
        ));
    }
    out
}
