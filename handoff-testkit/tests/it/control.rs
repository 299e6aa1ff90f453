//! The env file, real environment precedence, and invocation records.

use std::process::Command;

use crate::support::*;

#[test]
fn env_file_is_honoured_with_a_scrubbed_environment() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "exit");
    w.agents.set("HANDOFF_FAKE_EXIT", "7");
    let out = w.run(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert_eq!(out.status.code(), Some(7));

    // Replacing and removing keys.
    w.agents.set("HANDOFF_FAKE_EXIT", "9");
    assert_eq!(
        w.agents
            .settings()
            .get("HANDOFF_FAKE_EXIT")
            .map(String::as_str),
        Some("9")
    );
    let out = w.run(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert_eq!(out.status.code(), Some(9));
    w.agents.unset("HANDOFF_FAKE_MODE");
    let out = w.run(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert!(out.status.success());
}

#[test]
fn real_environment_wins_over_the_file() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "exit");
    let mode = std::ffi::OsString::from("no-change");
    let out = w.run_in(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(REVIEW_PROMPT),
        w.repo.path(),
        &[("HANDOFF_FAKE_MODE", &mode)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn env_file_found_through_path_lookup() {
    // argv[0] without a slash: the fake finds its own directory on PATH, not the symlink target's.
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "exit");
    w.agents.set("HANDOFF_FAKE_EXIT", "31");
    let mut cmd = Command::new("codex");
    cmd.args(["exec", "--ephemeral", "--json", "-"])
        .current_dir(w.repo.path())
        .env_clear()
        .env("PATH", w.agents.path_env());
    let out = run_command(cmd, Some(REVIEW_PROMPT));
    assert_eq!(out.status.code(), Some(31));
}

#[test]
fn comments_and_blank_lines_in_the_env_file() {
    let w = World::new();
    std::fs::write(
        w.agents.env_file(),
        "# switches\n\nHANDOFF_FAKE_MODE = exit\n# HANDOFF_FAKE_EXIT=1\nHANDOFF_FAKE_EXIT=12\n",
    )
    .unwrap();
    let out = w.run(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert_eq!(out.status.code(), Some(12));
}

#[test]
fn records_capture_argv_env_cwd_and_stdin() {
    let w = World::with_sandbox_tools();
    let records = w.agents.record_dir();
    assert!(records.is_dir());
    let secret = std::ffi::OsString::from("visible-to-the-agent");
    let out = w.run_in("claude", &args(&["--version"]), None, w.repo.path(), &[]);
    assert!(out.status.success());
    let settings = sandbox_settings(w.repo.path(), false);
    let argv = claude_run_args(READ_TOOLS, &settings, SCHEMA);
    let out = w.run_in(
        "claude",
        &argv,
        Some(REVIEW_PROMPT),
        w.repo.path(),
        &[("SOME_VAR", &secret)],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    let calls = w.agents.invocations();
    assert_eq!(calls.len(), 2);
    let probe = &calls[0];
    assert_eq!(probe["exe"], "claude");
    assert_eq!(probe["argv"], serde_json::json!(["--version"]));
    assert!(probe["stdin"].is_null());

    let run = &calls[1];
    assert_eq!(run["exe"], "claude");
    assert_eq!(run["argv"], serde_json::json!(argv));
    assert_eq!(run["stdin"], REVIEW_PROMPT);
    assert_eq!(run["cwd"], w.repo.path().display().to_string());
    assert_eq!(run["env"]["SOME_VAR"], "visible-to-the-agent");
    assert_eq!(
        run["env"]["PATH"],
        w.agents.path_env().to_string_lossy().as_ref()
    );
    // The file's switches are not part of the recorded environment.
    assert!(run["env"].get("HANDOFF_FAKE_RECORD_DIR").is_none());
    assert!(run["pid"].as_u64().unwrap() > 0);
    // No temp files left behind.
    assert!(std::fs::read_dir(&records).unwrap().all(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("invocation-")
    }));
}

#[test]
fn fake_agent_dispatches_on_its_first_argument_when_run_directly() {
    let out = Command::new(handoff_testkit::fake_agent_bin())
        .args(["codex", "--version"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "codex-cli 0.171.0\n"
    );
    let out = Command::new(handoff_testkit::fake_agent_bin())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
