//! Claude Code's store: finding sessions in temporary stores, writing a carried conversation
//! (snapshot of the lines, round trips through the reader, dry runs, no overwriting) and
//! copying a recorded session into a new one (source untouched, ids and cwd re-rooted).

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::{Claude, Codex};
use handoff_core::{
    AgentId, CarryTarget, Message, Part, Role, SessionQuery, SessionRef, Sessions, StoreEnv,
    TRANSCRIPT_SCHEMA, Transcript, TranscriptSource, same_message,
};
use proptest::prelude::*;
use serde_json::Value;

use crate::support::session_fixture;

pub const NEW_ID: &str = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
pub const CWD: &str = "/home/u/my_proj.v2";

/// A temporary store: its root and the environment that points a CLI at it.
pub struct Store {
    _dir: tempfile::TempDir,
    pub root: Utf8PathBuf,
    pub env: StoreEnv,
}

impl Store {
    /// A store whose `HOME` is a fresh temporary directory.
    pub fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::try_from(dir.path().canonicalize().unwrap()).unwrap();
        let env = StoreEnv {
            vars: BTreeMap::from([("HOME".to_owned(), root.join("home").to_string())]),
            ..StoreEnv::default()
        };
        Store {
            _dir: dir,
            root,
            env,
        }
    }

    pub fn projects(&self) -> Utf8PathBuf {
        self.root.join("home/.claude/projects")
    }

    /// Every file under the store, relative to its root.
    pub fn files(&self) -> Vec<String> {
        fn walk(dir: &Utf8Path, root: &Utf8Path, out: &mut Vec<String>) {
            for e in dir.read_dir_utf8().into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(p, root, out);
                } else {
                    out.push(p.strip_prefix(root).unwrap().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &self.root, &mut out);
        out.sort();
        out
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn target(id: &str, cwd: &str, dry_run: bool) -> CarryTarget {
    CarryTarget {
        session_id: id.to_owned(),
        cwd: cwd.into(),
        model: None,
        dry_run,
    }
}

pub fn message(
    role: Role,
    provider: &str,
    model: Option<&str>,
    at: &str,
    parts: Vec<Part>,
) -> Message {
    Message {
        role,
        provider: AgentId::parse(provider).unwrap(),
        model: model.map(str::to_owned),
        at: Some(at.to_owned()),
        source_id: None,
        parts,
    }
}

pub fn text(t: &str) -> Part {
    Part::Text { text: t.to_owned() }
}

pub fn transcript(messages: Vec<Message>) -> Transcript {
    Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::CODEX,
            session_id: "01a2308e-9a92-7fa1-9b83-fc8f4a0751d4".to_owned(),
            path: "/src/rollout.jsonl".into(),
            cwd: Some("/elsewhere/repo".into()),
        },
        messages,
        warnings: Vec::new(),
    }
}

/// A conversation carried from Codex: a prompt, reasoning and a tool call, its result, an
/// answer, and a follow-up from Claude Code with an error result.
pub fn sample() -> Transcript {
    transcript(vec![
        message(
            Role::User,
            "codex",
            None,
            "2026-12-01T07:00:00.000Z",
            vec![text("Fix the CSV parser: quoted fields break.")],
        ),
        message(
            Role::Assistant,
            "codex",
            Some("gpt-5.5"),
            "2026-12-01T07:00:01.000Z",
            vec![
                Part::Reasoning {
                    text: "Read the splitter first.".to_owned(),
                },
                Part::ToolCall {
                    name: "exec_command".to_owned(),
                    id: Some("call_1".to_owned()),
                    input: r#"{"cmd":"cat src/csv.rs"}"#.to_owned(),
                },
            ],
        ),
        message(
            Role::User,
            "codex",
            None,
            "2026-12-01T07:00:02.000Z",
            vec![Part::ToolResult {
                id: Some("call_1".to_owned()),
                output: "pub fn split(line: &str) -> Vec<&str> {\n    line.split(',').collect()\n}"
                    .to_owned(),
                is_error: false,
            }],
        ),
        message(
            Role::Assistant,
            "codex",
            Some("gpt-5.5"),
            "2026-12-01T07:00:03.000Z",
            vec![text(
                "split() ignores quotes; next: a state machine over the bytes.",
            )],
        ),
        message(
            Role::User,
            "claude",
            None,
            "2026-12-01T07:00:04.000Z",
            vec![text("Run the tests.")],
        ),
        message(
            Role::Assistant,
            "claude",
            Some("claude-sonnet-4-5"),
            "2026-12-01T07:00:05.000Z",
            vec![
                Part::ToolCall {
                    name: "Bash".to_owned(),
                    id: None,
                    input: r#"{"command":"cargo test"}"#.to_owned(),
                },
                Part::ToolResult {
                    id: None,
                    output: "error[E0425]: cannot find `state`".to_owned(),
                    is_error: true,
                },
            ],
        ),
    ])
}

/// The lines of a file, parsed.
pub fn lines(path: &Utf8Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The neutral messages without what a carried copy can't keep (source ids).
pub fn comparable(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .cloned()
        .map(|mut m| {
            m.source_id = None;
            m
        })
        .collect()
}

fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn write_file(path: &Utf8Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn set_age(path: &Utf8Path, seconds_ago: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(seconds_ago))
        .unwrap();
}

fn session_line(id: &str, cwd: &str, text: &str) -> String {
    serde_json::json!({
        "parentUuid": null, "isSidechain": false, "type": "user",
        "message": {"role": "user", "content": text},
        "uuid": format!("u-{id}"), "timestamp": "2026-12-01T07:00:00.000Z",
        "cwd": cwd, "sessionId": id, "version": "2.1.197",
    })
    .to_string()
        + "\n"
}

#[test]
fn a_carried_conversation_is_written_as_claude_code_lines() {
    let store = Store::new();
    let rt = runtime();
    let carried = rt
        .block_on(Claude.write_session(&store.env, &sample(), &target(NEW_ID, CWD, false)))
        .unwrap();
    let path = store
        .projects()
        .join("-home-u-my-proj-v2")
        .join(format!("{NEW_ID}.jsonl"));
    assert_eq!(carried.session_id, NEW_ID);
    assert_eq!(carried.files, std::slice::from_ref(&path));
    assert_eq!(carried.bytes, std::fs::metadata(&path).unwrap().len());
    insta::assert_json_snapshot!("claude_written_session", lines(&path));

    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Utf8Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(&store.projects()), 0o700);
    assert_eq!(
        store.files(),
        [format!(
            "home/.claude/projects/-home-u-my-proj-v2/{NEW_ID}.jsonl"
        )],
        "no temporary file is left"
    );

    // Read back: the same messages, from the providers and models that wrote them.
    let back = Claude.read_transcript(&path).unwrap();
    assert_eq!(comparable(&back.messages), comparable(&sample().messages));
    assert_eq!(back.source.session_id, NEW_ID);
    assert_eq!(back.source.cwd.as_deref(), Some(Utf8Path::new(CWD)));
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
}

#[test]
fn an_assistant_first_conversation_opens_with_a_hidden_user_line() {
    let store = Store::new();
    let t = transcript(vec![
        message(
            Role::Assistant,
            "codex",
            None,
            "2026-12-01T07:00:00.000Z",
            vec![text("I was in the middle of the parser.")],
        ),
        message(
            Role::Assistant,
            "codex",
            Some("gpt-5.5"),
            "2026-12-01T07:00:01.000Z",
            vec![text("Second message of the same turn.")],
        ),
        message(
            Role::User,
            "codex",
            None,
            "2026-12-01T07:00:02.000Z",
            vec![text("go on")],
        ),
        message(
            Role::User,
            "codex",
            None,
            "2026-12-01T07:00:03.000Z",
            vec![text("and test")],
        ),
    ]);
    let carried = runtime()
        .block_on(Claude.write_session(&store.env, &t, &target(NEW_ID, CWD, false)))
        .unwrap();
    let written = lines(&carried.files[0]);
    assert_eq!(written.len(), 5);
    assert_eq!(written[0]["type"], "user");
    assert_eq!(written[0]["isMeta"], true);
    assert_eq!(written[1]["parentUuid"], written[0]["uuid"]);
    assert_eq!(written[1]["message"]["model"], "unknown");
    assert_ne!(
        written[1]["message"]["id"], written[2]["message"]["id"],
        "consecutive assistant messages stay apart"
    );
    let back = Claude.read_transcript(&carried.files[0]).unwrap();
    assert_eq!(comparable(&back.messages), comparable(&t.messages));
}

#[test]
fn empty_conversations_are_refused_and_times_default_to_now() {
    let store = Store::new();
    let rt = runtime();
    let empty = transcript(vec![message(
        Role::User,
        "codex",
        None,
        "2026-12-01T07:00:00.000Z",
        vec![text("   ")],
    )]);
    let err = rt
        .block_on(Claude.write_session(&store.env, &empty, &target(NEW_ID, CWD, false)))
        .unwrap_err();
    assert!(err.to_string().contains("nothing to carry"), "{err}");
    assert!(store.files().is_empty());

    let mut t = sample();
    t.messages[0].at = None;
    let carried = rt
        .block_on(Claude.write_session(&store.env, &t, &target(NEW_ID, CWD, false)))
        .unwrap();
    let first = &lines(&carried.files[0])[0];
    let at = first["timestamp"].as_str().unwrap();
    assert!(at.len() == 24 && at.ends_with('Z') && at > "2026", "{at}");
}

#[test]
fn a_dry_run_writes_nothing_and_existing_files_are_never_replaced() {
    let store = Store::new();
    let rt = runtime();
    let planned = rt
        .block_on(Claude.write_session(&store.env, &sample(), &target(NEW_ID, CWD, true)))
        .unwrap();
    assert!(store.files().is_empty(), "{:?}", store.files());
    assert!(!store.projects().exists());
    let written = rt
        .block_on(Claude.write_session(&store.env, &sample(), &target(NEW_ID, CWD, false)))
        .unwrap();
    assert_eq!(planned, written, "the plan is what is written");

    let before = std::fs::read(&written.files[0]).unwrap();
    let mut other = sample();
    other.messages.truncate(1);
    for dry_run in [false, true] {
        let err = rt
            .block_on(Claude.write_session(&store.env, &other, &target(NEW_ID, CWD, dry_run)))
            .unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
    }
    assert_eq!(std::fs::read(&written.files[0]).unwrap(), before);
    assert_eq!(store.files().len(), 1);
}

#[test]
fn the_folder_of_the_cwd_is_the_one_claude_code_already_uses() {
    let store = Store::new();
    // Claude Code's own folder for the directory, under a name our rule would not give.
    let own = store.projects().join("claude-own-folder");
    write_file(&own.join("a.jsonl"), &session_line("a", CWD, "hi"));
    let carried = runtime()
        .block_on(Claude.write_session(&store.env, &sample(), &target(NEW_ID, CWD, false)))
        .unwrap();
    assert_eq!(carried.files[0], own.join(format!("{NEW_ID}.jsonl")));
}

#[test]
fn sessions_are_found_by_id_and_latest_by_directory() {
    let store = Store::new();
    let rt = runtime();
    let find = |q: SessionQuery| rt.block_on(Claude.find_session(&store.env, &q)).unwrap();
    let latest = |cwd: &str| SessionQuery::Latest { cwd: cwd.into() };

    // No store at all.
    assert_eq!(find(SessionQuery::Id(NEW_ID.to_owned())), None);
    assert_eq!(find(latest(CWD)), None);

    let folder = store.projects().join(slug(CWD));
    let old = folder.join("11111111-1111-4111-8111-111111111111.jsonl");
    let new = folder.join("22222222-2222-4222-8222-222222222222.jsonl");
    write_file(
        &old,
        &session_line("11111111-1111-4111-8111-111111111111", CWD, "old"),
    );
    write_file(
        &new,
        &session_line("22222222-2222-4222-8222-222222222222", CWD, "new"),
    );
    set_age(&old, 600);
    set_age(&new, 300);
    // Newer, but not a main session: a sidechain file, a sub-agent transcript, and a session
    // of the same folder that ran in another directory.
    let side = folder.join("agent-1234.jsonl");
    write_file(
        &side,
        &session_line("22222222-2222-4222-8222-222222222222", CWD, "side"),
    );
    let sub = folder.join("22222222-2222-4222-8222-222222222222/subagents/agent-9.jsonl");
    write_file(
        &sub,
        &session_line("22222222-2222-4222-8222-222222222222", CWD, "sub"),
    );
    let elsewhere = folder.join("33333333-3333-4333-8333-333333333333.jsonl");
    write_file(
        &elsewhere,
        &session_line(
            "33333333-3333-4333-8333-333333333333",
            "/home/u/my-proj-v2",
            "x",
        ),
    );

    assert_eq!(
        find(latest(CWD)),
        Some(SessionRef {
            provider: AgentId::CLAUDE,
            session_id: "22222222-2222-4222-8222-222222222222".to_owned(),
            path: new.clone(),
            cwd: Some(CWD.into()),
        })
    );
    set_age(&new, 900);
    assert_eq!(find(latest(CWD)).unwrap().path, old);
    assert_eq!(
        find(latest("/home/u/my-proj-v2")).unwrap().path,
        elsewhere,
        "same slug, other directory"
    );
    assert_eq!(find(latest("/nowhere")), None);

    let by_id = find(SessionQuery::Id(
        "22222222-2222-4222-8222-222222222222".to_owned(),
    ))
    .unwrap();
    assert_eq!(by_id.path, new);
    assert_eq!(by_id.cwd.as_deref(), Some(Utf8Path::new(CWD)));
    assert_eq!(find(SessionQuery::Id("agent-1234".to_owned())), None);
    assert_eq!(find(SessionQuery::Id("../x".to_owned())), None);
    assert_eq!(find(SessionQuery::Id(NEW_ID.to_owned())), None);

    // A folder named by another rule, whose sessions ran in the directory.
    let other = store.projects().join("renamed");
    let moved = other.join("44444444-4444-4444-8444-444444444444.jsonl");
    write_file(
        &moved,
        &session_line("44444444-4444-4444-8444-444444444444", CWD, "moved"),
    );
    assert_eq!(find(latest(CWD)).unwrap().path, moved);

    // CLAUDE_CONFIG_DIR wins over HOME.
    let mut env = store.env.clone();
    env.vars.insert(
        "CLAUDE_CONFIG_DIR".to_owned(),
        store.root.join("elsewhere").to_string(),
    );
    assert_eq!(
        rt.block_on(Claude.find_session(&env, &latest(CWD)))
            .unwrap(),
        None
    );
    // No HOME and no CLAUDE_CONFIG_DIR: an error, not "none".
    assert!(
        rt.block_on(Claude.find_session(&StoreEnv::default(), &latest(CWD)))
            .is_err()
    );
}

#[test]
fn a_copy_is_the_same_session_re_rooted_and_the_source_is_untouched() {
    let store = Store::new();
    let rt = runtime();
    let src_id = "a7859f76-46bd-4069-b44b-0c2f0943b80c";
    let src_path = store
        .projects()
        .join(slug("$SCRATCH/repo"))
        .join(format!("{src_id}.jsonl"));
    let original = std::fs::read(session_fixture("claude-two-turns.jsonl")).unwrap();
    write_file(&src_path, std::str::from_utf8(&original).unwrap());
    // A companion folder with a sub-agent transcript.
    let sub = src_path.with_extension("").join("subagents/agent-1.jsonl");
    write_file(&sub, &session_line(src_id, "$SCRATCH/repo", "sub"));

    let source = rt
        .block_on(Claude.find_session(&store.env, &SessionQuery::Id(src_id.to_owned())))
        .unwrap()
        .unwrap();
    assert_eq!(source.cwd.as_deref(), Some(Utf8Path::new("$SCRATCH/repo")));

    let planned = rt
        .block_on(Claude.copy_session(&store.env, &source, &target(NEW_ID, CWD, true)))
        .unwrap();
    assert_eq!(store.files().len(), 2, "a dry run writes nothing");
    let carried = rt
        .block_on(Claude.copy_session(&store.env, &source, &target(NEW_ID, CWD, false)))
        .unwrap();
    assert_eq!(planned, carried);
    let folder = store.projects().join(slug(CWD));
    assert_eq!(
        carried.files,
        [
            folder.join(format!("{NEW_ID}.jsonl")),
            folder.join(NEW_ID).join("subagents/agent-1.jsonl")
        ]
    );
    assert_eq!(
        std::fs::read(&src_path).unwrap(),
        original,
        "source unchanged"
    );

    let copied = lines(&carried.files[0]);
    let before: Vec<Value> = std::str::from_utf8(&original)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(copied.len(), before.len());
    for (mut a, b) in before.into_iter().zip(copied) {
        if a.get("sessionId").is_some() {
            assert_eq!(b["sessionId"], NEW_ID);
            a["sessionId"] = NEW_ID.into();
        }
        if a.get("cwd").is_some() {
            assert_eq!(b["cwd"], CWD);
            a["cwd"] = CWD.into();
        }
        assert_eq!(a, b, "nothing else changes");
    }
    // Unchanged lines keep their bytes.
    let text = std::fs::read_to_string(&carried.files[0]).unwrap();
    let mode_line = text.lines().last().unwrap();
    assert_eq!(
        mode_line,
        format!(r#"{{"type":"mode","mode":"normal","sessionId":"{NEW_ID}"}}"#)
    );
    let sub_copy = lines(&carried.files[1]);
    assert_eq!(sub_copy[0]["sessionId"], NEW_ID);

    let a = Claude.read_transcript(&src_path).unwrap();
    let b = Claude.read_transcript(&carried.files[0]).unwrap();
    assert_eq!(a.messages.len(), b.messages.len());
    assert!(
        a.messages
            .iter()
            .zip(&b.messages)
            .all(|(x, y)| same_message(x, y) && x == y)
    );
    assert_eq!(b.source.session_id, NEW_ID);

    // Copying again into the same id is refused.
    let err = rt
        .block_on(Claude.copy_session(&store.env, &source, &target(NEW_ID, CWD, false)))
        .unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
}

/// Parts in the subset both writers carry exactly: texts that don't start like a tag, tool
/// names and ids without brackets or newlines, inputs and outputs within the bound.
pub fn part() -> impl Strategy<Value = Part> {
    let body = "[ -~\n]{0,60}";
    prop_oneof![
        "[a-zA-Z0-9][a-zA-Z0-9 .,:'()\n-]{0,60}".prop_map(|text| Part::Text { text }),
        "[a-zA-Z0-9 .,\n]{1,40}".prop_map(|text| Part::Reasoning { text }),
        (
            "[A-Za-z_][A-Za-z0-9_.]{0,12}",
            proptest::option::of("[A-Za-z0-9_-]{1,16}"),
            body
        )
            .prop_map(|(name, id, input)| Part::ToolCall { name, id, input }),
        (
            proptest::option::of("[A-Za-z0-9_-]{1,16}"),
            body,
            any::<bool>()
        )
            .prop_map(|(id, output, is_error)| Part::ToolResult {
                id,
                output,
                is_error
            }),
    ]
}

pub fn messages() -> impl Strategy<Value = Vec<Message>> {
    let one = (
        any::<bool>(),
        prop_oneof![
            Just("claude"),
            Just("codex"),
            Just("opencode"),
            Just("cursor")
        ],
        proptest::option::of("[a-z0-9][a-z0-9.-]{0,15}"),
        0u32..59,
        proptest::collection::vec(part(), 1..4),
    )
        .prop_map(|(user, provider, model, second, parts)| {
            let role = if user { Role::User } else { Role::Assistant };
            Message {
                role,
                provider: AgentId::parse(provider).unwrap(),
                model: if user { None } else { model },
                at: Some(format!("2026-12-01T07:00:{second:02}.000Z")),
                source_id: None,
                parts,
            }
        });
    proptest::collection::vec(one, 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Claude Code's and Codex's stores alike.
    #[test]
    fn carried_conversations_read_back_the_same(messages in messages()) {
        let t = transcript(messages);
        for sessions in [&Claude as &dyn Sessions, &Codex] {
            let store = Store::new();
            let carried = runtime()
                .block_on(sessions.write_session(&store.env, &t, &target(NEW_ID, CWD, false)))
                .unwrap();
            let back = sessions.read_transcript(&carried.files[0]).unwrap();
            prop_assert_eq!(comparable(&back.messages), comparable(&t.messages));
            prop_assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        }
    }
}
