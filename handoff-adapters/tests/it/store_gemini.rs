//! Gemini sessions, read as the source of a continued task: a real session (Gemini CLI 0.61.0
//! with a `write_file` call, its result and the answer; scratch paths replaced), record
//! replacement and `$set` patches, finding sessions by id and by directory, and nothing
//! written into its store.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::Gemini;
use handoff_core::{
    AgentId, RawOutput, Receiver, ReceiverRequest, ReceiverRole, ResumeFrom, Role, RunDir,
    SessionQuery, Sessions, StoreEnv,
};
use proptest::prelude::*;

use crate::support::*;

const SESSION: &str = "5eb8a97b-cd8b-4893-ae71-7bb3aab742d8";

#[test]
fn a_real_session_reads_to_its_turns() {
    let t = Gemini
        .read_transcript(&session_fixture("gemini-write-session.jsonl"))
        .unwrap();
    assert_eq!(t.source.session_id, SESSION);
    assert_eq!(t.source.provider, AgentId::GEMINI);
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let got = texts(&t);
    // Gemini's set-up context is left out; the person's words come first.
    assert_eq!(got[0], (Role::User, "text: write out.txt\n".to_owned()));
    assert_eq!(
        got[1],
        (
            Role::Assistant,
            r#"call write_file: {"content":"hi\n","file_path":"$SCRATCH/repo/out.txt"}"#.to_owned()
        )
    );
    assert!(
        matches!(&got[2], (Role::User, s) if s.starts_with("result: Successfully created")),
        "{got:?}"
    );
    assert_eq!(got[3].0, Role::Assistant);
    assert!(got[3].1.contains("handoff.provider-output.v1"), "{got:?}");
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(t.messages[1].model.as_deref(), Some("gemini-2.5-flash"));
}

#[test]
fn later_records_replace_earlier_ones_and_set_replaces_all() {
    let text = concat!(
        r#"{"sessionId":"s-1","projectHash":"x","startTime":"t","lastUpdated":"t","kind":"main"}"#,
        "\n",
        r#"{"id":"a","type":"user","content":[{"text":"first"}]}"#,
        "\n",
        r#"{"id":"b","type":"gemini","content":"draft"}"#,
        "\n",
        r#"{"id":"b","type":"gemini","content":"final"}"#,
        "\n",
        r#"{"id":"c","type":"info","content":"shown, not said"}"#,
        "\n",
        "not json\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::from_path_buf(dir.path().join("s.jsonl")).unwrap();
    std::fs::write(&path, text).unwrap();
    let t = Gemini.read_transcript(&path).unwrap();
    assert_eq!(
        texts(&t),
        [
            (Role::User, "text: first".to_owned()),
            (Role::Assistant, "text: final".to_owned())
        ]
    );
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    let reset = format!(
        "{text}{}\n",
        r#"{"$set":{"messages":[{"id":"z","type":"user","content":"only this"}]}}"#
    );
    std::fs::write(&path, reset).unwrap();
    let t = Gemini.read_transcript(&path).unwrap();
    assert_eq!(texts(&t), [(Role::User, "text: only this".to_owned())]);
    std::fs::write(&path, "garbage\n").unwrap();
    assert!(Gemini.read_transcript(&path).is_err());
}

/// A Gemini store with the recorded session in the project at `repo`.
fn seeded(home: &Utf8Path, repo: &str) -> Utf8PathBuf {
    let project = home.join(".gemini/tmp/repo");
    std::fs::create_dir_all(project.join("chats")).unwrap();
    std::fs::write(project.join(".project_root"), repo).unwrap();
    let text = std::fs::read_to_string(session_fixture("gemini-write-session.jsonl"))
        .unwrap()
        .replace("$SCRATCH/repo", repo);
    let file = project.join("chats/session-2026-12-06T23-52-5eb8a97b.jsonl");
    std::fs::write(&file, text).unwrap();
    file
}

#[tokio::test]
async fn sessions_are_found_by_id_and_by_directory() {
    let dir = tempfile::tempdir().unwrap();
    let home = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).unwrap();
    let file = seeded(&home, "/work/repo");
    let s = home_store(&home);
    let by_id = Gemini
        .find_session(&s, &SessionQuery::Id(SESSION.to_owned()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_id.path, file);
    assert_eq!(by_id.cwd.as_deref(), Some(Utf8Path::new("/work/repo")));
    let latest = Gemini
        .find_session(
            &s,
            &SessionQuery::Latest {
                cwd: "/work/repo".into(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.session_id, SESSION);
    for query in [
        SessionQuery::Id("5eb8a97b-0000-4000-8000-000000000000".to_owned()),
        SessionQuery::Id("../../etc".to_owned()),
        SessionQuery::Latest {
            cwd: "/work/other".into(),
        },
    ] {
        assert!(
            Gemini.find_session(&s, &query).await.unwrap().is_none(),
            "{query:?}"
        );
    }
    // GEMINI_CLI_HOME moves the store.
    let moved = StoreEnv {
        vars: BTreeMap::from([
            ("HOME".to_owned(), "/nowhere".to_owned()),
            ("GEMINI_CLI_HOME".to_owned(), home.to_string()),
        ]),
        executable: None,
        scratch: None,
    };
    assert!(
        Gemini
            .find_session(&moved, &SessionQuery::Id(SESSION.to_owned()))
            .await
            .unwrap()
            .is_some()
    );
}

/// A carried conversation lands in the project folder of the target directory (made, with
/// its `.project_root`, when the project has none), named as Gemini names its sessions, and
/// reads back to the same turns with who said them.
#[tokio::test]
async fn a_carried_conversation_is_written_where_gemini_resumes_it() {
    let p = provider("gemini");
    assert!(p.sessions().is_some() && p.receiver().is_some());
    let dir = tempfile::tempdir().unwrap();
    let home = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).unwrap();
    let source = Gemini
        .read_transcript(&session_fixture("gemini-write-session.jsonl"))
        .unwrap();
    let id = "6a1f1f5e-3c2b-4d5e-8f90-123456789abc";
    let target = |cwd: &str| handoff_core::CarryTarget {
        session_id: id.to_owned(),
        cwd: cwd.into(),
        model: Some("gemini-2.5-flash".to_owned()),
        dry_run: false,
    };
    let s = home_store(&home);
    let carried = Gemini
        .write_session(&s, &source, &target("/work/My Repo"))
        .await
        .unwrap();
    let file = &carried.files[0];
    let project = home.join(".gemini/tmp/my-repo");
    assert!(file.starts_with(project.join("chats")), "{file}");
    assert!(file.as_str().ends_with("-6a1f1f5e.jsonl"), "{file}");
    assert_eq!(
        std::fs::read_to_string(project.join(".project_root")).unwrap(),
        "/work/My Repo"
    );
    let back = Gemini.read_transcript(file).unwrap();
    assert_eq!(back.source.session_id, id);
    assert_eq!(texts(&back), texts(&source));
    assert!(back.messages.iter().all(|m| m.provider == AgentId::GEMINI));
    let found = Gemini
        .find_session(&s, &SessionQuery::Id(id.to_owned()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&found.path, file);
    // The same id again is refused; another project of the same name gets its own folder.
    assert!(
        Gemini
            .write_session(&s, &source, &target("/work/My Repo"))
            .await
            .is_err()
    );
    let mut other = target("/elsewhere/my-repo");
    other.session_id = "7b2f1f5e-3c2b-4d5e-8f90-123456789abc".to_owned();
    let carried = Gemini.write_session(&s, &source, &other).await.unwrap();
    assert!(
        carried.files[0].starts_with(home.join(".gemini/tmp/my-repo-1/chats")),
        "{:?}",
        carried.files
    );
}

fn receiver_plan(
    fx: &Fixture,
    resume: Option<&str>,
    role: ReceiverRole,
    sandbox: bool,
) -> handoff_core::Invocation {
    let request = ReceiverRequest {
        target: AgentId::GEMINI,
        cwd: fx.cwd.clone(),
        role,
        model: Some("gemini-2.5-flash".into()),
        effort: None,
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
        executable: "/usr/local/bin/gemini".into(),
        prompt: "take over".into(),
        output_schema: serde_json::Value::Null,
        mcp: None,
        parent_env: parent_env(),
        agent_config: Default::default(),
        nested: None,
    };
    Gemini.receiver_invocation(&request, &run).unwrap()
}

#[test]
fn the_receiver_resumes_in_the_users_store() {
    let fx = Fixture::new();
    let carried = "0b6a3c1e-2f4d-4e5a-8b7c-9d0e1f2a3b4c";
    let inv = receiver_plan(&fx, Some(carried), ReceiverRole::Implement, false);
    assert_eq!(arg_after(&inv.args, "--resume"), Some(carried));
    assert_eq!(arg_after(&inv.args, "--model"), Some("gemini-2.5-flash"));
    assert!(inv.args.iter().any(|a| a == "--skip-trust"));
    assert!(
        !inv.env.contains_key("GEMINI_CLI_HOME"),
        "the user's own home"
    );
    assert_eq!(inv.stdin, handoff_core::StdinSource::Prompt);
    let policy = String::from_utf8(inv.files[0].contents.clone()).unwrap();
    assert!(
        !policy.contains("write_file") && policy.contains("web_fetch"),
        "{policy}"
    );
    // The worktree's project folder in the user's store, made for it.
    let project = Utf8PathBuf::from("/home/tester/.gemini/tmp")
        .join(fx.cwd.file_name().unwrap().to_ascii_lowercase());
    assert!(inv.dirs.contains(&project.join("chats")), "{:?}", inv.dirs);
    assert!(
        inv.files
            .iter()
            .any(|f| f.path == project.join(".project_root"))
    );
    // A new session takes the chosen id; a review may not write.
    let inv = receiver_plan(&fx, None, ReceiverRole::Review, false);
    assert_eq!(
        arg_after(&inv.args, "--session-id"),
        Some("6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f")
    );
    let policy = String::from_utf8(inv.files[0].contents.clone()).unwrap();
    assert!(policy.contains("write_file"), "{policy}");
    assert_eq!(
        Gemini.resume_command(carried, &Default::default()),
        ["gemini", "--resume", carried]
    );
}

/// Under handoff's sandbox: a private Gemini directory over the user's, the project's chats
/// folder on top.
#[test]
fn under_handoffs_sandbox_only_the_chats_folder_is_the_users() {
    let fx = Fixture::new();
    let inv = receiver_plan(&fx, None, ReceiverRole::Implement, true);
    let binds = inv.sandbox.unwrap().binds;
    let user = Utf8Path::new("/home/tester/.gemini");
    assert_eq!(binds[0].dest, user);
    assert!(binds[0].source.starts_with(&fx.run_path));
    assert!(binds[1].dest.starts_with(user.join("tmp")));
    assert!(binds[1].dest.ends_with("chats"));
    assert_eq!(binds[1].source, binds[1].dest);
    assert!(binds.iter().all(|b| b.writable));
    let settings = inv
        .files
        .iter()
        .find(|f| f.path.as_str().ends_with("/.gemini/settings.json"))
        .unwrap();
    let settings: serde_json::Value = serde_json::from_slice(&settings.contents).unwrap();
    assert_eq!(
        settings["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
}

#[test]
fn the_receivers_output_names_its_session() {
    let report = Gemini.parse_receiver(&stdout(fixture("gemini-write.out")));
    assert_eq!(
        report.session_id.as_deref(),
        Some("5eb8a97b-cd8b-4893-ae71-7bb3aab742d8")
    );
    assert!(report.last_message.unwrap().contains("provider-output"));
    assert_eq!(report.failure, None);
    let failed = Gemini.parse_receiver(&stdout(fixture("gemini-turn-limit.out")));
    assert!(failed.failure.unwrap().contains("max session turns"));
    let cut = Gemini.parse_receiver(&RawOutput {
        stderr: b"Error resuming session: No previous sessions found for this project.\n".to_vec(),
        ..RawOutput::default()
    });
    assert_eq!(
        cut.failure.as_deref(),
        Some("Error resuming session: No previous sessions found for this project.")
    );
}

proptest! {
    /// Any bytes as a receiver's output read without a panic.
    #[test]
    fn any_output_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = Gemini.parse_receiver(&RawOutput { stdout: bytes, ..RawOutput::default() });
    }
}

proptest! {
    /// Any bytes read without a panic.
    #[test]
    fn any_bytes_never_panic(lines in prop::collection::vec("\\PC{0,60}", 0..8)) {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(dir.path().join("s.jsonl")).unwrap();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let _ = Gemini.read_transcript(&path);
    }
}
