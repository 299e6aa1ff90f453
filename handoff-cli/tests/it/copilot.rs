//! GitHub Copilot CLI (`--harness copilot`, the fake `copilot`) through the `handoff` binary: a
//! review that answers and changes nothing, a build that writes, both under handoff's own
//! sandbox with the prompt on stdin; a refused control; the turn limit handoff keeps for a CLI
//! that has none; a panel with it; and the surfaces that list it.

use handoff_testkit::keys::MODE;
use serde_json::Value;

use crate::support::{Sandbox, advice_from};
use crate::surface::{self, cli_runs, message};

/// The recorded runs of the CLI itself (probes left out).
fn copilot_runs(sb: &Sandbox) -> Vec<Value> {
    cli_runs(sb, "copilot")
}

/// The values of a variadic flag in a recorded argv.
fn values_after(argv: &Value, flag: &str) -> Vec<String> {
    argv.as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .skip_while(|a| *a != flag)
        .skip(1)
        .take_while(|a| !a.starts_with("--"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_review_answers_under_handoffs_sandbox_and_changes_nothing() {
    let run = surface::reviewed_under_handoffs_sandbox("copilot", "GitHub Copilot CLI 1.0.102.");
    // Tokens from the usage file; premium requests as such, never dollars.
    let usage = &run.json["usage"];
    assert_eq!(usage["source"], "provider-envelope", "{usage}");
    assert_eq!(usage["inputTokens"], 120, "{usage}");
    assert_eq!(usage["outputTokens"], 30, "{usage}");
    assert_eq!(usage["premiumRequests"], 0.0, "{usage}");
    assert!(usage["costUsd"].is_null(), "{usage}");
    // The tools are the read-only list, writing denied.
    let policy = &run.json["policy"];
    let tools: Vec<&str> = policy["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"view") && !tools.contains(&"create"),
        "{tools:?}"
    );
    assert!(policy["deny"].as_array().unwrap().contains(&"write".into()));
}

/// What the CLI was started with (recorded outside the sandbox): the prompt on stdin, never in
/// argv; the tool list and the deny rules per grant; the usage file.
#[test]
fn the_prompt_goes_on_stdin_and_the_tools_follow_the_grants() {
    let sb = Sandbox::new();
    sb.agents.record_dir();
    let run = sb.delegate("claude", "copilot", "review", &["--bash", "false"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let runs = copilot_runs(&sb);
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
        values_after(&r["argv"], "--available-tools"),
        ["view", "grep", "glob"]
    );
    let argv: Vec<&str> = r["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let denied: Vec<&str> = argv
        .windows(2)
        .filter(|w| w[0] == "--deny-tool")
        .map(|w| w[1])
        .collect();
    assert_eq!(denied, ["write", "shell", "url"]);
}

#[test]
fn a_build_writes_the_worktree() {
    let run = surface::built_under_handoffs_sandbox("copilot", "xhigh");
    assert!(
        run.json["policy"]["tools"]
            .as_array()
            .unwrap()
            .contains(&"create".into())
    );
}

/// Without a working bwrap Copilot runs unconfined, and the receipt says so.
#[test]
fn without_bubblewrap_the_receipt_says_unconfined() {
    surface::unconfined_without_bubblewrap("copilot");
}

#[test]
fn an_unsupported_control_is_refused_before_anything_starts() {
    surface::refused_before_anything_starts(
        "copilot",
        "copilot",
        &[
            (&["--effort", "ultra"], "--effort"),
            (&["--max-turns", "0"], "--max-turns"),
        ],
    );
}

/// Copilot has no turn limit of its own: handoff counts its turns and stops it as one past
/// the limit starts; the run reads like another agent's turn limit.
#[test]
fn handoff_stops_copilot_at_its_turn_limit() {
    let sb = Sandbox::new();
    sb.agents.set(MODE, "max-turns");
    let started = std::time::Instant::now();
    let run = sb.delegate("claude", "copilot", "review", &["--max-turns", "3"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.status(), "failed");
    assert!(
        message(&run).contains("max_turns: Reached maximum number of turns (3)"),
        "{}",
        message(&run)
    );
    assert_eq!(run.json["selection"]["resolved"]["maxTurns"], 3);
    assert_eq!(run.json["exit"]["cancelled"], false);
    // The fake would go on for 200 turns (4 s): it was stopped long before.
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
}

#[test]
fn copilot_sits_on_a_panel() {
    surface::sits_on_a_panel("copilot", "codex");
}

#[test]
fn capabilities_and_doctor_list_copilot() {
    surface::listed("copilot");
}

/// Copilot as a worker asks Codex for advice; a Codex worker asks Copilot, which (unconfined
/// here, without handoff's sandbox) is admitted only without its shell.
#[test]
fn copilot_asks_for_advice_and_gives_it() {
    let (run, code, result) = advice_from("copilot", "codex");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["delegation"]["mode"], "advice-only");
    assert_eq!(code, 0, "{result:#}");
    assert_eq!(result["status"], "succeeded", "{result:#}");
    let (run, code, result) = advice_from("codex", "copilot");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(code, 0, "{result:#}");
    assert_eq!(result["target"]["harness"], "copilot");
    assert_eq!(result["grants"]["resolved"]["bash"], false, "{result:#}");
    assert_eq!(
        result["grants"]["provenance"]["bash"], "isolation-attenuated",
        "{result:#}"
    );
}
