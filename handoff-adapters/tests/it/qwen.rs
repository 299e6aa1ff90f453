//! The Qwen Code adapter, through the public API only: invariants of the plan (its snapshots
//! are the harness's), the parser on outputs recorded from the real CLI (0.24.4, against a
//! local model server, `fixtures/qwen-*`) and synthetic event streams, garbage robustness.

use camino::Utf8Path;
use handoff_adapters::{QWEN_SPEC, Qwen};
use handoff_core::{
    FailureCause, Invocation, Observation, OutputError, Provider, RawOutput, Sessions, UsageSource,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::harness::*;
use crate::support::*;

const QWEN_EXE: &str = "/usr/local/bin/qwen";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        model: Some("qwen3-coder-plus"),
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

/// Qwen in the harness's tables.
pub(crate) const QWEN: Agent = Agent {
    harness: "qwen",
    exe: QWEN_EXE,
    fake: "qwen",
    profiles: PROFILES,
    describe: described_with_json_files,
    snapshots: "it__qwen__invocation",
    mcp: true,
    check_output: check,
};

fn check(raw: &RawOutput) {
    assert_output_kinds(&Qwen, raw, Some(1024));
}

/// The comma-separated values of a `--flag=a,b` argument.
fn listed<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    let prefix = format!("{flag}=");
    let all: Vec<&str> = args
        .iter()
        .filter_map(|a| a.strip_prefix(prefix.as_str()))
        .collect();
    assert_eq!(all.len(), 1, "{flag} given once: {args:?}");
    all[0].split(',').filter(|s| !s.is_empty()).collect()
}

fn settings_of(inv: &Invocation) -> Value {
    let path = &inv.env["QWEN_CODE_SYSTEM_SETTINGS_PATH"];
    let file = inv.files.iter().find(|f| f.path == *path).unwrap();
    serde_json::from_slice(&file.contents).unwrap()
}

#[test]
fn qwen_is_registered_with_its_spec() {
    let p = provider("qwen");
    let s = p.spec();
    assert_eq!(s.id, QWEN_SPEC.id);
    assert_eq!(s.executable, "qwen");
    assert_eq!(s.effort, ["low", "medium", "high"]);
    let turns = s.max_turns.unwrap();
    assert_eq!((turns.handoff, turns.advice), (12, 32));
    let g = s.grants;
    assert!(g.bash && g.bash_disable && g.web_search && g.mcp && g.write && g.nested_source);
    assert!(!s.native_filesystem_isolation && !s.native_bash_sandbox);
    assert!(
        !p.turns_counted_by_handoff(),
        "Qwen keeps its own turn limit"
    );
    assert!(p.receiver().is_some() && p.sessions().is_some());
}

/// A review without a shell: the prompt on stdin (array flags would take a trailing one), the
/// read tools only, everything else Qwen adds refused by name, no project MCP server.
#[test]
fn a_review_without_a_shell_reads_only() {
    let fx = Fixture::new();
    let mut input = fx.input("qwen", Some("review"));
    input.model = Some("qwen3-coder-plus".into());
    input.effort = Some("low".into());
    input.bash = Some("false".into());
    let inv = QWEN.plan(&fx, &input);
    assert_eq!(stdin_name(&inv.stdin), "prompt");
    assert!(
        !inv.args.iter().any(|a| a.contains("Review")),
        "no prompt in argv"
    );
    assert_eq!(arg_after(&inv.args, "--model"), Some("qwen3-coder-plus"));
    assert_eq!(arg_after(&inv.args, "--approval-mode"), Some("yolo"));
    assert_eq!(arg_after(&inv.args, "--max-session-turns"), Some("12"));
    assert_eq!(
        listed(&inv.args, "--core-tools"),
        ["read_file", "glob", "grep_search"]
    );
    let refused = listed(&inv.args, "--exclude-tools");
    for t in [
        "write_file",
        "edit",
        "run_shell_command",
        "web_fetch",
        "agent",
        "skill",
        "tool_search",
        "tool_call",
        "enter_worktree",
        "cron_create",
        "save_memory",
    ] {
        assert!(refused.contains(&t), "{t} not refused");
    }
    assert!(listed(&inv.args, "--allowed-mcp-server-names").is_empty());
    assert!(!inv.args.iter().any(|a| a.starts_with("--mcp-config")));
    // The effort and the memory call through the system settings file.
    let settings = settings_of(&inv);
    assert_eq!(
        settings["model"]["generationConfig"]["reasoning"]["effort"],
        "low"
    );
    assert_eq!(settings["memory"]["enableManagedAutoMemory"], false);
    assert_eq!(settings["disableAllHooks"], true);
}

#[test]
fn a_build_gets_the_file_and_shell_tools() {
    let fx = Fixture::new();
    let inv = QWEN.plan(&fx, &fx.input("qwen", Some("build")));
    assert_eq!(
        listed(&inv.args, "--core-tools"),
        [
            "read_file",
            "glob",
            "grep_search",
            "write_file",
            "edit",
            "run_shell_command"
        ]
    );
    let refused = listed(&inv.args, "--exclude-tools");
    assert!(refused.contains(&"web_fetch") && refused.contains(&"agent"));
    assert!(!refused.contains(&"write_file"));
    // No effort asked for: none set.
    assert!(settings_of(&inv).get("model").is_none());
    assert!(arg_after(&inv.args, "--model").is_none());
}

/// The run's MCP servers arrive in a private file, allowlisted by name; their secrets only
/// there.
#[test]
fn mcp_servers_arrive_in_a_private_file() {
    let fx = Fixture::new();
    let input = fx.with_mcp(fx.input("qwen", Some("review")));
    let inv = QWEN.plan(&fx, &input);
    let file = fx.run_path.join("qwen/mcp-config.json");
    assert!(inv.args.contains(&format!("--mcp-config={file}")));
    assert_eq!(
        listed(&inv.args, "--allowed-mcp-server-names"),
        ["local-docs", "remote-search"]
    );
    let config = inv.files.iter().find(|f| f.path == file).unwrap();
    let config: Value = serde_json::from_slice(&config.contents).unwrap();
    assert_eq!(
        config["mcpServers"]["local-docs"],
        json!({
            "command": "/usr/bin/env",
            "args": ["node", "/opt/docs/server.mjs", "--root", "a \"quoted\" dir"],
            "env": {"DOCS_TOKEN": DOCS_SECRET},
            "trust": true,
        })
    );
    assert_eq!(
        config["mcpServers"]["remote-search"]["headers"]["Authorization"],
        SEARCH_AUTH
    );
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
    env.insert("OPENAI_BASE_URL".into(), "http://127.0.0.1:9/v1".into());
    env.insert("OPENAI_API_KEY".into(), "sk-test".into());
    env.insert("QWEN_SANDBOX".into(), "docker".into());
    let inv = QWEN
        .plan_with(&fx, &fx.input("qwen", Some("build")), env)
        .unwrap();
    let root = fx.run_path.join("qwen");
    assert_eq!(inv.env["QWEN_HOME"], root.join("home").as_str());
    assert_eq!(
        inv.env["QWEN_CODE_SYSTEM_SETTINGS_PATH"],
        root.join("system-settings.json").as_str()
    );
    assert_eq!(inv.env["OPENAI_API_KEY"], "sk-test");
    assert!(!inv.env.contains_key("QWEN_SANDBOX"));
    assert_allowlisted(
        "qwen build",
        &inv.env,
        &QWEN_SPEC,
        &[
            "QWEN_HOME",
            "QWEN_CODE_SYSTEM_SETTINGS_PATH",
            "QWEN_CODE_SUPPRESS_YOLO_WARNING",
            "NO_COLOR",
        ],
    );
}

/// Under handoff's sandbox: a namespace where only the model server has an address, unless the
/// web or MCP servers need the host's network.
#[test]
fn under_handoffs_sandbox_only_the_model_server_is_reachable() {
    let fx = Fixture::new();
    let plan = |web: bool| {
        let mut input = fx.input("qwen", Some("build"));
        if web {
            input.web_search = Some("true".into());
        }
        let validated = validate(&input);
        let mut env = parent_env();
        env.insert("OPENAI_BASE_URL".into(), "http://127.0.0.1:18091/v1".into());
        let mut run = run_dir_for(&fx, &validated, Utf8Path::new(QWEN_EXE), env);
        run.handoff_sandbox = true;
        Qwen.invocation(&validated.request, &run).unwrap()
    };
    let sandbox = plan(false).sandbox.unwrap();
    assert!(sandbox.binds.is_empty() && !sandbox.offline_shell);
    let network = sandbox.network.unwrap();
    let hosts: Vec<String> = network
        .endpoints
        .iter()
        .map(|e| format!("{}:{}", e.host, e.port))
        .collect();
    assert_eq!(hosts, ["127.0.0.1:18091"]);
    assert!(network.transparent);
    assert!(plan(true).sandbox.unwrap().network.is_none());
    // Without the sandbox the receipt says so.
    let inv = QWEN.plan(&fx, &fx.input("qwen", Some("build")));
    assert!(inv.sandbox.is_none());
    assert!(inv.policy.get("sandbox").is_some());
}

fn recorded(name: &str) -> RawOutput {
    stdout(fixture(&format!("qwen-{name}.out")))
}

#[test]
fn recorded_outputs() {
    let limit = RawOutput {
        stderr: fixture("qwen-turn-limit.err"),
        exit_code: Some(53),
        ..recorded("turn-limit")
    };
    for (name, raw) in [
        ("hello", recorded("hello")),
        ("write", recorded("write")),
        ("mcp", recorded("mcp")),
        ("turn-limit", limit),
    ] {
        let obs = Qwen.parse(&raw);
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_suffix(name);
        settings.bind(|| insta::assert_json_snapshot!("parse", describe_observation(&obs)));
    }
}

#[test]
fn the_result_event_is_the_answer_with_its_tokens() {
    let (payload, usage) = answer(Qwen.parse(&recorded("write")));
    assert_eq!(payload, b"FAKE_FINAL");
    let u = usage.unwrap();
    assert_eq!(u.source, UsageSource::ProviderEnvelope);
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.total_tokens),
        (Some(200), Some(14), Some(214))
    );
    assert_eq!((u.cache_read_tokens, u.cost_usd), (Some(0), None));
    // `-o json` prints the same events as one array.
    let events: Vec<Value> = String::from_utf8(fixture("qwen-write.out"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (array, _) = answer(Qwen.parse(&stdout(Value::Array(events).to_string().into_bytes())));
    assert_eq!(array, b"FAKE_FINAL");
}

#[test]
fn failures_are_the_agents_own() {
    let (message, _) = failure(Qwen.parse(&stdout(fixture("api-qwen-auth.out"))));
    assert_eq!(
        message,
        "error_during_execution: [API Error: 401 fake failure 401]"
    );
    // The turn limit: exit 53 and a line on stderr, or its JSON form.
    let limit = RawOutput {
        stderr: fixture("qwen-turn-limit.err"),
        exit_code: Some(53),
        ..recorded("turn-limit")
    };
    let (message, _) = failure(Qwen.parse(&limit));
    assert!(
        message.starts_with("max_turns: Reached max session turns"),
        "{message}"
    );
    let json_limit = RawOutput {
        stderr: br#"{"error":{"type":"FatalTurnLimitedError","message":"Reached max session turns for this session.","code":53}}"#.to_vec(),
        exit_code: Some(53),
        ..RawOutput::default()
    };
    let (message, _) = failure(Qwen.parse(&json_limit));
    assert_eq!(
        message,
        "max_turns: Reached max session turns for this session."
    );
    let fatal = RawOutput {
        stderr:
            br#"{"error":{"type":"FatalAuthenticationError","message":"401 no key","code":41}}"#
                .to_vec(),
        exit_code: Some(41),
        ..RawOutput::default()
    };
    match Qwen.parse(&fatal) {
        Ok(Observation::AgentFailure { reason, .. }) => {
            assert_eq!(reason.cause, FailureCause::Auth)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn contract_failures_are_invalid_output() {
    for (what, out) in [
        (
            "no result event",
            lines(&[json!({"type": "assistant", "message": {}})]),
        ),
        ("not JSON", b"{\"type\":\"result\"}\nnot json\n".to_vec()),
    ] {
        assert!(
            matches!(Qwen.parse(&stdout(out)), Err(OutputError::Envelope { .. })),
            "{what}"
        );
    }
    assert!(matches!(
        Qwen.parse(&stdout(lines(&[
            json!({"type": "result", "is_error": false})
        ]))),
        Err(OutputError::Missing)
    ));
}

fn qwen_event() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec!["assistant", "user", "result", "system", "other"]);
    let anything = prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(|n| json!(n)),
        "\\PC{0,20}".prop_map(|s| json!(s)),
        Just(json!([])),
        Just(json!({"content": [{"type": "tool_use", "name": 3}]})),
        Just(json!({"input_tokens": "x"})),
    ];
    (kind, anything.clone(), anything, any::<bool>()).prop_map(|(k, a, b, e)| {
        json!({"type": k, "message": a, "result": b, "usage": a, "is_error": e, "error": b})
    })
}

proptest! {
    /// Event-shaped streams with any values never panic.
    #[test]
    fn event_like_output_never_panics(events in prop::collection::vec(qwen_event(), 0..6)) {
        check(&stdout(lines(&events)));
        for e in &events {
            let _ = Qwen.progress(e.to_string().as_bytes());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The testkit's fake `qwen`

/// Every mode against the fake: it writes only in writing modes and answers.
#[test]
fn fake_agent_runs_every_mode() {
    let fx = Fixture::new();
    let fakes = crate::fakes::Fakes::install(&fx);
    let input = |mode: Option<&str>| fx.input("qwen", mode);
    fakes.every_mode(&QWEN, input, |mode_name, _, out| {
        let (payload, usage) = answer(Qwen.parse(out));
        let payload: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(payload["status"], json!("completed"), "{mode_name}");
        assert_eq!(
            payload["response"],
            json!(format!("qwen finished {mode_name}"))
        );
        assert!(usage.unwrap().input_tokens.unwrap() >= 100, "{mode_name}");
        // handoff's settings turned the memory call off.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("managed-auto-memory"), "{stderr}");
    });
    for r in fakes.agents.invocations() {
        assert!(r["stdin"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
    }
}

/// The fake's session store: the run's records under `$QWEN_HOME/projects/<slug>/chats/`.
#[test]
fn fake_agent_keeps_its_session_in_the_runs_home() {
    let fx = Fixture::new();
    let fakes = crate::fakes::Fakes::install(&fx);
    let out = fakes.run(&QWEN, &fx.input("qwen", Some("review")));
    let text = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let id = result["session_id"].as_str().unwrap();
    let slug = fx
        .cwd
        .as_str()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    let file = fx
        .run_path
        .join(format!("qwen/home/projects/{slug}/chats/{id}.jsonl"));
    let t = Qwen.read_transcript(&file).unwrap();
    assert_eq!(t.messages.len(), 2);
}

#[tokio::test]
async fn preflight_against_the_fake() {
    let w = crate::fakes::ProbeWorld::new();
    let exe = w.fake("qwen");
    let ok = Qwen.preflight(&exe, &w.probe).await;
    assert_eq!(ok.version.as_deref(), Some("0.24.4"));
    assert_eq!(ok.failure, None);
    w.agents.set("HANDOFF_FAKE_HELP", "missing");
    let missing = Qwen.preflight(&exe, &w.probe).await;
    let failure = missing.failure.unwrap();
    assert!(
        failure.contains("`qwen --help` does not list --max-session-turns"),
        "{failure}"
    );
    assert!(w.scratch_entries().is_empty());
}
