//! Gemini CLI (`--harness gemini`, the fake `gemini`) through the `handoff` binary: a review
//! that answers and changes nothing, a build that writes, both under handoff's own sandbox with
//! the prompt on stdin; refused controls; its own turn limit; a panel with it; nested advice
//! both ways; and the surfaces that list it.

use handoff_testkit::keys::MODE;
use serde_json::Value;

use crate::support::{Sandbox, advice_from};
use crate::surface::{self, cli_runs, message, strings};

/// The recorded runs of the CLI itself (probes left out).
fn gemini_runs(sb: &Sandbox) -> Vec<Value> {
    cli_runs(sb, "gemini")
}

#[test]
fn a_review_answers_under_handoffs_sandbox_and_changes_nothing() {
    let run = surface::reviewed_under_handoffs_sandbox("gemini", "0.61.0");
    let usage = &run.json["usage"];
    assert_eq!(usage["inputTokens"], 100, "{usage}");
    assert_eq!(usage["outputTokens"], 7, "{usage}");
    assert_eq!(usage["cacheReadTokens"], 10, "{usage}");
    // The tools are the read-only list with the shell; writing and the web denied.
    let policy = &run.json["policy"];
    let tools = strings(&policy["tools"]);
    assert!(
        tools.contains(&"read_file") && !tools.contains(&"write_file"),
        "{tools:?}"
    );
    let deny = strings(&policy["deny"]);
    assert!(
        deny.contains(&"write_file") && deny.contains(&"web_fetch"),
        "{deny:?}"
    );
    // The default model is named: Gemini never routes a turn through a classifier.
    assert_eq!(policy["model"], "gemini-2.5-pro");
}

/// What the CLI was started with (recorded outside the sandbox): the prompt on stdin, never in
/// argv; the trust flag, an explicit model, the admin policy of what is not granted, and a
/// Gemini home of the run's own.
#[test]
fn the_prompt_goes_on_stdin_and_the_settings_are_the_runs_own() {
    let sb = Sandbox::new();
    sb.agents.record_dir();
    let run = sb.delegate(
        "claude",
        "gemini",
        "review",
        &["--bash", "false", "--model", "gemini-2.5-flash"],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let runs = gemini_runs(&sb);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let r = &runs[0];
    assert!(
        r["stdin"]
            .as_str()
            .is_some_and(|s| s.contains("Make the change")),
        "{r}"
    );
    assert!(!r["argv"].to_string().contains("Make the change"));
    let argv = strings(&r["argv"]);
    for flag in ["--skip-trust", "--admin-policy", "--extensions"] {
        assert!(argv.contains(&flag), "{flag}: {argv:?}");
    }
    let model = argv.iter().position(|a| *a == "--model").unwrap();
    assert_eq!(argv[model + 1], "gemini-2.5-flash");
    let home = r["env"]["GEMINI_CLI_HOME"].as_str().unwrap();
    assert!(home.ends_with("/gemini/home"), "{home}");
    assert_eq!(
        strings(&run.json["policy"]["tools"]),
        ["list_directory", "read_file", "grep_search", "glob"]
    );
}

#[test]
fn a_build_writes_the_worktree() {
    let run = surface::built_under_handoffs_sandbox("gemini", "high");
    assert!(strings(&run.json["policy"]["tools"]).contains(&"write_file"));
    assert_eq!(run.json["policy"]["thinkingBudget"], 24576);
}

/// Without a working bwrap Gemini runs unconfined, and the receipt says so.
#[test]
fn without_bubblewrap_the_receipt_says_unconfined() {
    surface::unconfined_without_bubblewrap("gemini");
}

#[test]
fn an_unsupported_control_is_refused_before_anything_starts() {
    surface::refused_before_anything_starts(
        "gemini",
        "gemini",
        &[
            (&["--effort", "xhigh"], "--effort"),
            (&["--effort", "minimal"], "--effort"),
            (&["--max-turns", "0"], "--max-turns"),
        ],
    );
}

/// Gemini keeps its own turn limit (the settings' `model.maxSessionTurns`) and exits 53 at
/// it; the run reads as the agent's failure at its limit.
#[test]
fn gemini_stops_at_its_own_turn_limit() {
    let sb = Sandbox::new();
    sb.agents.set(MODE, "max-turns");
    let run = sb.delegate("claude", "gemini", "review", &["--max-turns", "3"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.status(), "failed");
    assert!(
        message(&run).contains("Reached max session turns"),
        "{}",
        message(&run)
    );
    assert_eq!(run.json["selection"]["resolved"]["maxTurns"], 3);
    assert_eq!(run.json["exit"]["provider"], 53);
    assert_eq!(run.json["exit"]["cancelled"], false);
}

#[test]
fn gemini_sits_on_a_panel() {
    surface::sits_on_a_panel("gemini", "copilot");
}

#[test]
fn capabilities_and_doctor_list_gemini() {
    let gemini = surface::listed("gemini");
    assert_eq!(
        gemini["selection"]["effort"],
        serde_json::json!(["low", "medium", "high"]),
        "{gemini:#}"
    );
}

/// Gemini as a worker asks Codex for advice; a Codex worker asks Gemini, which (unconfined
/// here, without handoff's sandbox) is admitted only without its shell; Gemini and Copilot
/// advise each other as they are.
#[test]
fn gemini_asks_for_advice_and_gives_it() {
    let (run, code, result) = advice_from("gemini", "codex");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["delegation"]["mode"], "advice-only");
    assert_eq!(code, 0, "{result:#}");
    assert_eq!(result["status"], "succeeded", "{result:#}");
    let (run, code, result) = advice_from("codex", "gemini");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(code, 0, "{result:#}");
    assert_eq!(result["target"]["harness"], "gemini");
    assert_eq!(result["grants"]["resolved"]["bash"], false, "{result:#}");
    assert_eq!(
        result["grants"]["provenance"]["bash"], "isolation-attenuated",
        "{result:#}"
    );
    for (worker, adviser) in [("gemini", "copilot"), ("copilot", "gemini")] {
        let (run, code, result) = advice_from(worker, adviser);
        assert_eq!(run.code, 0, "{worker}→{adviser}: {run:?}");
        assert_eq!(code, 0, "{worker}→{adviser}: {result:#}");
        assert_eq!(result["target"]["harness"], adviser);
        assert_eq!(
            result["grants"]["resolved"]["bash"], true,
            "{worker}→{adviser}: {result:#}"
        );
    }
}

/// A recorded real Gemini session (0.61.0: a `write_file` call, its result and the answer),
/// in the sandbox's Gemini store under the project of the sandbox's repository, carried to
/// Codex, which continues it; the source is left as it was.
#[test]
fn a_gemini_session_is_carried_to_codex_which_continues_it() {
    use crate::carry::{home, log_json, repo_path, sandbox};
    let sb = sandbox();
    let repo = repo_path(&sb);
    let project = home(&sb).join(".gemini/tmp/repo");
    std::fs::create_dir_all(project.join("chats")).unwrap();
    std::fs::write(project.join(".project_root"), &repo).unwrap();
    let recorded = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../handoff-adapters/tests/it/fixtures/sessions/gemini-write-session.jsonl");
    let text = std::fs::read_to_string(recorded)
        .unwrap()
        .replace("$SCRATCH/repo", &repo);
    let source = project.join("chats/session-2026-12-06T23-52-5eb8a97b.jsonl");
    std::fs::write(&source, &text).unwrap();

    let run = crate::copilot_carry::continue_(&sb, &["--from", "gemini", "--to", "codex"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["source"]["provider"], "gemini");
    assert_eq!(
        carry["source"]["sessionId"],
        "5eb8a97b-cd8b-4893-ae71-7bb3aab742d8"
    );
    assert_eq!(carry["source"]["found"], "latest");
    // The user turn, the tool call, its result and the answer.
    assert_eq!(carry["messages"], 4, "{carry:#}");
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert_eq!(std::fs::read_to_string(&source).unwrap(), text);
    assert!(log_json(&sb).to_string().contains("gemini"));
}

/// A Claude Code conversation carried into Gemini's store (a project folder made for the
/// worktree, which Gemini adopts) and resumed there by the fake `gemini`; the person resumes it
/// with Gemini's own command.
#[test]
fn a_claude_conversation_is_carried_into_gemini_which_continues_it() {
    use crate::carry::{home, repo_path, sandbox, seed_claude};
    let sb = sandbox();
    seed_claude(&sb);
    let run = crate::copilot_carry::continue_(&sb, &["--from", "claude", "--to", "gemini"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["mode"], "converted");
    let id = carry["sessionId"].as_str().unwrap().to_owned();
    let files: Vec<String> = serde_json::from_value(carry["files"].clone()).unwrap();
    let file = std::path::PathBuf::from(&files[0]);
    // A project folder of the store, made for the worktree: its `.project_root` names it.
    let project = file.parent().unwrap().parent().unwrap().to_path_buf();
    assert_eq!(project.parent().unwrap(), home(&sb).join(".gemini/tmp"));
    assert_eq!(
        std::fs::read_to_string(project.join(".project_root")).unwrap(),
        repo_path(&sb)
    );
    assert!(
        file.to_string_lossy()
            .ends_with(&format!("-{}.jsonl", &id[..8])),
        "{files:?}"
    );
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
    let text = std::fs::read_to_string(&file).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["sessionId"], id.as_str(), "{text}");
    assert!(
        text.contains("Create notes.txt with one line."),
        "the first user turn is carried"
    );
    assert!(text.contains("\"handoff\":{\"provider\":\"claude\""));
    let resume = &r["receiver"]["resume"]["argv"];
    assert_eq!(resume[0], "gemini");
    assert_eq!(resume[1], "--resume");
}
