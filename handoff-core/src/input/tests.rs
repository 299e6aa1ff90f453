use super::*;
use crate::names::check_model;
use crate::provider::{
    AnswerSource, Invocation, InvocationError, Observation, Preflight, ProbeEnv, Provider,
    ProviderSpec, RawOutput, RunDir, StdinSource,
};
use crate::result::GrantCapabilities;
use proptest::prelude::*;
use std::sync::Arc;

struct Stub(ProviderSpec);

#[async_trait::async_trait]
impl Provider for Stub {
    fn spec(&self) -> &ProviderSpec {
        &self.0
    }
    fn invocation(&self, r: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        Ok(Invocation {
            sandbox: None,
            program: run.executable.clone(),
            args: vec![],
            env: Default::default(),
            cwd: r.cwd.clone().into(),
            stdin: StdinSource::Null,
            dirs: vec![],
            files: vec![],
            answer: AnswerSource::Stdout,
            policy: serde_json::Value::Null,
            secrets: vec![],
        })
    }
    fn parse(&self, _: &RawOutput) -> Result<Observation, crate::output::OutputError> {
        Err(crate::output::OutputError::Missing)
    }
    async fn preflight(&self, _: &camino::Utf8Path, _: &ProbeEnv) -> Preflight {
        Preflight {
            version: None,
            failure: None,
        }
    }
}

fn registry() -> Registry {
    let spec = |id: AgentId, effort: &'static [&'static str], turns: bool| ProviderSpec {
        id,
        executable: "x",
        extra_dirs: &[],
        effort,
        advice_effort: Some("high"),
        max_turns: turns.then_some(crate::provider::TurnDefaults {
            handoff: 12,
            advice: 32,
        }),
        grants: GrantCapabilities {
            bash: true,
            bash_disable: true,
            web_search: false,
            mcp: false,
            write: true,
            nested_source: true,
        },
        native_filesystem_isolation: true,
        native_bash_sandbox: true,
        env_passthrough: &[],
    };
    let mut r = Registry::new();
    r.register(Arc::new(Stub(spec(
        AgentId::CODEX,
        &["low", "high"],
        false,
    ))));
    r.register(Arc::new(Stub(spec(
        AgentId::CLAUDE,
        &["low", "high"],
        true,
    ))));
    r
}

fn input(dir: &str) -> RunInput {
    let mut i = RunInput::new(Verb::Run);
    i.caller_harness = Some("claude".into());
    i.harness = Some("codex".into());
    i.mode = Some("build".into());
    i.cwd = Some(dir.into());
    i.instructions = Some(Instructions::Stdin(b"do it".to_vec()));
    i
}

fn tmp() -> (tempfile::TempDir, String) {
    let t = tempfile::tempdir().unwrap();
    let p = std::fs::canonicalize(t.path())
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (t, p)
}

#[test]
fn defaults_and_provenance() {
    let (_t, dir) = tmp();
    let v = input(&dir).validate(&registry()).unwrap();
    let r = v.request;
    assert_eq!(r.selection.resolved.effort, PROVIDER_DEFAULT);
    assert_eq!(
        r.selection.provenance.max_turns,
        SelectionSource::ProviderDefault
    );
    assert!(r.grants.resolved.write && r.grants.resolved.bash && !r.grants.resolved.web_search);
    assert_eq!(r.budgets.remaining.handoff_nodes, 3);
    assert_eq!(r.budgets.remaining.nodes, 15);

    let mut a = input(&dir);
    a.verb = Verb::Advice;
    a.mode = None;
    a.harness = Some("claude".into());
    let r = a.validate(&registry()).unwrap().request;
    assert_eq!(r.selection.resolved.effort, "high");
    assert_eq!(
        r.selection.provenance.effort,
        SelectionSource::OperationDefault
    );
    assert_eq!(r.selection.resolved.max_turns, Some(32));
    assert!(!r.grants.resolved.write);
}

#[test]
fn precedence_is_flag_then_config_then_operation_default_then_provider_default() {
    let (_t, dir) = tmp();
    let config =
        Config::parse("[agents.claude]\nmodel = \"cfg\"\neffort = \"low\"\nmax_turns = 7\n")
            .unwrap();
    let mut a = input(&dir);
    a.verb = Verb::Advice;
    a.mode = None;
    a.harness = Some("claude".into());
    let r = a.validate_with(&registry(), &config).unwrap().request;
    assert_eq!(r.selection.resolved.model, "cfg");
    assert_eq!(r.selection.resolved.effort, "low");
    assert_eq!(r.selection.resolved.max_turns, Some(7));
    assert_eq!(r.selection.provenance.effort, SelectionSource::Config);
    a.effort = Some("high".into());
    a.max_turns = Some("3".into());
    let r = a.validate_with(&registry(), &config).unwrap().request;
    assert_eq!(r.selection.resolved.effort, "high");
    assert_eq!(r.selection.provenance.effort, SelectionSource::Explicit);
    assert_eq!(r.selection.resolved.max_turns, Some(3));
    assert_eq!(r.selection.provenance.model, SelectionSource::Config);
    let r = a
        .validate_with(&registry(), &Config::default())
        .unwrap()
        .request;
    assert_eq!(
        r.selection.provenance.model,
        SelectionSource::ProviderDefault
    );
    a.effort = None;
    let r = a
        .validate_with(&registry(), &Config::default())
        .unwrap()
        .request;
    assert_eq!(
        r.selection.provenance.effort,
        SelectionSource::OperationDefault
    );
    // A config value the agent cannot take is refused like a flag would be.
    let bad = Config::parse("[agents.codex]\nmax_turns = 4\n").unwrap();
    let refused = input(&dir).validate_with(&registry(), &bad).unwrap_err();
    assert_eq!(refused.field, "config");
    assert_eq!(
        refused.to_string(),
        "config agents.codex.max_turns: turn limits are unsupported for codex"
    );
}

#[test]
fn intent_hash_ignores_lineage_and_budgets_but_not_the_model() {
    let (_t, dir) = tmp();
    let a = input(&dir).validate(&registry()).unwrap().request;
    let mut b = input(&dir);
    b.max_concurrency = Some("8".into());
    let b = b.validate(&registry()).unwrap().request;
    assert_ne!(a.lineage.run_id, b.lineage.run_id);
    assert_eq!(a.intent_hash, b.intent_hash);
    let mut c = input(&dir);
    c.model = Some("gpt-x".into());
    assert_ne!(
        c.validate(&registry()).unwrap().request.intent_hash,
        a.intent_hash
    );
}

#[test]
fn root_verbs_derive_their_delegation() {
    let (_t, dir) = tmp();
    let reg = registry();
    let mut i = input(&dir);
    assert_eq!(
        i.validate(&reg).unwrap().request.delegation.mode,
        DelegationMode::None
    );
    i.verb = Verb::RunWithAdvice;
    let r = i.validate(&reg).unwrap().request;
    assert_eq!(r.delegation.mode, DelegationMode::AdviceOnly);
    assert_eq!(r.delegation.provenance, DelegationSource::VerbDerived);
}

#[test]
fn nested_requests_are_attenuated_and_derived() {
    let (_t, dir) = tmp();
    let reg = registry();
    let parent_grants = GrantsResolved {
        bash: false,
        web_search: false,
        mcp: false,
        write: true,
    };
    let caller = AgentId::parse("codex").unwrap();
    let parent = |depth| NestedParent {
        caller: &caller,
        depth,
        limits: BudgetLimits::default(),
        grants: &parent_grants,
        mcp: None,
    };
    let mut i = input(&dir);
    i.verb = Verb::Advice;
    i.mode = None;
    i.caller_harness = None;
    // bash defaults to the parent's grant; asking for more is refused.
    let r = i
        .validate_nested(&reg, &Config::default(), parent(0))
        .unwrap()
        .request;
    assert!(!r.grants.resolved.bash);
    assert_eq!(r.grants.provenance.bash, GrantSource::ParentAttenuated);
    assert_eq!(r.caller.harness, caller);
    assert_eq!(r.caller.provenance, CallerProvenance::SupervisorDerived);
    assert_eq!(r.lineage.depth, 1);
    assert_eq!(r.delegation.mode, DelegationMode::AdviceOnly);
    assert_eq!(
        i.validate_nested(&reg, &Config::default(), parent(2))
            .unwrap()
            .request
            .delegation
            .mode,
        DelegationMode::None,
        "the last level allowed by maxDepth cannot ask further"
    );
    let refused = |f: &dyn Fn(&mut RunInput)| {
        let mut j = i.clone();
        f(&mut j);
        j.validate_under(&reg, &Config::default(), parent(0))
            .unwrap_err()
            .field
    };
    const MCP: &[u8] = br#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"a","transport":"stdio","command":"/bin/x","args":[],"env":{}}]}"#;
    type Change = (&'static str, fn(&mut RunInput));
    let cases: [Change; 9] = [
        ("--bash", |j| j.bash = Some("true".into())),
        ("--caller-harness", |j| {
            j.caller_harness = Some("codex".into())
        }),
        ("--max-nodes", |j| j.max_nodes = Some("3".into())),
        ("--wait", |j| j.wait = true),
        ("verb", |j| j.verb = Verb::Run),
        ("--timeout-ms", |j| j.timeout_ms = Some("700000".into())),
        ("--dependency", |j| j.dependencies = vec!["needs:x".into()]),
        ("--dependency", |j| j.dependencies = vec!["requires".into()]),
        ("--mcp-config", |j| j.mcp_inline = Some(MCP.to_vec())),
    ];
    for (field, change) in cases {
        assert_eq!(refused(&change), field, "{field}");
    }
    // The supervisor's refusal carries the same message.
    let mut j = i.clone();
    j.bash = Some("true".into());
    assert_eq!(
        j.validate_nested(&reg, &Config::default(), parent(0))
            .unwrap_err(),
        j.validate_under(&reg, &Config::default(), parent(0))
            .unwrap_err()
            .to_string()
    );
    let mut j = i.clone();
    j.dependencies = vec!["advises:run-1".into(), "requires:run-2".into()];
    j.timeout_ms = Some("1000".into());
    let r = j
        .validate_nested(&reg, &Config::default(), parent(0))
        .unwrap()
        .request;
    assert_eq!(r.lineage.dependencies.len(), 2);
    assert_eq!(r.lineage.dependencies[0].kind, DependencyKind::Advises);
    assert_eq!(r.budgets.limits.timeout_ms, 1000);
}

#[test]
fn refusals() {
    let (_t, dir) = tmp();
    let reg = registry();
    let refuse = |f: &dyn Fn(&mut RunInput)| {
        let mut i = input(&dir);
        f(&mut i);
        i.validate(&reg).unwrap_err()
    };
    type Change = (&'static str, fn(&mut RunInput));
    let cases: [Change; 22] = [
        ("--max-turns", |i| i.max_turns = Some("5".into())),
        ("--effort", |i| i.effort = Some("max".into())),
        ("--model", |i| i.model = Some("-m".into())),
        ("--web-search", |i| i.web_search = Some("true".into())),
        ("--bash", |i| i.bash = Some("yes".into())),
        ("--caller-harness", |i| {
            i.caller_harness = Some("grok".into())
        }),
        ("--caller-harness", |i| i.caller_harness = None),
        ("--harness", |i| i.harness = Some("grok".into())),
        ("--mode", |i| i.mode = Some("fix".into())),
        ("--mode", |i| i.mode = None),
        ("--cwd", |i| i.cwd = Some("relative".into())),
        ("--cwd", |i| {
            i.cwd = Some("/nonexistent/handoff-test".into())
        }),
        ("--instructions", |i| {
            i.instructions = Some(Instructions::Stdin(b" \n".to_vec()));
        }),
        ("--instructions", |i| {
            i.instructions = Some(Instructions::File("/nonexistent/handoff-test".into()));
        }),
        ("--mcp-config", |i| i.mcp_config = Some("/x.json".into())),
        ("--timeout-ms", |i| i.timeout_ms = Some("2000000".into())),
        ("--max-handoff-nodes", |i| {
            i.max_handoff_nodes = Some("0".into());
            i.max_nodes = Some("4".into());
        }),
        ("--max-nodes", |i| i.max_nodes = Some("300".into())),
        ("--max-concurrency", |i| {
            i.max_concurrency = Some("x".into())
        }),
        ("--dependency", |i| {
            i.dependencies = vec!["requires:x".into()]
        }),
        ("verb", |i| i.nested = true),
        ("--harness", |i| {
            i.harness = None;
            i.cwd = None;
        }),
    ];
    for (field, change) in cases {
        let rejection = refuse(&change);
        assert_eq!(rejection.field, field, "{rejection}");
    }
    // The message is the whole of it, as printed.
    let missing = refuse(&|i| {
        i.harness = None;
        i.cwd = None;
    });
    assert_eq!(
        missing,
        InputRejection::new("--harness", "missing argument(s): --harness, --cwd")
    );
    assert_eq!(missing.to_string(), "missing argument(s): --harness, --cwd");
    assert_eq!(
        refuse(&|i| i.bash = Some("yes".into())).to_string(),
        "--bash must be 'true' or 'false', got \"yes\""
    );
}

proptest! {
    #[test]
    fn model_names_never_panic_and_dash_is_refused(s in "\\PC{0,300}") {
        let r = check_model(&s);
        if s.starts_with('-') { prop_assert!(r.is_err()); }
        if s.is_empty() || s.len() > 256 { prop_assert!(r.is_err()); }
    }

    #[test]
    fn integers_are_strict(s in "[ +-]?[0-9a-z]{0,6}") {
        let v = parse_int("--max-turns", &Some(s.clone()), 1u32, 100, 1);
        if let Ok(n) = v {
            prop_assert!((1..=100).contains(&n));
            prop_assert!(s.bytes().all(|b| b.is_ascii_digit()));
        }
    }
}
