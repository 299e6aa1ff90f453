//! The Gemini CLI adapter, through the public API only: invariants of the plan (its snapshots
//! are the harness's), the parser on outputs recorded from the real CLI (0.61.0, against a local
//! model server, `fixtures/gemini-*` and `fixtures/api-gemini-*`) and synthetic event streams,
//! garbage robustness, and the fake `gemini`.

use handoff_adapters::{GEMINI_DEFAULT_MODEL, GEMINI_SPEC, Gemini, gemini_thinking_budget};
use handoff_core::{
    AnswerSource, FailureCause, Invocation, Observation, OutputError, Provider, RawOutput, RunDir,
    StdinSource, UsageSource,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::harness::*;
use crate::support::*;

const GEMINI_EXE: &str = "/usr/local/bin/gemini";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        model: Some("gemini-2.5-flash"),
        effort: Some("high"),
        max_turns: Some("7"),
        ..DEFAULTS
    },
    Profile {
        name: "mcp-web",
        web_search: Some("true"),
        mcp: true,
        ..DEFAULTS
    },
];

/// Gemini in the harness's tables.
pub(crate) const GEMINI: Agent = Agent {
    harness: "gemini",
    exe: GEMINI_EXE,
    fake: "gemini",
    profiles: PROFILES,
    describe,
    snapshots: "it__gemini__invocation",
    mcp: true,
    check_output: check,
};

/// The private files: the settings parsed, the policy as text.
fn files(inv: &Invocation) -> Vec<Value> {
    inv.files
        .iter()
        .map(|f| {
            let contents = serde_json::from_slice::<Value>(&f.contents)
                .unwrap_or_else(|_| json!(String::from_utf8_lossy(&f.contents)));
            json!({"path": f.path, "contents": contents})
        })
        .collect()
}

/// The plan as JSON.
fn describe(inv: &Invocation, _run: &RunDir) -> Value {
    json!({
        "program": inv.program,
        "args": inv.args,
        "env": inv.env,
        "cwd": inv.cwd,
        "stdin": stdin_name(&inv.stdin),
        "dirs": inv.dirs,
        "files": files(inv),
        "answer": answer_name(&inv.answer),
        "policy": inv.policy,
        "secrets": inv.secrets,
    })
}

fn check(raw: &RawOutput) {
    assert_output_kinds(&Gemini, raw, Some(1024));
}

/// The run's settings.
fn settings(inv: &Invocation) -> Value {
    let f = inv
        .files
        .iter()
        .find(|f| f.path.as_str().ends_with("/home/.gemini/settings.json"))
        .expect("a settings file");
    serde_json::from_slice(&f.contents).unwrap()
}

/// The run's deny policy, when any.
fn policy(inv: &Invocation) -> Option<String> {
    inv.files
        .iter()
        .find(|f| f.path.as_str().ends_with("/deny.toml"))
        .map(|f| String::from_utf8(f.contents.clone()).unwrap())
}

#[test]
fn gemini_is_registered_with_its_spec() {
    let p = provider("gemini");
    let s = p.spec();
    assert_eq!(s.id, GEMINI_SPEC.id);
    assert_eq!(s.executable, "gemini");
    assert_eq!(s.effort, ["low", "medium", "high"]);
    let turns = s.max_turns.unwrap();
    assert_eq!((turns.handoff, turns.advice), (12, 32));
    let g = s.grants;
    assert!(g.bash && g.bash_disable && g.web_search && g.mcp && g.write && g.nested_source);
    assert!(!s.native_filesystem_isolation && !s.native_bash_sandbox);
    assert!(!p.turns_counted_by_handoff());
}

/// A review without a shell: the prompt on stdin, the explicit default model, the read tools
/// only, and every other kind denied by an admin policy.
#[test]
fn a_review_without_a_shell_reads_only() {
    let fx = Fixture::new();
    let mut input = fx.input("gemini", Some("review"));
    input.bash = Some("false".into());
    let inv = GEMINI.plan(&fx, &input);
    let deny = fx.run_path.join("gemini/deny.toml");
    let expected: Vec<String> = [
        "--skip-trust",
        "--model",
        GEMINI_DEFAULT_MODEL,
        "--approval-mode",
        "yolo",
        "--output-format",
        "stream-json",
        "--extensions",
        "none",
        "--admin-policy",
        deny.as_str(),
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(inv.args, expected);
    assert_eq!(inv.stdin, StdinSource::Prompt);
    assert_eq!(inv.answer, AnswerSource::Stdout);
    let s = settings(&inv);
    assert_eq!(
        s["tools"]["core"],
        json!(["list_directory", "read_file", "grep_search", "glob"])
    );
    assert_eq!(s["security"]["auth"]["selectedType"], "gemini-api-key");
    assert_eq!(s["model"]["maxSessionTurns"], 12);
    assert!(s.get("modelConfigs").is_none() && s.get("mcpServers").is_none());
    let policy = policy(&inv).unwrap();
    for t in [
        "write_file",
        "replace",
        "run_shell_command",
        "web_fetch",
        "google_web_search",
    ] {
        assert!(policy.contains(&format!("\"{t}\"")), "{t}: {policy}");
    }
    assert!(policy.contains("decision = \"deny\""));
    // The prompt is never on the command line; the Gemini home is the run's own.
    assert!(!inv.args.iter().any(|a| a == "-p" || a == "--prompt"));
    assert_eq!(
        inv.env["GEMINI_CLI_HOME"],
        fx.run_path.join("gemini/home").as_str()
    );
}

#[test]
fn a_build_gets_the_file_and_shell_tools() {
    let fx = Fixture::new();
    let inv = GEMINI.plan(&fx, &fx.input("gemini", Some("build")));
    let s = settings(&inv);
    assert_eq!(
        s["tools"]["core"],
        json!([
            "list_directory",
            "read_file",
            "grep_search",
            "glob",
            "write_file",
            "replace",
            "run_shell_command",
            "list_background_processes",
            "read_background_output"
        ])
    );
    let policy = policy(&inv).unwrap();
    assert!(
        policy.contains("[\"web_fetch\",\"google_web_search\"]"),
        "{policy}"
    );
}

/// Effort is a thinking budget for the named model, the turn limit the settings' own.
#[test]
fn effort_and_turns_are_settings() {
    let fx = Fixture::new();
    let mut input = fx.input("gemini", Some("build"));
    input.model = Some("gemini-2.5-flash".into());
    input.effort = Some("low".into());
    input.max_turns = Some("3".into());
    let inv = GEMINI.plan(&fx, &input);
    assert_eq!(arg_after(&inv.args, "--model"), Some("gemini-2.5-flash"));
    let s = settings(&inv);
    assert_eq!(s["model"]["maxSessionTurns"], 3);
    assert_eq!(
        s["modelConfigs"]["overrides"][0],
        json!({"match": {"model": "gemini-2.5-flash"}, "modelConfig": {"generateContentConfig": {
            "thinkingConfig": {"thinkingBudget": 1024}}}})
    );
    assert_eq!(
        ["low", "medium", "high", "xhigh"].map(gemini_thinking_budget),
        [Some(1024), Some(8192), Some(24576), None]
    );
}

/// The run's MCP servers are settings of its own home, allowed by name; their secrets never
/// reach argv or the environment.
#[test]
fn mcp_servers_are_private_settings() {
    let fx = Fixture::new();
    let input = fx.with_mcp(fx.input("gemini", Some("review")));
    let inv = GEMINI.plan(&fx, &input);
    let s = settings(&inv);
    assert_eq!(
        s["mcpServers"]["local-docs"],
        json!({
            "command": "/usr/bin/env",
            "args": ["node", "/opt/docs/server.mjs", "--root", "a \"quoted\" dir"],
            "env": {"DOCS_TOKEN": DOCS_SECRET},
        })
    );
    assert_eq!(
        s["mcpServers"]["remote-search"]["headers"]["Authorization"],
        SEARCH_AUTH
    );
    assert!(
        s["mcpServers"]["remote-search"]
            .get("httpUrl")
            .or_else(|| s["mcpServers"]["remote-search"].get("url"))
            .is_some()
    );
    // Their tools are in the tool list by prefix (`tools.core` holds MCP tools too).
    let core = s["tools"]["core"].as_array().unwrap();
    assert!(core.contains(&json!("mcp_local-docs_*")), "{core:?}");
    assert!(core.contains(&json!("mcp_remote-search_*")), "{core:?}");
    let names = arg_after(&inv.args, "--allowed-mcp-server-names").unwrap();
    assert!(
        names.contains("local-docs") && names.contains("remote-search"),
        "{names}"
    );
    for secret in MCP_SECRETS {
        assert!(!inv.args.iter().any(|a| a.contains(secret)));
        assert!(!inv.env.values().any(|v| v.contains(secret)));
    }
    assert!(inv.secrets.contains(&DOCS_SECRET.to_owned()));
}

/// A base URL of the user's is honoured with the API key's auth type; Vertex AI when asked.
#[test]
fn the_auth_type_follows_the_users_endpoint() {
    let fx = Fixture::new();
    let mut env = parent_env();
    env.insert("GOOGLE_GEMINI_BASE_URL".into(), "http://127.0.0.1:9".into());
    env.insert("GEMINI_API_KEY".into(), "key-test".into());
    let inv = GEMINI
        .plan_with(&fx, &fx.input("gemini", Some("build")), env.clone())
        .unwrap();
    assert_eq!(inv.env["GOOGLE_GEMINI_BASE_URL"], "http://127.0.0.1:9");
    assert_eq!(inv.env["GEMINI_API_KEY"], "key-test");
    let s = settings(&inv);
    assert_eq!(s["security"]["auth"]["selectedType"], "gemini-api-key");
    assert_eq!(
        s["security"]["environmentVariableRedaction"]["blocked"][0],
        "GEMINI_API_KEY"
    );
    env.insert("GOOGLE_GENAI_USE_VERTEXAI".into(), "true".into());
    let inv = GEMINI
        .plan_with(&fx, &fx.input("gemini", Some("build")), env)
        .unwrap();
    assert_eq!(
        settings(&inv)["security"]["auth"]["selectedType"],
        "vertex-ai"
    );
}

#[test]
fn recorded_outputs() {
    for (name, raw) in [
        ("review", stdout(fixture("gemini-review.out"))),
        ("write", stdout(fixture("gemini-write.out"))),
        (
            "turn-limit",
            raw(&fixture("gemini-turn-limit.out"), b"", Some(53)),
        ),
    ] {
        let obs = Gemini.parse(&raw);
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_suffix(name);
        settings.bind(|| insta::assert_json_snapshot!("parse", describe_observation(&obs)));
    }
}

/// API failures as Gemini exits with them: the HTTP status modulo 256.
#[test]
fn api_failures_read_with_their_exit_codes() {
    for (file, code, cause, retry) in [
        ("api-gemini-auth.out", 145, FailureCause::Auth, None),
        (
            "api-gemini-rate-limited.out",
            173,
            FailureCause::RateLimited,
            Some(1200),
        ),
        (
            "api-gemini-server-error.out",
            244,
            FailureCause::ServerError,
            None,
        ),
    ] {
        match Gemini.parse(&raw(&fixture(file), b"", Some(code))) {
            Ok(Observation::AgentFailure {
                reason, message, ..
            }) => {
                assert_eq!(reason.cause, cause, "{file}: {message}");
                assert_eq!(reason.retry_after_seconds, retry, "{file}");
            }
            other => panic!("{file}: {other:?}"),
        }
    }
}

#[test]
fn usage_is_the_result_events_token_counts() {
    let (_, usage) = answer(Gemini.parse(&stdout(fixture("gemini-write.out"))));
    let u = usage.unwrap();
    assert_eq!(u.source, UsageSource::ProviderEnvelope);
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.total_tokens),
        (Some(200), Some(14), Some(214))
    );
    assert_eq!(u.cache_read_tokens, Some(0));
    assert_eq!(u.cost_usd, None);
}

fn result_event(status: &str) -> Value {
    json!({"type": "result", "timestamp": "t", "status": status,
           "stats": {"total_tokens": 10, "input_tokens": 8, "output_tokens": 2, "cached": 0}})
}

fn said(text: &str, delta: bool) -> Value {
    json!({"type": "message", "role": "assistant", "content": text, "delta": delta})
}

#[test]
fn the_text_after_the_last_tool_call_is_the_answer() {
    let out = lines(&[
        json!({"type": "init", "session_id": "s", "model": "m"}),
        json!({"type": "message", "role": "user", "content": "do it"}),
        said("Let me look.", true),
        json!({"type": "tool_use", "tool_name": "read_file", "tool_id": "t", "parameters": {}}),
        json!({"type": "tool_result", "tool_id": "t", "status": "success"}),
        said("{\"a\":", true),
        said("1}", true),
        result_event("success"),
    ]);
    let (payload, usage) = answer(Gemini.parse(&stdout(out)));
    assert_eq!(payload, b"{\"a\":1}");
    assert_eq!(usage.unwrap().input_tokens, Some(8));
    // A message that is not a delta replaces what came before.
    let out = lines(&[
        said("draft", true),
        said("final", false),
        result_event("success"),
    ]);
    assert_eq!(answer(Gemini.parse(&stdout(out))).0, b"final");
}

#[test]
fn contract_failures_are_invalid_output() {
    let msg = said("x", true);
    for (what, out) in [
        ("no result event", lines(std::slice::from_ref(&msg))),
        (
            "two result events",
            lines(&[
                msg.clone(),
                result_event("success"),
                result_event("success"),
            ]),
        ),
        ("not JSON", b"{\"type\":\"result\"}\nnot json\n".to_vec()),
        ("no type", lines(&[json!({"status": "success"})])),
        (
            "unknown status",
            lines(&[msg.clone(), result_event("maybe")]),
        ),
    ] {
        assert!(
            matches!(
                Gemini.parse(&stdout(out)),
                Err(OutputError::Envelope { .. })
            ),
            "{what}"
        );
    }
    // A tool call after the last text leaves no answer.
    let out = lines(&[
        msg,
        json!({"type": "tool_use", "tool_name": "glob", "tool_id": "t", "parameters": {}}),
        result_event("success"),
    ]);
    assert!(matches!(
        Gemini.parse(&stdout(out)),
        Err(OutputError::Missing)
    ));
}

#[test]
fn the_turn_limit_is_the_agents_own_failure() {
    let (message, usage) =
        failure(Gemini.parse(&raw(&fixture("gemini-turn-limit.out"), b"", Some(53))));
    assert!(message.contains("max session turns"), "{message}");
    assert_eq!(usage.unwrap().input_tokens, Some(100));
    // Success with a failing exit code is not an answer.
    let out = lines(&[said("x", true), result_event("success")]);
    let (message, _) = failure(Gemini.parse(&raw(&out, b"", Some(3))));
    assert!(message.contains("exited with code 3"), "{message}");
}

fn gemini_event() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec![
        "init",
        "message",
        "tool_use",
        "tool_result",
        "error",
        "result",
        "other",
    ]);
    let anything = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(|n| json!(n)),
        "\\PC{0,20}".prop_map(|s| json!(s)),
        Just(json!([])),
        Just(json!("assistant")),
        Just(json!("error")),
        Just(json!("success")),
        Just(json!({"message": "[API Error: {\"error\":{\"code\":429}}]"})),
    ];
    (kind, anything.clone(), anything.clone(), anything).prop_map(|(k, a, b, c)| {
        json!({"type": k, "role": a, "content": b, "delta": c, "status": b, "error": c, "stats": a,
               "tool_name": b, "parameters": c})
    })
}

proptest! {
    /// Event-shaped streams with any values and exit codes never panic.
    #[test]
    fn event_like_output_never_panics(
        events in prop::collection::vec(gemini_event(), 0..6),
        code in prop::option::of(any::<i32>()),
    ) {
        check(&raw(&lines(&events), b"", code));
        for e in &events {
            let _ = Gemini.progress(e.to_string().as_bytes());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The testkit's fake `gemini`

/// Every mode against the fake: it writes only in writing modes and answers.
#[test]
fn fake_agent_runs_every_mode() {
    let fx = Fixture::new();
    let fakes = crate::fakes::Fakes::install(&fx);
    let input = |mode: Option<&str>| fx.input("gemini", mode);
    fakes.every_mode(&GEMINI, input, |mode_name, _, out| {
        let (payload, usage) = answer(Gemini.parse(out));
        let payload: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(payload["status"], json!("completed"), "{mode_name}");
        assert_eq!(
            payload["response"],
            json!(format!("gemini finished {mode_name}"))
        );
        let usage = usage.unwrap();
        assert!(usage.input_tokens.unwrap() >= 100, "{mode_name}");
    });
    // The prompt went through stdin, never argv.
    for r in fakes.agents.invocations() {
        assert!(r["stdin"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
    }
}

/// The fake's session store: the run's conversation under the run's own Gemini home.
#[test]
fn fake_agent_keeps_its_session_in_the_runs_home() {
    let fx = Fixture::new();
    let fakes = crate::fakes::Fakes::install(&fx);
    let out = fakes.run(&GEMINI, &fx.input("gemini", Some("review")));
    let text = String::from_utf8_lossy(&out.stdout);
    let init: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let id = init["session_id"].as_str().unwrap();
    let tmp = fx.run_path.join("gemini/home/.gemini/tmp");
    let chats: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .flat_map(|p| std::fs::read_dir(p.path().join("chats")).unwrap().flatten())
        .map(|e| e.path())
        .collect();
    assert_eq!(chats.len(), 1, "{chats:?}");
    let name = chats[0].file_name().unwrap().to_str().unwrap();
    assert!(name.ends_with(&format!("-{}.jsonl", &id[..8])), "{name}");
    let saved = std::fs::read_to_string(&chats[0]).unwrap();
    assert!(saved.contains("\"type\":\"gemini\""), "{saved}");
}

#[tokio::test]
async fn preflight_against_the_fake() {
    let w = crate::fakes::ProbeWorld::new();
    let exe = w.fake("gemini");
    let ok = Gemini.preflight(&exe, &w.probe).await;
    assert_eq!(ok.version.as_deref(), Some("0.61.0"));
    assert_eq!(ok.failure, None);
    w.agents.set("HANDOFF_FAKE_HELP", "missing");
    let missing = Gemini.preflight(&exe, &w.probe).await;
    let failure = missing.failure.unwrap();
    assert!(
        failure.contains("`gemini --help` does not list --admin-policy"),
        "{failure}"
    );
    assert!(w.scratch_entries().is_empty());
}
