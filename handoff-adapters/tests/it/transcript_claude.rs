//! `Claude::read_transcript` on a session recorded from the real Claude Code CLI (two turns: a
//! Write call and an answer, then a resumed turn; scratch paths replaced by `$SCRATCH`), and
//! synthetic sessions for a rewound branch, sub-agent and meta lines, hidden thinking, a cut-off
//! last line and garbage.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::Claude;
use handoff_core::{Part, Role, Sessions, Transcript, TranscriptError};
use proptest::prelude::*;

use crate::support::session_fixture;

fn read(name: &str) -> Result<Transcript, TranscriptError> {
    Claude.read_transcript(&session_fixture(name))
}

fn read_bytes(bytes: &[u8]) -> Result<Transcript, TranscriptError> {
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::try_from(
        dir.path()
            .join("0b5e7c1e-0000-4000-8000-000000000001.jsonl"),
    )
    .unwrap();
    std::fs::write(&path, bytes).unwrap();
    Claude.read_transcript(&path)
}

/// Each message as `role: part, part` with texts and tool names, for compact assertions.
fn outline(t: &Transcript) -> Vec<String> {
    t.messages
        .iter()
        .map(|m| {
            let parts: Vec<String> = m
                .parts
                .iter()
                .map(|p| match p {
                    Part::Text { text } => format!("text {text:?}"),
                    Part::ToolCall { name, .. } => format!("call {name}"),
                    Part::ToolResult {
                        output, is_error, ..
                    } => format!("result{} {output:?}", if *is_error { " error" } else { "" }),
                    Part::Reasoning { text } => format!("reasoning {text:?}"),
                })
                .collect();
            format!("{:?}: {}", m.role, parts.join(", "))
        })
        .collect()
}

#[test]
fn the_real_two_turn_session_reads_in_order() {
    let t = read("claude-two-turns.jsonl").unwrap();
    assert_eq!(t.source.session_id, "a7859f76-46bd-4069-b44b-0c2f0943b80c");
    assert_eq!(
        t.source.cwd.as_deref(),
        Some(Utf8Path::new("$SCRATCH/repo"))
    );
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let roles: Vec<Role> = t.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant
        ]
    );
    let Part::ToolCall { name, id, input } = &t.messages[1].parts[0] else {
        panic!("{:?}", t.messages[1]);
    };
    assert_eq!(name, "Write");
    let Part::ToolResult {
        id: answered,
        output,
        is_error,
    } = &t.messages[2].parts[0]
    else {
        panic!("{:?}", t.messages[2]);
    };
    assert_eq!(answered, id);
    assert!(input.contains("notes.txt") && output.contains("File created"));
    assert!(!is_error);
    for m in &t.messages {
        let expected = (m.role == Role::Assistant).then_some("claude-e2e-model");
        assert_eq!(m.model.as_deref(), expected);
    }

    let mut t = t;
    t.source.path = "fixtures/sessions/claude-two-turns.jsonl".into();
    insta::assert_json_snapshot!("claude_two_turns", t);
}

#[test]
fn a_rewound_branch_is_dropped_for_the_active_leaf() {
    let t = read("claude-branch.jsonl").unwrap();
    assert_eq!(
        outline(&t),
        [
            r#"User: text "first prompt""#,
            r#"Assistant: text "first answer""#,
            r#"User: text "edited question""#,
            r#"Assistant: text "new answer""#,
        ]
    );
    // The streamed pieces of one message are one message, named by its first line.
    assert_eq!(t.messages[1].source_id.as_deref(), Some("a1t"));
    assert_eq!(t.messages[1].model.as_deref(), Some("claude-opus-4-1"));
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
}

#[test]
fn sidechains_meta_lines_and_thinking_are_dropped() {
    let t = read("claude-sidechain.jsonl").unwrap();
    assert_eq!(
        outline(&t),
        [
            r#"User: text "delegate the search""#,
            r#"Assistant: text "I will ask a sub-agent.", call Task"#,
            r#"User: result "config.toml\n[image]", result error "permission denied""#,
            r#"Assistant: text "The config is config.toml.""#,
        ]
    );
    let json = serde_json::to_string(&t).unwrap();
    for hidden in [
        "secret reasoning",
        "sub-agent says",
        "late sub-agent",
        "injected",
    ] {
        assert!(!json.contains(hidden), "{hidden} leaked: {json}");
    }
}

#[test]
fn a_cut_off_last_line_is_a_warning() {
    let t = read("claude-truncated.jsonl").unwrap();
    assert_eq!(
        outline(&t),
        [
            r#"User: text "first prompt""#,
            r#"Assistant: text "first answer""#
        ]
    );
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    assert!(
        t.warnings[0].contains("line 5 (the last)"),
        "{:?}",
        t.warnings
    );
}

#[test]
fn garbage_is_malformed_and_a_missing_file_is_io() {
    assert!(matches!(
        read("claude-garbage.jsonl"),
        Err(TranscriptError::Malformed { .. })
    ));
    assert!(matches!(
        read_bytes(b""),
        Err(TranscriptError::Malformed { .. })
    ));
    assert!(matches!(
        read("claude-missing.jsonl"),
        Err(TranscriptError::Io { .. })
    ));
}

#[test]
fn tool_text_is_bounded() {
    let big = "x".repeat(100 * 1024);
    let lines = [
        serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "s",
            "message": {"role": "user", "content": "go"}}),
        serde_json::json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
            "message": {"id": "m1", "role": "assistant", "model": "m",
                "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {"content": big}}]}}),
        serde_json::json!({"type": "user", "uuid": "r1", "parentUuid": "a1", "sessionId": "s",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let t = read_bytes(text.as_bytes()).unwrap();
    for m in &t.messages[1..] {
        match &m.parts[0] {
            Part::ToolCall { input: s, .. } | Part::ToolResult { output: s, .. } => {
                assert!(s.len() < 5 * 1024, "{}", s.len());
            }
            other => panic!("{other:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = read_bytes(&bytes);
    }

    #[test]
    fn a_real_session_cut_anywhere_never_panics(cut in 0usize..20_000) {
        let bytes = std::fs::read(session_fixture("claude-two-turns.jsonl")).unwrap();
        let cut = cut.min(bytes.len());
        match read_bytes(&bytes[..cut]) {
            Ok(t) => prop_assert!(!t.messages.is_empty()),
            Err(e) => prop_assert!(matches!(e, TranscriptError::Malformed { .. }), "{e:?}"),
        }
    }
}
