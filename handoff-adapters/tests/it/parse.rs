//! `Provider::parse` of Codex and Claude Code on synthetic streams for the cases the recorded
//! outputs (`fixtures/`, snapshotted by the harness) do not cover.

use handoff_adapters::{Claude, Codex};
use handoff_core::{Observation, OutputError, Provider, RawOutput};
use serde_json::{Value, json};

use crate::harness::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Claude Code

#[test]
fn claude_write_stream_gives_the_result_text_and_envelope_usage() {
    let (payload, u) = answer(Claude.parse(&stdout(fixture("claude-write.out"))));
    assert_eq!(payload, b"Done: wrote the file.");
    assert_eq!(u, usage(22, 14, 0, 0, Some(0.000276)));
}

#[test]
fn claude_single_json_envelope_is_read_too() {
    let (payload, u) = answer(Claude.parse(&stdout(fixture("claude-hello.out"))));
    assert_eq!(payload, b"Hello! (from fake llm)");
    assert_eq!(u, usage(11, 7, 0, 0, Some(0.00023)));
}

#[test]
fn claude_input_tokens_include_cache_reads_and_writes() {
    let raw = stdout(lines(&[json!({
        "type": "result", "subtype": "success", "is_error": false, "result": "ok",
        "total_cost_usd": 0.5,
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 100,
                  "cache_creation_input_tokens": 20, "output_tokens": 5}
    })]));
    let (_, u) = answer(Claude.parse(&raw));
    assert_eq!(u, usage(130, 5, 100, 20, Some(0.5)));
}

#[test]
fn claude_structured_output_is_the_payload() {
    let mut events: Vec<Value> = fixture("claude-write.out")
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let last = events.last_mut().unwrap();
    last["structured_output"] = provider_output();
    last["result"] = json!(provider_output().to_string());
    let (payload, u) = answer(Claude.parse(&stdout(lines(&events))));
    let parsed: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(parsed, provider_output());
    assert_eq!(u, usage(22, 14, 0, 0, Some(0.000276)));
}

#[test]
fn claude_non_object_structured_output_falls_back_to_the_result_text() {
    for structured in [json!(null), json!("text"), json!([1, 2]), json!(3)] {
        let raw = stdout(lines(&[json!({
            "type": "result", "subtype": "success", "is_error": false,
            "result": "the text", "structured_output": structured
        })]));
        let (payload, u) = answer(Claude.parse(&raw));
        assert_eq!(payload, b"the text", "{structured}");
        assert_eq!(u, None);
    }
}

#[test]
fn claude_api_error_is_an_agent_failure() {
    // Real shape: `subtype` stays "success" on API errors; `is_error` says it.
    let raw = RawOutput {
        exit_code: Some(1),
        ..stdout(lines(&[json!({
            "type": "result", "subtype": "success", "is_error": true, "api_error_status": 500,
            "result": "API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}",
            "total_cost_usd": 0,
            "usage": {"input_tokens": 0, "output_tokens": 0}
        })]))
    };
    let (message, u) = failure(Claude.parse(&raw));
    assert_eq!(
        message,
        "API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}"
    );
    // Absent cache counts stay unknown rather than zero.
    let u = u.unwrap();
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.total_tokens),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!((u.cache_read_tokens, u.cache_write_tokens), (None, None));
    assert_eq!(u.cost_usd, Some(0.0));
}

#[test]
fn claude_max_turns_is_an_agent_failure() {
    let raw = RawOutput {
        exit_code: Some(1),
        ..stdout(lines(&[
            json!({"type": "system", "subtype": "init", "tools": ["Read"]}),
            json!({"type": "result", "subtype": "error_max_turns", "is_error": true,
                   "num_turns": 1, "errors": ["Reached maximum number of turns (1)"],
                   "usage": {"input_tokens": 3, "output_tokens": 4}}),
        ]))
    };
    let (message, u) = failure(Claude.parse(&raw));
    assert_eq!(
        message,
        "error_max_turns: Reached maximum number of turns (1)"
    );
    let u = u.unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (Some(3), Some(4)));
}

#[test]
fn claude_failure_messages_are_bounded_and_never_empty() {
    let raw = stdout(lines(&[json!({
        "type": "result", "subtype": "success", "is_error": true, "result": "é".repeat(5000)
    })]));
    let (message, _) = failure(Claude.parse(&raw));
    assert_eq!(message.chars().count(), 1024);
    let raw = stdout(lines(&[json!({
        "type": "result", "subtype": "error_during_execution", "is_error": true,
        "errors": [" "], "result": ""
    })]));
    let (message, _) = failure(Claude.parse(&raw));
    assert_eq!(message, "error_during_execution: no detail");
}

#[test]
fn claude_sandbox_refusal_is_unavailable() {
    let line = "Error: sandbox required but unavailable: bubblewrap (bwrap) not installed, \
                socat not installed; refusing to start without a working sandbox.";
    let raw = RawOutput {
        stdout: Vec::new(),
        stderr: format!("\n  {line}  \n").into_bytes(),
        exit_code: Some(1),
        answer_file: None,
    };
    assert_eq!(
        Claude.parse(&raw),
        Ok(Observation::Unavailable {
            message: line.to_owned()
        })
    );
}

#[test]
fn claude_without_a_result_event_is_a_malformed_envelope() {
    for raw in [
        RawOutput::default(),
        stdout(lines(&[json!({"type": "system", "subtype": "init"})])),
        RawOutput {
            stderr: b"Error: something else went wrong".to_vec(),
            ..RawOutput::default()
        },
    ] {
        assert!(
            matches!(Claude.parse(&raw), Err(OutputError::Envelope { .. })),
            "{raw:?}"
        );
    }
}

#[test]
fn claude_non_json_line_is_a_malformed_envelope() {
    let mut out = fixture("claude-write.out");
    out.extend_from_slice(b"Done! (plain text after the stream)\n");
    match Claude.parse(&stdout(out)) {
        Err(OutputError::Envelope { reason }) => assert!(reason.contains("not JSON"), "{reason}"),
        other => panic!("expected Envelope, got {other:?}"),
    }
}

#[test]
fn claude_malformed_result_event_is_a_malformed_envelope() {
    let raw = stdout(lines(&[json!({"type": "result", "is_error": "yes"})]));
    match Claude.parse(&raw) {
        Err(OutputError::Envelope { reason }) => {
            assert!(reason.contains("malformed result event"), "{reason}");
        }
        other => panic!("expected Envelope, got {other:?}"),
    }
}

#[test]
fn claude_result_without_text_or_structured_output_is_missing() {
    let raw = stdout(lines(&[
        json!({"type": "result", "subtype": "success", "is_error": false}),
    ]));
    assert_eq!(Claude.parse(&raw), Err(OutputError::Missing));
}

#[test]
fn claude_last_result_event_wins_and_blank_lines_are_ignored() {
    let mut out = lines(&[
        json!({"type": "result", "is_error": false, "result": "first"}),
        json!({"type": "result", "is_error": false, "result": "second"}),
    ]);
    out.extend_from_slice(b"\r\n   \n\t\n");
    let (payload, _) = answer(Claude.parse(&stdout(out)));
    assert_eq!(payload, b"second");
}

// ---------------------------------------------------------------------------------------------
// Codex

#[test]
fn codex_write_events_and_answer_file_give_the_answer_with_turn_usage() {
    let answer_file = serde_json::to_vec(&provider_output()).unwrap();
    let raw = RawOutput {
        answer_file: Some(answer_file.clone()),
        ..stdout(fixture("codex-write.out"))
    };
    let (payload, u) = answer(Codex.parse(&raw));
    assert_eq!(payload, answer_file);
    assert_eq!(u, usage(22, 14, 0, 0, None));
}

#[test]
fn codex_cached_tokens_are_cache_reads() {
    let raw = RawOutput {
        answer_file: Some(b"{}".to_vec()),
        ..stdout(lines(&[
            json!({"type": "turn.started"}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 100,
                   "cached_input_tokens": 80, "cache_write_input_tokens": 7,
                   "output_tokens": 5, "reasoning_output_tokens": 2}}),
        ]))
    };
    let (_, u) = answer(Codex.parse(&raw));
    assert_eq!(u, usage(100, 5, 80, 7, None));
}

#[test]
fn codex_usage_adds_up_over_turns() {
    let raw = RawOutput {
        answer_file: Some(b"{}".to_vec()),
        ..stdout(lines(&[
            json!({"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 1}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 20,
                   "cached_input_tokens": 5, "output_tokens": 2}}),
            json!({"type": "turn.completed"}),
        ]))
    };
    let (_, u) = answer(Codex.parse(&raw));
    assert_eq!(u, usage(30, 3, 5, 0, None));
}

#[test]
fn codex_error_item_is_not_a_failure() {
    // codex-hello.out has `item.completed` of type `error` (unknown model metadata).
    let (payload, u) = answer(Codex.parse(&stdout(fixture("codex-hello.out"))));
    assert_eq!(payload, b"Hello! (from fake llm)");
    assert_eq!(u, usage(11, 7, 0, 0, None));
}

#[test]
fn codex_missing_answer_file_falls_back_to_the_last_agent_message() {
    for answer_file in [None, Some(Vec::new()), Some(b" \n\t".to_vec())] {
        let raw = RawOutput {
            answer_file,
            ..stdout(fixture("codex-write.out"))
        };
        let (payload, _) = answer(Codex.parse(&raw));
        assert_eq!(payload, b"Done: wrote the file.");
    }
}

#[test]
fn codex_turn_failed_is_an_agent_failure() {
    let raw = RawOutput {
        exit_code: Some(1),
        ..stdout(lines(&[
            json!({"type": "thread.started", "thread_id": "t"}),
            json!({"type": "turn.started"}),
            json!({"type": "turn.failed", "error": {"message":
                "stream disconnected before completion: stream closed before response.completed"}}),
        ]))
    };
    let (message, u) = failure(Codex.parse(&raw));
    assert_eq!(
        message,
        "stream disconnected before completion: stream closed before response.completed"
    );
    assert_eq!(u, None);
}

#[test]
fn codex_turn_failed_without_detail_uses_the_last_error_event() {
    let raw = stdout(lines(&[
        json!({"type": "turn.started"}),
        json!({"type": "error", "message": "We’re currently experiencing high demand"}),
        json!({"type": "turn.failed"}),
    ]));
    let (message, _) = failure(Codex.parse(&raw));
    assert_eq!(message, "We’re currently experiencing high demand");
    let raw = stdout(lines(&[json!({"type": "turn.failed", "error": {}})]));
    let (message, _) = failure(Codex.parse(&raw));
    assert_eq!(message, "turn failed");
}

#[test]
fn codex_turn_failed_wins_over_an_answer_file() {
    let raw = RawOutput {
        answer_file: Some(serde_json::to_vec(&provider_output()).unwrap()),
        ..stdout(lines(&[
            json!({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}),
            json!({"type": "turn.failed", "error": {"message": "boom"}}),
        ]))
    };
    let (message, u) = failure(Codex.parse(&raw));
    assert_eq!(message, "boom");
    assert_eq!(u, usage(1, 1, 0, 0, None));
}

#[test]
fn codex_error_event_without_a_completed_turn_is_a_failure() {
    let raw = stdout(lines(&[
        json!({"type": "turn.started"}),
        json!({"type": "error", "message": "Reconnecting... waiting for network"}),
    ]));
    let (message, _) = failure(Codex.parse(&raw));
    assert_eq!(message, "Reconnecting... waiting for network");
    // Recovered: a later completed turn makes the error a warning.
    let raw = RawOutput {
        answer_file: Some(b"{}".to_vec()),
        ..stdout(lines(&[
            json!({"type": "error", "message": "Reconnecting... 1/5"}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}),
        ]))
    };
    answer(Codex.parse(&raw));
}

#[test]
fn codex_ignores_non_json_noise() {
    let mut out =
        b"WARNING: Refusing to create helper binaries under temporary dir \"/tmp\"\n".to_vec();
    out.extend(fixture("codex-write.out"));
    out.extend_from_slice(b"not json at all\n{\"type\":\"unknown.event\"}\n");
    let (payload, u) = answer(Codex.parse(&stdout(out)));
    assert_eq!(payload, b"Done: wrote the file.");
    assert_eq!(u, usage(22, 14, 0, 0, None));
}

#[test]
fn codex_with_nothing_at_all_is_missing() {
    for raw in [
        RawOutput::default(),
        stdout(&b"\n\n"[..]),
        stdout(lines(&[
            json!({"type": "thread.started", "thread_id": "t"}),
        ])),
        RawOutput {
            answer_file: Some(b"   ".to_vec()),
            ..RawOutput::default()
        },
    ] {
        assert_eq!(Codex.parse(&raw), Err(OutputError::Missing), "{raw:?}");
    }
}

#[test]
fn codex_answer_file_alone_is_an_answer_without_usage() {
    let raw = RawOutput {
        answer_file: Some(b"{\"x\":1}".to_vec()),
        ..RawOutput::default()
    };
    assert_eq!(
        Codex.parse(&raw),
        Ok(Observation::Answer {
            payload: b"{\"x\":1}".to_vec(),
            usage: None
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Claude's runtime check (Codex has none: its sandbox is native and fails closed).

fn stderr(text: &str) -> RawOutput {
    RawOutput {
        stderr: text.as_bytes().to_vec(),
        ..RawOutput::default()
    }
}

#[test]
fn claude_runtime_check_reads_stderr_only() {
    let text = "Warning: sandbox could not be applied, continuing without";
    let reason = Claude.runtime_check(&stderr(&format!("starting\n  {text}  \nmore\n")));
    let reason = reason.expect("stderr sign must block");
    assert!(reason.contains(text), "{reason}");
    assert!(reason.contains("not enforced"), "{reason}");

    let on_stdout = RawOutput {
        stdout: text.as_bytes().to_vec(),
        ..RawOutput::default()
    };
    assert_eq!(Claude.runtime_check(&on_stdout), None);

    let refused = "Error: sandbox required but unavailable: socat not installed; refusing to start";
    assert_eq!(Claude.runtime_check(&stderr(refused)), None);
    // As 2.1.332 says it.
    let refused = "\nError: sandbox required but unavailable: sandbox is enabled but dependencies \
                   are missing: bubblewrap (bwrap) not installed · install missing tools (e.g. \
                   apt install bubblewrap socat) or see https://code.claude.com/docs/en/sandboxing\n\n  \
                   Refusing to start without a working sandbox (see sandbox.failIfUnavailable).\n";
    assert_eq!(Claude.runtime_check(&stderr(refused)), None);
    assert!(matches!(
        Claude.parse(&stderr(refused)),
        Ok(handoff_core::Observation::Unavailable { .. })
    ));

    for sign in [
        "Sandbox failed to initialise",
        "SANDBOX UNSUPPORTED on this kernel",
        "the sandbox is not enforced for this command",
        "sandbox: unable to create user namespace",
        "sandbox will continue without network isolation",
    ] {
        assert!(Claude.runtime_check(&stderr(sign)).is_some(), "{sign}");
    }
    for quiet in [
        "",
        "all good",
        "failed to fetch telemetry",
        "sandbox enabled",
    ] {
        assert_eq!(Claude.runtime_check(&stderr(quiet)), None, "{quiet}");
    }
}

#[test]
fn codex_has_no_runtime_check() {
    let raw = stderr("sandbox could not be applied, continuing without");
    assert_eq!(Codex.runtime_check(&raw), None);
}

// ---------------------------------------------------------------------------------------------
// Why a run failed

/// Codex names the local clock time its usage limit resets at; the wait is read from it.
#[test]
fn codex_usage_limit_reset_time_is_the_retry_wait() {
    let recorded = String::from_utf8(fixture("api-codex-usage-limit.out")).unwrap();
    // The recording says "try again at 4:11 PM."; put a time 90 minutes from now in its place.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 5400;
    let (h, m) = local_hour_minute(secs);
    let at = format!(
        "try again at {}:{m:02} {}.",
        if h % 12 == 0 { 12 } else { h % 12 },
        if h >= 12 { "PM" } else { "AM" }
    );
    let text = recorded.replace("try again at 4:11 PM.", &at);
    assert_ne!(text, recorded, "the recording changed");
    match Codex.parse(&stdout(text)) {
        Ok(Observation::AgentFailure { reason, .. }) => {
            assert_eq!(reason.cause, handoff_core::FailureCause::RateLimited);
            let wait = reason.retry_after_seconds.unwrap();
            assert!((5340..=5400).contains(&wait), "{wait}");
        }
        other => panic!("{other:?}"),
    }
}

fn local_hour_minute(secs: u64) -> (u64, u64) {
    // The hour and minute of the local clock, as `date` prints them.
    let out = std::process::Command::new("date")
        .args(["-d", &format!("@{secs}"), "+%H %M"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut parts = text.split_whitespace().map(|p| p.parse::<u64>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}
