//! The Cursor adapter (`cursor-agent`, delegation.md §4.6), through the public API only:
//! invariants of the plan (sandbox paths, private state and MCP file, the comma refusal; its
//! snapshots are the harness's), the result-envelope parser, the stderr-only runtime check,
//! garbage robustness, the planned process run against the testkit's fake `cursor-agent`, and
//! preflight with its sandbox behaviour probe in a scratch directory.

use camino::Utf8PathBuf;
use handoff_adapters::{CURSOR_SPEC, Cursor};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, Observation, OutputError, Provider, ProviderOutput,
    RawOutput, RunDir, StdinSource,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::fakes::*;
use crate::harness::*;
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

/// Cursor in the harness's tables.
pub(crate) const CURSOR: Agent = Agent {
    harness: "cursor",
    exe: CURSOR_EXE,
    fake: "cursor-agent",
    profiles: PROFILES,
    describe,
    snapshots: "it__cursor__invocation",
    mcp: true,
    check_output: check,
};

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
fn argv_follows_the_reference_without_env_dash_c() {
    let fx = Fixture::new();
    let cwd = fx.cwd.as_str();
    let mut input = fx.with_mcp(fx.input("cursor", Some("build")));
    input.model = Some("gpt-5".into());
    let inv = CURSOR.plan(&fx, &input);
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

    let review = CURSOR.plan(&fx, &fx.input("cursor", Some("review")));
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
            let inv = CURSOR.plan(&fx, &input_for(&fx, "cursor", *mode, p));
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
        let inv = CURSOR.plan(&fx, &fx.input("cursor", *mode));
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
        let inv = CURSOR.plan(&fx, &fx.with_mcp(fx.input("cursor", *mode)));
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
fn a_comma_in_the_worktree_is_refused_before_launch() {
    let fx = Fixture::new();
    let odd = fx.root.join("a,b");
    std::fs::create_dir(&odd).unwrap();
    for (mode_name, mode) in MODES {
        let mut input = fx.input("cursor", *mode);
        input.cwd = Some(odd.to_string());
        match CURSOR.plan_with(&fx, &input, parent_env()) {
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

fn check(raw: &RawOutput) {
    assert_output_kinds(&Cursor, raw, Some(1024));
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

/// JSON objects with the keys of its envelope and any values.
pub(crate) fn envelope() -> impl Strategy<Value = Value> {
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

// ---------------------------------------------------------------------------------------------
// The planned process, run against the testkit's fake cursor-agent

#[test]
fn planned_process_runs_against_the_fake_and_respects_read_only() {
    let fx = Fixture::new();
    let fakes = Fakes::install(&fx);
    let input = |mode: Option<&str>| fx.with_mcp(fx.input("cursor", mode));
    // The fake writes only with --force, in its working directory: the worktree.
    fakes.every_mode(&CURSOR, input, |mode_name, _, out| {
        let (payload, usage) = answer(Cursor.parse(out));
        assert_eq!(usage, None);
        let answer = ProviderOutput::parse_strict(&payload).unwrap();
        assert_eq!(
            answer.response,
            format!("cursor-agent finished {mode_name}")
        );
        assert!(home(&fx).join(".cursor").is_dir());
        std::fs::remove_dir_all(fx.run_path.join("cursor-sandbox")).unwrap();
    });
    let outer = fakes.calls_with(0, "sandbox");
    let inner = fakes.calls_with(0, "-p");
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
    let fakes = Fakes::install(&fx);
    let review = fx.input("cursor", Some("review"));
    fakes.agents.set("HANDOFF_FAKE_MODE", "agent-error");
    let (message, _) = failure(Cursor.parse(&fakes.run(&CURSOR, &review)));
    assert_eq!(message, "Error: API error (500): internal error");
    fakes.agents.set("HANDOFF_FAKE_MODE", "prose");
    let (payload, _) = answer(Cursor.parse(&fakes.run(&CURSOR, &review)));
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
