//! The Kiro adapter (`kiro-cli chat`, delegation.md §4.3), through the public API only:
//! invariants of the plan (its snapshots are the harness's), the transcript parser (ANSI,
//! narrative preamble, the strict "one object ends the final `> ` block" rule), garbage
//! robustness, the planned process run against the testkit's fake `kiro-cli`, and preflight.

use camino::Utf8Path;
use handoff_adapters::{KIRO_SPEC, Kiro};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, Observation, OutputError, Provider, ProviderOutput,
    RawOutput, RunDir, StdinSource,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::fakes::*;
use crate::harness::*;
use crate::support::*;

const KIRO_EXE: &str = "/usr/local/bin/kiro-cli";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        model: Some("claude-sonnet-4.5"),
        effort: Some("xhigh"),
        ..DEFAULTS
    },
];

fn describe(inv: &Invocation, _run: &RunDir) -> Value {
    json!({
        "program": inv.program,
        "args": inv.args,
        "env": inv.env,
        "cwd": inv.cwd,
        "stdin": stdin_name(&inv.stdin),
        "dirs": inv.dirs,
        "files": inv.files.iter().map(|f| f.path.to_string()).collect::<Vec<_>>(),
        "answer": answer_name(&inv.answer),
        "policy": inv.policy,
        "secrets": inv.secrets,
    })
}

/// Kiro in the harness's tables.
pub(crate) const KIRO: Agent = Agent {
    harness: "kiro",
    exe: KIRO_EXE,
    fake: "kiro-cli",
    profiles: PROFILES,
    describe,
    snapshots: "it__kiro__invocation",
    mcp: false,
    check_output: check,
};

#[test]
fn kiro_is_registered_with_the_reference_capabilities() {
    let p = provider("kiro");
    let s = p.spec();
    assert_eq!(s.id, KIRO_SPEC.id);
    assert_eq!(s.executable, "kiro-cli");
    assert_eq!(
        s.extra_dirs,
        ["~/.local/bin", "/opt/homebrew/bin", "/usr/local/bin"]
    );
    assert_eq!(s.effort, ["low", "medium", "high", "xhigh", "max"]);
    assert_eq!(s.advice_effort, Some("max"));
    assert!(s.max_turns.is_none());
    let g = s.grants;
    assert!(g.bash && g.bash_disable && !g.web_search && !g.mcp && g.write && g.nested_source);
    assert!(!s.native_filesystem_isolation && !s.native_bash_sandbox);
    assert_eq!(s.env_passthrough, ["KIRO_API_KEY"]);
}

#[test]
fn argv_follows_the_reference() {
    let fx = Fixture::new();
    let mut input = fx.input("kiro", Some("build"));
    input.model = Some("claude-sonnet-4.5".into());
    input.effort = Some("low".into());
    let inv = KIRO.plan(&fx, &input);
    assert_eq!(
        inv.args,
        [
            "chat",
            "--no-interactive",
            "--wrap",
            "never",
            "--trust-tools=fs_read,fs_write,execute_bash",
            "--model",
            "claude-sonnet-4.5",
            "--effort",
            "low",
        ]
    );
    assert_eq!(inv.program.as_str(), KIRO_EXE);
    assert_eq!(inv.cwd, fx.cwd, "Kiro works in its process's directory");
    assert_eq!(inv.stdin, StdinSource::Prompt);
    assert_eq!(inv.answer, AnswerSource::Stdout);
    assert!(inv.files.is_empty() && inv.dirs.is_empty() && inv.secrets.is_empty());
}

#[test]
fn trusted_tools_follow_the_grants_and_never_trust_everything() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        for p in PROFILES {
            let inv = KIRO.plan(&fx, &input_for(&fx, "kiro", *mode, p));
            let name = format!("{mode_name}/{}", p.name);
            let trust: Vec<&String> = inv
                .args
                .iter()
                .filter(|a| a.starts_with("--trust"))
                .collect();
            assert_eq!(trust.len(), 1, "{name}: {trust:?}");
            let tools: Vec<&str> = trust[0]
                .strip_prefix("--trust-tools=")
                .unwrap()
                .split(',')
                .collect();
            let mut expected = vec!["fs_read"];
            if writes(*mode) {
                expected.push("fs_write");
            }
            if p.bash != Some("false") {
                expected.push("execute_bash");
            }
            assert_eq!(tools, expected, "{name}");
            assert_eq!(inv.policy["trustedTools"], json!(expected), "{name}");
            assert_eq!(inv.policy["trustAllTools"], json!(false));
            assert!(
                !inv.args
                    .iter()
                    .any(|a| a == "-a" || a == "--trust-all-tools")
            );
            assert_eq!(
                inv.policy["filesystem"],
                json!(if writes(*mode) {
                    "permission-only-workspace-write"
                } else {
                    "permission-only-read-only-intent"
                }),
                "{name}"
            );
            assert_eq!(
                inv.policy["mutationGuarantee"],
                json!("final-state-detection-only")
            );
        }
    }
}

#[test]
fn advice_defaults_to_max_effort_and_runs_default_to_the_clis() {
    let fx = Fixture::new();
    let advice = KIRO.plan(&fx, &fx.input("kiro", None));
    assert_eq!(arg_after(&advice.args, "--effort"), Some("max"));
    for mode in ["build", "phase", "review", "verify"] {
        let inv = KIRO.plan(&fx, &fx.input("kiro", Some(mode)));
        assert!(!inv.args.contains(&"--effort".to_owned()), "{mode}");
        assert!(!inv.args.contains(&"--model".to_owned()), "{mode}");
    }
}

#[test]
fn validation_refuses_what_kiro_cannot_express() {
    let fx = Fixture::new();
    let registry = handoff_adapters::default_registry();
    for (_, mode) in MODES {
        let e = fx
            .with_mcp(fx.input("kiro", *mode))
            .validate(&registry)
            .unwrap_err();
        assert!(e.contains("--mcp-config is unsupported for kiro"), "{e}");
        let mut input = fx.input("kiro", *mode);
        input.web_search = Some("true".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("webSearch is unsupported for kiro"), "{e}");
        let mut input = fx.input("kiro", *mode);
        input.max_turns = Some("5".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("--max-turns is unsupported for kiro"), "{e}");
    }
    let mut input = fx.input("kiro", Some("build"));
    input.effort = Some("minimal".into());
    let e = input.validate(&registry).unwrap_err();
    assert!(
        e.contains("expected one of: low, medium, high, xhigh, max"),
        "{e}"
    );
}

#[test]
fn an_unvalidated_mcp_descriptor_is_refused_by_the_plan_too() {
    let fx = Fixture::new();
    let validated = validate(&fx.input("kiro", Some("review")));
    let mut run = run_dir_for(&fx, &validated, Utf8Path::new(KIRO_EXE), parent_env());
    run.mcp = validate(&fx.with_mcp(fx.input("claude", Some("review")))).mcp;
    assert!(matches!(
        Kiro.invocation(&validated.request, &run),
        Err(InvocationError::Unsupported(m)) if m.contains("MCP")
    ));
}

// ---------------------------------------------------------------------------------------------
// Parsing

const E: &str = "\u{1b}";

fn answer_json() -> String {
    json!({
        "schemaVersion": "handoff.provider-output.v1",
        "status": "completed",
        "response": "done { with \"braces\" } and \\ backslashes",
        "evidence": [],
        "findings": [],
        "usage": {"inputTokens": 5},
    })
    .to_string()
}

#[test]
fn transcripts_with_tools_preamble_and_ansi_give_a_valid_answer() {
    for name in ["kiro-review.out", "kiro-build.out"] {
        let (payload, usage) = answer(Kiro.parse(&stdout(fixture(name))));
        assert_eq!(usage, None, "Kiro's usage is the model's self-report");
        let out = ProviderOutput::parse_strict(&payload)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&payload)));
        assert!(!out.response.is_empty());
    }
}

#[test]
fn the_answer_is_exactly_the_object_ending_the_last_block() {
    let obj = answer_json();
    let cases = [
        format!("> {obj}"),
        format!("> {obj}\n"),
        format!("{E}[32m> {E}[0m{obj}{E}[0m\n"),
        format!("earlier\n> an old block\n> Here it is:\n\n{obj}\n\n"),
        format!("> Here it is: {obj}"),
        format!("> Result:\r\n{obj}\r\n"),
        format!(
            "> Pretty:\n{}\n",
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&obj).unwrap()).unwrap()
        ),
        format!("> a {{ brace in the narrative\n{obj}"),
    ];
    for text in cases {
        let (payload, _) = answer(Kiro.parse(&stdout(text.clone())));
        let got: Value =
            serde_json::from_slice(&payload).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(
            got,
            serde_json::from_str::<Value>(&obj).unwrap(),
            "{text:?}"
        );
        let payload = String::from_utf8(payload).unwrap();
        assert!(
            payload.starts_with('{') && payload.ends_with('}'),
            "{payload}"
        );
    }
}

#[test]
fn anything_after_the_object_is_refused() {
    let obj = answer_json();
    for text in [
        format!("> ```json\n{obj}\n```\n"),
        format!("> {obj}\nLet me know if you need more."),
        format!("> {obj} ."),
        format!("> {obj}\n ● Completed in 0.1s\n"),
        "> I could not finish the task.\n".to_owned(),
    ] {
        assert!(
            matches!(
                Kiro.parse(&stdout(text.clone())),
                Err(OutputError::NotOneObject)
            ),
            "{text:?}"
        );
    }
}

#[test]
fn two_answer_objects_are_refused() {
    let obj = answer_json();
    for text in [format!("> {obj}\n{obj}"), format!("> {obj}{obj}")] {
        match Kiro.parse(&stdout(text.clone())) {
            Err(OutputError::Envelope { reason }) => {
                assert!(reason.contains("more than one answer object"), "{reason}")
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    // An older answer in an earlier block is no longer part of the final block.
    let text = format!("> {obj}\n> Corrected:\n{obj}");
    answer(Kiro.parse(&stdout(text)));
}

#[test]
fn no_marker_no_answer() {
    let obj = answer_json();
    for text in [
        obj.clone(),
        format!(" > {obj}"),
        format!(">{obj}"),
        String::new(),
        "thinking…\n".to_owned(),
    ] {
        match Kiro.parse(&stdout(text.clone())) {
            Err(OutputError::Envelope { reason }) => {
                assert!(reason.contains("no `> ` answer marker"), "{reason}")
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    assert!(matches!(
        Kiro.parse(&stdout("> \n  \n")),
        Err(OutputError::Missing)
    ));
}

#[test]
fn unbalanced_or_broken_json_is_not_one_object() {
    for text in ["> }", "> {\"a\":\"}\"", "> \"}", "> a}}", "> {\"a\":1}}"] {
        let r = Kiro.parse(&stdout(text));
        assert!(
            matches!(r, Err(OutputError::NotOneObject)),
            "{text:?}: {r:?}"
        );
    }
    // Balanced but not JSON: the engine's contract check refuses it.
    let (payload, _) = answer(Kiro.parse(&stdout("> {not json}")));
    assert!(ProviderOutput::parse_strict(&payload).is_err());
}

#[test]
fn invalid_utf8_is_kept_for_the_contract_check() {
    let mut bytes = b"> {\"schemaVersion\":\"handoff.provider-output.v1\",\"response\":\"".to_vec();
    bytes.extend_from_slice(b"\xff\xfe");
    bytes.extend_from_slice(b"\"}\n");
    let (payload, _) = answer(Kiro.parse(&stdout(bytes)));
    assert!(payload.windows(2).any(|w| w == b"\xff\xfe"));
    assert!(matches!(
        ProviderOutput::parse_strict(&payload),
        Err(OutputError::NotUtf8)
    ));
}

#[test]
fn kiros_error_text_is_the_agents_failure() {
    let (message, usage) = failure(Kiro.parse(&raw(
        b"",
        format!("{E}[31mError:{E}[0m Service error: 500 internal error\n").as_bytes(),
        Some(1),
    )));
    assert_eq!(message, "Error: Service error: 500 internal error");
    assert_eq!(usage, None);
    // On stdout too, and whatever the case.
    let (message, _) =
        failure(Kiro.parse(&raw(b"  error: The model is overloaded\n", b"", Some(1))));
    assert_eq!(message, "error: The model is overloaded");
    // A valid answer wins over error noise.
    let obj = answer_json();
    answer(Kiro.parse(&raw(
        format!("> {obj}").as_bytes(),
        b"Error: retried once\n",
        Some(0),
    )));
    // A prose block with an error on stderr: the failure, not an output error.
    let (message, _) = failure(Kiro.parse(&raw(
        b"> I hit a problem.\n",
        b"Error: tool execution failed\n",
        Some(1),
    )));
    assert_eq!(message, "Error: tool execution failed");
}

#[test]
fn kiro_has_no_runtime_check() {
    let r = raw(
        b"> {}",
        b"sandbox unavailable, continuing without it",
        Some(0),
    );
    assert_eq!(Kiro.runtime_check(&r), None);
}

fn check(raw: &RawOutput) {
    let obs = Kiro.parse(raw);
    let _ = Kiro.runtime_check(raw);
    match obs {
        Ok(Observation::AgentFailure { message, .. }) => {
            assert!(message.chars().count() <= 1024)
        }
        Ok(Observation::Answer { payload, .. }) => {
            assert_eq!(payload.first(), Some(&b'{'));
            assert_eq!(payload.last(), Some(&b'}'));
        }
        Err(OutputError::Missing | OutputError::Envelope { .. } | OutputError::NotOneObject) => {}
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("> ".to_owned()),
        Just("\n> ".to_owned()),
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("\"".to_owned()),
        Just("\\".to_owned()),
        Just("\"schemaVersion\"".to_owned()),
        Just(format!("{E}[32m")),
        Just(format!("{E}]0;t\u{7}")),
        Just(E.to_owned()),
        Just("\r".to_owned()),
        Just("Error: x".to_owned()),
        Just(answer_json()),
        "\\PC{0,20}",
    ]
}

proptest! {
    #[test]
    fn transcript_like_text_never_panics(
        parts in prop::collection::vec(fragment(), 0..24),
        err in prop::collection::vec(fragment(), 0..4),
    ) {
        check(&raw(parts.concat().as_bytes(), err.concat().as_bytes(), Some(0)));
    }

    /// Any narrative before a valid answer (without a `"schemaVersion"` key of its own) and
    /// any whitespace after it: the answer comes back byte for byte.
    #[test]
    fn a_valid_answer_survives_any_preamble(
        pre in "[^\u{1b}\"]{0,60}",
        trailing in "[ \t\n\r]{0,4}",
    ) {
        let obj = answer_json();
        let text = format!("> {pre}\n{obj}{trailing}");
        let (payload, _) = answer(Kiro.parse(&stdout(text)));
        prop_assert_eq!(payload, obj.into_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// The planned process, run against the testkit's fake kiro-cli

#[test]
fn planned_process_runs_against_the_fake_and_respects_read_only() {
    let fx = Fixture::new();
    let fakes = Fakes::install(&fx);
    let input = |mode: Option<&str>| {
        let mut input = fx.input("kiro", mode);
        input.model = Some("claude-sonnet-4.5".into());
        input
    };
    fakes.every_mode(&KIRO, input, |mode_name, mode, out| {
        let (payload, usage) = answer(Kiro.parse(out));
        assert_eq!(usage, None);
        let answer = ProviderOutput::parse_strict(&payload).unwrap();
        assert_eq!(answer.response, format!("kiro-cli finished {mode_name}"));
        // The fake writes only when fs_write is trusted.
        assert_eq!(answer.evidence.len(), usize::from(writes(mode)));
    });
    let runs = fakes.calls_with(0, "chat");
    assert_eq!(runs.len(), MODES.len());
    for r in &runs {
        assert_eq!(r["cwd"], json!(fx.cwd.as_str()));
        assert!(
            r["stdin"]
                .as_str()
                .is_some_and(|s| s.contains("Operation:"))
        );
        assert_eq!(r["env"]["NO_COLOR"], json!("1"));
    }
}

#[test]
fn fake_agent_failures_and_bad_answers() {
    let fx = Fixture::new();
    let fakes = Fakes::install(&fx);
    let review = fx.input("kiro", Some("review"));
    fakes.agents.set("HANDOFF_FAKE_MODE", "agent-error");
    let (message, _) = failure(Kiro.parse(&fakes.run(&KIRO, &review)));
    assert_eq!(message, "Error: Service error: 500 internal error");
    fakes.agents.set("HANDOFF_FAKE_MODE", "prose");
    let out = fakes.run(&KIRO, &review);
    assert!(matches!(Kiro.parse(&out), Err(OutputError::NotOneObject)));
    fakes.agents.set("HANDOFF_FAKE_MODE", "schema-drift");
    let (payload, _) = answer(Kiro.parse(&fakes.run(&KIRO, &review)));
    assert!(matches!(
        ProviderOutput::parse_strict(&payload),
        Err(OutputError::SchemaDrift { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Preflight

#[tokio::test]
async fn preflight_passes_against_the_fake() {
    let w = ProbeWorld::new();
    w.agents.record_dir();
    let result = Kiro.preflight(&w.fake("kiro-cli"), &w.probe).await;
    assert_eq!(result.failure, None);
    assert_eq!(result.version, Some(fake_version("kiro-cli")));
    let argv: Vec<Value> = w
        .agents
        .invocations()
        .iter()
        .map(|c| c["argv"].clone())
        .collect();
    assert_eq!(argv, [json!(["--version"]), json!(["chat", "--help"])]);
}
