//! `Cursor::read_transcript` and `find_session` on synthetic agent transcripts made from the
//! documented format (`{role, message: {content: [...]}}` lines, Anthropic-style blocks), a
//! cut-off copy and arbitrary bytes. Cursor's store is never written.

use std::collections::BTreeMap;

use camino::Utf8PathBuf;
use handoff_adapters::Cursor;
use handoff_core::{
    CarryTarget, Provider, Role, SessionQuery, Sessions, StoreEnv, TranscriptError,
};
use proptest::prelude::*;

use crate::support::{session_fixture, texts};

#[test]
fn a_transcript_reads_to_its_two_turns() {
    let t = Cursor
        .read_transcript(&session_fixture("cursor-transcript.jsonl"))
        .unwrap();
    assert_eq!(t.source.session_id, "cursor-transcript");
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    use Role::{Assistant, User};
    assert_eq!(
        texts(&t),
        [
            (
                User,
                "text: Read notes.txt and tell me what it says.".to_owned()
            ),
            (Assistant, "text: I'll read the file.".to_owned()),
            (Assistant, r#"call Read: {"path":"notes.txt"}"#.to_owned()),
            (User, "result: first line of the notes".to_owned()),
            (
                Assistant,
                "text: The notes say: first line of the notes.".to_owned()
            ),
            (User, "text: How many lines does it have?".to_owned()),
            (
                Assistant,
                r#"call Shell: {"command":"wc -l notes.txt"}"#.to_owned()
            ),
            (
                User,
                "result (error): wc: notes.txt: Permission denied".to_owned()
            ),
            (Assistant, "text: It has one line.".to_owned()),
        ]
    );
    let json = serde_json::to_string(&t).unwrap();
    assert!(
        !json.contains("hidden chain of thought"),
        "hidden reasoning leaked"
    );
    let mut shown = t.clone();
    shown.source.path = "cursor-transcript.jsonl".into();
    insta::assert_json_snapshot!("cursor_transcript", shown);
}

#[test]
fn a_cut_off_last_line_is_a_warning() {
    let t = Cursor
        .read_transcript(&session_fixture("cursor-truncated.jsonl"))
        .unwrap();
    assert!(!t.messages.is_empty());
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    assert!(t.warnings[0].contains("last line"));
}

#[test]
fn unknown_lines_and_blocks_are_warnings_and_garbage_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::try_from(dir.path().join("c.jsonl")).unwrap();
    std::fs::write(
        &path,
        "not json\n{\"role\":\"system\",\"message\":{\"content\":\"x\"}}\n\
         {\"role\":\"assistant\",\"message\":{\"content\":[{\"type\":\"hologram\"},{\"type\":\"text\",\"text\":\"hi\"}]}}\n\
         {\"role\":\"user\",\"message\":{\"content\":\"plain string\"}}\n",
    )
    .unwrap();
    let t = Cursor.read_transcript(&path).unwrap();
    assert_eq!(
        texts(&t),
        [
            (Role::Assistant, "text: hi".to_owned()),
            (Role::User, "text: plain string".to_owned())
        ]
    );
    assert_eq!(t.warnings.len(), 3, "{:?}", t.warnings);
    std::fs::write(&path, "garbage\n\0\0\n").unwrap();
    assert!(matches!(
        Cursor.read_transcript(&path),
        Err(TranscriptError::Malformed { .. })
    ));
}

#[test]
fn every_cut_of_the_transcript_reads_or_errs() {
    let bytes = std::fs::read(session_fixture("cursor-transcript.jsonl")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::try_from(dir.path().join("cut.jsonl")).unwrap();
    for end in 0..bytes.len() {
        std::fs::write(&path, &bytes[..end]).unwrap();
        let _ = Cursor.read_transcript(&path);
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::try_from(dir.path().join("x.jsonl")).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let _ = Cursor.read_transcript(&path);
    }
}

/// A home with Cursor transcripts for two projects.
fn home() -> (tempfile::TempDir, StoreEnv, Utf8PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::try_from(std::fs::canonicalize(tmp.path()).unwrap()).unwrap();
    let cwd = Utf8PathBuf::from("/work/my.app");
    let write = |rel: &str, age: u64| {
        let p = root.join(".cursor/projects").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::copy(session_fixture("cursor-transcript.jsonl"), &p).unwrap();
        let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(when)
            .unwrap();
    };
    write("work-my.app/agent-transcripts/old-1/old-1.jsonl", 500);
    write("work-my.app/agent-transcripts/new-2/new-2.jsonl", 100);
    write("work-my.app/agent-transcripts/subagents/sub-3.jsonl", 1);
    write("work-my-app/agent-transcripts/flat-4.jsonl", 300);
    write(
        "work-other/agent-transcripts/elsewhere-5/elsewhere-5.jsonl",
        1,
    );
    let mut vars = BTreeMap::new();
    vars.insert("HOME".to_owned(), root.to_string());
    let env = StoreEnv {
        vars,
        executable: None,
        scratch: None,
    };
    (tmp, env, cwd)
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn the_latest_transcript_of_a_directory_and_any_by_id() {
    let (_tmp, env, cwd) = home();
    let latest = block_on(Cursor.find_session(&env, &SessionQuery::Latest { cwd: cwd.clone() }))
        .unwrap()
        .unwrap();
    assert_eq!(
        latest.session_id, "new-2",
        "subagents and other projects are skipped"
    );
    assert_eq!(latest.cwd.as_deref(), Some(cwd.as_path()));
    let by_id = block_on(Cursor.find_session(&env, &SessionQuery::Id("elsewhere-5".into())))
        .unwrap()
        .unwrap();
    assert!(by_id.path.ends_with("elsewhere-5/elsewhere-5.jsonl"));
    let flat = block_on(Cursor.find_session(&env, &SessionQuery::Id("flat-4".into())))
        .unwrap()
        .unwrap();
    assert!(flat.path.ends_with("agent-transcripts/flat-4.jsonl"));
    for missing in ["nope", "../x", ""] {
        let r = block_on(Cursor.find_session(&env, &SessionQuery::Id(missing.into())));
        assert!(matches!(r, Ok(None)), "{missing}: {r:?}");
    }
    let none = block_on(Cursor.find_session(
        &env,
        &SessionQuery::Latest {
            cwd: "/nowhere".into(),
        },
    ));
    assert!(matches!(none, Ok(None)), "{none:?}");
}

#[test]
fn cursor_sessions_are_read_only() {
    let (_tmp, env, cwd) = home();
    let target = CarryTarget {
        session_id: "x".into(),
        cwd,
        model: None,
        dry_run: true,
    };
    let t = Cursor
        .read_transcript(&session_fixture("cursor-transcript.jsonl"))
        .unwrap();
    assert!(block_on(Cursor.write_session(&env, &t, &target)).is_err());
    // So a Cursor receiver starts from the note and a recap.
    assert_eq!(
        Cursor.receiver().map(|r| r.level()),
        Some(handoff_core::ReceiverLevel::FreshAgent)
    );
}
