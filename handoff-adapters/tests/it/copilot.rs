//! The GitHub Copilot CLI adapter, through the public API only: invariants of the plan (its
//! snapshots are the harness's), the parser on outputs recorded from the real CLI (1.0.102,
//! against a local model server, `fixtures/copilot-*`) and synthetic event streams, garbage
//! robustness, and the usage file.

use std::collections::BTreeMap;

use camino::Utf8Path;
use handoff_adapters::{COPILOT_SPEC, Copilot, copilot_usage};
use handoff_core::{
    AnswerSource, Observation, OutputError, Provider, RawOutput, StdinSource, UsageSource,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::harness::*;
use crate::support::*;

const COPILOT_EXE: &str = "/usr/local/bin/copilot";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        model: Some("gpt-4.1"),
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

/// Copilot in the harness's tables.
pub(crate) const COPILOT: Agent = Agent {
    harness: "copilot",
    exe: COPILOT_EXE,
    fake: "copilot",
    profiles: PROFILES,
    describe: described_with_json_files,
    snapshots: "it__copilot__invocation",
    mcp: true,
    check_output: check,
};

/// The values of a variadic flag: the arguments after it up to the next flag.
fn values_after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    args.iter()
        .skip_while(|a| *a != flag)
        .skip(1)
        .take_while(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect()
}

fn check(raw: &RawOutput) {
    assert_output_kinds(&Copilot, raw, Some(1024));
}

#[test]
fn copilot_is_registered_with_its_spec() {
    let p = provider("copilot");
    let s = p.spec();
    assert_eq!(s.id, COPILOT_SPEC.id);
    assert_eq!(s.executable, "copilot");
    assert_eq!(
        s.effort,
        ["none", "minimal", "low", "medium", "high", "xhigh", "max"]
    );
    let turns = s.max_turns.unwrap();
    assert_eq!((turns.handoff, turns.advice), (12, 32));
    let g = s.grants;
    assert!(g.bash && g.bash_disable && g.web_search && g.mcp && g.write && g.nested_source);
    assert!(!s.native_filesystem_isolation && !s.native_bash_sandbox);
    assert!(p.turns_counted_by_handoff());
    assert!(p.receiver().is_some() && p.sessions().is_some());
}

/// A review without a shell: the prompt on stdin, the read tools only, every other kind
/// denied, the usage file beside the stdout answer.
#[test]
fn a_review_without_a_shell_reads_only() {
    let fx = Fixture::new();
    let mut input = fx.input("copilot", Some("review"));
    input.model = Some("gpt-4.1".into());
    input.effort = Some("xhigh".into());
    input.bash = Some("false".into());
    let inv = COPILOT.plan(&fx, &input);
    let usage = fx.run_path.join("copilot/usage.json");
    let expected: Vec<String> = [
        "--output-format",
        "json",
        "--no-ask-user",
        "--no-custom-instructions",
        "--no-auto-update",
        "--disable-builtin-mcps",
        "--allow-all-tools",
        "--secret-env-vars=COPILOT_PROVIDER_API_KEY,COPILOT_PROVIDER_BEARER_TOKEN,COPILOT_GITHUB_TOKEN",
        "--usage-output-file",
        usage.as_str(),
        "--model",
        "gpt-4.1",
        "--reasoning-effort",
        "xhigh",
        "--available-tools",
        "view",
        "grep",
        "glob",
        "--deny-tool",
        "write",
        "--deny-tool",
        "shell",
        "--deny-tool",
        "url",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(inv.args, expected);
    assert_eq!(inv.stdin, StdinSource::Prompt);
    assert_eq!(inv.answer, AnswerSource::StdoutWithReport(usage));
    assert!(inv.files.is_empty());
    // The prompt is never on the command line.
    assert!(!inv.args.iter().any(|a| a == "-p" || a == "--prompt"));
}

#[test]
fn a_build_gets_the_file_and_shell_tools() {
    let fx = Fixture::new();
    let inv = COPILOT.plan(&fx, &fx.input("copilot", Some("build")));
    let tools = values_after(&inv.args, "--available-tools");
    assert_eq!(
        tools,
        [
            "view",
            "grep",
            "glob",
            "create",
            "edit",
            "bash",
            "read_bash",
            "write_bash",
            "stop_bash",
            "list_bash"
        ]
    );
    assert!(!tools.contains(&"task"));
    assert_eq!(args_after(&inv.args, "--deny-tool"), ["url"]);
}

/// With MCP servers the tool list becomes a blocklist of every known built-in tool not granted
/// (the servers' tools are not known in advance), and the servers arrive in a private file.
#[test]
fn mcp_servers_arrive_in_a_private_file() {
    let fx = Fixture::new();
    let input = fx.with_mcp(fx.input("copilot", Some("review")));
    let inv = COPILOT.plan(&fx, &input);
    assert!(!inv.args.iter().any(|a| a == "--available-tools"));
    let excluded = values_after(&inv.args, "--excluded-tools");
    for t in ["task", "skill", "create", "edit", "web_fetch"] {
        assert!(excluded.contains(&t), "{t} not excluded");
    }
    let file = fx.run_path.join("copilot/mcp-config.json");
    assert_eq!(
        arg_after(&inv.args, "--additional-mcp-config"),
        Some(format!("@{file}").as_str())
    );
    let config: Value = serde_json::from_slice(&inv.files[0].contents).unwrap();
    assert_eq!(
        config["mcpServers"]["local-docs"],
        json!({
            "type": "local",
            "command": "/usr/bin/env",
            "args": ["node", "/opt/docs/server.mjs", "--root", "a \"quoted\" dir"],
            "env": {"DOCS_TOKEN": DOCS_SECRET},
            "tools": ["*"],
        })
    );
    assert_eq!(
        config["mcpServers"]["remote-search"]["headers"]["Authorization"],
        SEARCH_AUTH
    );
    // The secrets are in the file, never in argv or the environment, and are masked.
    for s in MCP_SECRETS {
        assert!(!inv.args.iter().any(|a| a.contains(s)));
        assert!(!inv.env.values().any(|v| v.contains(s)));
    }
    assert!(inv.secrets.contains(&DOCS_SECRET.to_owned()));
}

#[test]
fn the_configuration_root_is_the_runs_own() {
    let fx = Fixture::new();
    let mut env = parent_env();
    env.insert(
        "COPILOT_PROVIDER_BASE_URL".into(),
        "http://127.0.0.1:9/v1".into(),
    );
    env.insert("COPILOT_PROVIDER_API_KEY".into(), "sk-byok-test".into());
    env.insert("COPILOT_ALLOW_ALL".into(), "true".into());
    env.insert("GH_TOKEN".into(), "gh-broad-token".into());
    let inv = COPILOT
        .plan_with(&fx, &fx.input("copilot", Some("build")), env)
        .unwrap();
    let root = fx.run_path.join("copilot");
    assert_eq!(inv.env["COPILOT_HOME"], root.join("home").as_str());
    assert_eq!(inv.env["COPILOT_CACHE_HOME"], root.join("cache").as_str());
    assert_eq!(inv.env["COPILOT_AUTO_UPDATE"], "false");
    assert_eq!(inv.env["COPILOT_PROVIDER_API_KEY"], "sk-byok-test");
    // BYOK without the web: offline (no GitHub service at all).
    assert_eq!(inv.env["COPILOT_OFFLINE"], "true");
    // Trusting the worktree would load its hooks, skills and MCP servers.
    assert!(!inv.env.contains_key("COPILOT_ALLOW_ALL"));
    assert!(!inv.env.contains_key("GH_TOKEN"));
    assert_allowlisted(
        "copilot build",
        &inv.env,
        &COPILOT_SPEC,
        &[
            "COPILOT_HOME",
            "COPILOT_CACHE_HOME",
            "COPILOT_AUTO_UPDATE",
            "COPILOT_OFFLINE",
            "NO_COLOR",
        ],
    );
    // With the web granted Copilot stays online (its web tool needs it).
    let mut input = fx.input("copilot", Some("build"));
    input.web_search = Some("true".into());
    let mut env = parent_env();
    env.insert(
        "COPILOT_PROVIDER_BASE_URL".into(),
        "http://127.0.0.1:9/v1".into(),
    );
    let inv = COPILOT.plan_with(&fx, &input, env).unwrap();
    assert!(!inv.env.contains_key("COPILOT_OFFLINE"));
    // Without a provider of the user's, never offline.
    let inv = COPILOT.plan(&fx, &fx.input("copilot", Some("build")));
    assert!(!inv.env.contains_key("COPILOT_OFFLINE"));
}

/// Under handoff's sandbox: the package Copilot extracted into the user's cache is mounted
/// read-only where the run's package cache points, and the way out is handoff's proxy.
#[test]
fn under_handoffs_sandbox_the_package_cache_is_read_only() {
    let fx = Fixture::new();
    let validated = validate(&fx.input("copilot", Some("build")));
    let mut env = parent_env();
    env.insert(
        "COPILOT_PROVIDER_BASE_URL".into(),
        "http://127.0.0.1:18091/v1".into(),
    );
    let mut run = run_dir_for(&fx, &validated, Utf8Path::new(COPILOT_EXE), env);
    run.handoff_sandbox = true;
    let inv = Copilot.invocation(&validated.request, &run).unwrap();
    let pkg = fx.run_path.join("copilot/pkg");
    assert_eq!(inv.env["COPILOT_PKG_CACHE_HOME"], pkg.as_str());
    let sandbox = inv.sandbox.unwrap();
    assert_eq!(
        sandbox.binds,
        [handoff_core::sandbox::Bind {
            source: "/home/tester/.cache/copilot/pkg".into(),
            dest: pkg.join("pkg"),
            writable: false,
            secret: false,
        }]
    );
    assert!(!sandbox.offline_shell);
    let network = sandbox.network.unwrap();
    let hosts: Vec<String> = network
        .endpoints
        .iter()
        .map(|e| format!("{}:{}", e.host, e.port))
        .collect();
    assert_eq!(hosts, ["127.0.0.1:18091"]);
    assert_eq!(network.public_hosts, None);
    // Without the sandbox the receipt says so.
    let inv = COPILOT.plan(&fx, &fx.input("copilot", Some("build")));
    assert!(inv.sandbox.is_none());
    assert!(inv.policy.get("sandbox").is_some());
}

#[test]
fn the_package_cache_follows_copilots_variables() {
    let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let cache = |e| {
        let validated_env: BTreeMap<String, String> = e;
        let fx = Fixture::new();
        let validated = validate(&fx.input("copilot", Some("review")));
        let mut run = run_dir_for(&fx, &validated, Utf8Path::new(COPILOT_EXE), validated_env);
        run.handoff_sandbox = true;
        let inv = Copilot.invocation(&validated.request, &run).unwrap();
        inv.sandbox
            .unwrap()
            .binds
            .first()
            .map(|b| b.source.to_string())
    };
    assert_eq!(
        cache(env(&[("HOME", "/h"), ("COPILOT_PKG_CACHE_HOME", "/p")])),
        Some("/p/pkg".into())
    );
    assert_eq!(
        cache(env(&[("HOME", "/h"), ("COPILOT_CACHE_HOME", "/c")])),
        Some("/c/pkg".into())
    );
    assert_eq!(
        cache(env(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/x")])),
        Some("/x/copilot/pkg".into())
    );
    assert_eq!(cache(env(&[])), None);
}

// ---------------------------------------------------------------------------------------------
// Output

/// A recorded run with its usage file.
fn recorded(name: &str) -> RawOutput {
    RawOutput {
        answer_file: Some(fixture(&format!("copilot-{name}.usage.json"))),
        ..stdout(fixture(&format!("copilot-{name}.out")))
    }
}

#[test]
fn recorded_outputs() {
    for (name, raw) in [
        ("review", recorded("review")),
        ("write", recorded("write")),
        ("error", stdout(fixture("copilot-error.out"))),
        (
            "review-without-usage-file",
            stdout(fixture("copilot-review.out")),
        ),
    ] {
        let obs = Copilot.parse(&raw);
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_suffix(name);
        settings.bind(|| insta::assert_json_snapshot!("parse", describe_observation(&obs)));
    }
}

#[test]
fn usage_comes_from_the_usage_file_and_never_as_dollars() {
    let (_, usage) = answer(Copilot.parse(&recorded("write")));
    let u = usage.unwrap();
    assert_eq!(u.source, UsageSource::ProviderEnvelope);
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.total_tokens),
        (Some(240), Some(60), Some(300))
    );
    assert_eq!(u.cache_read_tokens, Some(40));
    assert_eq!(u.cost_usd, None);
    assert_eq!(u.premium_requests, Some(0.0));
    let report = copilot_usage(&fixture("copilot-write.usage.json")).unwrap();
    assert_eq!(report.input_tokens, 240);
    // Two models' counts add up.
    let two = json!({"totalPremiumRequestCost": 2.5, "modelMetrics": {
        "a": {"usage": {"inputTokens": 10, "outputTokens": 1}},
        "b": {"usage": {"inputTokens": 5, "outputTokens": 2, "cacheReadTokens": 3}},
    }});
    let r = copilot_usage(two.to_string().as_bytes()).unwrap();
    assert_eq!(
        (r.input_tokens, r.output_tokens, r.cache_read_tokens),
        (15, 3, 3)
    );
    assert_eq!(r.premium_requests, Some(2.5));
    assert_eq!(copilot_usage(b"[]"), None);
    assert_eq!(copilot_usage(b"{\"modelMetrics\": 3}"), None);
}

fn event(kind: &str, data: Value) -> Value {
    json!({"type": kind, "data": data, "id": "e", "timestamp": "t"})
}

fn result_event(code: i64) -> Value {
    json!({"type": "result", "sessionId": "7a2e5574-0000-4000-8000-000000000000",
           "exitCode": code, "usage": {"premiumRequests": 1}})
}

#[test]
fn the_last_message_without_tool_requests_is_the_answer() {
    let out = lines(&[
        event(
            "assistant.message",
            json!({"content": "first", "toolRequests": []}),
        ),
        event(
            "assistant.message",
            json!({"content": "calling", "toolRequests": [{"name": "view"}]}),
        ),
        event(
            "assistant.message",
            json!({"content": "final", "toolRequests": []}),
        ),
        event(
            "assistant.message",
            json!({"content": "  ", "toolRequests": []}),
        ),
        result_event(0),
    ]);
    let (payload, usage) = answer(Copilot.parse(&stdout(out)));
    assert_eq!(payload, b"final");
    // Without the usage file: the premium requests alone, no tokens.
    let u = usage.unwrap();
    assert_eq!((u.input_tokens, u.premium_requests), (None, Some(1.0)));
}

#[test]
fn contract_failures_are_invalid_output() {
    let msg = event(
        "assistant.message",
        json!({"content": "x", "toolRequests": []}),
    );
    for (what, out) in [
        ("no result event", lines(std::slice::from_ref(&msg))),
        (
            "two result events",
            lines(&[msg.clone(), result_event(0), result_event(0)]),
        ),
        ("not JSON", b"{\"type\":\"result\"}\nnot json\n".to_vec()),
        ("no type", lines(&[json!({"data": {}})])),
    ] {
        assert!(
            matches!(
                Copilot.parse(&stdout(out)),
                Err(OutputError::Envelope { .. })
            ),
            "{what}"
        );
    }
    assert!(matches!(
        Copilot.parse(&stdout(lines(&[result_event(0)]))),
        Err(OutputError::Missing)
    ));
}

#[test]
fn errors_are_the_agents_own_failures() {
    let (message, _) = failure(Copilot.parse(&stdout(fixture("copilot-error.out"))));
    assert_eq!(message, "400 fake failure");
    let limited = lines(&[
        event(
            "session.error",
            json!({"errorType": "rate_limit", "message": "429 slow down", "statusCode": 429}),
        ),
        result_event(1),
    ]);
    match Copilot.parse(&stdout(limited)) {
        Ok(Observation::AgentFailure { reason, .. }) => {
            assert_eq!(reason.cause, handoff_core::FailureCause::RateLimited)
        }
        other => panic!("{other:?}"),
    }
    let (message, _) = failure(Copilot.parse(&stdout(lines(&[result_event(3)]))));
    assert!(message.contains("exit code 3"), "{message}");
}

fn copilot_event() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec![
        "assistant.message",
        "session.error",
        "result",
        "assistant.turn_start",
        "tool.execution_start",
        "other",
    ]);
    let anything = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(|n| json!(n)),
        "\\PC{0,20}".prop_map(|s| json!(s)),
        Just(json!([])),
        Just(json!({"content": 3, "toolRequests": "x"})),
        Just(json!({"content": "answer", "toolRequests": []})),
    ];
    (kind, anything.clone(), anything).prop_map(|(k, data, extra)| {
        json!({"type": k, "data": data, "sessionId": extra, "exitCode": extra, "usage": extra})
    })
}

proptest! {
    /// Event-shaped streams with any values, and any usage file, never panic.
    #[test]
    fn event_like_output_never_panics(
        events in prop::collection::vec(copilot_event(), 0..6),
        usage in prop::option::of(prop_oneof![
            Just(b"{}".to_vec()),
            "\\PC{0,40}".prop_map(String::into_bytes),
            (any::<u64>(), any::<i64>()).prop_map(|(a, b)| json!({"modelMetrics": {"m": {"usage": {"inputTokens": a, "outputTokens": b}}}, "totalPremiumRequestCost": b}).to_string().into_bytes()),
        ]),
    ) {
        let raw = RawOutput { answer_file: usage, ..stdout(lines(&events)) };
        check(&raw);
        for e in &events {
            let _ = Copilot.progress(e.to_string().as_bytes());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The testkit's fake `copilot`

/// Every mode against the fake: it writes only in writing modes, answers, and its usage file
/// is read beside its stdout.
#[test]
fn fake_agent_runs_every_mode() {
    let fx = Fixture::new();
    let fakes = crate::fakes::Fakes::install(&fx);
    let input = |mode: Option<&str>| fx.input("copilot", mode);
    fakes.every_mode(&COPILOT, input, |mode_name, _, out| {
        let usage_file = fx.run_path.join("copilot/usage.json");
        let raw = RawOutput {
            answer_file: std::fs::read(&usage_file).ok(),
            ..out.clone()
        };
        let (payload, usage) = answer(Copilot.parse(&raw));
        let payload: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(payload["status"], json!("completed"), "{mode_name}");
        assert_eq!(
            payload["response"],
            json!(format!("copilot finished {mode_name}"))
        );
        let usage = usage.unwrap();
        assert_eq!(usage.source, UsageSource::ProviderEnvelope, "{mode_name}");
        assert!(usage.input_tokens.unwrap() >= 120, "{mode_name}");
        assert_eq!(usage.cost_usd, None);
        let _ = std::fs::remove_file(&usage_file);
    });
    // The prompt went through stdin, never argv.
    for r in fakes.agents.invocations() {
        assert!(r["stdin"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
    }
}

/// The fake's session store: the run's events under `$COPILOT_HOME/session-state/<id>/`.
#[test]
fn fake_agent_keeps_its_session_in_the_runs_home() {
    let fx = Fixture::new();
    let fakes = crate::fakes::Fakes::install(&fx);
    let out = fakes.run(&COPILOT, &fx.input("copilot", Some("review")));
    let text = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let id = result["sessionId"].as_str().unwrap();
    let events = fx
        .run_path
        .join(format!("copilot/home/session-state/{id}/events.jsonl"));
    let saved = std::fs::read_to_string(&events).unwrap();
    assert!(saved.starts_with("{\"type\":\"session.start\""), "{saved}");
    assert!(saved.contains("\"assistant.message\""));
}

#[tokio::test]
async fn preflight_against_the_fake() {
    let w = crate::fakes::ProbeWorld::new();
    let exe = w.fake("copilot");
    let ok = Copilot.preflight(&exe, &w.probe).await;
    assert_eq!(ok.version.as_deref(), Some("GitHub Copilot CLI 1.0.102."));
    assert_eq!(ok.failure, None);
    w.agents.set("HANDOFF_FAKE_HELP", "missing");
    let missing = Copilot.preflight(&exe, &w.probe).await;
    let failure = missing.failure.unwrap();
    assert!(
        failure.contains("`copilot --help` does not list --usage-output-file"),
        "{failure}"
    );
    assert!(w.scratch_entries().is_empty());
}
