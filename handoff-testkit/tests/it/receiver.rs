//! The fake CLIs as continuation receivers: runs that persist their session and carry no result
//! contract, the sessions they leave in the CLIs' real stores, and the commands that resume them.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use handoff_testkit::keys;
use serde_json::Value;

use crate::support::*;

const SESSION: &str = "6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f";
const FORK: &str = "0b5d3c1a-7e2f-4a8b-9c6d-1e2f3a4b5c6d";
const NOTE: &str = "# Handoff note\n\nclaude handed this task over to you.\n\nFinish the parser.\n";
const PROBE: &str = "What were you last working on? Answer in one or two sentences.";

/// The receiver argv, minus the session switches.
fn claude_base_args(w: &World, tools: &str) -> Vec<String> {
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
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
    ])
}

fn claude_with(w: &World, tools: &str, session: &[&str]) -> Vec<String> {
    let mut a = claude_base_args(w, tools);
    a.extend(args(session));
    a
}

fn claude_receiver_args(w: &World, tools: &str) -> Vec<String> {
    claude_with(w, tools, &["--session-id", SESSION])
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

fn codex_resume_args(thread: &str, sandbox: &str) -> Vec<String> {
    args(&[
        "exec",
        "resume",
        thread,
        "--json",
        "--ignore-user-config",
        "--ignore-rules",
        "--strict-config",
        "-c",
        r#"approval_policy="never""#,
        "-c",
        &format!("sandbox_mode=\"{sandbox}\""),
        "-m",
        "gpt-test",
        "-",
    ])
}

/// Runs the OpenCode receiver in the user's own configuration (no private `OPENCODE_CONFIG_DIR`),
/// with the role's permission table inline.
fn opencode_receiver(w: &World, edit: &str, extra: &[&str], stdin: &str) -> std::process::Output {
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
    let mut argv = args(&[
        "--pure",
        "run",
        "--agent",
        agent,
        "--dir",
        w.repo.path().to_str().unwrap(),
        "--format",
        "json",
    ]);
    argv.extend(args(extra));
    w.run_in(
        "opencode",
        &argv,
        Some(stdin),
        w.tmp.path(),
        &[("OPENCODE_CONFIG_CONTENT", OsStr::new(&config))],
    )
}

/// Claude Code's project folder name for `dir`.
fn slug(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .unwrap()
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn claude_file(w: &World, id: &str) -> PathBuf {
    w.tmp
        .path()
        .join(".claude/projects")
        .join(slug(w.repo.path()))
        .join(format!("{id}.jsonl"))
}

fn jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

/// The conversation lines (`user` / `assistant`) of a Claude session.
fn conversation(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "user" || l["type"] == "assistant")
        .collect()
}

/// Every conversation line's `parentUuid` is the previous one's `uuid`.
fn assert_chained(lines: &[Value]) {
    let conv = conversation(lines);
    assert!(conv[0]["parentUuid"].is_null(), "{}", conv[0]);
    for pair in conv.windows(2) {
        assert_eq!(pair[1]["parentUuid"], pair[0]["uuid"], "{}", pair[1]);
    }
}

/// The prompts of a Claude session (user lines whose content is a string).
fn claude_prompts(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["type"] == "user")
        .filter_map(|l| l["message"]["content"].as_str().map(str::to_owned))
        .collect()
}

fn claude_result(out: &std::process::Output) -> Value {
    json_lines(out).pop().unwrap()
}

fn codex_rollout(w: &World, thread: &str) -> PathBuf {
    fn walk(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, suffix, out);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &w.tmp.path().join(".codex/sessions"),
        &format!("-{thread}.jsonl"),
        &mut found,
    );
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

/// (role, text) of a rollout's response-item messages, injected context left out.
fn codex_said(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|l| l["type"] == "response_item" && l["payload"]["type"] == "message")
        .map(|l| {
            (
                l["payload"]["role"].as_str().unwrap().to_owned(),
                l["payload"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .filter(|(_, t)| !t.starts_with("<environment_context>"))
        .collect()
}

fn opencode_record(w: &World, id: &str) -> Value {
    let path = w
        .tmp
        .path()
        .join(".local/share/opencode/fake-agent-sessions")
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
fn claude_receiver_writes_a_real_session_and_resumes_in_its_worktree() {
    let w = World::with_sandbox_tools();
    w.repo.git(&["checkout", "-q", "-b", "feature"]);
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

    let lines = jsonl(&claude_file(&w, SESSION));
    let repo = std::fs::canonicalize(w.repo.path()).unwrap();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "queue-operation",
            "queue-operation",
            "user",
            "assistant",
            "user",
            "assistant",
            "last-prompt"
        ]
    );
    assert_chained(&lines);
    for l in conversation(&lines) {
        assert_eq!(l["sessionId"], SESSION);
        assert_eq!(l["cwd"], repo.to_str().unwrap());
        assert_eq!(l["version"], "2.1.197");
        assert_eq!(l["gitBranch"], "feature");
        assert_eq!(l["isSidechain"], false);
        assert!(l["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(uuid::Uuid::parse_str(l["uuid"].as_str().unwrap()).is_ok());
    }
    assert_eq!(
        lines[2]["message"],
        serde_json::json!({"role": "user", "content": NOTE})
    );
    assert_eq!(lines[2]["permissionMode"], "dontAsk");
    // The file write: a Write tool use and its result, then the answer.
    assert_eq!(lines[3]["message"]["content"][0]["name"], "Write");
    assert_eq!(lines[3]["message"]["stop_reason"], "tool_use");
    assert_eq!(lines[4]["message"]["content"][0]["type"], "tool_result");
    assert_eq!(lines[4]["sourceToolAssistantUUID"], lines[3]["uuid"]);
    assert_eq!(lines[5]["message"]["role"], "assistant");
    assert_eq!(lines[5]["message"]["content"][0]["text"], last.as_str());
    assert_eq!(lines[5]["message"]["stop_reason"], "end_turn");
    assert_eq!(lines[6]["leafUuid"], lines[5]["uuid"]);
    assert_eq!(lines[6]["lastPrompt"], NOTE);

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
fn a_claude_receiver_resumes_in_place_and_keeps_the_chain() {
    let w = World::with_sandbox_tools();
    let out = w.run(
        "claude",
        &claude_receiver_args(&w, "Glob,Grep,Read,Bash"),
        Some(NOTE),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // A reviewer writes nothing.
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
    let path = claude_file(&w, SESSION);
    let before = std::fs::read(&path).unwrap();

    // The same id again is Claude's error, and changes nothing.
    let out = w.run(
        "claude",
        &claude_receiver_args(&w, "Glob,Grep,Read,Bash"),
        Some(NOTE),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is already in use"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);

    w.agents.set(keys::MODE, "mutate");
    let out = w.run(
        "claude",
        &claude_with(&w, "Glob,Grep,Read,Bash", &["--resume", SESSION]),
        Some("Now the lexer.\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json_lines(&out)[0]["session_id"], SESSION);
    assert_eq!(claude_result(&out)["session_id"], SESSION);
    assert!(receiver_file(&w, "claude").is_some());
    // Appended: the carried lines are untouched, the new turn chains to them.
    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    let lines = jsonl(&path);
    assert_chained(&lines);
    assert_eq!(claude_prompts(&lines), [NOTE, "Now the lexer.\n"]);
    let conv = conversation(&lines);
    assert_eq!(conv.last().unwrap()["type"], "assistant");
    assert!(conv.iter().all(|l| l["sessionId"] == SESSION));
}

#[test]
fn a_claude_fork_copies_the_session_under_the_new_id() {
    let w = World::with_sandbox_tools();
    let out = w.run("claude", &claude_receiver_args(&w, READ_TOOLS), Some(NOTE));
    assert!(out.status.success(), "{}", stderr(&out));
    let source = std::fs::read(claude_file(&w, SESSION)).unwrap();

    let out = w.run(
        "claude",
        &claude_with(
            &w,
            READ_TOOLS,
            &["--resume", SESSION, "--fork-session", "--session-id", FORK],
        ),
        Some("Carry on.\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    assert!(events.iter().all(|e| e["session_id"] == FORK));
    assert_eq!(
        events.last().unwrap()["result"],
        format!("Continued the task as claude (session {FORK}).").as_str()
    );
    // The source is untouched; the fork starts with its lines under the new id.
    assert_eq!(std::fs::read(claude_file(&w, SESSION)).unwrap(), source);
    let src_lines = jsonl(&claude_file(&w, SESSION));
    let lines = jsonl(&claude_file(&w, FORK));
    assert!(lines.iter().all(|l| l["sessionId"] == FORK), "{lines:#?}");
    for (a, b) in src_lines.iter().zip(&lines) {
        assert_eq!(a["uuid"], b["uuid"]);
        assert_eq!(a["message"], b["message"]);
    }
    assert_chained(&lines);
    assert_eq!(claude_prompts(&lines), [NOTE, "Carry on.\n"]);

    // Without --session-id the fork gets a fresh id.
    let out = w.run(
        "claude",
        &claude_with(&w, READ_TOOLS, &["--resume", SESSION, "--fork-session"]),
        Some("Again.\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let id = json_lines(&out)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id != SESSION && id != FORK, "{id}");
    assert!(claude_file(&w, &id).is_file());

    // --session-id with --resume needs --fork-session; a fork into a used id is refused.
    for (extra, needle) in [
        (
            vec!["--resume", SESSION, "--session-id", FORK],
            "--fork-session",
        ),
        (
            vec!["--resume", SESSION, "--fork-session", "--session-id", FORK],
            "already in use",
        ),
        (vec!["--session-id", "not-a-uuid"], "Invalid session ID"),
    ] {
        let out = w.run("claude", &claude_with(&w, READ_TOOLS, &extra), Some("x\n"));
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        assert!(stderr(&out).contains(needle), "{extra:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_claude_receiver_cannot_resume_a_missing_session() {
    let w = World::with_sandbox_tools();
    let out = w.run(
        "claude",
        &claude_with(&w, READ_TOOLS, &["--resume", SESSION]),
        Some(NOTE),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("No conversation found with session ID: {SESSION}")),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
    assert!(!w.tmp.path().join(".claude").exists());
    // A session of another directory is not resumable from here either.
    let elsewhere = w.scratch("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = w.run_in(
        "claude",
        &claude_receiver_args(&w, READ_TOOLS),
        Some(NOTE),
        &elsewhere,
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = w.run(
        "claude",
        &claude_with(&w, READ_TOOLS, &["--resume", SESSION]),
        Some(NOTE),
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn claude_config_dir_moves_the_store() {
    let w = World::with_sandbox_tools();
    let config = w.scratch("claude-config");
    let out = w.run_in(
        "claude",
        &claude_receiver_args(&w, READ_TOOLS),
        Some(NOTE),
        w.repo.path(),
        &[("CLAUDE_CONFIG_DIR", config.as_os_str())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!w.tmp.path().join(".claude").exists());
    let path = config
        .join("projects")
        .join(slug(w.repo.path()))
        .join(format!("{SESSION}.jsonl"));
    assert_eq!(claude_prompts(&jsonl(&path)), [NOTE]);
}

#[test]
fn claude_receiver_answers_the_probe_from_its_session() {
    let w = World::with_sandbox_tools();
    let out = w.run("claude", &claude_receiver_args(&w, WRITE_TOOLS), Some(NOTE));
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_file(w.repo.path().join("fake-receiver-claude.txt")).unwrap();

    let probe = format!("Quick check before you go on.\n\n{PROBE}\n");
    let out = w.run(
        "claude",
        &claude_with(&w, WRITE_TOOLS, &["--resume", SESSION]),
        Some(&probe),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let last = format!("Continued the task as claude (session {SESSION}).");
    assert_eq!(claude_result(&out)["result"], last.as_str());
    // A question, not work: nothing written in the worktree; the turn is in the session.
    assert!(receiver_file(&w, "claude").is_none());
    let lines = jsonl(&claude_file(&w, SESSION));
    assert_eq!(claude_prompts(&lines).last().unwrap(), &probe);

    w.agents
        .set(keys::PROBE_ANSWER, "Finishing the parser in src/lib.rs.");
    let out = w.run(
        "claude",
        &claude_with(&w, WRITE_TOOLS, &["--resume", SESSION]),
        Some(PROBE),
    );
    assert_eq!(
        claude_result(&out)["result"],
        "Finishing the parser in src/lib.rs."
    );
    w.agents.unset(keys::PROBE_ANSWER);
    let out = w.run(
        "claude",
        &claude_with(&w, WRITE_TOOLS, &["--session-id", FORK]),
        Some(PROBE),
    );
    assert_eq!(claude_result(&out)["result"], "I don't know.");
}

#[test]
fn a_fresh_claude_receiver_ignores_the_session_to_resume() {
    let w = World::with_sandbox_tools();
    let out = w.run("claude", &claude_receiver_args(&w, READ_TOOLS), Some(NOTE));
    assert!(out.status.success(), "{}", stderr(&out));
    let before = std::fs::read(claude_file(&w, SESSION)).unwrap();

    w.agents.set(keys::RECEIVER_FRESH, "1");
    let out = w.run(
        "claude",
        &claude_with(&w, READ_TOOLS, &["--resume", SESSION]),
        Some(PROBE),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let id = json_lines(&out)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(id, SESSION);
    assert_eq!(claude_result(&out)["result"], "I don't know.");
    assert_eq!(std::fs::read(claude_file(&w, SESSION)).unwrap(), before);
    assert_eq!(claude_prompts(&jsonl(&claude_file(&w, &id))), [PROBE]);

    // A fork that does not continue: the new id holds a new conversation.
    let out = w.run(
        "claude",
        &claude_with(
            &w,
            READ_TOOLS,
            &["--resume", SESSION, "--fork-session", "--session-id", FORK],
        ),
        Some("Go on.\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(claude_prompts(&jsonl(&claude_file(&w, FORK))), ["Go on.\n"]);
}

#[test]
fn a_slow_claude_receiver_writes_its_session_late() {
    let w = World::with_sandbox_tools();
    w.agents.set(keys::RECEIVER_DELAY_MS, "400");
    let mut cmd = std::process::Command::new(w.agents.bin("claude"));
    cmd.args(claude_receiver_args(&w, READ_TOOLS))
        .current_dir(w.repo.path())
        .env_clear()
        .env("PATH", w.agents.path_env())
        .env("HOME", w.tmp.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(NOTE.as_bytes())
            .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert!(!claude_file(&w, SESSION).exists());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(claude_prompts(&jsonl(&claude_file(&w, SESSION))), [NOTE]);
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
    // The prompt, then Claude's placeholder for the failed call.
    let lines = jsonl(&claude_file(&w, SESSION));
    let conv = conversation(&lines);
    assert_eq!(conv.len(), 2);
    assert_eq!(conv[1]["isApiErrorMessage"], true);
    assert_eq!(conv[1]["message"]["model"], "<synthetic>");
    let out = resume(&w, "claude", &["--resume", SESSION], w.repo.path());
    assert_eq!(stdout(&out), format!("resumed {SESSION}: \n"));

    w.agents.set(keys::MODE, "exit");
    let out = w.run(
        "claude",
        &claude_with(&w, WRITE_TOOLS, &["--session-id", FORK]),
        Some(NOTE),
    );
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
    assert!(!w.tmp.path().join(".claude").exists());
    assert!(!w.tmp.path().join(".fake-agent").exists());
    assert!(receiver_file(&w, "claude").is_none());
}

#[test]
fn codex_receiver_writes_a_rollout_and_resumes_it() {
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
    assert!(uuid::Uuid::parse_str(&thread).is_ok(), "{thread}");
    let message = events
        .iter()
        .rev()
        .find(|e| e["item"]["type"] == "agent_message")
        .unwrap();
    let last = format!("Continued the task as codex (session {thread}).");
    assert_eq!(message["item"]["text"], last.as_str());
    assert_eq!(events.last().unwrap()["type"], "turn.completed");
    assert!(receiver_file(&w, "codex").unwrap().contains(&thread));

    let path = codex_rollout(&w, &thread);
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let rel = path
        .strip_prefix(w.tmp.path().join(".codex/sessions"))
        .unwrap();
    let date: Vec<String> = rel
        .iter()
        .take(3)
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    assert!(
        name.starts_with(&format!("rollout-{}-{}-{}T", date[0], date[1], date[2])),
        "{}",
        rel.display()
    );
    let lines = jsonl(&path);
    let repo = std::fs::canonicalize(w.repo.path()).unwrap();
    assert_eq!(lines[0]["type"], "session_meta");
    assert_eq!(lines[0]["payload"]["id"], thread.as_str());
    assert_eq!(lines[0]["payload"]["cwd"], repo.to_str().unwrap());
    assert_eq!(lines[0]["payload"]["originator"], "codex_exec");
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["ordinal"], i);
    }
    let turn_context = lines.iter().find(|l| l["type"] == "turn_context").unwrap();
    assert_eq!(
        turn_context["payload"]["sandbox_policy"]["type"],
        "workspace-write"
    );
    assert_eq!(
        codex_said(&lines),
        [
            ("user".to_owned(), NOTE.to_owned()),
            ("assistant".to_owned(), last.clone())
        ]
    );
    assert!(
        lines
            .iter()
            .any(|l| l["payload"]["type"] == "function_call")
    );

    // Codex threads are not tied to a directory.
    for cwd in [w.repo.path(), w.tmp.path()] {
        let out = resume(&w, "codex", &["resume", &thread], cwd);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), format!("resumed {thread}: {last}\n"));
    }
    let out = resume(
        &w,
        "codex",
        &["resume", "00000000-0000-4000-8000-000000000000"],
        w.repo.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("No saved session found"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn codex_exec_resume_appends_a_turn() {
    let w = World::new();
    let out = w.run("codex", &codex_receiver_args(&w, "read-only"), Some(NOTE));
    assert!(out.status.success(), "{}", stderr(&out));
    let thread = json_lines(&out)[0]["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = codex_rollout(&w, &thread);
    let before = std::fs::read(&path).unwrap();

    let out = w.run(
        "codex",
        &codex_resume_args(&thread, "workspace-write"),
        Some("Now the lexer.\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    assert_eq!(events[0]["type"], "thread.started");
    assert_eq!(events[0]["thread_id"], thread.as_str());
    assert_eq!(events.last().unwrap()["type"], "turn.completed");
    // `-c sandbox_mode` lets the resumed turn write.
    assert!(receiver_file(&w, "codex").unwrap().contains(&thread));

    let after = std::fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    let lines = jsonl(&path);
    assert_eq!(
        lines.iter().filter(|l| l["type"] == "session_meta").count(),
        1
    );
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["ordinal"], i);
    }
    let last = format!("Continued the task as codex (session {thread}).");
    assert_eq!(
        codex_said(&lines),
        [
            ("user".to_owned(), NOTE.to_owned()),
            ("assistant".to_owned(), last.clone()),
            ("user".to_owned(), "Now the lexer.\n".to_owned()),
            ("assistant".to_owned(), last.clone()),
        ]
    );
    let contexts: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "turn_context")
        .collect();
    assert_eq!(contexts[1]["payload"]["model"], "gpt-test");

    // The probe is answered from the thread.
    let out = w.run(
        "codex",
        &codex_resume_args(&thread, "read-only"),
        Some(PROBE),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let message = json_lines(&out)
        .into_iter()
        .rev()
        .find(|e| e["item"]["type"] == "agent_message")
        .unwrap();
    assert_eq!(message["item"]["text"], last.as_str());

    // `exec resume` has no --sandbox or --cd.
    let mut bad = codex_resume_args(&thread, "read-only");
    bad.insert(3, "--sandbox".into());
    bad.insert(4, "read-only".into());
    let out = w.run("codex", &bad, Some("x"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unexpected argument '--sandbox'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn codex_exec_resume_of_a_missing_thread_fails() {
    let w = World::new();
    let missing = "019a0000-0000-7000-8000-000000000000";
    let out = w.run(
        "codex",
        &codex_resume_args(missing, "read-only"),
        Some(NOTE),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("no rollout found for thread id {missing}")),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
    assert!(!w.tmp.path().join(".codex").exists());
}

#[test]
fn codex_fresh_override_and_codex_home() {
    let w = World::new();
    let home = w.scratch("codex-home");
    let env = [("CODEX_HOME", home.as_os_str())];
    let out = w.run_in(
        "codex",
        &codex_receiver_args(&w, "read-only"),
        Some(NOTE),
        w.repo.path(),
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!w.tmp.path().join(".codex").exists());
    let thread = json_lines(&out)[0]["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();

    w.agents.set(keys::RECEIVER_FRESH, "1");
    let out = w.run_in(
        "codex",
        &codex_resume_args(&thread, "read-only"),
        Some(PROBE),
        w.repo.path(),
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    let other = events[0]["thread_id"].as_str().unwrap();
    assert_ne!(other, thread);
    let message = events
        .iter()
        .rev()
        .find(|e| e["item"]["type"] == "agent_message")
        .unwrap();
    assert_eq!(message["item"]["text"], "I don't know.");
    let out = w.run_in(
        "codex",
        &args(&["resume", other]),
        None,
        w.repo.path(),
        &env,
    );
    assert_eq!(stdout(&out), format!("resumed {other}: I don't know.\n"));
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
    let thread = events[0]["thread_id"].as_str().unwrap();
    let lines = jsonl(&codex_rollout(&w, thread));
    assert_eq!(codex_said(&lines), [("user".to_owned(), NOTE.to_owned())]);
    assert!(lines.last().unwrap()["payload"]["last_agent_message"].is_null());

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
    let out = opencode_receiver(&w, "allow", &[], NOTE);
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
fn opencode_receiver_continues_or_forks_a_session() {
    let w = World::new();
    let out = opencode_receiver(&w, "deny", &[], NOTE);
    assert!(out.status.success(), "{}", stderr(&out));
    let session = json_lines(&out)[0]["sessionID"]
        .as_str()
        .unwrap()
        .to_owned();

    let out = opencode_receiver(&w, "deny", &["--session", &session], PROBE);
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    assert!(events.iter().all(|e| e["sessionID"] == session.as_str()));
    let text = events.iter().rev().find(|e| e["type"] == "text").unwrap();
    let last = format!("Continued the task as opencode (session {session}).");
    assert_eq!(text["part"]["text"], last.as_str());
    assert_eq!(
        opencode_record(&w, &session)["prompts"],
        serde_json::json!([NOTE, PROBE])
    );

    let out = opencode_receiver(&w, "deny", &["--session", &session, "--fork"], "Go on.");
    assert!(out.status.success(), "{}", stderr(&out));
    let forked = json_lines(&out)[0]["sessionID"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(forked, session);
    assert_eq!(
        opencode_record(&w, &forked)["prompts"],
        serde_json::json!([NOTE, PROBE, "Go on."])
    );

    w.agents.set(keys::RECEIVER_FRESH, "1");
    let out = opencode_receiver(&w, "deny", &["--session", &session], PROBE);
    let events = json_lines(&out);
    assert_ne!(events[0]["sessionID"], session.as_str());
    let text = events.iter().rev().find(|e| e["type"] == "text").unwrap();
    assert_eq!(text["part"]["text"], "I don't know.");
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
