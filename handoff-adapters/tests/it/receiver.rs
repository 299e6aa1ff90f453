//! Continuation receivers: the planned first turn of Claude Code, Codex and OpenCode per role
//! (snapshots and invariants), their reports read from real and synthetic outputs, the resume
//! commands, and the refusals of the agents that cannot receive a task.

use handoff_core::{
    AgentId, AnswerSource, Invocation, RawOutput, ReceiverReport, ReceiverRequest, ReceiverRole,
    ResumeFrom, RunDir, StdinSource,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::*;

const SESSION: &str = "6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f";
const PROMPT: &str = "# Handoff note\n\nCarry on with the parser.\n\nPlease finish the tests.\n";
const RECEIVERS: [&str; 3] = ["claude", "codex", "opencode"];

fn exe(harness: &str) -> String {
    format!("/usr/local/bin/{harness}")
}

fn request(fx: &Fixture, harness: &str, role: ReceiverRole, selected: bool) -> ReceiverRequest {
    let (model, effort) = match (harness, selected) {
        (_, false) => (None, None),
        ("claude", true) => (Some("claude-sonnet-4-5"), Some("xhigh")),
        ("codex", true) => (Some("gpt-5.5"), Some("high")),
        (_, true) => (Some("anthropic/claude-sonnet-4-5"), Some("max")),
    };
    ReceiverRequest {
        target: AgentId::parse(harness).unwrap(),
        cwd: fx.cwd.clone(),
        role,
        model: model.map(str::to_owned),
        effort: effort.map(str::to_owned),
        session_id: SESSION.to_owned(),
        resume: None,
    }
}

fn run_dir(fx: &Fixture, harness: &str) -> RunDir {
    RunDir {
        handoff_sandbox: false,
        confined: false,
        path: fx.run_path.clone(),
        executable: exe(harness).into(),
        prompt: PROMPT.to_owned(),
        output_schema: Value::Null,
        mcp: None,
        parent_env: parent_env(),
        agent_config: Default::default(),
        nested: None,
    }
}

fn plan(fx: &Fixture, harness: &str, role: ReceiverRole, selected: bool) -> Invocation {
    receiver(harness)
        .receiver_invocation(&request(fx, harness, role, selected), &run_dir(fx, harness))
        .unwrap_or_else(|e| panic!("{harness} refused a receiver: {e}"))
}

/// The invocation as JSON; JSON-valued arguments and variables are shown parsed.
fn describe(inv: &Invocation) -> Value {
    let parsed = |s: &String| serde_json::from_str::<Value>(s).unwrap_or(json!(s));
    let args: Vec<Value> = inv
        .args
        .iter()
        .map(|a| {
            if a.starts_with('{') {
                parsed(a)
            } else {
                json!(a)
            }
        })
        .collect();
    let env: serde_json::Map<String, Value> = inv
        .env
        .iter()
        .map(|(k, v)| {
            let v = if v.starts_with('{') {
                parsed(v)
            } else {
                json!(v)
            };
            (k.clone(), v)
        })
        .collect();
    json!({
        "program": inv.program,
        "args": args,
        "env": env,
        "cwd": inv.cwd,
        "stdin": matches!(inv.stdin, StdinSource::Prompt).then_some("prompt"),
        "dirs": inv.dirs,
        "files": inv.files.iter().map(|f| &f.path).collect::<Vec<_>>(),
        "answer": matches!(inv.answer, AnswerSource::Stdout).then_some("stdout"),
        "policy": inv.policy,
        "secrets": inv.secrets,
    })
}

#[test]
fn receiver_invocation_snapshots() {
    let fx = Fixture::new();
    for harness in RECEIVERS {
        for role in [ReceiverRole::Implement, ReceiverRole::Review] {
            for (profile, selected) in [("defaults", false), ("selected", true)] {
                let inv = plan(&fx, harness, role, selected);
                let mut settings = fx.insta_settings();
                settings.set_snapshot_suffix(format!("{}-{profile}", role.as_str()));
                settings.set_description(format!(
                    "{harness} receiver, role {}, {profile}",
                    role.as_str()
                ));
                let name = format!("{harness}_receiver");
                settings.bind(|| insta::assert_json_snapshot!(name, describe(&inv)));
            }
        }
    }
}

#[test]
fn receivers_persist_their_session_and_carry_no_result_contract() {
    let fx = Fixture::new();
    let forbidden = [
        "--no-session-persistence",
        "--json-schema",
        "--ephemeral",
        "--output-schema",
        "--output-last-message",
        "-o",
        "--max-turns",
    ];
    for harness in RECEIVERS {
        for role in [ReceiverRole::Implement, ReceiverRole::Review] {
            let inv = plan(&fx, harness, role, false);
            for flag in forbidden {
                assert!(!inv.args.iter().any(|a| a == flag), "{harness}: {flag}");
            }
            assert_eq!(inv.cwd, fx.cwd, "{harness}");
            assert_eq!(inv.stdin, StdinSource::Prompt, "{harness}");
            assert_eq!(inv.answer, AnswerSource::Stdout, "{harness}");
            assert!(inv.files.is_empty() && inv.dirs.is_empty(), "{harness}");
            assert_eq!(inv.policy["sessionPersistence"], true, "{harness}");
            assert_eq!(inv.policy["role"], role.as_str(), "{harness}");
            // The user's own session stores: never redirected.
            assert_eq!(inv.env.get("HOME"), parent_env().get("HOME"), "{harness}");
            for var in [
                "CODEX_HOME",
                "CLAUDE_CONFIG_DIR",
                "XDG_DATA_HOME",
                "XDG_CONFIG_HOME",
            ] {
                if let Some(v) = inv.env.get(var) {
                    assert_eq!(Some(v), parent_env().get(var), "{harness}: {var}");
                }
            }
            for var in NEVER_PASSED {
                assert!(!inv.env.contains_key(*var), "{harness}: {var}");
            }
        }
    }
}

#[test]
fn receivers_keep_the_roles_containment() {
    let fx = Fixture::new();
    for (role, write) in [
        (ReceiverRole::Implement, true),
        (ReceiverRole::Review, false),
    ] {
        let claude = plan(&fx, "claude", role, false);
        let tools = arg_after(&claude.args, "--tools").unwrap();
        assert_eq!(tools.contains("Write") || tools.contains("Edit"), write);
        assert!(tools.contains("Bash") && !tools.contains("Web"));
        assert_eq!(arg_after(&claude.args, "--allowedTools"), Some(tools));
        assert_eq!(
            arg_after(&claude.args, "--permission-mode"),
            Some("dontAsk")
        );
        assert_eq!(arg_after(&claude.args, "--session-id"), Some(SESSION));
        let settings: Value =
            serde_json::from_str(arg_after(&claude.args, "--settings").unwrap()).unwrap();
        assert_eq!(settings["sandbox"]["enabled"], true);
        assert_eq!(settings["sandbox"]["failIfUnavailable"], true);
        let writable = settings["sandbox"]["filesystem"]["allowWrite"]
            .as_array()
            .unwrap();
        assert_eq!(!writable.is_empty(), write);
        assert!(claude.args.iter().any(|a| a == "--strict-mcp-config"));
        assert!(!claude.args.iter().any(|a| a == "--safe-mode"));

        let codex = plan(&fx, "codex", role, false);
        assert_eq!(
            arg_after(&codex.args, "--sandbox"),
            Some(if write {
                "workspace-write"
            } else {
                "read-only"
            })
        );
        assert_eq!(arg_after(&codex.args, "--cd"), Some(fx.cwd.as_str()));
        let configs = args_after(&codex.args, "--config");
        assert!(configs.contains(&"approval_policy=\"never\""));
        assert!(configs.contains(&"sandbox_workspace_write.network_access=false"));
        assert!(configs.contains(&"web_search=\"disabled\""));
        assert!(!configs.iter().any(|c| c.starts_with("project_doc")));
        assert_eq!(codex.args.last().map(String::as_str), Some("-"));

        let opencode = plan(&fx, "opencode", role, false);
        let perm: Value = serde_json::from_str(&opencode.env["OPENCODE_PERMISSION"]).unwrap();
        assert_eq!(perm["edit"], if write { "allow" } else { "deny" });
        assert_eq!(perm["*"], "deny");
        let config: Value = serde_json::from_str(&opencode.env["OPENCODE_CONFIG_CONTENT"]).unwrap();
        let agent = arg_after(&opencode.args, "--agent").unwrap();
        assert_eq!(config["agent"][agent]["permission"], perm);
        assert_eq!(opencode.args[0], "--pure");
    }
}

#[test]
fn receiver_plans_are_pure() {
    let fx = Fixture::new();
    for harness in RECEIVERS {
        let a = plan(&fx, harness, ReceiverRole::Implement, true);
        let b = plan(&fx, harness, ReceiverRole::Implement, true);
        assert_eq!(a, b);
    }
}

#[test]
fn the_user_overrides_reach_a_codex_receiver() {
    let fx = Fixture::new();
    let mut run = run_dir(&fx, "codex");
    run.agent_config.config = vec!["model_provider=\"fake\"".into()];
    let inv = receiver("codex")
        .receiver_invocation(&request(&fx, "codex", ReceiverRole::Implement, false), &run)
        .unwrap();
    assert!(args_after(&inv.args, "--config").contains(&"model_provider=\"fake\""));
}

#[test]
fn resume_commands() {
    let none = handoff_core::AgentConfig::default();
    let cmd = |h: &str| receiver(h).resume_command(SESSION, &none);
    assert_eq!(cmd("claude"), ["claude", "--resume", SESSION]);
    assert_eq!(cmd("codex"), ["codex", "resume", SESSION]);
    assert_eq!(cmd("opencode"), ["opencode", "--session", SESSION]);
    assert!(receiver("opencode").resume_env(&none).is_empty());
}

#[test]
fn resume_commands_keep_the_configured_gateway_and_leave_credentials_out() {
    let mut config = handoff_core::AgentConfig {
        config: vec![
            "model_provider=\"gw\"".into(),
            "model_providers.gw.base_url=\"https://gw.example/v1\"".into(),
        ],
        ..Default::default()
    };
    assert_eq!(
        receiver("codex").resume_command(SESSION, &config),
        [
            "codex",
            "--config",
            "model_provider=\"gw\"",
            "--config",
            "model_providers.gw.base_url=\"https://gw.example/v1\"",
            "resume",
            SESSION
        ]
    );
    config.provider = Some(
        toml::from_str(
            "[gw]\nnpm = \"@ai-sdk/openai-compatible\"\n[gw.options]\nbaseURL = \"https://gw.example/v1\"\n\
             apiKey = \"sk-literal-secret\"\n[gw2.options]\napiKey = \"{env:GW2_KEY}\"\n",
        )
        .unwrap(),
    );
    let env = receiver("opencode").resume_env(&config);
    let content = &env["OPENCODE_CONFIG_CONTENT"];
    let v: serde_json::Value = serde_json::from_str(content).unwrap();
    assert_eq!(
        v["provider"]["gw"]["options"]["baseURL"],
        "https://gw.example/v1"
    );
    assert!(!content.contains("sk-literal-secret"), "{content}");
    assert_eq!(v["provider"]["gw2"]["options"]["apiKey"], "{env:GW2_KEY}");
}

#[test]
fn agents_without_resumable_sessions_refuse() {
    for harness in ["grok", "grok-community"] {
        let p = provider(harness);
        assert!(p.receiver().is_none(), "{harness}");
        assert!(!p.why_no_receiver().is_empty(), "{harness}");
    }
    // grok says why.
    let why = provider("grok").why_no_receiver().to_owned();
    assert!(why.contains("keeps no sessions"), "{why}");
}

/// What each agent receives, and how that was verified.
#[test]
fn receiver_levels() {
    use handoff_core::{ReceiverLevel, Verified};
    for harness in RECEIVERS {
        assert_eq!(receiver(harness).level(), ReceiverLevel::Full, "{harness}");
        assert_eq!(receiver(harness).verified(), Verified::Real, "{harness}");
    }
    for harness in FRESH_RECEIVERS {
        assert_eq!(
            receiver(harness).level(),
            ReceiverLevel::FreshAgent,
            "{harness}"
        );
        assert_eq!(
            receiver(harness).verified(),
            Verified::Recorded,
            "{harness}"
        );
    }
}

/// Cursor and Kiro receive from the note and a recap: a new conversation their CLI keeps.
const FRESH_RECEIVERS: [&str; 2] = ["cursor", "kiro"];

fn fresh_run_dir(fx: &Fixture, harness: &str) -> RunDir {
    RunDir {
        handoff_sandbox: true,
        confined: false,
        ..run_dir(fx, harness)
    }
}

fn fresh_request(
    fx: &Fixture,
    harness: &str,
    role: ReceiverRole,
    selected: bool,
) -> ReceiverRequest {
    let (model, effort) = match (harness, selected) {
        (_, false) => (None, None),
        ("cursor", true) => (Some("gpt-5"), None),
        (_, true) => (Some("claude-sonnet-4.5"), Some("high")),
    };
    ReceiverRequest {
        model: model.map(str::to_owned),
        effort: effort.map(str::to_owned),
        ..request(fx, harness, role, false)
    }
}

#[test]
fn fresh_receiver_invocation_snapshots() {
    let fx = Fixture::new();
    for harness in FRESH_RECEIVERS {
        for role in [ReceiverRole::Implement, ReceiverRole::Review] {
            for (profile, selected) in [("defaults", false), ("selected", true)] {
                let inv = receiver(harness)
                    .receiver_invocation(
                        &fresh_request(&fx, harness, role, selected),
                        &fresh_run_dir(&fx, harness),
                    )
                    .unwrap_or_else(|e| panic!("{harness} refused a receiver: {e}"));
                let mut settings = fx.insta_settings();
                settings.set_snapshot_suffix(format!("{}-{profile}", role.as_str()));
                settings.set_description(format!(
                    "{harness} receiver, role {}, {profile}",
                    role.as_str()
                ));
                let name = format!("{harness}_receiver");
                let mut described = describe(&inv);
                described["sandbox"] = json!(inv.sandbox.as_ref().map(|s| {
                    s.binds
                        .iter()
                        .map(|b| json!({"path": b.dest, "writable": b.writable}))
                        .collect::<Vec<_>>()
                }));
                settings.bind(|| insta::assert_json_snapshot!(name, described));
            }
        }
    }
}

#[test]
fn fresh_receivers_keep_the_delegated_roles_containment() {
    let fx = Fixture::new();
    let plan = |harness: &str, role| {
        receiver(harness)
            .receiver_invocation(
                &fresh_request(&fx, harness, role, false),
                &fresh_run_dir(&fx, harness),
            )
            .unwrap()
    };
    // Cursor: its own sandbox; the worktree writable and --force for implement only, read-only
    // for review; its chats (only) writable, so the chat outlives the turn; the user's HOME.
    let build = plan("cursor", ReceiverRole::Implement);
    let review = plan("cursor", ReceiverRole::Review);
    assert_eq!(
        &build.args[..4],
        ["sandbox", "run", "--sandbox", "--network"]
    );
    assert!(build.args.iter().any(|a| a == "--force"));
    assert!(!review.args.iter().any(|a| a == "--force"));
    let allowed = |inv: &Invocation| {
        let at = inv.args.iter().position(|a| a == "--allow-paths").unwrap();
        inv.args[at + 1]
            .split(',')
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let home = parent_env()["HOME"].clone();
    assert_eq!(
        allowed(&build),
        [
            fx.cwd.to_string(),
            format!("{home}/.cursor/chats"),
            format!("{home}/.cursor/projects")
        ]
    );
    assert!(!allowed(&review).contains(&fx.cwd.to_string()));
    let ro = review
        .args
        .iter()
        .position(|a| a == "--readonly-paths")
        .unwrap();
    assert_eq!(review.args[ro + 1], fx.cwd.as_str());
    for inv in [&build, &review] {
        assert_eq!(inv.env.get("HOME"), Some(&home));
        assert!(inv.sandbox.is_none());
        assert_eq!(
            inv.policy["sessionPersistence"]
                .as_str()
                .map(|s| s.contains("--resume")),
            Some(true)
        );
        assert!(!inv.args.iter().any(|a| a.starts_with("--resume")));
    }
    // Kiro: handoff's sandbox, always; fs_write trusted for implement only, never all tools.
    let build = plan("kiro", ReceiverRole::Implement);
    let review = plan("kiro", ReceiverRole::Review);
    assert!(
        build
            .args
            .contains(&"--trust-tools=fs_read,fs_write,execute_bash".to_owned())
    );
    assert!(
        review
            .args
            .contains(&"--trust-tools=fs_read,execute_bash".to_owned())
    );
    for inv in [&build, &review] {
        assert!(
            !inv.args
                .iter()
                .any(|a| a == "--trust-all-tools" || a == "-a")
        );
        let binds = &inv.sandbox.as_ref().expect("handoff's sandbox").binds;
        let writable: Vec<String> = binds
            .iter()
            .filter(|b| b.writable)
            .map(|b| b.dest.to_string())
            .collect();
        assert!(
            writable.iter().any(|d| d.ends_with("/.kiro/sessions")),
            "{writable:?}"
        );
        assert!(
            !writable.iter().any(|d| d.ends_with("/.kiro")),
            "{writable:?}"
        );
    }
}

#[test]
fn fresh_receivers_refuse_what_they_cannot_do() {
    let fx = Fixture::new();
    let refused = |harness: &str, req: ReceiverRequest, run: RunDir| {
        receiver(harness)
            .receiver_invocation(&req, &run)
            .expect_err(harness)
            .to_string()
    };
    // Kiro without handoff's sandbox.
    let err = refused(
        "kiro",
        fresh_request(&fx, "kiro", ReceiverRole::Implement, false),
        run_dir(&fx, "kiro"),
    );
    assert!(err.contains("only under handoff's own sandbox"), "{err}");
    // Kiro resuming a chosen conversation.
    let mut req = fresh_request(&fx, "kiro", ReceiverRole::Review, false);
    req.resume = Some(ResumeFrom {
        session_id: SESSION.into(),
        fork: false,
    });
    let err = refused("kiro", req, fresh_run_dir(&fx, "kiro"));
    assert!(err.contains("newest conversation"), "{err}");
    // Cursor with an effort, or forking.
    let mut req = fresh_request(&fx, "cursor", ReceiverRole::Implement, false);
    req.effort = Some("high".into());
    assert!(refused("cursor", req, fresh_run_dir(&fx, "cursor")).contains("--effort"));
    let mut req = fresh_request(&fx, "cursor", ReceiverRole::Implement, false);
    req.resume = Some(ResumeFrom {
        session_id: SESSION.into(),
        fork: true,
    });
    assert!(refused("cursor", req, fresh_run_dir(&fx, "cursor")).contains("fork"));
    // Cursor resuming its own chat (the probe) names it.
    let mut req = fresh_request(&fx, "cursor", ReceiverRole::Review, false);
    req.resume = Some(ResumeFrom {
        session_id: SESSION.into(),
        fork: false,
    });
    let inv = receiver("cursor")
        .receiver_invocation(&req, &fresh_run_dir(&fx, "cursor"))
        .unwrap();
    assert_eq!(inv.args.last().unwrap(), &format!("--resume={SESSION}"));
}

#[test]
fn fresh_receivers_resume_commands() {
    let config = handoff_core::AgentConfig::default();
    assert_eq!(
        receiver("cursor").resume_command(SESSION, &config),
        ["cursor-agent".to_owned(), format!("--resume={SESSION}")]
    );
    assert_eq!(receiver("cursor").resume_latest(&config), None);
    let latest = ["kiro-cli", "chat", "--resume"].map(str::to_owned).to_vec();
    assert_eq!(
        receiver("kiro").resume_latest(&config),
        Some(latest.clone())
    );
    assert_eq!(receiver("kiro").resume_command(SESSION, &config), latest);
    for harness in RECEIVERS {
        assert_eq!(receiver(harness).resume_latest(&config), None, "{harness}");
    }
}

#[test]
fn cursor_reports() {
    let raw = |text: &str| stdout(text);
    let chat = "1f72ad35-144b-46f6-8b3a-442e5c5f2349";
    let init = json!({"type": "system", "subtype": "init", "cwd": "/w", "session_id": chat, "model": "auto"});
    let said = json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Working on it."}]}, "session_id": chat});
    let done = json!({"type": "result", "subtype": "success", "is_error": false, "result": "Finished the parser.", "session_id": chat});
    let r = report("cursor", &raw(&format!("{init}\n{said}\n{done}\n")));
    assert_eq!(r.session_id.as_deref(), Some(chat));
    assert_eq!(r.last_message.as_deref(), Some("Finished the parser."));
    assert_eq!(r.failure, None);
    // An error result.
    let failed = json!({"type": "result", "subtype": "error", "is_error": true, "result": "API error (500)", "session_id": chat});
    let r = report("cursor", &raw(&format!("{init}\n{failed}\n")));
    assert_eq!(r.session_id.as_deref(), Some(chat));
    assert_eq!(r.failure.as_deref(), Some("API error (500)"));
    // No result: the first line that is not an event names it (a workspace-trust notice).
    let r = report(
        "cursor",
        &raw("Workspace Trust Required\nPass --trust, --yolo, or -f\n"),
    );
    assert_eq!(r.failure.as_deref(), Some("Workspace Trust Required"));
    assert_eq!(r.session_id, None);
    let r = report("cursor", &raw(&format!("{init}\n{said}\n")));
    assert_eq!(r.failure.as_deref(), Some("Cursor ended without a result"));
    assert_eq!(r.last_message.as_deref(), Some("Working on it."));
}

#[test]
fn kiro_reports() {
    let raw = |out: &str, err: &str| RawOutput {
        stderr: err.into(),
        ..stdout(out)
    };
    let r = report(
        "kiro",
        &raw(
            "\u{1b}[38;5;141m🛠️  Using tool: fs_write\u{1b}[0m\n\n\u{1b}[32m> \u{1b}[0mFinished the parser.\n",
            "",
        ),
    );
    assert_eq!(r.last_message.as_deref(), Some("Finished the parser."));
    assert_eq!(r.session_id, None);
    assert_eq!(r.failure, None);
    let r = report(
        "kiro",
        &raw(
            "thinking…\n",
            "\u{1b}[31mError:\u{1b}[0m Service error: 500\n",
        ),
    );
    assert_eq!(r.failure.as_deref(), Some("Error: Service error: 500"));
    let r = report("kiro", &raw("", ""));
    assert!(
        r.failure
            .as_deref()
            .is_some_and(|f| f.contains("no `> ` answer"))
    );
}

proptest! {
    /// Whatever a fresh receiver prints, reading it never panics, and a report without a
    /// failure has a last message.
    #[test]
    fn fresh_receiver_reports_never_panic(stdout in prop::collection::vec(any::<u8>(), 0..400), harness in prop::sample::select(FRESH_RECEIVERS.to_vec())) {
        let r = report(harness, &crate::support::stdout(stdout));
        prop_assert!(r.failure.is_some() || r.last_message.is_some());
    }
}

/// The carried session a resuming receiver picks up.
const CARRIED: &str = "0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5";

fn resuming(fx: &Fixture, harness: &str, role: ReceiverRole, fork: bool) -> Invocation {
    let mut req = request(fx, harness, role, true);
    req.resume = Some(ResumeFrom {
        session_id: CARRIED.to_owned(),
        fork,
    });
    receiver(harness)
        .receiver_invocation(&req, &run_dir(fx, harness))
        .unwrap_or_else(|e| panic!("{harness} refused to resume: {e}"))
}

#[test]
fn resuming_receiver_snapshots() {
    let fx = Fixture::new();
    for (harness, role, fork, name) in [
        ("claude", ReceiverRole::Implement, true, "claude-fork"),
        ("claude", ReceiverRole::Review, false, "claude-in-place"),
        ("codex", ReceiverRole::Implement, false, "codex-implement"),
        ("codex", ReceiverRole::Review, false, "codex-review"),
    ] {
        let inv = resuming(&fx, harness, role, fork);
        let d = describe(&inv);
        let mut settings = fx.insta_settings();
        settings.set_snapshot_suffix(name);
        settings.set_description(format!(
            "{harness} receiver resuming {CARRIED}, role {}, fork {fork}",
            role.as_str()
        ));
        let shown = json!({"args": d["args"], "cwd": d["cwd"], "resume": d["policy"]["resume"], "sessionId": d["policy"]["sessionId"]});
        settings.bind(|| insta::assert_json_snapshot!("resuming_receiver", shown));
    }
}

#[test]
fn claude_resumes_in_place_or_forks_into_the_chosen_id() {
    let fx = Fixture::new();
    assert!(receiver("claude").native_fork());
    let fork = resuming(&fx, "claude", ReceiverRole::Implement, true);
    assert_eq!(arg_after(&fork.args, "--resume"), Some(CARRIED));
    assert!(fork.args.iter().any(|a| a == "--fork-session"));
    assert_eq!(arg_after(&fork.args, "--session-id"), Some(SESSION));
    let in_place = resuming(&fx, "claude", ReceiverRole::Implement, false);
    assert_eq!(arg_after(&in_place.args, "--resume"), Some(CARRIED));
    assert!(
        !in_place
            .args
            .iter()
            .any(|a| a == "--fork-session" || a == "--session-id")
    );
    // Everything else is the plan of a new session.
    let fresh = plan(&fx, "claude", ReceiverRole::Implement, true);
    let strip = |args: &[String]| -> Vec<String> {
        let mut out = Vec::new();
        let mut skip = false;
        for a in args {
            if skip {
                skip = false;
                continue;
            }
            match a.as_str() {
                "--resume" | "--session-id" => skip = true,
                "--fork-session" => {}
                _ => out.push(a.clone()),
            }
        }
        out
    };
    assert_eq!(strip(&fork.args), strip(&fresh.args));
    assert_eq!(strip(&in_place.args), strip(&fresh.args));
}

#[test]
fn codex_resumes_with_exec_resume_and_keeps_every_pin() {
    let fx = Fixture::new();
    assert!(!receiver("codex").native_fork());
    for (role, sandbox) in [
        (ReceiverRole::Implement, "workspace-write"),
        (ReceiverRole::Review, "read-only"),
    ] {
        let inv = resuming(&fx, "codex", role, false);
        assert_eq!(inv.args[..2], ["exec", "resume"]);
        // `codex exec resume` has neither `--sandbox` nor `--cd`.
        assert!(!inv.args.iter().any(|a| a == "--sandbox" || a == "--cd"));
        assert_eq!(inv.cwd, fx.cwd, "the worktree is the process's cwd");
        let configs = args_after(&inv.args, "--config");
        let mode = format!("sandbox_mode=\"{sandbox}\"");
        assert!(configs.contains(&mode.as_str()), "{configs:?}");
        let fresh = plan(&fx, "codex", role, true);
        for pin in args_after(&fresh.args, "--config") {
            assert!(configs.contains(&pin), "{pin} is lost");
        }
        for flag in [
            "--json",
            "--ignore-user-config",
            "--ignore-rules",
            "--strict-config",
        ] {
            assert!(inv.args.iter().any(|a| a == flag), "{flag}");
        }
        assert_eq!(arg_after(&inv.args, "--model"), Some("gpt-5.5"));
        assert_eq!(inv.args[inv.args.len() - 2..], [CARRIED, "-"]);
    }
    let mut req = request(&fx, "codex", ReceiverRole::Implement, false);
    req.resume = Some(ResumeFrom {
        session_id: CARRIED.to_owned(),
        fork: true,
    });
    let err = receiver("codex")
        .receiver_invocation(&req, &run_dir(&fx, "codex"))
        .unwrap_err();
    assert!(err.to_string().contains("cannot fork"), "{err}");
}

#[test]
fn resumed_sessions_are_reported() {
    // Claude Code in place: its events name the resumed session.
    let claude = lines(&[
        json!({"type":"system","subtype":"init","session_id":CARRIED,"cwd":"/w"}),
        json!({"type":"assistant","message":{"model":"m","content":[{"type":"text","text":"on it"}]},"session_id":CARRIED}),
        json!({"type":"result","subtype":"success","is_error":false,"result":"on it","session_id":CARRIED}),
    ]);
    let r = report("claude", &stdout(claude));
    assert_eq!(r.session_id.as_deref(), Some(CARRIED));
    assert_eq!(r.failure, None);
    // Codex: `thread.started` names the resumed thread.
    let codex = lines(&[
        json!({"type":"thread.started","thread_id":CARRIED}),
        json!({"type":"turn.started"}),
        json!({"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"on it"}}),
        json!({"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}),
    ]);
    let r = report("codex", &stdout(codex));
    assert_eq!(r.session_id.as_deref(), Some(CARRIED));
    assert_eq!(r.last_message.as_deref(), Some("on it"));
}

#[test]
fn resume_support_needs_a_recent_enough_cli() {
    let claude = receiver("claude");
    assert_eq!(claude.resume_support(Some("2.1.197 (Claude Code)")), Ok(()));
    assert_eq!(claude.resume_support(Some("2.0.0 (Claude Code)")), Ok(()));
    let old = claude
        .resume_support(Some("1.0.128 (Claude Code)"))
        .unwrap_err();
    assert!(old.contains("1.0.128") && old.contains("2.0.0"), "{old}");
    let unknown = claude.resume_support(Some("Claude Code")).unwrap_err();
    assert!(
        unknown.contains("2.0.0") && !unknown.contains('\n'),
        "{unknown}"
    );
    assert!(claude.resume_support(None).is_err());

    let codex = receiver("codex");
    assert_eq!(codex.resume_support(Some("codex-cli 0.171.0")), Ok(()));
    assert_eq!(codex.resume_support(Some("codex-cli 0.128.0")), Ok(()));
    let old = codex.resume_support(Some("codex-cli 0.98.0")).unwrap_err();
    assert!(old.contains("0.98.0") && old.contains("0.128.0"), "{old}");
    assert!(codex.resume_support(Some("codex-cli")).is_err());
}

fn report(harness: &str, raw: &RawOutput) -> ReceiverReport {
    receiver(harness).parse_receiver(raw)
}

fn lines(values: &[Value]) -> Vec<u8> {
    values
        .iter()
        .map(|v| format!("{v}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn claude_reports_from_recorded_outputs() {
    // `--output-format json`: one result object.
    let r = report("claude", &stdout(fixture("claude-hello.out")));
    assert_eq!(
        r.session_id.as_deref(),
        Some("998326c3-cc62-4276-9519-41fadcd8d7a4")
    );
    assert_eq!(r.last_message.as_deref(), Some("Hello! (from fake llm)"));
    assert_eq!(r.failure, None);
    // stream-json with a tool call.
    let r = report("claude", &stdout(fixture("claude-write.out")));
    assert!(r.session_id.is_some());
    assert_eq!(r.last_message.as_deref(), Some("Done: wrote the file."));
    assert_eq!(r.failure, None);
}

/// Receivers' first turns recorded from Claude Code 2.1.197, Codex 0.171.0 and OpenCode
/// 1.18.33 run with the planned argv against a scripted model (a file write, then a message).
#[test]
fn reports_from_recorded_receivers() {
    for (harness, session) in [
        ("claude", "5a5a1234-9876-4bcd-88ed-1d334e60a791"),
        ("codex", "01a23036-0807-7d42-ac76-f04b49ac762c"),
        ("opencode", "ses_dcfc94f28ffeEl6tsDpr0UekCx"),
    ] {
        let r = report(
            harness,
            &stdout(fixture(&format!("{harness}-receiver.out"))),
        );
        assert_eq!(r.session_id.as_deref(), Some(session), "{harness}");
        assert_eq!(
            r.last_message.as_deref(),
            Some("Done: continued."),
            "{harness}"
        );
        assert_eq!(r.failure, None, "{harness}");
    }
}

#[test]
fn claude_reports_failures() {
    let init = json!({"type":"system","subtype":"init","session_id":SESSION,"cwd":"/w"});
    let api_error = lines(&[
        init.clone(),
        json!({"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 500 boom"}]},"session_id":SESSION}),
        json!({"type":"result","subtype":"success","is_error":true,"api_error_status":500,"result":"API Error: 500 boom","session_id":SESSION}),
    ]);
    let r = report("claude", &stdout(api_error));
    assert_eq!(r.session_id.as_deref(), Some(SESSION));
    assert_eq!(r.failure.as_deref(), Some("API Error: 500 boom"));
    assert_eq!(r.last_message, None);

    // Killed before the result: the session is known, the turn failed.
    let r = report("claude", &stdout(lines(&[init])));
    assert_eq!(r.session_id.as_deref(), Some(SESSION));
    assert_eq!(
        r.failure.as_deref(),
        Some("Claude ended without a result event")
    );

    // No session id anywhere.
    let r = report(
        "claude",
        &stdout(lines(&[
            json!({"type":"result","subtype":"success","is_error":false,"result":"done"}),
        ])),
    );
    assert_eq!(r.session_id, None);
    assert_eq!(r.last_message.as_deref(), Some("done"));

    // The sandbox could not start.
    let raw = RawOutput {
        stderr: b"Error: sandbox required but unavailable: socat not installed".to_vec(),
        exit_code: Some(1),
        ..RawOutput::default()
    };
    let r = report("claude", &raw);
    assert!(
        r.failure
            .unwrap()
            .contains("sandbox required but unavailable")
    );
}

#[test]
fn codex_reports() {
    let r = report("codex", &stdout(fixture("codex-hello.out")));
    assert_eq!(
        r.session_id.as_deref(),
        Some("01a22e34-1785-7751-b261-1de0c6f86416")
    );
    assert_eq!(r.last_message.as_deref(), Some("Hello! (from fake llm)"));
    assert_eq!(r.failure, None);

    let failed = lines(&[
        json!({"type":"thread.started","thread_id":SESSION}),
        json!({"type":"turn.started"}),
        json!({"type":"error","message":"We're currently experiencing high demand"}),
        json!({"type":"turn.failed","error":{"message":"unexpected status 500"}}),
    ]);
    let r = report("codex", &stdout(failed));
    assert_eq!(r.session_id.as_deref(), Some(SESSION));
    assert_eq!(r.failure.as_deref(), Some("unexpected status 500"));

    // An error event and no completed turn (killed while reconnecting).
    let r = report(
        "codex",
        &stdout(lines(&[
            json!({"type":"thread.started","thread_id":SESSION}),
            json!({"type":"error","message":"Reconnecting... 1/5"}),
        ])),
    );
    assert_eq!(r.failure.as_deref(), Some("Reconnecting... 1/5"));

    // A completed turn without a thread id.
    let r = report(
        "codex",
        &stdout(lines(&[
            json!({"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"ok"}}),
            json!({"type":"turn.completed"}),
        ])),
    );
    assert_eq!(r.session_id, None);
    assert_eq!(r.last_message.as_deref(), Some("ok"));
    assert_eq!(r.failure, None);
}

#[test]
fn opencode_reports() {
    let r = report("opencode", &stdout(fixture("opencode-write.out")));
    assert!(r.session_id.as_deref().unwrap().starts_with("ses_"));
    assert_eq!(r.last_message.as_deref(), Some("Done: wrote the file."));
    assert_eq!(r.failure, None);

    let error = lines(&[json!({
        "type":"error","sessionID":"ses_abc","error":{"name":"APIError","data":{"message":"Cannot connect to API: refused"}}
    })]);
    let r = report("opencode", &stdout(error));
    assert_eq!(r.session_id.as_deref(), Some("ses_abc"));
    assert_eq!(r.failure.as_deref(), Some("Cannot connect to API: refused"));

    // A step that stopped for a tool call and nothing after it.
    let r = report(
        "opencode",
        &stdout(lines(&[
            json!({"type":"step_finish","sessionID":"ses_abc","part":{"reason":"tool-calls"}}),
        ])),
    );
    assert_eq!(
        r.failure.as_deref(),
        Some("OpenCode ended without finishing its turn")
    );
}

#[test]
fn garbage_is_a_failure() {
    for harness in RECEIVERS {
        for bytes in [
            &b""[..],
            b"not json at all\n",
            b"\xff\xfe{\n",
            b"[1,2,3]\n",
            b"{\"type\":\"result\",\"is_error\":\"yes\"}\n",
        ] {
            let r = report(harness, &stdout(bytes.to_vec()));
            assert!(r.failure.is_some(), "{harness}: {bytes:?}");
        }
    }
}

proptest! {
    #[test]
    fn parse_receiver_never_panics(
        out in prop::collection::vec(any::<u8>(), 0..512),
        err in prop::collection::vec(any::<u8>(), 0..128),
        code in prop::option::of(any::<i32>()),
    ) {
        let raw = RawOutput { stdout: out, stderr: err, exit_code: code, answer_file: None };
        for h in RECEIVERS {
            let _ = receiver(h).parse_receiver(&raw);
        }
    }

    #[test]
    fn parse_receiver_never_panics_on_event_lines(
        events in prop::collection::vec(
            (
                prop_oneof![
                    Just("result"), Just("system"), Just("assistant"), Just("thread.started"),
                    Just("item.completed"), Just("turn.failed"), Just("error"), Just("text"),
                    Just("step_finish"),
                ],
                prop_oneof![Just(json!(null)), Just(json!(1)), Just(json!("s")), Just(json!([])), Just(json!({}))],
            ),
            0..8,
        ),
    ) {
        let values: Vec<Value> = events
            .into_iter()
            .map(|(t, v)| json!({
                "type": t, "session_id": v, "sessionID": v, "thread_id": v, "result": v,
                "is_error": v, "item": v, "part": v, "error": v, "message": v,
            }))
            .collect();
        let raw = stdout(lines(&values));
        for h in RECEIVERS {
            let _ = receiver(h).parse_receiver(&raw);
        }
    }
}
