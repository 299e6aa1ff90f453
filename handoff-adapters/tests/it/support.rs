//! Shared fixtures: a canonical temporary directory holding the worktree and the run
//! directory, deterministic parent environments, MCP descriptors, and request builders that
//! go through the public validation path.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, Instructions, Invocation, InvocationError, Part, Provider, RawOutput, Receiver,
    Registry, Role, RunDir, RunInput, Transcript, Validated, Verb,
};

/// The executables the plans name (never run).
pub const CODEX_EXE: &str = "/usr/local/bin/codex";
pub const CLAUDE_EXE: &str = "/usr/local/bin/claude";

/// The secret values behind the MCP references of [`MCP_DESCRIPTOR`].
pub const DOCS_SECRET: &str = "docs-secret-7f3a9c51";
pub const SEARCH_TOKEN: &str = "search-secret-91b2e4d0";
pub const SEARCH_AUTH: &str = "Bearer search-secret-91b2e4d0";

/// Every secret value a plan built from [`parent_env`] and [`MCP_DESCRIPTOR`] may carry.
pub const MCP_SECRETS: &[&str] = &[DOCS_SECRET, SEARCH_TOKEN, SEARCH_AUTH];

/// A stdio server whose `DOCS_TOKEN` comes from `DOCS_MCP_TOKEN`, and an http server whose
/// `Authorization` header comes from `SEARCH_MCP_AUTH`.
pub const MCP_DESCRIPTOR: &str = r#"{
  "schemaVersion": "handoff.mcp.v1",
  "servers": [
    {
      "name": "local-docs",
      "transport": "stdio",
      "command": "/usr/bin/env",
      "args": ["node", "/opt/docs/server.mjs", "--root", "a \"quoted\" dir"],
      "env": {"DOCS_TOKEN": {"fromEnv": "DOCS_MCP_TOKEN"}}
    },
    {
      "name": "remote-search",
      "transport": "http",
      "url": "https://mcp.example.com/rpc",
      "headers": {"Authorization": {"fromEnv": "SEARCH_MCP_AUTH"}}
    }
  ]
}"#;

/// handoff's own environment: login basics, both CLIs' credentials, the MCP secrets, and
/// variables that must never reach an agent.
pub fn parent_env() -> BTreeMap<String, String> {
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/home/tester"),
        ("USER", "tester"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("TERM", "xterm-256color"),
        ("TMPDIR", "/tmp"),
        ("HTTPS_PROXY", "http://proxy.internal:3128"),
        ("OPENAI_API_KEY", "sk-openai-test-key"),
        ("CODEX_HOME", "/home/tester/.codex"),
        ("ANTHROPIC_API_KEY", "sk-ant-test-key"),
        ("ANTHROPIC_DEFAULT_OPUS_MODEL", "claude-opus-test"),
        ("CLAUDE_CONFIG_DIR", "/home/tester/.claude"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret-test-value"),
        ("AWS_REGION", "us-east-1"),
        ("SECRET_UNRELATED", "x"),
        ("GITHUB_TOKEN", "ghp-unrelated-token"),
        ("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock"),
        ("LD_PRELOAD", "/tmp/evil.so"),
        ("NODE_OPTIONS", "--require /tmp/evil.js"),
        ("HANDOFF_SUPERVISOR_CONTEXT", "must-not-pass"),
        ("DOCS_MCP_TOKEN", DOCS_SECRET),
        ("SEARCH_MCP_AUTH", SEARCH_AUTH),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Variables of [`parent_env`] that no agent may receive.
pub const NEVER_PASSED: &[&str] = &[
    "SECRET_UNRELATED",
    "GITHUB_TOKEN",
    "SSH_AUTH_SOCK",
    "LD_PRELOAD",
    "NODE_OPTIONS",
    "HANDOFF_SUPERVISOR_CONTEXT",
    "DOCS_MCP_TOKEN",
    "SEARCH_MCP_AUTH",
];

/// The registered provider for `harness` (`codex` or `claude`).
pub fn provider(harness: &str) -> Arc<dyn Provider> {
    let registry = handoff_adapters::default_registry();
    let id = AgentId::parse(harness).expect("agent id");
    Arc::clone(registry.get(&id).expect("registered"))
}

/// The registry the receiver tests read, made once.
static REGISTRY: LazyLock<Registry> = LazyLock::new(handoff_adapters::default_registry);

/// The receiver side of `harness`'s adapter (`claude`, `codex` or `opencode`).
pub fn receiver(harness: &str) -> &'static dyn Receiver {
    let id = AgentId::parse(harness).expect("agent id");
    REGISTRY
        .get(&id)
        .expect("registered")
        .receiver()
        .expect("a receiver")
}

/// The executable path a plan for `harness` uses.
pub fn executable(harness: &str) -> &'static str {
    match harness {
        "codex" => CODEX_EXE,
        "claude" => CLAUDE_EXE,
        "opencode" => "/usr/local/bin/opencode",
        other => panic!("no executable for {other}"),
    }
}

/// A canonical temporary directory with `repo/` (the worktree) and `run/` (the private run
/// directory); removed on drop.
pub struct Fixture {
    _tmp: tempfile::TempDir,
    /// The canonical temporary directory.
    pub root: Utf8PathBuf,
    /// The worktree (`--cwd`).
    pub cwd: Utf8PathBuf,
    /// The run directory.
    pub run_path: Utf8PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::Builder::new()
            .prefix("handoff-adapters-it-")
            .tempdir()
            .expect("tempdir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonicalize");
        let root = Utf8PathBuf::from_path_buf(root).expect("utf-8 temp path");
        let cwd = root.join("repo");
        let run_path = root.join("run");
        std::fs::create_dir(&cwd).expect("mkdir repo");
        std::fs::create_dir(&run_path).expect("mkdir run");
        Fixture {
            _tmp: tmp,
            root,
            cwd,
            run_path,
        }
    }

    /// Writes an MCP descriptor file and returns its path.
    pub fn mcp_file(&self, name: &str, contents: &str) -> String {
        let path = self.root.join(name);
        std::fs::write(&path, contents).expect("write descriptor");
        path.to_string()
    }

    /// A request input for `harness`: `mode` `None` means advice. The caller is the other
    /// root-capable agent.
    pub fn input(&self, harness: &str, mode: Option<&str>) -> RunInput {
        let mut input = RunInput::new(if mode.is_some() {
            Verb::Run
        } else {
            Verb::Advice
        });
        input.caller_harness = Some(
            if harness == "codex" {
                "claude"
            } else {
                "codex"
            }
            .into(),
        );
        input.harness = Some(harness.into());
        input.mode = mode.map(str::to_owned);
        input.cwd = Some(self.cwd.to_string());
        input.instructions = Some(Instructions::Stdin(
            b"Add a --verbose flag to the CLI and run the tests.".to_vec(),
        ));
        input
    }

    /// `input` with the standard MCP descriptor attached.
    pub fn with_mcp(&self, mut input: RunInput) -> RunInput {
        input.mcp_config = Some(self.mcp_file("mcp.json", MCP_DESCRIPTOR));
        input
    }

    /// The run directory the engine would hand the adapter.
    pub fn run_dir(
        &self,
        validated: &Validated,
        harness: &str,
        parent_env: BTreeMap<String, String>,
    ) -> RunDir {
        crate::harness::run_dir_for(
            self,
            validated,
            Utf8Path::new(executable(harness)),
            parent_env,
        )
    }

    /// Validates `input` against the default registry and plans it with `parent_env`.
    pub fn plan_with(
        &self,
        input: &RunInput,
        parent_env: BTreeMap<String, String>,
    ) -> Result<Invocation, InvocationError> {
        let validated = validate(input);
        let harness = validated.request.target.harness.to_string();
        let run = self.run_dir(&validated, &harness, parent_env);
        provider(&harness).invocation(&validated.request, &run)
    }

    /// [`Fixture::plan_with`] with [`parent_env`]; the plan must succeed.
    pub fn plan(&self, input: &RunInput) -> Invocation {
        self.plan_with(input, parent_env())
            .unwrap_or_else(|e| panic!("invocation refused: {e}"))
    }

    /// insta settings that make snapshots independent of the machine: the temporary
    /// directory, run ids and hashes become placeholders.
    pub fn insta_settings(&self) -> insta::Settings {
        let mut s = insta::Settings::clone_current();
        s.set_omit_expression(true);
        s.add_filter(&regex::escape(self.root.as_str()), "[TMP]");
        s.add_filter(
            r"run-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[RUN_ID]",
        );
        s.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[HASH]");
        s
    }
}

/// Validates against the default registry; panics with the refusal.
pub fn validate(input: &RunInput) -> Validated {
    input
        .validate(&handoff_adapters::default_registry())
        .unwrap_or_else(|e| panic!("validation refused: {e}"))
}

/// The value following `flag` in `args` (first occurrence).
pub fn arg_after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// Every value following `flag` in `args`.
pub fn args_after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
    args.windows(2)
        .filter(|w| w[0] == flag)
        .map(|w| w[1].as_str())
        .collect()
}

/// A raw output with only stdout.
pub fn stdout(bytes: impl Into<Vec<u8>>) -> RawOutput {
    RawOutput {
        stdout: bytes.into(),
        stderr: Vec::new(),
        exit_code: Some(0),
        answer_file: None,
    }
}

/// A recorded fixture from `tests/it/fixtures/`.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A recorded session from `tests/it/fixtures/sessions/`.
pub fn session_fixture(name: &str) -> Utf8PathBuf {
    Utf8Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/fixtures/sessions")
        .join(name)
}

/// A transcript's parts in order, each as its role and a line of text saying what it is.
pub fn texts(t: &Transcript) -> Vec<(Role, String)> {
    t.messages
        .iter()
        .flat_map(|m| {
            m.parts.iter().map(move |p| {
                let text = match p {
                    Part::Text { text } => format!("text: {text}"),
                    Part::ToolCall { name, input, .. } => format!("call {name}: {input}"),
                    Part::ToolResult {
                        output, is_error, ..
                    } => format!(
                        "result{}: {output}",
                        if *is_error { " (error)" } else { "" }
                    ),
                    Part::Reasoning { text } => format!("reasoning: {text}"),
                };
                (m.role, text)
            })
        })
        .collect()
}

/// A short conversation by Claude Code (a user turn, an answer with a tool call, its result)
/// to carry into another CLI's store.
pub fn carried_transcript() -> handoff_core::Transcript {
    let msg = |role, model: Option<&str>, parts| handoff_core::Message {
        role,
        provider: handoff_core::AgentId::CLAUDE,
        model: model.map(str::to_owned),
        at: None,
        source_id: None,
        parts,
    };
    handoff_core::Transcript {
        schema_version: handoff_core::TRANSCRIPT_SCHEMA.to_owned(),
        source: handoff_core::TranscriptSource {
            provider: handoff_core::AgentId::CLAUDE,
            session_id: "source".to_owned(),
            path: "/dev/null".into(),
            cwd: None,
        },
        messages: vec![
            msg(
                handoff_core::Role::User,
                None,
                vec![handoff_core::Part::Text {
                    text: "Fix the parser.".into(),
                }],
            ),
            msg(
                handoff_core::Role::Assistant,
                Some("opus"),
                vec![
                    handoff_core::Part::Text {
                        text: "Reading it first.".into(),
                    },
                    handoff_core::Part::ToolCall {
                        name: "Read".into(),
                        id: Some("t1".into()),
                        input: "{\"path\":\"src/lib.rs\"}".into(),
                    },
                ],
            ),
            msg(
                handoff_core::Role::User,
                None,
                vec![handoff_core::Part::ToolResult {
                    id: Some("t1".into()),
                    output: "pub fn one()".into(),
                    is_error: false,
                }],
            ),
        ],
        warnings: vec![],
    }
}

/// A session store under `home`: only `HOME` set.
pub fn home_store(home: &camino::Utf8Path) -> handoff_core::StoreEnv {
    handoff_core::StoreEnv {
        vars: BTreeMap::from([("HOME".to_owned(), home.to_string())]),
        executable: None,
        scratch: None,
    }
}

/// The round trip every store of carried conversations makes, in a fresh HOME: a dry run
/// writes nothing and names the file; the write lands where `expected` says (from HOME and
/// the target) and never over an existing session; it is found by id and as the newest of its
/// directory, never by an id that is a path; it reads back to the same parts by the same
/// provider and model; and a copy under a new id is re-rooted. Returns the written file's text
/// for what the store checks on its own.
pub async fn carried_round_trip(
    sessions: &dyn handoff_core::Sessions,
    expected: impl Fn(&camino::Utf8Path, &handoff_core::CarryTarget) -> camino::Utf8PathBuf,
) -> String {
    use handoff_core::{CarryTarget, SessionQuery};
    let dir = tempfile::tempdir().unwrap();
    let home = camino::Utf8PathBuf::try_from(dir.path().to_path_buf()).unwrap();
    let target = CarryTarget {
        session_id: "0b6a3c1e-2f4d-4e5a-8b7c-9d0e1f2a3b4c".into(),
        cwd: "/work/repo".into(),
        model: Some("gpt-4.1".into()),
        dry_run: false,
    };
    let env = home_store(&home);
    let planned = sessions
        .write_session(
            &env,
            &carried_transcript(),
            &CarryTarget {
                dry_run: true,
                ..target.clone()
            },
        )
        .await
        .unwrap();
    assert!(!planned.files[0].exists());
    let written = sessions
        .write_session(&env, &carried_transcript(), &target)
        .await
        .unwrap();
    assert_eq!(written.files, planned.files);
    assert_eq!(written.files[0], expected(&home, &target));
    assert!(
        sessions
            .write_session(&env, &carried_transcript(), &target)
            .await
            .is_err(),
        "written over an existing session"
    );
    let by_id = sessions
        .find_session(&env, &SessionQuery::Id(target.session_id.clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        by_id.cwd.as_deref(),
        Some(camino::Utf8Path::new("/work/repo"))
    );
    let latest = sessions
        .find_session(
            &env,
            &SessionQuery::Latest {
                cwd: "/work/repo".into(),
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.session_id, target.session_id);
    assert!(
        sessions
            .find_session(&env, &SessionQuery::Id("../../etc".into()))
            .await
            .unwrap()
            .is_none()
    );
    let back = sessions.read_transcript(&by_id.path).unwrap();
    let original = carried_transcript();
    assert_eq!(back.messages.len(), original.messages.len());
    for (b, o) in back.messages.iter().zip(&original.messages) {
        assert_eq!(
            (b.role, &b.provider, &b.parts),
            (o.role, &o.provider, &o.parts)
        );
    }
    assert_eq!(back.messages[1].model.as_deref(), Some("opus"));
    let copied = sessions
        .copy_session(
            &env,
            &by_id,
            &CarryTarget {
                session_id: "1c7b4d2f-3a5e-4f6b-9c8d-0e1f2a3b4c5d".into(),
                cwd: "/work/other".into(),
                ..target.clone()
            },
        )
        .await
        .unwrap();
    let again = sessions.read_transcript(&copied.files[0]).unwrap();
    assert_eq!(
        again.source.session_id,
        "1c7b4d2f-3a5e-4f6b-9c8d-0e1f2a3b4c5d"
    );
    assert_eq!(
        again.source.cwd.as_deref(),
        Some(camino::Utf8Path::new("/work/other"))
    );
    assert_eq!(again.messages, back.messages);
    std::fs::read_to_string(&written.files[0]).unwrap()
}
