//! GitHub Copilot CLI (`@github/copilot`), driven through `handoff` against the scripted model
//! server with its BYOK variables (`COPILOT_PROVIDER_BASE_URL`, `COPILOT_PROVIDER_API_KEY`,
//! offline): a review that answers and changes nothing, a build that writes, a refused control,
//! the turn limit handoff keeps for it, and a panel with it.

use handoff_testkit::model_server::{Script, Step, provider_output};

use super::Rig;

/// Whether this run of the suite includes Copilot and `others`.
fn wanted(others: &[&str]) -> bool {
    super::wanted("copilot", others)
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn copilot_reviews_without_changing_anything() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("copilot", Script::answer(provider_output("looks fine")));
    let run = rig.run("review", &[]);
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.json["output"]["response"], "looks fine");
    assert!(run.changed().is_empty(), "{:?}", run.changed());
    // Tokens from its usage file; premium requests as Copilot counts them, never dollars.
    let usage = &run.json["usage"];
    assert_eq!(usage["source"], "provider-envelope", "{usage}");
    assert!(usage["inputTokens"].as_u64().unwrap_or(0) > 0, "{usage}");
    assert!(usage["costUsd"].is_null(), "{usage}");
    assert_eq!(usage["premiumRequests"], 0.0, "{usage}");
    // Read-only: no tool that writes, no sub-agent, no web.
    let offered = rig.offered();
    for t in ["create", "edit", "task", "web_fetch"] {
        assert!(!offered.contains(&t.to_owned()), "{t} offered: {offered:?}");
    }
    // It ran under handoff's sandbox and reached the model through the filtering proxy.
    let sandbox = &run.json["policy"]["sandbox"];
    assert_eq!(sandbox["enforcement"], "handoff", "{sandbox}");
    assert!(
        sandbox["proxy"]["traffic"]
            .to_string()
            .contains("127.0.0.1"),
        "{sandbox}"
    );
    rig.assert_no_process_left();
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn copilot_builds_with_its_own_tool() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("copilot", Script::text("unused"));
    let target = rig.file("hello.txt");
    rig.server.set_script(Script::new([
        Step::write_file(&target, "hello from copilot\n"),
        Step::Answer(provider_output("wrote hello.txt")),
    ]));
    let run = rig.run("build", &["--effort", "high", "--model", "fake-model"]);
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.changed(), ["hello.txt"]);
    assert!(
        std::fs::read_to_string(&target)
            .unwrap()
            .contains("hello from copilot")
    );
    let calls = rig.server.model_calls();
    assert!(
        calls.iter().any(|c| c.body["reasoning_effort"] == "high"),
        "the effort did not reach the model"
    );
    assert!(
        calls.iter().all(|c| c.body["model"] == "fake-model"),
        "the model did not reach the wire"
    );
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn copilot_refuses_an_effort_it_does_not_have_before_starting() {
    if wanted(&[]) {
        super::surface::refused_before_any_model_call("copilot", &["--effort", "ultra"]);
    }
}

/// Copilot has no turn limit: handoff counts its turns and stops it as one past the limit
/// starts, and the run reads like another agent's turn limit.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn copilot_is_stopped_at_its_turn_limit() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("copilot", Script::text("unused"));
    let file = rig.file("README.md");
    let steps: Vec<Step> = (0..8).map(|_| Step::shell(format!("cat {file}"))).collect();
    rig.server.set_script(Script::new(steps));
    let run = rig.run("review", &["--max-turns", "2"]);
    assert_eq!(run.code, 2, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "failed");
    assert!(
        run.message()
            .contains("max_turns: Reached maximum number of turns (2)"),
        "{}",
        run.message()
    );
    assert!(rig.server.model_calls().len() <= 3, "it went on");
    rig.assert_no_process_left();
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn copilot_sits_on_a_panel() {
    if wanted(&["opencode"]) {
        super::surface::sits_on_a_panel("copilot", "opencode");
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn carry_copilot_to_opencode_is_resumed_with_the_earlier_turns() {
    if wanted(&["opencode"]) {
        super::carry::carried_between("copilot", "opencode");
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn carry_opencode_to_copilot_is_resumed_with_the_earlier_turns() {
    if wanted(&["opencode"]) {
        super::carry::carried_between("opencode", "copilot");
    }
}

/// handoff's MCP servers are the only ones Copilot sees, and it can call them: the run's
/// `--additional-mcp-config` file, under handoff's sandbox.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn copilot_calls_the_runs_own_mcp_server() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("copilot", Script::text("unused"));
    // The server's script lives in the worktree (visible in the sandbox), committed first.
    let descriptor = super::surface::mcp_echo(&rig);
    rig.repo.commit_all("the MCP server");
    rig.server.set_script(Script::new([
        Step::tool_call("docs-echo", serde_json::json!({"text": "mcp-marker-22"})),
        Step::Answer(provider_output("called it")),
    ]));
    super::surface::review_calls_mcp(&rig, &descriptor, "mcp-marker-22");
    let offered = rig.offered();
    assert!(offered.contains(&"docs-echo".to_owned()), "{offered:?}");
    for t in ["create", "edit", "bash", "task", "web_fetch"] {
        assert!(!offered.contains(&t.to_owned()), "{t} offered: {offered:?}");
    }
}
