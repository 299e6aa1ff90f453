//! Qwen Code (`@qwen-code/qwen-code`), driven through `handoff` against the scripted model
//! server as an OpenAI-compatible provider (`OPENAI_BASE_URL`, `OPENAI_API_KEY`): a review that
//! answers and changes nothing (one model call: the managed auto-memory call is off), a build
//! that writes with the effort on the wire, a refused control, its own turn limit, the run's
//! own MCP server, a panel, and conversations carried to and from it.

use handoff_testkit::model_server::{Reply, Script, Step, provider_output};

use super::Rig;

/// Whether this run of the suite includes Qwen and `others`.
fn wanted(others: &[&str]) -> bool {
    super::wanted("qwen", others)
}

/// The tools no read-only Qwen run may be offered: writing, sub-agents (some run other agent
/// CLIs), worktrees, skills, the web.
const NEVER_READ_ONLY: &[&str] = &[
    "write_file",
    "edit",
    "agent",
    "skill",
    "enter_worktree",
    "tool_search",
    "web_fetch",
];

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn qwen_reviews_without_changing_anything() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("qwen", Script::answer(provider_output("looks fine")));
    let started = std::time::Instant::now();
    let run = rig.run("review", &[]);
    eprintln!("qwen review took {:.1}s", started.elapsed().as_secs_f64());
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.json["output"]["response"], "looks fine");
    assert!(run.changed().is_empty(), "{:?}", run.changed());
    // One model call: no managed auto-memory extraction after the turn.
    assert_eq!(rig.server.model_calls().len(), 1, "a side call was made");
    let usage = &run.json["usage"];
    assert_eq!(usage["source"], "provider-envelope", "{usage}");
    assert!(usage["inputTokens"].as_u64().unwrap_or(0) > 0, "{usage}");
    assert!(usage["costUsd"].is_null(), "{usage}");
    let offered = rig.offered();
    assert!(
        offered.contains(&"run_shell_command".to_owned()),
        "{offered:?}"
    );
    for t in NEVER_READ_ONLY {
        assert!(
            !offered.contains(&(*t).to_owned()),
            "{t} offered: {offered:?}"
        );
    }
    let sandbox = &run.json["policy"]["sandbox"];
    assert_eq!(sandbox["enforcement"], "handoff", "{sandbox}");
    rig.assert_no_process_left();
}

/// Its shell reads the worktree in a review, under handoff's sandbox; a command that writes is
/// refused (Qwen itself denies a shell redirection when `write_file` is excluded, and the
/// worktree is read-only), and the review does not succeed with a change.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn qwen_review_reads_with_its_shell_and_cannot_write() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("qwen", Script::text("unused"));
    let marker = "qwen-readable-marker-4711";
    let notes = rig.file("notes.txt");
    std::fs::write(&notes, format!("{marker}\n")).unwrap();
    let evil = rig.file("evil.txt");
    rig.server.set_script(Script::new([
        Step::shell(format!("cat {notes}")),
        Step::shell(format!("printf planted > {evil}")),
        Step::Answer(provider_output("read it")),
    ]));
    let run = rig.run("review", &[]);
    let tool_output = |n: usize| {
        let id = rig
            .server
            .requests()
            .into_iter()
            .filter_map(|r| match r.reply {
                Reply::ToolCall { call_id, .. } => Some(call_id),
                _ => None,
            })
            .nth(n)
            .unwrap_or_else(|| panic!("no shell call {n}: {}", run.json));
        rig.server.tool_output(&id).unwrap_or_default()
    };
    assert!(
        tool_output(0).contains(marker),
        "the shell could not read the worktree"
    );
    assert!(!tool_output(1).is_empty());
    let changed = !run.changed().is_empty() || std::path::Path::new(&evil).exists();
    assert!(
        !changed,
        "a read-only run changed the worktree: {}",
        run.json
    );
    rig.assert_no_process_left();
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn qwen_builds_with_its_own_tool() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("qwen", Script::text("unused"));
    let target = rig.file("hello.txt");
    rig.server.set_script(Script::new([
        Step::write_file(&target, "hello from qwen\n"),
        Step::Answer(provider_output("wrote hello.txt")),
    ]));
    let started = std::time::Instant::now();
    let run = rig.run("build", &["--effort", "high", "--model", "fake-model"]);
    eprintln!("qwen build took {:.1}s", started.elapsed().as_secs_f64());
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.changed(), ["hello.txt"]);
    assert!(
        std::fs::read_to_string(&target)
            .unwrap()
            .contains("hello from qwen")
    );
    let calls = rig.server.model_calls();
    assert!(
        calls
            .iter()
            .all(|c| c.body["reasoning"]["effort"] == "high"),
        "the effort did not reach the model"
    );
    assert!(
        calls.iter().all(|c| c.body["model"] == "fake-model"),
        "the model did not reach the wire"
    );
    let offered = rig.offered();
    for t in ["write_file", "edit", "run_shell_command"] {
        assert!(
            offered.contains(&t.to_owned()),
            "{t} not offered: {offered:?}"
        );
    }
    for t in ["agent", "web_fetch", "enter_worktree"] {
        assert!(!offered.contains(&t.to_owned()), "{t} offered: {offered:?}");
    }
}

/// The web granted without a shell: `web_fetch` is offered, the shell is not, and the run keeps
/// the host's network (the receipt says so) for its web tool.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn qwen_gets_its_web_tool_only_when_granted() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("qwen", Script::answer(provider_output("searched")));
    let run = rig.run("review", &["--web-search", "true", "--bash", "false"]);
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    let offered = rig.offered();
    assert!(offered.contains(&"web_fetch".to_owned()), "{offered:?}");
    for t in ["run_shell_command", "write_file", "edit", "agent"] {
        assert!(!offered.contains(&t.to_owned()), "{t} offered: {offered:?}");
    }
    let sandbox = &run.json["policy"]["sandbox"];
    assert_eq!(sandbox["enforcement"], "handoff", "{sandbox}");
    assert!(sandbox["proxy"].is_null(), "{sandbox}");
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn qwen_refuses_an_effort_it_does_not_have_before_starting() {
    if wanted(&[]) {
        super::surface::refused_before_any_model_call("qwen", &["--effort", "xhigh"]);
    }
}

/// Qwen keeps its own turn limit (`--max-session-turns`): it stops with exit code 53, read as
/// the agent's failure at its turn limit.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn qwen_stops_at_its_turn_limit() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("qwen", Script::text("unused"));
    let file = rig.file("README.md");
    let steps: Vec<Step> = (0..8).map(|_| Step::shell(format!("cat {file}"))).collect();
    rig.server.set_script(Script::new(steps));
    let run = rig.run("review", &["--max-turns", "2"]);
    assert_eq!(run.code, 2, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "failed");
    assert!(
        run.message()
            .contains("max_turns: Reached max session turns"),
        "{}",
        run.message()
    );
    assert!(rig.server.model_calls().len() <= 3, "it went on");
    rig.assert_no_process_left();
}

/// handoff's MCP servers are the only ones Qwen sees, their tools offered directly: the run's
/// `--mcp-config` file, a project's `.qwen/settings.json` server not started.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn qwen_calls_the_runs_own_mcp_server() {
    if !wanted(&[]) {
        return;
    }
    let rig = Rig::new("qwen", Script::text("unused"));
    let descriptor = super::surface::mcp_echo(&rig);
    let script = rig.file("mcp_echo.py");
    // A server the project names for itself: never started.
    rig.repo.write(
        ".qwen/settings.json",
        &serde_json::json!({"mcpServers": {"planted": {"command": "/usr/bin/python3", "args": [&script]}}})
            .to_string(),
    );
    rig.repo.commit_all("the MCP server");
    rig.server.set_script(Script::new([
        Step::tool_call(
            "mcp__docs__echo",
            serde_json::json!({"text": "mcp-marker-22"}),
        ),
        Step::Answer(provider_output("called it")),
    ]));
    super::surface::review_calls_mcp(&rig, &descriptor, "mcp-marker-22");
    let offered = rig.offered();
    assert!(
        offered.contains(&"mcp__docs__echo".to_owned()),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|t| t.contains("planted")),
        "{offered:?}"
    );
    for t in NEVER_READ_ONLY.iter().chain(&["run_shell_command"]) {
        assert!(
            !offered.contains(&(*t).to_owned()),
            "{t} offered: {offered:?}"
        );
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn qwen_sits_on_a_panel() {
    if wanted(&["opencode"]) {
        super::surface::sits_on_a_panel("qwen", "opencode");
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn carry_qwen_to_opencode_is_resumed_with_the_earlier_turns() {
    if wanted(&["opencode"]) {
        super::carry::carried_between("qwen", "opencode");
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn carry_opencode_to_qwen_is_resumed_with_the_earlier_turns() {
    if wanted(&["opencode"]) {
        super::carry::carried_between("opencode", "qwen");
    }
}
