//! The community Grok CLI adapter (`grok-community`, npm `@vibe-kit/grok-cli` 0.0.34), through
//! the public API only: its plans (snapshots of argv, environment and the sandbox it asks
//! for), the refusals of what it cannot honour, its JSONL output with the CLI's error forms,
//! the planned process run against the testkit's fake community `grok`, and preflight (which
//! tells it apart from xAI's CLI both ways).

use camino::Utf8Path;
use handoff_adapters::{
    GROK_COMMUNITY_SPEC, GrokCommunity, check_community_grok_help, is_community_grok,
};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, OutputError, Provider, ProviderOutput, RawOutput,
    RunDir, StdinSource,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::fakes::*;
use crate::harness::*;
use crate::support::*;

const EXE: &str = "/usr/local/bin/grok";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "selected",
        model: Some("grok-code-fast-1"),
        max_turns: Some("7"),
        ..DEFAULTS
    },
];

/// The plan of `input` on a machine where handoff's sandbox runs.
fn plan(
    fx: &Fixture,
    input: &handoff_core::RunInput,
) -> Result<(Invocation, RunDir), InvocationError> {
    let validated = validate(input);
    let mut run = run_dir_for(fx, &validated, Utf8Path::new(EXE), parent_env());
    run.handoff_sandbox = true;
    GrokCommunity
        .invocation(&validated.request, &run)
        .map(|inv| (inv, run))
}

/// The plan as JSON; the prompt (checked against the run's) becomes a marker.
fn describe(inv: &Invocation, run: &RunDir) -> Value {
    let mut args = inv.args.clone();
    let i = args.iter().position(|a| a == "-p").unwrap();
    assert_eq!(args[i + 1], run.prompt, "-p carries the prompt");
    args[i + 1] = "<prompt>".into();
    let sandbox = inv.sandbox.as_ref().map(|s| {
        json!({
            "binds": s.binds.len(),
            "state": s.state,
            "offlineShell": s.offline_shell,
        })
    });
    json!({
        "program": inv.program,
        "args": args,
        "env": inv.env,
        "cwd": inv.cwd,
        "stdin": stdin_name(&inv.stdin),
        "dirs": inv.dirs,
        "files": inv.files.len(),
        "answer": answer_name(&inv.answer),
        "sandbox": sandbox,
        "policy": inv.policy,
        "secrets": inv.secrets,
    })
}

#[test]
fn grok_community_is_registered_with_its_capabilities() {
    let p = provider("grok-community");
    let s = p.spec();
    assert_eq!(s.id, GROK_COMMUNITY_SPEC.id);
    assert_eq!(s.executable, "grok");
    assert!(s.effort.is_empty());
    let turns = s.max_turns.unwrap();
    assert_eq!((turns.handoff, turns.advice), (12, 32));
    let g = s.grants;
    assert!(g.bash && !g.bash_disable && !g.web_search && !g.mcp && g.write && g.nested_source);
    assert!(!s.native_filesystem_isolation && !s.native_bash_sandbox);
    assert_eq!(
        s.env_passthrough,
        ["GROK_API_KEY", "GROK_BASE_URL", "GROK_MODEL"]
    );
    assert!(p.receiver().is_none() && p.sessions().is_none());
    assert!(p.why_no_receiver().contains("keeps no sessions"));
}

/// One snapshot per mode and profile: argv, environment, working directory and the sandbox.
#[test]
fn invocation_snapshots() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        for p in PROFILES {
            let input = input_for(&fx, "grok-community", *mode, p);
            let (inv, run) =
                plan(&fx, &input).unwrap_or_else(|e| panic!("{mode_name}/{}: {e}", p.name));
            let mut settings = fx.insta_settings();
            settings.set_snapshot_suffix(format!("{mode_name}-{}", p.name));
            settings.set_description(format!("grok-community {mode_name}, profile {}", p.name));
            let value = describe(&inv, &run);
            settings.bind(|| insta::assert_json_snapshot!("invocation", value));
        }
    }
}

#[test]
fn every_run_asks_for_handoffs_sandbox_and_keeps_its_state_private() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        let (inv, run) = plan(&fx, &fx.input("grok-community", *mode)).unwrap();
        let sandbox = inv.sandbox.as_ref().expect("handoff's sandbox");
        assert!(!sandbox.offline_shell, "{mode_name}: its shell is /bin/sh");
        assert!(
            sandbox.binds.is_empty(),
            "{mode_name}: nothing of the user's"
        );
        let home = run.file("grok-home");
        assert_eq!(inv.env["HOME"], home.as_str());
        assert_eq!(inv.cwd, home, "{mode_name}: it starts outside the worktree");
        assert_eq!(inv.dirs, [home]);
        assert_eq!(arg_after(&inv.args, "-d"), Some(fx.cwd.as_str()));
        assert_eq!(inv.stdin, StdinSource::Null);
        assert_eq!(inv.answer, AnswerSource::Stdout);
        for never in ["-k", "--api-key", "-u", "--base-url", "-m", "--model"] {
            assert!(!inv.args.iter().any(|a| a == never), "{mode_name}: {never}");
        }
        let turns = if mode.is_some() { "12" } else { "32" };
        assert_eq!(arg_after(&inv.args, "--max-tool-rounds"), Some(turns));
        assert_allowlisted(
            mode_name,
            &inv.env,
            &GROK_COMMUNITY_SPEC,
            &["HOME", "NO_COLOR", "TERM"],
        );
    }
}

#[test]
fn the_model_and_endpoint_reach_it_through_the_environment_only() {
    let fx = Fixture::new();
    let mut env = parent_env();
    env.insert("GROK_API_KEY".into(), "xai-key-0123456789".into());
    env.insert("GROK_BASE_URL".into(), "http://127.0.0.1:9/v1".into());
    env.insert("XAI_API_KEY".into(), "xai-other".into());
    let mut input = fx.input("grok-community", Some("build"));
    input.model = Some("grok-4-latest".into());
    let validated = validate(&input);
    let mut run = run_dir_for(&fx, &validated, Utf8Path::new(EXE), env);
    run.handoff_sandbox = true;
    let inv = GrokCommunity.invocation(&validated.request, &run).unwrap();
    assert_eq!(inv.env["GROK_MODEL"], "grok-4-latest");
    assert_eq!(inv.env["GROK_API_KEY"], "xai-key-0123456789");
    assert_eq!(inv.env["GROK_BASE_URL"], "http://127.0.0.1:9/v1");
    assert!(!inv.env.contains_key("XAI_API_KEY"));
    assert!(!inv.args.iter().any(|a| a.contains("xai-key")));
}

#[test]
fn without_handoffs_sandbox_nothing_is_planned() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        let validated = validate(&fx.input("grok-community", *mode));
        let run = run_dir_for(&fx, &validated, Utf8Path::new(EXE), parent_env());
        assert!(!run.handoff_sandbox);
        match GrokCommunity.invocation(&validated.request, &run) {
            Err(InvocationError::Unsupported(m)) => {
                assert!(m.contains("bubblewrap") && m.contains("no sandbox"), "{m}");
            }
            other => panic!("{mode_name}: {other:?}"),
        }
    }
}

#[test]
fn validation_refuses_what_the_community_cli_cannot_honour() {
    let fx = Fixture::new();
    let registry = handoff_adapters::default_registry();
    for (_, mode) in MODES {
        let e = fx
            .with_mcp(fx.input("grok-community", *mode))
            .validate(&registry)
            .unwrap_err();
        assert!(
            e.contains("--mcp-config is unsupported for grok-community"),
            "{e}"
        );
        let mut input = fx.input("grok-community", *mode);
        input.web_search = Some("true".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(
            e.contains("webSearch is unsupported for grok-community"),
            "{e}"
        );
        let mut input = fx.input("grok-community", *mode);
        input.effort = Some("high".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("unsupported for grok-community"), "{e}");
        let mut input = fx.input("grok-community", *mode);
        input.bash = Some("false".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(
            e.contains("bash=false is unsupported for grok-community"),
            "{e}"
        );
    }
}

#[test]
fn the_plan_refuses_what_validation_would_have_and_an_oversized_prompt() {
    let fx = Fixture::new();
    let validated = validate(&fx.input("grok-community", Some("review")));
    let mut run = run_dir_for(&fx, &validated, Utf8Path::new(EXE), parent_env());
    run.handoff_sandbox = true;
    run.mcp = validate(&fx.with_mcp(fx.input("claude", Some("review")))).mcp;
    assert!(matches!(
        GrokCommunity.invocation(&validated.request, &run),
        Err(InvocationError::Unsupported(m)) if m.contains("--mcp-config")
    ));
    run.mcp = None;
    let mut request = validated.request.clone();
    request.grants.resolved.web_search = true;
    assert!(GrokCommunity.invocation(&request, &run).is_err());
    let mut request = validated.request.clone();
    request.grants.resolved.bash = false;
    assert!(GrokCommunity.invocation(&request, &run).is_err());
    let mut request = validated.request.clone();
    request.selection.resolved.effort = "high".into();
    assert!(GrokCommunity.invocation(&request, &run).is_err());
    run.prompt = "x".repeat(128 * 1024);
    assert!(matches!(
        GrokCommunity.invocation(&validated.request, &run),
        Err(InvocationError::Unsupported(m)) if m.contains("command-line argument")
    ));
}

// ---------------------------------------------------------------------------------------------
// Parsing

fn answer_json() -> String {
    json!({
        "schemaVersion": "handoff.provider-output.v1",
        "status": "completed",
        "response": "done",
        "evidence": [],
        "findings": [],
        "usage": {"inputTokens": 5},
    })
    .to_string()
}

fn message(role: &str, content: Value) -> String {
    json!({"role": role, "content": content}).to_string()
}

/// What a real build printed, with the model's JSON answer last.
fn build_output(answer: &str) -> String {
    let call = json!({
        "role": "assistant",
        "content": "Using tools to help you...",
        "tool_calls": [{"id": "call_915f78daf14b4409ab50", "type": "function",
            "function": {"name": "create_file",
                "arguments": "{\"path\": \"/w/hello.txt\", \"content\": \"hi\"}"}}],
    });
    [
        message("user", json!("You are a delegated coding agent started by handoff")),
        call.to_string(),
        json!({"role": "tool", "tool_call_id": "call_915f78daf14b4409ab50",
            "content": "Updated /w/hello.txt with 1 addition\n--- a//w/hello.txt\n+++ b//w/hello.txt"})
        .to_string(),
        message("assistant", json!(answer)),
    ]
    .join("\n")
        + "\n"
}

#[test]
fn the_last_assistant_message_is_the_answer() {
    let obj = answer_json();
    let (payload, usage) = answer(GrokCommunity.parse(&stdout(build_output(&obj))));
    assert_eq!(payload, obj.as_bytes());
    assert_eq!(usage, None, "the CLI reports no usage");
    ProviderOutput::parse_strict(&payload).unwrap();
    // Prose is handed on as it is: the engine's contract check refuses it.
    let (payload, _) = answer(GrokCommunity.parse(&stdout(build_output("Done: wrote the file."))));
    assert!(ProviderOutput::parse_strict(&payload).is_err());
}

#[test]
fn the_recorded_outputs_of_the_real_cli_read_as_answers() {
    for (name, text) in [
        ("grok-community-hello.out", "Hello! (from fake llm)"),
        ("grok-community-write.out", "Done: wrote the file."),
    ] {
        let (payload, _) = answer(GrokCommunity.parse(&stdout(fixture(name))));
        assert_eq!(payload, text.as_bytes(), "{name}");
    }
}

#[test]
fn the_clis_error_wordings_are_the_agents_failure() {
    for (content, code) in [
        (
            "Sorry, I encountered an error: Grok API error: 500 internal error",
            0,
        ),
        ("Sorry, I encountered an error: Connection error.", 0),
        (
            "Maximum tool execution rounds reached. Stopping to prevent infinite loops.",
            0,
        ),
        ("Error: 401 Incorrect API key provided", 1),
    ] {
        let out = [
            message("user", json!("hi")),
            message("assistant", json!(content)),
        ]
        .join("\n");
        let (message, usage) = failure(GrokCommunity.parse(&raw(out.as_bytes(), b"", Some(code))));
        assert_eq!(message, content);
        assert_eq!(usage, None);
    }
    // Nothing on stdout, the reason on stderr (a missing key).
    let (message, _) = failure(GrokCommunity.parse(&raw(
        b"",
        "❌ Error: API key required. Set GROK_API_KEY environment variable\n".as_bytes(),
        Some(1),
    )));
    assert!(message.starts_with("Error: API key required"), "{message}");
}

#[test]
fn output_without_a_final_answer_is_missing() {
    for out in [
        String::new(),
        "not json\n".into(),
        message("user", json!("hi")),
        message("assistant", Value::Null),
        message("assistant", json!("   ")),
        // Killed mid-turn: the last assistant message still calls tools.
        json!({"role": "assistant", "content": "Using tools to help you...",
            "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "bash", "arguments": "{}"}}]})
        .to_string(),
    ] {
        assert!(
            matches!(
                GrokCommunity.parse(&stdout(out.clone())),
                Err(OutputError::Missing)
            ),
            "{out:?}"
        );
    }
    // Notices around the messages are ignored.
    let obj = answer_json();
    let out = format!(
        "[dotenv] notice\n{}\nnoise\n",
        message("assistant", json!(obj))
    );
    let (payload, _) = answer(GrokCommunity.parse(&stdout(out)));
    assert_eq!(payload, obj.as_bytes());
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = GrokCommunity.parse(&RawOutput {
            stdout: bytes.clone(),
            stderr: bytes,
            exit_code: Some(0),
            answer_file: None,
        });
    }
}

// ---------------------------------------------------------------------------------------------
// The fake CLI and preflight

/// The planned process, run against the fake community `grok` (without the sandbox the
/// engine would wrap it in): a build writes the worktree and answers in its last message; an
/// API error is the agent's failure although the CLI exits 0.
#[test]
fn the_planned_process_runs_against_the_fake_community_cli() {
    let fx = Fixture::new();
    let fakes = Fakes::install(&fx);
    fakes.agents.set(handoff_testkit::keys::GROK, "community");
    let (inv, run) = plan(&fx, &fx.input("grok-community", Some("build"))).unwrap();
    let out = run_planned(&inv, &fakes.agents.bin("grok"), &run.prompt);
    assert_eq!(
        out.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (payload, _) = answer(GrokCommunity.parse(&out));
    let output = ProviderOutput::parse_strict(&payload).unwrap();
    assert_eq!(output.response, "grok finished build");
    assert!(fx.cwd.join("fake-build.txt").exists());
    assert!(
        !run.file("grok-home/.grok").exists(),
        "nothing saved into its settings"
    );

    fakes.agents.set(handoff_testkit::keys::MODE, "agent-error");
    let (inv, run) = plan(&fx, &fx.input("grok-community", Some("review"))).unwrap();
    let out = run_planned(&inv, &fakes.agents.bin("grok"), &run.prompt);
    assert_eq!(out.exit_code, Some(0));
    let (message, _) = failure(GrokCommunity.parse(&out));
    assert!(
        message.starts_with("Sorry, I encountered an error"),
        "{message}"
    );
}

#[tokio::test]
async fn preflight_accepts_the_community_cli_and_refuses_xais() {
    let w = ProbeWorld::new();
    w.agents.set(handoff_testkit::keys::GROK, "community");
    let result = GrokCommunity.preflight(&w.fake("grok"), &w.probe).await;
    assert_eq!(result.version.as_deref(), Some("1.0.1"));
    assert_eq!(result.failure, None);
    assert!(w.scratch_entries().is_empty(), "{:?}", w.scratch_entries());

    w.agents.set(handoff_testkit::keys::HELP, "missing");
    let result = GrokCommunity.preflight(&w.fake("grok"), &w.probe).await;
    let failure = result.failure.unwrap();
    assert!(
        failure.contains("does not list --max-tool-rounds"),
        "{failure}"
    );

    // xAI's CLI under this agent id: refused, naming the agent that drives it.
    let w = ProbeWorld::new();
    let result = GrokCommunity.preflight(&w.fake("grok"), &w.probe).await;
    let failure = result.failure.unwrap();
    assert!(failure.contains("xAI's grok CLI"), "{failure}");
    assert!(failure.contains("the agent `grok`"), "{failure}");
}

#[test]
fn help_texts_are_told_apart() {
    let community = handoff_testkit::fixtures::GROK_CLI_HELP;
    assert!(is_community_grok(community));
    assert_eq!(check_community_grok_help(community), None);
    let xai = check_community_grok_help(handoff_testkit::fixtures::GROK_HELP).unwrap();
    assert!(xai.contains("use the agent `grok`"), "{xai}");
    let other = check_community_grok_help("Usage: grok [options]\n").unwrap();
    assert!(other.contains("not the community"), "{other}");
}
