//! Gemini CLI (`@google/gemini-cli`), driven through `handoff` against the scripted model
//! server's Gemini wire (`GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY`): a review that answers and
//! changes nothing, a build that writes with the effort and model on the wire, a refused
//! control, its own turn limit, the run's MCP server, and a panel with it.

use handoff_testkit::model_server::{Script, Step, provider_output};
use serde_json::Value;

use super::Rig;

/// Whether this run of the suite includes Gemini and `others`.
fn wanted(others: &[&str]) -> bool {
    super::wanted("gemini", others)
}

/// The `thinkingBudget` each model call asked for.
fn budgets(rig: &Rig) -> Vec<Value> {
    rig.server
        .model_calls()
        .iter()
        .map(|c| c.body["generationConfig"]["thinkingConfig"]["thinkingBudget"].clone())
        .collect()
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn gemini_reviews_without_changing_anything() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("gemini", Script::answer(provider_output("looks fine")));
    let started = std::time::Instant::now();
    let run = rig.run("review", &[]);
    eprintln!("gemini review: {:.1}s", started.elapsed().as_secs_f64());
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.json["output"]["response"], "looks fine");
    assert!(run.changed().is_empty(), "{:?}", run.changed());
    let usage = &run.json["usage"];
    assert_eq!(usage["source"], "provider-envelope", "{usage}");
    assert!(usage["inputTokens"].as_u64().unwrap_or(0) > 0, "{usage}");
    assert!(usage["costUsd"].is_null(), "{usage}");
    // The model the user configured, on the wire; no routing model before it.
    assert_eq!(rig.server.models_requested(), ["gemini-2.5-flash"]);
    // Read-only: nothing that writes, no sub-agent, no web; the shell is granted.
    let offered = rig.offered();
    for t in [
        "write_file",
        "replace",
        "invoke_agent",
        "web_fetch",
        "google_web_search",
    ] {
        assert!(!offered.contains(&t.to_owned()), "{t} offered: {offered:?}");
    }
    assert!(
        offered.contains(&"run_shell_command".to_owned()),
        "{offered:?}"
    );
    assert!(offered.contains(&"read_file".to_owned()), "{offered:?}");
    // It ran under handoff's sandbox and reached the model through the filtering proxy.
    let sandbox = &run.json["policy"]["sandbox"];
    assert_eq!(sandbox["enforcement"], "handoff", "{sandbox}");
    assert!(
        sandbox["proxy"]["traffic"]
            .to_string()
            .contains("127.0.0.1"),
        "{sandbox}"
    );
    // Nothing of it landed in the user's ~/.gemini.
    assert!(!rig.root.join("home/.gemini").exists());
    rig.assert_no_process_left();
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn gemini_builds_with_its_own_tool() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("gemini", Script::text("unused"));
    let target = rig.file("hello.txt");
    rig.server.set_script(Script::new([
        Step::write_file(&target, "hello from gemini\n"),
        Step::Answer(provider_output("wrote hello.txt")),
    ]));
    let started = std::time::Instant::now();
    let run = rig.run("build", &["--effort", "low", "--model", "gemini-2.5-pro"]);
    eprintln!("gemini build: {:.1}s", started.elapsed().as_secs_f64());
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.changed(), ["hello.txt"]);
    assert!(
        std::fs::read_to_string(&target)
            .unwrap()
            .contains("hello from gemini")
    );
    assert_eq!(rig.server.tool_calls(), ["write_file"]);
    // The model and the effort's thinking budget reached the wire on every call.
    assert_eq!(rig.server.models_requested(), ["gemini-2.5-pro"]);
    let budgets = budgets(&rig);
    assert!(
        !budgets.is_empty() && budgets.iter().all(|b| b == 1024),
        "{budgets:?}"
    );
    let offered = rig.offered();
    for t in ["write_file", "replace", "run_shell_command"] {
        assert!(
            offered.contains(&t.to_owned()),
            "{t} not offered: {offered:?}"
        );
    }
    for t in ["web_fetch", "google_web_search", "invoke_agent"] {
        assert!(!offered.contains(&t.to_owned()), "{t} offered: {offered:?}");
    }
}

/// Without a shell and without the web, neither is offered (the admin policy denies them too).
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn gemini_without_a_shell_is_offered_none() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("gemini", Script::answer(provider_output("no shell")));
    let run = rig.run("verify", &["--bash", "false"]);
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    let offered = rig.offered();
    assert_eq!(
        offered,
        ["glob", "grep_search", "list_directory", "read_file"],
        "{offered:?}"
    );
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn gemini_refuses_an_effort_it_does_not_have_before_starting() {
    if wanted(&[]) {
        super::surface::refused_before_any_model_call("gemini", &["--effort", "xhigh"]);
    }
}

/// Gemini's own turn limit (its settings' `model.maxSessionTurns`): it stops itself and the
/// run reads as the agent's failure at its limit.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn gemini_stops_at_its_turn_limit() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("gemini", Script::text("unused"));
    let file = rig.file("README.md");
    let steps: Vec<Step> = (0..8).map(|_| Step::shell(format!("cat {file}"))).collect();
    rig.server.set_script(Script::new(steps));
    let run = rig.run("review", &["--max-turns", "2"]);
    assert_eq!(run.code, 2, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "failed");
    assert!(
        run.message().contains("max session turns"),
        "{}",
        run.message()
    );
    assert_eq!(rig.server.model_calls().len(), 2, "it went on");
    rig.assert_no_process_left();
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn gemini_sits_on_a_panel() {
    if wanted(&["opencode"]) {
        super::surface::sits_on_a_panel("gemini", "opencode");
    }
}

/// handoff's MCP servers are the only ones Gemini sees, and it can call them: the settings of
/// the run's own Gemini home, under handoff's sandbox.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn gemini_calls_the_runs_own_mcp_server() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("gemini", Script::text("unused"));
    let descriptor = super::surface::mcp_echo(&rig);
    rig.repo.commit_all("the MCP server");
    let offered_before = Script::new([
        Step::FirstToolOf(vec![
            (
                "mcp_docs_echo".into(),
                serde_json::json!({"text": "mcp-marker-31"}),
            ),
            ("echo".into(), serde_json::json!({"text": "mcp-marker-31"})),
        ]),
        Step::Answer(provider_output("called it")),
    ]);
    rig.server.set_script(offered_before);
    super::surface::review_calls_mcp(&rig, &descriptor, "mcp-marker-31");
    let offered = rig.offered();
    assert!(
        offered.contains(&"mcp_docs_echo".to_owned()),
        "the MCP tool was not offered: {offered:?}"
    );
    for t in ["write_file", "replace", "run_shell_command", "web_fetch"] {
        assert!(!offered.contains(&t.to_owned()), "{t} offered: {offered:?}");
    }
}

/// Gemini and OpenCode, both real, carry a conversation to each other (see
/// [`super::carry::carried_between`]).
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn carry_gemini_to_opencode_is_resumed_with_the_earlier_turns() {
    if wanted(&["opencode"]) {
        super::carry::carried_between("gemini", "opencode");
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn carry_opencode_to_gemini_is_resumed_with_the_earlier_turns() {
    if wanted(&["opencode"]) {
        super::carry::carried_between("opencode", "gemini");
    }
}
