//! Qwen Code (`--harness qwen`, the fake `qwen`) through the `handoff` binary: a review that
//! answers and changes nothing, a build that writes, both under handoff's own sandbox with the
//! prompt on stdin and handoff's settings file; refused controls; its own turn limit; a panel
//! with it; nested advice both ways; the surfaces that list it; and continuing a task on and
//! from it.

use std::path::{Path, PathBuf};

use handoff_testkit::keys::MODE;
use serde_json::Value;

use crate::carry::{home, log_json, note_file, repo_path, sandbox, seed_claude};
use crate::support::{Run, Sandbox};
use crate::surface::{self, cli_runs, message, strings};

/// The recorded runs of the CLI itself (probes left out).
fn qwen_runs(sb: &Sandbox) -> Vec<Value> {
    cli_runs(sb, "qwen")
}

/// The comma-separated values of `--flag=a,b` in a recorded argv.
fn listed(argv: &Value, flag: &str) -> Vec<String> {
    let prefix = format!("{flag}=");
    argv.as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {flag}: {argv}"))
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_review_answers_under_handoffs_sandbox_and_changes_nothing() {
    let run = surface::reviewed_under_handoffs_sandbox("qwen", "0.24.4");
    assert_eq!(run.json["usage"]["inputTokens"], 100);
    assert_eq!(
        strings(&run.json["policy"]["coreTools"]),
        ["read_file", "glob", "grep_search", "run_shell_command"]
    );
}

/// The prompt on stdin (an array flag would take a trailing one), handoff's settings file
/// (the memory call off), every tool Qwen adds beside the allowlist refused, no project MCP
/// server.
#[test]
fn the_prompt_goes_on_stdin_and_the_tools_follow_the_grants() {
    let sb = Sandbox::new();
    sb.agents.record_dir();
    let run = sb.delegate("claude", "qwen", "review", &["--bash", "false"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        !run.stderr.contains("managed-auto-memory"),
        "{}",
        run.stderr
    );
    let runs = qwen_runs(&sb);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let r = &runs[0];
    assert!(
        r["stdin"]
            .as_str()
            .is_some_and(|s| s.contains("Make the change")),
        "{r}"
    );
    assert!(!r["argv"].to_string().contains("Make the change"));
    assert_eq!(
        listed(&r["argv"], "--core-tools"),
        ["read_file", "glob", "grep_search"]
    );
    let refused = listed(&r["argv"], "--exclude-tools");
    for t in [
        "run_shell_command",
        "write_file",
        "edit",
        "web_fetch",
        "agent",
        "skill",
    ] {
        assert!(refused.iter().any(|x| x == t), "{t}: {refused:?}");
    }
    assert!(listed(&r["argv"], "--allowed-mcp-server-names").is_empty());
}

#[test]
fn a_build_writes_the_worktree_with_the_effort_in_its_settings() {
    let run = surface::built_under_handoffs_sandbox("qwen", "high");
    assert_eq!(
        run.json["policy"]["effort"]["setting"],
        "model.generationConfig.reasoning.effort"
    );
}

/// Without a working bwrap Qwen runs unconfined, and the receipt says so.
#[test]
fn without_bubblewrap_the_receipt_says_unconfined() {
    surface::unconfined_without_bubblewrap("qwen");
}

#[test]
fn an_unsupported_control_is_refused_before_anything_starts() {
    surface::refused_before_anything_starts(
        "qwen",
        "qwen",
        &[
            (&["--effort", "xhigh"], "--effort"),
            (&["--effort", "minimal"], "--effort"),
            (&["--max-turns", "0"], "--max-turns"),
        ],
    );
}

/// Qwen keeps its own turn limit (`--max-session-turns`, exit code 53).
#[test]
fn qwen_stops_at_its_own_turn_limit() {
    let sb = Sandbox::new();
    sb.agents.record_dir();
    sb.agents.set(MODE, "max-turns");
    let run = sb.delegate("claude", "qwen", "review", &["--max-turns", "3"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.status(), "failed");
    assert!(
        message(&run).contains("max_turns: Reached max session turns"),
        "{}",
        message(&run)
    );
    assert_eq!(run.json["selection"]["resolved"]["maxTurns"], 3);
    let runs = qwen_runs(&sb);
    let argv = runs[0]["argv"].as_array().unwrap();
    assert!(
        argv.windows(2)
            .any(|w| w[0] == "--max-session-turns" && w[1] == "3"),
        "{argv:?}"
    );
}

#[test]
fn qwen_sits_on_a_panel() {
    surface::sits_on_a_panel("qwen", "codex");
}

#[test]
fn capabilities_and_doctor_list_qwen() {
    let qwen = surface::listed("qwen");
    assert_eq!(
        qwen["selection"]["effort"],
        serde_json::json!(["low", "medium", "high"])
    );
    assert_eq!(qwen["continuation"]["receiver"], "full", "{qwen:#}");
}

// ---------------------------------------------------------------------------------------------
// Continuing on and from Qwen

const QWEN_SOURCE: &str = "6a2ddd10-ac3d-4a0f-9576-c0cce64cf631";

fn continue_(sb: &Sandbox, args: &[&str]) -> Run {
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

/// The folder of a directory's sessions in the sandbox's Qwen store.
fn chats(sb: &Sandbox) -> PathBuf {
    let slug: String = repo_path(sb)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    home(sb).join(".qwen/projects").join(slug).join("chats")
}

/// The recorded real Qwen session (0.24.4: a `write_file` call, its result and the answer),
/// re-rooted at the sandbox's repository, in the sandbox's Qwen store.
fn seed_qwen(sb: &Sandbox) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../handoff-adapters/tests/it/fixtures/sessions/qwen-write-session.jsonl");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("$SCRATCH/work", &repo_path(sb));
    let dir = chats(sb);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{QWEN_SOURCE}.jsonl"));
    std::fs::write(&file, text).unwrap();
    file
}

fn carried_to_qwen(sb: &Sandbox) {
    seed_claude(sb);
    let run = continue_(sb, &["--from", "claude", "--to", "qwen"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["outcome"], "started", "{r:#}");
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["mode"], "converted");
    let id = carry["sessionId"].as_str().unwrap().to_owned();
    let file = chats(sb).join(format!("{id}.jsonl"));
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
    assert!(
        text.contains("Create notes.txt with one line."),
        "the first user turn is carried"
    );
    assert!(text.contains("\"handoff\":{\"provider\":\"claude\""));
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(
        last["type"], "assistant",
        "the receiver's turn was appended"
    );
    assert_eq!(last["sessionId"], id.as_str());
    let resume = &r["receiver"]["resume"]["argv"];
    assert_eq!(resume[0], "qwen");
    assert_eq!(resume[1], "--resume");
}

#[test]
fn a_claude_conversation_is_carried_into_qwen_which_continues_it() {
    carried_to_qwen(&sandbox());
}

/// Under handoff's own sandbox the receiver's Qwen home is private, and only the directory's
/// sessions folder of the user's store is mounted into it: the turn still lands in that store.
#[test]
fn under_handoffs_sandbox_the_receiver_writes_only_its_sessions_folder() {
    let sb = sandbox();
    sb.agents.uninstall("bwrap");
    let settings = home(&sb).join(".qwen/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{}\n").unwrap();
    carried_to_qwen(&sb);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{}\n");
}

#[test]
fn a_qwen_session_is_carried_to_codex_which_continues_it() {
    let sb = sandbox();
    let source = seed_qwen(&sb);
    let before = std::fs::read(&source).unwrap();
    let run = continue_(&sb, &["--from", "qwen", "--to", "codex"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["source"]["provider"], "qwen");
    assert_eq!(carry["source"]["sessionId"], QWEN_SOURCE);
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
    assert!(log.to_string().contains("qwen"), "{log:#}");
}
