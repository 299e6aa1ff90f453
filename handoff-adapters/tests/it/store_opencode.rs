//! OpenCode sessions: reading a real export (two turns with a shell call, recorded from
//! OpenCode 1.18.33 against the scripted model server; scratch paths replaced by `$SCRATCH`),
//! synthetic exports for the parts the recording lacks, finding, writing and copying sessions
//! through a stand-in `opencode` that records its calls, the version gate, and the resuming
//! receiver's argv.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::OpenCode;
use handoff_core::{
    AgentId, CarryTarget, Message, Part, RawOutput, Receiver, ReceiverRequest, ReceiverRole,
    ResumeFrom, Role, RunDir, SessionQuery, Sessions, StoreEnv, TRANSCRIPT_SCHEMA, Transcript,
    TranscriptError, TranscriptSource,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::*;

const SESSION: &str = "ses_dcef62d12ffemvR0LLxFMSCWm7";

fn read_doc(doc: &Value) -> Result<Transcript, TranscriptError> {
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::try_from(dir.path().join("export.json")).unwrap();
    std::fs::write(&path, doc.to_string()).unwrap();
    OpenCode.read_transcript(&path)
}

#[test]
fn a_real_export_reads_to_its_two_turns() {
    let t = OpenCode
        .read_transcript(&session_fixture("opencode-export.json"))
        .unwrap();
    assert_eq!(t.source.session_id, SESSION);
    assert_eq!(
        t.source.cwd.as_deref(),
        Some(Utf8Path::new("$SCRATCH/repo"))
    );
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    use Role::{Assistant, User};
    assert_eq!(
        texts(&t),
        [
            (
                User,
                "text: \"Read notes.txt and tell me what it says.\"".to_owned()
            ),
            (
                Assistant,
                r#"call bash: {"command":"cat notes.txt","description":"Run a shell command"}"#
                    .to_owned()
            ),
            (User, "result: first line of the notes\n".to_owned()),
            (
                Assistant,
                "text: The notes say: first line of the notes.".to_owned()
            ),
            (User, "text: \"How many lines does it have?\"".to_owned()),
            (
                Assistant,
                "text: Second answer: the file has one line.".to_owned()
            ),
        ]
    );
    let Part::ToolCall { id: call, .. } = &t.messages[1].parts[0] else {
        panic!()
    };
    let Part::ToolResult { id: result, .. } = &t.messages[2].parts[0] else {
        panic!()
    };
    assert_eq!(call, result, "the result answers the call");
    for m in &t.messages {
        let want = (m.role == Assistant && m.source_id.is_some()).then_some("e2e/fake-model");
        assert_eq!(m.model.as_deref(), want, "{m:?}");
        assert!(m.at.as_deref().is_some_and(|a| a.ends_with('Z')), "{m:?}");
    }
    assert_eq!(
        t.messages[0].at.as_deref(),
        Some("2026-12-01T09:57:37.238Z")
    );
    let mut shown = t.clone();
    shown.source.path = "opencode-export.json".into();
    insta::assert_json_snapshot!("opencode_export_transcript", shown);
}

#[test]
fn a_cut_export_never_panics() {
    let bytes = std::fs::read(session_fixture("opencode-export.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = Utf8PathBuf::try_from(dir.path().join("cut.json")).unwrap();
    for end in 0..bytes.len() {
        std::fs::write(&path, &bytes[..end]).unwrap();
        match OpenCode.read_transcript(&path) {
            Err(TranscriptError::Malformed { .. }) => {}
            // Only the trailing newline cut: the document is whole.
            Ok(t) if end + 1 >= bytes.len() => assert_eq!(t.messages.len(), 6),
            other => panic!("a cut at {end} read as {other:?}"),
        }
    }
}

#[test]
fn reasoning_errors_files_and_unknown_parts() {
    let doc = json!({
        "info": {"id": "ses_x1", "directory": "/w"},
        "messages": [
            {"info": {"id": "msg_1", "role": "user", "time": {"created": 0}}, "parts": [
                {"type": "text", "text": "look at this"},
                {"type": "text", "text": "Called the Read tool", "synthetic": true},
                {"type": "file", "mime": "image/png", "filename": "shot.png", "url": "data:xyz"},
            ]},
            {"info": {"id": "msg_2", "role": "assistant", "modelID": "m", "providerID": "p",
                      "time": {"created": 1000}}, "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "Checking the picture.",
                 "metadata": {"openai": {"reasoningEncryptedContent": "SECRET-REASONING"}}},
                {"type": "reasoning", "text": "  "},
                {"type": "tool", "tool": "read", "callID": "c1",
                 "state": {"status": "error", "input": {"filePath": "/w/x"}, "error": "no such file"}},
                {"type": "tool", "tool": "bash", "callID": "c2",
                 "state": {"status": "running", "input": {"command": "sleep 9"}}},
                {"type": "hologram", "text": "?"},
                {"type": "text", "text": "It shows a cat."},
            ]},
            {"info": {"id": "msg_3", "role": "assistant", "summary": true}, "parts": [
                {"type": "text", "text": "summary of everything"}
            ]},
            {"info": {"id": "msg_4", "role": "system"}, "parts": []},
            {"parts": []},
        ]
    });
    let t = read_doc(&doc).unwrap();
    use Role::{Assistant, User};
    assert_eq!(
        texts(&t),
        [
            (User, "text: look at this".to_owned()),
            (User, "text: [file shot.png (image/png)]".to_owned()),
            (Assistant, "reasoning: Checking the picture.".to_owned()),
            (Assistant, r#"call read: {"filePath":"/w/x"}"#.to_owned()),
            (User, "result (error): no such file".to_owned()),
            (Assistant, r#"call bash: {"command":"sleep 9"}"#.to_owned()),
            (Assistant, "text: It shows a cat.".to_owned()),
        ]
    );
    assert_eq!(t.messages[1].model.as_deref(), Some("p/m"));
    assert_eq!(
        t.messages[0].at.as_deref(),
        Some("1970-01-01T00:00:00.000Z")
    );
    let json = serde_json::to_string(&t).unwrap();
    assert!(
        !json.contains("SECRET-REASONING"),
        "hidden reasoning leaked"
    );
    assert!(!json.contains("summary of everything"));
    assert_eq!(t.warnings.len(), 3, "{:?}", t.warnings);
    assert!(t.warnings.iter().any(|w| w.contains("'hologram'")));
}

#[test]
fn big_tool_output_is_bounded() {
    let big = "x".repeat(100_000);
    let doc = json!({
        "info": {"id": "ses_big"},
        "messages": [{"info": {"id": "msg_1", "role": "assistant"}, "parts": [
            {"type": "tool", "tool": "bash", "callID": "c", "state": {"status": "completed",
             "input": {"command": big}, "output": big}}
        ]}]
    });
    let t = read_doc(&doc).unwrap();
    for m in &t.messages {
        for p in &m.parts {
            let len = match p {
                Part::ToolCall { input, .. } => input.len(),
                Part::ToolResult { output, .. } => output.len(),
                _ => 0,
            };
            assert!(len < 5_000, "{len}");
        }
    }
}

#[test]
fn not_an_export_is_malformed() {
    for doc in [json!([]), json!({"info": {}}), json!({"messages": []})] {
        assert!(matches!(
            read_doc(&doc),
            Err(TranscriptError::Malformed { .. })
        ));
    }
    assert!(matches!(
        OpenCode.read_transcript(Utf8Path::new("/nonexistent/export.json")),
        Err(TranscriptError::Io { .. })
    ));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::try_from(dir.path().join("x.json")).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let _ = OpenCode.read_transcript(&path);
    }

    #[test]
    fn arbitrary_json_never_panics(parts in proptest::collection::vec(
        prop_oneof![
            Just(json!({"type": "text", "text": 5})),
            Just(json!({"type": "tool", "state": 3})),
            Just(json!({"type": "tool", "tool": 1, "state": {"status": "completed", "output": {"a": 1}}})),
            Just(json!({"type": null})),
            Just(json!("string part")),
            Just(json!({"type": "reasoning"})),
            Just(json!({"type": "file"})),
        ], 0..8),
        role in prop_oneof![Just(json!("user")), Just(json!("assistant")), Just(json!(7))],
        created in any::<i64>(),
    ) {
        let doc = json!({"info": {"id": "ses_p"}, "messages": [
            {"info": {"role": role, "time": {"created": created}}, "parts": parts}
        ]});
        let _ = read_doc(&doc);
    }
}

// ---------------------------------------------------------------------------------------------
// The store, through a stand-in `opencode`

/// A stand-in `opencode` (a shell script) that records each call (`cwd|args`) and answers
/// `export`, `session list`, `import`, `session delete` and `debug config` as 1.18.33 does.
struct Store {
    _tmp: tempfile::TempDir,
    root: Utf8PathBuf,
    env: StoreEnv,
    cwd: Utf8PathBuf,
}

const FAKE: &str = r#"#!/bin/sh
root="$(dirname "$0")"
echo "$PWD|$*" >> "$root/calls.log"
# A command started with the project's configuration on (it would read and write the
# worktree's opencode.json and .opencode/): kept apart, so that every test sees it.
[ "$OPENCODE_DISABLE_PROJECT_CONFIG" = 1 ] || echo "$PWD|$*" >> "$root/project-config.log"
[ "$1" = "--pure" ] && shift
case "$1" in
  export)
    echo "Exporting session: $2" >&2
    if [ -f "$root/sessions/$2.json" ]; then cat "$root/sessions/$2.json"; exit 0; fi
    printf '\033[91mError: \033[0mSession not found: %s\n' "$2" >&2; exit 1 ;;
  session)
    if [ "$2" = "list" ]; then cat "$root/list.json"; exit 0; fi
    if [ "$2" = "delete" ]; then exit 0; fi ;;
  import)
    if [ -f "$root/fail-import" ]; then echo "Error: Unexpected error" >&2; exit 1; fi
    id=$(grep -o '"ses_[A-Za-z0-9]*"' "$2" | head -n 1 | tr -d '"')
    cp "$2" "$root/sessions/$id.json"
    echo "Imported session: $id"; exit 0 ;;
  debug)
    echo '{"model": "e2e/fake-model", "agent": {}}'; exit 0 ;;
esac
echo "unexpected: $*" >&2; exit 2
"#;

impl Store {
    fn new() -> Store {
        let tmp = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::try_from(std::fs::canonicalize(tmp.path()).unwrap()).unwrap();
        for d in ["bin", "bin/sessions", "scratch", "repo", "other"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let exe = root.join("bin/opencode");
        std::fs::write(&exe, FAKE).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(root.join("bin/list.json"), "[]").unwrap();
        let mut vars = BTreeMap::new();
        vars.insert("PATH".to_owned(), "/usr/bin:/bin".to_owned());
        vars.insert("HOME".to_owned(), root.join("home").to_string());
        let env = StoreEnv {
            vars,
            executable: Some(exe),
            scratch: Some(root.join("scratch")),
        };
        let cwd = root.join("repo");
        Store {
            _tmp: tmp,
            root,
            env,
            cwd,
        }
    }

    /// Puts the recorded export in the stand-in's store as session `SESSION`, filed at `dir`.
    fn add_fixture(&self, dir: &Utf8Path) {
        let text = std::fs::read_to_string(session_fixture("opencode-export.json"))
            .unwrap()
            .replace("$SCRATCH/repo", dir.as_str());
        std::fs::write(self.root.join(format!("bin/sessions/{SESSION}.json")), text).unwrap();
    }

    /// The commands the stand-in ran; none of them with the project's configuration on.
    fn calls(&self) -> Vec<String> {
        let with_project = self.root.join("bin/project-config.log");
        assert!(
            !with_project.exists(),
            "started with the project's configuration: {}",
            std::fs::read_to_string(&with_project).unwrap_or_default()
        );
        std::fs::read_to_string(self.root.join("bin/calls.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.replace(self.root.as_str(), "[TMP]"))
            .collect()
    }

    fn target(&self, dry_run: bool, model: Option<&str>) -> CarryTarget {
        CarryTarget {
            session_id: "0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5".to_owned(),
            cwd: self.cwd.clone(),
            model: model.map(str::to_owned),
            dry_run,
        }
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn sessions_are_found_by_id_through_export() {
    let s = Store::new();
    s.add_fixture(&s.cwd);
    let found = block_on(OpenCode.find_session(&s.env, &SessionQuery::Id(SESSION.into())))
        .unwrap()
        .unwrap();
    assert_eq!(found.session_id, SESSION);
    assert_eq!(found.cwd.as_deref(), Some(s.cwd.as_path()));
    assert!(
        found.path.starts_with(s.root.join("scratch")),
        "{}",
        found.path
    );
    assert_eq!(
        OpenCode
            .read_transcript(&found.path)
            .unwrap()
            .messages
            .len(),
        6
    );

    let missing = block_on(OpenCode.find_session(&s.env, &SessionQuery::Id("ses_nope".into())));
    assert!(matches!(missing, Ok(None)), "{missing:?}");
    let bad = block_on(OpenCode.find_session(&s.env, &SessionQuery::Id("--help".into())));
    assert!(matches!(bad, Ok(None)), "{bad:?}");
    assert_eq!(
        s.calls(),
        [
            format!("[TMP]/scratch|--pure export {SESSION}"),
            "[TMP]/scratch|--pure export ses_nope".to_owned(),
        ]
    );
}

#[test]
fn the_latest_session_is_the_newest_filed_in_the_directory() {
    let s = Store::new();
    s.add_fixture(&s.cwd);
    let list = json!([
        {"id": "ses_newerElsewhere", "updated": 300, "directory": s.root.join("other")},
        {"id": SESSION, "updated": 200, "directory": s.cwd},
        {"id": "ses_olderHere", "updated": 100, "directory": s.cwd},
    ]);
    std::fs::write(s.root.join("bin/list.json"), list.to_string()).unwrap();
    let found =
        block_on(OpenCode.find_session(&s.env, &SessionQuery::Latest { cwd: s.cwd.clone() }))
            .unwrap()
            .unwrap();
    assert_eq!(found.session_id, SESSION);
    assert_eq!(
        s.calls(),
        [
            "[TMP]/repo|--pure session list --format json".to_owned(),
            format!("[TMP]/scratch|--pure export {SESSION}"),
        ]
    );
    let none = block_on(OpenCode.find_session(
        &s.env,
        &SessionQuery::Latest {
            cwd: s.root.join("scratch"),
        },
    ));
    assert!(matches!(none, Ok(None)), "{none:?}");
}

fn neutral() -> Transcript {
    let msg = |role, model: Option<&str>, at: Option<&str>, parts| Message {
        role,
        provider: AgentId::CLAUDE,
        model: model.map(str::to_owned),
        at: at.map(str::to_owned),
        source_id: None,
        parts,
    };
    Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::CLAUDE,
            session_id: "9d1c0b7e-0000-4000-8000-000000000001".to_owned(),
            path: "/home/u/.claude/projects/-w/9d1c0b7e.jsonl".into(),
            cwd: Some("/w".into()),
        },
        messages: vec![
            msg(
                Role::User,
                None,
                Some("2026-01-02T03:04:05.000Z"),
                vec![Part::Text {
                    text: "carried-user-marker: fix the parser".into(),
                }],
            ),
            msg(
                Role::Assistant,
                Some("claude-opus-4"),
                Some("2026-01-02T03:04:06.000Z"),
                vec![
                    Part::Reasoning {
                        text: "The parser drops quotes.".into(),
                    },
                    Part::ToolCall {
                        name: "Bash".into(),
                        id: Some("t1".into()),
                        input: r#"{"command":"cargo test"}"#.into(),
                    },
                ],
            ),
            msg(
                Role::User,
                None,
                None,
                vec![Part::ToolResult {
                    id: Some("t1".into()),
                    output: "1 failed".into(),
                    is_error: true,
                }],
            ),
            msg(
                Role::Assistant,
                Some("claude-opus-4"),
                Some("2026-01-02T03:04:07.000Z"),
                vec![Part::Text {
                    text: "carried-assistant-marker: one test fails".into(),
                }],
            ),
        ],
        warnings: vec![],
    }
}

/// The written document with its ids and times replaced by placeholders.
fn shown(doc: &Value) -> Value {
    let text = doc.to_string();
    let ids = regex::Regex::new(r"(ses|msg|prt)_[0-9a-f]{12}[0-9A-Za-z]{14}").unwrap();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let text = ids.replace_all(&text, |c: &regex::Captures| {
        let n = names.len();
        names
            .entry(c[0].to_owned())
            .or_insert_with(|| format!("{}_{n}", &c[1]))
            .clone()
    });
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["info"]["time"]["updated"] = json!("[NOW]");
    v
}

#[test]
fn a_dry_run_plans_the_import_file_only() {
    let s = Store::new();
    let carried = block_on(OpenCode.write_session(
        &s.env,
        &neutral(),
        &s.target(true, Some("e2e/fake-model")),
    ))
    .unwrap();
    assert!(carried.session_id.starts_with("ses_"), "{carried:?}");
    assert_eq!(carried.files.len(), 1);
    let file = &carried.files[0];
    assert!(file.starts_with(s.root.join("scratch")));
    let bytes = std::fs::read(file).unwrap();
    assert_eq!(carried.bytes, bytes.len() as u64);
    assert!(s.calls().is_empty(), "a dry run ran {:?}", s.calls());
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc["info"]["id"], carried.session_id.as_str());
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(&regex::escape(s.root.as_str()), "[TMP]");
    settings.bind(|| insta::assert_json_snapshot!("opencode_written_session", shown(&doc)));
}

#[test]
fn a_written_session_is_imported_in_the_receivers_directory_and_reads_back() {
    let s = Store::new();
    let carried = block_on(OpenCode.write_session(
        &s.env,
        &neutral(),
        &s.target(false, Some("e2e/fake-model")),
    ))
    .unwrap();
    assert_eq!(
        s.calls(),
        [format!(
            "[TMP]/repo|--pure import [TMP]/scratch/opencode-import-{}.json",
            carried.session_id
        )]
    );
    let back = OpenCode
        .read_transcript(
            &s.root
                .join(format!("bin/sessions/{}.json", carried.session_id)),
        )
        .unwrap();
    assert_eq!(back.source.session_id, carried.session_id);
    assert_eq!(back.source.cwd.as_deref(), Some(s.cwd.as_path()));
    use Role::{Assistant, User};
    assert_eq!(
        texts(&back),
        [
            (User, "text: carried-user-marker: fix the parser".to_owned()),
            (
                Assistant,
                "text: [reasoning summary] The parser drops quotes.".to_owned()
            ),
            (
                Assistant,
                r#"text: [tool call Bash] {"command":"cargo test"}"#.to_owned()
            ),
            (User, "text: [tool error] 1 failed".to_owned()),
            (
                Assistant,
                "text: carried-assistant-marker: one test fails".to_owned()
            ),
        ]
    );
    assert_eq!(
        back.messages[1].model.as_deref(),
        Some("claude/claude-opus-4")
    );
    assert_eq!(
        back.messages[0].at.as_deref(),
        Some("2026-01-02T03:04:05.000Z")
    );
    // Times never go back, so OpenCode keeps the order.
    let times: Vec<&str> = back
        .messages
        .iter()
        .filter_map(|m| m.at.as_deref())
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

#[test]
fn without_a_chosen_model_the_configured_one_is_recorded() {
    let s = Store::new();
    // The model the carried session's first message names.
    let recorded = || {
        let carried =
            block_on(OpenCode.write_session(&s.env, &neutral(), &s.target(true, None))).unwrap();
        let doc: Value =
            serde_json::from_slice(&std::fs::read(&carried.files[0]).unwrap()).unwrap();
        doc["messages"][0]["info"]["model"].clone()
    };
    assert_eq!(
        recorded(),
        json!({"providerID": "e2e", "modelID": "fake-model"})
    );
    // The user's own configuration: OpenCode is asked away from the worktree.
    assert_eq!(s.calls(), ["[TMP]/scratch|--pure debug config"]);
    // The project's is read from its file, without starting OpenCode in the worktree.
    std::fs::create_dir_all(s.cwd.join(".git")).unwrap();
    std::fs::write(
        s.cwd.join("opencode.jsonc"),
        "{ // the project's\n \"model\": \"proj/model-1\", }",
    )
    .unwrap();
    assert_eq!(
        recorded(),
        json!({"providerID": "proj", "modelID": "model-1"})
    );
    assert_eq!(s.calls().len(), 1, "{:?}", s.calls());
    let bad = block_on(OpenCode.write_session(&s.env, &neutral(), &s.target(true, Some("opus"))));
    assert!(
        bad.as_ref()
            .is_err_and(|e| e.to_string().contains("provider/model")),
        "{bad:?}"
    );
}

#[test]
fn a_failed_import_removes_the_partial_session() {
    let s = Store::new();
    std::fs::write(s.root.join("bin/fail-import"), "").unwrap();
    let err = block_on(OpenCode.write_session(
        &s.env,
        &neutral(),
        &s.target(false, Some("e2e/fake-model")),
    ))
    .unwrap_err();
    assert!(err.to_string().contains("Unexpected error"), "{err}");
    let calls = s.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls[1].starts_with("[TMP]/repo|--pure session delete ses_"),
        "{calls:?}"
    );
    assert!(calls[0].contains(calls[1].rsplit(' ').next().unwrap()));
}

#[test]
fn a_copy_has_fresh_ids_and_is_filed_in_the_receivers_directory() {
    let s = Store::new();
    let elsewhere = s.root.join("other");
    s.add_fixture(&elsewhere);
    let source = block_on(OpenCode.find_session(&s.env, &SessionQuery::Id(SESSION.into())))
        .unwrap()
        .unwrap();
    let before = std::fs::read(&source.path).unwrap();
    let carried =
        block_on(OpenCode.copy_session(&s.env, &source, &s.target(false, Some("e2e/fake-model"))))
            .unwrap();
    assert_ne!(carried.session_id, SESSION);
    assert_eq!(
        std::fs::read(&source.path).unwrap(),
        before,
        "the source was written"
    );
    let text = std::fs::read_to_string(&carried.files[0]).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    for old in [
        "msg_23109d356001MQf3wYYkqDRE2Z",
        "prt_23109dcc60010SmcZl2Q0c8iqz",
        SESSION,
    ] {
        assert!(!text.contains(old), "{old} kept");
    }
    assert!(
        !text.contains(elsewhere.as_str()),
        "a path was not re-rooted"
    );
    assert_eq!(doc["info"]["directory"], s.cwd.as_str());
    let messages = doc["messages"].as_array().unwrap();
    let user_id = messages[0]["info"]["id"].as_str().unwrap();
    assert_eq!(messages[1]["info"]["parentID"], user_id);
    assert_eq!(messages[1]["info"]["path"]["cwd"], s.cwd.as_str());
    for m in messages {
        for p in m["parts"].as_array().unwrap() {
            assert_eq!(p["messageID"], m["info"]["id"]);
            assert_eq!(p["sessionID"], carried.session_id.as_str());
        }
    }
    // The copy says what the source says.
    let copy = OpenCode.read_transcript(&carried.files[0]).unwrap();
    let src = OpenCode.read_transcript(&source.path).unwrap();
    assert_eq!(texts(&copy), texts(&src));
    assert!(
        s.calls()
            .last()
            .unwrap()
            .starts_with("[TMP]/repo|--pure import ")
    );
}

#[test]
fn carrying_needs_opencode_1_2_24() {
    assert!(OpenCode.resume_support(Some("1.18.33")).is_ok());
    assert!(OpenCode.resume_support(Some("1.2.24")).is_ok());
    let old = OpenCode.resume_support(Some("1.2.23")).unwrap_err();
    assert!(old.contains("1.2.24") && !old.contains('\n'), "{old}");
    assert!(OpenCode.resume_support(None).is_err());
    assert!(
        !OpenCode.native_fork(),
        "OpenCode picks a fork's id itself: handoff copies instead"
    );
}

// ---------------------------------------------------------------------------------------------
// The resuming receiver

const CARRIED: &str = "ses_dcef5587effeUM0KVkqAJUe3k4";

fn resuming(fx: &Fixture, fork: Option<bool>) -> Result<handoff_core::Invocation, String> {
    let request = ReceiverRequest {
        target: AgentId::OPENCODE,
        cwd: fx.cwd.clone(),
        role: ReceiverRole::Implement,
        model: Some("e2e/fake-model".to_owned()),
        effort: None,
        session_id: "6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f".to_owned(),
        resume: fork.map(|fork| ResumeFrom {
            session_id: CARRIED.to_owned(),
            fork,
        }),
    };
    let run = RunDir {
        handoff_sandbox: false,
        confined: false,
        path: fx.run_path.clone(),
        executable: "/usr/local/bin/opencode".into(),
        prompt: "# Handoff note\n".to_owned(),
        output_schema: Value::Null,
        mcp: None,
        parent_env: parent_env(),
        agent_config: Default::default(),
        nested: None,
    };
    OpenCode
        .receiver_invocation(&request, &run)
        .map_err(|e| e.to_string())
}

#[test]
fn resuming_receiver_argv() {
    let fx = Fixture::new();
    for (fork, name) in [(false, "in-place"), (true, "fork")] {
        let inv = resuming(&fx, Some(fork)).unwrap();
        let mut settings = fx.insta_settings();
        settings.set_snapshot_suffix(name);
        let shown = json!({"args": inv.args, "cwd": inv.cwd, "resume": inv.policy["resume"]});
        settings.bind(|| insta::assert_json_snapshot!("opencode_resuming_receiver", shown));
    }
    let fresh = resuming(&fx, None).unwrap();
    assert!(!fresh.args.iter().any(|a| a == "--session" || a == "--fork"));
    assert!(fresh.policy.get("resume").is_none());
}

#[test]
fn a_fork_reports_the_session_opencode_made() {
    let forked = "ses_dcef4f849ffeQkJbnJXbUpzP6a";
    let stdout = [
        json!({"type": "step_start", "sessionID": forked, "part": {"type": "step-start"}}),
        json!({"type": "text", "sessionID": forked, "part": {"type": "text", "text": "carrying on"}}),
        json!({"type": "step_finish", "sessionID": forked, "part": {"reason": "stop"}}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    let report = OpenCode.parse_receiver(&RawOutput {
        stdout: stdout.into_bytes(),
        exit_code: Some(0),
        ..RawOutput::default()
    });
    assert_eq!(report.session_id.as_deref(), Some(forked));
    assert_eq!(report.last_message.as_deref(), Some("carrying on"));
    assert_eq!(report.failure, None);
}

#[test]
fn a_session_that_is_not_opencodes_is_refused() {
    let fx = Fixture::new();
    let request = |id: &str| ReceiverRequest {
        target: AgentId::OPENCODE,
        cwd: fx.cwd.clone(),
        role: ReceiverRole::Implement,
        model: None,
        effort: None,
        session_id: "x".to_owned(),
        resume: Some(ResumeFrom {
            session_id: id.to_owned(),
            fork: false,
        }),
    };
    let run = RunDir {
        handoff_sandbox: false,
        confined: false,
        path: fx.run_path.clone(),
        executable: "/usr/local/bin/opencode".into(),
        prompt: String::new(),
        output_schema: Value::Null,
        mcp: None,
        parent_env: parent_env(),
        agent_config: Default::default(),
        nested: None,
    };
    assert!(
        OpenCode
            .receiver_invocation(&request("--fork"), &run)
            .is_err()
    );
    assert!(
        OpenCode
            .receiver_invocation(&request(CARRIED), &run)
            .is_ok()
    );
}
