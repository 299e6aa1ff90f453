//! Unit tests of the MCP tool inputs: how they become the `handoff` command's flags.

use super::*;

#[test]
fn a_harness_list_asks_a_panel() {
    let input: AdviceInput = serde_json::from_value(serde_json::json!({
        "harness": ["codex", "claude:opus"],
        "quorum": 1,
        "cwd": "/r",
        "instructions": "Is this right?",
    }))
    .unwrap();
    let mut launch = Launch::new("advice");
    input.shared_flags(&mut launch).unwrap();
    let at = launch.args.iter().position(|a| a == "--harness").unwrap();
    assert_eq!(launch.args[at + 1], "codex,claude:opus");
    let q = launch.args.iter().position(|a| a == "--quorum").unwrap();
    assert_eq!(launch.args[q + 1], "1");
    let one: AdviceInput = serde_json::from_value(serde_json::json!({
        "harness": "codex", "cwd": "/r", "instructions": "x",
    }))
    .unwrap();
    assert_eq!(one.harness.flag().unwrap(), "codex");
    // A one-member list is still a panel: it is launched with a quorum.
    let listed: AdviceInput = serde_json::from_value(serde_json::json!({
        "harness": ["codex"], "cwd": "/r", "instructions": "x",
    }))
    .unwrap();
    let mut launch = Launch::new("advice");
    listed.shared_flags(&mut launch).unwrap();
    let q = launch.args.iter().position(|a| a == "--quorum").unwrap();
    assert_eq!(launch.args[q + 1], "1");
    let mut launch = Launch::new("advice");
    one.shared_flags(&mut launch).unwrap();
    assert!(!launch.args.iter().any(|a| a == "--quorum"));
    let bad: AdviceInput = serde_json::from_value(serde_json::json!({
        "harness": ["codex,claude"], "cwd": "/r", "instructions": "x",
    }))
    .unwrap();
    assert!(bad.harness.flag().is_err());
}

#[test]
fn a_continue_message_travels_in_a_private_file_not_on_the_command_line() {
    let input = ContinueInput {
        to: Some("codex".into()),
        cwd: "/r".into(),
        note_file: Some("/n.md".into()),
        message: Some("db password: S3cr3t!x".into()),
        ..ContinueInput::default()
    };
    let launch = input.launch().unwrap();
    assert!(
        !launch.args.iter().any(|a| a.contains("S3cr3t")),
        "{:?}",
        launch.args
    );
    assert!(!launch.args.iter().any(|a| a == "--message"));
    assert_eq!(
        launch.inline,
        [("--message-file", "db password: S3cr3t!x".to_owned())]
    );
}

#[test]
fn a_continue_destination_is_the_positional_phrase() {
    let input: ContinueInput = serde_json::from_value(serde_json::json!({
        "destination": "codex gpt-5 high on devbox", "cwd": "/r", "noteFile": "/n.md",
    }))
    .unwrap();
    let launch = input.launch().unwrap();
    assert_eq!(launch.args[0], "codex gpt-5 high on devbox");
    assert!(!launch.args.iter().any(|a| a == "--to"));
    for bad in [
        serde_json::json!({"destination": "-x", "cwd": "/r", "noteFile": "/n.md"}),
        serde_json::json!({"cwd": "/r", "noteFile": "/n.md"}),
    ] {
        let input: ContinueInput = serde_json::from_value(bad).unwrap();
        assert!(input.launch().is_err());
    }
}
