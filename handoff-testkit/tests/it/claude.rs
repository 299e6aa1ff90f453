//! Fake Claude Code runs.

use serde_json::Value;

use crate::support::*;

fn claude_run(w: &World, tools: &str, prompt: &str) -> std::process::Output {
    let settings = sandbox_settings(w.repo.path(), tools.contains("Write"));
    w.run(
        "claude",
        &claude_run_args(tools, &settings, SCHEMA),
        Some(prompt),
    )
}

#[test]
fn writable_run_writes_and_streams_a_structured_result() {
    let w = World::with_sandbox_tools();
    let out = claude_run(&w, WRITE_TOOLS, BUILD_PROMPT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stderr.is_empty());

    let written = std::fs::read_to_string(w.repo.path().join("fake-build.txt")).unwrap();
    assert!(
        written.contains("build") && written.contains(" ns"),
        "{written}"
    );

    let events = json_lines(&out);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"system"));
    assert_eq!(types.last(), Some(&"result"));

    let init = &events[0];
    assert_eq!(init["subtype"], "init");
    assert_eq!(init["cwd"], w.repo.path().display().to_string());
    assert_eq!(init["claude_code_version"], "2.1.197");
    let session = init["session_id"].as_str().unwrap();
    assert_eq!(session.len(), 36);
    assert!(events.iter().all(|e| e["session_id"] == session));

    let structured_call = events
        .iter()
        .filter(|e| e["type"] == "assistant")
        .flat_map(|e| e["message"]["content"].as_array().unwrap().iter())
        .find(|c| c["type"] == "tool_use" && c["name"] == "StructuredOutput")
        .expect("a StructuredOutput tool call");

    let result = events.last().unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["num_turns"], 2);
    assert_eq!(result["terminal_reason"], "completed");
    assert_eq!(result["permission_denials"], serde_json::json!([]));
    assert_eq!(result["usage"]["input_tokens"], 22);
    assert_eq!(result["usage"]["output_tokens"], 14);
    assert_eq!(result["usage"]["cache_creation_input_tokens"], 3);
    assert_eq!(result["usage"]["cache_read_input_tokens"], 5);
    assert_eq!(result["total_cost_usd"], 0.000276);

    let answer = assert_answer(&result["structured_output"]);
    assert_eq!(answer["status"], "completed");
    assert_eq!(answer["response"], "claude finished build");
    assert_eq!(
        answer["evidence"],
        serde_json::json!([{"kind": "file", "path": "fake-build.txt", "summary": "wrote the file"}])
    );
    assert_eq!(&structured_call["input"], &result["structured_output"]);
    let text: Value = serde_json::from_str(result["result"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structured_output"]);
}

#[test]
fn read_only_run_writes_nothing() {
    let w = World::with_sandbox_tools();
    let out = claude_run(&w, READ_TOOLS, REVIEW_PROMPT);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
    let result = json_lines(&out).pop().unwrap();
    let answer = assert_answer(&result["structured_output"]);
    assert_eq!(answer["response"], "claude finished review");
    assert_eq!(answer["evidence"], serde_json::json!([]));
}

#[test]
fn advice_prompt_uses_advice_mode() {
    let w = World::with_sandbox_tools();
    let out = claude_run(&w, READ_TOOLS, ADVICE_PROMPT);
    let result = json_lines(&out).pop().unwrap();
    assert_eq!(
        result["structured_output"]["response"],
        "claude finished advice"
    );
}

#[test]
fn json_output_format_prints_one_result_object() {
    let w = World::with_sandbox_tools();
    let out = w.run(
        "claude",
        &args(&[
            "-p",
            "--output-format",
            "json",
            "--json-schema",
            SCHEMA,
            "--model",
            "opus",
            "--effort",
            "max",
        ]),
        Some(REVIEW_PROMPT),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1);
    let result: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(result["type"], "result");
    assert!(result["modelUsage"]["opus"].is_object());
    assert_answer(&result["structured_output"]);
}

#[test]
fn stream_json_requires_verbose() {
    let w = World::new();
    let out = w.run(
        "claude",
        &args(&["-p", "--output-format", "stream-json"]),
        Some("hi"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("requires --verbose"));
}

#[test]
fn empty_prompt_is_an_error() {
    let w = World::new();
    let out = w.run(
        "claude",
        &args(&["-p", "--output-format", "json"]),
        Some(""),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Input must be provided"));
}

#[test]
fn prose_mode_has_no_structured_output() {
    let w = World::with_sandbox_tools();
    w.agents.set("HANDOFF_FAKE_MODE", "prose");
    let out = claude_run(&w, READ_TOOLS, REVIEW_PROMPT);
    assert!(out.status.success());
    let result = json_lines(&out).pop().unwrap();
    assert_eq!(result["is_error"], false);
    assert!(result.get("structured_output").is_none());
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .starts_with("Sure! Here is what I did")
    );
}

#[test]
fn agent_error_mode_reports_an_api_error() {
    let w = World::with_sandbox_tools();
    w.agents.set("HANDOFF_FAKE_MODE", "agent-error");
    let out = claude_run(&w, WRITE_TOOLS, BUILD_PROMPT);
    assert_eq!(out.status.code(), Some(1));
    let result = json_lines(&out).pop().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["api_error_status"], 500);
    assert_eq!(result["result"], "API Error: 500 internal error");
    assert!(result.get("structured_output").is_none());
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
}

#[test]
fn max_turns_mode() {
    let w = World::with_sandbox_tools();
    w.agents.set("HANDOFF_FAKE_MODE", "max-turns");
    let out = claude_run(&w, READ_TOOLS, REVIEW_PROMPT);
    assert_eq!(out.status.code(), Some(1));
    let result = json_lines(&out).pop().unwrap();
    assert_eq!(result["subtype"], "error_max_turns");
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["errors"],
        serde_json::json!(["Reached maximum number of turns (12)"])
    );
}

#[test]
fn invalid_utf8_mode_puts_raw_bytes_on_stdout() {
    let w = World::with_sandbox_tools();
    w.agents.set("HANDOFF_FAKE_MODE", "invalid-utf8");
    let out = claude_run(&w, READ_TOOLS, REVIEW_PROMPT);
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout.clone()).is_err());
    assert!(out.stdout.windows(2).any(|w| w == b"\xff\xfe"));
}
