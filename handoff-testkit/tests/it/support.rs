//! Shared helpers: a sandbox of fake CLIs plus a scratch repo, and a hermetic runner.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use handoff_testkit::{FakeAgents, ScratchRepo};
use serde_json::Value;
use tempfile::TempDir;

/// The argv handoff's Claude adapter uses (delegation.md §4.4, stream-json variant).
pub fn claude_run_args(tools: &str, settings: &str, schema: &str) -> Vec<String> {
    [
        "--safe-mode",
        "--settings",
        settings,
        "--strict-mcp-config",
        "--mcp-config",
        r#"{"mcpServers":{}}"#,
        "--disable-slash-commands",
        "--no-session-persistence",
        "--no-chrome",
        "--permission-mode",
        "dontAsk",
        "--tools",
        tools,
        "--allowedTools",
        tools,
        "--max-turns",
        "12",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--json-schema",
        schema,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

pub const WRITE_TOOLS: &str = "Edit,Glob,Grep,Read,Write";
pub const READ_TOOLS: &str = "Glob,Grep,Read";

pub fn sandbox_settings(cwd: &Path, write: bool) -> String {
    let cwd = cwd.display().to_string();
    serde_json::json!({
        "sandbox": {
            "enabled": true,
            "failIfUnavailable": true,
            "allowUnsandboxedCommands": false,
            "excludedCommands": [],
            "filesystem": {
                "allowRead": [cwd],
                "allowWrite": if write { vec![cwd.clone()] } else { vec![] },
                "denyRead": [],
                "denyWrite": if write { vec![] } else { vec![cwd.clone()] },
            },
            "network": { "allowedDomains": [] },
        }
    })
    .to_string()
}

pub const SCHEMA: &str = r#"{"type":"object","required":["schemaVersion","status","response","evidence","findings","usage"]}"#;

/// The Codex argv (delegation.md §4.1).
pub fn codex_run_args(sandbox: &str, cd: &Path, schema: &Path, last: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "exec",
        "--json",
        "--ephemeral",
        "--ignore-user-config",
        "--ignore-rules",
        "--strict-config",
        "--config",
        r#"approval_policy="never""#,
        "--config",
        "project_doc_max_bytes=0",
        "--config",
        "project_doc_fallback_filenames=[]",
        "--config",
        r#"project_root_markers=[".git"]"#,
        "--config",
        "sandbox_workspace_write.network_access=false",
        "--config",
        r#"web_search="disabled""#,
        "--sandbox",
        sandbox,
        "--cd",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.push(cd.display().to_string());
    args.push("--output-schema".into());
    args.push(schema.display().to_string());
    args.push("--output-last-message".into());
    args.push(last.display().to_string());
    args.push("-".into());
    args
}

/// One test's world: fake CLIs in `<tmp>/bin`, a scratch repo, a scratch dir.
pub struct World {
    pub tmp: TempDir,
    pub agents: FakeAgents,
    pub repo: ScratchRepo,
}

impl World {
    pub fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let agents = FakeAgents::install(tmp.path());
        World {
            tmp,
            agents,
            repo: ScratchRepo::new(),
        }
    }

    pub fn with_sandbox_tools() -> World {
        let w = World::new();
        let agents = w.agents.clone().with_sandbox_tools();
        World { agents, ..w }
    }

    pub fn scratch(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// Runs `<bin_dir>/<exe> args` in the repo with a scrubbed environment
    /// (`PATH=agents.path_env()`, `HOME=<tmp>`), feeding `stdin`.
    pub fn run(&self, exe: &str, args: &[String], stdin: Option<&str>) -> Output {
        self.run_in(exe, args, stdin, self.repo.path(), &[])
    }

    pub fn run_in(
        &self,
        exe: &str,
        args: &[String],
        stdin: Option<&str>,
        cwd: &Path,
        env: &[(&str, &OsStr)],
    ) -> Output {
        let mut cmd = Command::new(self.agents.bin(exe));
        cmd.args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", self.agents.path_env())
            .env("HOME", self.tmp.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        run_command(cmd, stdin)
    }
}

pub fn run_command(mut cmd: Command, stdin: Option<&str>) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        let mut pipe = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            // The fake may exit before reading (probes): ignore EPIPE.
            let _ = pipe.write_all(text.as_bytes());
        }
    }
    child.wait_with_output().unwrap()
}

pub fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn json_lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

pub const BUILD_PROMPT: &str = "Operation: handoff\nMode: build\n\nExecute the 'build' handoff.\n";
pub const REVIEW_PROMPT: &str = "Operation: handoff\nMode: review\n\nReview the code.\n";
pub const ADVICE_PROMPT: &str = "Operation: advice\n\nAnswer the question.\n";

/// Checks the provider-output shape (handoff.provider-output.v1) and returns it.
pub fn assert_answer(v: &Value) -> &serde_json::Map<String, Value> {
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("answer is not an object: {v}"));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "evidence",
            "findings",
            "response",
            "schemaVersion",
            "status",
            "usage"
        ],
        "{v}"
    );
    assert_eq!(obj["schemaVersion"], "handoff.provider-output.v1");
    assert!(matches!(
        obj["status"].as_str(),
        Some("completed" | "blocked" | "failed")
    ));
    assert!(!obj["response"].as_str().unwrap().trim().is_empty());
    for e in obj["evidence"].as_array().unwrap() {
        let e = e.as_object().unwrap();
        assert!(!e["kind"].as_str().unwrap().is_empty());
        assert!(!e["summary"].as_str().unwrap().is_empty());
        if let Some(p) = e.get("path") {
            let p = p.as_str().unwrap();
            assert!(
                !p.starts_with('/') && !p.split('/').any(|s| s.is_empty() || s == "." || s == "..")
            );
        }
        assert!(
            e.keys()
                .all(|k| ["kind", "path", "summary"].contains(&k.as_str()))
        );
    }
    assert!(obj["findings"].is_array());
    let usage = obj["usage"].as_object().unwrap();
    for k in ["inputTokens", "outputTokens", "totalTokens"] {
        assert!(usage[k].as_u64().is_some(), "{k}");
    }
    obj
}

pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".git")
        .collect();
    names.sort();
    names
}

/// Waits (up to 10 s) until `path` exists and is non-empty, then returns its contents.
pub fn wait_for_file(path: &Path) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {}",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
