//! Continuing a task on and from GitHub Copilot CLI through the binary (the fake `copilot`,
//! whose sessions are `session-state/<id>/events.jsonl` like the real CLI's): a Claude Code
//! conversation carried into Copilot's store and resumed there, and a recorded real Copilot
//! session carried to Codex; both checked for continuity.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::carry::{home, log_json, note_file, repo_path, sandbox, seed_claude};
use crate::support::{Run, Sandbox};

const COPILOT_SOURCE: &str = "7a853f13-6807-4a7f-ad44-af7b37b34af0";

pub(crate) fn continue_(sb: &Sandbox, args: &[&str]) -> Run {
    let note = note_file(sb);
    let cwd = repo_path(sb);
    let mut all = vec![
        "continue",
        "--cwd",
        cwd.as_str(),
        "--note-file",
        note.as_str(),
    ];
    all.extend(args);
    let run = sb.run(&all);
    assert_eq!(run.stdout.lines().count(), 1, "{run:#?}");
    run
}

/// The recorded real Copilot session (1.0.102: a `create` tool call, its result and the
/// answer), re-rooted at the sandbox's repository, in the sandbox's Copilot store.
fn seed_copilot(sb: &Sandbox) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../handoff-adapters/tests/it/fixtures/sessions/copilot-write-session.jsonl");
    let store = home(sb).join(".copilot");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("$SCRATCH/repo", &repo_path(sb))
        .replace("$COPILOT_HOME", &store.to_string_lossy());
    let dir = store.join("session-state").join(COPILOT_SOURCE);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("events.jsonl");
    std::fs::write(&file, text).unwrap();
    file
}

fn carried_to_copilot(sb: &Sandbox) {
    seed_claude(sb);
    let run = continue_(sb, &["--from", "claude", "--to", "copilot"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["outcome"], "started", "{r:#}");
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["mode"], "converted");
    let id = carry["sessionId"].as_str().unwrap().to_owned();
    let file = home(sb)
        .join(".copilot/session-state")
        .join(&id)
        .join("events.jsonl");
    let files: Vec<String> = serde_json::from_value(carry["files"].clone()).unwrap();
    assert_eq!(files, [file.to_string_lossy().into_owned()], "{carry:#}");
    assert_eq!(r["receiver"]["sessionId"], id.as_str(), "{r:#}");
    let argv = r["receiver"]["argv"].as_array().unwrap();
    assert!(
        argv.windows(2)
            .any(|w| w[0] == "--resume" && w[1] == id.as_str()),
        "{argv:?}"
    );
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    // The carried conversation, then the receiver's turn, in the user's own store.
    let text = std::fs::read_to_string(&file).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "session.start", "{text}");
    assert_eq!(first["data"]["sessionId"], id.as_str(), "{text}");
    assert!(
        text.contains("Create notes.txt with one line."),
        "the first user turn is carried"
    );
    assert!(text.contains("\"handoff\":{\"provider\":\"claude\""));
    assert!(
        text.contains("assistant.turn_end"),
        "the receiver's turn was appended"
    );
    // The person resumes it with Copilot's own command.
    let resume = &r["receiver"]["resume"]["argv"];
    assert_eq!(resume[0], "copilot");
    assert_eq!(resume[1], "--resume");
}

#[test]
fn a_claude_conversation_is_carried_into_copilot_which_continues_it() {
    carried_to_copilot(&sandbox());
}

/// Under handoff's own sandbox the receiver's Copilot home is private, and only the session's
/// folder of the user's store is mounted into it: the turn still lands in that store.
#[test]
fn under_handoffs_sandbox_the_receiver_writes_only_its_session() {
    let sb = sandbox();
    sb.agents.uninstall("bwrap");
    let settings = home(&sb).join(".copilot/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{}\n").unwrap();
    carried_to_copilot(&sb);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{}\n");
}

#[test]
fn a_copilot_session_is_carried_to_codex_which_continues_it() {
    let sb = sandbox();
    let source = seed_copilot(&sb);
    let before = std::fs::read(&source).unwrap();
    let run = continue_(&sb, &["--from", "copilot", "--to", "codex"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["source"]["provider"], "copilot");
    assert_eq!(carry["source"]["sessionId"], COPILOT_SOURCE);
    assert_eq!(carry["source"]["found"], "latest");
    // The user turn, the tool call, its result and the answer.
    assert!(carry["messages"].as_u64().unwrap() >= 4, "{carry:#}");
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert_eq!(
        std::fs::read(&source).unwrap(),
        before,
        "the source was changed"
    );
    let log = log_json(&sb);
    assert!(log.to_string().contains("copilot"), "{log:#}");
}

/// What `capabilities` says of Copilot's continuation.
#[test]
fn capabilities_name_copilot_a_full_receiver() {
    let sb = Sandbox::new();
    let run = sb.run(&["capabilities", "--json"]);
    let copilot = run.json["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "copilot")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(copilot["continuation"]["receive"], true, "{copilot:#}");
    assert_eq!(copilot["continuation"]["sessions"], true, "{copilot:#}");
    assert_eq!(copilot["continuation"]["receiver"], "full", "{copilot:#}");
}
