//! Fake Codex runs.

use serde_json::Value;

use crate::support::*;

struct CodexRun {
    out: std::process::Output,
    last: std::path::PathBuf,
}

fn codex_run(w: &World, sandbox: &str, prompt: &str) -> CodexRun {
    let schema = w.scratch("provider-output.schema.json");
    std::fs::write(&schema, SCHEMA).unwrap();
    let last = w.scratch("provider-result.json");
    let argv = codex_run_args(sandbox, w.repo.path(), &schema, &last);
    // Run from elsewhere: --cd names the target.
    let out = w.run_in("codex", &argv, Some(prompt), w.tmp.path(), &[]);
    CodexRun { out, last }
}

#[test]
fn read_only_run_writes_nothing_and_fills_the_last_message() {
    let w = World::new();
    let run = codex_run(&w, "read-only", REVIEW_PROMPT);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);

    let events = json_lines(&run.out);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "thread.started",
            "item.completed",
            "turn.started",
            "item.completed",
            "turn.completed"
        ]
    );
    assert_eq!(events[1]["item"]["type"], "error");
    assert_eq!(events[3]["item"]["type"], "agent_message");
    assert_eq!(
        events[4]["usage"],
        serde_json::json!({"input_tokens":22,"cached_input_tokens":4,"cache_write_input_tokens":0,"output_tokens":14,"reasoning_output_tokens":0})
    );

    let last = std::fs::read_to_string(&run.last).unwrap();
    assert_eq!(last, events[3]["item"]["text"].as_str().unwrap());
    let answer: Value = serde_json::from_str(&last).unwrap();
    let answer = assert_answer(&answer);
    assert_eq!(answer["response"], "codex finished review");
    assert_eq!(answer["evidence"], serde_json::json!([]));
}

#[test]
fn writable_run_writes_and_reports_a_command() {
    let w = World::new();
    let run = codex_run(&w, "workspace-write", BUILD_PROMPT);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    assert!(w.repo.path().join("fake-build.txt").is_file());
    let events = json_lines(&run.out);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "item.started" && e["item"]["type"] == "command_execution")
    );
    let answer: Value = serde_json::from_str(&std::fs::read_to_string(&run.last).unwrap()).unwrap();
    assert_eq!(answer["evidence"][0]["path"], "fake-build.txt");
}

#[test]
fn agent_error_mode_fails_the_turn() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "agent-error");
    let run = codex_run(&w, "workspace-write", BUILD_PROMPT);
    assert_eq!(run.out.status.code(), Some(1));
    let events = json_lines(&run.out);
    let n = events.len();
    assert_eq!(events[n - 2]["type"], "error");
    assert_eq!(events[n - 1]["type"], "turn.failed");
    assert!(
        events[n - 1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("500")
    );
    assert!(!run.last.exists());
    assert!(!w.repo.path().join("fake-build.txt").exists());
}

#[test]
fn prose_mode() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "prose");
    let run = codex_run(&w, "read-only", REVIEW_PROMPT);
    assert!(run.out.status.success());
    let last = std::fs::read_to_string(&run.last).unwrap();
    assert!(last.starts_with("Sure! Here is what I did"));
    let events = json_lines(&run.out);
    assert_eq!(events[3]["item"]["text"], last.as_str());
}

#[test]
fn invalid_utf8_mode_corrupts_the_last_message_file() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_MODE", "invalid-utf8");
    let run = codex_run(&w, "read-only", REVIEW_PROMPT);
    assert!(run.out.status.success());
    // stdout stays JSON; the file holds the raw bytes.
    json_lines(&run.out);
    let bytes = std::fs::read(&run.last).unwrap();
    assert!(String::from_utf8(bytes).is_err());
}

#[test]
fn outside_a_git_repo_codex_refuses() {
    let w = World::new();
    let out = w.run_in(
        "codex",
        &args(&["exec", "--ephemeral", "--json", "-"]),
        Some(REVIEW_PROMPT),
        w.tmp.path(),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--skip-git-repo-check"));
    let out = w.run_in(
        "codex",
        &args(&[
            "exec",
            "--ephemeral",
            "--json",
            "--skip-git-repo-check",
            "-",
        ]),
        Some(REVIEW_PROMPT),
        w.tmp.path(),
        &[],
    );
    assert!(out.status.success());
}

#[test]
fn human_output_prints_the_final_message() {
    let w = World::new();
    let out = w.run(
        "codex",
        &args(&["exec", "--ephemeral", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert!(out.status.success());
    let answer: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_answer(&answer);
}
