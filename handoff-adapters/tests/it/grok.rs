//! The Grok adapter (xAI's `grok`, delegation.md §4.2), through the public API only: invariants
//! of the plan (its snapshots are the harness's), the envelope parser on reference-shaped
//! envelopes and the community CLI's output, garbage robustness, the planned process run
//! against the testkit's fake `grok`, and preflight end to end (including the community
//! `@vibe-kit/grok-cli`, which must be recognised and refused).

use camino::Utf8Path;
use handoff_adapters::{GROK_SPEC, Grok, is_community_grok};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, Observation, OutputError, Provider, RawOutput,
    RunDir, StdinSource, Usage, UsageSource, provider_output_schema,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::fakes::*;
use crate::harness::*;
use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Invocation

const GROK_EXE: &str = "/usr/local/bin/grok";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        model: Some("grok-code-fast-1"),
        effort: Some("high"),
        max_turns: Some("7"),
        ..DEFAULTS
    },
    Profile {
        name: "web",
        web_search: Some("true"),
        ..DEFAULTS
    },
];

/// Grok in the harness's tables.
pub(crate) const GROK: Agent = Agent {
    harness: "grok",
    exe: GROK_EXE,
    fake: "grok",
    profiles: PROFILES,
    describe,
    snapshots: "it__grok__invocation",
    mcp: false,
    check_output: check,
};

/// The plan as JSON. The inline schema and the prompt file (identical in every plan) are
/// checked here against their sources and replaced by markers.
fn describe(inv: &Invocation, run: &RunDir) -> Value {
    let mut args = inv.args.clone();
    let i = args.iter().position(|a| a == "--json-schema").unwrap();
    let given: Value = serde_json::from_str(&args[i + 1]).unwrap();
    assert_eq!(given, provider_output_schema(), "--json-schema");
    args[i + 1] = "<provider-output schema>".into();
    let files: Vec<Value> = inv
        .files
        .iter()
        .map(|f| {
            assert_eq!(f.contents, run.prompt.as_bytes(), "the prompt file");
            json!({"path": f.path, "contents": "<prompt>"})
        })
        .collect();
    json!({
        "program": inv.program,
        "args": args,
        "env": inv.env,
        "cwd": inv.cwd,
        "stdin": stdin_name(&inv.stdin),
        "dirs": inv.dirs,
        "files": files,
        "answer": answer_name(&inv.answer),
        "policy": inv.policy,
        "secrets": inv.secrets,
    })
}

#[test]
fn grok_is_registered_with_the_reference_capabilities() {
    let p = provider("grok");
    let s = p.spec();
    assert_eq!(s.id, GROK_SPEC.id);
    assert_eq!(s.executable, "grok");
    assert_eq!(
        s.extra_dirs,
        ["~/.grok/bin", "/opt/homebrew/bin", "/usr/local/bin"]
    );
    assert_eq!(s.effort, ["low", "medium", "high"]);
    assert_eq!(s.advice_effort, None);
    let turns = s.max_turns.unwrap();
    assert_eq!((turns.handoff, turns.advice), (12, 32));
    let g = s.grants;
    assert!(g.bash && g.bash_disable && g.web_search && !g.mcp && g.write && g.nested_source);
    assert!(s.native_filesystem_isolation && s.native_bash_sandbox);
    assert_eq!(s.env_passthrough, ["GROK_API_KEY", "XAI_API_KEY"]);
}

#[test]
fn argv_follows_the_reference_order() {
    let fx = Fixture::new();
    let mut input = fx.input("grok", Some("review"));
    input.model = Some("grok-4".into());
    input.effort = Some("low".into());
    input.max_turns = Some("3".into());
    input.bash = Some("false".into());
    let inv = GROK.plan(&fx, &input);
    let schema = provider_output_schema().to_string();
    let prompt_file = fx.run_path.join("request.txt");
    let expected: Vec<String> = [
        "--prompt-file",
        prompt_file.as_str(),
        "--cwd",
        fx.cwd.as_str(),
        "--sandbox",
        "read-only",
        "--permission-mode",
        "dontAsk",
        "--no-plan",
        "--no-subagents",
        "--no-memory",
        "--max-turns",
        "3",
        "--json-schema",
        &schema,
        "--verbatim",
        "--disable-web-search",
        "--tools",
        "Read,Grep",
        "--deny",
        "Bash(*)",
        "--deny",
        "Edit(*)",
        "--deny",
        "MCPTool(*)",
        "--deny",
        "WebFetch(*)",
        "--model",
        "grok-4",
        "--effort",
        "low",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(inv.args, expected);
    assert_eq!(inv.program.as_str(), GROK_EXE);
    assert_eq!(inv.cwd, fx.cwd);
    assert_eq!(inv.stdin, StdinSource::Null, "the prompt travels in a file");
    assert_eq!(inv.answer, AnswerSource::Stdout);
    assert_eq!(inv.files.len(), 1);
    assert_eq!(inv.files[0].path, prompt_file);
    assert!(inv.dirs.is_empty());
}

#[test]
fn a_writing_run_with_web_gets_the_whole_toolset() {
    let fx = Fixture::new();
    let mut input = fx.input("grok", Some("build"));
    input.web_search = Some("true".into());
    let inv = GROK.plan(&fx, &input);
    let a = &inv.args;
    assert_eq!(arg_after(a, "--sandbox"), Some("workspace"));
    assert_eq!(arg_after(a, "--permission-mode"), Some("auto"));
    assert_eq!(
        arg_after(a, "--tools"),
        Some("Read,Grep,Edit,Bash,WebSearch,WebFetch")
    );
    assert_eq!(args_after(a, "--deny"), ["MCPTool(*)"]);
    assert_eq!(args_after(a, "--allow"), ["WebFetch(*)"]);
    assert!(!a.contains(&"--disable-web-search".to_owned()));
    // --allow comes after every --deny.
    let last_deny = a.iter().rposition(|x| x == "--deny").unwrap();
    let allow = a.iter().position(|x| x == "--allow").unwrap();
    assert!(allow > last_deny);
}

#[test]
fn grants_map_to_tools_denies_and_the_sandbox() {
    let fx = Fixture::new();
    for (name, mode, p, inv) in all_plans(&fx, &GROK) {
        let write = writes(mode);
        let bash = p.bash != Some("false");
        let web = p.web_search == Some("true");
        let a = &inv.args;
        assert_eq!(
            arg_after(a, "--sandbox"),
            Some(if write { "workspace" } else { "read-only" }),
            "{name}"
        );
        assert_eq!(
            arg_after(a, "--permission-mode"),
            Some(if write { "auto" } else { "dontAsk" }),
            "{name}"
        );
        let tools: Vec<&str> = arg_after(a, "--tools").unwrap().split(',').collect();
        assert_eq!(&tools[..2], ["Read", "Grep"], "{name}");
        assert_eq!(tools.contains(&"Edit"), write, "{name}");
        assert_eq!(tools.contains(&"Bash"), bash, "{name}");
        assert_eq!(tools.contains(&"WebSearch"), web, "{name}");
        assert_eq!(tools.contains(&"WebFetch"), web, "{name}");
        let denies = args_after(a, "--deny");
        assert_eq!(denies.contains(&"Bash(*)"), !bash, "{name}");
        assert_eq!(denies.contains(&"Edit(*)"), !write, "{name}");
        assert!(
            denies.contains(&"MCPTool(*)"),
            "{name}: MCP tools are always denied"
        );
        assert_eq!(denies.contains(&"WebFetch(*)"), !web, "{name}");
        assert_eq!(
            a.contains(&"--disable-web-search".to_owned()),
            !web,
            "{name}"
        );
        for flag in ["--no-plan", "--no-subagents", "--no-memory", "--verbatim"] {
            assert_eq!(a.iter().filter(|x| *x == flag).count(), 1, "{name}: {flag}");
        }
        assert_eq!(arg_after(a, "--cwd"), Some(fx.cwd.as_str()), "{name}");
        assert_eq!(
            inv.policy["sandboxProfile"],
            json!(arg_after(a, "--sandbox"))
        );
        assert_eq!(inv.policy["tools"], json!(tools), "{name}");
        assert_eq!(inv.policy["deny"], json!(denies), "{name}");
        assert_eq!(inv.policy["nativeFilesystemIsolation"], json!(true));
        assert_eq!(inv.policy["mcpServers"], json!([]));
    }
}

#[test]
fn turn_limits_default_per_operation() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        let inv = GROK.plan(&fx, &fx.input("grok", *mode));
        let expected = if mode.is_some() { "12" } else { "32" };
        assert_eq!(
            arg_after(&inv.args, "--max-turns"),
            Some(expected),
            "{mode_name}"
        );
        assert_eq!(
            inv.policy["maxTurns"],
            json!(expected.parse::<u32>().unwrap())
        );
        // Grok has no operation-default effort: the flag is left out.
        assert!(!inv.args.contains(&"--effort".to_owned()), "{mode_name}");
        assert!(!inv.args.contains(&"--model".to_owned()), "{mode_name}");
    }
}

#[test]
fn validation_refuses_what_grok_cannot_express() {
    let fx = Fixture::new();
    let registry = handoff_adapters::default_registry();
    for (_, mode) in MODES {
        let input = fx.with_mcp(fx.input("grok", *mode));
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("--mcp-config is unsupported for grok"), "{e}");
    }
    let mut input = fx.input("grok", Some("build"));
    input.effort = Some("xhigh".into());
    let e = input.validate(&registry).unwrap_err();
    assert!(e.contains("expected one of: low, medium, high"), "{e}");
    let mut input = fx.input("grok", Some("build"));
    input.max_turns = Some("101".into());
    let e = input.validate(&registry).unwrap_err();
    assert!(e.contains("between 1 and 100"), "{e}");
}

#[test]
fn an_unvalidated_mcp_descriptor_is_refused_by_the_plan_too() {
    let fx = Fixture::new();
    let input = fx.input("grok", Some("review"));
    let validated = validate(&input);
    let mut run = run_dir_for(&fx, &validated, Utf8Path::new(GROK_EXE), parent_env());
    // What a caller that skipped validation would hand over.
    let mcp_input = fx.with_mcp(fx.input("claude", Some("review")));
    run.mcp = validate(&mcp_input).mcp;
    assert!(run.mcp.is_some());
    match Grok.invocation(&validated.request, &run) {
        Err(InvocationError::Unsupported(m)) => assert!(m.contains("MCP"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn structured_output_is_the_answer_with_envelope_usage_and_cost() {
    let envelope: Value = serde_json::from_slice(&fixture("grok-structured.json")).unwrap();
    let (payload, usage) = answer(Grok.parse(&stdout(fixture("grok-structured.json"))));
    let payload: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(payload, envelope["structuredOutput"]);
    assert_eq!(
        usage,
        Some(Usage {
            source: UsageSource::ProviderEnvelope,
            input_tokens: Some(1840 + 512),
            output_tokens: Some(96),
            total_tokens: Some(2448),
            cache_read_tokens: Some(512),
            cache_write_tokens: None,
            cost_usd: Some(0.00231),
            premium_requests: None,
        })
    );
}

#[test]
fn text_is_the_fallback_when_structured_output_failed() {
    let envelope: Value = serde_json::from_slice(&fixture("grok-text-fallback.json")).unwrap();
    let (payload, usage) = answer(Grok.parse(&stdout(fixture("grok-text-fallback.json"))));
    assert_eq!(payload, envelope["text"].as_str().unwrap().as_bytes());
    let usage = usage.unwrap();
    assert_eq!(usage.input_tokens, Some(920));
    assert_eq!(usage.total_tokens, Some(991));
    assert_eq!(usage.cost_usd, Some(0.00088));
}

#[test]
fn structured_output_error_without_text_is_the_agents_failure() {
    let (message, usage) = failure(Grok.parse(&stdout(fixture("grok-structured-error.json"))));
    assert!(
        message.contains("did not produce output matching the JSON schema"),
        "{message}"
    );
    assert_eq!(usage.unwrap().input_tokens, Some(15300 + 4100));
}

#[test]
fn an_error_in_the_envelope_is_the_agents_failure() {
    for (error, expected) in [
        (
            json!("xAI API error (500): internal error"),
            "xAI API error (500)",
        ),
        (
            json!({"message": "rate limited", "code": 429}),
            "rate limited",
        ),
        (json!({"code": 429}), "429"),
    ] {
        let envelope = json!({"text": "partial", "error": error, "usage": {
            "input_tokens": 10, "output_tokens": 0, "total_tokens": 10}});
        let (message, usage) = failure(Grok.parse(&stdout(envelope.to_string())));
        assert!(message.contains(expected), "{message}");
        assert_eq!(usage.unwrap().total_tokens, Some(10));
    }
    // A null error is no error.
    let envelope = json!({"text": "{}", "error": null});
    answer(Grok.parse(&stdout(envelope.to_string())));
}

#[test]
fn a_bare_provider_output_object_is_the_answer() {
    let object = r#"{"schemaVersion":"handoff.provider-output.v1","status":"completed"}"#;
    let (payload, usage) = answer(Grok.parse(&stdout(format!("\n{object}\n"))));
    assert_eq!(payload, object.as_bytes());
    assert_eq!(usage, None);
}

#[test]
fn usage_is_dropped_when_the_total_disagrees_and_saturates() {
    let envelope = json!({"structuredOutput": {}, "usage": {
        "input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3, "total_tokens": 13}});
    let (_, usage) = answer(Grok.parse(&stdout(envelope.to_string())));
    assert_eq!(usage, None, "10 + 5 + 3 != 13");
    let envelope = json!({"structuredOutput": {}, "usage": {
        "input_tokens": u64::MAX, "cache_read_input_tokens": u64::MAX, "output_tokens": u64::MAX}});
    let (_, usage) = answer(Grok.parse(&stdout(envelope.to_string())));
    let usage = usage.unwrap();
    assert_eq!(usage.input_tokens, Some(u64::MAX));
    assert_eq!(usage.total_tokens, Some(u64::MAX));
    // No usage object, or a negative count: no usage.
    for u in [json!(null), json!({"input_tokens": -1, "output_tokens": 2})] {
        let envelope = json!({"structuredOutput": {}, "usage": u, "total_cost_usd": 1.0});
        let (_, usage) = answer(Grok.parse(&stdout(envelope.to_string())));
        assert_eq!(usage, None);
    }
}

#[test]
fn the_community_clis_jsonl_is_not_an_envelope() {
    for name in ["grok-community-hello.out", "grok-community-write.out"] {
        match Grok.parse(&stdout(fixture(name))) {
            Err(OutputError::Envelope { reason }) => {
                assert!(reason.contains("exactly one JSON value"), "{reason}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn malformed_stdout_is_a_malformed_envelope() {
    for out in [
        "not json",
        "[1,2]",
        "\"text\"",
        "{\"text\":\"a\"} trailing",
        "{\"text\":\"a\"}\n{\"text\":\"b\"}",
    ] {
        assert!(
            matches!(Grok.parse(&stdout(out)), Err(OutputError::Envelope { .. })),
            "{out}"
        );
    }
    for out in ["{}", "{\"text\":\"  \"}", "{\"structuredOutput\":\"x\"}"] {
        assert!(
            matches!(Grok.parse(&stdout(out)), Err(OutputError::Missing)),
            "{out}"
        );
    }
}

#[test]
fn a_blank_stdout_is_classified_by_stderr() {
    let (message, _) = failure(Grok.parse(&raw(
        b"",
        b"Error: xAI API error (500): internal error\n",
        Some(1),
    )));
    assert_eq!(message, "Error: xAI API error (500): internal error");
    match Grok.parse(&raw(
        b"",
        b"grok: sandbox unavailable: landlock is not supported; refusing to start\n",
        Some(1),
    )) {
        Ok(Observation::Unavailable { message }) => assert!(message.contains("landlock")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Grok.parse(&raw(b"", b"something odd\n", Some(3))),
        Err(OutputError::Missing)
    ));
}

fn check(raw: &RawOutput) {
    // "structured output failed: " may precede a message of 1024 characters.
    assert_output_kinds(&Grok, raw, Some(1024 + 40));
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        "\\PC{0,30}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON objects with the keys of its envelope and any values.
pub(crate) fn envelope() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("text"),
        Just("structuredOutput"),
        Just("structuredOutputError"),
        Just("error"),
        Just("usage"),
        Just("total_cost_usd"),
        Just("schemaVersion"),
        Just("stopReason"),
    ];
    let usage = prop::collection::btree_map(
        prop_oneof![
            Just("input_tokens"),
            Just("cache_read_input_tokens"),
            Just("output_tokens"),
            Just("total_tokens"),
        ],
        prop_oneof![any::<u64>().prop_map(|n| json!(n)), json_leaf()],
        0..4,
    )
    .prop_map(|m| json!(m));
    prop::collection::vec((key, prop_oneof![json_value(), usage]), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

// ---------------------------------------------------------------------------------------------
// The planned process, run against the testkit's fake grok

#[test]
fn planned_process_runs_against_the_fake_and_respects_read_only() {
    let fx = Fixture::new();
    let fakes = Fakes::install(&fx);
    let input = |mode: Option<&str>| {
        let mut input = fx.input("grok", mode);
        input.model = Some("grok-code-fast-1".into());
        input.effort = Some("medium".into());
        input.web_search = Some("true".into());
        input
    };
    fakes.every_mode(&GROK, input, |mode_name, _, out| {
        let (payload, usage) = answer(Grok.parse(out));
        let payload: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(payload["status"], json!("completed"), "{mode_name}");
        assert_eq!(
            payload["response"],
            json!(format!("grok finished {mode_name}"))
        );
        let usage = usage.unwrap();
        assert_eq!(usage.source, UsageSource::ProviderEnvelope);
        assert_eq!(usage.input_tokens, Some(22));
        assert_eq!(usage.total_tokens, Some(36));
        assert_eq!(usage.cost_usd, Some(0.000276));
    });
    let runs = fakes.calls_with(0, "--prompt-file");
    assert_eq!(runs.len(), MODES.len());
    for r in &runs {
        assert_eq!(r["cwd"], json!(fx.cwd.as_str()));
        assert!(r["stdin"].is_null() || r["stdin"] == json!(""), "{r}");
    }
}

#[test]
fn fake_agent_failures_are_the_agents_failures() {
    let fx = Fixture::new();
    let fakes = Fakes::install(&fx);
    let review = fx.input("grok", Some("review"));
    fakes.agents.set("HANDOFF_FAKE_MODE", "agent-error");
    let (message, _) = failure(Grok.parse(&fakes.run(&GROK, &review)));
    assert!(message.contains("xAI API error (500)"), "{message}");
    fakes.agents.set("HANDOFF_FAKE_MODE", "prose");
    let (payload, _) = answer(Grok.parse(&fakes.run(&GROK, &review)));
    assert!(
        serde_json::from_slice::<Value>(&payload).is_err(),
        "prose is left for the engine"
    );
}

// ---------------------------------------------------------------------------------------------
// Preflight

#[tokio::test]
async fn preflight_passes_against_the_fake() {
    let w = ProbeWorld::new();
    w.agents.record_dir();
    let result = Grok.preflight(&w.fake("grok"), &w.probe).await;
    assert_eq!(result.failure, None);
    assert_eq!(result.version, Some(fake_version("grok")));
    let calls = w.agents.invocations();
    let argv: Vec<Value> = calls.iter().map(|c| c["argv"].clone()).collect();
    let prompt = w.probe.scratch.join("grok-probe-prompt.txt");
    assert_eq!(
        argv,
        [
            json!(["--version"]),
            json!(["--help"]),
            json!([
                "--sandbox",
                "workspace",
                "--prompt-file",
                prompt.as_str(),
                "--json-schema",
                "handoff-invalid-json"
            ]),
            json!([
                "--sandbox",
                "read-only",
                "--prompt-file",
                prompt.as_str(),
                "--json-schema",
                "handoff-invalid-json"
            ]),
        ]
    );
    for c in &calls {
        assert_eq!(c["cwd"], json!(w.probe.scratch.as_str()));
    }
    assert!(w.scratch_entries().is_empty(), "{:?}", w.scratch_entries());
}

/// The community `@vibe-kit/grok-cli` 0.0.34 (its `--version` prints `1.0.1`): recognised from
/// its help text, refused with a reason that says what it is, and never given a flag it lacks.
#[tokio::test]
async fn preflight_refuses_the_community_grok_cli() {
    let w = ProbeWorld::new();
    let help = w.root.join("community-help.txt");
    std::fs::write(&help, fixture("grok-community-help.txt")).unwrap();
    let log = w.root.join("community-argv.log");
    let exe = w.script(
        "community",
        "grok",
        &format!(
            "echo \"$*\" >> '{log}'\ncase \"$*\" in\n  --version|-V) echo 1.0.1 ;;\n  --help|-h) cat '{help}' ;;\n  *) echo \"error: unknown option '$1'\" >&2; exit 1 ;;\nesac"
        ),
    );
    let result = Grok.preflight(&exe, &w.probe).await;
    assert_eq!(result.version.as_deref(), Some("1.0.1"));
    let failure = result.failure.expect("the community CLI must be refused");
    assert!(failure.contains("community vibe-kit Grok CLI"), "{failure}");
    assert!(failure.contains("not xAI's"), "{failure}");
    assert!(failure.contains("grok-community"), "{failure}");
    let argv = std::fs::read_to_string(&log).unwrap();
    assert_eq!(argv, "--version\n--help\n", "only flags it has");
    assert!(is_community_grok(
        &String::from_utf8(fixture("grok-community-help.txt")).unwrap()
    ));
    assert!(!is_community_grok(handoff_testkit::fixtures::GROK_HELP));
}
