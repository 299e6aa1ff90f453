//! The planned agent processes of Codex and Claude Code: their profiles and snapshot views for
//! the harness, and invariants checked directly (secrets, sandbox, tools, environment
//! allowlist).

use std::collections::BTreeMap;

use handoff_adapters::{CLAUDE_SPEC, CODEX_SPEC, codex_strict_schema};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, RunDir, RunInput, StdinSource,
    provider_output_schema,
};
use serde_json::{Value, json};

use crate::harness::*;
use crate::support::*;

const CODEX_PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        bash: Some("true"),
        web_search: Some("false"),
        model: Some("gpt-5.5"),
        effort: Some("high"),
        ..DEFAULTS
    },
    Profile {
        name: "mcp",
        mcp: true,
        ..DEFAULTS
    },
];

const CLAUDE_PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        model: Some("claude-sonnet-4-5"),
        effort: Some("xhigh"),
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

/// The invocation as JSON for a snapshot. The two schema payloads (identical in every plan)
/// are checked here against their source and replaced by a marker; everything else is as
/// planned.
fn describe(inv: &Invocation, _run: &RunDir) -> Value {
    let schema = provider_output_schema();
    let mut args = inv.args.clone();
    if let Some(i) = args.iter().position(|a| a == "--json-schema") {
        let given: Value = serde_json::from_str(&args[i + 1]).expect("--json-schema is JSON");
        let mut expected = schema.clone();
        let obj = expected.as_object_mut().expect("schema object");
        obj.remove("$schema");
        obj.remove("$id");
        assert_eq!(given, expected, "Claude's --json-schema");
        args[i + 1] = "<provider-output schema without $schema/$id>".into();
    }
    let files: Vec<Value> = inv
        .files
        .iter()
        .map(|f| {
            let contents: Value = serde_json::from_slice(&f.contents).expect("file is JSON");
            let contents = if f.path.as_str().ends_with("provider-output.schema.json") {
                assert_eq!(contents, codex_strict_schema(&schema), "Codex schema file");
                json!("<codex_strict_schema(provider-output schema)>")
            } else {
                contents
            };
            json!({"path": f.path, "contents": contents})
        })
        .collect();
    json!({
        "program": inv.program,
        "args": args,
        "env": inv.env,
        "cwd": inv.cwd,
        "stdin": match inv.stdin {
            StdinSource::Prompt => "prompt",
            StdinSource::Null => "null",
        },
        "files": files,
        "answer": answer_name(&inv.answer),
        "policy": inv.policy,
        "secrets": inv.secrets,
    })
}

/// Codex in the harness's tables.
pub(crate) const CODEX: Agent = Agent {
    harness: "codex",
    exe: CODEX_EXE,
    fake: "codex",
    profiles: CODEX_PROFILES,
    describe,
    snapshots: "it__invocation__codex",
    mcp: true,
    check_output: crate::garbage::check_codex,
};

/// Claude Code in the harness's tables.
pub(crate) const CLAUDE: Agent = Agent {
    harness: "claude",
    exe: CLAUDE_EXE,
    fake: "claude",
    profiles: CLAUDE_PROFILES,
    describe,
    snapshots: "it__invocation__claude",
    mcp: true,
    check_output: crate::garbage::check_claude,
};

/// Every mode × profile plan of both adapters, with the standard parent environment, named
/// `<harness>/<mode>/<profile>`.
fn both_plans(fx: &Fixture) -> Vec<(String, Option<&'static str>, Invocation)> {
    [CODEX, CLAUDE]
        .iter()
        .flat_map(|agent| {
            all_plans(fx, agent)
                .into_iter()
                .map(|(name, mode, _, inv)| (format!("{}/{name}", agent.harness), mode, inv))
        })
        .collect()
}

#[test]
fn codex_argv_follows_the_reference_order() {
    let fx = Fixture::new();
    let mut input = fx.with_mcp(fx.input("codex", Some("build")));
    input.model = Some("gpt-5.5".into());
    input.effort = Some("low".into());
    input.bash = Some("false".into());
    let inv = fx.plan(&input);
    let run = fx.run_path.as_str();
    let expected: Vec<String> = [
        "exec",
        "--json",
        "--ephemeral",
        "--ignore-user-config",
        "--ignore-rules",
        "--strict-config",
        "--config",
        "approval_policy=\"never\"",
        "--config",
        "project_doc_max_bytes=0",
        "--config",
        "project_doc_fallback_filenames=[]",
        "--config",
        "project_root_markers=[\".git\"]",
        "--config",
        "sandbox_workspace_write.network_access=false",
        "--config",
        "web_search=\"disabled\"",
        "--config",
        "mcp_servers.local-docs.command=\"/usr/bin/env\"",
        "--config",
        r#"mcp_servers.local-docs.args=["node","/opt/docs/server.mjs","--root","a \"quoted\" dir"]"#,
        "--config",
        "mcp_servers.local-docs.env_vars=[\"DOCS_TOKEN\"]",
        "--config",
        "mcp_servers.remote-search.url=\"https://mcp.example.com/rpc\"",
        "--config",
        "mcp_servers.remote-search.bearer_token_env_var=\"HANDOFF_MCP_BEARER_1\"",
        "--sandbox",
        "workspace-write",
        "--cd",
        fx.cwd.as_str(),
        "--output-schema",
        &format!("{run}/provider-output.schema.json"),
        "--output-last-message",
        &format!("{run}/provider-result.json"),
        "--model",
        "gpt-5.5",
        "--config",
        "model_reasoning_effort=\"low\"",
        "--disable",
        "shell_tool",
        "-",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(inv.args, expected);
    assert_eq!(inv.program.as_str(), CODEX_EXE);
    assert_eq!(inv.cwd, fx.cwd);
    assert_eq!(inv.stdin, StdinSource::Prompt);
    assert_eq!(
        inv.answer,
        AnswerSource::File(fx.run_path.join("provider-result.json"))
    );
}

#[test]
fn claude_argv_follows_the_reference_order() {
    let fx = Fixture::new();
    let mut input = fx.input("claude", Some("review"));
    input.model = Some("opus".into());
    input.effort = Some("low".into());
    input.max_turns = Some("3".into());
    input.bash = Some("false".into());
    let inv = fx.plan(&input);
    let flags: Vec<&str> = inv
        .args
        .iter()
        .map(String::as_str)
        .filter(|a| a.starts_with('-'))
        .collect();
    assert_eq!(
        flags,
        [
            "--safe-mode",
            "--settings",
            "--strict-mcp-config",
            "--mcp-config",
            "--disable-slash-commands",
            "--no-session-persistence",
            "--no-chrome",
            "--permission-mode",
            "--tools",
            "--allowedTools",
            "--max-turns",
            "-p",
            "--output-format",
            "--verbose",
            "--json-schema",
            "--model",
            "--effort",
        ]
    );
    let a = &inv.args;
    assert_eq!(arg_after(a, "--mcp-config"), Some(r#"{"mcpServers":{}}"#));
    assert_eq!(arg_after(a, "--permission-mode"), Some("dontAsk"));
    assert_eq!(arg_after(a, "--tools"), Some("Glob,Grep,Read"));
    assert_eq!(arg_after(a, "--allowedTools"), Some("Glob,Grep,Read"));
    assert_eq!(arg_after(a, "--max-turns"), Some("3"));
    assert_eq!(arg_after(a, "--output-format"), Some("stream-json"));
    assert_eq!(arg_after(a, "--model"), Some("opus"));
    assert_eq!(arg_after(a, "--effort"), Some("low"));
    assert_eq!(inv.answer, AnswerSource::Stdout);
    assert_eq!(inv.stdin, StdinSource::Prompt);
    assert_eq!(inv.cwd, fx.cwd);
    assert!(inv.files.is_empty());
    let schema: Value = serde_json::from_str(arg_after(a, "--json-schema").unwrap()).unwrap();
    assert!(schema.get("$schema").is_none() && schema.get("$id").is_none());
    assert!(schema.get("properties").is_some());
}

#[test]
fn claude_turn_limits_default_per_operation() {
    let fx = Fixture::new();
    let build = fx.plan(&fx.input("claude", Some("build")));
    assert_eq!(arg_after(&build.args, "--max-turns"), Some("12"));
    let advice = fx.plan(&fx.input("claude", None));
    assert_eq!(arg_after(&advice.args, "--max-turns"), Some("32"));
    assert_eq!(arg_after(&advice.args, "--effort"), Some("max"));
    let codex_advice = fx.plan(&fx.input("codex", None));
    assert!(
        codex_advice
            .args
            .contains(&"model_reasoning_effort=\"xhigh\"".to_owned()),
        "Codex advice defaults to its highest real effort"
    );
}

#[test]
fn validation_refuses_what_a_cli_cannot_express() {
    let fx = Fixture::new();
    let registry = handoff_adapters::default_registry();
    let refuse = |harness: &str, f: &dyn Fn(&mut RunInput)| {
        let mut input = fx.input(harness, Some("build"));
        f(&mut input);
        input.validate(&registry).unwrap_err()
    };
    let e = refuse("codex", &|i| i.web_search = Some("true".into()));
    assert!(e.contains("webSearch is unsupported for codex"), "{e}");
    let e = refuse("codex", &|i| i.effort = Some("max".into()));
    assert!(
        e.contains("expected one of: minimal, low, medium, high, xhigh"),
        "{e}"
    );
    let e = refuse("codex", &|i| i.max_turns = Some("5".into()));
    assert!(e.contains("--max-turns is unsupported for codex"), "{e}");
    let e = refuse("claude", &|i| i.effort = Some("minimal".into()));
    assert!(
        e.contains("expected one of: low, medium, high, xhigh, max"),
        "{e}"
    );
    let e = refuse("claude", &|i| i.max_turns = Some("101".into()));
    assert!(e.contains("between 1 and 100"), "{e}");
    // Web search is fine for Claude, in every mode.
    for (_, mode) in MODES {
        let mut input = fx.input("claude", *mode);
        input.web_search = Some("true".into());
        let inv = fx.plan(&input);
        let tools = arg_after(&inv.args, "--tools").unwrap();
        assert!(tools.contains("WebSearch") && tools.contains("WebFetch"));
    }
}

#[test]
fn mcp_secrets_never_reach_argv_or_policy() {
    let fx = Fixture::new();
    for (name, _, inv) in both_plans(&fx) {
        let policy = inv.policy.to_string();
        for secret in MCP_SECRETS {
            for arg in &inv.args {
                assert!(!arg.contains(secret), "{name}: secret in argv: {arg}");
            }
            assert!(!policy.contains(secret), "{name}: secret in policy");
            assert!(!inv.program.as_str().contains(secret));
        }
    }
}

#[test]
fn codex_puts_mcp_secrets_only_in_the_environment() {
    let fx = Fixture::new();
    for (_, mode) in MODES {
        let inv = fx.plan(&fx.with_mcp(fx.input("codex", *mode)));
        assert_eq!(
            inv.env.get("DOCS_TOKEN").map(String::as_str),
            Some(DOCS_SECRET)
        );
        // Codex adds "Bearer " itself: the variable holds the bare token.
        assert_eq!(
            inv.env.get("HANDOFF_MCP_BEARER_1").map(String::as_str),
            Some(SEARCH_TOKEN)
        );
        for f in &inv.files {
            let text = String::from_utf8_lossy(&f.contents);
            for secret in MCP_SECRETS {
                assert!(!text.contains(secret), "secret in {}", f.path);
            }
        }
        // Only the MCP variables carry them.
        for (k, v) in &inv.env {
            if k != "DOCS_TOKEN" && k != "HANDOFF_MCP_BEARER_1" {
                for secret in MCP_SECRETS {
                    assert!(!v.contains(secret), "secret in env {k}");
                }
            }
        }
        for secret in MCP_SECRETS {
            assert!(
                inv.secrets.iter().any(|s| s == secret),
                "{secret} not masked"
            );
        }
        assert_eq!(
            inv.policy["mcpServers"],
            json!(["local-docs", "remote-search"])
        );
    }
}

#[test]
fn codex_bearer_prefix_is_stripped_only_when_present() {
    let fx = Fixture::new();
    for (value, expected) in [
        ("Bearer tok-123456", "tok-123456"),
        ("bearer tok-123456", "tok-123456"),
        ("tok-123456", "tok-123456"),
    ] {
        let mut env = parent_env();
        env.insert("SEARCH_MCP_AUTH".into(), value.into());
        let inv = fx
            .plan_with(&fx.with_mcp(fx.input("codex", Some("review"))), env)
            .unwrap();
        assert_eq!(
            inv.env.get("HANDOFF_MCP_BEARER_1").map(String::as_str),
            Some(expected)
        );
        assert!(inv.secrets.iter().any(|s| s == value));
        assert!(inv.secrets.iter().any(|s| s == expected));
    }
}

#[test]
fn claude_puts_mcp_secrets_only_in_the_private_mcp_file() {
    let fx = Fixture::new();
    for (_, mode) in MODES {
        let inv = fx.plan(&fx.with_mcp(fx.input("claude", *mode)));
        let path = fx.run_path.join("claude-mcp.json");
        assert_eq!(arg_after(&inv.args, "--mcp-config"), Some(path.as_str()));
        assert_eq!(inv.files.len(), 1);
        assert_eq!(inv.files[0].path, path);
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
                    "type": "http",
                    "url": "https://mcp.example.com/rpc",
                    "headers": {"Authorization": SEARCH_AUTH},
                },
            }})
        );
        for (k, v) in &inv.env {
            for secret in MCP_SECRETS {
                assert!(!v.contains(secret), "secret in env {k}");
            }
        }
        for secret in [DOCS_SECRET, SEARCH_AUTH] {
            assert!(
                inv.secrets.iter().any(|s| s == secret),
                "{secret} not masked"
            );
        }
        let tools = arg_after(&inv.args, "--tools").unwrap();
        assert!(
            tools.ends_with("mcp__local-docs__*,mcp__remote-search__*"),
            "{tools}"
        );
        assert_eq!(arg_after(&inv.args, "--allowedTools"), Some(tools));
    }
}

#[test]
fn claude_maps_sse_servers_and_any_header() {
    let fx = Fixture::new();
    let descriptor = r#"{"schemaVersion":"handoff.mcp.v0.3","servers":[
        {"name":"events","transport":"sse","url":"https://mcp.example.com/sse",
         "headers":{"X-Api-Key":{"fromEnv":"DOCS_MCP_TOKEN"},"Authorization":{"fromEnv":"SEARCH_MCP_AUTH"}}}]}"#;
    let mut input = fx.input("claude", Some("verify"));
    input.mcp_config = Some(fx.mcp_file("sse.json", descriptor));
    let inv = fx.plan(&input);
    let file: Value = serde_json::from_slice(&inv.files[0].contents).unwrap();
    assert_eq!(
        file["mcpServers"]["events"],
        json!({"type": "sse", "url": "https://mcp.example.com/sse",
               "headers": {"X-Api-Key": DOCS_SECRET, "Authorization": SEARCH_AUTH}})
    );
}

#[test]
fn read_only_modes_are_read_only() {
    let fx = Fixture::new();
    for (name, mode, inv) in both_plans(&fx) {
        let write = writes(mode);
        if name.starts_with("codex/") {
            let sandbox = arg_after(&inv.args, "--sandbox");
            let expected = if write {
                "workspace-write"
            } else {
                "read-only"
            };
            assert_eq!(sandbox, Some(expected), "{name}");
            assert_eq!(inv.policy["filesystem"], json!(expected), "{name}");
        } else {
            for flag in ["--tools", "--allowedTools"] {
                let tools: Vec<&str> = arg_after(&inv.args, flag).unwrap().split(',').collect();
                for t in ["Write", "Edit"] {
                    assert_eq!(tools.contains(&t), write, "{name}: {flag} and {t}");
                }
                for t in ["Read", "Glob", "Grep"] {
                    assert!(tools.contains(&t), "{name}: {flag} lacks {t}");
                }
                for t in ["NotebookEdit", "Task", "Agent"] {
                    assert!(!tools.contains(&t), "{name}: {flag} has {t}");
                }
            }
            let settings: Value =
                serde_json::from_str(arg_after(&inv.args, "--settings").unwrap()).unwrap();
            let fs = &settings["sandbox"]["filesystem"];
            let cwd = json!([fx.cwd.as_str()]);
            assert_eq!(fs["allowRead"], cwd, "{name}");
            // The places every sandboxed command could write that outlive the run are denied
            // first, in every mode.
            let deny = fs["denyWrite"].as_array().unwrap();
            assert_eq!(
                deny[..4],
                [
                    json!("/tmp/claude"),
                    json!("/private/tmp/claude"),
                    json!("~/.claude/debug"),
                    json!("~/.npm/_logs")
                ],
                "{name}"
            );
            if write {
                assert_eq!(fs["allowWrite"], cwd, "{name}");
                assert_eq!(deny.len(), 4, "{name}");
            } else {
                assert_eq!(fs["allowWrite"], json!([]), "{name}");
                // The worktree is denied last, after Claude's protected names inside it.
                assert_eq!(deny.last(), Some(&json!(fx.cwd.as_str())), "{name}");
                assert!(
                    deny[4..]
                        .iter()
                        .all(|d| d.as_str().unwrap().starts_with(fx.cwd.as_str())),
                    "{name}"
                );
            }
            assert_eq!(settings["sandbox"]["enabled"], json!(true));
            assert_eq!(settings["sandbox"]["failIfUnavailable"], json!(true));
            assert_eq!(
                settings["sandbox"]["allowUnsandboxedCommands"],
                json!(false)
            );
            assert_eq!(settings["sandbox"]["network"]["allowedDomains"], json!([]));
        }
    }
}

#[test]
fn bash_false_removes_the_shell() {
    let fx = Fixture::new();
    for harness in ["codex", "claude"] {
        for (mode_name, mode) in MODES {
            for bash in [None, Some("true"), Some("false")] {
                let mut input = fx.input(harness, *mode);
                input.bash = bash.map(str::to_owned);
                let inv = fx.plan(&input);
                let enabled = bash != Some("false");
                let ctx = format!("{harness} {mode_name} bash={bash:?}");
                if harness == "codex" {
                    assert_eq!(
                        args_after(&inv.args, "--disable") == ["shell_tool"],
                        !enabled,
                        "{ctx}"
                    );
                    if enabled {
                        assert!(args_after(&inv.args, "--disable").is_empty(), "{ctx}");
                    }
                } else {
                    for flag in ["--tools", "--allowedTools"] {
                        let tools: Vec<&str> =
                            arg_after(&inv.args, flag).unwrap().split(',').collect();
                        assert_eq!(tools.contains(&"Bash"), enabled, "{ctx} {flag}");
                    }
                    assert_eq!(inv.policy["nativeBashSandbox"], json!(enabled), "{ctx}");
                }
            }
        }
    }
}

#[test]
fn codex_refuses_headers_other_than_one_authorization() {
    let fx = Fixture::new();
    let server = |headers: &str| {
        format!(
            r#"{{"schemaVersion":"handoff.mcp.v1","servers":[{{"name":"remote","transport":"http",
                "url":"https://mcp.example.com/rpc","headers":{headers}}}]}}"#
        )
    };
    for (i, headers) in [
        r#"{"X-Api-Key":{"fromEnv":"DOCS_MCP_TOKEN"}}"#,
        r#"{"Authorization":{"fromEnv":"SEARCH_MCP_AUTH"},"X-Tenant":{"fromEnv":"DOCS_MCP_TOKEN"}}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let mut input = fx.input("codex", Some("review"));
        input.mcp_config = Some(fx.mcp_file(&format!("bad-{i}.json"), &server(headers)));
        match fx.plan_with(&input, parent_env()) {
            Err(InvocationError::Unsupported(msg)) => {
                assert!(msg.contains("Authorization") && msg.contains("remote"), "{msg}");
            }
            other => panic!("expected Unsupported for {headers}, got {other:?}"),
        }
    }
    // A lower-case `authorization` and a header-less server are fine.
    let mut input = fx.input("codex", Some("review"));
    input.mcp_config = Some(fx.mcp_file(
        "ok.json",
        &server(r#"{"authorization":{"fromEnv":"SEARCH_MCP_AUTH"}}"#),
    ));
    let inv = fx.plan(&input);
    assert_eq!(
        inv.env.get("HANDOFF_MCP_BEARER_0").map(String::as_str),
        Some(SEARCH_TOKEN)
    );
    let mut input = fx.input("codex", Some("review"));
    input.mcp_config = Some(fx.mcp_file("none.json", &server("{}")));
    let inv = fx.plan(&input);
    assert!(
        inv.args
            .contains(&"mcp_servers.remote.url=\"https://mcp.example.com/rpc\"".to_owned())
    );
    assert!(!inv.args.iter().any(|a| a.contains("bearer_token_env_var")));
}

#[test]
fn codex_quotes_server_names_that_are_not_bare_toml_keys() {
    let fx = Fixture::new();
    let mut input = fx.input("codex", Some("review"));
    input.mcp_config = Some(fx.mcp_file(
        "dotted.json",
        r#"{"schemaVersion":"handoff.mcp.v1","servers":[
            {"name":"docs.v2","transport":"stdio","command":"/bin/docs","args":[],"env":{}}]}"#,
    ));
    let inv = fx.plan(&input);
    assert!(
        inv.args
            .contains(&r#"mcp_servers."docs.v2".command="/bin/docs""#.to_owned()),
        "{:?}",
        inv.args
    );
    assert!(
        inv.args
            .contains(&r#"mcp_servers."docs.v2".env_vars=[]"#.to_owned())
    );
}

#[test]
fn codex_refuses_an_mcp_variable_that_shadows_its_own_environment() {
    let fx = Fixture::new();
    let mut input = fx.input("codex", Some("review"));
    input.mcp_config = Some(fx.mcp_file(
        "shadow.json",
        r#"{"schemaVersion":"handoff.mcp.v1","servers":[
            {"name":"docs","transport":"stdio","command":"/bin/docs","args":[],
             "env":{"OPENAI_API_KEY":{"fromEnv":"DOCS_MCP_TOKEN"}}}]}"#,
    ));
    assert!(matches!(
        fx.plan_with(&input, parent_env()),
        Err(InvocationError::Unsupported(_))
    ));
}

#[test]
fn codex_bearer_variable_never_overwrites_a_stdio_server_variable() {
    let fx = Fixture::new();
    let mut input = fx.input("codex", Some("review"));
    // Server 0 asks for a variable that happens to be the name Codex's adapter generates for
    // server 1's bearer token.
    input.mcp_config = Some(fx.mcp_file(
        "clash.json",
        r#"{"schemaVersion":"handoff.mcp.v1","servers":[
            {"name":"docs","transport":"stdio","command":"/bin/docs","args":[],
             "env":{"HANDOFF_MCP_BEARER_1":{"fromEnv":"DOCS_MCP_TOKEN"}}},
            {"name":"search","transport":"http","url":"https://mcp.example.com/rpc",
             "headers":{"Authorization":{"fromEnv":"SEARCH_MCP_AUTH"}}}]}"#,
    ));
    match fx.plan_with(&input, parent_env()) {
        // Refusing the clash is correct.
        Err(InvocationError::Unsupported(_)) => {}
        // So is a plan in which each server still gets its own value.
        Ok(inv) => {
            assert_eq!(
                inv.env.get("HANDOFF_MCP_BEARER_1").map(String::as_str),
                Some(DOCS_SECRET),
                "the stdio server's variable was overwritten by the bearer token"
            );
            let bearer_var = inv
                .args
                .iter()
                .find_map(|a| a.strip_prefix("mcp_servers.search.bearer_token_env_var="))
                .expect("bearer var")
                .trim_matches('"')
                .to_owned();
            assert_eq!(
                inv.env.get(&bearer_var).map(String::as_str),
                Some(SEARCH_TOKEN)
            );
        }
        Err(e) => panic!("unexpected refusal: {e}"),
    }
}

#[test]
fn environment_is_an_allowlist() {
    let fx = Fixture::new();
    for (name, _, inv) in both_plans(&fx) {
        for k in NEVER_PASSED {
            assert!(!inv.env.contains_key(*k), "{name}: {k} passed");
        }
        for k in [
            "PATH",
            "HOME",
            "USER",
            "LANG",
            "LC_ALL",
            "TERM",
            "TMPDIR",
            "HTTPS_PROXY",
        ] {
            assert_eq!(inv.env.get(k), parent_env().get(k), "{name}: {k}");
        }
        if name.starts_with("codex/") {
            assert_allowlisted(
                &name,
                &inv.env,
                &CODEX_SPEC,
                &["DOCS_TOKEN", "HANDOFF_MCP_BEARER_1"],
            );
            for k in ["OPENAI_API_KEY", "CODEX_HOME"] {
                assert!(inv.env.contains_key(k), "{name}: {k} missing");
            }
            for k in [
                "AWS_SECRET_ACCESS_KEY",
                "AWS_REGION",
                "ANTHROPIC_API_KEY",
                "CLAUDE_CONFIG_DIR",
                "ANTHROPIC_DEFAULT_OPUS_MODEL",
            ] {
                assert!(!inv.env.contains_key(k), "{name}: {k} passed to Codex");
            }
        } else {
            assert_allowlisted(
                &name,
                &inv.env,
                &CLAUDE_SPEC,
                &["DISABLE_AUTOUPDATER", "CLAUDE_CODE_TMPDIR"],
            );
            assert_eq!(
                inv.env.get("DISABLE_AUTOUPDATER").map(String::as_str),
                Some("1")
            );
            for k in [
                "AWS_SECRET_ACCESS_KEY",
                "AWS_REGION",
                "ANTHROPIC_API_KEY",
                "CLAUDE_CONFIG_DIR",
                "ANTHROPIC_DEFAULT_OPUS_MODEL",
            ] {
                assert!(inv.env.contains_key(k), "{name}: {k} missing");
            }
            for k in ["OPENAI_API_KEY", "CODEX_HOME", "DOCS_TOKEN"] {
                assert!(!inv.env.contains_key(k), "{name}: {k} passed to Claude");
            }
        }
    }
}

#[test]
fn an_empty_parent_environment_gives_an_almost_empty_child_environment() {
    let fx = Fixture::new();
    let codex = fx
        .plan_with(&fx.input("codex", Some("build")), BTreeMap::new())
        .unwrap();
    assert!(codex.env.is_empty(), "{:?}", codex.env);
    let claude = fx
        .plan_with(&fx.input("claude", Some("build")), BTreeMap::new())
        .unwrap();
    // Its sandbox's temporary directory is the run's own.
    assert_eq!(
        claude.env,
        BTreeMap::from([
            ("DISABLE_AUTOUPDATER".to_owned(), "1".to_owned()),
            (
                "CLAUDE_CODE_TMPDIR".to_owned(),
                fx.run_path.join("tmp").to_string()
            ),
        ])
    );
}
