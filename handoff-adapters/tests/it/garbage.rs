//! Garbage in, no panic out: `parse` and `runtime_check` of Codex and Claude Code on random
//! text lines and random JSON-ish event lines in stdout, stderr and the answer file (random
//! bytes go through every agent in the harness).

use handoff_adapters::{Claude, Codex};
use handoff_core::{Provider, RawOutput};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::harness::assert_output_kinds;

fn check_both(raw: &RawOutput) {
    check_claude(raw);
    check_codex(raw);
}

/// What Claude Code's adapter makes of any output: never a panic, only the two "no usable
/// output" errors, messages of at most 1024 characters.
pub(crate) fn check_claude(raw: &RawOutput) {
    assert_output_kinds(&Claude, raw, Some(1024));
}

/// What Codex's adapter makes of any output: never a panic, only the two "no usable output"
/// errors.
pub(crate) fn check_codex(raw: &RawOutput) {
    assert_output_kinds(&Codex, raw, None);
}

/// Text fragments that look like what the CLIs print.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("{\"type\":\"result\"".to_owned()),
        Just("{\"type\":\"turn.completed\",\"usage\":".to_owned()),
        Just("sandbox could not be applied".to_owned()),
        Just("sandbox required but unavailable".to_owned()),
        Just("refusing to start".to_owned()),
        Just("\u{feff}".to_owned()),
        Just("\r".to_owned()),
        "\\PC{0,40}",
        "[ -~]{0,40}",
    ]
}

fn random_lines() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::collection::vec(fragment(), 0..4), 0..12)
        .prop_map(|ls| {
            ls.into_iter()
                .map(|l| l.concat())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .prop_map(String::into_bytes)
}

/// Numbers that fit comfortably in a token count.
fn small_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..1_000_000).prop_map(|n| json!(n)),
        (-1000i64..0).prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
    ]
}

/// Token counts of any size, often near `u64::MAX`.
fn any_count() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..1000).prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (u64::MAX - 1000..=u64::MAX).prop_map(|n| json!(n)),
    ]
}

fn scalar(number: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number,
        "\\PC{0,20}".prop_map(Value::String),
    ]
}

fn json_value(number: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    scalar(number).prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("type".to_owned()),
        Just("subtype".to_owned()),
        Just("is_error".to_owned()),
        Just("result".to_owned()),
        Just("errors".to_owned()),
        Just("structured_output".to_owned()),
        Just("usage".to_owned()),
        Just("total_cost_usd".to_owned()),
        Just("input_tokens".to_owned()),
        Just("output_tokens".to_owned()),
        Just("cached_input_tokens".to_owned()),
        Just("cache_read_input_tokens".to_owned()),
        Just("cache_creation_input_tokens".to_owned()),
        Just("cache_write_input_tokens".to_owned()),
        Just("item".to_owned()),
        Just("text".to_owned()),
        Just("message".to_owned()),
        Just("error".to_owned()),
        "[a-z_]{1,8}",
    ]
}

fn event_type() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("result")),
        Just(json!("system")),
        Just(json!("assistant")),
        Just(json!("turn.completed")),
        Just(json!("turn.failed")),
        Just(json!("turn.started")),
        Just(json!("error")),
        Just(json!("item.completed")),
        Just(json!("agent_message")),
        "[a-z.]{0,12}".prop_map(Value::String),
        Just(json!(1)),
        Just(Value::Null),
    ]
}

fn usage_object(number: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    prop::collection::btree_map(
        prop_oneof![
            Just("input_tokens".to_owned()),
            Just("output_tokens".to_owned()),
            Just("cached_input_tokens".to_owned()),
            Just("cache_write_input_tokens".to_owned()),
            Just("cache_read_input_tokens".to_owned()),
            Just("cache_creation_input_tokens".to_owned()),
        ],
        number,
        0..6,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// One event line: an object with a plausible `type` and plausible or random fields.
fn event(number: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    (
        event_type(),
        prop::collection::btree_map(key(), json_value(number.clone()), 0..6),
        prop::option::of(usage_object(number)),
        prop::option::of(prop_oneof![
            Just(json!({"type": "agent_message", "text": "hi"})),
            Just(json!({"type": "error", "message": "warn"})),
            Just(json!({"type": "agent_message"})),
            Just(json!({"type": 7})),
        ]),
    )
        .prop_map(|(t, fields, usage, item)| {
            let mut m: serde_json::Map<String, Value> = fields.into_iter().collect();
            m.insert("type".into(), t);
            if let Some(u) = usage {
                m.insert("usage".into(), u);
            }
            if let Some(i) = item {
                m.insert("item".into(), i);
            }
            Value::Object(m)
        })
}

/// One event line whose known fields have the types the adapters expect, so the parsers get
/// past deserialization and into their arithmetic.
fn typed_event(number: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    (
        event_type(),
        prop::option::of(any::<bool>()),
        prop::option::of("\\PC{0,20}"),
        prop::option::of(usage_object(number)),
        prop::option::of(prop_oneof![
            Just(json!({"type": "agent_message", "text": "hi"})),
            Just(json!({"type": "error", "message": "warn"})),
        ]),
        prop::option::of(0.0f64..10.0),
    )
        .prop_map(|(t, is_error, text, usage, item, cost)| {
            let mut m = serde_json::Map::new();
            m.insert("type".into(), t);
            if let Some(b) = is_error {
                m.insert("is_error".into(), json!(b));
            }
            if let Some(text) = text {
                m.insert("result".into(), json!(text));
                m.insert("message".into(), json!(text));
            }
            if let Some(u) = usage {
                m.insert("usage".into(), u);
            }
            if let Some(i) = item {
                m.insert("item".into(), i);
            }
            if let Some(c) = cost {
                m.insert("total_cost_usd".into(), json!(c));
            }
            Value::Object(m)
        })
}

fn event_lines(number: BoxedStrategy<Value>) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            3 => event(number.clone()).prop_map(|v| v.to_string()),
            3 => typed_event(number).prop_map(|v| v.to_string()),
            1 => "[ -~]{0,30}",
            1 => Just(String::new()),
        ],
        0..10,
    )
    .prop_map(|ls| ls.join("\n").into_bytes())
}

fn stream(number: BoxedStrategy<Value>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        random_lines(),
        event_lines(number),
    ]
}

fn raw_output(number: BoxedStrategy<Value>) -> impl Strategy<Value = RawOutput> {
    (
        stream(number.clone()),
        stream(number.clone()),
        prop::option::of(any::<i32>()),
        prop::option::of(stream(number)),
    )
        .prop_map(|(stdout, stderr, exit_code, answer_file)| RawOutput {
            stdout,
            stderr,
            exit_code,
            answer_file,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_lines_never_panic(stdout in random_lines(), stderr in random_lines()) {
        check_both(&RawOutput { stdout, stderr, exit_code: Some(1), answer_file: None });
    }

    #[test]
    fn json_ish_events_with_plausible_numbers_never_panic(
        raw in raw_output(small_number().boxed())
    ) {
        check_both(&raw);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn well_typed_events_with_any_token_counts_never_panic(
        lines in prop::collection::vec(typed_event(any_count().boxed()), 1..8),
        answer in prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
    ) {
        let stdout = lines.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
        check_both(&RawOutput {
            stdout: stdout.into_bytes(),
            stderr: Vec::new(),
            exit_code: Some(0),
            answer_file: answer,
        });
    }

    #[test]
    fn json_ish_events_with_any_numbers_never_panic(raw in raw_output(any_count().boxed())) {
        check_both(&raw);
    }
}

/// Token counts at the top of the range saturate instead of overflowing.
#[test]
fn claude_huge_token_counts_do_not_panic() {
    let raw = RawOutput {
        stdout: json!({"type": "result", "is_error": false, "result": "ok",
            "usage": {"input_tokens": u64::MAX, "cache_read_input_tokens": 1,
                      "output_tokens": u64::MAX}})
        .to_string()
        .into_bytes(),
        ..RawOutput::default()
    };
    let r = std::panic::catch_unwind(|| Claude.parse(&raw));
    assert!(r.is_ok(), "Claude.parse panicked on large token counts");
}

#[test]
fn codex_huge_token_counts_do_not_panic() {
    let line = json!({"type": "turn.completed",
        "usage": {"input_tokens": u64::MAX, "output_tokens": u64::MAX}})
    .to_string();
    let raw = RawOutput {
        stdout: format!("{line}\n{line}\n").into_bytes(),
        answer_file: Some(b"{}".to_vec()),
        ..RawOutput::default()
    };
    let r = std::panic::catch_unwind(|| Codex.parse(&raw));
    assert!(r.is_ok(), "Codex.parse panicked on large token counts");
}
