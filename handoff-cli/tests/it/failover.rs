//! `--failover`: when an agent's attempt ends rate-limited (or with a server error, no credit,
//! a missing CLI or a failed preflight), the same request runs on the next entry; never after a
//! policy block, a cancel, a timeout or the agent's own answer.

use serde_json::Value;

use crate::support::{Run, Sandbox};

const API_ERROR: &str = "HANDOFF_FAKE_API_ERROR";

fn limited(sb: &Sandbox, exe: &str, error: &str) {
    sb.agents.set(&format!("{API_ERROR}@{exe}"), error);
}

fn attempts(run: &Run) -> Vec<(String, String, Value)> {
    run.json["attempts"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempts: {}", run.json))
        .iter()
        .map(|a| {
            let who = match a["account"].as_str() {
                Some(acc) => format!("{}@{acc}", a["harness"].as_str().unwrap()),
                None => a["harness"].as_str().unwrap().to_owned(),
            };
            (
                who,
                a["status"].as_str().unwrap().to_owned(),
                a["cause"].clone(),
            )
        })
        .collect()
}

fn write_config(sb: &Sandbox, text: &str) {
    sb.write_config(text);
}

#[test]
fn a_rate_limited_agent_hands_the_same_request_to_the_next_entry() {
    let sb = Sandbox::new();
    sb.record();
    limited(&sb, "claude", "rate_limited");
    let run = sb.delegate("codex", "claude", "review", &["--failover", "codex"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["target"]["harness"], "codex");
    assert_eq!(
        attempts(&run),
        [
            (
                "claude".into(),
                "failed".into(),
                Value::from("rate_limited")
            ),
            ("codex".into(), "succeeded".into(), Value::Null),
        ]
    );
    assert_eq!(run.json["diagnostics"]["cause"], Value::Null);
    let runs = sb.runs();
    assert_eq!(runs.len(), 2, "one run per attempt");
    // A read-only attempt's successor gets the request as it was.
    assert!(
        !runs[1]["stdin"]
            .as_str()
            .unwrap()
            .contains("Note from handoff")
    );
}

#[test]
fn when_every_entry_is_limited_the_run_fails_with_every_attempt() {
    let sb = Sandbox::new();
    sb.agents.set(API_ERROR, "usage_limit");
    let run = sb.delegate(
        "codex",
        "claude",
        "review",
        &["--failover", "codex,opencode"],
    );
    assert_eq!(run.code, 2, "{run:?}");
    let all = attempts(&run);
    let who: Vec<&str> = all.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(who, ["claude", "codex", "opencode"]);
    assert!(
        all.iter().all(|a| a.1 == "failed" && a.2 == "rate_limited"),
        "{all:?}"
    );
    assert_eq!(run.json["target"]["harness"], "opencode");
    assert_eq!(run.json["diagnostics"]["cause"], "rate_limited");
    // Codex said when its limit resets: that attempt carries the wait.
    let codex = &run.json["attempts"][1];
    let wait = codex["retryAfterSeconds"].as_u64().unwrap_or(0);
    assert!((1000..=1200).contains(&wait), "{codex}");
}

#[test]
fn no_failover_after_a_block_a_timeout_or_a_cause_another_agent_shares() {
    // A review that changed the worktree is blocked: the next agent does not get a go.
    let sb = Sandbox::new();
    sb.record();
    sb.agents.set("HANDOFF_FAKE_MODE@claude", "mutate");
    let run = sb.delegate("codex", "claude", "review", &["--failover", "codex"]);
    assert_eq!(run.code, 10, "{run:?}");
    assert_eq!(attempts(&run).len(), 1);
    assert_eq!(run.json["diagnostics"]["cause"], "other");
    assert_eq!(sb.runs().len(), 1);

    // A timeout is per attempt and ends the run.
    let sb = Sandbox::new();
    sb.record();
    sb.agents.set("HANDOFF_FAKE_MODE@claude", "hang");
    let run = sb.delegate(
        "codex",
        "claude",
        "review",
        &["--failover", "codex", "--timeout-ms", "700"],
    );
    assert_eq!(run.code, 8, "{run:?}");
    assert_eq!(
        attempts(&run),
        [("claude".into(), "timed_out".into(), Value::from("timeout"))]
    );
    assert_eq!(sb.runs().len(), 1);

    // Refused credentials are the user's to fix, not another agent's to work around.
    let sb = Sandbox::new();
    limited(&sb, "claude", "auth");
    let run = sb.delegate("codex", "claude", "review", &["--failover", "codex"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        attempts(&run),
        [("claude".into(), "failed".into(), Value::from("auth"))]
    );
}

#[test]
fn a_builds_partial_change_is_measured_from_the_first_before_and_told_to_the_next() {
    let sb = Sandbox::new();
    sb.record();
    limited(&sb, "claude", "server_error");
    sb.agents
        .set("HANDOFF_FAKE_API_ERROR_AFTER_WRITE@claude", "1");
    let run = sb.delegate("codex", "claude", "build", &["--failover", "codex"]);
    assert_eq!(run.code, 0, "{run:?}");
    let changed: Vec<String> =
        serde_json::from_value(run.json["git"]["changedFiles"].clone()).unwrap();
    assert_eq!(
        changed,
        ["fake-build.txt", "fake-partial-claude.txt"],
        "{}",
        run.json
    );
    let runs = sb.runs();
    let prompt = runs[1]["stdin"].as_str().unwrap();
    assert!(
        prompt.contains("by claude stopped (server_error)")
            && prompt.contains("- fake-partial-claude.txt"),
        "{prompt}"
    );
}

#[test]
fn an_account_entry_runs_the_same_agent_with_that_accounts_variables() {
    let sb = Sandbox::new();
    sb.record();
    write_config(
        &sb,
        "[agents.claude.accounts.work]\nenv = { CLAUDE_CONFIG_DIR = \"/srv/claude-work\" }\n",
    );
    limited(&sb, "claude", "rate_limited");
    let run = sb.delegate("codex", "claude", "review", &["--failover", "claude@work"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        attempts(&run),
        [
            (
                "claude".into(),
                "failed".into(),
                Value::from("rate_limited")
            ),
            (
                "claude@work".into(),
                "failed".into(),
                Value::from("rate_limited")
            ),
        ]
    );
    let runs = sb.runs();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        runs[0]["env"]["CLAUDE_CONFIG_DIR"],
        Value::Null,
        "{}",
        runs[0]["env"]
    );
    assert_eq!(runs[1]["env"]["CLAUDE_CONFIG_DIR"], "/srv/claude-work");
}

#[test]
fn every_entry_is_checked_before_anything_starts() {
    let sb = Sandbox::new();
    sb.record();
    for (extra, needle) in [
        (
            vec!["--failover", "codex", "--max-turns", "5"],
            "--failover codex: ",
        ),
        (vec!["--failover", "aider"], "not a known agent"),
        (vec!["--failover", "codex@work"], "unknown account 'work'"),
        (vec!["--failover", ""], "names no entry"),
    ] {
        let run = sb.delegate("codex", "claude", "review", &extra);
        assert_eq!(run.code, 5, "{extra:?}: {run:?}");
        let message = run.json["diagnostics"]["message"].as_str().unwrap_or("");
        assert!(message.contains(needle), "{extra:?}: {message}");
        assert_eq!(run.json["diagnostics"]["cause"], "other");
    }
    assert!(sb.runs().is_empty(), "no agent may start");
}

#[test]
fn a_panel_member_that_is_limited_is_answered_by_the_next_entry() {
    let sb = Sandbox::new();
    limited(&sb, "claude", "rate_limited");
    let ins = sb.instructions("What is the riskiest part of this change?");
    let cwd = sb.cwd();
    let panel = sb.run(&[
        "advice",
        "--caller-harness",
        "codex",
        "--harness",
        "codex,claude",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
        "--failover",
        "opencode",
    ]);
    assert_eq!(panel.code, 0, "{panel:?}");
    let members = panel.json["members"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", panel.json));
    let seat = members
        .iter()
        .find(|m| m["attempts"][0]["harness"] == "claude")
        .unwrap_or_else(|| panic!("{}", panel.json));
    assert_eq!(seat["target"]["harness"], "opencode", "{seat}");
    assert_eq!(seat["attempts"][0]["cause"], "rate_limited", "{seat}");
    assert_eq!(seat["status"], "succeeded", "{seat}");
}

#[test]
fn the_configured_chain_is_the_default_and_none_turns_it_off() {
    let sb = Sandbox::new();
    write_config(&sb, "[failover]\nagents = [\"codex\"]\n");
    limited(&sb, "claude", "overloaded");
    let run = sb.delegate("codex", "claude", "review", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["target"]["harness"], "codex");
    let off = sb.delegate("codex", "claude", "review", &["--failover", "none"]);
    assert_eq!(off.code, 2, "{off:?}");
    assert_eq!(off.json["diagnostics"]["cause"], "server_error");
    assert!(off.json.get("attempts").is_none(), "{}", off.json);

    write_config(&sb, "[failover]\nagents = [\"codex@nobody\"]\n");
    let bad = sb.delegate("codex", "claude", "review", &[]);
    assert_eq!(bad.code, 5, "{bad:?}");
    assert!(bad.stderr.contains("failover.agents"), "{}", bad.stderr);
}

#[test]
fn root_advice_and_a_worker_with_advice_fail_over_with_a_supervisor_of_their_own() {
    let sb = Sandbox::new();
    limited(&sb, "claude", "billing");
    let ins = sb.instructions("What is the riskiest part of this change?");
    let cwd = sb.cwd();
    let advice = sb.run(&[
        "advice",
        "--caller-harness",
        "codex",
        "--harness",
        "claude",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
        "--failover",
        "codex",
    ]);
    assert_eq!(advice.code, 0, "{advice:?}");
    assert_eq!(advice.json["target"]["harness"], "codex");
    assert_eq!(advice.json["attempts"][0]["cause"], "billing");

    let worker = sb.run(&[
        "run-with-advice",
        "--caller-harness",
        "codex",
        "--harness",
        "claude",
        "--mode",
        "build",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
        "--failover",
        "codex",
    ]);
    assert_eq!(worker.code, 0, "{worker:?}");
    assert_eq!(worker.json["target"]["harness"], "codex");
    let root = &worker.json["dag"]["nodes"][0];
    assert_eq!(root["targetHarness"], "codex", "{}", worker.json["dag"]);
    assert_eq!(
        worker.json["dag"]["status"], "succeeded",
        "{}",
        worker.json["dag"]
    );
}
