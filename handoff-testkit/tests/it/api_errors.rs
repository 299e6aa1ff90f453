//! `HANDOFF_FAKE_API_ERROR`: each fake CLI failing the way the real one does when its model API
//! answers with an error, and `HANDOFF_FAKE_API_ERROR_AFTER_WRITE`.

use handoff_testkit::keys::{API_ERROR, API_ERROR_AFTER_WRITE, GROK, PROBE_ANSWER};
use serde_json::Value;

use crate::support::*;

const ERRORS: [&str; 9] = [
    "rate_limited",
    "usage_limit",
    "auth",
    "billing",
    "model_not_found",
    "server_error",
    "overloaded",
    "context_length",
    "network",
];

fn claude_run(w: &World, tools: &str) -> std::process::Output {
    let settings = sandbox_settings(w.repo.path(), tools.contains("Write"));
    w.run(
        "claude",
        &claude_run_args(tools, &settings, SCHEMA),
        Some(BUILD_PROMPT),
    )
}

/// (value, status, type, class, terminal reason, start of the text)
type ClaudeCase = (
    &'static str,
    Option<u64>,
    Option<&'static str>,
    &'static str,
    &'static str,
    &'static str,
);

#[test]
fn claude_reports_each_api_error_as_claude_code_does() {
    let w = World::with_sandbox_tools();
    let table: [ClaudeCase; 9] = [
        (
            "rate_limited",
            Some(429),
            Some("rate_limit_error"),
            "rate_limit",
            "api_error",
            "API Error: Request rejected (429) · This request would exceed",
        ),
        (
            "usage_limit",
            Some(429),
            Some("rate_limit_error"),
            "rate_limit",
            "api_error",
            "API Error: Request rejected (429)",
        ),
        (
            "auth",
            Some(401),
            Some("authentication_error"),
            "authentication_failed",
            "api_error",
            "Invalid API key · Fix external API key",
        ),
        (
            "billing",
            Some(402),
            Some("billing_error"),
            "billing_error",
            "api_error",
            "Credit balance is too low",
        ),
        (
            "model_not_found",
            Some(404),
            Some("not_found_error"),
            "model_not_found",
            "api_error",
            "There's an issue with the selected model (claude-sonnet-4-5).",
        ),
        (
            "server_error",
            Some(500),
            Some("api_error"),
            "server_error",
            "api_error",
            "API Error: 500 Internal server error.",
        ),
        (
            "overloaded",
            Some(529),
            Some("overloaded_error"),
            "server_error",
            "api_error",
            "API Error: 529 Overloaded.",
        ),
        (
            "context_length",
            Some(400),
            Some("invalid_request_error"),
            "invalid_request",
            "prompt_too_long",
            "Prompt is too long · the request is ~250000 tokens (limit 200000)",
        ),
        (
            "network",
            None,
            None,
            "unknown",
            "api_error",
            "API Error: Connection error.",
        ),
    ];
    for (value, status, kind, class, terminal, text) in table {
        w.agents.set(API_ERROR, value);
        let out = claude_run(&w, WRITE_TOOLS);
        assert_eq!(out.status.code(), Some(1), "{value}: {}", stderr(&out));
        let events = json_lines(&out);
        let result = events.last().unwrap();
        let assistant = &events[events.len() - 2];
        assert_eq!(assistant["type"], "assistant", "{value}");
        assert_eq!(assistant["message"]["model"], "<synthetic>", "{value}");
        assert_eq!(assistant["error"], class, "{value}");
        assert_eq!(assistant["is_api_error_message"], true, "{value}");
        assert_eq!(assistant["api_error_status"].as_u64(), status, "{value}");
        assert_eq!(assistant["api_error_type"].as_str(), kind, "{value}");
        let said = assistant["message"]["content"][0]["text"].as_str().unwrap();
        assert!(said.starts_with(text), "{value}: {said}");
        assert_eq!(result["type"], "result", "{value}");
        assert_eq!(result["subtype"], "success", "{value}");
        assert_eq!(result["is_error"], true, "{value}");
        assert_eq!(result["api_error_status"].as_u64(), status, "{value}");
        assert!(status.is_some() || result["api_error_status"].is_null());
        assert_eq!(result["api_error_type"].as_str(), kind, "{value}");
        assert_eq!(result["terminal_reason"], terminal, "{value}");
        assert_eq!(result["result"], said, "{value}");
        assert!(result.get("structured_output").is_none());
    }
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
}

fn codex_run(w: &World, json: bool) -> std::process::Output {
    let mut argv = args(&["exec", "--ephemeral", "--sandbox", "workspace-write"]);
    if json {
        argv.push("--json".into());
    }
    argv.push("-".into());
    w.run("codex", &argv, Some(BUILD_PROMPT))
}

#[test]
fn codex_fails_the_turn_with_its_own_words() {
    let w = World::new();
    for value in ERRORS {
        w.agents.set(API_ERROR, value);
        let out = codex_run(&w, true);
        assert_eq!(out.status.code(), Some(1), "{value}");
        let events = json_lines(&out);
        let n = events.len();
        assert_eq!(events[n - 2]["type"], "error", "{value}");
        assert_eq!(events[n - 1]["type"], "turn.failed", "{value}");
        let message = events[n - 1]["error"]["message"].as_str().unwrap();
        assert_eq!(events[n - 2]["message"], message, "{value}");
        let expected = match value {
            "rate_limited" => "exceeded retry limit, last status: 429 Too Many Requests",
            "usage_limit" => "You’ve hit your usage limit. Upgrade to Pro",
            "auth" => "unexpected status 401 Unauthorized: Incorrect API key provided",
            "billing" => "unexpected status 402 Payment Required: You exceeded your current quota",
            "model_not_found" => "The model `fake-model` does not exist",
            "server_error" => "We’re currently experiencing high demand",
            "overloaded" => {
                "unexpected status 529 <unknown status code>: The engine is currently overloaded"
            }
            "context_length" => "Codex ran out of room in the model's context window.",
            _ => {
                "stream disconnected before completion: error sending request for url (http://127.0.0.1:1/v1/responses)"
            }
        };
        assert!(message.starts_with(expected), "{value}: {message}");
        if value == "usage_limit" {
            // "… or try again at 3:56 PM."
            let at = message.rsplit_once("try again at ").unwrap().1;
            let (clock, half) = at.trim_end_matches('.').split_once(' ').unwrap();
            assert!(half == "AM" || half == "PM", "{message}");
            let (h, m) = clock.split_once(':').unwrap();
            assert!((1..=12).contains(&h.parse::<u32>().unwrap()) && !h.starts_with('0'));
            assert!(m.len() == 2 && m.parse::<u32>().unwrap() < 60, "{message}");
        }
    }
    w.agents.set(API_ERROR, "auth");
    let out = codex_run(&w, false);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("ERROR: unexpected status 401 Unauthorized"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn opencode_reports_the_ai_sdk_error() {
    let w = World::new();
    let dir = w.scratch("opencode-config");
    let run = |json: bool| {
        let mut argv = args(&["run", "--dir", w.repo.path().to_str().unwrap()]);
        if json {
            argv.extend(args(&["--format", "json"]));
        }
        w.run_in(
            "opencode",
            &argv,
            Some(BUILD_PROMPT),
            w.tmp.path(),
            &[("OPENCODE_CONFIG_DIR", dir.as_os_str())],
        )
    };
    for value in ERRORS {
        w.agents.set(API_ERROR, value);
        let out = run(true);
        assert_eq!(out.status.code(), Some(1), "{value}");
        let events = json_lines(&out);
        assert_eq!(events.len(), 1, "{value}");
        let error = &events[0]["error"];
        assert_eq!(events[0]["type"], "error");
        if value == "network" {
            assert_eq!(error["name"], "UnknownError");
            assert_eq!(
                error["data"]["message"],
                "Unable to connect. Is the computer able to access the url?"
            );
            continue;
        }
        let data = &error["data"];
        assert_eq!(error["name"], "APIError", "{value}");
        let body: Value = serde_json::from_str(data["responseBody"].as_str().unwrap()).unwrap();
        assert_eq!(data["message"], body["error"]["message"], "{value}");
        let limit = matches!(value, "rate_limited" | "usage_limit");
        let retry = data["responseHeaders"]["retry-after"].as_str();
        assert_eq!(retry, limit.then_some("1200"), "{value}");
        let status = data["statusCode"].as_u64().unwrap();
        assert_eq!(
            data["isRetryable"],
            status == 429 || status >= 500,
            "{value}"
        );
        assert_eq!(
            data["metadata"]["url"],
            "http://127.0.0.1:1/v1/chat/completions"
        );
    }
    w.agents.set(API_ERROR, "billing");
    let out = run(false);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Error: You exceeded your current quota"));
}

#[test]
fn grok_kiro_cursor_and_community_grok_name_the_status() {
    let w = World::new();
    w.agents.set(API_ERROR, "rate_limited");
    let out = w.run("grok", &args(&["-p", "Mode: build"]), None);
    assert_eq!(out.status.code(), Some(1));
    let envelope: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(envelope["error"]["status"], 429);
    assert_eq!(envelope["error"]["code"], "rate_limit_exceeded");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("Please try again in 1200s.")
    );

    w.agents.set(API_ERROR, "auth");
    let out = w.run(
        "kiro-cli",
        &args(&["chat", "--no-interactive"]),
        Some(REVIEW_PROMPT),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("Error:\u{1b}[0m 401 Unauthorized: invalid api key"));

    w.agents.set(API_ERROR, "overloaded");
    let out = w.run(
        "cursor-agent",
        &args(&["-p", "--output-format", "json"]),
        Some(REVIEW_PROMPT),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("Error: 529 Overloaded"),
        "{}",
        stderr(&out)
    );

    w.agents.set(GROK, "community");
    w.agents.set(API_ERROR, "network");
    let out = w.run("grok", &args(&["-p", "Mode: review"]), None);
    assert!(out.status.success());
    assert_eq!(
        json_lines(&out).last().unwrap()["content"],
        "Sorry, I encountered an error: Grok API error: Connection error."
    );
}

#[test]
fn an_unknown_value_is_refused() {
    let w = World::new();
    w.agents.set(API_ERROR, "teapot");
    let out = w.run(
        "codex",
        &args(&["exec", "--json", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("fake-agent: unknown HANDOFF_FAKE_API_ERROR=teapot"));
}

#[test]
fn after_write_leaves_a_partial_change_only_where_the_run_may_write() {
    let w = World::with_sandbox_tools();
    w.agents.set(API_ERROR, "usage_limit");
    w.agents.set(API_ERROR_AFTER_WRITE, "1");
    let out = claude_run(&w, READ_TOOLS);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);

    let out = claude_run(&w, WRITE_TOOLS);
    assert_eq!(out.status.code(), Some(1));
    let partial = w.repo.path().join("fake-partial-claude.txt");
    assert!(
        std::fs::read_to_string(&partial)
            .unwrap()
            .contains("claude")
    );
    let events = json_lines(&out);
    assert!(events.iter().any(|e| e["type"] == "assistant"
        && e["message"]["content"][0]["name"] == "Write"
        && e["message"]["content"][0]["input"]["file_path"] == partial.to_str().unwrap()));
    assert_eq!(events.last().unwrap()["api_error_status"], 429);
    assert!(!w.repo.path().join("fake-build.txt").exists());
}

#[test]
fn a_receiver_fails_too_but_answers_the_probe() {
    let w = World::new();
    w.agents.set(API_ERROR, "server_error");
    let argv = args(&["exec", "--json", "--sandbox", "workspace-write", "-"]);
    let out = w.run(
        "codex",
        &argv,
        Some("# Handoff note\n\nFinish the parser.\n"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_lines(&out).last().unwrap()["type"], "turn.failed");
    assert!(!w.repo.path().join("fake-receiver-codex.txt").exists());

    w.agents.set(PROBE_ANSWER, "Finishing the parser.");
    let probe = "What were you last working on? Answer in one or two sentences.";
    let out = w.run("codex", &argv, Some(probe));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json_lines(&out).last().unwrap()["type"], "turn.completed");
}
