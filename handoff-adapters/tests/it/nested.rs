//! Workers that may ask for nested advice (`RunDir.nested`): what each adapter opens in its
//! sandbox so the nested command reaches its mailbox to the supervisor, one snapshot per agent
//! and mode, and invariants: nothing else changes, and nothing changes without `nested`.

use camino::Utf8PathBuf;
use handoff_core::{
    AgentConfig, Invocation, InvocationError, NestedAccess, RunDir, RunInput, build_prompt,
    provider_output_schema,
};
use serde_json::{Value, json};

use crate::support::*;

const HARNESSES: &[&str] = &["claude", "codex", "opencode"];

/// Read-only and writing workers.
const MODES: &[&str] = &["review", "build"];

const HANDOFF_EXE: &str = "/usr/local/bin/handoff";

fn access(fx: &Fixture) -> NestedAccess {
    NestedAccess {
        mailbox: fx.root.join("handoff-mailboxes-0/mb-abc"),
        handoff_exe: Utf8PathBuf::from(HANDOFF_EXE),
    }
}

fn exe(harness: &str) -> &'static str {
    match harness {
        "opencode" => "/usr/local/bin/opencode",
        other => executable(other),
    }
}

/// Plans `input` with `nested` and the user's Codex `config` overrides.
fn plan_nested(
    fx: &Fixture,
    input: &RunInput,
    nested: Option<NestedAccess>,
    config: &[&str],
) -> Result<Invocation, InvocationError> {
    let validated = validate(input);
    let harness = validated.request.target.harness.to_string();
    let schema = provider_output_schema();
    let run = RunDir {
        handoff_sandbox: false,
        confined: false,
        path: fx.run_path.clone(),
        executable: exe(&harness).into(),
        prompt: build_prompt(&validated.request, &schema, None),
        output_schema: schema,
        mcp: validated.mcp.clone(),
        parent_env: parent_env(),
        agent_config: AgentConfig {
            config: config.iter().map(|s| (*s).to_owned()).collect(),
            ..AgentConfig::default()
        },
        nested,
    };
    provider(&harness).invocation(&validated.request, &run)
}

fn plan(fx: &Fixture, harness: &str, mode: &str, nested: bool) -> Invocation {
    let nested = nested.then(|| access(fx));
    plan_nested(fx, &fx.input(harness, Some(mode)), nested, &[])
        .unwrap_or_else(|e| panic!("invocation refused: {e}"))
}

/// The argv with the schema payload replaced, Claude's `--settings` parsed, and the policy.
fn describe(inv: &Invocation) -> Value {
    let mut args = inv.args.clone();
    if let Some(i) = args.iter().position(|a| a == "--json-schema") {
        args[i + 1] = "<provider-output schema without $schema/$id>".into();
    }
    let settings = arg_after(&inv.args, "--settings")
        .map(|s| serde_json::from_str::<Value>(s).expect("--settings is JSON"));
    json!({"args": args, "settings": settings, "policy": inv.policy})
}

#[test]
fn nested_invocation_snapshots() {
    let fx = Fixture::new();
    for harness in HARNESSES {
        for mode in MODES {
            let inv = plan(&fx, harness, mode, true);
            let mut settings = fx.insta_settings();
            settings.set_snapshot_suffix(*mode);
            settings.set_description(format!("{harness} {mode} worker with nested advice"));
            settings.bind(|| insta::assert_json_snapshot!(*harness, describe(&inv)));
        }
    }
}

/// The argv positions where two plans differ, as (without, with) pairs of argument lists.
fn arg_diff(a: &[String], b: &[String]) -> (Vec<String>, Vec<String>) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (
        a[prefix..a.len() - suffix].to_vec(),
        b[prefix..b.len() - suffix].to_vec(),
    )
}

fn policy_without_receipt(inv: &Invocation) -> Value {
    let mut p = inv.policy.clone();
    let obj = p.as_object_mut().expect("policy object");
    assert!(
        obj.remove("nestedAdvice").is_some(),
        "no nestedAdvice receipt"
    );
    p
}

#[test]
fn nested_access_changes_only_what_reaches_the_mailbox() {
    let fx = Fixture::new();
    let access = access(&fx);
    let mailbox = access.mailbox.to_string();
    for harness in HARNESSES {
        for mode in MODES {
            let plain = plan(&fx, harness, mode, false);
            let nested = plan(&fx, harness, mode, true);
            assert!(
                plain.policy.get("nestedAdvice").is_none(),
                "{harness} {mode}"
            );
            let receipt = &nested.policy["nestedAdvice"];
            assert_eq!(receipt["mailbox"], mailbox.as_str(), "{harness} {mode}");
            if matches!(*harness, "claude" | "codex") {
                // Exactly what the sandbox opened: in/ writable, out/ readable, no socket.
                assert_eq!(
                    receipt["writable"],
                    json!([access.inbox()]),
                    "{harness} {mode}"
                );
                assert_eq!(
                    receipt["readable"],
                    json!([access.outbox()]),
                    "{harness} {mode}"
                );
                assert!(
                    receipt["unixSockets"]
                        .as_str()
                        .is_some_and(|s| s.starts_with("none")),
                    "{harness} {mode}: {receipt}"
                );
            }
            assert_eq!(receipt["handoffExe"], HANDOFF_EXE, "{harness} {mode}");
            assert_eq!(plain.env, nested.env, "{harness} {mode}");
            assert_eq!(plain.files, nested.files, "{harness} {mode}");
            assert_eq!(plain.cwd, nested.cwd, "{harness} {mode}");
            let (before, after) = arg_diff(&plain.args, &nested.args);
            let policy = policy_without_receipt(&nested);
            match *harness {
                "claude" => {
                    // Only the sandbox settings change.
                    assert_eq!(before.len(), 1, "{before:?}");
                    assert_eq!(after.len(), 1, "{after:?}");
                    assert_eq!(
                        arg_after(&plain.args, "--settings"),
                        Some(before[0].as_str())
                    );
                }
                "codex" => {
                    // `--sandbox <mode>` gives way to the permission profile.
                    let sandbox = if *mode == "build" {
                        "workspace-write"
                    } else {
                        "read-only"
                    };
                    assert_eq!(before, ["--sandbox", sandbox]);
                    assert!(!nested.args.iter().any(|a| a == "--sandbox"));
                    assert!(after.chunks(2).all(|c| c[0] == "--config"), "{after:?}");
                    assert_eq!(nested.policy["network"], "blocked");
                }
                _ => {
                    assert!(before.is_empty() && after.is_empty(), "{after:?}");
                }
            }
            assert_eq!(policy, plain.policy, "{harness} {mode}");
        }
    }
}

fn claude_sandbox(inv: &Invocation) -> Value {
    let settings: Value =
        serde_json::from_str(arg_after(&inv.args, "--settings").unwrap()).unwrap();
    settings["sandbox"].clone()
}

#[test]
fn claude_read_only_runs_deny_its_protected_names_before_the_worktree() {
    let fx = Fixture::new();
    let cwd = fx.cwd.to_string();
    let sandbox = claude_sandbox(&plan(&fx, "claude", "review", true));
    let deny: Vec<String> = serde_json::from_value(sandbox["filesystem"]["denyWrite"].clone())
        .expect("denyWrite is a list");
    assert_eq!(deny.last(), Some(&cwd), "the worktree is denied last");
    assert!(deny.contains(&format!("{cwd}/.gitconfig")), "{deny:?}");
    assert!(deny.contains(&format!("{cwd}/.claude/agents")), "{deny:?}");
    // Besides the worktree, only the shared areas every sandboxed command could write.
    assert!(
        deny.iter()
            .all(|d| d.starts_with(&cwd)
                || handoff_adapters::CLAUDE_SHARED_AREAS.contains(&d.as_str())),
        "{deny:?}"
    );
    // The mailbox's in/ is the one writable path; the mailbox is readable; no socket, no
    // domain.
    let access = access(&fx);
    assert_eq!(sandbox["filesystem"]["allowWrite"], json!([access.inbox()]));
    assert_eq!(
        sandbox["filesystem"]["allowRead"],
        json!([cwd, access.mailbox])
    );
    assert_eq!(sandbox["network"], json!({"allowedDomains": []}));

    // A writing worker keeps its worktree writable and denies only the shared areas.
    let sandbox = claude_sandbox(&plan(&fx, "claude", "build", true));
    assert_eq!(
        sandbox["filesystem"]["denyWrite"],
        json!(handoff_adapters::CLAUDE_SHARED_AREAS)
    );
    assert_eq!(
        sandbox["filesystem"]["allowWrite"],
        json!([cwd, access.inbox()])
    );

    // Without nested advice nothing is added; the protected names are denied the same way
    // (every read-only Bash needs it).
    let sandbox = claude_sandbox(&plan(&fx, "claude", "review", false));
    assert_eq!(sandbox["network"], json!({"allowedDomains": []}));
    assert_eq!(sandbox["filesystem"]["allowWrite"], json!([]));
    assert_eq!(sandbox["filesystem"]["allowRead"], json!([cwd]));
    let plain: Vec<String> = serde_json::from_value(sandbox["filesystem"]["denyWrite"].clone())
        .expect("denyWrite is a list");
    assert_eq!(plain, deny);
}

#[test]
fn codex_nested_profile_keeps_the_sandbox_modes_policy_and_adds_the_inbox() {
    let fx = Fixture::new();
    let inbox = access(&fx).inbox();
    for (mode, extends) in [("review", ":read-only"), ("build", ":workspace")] {
        let inv = plan(&fx, "codex", mode, true);
        let plain = plan(&fx, "codex", mode, false);
        let overrides = args_after(&inv.args, "--config");
        let added: Vec<&str> = overrides
            .iter()
            .filter(|o| !args_after(&plain.args, "--config").contains(o))
            .copied()
            .collect();
        // Exactly the profile: its parent and one writable path, nothing about the network.
        assert_eq!(
            added,
            [
                r#"default_permissions="handoff_nested""#.to_owned(),
                format!(r#"permissions.handoff_nested.extends="{extends}""#),
                format!(r#"permissions.handoff_nested.filesystem={{"{inbox}"="write"}}"#),
            ],
            "{mode}"
        );
    }
}

#[test]
fn codex_refuses_user_overrides_of_the_nested_permission_profile() {
    let fx = Fixture::new();
    let input = fx.input("codex", Some("review"));
    for o in [
        r#"default_permissions="mine""#,
        "permissions.handoff_nested.network.domains={\"example.com\"=\"allow\"}",
        " permissions.x.extends=\":workspace\"",
    ] {
        let refused = plan_nested(&fx, &input, Some(access(&fx)), &[o]);
        assert!(
            matches!(refused, Err(InvocationError::Unsupported(_))),
            "{o}: {refused:?}"
        );
        // Without nested advice `--sandbox` decides, whatever the profile says.
        let plain = plan_nested(&fx, &input, None, &[o]).expect("planned");
        assert_eq!(arg_after(&plain.args, "--sandbox"), Some("read-only"));
    }
    // Other overrides (a provider) still pass with nested advice.
    let ok =
        plan_nested(&fx, &input, Some(access(&fx)), &[r#"model_provider="gw""#]).expect("planned");
    assert!(args_after(&ok.args, "--config").contains(&r#"model_provider="gw""#));
}

#[test]
fn without_a_shell_nothing_is_opened() {
    let fx = Fixture::new();
    for harness in ["claude", "codex"] {
        for mode in MODES {
            let mut input = fx.input(harness, Some(mode));
            input.bash = Some("false".into());
            let plain = plan_nested(&fx, &input, None, &[]).expect("planned");
            let nested = plan_nested(&fx, &input, Some(access(&fx)), &[]).expect("planned");
            assert_eq!(plain.args, nested.args, "{harness} {mode}");
            let receipt = &nested.policy["nestedAdvice"];
            assert_eq!(
                receipt["opened"],
                "nothing: without a shell the worker cannot run the nested command",
                "{harness} {mode}"
            );
            assert_eq!(
                policy_without_receipt(&nested),
                plain.policy,
                "{harness} {mode}"
            );
        }
    }
}
