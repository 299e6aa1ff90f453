//! Qwen sessions: reading a real session (`chats/<id>.jsonl` of Qwen Code 0.24.4 with a
//! `write_file` call, its result and the answer; scratch paths replaced), finding sessions by id
//! and by directory, writing a carried conversation and reading it back, copying a session, the
//! receiver's plan and its output.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::Qwen;
use handoff_core::{
    AgentId, RawOutput, Receiver, ReceiverRequest, ReceiverRole, ResumeFrom, Role, RunDir, Sessions,
};
use proptest::prelude::*;

use crate::support::*;

const SESSION: &str = "6a2ddd10-ac3d-4a0f-9576-c0cce64cf631";

#[test]
fn a_real_session_reads_to_its_turns() {
    let t = Qwen
        .read_transcript(&session_fixture("qwen-write-session.jsonl"))
        .unwrap();
    assert_eq!(t.source.session_id, SESSION);
    assert_eq!(t.source.provider, AgentId::QWEN);
    assert_eq!(
        t.source.cwd.as_deref(),
        Some(Utf8Path::new("$SCRATCH/work"))
    );
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let got = texts(&t);
    assert_eq!(got[0], (Role::User, "text: write out.txt\n\n\n".to_owned()));
    assert_eq!(
        got[1],
        (
            Role::Assistant,
            r#"call write_file: {"content":"hello\n","file_path":"$SCRATCH/work/out.txt"}"#
                .to_owned()
        )
    );
    assert!(
        matches!(&got[2], (Role::User, s) if s.starts_with("result: Successfully created")),
        "{got:?}"
    );
    assert_eq!(got[3], (Role::Assistant, "text: FAKE_FINAL".to_owned()));
    // Its telemetry and attribution snapshots are not conversation.
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(t.messages[1].model.as_deref(), Some("fake-model"));
}

#[tokio::test]
async fn a_carried_conversation_is_written_found_and_read_back() {
    let text = carried_round_trip(&Qwen, |home, target| {
        home.join(".qwen/projects/-work-repo/chats")
            .join(format!("{}.jsonl", target.session_id))
    })
    .await;
    // Every record has a UUID, chained to the one before, as Qwen loads them.
    let mut parent = serde_json::Value::Null;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = v["uuid"].as_str().unwrap();
        assert_eq!((id.len(), id.matches('-').count()), (36, 4), "{line}");
        assert_eq!(v["parentUuid"], parent, "{line}");
        assert_eq!(v["sessionId"], "0b6a3c1e-2f4d-4e5a-8b7c-9d0e1f2a3b4c");
        parent = v["uuid"].clone();
    }
}

fn receiver_plan(
    fx: &Fixture,
    resume: Option<&str>,
    role: ReceiverRole,
    sandbox: bool,
) -> handoff_core::Invocation {
    let request = ReceiverRequest {
        target: AgentId::QWEN,
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
        executable: "/usr/local/bin/qwen".into(),
        prompt: "take over".into(),
        output_schema: serde_json::Value::Null,
        mcp: None,
        parent_env: parent_env(),
        agent_config: Default::default(),
        nested: None,
    };
    Qwen.receiver_invocation(&request, &run).unwrap()
}

#[test]
fn the_receiver_resumes_in_the_users_store() {
    let fx = Fixture::new();
    let carried = "0b6a3c1e-2f4d-4e5a-8b7c-9d0e1f2a3b4c";
    let inv = receiver_plan(&fx, Some(carried), ReceiverRole::Implement, false);
    assert_eq!(arg_after(&inv.args, "--resume"), Some(carried));
    assert!(
        inv.args
            .iter()
            .any(|a| a.starts_with("--core-tools=") && a.contains("write_file"))
    );
    assert!(inv.args.iter().any(|a| a == "--allowed-mcp-server-names="));
    assert!(!inv.env.contains_key("QWEN_HOME"), "the user's own home");
    // The effort through handoff's settings file, which also turns the memory call off.
    let settings = &inv.files[0];
    assert_eq!(
        inv.env
            .get("QWEN_CODE_SYSTEM_SETTINGS_PATH")
            .map(String::as_str),
        Some(settings.path.as_str())
    );
    let settings: serde_json::Value = serde_json::from_slice(&settings.contents).unwrap();
    assert_eq!(
        settings["model"]["generationConfig"]["reasoning"]["effort"],
        "high"
    );
    assert_eq!(settings["memory"]["enableManagedAutoMemory"], false);
    // A new session takes the chosen id; a review may not write.
    let inv = receiver_plan(&fx, None, ReceiverRole::Review, false);
    assert_eq!(
        arg_after(&inv.args, "--session-id"),
        Some("6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f")
    );
    let core = inv
        .args
        .iter()
        .find(|a| a.starts_with("--core-tools="))
        .unwrap();
    assert!(
        !core.contains("write_file") && !core.contains("edit"),
        "{core}"
    );
    assert_eq!(
        Qwen.resume_command(carried, &Default::default()),
        ["qwen", "--resume", carried]
    );
}

/// Under handoff's sandbox: a private home over the user's, the directory's sessions folder on
/// top.
#[test]
fn under_handoffs_sandbox_only_the_sessions_folder_is_the_users() {
    let fx = Fixture::new();
    let carried = "0b6a3c1e-2f4d-4e5a-8b7c-9d0e1f2a3b4c";
    let inv = receiver_plan(&fx, Some(carried), ReceiverRole::Implement, true);
    let binds = inv.sandbox.unwrap().binds;
    let user_home = Utf8Path::new("/home/tester/.qwen");
    let chats = user_home
        .join("projects")
        .join(
            fx.cwd
                .as_str()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
        )
        .join("chats");
    assert_eq!(binds[0].dest, user_home);
    assert!(binds[0].source.starts_with(&fx.run_path) && binds[0].writable);
    assert_eq!((&binds[1].source, &binds[1].dest), (&chats, &chats));
    assert!(binds[1].writable);
    assert_eq!(binds.len(), 2);
    assert!(inv.dirs.contains(&chats));
}

#[test]
fn the_receivers_output_names_its_session() {
    let raw = stdout(fixture("qwen-write.out"));
    let report = Qwen.parse_receiver(&raw);
    assert_eq!(report.session_id.as_deref(), Some(SESSION));
    assert_eq!(report.last_message.as_deref(), Some("FAKE_FINAL"));
    assert_eq!(report.failure, None);
    let failed = Qwen.parse_receiver(&stdout(fixture("api-qwen-auth.out")));
    assert_eq!(
        failed.failure.as_deref(),
        Some("[API Error: 401 fake failure 401]")
    );
    let cut = Qwen.parse_receiver(&RawOutput {
        stderr: b"No saved session found with ID x.\n".to_vec(),
        ..RawOutput::default()
    });
    assert_eq!(
        cut.failure.as_deref(),
        Some("No saved session found with ID x.")
    );
}

proptest! {
    /// Any bytes as a session file read without a panic, and as a receiver's output too.
    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::try_from(dir.path().join("s.jsonl")).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let _ = Qwen.read_transcript(&path);
        let _ = Qwen.parse_receiver(&stdout(bytes));
    }
}
