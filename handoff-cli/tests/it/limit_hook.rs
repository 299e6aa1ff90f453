//! `handoff hook claude-stop-failure|claude-session-start|claude-prompt-submit`: Claude Code
//! stopped on its limit; `[failover]` moves the task in the background or says what would, the
//! next session start says where it went, and a prompt is stopped while the receiver holds it.

use std::os::unix::fs::PermissionsExt;

use handoff_testkit::keys::WAIT_FILE;
use serde_json::{Value, json};

use crate::support::{Run, Sandbox};

/// Claude Code 2.1.332's `StopFailure` payload, as recorded, for the sandbox's worktree.
fn payload(sb: &Sandbox, error: &str, transcript: &str) -> Vec<u8> {
    json!({
        "session_id": "e4deea45-17fa-4e8a-b3a5-b9183beb054e",
        "transcript_path": transcript,
        "cwd": sb.cwd(),
        "prompt_id": "9e45fbbb-0000-4000-8000-000000000000",
        "effort": {"level": "high"},
        "hook_event_name": "StopFailure",
        "error": error,
        "last_assistant_message": "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.",
    })
    .to_string()
    .into_bytes()
}

fn hook(sb: &Sandbox, event: &str, stdin: &[u8]) -> Run {
    sb.run_stdin(&["hook", event], stdin)
}

/// The `StopFailure` hook of a turn that met its usage limit.
fn limited(sb: &Sandbox) -> Run {
    hook(
        sb,
        "claude-stop-failure",
        &payload(sb, "rate_limit", &transcript(sb)),
    )
}

/// Waits (bounded) until `f` holds: the hook hands its work to a copy of itself in the
/// background and returns at once.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The next session start's output, once the background work has written it.
fn next_start(sb: &Sandbox) -> Run {
    let mut out = None;
    eventually("a notice", || {
        let run = hook(sb, "claude-session-start", &cwd_only(sb));
        let shown = !run.stdout.is_empty();
        if shown {
            out = Some(run);
        }
        shown
    });
    out.unwrap()
}

fn cwd_only(sb: &Sandbox) -> Vec<u8> {
    json!({"session_id": "s2", "cwd": sb.cwd(), "hook_event_name": "x"})
        .to_string()
        .into_bytes()
}

fn write_config(sb: &Sandbox, text: &str) {
    sb.write_config(text);
}

/// A Claude Code session file (the shape 2.1.x writes) with one exchange, then the API error.
fn transcript(sb: &Sandbox) -> String {
    let path = sb
        .private
        .join("e4deea45-17fa-4e8a-b3a5-b9183beb054e.jsonl");
    let cwd = sb.cwd();
    let common = |uuid: &str, parent: Value, at: &str| {
        json!({"parentUuid": parent, "sessionId": "e4deea45-17fa-4e8a-b3a5-b9183beb054e",
               "cwd": cwd, "version": "2.1.332", "isSidechain": false, "userType": "external",
               "uuid": uuid, "timestamp": at})
    };
    let mut user = common("u1", Value::Null, "2026-12-06T10:00:01.000Z");
    user["type"] = "user".into();
    user["message"] = json!({"role": "user", "content": "Add a --verbose flag to the CLI."});
    let mut answer = common("a1", "u1".into(), "2026-12-06T10:00:02.000Z");
    answer["type"] = "assistant".into();
    answer["message"] = json!({"id": "msg_a1", "type": "message", "role": "assistant",
        "model": "claude-opus-5-5",
        "content": [{"type": "text", "text": "I added the flag to src/lib.rs; tests next."}]});
    let mut failed = common("a2", "a1".into(), "2026-12-06T10:00:03.000Z");
    failed["type"] = "assistant".into();
    failed["isApiErrorMessage"] = true.into();
    failed["message"] = json!({"id": "msg_a2", "type": "message", "role": "assistant",
        "model": "<synthetic>", "content": [{"type": "text", "text": "API Error: Request rejected (429)"}]});
    let text: Vec<String> = [user, answer, failed]
        .iter()
        .map(Value::to_string)
        .collect();
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    path.to_string_lossy().into_owned()
}

/// The hook worker's log, next to the task store.
fn hook_log(sb: &Sandbox) -> String {
    std::fs::read_to_string(sb.root.join("home/.local/state/handoff/hook.log")).unwrap_or_default()
}

fn jobs(sb: &Sandbox) -> Vec<Value> {
    sb.run(&["jobs", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Whatever stands where the worker's log goes — a FIFO no one reads, a symlink to a file of
/// the user's — the worker neither hangs on it nor writes through it: the task still moves.
#[test]
fn a_fifo_or_a_symlink_planted_as_the_hook_log_neither_stops_nor_redirects_the_worker() {
    for plant in ["fifo", "symlink"] {
        let sb = crate::continuation::sandbox();
        write_config(
            &sb,
            "[failover]\nreceiver = \"codex\"\non_limit = \"continue\"\n",
        );
        let state = sb.root.join("home/.local/state/handoff");
        std::fs::create_dir_all(&state).unwrap();
        let log = state.join("hook.log");
        let victim = sb.root.join("victim.txt");
        std::fs::write(&victim, "the user's\n").unwrap();
        match plant {
            "fifo" => nix::unistd::mkfifo(&log, nix::sys::stat::Mode::S_IRWXU).unwrap(),
            _ => std::os::unix::fs::symlink(&victim, &log).unwrap(),
        }
        let stopped = limited(&sb);
        assert_eq!(stopped.code, 0, "{stopped:?}");
        eventually("the job", || !jobs(&sb).is_empty());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's\n");
    }
}

#[test]
fn by_default_nothing_moves_and_the_next_session_says_what_would() {
    let sb = crate::continuation::sandbox();
    let stopped = limited(&sb);
    assert_eq!(stopped.code, 0, "{stopped:?}");
    assert!(stopped.stdout.is_empty(), "{stopped:?}");
    let start = next_start(&sb);
    assert!(jobs(&sb).is_empty());
    let message = start.json["systemMessage"]
        .as_str()
        .unwrap_or_else(|| panic!("{start:?}"));
    assert!(
        message.contains("nothing moved") && message.contains("handoff continue"),
        "{message}"
    );
    assert_eq!(
        start.json["hookSpecificOutput"]["additionalContext"].as_str(),
        Some(message)
    );
    // Shown once.
    assert!(
        hook(&sb, "claude-session-start", &cwd_only(&sb))
            .stdout
            .is_empty()
    );
    // Nothing holds the task: prompts go through.
    assert!(
        hook(&sb, "claude-prompt-submit", &cwd_only(&sb))
            .stdout
            .is_empty()
    );
}

#[test]
fn continue_moves_the_task_in_the_background_once_an_hour() {
    let sb = crate::continuation::sandbox();
    write_config(
        &sb,
        "[failover]\nreceiver = \"codex\"\non_limit = \"continue\"\n",
    );
    let go = sb.root.join("go");
    sb.agents.set(&format!("{WAIT_FILE}@codex"), &go);
    sb.record();
    let stopped = limited(&sb);
    assert_eq!(stopped.code, 0, "{stopped:?}");
    // The hook returned; the move runs in the background while the receiver still waits.
    eventually("the job", || !jobs(&sb).is_empty());
    let listed = jobs(&sb);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["verb"], "continue");
    assert_eq!(listed[0]["state"], "running", "{listed:?}");
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    // Its log says where the task went and when.
    let log = hook_log(&sb);
    assert!(log.contains("StopFailure in "), "{log}");
    assert!(log.contains(&format!("the task moves: job {id}")), "{log}");

    // A prompt is stopped while the receiver holds the task.
    let prompt = hook(&sb, "claude-prompt-submit", &cwd_only(&sb));
    assert_eq!(prompt.json["decision"], "block", "{prompt:?}");
    assert!(
        prompt.json["reason"]
            .as_str()
            .unwrap()
            .contains("moved this task to codex"),
        "{prompt:?}"
    );

    std::fs::write(&go, "go").unwrap();
    let waited = sb.run(&["wait", &id]);
    assert_eq!(waited.code, 0, "{waited:?}");
    assert_eq!(
        waited.json["target"]["provider"], "codex",
        "{}",
        waited.json
    );
    // The receiver was told the note was generated, and got one that says so.
    let received = sb
        .agents
        .invocations()
        .into_iter()
        .filter(|r| r["exe"] == "codex")
        .map(|r| r.to_string())
        .find(|r| r.contains("Handoff note"))
        .unwrap_or_else(|| panic!("codex never received the task"));
    let stdin = received.as_str();
    assert!(stdin.contains("generated by handoff"), "{stdin}");
    assert!(stdin.contains("generated: true"), "{stdin}");
    assert!(stdin.contains("Add a --verbose flag"), "{stdin}");

    // The timeline records the handoff with its trigger and cause.
    let log = sb.run(&["log", "--cwd", &sb.cwd(), "--json"]);
    assert!(
        log.stdout.contains("\"trigger\":\"limit\""),
        "{}",
        log.stdout
    );
    assert!(
        log.stdout.contains("\"cause\":\"rate_limited\""),
        "{}",
        log.stdout
    );

    // The next session start says where the task went, and prompts stay stopped.
    let start = next_start(&sb);
    assert!(
        start.json["systemMessage"].as_str().unwrap().contains(&id),
        "{start:?}"
    );
    assert_eq!(
        hook(&sb, "claude-prompt-submit", &cwd_only(&sb)).json["decision"],
        "block"
    );

    // Limited again within the hour: nothing moves (max_hops = 1).
    let again = limited(&sb);
    assert_eq!(again.code, 0);
    let start = next_start(&sb);
    assert_eq!(jobs(&sb).len(), 1, "a second move within the hour");
    assert!(
        start.json["systemMessage"]
            .as_str()
            .unwrap()
            .contains("max_hops"),
        "{start:?}"
    );
}

#[test]
fn errors_the_configuration_does_not_name_and_bad_payloads_change_nothing() {
    let sb = crate::continuation::sandbox();
    write_config(
        &sb,
        "[failover]\nreceiver = \"codex\"\non_limit = \"continue\"\n",
    );
    let other = hook(
        &sb,
        "claude-stop-failure",
        &payload(&sb, "server_error", "/nonexistent"),
    );
    assert_eq!(other.code, 0, "{other:?}");
    // The background worker decided, and said so in its log: nothing happened.
    eventually("the worker's decision", || {
        hook_log(&sb).contains("\"server_error\" is not one of [failover] errors")
    });
    assert!(jobs(&sb).is_empty());
    assert!(
        hook(&sb, "claude-session-start", &cwd_only(&sb))
            .stdout
            .is_empty()
    );
    let garbage = hook(&sb, "claude-stop-failure", b"not json");
    assert_eq!(garbage.code, 0, "a hook never fails Claude Code");
    assert!(garbage.stderr.contains("handoff hook:"), "{garbage:?}");

    write_config(&sb, "[failover]\non_limit = \"continue\"\n");
    let bad = sb.run(&["config", "check"]);
    assert_ne!(bad.code, 0, "{bad:?}");
    assert!(bad.stderr.contains("failover.receiver"), "{bad:?}");
    write_config(&sb, "[failover]\nerrors = [\"rate-limit\"]\n");
    let bad = sb.run(&["config", "check"]);
    assert!(bad.stderr.contains("failover.errors"), "{bad:?}");
}

/// The Claude Code that ran the hook stays open in the worktree (an interactive session): the
/// move does not wait for it as for another agent working there.
#[test]
fn the_claude_code_that_ran_the_hook_is_not_an_agent_in_the_way() {
    let sb = crate::continuation::sandbox();
    write_config(
        &sb,
        "[failover]\nreceiver = \"codex\"\non_limit = \"continue\"\n",
    );
    let payload_file = sb.private.join("payload.json");
    std::fs::write(&payload_file, payload(&sb, "rate_limit", &transcript(&sb))).unwrap();
    // A process named `claude`, working in the worktree, that runs the hook and stays.
    let bin = sb.root.join("session-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        format!(
            "#!/bin/bash\n'{}' hook claude-stop-failure < '{}'\nexec -a claude sleep 60\n",
            env!("CARGO_BIN_EXE_handoff"),
            payload_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = sb.command();
    let mut session = std::process::Command::new(&claude);
    session.current_dir(sb.repo.path()).env_clear().envs(
        cmd.get_envs()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
    );
    let _ = &mut cmd;
    let mut session = session.spawn().unwrap();
    eventually("the job", || !jobs(&sb).is_empty());
    let id = jobs(&sb)[0]["id"].as_str().unwrap().to_owned();
    // The move ends while that session is still there (it stays for a minute).
    eventually("the move to end", || jobs(&sb)[0]["state"] != "running");
    let still_there = session.try_wait().unwrap().is_none();
    let waited = sb.run(&["wait", &id]);
    let _ = session.kill();
    let _ = session.wait();
    assert!(still_there, "the session ended before the move did");
    assert_eq!(waited.code, 0, "{waited:?}");
    assert_eq!(waited.json["target"]["provider"], "codex");
}
