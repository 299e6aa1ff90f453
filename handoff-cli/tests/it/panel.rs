//! A panel through the binary: `--harness a,b` puts the same read-only request to every member
//! at once and prints one `handoff.panel.v1` line merging their answers.

use handoff_testkit::keys::{ADVICE_DELAY_MS, FINDINGS, MODE, READY_FILE, VERDICT};
use serde_json::{Value, json};

use crate::support::{Run, Sandbox};

/// `handoff <verb> --caller-harness codex --harness <members> [--mode <mode>] --cwd <repo>
/// --instructions <file> <extra…>`; checks that stdout is one panel line.
fn panel(sb: &Sandbox, verb: &str, members: &str, mode: Option<&str>, extra: &[&str]) -> Run {
    let ins = sb.instructions("Review the repository and report what is wrong.");
    let cwd = sb.cwd();
    let mut args = vec![verb, "--caller-harness", "codex", "--harness", members];
    if let Some(m) = mode {
        args.extend(["--mode", m]);
    }
    args.extend(["--cwd", &cwd, "--instructions", &ins]);
    args.extend(extra);
    let run = sb.run(&args);
    assert_eq!(run.stdout.lines().count(), 1, "one line on stdout: {run:?}");
    assert_eq!(run.json["schemaVersion"], "handoff.panel.v1", "{run:?}");
    run
}

fn advice(sb: &Sandbox, members: &str, extra: &[&str]) -> Run {
    panel(sb, "advice", members, None, extra)
}

/// The findings `exe` answers with.
fn finds(sb: &Sandbox, exe: &str, findings: Value) {
    sb.agents
        .set(&format!("{FINDINGS}@{exe}"), findings.to_string());
}

fn members_of(run: &Run) -> Vec<String> {
    run.json["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["target"]["harness"].as_str().unwrap().to_owned())
        .collect()
}

/// A refusal: exit 5, a rejected panel with no member, one line on stderr, no agent run.
fn expect_refused(sb: &Sandbox, run: &Run, needle: &str) {
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.json["status"], "rejected", "{run:?}");
    assert_eq!(run.json["exit"]["driver"], 5, "{run:?}");
    assert_eq!(run.json["members"], json!([]), "{run:?}");
    let message = run.json["message"].as_str().unwrap();
    assert!(message.contains(needle), "{message}");
    assert_eq!(run.stderr.trim().lines().count(), 1, "{run:?}");
    assert!(run.stderr.contains(needle), "{run:?}");
    assert!(sb.runs().is_empty(), "no agent may start: {:?}", sb.runs());
}

#[test]
fn overlapping_findings_are_merged_and_agreed_by_both() {
    let sb = Sandbox::new();
    sb.record();
    finds(
        &sb,
        "codex",
        json!([{"file": "src/lib.rs", "line": 3, "severity": "high",
                "summary": "Unchecked unwrap panics on empty input"}]),
    );
    finds(
        &sb,
        "claude",
        json!([{"file": "src/lib.rs", "line": 3, "severity": "medium",
                "summary": "unwrap panics on empty input"}]),
    );
    let run = advice(&sb, "codex,claude", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(members_of(&run), ["codex", "claude"]);
    let findings = run.json["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    let merged = &findings[0];
    assert_eq!(merged["agreedBy"], json!(["claude", "codex"]));
    assert_eq!(merged["path"], "src/lib.rs");
    assert_eq!(merged["severity"], "high");
    assert_eq!(merged["title"], "Unchecked unwrap panics on empty input");
    assert_eq!(merged["wordings"].as_array().unwrap().len(), 2);
    assert_eq!(run.json["agreement"]["singleMemberFindings"], json!([]));
    assert_eq!(run.json["agreement"]["majority"], "changes-requested");
    assert_eq!(run.json["message"], Value::Null);
    // Both ran, concurrently, on the one lease the panel took.
    assert_eq!(sb.runs().len(), 2, "{:?}", sb.runs());
}

#[test]
fn stated_verdicts_and_structured_findings_decide_the_agreement() {
    let sb = Sandbox::new();
    // Codex and OpenCode state their verdicts; Claude Code states none, so its verdict is read
    // from its findings. The titled findings agree by title and span, each keeping its body.
    sb.agents
        .set(&format!("{VERDICT}@codex"), "changes-requested");
    sb.agents.set(&format!("{VERDICT}@opencode"), "approve");
    finds(
        &sb,
        "codex",
        json!([{"file": "src/lib.rs", "line": 10, "endLine": 20, "category": "correctness",
                "severity": "high", "title": "Retry loop never terminates",
                "summary": "fetch() retries forever on a 500."}]),
    );
    finds(
        &sb,
        "claude",
        json!([{"file": "src/lib.rs", "line": 18, "endLine": 22, "category": "Correctness",
                "severity": "medium", "title": "The retry loop never terminates",
                "summary": "No back-off and no limit."},
               {"file": "src/lib.rs", "line": 15, "category": "performance",
                "severity": "low", "title": "Retry loop never terminates",
                "summary": "It spins the CPU."}]),
    );
    let run = panel(&sb, "run", "codex,claude,opencode", Some("review"), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let findings = run.json["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2, "{findings:#?}");
    let merged = &findings[0];
    assert_eq!(merged["agreedBy"], json!(["claude", "codex"]));
    assert_eq!(merged["category"], "correctness");
    assert_eq!(merged["lines"], json!({"start": 10, "end": 22}));
    assert_eq!(merged["title"], "Retry loop never terminates");
    assert_eq!(
        merged["wordings"][1]["body"],
        "fetch() retries forever on a 500."
    );
    assert_eq!(findings[1]["category"], "performance");
    assert_eq!(findings[1]["agreedBy"], json!(["claude"]));

    let stances = &run.json["agreement"]["verdicts"];
    let stance = |i: usize| {
        (
            stances[i]["member"].as_str().unwrap(),
            stances[i]["verdict"].as_str().unwrap(),
            stances[i]["verdictSource"].as_str().unwrap(),
        )
    };
    assert_eq!(stance(0), ("codex", "changes-requested", "stated"));
    assert_eq!(stance(1), ("claude", "changes-requested", "findings"));
    assert_eq!(stance(2), ("opencode", "approve", "stated"));
    assert_eq!(run.json["agreement"]["majority"], "changes-requested");
    assert_eq!(run.json["agreement"]["dissenting"], json!(["opencode"]));
    // Each member's own result carries what it stated.
    assert_eq!(
        run.json["members"][0]["output"]["verdict"],
        "changes-requested"
    );
    assert_eq!(run.json["members"][1]["output"]["verdict"], Value::Null);
}

#[test]
fn a_verdict_outside_the_contract_fails_that_member() {
    let sb = Sandbox::new();
    sb.agents.set(&format!("{VERDICT}@claude"), "lgtm");
    let run = advice(&sb, "codex,claude", &["--quorum", "1"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["members"][1]["status"], "failed", "{run:?}");
    assert_eq!(run.json["members"][1]["exit"]["driver"], 7, "{run:?}");
    assert_eq!(
        run.json["agreement"]["failed"][0]["member"], "claude",
        "{run:?}"
    );
    assert_eq!(
        run.json["agreement"]["verdicts"][1]["verdictSource"],
        "status"
    );
}

#[test]
fn near_miss_findings_stay_apart() {
    let sb = Sandbox::new();
    finds(
        &sb,
        "codex",
        json!([{"file": "src/lib.rs", "line": 10, "severity": "low",
                "summary": "Missing documentation on parse"}]),
    );
    finds(
        &sb,
        "claude",
        json!([{"file": "src/lib.rs", "line": 40, "severity": "low",
                "summary": "Missing documentation on parse"}]),
    );
    let run = advice(&sb, "codex,claude", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let findings = run.json["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2, "{findings:?}");
    let raisers: Vec<&Value> = findings.iter().map(|f| &f["agreedBy"]).collect();
    assert_eq!(raisers, [&json!(["codex"]), &json!(["claude"])]);
    assert_eq!(run.json["agreement"]["singleMemberFindings"], json!([0, 1]));
    assert_eq!(run.json["agreement"]["majority"], "approve");
}

#[test]
fn a_failed_member_within_the_quorum_leaves_the_panel_succeeded_and_named() {
    let sb = Sandbox::new();
    sb.agents.set(&format!("{MODE}@claude"), "failed");
    let run = advice(&sb, "codex,claude", &["--quorum", "1"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.json["quorum"], 1);
    let failed = &run.json["agreement"]["failed"];
    assert_eq!(
        failed,
        &json!([{"member": "claude", "status": "failed", "exit": 2}])
    );
    let message = run.json["message"].as_str().unwrap();
    assert!(message.contains("claude (failed)"), "{message}");
    assert_eq!(run.json["members"][0]["status"], "succeeded");
    assert_eq!(run.json["members"][1]["status"], "failed");
}

#[test]
fn by_default_every_member_must_succeed() {
    let sb = Sandbox::new();
    sb.agents.set(&format!("{MODE}@claude"), "failed");
    let run = advice(&sb, "codex,claude", &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.json["status"], "failed");
    assert_eq!(run.json["quorum"], 2);
    assert!(run.stderr.contains("1 of 2 members succeeded"), "{run:?}");
}

#[test]
fn a_member_blocked_by_policy_blocks_the_panel() {
    let sb = Sandbox::new();
    sb.agents.set(&format!("{MODE}@codex"), "mutate");
    let run = panel(&sb, "run", "codex,claude,opencode", Some("review"), &[]);
    assert_eq!(run.code, 10, "{run:?}");
    assert_eq!(run.json["status"], "blocked");
    // The members share the worktree and run at once: the change cannot be pinned on one of
    // them, so the one "after", taken when every agent is gone, blocks them all.
    let members = run.json["members"].as_array().unwrap();
    for member in members {
        assert_eq!(member["exit"]["driver"], 10, "{member:#}");
        assert_eq!(member["git"]["changed"], true, "{member:#}");
        assert_eq!(
            member["git"]["changedFiles"],
            json!(["fake-mutation.txt"]),
            "{member:#}"
        );
        assert_eq!(member["git"]["before"], members[0]["git"]["before"]);
        assert_eq!(member["git"]["after"], members[0]["git"]["after"]);
    }
    let message = run.json["message"].as_str().unwrap();
    assert!(
        message.contains("a policy check blocked codex, claude, opencode"),
        "{message}"
    );
}

#[test]
fn members_share_one_before_and_one_after_and_free_their_slot_when_done() {
    let sb = Sandbox::new();
    sb.record();
    // One member at a time: each must give its slot back when its agent is gone, while it
    // waits for the others' to be gone before the one "after".
    let run = advice(&sb, "codex,claude,opencode", &["--max-concurrency", "1"]);
    assert_eq!(run.code, 0, "{run:?}");
    let members = run.json["members"].as_array().unwrap();
    assert_eq!(members.len(), 3);
    for member in members {
        assert_eq!(member["status"], "succeeded", "{member:#}");
        assert_eq!(member["git"]["changed"], false, "{member:#}");
        assert_eq!(member["git"]["before"], members[0]["git"]["before"]);
        assert_eq!(member["git"]["after"], members[0]["git"]["after"]);
        assert!(member["git"]["after"].is_object(), "{member:#}");
    }
    assert_eq!(sb.runs().len(), 3, "{:?}", sb.runs());
    // Each member is a node of the panel's DAG, under the panel's own run id.
    let panel_id = run.json["runId"].as_str().unwrap();
    assert!(panel_id.starts_with("run-"), "{panel_id}");
    let nodes = run.json["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{nodes:#?}");
    for (node, member) in nodes.iter().zip(members) {
        assert_eq!(node["parentRunId"], panel_id);
        assert_eq!(node["depth"], 1);
        assert_eq!(node["runId"], member["lineage"]["runId"]);
        assert_eq!(node["targetHarness"], member["target"]["harness"]);
        assert_eq!(node["state"], "succeeded");
        assert_eq!(node["requestHash"], member["requestHash"]);
        assert!(node["resultHash"].as_str().unwrap().starts_with("sha256:"));
    }
}

#[test]
fn a_duplicate_member_is_refused_before_any_agent_starts() {
    let sb = Sandbox::new();
    sb.record();
    let run = advice(&sb, "codex,claude,codex", &[]);
    expect_refused(&sb, &run, "--harness names codex twice");
}

#[test]
fn an_unknown_agent_or_a_bad_quorum_is_refused() {
    let sb = Sandbox::new();
    sb.record();
    let run = advice(&sb, "codex,nobody", &[]);
    expect_refused(&sb, &run, "\"nobody\" is not a known agent");
    let run = advice(&sb, "codex,claude", &["--quorum", "3"]);
    expect_refused(
        &sb,
        &run,
        "--quorum 3 must be between 1 and the 2 panel members",
    );
    let run = advice(&sb, "codex,claude", &["--quorum", "most"]);
    expect_refused(&sb, &run, "--quorum must be a whole number");
}

#[test]
fn a_writing_mode_is_refused() {
    let sb = Sandbox::new();
    sb.record();
    let run = panel(&sb, "run", "codex,claude", Some("build"), &[]);
    expect_refused(&sb, &run, "not run --mode build");
}

#[test]
fn the_same_agent_sits_twice_with_different_models() {
    let sb = Sandbox::new();
    sb.record();
    let run = advice(
        &sb,
        "codex:fake-model-a,codex:fake-model-b",
        &["--max-concurrency", "1"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let verdicts = &run.json["agreement"]["verdicts"];
    assert_eq!(verdicts[0]["member"], "codex:fake-model-a");
    assert_eq!(verdicts[1]["member"], "codex:fake-model-b");
    assert_eq!(
        run.json["members"][0]["selection"]["requested"]["model"],
        "fake-model-a"
    );
    assert_eq!(
        run.json["members"][1]["selection"]["requested"]["model"],
        "fake-model-b"
    );
    let runs = sb.runs();
    assert_eq!(runs.len(), 2, "{runs:?}");
    for model in ["fake-model-a", "fake-model-b"] {
        let carrying = runs
            .iter()
            .filter(|r| {
                r["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a.as_str() == Some(model))
            })
            .count();
        assert_eq!(carrying, 1, "{model}: {runs:?}");
    }
}

/// Waits (up to 20 s) for a pid file the fake writes when it starts hanging; its pid.
fn pid_from(path: &std::path::Path) -> i32 {
    for _ in 0..1000 {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{} was never written", path.display());
}

#[test]
fn cancelling_a_panel_stops_every_member() {
    let sb = Sandbox::new();
    sb.agents.set(MODE, "hang");
    let ready = |exe: &str| {
        let path = sb.root.join(format!("{exe}.pid"));
        sb.agents.set(
            &format!("{READY_FILE}@{exe}"),
            path.to_string_lossy().into_owned(),
        );
        path
    };
    let (codex, claude) = (ready("codex"), ready("claude"));
    let ins = sb.instructions("Review.");
    let cwd = sb.cwd();
    let child = sb
        .command()
        .args([
            "advice",
            "--caller-harness",
            "codex",
            "--harness",
            "codex,claude",
        ])
        .args(["--cwd", &cwd, "--instructions", &ins])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Both members are working at once.
    let pids = [pid_from(&codex), pid_from(&claude)];
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["schemaVersion"], "handoff.panel.v1");
    assert_eq!(line["exit"]["driver"], 9, "{line:#}");
    for pid in pids {
        assert!(crate::support::is_gone(pid), "member {pid} still runs");
    }
}

#[test]
fn a_panel_is_refused_while_another_root_run_holds_the_worktree() {
    let sb = Sandbox::new();
    sb.agents.set(MODE, "hang");
    let held = sb.root.join("held.pid");
    sb.agents
        .set(READY_FILE, held.to_string_lossy().into_owned());
    let ins = sb.instructions("Review.");
    let cwd = sb.cwd();
    let mut single = sb
        .command()
        .args(["advice", "--caller-harness", "codex", "--harness", "claude"])
        .args(["--cwd", &cwd, "--instructions", &ins])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = pid_from(&held);
    sb.record();
    let run = advice(&sb, "codex,claude", &[]);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.json["status"], "rejected", "{run:?}");
    assert!(sb.runs().is_empty(), "a member started: {:?}", sb.runs());
    assert!(
        run.json["message"]
            .as_str()
            .unwrap_or_default()
            .contains("held")
            || run.json["message"]
                .as_str()
                .unwrap_or_default()
                .contains("busy")
            || run.json["message"]
                .as_str()
                .unwrap_or_default()
                .contains("run"),
        "{run:?}"
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(single.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = single.wait();
    for _ in 0..100 {
        if crate::support::is_gone(pid) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the single run's agent {pid} outlived it");
}

#[test]
fn a_member_that_times_out_is_named_and_the_others_count_toward_the_quorum() {
    let sb = Sandbox::new();
    sb.agents.set(&format!("{MODE}@opencode"), "hang");
    let run = advice(
        &sb,
        "codex,claude,opencode",
        &["--timeout-ms", "2000", "--quorum", "2"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["status"], "succeeded");
    let members = run.json["members"].as_array().unwrap();
    assert_eq!(members[2]["status"], "timed_out", "{:#}", members[2]);
    assert_eq!(members[2]["exit"]["driver"], 8);
    assert_eq!(members[2]["exit"]["timedOut"], true);
    assert_eq!(
        run.json["agreement"]["failed"],
        json!([{"member": "opencode", "status": "timed_out", "exit": 8}])
    );
    // The members that answered are judged by the worktree once the hung one's tree is gone.
    for member in &members[..2] {
        assert_eq!(member["status"], "succeeded", "{member:#}");
        assert_eq!(member["git"]["changed"], false, "{member:#}");
    }
    // Usage is summed over the members that reported it.
    let sum: u64 = members
        .iter()
        .filter_map(|m| m["usage"]["inputTokens"].as_u64())
        .sum();
    assert!(sum > 0, "{run:?}");
    assert_eq!(run.json["usage"]["inputTokens"], sum);

    // Without a quorum, every member must succeed.
    let run = advice(&sb, "codex,opencode", &["--timeout-ms", "2000"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.json["status"], "failed");
}

#[test]
fn max_concurrency_bounds_the_members_running_at_once() {
    let sb = Sandbox::new();
    sb.agents.set(ADVICE_DELAY_MS, "400");
    let spans = |run: &Run| {
        let mut spans: Vec<(String, String)> = run.json["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["timing"]["startedAt"].as_str().unwrap().to_owned(),
                    m["timing"]["finishedAt"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        spans.sort();
        spans
    };
    // One at a time: each member's run ends before the next one's starts.
    let run = advice(&sb, "codex,claude,opencode", &["--max-concurrency", "1"]);
    assert_eq!(run.code, 0, "{run:?}");
    let one = spans(&run);
    for pair in one.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "overlapping members: {one:?}");
    }
    // By default, all at once: every member starts before any ends (each waits 400 ms).
    let run = advice(&sb, "codex,claude,opencode", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let all = spans(&run);
    let first_end = all.iter().map(|s| &s.1).min().unwrap();
    assert!(
        all.iter().all(|s| &s.0 < first_end),
        "members did not run at once: {all:?}"
    );
}
