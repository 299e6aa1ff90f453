//! `Codex::read_transcript` on a rollout recorded from the real Codex CLI (two turns: a shell
//! call and an answer, then a resumed turn; scratch paths replaced by `$SCRATCH`), its zstd copy,
//! a cut-off copy, garbage, and synthetic rollouts for the items the recording lacks.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::Codex;
use handoff_core::{Part, Role, Sessions, Transcript, TranscriptError};
use proptest::prelude::*;

use crate::support::{session_fixture, texts};

fn read(name: &str) -> Result<Transcript, TranscriptError> {
    Codex.read_transcript(&session_fixture(name))
}

/// Reads `lines` written to a rollout file in a temporary directory.
fn read_lines(lines: &[&str]) -> Result<Transcript, TranscriptError> {
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::try_from(
        dir.path()
            .join("rollout-2026-01-01T00-00-00-01a2308e-0000-7000-8000-000000000001.jsonl"),
    )
    .unwrap();
    std::fs::write(&path, lines.join("\n")).unwrap();
    Codex.read_transcript(&path)
}

const THREAD: &str = "01a2308e-9a92-7fa1-9b83-fc8f4a0751d4";

#[test]
fn a_real_rollout_reads_to_its_two_turns() {
    let t = read("codex-rollout.jsonl").unwrap();
    assert_eq!(t.source.session_id, THREAD);
    assert_eq!(
        t.source.cwd.as_deref(),
        Some(Utf8Path::new("$SCRATCH/repo"))
    );
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);

    let roles: Vec<Role> = t.messages.iter().map(|m| m.role).collect();
    use Role::{Assistant, User};
    assert_eq!(roles, [User, Assistant, User, Assistant, User, Assistant]);
    let m = &t.messages;
    assert_eq!(
        m[0].parts,
        [Part::Text {
            text: "Read notes.txt and tell me what it says.".into()
        }]
    );
    let [Part::ToolCall { name, id, input }] = &m[1].parts[..] else {
        panic!("{:?}", m[1].parts)
    };
    assert_eq!(name, "exec_command");
    assert_eq!(input, r#"{"cmd":"cat notes.txt"}"#);
    let [
        Part::ToolResult {
            id: result_id,
            output,
            is_error: false,
        },
    ] = &m[2].parts[..]
    else {
        panic!("{:?}", m[2].parts)
    };
    assert_eq!(result_id, id, "the result answers the call");
    assert!(output.contains("first line of the notes"), "{output}");
    assert_eq!(
        m[3].parts,
        [Part::Text {
            text: "The notes say: first line of the notes.".into()
        }]
    );
    assert_eq!(
        m[4].parts,
        [Part::Text {
            text: "How many lines does it have?".into()
        }]
    );
    assert_eq!(
        m[5].parts,
        [Part::Text {
            text: "Second answer: the file has one line.".into()
        }]
    );
    for m in m {
        let want = (m.role == Assistant).then_some("fake-model");
        assert_eq!(m.model.as_deref(), want);
        assert!(m.at.is_some());
    }

    // Codex's injected context never reaches the transcript.
    let json = serde_json::to_string(&t).unwrap();
    for injected in [
        "<environment_context>",
        "<permissions instructions>",
        "skills_instructions",
    ] {
        assert!(!json.contains(injected), "{injected} leaked");
    }

    let mut shown = t.clone();
    shown.source.path = "codex-rollout.jsonl".into();
    insta::assert_json_snapshot!(shown);
}

#[test]
fn a_compressed_rollout_reads_the_same() {
    let plain = read("codex-rollout.jsonl").unwrap();
    let zst = read("codex-rollout.jsonl.zst").unwrap();
    assert_eq!(zst.messages, plain.messages);
    assert_eq!(zst.source.session_id, plain.source.session_id);
    assert_eq!(zst.source.cwd, plain.source.cwd);
    assert!(zst.warnings.is_empty(), "{:?}", zst.warnings);
}

#[test]
fn a_cut_off_last_line_is_a_warning() {
    let plain = read("codex-rollout.jsonl").unwrap();
    let cut = read("codex-rollout-truncated.jsonl").unwrap();
    assert_eq!(cut.messages, plain.messages);
    assert_eq!(cut.warnings.len(), 1, "{:?}", cut.warnings);
    assert!(cut.warnings[0].contains("last line"), "{:?}", cut.warnings);
}

#[test]
fn a_cut_off_compressed_rollout_keeps_what_came_before() {
    let bytes = std::fs::read(session_fixture("codex-rollout.jsonl.zst")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::try_from(dir.path().join("cut.jsonl.zst")).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    match Codex.read_transcript(&path) {
        Ok(t) => assert!(!t.warnings.is_empty()),
        Err(e) => assert!(matches!(e, TranscriptError::Malformed { .. }), "{e:?}"),
    }
}

#[test]
fn garbage_is_malformed_and_a_missing_file_is_io() {
    let e = read("codex-garbage.jsonl").unwrap_err();
    assert!(matches!(e, TranscriptError::Malformed { .. }), "{e:?}");
    let e = read_lines(&[]).unwrap_err();
    assert!(matches!(e, TranscriptError::Malformed { .. }), "{e:?}");
    let e = read("codex-missing.jsonl").unwrap_err();
    assert!(matches!(e, TranscriptError::Io { .. }), "{e:?}");
}

#[test]
fn only_reasoning_summaries_are_kept_and_preambles_are_skipped() {
    let t = read_lines(&[
        r#"{"timestamp":"t0","type":"session_meta","payload":{"id":"s-1","cwd":"/w","model_provider":"openai"}}"#,
        r#"{"timestamp":"t1","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5.5"}}"#,
        r#"{"timestamp":"t2","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>x"}]}}"#,
        r##"{"timestamp":"t3","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>"}]}}"##,
        r#"{"timestamp":"t4","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_instructions>u</user_instructions>"},{"type":"input_text","text":"list files"}]}}"#,
        r#"{"timestamp":"t5","type":"event_msg","payload":{"type":"user_message","message":"list files"}}"#,
        r#"{"timestamp":"t6","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Listing** the files"}],"content":[{"type":"reasoning_text","text":"RAW-THOUGHT"}],"encrypted_content":"ENCRYPTED-BLOB"}}"#,
        r#"{"timestamp":"t7","type":"response_item","payload":{"type":"local_shell_call","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls"]}}}"#,
        r#"{"timestamp":"t8","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":{"content":"denied","success":false}}}"#,
        r#"{"timestamp":"t9","type":"response_item","payload":{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":"*** Begin Patch"}}"#,
        r#"{"timestamp":"t10","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c2","output":"Done!"}}"#,
        r#"{"timestamp":"t11","type":"response_item","payload":{"type":"brand_new_item"}}"#,
        r#"{"timestamp":"t12","type":"response_item","payload":{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"two files"}]}}"#,
        r#"{"timestamp":"t13","type":"event_msg","payload":{"type":"agent_message","message":"two files"}}"#,
    ])
    .unwrap();
    assert_eq!(t.source.session_id, "s-1");
    let got = texts(&t);
    use Role::{Assistant, User};
    assert_eq!(
        got,
        [
            (User, "text: list files".to_owned()),
            (Assistant, "reasoning: **Listing** the files".to_owned()),
            (
                Assistant,
                r#"call local_shell: {"command":["ls"],"type":"exec"}"#.to_owned()
            ),
            (User, "result (error): denied".to_owned()),
            (Assistant, "call apply_patch: *** Begin Patch".to_owned()),
            (User, "result: Done!".to_owned()),
            (Assistant, "text: two files".to_owned()),
        ]
    );
    assert!(matches!(
        t.messages[2].parts[0],
        Part::ToolResult { is_error: true, .. }
    ));
    assert_eq!(t.messages[1].model.as_deref(), Some("gpt-5.5"));
    assert_eq!(t.messages[1].at.as_deref(), Some("t6"));
    let json = serde_json::to_string(&t).unwrap();
    assert!(!json.contains("ENCRYPTED-BLOB") && !json.contains("RAW-THOUGHT"));
    assert_eq!(
        t.warnings,
        ["skipped 1 unknown response item 'brand_new_item'"]
    );
}

#[test]
fn the_thread_id_comes_from_the_file_name_without_session_meta() {
    let t = read_lines(&[
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
    ])
    .unwrap();
    assert_eq!(t.source.session_id, "01a2308e-0000-7000-8000-000000000001");
}

#[test]
fn long_tool_text_is_bounded() {
    let big = "x".repeat(100_000);
    let line = serde_json::json!({"type": "response_item", "payload": {
        "type": "function_call_output", "call_id": "c", "output": big}})
    .to_string();
    let t = read_lines(&[&line]).unwrap();
    let Part::ToolResult { output, .. } = &t.messages[0].parts[0] else {
        panic!()
    };
    assert!(output.len() < 5_000, "{}", output.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        zstd in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::try_from(dir.path().join("rollout.jsonl")).unwrap();
        let mut data = if zstd { vec![0x28, 0xb5, 0x2f, 0xfd] } else { Vec::new() };
        data.extend_from_slice(&bytes);
        std::fs::write(&path, &data).unwrap();
        let _ = Codex.read_transcript(&path);
    }

    #[test]
    fn arbitrary_records_never_panic(
        records in proptest::collection::vec(
            (
                prop_oneof![
                    Just("session_meta"), Just("turn_context"), Just("response_item"),
                    Just("event_msg"), Just("x"),
                ],
                prop_oneof![
                    Just("message"), Just("reasoning"), Just("function_call"),
                    Just("function_call_output"), Just("local_shell_call"), Just("y"),
                ],
                prop_oneof![Just("user"), Just("assistant"), Just("developer"), Just("z")],
                ".{0,20}",
            ),
            0..20,
        ),
    ) {
        let lines: Vec<String> = records
            .iter()
            .map(|(kind, item, role, text)| {
                serde_json::json!({"type": kind, "payload": {
                    "type": item, "role": role, "id": text, "model": text,
                    "content": [{"text": text}], "summary": [{"text": text}],
                    "output": {"content": [{"text": text}], "success": false},
                    "arguments": text,
                }})
                .to_string()
            })
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let _ = read_lines(&lines);
    }
}
