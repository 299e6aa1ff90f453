//! Codex's store: finding rollouts in temporary stores, writing a carried conversation
//! (snapshot of the rollout, round trips through the reader, dry runs, no overwriting) and
//! copying a recorded rollout (plain and compressed) into a new thread.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::Codex;
use handoff_core::{AgentId, Role, SessionQuery, SessionRef, Sessions, StoreEnv};
use serde_json::Value;

use crate::store_claude::{
    CWD, NEW_ID, Store, comparable, lines, message, runtime, sample, target, text, transcript,
};

use crate::support::session_fixture;

/// The recorded rollout's thread.
const SRC_ID: &str = "01a2308e-9a92-7fa1-9b83-fc8f4a0751d4";

fn home(store: &Store) -> Utf8PathBuf {
    store.root.join("home/.codex")
}

fn write_file(path: &Utf8Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn set_age(path: &Utf8Path, seconds_ago: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(seconds_ago))
        .unwrap();
}

fn rollout(id: &str, cwd: &str) -> String {
    let meta = serde_json::json!({
        "timestamp": "2026-12-01T07:00:00.000Z",
        "type": "session_meta",
        "payload": {"id": id, "timestamp": "2026-12-01T07:00:00.000Z", "cwd": cwd,
                    "originator": "codex_exec", "cli_version": "0.171.0", "source": "exec"},
    });
    format!("{meta}\n")
}

/// The written rollout with the time it was written masked.
fn masked(path: &Utf8Path) -> Vec<Value> {
    let mut out = lines(path);
    out[0]["timestamp"] = "[now]".into();
    out[0]["payload"]["timestamp"] = "[now]".into();
    out
}

#[test]
fn a_carried_conversation_is_written_as_a_codex_rollout() {
    let store = Store::new();
    let carried = runtime()
        .block_on(Codex.write_session(&store.env, &sample(), &target(NEW_ID, CWD, false)))
        .unwrap();
    let path = &carried.files[0];
    let rel = path.strip_prefix(home(&store)).unwrap().as_str().to_owned();
    let day = regex_like_day(&rel);
    assert!(day, "{rel}");
    assert!(rel.ends_with(&format!("-{NEW_ID}.jsonl")), "{rel}");
    assert_eq!(carried.bytes, std::fs::metadata(path).unwrap().len());
    insta::assert_json_snapshot!("codex_written_rollout", masked(path));

    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Utf8Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(&home(&store).join("sessions")), 0o700);
    assert_eq!(store.files().len(), 1, "no temporary file is left");

    let back = Codex.read_transcript(path).unwrap();
    assert_eq!(comparable(&back.messages), comparable(&sample().messages));
    assert_eq!(back.source.session_id, NEW_ID);
    assert_eq!(back.source.cwd.as_deref(), Some(Utf8Path::new(CWD)));
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);

    // Codex finds it by id.
    let found = runtime()
        .block_on(Codex.find_session(&store.env, &SessionQuery::Id(NEW_ID.to_owned())))
        .unwrap()
        .unwrap();
    assert_eq!(&found.path, path);
}

/// `sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-…`, the day folder matching the name.
fn regex_like_day(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.len() != 5 || parts[0] != "sessions" {
        return false;
    }
    let name = parts[4];
    let date = format!("{}-{}-{}", parts[1], parts[2], parts[3]);
    name.starts_with(&format!("rollout-{date}T")) && name.as_bytes().get(27) == Some(&b'-')
}

#[test]
fn turns_group_messages_and_odd_shapes_are_kept() {
    let store = Store::new();
    let t = transcript(vec![
        message(
            Role::Assistant,
            "claude",
            Some("claude-sonnet-4-5"),
            "2026-12-01T07:00:00.000Z",
            vec![text("I was in the middle of the parser.")],
        ),
        message(
            Role::Assistant,
            "claude",
            None,
            "2026-12-01T07:00:01.000Z",
            vec![text("A second message.")],
        ),
        message(
            Role::User,
            "claude",
            None,
            "2026-12-01T07:00:02.000Z",
            vec![text("go on")],
        ),
        message(
            Role::User,
            "claude",
            None,
            "2026-12-01T07:00:03.000Z",
            vec![text("and test")],
        ),
        message(
            Role::Assistant,
            "claude",
            Some("claude-sonnet-4-5"),
            "2026-12-01T07:00:04.000Z",
            vec![text("Tested.")],
        ),
    ]);
    let carried = runtime()
        .block_on(Codex.write_session(&store.env, &t, &target(NEW_ID, CWD, false)))
        .unwrap();
    let kinds: Vec<String> = lines(&carried.files[0])
        .iter()
        .map(|l| {
            let p = &l["payload"];
            match l["type"].as_str().unwrap() {
                "response_item" => format!("item {}", p["role"].as_str().unwrap()),
                "event_msg" => p["type"].as_str().unwrap().to_owned(),
                other => other.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session_meta",
            "task_started",
            "item assistant",
            "agent_message",
            "item assistant",
            "agent_message",
            "task_complete",
            "task_started",
            "item user",
            "user_message",
            "item user",
            "user_message",
            "item assistant",
            "agent_message",
            "task_complete",
        ]
    );
    let back = Codex.read_transcript(&carried.files[0]).unwrap();
    assert_eq!(comparable(&back.messages), comparable(&t.messages));
}

#[test]
fn empty_conversations_dry_runs_and_existing_files() {
    let store = Store::new();
    let rt = runtime();
    let empty = transcript(Vec::new());
    let err = rt
        .block_on(Codex.write_session(&store.env, &empty, &target(NEW_ID, CWD, false)))
        .unwrap_err();
    assert!(err.to_string().contains("nothing to carry"), "{err}");
    let err = rt
        .block_on(Codex.write_session(&store.env, &sample(), &target("not-a-uuid", CWD, false)))
        .unwrap_err();
    assert!(err.to_string().contains("UUID"), "{err}");

    let planned = rt
        .block_on(Codex.write_session(&store.env, &sample(), &target(NEW_ID, CWD, true)))
        .unwrap();
    assert!(store.files().is_empty(), "{:?}", store.files());
    assert!(!home(&store).exists());
    let written = rt
        .block_on(Codex.write_session(&store.env, &sample(), &target(NEW_ID, CWD, false)))
        .unwrap();
    assert_eq!(planned.bytes, written.bytes);
    assert_eq!(planned.files.len(), 1);

    // The same thread written again in the same second is refused, the file left as it was.
    let before = std::fs::read(&written.files[0]).unwrap();
    let again =
        rt.block_on(Codex.write_session(&store.env, &sample(), &target(NEW_ID, CWD, false)));
    match again {
        Err(e) => assert!(e.to_string().contains("already exists"), "{e}"),
        // A second later the name differs: a second file, the first untouched.
        Ok(second) => assert_ne!(second.files, written.files),
    }
    assert_eq!(std::fs::read(&written.files[0]).unwrap(), before);
}

#[test]
fn rollouts_are_found_by_id_and_latest_by_directory() {
    let store = Store::new();
    let rt = runtime();
    let find = |q: SessionQuery| rt.block_on(Codex.find_session(&store.env, &q)).unwrap();
    let latest = |cwd: &str| SessionQuery::Latest { cwd: cwd.into() };
    assert_eq!(find(SessionQuery::Id(SRC_ID.to_owned())), None, "no store");
    assert_eq!(find(latest(CWD)), None);

    let sessions = home(&store).join("sessions");
    let a = "11111111-1111-4111-8111-111111111111";
    let b = "22222222-2222-4222-8222-222222222222";
    let c = "33333333-3333-4333-8333-333333333333";
    let old = sessions.join(format!("2026/11/30/rollout-2026-11-30T10-00-00-{a}.jsonl"));
    let new = sessions.join(format!("2026/12/01/rollout-2026-12-01T10-00-00-{b}.jsonl"));
    let other = sessions.join(format!("2026/12/01/rollout-2026-12-01T11-00-00-{c}.jsonl"));
    write_file(&old, rollout(a, CWD).as_bytes());
    write_file(&new, rollout(b, CWD).as_bytes());
    write_file(&other, rollout(c, "/other").as_bytes());
    set_age(&old, 600);
    set_age(&new, 300);
    // A compressed rollout and an archived one.
    let zst = sessions.join(format!(
        "2026/10/01/rollout-2026-10-01T10-00-00-{SRC_ID}.jsonl.zst"
    ));
    write_file(
        &zst,
        &std::fs::read(session_fixture("codex-rollout.jsonl.zst")).unwrap(),
    );
    set_age(&zst, 1200);
    let d = "44444444-4444-4444-8444-444444444444";
    let archived = home(&store).join(format!(
        "archived_sessions/rollout-2026-12-01T12-00-00-{d}.jsonl"
    ));
    write_file(&archived, rollout(d, CWD).as_bytes());

    assert_eq!(
        find(latest(CWD)),
        Some(SessionRef {
            provider: AgentId::CODEX,
            session_id: b.to_owned(),
            path: new.clone(),
            cwd: Some(CWD.into()),
        }),
        "archived threads are not the latest"
    );
    // A thread resumed later (an older file written last) is the latest.
    set_age(&old, 10);
    assert_eq!(find(latest(CWD)).unwrap().path, old);
    assert_eq!(find(latest("/other")).unwrap().session_id, c);
    assert_eq!(
        find(latest("$SCRATCH/repo")).unwrap().path,
        zst,
        "read through zstd"
    );
    assert_eq!(find(latest("/nowhere")), None);

    assert_eq!(find(SessionQuery::Id(a.to_owned())).unwrap().path, old);
    assert_eq!(find(SessionQuery::Id(d.to_owned())).unwrap().path, archived);
    let z = find(SessionQuery::Id(SRC_ID.to_owned())).unwrap();
    assert_eq!(z.path, zst);
    assert_eq!(z.cwd.as_deref(), Some(Utf8Path::new("$SCRATCH/repo")));
    assert_eq!(find(SessionQuery::Id("../../x".to_owned())), None);

    // CODEX_HOME wins over HOME; no HOME at all is an error.
    let mut env = store.env.clone();
    env.vars.insert(
        "CODEX_HOME".to_owned(),
        store.root.join("nothing").to_string(),
    );
    assert_eq!(
        rt.block_on(Codex.find_session(&env, &latest(CWD))).unwrap(),
        None
    );
    assert!(
        rt.block_on(Codex.find_session(&StoreEnv::default(), &latest(CWD)))
            .is_err()
    );
}

fn copy_of(name: &str) {
    let store = Store::new();
    let rt = runtime();
    let src = home(&store).join(format!(
        "sessions/2026/12/01/rollout-2026-12-01T07-43-01-{SRC_ID}.{}",
        name.split_once('.').unwrap().1
    ));
    let original = std::fs::read(session_fixture(name)).unwrap();
    write_file(&src, &original);
    let source = rt
        .block_on(Codex.find_session(&store.env, &SessionQuery::Id(SRC_ID.to_owned())))
        .unwrap()
        .unwrap();
    assert_eq!(source.session_id, SRC_ID);

    let planned = rt
        .block_on(Codex.copy_session(&store.env, &source, &target(NEW_ID, CWD, true)))
        .unwrap();
    assert_eq!(store.files().len(), 1, "a dry run writes nothing");
    let carried = rt
        .block_on(Codex.copy_session(&store.env, &source, &target(NEW_ID, CWD, false)))
        .unwrap();
    assert_eq!(planned.bytes, carried.bytes);
    assert_eq!(std::fs::read(&src).unwrap(), original, "source unchanged");
    let path = &carried.files[0];
    assert!(
        path.as_str().ends_with(&format!("-{NEW_ID}.jsonl")),
        "{path}"
    );

    let copied = lines(path);
    let plain: Vec<Value> = std::fs::read_to_string(session_fixture("codex-rollout.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(copied.len(), plain.len());
    let meta = &copied[0]["payload"];
    assert_eq!(meta["id"], NEW_ID);
    assert_eq!(meta["session_id"], NEW_ID);
    assert_eq!(meta["forked_from_id"], SRC_ID);
    assert_eq!(meta["cwd"], CWD);
    for (a, b) in plain.iter().zip(&copied) {
        let text = b.to_string();
        assert!(
            !text.contains(&format!("\"thread_id\":\"{SRC_ID}\"")),
            "{text}"
        );
        if b["type"] == "turn_context" {
            assert_eq!(b["payload"]["cwd"], CWD);
        }
        if a["type"] == "response_item" {
            assert_eq!(a, b, "the conversation is copied as it was");
        }
    }
    let a = Codex
        .read_transcript(&session_fixture("codex-rollout.jsonl"))
        .unwrap();
    let b = Codex.read_transcript(path).unwrap();
    assert_eq!(a.messages, b.messages);
    assert_eq!(b.source.session_id, NEW_ID);
    assert_eq!(b.source.cwd.as_deref(), Some(Utf8Path::new(CWD)));
}

#[test]
fn a_copy_is_a_new_thread_forked_from_the_source() {
    copy_of("codex-rollout.jsonl");
}

#[test]
fn a_compressed_rollout_is_copied_plain() {
    copy_of("codex-rollout.jsonl.zst");
}
