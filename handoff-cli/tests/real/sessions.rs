//! Sessions written by handoff that the real CLIs resume: a conversation carried from another
//! CLI is written into Claude Code's and Codex's stores with the adapters' writers, then the
//! real CLI resumes it against the scripted model server, whose request log must hold the
//! carried user and assistant turns. Claude Code's own fork (`--fork-session` into a chosen id)
//! is run through the receiver plan and must leave the carried session byte for byte as it was.
//!
//! Scratch directories live under Cargo's target tmp dir, not `/tmp`: Codex's sandbox helper
//! can't run commands from a worktree under `/tmp`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use camino::Utf8PathBuf;
use handoff_adapters::{Claude, Codex};
use handoff_core::{
    AgentConfig, AgentId, CarryTarget, Message, Part, Receiver, ReceiverRequest, ReceiverRole,
    ResumeFrom, Resumption, RunDir, SessionQuery, Sessions, SourceSnapshot, StoreEnv,
    TRANSCRIPT_SCHEMA, Transcript, TranscriptSource, resumed_after,
};
use handoff_testkit::model_server::{ModelServer, Script};
use serde_json::Value;

use super::{MODEL_KEY, clis, real_bin};

/// Text only the carried user turn holds.
const USER_MARKER: &str = "carried-user-4b1e: make split() respect quoted fields";
/// Text only the carried assistant turn holds.
const ASSISTANT_MARKER: &str =
    "carried-assistant-9d07: split() ignores quotes, a state machine is next";
/// Text of a carried tool result.
const TOOL_MARKER: &str = "carried-tool-result-2c55";
/// The prompt of the resumed turn, and the scripted answer.
const RESUME_PROMPT: &str = "resume-marker-6a31: what were you doing?";
const ANSWER: &str = "resumed: writing the state machine for split()";

const TURN_BUDGET: Duration = Duration::from_secs(240);

/// A scratch home, Codex home and worktree under Cargo's target tmp dir, and a scripted
/// model server.
struct Bench {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    server: ModelServer,
    path: String,
}

impl Bench {
    fn new(cli: &str) -> Bench {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(base).unwrap();
        let tmp = tempfile::Builder::new()
            .prefix("handoff-sessions-")
            .tempdir_in(base)
            .unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        for d in ["home", "codex-home", "tmp", "repo", "run"] {
            super::private_dir(&root.join(d));
        }
        let repo = root.join("repo");
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(git.success());
        std::fs::write(repo.join("csv.rs"), "pub fn split() {}\n").unwrap();
        let server = ModelServer::start_blocking(Script::text(ANSWER))
            .with_log_file(root.join(format!("model-{cli}.jsonl")));
        Bench {
            _tmp: tmp,
            path: format!("{}:/usr/local/bin:/usr/bin:/bin", real_bin().display()),
            root,
            repo,
            server,
        }
    }

    fn store(&self) -> StoreEnv {
        StoreEnv {
            vars: BTreeMap::from([
                ("HOME".to_owned(), self.home()),
                (
                    "CODEX_HOME".to_owned(),
                    self.root.join("codex-home").display().to_string(),
                ),
            ]),
            ..StoreEnv::default()
        }
    }

    fn home(&self) -> String {
        self.root.join("home").display().to_string()
    }

    fn cwd(&self) -> Utf8PathBuf {
        Utf8PathBuf::try_from(self.repo.clone()).unwrap()
    }

    /// The environment a user of the scripted server runs the CLIs with.
    fn env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::from([
            ("PATH".to_owned(), self.path.clone()),
            ("HOME".to_owned(), self.home()),
            (
                "CODEX_HOME".to_owned(),
                self.root.join("codex-home").display().to_string(),
            ),
            (
                "TMPDIR".to_owned(),
                self.root.join("tmp").display().to_string(),
            ),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("ANTHROPIC_BASE_URL".to_owned(), self.server.url()),
            ("ANTHROPIC_API_KEY".to_owned(), MODEL_KEY.to_owned()),
            ("CLAUDE_CODE_MAX_RETRIES".to_owned(), "0".to_owned()),
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_owned(),
                "1".to_owned(),
            ),
            ("DISABLE_TELEMETRY".to_owned(), "1".to_owned()),
            ("DISABLE_AUTOUPDATER".to_owned(), "1".to_owned()),
            ("E2E_MODEL_KEY".to_owned(), MODEL_KEY.to_owned()),
        ]);
        env.retain(|_, v| !v.is_empty());
        env
    }

    /// Codex's provider pins pointing it at the scripted server.
    fn codex_config(&self) -> Vec<String> {
        let v1 = self.server.v1_url();
        vec![
            r#"model_provider="e2e""#.to_owned(),
            r#"model_providers.e2e.name="E2E""#.to_owned(),
            format!(r#"model_providers.e2e.base_url="{v1}""#),
            r#"model_providers.e2e.wire_api="responses""#.to_owned(),
            r#"model_providers.e2e.env_key="E2E_MODEL_KEY""#.to_owned(),
            "model_providers.e2e.request_max_retries=0".to_owned(),
            "model_providers.e2e.stream_max_retries=0".to_owned(),
        ]
    }

    /// Runs `program args…` in `cwd` with exactly `env`, `stdin` as its input, stopped after
    /// [`TURN_BUDGET`].
    fn run(
        &self,
        program: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
        cwd: &Path,
        stdin: &str,
    ) -> (i32, String, String) {
        use std::os::unix::process::CommandExt;
        let out_path = self.root.join("run/stdout");
        let err_path = self.root.join("run/stderr");
        let started = Instant::now();
        let mut child = Command::new(program)
            .args(args)
            .env_clear()
            .envs(env)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .process_group(0)
            .spawn()
            .unwrap();
        {
            let mut input = child.stdin.take().unwrap();
            let _ = input.write_all(stdin.as_bytes());
        }
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > TURN_BUDGET {
                let _ = Command::new("kill")
                    .args(["-KILL", &format!("-{}", child.id())])
                    .status();
                let _ = child.wait();
                panic!("{program} {args:?} took longer than {TURN_BUDGET:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let code = status.code().unwrap_or(-1);
        eprintln!(
            "[{} {:?}] exit {code} in {:.1}s",
            Path::new(program).file_name().unwrap().to_string_lossy(),
            args.iter().map(|a| short(a)).collect::<Vec<_>>(),
            started.elapsed().as_secs_f64()
        );
        (
            code,
            std::fs::read_to_string(&out_path).unwrap_or_default(),
            std::fs::read_to_string(&err_path).unwrap_or_default(),
        )
    }

    /// The model call that carried the resumed prompt, as text.
    fn resumed_call(&self) -> String {
        self.server
            .model_calls()
            .into_iter()
            .map(|c| c.body.to_string())
            .find(|b| b.contains("resume-marker-6a31"))
            .unwrap_or_else(|| {
                panic!(
                    "the resumed prompt never reached the model; calls: {}",
                    self.server.model_calls().len()
                )
            })
    }
}

fn short(a: &str) -> String {
    if a.len() > 60 {
        format!(
            "{}…",
            &a[..a.char_indices().nth(57).map_or(a.len(), |(i, _)| i)]
        )
    } else {
        a.to_owned()
    }
}

fn message(
    role: handoff_core::Role,
    provider: &str,
    model: Option<&str>,
    parts: Vec<Part>,
) -> Message {
    Message {
        role,
        provider: AgentId::parse(provider).unwrap(),
        model: model.map(str::to_owned),
        at: Some("2026-12-01T07:00:00.000Z".to_owned()),
        source_id: None,
        parts,
    }
}

/// A conversation another CLI had: a prompt, a tool call with its result, and an answer.
fn carried_from(provider: &str, model: &str) -> Transcript {
    use handoff_core::Role::{Assistant, User};
    let text = |t: &str| Part::Text { text: t.to_owned() };
    Transcript {
        schema_version: TRANSCRIPT_SCHEMA.to_owned(),
        source: TranscriptSource {
            provider: AgentId::parse(provider).unwrap(),
            session_id: "source-session".to_owned(),
            path: "/elsewhere/session.jsonl".into(),
            cwd: Some("/elsewhere/repo".into()),
        },
        messages: vec![
            message(User, provider, None, vec![text(USER_MARKER)]),
            message(
                Assistant,
                provider,
                Some(model),
                vec![
                    Part::Reasoning {
                        text: "Read csv.rs first.".to_owned(),
                    },
                    Part::ToolCall {
                        name: "read_file".to_owned(),
                        id: Some("call_7".to_owned()),
                        input: r#"{"path":"csv.rs"}"#.to_owned(),
                    },
                ],
            ),
            message(
                User,
                provider,
                None,
                vec![Part::ToolResult {
                    id: Some("call_7".to_owned()),
                    output: format!("pub fn split() {{}} // {TOOL_MARKER}"),
                    is_error: false,
                }],
            ),
            message(
                Assistant,
                provider,
                Some(model),
                vec![text(ASSISTANT_MARKER)],
            ),
        ],
        warnings: Vec::new(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn assert_history(bench: &Bench, cli: &str) {
    let sent = bench.resumed_call();
    for needle in [USER_MARKER, ASSISTANT_MARKER, TOOL_MARKER] {
        assert!(
            sent.contains(needle),
            "{cli}: the resumed turn lacks {needle:?}"
        );
    }
}

/// A conversation carried from Codex, written with Claude Code's writer, resumed with
/// `claude -p --resume <id>` from the worktree.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn claude_resumes_a_session_handoff_wrote() {
    if !clis().contains(&"claude") {
        return;
    }
    let started = Instant::now();
    let bench = Bench::new("claude");
    let id = new_id();
    let t = carried_from("codex", "gpt-5.5");
    let target = CarryTarget {
        session_id: id.clone(),
        cwd: bench.cwd(),
        model: None,
        dry_run: false,
    };
    let rt = runtime();
    let carried = rt
        .block_on(Claude.write_session(&bench.store(), &t, &target))
        .unwrap();
    let written = Claude.read_transcript(&carried.files[0]).unwrap();
    let found = rt
        .block_on(Claude.find_session(&bench.store(), &SessionQuery::Latest { cwd: bench.cwd() }))
        .unwrap()
        .unwrap();
    assert_eq!(found.session_id, id);

    let claude = real_bin().join("claude").display().to_string();
    let args: Vec<String> = [
        "-p",
        "--resume",
        &id,
        "--output-format",
        "json",
        RESUME_PROMPT,
    ]
    .map(str::to_owned)
    .to_vec();
    let (code, stdout, stderr) = bench.run(&claude, &args, &bench.env(), &bench.repo, "");
    assert_eq!(code, 0, "claude: {stdout}\n{stderr}");
    let result: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("claude: not JSON ({e}): {stdout}"));
    assert_eq!(result["result"], ANSWER, "{result:#}");
    assert_eq!(result["session_id"], id.as_str(), "{result:#}");
    assert_history(&bench, "claude");

    // The store shows the carried messages, then the new turn.
    let now = Claude.read_transcript(&carried.files[0]).unwrap();
    assert_eq!(resumed_after(&written, &now), Resumption::Continued);
    assert_eq!(now.messages[1].provider, AgentId::CODEX);
    assert_eq!(now.messages[1].model.as_deref(), Some("gpt-5.5"));
    eprintln!(
        "[claude] carried session resumed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// A conversation carried from Claude Code, written with Codex's writer, resumed through the
/// Codex receiver plan (`codex exec resume <id> … -`).
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_resumes_a_session_handoff_wrote() {
    if !clis().contains(&"codex") {
        return;
    }
    let started = Instant::now();
    let bench = Bench::new("codex");
    let id = new_id();
    let t = carried_from("claude", "claude-sonnet-4-5");
    let target = CarryTarget {
        session_id: id.clone(),
        cwd: bench.cwd(),
        model: None,
        dry_run: false,
    };
    let rt = runtime();
    let carried = rt
        .block_on(Codex.write_session(&bench.store(), &t, &target))
        .unwrap();
    let written = Codex.read_transcript(&carried.files[0]).unwrap();
    let found = rt
        .block_on(Codex.find_session(&bench.store(), &SessionQuery::Latest { cwd: bench.cwd() }))
        .unwrap()
        .unwrap();
    assert_eq!(found.session_id, id);

    let version = "codex-cli 0.171.0";
    Codex.resume_support(Some(version)).unwrap();
    let request = ReceiverRequest {
        target: AgentId::CODEX,
        cwd: bench.cwd(),
        role: ReceiverRole::Implement,
        model: Some("fake-model".to_owned()),
        effort: None,
        session_id: new_id(),
        resume: Some(ResumeFrom {
            session_id: id.clone(),
            fork: false,
        }),
    };
    let run = RunDir {
        handoff_sandbox: false,
        confined: false,
        path: Utf8PathBuf::try_from(bench.root.join("run")).unwrap(),
        executable: Utf8PathBuf::try_from(real_bin().join("codex")).unwrap(),
        prompt: RESUME_PROMPT.to_owned(),
        output_schema: Value::Null,
        mcp: None,
        parent_env: bench.env(),
        agent_config: AgentConfig {
            config: bench.codex_config(),
            ..AgentConfig::default()
        },
        nested: None,
    };
    let inv = Codex.receiver_invocation(&request, &run).unwrap();
    assert_eq!(inv.args[..2], ["exec".to_owned(), "resume".to_owned()]);
    let mut env = inv.env.clone();
    env.insert("E2E_MODEL_KEY".to_owned(), MODEL_KEY.to_owned());
    let (code, stdout, stderr) = bench.run(
        inv.program.as_str(),
        &inv.args,
        &env,
        inv.cwd.as_std_path(),
        &run.prompt,
    );
    assert_eq!(code, 0, "codex: {stdout}\n{stderr}");
    let report = Codex.parse_receiver(&handoff_core::RawOutput {
        stdout: stdout.clone().into_bytes(),
        stderr: stderr.clone().into_bytes(),
        exit_code: Some(code),
        answer_file: None,
    });
    assert_eq!(report.failure, None, "{stdout}\n{stderr}");
    assert_eq!(report.session_id.as_deref(), Some(id.as_str()), "{stdout}");
    assert_eq!(report.last_message.as_deref(), Some(ANSWER), "{stdout}");
    assert_history(&bench, "codex");

    // Codex appended the new turn to the carried rollout.
    let now = Codex.read_transcript(&carried.files[0]).unwrap();
    assert_eq!(
        resumed_after(&written, &now),
        Resumption::Continued,
        "{now:#?}"
    );
    assert_eq!(now.messages[1].provider, AgentId::CLAUDE);
    assert_eq!(now.messages[1].model.as_deref(), Some("claude-sonnet-4-5"));
    eprintln!(
        "[codex] carried session resumed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// Claude Code's receiver forks a carried session natively into the id handoff chose
/// (`--resume <src> --fork-session --session-id <new>`): the new session holds the carried
/// turns and the new one, and the carried session is left byte for byte as it was.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn claude_forks_a_session_natively_and_leaves_it_unchanged() {
    if !clis().contains(&"claude") {
        return;
    }
    let started = Instant::now();
    let bench = Bench::new("claude");
    let src = new_id();
    let target = CarryTarget {
        session_id: src.clone(),
        cwd: bench.cwd(),
        model: None,
        dry_run: false,
    };
    let rt = runtime();
    let carried = rt
        .block_on(Claude.write_session(&bench.store(), &carried_from("codex", "gpt-5.5"), &target))
        .unwrap();
    let written = Claude.read_transcript(&carried.files[0]).unwrap();
    let before = SourceSnapshot::take(&carried.files[0]).unwrap();
    let bytes_before = std::fs::read(&carried.files[0]).unwrap();

    assert!(Claude.native_fork());
    Claude
        .resume_support(Some("2.1.197 (Claude Code)"))
        .unwrap();
    let fork = new_id();
    let request = ReceiverRequest {
        target: AgentId::CLAUDE,
        cwd: bench.cwd(),
        role: ReceiverRole::Implement,
        model: None,
        effort: None,
        session_id: fork.clone(),
        resume: Some(ResumeFrom {
            session_id: src.clone(),
            fork: true,
        }),
    };
    let run = RunDir {
        handoff_sandbox: false,
        confined: false,
        path: Utf8PathBuf::try_from(bench.root.join("run")).unwrap(),
        executable: Utf8PathBuf::try_from(real_bin().join("claude")).unwrap(),
        prompt: RESUME_PROMPT.to_owned(),
        output_schema: Value::Null,
        mcp: None,
        parent_env: bench.env(),
        agent_config: AgentConfig::default(),
        nested: None,
    };
    let inv = Claude.receiver_invocation(&request, &run).unwrap();
    let (code, stdout, stderr) = bench.run(
        inv.program.as_str(),
        &inv.args,
        &inv.env,
        inv.cwd.as_std_path(),
        &run.prompt,
    );
    assert_eq!(code, 0, "claude: {stdout}\n{stderr}");
    let report = Claude.parse_receiver(&handoff_core::RawOutput {
        stdout: stdout.clone().into_bytes(),
        stderr: stderr.clone().into_bytes(),
        exit_code: Some(code),
        answer_file: None,
    });
    assert_eq!(report.failure, None, "{stdout}\n{stderr}");
    assert_eq!(report.session_id.as_deref(), Some(fork.as_str()));
    assert_eq!(report.last_message.as_deref(), Some(ANSWER));
    assert_history(&bench, "claude fork");

    assert_eq!(
        std::fs::read(&carried.files[0]).unwrap(),
        bytes_before,
        "the forked session changed"
    );
    assert!(before.still_prefix().unwrap());
    let forked = rt
        .block_on(Claude.find_session(&bench.store(), &SessionQuery::Id(fork.clone())))
        .unwrap()
        .unwrap_or_else(|| panic!("no session {fork} in the store"));
    assert_eq!(forked.path.parent(), carried.files[0].parent());
    let now = Claude.read_transcript(&forked.path).unwrap();
    assert_eq!(
        resumed_after(&written, &now),
        Resumption::Continued,
        "{now:#?}"
    );
    eprintln!(
        "[claude] native fork: carried provider on read-back {:?}, model {:?}; in {:.1}s",
        now.messages[1].provider,
        now.messages[1].model,
        started.elapsed().as_secs_f64()
    );
}
