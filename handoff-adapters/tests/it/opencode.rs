//! The OpenCode adapter, through the public API only: invariants of the plan checked against the
//! reference behaviour (delegation.md §4.5; its snapshots are the harness's), the parser on
//! recorded real outputs and synthetic event streams, garbage-input robustness, the planned
//! process run against the testkit's fake `opencode`, and preflight end to end.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::{OPENCODE_SPEC, OpenCode};
use handoff_core::{
    AgentConfig, AnswerSource, Invocation, InvocationError, Observation, OutputError, Provider,
    RawOutput, RunDir, RunInput, StdinSource, env_allowed,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::fakes::*;
use crate::harness::*;
use crate::support::*;

/// The executable the plans name (never run, except where a test substitutes the fake).
const OPENCODE_EXE: &str = "/usr/local/bin/opencode";

/// The agent names of the generated configuration.
const WRITER: &str = "handoff_writer";
const READER: &str = "handoff_reader";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        model: Some("anthropic/claude-sonnet-4-5"),
        effort: Some("high"),
        ..DEFAULTS
    },
    Profile {
        name: "mcp-web",
        web_search: Some("true"),
        mcp: true,
        ..DEFAULTS
    },
];

/// The variables §4.5 sets to fixed values.
const FIXED_ENV: &[(&str, &str)] = &[
    ("OPENCODE_PURE", "1"),
    ("OPENCODE_DISABLE_PROJECT_CONFIG", "1"),
    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
    ("OPENCODE_DISABLE_CLAUDE_CODE", "1"),
    ("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"),
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ("OPENCODE_AUTO_SHARE", "false"),
    ("OPENCODE_ENABLE_EXA", "false"),
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
];

/// Variables the adapter adds on top of the allowlist.
const ADDED_ENV: &[&str] = &[
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_CONFIG_CONTENT",
    "OPENCODE_PERMISSION",
];

/// Validates `input` and plans it with the registered OpenCode provider and, when given, the
/// user's provider table.
fn plan_with_provider(
    fx: &Fixture,
    input: &RunInput,
    parent_env: BTreeMap<String, String>,
    provider_table: Option<toml::Table>,
) -> Result<Invocation, InvocationError> {
    let validated = validate(input);
    assert_eq!(validated.request.target.harness.as_str(), "opencode");
    let mut run = run_dir_for(fx, &validated, Utf8Path::new(OPENCODE_EXE), parent_env);
    run.agent_config = AgentConfig {
        provider: provider_table,
        ..AgentConfig::default()
    };
    provider("opencode").invocation(&validated.request, &run)
}

/// `OPENCODE_CONFIG_CONTENT`, parsed.
fn inline_config(inv: &Invocation) -> Value {
    let text = inv
        .env
        .get("OPENCODE_CONFIG_CONTENT")
        .expect("OPENCODE_CONFIG_CONTENT is set");
    serde_json::from_str(text).expect("OPENCODE_CONFIG_CONTENT is JSON")
}

/// `OPENCODE_PERMISSION`, parsed.
fn env_permission(inv: &Invocation) -> Value {
    let text = inv
        .env
        .get("OPENCODE_PERMISSION")
        .expect("OPENCODE_PERMISSION is set");
    serde_json::from_str(text).expect("OPENCODE_PERMISSION is JSON")
}

/// The permission table §4.5 describes, plus the adapter's deliberate additions: `list`
/// (read-only directory listing) allowed, `todowrite` denied, and each granted MCP server's
/// tools (`<server>_<tool>`) allowed by name.
fn expected_permission(write: bool, bash: bool, web: bool, servers: &[&str]) -> Value {
    let allow = |b: bool| if b { "allow" } else { "deny" };
    let mut p = json!({
        "*": "deny",
        "bash": allow(bash),
        "edit": allow(write),
        "external_directory": "deny",
        "glob": "allow",
        "grep": "allow",
        "list": "allow",
        "lsp": "deny",
        "question": "deny",
        "read": "allow",
        "skill": "deny",
        "task": "deny",
        "todowrite": "deny",
        "webfetch": allow(web),
        "websearch": allow(web),
    });
    let obj = p.as_object_mut().expect("object");
    for s in servers {
        obj.insert(format!("{s}_*"), json!("allow"));
    }
    p
}

/// The MCP table of the standard descriptor, as OpenCode's configuration spells it.
fn expected_mcp() -> Value {
    json!({
        "local-docs": {
            "type": "local",
            "command": ["/usr/bin/env", "node", "/opt/docs/server.mjs", "--root", "a \"quoted\" dir"],
            "environment": {"DOCS_TOKEN": DOCS_SECRET},
            "enabled": true,
        },
        "remote-search": {
            "type": "remote",
            "url": "https://mcp.example.com/rpc",
            "headers": {"Authorization": SEARCH_AUTH},
            "enabled": true,
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Invocation snapshots

/// The invocation as JSON for a snapshot. The two large environment values are replaced by
/// markers; the inline configuration is shown parsed under `inlineConfig`, and
/// `OPENCODE_PERMISSION` is checked here to be exactly its `permission`.
fn describe(inv: &Invocation, _run: &RunDir) -> Value {
    let config = inline_config(inv);
    assert_eq!(
        env_permission(inv),
        config["permission"],
        "OPENCODE_PERMISSION is the inline config's permission"
    );
    let mut env = inv.env.clone();
    env.insert(
        "OPENCODE_CONFIG_CONTENT".into(),
        "<see inlineConfig>".into(),
    );
    env.insert(
        "OPENCODE_PERMISSION".into(),
        "<inlineConfig.permission>".into(),
    );
    let files: Vec<Value> = inv
        .files
        .iter()
        .map(|f| json!({"path": f.path, "contents": String::from_utf8_lossy(&f.contents)}))
        .collect();
    json!({
        "program": inv.program,
        "args": inv.args,
        "env": env,
        "cwd": inv.cwd,
        "stdin": match inv.stdin {
            StdinSource::Prompt => "prompt",
            StdinSource::Null => "null",
        },
        "dirs": inv.dirs,
        "files": files,
        "answer": answer_name(&inv.answer),
        "policy": inv.policy,
        "secrets": inv.secrets,
        "inlineConfig": config,
    })
}

/// OpenCode in the harness's tables.
pub(crate) const OPENCODE: Agent = Agent {
    harness: "opencode",
    exe: OPENCODE_EXE,
    fake: "opencode",
    profiles: PROFILES,
    describe,
    snapshots: "it__opencode__invocation",
    mcp: true,
    check_output: check,
};

// ---------------------------------------------------------------------------------------------
// Invocation invariants

#[test]
fn opencode_is_registered_with_its_spec() {
    let p = provider("opencode");
    assert_eq!(p.spec().id, OPENCODE_SPEC.id);
    assert_eq!(p.spec().executable, "opencode");
    assert!(!p.spec().native_filesystem_isolation);
    assert!(!p.spec().native_bash_sandbox);
}

#[test]
fn argv_follows_the_reference() {
    let fx = Fixture::new();
    let cwd = fx.cwd.as_str();
    let mut input = fx.with_mcp(fx.input("opencode", Some("build")));
    input.model = Some("openai/gpt-5.5".into());
    input.effort = Some("minimal".into());
    input.bash = Some("false".into());
    input.web_search = Some("true".into());
    let inv = OPENCODE.plan(&fx, &input);
    assert_eq!(
        inv.args,
        [
            "--pure",
            "run",
            "--agent",
            WRITER,
            "--dir",
            cwd,
            "--format",
            "json",
            "--model",
            "openai/gpt-5.5",
            "--variant",
            "minimal",
        ]
    );
    assert_eq!(inv.program.as_str(), OPENCODE_EXE);
    assert_eq!(inv.cwd, fx.cwd);
    assert_eq!(inv.stdin, StdinSource::Prompt, "the prompt goes on stdin");
    assert_eq!(inv.answer, AnswerSource::Stdout);
    assert!(
        inv.files.is_empty(),
        "everything travels in the environment"
    );

    // Without a selection neither --model nor --variant appears; read-only modes use the
    // reader agent.
    for (mode_name, mode) in MODES {
        let inv = OPENCODE.plan(&fx, &fx.input("opencode", *mode));
        let agent = if writes(*mode) { WRITER } else { READER };
        assert_eq!(
            inv.args,
            [
                "--pure", "run", "--agent", agent, "--dir", cwd, "--format", "json"
            ],
            "{mode_name}"
        );
        assert_eq!(inv.policy["agent"], json!(agent), "{mode_name}");
    }
}

#[test]
fn every_effort_maps_to_variant() {
    let fx = Fixture::new();
    for effort in OPENCODE_SPEC.effort {
        for (mode_name, mode) in MODES {
            let mut input = fx.input("opencode", *mode);
            input.effort = Some((*effort).to_owned());
            let inv = OPENCODE.plan(&fx, &input);
            assert_eq!(
                arg_after(&inv.args, "--variant"),
                Some(*effort),
                "{mode_name}"
            );
            assert_eq!(args_after(&inv.args, "--variant").len(), 1);
            assert!(arg_after(&inv.args, "--model").is_none());
        }
    }
    let mut input = fx.input("opencode", Some("review"));
    input.model = Some("fake/fake-model".into());
    let inv = OPENCODE.plan(&fx, &input);
    assert_eq!(arg_after(&inv.args, "--model"), Some("fake/fake-model"));
    assert!(arg_after(&inv.args, "--variant").is_none());
}

#[test]
fn validation_refuses_what_opencode_cannot_express() {
    let fx = Fixture::new();
    let registry = handoff_adapters::default_registry();
    let refuse = |f: &dyn Fn(&mut RunInput)| {
        let mut input = fx.input("opencode", Some("build"));
        f(&mut input);
        input.validate(&registry).unwrap_err()
    };
    let e = refuse(&|i| i.effort = Some("xhigh".into()));
    assert!(
        e.contains("expected one of: minimal, low, medium, high, max"),
        "{e}"
    );
    let e = refuse(&|i| i.max_turns = Some("5".into()));
    assert!(e.contains("--max-turns is unsupported for opencode"), "{e}");
    // Web search and bash=false are fine in every mode.
    for (_, mode) in MODES {
        let mut input = fx.input("opencode", *mode);
        input.web_search = Some("true".into());
        input.bash = Some("false".into());
        validate(&input);
    }
}

#[test]
fn configuration_roots_are_private_to_the_run() {
    let fx = Fixture::new();
    let root = fx.run_path.join("opencode");
    for (name, _, _, inv) in all_plans(&fx, &OPENCODE) {
        let expected: Vec<Utf8PathBuf> = ["home", "config", "cache", "state"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        assert_eq!(inv.dirs, expected, "{name}: dirs");
        for (var, dir) in [
            ("HOME", "home"),
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_CACHE_HOME", "cache"),
            ("XDG_STATE_HOME", "state"),
            ("OPENCODE_CONFIG_DIR", "config"),
        ] {
            let value = inv.env.get(var).map(String::as_str);
            assert_eq!(value, Some(root.join(dir).as_str()), "{name}: {var}");
            let path = Utf8Path::new(value.unwrap_or_default());
            assert!(
                path.starts_with(&fx.run_path),
                "{name}: {var} outside the run"
            );
            assert!(
                inv.dirs.iter().any(|d| d == path),
                "{name}: {var} not created"
            );
        }
    }
}

#[test]
fn data_directory_stays_the_users() {
    let fx = Fixture::new();
    let input = fx.input("opencode", Some("build"));
    let data = |env: BTreeMap<String, String>| {
        OPENCODE
            .plan_with(&fx, &input, env)
            .unwrap()
            .env
            .get("XDG_DATA_HOME")
            .cloned()
    };
    // Unset: the user's default, from the real HOME (not the private one).
    assert_eq!(
        data(parent_env()).as_deref(),
        Some("/home/tester/.local/share")
    );
    // Set: kept as is.
    let mut env = parent_env();
    env.insert("XDG_DATA_HOME".into(), "/srv/xdg-data".into());
    assert_eq!(data(env).as_deref(), Some("/srv/xdg-data"));
    // A relative XDG_DATA_HOME is invalid per the XDG spec: the default is used.
    let mut env = parent_env();
    env.insert("XDG_DATA_HOME".into(), "relative/data".into());
    assert_eq!(data(env).as_deref(), Some("/home/tester/.local/share"));
    // Neither HOME nor XDG_DATA_HOME: nothing to keep, so OpenCode falls back to the private
    // HOME.
    let mut env = parent_env();
    env.remove("HOME");
    assert_eq!(data(env), None);
    // The data directory is never created or listed by the run.
    let inv = OPENCODE.plan(&fx, &input);
    assert!(
        !inv.dirs
            .iter()
            .any(|d| d.as_str().starts_with("/home/tester"))
    );
}

#[test]
fn fixed_environment_follows_the_reference() {
    let fx = Fixture::new();
    for (name, _, _, inv) in all_plans(&fx, &OPENCODE) {
        for (k, v) in FIXED_ENV {
            assert_eq!(inv.env.get(*k).map(String::as_str), Some(*v), "{name}: {k}");
        }
    }
}

#[test]
fn environment_is_an_allowlist() {
    let fx = Fixture::new();
    let fixed: Vec<&str> = FIXED_ENV.iter().map(|(k, _)| *k).collect();
    for (name, _, _, inv) in all_plans(&fx, &OPENCODE) {
        for k in NEVER_PASSED {
            assert!(!inv.env.contains_key(*k), "{name}: {k} passed");
        }
        for k in inv.env.keys() {
            assert!(
                env_allowed(&OPENCODE_SPEC, k)
                    || fixed.contains(&k.as_str())
                    || ADDED_ENV.contains(&k.as_str()),
                "{name}: {k} is not in the allowlist"
            );
        }
        // Login basics and the providers' credentials pass through unchanged.
        for k in [
            "PATH",
            "USER",
            "LANG",
            "LC_ALL",
            "TMPDIR",
            "HTTPS_PROXY",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
        ] {
            assert_eq!(inv.env.get(k), parent_env().get(k), "{name}: {k}");
        }
        // Other CLIs' settings do not.
        for k in [
            "CODEX_HOME",
            "CLAUDE_CONFIG_DIR",
            "ANTHROPIC_DEFAULT_OPUS_MODEL",
            "DOCS_TOKEN",
        ] {
            assert!(!inv.env.contains_key(k), "{name}: {k} passed to OpenCode");
        }
    }
}

#[test]
fn an_empty_parent_environment_gives_only_the_isolation() {
    let fx = Fixture::new();
    let inv = OPENCODE
        .plan_with(&fx, &fx.input("opencode", Some("build")), BTreeMap::new())
        .unwrap();
    let mut keys: Vec<&str> = inv.env.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected: Vec<&str> = FIXED_ENV
        .iter()
        .map(|(k, _)| *k)
        .chain(ADDED_ENV.iter().copied())
        .chain([
            "HOME",
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
            "XDG_STATE_HOME",
        ])
        .collect();
    expected.sort_unstable();
    assert_eq!(keys, expected);
}

#[test]
fn permission_table_follows_the_grants() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        for bash in [None, Some("true"), Some("false")] {
            for web in [None, Some("true"), Some("false")] {
                for mcp in [false, true] {
                    let mut input = fx.input("opencode", *mode);
                    input.bash = bash.map(str::to_owned);
                    input.web_search = web.map(str::to_owned);
                    if mcp {
                        input = fx.with_mcp(input);
                    }
                    let inv = OPENCODE.plan(&fx, &input);
                    let ctx = format!("{mode_name} bash={bash:?} web={web:?} mcp={mcp}");
                    let servers: &[&str] = if mcp {
                        &["local-docs", "remote-search"]
                    } else {
                        &[]
                    };
                    let expected = expected_permission(
                        writes(*mode),
                        bash != Some("false"),
                        web == Some("true"),
                        servers,
                    );
                    let config = inline_config(&inv);
                    let agent = if writes(*mode) { WRITER } else { READER };
                    assert_eq!(config["permission"], expected, "{ctx}: global");
                    assert_eq!(
                        config["agent"][agent]["permission"], expected,
                        "{ctx}: agent"
                    );
                    assert_eq!(env_permission(&inv), expected, "{ctx}: OPENCODE_PERMISSION");
                    assert_eq!(inv.policy["permission"], expected, "{ctx}: policy");
                }
            }
        }
    }
}

#[test]
fn inline_config_follows_the_reference() {
    let fx = Fixture::new();
    for (name, mode, _, inv) in all_plans(&fx, &OPENCODE) {
        let config = inline_config(&inv);
        let agent = if writes(mode) { WRITER } else { READER };
        let obj = config.as_object().expect("object");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "$schema",
                "agent",
                "autoupdate",
                "instructions",
                "mcp",
                "permission",
                "plugin",
                "share",
                "snapshot",
            ],
            "{name}: top-level keys"
        );
        assert_eq!(config["$schema"], json!("https://opencode.ai/config.json"));
        assert_eq!(config["autoupdate"], json!(false), "{name}");
        assert_eq!(config["share"], json!("disabled"), "{name}");
        assert_eq!(config["snapshot"], json!(false), "{name}");
        assert_eq!(config["instructions"], json!([]), "{name}");
        assert_eq!(config["plugin"], json!([]), "{name}");
        // Exactly one agent: ours, primary, with the permission table and no tools table.
        let agents = config["agent"].as_object().expect("agent table");
        assert_eq!(agents.keys().collect::<Vec<_>>(), [agent], "{name}: agents");
        assert_eq!(
            agents[agent],
            json!({
                "description": "handoff delegated agent",
                "mode": "primary",
                "permission": config["permission"],
            }),
            "{name}: agent"
        );
    }
}

#[test]
fn mcp_servers_are_configured_and_allowed_by_name() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        let inv = OPENCODE.plan(&fx, &fx.with_mcp(fx.input("opencode", *mode)));
        let config = inline_config(&inv);
        assert_eq!(config["mcp"], expected_mcp(), "{mode_name}");
        let perm = &config["permission"];
        assert_eq!(perm["*"], json!("deny"), "{mode_name}");
        // The reference left MCP tools under the blanket deny; each granted server's tools
        // are allowed by name.
        assert_eq!(perm["local-docs_*"], json!("allow"), "{mode_name}");
        assert_eq!(perm["remote-search_*"], json!("allow"), "{mode_name}");
        assert_eq!(
            inv.policy["mcpServers"],
            json!(["local-docs", "remote-search"])
        );
    }
    // Without a descriptor: an empty table, no server rules.
    let inv = OPENCODE.plan(&fx, &fx.input("opencode", Some("build")));
    let config = inline_config(&inv);
    assert_eq!(config["mcp"], json!({}));
    let perm = config["permission"].as_object().unwrap();
    assert!(perm.keys().all(|k| k == "*" || !k.ends_with("_*")));
    assert_eq!(inv.policy["mcpServers"], json!([]));
}

#[test]
fn mcp_sse_servers_are_remote_with_every_header() {
    let fx = Fixture::new();
    let descriptor = r#"{"schemaVersion":"handoff.mcp.v0.3","servers":[
        {"name":"events","transport":"sse","url":"https://mcp.example.com/sse",
         "headers":{"X-Api-Key":{"fromEnv":"DOCS_MCP_TOKEN"},"Authorization":{"fromEnv":"SEARCH_MCP_AUTH"}}}]}"#;
    let mut input = fx.input("opencode", Some("verify"));
    input.mcp_config = Some(fx.mcp_file("sse.json", descriptor));
    let inv = OPENCODE.plan(&fx, &input);
    let config = inline_config(&inv);
    assert_eq!(
        config["mcp"]["events"],
        json!({"type": "remote", "url": "https://mcp.example.com/sse", "enabled": true,
               "headers": {"X-Api-Key": DOCS_SECRET, "Authorization": SEARCH_AUTH}})
    );
    assert_eq!(config["permission"]["events_*"], json!("allow"));
    for secret in MCP_SECRETS {
        assert!(
            inv.secrets.iter().any(|s| s == secret),
            "{secret} not masked"
        );
    }
}

/// OpenCode names an MCP tool `<server>_<tool>` after replacing every character outside
/// `[A-Za-z0-9_-]` of both names with `_` (packages/opencode/src/mcp/index.ts), and its
/// permission wildcards match `.` literally. A server name may contain `.`, so the allow rule
/// must use the sanitized name or the granted server's tools stay under the blanket deny.
#[test]
fn mcp_allow_rules_use_opencodes_sanitized_tool_prefix() {
    let fx = Fixture::new();
    let mut input = fx.input("opencode", Some("review"));
    input.mcp_config = Some(fx.mcp_file(
        "dotted.json",
        r#"{"schemaVersion":"handoff.mcp.v1","servers":[
            {"name":"docs.v2","transport":"stdio","command":"/bin/docs","args":[],"env":{}}]}"#,
    ));
    let inv = OPENCODE.plan(&fx, &input);
    let config = inline_config(&inv);
    // The server keeps its name in the mcp table …
    assert!(config["mcp"].get("docs.v2").is_some());
    // … and its tools, `docs_v2_<tool>`, are allowed.
    assert_eq!(config["permission"]["docs_v2_*"], json!("allow"));
    assert_eq!(env_permission(&inv)["docs_v2_*"], json!("allow"));
}

#[test]
fn mcp_secrets_travel_only_inside_the_inline_config() {
    let fx = Fixture::new();
    for (name, _, p, inv) in all_plans(&fx, &OPENCODE) {
        let policy = inv.policy.to_string();
        for secret in MCP_SECRETS {
            for arg in &inv.args {
                assert!(!arg.contains(secret), "{name}: secret in argv: {arg}");
            }
            assert!(!policy.contains(secret), "{name}: secret in policy");
            assert!(!inv.program.as_str().contains(secret), "{name}");
            for (k, v) in &inv.env {
                if k != "OPENCODE_CONFIG_CONTENT" {
                    assert!(!v.contains(secret), "{name}: secret in env {k}");
                }
            }
            for f in &inv.files {
                assert!(!String::from_utf8_lossy(&f.contents).contains(secret));
            }
        }
        let content = &inv.env["OPENCODE_CONFIG_CONTENT"];
        if p.mcp {
            for secret in [DOCS_SECRET, SEARCH_AUTH] {
                assert!(content.contains(secret), "{name}: {secret} not configured");
            }
            // The header value and the bare bearer token are both masked.
            for secret in MCP_SECRETS {
                assert!(
                    inv.secrets.iter().any(|s| s == secret),
                    "{name}: {secret} not masked"
                );
            }
        } else {
            assert!(inv.secrets.is_empty(), "{name}: {:?}", inv.secrets);
        }
    }
}

#[test]
fn bare_bearer_token_is_masked_only_for_an_auth_scheme() {
    let fx = Fixture::new();
    for (value, extra) in [
        ("Bearer tok-123456", Some("tok-123456")),
        ("bearer tok-123456", Some("tok-123456")),
        ("Token tok-123456", Some("tok-123456")),
        ("tok-123456", None),
    ] {
        let mut env = parent_env();
        env.insert("SEARCH_MCP_AUTH".into(), value.into());
        let inv = OPENCODE
            .plan_with(&fx, &fx.with_mcp(fx.input("opencode", Some("review"))), env)
            .unwrap();
        let config = inline_config(&inv);
        assert_eq!(
            config["mcp"]["remote-search"]["headers"]["Authorization"],
            json!(value),
            "the header is passed as given"
        );
        assert!(inv.secrets.iter().any(|s| s == value), "{value}");
        if let Some(token) = extra {
            assert!(inv.secrets.iter().any(|s| s == token), "{value}");
        }
        assert!(inv.secrets.iter().any(|s| s == DOCS_SECRET));
    }
}

#[test]
fn the_users_provider_table_is_the_inline_provider() {
    let fx = Fixture::new();
    let table: toml::Table = toml::from_str(
        r#"
        [fake]
        npm = "@ai-sdk/openai-compatible"
        name = "Fake"

        [fake.options]
        baseURL = "http://127.0.0.1:8767/v1"
        apiKey = "sk-fake"
        timeout = 30000
        setCacheKey = true

        [fake.models.fake-model]
        name = "Fake Model"
        tool_call = true
        limit = { context = 128000, output = 4096 }
        "#,
    )
    .unwrap();
    for (mode_name, mode) in MODES {
        let input = fx.input("opencode", *mode);
        let inv = plan_with_provider(&fx, &input, parent_env(), Some(table.clone())).unwrap();
        let config = inline_config(&inv);
        assert_eq!(
            config["provider"],
            json!({"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {
                    "baseURL": "http://127.0.0.1:8767/v1",
                    "apiKey": "sk-fake",
                    "timeout": 30000,
                    "setCacheKey": true,
                },
                "models": {"fake-model": {
                    "name": "Fake Model",
                    "tool_call": true,
                    "limit": {"context": 128000, "output": 4096},
                }},
            }}),
            "{mode_name}"
        );
        // Nothing else of the configuration changes.
        let without = inline_config(&OPENCODE.plan(&fx, &input));
        let mut trimmed = config.clone();
        trimmed.as_object_mut().unwrap().remove("provider");
        assert_eq!(trimmed, without, "{mode_name}");
        assert!(
            without.get("provider").is_none(),
            "{mode_name}: no provider key"
        );
        // The table's values stay out of argv.
        assert!(!inv.args.iter().any(|a| a.contains("sk-fake")));
    }
    // An empty table is still passed (the user asked for it).
    let inv = plan_with_provider(
        &fx,
        &fx.input("opencode", Some("review")),
        parent_env(),
        Some(toml::Table::new()),
    )
    .unwrap();
    assert_eq!(inline_config(&inv)["provider"], json!({}));
}

#[test]
fn policy_receipt_describes_the_enforcement() {
    let fx = Fixture::new();
    for (name, mode, p, inv) in all_plans(&fx, &OPENCODE) {
        let policy = &inv.policy;
        assert_eq!(
            policy["enforcement"],
            json!("preflighted-tool-permission-policy"),
            "{name}"
        );
        assert_eq!(policy["nativeFilesystemIsolation"], json!(false), "{name}");
        assert_eq!(policy["projectConfiguration"], json!("disabled"), "{name}");
        assert_eq!(policy["plugins"], json!("disabled"), "{name}");
        assert_eq!(policy["environment"], json!("allowlist"), "{name}");
        let agent = if writes(mode) { WRITER } else { READER };
        assert_eq!(policy["agent"], json!(agent), "{name}");
        let servers = if p.mcp {
            json!(["local-docs", "remote-search"])
        } else {
            json!([])
        };
        assert_eq!(policy["mcpServers"], servers, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// The planned process, run against the testkit's fake OpenCode

#[test]
fn planned_process_runs_against_the_fake_and_respects_read_only() {
    let fx = Fixture::new();
    let fakes = Fakes::install(&fx);
    let input = |mode: Option<&str>| {
        let mut input = fx.input("opencode", mode);
        input.model = Some("fake/fake-model".into());
        input.effort = Some("high".into());
        input
    };
    // The fake edits only when the agent's `edit` permission allows it.
    fakes.every_mode(&OPENCODE, input, |mode_name, _, out| {
        let (payload, usage) = answer(OpenCode.parse(out));
        let payload: Value = serde_json::from_slice(&payload).expect("the answer is JSON");
        assert_eq!(payload["status"], json!("completed"), "{mode_name}");
        assert!(usage.is_some(), "{mode_name}: usage");
    });
    // Every run received the prompt on stdin and the isolated environment.
    let runs = fakes.calls_with(1, "run");
    assert_eq!(runs.len(), MODES.len());
    for r in &runs {
        assert!(r["stdin"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(r["env"]["OPENCODE_PURE"], json!("1"));
        assert_eq!(
            r["env"]["HOME"],
            json!(fx.run_path.join("opencode/home").as_str())
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

fn envelope(obs: Result<Observation, OutputError>) -> String {
    match obs {
        Err(OutputError::Envelope { reason }) => reason,
        other => panic!("expected Envelope, got {other:?}"),
    }
}

const SESSION: &str = "ses_dd1cb095effehA19gtNQNRrigU";

fn text_event(text: &str) -> Value {
    json!({"type": "text", "timestamp": 1, "sessionID": SESSION,
           "part": {"type": "text", "text": text, "sessionID": SESSION}})
}

fn step_finish(input: u64, output: u64, read: u64, write: u64, cost: f64) -> Value {
    json!({"type": "step_finish", "timestamp": 2, "sessionID": SESSION,
           "part": {"type": "step-finish", "reason": "stop",
                    "tokens": {"total": input + output + read + write, "input": input,
                               "output": output, "reasoning": 0,
                               "cache": {"read": read, "write": write}},
                    "cost": cost}})
}

/// The error event OpenCode prints when the model API is unreachable (real-clis.md).
fn api_error_event() -> Value {
    json!({"type": "error", "timestamp": 3, "sessionID": SESSION,
           "error": {"name": "APIError",
                     "data": {"message": "Cannot connect to API: connect ECONNREFUSED 127.0.0.1:8799",
                              "isRetryable": true,
                              "metadata": {"url": "http://127.0.0.1:8799/v1/chat/completions"}}}})
}

#[test]
fn recorded_hello_gives_the_text_and_usage() {
    let (payload, u) = answer(OpenCode.parse(&stdout(fixture("opencode-hello.out"))));
    assert_eq!(payload, b"Hello! (from fake llm)");
    assert_eq!(u, usage(11, 7, 0, 0, Some(0.0)));
}

#[test]
fn recorded_write_gives_the_last_text_and_usage_over_both_steps() {
    let (payload, u) = answer(OpenCode.parse(&stdout(fixture("opencode-write.out"))));
    assert_eq!(payload, b"Done: wrote the file.");
    assert_eq!(u, usage(22, 14, 0, 0, Some(0.0)));
}

#[test]
fn input_tokens_include_cache_reads_and_writes_and_cost_adds_up() {
    let raw = stdout(lines(&[
        json!({"type": "step_start", "sessionID": SESSION, "part": {"type": "step-start"}}),
        step_finish(10, 5, 100, 20, 0.25),
        text_event("first"),
        step_finish(7, 3, 50, 0, 0.5),
        text_event("second"),
    ]));
    let (payload, u) = answer(OpenCode.parse(&raw));
    assert_eq!(payload, b"second", "the last text event is the answer");
    assert_eq!(u, usage(187, 8, 150, 20, Some(0.75)));
}

#[test]
fn absent_token_fields_count_as_zero() {
    let raw = stdout(lines(&[
        json!({"type": "step_finish", "sessionID": SESSION, "part": {"type": "step-finish"}}),
        json!({"type": "step_finish", "sessionID": SESSION,
               "part": {"tokens": {"input": 4}, "cost": 0.125}}),
        json!({"type": "step_finish", "sessionID": SESSION,
               "part": {"tokens": {"output": 2, "cache": {"read": 1}}}}),
        text_event("ok"),
    ]));
    let (_, u) = answer(OpenCode.parse(&raw));
    assert_eq!(u, usage(5, 2, 1, 0, Some(0.125)));
}

#[test]
fn without_step_finish_there_is_no_usage() {
    let (payload, u) = answer(OpenCode.parse(&stdout(lines(&[text_event("hi")]))));
    assert_eq!(payload, b"hi");
    assert_eq!(u, None);
}

#[test]
fn error_event_is_an_agent_failure_with_its_message() {
    let raw = RawOutput {
        exit_code: Some(1),
        ..stdout(lines(&[
            json!({"type": "step_start", "sessionID": SESSION, "part": {"type": "step-start"}}),
            api_error_event(),
        ]))
    };
    let (message, u) = failure(OpenCode.parse(&raw));
    assert_eq!(
        message,
        "Cannot connect to API: connect ECONNREFUSED 127.0.0.1:8799"
    );
    assert_eq!(u, None);
}

#[test]
fn error_event_wins_over_earlier_text_and_keeps_usage() {
    let raw = stdout(lines(&[
        text_event("partial answer"),
        step_finish(3, 4, 0, 0, 0.5),
        api_error_event(),
        text_event("after the error"),
    ]));
    let (message, u) = failure(OpenCode.parse(&raw));
    assert!(message.starts_with("Cannot connect to API"), "{message}");
    assert_eq!(u, usage(3, 4, 0, 0, Some(0.5)));
}

#[test]
fn error_message_falls_back_to_message_then_name_then_a_default() {
    let error = |error: Value| {
        let raw = stdout(lines(&[
            json!({"type": "error", "sessionID": SESSION, "error": error}),
        ]));
        failure(OpenCode.parse(&raw)).0
    };
    assert_eq!(
        error(json!({"name": "UnknownError", "message": "top-level message"})),
        "top-level message"
    );
    assert_eq!(
        error(json!({"name": "ProviderAuthError", "data": {"providerID": "x"}})),
        "ProviderAuthError"
    );
    assert_eq!(error(json!({})), "OpenCode reported an error");
    assert_eq!(error(json!(null)), "OpenCode reported an error");
    assert_eq!(error(json!("a string")), "OpenCode reported an error");
    let raw = stdout(lines(&[json!({"type": "error", "sessionID": SESSION})]));
    assert_eq!(
        failure(OpenCode.parse(&raw)).0,
        "OpenCode reported an error"
    );
}

#[test]
fn non_json_line_is_a_malformed_envelope() {
    let mut out = b"INFO  2025-01-01 service=default starting\n".to_vec();
    out.extend(fixture("opencode-hello.out"));
    let reason = envelope(OpenCode.parse(&stdout(out)));
    assert!(reason.contains("not JSON"), "{reason}");

    let mut out = fixture("opencode-write.out");
    out.extend_from_slice(b"Done! (plain text after the stream)\n");
    let reason = envelope(OpenCode.parse(&stdout(out)));
    assert!(reason.contains("not JSON"), "{reason}");
}

#[test]
fn events_from_two_sessions_are_a_malformed_envelope() {
    let mut other = text_event("from another session");
    other["sessionID"] = json!("ses_other");
    let raw = stdout(lines(&[
        text_event("hi"),
        step_finish(1, 1, 0, 0, 0.0),
        other,
    ]));
    let reason = envelope(OpenCode.parse(&raw));
    assert!(reason.contains("more than one session"), "{reason}");
}

#[test]
fn an_event_without_a_session_is_a_malformed_envelope() {
    for event in [
        json!({"type": "text", "part": {"type": "text", "text": "hi"}}),
        json!({"type": "text", "sessionID": 7, "part": {"type": "text", "text": "hi"}}),
        json!([1, 2]),
        json!("text"),
    ] {
        let raw = stdout(lines(&[text_event("before"), event.clone()]));
        envelope(OpenCode.parse(&raw));
    }
}

#[test]
fn malformed_known_events_are_a_malformed_envelope() {
    for event in [
        json!({"type": "text", "sessionID": SESSION}),
        json!({"type": "text", "sessionID": SESSION, "part": {"text": 5}}),
        json!({"type": "step_finish", "sessionID": SESSION, "part": {"tokens": {"input": -1}}}),
        json!({"type": "step_finish", "sessionID": SESSION, "part": {"cost": "free"}}),
    ] {
        let raw = stdout(lines(&[text_event("ok"), event.clone()]));
        let reason = envelope(OpenCode.parse(&raw));
        assert!(reason.contains("malformed event"), "{event}: {reason}");
    }
}

#[test]
fn no_text_event_is_missing() {
    for raw in [
        RawOutput::default(),
        stdout(&b"\n \n\t\n"[..]),
        stdout(lines(&[
            json!({"type": "step_start", "sessionID": SESSION, "part": {"type": "step-start"}}),
            step_finish(1, 1, 0, 0, 0.0),
        ])),
        RawOutput {
            stderr: b"Error: something went wrong".to_vec(),
            exit_code: Some(1),
            ..RawOutput::default()
        },
    ] {
        assert_eq!(OpenCode.parse(&raw), Err(OutputError::Missing), "{raw:?}");
    }
}

#[test]
fn unknown_event_types_are_ignored() {
    let raw = stdout(lines(&[
        json!({"type": "step_start", "sessionID": SESSION, "part": {"type": "step-start"}}),
        json!({"type": "reasoning", "sessionID": SESSION, "part": {"text": "thinking…"}}),
        json!({"type": "tool_use", "sessionID": SESSION, "part": {"tool": "read", "state": {}}}),
        text_event("the answer"),
        json!({"type": "a_future_event", "sessionID": SESSION, "anything": [1, {"x": null}]}),
        json!({"type": "permission_asked", "sessionID": SESSION}),
        step_finish(2, 1, 0, 0, 0.0),
    ]));
    let (payload, u) = answer(OpenCode.parse(&raw));
    assert_eq!(payload, b"the answer");
    assert_eq!(u, usage(2, 1, 0, 0, Some(0.0)));
}

#[test]
fn blank_lines_and_crlf_are_tolerated() {
    let mut out = b"\n".to_vec();
    for line in fixture("opencode-write.out").split(|b| *b == b'\n') {
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n  \r\n");
    }
    let (payload, u) = answer(OpenCode.parse(&stdout(out)));
    assert_eq!(payload, b"Done: wrote the file.");
    assert_eq!(u, usage(22, 14, 0, 0, Some(0.0)));
}

#[test]
fn stderr_does_not_matter() {
    let raw = RawOutput {
        stderr: b"{\"type\":\"error\",\"sessionID\":\"x\",\"error\":{\"name\":\"E\"}}\nnoise"
            .to_vec(),
        ..stdout(fixture("opencode-hello.out"))
    };
    let (payload, _) = answer(OpenCode.parse(&raw));
    assert_eq!(payload, b"Hello! (from fake llm)");
    assert_eq!(OpenCode.runtime_check(&raw), None);
}

#[test]
fn the_answer_text_is_passed_through_verbatim() {
    let text = "{\"schemaVersion\":\"handoff.provider-output.v1\",\"status\":\"completed\"}\n";
    let (payload, _) = answer(OpenCode.parse(&stdout(lines(&[text_event(text)]))));
    assert_eq!(payload, text.as_bytes());
    let (payload, _) = answer(OpenCode.parse(&stdout(lines(&[text_event("")]))));
    assert_eq!(payload, b"");
}

#[test]
fn huge_token_counts_saturate() {
    let big = json!({"type": "step_finish", "sessionID": SESSION,
        "part": {"tokens": {"input": u64::MAX, "output": u64::MAX,
                            "cache": {"read": u64::MAX, "write": u64::MAX}},
                 "cost": 1e300}});
    let raw = stdout(lines(&[big.clone(), big, text_event("ok")]));
    let r = std::panic::catch_unwind(|| OpenCode.parse(&raw));
    let (_, u) = answer(r.expect("OpenCode.parse panicked on large token counts"));
    let u = u.unwrap();
    assert_eq!(u.input_tokens, Some(u64::MAX));
    assert_eq!(u.output_tokens, Some(u64::MAX));
    assert_eq!(u.total_tokens, Some(u64::MAX));
    assert_eq!(u.cache_read_tokens, Some(u64::MAX));
}

// ---------------------------------------------------------------------------------------------
// Garbage in, no panic out

fn check(raw: &RawOutput) {
    let obs = OpenCode.parse(raw);
    let _ = OpenCode.runtime_check(raw);
    match obs {
        Ok(Observation::Answer { .. } | Observation::AgentFailure { .. }) => {}
        Err(OutputError::Missing | OutputError::Envelope { .. }) => {}
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn count() -> BoxedStrategy<Value> {
    prop_oneof![
        (0u64..1000).prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (u64::MAX - 1000..=u64::MAX).prop_map(|n| json!(n)),
        (-1000i64..0).prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        Just(Value::Null),
        "[a-z0-9]{0,6}".prop_map(Value::String),
    ]
    .boxed()
}

fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        count(),
        "\\PC{0,20}".prop_map(Value::String),
    ]
    .boxed()
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("type".to_owned()),
        Just("sessionID".to_owned()),
        Just("part".to_owned()),
        Just("text".to_owned()),
        Just("tokens".to_owned()),
        Just("input".to_owned()),
        Just("output".to_owned()),
        Just("cache".to_owned()),
        Just("read".to_owned()),
        Just("write".to_owned()),
        Just("cost".to_owned()),
        Just("error".to_owned()),
        Just("data".to_owned()),
        Just("message".to_owned()),
        Just("name".to_owned()),
        "[a-zA-Z_]{1,8}",
    ]
}

fn json_value() -> BoxedStrategy<Value> {
    scalar()
        .prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key(), inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}

fn tokens() -> BoxedStrategy<Value> {
    (
        prop::option::of(count()),
        prop::option::of(count()),
        prop::option::of((prop::option::of(count()), prop::option::of(count()))),
    )
        .prop_map(|(input, output, cache)| {
            let mut t = serde_json::Map::new();
            if let Some(v) = input {
                t.insert("input".into(), v);
            }
            if let Some(v) = output {
                t.insert("output".into(), v);
            }
            if let Some((read, write)) = cache {
                let mut c = serde_json::Map::new();
                if let Some(v) = read {
                    c.insert("read".into(), v);
                }
                if let Some(v) = write {
                    c.insert("write".into(), v);
                }
                t.insert("cache".into(), Value::Object(c));
            }
            Value::Object(t)
        })
        .boxed()
}

fn part() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => (
            prop::option::of(prop_oneof!["\\PC{0,30}".prop_map(Value::String), scalar()]),
            prop::option::of(tokens()),
            prop::option::of(prop_oneof![(0.0f64..10.0).prop_map(|f| json!(f)), scalar()]),
        )
            .prop_map(|(text, tokens, cost)| {
                let mut p = serde_json::Map::new();
                if let Some(v) = text {
                    p.insert("text".into(), v);
                }
                if let Some(v) = tokens {
                    p.insert("tokens".into(), v);
                }
                if let Some(v) = cost {
                    p.insert("cost".into(), v);
                }
                Value::Object(p)
            }),
        1 => json_value(),
    ]
    .boxed()
}

/// One OpenCode-like event: a plausible type, usually the common session, a part, sometimes
/// an error object and random extra fields.
fn event() -> BoxedStrategy<Value> {
    (
        prop_oneof![
            Just(json!("text")),
            Just(json!("step_finish")),
            Just(json!("step_start")),
            Just(json!("error")),
            Just(json!("tool_use")),
            Just(json!("reasoning")),
            "[a-z_]{0,12}".prop_map(Value::String),
            scalar(),
        ],
        prop_oneof![
            8 => Just(Some(json!(SESSION))),
            1 => Just(Some(json!("ses_other"))),
            1 => Just(None),
            1 => scalar().prop_map(Some),
        ],
        prop::option::of(part()),
        prop::option::of(json_value()),
        prop::collection::btree_map(key(), json_value(), 0..3),
    )
        .prop_map(|(t, session, part, error, extra)| {
            let mut m: serde_json::Map<String, Value> = extra.into_iter().collect();
            m.insert("type".into(), t);
            match session {
                Some(s) => {
                    m.insert("sessionID".into(), s);
                }
                None => {
                    m.remove("sessionID");
                }
            }
            if let Some(p) = part {
                m.insert("part".into(), p);
            }
            if let Some(e) = error {
                m.insert("error".into(), e);
            }
            Value::Object(m)
        })
        .boxed()
}

fn event_lines() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            8 => event().prop_map(|v| v.to_string()),
            1 => "[ -~]{0,30}",
            1 => Just(String::new()),
        ],
        0..10,
    )
    .prop_map(|ls| ls.join("\n").into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_text_lines_never_panic(stdout in "(\\PC{0,40}\n){0,12}") {
        check(&RawOutput { stdout: stdout.into_bytes(), ..RawOutput::default() });
    }

    #[test]
    fn event_like_lines_never_panic(stdout in event_lines(), exit_code in prop::option::of(any::<i32>())) {
        check(&RawOutput { stdout, stderr: Vec::new(), exit_code, answer_file: None });
    }

    #[test]
    fn well_formed_streams_with_a_text_are_answers_or_failures(
        steps in prop::collection::vec(
            (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), 0.0f64..1.0),
            0..5,
        ),
        text in "\\PC{0,40}",
        with_error in any::<bool>(),
    ) {
        let mut events: Vec<Value> = steps
            .iter()
            .map(|(i, o, r, w, c)| {
                step_finish(u64::from(*i), u64::from(*o), u64::from(*r), u64::from(*w), *c)
            })
            .collect();
        events.push(text_event(&text));
        if with_error {
            events.push(api_error_event());
        }
        let expected_input: u64 = steps
            .iter()
            .map(|(i, _, r, w, _)| u64::from(*i) + u64::from(*r) + u64::from(*w))
            .sum();
        let expected_output: u64 = steps.iter().map(|(_, o, _, _, _)| u64::from(*o)).sum();
        let (u, is_failure) = match OpenCode.parse(&stdout(lines(&events))) {
            Ok(Observation::Answer { payload, usage }) => {
                prop_assert_eq!(payload, text.as_bytes().to_vec());
                (usage, false)
            }
            Ok(Observation::AgentFailure { usage, .. }) => (usage, true),
            other => return Err(TestCaseError::fail(format!("{other:?}"))),
        };
        prop_assert_eq!(is_failure, with_error);
        if steps.is_empty() {
            prop_assert!(u.is_none());
        } else {
            let u = u.unwrap();
            prop_assert_eq!(u.input_tokens, Some(expected_input));
            prop_assert_eq!(u.output_tokens, Some(expected_output));
            prop_assert_eq!(u.total_tokens, Some(expected_input + expected_output));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Preflight, end to end against the testkit's fake OpenCode

/// `opencode` in `<root>/<dir>/bin`, answering `run --help` and `--pure debug config` with the
/// given shell snippets and everything else through the fake.
fn wrapper(
    w: &ProbeWorld,
    dir: &str,
    run_help: Option<&str>,
    debug_config: Option<&str>,
) -> Utf8PathBuf {
    let delegate = "exec \"$FAKE\" \"$@\"";
    let body = format!(
        "case \"$*\" in\n  \"run --help\") {} ;;\n  \"--pure debug config\") {} ;;\n  *) {delegate} ;;\nesac",
        run_help.unwrap_or(delegate),
        debug_config.unwrap_or(delegate),
    );
    w.script(dir, "opencode", &body)
}

#[tokio::test]
async fn preflight_passes_against_the_fake() {
    let p = ProbeWorld::new();
    p.agents.record_dir();
    let result = OpenCode.preflight(&p.fake("opencode"), &p.probe).await;
    assert_eq!(result.failure, None);
    assert_eq!(result.version, Some(fake_version("opencode")));

    // The probes: version, both help texts, then `debug config` for the writer and the
    // reader, each with its own private configuration roots and the reference's default
    // controls (bash allowed, web denied, no MCP).
    let calls = p.agents.invocations();
    let argv: Vec<Value> = calls.iter().map(|c| c["argv"].clone()).collect();
    assert_eq!(
        argv,
        [
            json!(["--version"]),
            json!(["--help"]),
            json!(["run", "--help"]),
            json!(["--pure", "debug", "config"]),
            json!(["--pure", "debug", "config"]),
        ]
    );
    for (call, agent, write) in [(&calls[3], WRITER, true), (&calls[4], READER, false)] {
        let env = &call["env"];
        let root = p.probe.scratch.join(format!("opencode-probe-{agent}"));
        for (var, dir) in [
            ("HOME", "home"),
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_CACHE_HOME", "cache"),
            ("XDG_STATE_HOME", "state"),
            ("OPENCODE_CONFIG_DIR", "config"),
        ] {
            assert_eq!(env[var], json!(root.join(dir).as_str()), "{agent}: {var}");
            assert!(root.join(dir).is_dir(), "{agent}: {dir} not created");
        }
        let user_data = format!("{}/.local/share", p.probe.env["HOME"]);
        assert_eq!(env["XDG_DATA_HOME"], json!(user_data));
        for (k, v) in FIXED_ENV {
            assert_eq!(env[*k], json!(v), "{agent}: {k}");
        }
        let config: Value =
            serde_json::from_str(env["OPENCODE_CONFIG_CONTENT"].as_str().unwrap()).unwrap();
        let expected = expected_permission(write, true, false, &[]);
        assert_eq!(config["agent"][agent]["permission"], expected, "{agent}");
        assert_eq!(config["permission"], expected, "{agent}");
        assert_eq!(config["mcp"], json!({}));
        assert!(config.get("provider").is_none());
        assert_eq!(call["cwd"], json!(p.probe.scratch.as_str()));
    }
}

#[tokio::test]
async fn preflight_reports_the_fakes_version() {
    let p = ProbeWorld::new();
    p.agents.set("HANDOFF_FAKE_VERSION", "1.18.33");
    let result = OpenCode.preflight(&p.fake("opencode"), &p.probe).await;
    assert_eq!(result.failure, None);
    assert_eq!(result.version.as_deref(), Some("opencode 1.18.33"));
}

#[tokio::test]
async fn preflight_reports_an_executable_that_fails() {
    let p = ProbeWorld::new();
    let broken = p.root.join("broken");
    std::fs::write(&broken, "#!/bin/sh\necho 'cannot start' >&2\nexit 3\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let result = OpenCode.preflight(&broken, &p.probe).await;
    assert_eq!(result.version, None);
    let failure = result.failure.unwrap();
    assert!(
        failure.contains("exited with 3") && failure.contains("cannot start"),
        "{failure}"
    );
}

/// The resolved-policy probe (`check_resolved`, not exported) through a wrapper that alters
/// what `debug config` prints.
#[tokio::test]
async fn preflight_checks_the_resolved_configuration() {
    let p = ProbeWorld::new();
    let echo = "printf '%s\\n' \"$OPENCODE_CONFIG_CONTENT\"";
    let sed = |expr: &str| format!("{echo} | sed '{expr}'");
    let cases = [
        ("ok-echo", None, Some(echo.to_owned()), None),
        (
            "ok-log-noise",
            None,
            Some(format!("echo 'INFO  service=config loading'; {echo}")),
            None,
        ),
        (
            "run-help-lacks-variant",
            Some("\"$FAKE\" \"$@\" | sed 's/--variant/--flavour/'".to_owned()),
            None,
            Some("`opencode run --help` does not list --variant"),
        ),
        (
            "debug-config-fails",
            None,
            Some("echo 'Error: invalid config' >&2; exit 1".to_owned()),
            Some("`opencode --pure debug config` exited with Some(1): Error: invalid config"),
        ),
        (
            "no-json",
            None,
            Some("echo 'nothing to see'".to_owned()),
            Some("printed no JSON"),
        ),
        (
            "invalid-json",
            None,
            Some("echo '{\"agent\":'".to_owned()),
            Some("printed invalid JSON"),
        ),
        (
            "no-agent",
            None,
            Some("echo '{}'".to_owned()),
            Some("handoff_writer policy: the resolved configuration has no agent handoff_writer"),
        ),
        (
            "subagent",
            None,
            Some(sed("s/\"mode\":\"primary\"/\"mode\":\"subagent\"/")),
            Some("agent handoff_writer did not resolve as a primary agent"),
        ),
        (
            "tools-table",
            None,
            Some(sed(
                "s/\"mode\":\"primary\"/\"mode\":\"primary\",\"tools\":{\"bash\":true}/",
            )),
            Some("agent handoff_writer resolved with a tools table of its own"),
        ),
        (
            // The writer already allows edits: only the reader's probe can catch this.
            "reader-edits",
            None,
            Some(sed("s/\"edit\":\"deny\"/\"edit\":\"allow\"/g")),
            Some("handoff_reader policy: the resolved permissions differ"),
        ),
        (
            "snapshot-on",
            None,
            Some(sed("s/\"snapshot\":false/\"snapshot\":true/")),
            Some("the resolved configuration has snapshot = true"),
        ),
        (
            "plugin",
            None,
            Some(sed("s/\"plugin\":\\[\\]/\"plugin\":[\"evil\"]/")),
            Some("the resolved configuration has plugin = [\"evil\"]"),
        ),
        (
            "instructions",
            None,
            Some(sed(
                "s/\"instructions\":\\[\\]/\"instructions\":[\"AGENTS.md\"]/",
            )),
            Some("instructions = [\"AGENTS.md\"]"),
        ),
        (
            "mcp",
            None,
            Some(sed("s/\"mcp\":{}/\"mcp\":{\"x\":{\"type\":\"local\"}}/")),
            Some("the resolved configuration has mcp ="),
        ),
        (
            "share",
            None,
            Some(sed("s/\"share\":\"disabled\"/\"share\":\"auto\"/")),
            Some("share = \"auto\""),
        ),
    ];
    for (name, run_help, debug, expected) in cases {
        let exe = wrapper(&p, name, run_help.as_deref(), debug.as_deref());
        let result = OpenCode.preflight(&exe, &p.probe).await;
        assert_eq!(result.version, Some(fake_version("opencode")), "{name}");
        match (expected, result.failure) {
            (None, None) => {}
            (Some(want), Some(got)) => assert!(got.contains(want), "{name}: {got}"),
            (want, got) => panic!("{name}: expected failure {want:?}, got {got:?}"),
        }
    }
}
