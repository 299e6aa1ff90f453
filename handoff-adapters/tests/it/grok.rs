//! The Grok adapter (xAI's `grok`, delegation.md §4.2), through the public API only: one
//! invocation snapshot per mode × grant profile, invariants of the plan, the envelope parser on
//! reference-shaped envelopes and the community CLI's output, garbage robustness, the planned
//! process run against the testkit's fake `grok`, and preflight end to end (including the
//! community `@vibe-kit/grok-cli`, which must be recognised and refused).
//!
//! Helpers shared with the Kiro and Cursor tests live here (`pub(crate)`).

use std::collections::BTreeMap;
use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_adapters::{GROK_SPEC, Grok, is_community_grok};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, Observation, OutputError, ProbeEnv, Provider,
    ProviderSpec, RawOutput, RunDir, RunInput, StdinSource, Usage, UsageSource, Validated,
    build_prompt, env_allowed, provider_output_schema,
};
use handoff_testkit::FakeAgents;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::*;

// ---------------------------------------------------------------------------------------------
// Shared helpers (also used by the Kiro and Cursor tests)

/// The five ways to run: four handoff modes and advice.
pub(crate) const MODES: &[(&str, Option<&str>)] = &[
    ("build", Some("build")),
    ("phase", Some("phase")),
    ("review", Some("review")),
    ("verify", Some("verify")),
    ("advice", None),
];

pub(crate) fn writes(mode: Option<&str>) -> bool {
    matches!(mode, Some("build" | "phase"))
}

/// A grant / selection profile applied on top of a mode.
pub(crate) struct Profile {
    pub name: &'static str,
    pub bash: Option<&'static str>,
    pub web_search: Option<&'static str>,
    pub model: Option<&'static str>,
    pub effort: Option<&'static str>,
    pub max_turns: Option<&'static str>,
    pub mcp: bool,
}

pub(crate) const DEFAULTS: Profile = Profile {
    name: "defaults",
    bash: None,
    web_search: None,
    model: None,
    effort: None,
    max_turns: None,
    mcp: false,
};

pub(crate) fn input_for(fx: &Fixture, harness: &str, mode: Option<&str>, p: &Profile) -> RunInput {
    let mut input = fx.input(harness, mode);
    input.bash = p.bash.map(str::to_owned);
    input.web_search = p.web_search.map(str::to_owned);
    input.model = p.model.map(str::to_owned);
    input.effort = p.effort.map(str::to_owned);
    input.max_turns = p.max_turns.map(str::to_owned);
    if p.mcp { fx.with_mcp(input) } else { input }
}

/// The run directory the engine would hand the adapter (`support::Fixture::run_dir` only
/// knows the Codex and Claude executables).
pub(crate) fn run_dir_for(
    fx: &Fixture,
    validated: &Validated,
    executable: &Utf8Path,
    parent_env: BTreeMap<String, String>,
) -> RunDir {
    let schema = provider_output_schema();
    RunDir {
        path: fx.run_path.clone(),
        executable: executable.to_owned(),
        prompt: build_prompt(&validated.request, &schema, None),
        output_schema: schema,
        mcp: validated.mcp.clone(),
        parent_env,
        agent_config: Default::default(),
        nested: None,
    }
}

/// Validates `input` and plans it with the registered provider for its harness.
pub(crate) fn plan_full(
    fx: &Fixture,
    input: &RunInput,
    executable: &str,
    parent_env: BTreeMap<String, String>,
) -> Result<(Invocation, RunDir), InvocationError> {
    let validated = validate(input);
    let harness = validated.request.target.harness.to_string();
    let run = run_dir_for(fx, &validated, Utf8Path::new(executable), parent_env);
    provider(&harness)
        .invocation(&validated.request, &run)
        .map(|inv| (inv, run))
}

/// How `stdin` and `answer` read in a snapshot.
pub(crate) fn stdin_name(s: &StdinSource) -> &'static str {
    match s {
        StdinSource::Prompt => "prompt",
        StdinSource::Null => "null",
    }
}

pub(crate) fn answer_name(a: &AnswerSource) -> Value {
    match a {
        AnswerSource::Stdout => json!("stdout"),
        AnswerSource::File(p) => json!({"file": p}),
    }
}

/// Every mode × profile plan of `harness`, described, with the insta settings that make it
/// machine-independent (snapshot suffix `<mode>-<profile>`). The snapshot macro is called by
/// each test module, so the files are named after it (`it__<module>__invocation@…`).
pub(crate) fn plans_to_snapshot(
    harness: &str,
    executable: &str,
    profiles: &[Profile],
    describe: &dyn Fn(&Invocation, &RunDir) -> Value,
) -> Vec<(insta::Settings, Value)> {
    let fx = Fixture::new();
    let mut out = Vec::new();
    for (mode_name, mode) in MODES {
        for p in profiles {
            let (inv, run) = plan_full(
                &fx,
                &input_for(&fx, harness, *mode, p),
                executable,
                parent_env(),
            )
            .unwrap_or_else(|e| panic!("{harness} {mode_name}/{}: {e}", p.name));
            let mut settings = fx.insta_settings();
            settings.set_snapshot_suffix(format!("{mode_name}-{}", p.name));
            settings.set_description(format!("{harness} {mode_name}, profile {}", p.name));
            out.push((settings, describe(&inv, &run)));
        }
    }
    out
}

/// Every variable of `env` passes `spec`'s allowlist or is one of `extra`.
pub(crate) fn assert_allowlisted(
    name: &str,
    env: &BTreeMap<String, String>,
    spec: &ProviderSpec,
    extra: &[&str],
) {
    for k in env.keys() {
        assert!(
            env_allowed(spec, k) || extra.contains(&k.as_str()),
            "{name}: {k} is not in the allowlist"
        );
    }
    for k in NEVER_PASSED {
        assert!(!env.contains_key(*k), "{name}: {k} passed");
    }
}

/// An observation as JSON, for snapshots (payloads that are JSON are shown parsed).
pub(crate) fn describe_observation(obs: &Result<Observation, OutputError>) -> Value {
    match obs {
        Ok(Observation::Answer { payload, usage }) => {
            let payload = serde_json::from_slice::<Value>(payload)
                .unwrap_or_else(|_| json!(String::from_utf8_lossy(payload)));
            json!({"answer": {"payload": payload, "usage": usage}})
        }
        Ok(Observation::AgentFailure { message, usage }) => {
            json!({"agentFailure": {"message": message, "usage": usage}})
        }
        Ok(Observation::Unavailable { message }) => json!({"unavailable": {"message": message}}),
        Err(e) => json!({"error": format!("{e:?}")}),
    }
}

pub(crate) fn answer(obs: Result<Observation, OutputError>) -> (Vec<u8>, Option<Usage>) {
    match obs {
        Ok(Observation::Answer { payload, usage }) => (payload, usage),
        other => panic!("expected an answer, got {other:?}"),
    }
}

pub(crate) fn failure(obs: Result<Observation, OutputError>) -> (String, Option<Usage>) {
    match obs {
        Ok(Observation::AgentFailure { message, usage }) => (message, usage),
        other => panic!("expected an agent failure, got {other:?}"),
    }
}

pub(crate) fn raw(stdout: &[u8], stderr: &[u8], exit_code: Option<i32>) -> RawOutput {
    RawOutput {
        stdout: stdout.to_vec(),
        stderr: stderr.to_vec(),
        exit_code,
        answer_file: None,
    }
}

/// Runs `inv` as the engine would (its dirs and private files created first), with `program`
/// instead of the planned executable.
pub(crate) fn run_planned(inv: &Invocation, program: &Path, prompt: &str) -> RawOutput {
    use std::io::Write as _;
    for d in &inv.dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    for f in &inv.files {
        std::fs::write(&f.path, &f.contents).unwrap();
    }
    let mut child = std::process::Command::new(program)
        .args(&inv.args)
        .env_clear()
        .envs(&inv.env)
        .current_dir(&inv.cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if inv.stdin == StdinSource::Prompt {
        stdin.write_all(prompt.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    // The engine removes the run directory afterwards; the next run starts clean.
    for f in &inv.files {
        let _ = std::fs::remove_file(&f.path);
    }
    RawOutput {
        stdout: out.stdout,
        stderr: out.stderr,
        exit_code: out.status.code(),
        answer_file: None,
    }
}

/// Fake agent CLIs in a temporary directory, and the probe environment handoff would use.
pub(crate) struct ProbeWorld {
    _tmp: tempfile::TempDir,
    pub agents: FakeAgents,
    pub root: Utf8PathBuf,
    pub probe: ProbeEnv,
}

impl ProbeWorld {
    pub fn new() -> ProbeWorld {
        let tmp = tempfile::Builder::new()
            .prefix("handoff-adapters-preflight-")
            .tempdir()
            .unwrap();
        let root = Utf8PathBuf::from_path_buf(std::fs::canonicalize(tmp.path()).unwrap()).unwrap();
        let agents = FakeAgents::install(root.as_std_path());
        let scratch = root.join("scratch");
        let home = root.join("user-home");
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let env: BTreeMap<String, String> = [
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("HOME", home.as_str()),
            ("NO_COLOR", "1"),
            ("TERM", "dumb"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        ProbeWorld {
            _tmp: tmp,
            agents,
            root,
            probe: ProbeEnv { env, scratch },
        }
    }

    pub fn fake(&self, exe: &str) -> Utf8PathBuf {
        Utf8PathBuf::from_path_buf(self.agents.bin(exe)).unwrap()
    }

    /// An executable `<root>/<dir>/bin/<name>` shell script with `body`; `$FAKE` is the fake
    /// CLI of that name.
    pub fn script(&self, dir: &str, name: &str, body: &str) -> Utf8PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let bin = self.root.join(dir).join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let path = bin.join(name);
        let text = format!("#!/bin/sh\nFAKE='{}'\n{body}\n", self.fake(name));
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Entries left in the scratch directory.
    pub fn scratch_entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.probe.scratch)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

pub(crate) fn fake_version(exe: &str) -> String {
    format!("{exe} {}", handoff_testkit::fixtures::OTHER_VERSION)
}

// ---------------------------------------------------------------------------------------------
// Invocation

const GROK_EXE: &str = "/usr/local/bin/grok";

const PROFILES: &[Profile] = &[
    DEFAULTS,
    Profile {
        name: "no-bash",
        bash: Some("false"),
        ..DEFAULTS
    },
    Profile {
        name: "selected",
        model: Some("grok-code-fast-1"),
        effort: Some("high"),
        max_turns: Some("7"),
        ..DEFAULTS
    },
    Profile {
        name: "web",
        web_search: Some("true"),
        ..DEFAULTS
    },
];

fn plan_with(
    fx: &Fixture,
    input: &RunInput,
    env: BTreeMap<String, String>,
) -> Result<(Invocation, RunDir), InvocationError> {
    plan_full(fx, input, GROK_EXE, env)
}

fn plan(fx: &Fixture, input: &RunInput) -> Invocation {
    plan_with(fx, input, parent_env())
        .unwrap_or_else(|e| panic!("invocation refused: {e}"))
        .0
}

/// The plan as JSON. The inline schema and the prompt file (identical in every plan) are
/// checked here against their sources and replaced by markers.
fn describe(inv: &Invocation, run: &RunDir) -> Value {
    let mut args = inv.args.clone();
    let i = args.iter().position(|a| a == "--json-schema").unwrap();
    let given: Value = serde_json::from_str(&args[i + 1]).unwrap();
    assert_eq!(given, provider_output_schema(), "--json-schema");
    args[i + 1] = "<provider-output schema>".into();
    let files: Vec<Value> = inv
        .files
        .iter()
        .map(|f| {
            assert_eq!(f.contents, run.prompt.as_bytes(), "the prompt file");
            json!({"path": f.path, "contents": "<prompt>"})
        })
        .collect();
    json!({
        "program": inv.program,
        "args": args,
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
    for (settings, value) in plans_to_snapshot("grok", GROK_EXE, PROFILES, &describe) {
        settings.bind(|| insta::assert_json_snapshot!("invocation", value));
    }
}

fn all_plans(fx: &Fixture) -> Vec<(String, Option<&'static str>, &'static Profile, Invocation)> {
    let mut out = Vec::new();
    for (mode_name, mode) in MODES {
        for p in PROFILES {
            let inv = plan(fx, &input_for(fx, "grok", *mode, p));
            out.push((format!("{mode_name}/{}", p.name), *mode, p, inv));
        }
    }
    out
}

#[test]
fn grok_is_registered_with_the_reference_capabilities() {
    let p = provider("grok");
    let s = p.spec();
    assert_eq!(s.id, GROK_SPEC.id);
    assert_eq!(s.executable, "grok");
    assert_eq!(
        s.extra_dirs,
        ["~/.grok/bin", "/opt/homebrew/bin", "/usr/local/bin"]
    );
    assert_eq!(s.effort, ["low", "medium", "high"]);
    assert_eq!(s.advice_effort, None);
    let turns = s.max_turns.unwrap();
    assert_eq!((turns.handoff, turns.advice), (12, 32));
    let g = s.grants;
    assert!(g.bash && g.bash_disable && g.web_search && !g.mcp && g.write && g.nested_source);
    assert!(s.native_filesystem_isolation && s.native_bash_sandbox);
    assert_eq!(s.env_passthrough, ["GROK_API_KEY", "XAI_API_KEY"]);
}

#[test]
fn plans_are_pure() {
    let fx = Fixture::new();
    for (_, mode) in MODES {
        let input = fx.input("grok", *mode);
        let validated = validate(&input);
        let run = run_dir_for(&fx, &validated, Utf8Path::new(GROK_EXE), parent_env());
        let a = Grok.invocation(&validated.request, &run).unwrap();
        let b = Grok.invocation(&validated.request, &run).unwrap();
        assert_eq!(a, b);
    }
}

#[test]
fn argv_follows_the_reference_order() {
    let fx = Fixture::new();
    let mut input = fx.input("grok", Some("review"));
    input.model = Some("grok-4".into());
    input.effort = Some("low".into());
    input.max_turns = Some("3".into());
    input.bash = Some("false".into());
    let inv = plan(&fx, &input);
    let schema = provider_output_schema().to_string();
    let prompt_file = fx.run_path.join("request.txt");
    let expected: Vec<String> = [
        "--prompt-file",
        prompt_file.as_str(),
        "--cwd",
        fx.cwd.as_str(),
        "--sandbox",
        "read-only",
        "--permission-mode",
        "dontAsk",
        "--no-plan",
        "--no-subagents",
        "--no-memory",
        "--max-turns",
        "3",
        "--json-schema",
        &schema,
        "--verbatim",
        "--disable-web-search",
        "--tools",
        "Read,Grep",
        "--deny",
        "Bash(*)",
        "--deny",
        "Edit(*)",
        "--deny",
        "MCPTool(*)",
        "--deny",
        "WebFetch(*)",
        "--model",
        "grok-4",
        "--effort",
        "low",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(inv.args, expected);
    assert_eq!(inv.program.as_str(), GROK_EXE);
    assert_eq!(inv.cwd, fx.cwd);
    assert_eq!(inv.stdin, StdinSource::Null, "the prompt travels in a file");
    assert_eq!(inv.answer, AnswerSource::Stdout);
    assert_eq!(inv.files.len(), 1);
    assert_eq!(inv.files[0].path, prompt_file);
    assert!(inv.dirs.is_empty());
}

#[test]
fn a_writing_run_with_web_gets_the_whole_toolset() {
    let fx = Fixture::new();
    let mut input = fx.input("grok", Some("build"));
    input.web_search = Some("true".into());
    let inv = plan(&fx, &input);
    let a = &inv.args;
    assert_eq!(arg_after(a, "--sandbox"), Some("workspace"));
    assert_eq!(arg_after(a, "--permission-mode"), Some("auto"));
    assert_eq!(
        arg_after(a, "--tools"),
        Some("Read,Grep,Edit,Bash,WebSearch,WebFetch")
    );
    assert_eq!(args_after(a, "--deny"), ["MCPTool(*)"]);
    assert_eq!(args_after(a, "--allow"), ["WebFetch(*)"]);
    assert!(!a.contains(&"--disable-web-search".to_owned()));
    // --allow comes after every --deny.
    let last_deny = a.iter().rposition(|x| x == "--deny").unwrap();
    let allow = a.iter().position(|x| x == "--allow").unwrap();
    assert!(allow > last_deny);
}

#[test]
fn grants_map_to_tools_denies_and_the_sandbox() {
    let fx = Fixture::new();
    for (name, mode, p, inv) in all_plans(&fx) {
        let write = writes(mode);
        let bash = p.bash != Some("false");
        let web = p.web_search == Some("true");
        let a = &inv.args;
        assert_eq!(
            arg_after(a, "--sandbox"),
            Some(if write { "workspace" } else { "read-only" }),
            "{name}"
        );
        assert_eq!(
            arg_after(a, "--permission-mode"),
            Some(if write { "auto" } else { "dontAsk" }),
            "{name}"
        );
        let tools: Vec<&str> = arg_after(a, "--tools").unwrap().split(',').collect();
        assert_eq!(&tools[..2], ["Read", "Grep"], "{name}");
        assert_eq!(tools.contains(&"Edit"), write, "{name}");
        assert_eq!(tools.contains(&"Bash"), bash, "{name}");
        assert_eq!(tools.contains(&"WebSearch"), web, "{name}");
        assert_eq!(tools.contains(&"WebFetch"), web, "{name}");
        let denies = args_after(a, "--deny");
        assert_eq!(denies.contains(&"Bash(*)"), !bash, "{name}");
        assert_eq!(denies.contains(&"Edit(*)"), !write, "{name}");
        assert!(
            denies.contains(&"MCPTool(*)"),
            "{name}: MCP tools are always denied"
        );
        assert_eq!(denies.contains(&"WebFetch(*)"), !web, "{name}");
        assert_eq!(
            a.contains(&"--disable-web-search".to_owned()),
            !web,
            "{name}"
        );
        for flag in ["--no-plan", "--no-subagents", "--no-memory", "--verbatim"] {
            assert_eq!(a.iter().filter(|x| *x == flag).count(), 1, "{name}: {flag}");
        }
        assert_eq!(arg_after(a, "--cwd"), Some(fx.cwd.as_str()), "{name}");
        assert_eq!(
            inv.policy["sandboxProfile"],
            json!(arg_after(a, "--sandbox"))
        );
        assert_eq!(inv.policy["tools"], json!(tools), "{name}");
        assert_eq!(inv.policy["deny"], json!(denies), "{name}");
        assert_eq!(inv.policy["nativeFilesystemIsolation"], json!(true));
        assert_eq!(inv.policy["mcpServers"], json!([]));
    }
}

#[test]
fn turn_limits_default_per_operation() {
    let fx = Fixture::new();
    for (mode_name, mode) in MODES {
        let inv = plan(&fx, &fx.input("grok", *mode));
        let expected = if mode.is_some() { "12" } else { "32" };
        assert_eq!(
            arg_after(&inv.args, "--max-turns"),
            Some(expected),
            "{mode_name}"
        );
        assert_eq!(
            inv.policy["maxTurns"],
            json!(expected.parse::<u32>().unwrap())
        );
        // Grok has no operation-default effort: the flag is left out.
        assert!(!inv.args.contains(&"--effort".to_owned()), "{mode_name}");
        assert!(!inv.args.contains(&"--model".to_owned()), "{mode_name}");
    }
}

#[test]
fn validation_refuses_what_grok_cannot_express() {
    let fx = Fixture::new();
    let registry = handoff_adapters::default_registry();
    for (_, mode) in MODES {
        let input = fx.with_mcp(fx.input("grok", *mode));
        let e = input.validate(&registry).unwrap_err();
        assert!(e.contains("--mcp-config is unsupported for grok"), "{e}");
    }
    let mut input = fx.input("grok", Some("build"));
    input.effort = Some("xhigh".into());
    let e = input.validate(&registry).unwrap_err();
    assert!(e.contains("expected one of: low, medium, high"), "{e}");
    let mut input = fx.input("grok", Some("build"));
    input.max_turns = Some("101".into());
    let e = input.validate(&registry).unwrap_err();
    assert!(e.contains("between 1 and 100"), "{e}");
}

#[test]
fn an_unvalidated_mcp_descriptor_is_refused_by_the_plan_too() {
    let fx = Fixture::new();
    let input = fx.input("grok", Some("review"));
    let validated = validate(&input);
    let mut run = run_dir_for(&fx, &validated, Utf8Path::new(GROK_EXE), parent_env());
    // What a caller that skipped validation would hand over.
    let mcp_input = fx.with_mcp(fx.input("claude", Some("review")));
    run.mcp = validate(&mcp_input).mcp;
    assert!(run.mcp.is_some());
    match Grok.invocation(&validated.request, &run) {
        Err(InvocationError::Unsupported(m)) => assert!(m.contains("MCP"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn environment_is_an_allowlist() {
    let fx = Fixture::new();
    let mut env = parent_env();
    env.insert("GROK_API_KEY".into(), "xai-grok-test-key".into());
    env.insert("XAI_API_KEY".into(), "xai-test-key-2".into());
    for (mode_name, mode) in MODES {
        let (inv, _) = plan_with(&fx, &fx.input("grok", *mode), env.clone()).unwrap();
        assert_allowlisted(mode_name, &inv.env, &GROK_SPEC, &[]);
        for k in ["GROK_API_KEY", "XAI_API_KEY", "PATH", "HOME", "HTTPS_PROXY"] {
            assert_eq!(inv.env.get(k), env.get(k), "{mode_name}: {k}");
        }
        for k in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(!inv.env.contains_key(k), "{mode_name}: {k} passed to Grok");
        }
    }
    let (inv, _) = plan_with(&fx, &fx.input("grok", Some("build")), BTreeMap::new()).unwrap();
    assert!(inv.env.is_empty(), "{:?}", inv.env);
}

// ---------------------------------------------------------------------------------------------
// Parsing

const ENVELOPES: &[&str] = &[
    "grok-structured.json",
    "grok-text-fallback.json",
    "grok-structured-error.json",
    "grok-community-hello.out",
    "grok-community-write.out",
];

#[test]
fn recorded_envelopes_snapshot() {
    for name in ENVELOPES {
        let obs = Grok.parse(&stdout(fixture(name)));
        let mut settings = insta::Settings::clone_current();
        settings.set_omit_expression(true);
        settings.set_snapshot_suffix(*name);
        settings.bind(|| insta::assert_json_snapshot!("parse", describe_observation(&obs)));
    }
}

#[test]
fn structured_output_is_the_answer_with_envelope_usage_and_cost() {
    let envelope: Value = serde_json::from_slice(&fixture("grok-structured.json")).unwrap();
    let (payload, usage) = answer(Grok.parse(&stdout(fixture("grok-structured.json"))));
    let payload: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(payload, envelope["structuredOutput"]);
    assert_eq!(
        usage,
        Some(Usage {
            source: UsageSource::ProviderEnvelope,
            input_tokens: Some(1840 + 512),
            output_tokens: Some(96),
            total_tokens: Some(2448),
            cache_read_tokens: Some(512),
            cache_write_tokens: None,
            cost_usd: Some(0.00231),
        })
    );
}

#[test]
fn text_is_the_fallback_when_structured_output_failed() {
    let envelope: Value = serde_json::from_slice(&fixture("grok-text-fallback.json")).unwrap();
    let (payload, usage) = answer(Grok.parse(&stdout(fixture("grok-text-fallback.json"))));
    assert_eq!(payload, envelope["text"].as_str().unwrap().as_bytes());
    let usage = usage.unwrap();
    assert_eq!(usage.input_tokens, Some(920));
    assert_eq!(usage.total_tokens, Some(991));
    assert_eq!(usage.cost_usd, Some(0.00088));
}

#[test]
fn structured_output_error_without_text_is_the_agents_failure() {
    let (message, usage) = failure(Grok.parse(&stdout(fixture("grok-structured-error.json"))));
    assert!(
        message.contains("did not produce output matching the JSON schema"),
        "{message}"
    );
    assert_eq!(usage.unwrap().input_tokens, Some(15300 + 4100));
}

#[test]
fn an_error_in_the_envelope_is_the_agents_failure() {
    for (error, expected) in [
        (
            json!("xAI API error (500): internal error"),
            "xAI API error (500)",
        ),
        (
            json!({"message": "rate limited", "code": 429}),
            "rate limited",
        ),
        (json!({"code": 429}), "429"),
    ] {
        let envelope = json!({"text": "partial", "error": error, "usage": {
            "input_tokens": 10, "output_tokens": 0, "total_tokens": 10}});
        let (message, usage) = failure(Grok.parse(&stdout(envelope.to_string())));
        assert!(message.contains(expected), "{message}");
        assert_eq!(usage.unwrap().total_tokens, Some(10));
    }
    // A null error is no error.
    let envelope = json!({"text": "{}", "error": null});
    answer(Grok.parse(&stdout(envelope.to_string())));
}

#[test]
fn a_bare_provider_output_object_is_the_answer() {
    let object = r#"{"schemaVersion":"handoff.provider-output.v1","status":"completed"}"#;
    let (payload, usage) = answer(Grok.parse(&stdout(format!("\n{object}\n"))));
    assert_eq!(payload, object.as_bytes());
    assert_eq!(usage, None);
}

#[test]
fn usage_is_dropped_when_the_total_disagrees_and_saturates() {
    let envelope = json!({"structuredOutput": {}, "usage": {
        "input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3, "total_tokens": 13}});
    let (_, usage) = answer(Grok.parse(&stdout(envelope.to_string())));
    assert_eq!(usage, None, "10 + 5 + 3 != 13");
    let envelope = json!({"structuredOutput": {}, "usage": {
        "input_tokens": u64::MAX, "cache_read_input_tokens": u64::MAX, "output_tokens": u64::MAX}});
    let (_, usage) = answer(Grok.parse(&stdout(envelope.to_string())));
    let usage = usage.unwrap();
    assert_eq!(usage.input_tokens, Some(u64::MAX));
    assert_eq!(usage.total_tokens, Some(u64::MAX));
    // No usage object, or a negative count: no usage.
    for u in [json!(null), json!({"input_tokens": -1, "output_tokens": 2})] {
        let envelope = json!({"structuredOutput": {}, "usage": u, "total_cost_usd": 1.0});
        let (_, usage) = answer(Grok.parse(&stdout(envelope.to_string())));
        assert_eq!(usage, None);
    }
}

#[test]
fn the_community_clis_jsonl_is_not_an_envelope() {
    for name in ["grok-community-hello.out", "grok-community-write.out"] {
        match Grok.parse(&stdout(fixture(name))) {
            Err(OutputError::Envelope { reason }) => {
                assert!(reason.contains("exactly one JSON value"), "{reason}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn malformed_stdout_is_a_malformed_envelope() {
    for out in [
        "not json",
        "[1,2]",
        "\"text\"",
        "{\"text\":\"a\"} trailing",
        "{\"text\":\"a\"}\n{\"text\":\"b\"}",
    ] {
        assert!(
            matches!(Grok.parse(&stdout(out)), Err(OutputError::Envelope { .. })),
            "{out}"
        );
    }
    for out in ["{}", "{\"text\":\"  \"}", "{\"structuredOutput\":\"x\"}"] {
        assert!(
            matches!(Grok.parse(&stdout(out)), Err(OutputError::Missing)),
            "{out}"
        );
    }
}

#[test]
fn a_blank_stdout_is_classified_by_stderr() {
    let (message, _) = failure(Grok.parse(&raw(
        b"",
        b"Error: xAI API error (500): internal error\n",
        Some(1),
    )));
    assert_eq!(message, "Error: xAI API error (500): internal error");
    match Grok.parse(&raw(
        b"",
        b"grok: sandbox unavailable: landlock is not supported; refusing to start\n",
        Some(1),
    )) {
        Ok(Observation::Unavailable { message }) => assert!(message.contains("landlock")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Grok.parse(&raw(b"", b"something odd\n", Some(3))),
        Err(OutputError::Missing)
    ));
}

#[test]
fn runtime_check_reads_stderr_only() {
    let envelope = fixture("grok-structured.json");
    // The model may discuss sandboxes in its answer.
    let talk = json!({"text": "the sandbox failed to start in CI; sandbox unavailable"});
    assert_eq!(Grok.runtime_check(&stdout(talk.to_string())), None);
    assert_eq!(Grok.runtime_check(&stdout(envelope.clone())), None);
    // Grok went on without its sandbox.
    for line in [
        "warning: sandbox could not be applied, continuing without it",
        "sandbox not enforced on this kernel",
        "Sandbox unavailable (seccomp)",
    ] {
        let reason = Grok
            .runtime_check(&raw(&envelope, line.as_bytes(), Some(0)))
            .unwrap_or_else(|| panic!("{line} must block"));
        assert!(
            reason.contains("Grok reported") && reason.contains(line),
            "{reason}"
        );
    }
    // It refused to start: nothing ran, parse reports it as unavailable.
    let refused = raw(b"", b"sandbox unavailable; refusing to start\n", Some(1));
    assert_eq!(Grok.runtime_check(&refused), None);
    assert!(matches!(
        Grok.parse(&refused),
        Ok(Observation::Unavailable { .. })
    ));
    // …unless it says it went on anyway.
    let went_on = raw(b"", b"sandbox failed; continuing without it\n", Some(1));
    assert!(Grok.runtime_check(&went_on).is_some());
}

fn check(raw: &RawOutput) {
    let obs = Grok.parse(raw);
    let _ = Grok.runtime_check(raw);
    match obs {
        Ok(Observation::AgentFailure { message, .. } | Observation::Unavailable { message }) => {
            assert!(message.chars().count() <= 1024 + 40)
        }
        Ok(Observation::Answer { .. }) => {}
        Err(OutputError::Missing | OutputError::Envelope { .. }) => {}
        Err(e) => panic!("unexpected error kind {e:?}"),
    }
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        "\\PC{0,30}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn envelope() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("text"),
        Just("structuredOutput"),
        Just("structuredOutputError"),
        Just("error"),
        Just("usage"),
        Just("total_cost_usd"),
        Just("schemaVersion"),
        Just("stopReason"),
    ];
    let usage = prop::collection::btree_map(
        prop_oneof![
            Just("input_tokens"),
            Just("cache_read_input_tokens"),
            Just("output_tokens"),
            Just("total_tokens"),
        ],
        prop_oneof![any::<u64>().prop_map(|n| json!(n)), json_leaf()],
        0..4,
    )
    .prop_map(|m| json!(m));
    prop::collection::vec((key, prop_oneof![json_value(), usage]), 0..6)
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
// The planned process, run against the testkit's fake grok

#[test]
fn planned_process_runs_against_the_fake_and_respects_read_only() {
    let fx = Fixture::new();
    let agents = FakeAgents::install(fx.root.join("agents").as_std_path());
    agents.record_dir();
    let fake = Utf8PathBuf::from_path_buf(agents.bin("grok")).unwrap();
    for (mode_name, mode) in MODES {
        let mut input = fx.input("grok", *mode);
        input.model = Some("grok-code-fast-1".into());
        input.effort = Some("medium".into());
        input.web_search = Some("true".into());
        let (inv, run) = plan_full(&fx, &input, fake.as_str(), parent_env()).unwrap();
        let out = run_planned(&inv, fake.as_std_path(), &run.prompt);
        assert_eq!(
            out.exit_code,
            Some(0),
            "{mode_name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(Grok.runtime_check(&out), None);
        let (payload, usage) = answer(Grok.parse(&out));
        let payload: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(payload["status"], json!("completed"), "{mode_name}");
        assert_eq!(
            payload["response"],
            json!(format!("grok finished {mode_name}"))
        );
        let usage = usage.unwrap();
        assert_eq!(usage.source, UsageSource::ProviderEnvelope);
        assert_eq!(usage.input_tokens, Some(22));
        assert_eq!(usage.total_tokens, Some(36));
        assert_eq!(usage.cost_usd, Some(0.000276));
        // The fake edits only when the sandbox profile and the tool list allow it.
        let wrote = fx.cwd.join(format!("fake-{mode_name}.txt")).exists();
        assert_eq!(wrote, writes(*mode), "{mode_name}: wrote a file");
    }
    let runs: Vec<Value> = agents
        .invocations()
        .into_iter()
        .filter(|r| r["argv"].get(0) == Some(&json!("--prompt-file")))
        .collect();
    assert_eq!(runs.len(), MODES.len());
    for r in &runs {
        assert_eq!(r["cwd"], json!(fx.cwd.as_str()));
        assert!(r["stdin"].is_null() || r["stdin"] == json!(""), "{r}");
    }
}

#[test]
fn fake_agent_failures_are_the_agents_failures() {
    let fx = Fixture::new();
    let agents = FakeAgents::install(fx.root.join("agents").as_std_path());
    let fake = Utf8PathBuf::from_path_buf(agents.bin("grok")).unwrap();
    let (inv, run) = plan_full(
        &fx,
        &fx.input("grok", Some("review")),
        fake.as_str(),
        parent_env(),
    )
    .unwrap();
    agents.set("HANDOFF_FAKE_MODE", "agent-error");
    let out = run_planned(&inv, fake.as_std_path(), &run.prompt);
    let (message, _) = failure(Grok.parse(&out));
    assert!(message.contains("xAI API error (500)"), "{message}");
    agents.set("HANDOFF_FAKE_MODE", "prose");
    let out = run_planned(&inv, fake.as_std_path(), &run.prompt);
    let (payload, _) = answer(Grok.parse(&out));
    assert!(
        serde_json::from_slice::<Value>(&payload).is_err(),
        "prose is left for the engine"
    );
}

// ---------------------------------------------------------------------------------------------
// Preflight

#[tokio::test]
async fn preflight_passes_against_the_fake() {
    let w = ProbeWorld::new();
    w.agents.record_dir();
    let result = Grok.preflight(&w.fake("grok"), &w.probe).await;
    assert_eq!(result.failure, None);
    assert_eq!(result.version, Some(fake_version("grok")));
    let calls = w.agents.invocations();
    let argv: Vec<Value> = calls.iter().map(|c| c["argv"].clone()).collect();
    let prompt = w.probe.scratch.join("grok-probe-prompt.txt");
    assert_eq!(
        argv,
        [
            json!(["--version"]),
            json!(["--help"]),
            json!([
                "--sandbox",
                "workspace",
                "--prompt-file",
                prompt.as_str(),
                "--json-schema",
                "handoff-invalid-json"
            ]),
            json!([
                "--sandbox",
                "read-only",
                "--prompt-file",
                prompt.as_str(),
                "--json-schema",
                "handoff-invalid-json"
            ]),
        ]
    );
    for c in &calls {
        assert_eq!(c["cwd"], json!(w.probe.scratch.as_str()));
    }
    assert!(w.scratch_entries().is_empty(), "{:?}", w.scratch_entries());
}

#[tokio::test]
async fn preflight_names_a_flag_missing_from_the_help() {
    let w = ProbeWorld::new();
    w.agents.set("HANDOFF_FAKE_HELP", "missing");
    let result = Grok.preflight(&w.fake("grok"), &w.probe).await;
    assert_eq!(result.version, Some(fake_version("grok")));
    let failure = result.failure.unwrap();
    assert!(
        failure.contains("`grok --help` does not list --json-schema"),
        "{failure}"
    );
}

#[tokio::test]
async fn preflight_requires_verbatim() {
    let w = ProbeWorld::new();
    let exe = w.script(
        "no-verbatim",
        "grok",
        "case \"$1\" in --help) \"$FAKE\" --help | grep -v -- --verbatim ;; *) exec \"$FAKE\" \"$@\" ;; esac",
    );
    let failure = Grok.preflight(&exe, &w.probe).await.failure.unwrap();
    assert!(failure.contains("does not list --verbatim"), "{failure}");
}

/// The community `@vibe-kit/grok-cli` 0.0.34 (its `--version` prints `1.0.1`): recognised from
/// its help text, refused with a reason that says what it is, and never given a flag it lacks.
#[tokio::test]
async fn preflight_refuses_the_community_grok_cli() {
    let w = ProbeWorld::new();
    let help = w.root.join("community-help.txt");
    std::fs::write(&help, fixture("grok-community-help.txt")).unwrap();
    let log = w.root.join("community-argv.log");
    let exe = w.script(
        "community",
        "grok",
        &format!(
            "echo \"$*\" >> '{log}'\ncase \"$*\" in\n  --version|-V) echo 1.0.1 ;;\n  --help|-h) cat '{help}' ;;\n  *) echo \"error: unknown option '$1'\" >&2; exit 1 ;;\nesac"
        ),
    );
    let result = Grok.preflight(&exe, &w.probe).await;
    assert_eq!(result.version.as_deref(), Some("1.0.1"));
    let failure = result.failure.expect("the community CLI must be refused");
    assert!(failure.contains("community vibe-kit Grok CLI"), "{failure}");
    assert!(failure.contains("not xAI's"), "{failure}");
    assert!(failure.contains("not supported"), "{failure}");
    let argv = std::fs::read_to_string(&log).unwrap();
    assert_eq!(argv, "--version\n--help\n", "only flags it has");
    assert!(is_community_grok(
        &String::from_utf8(fixture("grok-community-help.txt")).unwrap()
    ));
    assert!(!is_community_grok(handoff_testkit::fixtures::GROK_HELP));
}

#[tokio::test]
async fn preflight_checks_the_sandbox_and_schema_probes() {
    let w = ProbeWorld::new();
    let cases = [
        (
            "schema-accepted",
            "case \"$*\" in *handoff-invalid-json*) echo '{}' ;; *) exec \"$FAKE\" \"$@\" ;; esac",
            "the --sandbox workspace / --json-schema probe did not behave as expected (exit Some(0))",
        ),
        (
            "read-only-sandbox-broken",
            "case \"$*\" in *read-only*handoff-invalid-json*) echo 'Error: sandbox read-only profile unavailable on this system' >&2; exit 1 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
            "Grok's read-only sandbox is not usable: Error: sandbox read-only profile unavailable",
        ),
        (
            "sandbox-warning-with-schema-error",
            "case \"$*\" in *handoff-invalid-json*) echo 'warning: sandbox could not be applied' >&2; exec \"$FAKE\" \"$@\" ;; *) exec \"$FAKE\" \"$@\" ;; esac",
            "Grok's workspace sandbox is not usable: warning: sandbox could not be applied",
        ),
        (
            "help-fails",
            "case \"$1\" in --help) echo boom >&2; exit 2 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
            "--help` exited with Some(2): boom",
        ),
    ];
    for (name, body, expected) in cases {
        let exe = w.script(name, "grok", body);
        let result = Grok.preflight(&exe, &w.probe).await;
        assert_eq!(result.version, Some(fake_version("grok")), "{name}");
        let failure = result.failure.unwrap_or_else(|| panic!("{name} must fail"));
        assert!(failure.contains(expected), "{name}: {failure}");
    }
}

#[tokio::test]
async fn preflight_fails_without_a_working_executable() {
    let w = ProbeWorld::new();
    let result = Grok.preflight(&w.root.join("nowhere/grok"), &w.probe).await;
    assert_eq!(result.version, None);
    assert!(result.failure.is_some());
}
