//! The user configuration reaches the agent process, and refused entries start nothing.

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;

use crate::support::{Run, Sandbox};

fn write_config(sb: &Sandbox, text: &str) -> String {
    sb.write_config(text)
}

fn run_of(sb: &Sandbox) -> Value {
    let runs = sb.runs();
    assert_eq!(runs.len(), 1, "exactly one agent run expected");
    runs.into_iter().next().unwrap()
}

fn delegate_with_env(
    sb: &Sandbox,
    target: &str,
    mode: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let caller = if target == "codex" { "claude" } else { "codex" };
    let ins = sb.instructions("Do the configured thing.");
    let cwd = sb.cwd();
    let mut cmd = sb.command();
    cmd.args([
        "run",
        "--caller-harness",
        caller,
        "--harness",
        target,
        "--mode",
        mode,
    ])
    .args(["--cwd", &cwd, "--instructions", &ins])
    .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    sb.exec(&mut cmd)
}

#[test]
fn env_and_pass_env_reach_the_agent_and_secrets_stay_out_of_the_result() {
    let sb = Sandbox::new();
    write_config(
        &sb,
        r#"
[agents.claude]
env = { ANTHROPIC_BASE_URL = "http://127.0.0.1:9/anthropic", ANTHROPIC_AUTH_TOKEN = "cfg-token-0123456789" }
pass_env = ["MY_GATEWAY_HEADER"]
"#,
    );
    sb.record();
    let run = delegate_with_env(
        &sb,
        "claude",
        "review",
        &[],
        &[
            ("MY_GATEWAY_HEADER", "gw-header-value"),
            ("NOT_LISTED", "nope"),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let env = &run_of(&sb)["env"];
    assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9/anthropic");
    assert_eq!(env["ANTHROPIC_AUTH_TOKEN"], "cfg-token-0123456789");
    assert_eq!(env["MY_GATEWAY_HEADER"], "gw-header-value");
    assert!(env.get("NOT_LISTED").is_none());
    let applied = run.json["policy"]["configuration"]["applied"].clone();
    assert_eq!(
        applied,
        serde_json::json!([
            "agents.claude.pass_env.MY_GATEWAY_HEADER",
            "agents.claude.env.ANTHROPIC_AUTH_TOKEN",
            "agents.claude.env.ANTHROPIC_BASE_URL"
        ])
    );
    assert!(!run.stdout.contains("cfg-token-0123456789"));
}

#[test]
fn selection_precedence_flag_then_config_then_default() {
    let sb = Sandbox::new();
    write_config(
        &sb,
        "[agents.codex]\nmodel = \"cfg-model\"\neffort = \"low\"\n",
    );
    sb.record();
    let run = delegate_with_env(&sb, "codex", "build", &[], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let argv: Vec<String> = serde_json::from_value(run_of(&sb)["argv"].clone()).unwrap();
    let at = argv.iter().position(|a| a == "--model").unwrap();
    assert_eq!(argv[at + 1], "cfg-model");
    assert!(argv.contains(&"model_reasoning_effort=\"low\"".to_string()));
    let p = &run.json["selection"]["provenance"];
    assert_eq!(p["model"], "config");
    assert_eq!(p["effort"], "config");

    let sb = Sandbox::new();
    write_config(&sb, "[agents.codex]\nmodel = \"cfg-model\"\n");
    let run = delegate_with_env(&sb, "codex", "build", &["--model", "flag-model"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json["selection"]["resolved"]["model"], "flag-model");
    assert_eq!(run.json["selection"]["provenance"]["model"], "explicit");

    // Advice falls back to the operation default when the config says nothing.
    let sb = Sandbox::new();
    write_config(&sb, "[agents.claude]\nmodel = \"m\"\n");
    let ins = sb.instructions("What do you think?");
    let cwd = sb.cwd();
    let run = sb.run(&[
        "advice",
        "--caller-harness",
        "codex",
        "--harness",
        "claude",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.json["selection"]["provenance"]["effort"],
        "operation-default"
    );
    assert_eq!(
        run.json["selection"]["provenance"]["maxTurns"],
        "operation-default"
    );
    assert_eq!(run.json["selection"]["provenance"]["model"], "config");
}

#[test]
fn refused_configuration_starts_nothing() {
    let cases = [
        (
            "[agents.codex]\nconfig = ['sandbox_mode=\"danger-full-access\"']\n",
            "pinned",
        ),
        ("[agents.codex]\nmodle = \"x\"\n", "line 2"),
        ("[agents.codex]\nmax_turns = 5\n", "turn limit"),
        ("[agents.claude]\neffort = \"extreme\"\n", "effort"),
        ("[agents.nobody]\nmodel = \"x\"\n", "unknown agent"),
        (
            "[agents.claude]\nenv = { DISABLE_AUTOUPDATER = \"0\" }\n",
            "isolation",
        ),
    ];
    for (text, needle) in cases {
        let sb = Sandbox::new();
        write_config(&sb, text);
        sb.record();
        let run = delegate_with_env(&sb, "claude", "review", &[], &[]);
        let run = if run.code == 0 {
            delegate_with_env(&sb, "codex", "review", &[], &[])
        } else {
            run
        };
        assert_eq!(run.code, 5, "{text}: {}", run.stdout);
        assert_eq!(run.status(), "rejected");
        let msg = run.json["diagnostics"]["message"].as_str().unwrap_or("");
        assert!(msg.contains(needle), "{text}: {msg}");
        assert!(
            sb.agents.invocations().is_empty(),
            "{text}: an agent was started"
        );
    }
}

#[test]
fn config_show_masks_and_check_reports() {
    let sb = Sandbox::new();
    let path = write_config(
        &sb,
        "[agents.claude]\nenv = { ANTHROPIC_API_KEY = \"sk-config-secret-123456\" }\n",
    );
    let run = sb.run(&["config", "show", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("sk-config-secret"));
    assert_eq!(run.json["file"], path.as_str());
    assert_eq!(
        run.json["config"]["agents"]["claude"]["env"]["ANTHROPIC_API_KEY"],
        "********"
    );

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = sb.run(&["config", "check"]);
    assert_eq!(run.code, 0);
    assert!(
        run.stderr.contains("readable by group or others"),
        "{}",
        run.stderr
    );

    let bad = sb.private.join("bad.toml");
    std::fs::write(
        &bad,
        "[agents.codex]\nconfig = ['approval_policy=\"on-request\"']\n",
    )
    .unwrap();
    let run = sb.run(&["config", "check", bad.to_str().unwrap()]);
    assert_eq!(run.code, 5);
    assert!(run.stderr.contains("approval_policy"), "{}", run.stderr);
}

#[test]
fn codex_overrides_and_opencode_provider_reach_the_agent() {
    let sb = Sandbox::new();
    write_config(
        &sb,
        r#"
[agents.codex]
config = ['model_provider="gw"', 'model_providers.gw.base_url="http://127.0.0.1:9/v1"', 'model_providers.gw.env_key="GW_KEY"']
pass_env = ["GW_KEY"]

[agents.opencode]
model = "gw/qwen3-coder"

[agents.opencode.provider.gw]
npm = "@ai-sdk/openai-compatible"
options = { baseURL = "http://127.0.0.1:9/v1", apiKey = "sk-opencode-local-123456" }
"#,
    );
    sb.record();
    let run = delegate_with_env(
        &sb,
        "codex",
        "build",
        &[],
        &[("GW_KEY", "gw-key-value-0123")],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let inv = run_of(&sb);
    let argv: Vec<String> = serde_json::from_value(inv["argv"].clone()).unwrap();
    for o in [
        "model_provider=\"gw\"",
        "model_providers.gw.base_url=\"http://127.0.0.1:9/v1\"",
        "model_providers.gw.env_key=\"GW_KEY\"",
    ] {
        let at = argv
            .iter()
            .position(|a| a == o)
            .unwrap_or_else(|| panic!("{o} missing: {argv:?}"));
        assert_eq!(argv[at - 1], "--config");
    }
    assert_eq!(inv["env"]["GW_KEY"], "gw-key-value-0123");
    assert!(!run.stdout.contains("gw-key-value-0123"));

    let sb2 = Sandbox::new();
    std::fs::create_dir_all(sb2.root.join("home/.config/handoff")).unwrap();
    std::fs::copy(
        sb.root.join("home/.config/handoff/config.toml"),
        sb2.root.join("home/.config/handoff/config.toml"),
    )
    .unwrap();
    sb2.record();
    let run = delegate_with_env(&sb2, "opencode", "build", &[], &[]);
    assert_eq!(run.code, 0, "{} {}", run.stdout, run.stderr);
    assert_eq!(run.json["selection"]["resolved"]["model"], "gw/qwen3-coder");
    let inv = run_of(&sb2);
    let inline: Value =
        serde_json::from_str(inv["env"]["OPENCODE_CONFIG_CONTENT"].as_str().unwrap()).unwrap();
    assert_eq!(
        inline["provider"]["gw"]["options"]["baseURL"],
        "http://127.0.0.1:9/v1"
    );
    assert_eq!(inline["agent"]["handoff_writer"]["mode"], "primary");
    assert!(sb2.repo.path().join("fake-build.txt").exists());
    assert!(!run.stdout.contains("sk-opencode-local-123456"));
    assert_eq!(
        run.json["policy"]["configuration"]["applied"],
        serde_json::json!(["agents.opencode.model", "agents.opencode.provider.gw"])
    );
}

#[test]
fn an_opencode_provider_touching_permissions_starts_nothing() {
    let sb = Sandbox::new();
    write_config(
        &sb,
        "[agents.opencode.provider.gw]\npermission = { edit = \"allow\" }\n",
    );
    sb.record();
    let run = delegate_with_env(&sb, "opencode", "review", &[], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert!(
        run.json["diagnostics"]["message"]
            .as_str()
            .unwrap()
            .contains("pinned")
    );
    assert!(sb.agents.invocations().is_empty());
}

#[test]
fn isolation_variables_of_opencode_cannot_be_overridden() {
    for text in [
        "[agents.opencode]\nenv = { HOME = \"/tmp/elsewhere\" }\n",
        "[agents.opencode]\nenv = { OPENCODE_DISABLE_PROJECT_CONFIG = \"0\" }\n",
        "[agents.opencode]\npass_env = [\"OPENCODE_PERMISSION\"]\n",
    ] {
        let sb = Sandbox::new();
        write_config(&sb, text);
        sb.record();
        let run = delegate_with_env(
            &sb,
            "opencode",
            "review",
            &[],
            &[("OPENCODE_PERMISSION", "{}")],
        );
        assert_eq!(run.code, 5, "{text}: {}", run.stdout);
        let msg = run.json["diagnostics"]["message"].as_str().unwrap();
        assert!(msg.contains("isolation"), "{text}: {msg}");
        assert!(sb.agents.invocations().is_empty(), "{text}");
    }
}

#[test]
fn an_isolation_variable_set_to_handoffs_own_value_is_accepted() {
    // Common in users' setups: the value handoff pins anyway.
    let sb = Sandbox::new();
    write_config(
        &sb,
        "[agents.claude]\nenv = { DISABLE_AUTOUPDATER = \"1\" }\n",
    );
    sb.record();
    let run = delegate_with_env(&sb, "claude", "review", &[], &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(run_of(&sb)["env"]["DISABLE_AUTOUPDATER"], "1");

    // Another value is still refused, and nothing starts.
    let sb = Sandbox::new();
    write_config(
        &sb,
        "[agents.claude]\nenv = { DISABLE_AUTOUPDATER = \"0\" }\n",
    );
    sb.record();
    let run = delegate_with_env(&sb, "claude", "review", &[], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    let msg = run.json["diagnostics"]["message"].as_str().unwrap();
    assert!(
        msg.contains("DISABLE_AUTOUPDATER") && msg.contains("isolation"),
        "{msg}"
    );
    assert!(sb.agents.invocations().is_empty());
}

#[test]
fn a_codex_override_that_carries_a_credential_is_refused_before_anything_runs() {
    // On Codex's command line it would be readable by every local user.
    let sb = Sandbox::new();
    let path = write_config(
        &sb,
        "[agents.codex]\nconfig = [\"model_providers.gw.experimental_bearer_token=\\\"tok-Zx81Lk90\\\"\"]\n",
    );
    let check = sb.run(&["config", "check", &path]);
    assert_eq!(check.code, 5, "{check:?}");
    assert!(check.stderr.contains("env_key"), "{check:?}");
    assert!(!check.stderr.contains("tok-Zx81Lk90"), "{check:?}");
    sb.record();
    let run = delegate_with_env(&sb, "codex", "review", &[], &[]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert!(sb.agents.invocations().is_empty());
    assert!(!run.stdout.contains("tok-Zx81Lk90"), "{}", run.stdout);
}
