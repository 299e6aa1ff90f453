//! The Cursor adapter (`cursor-agent`, delegation.md §4.6), through the public API only: one
//! invocation snapshot per mode × grant profile, invariants of the plan (sandbox paths, private
//! state and MCP file, the comma refusal), the result-envelope parser, the stderr-only runtime
//! check, garbage robustness, the planned process run against the testkit's fake
//! `cursor-agent`, and preflight with its sandbox behaviour probe in a scratch directory.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::{CURSOR_SPEC, Cursor};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, Observation, OutputError, Provider, ProviderOutput,
    RawOutput, RunDir, RunInput, StdinSource,
};
use handoff_testkit::FakeAgents;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::grok::{
    DEFAULTS, MODES, ProbeWorld, Profile, answer, answer_name, assert_allowlisted,
    describe_observation, failure, fake_version, input_for, plan_full, plans_to_snapshot, raw,
    run_dir_for, run_planned, stdin_name, writes,
};
use crate::support::*;

const CURSOR_EXE: &str = "/usr/local/bin/cursor-agent";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "selected",
        bash: Some("true"),
        web_search: Some("false"),
        model: Some("sonnet-4"),
        ..DEFAULTS
    },
    Profile {
        name: "mcp",
        mcp: true,
        ..DEFAULTS
    },
];

fn plan_with(
    fx: &Fixture,
    input: &RunInput,
    env: BTreeMap<String, String>,
) -> Result<Invocation, InvocationError> {
    plan_full(fx, input, CURSOR_EXE, env).map(|(inv, _)| inv)
}

fn plan(fx: &Fixture, input: &RunInput) -> Invocation {
    plan_with(fx, input, parent_env()).unwrap_or_else(|e| panic!("invocation refused: {e}"))
}

fn describe(inv: &Invocation, _run: &RunDir) -> Value {
    let files: Vec<Value> = inv
        .files
        .iter()
        .map(|f| {
            let contents: Value = serde_json::from_slice(&f.contents).unwrap();
            json!({"path": f.path, "contents": contents})
        })
        .collect();
    json!({
        "program": inv.program,
        "args": inv.args,
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
fn invocation_snapshots() {
    for (settings, value) in plans_to_snapshot("cursor", CURSOR_EXE, PROFILES, &describe) {
        settings.bind(|| insta::assert_json_snapshot!("invocation", value));
    }
}

fn home(fx: &Fixture) -> Utf8PathBuf {
    fx.run_path.join("cursor-sandbox/home")
}

#[test]
fn cursor_is_registered_with_the_reference_capabilities() {
    let p = provider("cursor");
    let s = p.spec();
    assert_eq!(s.id, CURSOR_SPEC.id);
    assert_eq!(s.executable, "cursor-agent");
    assert_eq!(
        s.extra_dirs,
        [
            "~/.local/bin",
            "~/.cursor/bin",
            "/opt/homebrew/bin",
            "/usr/local/bin"
        ]
    );
    assert!(s.effort.is_empty());
    assert_eq!(s.advice_effort, None);
    assert!(s.max_turns.is_none());
    let g = s.grants;
    assert!(g.bash && !g.bash_disable && !g.web_search && g.mcp && g.write && g.nested_source);
    assert!(s.native_filesystem_isolation && s.native_bash_sandbox);
    assert_eq!(s.env_passthrough, ["CURSOR_API_KEY"]);
}

#[test]
fn plans_are_pure() {
    let fx = Fixture::new();
    for (_, mode) in MODES {
        let validated = validate(&fx.with_mcp(fx.input("cursor", *mode)));
        let run = run_dir_for(&fx, &validated, Utf8Path::new(CURSOR_EXE), parent_env());
        assert_eq!(
            Cursor.invocation(&validated.request, &run).unwrap(),
            Cursor.invocation(&validated.request, &run).unwrap()
        );
    }
}

#[test]
fn argv_follows_the_reference_without_env_dash_c() {
    let fx = Fixture::new();
    let cwd = fx.cwd.as_str();
    let mut input = fx.with_mcp(fx.input("cursor", Some("build")));
    input.model = Some("gpt-5".into());
    let inv = plan(&fx, &input);
    assert_eq!(
        inv.args,
        [
            "sandbox",
            "run",
            "--sandbox",
            "--network",
            "--allow-paths",
            cwd,
            CURSOR_EXE,
            "-p",
            "--output-format",
            "json",
            "--force",
            "--model",
            "gpt-5",
            "--approve-mcps",
        ]
    );
    assert!(!inv.args.iter().any(|a| a == "/usr/bin/env" || a == "-C"));
    // The worktree is the process's directory, inherited by the sandboxed agent.
    assert_eq!(inv.cwd, fx.cwd);
    assert_eq!(inv.program.as_str(), CURSOR_EXE);
    assert_eq!(inv.stdin, StdinSource::Prompt);
    assert_eq!(inv.answer, AnswerSource::Stdout);

    let review = plan(&fx, &fx.input("cursor", Some("review")));
    assert_eq!(
        review.args,
        [
            "sandbox",
            "run",
            "--sandbox",
            "--network",
            "--readonly-paths",
            cwd,
            CURSOR_EXE,
            "-p",
            "--output-format",
            "json",
        ]
    );
}

#[test]
fn sandbox_paths_and_force_follow_the_mode() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        for p in PROFILES {
            let inv = plan(&fx, &input_for(&fx, "cursor", *mode, p));
            let name = format!("{mode_name}/{}", p.name);
            let write = writes(*mode);
            let a = &inv.args;
            let (given, other) = if write {
                ("--allow-paths", "--readonly-paths")
            } else {
                ("--readonly-paths", "--allow-paths")
            };
            assert_eq!(arg_after(a, given), Some(fx.cwd.as_str()), "{name}");
            assert!(!a.iter().any(|x| x == other), "{name}");
            assert_eq!(a.iter().any(|x| x == "--force"), write, "{name}");
            assert_eq!(a.iter().any(|x| x == "--approve-mcps"), p.mcp, "{name}");
            assert_eq!(
                inv.policy["applyMode"],
                json!(if write {
                    "force"
                } else {
                    "force-omitted-native-read-only"
                }),
                "{name}"
            );
            assert_eq!(
                inv.policy["filesystem"],
                json!(if write {
                    "target-worktree-write"
                } else {
                    "target-worktree-read-only"
                }),
                "{name}"
            );
            // Everything the agent is given comes after the agent's own path.
            let agent = a.iter().position(|x| x == CURSOR_EXE).unwrap();
            assert_eq!(agent, 6, "{name}");
            assert!(!a.iter().any(|x| x == "--effort"), "{name}");
        }
    }
}

#[test]
fn cursor_state_is_private_to_the_run() {
    let fx = Fixture::new();
    let home = home(&fx);
    for (mode_name, mode) in MODES {
        let inv = plan(&fx, &fx.input("cursor", *mode));
        assert_eq!(inv.env.get("HOME"), Some(&home.to_string()), "{mode_name}");
        for (var, dir) in [
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_CACHE_HOME", "cache"),
            ("XDG_STATE_HOME", "state"),
            ("XDG_DATA_HOME", "data"),
        ] {
            assert_eq!(inv.env.get(var), Some(&home.join(dir).to_string()));
            assert!(inv.dirs.contains(&home.join(dir)), "{mode_name}: {dir}");
        }
        assert_eq!(inv.dirs[0], fx.run_path.join("cursor-sandbox"));
        assert_eq!(inv.dirs[1], home);
        assert!(inv.files.is_empty());
        assert!(!inv.dirs.contains(&home.join(".cursor")));
        for d in &inv.dirs {
            assert!(d.starts_with(&fx.run_path), "{d}");
        }
    }
}

#[test]
fn mcp_servers_go_only_into_the_private_mcp_file() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        let inv = plan(&fx, &fx.with_mcp(fx.input("cursor", *mode)));
        let path = home(&fx).join(".cursor/mcp.json");
        assert_eq!(inv.files.len(), 1);
        assert_eq!(inv.files[0].path, path);
        assert!(inv.dirs.contains(&home(&fx).join(".cursor")), "{mode_name}");
        // The directory exists before the file is written.
        let file: Value = serde_json::from_slice(&inv.files[0].contents).unwrap();
        assert_eq!(
            file,
            json!({"mcpServers": {
                "local-docs": {
                    "command": "/usr/bin/env",
                    "args": ["node", "/opt/docs/server.mjs", "--root", "a \"quoted\" dir"],
                    "env": {"DOCS_TOKEN": DOCS_SECRET},
                },
                "remote-search": {
                    "url": "https://mcp.example.com/rpc",
                    "headers": {"Authorization": SEARCH_AUTH},
                },
            }})
        );
        for secret in MCP_SECRETS {
            assert!(
                inv.secrets.iter().any(|s| s == secret),
                "{mode_name}: {secret} not masked"
            );
            for a in &inv.args {
                assert!(!a.contains(secret), "{mode_name}: secret in argv");
            }
            for (k, v) in &inv.env {
                assert!(!v.contains(secret), "{mode_name}: secret in env {k}");
            }
            assert!(!inv.policy.to_string().contains(secret));
        }
        assert_eq!(
            inv.policy["mcpServers"],
            json!(["local-docs", "remote-search"])
        );
        assert_eq!(inv.policy["approveMcps"], json!(true));
    }
}

#[test]
fn missing_mcp_secret_is_refused() {
    let fx = Fixture::new();
    for var in ["DOCS_MCP_TOKEN", "SEARCH_MCP_AUTH"] {
        let mut env = parent_env();
        env.remove(var);
        let err = plan_with(&fx, &fx.with_mcp(fx.input("cursor", Some("build"))), env).unwrap_err();
        assert_eq!(err, InvocationError::MissingMcpEnv { name: var.into() });
    }
}

#[test]
fn a_comma_in_the_worktree_is_refused_before_launch() {
    let fx = Fixture::new();
    let odd = fx.root.join("a,b");
    std::fs::create_dir(&odd).unwrap();
    for (mode_name, mode) in MODES {
        let mut input = fx.input("cursor", *mode);
        input.cwd = Some(odd.to_string());
        match plan_with(&fx, &input, parent_env()) {
            // The engine reports an invocation error as rejected (exit 5), before launch.
            Err(InvocationError::Unsupported(m)) => {
                assert!(m.contains("comma") && m.contains("a,b"), "{mode_name}: {m}")
            }
            other => panic!("{mode_name}: expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn validation_refuses_what_cursor_cannot_express() {
    let fx = Fixture::new();
    let registry = handoff_adapters::default_registry();
    for (_, mode) in MODES {
        let mut input = fx.input("cursor", *mode);
        input.effort = Some("high".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("--effort is unsupported for cursor"), "{e}");
        let mut input = fx.input("cursor", *mode);
        input.bash = Some("false".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("bash=false is unsupported for cursor"), "{e}");
        let mut input = fx.input("cursor", *mode);
        input.web_search = Some("true".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("webSearch is unsupported for cursor"), "{e}");
        let mut input = fx.input("cursor", *mode);
        input.max_turns = Some("3".into());
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("--max-turns is unsupported for cursor"), "{e}");
    }
}

#[test]
fn environment_is_an_allowlist_plus_private_state() {
    let fx = Fixture::new();
    let mut env = parent_env();
    env.insert("CURSOR_API_KEY".into(), "cursor-test-key-123".into());
    let state = [
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "XDG_DATA_HOME",
    ];
    for (mode_name, mode) in MODES {
        let inv = plan_with(&fx, &fx.input("cursor", *mode), env.clone()).unwrap();
        assert_allowlisted(mode_name, &inv.env, &CURSOR_SPEC, &[]);
        for k in ["CURSOR_API_KEY", "PATH", "HTTPS_PROXY", "LANG"] {
            assert_eq!(inv.env.get(k), env.get(k), "{mode_name}: {k}");
        }
        for k in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(
                !inv.env.contains_key(k),
                "{mode_name}: {k} passed to Cursor"
            );
        }
    }
    let inv = plan_with(&fx, &fx.input("cursor", Some("build")), BTreeMap::new()).unwrap();
    let keys: Vec<&str> = inv.env.keys().map(String::as_str).collect();
    let mut expected = state.to_vec();
    expected.sort();
    assert_eq!(keys, expected);
}

// ---------------------------------------------------------------------------------------------
// Parsing

#[test]
fn recorded_envelopes_snapshot() {
    for name in ["cursor-result.json", "cursor-error.json"] {
        let obs = Cursor.parse(&stdout(fixture(name)));
        let mut settings = insta::Settings::clone_current();
        settings.set_omit_expression(true);
        settings.set_snapshot_suffix(name);
        settings.bind(|| insta::assert_json_snapshot!("parse", describe_observation(&obs)));
    }
}

#[test]
fn the_trimmed_result_text_is_the_answer() {
    let envelope: Value = serde_json::from_slice(&fixture("cursor-result.json")).unwrap();
    let (payload, usage) = answer(Cursor.parse(&stdout(fixture("cursor-result.json"))));
    assert_eq!(
        payload,
        envelope["result"].as_str().unwrap().trim().as_bytes()
    );
    assert_eq!(usage, None, "Cursor's usage is the model's self-report");
    ProviderOutput::parse_strict(&payload).unwrap();
}

#[test]
fn is_error_is_the_agents_failure() {
    let (message, usage) = failure(Cursor.parse(&stdout(fixture("cursor-error.json"))));
    assert_eq!(
        message,
        "error: API error (429): rate limit exceeded for this model"
    );
    assert_eq!(usage, None);
    for (envelope, expected) in [
        (
            json!({"type": "result", "subtype": "success", "is_error": true, "result": "boom"}),
            "boom",
        ),
        (
            json!({"type": "result", "subtype": "error_max_turns", "is_error": false, "result": ""}),
            "error_max_turns: no detail",
        ),
        (
            json!({"type": "result", "is_error": true, "error": {"message": "auth required"}}),
            "auth required",
        ),
    ] {
        let (message, _) = failure(Cursor.parse(&stdout(envelope.to_string())));
        assert_eq!(message, expected);
    }
}

#[test]
fn a_malformed_envelope_is_refused() {
    for out in [
        "not json".to_owned(),
        "[]".to_owned(),
        json!({"type": "assistant"}).to_string(),
        json!({"subtype": "success", "is_error": false, "result": "x"}).to_string(),
        json!({"type": "result", "subtype": "success", "result": "x"}).to_string(),
        json!({"type": "result", "is_error": false, "result": "x"}).to_string(),
        json!({"type": "result", "subtype": "success", "is_error": false}).to_string(),
        json!({"type": "result", "subtype": "success", "is_error": false, "result": 5}).to_string(),
        format!(
            "{}\n{}",
            json!({"type": "system"}),
            json!({"type": "result", "subtype": "success", "is_error": false, "result": "{}"})
        ),
    ] {
        assert!(
            matches!(
                Cursor.parse(&stdout(out.clone())),
                Err(OutputError::Envelope { .. })
            ),
            "{out}"
        );
    }
}

#[test]
fn a_blank_stdout_is_classified_by_stderr() {
    let (message, _) = failure(Cursor.parse(&raw(
        b"",
        b"Error: API error (500): internal error\n",
        Some(1),
    )));
    assert_eq!(message, "Error: API error (500): internal error");
    let refused = raw(b"", b"sandbox unavailable on this kernel\n", Some(1));
    assert_eq!(Cursor.runtime_check(&refused), None);
    assert!(matches!(
        Cursor.parse(&refused),
        Ok(Observation::Unavailable { .. })
    ));
    assert!(matches!(
        Cursor.parse(&raw(b"", b"", Some(0))),
        Err(OutputError::Missing)
    ));
}

#[test]
fn runtime_check_reads_stderr_only() {
    let ok = fixture("cursor-result.json");
    // The reference's bug B4: the model's answer discussing sandboxes blocked the run.
    let talk = json!({"type": "result", "subtype": "success", "is_error": false,
        "result": "Finding: the sandbox failed to start and was disabled; continuing without it is unsafe."});
    assert_eq!(Cursor.runtime_check(&stdout(talk.to_string())), None);
    assert_eq!(Cursor.runtime_check(&stdout(ok.clone())), None);
    for line in [
        "warning: sandbox disabled for this session",
        "Sandbox could not be applied; continuing without it",
        "sandbox unsupported on this platform",
    ] {
        let reason = Cursor
            .runtime_check(&raw(&ok, line.as_bytes(), Some(0)))
            .unwrap_or_else(|| panic!("{line} must block"));
        assert!(
            reason.contains("Cursor reported") && reason.contains(line),
            "{reason}"
        );
    }
    assert_eq!(
        Cursor.runtime_check(&raw(&ok, b"note: using the sandbox profile\n", Some(0))),
        None
    );
}

fn check(raw: &RawOutput) {
    let obs = Cursor.parse(raw);
    let _ = Cursor.runtime_check(raw);
    match obs {
        Ok(Observation::AgentFailure { message, .. } | Observation::Unavailable { message }) => {
            assert!(message.chars().count() <= 1024)
        }
        Ok(Observation::Answer { .. }) => {}
        Err(OutputError::Missing | OutputError::Envelope { .. }) => {}
        Err(e) => panic!("unexpected error kind {e:?}"),
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!("result")),
        Just(json!("success")),
        "\\PC{0,2000}".prop_map(Value::String),
        prop::collection::btree_map("[a-z]{0,8}", "\\PC{0,10}", 0..3).prop_map(|m| json!(m)),
    ]
}

fn envelope() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("type"),
        Just("subtype"),
        Just("is_error"),
        Just("result"),
        Just("error"),
        Just("message"),
        Just("session_id"),
    ];
    prop::collection::vec((key, leaf()), 0..7)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        out in prop::collection::vec(any::<u8>(), 0..512),
        err in prop::collection::vec(any::<u8>(), 0..256),
        code in prop::option::of(any::<i32>()),
    ) {
        check(&raw(&out, &err, code));
    }

    #[test]
    fn envelope_like_output_never_panics(
        e in envelope(),
        err in "(\\PC{0,40}\n){0,3}",
        code in prop::option::of(-2i32..3),
    ) {
        check(&raw(e.to_string().as_bytes(), err.as_bytes(), code));
    }
}

// ---------------------------------------------------------------------------------------------
// The planned process, run against the testkit's fake cursor-agent

#[test]
fn planned_process_runs_against_the_fake_and_respects_read_only() {
    let fx = Fixture::new();
    let agents = FakeAgents::install(fx.root.join("agents").as_std_path());
    agents.record_dir();
    let fake = Utf8PathBuf::from_path_buf(agents.bin("cursor-agent")).unwrap();
    for (mode_name, mode) in MODES {
        let (inv, run) = plan_full(
            &fx,
            &fx.with_mcp(fx.input("cursor", *mode)),
            fake.as_str(),
            parent_env(),
        )
        .unwrap();
        let out = run_planned(&inv, fake.as_std_path(), &run.prompt);
        assert_eq!(
            out.exit_code,
            Some(0),
            "{mode_name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(Cursor.runtime_check(&out), None);
        let (payload, usage) = answer(Cursor.parse(&out));
        assert_eq!(usage, None);
        let answer = ProviderOutput::parse_strict(&payload).unwrap();
        assert_eq!(
            answer.response,
            format!("cursor-agent finished {mode_name}")
        );
        // The fake writes only with --force, in its working directory: the worktree.
        let wrote = fx.cwd.join(format!("fake-{mode_name}.txt")).exists();
        assert_eq!(wrote, writes(*mode), "{mode_name}: wrote a file");
        assert!(home(&fx).join(".cursor").is_dir());
        std::fs::remove_dir_all(fx.run_path.join("cursor-sandbox")).unwrap();
    }
    let calls = agents.invocations();
    let outer: Vec<&Value> = calls
        .iter()
        .filter(|r| r["argv"].get(0) == Some(&json!("sandbox")))
        .collect();
    let inner: Vec<&Value> = calls
        .iter()
        .filter(|r| r["argv"].get(0) == Some(&json!("-p")))
        .collect();
    assert_eq!(outer.len(), MODES.len());
    assert_eq!(inner.len(), MODES.len());
    for r in outer.iter().chain(inner.iter()) {
        assert_eq!(r["cwd"], json!(fx.cwd.as_str()), "{r}");
        assert_eq!(r["env"]["HOME"], json!(home(&fx).as_str()));
    }
    for r in &inner {
        assert!(
            r["stdin"]
                .as_str()
                .is_some_and(|s| s.contains("Operation:"))
        );
    }
}

#[test]
fn fake_agent_failures() {
    let fx = Fixture::new();
    let agents = FakeAgents::install(fx.root.join("agents").as_std_path());
    let fake = Utf8PathBuf::from_path_buf(agents.bin("cursor-agent")).unwrap();
    let (inv, run) = plan_full(
        &fx,
        &fx.input("cursor", Some("review")),
        fake.as_str(),
        parent_env(),
    )
    .unwrap();
    agents.set("HANDOFF_FAKE_MODE", "agent-error");
    let out = run_planned(&inv, fake.as_std_path(), &run.prompt);
    let (message, _) = failure(Cursor.parse(&out));
    assert_eq!(message, "Error: API error (500): internal error");
    agents.set("HANDOFF_FAKE_MODE", "prose");
    let out = run_planned(&inv, fake.as_std_path(), &run.prompt);
    let (payload, _) = answer(Cursor.parse(&out));
    assert!(matches!(
        ProviderOutput::parse_strict(&payload),
        Err(OutputError::NotOneObject)
    ));
}

// ---------------------------------------------------------------------------------------------
// Preflight

#[tokio::test]
async fn preflight_passes_against_the_fake_and_probes_only_its_scratch() {
    let w = ProbeWorld::new();
    w.agents.record_dir();
    let result = Cursor.preflight(&w.fake("cursor-agent"), &w.probe).await;
    assert_eq!(result.failure, None);
    assert_eq!(result.version, Some(fake_version("cursor-agent")));
    let calls = w.agents.invocations();
    let argv: Vec<Value> = calls.iter().map(|c| c["argv"].clone()).collect();
    assert_eq!(
        argv[..3],
        [
            json!(["--version"]),
            json!(["--help"]),
            json!(["sandbox", "run", "--help"]),
        ]
    );
    assert_eq!(argv.len(), 5);
    for (call, (flag, label, expect)) in calls[3..].iter().zip([
        ("--allow-paths", "write", "1"),
        ("--readonly-paths", "read", "0"),
    ]) {
        let dir = w.probe.scratch.join(format!("cursor-probe-{label}"));
        let file = dir.join(".handoff-cursor-target-probe");
        let a: Vec<&str> = call["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            a[..6],
            ["sandbox", "run", "--sandbox", flag, dir.as_str(), "/bin/sh"]
        );
        assert_eq!(a[6], "-c");
        assert_eq!(
            a[8..],
            ["handoff-cursor-probe", expect, dir.as_str(), file.as_str()]
        );
        assert_eq!(call["cwd"], json!(w.probe.scratch.as_str()));
        assert_eq!(call["env"]["HANDOFF_CURSOR_SANDBOX_PROBE"], json!("1"));
        assert_eq!(call["env"]["HANDOFF_CURSOR_EXPECT_WRITE"], json!(expect));
    }
    // The probe directories are gone again.
    assert!(w.scratch_entries().is_empty(), "{:?}", w.scratch_entries());
}

/// The probe script itself, run without any sandbox: it lists the directory and reports a
/// write that disagrees with the expectation.
#[test]
fn the_probe_script_checks_listing_and_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let file = tmp.path().join("probe");
    let run = |expect: &str, dir: &str| {
        std::process::Command::new("/bin/sh")
            .args([
                "-c",
                handoff_cursor_probe_script(),
                "handoff-cursor-probe",
                expect,
                dir,
            ])
            .arg(&file)
            .output()
            .unwrap()
    };
    assert_eq!(run("1", dir).status.code(), Some(0));
    assert!(file.exists());
    std::fs::remove_file(&file).unwrap();
    let out = run("0", dir);
    assert_eq!(
        out.status.code(),
        Some(4),
        "an unconfined write is not read-only"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("write=1, expected 0"));
    let out = run("1", "/nonexistent-handoff-dir");
    assert_eq!(out.status.code(), Some(3));
}

fn handoff_cursor_probe_script() -> &'static str {
    // The script the adapter passes to `/bin/sh -c`, as recorded by the fake.
    static SCRIPT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SCRIPT.get_or_init(|| {
        let w = ProbeWorld::new();
        w.agents.record_dir();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(Cursor.preflight(&w.fake("cursor-agent"), &w.probe));
        let calls = w.agents.invocations();
        calls
            .iter()
            .find(|c| c["argv"].get(5) == Some(&json!("/bin/sh")))
            .unwrap()["argv"][7]
            .as_str()
            .unwrap()
            .to_owned()
    })
}

#[tokio::test]
async fn preflight_reports_sandboxes_that_do_not_behave() {
    let w = ProbeWorld::new();
    let cases = [
        (
            "no-write",
            // --allow-paths does not let the command write (virtualised writes).
            "case \"$*\" in *--allow-paths*) exit 0 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
            "did not let a command write an --allow-paths directory",
        ),
        (
            "read-only-writes",
            // --readonly-paths lets the command write: the last argument is the probe file.
            "case \"$*\" in *--readonly-paths*/bin/sh*) for a; do f=\"$a\"; done; touch \"$f\"; exit 0 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
            "let a command write a --readonly-paths directory",
        ),
        (
            "sandbox-fails",
            "case \"$*\" in *--allow-paths*/bin/sh*) echo 'sandbox: landlock unavailable' >&2; exit 7 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
            "the --allow-paths sandbox probe exited with Some(7): sandbox: landlock unavailable",
        ),
        (
            "sandbox-help-lacks-readonly",
            "case \"$*\" in \"sandbox run --help\") \"$FAKE\" \"$@\" | grep -v -- --readonly-paths ;; *) exec \"$FAKE\" \"$@\" ;; esac",
            "`cursor-agent sandbox run --help` does not list --readonly-paths",
        ),
    ];
    for (name, body, expected) in cases {
        let exe = w.script(name, "cursor-agent", body);
        let result = Cursor.preflight(&exe, &w.probe).await;
        assert_eq!(result.version, Some(fake_version("cursor-agent")), "{name}");
        let failure = result.failure.unwrap_or_else(|| panic!("{name} must fail"));
        assert!(failure.contains(expected), "{name}: {failure}");
        assert!(
            w.scratch_entries().is_empty(),
            "{name}: {:?}",
            w.scratch_entries()
        );
    }
}

#[tokio::test]
async fn preflight_names_a_flag_missing_from_the_help() {
    let w = ProbeWorld::new();
    w.agents.set("HANDOFF_FAKE_HELP", "missing");
    let result = Cursor.preflight(&w.fake("cursor-agent"), &w.probe).await;
    let failure = result.failure.unwrap();
    assert!(
        failure.contains("`cursor-agent --help` does not list --force"),
        "{failure}"
    );
}
