//! `HANDOFF_FAKE_MODE` switches common to every CLI.

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::*;

fn claude_result(w: &World, tools: &str, prompt: &str) -> (std::process::Output, Value) {
    let settings = sandbox_settings(w.repo.path(), tools.contains("Write"));
    let out = w.run(
        "claude",
        &claude_run_args(tools, &settings, SCHEMA),
        Some(prompt),
    );
    let last = json_lines(&out).pop().unwrap_or(Value::Null);
    (out, last)
}

#[test]
fn exit_mode_uses_the_default_and_configured_codes() {
    let w = World::with_sandbox_tools();
    w.agents.set("HANDOFF_FAKE_MODE", "exit");
    let settings = sandbox_settings(w.repo.path(), true);
    let out = w.run(
        "claude",
        &claude_run_args(WRITE_TOOLS, &settings, SCHEMA),
        Some(BUILD_PROMPT),
    );
    assert_eq!(out.status.code(), Some(23));
    assert!(out.stdout.is_empty());
    assert_eq!(stderr(&out).lines().count(), 1);

    w.agents.set("HANDOFF_FAKE_EXIT", "42");
    let out = w.run(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(BUILD_PROMPT),
    );
    assert_eq!(out.status.code(), Some(42));
    assert!(out.stdout.is_empty());
    // Probes still answer.
    assert!(w.run("codex", &args(&["--version"]), None).status.success());
}

#[test]
fn blocked_and_failed_statuses() {
    let w = World::with_sandbox_tools();
    for status in ["blocked", "failed"] {
        w.agents.set("HANDOFF_FAKE_MODE", status);
        let (out, result) = claude_result(&w, WRITE_TOOLS, BUILD_PROMPT);
        assert!(out.status.success());
        let answer = assert_answer(&result["structured_output"]);
        assert_eq!(answer["status"], status);
    }
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
}

#[test]
fn schema_drift_mode() {
    let w = World::with_sandbox_tools();
    w.agents.set("HANDOFF_FAKE_MODE", "schema-drift");
    let (_, result) = claude_result(&w, READ_TOOLS, REVIEW_PROMPT);
    assert_eq!(
        result["structured_output"]["schemaVersion"],
        "handoff.provider-output.v0"
    );
}

#[test]
fn stderr_secret_mode() {
    let w = World::with_sandbox_tools();
    w.agents.set("HANDOFF_FAKE_MODE", "stderr-secret");
    let (out, result) = claude_result(&w, WRITE_TOOLS, BUILD_PROMPT);
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(err.contains("api_key=sk-fakesecret0123456789abcdef"));
    assert!(err.contains("Authorization: Bearer tok-fakesecret0123456789"));
    assert_answer(&result["structured_output"]);
    assert!(w.repo.path().join("fake-build.txt").exists());
}

#[test]
fn oversized_mode() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "oversized");
    let out = w.run(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert!(out.stdout.len() > 1_153_434, "{}", out.stdout.len());
}

#[test]
fn mutate_mode_writes_even_read_only() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "mutate");
    let out = w.run(
        "codex",
        &args(&[
            "exec",
            "--ephemeral",
            "--json",
            "--sandbox",
            "read-only",
            "-",
        ]),
        Some(REVIEW_PROMPT),
    );
    assert!(out.status.success());
    assert!(w.repo.path().join("fake-mutation.txt").is_file());
}

#[test]
fn no_change_mode_writes_nothing_even_when_writable() {
    let w = World::with_sandbox_tools();
    w.agents.set("HANDOFF_FAKE_MODE", "no-change");
    let (out, result) = claude_result(&w, WRITE_TOOLS, BUILD_PROMPT);
    assert!(out.status.success());
    assert_eq!(result["structured_output"]["status"], "completed");
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
}

fn pid_of(text: &str) -> Pid {
    Pid::from_raw(text.trim().parse().unwrap())
}

/// Dead or a zombie.
fn is_gone(pid: Pid) -> bool {
    if kill(pid, None).is_err() {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

#[test]
fn hang_mode_writes_the_ready_file_and_sleeps() {
    let w = World::new();
    let ready = w.scratch("ready");
    w.agents.set("HANDOFF_FAKE_MODE", "hang");
    w.agents.set("HANDOFF_FAKE_READY_FILE", &ready);
    let records = w.agents.record_dir();
    let mut child = Command::new(w.agents.bin("codex"))
        .args(args(&["exec", "--ephemeral", "--json", "-"]))
        .current_dir(w.repo.path())
        .env_clear()
        .env("PATH", w.agents.path_env())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(BUILD_PROMPT.as_bytes()).unwrap();
    }
    let pid = pid_of(&wait_for_file(&ready));
    assert_eq!(pid.as_raw() as u32, child.id());
    let calls = w.agents.invocations();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["pid"], child.id());
    assert_eq!(calls[0]["stdin"], BUILD_PROMPT);
    assert!(records.read_dir().unwrap().count() == 1);
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "hang mode exited");
    killpg(pid, Signal::SIGKILL).unwrap();
    child.wait().unwrap();
}

#[test]
fn grandchild_mode_leaves_a_grandchild_in_the_group() {
    let w = World::new();
    let ready = w.scratch("ready");
    let grandchild = w.scratch("grandchild");
    w.agents.set("HANDOFF_FAKE_MODE", "grandchild");
    w.agents.set("HANDOFF_FAKE_READY_FILE", &ready);
    w.agents
        .set("HANDOFF_FAKE_GRANDCHILD_PID_FILE", &grandchild);
    let mut child = Command::new(w.agents.bin("claude"))
        .args(args(&["-p", "--output-format", "json", "Mode: build"]))
        .current_dir(w.repo.path())
        .env_clear()
        .env("PATH", w.agents.path_env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = pid_of(&wait_for_file(&ready));
    let gpid = pid_of(&wait_for_file(&grandchild));
    assert_eq!(pid.as_raw() as u32, child.id());
    assert_ne!(gpid, pid);
    assert!(!is_gone(gpid));
    assert_eq!(nix::unistd::getpgid(Some(gpid)).unwrap(), pid);
    killpg(pid, Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !is_gone(gpid) {
        assert!(
            Instant::now() < deadline,
            "grandchild survived the group kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn unknown_mode_is_reported() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "bogus");
    let out = w.run(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("HANDOFF_FAKE_MODE=bogus"));
}
