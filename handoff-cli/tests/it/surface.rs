//! What every agent handoff holds in its own sandbox (Copilot CLI, Gemini CLI, Qwen Code) shows
//! through the `handoff` binary the same way: a review that answers and changes nothing, a build
//! that writes, the receipt without bubblewrap, controls refused before anything starts, a seat
//! on a panel, and the surfaces that list it. Each agent's file calls these and checks what is
//! its own on the run they return.

use serde_json::Value;

use crate::support::{Run, Sandbox, confined};

/// `git.changedFiles` of a result.
pub fn changed(run: &Run) -> Vec<String> {
    serde_json::from_value(run.json["git"]["changedFiles"].clone()).unwrap_or_default()
}

/// `diagnostics.message` of a result, or "".
pub fn message(run: &Run) -> &str {
    run.json["diagnostics"]["message"]
        .as_str()
        .unwrap_or_default()
}

/// The strings of a JSON array.
pub fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The recorded runs of the CLI `exe` itself (probes left out: a run asks for an output
/// format).
pub fn cli_runs(sb: &Sandbox, exe: &str) -> Vec<Value> {
    sb.agents
        .invocations()
        .into_iter()
        .filter(|i| i["exe"] == exe && strings(&i["argv"]).contains(&"--output-format"))
        .collect()
}

/// A review under handoff's sandbox: it answers, changes nothing, reports `version` and the
/// usage from the CLI's envelope, with the worktree read-only in the receipt.
pub fn reviewed_under_handoffs_sandbox(agent: &str, version: &str) -> Run {
    let sb = confined();
    let run = sb.delegate("claude", agent, "review", &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.status(), "succeeded");
    assert_eq!(
        run.json["output"]["response"],
        format!("{agent} finished review")
    );
    assert!(changed(&run).is_empty(), "{:?}", changed(&run));
    assert_eq!(run.json["target"]["version"], version);
    let receipt = &run.json["policy"]["sandbox"];
    assert_eq!(receipt["enforcement"], "handoff", "{receipt}");
    assert_eq!(receipt["worktree"], "read-only", "{receipt}");
    assert_eq!(run.json["usage"]["source"], "provider-envelope");
    assert!(
        run.json["usage"]["costUsd"].is_null(),
        "{}",
        run.json["usage"]
    );
    run
}

/// A build under handoff's sandbox at `effort`: it writes the fake's file, with the worktree
/// read-write in the receipt and the effort resolved as asked.
pub fn built_under_handoffs_sandbox(agent: &str, effort: &str) -> Run {
    let sb = confined();
    let run = sb.delegate("codex", agent, "build", &["--effort", effort]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.status(), "succeeded");
    assert_eq!(changed(&run), ["fake-build.txt"]);
    assert_eq!(run.json["policy"]["sandbox"]["worktree"], "read-write");
    assert_eq!(run.json["selection"]["resolved"]["effort"], effort);
    run
}

/// Without a working bwrap the agent runs unconfined, and the receipt says so.
pub fn unconfined_without_bubblewrap(agent: &str) {
    let sb = Sandbox::new();
    let run = sb.delegate("claude", agent, "review", &[]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json["policy"]["sandbox"]["enforcement"], "none");
}

/// Each of `cases` (extra flags, the flag the one-line refusal names) is refused with exit 5
/// before the CLI `exe` starts.
pub fn refused_before_anything_starts(agent: &str, exe: &str, cases: &[(&[&str], &str)]) {
    let sb = Sandbox::new();
    sb.agents.record_dir();
    for (extra, why) in cases {
        let run = sb.delegate("claude", agent, "review", extra);
        assert_eq!(run.code, 5, "{extra:?}: {}\n{}", run.stdout, run.stderr);
        assert_eq!(run.status(), "rejected");
        assert!(message(&run).contains(why), "{}", message(&run));
        assert_eq!(
            run.stderr.trim().lines().count(),
            1,
            "one line: {}",
            run.stderr
        );
    }
    assert!(cli_runs(&sb, exe).is_empty(), "the CLI was started");
}

/// An advice panel of `first` and `second`: both answer, in that order.
pub fn sits_on_a_panel(first: &str, second: &str) {
    let sb = Sandbox::new();
    let ins = sb.instructions("Review the repository and report what is wrong.");
    let cwd = sb.cwd();
    let harness = format!("{first},{second}");
    let run = sb.run(&[
        "advice",
        "--caller-harness",
        "claude",
        "--harness",
        &harness,
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json["schemaVersion"], "handoff.panel.v1");
    let members: Vec<(&str, &str)> = run.json["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["target"]["harness"].as_str().unwrap(),
                m["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(members, [(first, "succeeded"), (second, "succeeded")]);
}

/// `capabilities --json` lists the agent with a turn limit and MCP servers, and `doctor`
/// names it; returns its capabilities for what is its own.
pub fn listed(agent: &str) -> Value {
    let sb = Sandbox::new();
    let run = sb.run(&["capabilities", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let caps = run.json["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == agent)
        .cloned()
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert_eq!(caps["selection"]["maxTurns"], true, "{caps:#}");
    assert_eq!(caps["grants"]["mcp"], true, "{caps:#}");
    let doctor = sb.run(&["doctor"]);
    assert!(doctor.stdout.contains(agent), "{}", doctor.stdout);
    caps
}
