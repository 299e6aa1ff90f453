//! OpenCode sessions carried through its export and import: a conversation from another CLI is
//! written into real OpenCode's store by the adapter (`opencode import`), read back through
//! `opencode export`, and resumed with `opencode run --session <id>`; the scripted model server
//! must then be sent the carried user and assistant turns.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use camino::Utf8PathBuf;
use handoff_adapters::OpenCode;
use handoff_core::{
    AgentId, CarryTarget, Message, Part, Role, SessionQuery, Sessions, StoreEnv, TRANSCRIPT_SCHEMA,
    Transcript, TranscriptSource,
};
use handoff_testkit::model_server::Script;
use serde_json::{Value, json};

use super::{MODEL_KEY, Rig, assert_no_process_mentions, clis, private_dir, real_bin};

const USER_MARKER: &str = "carried-user-marker-3b71: make the parser accept quoted fields";
const ASSISTANT_MARKER: &str = "carried-assistant-marker-9e04: quoted fields parse; escapes fail";
const PROMPT: &str = "resume-marker-c5d2: what were you doing?";
const ANSWER: &str = "resumed: fixing escaped quotes next";
const TURN_BUDGET: Duration = Duration::from_secs(240);

/// The variables a user of the scripted server has: the rig's own plus the provider table.
fn store_vars(rig: &Rig) -> BTreeMap<String, String> {
    let mut vars: BTreeMap<String, String> = rig
        .command()
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v?.to_str()?.to_owned())))
        .collect();
    let provider = json!({
        "provider": {
            "e2e": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "E2E",
                "options": { "baseURL": rig.server.v1_url(), "apiKey": MODEL_KEY },
                "models": { "fake-model": { "name": "Fake Model", "tool_call": true } },
            }
        }
    });
    vars.insert("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into());
    vars.insert("OPENCODE_CONFIG_CONTENT".into(), provider.to_string());
    vars
}

fn claude_transcript() -> Transcript {
    let msg = |role, parts| Message {
        role,
        provider: AgentId::CLAUDE,
        model: (role == Role::Assistant).then(|| "claude-opus-4".to_owned()),
        at: Some("2026-01-02T03:04:05.000Z".to_owned()),
        source_id: None,
        parts,
    };
    Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::CLAUDE,
            session_id: "9d1c0b7e-0000-4000-8000-000000000001".to_owned(),
            path: "/elsewhere/9d1c0b7e.jsonl".into(),
            cwd: Some("/elsewhere".into()),
        },
        messages: vec![
            msg(
                Role::User,
                vec![Part::Text {
                    text: USER_MARKER.into(),
                }],
            ),
            msg(
                Role::Assistant,
                vec![Part::ToolCall {
                    name: "Bash".into(),
                    id: Some("t1".into()),
                    input: r#"{"command":"cargo test"}"#.into(),
                }],
            ),
            msg(
                Role::User,
                vec![Part::ToolResult {
                    id: Some("t1".into()),
                    output: "1 failed".into(),
                    is_error: true,
                }],
            ),
            msg(
                Role::Assistant,
                vec![Part::Text {
                    text: ASSISTANT_MARKER.into(),
                }],
            ),
        ],
        warnings: Vec::new(),
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_resumes_a_session_written_from_another_cli() {
    if !clis().contains(&"opencode") {
        return;
    }
    let started = Instant::now();
    let rig = Rig::new("opencode", Script::text(ANSWER));
    let scratch = rig.root.join("private/scratch");
    private_dir(&scratch);
    let repo = Utf8PathBuf::try_from(rig.repo.path().to_path_buf()).unwrap();
    let store = StoreEnv {
        vars: store_vars(&rig),
        executable: Some(Utf8PathBuf::try_from(real_bin().join("opencode")).unwrap()),
        scratch: Some(Utf8PathBuf::try_from(scratch).unwrap()),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // Written through `opencode import`, filed in the repository, and read back.
    let target = CarryTarget {
        session_id: "0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5".to_owned(),
        cwd: repo.clone(),
        model: Some("e2e/fake-model".to_owned()),
        dry_run: false,
    };
    let carried = runtime
        .block_on(OpenCode.write_session(&store, &claude_transcript(), &target))
        .unwrap();
    let written = started.elapsed();
    let found = runtime
        .block_on(OpenCode.find_session(&store, &SessionQuery::Id(carried.session_id.clone())))
        .unwrap()
        .unwrap_or_else(|| panic!("{} is not in OpenCode's store", carried.session_id));
    assert_eq!(found.cwd.as_deref(), Some(repo.as_path()));
    let back = OpenCode.read_transcript(&found.path).unwrap();
    assert_eq!(back.messages.len(), 4, "{back:#?}");
    let latest = runtime
        .block_on(OpenCode.find_session(&store, &SessionQuery::Latest { cwd: repo.clone() }))
        .unwrap()
        .unwrap();
    assert_eq!(latest.session_id, carried.session_id);

    // Resumed by real OpenCode in the repository.
    rig.server.clear_log();
    let resume_started = Instant::now();
    let out = run_opencode(
        &rig,
        &store.vars,
        &[
            "run",
            "--session",
            &carried.session_id,
            "--model",
            "e2e/fake-model",
            "--format",
            "json",
            PROMPT,
        ],
    );
    let resumed = resume_started.elapsed();
    let events: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| e["sessionID"].as_str())
        .collect();
    assert!(!ids.is_empty(), "no events: {out}");
    assert!(ids.iter().all(|i| *i == carried.session_id), "{ids:?}");
    assert!(
        events
            .iter()
            .any(|e| e.pointer("/part/text").and_then(Value::as_str) == Some(ANSWER)),
        "{out}"
    );
    let turn = rig
        .server
        .model_calls()
        .into_iter()
        .find(|c| c.body.to_string().contains("resume-marker-c5d2"))
        .expect("the resumed prompt never reached the model");
    let messages = turn.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let said = |role: &str, needle: &str| {
        messages
            .iter()
            .any(|m| m["role"] == role && m["content"].to_string().contains(needle))
    };
    assert!(said("user", USER_MARKER), "{messages:#?}");
    assert!(said("assistant", ASSISTANT_MARKER), "{messages:#?}");
    assert!(said("assistant", "[tool call Bash]"), "{messages:#?}");
    assert!(said("user", "[tool error] 1 failed"), "{messages:#?}");

    // OpenCode appended the new turn after the carried messages.
    let after = runtime
        .block_on(OpenCode.find_session(&store, &SessionQuery::Id(carried.session_id.clone())))
        .unwrap()
        .unwrap();
    let now = OpenCode.read_transcript(&after.path).unwrap();
    assert_eq!(
        handoff_core::resumed_after(&back, &now),
        handoff_core::Resumption::Continued
    );
    assert_no_process_mentions(&[repo.as_str()]);
    eprintln!(
        "[opencode] written in {:.1}s, resumed in {:.1}s, all in {:.1}s",
        written.as_secs_f64(),
        resumed.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// `opencode <args…>` in the repository with `vars` as its environment; its stdout.
fn run_opencode(rig: &Rig, vars: &BTreeMap<String, String>, args: &[&str]) -> String {
    use std::os::unix::process::CommandExt;
    let out_path = rig.root.join("private/opencode.stdout");
    let err_path = rig.root.join("private/opencode.stderr");
    let mut child = Command::new(real_bin().join("opencode"))
        .env_clear()
        .envs(vars)
        .args(args)
        .current_dir(rig.repo.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TURN_BUDGET {
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("opencode {args:?} took longer than {TURN_BUDGET:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(
        status.success(),
        "opencode {args:?}: {status}\n{stdout}\n{stderr}"
    );
    stdout
}
