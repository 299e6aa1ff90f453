//! The fake CLIs as continuation receivers: runs that persist their session and carry no result
//! contract, the sessions they leave, and the resume commands that read them back.

use std::ffi::OsStr;
use std::path::Path;

use handoff_testkit::keys;
use serde_json::Value;

use crate::support::*;

const SESSION: &str = "6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f";
const NOTE: &str = "# Handoff note\n\nclaude handed this task over to you.\n\nFinish the parser.\n";

fn claude_receiver_args(w: &World, tools: &str) -> Vec<String> {
    let settings = sandbox_settings(w.repo.path(), tools.contains("Write"));
    args(&[
        "--settings",
        &settings,
        "--strict-mcp-config",
        "--mcp-config",
        r#"{"mcpServers":{}}"#,
        "--disable-slash-commands",
        "--no-chrome",
        "--permission-mode",
        "dontAsk",
        "--tools",
        tools,
        "--allowedTools",
        tools,
        "--session-id",
        SESSION,
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
    ])
}

fn codex_receiver_args(w: &World, sandbox: &str) -> Vec<String> {
    args(&[
        "exec",
        "--json",
        "--ignore-user-config",
        "--ignore-rules",
        "--strict-config",
        "--config",
        r#"approval_policy="never""#,
        "--sandbox",
        sandbox,
        "--cd",
        w.repo.path().to_str().unwrap(),
        "-",
    ])
}

/// Runs the OpenCode receiver in the user's own configuration (no private `OPENCODE_CONFIG_DIR`),
/// with the role's permission table inline.
fn opencode_receiver(w: &World, edit: &str) -> std::process::Output {
    let perm = serde_json::json!({"*": "deny", "edit": edit, "read": "allow", "bash": "allow"});
    let agent = if edit == "allow" {
        "handoff_writer"
    } else {
        "handoff_reader"
    };
    let config = serde_json::json!({
        "permission": perm,
        "agent": {agent: {"mode": "primary", "permission": perm}},
    })
    .to_string();
    w.run_in(
        "opencode",
        &args(&[
            "--pure",
            "run",
            "--agent",
            agent,
            "--dir",
            w.repo.path().to_str().unwrap(),
            "--format",
            "json",
        ]),
        Some(NOTE),
        w.tmp.path(),
        &[("OPENCODE_CONFIG_CONTENT", OsStr::new(&config))],
    )
}

fn session_record(w: &World, exe: &str, id: &str) -> Value {
    let path = w
        .tmp
        .path()
        .join(".fake-agent/sessions")
        .join(exe)
        .join(format!("{id}.json"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

fn resume(w: &World, exe: &str, argv: &[&str], cwd: &Path) -> std::process::Output {
    w.run_in(exe, &args(argv), None, cwd, &[])
}

fn receiver_file(w: &World, exe: &str) -> Option<String> {
    std::fs::read_to_string(w.repo.path().join(format!("fake-receiver-{exe}.txt"))).ok()
}

#[test]
fn claude_receiver_persists_its_session_and_resumes_in_its_worktree() {
    let w = World::with_sandbox_tools();
    let out = w.run("claude", &claude_receiver_args(&w, WRITE_TOOLS), Some(NOTE));
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    assert_eq!(events[0]["subtype"], "init");
    assert!(events.iter().all(|e| e["session_id"] == SESSION));
    let result = events.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["is_error"], false);
    let last = format!("Continued the task as claude (session {SESSION}).");
    assert_eq!(result["result"], last.as_str());
    assert!(result.get("structured_output").is_none());

    let file = receiver_file(&w, "claude").unwrap();
    assert!(file.contains("claude") && file.contains(SESSION), "{file}");
    let record = session_record(&w, "claude", SESSION);
    let repo = std::fs::canonicalize(w.repo.path()).unwrap();
    assert_eq!(record["cwd"], repo.to_str().unwrap());
    assert_eq!(record["prompts"], serde_json::json!([NOTE]));
    assert_eq!(record["lastMessage"], last.as_str());

    let out = resume(&w, "claude", &["--resume", SESSION], w.repo.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("resumed {SESSION}: {last}\n"));
    // Another directory, or an unknown session: Claude's own error.
    for (id, cwd) in [
        (SESSION, w.tmp.path()),
        ("00000000-0000-4000-8000-000000000000", w.repo.path()),
    ] {
        let out = resume(&w, "claude", &["--resume", id], cwd);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains(&format!("No conversation found with session ID: {id}")),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn a_claude_reviewer_writes_nothing_unless_it_mutates() {
    let w = World::with_sandbox_tools();
    let out = w.run(
        "claude",
        &claude_receiver_args(&w, "Glob,Grep,Read,Bash"),
        Some(NOTE),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
    assert!(session_record(&w, "claude", SESSION)["lastMessage"].is_string());

    w.agents.set(keys::MODE, "mutate");
    let out = w.run(
        "claude",
        &claude_receiver_args(&w, "Glob,Grep,Read,Bash"),
        Some(NOTE),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(receiver_file(&w, "claude").is_some());
    // The second turn of the same session adds its prompt.
    assert_eq!(
        session_record(&w, "claude", SESSION)["prompts"],
        serde_json::json!([NOTE, NOTE])
    );
}

#[test]
fn claude_receiver_failures() {
    let w = World::with_sandbox_tools();
    w.agents.set(keys::MODE, "agent-error");
    let out = w.run("claude", &claude_receiver_args(&w, WRITE_TOOLS), Some(NOTE));
    assert_eq!(out.status.code(), Some(1));
    let result = json_lines(&out).pop().unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["session_id"], SESSION);
    assert!(receiver_file(&w, "claude").is_none());
    assert!(session_record(&w, "claude", SESSION)["lastMessage"].is_null());

    w.agents.set(keys::MODE, "exit");
    let out = w.run("claude", &claude_receiver_args(&w, WRITE_TOOLS), Some(NOTE));
    assert_eq!(out.status.code(), Some(23));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_delegated_claude_run_persists_nothing() {
    let w = World::with_sandbox_tools();
    let settings = sandbox_settings(w.repo.path(), true);
    let out = w.run(
        "claude",
        &claude_run_args(WRITE_TOOLS, &settings, SCHEMA),
        Some(BUILD_PROMPT),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!w.tmp.path().join(".fake-agent").exists());
    assert!(receiver_file(&w, "claude").is_none());
}

#[test]
fn codex_receiver_persists_a_thread_and_resumes_it() {
    let w = World::new();
    let out = w.run_in(
        "codex",
        &codex_receiver_args(&w, "workspace-write"),
        Some(NOTE),
        w.tmp.path(),
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    assert_eq!(events[0]["type"], "thread.started");
    let thread = events[0]["thread_id"].as_str().unwrap().to_owned();
    assert_eq!(thread.len(), 36);
    let message = events
        .iter()
        .rev()
        .find(|e| e["item"]["type"] == "agent_message")
        .unwrap();
    let last = format!("Continued the task as codex (session {thread}).");
    assert_eq!(message["item"]["text"], last.as_str());
    assert_eq!(events.last().unwrap()["type"], "turn.completed");
    assert!(receiver_file(&w, "codex").unwrap().contains(&thread));
    assert_eq!(
        session_record(&w, "codex", &thread)["lastMessage"],
        last.as_str()
    );

    let out = resume(&w, "codex", &["resume", &thread], w.repo.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("resumed {thread}: {last}\n"));
    let out = resume(&w, "codex", &["resume", &thread], w.tmp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("No saved session found"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn codex_receiver_roles_and_failures() {
    let w = World::new();
    let out = w.run("codex", &codex_receiver_args(&w, "read-only"), Some(NOTE));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);

    w.agents.set(keys::MODE, "agent-error");
    let out = w.run(
        "codex",
        &codex_receiver_args(&w, "workspace-write"),
        Some(NOTE),
    );
    assert_eq!(out.status.code(), Some(1));
    let events = json_lines(&out);
    assert_eq!(events.last().unwrap()["type"], "turn.failed");
    assert!(receiver_file(&w, "codex").is_none());

    w.agents.set(keys::MODE, "no-change");
    let out = w.run(
        "codex",
        &codex_receiver_args(&w, "workspace-write"),
        Some(NOTE),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(receiver_file(&w, "codex").is_none());
}

#[test]
fn opencode_receiver_persists_a_session_and_resumes_it() {
    let w = World::new();
    let out = opencode_receiver(&w, "allow");
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    let session = events[0]["sessionID"].as_str().unwrap().to_owned();
    assert!(session.starts_with("ses_"), "{session}");
    assert!(events.iter().all(|e| e["sessionID"] == session.as_str()));
    let text = events.iter().rev().find(|e| e["type"] == "text").unwrap();
    let last = format!("Continued the task as opencode (session {session}).");
    assert_eq!(text["part"]["text"], last.as_str());
    assert_eq!(events.last().unwrap()["part"]["reason"], "stop");
    assert!(receiver_file(&w, "opencode").unwrap().contains(&session));

    let out = resume(&w, "opencode", &["--session", &session], w.repo.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("resumed {session}: {last}\n"));
    let out = resume(&w, "opencode", &["--session", "ses_missing"], w.repo.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Session not found"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_opencode_reviewer_writes_nothing() {
    let w = World::new();
    let out = opencode_receiver(&w, "deny");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
    let session = json_lines(&out)[0]["sessionID"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(session_record(&w, "opencode", &session)["lastMessage"].is_string());
}

#[test]
fn receivers_are_recorded() {
    let w = World::new();
    w.agents.record_dir();
    let out = w.run("codex", &codex_receiver_args(&w, "read-only"), Some(NOTE));
    assert!(out.status.success(), "{}", stderr(&out));
    let records = w.agents.invocations();
    let run = records
        .iter()
        .find(|r| r["stdin"].is_string())
        .expect("the receiver run is recorded");
    assert_eq!(run["stdin"], NOTE);
}
