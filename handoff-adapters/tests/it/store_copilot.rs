//! Copilot sessions: reading a real session (`events.jsonl` of Copilot 1.0.102 with a `create`
//! call, its result and the answer; scratch paths replaced), finding sessions by id and by
//! directory, writing a carried conversation and reading it back, copying a session, the
//! receiver's plan and its output.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::Copilot;
use handoff_core::{
    AgentId, RawOutput, Receiver, ReceiverRequest, ReceiverRole, ResumeFrom, Role, RunDir, Sessions,
};
use proptest::prelude::*;

use crate::support::*;

const SESSION: &str = "7a853f13-6807-4a7f-ad44-af7b37b34af0";

#[test]
fn a_real_session_reads_to_its_turns() {
    let t = Copilot
        .read_transcript(&session_fixture("copilot-write-session.jsonl"))
        .unwrap();
    assert_eq!(t.source.session_id, SESSION);
    assert_eq!(t.source.provider, AgentId::COPILOT);
    assert_eq!(
        t.source.cwd.as_deref(),
        Some(Utf8Path::new("$SCRATCH/repo"))
    );
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let got = texts(&t);
    assert_eq!(got[0], (Role::User, "text: write out.txt".to_owned()));
    assert_eq!(
        got[1],
        (
            Role::Assistant,
            r#"call create: {"file_text":"written by the model\n","path":"out.txt"}"#.to_owned()
        )
    );
    assert!(
        matches!(&got[2], (Role::User, s) if s.starts_with("result: Created file")),
        "{got:?}"
    );
    assert_eq!(got[3].0, Role::Assistant);
    assert!(got[3].1.contains("handoff.provider-output.v1"), "{got:?}");
    assert_eq!(got.len(), 4, "{got:?}");
    // Its system prompt, usage records and turn markers are not conversation.
    assert_eq!(t.messages[1].model.as_deref(), Some("fake-model"));
}

#[tokio::test]
async fn a_carried_conversation_is_written_found_and_read_back() {
    let text = carried_round_trip(&Copilot, |home, target| {
        home.join(".copilot/session-state")
            .join(&target.session_id)
            .join("events.jsonl")
    })
    .await;
    // Every event has a UUID id, as Copilot requires to load it.
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = v["id"].as_str().unwrap();
        assert_eq!((id.len(), id.matches('-').count()), (36, 4), "{line}");
    }
}

fn receiver_plan(
    fx: &Fixture,
    resume: Option<&str>,
    role: ReceiverRole,
    sandbox: bool,
) -> handoff_core::Invocation {
    let request = ReceiverRequest {
        target: AgentId::COPILOT,
        cwd: fx.cwd.clone(),
        role,
        model: Some("gpt-4.1".into()),
        effort: Some("high".into()),
        session_id: "6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f".into(),
        resume: resume.map(|id| ResumeFrom {
            session_id: id.into(),
            fork: false,
        }),
    };
    let run = RunDir {
        handoff_sandbox: sandbox,
        confined: false,
        path: fx.run_path.clone(),
        executable: "/usr/local/bin/copilot".into(),
        prompt: "take over".into(),
        output_schema: serde_json::Value::Null,
        mcp: None,
        parent_env: parent_env(),
        agent_config: Default::default(),
        nested: None,
    };
    Copilot.receiver_invocation(&request, &run).unwrap()
}

#[test]
fn the_receiver_resumes_in_the_users_store() {
    let fx = Fixture::new();
    let carried = "0b6a3c1e-2f4d-4e5a-8b7c-9d0e1f2a3b4c";
    let inv = receiver_plan(&fx, Some(carried), ReceiverRole::Implement, false);
    assert_eq!(arg_after(&inv.args, "--resume"), Some(carried));
    assert_eq!(arg_after(&inv.args, "--reasoning-effort"), Some("high"));
    assert!(!inv.args.iter().any(|a| a == "--deny-tool"));
    assert!(!inv.env.contains_key("COPILOT_HOME"), "the user's own home");
    // A new session takes the chosen id; a review may not write.
    let inv = receiver_plan(&fx, None, ReceiverRole::Review, false);
    assert_eq!(
        arg_after(&inv.args, "--session-id"),
        Some("6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f")
    );
    assert_eq!(arg_after(&inv.args, "--deny-tool"), Some("write"));
    assert_eq!(
        Copilot.resume_command(carried, &Default::default()),
        ["copilot", "--resume", carried]
    );
}

/// Under handoff's sandbox: a private home over the user's, the session's folder on top.
#[test]
fn under_handoffs_sandbox_only_the_sessions_folder_is_the_users() {
    let fx = Fixture::new();
    let carried = "0b6a3c1e-2f4d-4e5a-8b7c-9d0e1f2a3b4c";
    let inv = receiver_plan(&fx, Some(carried), ReceiverRole::Implement, true);
    let binds = inv.sandbox.unwrap().binds;
    let user_home = Utf8Path::new("/home/tester/.copilot");
    let session = user_home.join("session-state").join(carried);
    assert_eq!(binds[0].dest, user_home);
    assert!(binds[0].source.starts_with(&fx.run_path) && binds[0].writable);
    assert_eq!((&binds[1].source, &binds[1].dest), (&session, &session));
    assert!(binds[1].writable);
    assert!(!binds[2].writable, "the package cache is read-only");
    assert!(inv.dirs.contains(&session));
}

#[test]
fn the_receivers_output_names_its_session() {
    let raw = stdout(fixture("copilot-write.out"));
    let report = Copilot.parse_receiver(&raw);
    assert_eq!(
        report.session_id.as_deref(),
        Some("7a853f13-6807-4a7f-ad44-af7b37b34af0")
    );
    assert!(report.last_message.unwrap().contains("provider-output"));
    assert_eq!(report.failure, None);
    let failed = Copilot.parse_receiver(&stdout(fixture("copilot-error.out")));
    assert_eq!(failed.failure.as_deref(), Some("400 fake failure"));
    let cut = Copilot.parse_receiver(&RawOutput {
        stderr: b"Error: Session file is corrupted\n".to_vec(),
        ..RawOutput::default()
    });
    assert_eq!(
        cut.failure.as_deref(),
        Some("Error: Session file is corrupted")
    );
}

proptest! {
    /// Any bytes as a session file read without a panic, and as a receiver's output too.
    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::try_from(dir.path().join("events.jsonl")).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let _ = Copilot.read_transcript(&path);
        let _ = Copilot.parse_receiver(&stdout(bytes));
    }
}
