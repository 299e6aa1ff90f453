//! The real agent CLIs (Claude Code, Codex, OpenCode, GitHub Copilot CLI, Gemini CLI, Qwen Code,
//! the community Grok CLI), installed from npm by `cargo xtask e2e-real`, driven through the `handoff` binary against the testkit's
//! scripted model server on 127.0.0.1. Every test is ignored in the hermetic suite; `cargo xtask e2e-real`
//! runs them with `HANDOFF_REAL_BIN` pointing at the installed CLIs, and a missing variable fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod attacks;
mod carry;
mod continuation;
mod copilot;
mod failures;
mod gemini;
mod grok_community;
mod leftovers;
mod limit;
mod opencode_sessions;
mod own_sandbox;
mod panel;
mod plugin;
mod qwen;
mod reaper;
mod remote;
mod sessions;
mod shared_cache;
mod surface;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use handoff_testkit::ScratchRepo;
use handoff_testkit::model_server::{ModelServer, Reply, Script, Step, provider_output};
use serde_json::Value;

const HANDOFF: &str = env!("CARGO_BIN_EXE_handoff");
const MODEL_KEY: &str = "sk-e2e-model-key-0123456789";

fn real_bin() -> PathBuf {
    let dir = std::env::var_os("HANDOFF_REAL_BIN")
        .expect("HANDOFF_REAL_BIN is not set: run the real-CLI suite with `cargo xtask e2e-real`");
    PathBuf::from(dir)
}

/// One preflight cache for the whole suite (keyed by executable and sandbox tools, so sharing
/// it is what a user's machine does too).
fn shared_cache() -> PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("handoff-real-cache-")
            .tempdir()
            .unwrap()
    })
    .path()
    .to_path_buf()
}

fn private_dir(p: &Path) {
    std::fs::create_dir_all(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
}

struct Run {
    code: i32,
    json: Value,
    stderr: String,
}

impl Run {
    fn changed(&self) -> Vec<String> {
        serde_json::from_value(self.json["git"]["changedFiles"].clone()).unwrap_or_default()
    }
    fn message(&self) -> String {
        self.json["diagnostics"]["message"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }
}

/// One real CLI, one scratch repository, one scripted model server.
struct Rig {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: ScratchRepo,
    server: ModelServer,
    cli: &'static str,
    path: String,
    /// The `--cwd` of runs, when not the repository's main worktree.
    cwd: Option<PathBuf>,
}

impl Drop for Rig {
    /// An OpenCode run's session is imported after its result, by a detached importer that
    /// files it at this rig's repository: it is let finish before the repository goes.
    fn drop(&mut self) {
        if let Ok(base) = handoff_core::private_dir_base(None) {
            let limit = std::time::Duration::from_secs(60);
            handoff_core::state_import::settle(&base, "opencode", limit);
        }
    }
}

impl Rig {
    fn new(cli: &'static str, script: Script) -> Rig {
        let tmp = tempfile::Builder::new()
            .prefix("handoff-real-")
            .tempdir()
            .unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        private_dir(&root);
        for d in ["private", "home", "codex-home", "data", "tmp"] {
            private_dir(&root.join(d));
        }
        let server = ModelServer::start_blocking(script)
            .with_log_file(root.join(format!("model-{cli}.jsonl")));
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", real_bin().display());
        let rig = Rig {
            _tmp: tmp,
            root,
            repo: ScratchRepo::new(),
            server,
            cli,
            path,
            cwd: None,
        };
        rig.write_config();
        rig
    }

    /// The user configuration that points each CLI at the scripted server (the way a user
    /// points it at a gateway), with retries, telemetry and updates off.
    fn write_config(&self) {
        let v1 = self.server.v1_url();
        let url = self.server.url();
        let text = format!(
            r#"
[agents.claude]
env = {{ ANTHROPIC_BASE_URL = "{url}", ANTHROPIC_API_KEY = "{MODEL_KEY}", CLAUDE_CODE_MAX_RETRIES = "0", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_TELEMETRY = "1" }}

[agents.codex]
model = "fake-model"
config = [
  'model_provider="e2e"',
  'model_providers.e2e.name="E2E"',
  'model_providers.e2e.base_url="{v1}"',
  'model_providers.e2e.wire_api="responses"',
  'model_providers.e2e.env_key="E2E_MODEL_KEY"',
  'model_providers.e2e.request_max_retries=0',
  'model_providers.e2e.stream_max_retries=0',
]
env = {{ E2E_MODEL_KEY = "{MODEL_KEY}" }}

[agents.copilot]
model = "fake-model"
env = {{ COPILOT_PROVIDER_BASE_URL = "{v1}", COPILOT_PROVIDER_API_KEY = "{MODEL_KEY}" }}

[agents.gemini]
model = "gemini-2.5-flash"
env = {{ GOOGLE_GEMINI_BASE_URL = "{url}", GEMINI_API_KEY = "{MODEL_KEY}" }}

[agents.qwen]
model = "fake-model"
env = {{ OPENAI_BASE_URL = "{v1}", OPENAI_API_KEY = "{MODEL_KEY}", OPENAI_MODEL = "fake-model" }}

[agents.grok-community]
env = {{ GROK_API_KEY = "{MODEL_KEY}", GROK_BASE_URL = "{v1}" }}

[agents.opencode]
model = "e2e/fake-model"
env = {{ OPENCODE_DISABLE_MODELS_FETCH = "1" }}

[agents.opencode.provider.e2e]
npm = "@ai-sdk/openai-compatible"
name = "E2E"
options = {{ baseURL = "{v1}", apiKey = "{MODEL_KEY}" }}
models = {{ "fake-model" = {{ name = "Fake Model", tool_call = true }} }}
"#
        );
        let p = self.root.join("config.toml");
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// `handoff` as a person runs it: from a directory of their own (not from this repository,
    /// whose worktree holds the installed CLIs under `target/`: handoff never starts a program
    /// from inside the worktree it runs in).
    fn command(&self) -> Command {
        let mut c = Command::new(HANDOFF);
        c.current_dir(&self.root)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", self.root.join("home"))
            .env("CODEX_HOME", self.root.join("codex-home"))
            .env("XDG_DATA_HOME", self.root.join("data"))
            .env("TMPDIR", self.root.join("tmp"))
            .env("HANDOFF_CONFIG", self.root.join("config.toml"))
            .env("XDG_CACHE_HOME", shared_cache())
            .env("LANG", "C.UTF-8");
        // The machine's trust store for Node (a TLS-inspecting registry proxy), as a user's
        // environment has it: handoff's own `npm` fetches of provider packages need it.
        if let Some(ca) = std::env::var_os("NODE_EXTRA_CA_CERTS") {
            c.env("NODE_EXTRA_CA_CERTS", ca);
        }
        c
    }

    fn caller(&self) -> &'static str {
        if self.cli == "codex" {
            "claude"
        } else {
            "codex"
        }
    }

    fn run(&self, mode: &str, extra: &[&str]) -> Run {
        if mode == "advice" {
            self.handoff("advice", None, extra)
        } else {
            self.handoff("run", Some(mode), extra)
        }
    }

    /// `handoff run-with-advice` with this CLI as the worker.
    fn run_with_advice(&self, mode: &str, extra: &[&str]) -> Run {
        self.handoff("run-with-advice", Some(mode), extra)
    }

    /// `handoff <verb> --caller-harness … --harness <cli> [--mode <mode>] --cwd <repo>
    /// --instructions <file> <extra…>`.
    fn handoff(&self, verb: &str, mode: Option<&str>, extra: &[&str]) -> Run {
        let ins = self.root.join("private/instructions.txt");
        std::fs::write(&ins, "Do what the scripted model says, then answer.").unwrap();
        let mut cmd = self.command();
        cmd.args([
            verb,
            "--caller-harness",
            self.caller(),
            "--harness",
            self.cli,
        ]);
        if let Some(mode) = mode {
            cmd.args(["--mode", mode]);
        }
        cmd.arg("--cwd")
            .arg(self.cwd.as_deref().unwrap_or(self.repo.path()))
            .arg("--instructions")
            .arg(&ins)
            .args(extra);
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            json: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        eprintln!(
            "[{} {verb} {} {extra:?}] exit {} — {}",
            self.cli,
            mode.unwrap_or(""),
            run.code,
            run.stderr.trim()
        );
        run
    }

    /// `handoff advice` asked of a panel (`harnesses`, comma-separated) with `question`: its
    /// exit code, its one JSON line, and each member's agent and status.
    fn panel(&self, harnesses: &str, question: &str) -> (i32, Value, Vec<(String, String)>) {
        let ins = self.root.join("private/question.txt");
        std::fs::write(&ins, question).unwrap();
        let out = self
            .command()
            .args([
                "advice",
                "--caller-harness",
                "claude",
                "--harness",
                harnesses,
            ])
            .arg("--cwd")
            .arg(self.repo.path())
            .arg("--instructions")
            .arg(&ins)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let panel: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("not one JSON line ({e}): {stdout}\n{stderr}"));
        let members = panel["members"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (s(&m["target"]["harness"]), s(&m["status"]))
            })
            .collect();
        eprintln!(
            "[panel {harnesses}] exit {:?} — {}",
            out.status.code(),
            stderr.trim()
        );
        (out.status.code().unwrap_or(-1), panel, members)
    }

    /// The same machine without bwrap: a PATH of every system tool but bwrap.
    fn without_bubblewrap(&mut self) {
        let tools = self.root.join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        for dir in ["/usr/local/bin", "/usr/bin", "/bin"] {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let name = e.file_name();
                if name == "bwrap" || tools.join(&name).exists() {
                    continue;
                }
                let _ = std::os::unix::fs::symlink(e.path(), tools.join(&name));
            }
        }
        self.path = format!("{}:{}", real_bin().display(), tools.display());
    }

    fn file(&self, name: &str) -> String {
        self.repo.path().join(name).to_string_lossy().into_owned()
    }

    /// Tools offered in the model calls that carried tools (side calls offer none).
    fn offered(&self) -> Vec<String> {
        let mut all: Vec<String> = self.server.offered_tools().into_iter().flatten().collect();
        all.sort();
        all.dedup();
        all
    }

    fn assert_no_process_left(&self) {
        let repo = self.repo.path().to_string_lossy().into_owned();
        assert_no_process_mentions(&[&repo]);
    }
}

/// Fails when a live process (not this test) has one of `needles` in its command line.
fn assert_no_process_mentions(needles: &[&str]) {
    std::thread::sleep(std::time::Duration::from_millis(500));
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if needles.iter().any(|n| cmdline.contains(n)) && !stat.contains(") Z ") {
            panic!("process {pid} of the run is still alive: {cmdline}");
        }
    }
}

/// Whether this run of the suite includes `cli` and `others` (`HANDOFF_REAL_ONLY` names the
/// CLIs to run; unset, all).
fn wanted(cli: &str, others: &[&str]) -> bool {
    match std::env::var("HANDOFF_REAL_ONLY") {
        Ok(only) => std::iter::once(cli)
            .chain(others.iter().copied())
            .all(|c| only.split(',').any(|o| o == c)),
        Err(_) => true,
    }
}

fn clis() -> Vec<&'static str> {
    let all = ["claude", "codex", "opencode"];
    match std::env::var("HANDOFF_REAL_ONLY") {
        Ok(only) => all
            .into_iter()
            .filter(|c| only.split(',').any(|o| o == *c))
            .collect(),
        Err(_) => all.to_vec(),
    }
}

/// Write tools each CLI must not offer in read-only modes.
fn write_tools(cli: &str) -> &'static [&'static str] {
    match cli {
        "claude" => &["Write", "Edit", "NotebookEdit"],
        "opencode" => &["write", "edit", "patch"],
        _ => &[],
    }
}

fn shell_tools(cli: &str) -> &'static [&'static str] {
    match cli {
        "claude" => &["Bash"],
        "codex" => &["exec_command", "shell", "write_stdin"],
        _ => &["bash"],
    }
}

fn web_tools(cli: &str) -> &'static [&'static str] {
    match cli {
        "claude" => &["WebSearch", "WebFetch"],
        "codex" => &["web_search"],
        _ => &["webfetch", "websearch"],
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn build_writes_with_the_agents_own_tool() {
    for cli in clis() {
        let probe = Rig::new(cli, Script::text("unused"));
        let target = probe.file("hello.txt");
        probe.server.set_script(Script::new([
            Step::write_file(&target, "hello from a real agent\n"),
            Step::Answer(provider_output("wrote hello.txt")),
        ]));
        let run = probe.run("build", &[]);
        assert_eq!(run.code, 0, "{cli}: {} {}", run.json, run.stderr);
        assert_eq!(run.json["status"], "succeeded");
        assert!(
            run.changed().contains(&"hello.txt".to_string()),
            "{cli}: {:?}",
            run.changed()
        );
        assert!(
            std::fs::read_to_string(&target)
                .unwrap()
                .contains("hello from a real agent")
        );
        assert!(
            !probe.server.tool_calls().is_empty(),
            "{cli}: no tool call in the log"
        );
        assert_eq!(run.json["output"]["response"], "wrote hello.txt");
    }
}

/// A read-only review can use its shell to read the worktree (Claude Code's sandbox must be able
/// to start its read-only Bash), and the review succeeds with the worktree unchanged.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn a_review_reads_the_worktree_through_its_shell() {
    for cli in clis() {
        let rig = Rig::new(cli, Script::text("unused"));
        let marker = "handoff-readable-marker-4711";
        let file = rig.file("notes.txt");
        std::fs::write(&file, format!("{marker}\n")).unwrap();
        rig.server.set_script(Script::new([
            Step::shell(format!("cat {file}")),
            Step::Answer(provider_output("read it")),
        ]));
        let run = rig.run("review", &[]);
        assert_eq!(run.code, 0, "{cli}: {}", run.message());
        assert!(run.changed().is_empty(), "{cli}: {:?}", run.changed());
        let call_id = rig
            .server
            .requests()
            .into_iter()
            .find_map(|r| match r.reply {
                Reply::ToolCall { call_id, .. } => Some(call_id),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{cli}: no shell call: {}", run.json));
        let output = rig.server.tool_output(&call_id).unwrap_or_default();
        assert!(
            output.contains(marker),
            "{cli}: the shell could not read the worktree: {output}"
        );
        rig.assert_no_process_left();
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn review_never_succeeds_with_a_change() {
    for cli in clis() {
        let rig = Rig::new(cli, Script::text("unused"));
        let evil = rig.file("evil.txt");
        rig.server.set_script(Script::new([
            Step::shell(format!("printf planted > {evil}")),
            Step::Answer(provider_output("reviewed")),
        ]));
        let run = rig.run("review", &[]);
        let changed = !run.changed().is_empty() || Path::new(&evil).exists();
        assert!(
            !(run.code == 0 && changed),
            "{cli}: a read-only run succeeded with a change: {}",
            run.json
        );
        if changed {
            assert_eq!(run.code, 10, "{cli}: a change must block: {}", run.json);
        }
        let offered = rig.offered();
        for t in write_tools(cli) {
            assert!(
                !offered.iter().any(|o| o == t),
                "{cli} offered {t} in review: {offered:?}"
            );
        }
        for t in web_tools(cli) {
            assert!(
                !offered.iter().any(|o| o == t),
                "{cli} offered {t} without --web-search: {offered:?}"
            );
        }
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn bash_false_withholds_the_shell_and_web_search_true_offers_the_web() {
    for cli in clis() {
        let rig = Rig::new(cli, Script::answer(provider_output("ok")));
        let run = rig.run("review", &["--bash", "false"]);
        assert_eq!(run.code, 0, "{cli}: {}", run.json);
        let offered = rig.offered();
        for t in shell_tools(cli) {
            assert!(
                !offered.iter().any(|o| o == t),
                "{cli} offered {t} with --bash false: {offered:?}"
            );
        }
        if cli != "codex" {
            let rig = Rig::new(cli, Script::answer(provider_output("ok")));
            let run = rig.run("review", &["--web-search", "true"]);
            assert_eq!(run.code, 0, "{cli}: {}", run.json);
            let offered = rig.offered();
            assert!(
                web_tools(cli)
                    .iter()
                    .any(|t| offered.iter().any(|o| o == t)),
                "{cli} offered no web tool with --web-search true: {offered:?}"
            );
        }
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn selection_reaches_the_cli() {
    for cli in clis() {
        let rig = Rig::new(cli, Script::answer(provider_output("ok")));
        let model = match cli {
            "opencode" => "e2e/fake-model",
            "codex" => "gpt-5.5",
            _ => "claude-e2e-model",
        };
        let run = rig.run("review", &["--model", model, "--effort", "high"]);
        assert_eq!(run.code, 0, "{cli}: {}", run.json);
        let models = rig.server.models_requested();
        let wire_model = model.trim_start_matches("e2e/");
        assert!(models.iter().any(|m| m == wire_model), "{cli}: {models:?}");
        if cli == "codex" {
            let effort = rig
                .server
                .model_calls()
                .iter()
                .filter_map(|r| {
                    r.body
                        .pointer("/reasoning/effort")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect::<Vec<_>>();
            assert!(
                effort.iter().any(|e| e == "high"),
                "codex reasoning effort: {effort:?}"
            );
        }
    }
    // Claude sends effort for its default model.
    let rig = Rig::new("claude", Script::answer(provider_output("ok")));
    let run = rig.run("review", &["--effort", "high"]);
    assert_eq!(run.code, 0, "{}", run.json);
    let efforts: Vec<String> = rig
        .server
        .model_calls()
        .iter()
        .filter_map(|r| {
            r.body
                .pointer("/output_config/effort")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    assert!(
        efforts.iter().any(|e| e == "high"),
        "claude output_config.effort: {efforts:?}"
    );
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn claude_turn_limit_is_enforced_by_the_cli() {
    let rig = Rig::new("claude", Script::text("unused"));
    let target = rig.file("one.txt");
    rig.server.set_script(Script::new([
        Step::write_file(&target, "1"),
        Step::write_file(rig.file("two.txt"), "2"),
        Step::Answer(provider_output("done")),
    ]));
    let run = rig.run("build", &["--max-turns", "1"]);
    assert_eq!(run.code, 2, "{}", run.json);
    assert_eq!(run.json["status"], "failed");
    assert!(run.message().contains("max_turns"), "{}", run.message());
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn prose_instead_of_json_is_invalid_output() {
    for cli in clis() {
        let rig = Rig::new(
            cli,
            Script::text("Sure! I reviewed it and everything looks fine."),
        );
        let run = rig.run("review", &[]);
        assert_eq!(run.code, 7, "{cli}: {}", run.json);
        assert_eq!(run.json["status"], "failed");
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn a_hanging_model_times_out_and_leaves_no_process() {
    for cli in clis() {
        let rig = Rig::new(cli, Script::new([Step::Hang]));
        let run = rig.run("review", &["--timeout-ms", "8000"]);
        assert_eq!(run.code, 8, "{cli}: {}", run.json);
        assert_eq!(run.json["exit"]["timedOut"], true);
        rig.assert_no_process_left();
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn claude_without_bubblewrap_is_not_run_even_after_a_cached_preflight() {
    let mut rig = Rig::new("claude", Script::answer(provider_output("ok")));
    let run = rig.run("review", &[]);
    assert_eq!(run.code, 0, "{}", run.json);
    rig.without_bubblewrap();
    let run = rig.run("review", &[]);
    assert_eq!(run.code, 3, "{}", run.json);
    assert_eq!(run.json["status"], "not_run");
    assert!(
        run.message().contains("sandbox required but unavailable"),
        "{}",
        run.message()
    );
}

/// Codex offers `apply_patch` to models it knows even under `--sandbox read-only`: the log must
/// show its sandbox refusing the call, and nothing is written.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_read_only_sandbox_refuses_apply_patch() {
    if !clis().contains(&"codex") {
        return;
    }
    let rig = Rig::new("codex", Script::text("unused"));
    let evil = rig.file("patched.txt");
    rig.server.set_script(Script::new([
        Step::write_file(&evil, "patched\n"),
        Step::Answer(provider_output("reviewed")),
    ]));
    let run = rig.run("review", &["--model", "gpt-5.5"]);
    assert!(
        !Path::new(&evil).exists(),
        "codex wrote through apply_patch in review"
    );
    assert!(run.changed().is_empty(), "{}", run.json);
    assert_eq!(
        rig.server.tool_calls().first().map(String::as_str),
        Some("apply_patch")
    );
    // The call's output, sent back to the model, carries the sandbox's refusal.
    let outputs: Vec<String> = rig
        .server
        .model_calls()
        .iter()
        .flat_map(|r| {
            r.body["input"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|i| {
                    i["type"]
                        .as_str()
                        .is_some_and(|t| t.ends_with("_call_output"))
                })
                .map(|i| i["output"].to_string())
        })
        .collect();
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("read-only") || o.contains("rejected")),
        "no refusal in the tool outputs: {outputs:?}"
    );
    assert_eq!(run.code, 0, "{}", run.json);
}

/// What the adviser answers, and the worker's answer once it has it.
const ADVICE_TEXT: &str = "advice: looks fine";
const WORKER_TEXT: &str = "worker: got the adviser's answer";

/// The `handoff.result.v1` line in a tool's output (Codex prefixes its own header).
fn result_line(output: &str) -> Option<Value> {
    let start = output.find(r#"{"schemaVersion":"handoff.result.v1""#)?;
    let line = output[start..].lines().next()?;
    serde_json::from_str(line).ok()
}

/// `cli`, a read-only worker (`run-with-advice --mode review`), asks `adviser` for advice with
/// exactly the command its prompt names, from inside its own sandbox. The adviser is a real CLI
/// on the same scripted server, whose conversations are routed to a script of their own by
/// their prompt (`Operation: advice`); the worker then answers with the advice in hand.
fn worker_gets_nested_advice(cli: &'static str, adviser: &'static str) {
    worker_asks_for_nested_advice(cli, adviser, Expect::AsAsked, true, &|_| {});
}

/// What the supervisor does with a real adviser.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// It runs with the grants it asked for.
    AsAsked,
    /// It runs with these grants withheld (`dag.nodes[].attenuated.withheld`).
    Attenuated(&'static [&'static str]),
    /// It runs under handoff's sandbox, which its adapter would not ask for, with these grants
    /// withheld (`dag.nodes[].attenuated.handoffSandbox`).
    Confined(&'static [&'static str]),
    /// It is refused, the message holding this.
    Refused(&'static str),
}

/// [`worker_gets_nested_advice`] for an adviser that may not run (its rig adjusted by `adjust`
/// first): the supervisor refuses it (exit 5, `refusal` in the message) before its CLI starts,
/// and the worker gets that refusal as the nested command's output.
fn worker_is_refused_nested_advice_where(
    cli: &'static str,
    adviser: &'static str,
    refusal: &'static str,
    adjust: &dyn Fn(&Rig),
) {
    worker_asks_for_nested_advice(cli, adviser, Expect::Refused(refusal), true, adjust);
}

/// `cli` asks `adviser` as [`worker_gets_nested_advice`] does, handoff's own sandbox available
/// to it or not (`bubblewrap`), its rig adjusted by `adjust` first, and the supervisor does
/// what `expect` says.
fn worker_asks_for_nested_advice(
    cli: &'static str,
    adviser: &'static str,
    expect: Expect,
    bubblewrap: bool,
    adjust: &dyn Fn(&Rig),
) {
    let refusal = match expect {
        Expect::Refused(r) => Some(r),
        _ => None,
    };
    let only = clis();
    if !only.contains(&cli) || !only.contains(&adviser) {
        return;
    }
    let started = std::time::Instant::now();
    // Before it asks, the worker's shell probes what its sandbox opened: its mailbox's in/
    // (writable; a scratch name, which the supervisor leaves alone), out/ and the mailbox
    // itself (read-only), and a Unix socket listening outside.
    let probe_dir = tempfile::Builder::new()
        .prefix("hprobe")
        .tempdir_in("/tmp")
        .unwrap();
    let socket = probe_dir.path().join("s");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let probe = format!(
        "mb=$(printf '%s' \"$HANDOFF_SUPERVISOR_CONTEXT\" | sed -n 's/.*\"mailbox\":\"\\([^\"]*\\)\".*/\\1/p'); \
         echo \"PROBE-MAILBOX=$mb\"; \
         if ( : > \"$mb/in/.probe.tmp\" ) 2>/dev/null; then echo PROBE-IN-WRITABLE; else echo PROBE-IN-CLOSED; fi; \
         if ( : > \"$mb/out/probe\" ) 2>/dev/null; then echo PROBE-OUT-WRITABLE; else echo PROBE-OUT-CLOSED; fi; \
         if ( : > \"$mb/probe\" ) 2>/dev/null; then echo PROBE-BESIDE-WRITABLE; else echo PROBE-BESIDE-CLOSED; fi; \
         if socat -u OPEN:/dev/null UNIX-CONNECT:{} 2>/dev/null; then echo PROBE-SOCKET-REACHED; else echo PROBE-SOCKET-CLOSED; fi",
        socket.display()
    );
    let script = Script::route(
        [(
            "Operation: advice",
            Script::new([Step::provider_answer(ADVICE_TEXT)]),
        )],
        Script::new([
            Step::shell(probe),
            Step::nested_advice(adviser, "Is the README accurate?"),
            Step::provider_answer(WORKER_TEXT),
        ]),
    );
    let mut rig = Rig::new(cli, script);
    if !bubblewrap {
        rig.without_bubblewrap();
    }
    adjust(&rig);
    let run = rig.run_with_advice("review", &["--timeout-ms", "240000"]);

    // The model server saw the worker call its shell with the nested command, and the output
    // it sent back is the adviser's succeeded result.
    let calls: Vec<(String, Value)> = rig
        .server
        .requests()
        .into_iter()
        .filter(|r| r.route.is_none())
        .filter_map(|r| match r.reply {
            Reply::ToolCall { call_id, input, .. } => Some((call_id, input)),
            _ => None,
        })
        .collect();
    let (probe_id, _) = calls
        .iter()
        .find(|(_, input)| input.to_string().contains("PROBE-MAILBOX"))
        .unwrap_or_else(|| panic!("{cli}: the worker never probed its sandbox: {}", run.json));
    let probed = rig
        .server
        .tool_output(probe_id)
        .unwrap_or_else(|| panic!("{cli}: no output of the sandbox probe: {}", run.json));
    assert!(probed.contains("PROBE-MAILBOX=/"), "{cli}: {probed}");
    {
        // The sandbox (OpenCode's: handoff's own) opens the mailbox's in/ and nothing else:
        // no socket.
        for want in [
            "PROBE-IN-WRITABLE",
            "PROBE-OUT-CLOSED",
            "PROBE-BESIDE-CLOSED",
            "PROBE-SOCKET-CLOSED",
        ] {
            assert!(probed.contains(want), "{cli}: {want} in {probed}");
        }
    }
    let (call_id, input) = calls
        .iter()
        .find(|(_, input)| input.to_string().contains(" advice --harness "))
        .unwrap_or_else(|| panic!("{cli}: the worker made no nested call: {}", run.json));
    let command = input.to_string();
    assert!(
        command.contains(&format!(" advice --harness {adviser} --cwd ")),
        "{cli}: {command}"
    );
    let output = rig.server.tool_output(call_id).unwrap_or_else(|| {
        panic!(
            "{cli}: the worker never sent the nested command's output back: {}",
            run.json
        )
    });
    if let Some(refusal) = refusal {
        let nested_result = result_line(&output)
            .unwrap_or_else(|| panic!("{cli}: no result line in the tool output: {output}"));
        assert_eq!(nested_result["status"], "rejected", "{nested_result}");
        assert_eq!(nested_result["exit"]["driver"], 5, "{nested_result}");
        let message = nested_result["diagnostics"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains(refusal), "{cli}: {message}");
        assert!(
            !rig.server
                .model_calls()
                .iter()
                .any(|r| r.route.as_deref() == Some("Operation: advice")),
            "{cli}: the refused adviser reached the model"
        );
        assert_eq!(run.code, 0, "{cli}: {} {}", run.json, run.stderr);
        assert_eq!(run.json["output"]["response"], WORKER_TEXT);
        // Refused at admission (no node), or as its run was planned (its node `rejected`).
        let nodes = run.json["dag"]["nodes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            nodes.iter().skip(1).all(|n| n["state"] == "rejected"),
            "{cli}: nothing ran: {}",
            run.json["dag"]
        );
        let repo = rig.repo.path().to_string_lossy().into_owned();
        let root = rig.root.to_string_lossy().into_owned();
        assert_no_process_mentions(&[&repo, &root]);
        eprintln!(
            "[{cli}] nested advice from {adviser} refused in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        return;
    }
    assert!(
        output.contains(ADVICE_TEXT),
        "{cli}: the nested command's output lacks the adviser's answer: {output}"
    );
    let nested_result = result_line(&output)
        .unwrap_or_else(|| panic!("{cli}: no result line in the tool output: {output}"));
    assert_eq!(nested_result["status"], "succeeded", "{nested_result}");
    assert_eq!(nested_result["target"]["harness"], adviser);
    assert_eq!(nested_result["output"]["response"], ADVICE_TEXT);
    assert!(
        rig.server
            .model_calls()
            .iter()
            .any(|r| r.route.as_deref() == Some("Operation: advice")),
        "{cli}: the adviser never reached the model"
    );

    assert_eq!(run.code, 0, "{cli}: {} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.json["output"]["response"], WORKER_TEXT);
    let root_id = run.json["lineage"]["runId"].as_str().unwrap().to_owned();
    let nodes = run.json["dag"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(nodes.len(), 2, "{cli}: {}", run.json["dag"]);
    let nested = &nodes[1];
    assert_eq!(nested["operation"], "advice", "{nested}");
    assert_eq!(nested["parentRunId"], root_id.as_str(), "{nested}");
    assert_eq!(nested["state"], "succeeded", "{nested}");
    assert_eq!(nested["callerHarness"], cli, "{nested}");
    assert_eq!(nested["targetHarness"], adviser, "{nested}");
    assert_eq!(
        nested["runId"], nested_result["lineage"]["runId"],
        "{cli}: the DAG's node is the result the worker got"
    );
    match expect {
        Expect::Attenuated(withheld) | Expect::Confined(withheld) => {
            let confined = matches!(expect, Expect::Confined(_));
            assert_eq!(
                nested["attenuated"]["handoffSandbox"]
                    .as_bool()
                    .unwrap_or(false),
                confined,
                "{nested}"
            );
            if confined {
                assert_eq!(nested["isolation"]["enforcement"], "handoff", "{nested}");
                assert_eq!(
                    nested["isolation"]["filesystemRead"], "worktree",
                    "{nested}"
                );
                assert!(
                    nested_result["policy"]["confined"].is_object(),
                    "{nested_result}"
                );
            }
            assert_eq!(
                nested["attenuated"]["withheld"],
                serde_json::json!(withheld),
                "{nested}"
            );
            for grant in withheld {
                assert_eq!(
                    nested_result["grants"]["provenance"][grant], "isolation-attenuated",
                    "{nested_result}"
                );
            }
        }
        _ => assert!(nested.get("attenuated").is_none(), "{nested}"),
    }
    // The receipt says what the worker's sandbox opened for the supervisor: its mailbox's in/.
    let receipt = &run.json["policy"]["nestedAdvice"];
    let mailbox = receipt["mailbox"]
        .as_str()
        .unwrap_or_else(|| panic!("{cli}: {}", run.json["policy"]));
    assert!(
        probed.contains(&format!("PROBE-MAILBOX={mailbox}")),
        "{cli}: {probed}"
    );
    {
        assert_eq!(
            receipt["writable"],
            serde_json::json!([format!("{mailbox}/in")]),
            "{cli}"
        );
        assert_eq!(
            receipt["readable"],
            serde_json::json!([format!("{mailbox}/out")]),
            "{cli}"
        );
        assert!(
            receipt["unixSockets"]
                .as_str()
                .is_some_and(|s| s.starts_with("none")),
            "{cli}: {receipt}"
        );
    }
    // The mailbox went with the supervisor.
    assert!(!std::path::Path::new(mailbox).exists(), "{cli}: {mailbox}");

    // Nothing of the worker or the adviser keeps running, and the adviser's snapshot is gone.
    let repo = rig.repo.path().to_string_lossy().into_owned();
    let root = rig.root.to_string_lossy().into_owned();
    assert_no_process_mentions(&[&repo, &root]);
    let leftovers: Vec<_> = std::fs::read_dir(rig.root.join("tmp"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("snap-"))
        .collect();
    assert!(leftovers.is_empty(), "{cli}: snapshots left: {leftovers:?}");
    eprintln!(
        "[{cli}] nested advice from {adviser} in {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// Codex in its read-only sandbox writes its mailbox's in/ (its permission profile for nested
/// advice), and nothing else, and gets the advice of another Codex, as isolated as itself.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_worker_gets_nested_advice_from_inside_its_sandbox() {
    worker_gets_nested_advice("codex", "codex");
}

/// Codex's read-only sandbox writes nothing; Claude Code's sandboxed Bash writes only the
/// run's own temporary directory, removed with the run: a Claude Code adviser, shell and all,
/// is as isolated as a Codex review worker and answers it.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_worker_gets_nested_advice_from_claude() {
    worker_gets_nested_advice("codex", "claude");
}

/// Where handoff's own sandbox cannot run, OpenCode's shell is unconfined: for a Codex review
/// worker it runs without it, and says so.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_worker_gets_attenuated_advice_from_an_unconfined_opencode() {
    worker_asks_for_nested_advice(
        "codex",
        "opencode",
        Expect::Attenuated(&["bash"]),
        false,
        &|_| {},
    );
}

/// Under handoff's sandbox an OpenCode worker reads only the worktree and its processes die
/// with a PID namespace; Claude Code's Read tool reads any path and it runs under the reaper,
/// which no grant changes: the supervisor has handoff's sandbox hold it (its shell withheld,
/// since under that sandbox it would reach the model's endpoint), and it answers from a home
/// of its own, its credentials from the environment.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_worker_gets_claudes_advice_under_handoffs_sandbox() {
    worker_asks_for_nested_advice(
        "opencode",
        "claude",
        Expect::Confined(&["bash"]),
        true,
        &|_| {},
    );
}

/// Claude Code's read-only bash sandbox (bubblewrap, no network, no Unix socket) writes its
/// mailbox's in/, and nothing else, and gets Codex's advice.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn claude_worker_gets_nested_advice_from_inside_its_sandbox() {
    worker_gets_nested_advice("claude", "codex");
}

/// OpenCode (no sandbox) passes the supervisor context to its bash tool and gets Codex's
/// advice.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_worker_gets_nested_advice() {
    // Under handoff's sandbox OpenCode reads only the worktree and its processes die with a
    // PID namespace: an OpenCode adviser (sandboxed alike) is at least as isolated.
    worker_gets_nested_advice("opencode", "opencode");
}

/// Codex's sandbox reads the whole disk, which no grant changes: the supervisor has handoff's
/// sandbox hold it, and Codex's own sandbox still holds its commands inside (bubblewrap in
/// bubblewrap), so it keeps its shell.
/// Held by handoff's sandbox, Codex gets no stored login: without its provider's key in the
/// environment it is refused as its run is planned, and never starts.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_worker_is_refused_codex_without_its_key_in_the_environment() {
    worker_is_refused_nested_advice_where(
        "opencode",
        "codex",
        "codex would run under handoff's sandbox here",
        &|rig| {
            let path = rig.root.join("config.toml");
            let text = std::fs::read_to_string(&path).unwrap();
            let without = text.replace(&format!("env = {{ E2E_MODEL_KEY = \"{MODEL_KEY}\" }}"), "");
            assert_ne!(text, without);
            std::fs::write(&path, without).unwrap();
        },
    );
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_worker_gets_codexs_advice_under_handoffs_sandbox() {
    worker_asks_for_nested_advice("opencode", "codex", Expect::Confined(&[]), true, &|_| {});
}

/// A Claude Code or Codex review worker asks an OpenCode adviser whose model is hostile: its
/// shell tries to append to `~/.bashrc`, to write into the asking worktree and to create a
/// file outside the repository. OpenCode has no sandbox of its own; under handoff's it is at
/// least as isolated as the worker, so it is admitted, and none of the writes lands.
fn worker_asks_a_hostile_opencode_adviser(cli: &'static str) {
    worker_asks_a_hostile_adviser(cli, "opencode");
}

/// [`worker_asks_a_hostile_opencode_adviser`] for any adviser admitted with its shell. Its
/// shell also writes its temporary directory and tries the places a CLI's sandbox may keep
/// open that outlive a run (Claude Code's `/tmp/claude`, `~/.claude/debug`, `~/.npm/_logs`,
/// made beforehand): the temporary directory is gone with the run, and nothing else lands.
fn worker_asks_a_hostile_adviser(cli: &'static str, adviser_cli: &'static str) {
    let only = clis();
    if !only.contains(&cli) || !only.contains(&adviser_cli) {
        return;
    }
    let scratch = tempfile::Builder::new()
        .prefix("hhostile")
        .tempdir_in("/tmp")
        .unwrap();
    let outside = scratch.path().join("outside.txt");
    let script = Script::text("unused");
    let rig = Rig::new(cli, script);
    // The adviser's command names the asking worktree and the user's home literally.
    let asker = rig.repo.path().to_path_buf();
    rig.server.set_script(Script::route(
        [(
            "Operation: advice",
            Script::new([
                Step::shell(format!(
                    "echo \"TEMP=$TMPDIR\"; echo x > \"$TMPDIR/left-behind-{tag}\"; \
                     echo pwned >> {real_bashrc}; echo x > {outside}; echo x > {planted}; \
                     for d in /tmp/claude {home}/.claude/debug {home}/.npm/_logs; do \
                     echo x > \"$d/left-behind-{tag}\"; done; true",
                    real_bashrc = rig.root.join("home/.bashrc").display(),
                    outside = outside.display(),
                    planted = asker.join("planted.txt").display(),
                    home = rig.root.join("home").display(),
                    tag = rig.root.file_name().unwrap().to_string_lossy(),
                )),
                Step::provider_answer(ADVICE_TEXT),
            ]),
        )],
        Script::new([
            Step::nested_advice(adviser_cli, "Is the README accurate?"),
            Step::provider_answer(WORKER_TEXT),
        ]),
    ));
    std::fs::create_dir_all(rig.root.join("home")).unwrap();
    let home = rig.root.join("home");
    let tag = rig.root.file_name().unwrap().to_string_lossy().into_owned();
    let shared: Vec<PathBuf> = [
        PathBuf::from("/tmp/claude"),
        home.join(".claude/debug"),
        home.join(".npm/_logs"),
    ]
    .into_iter()
    .map(|d| d.join(format!("left-behind-{tag}")))
    .collect();
    // The shared areas exist, as on a machine where the CLI ran before (the one under /tmp is
    // left as it was found).
    let made_tmp_claude = !Path::new("/tmp/claude").exists();
    for d in shared.iter().filter_map(|p| p.parent()) {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(rig.root.join("home/.bashrc"), "# the user's\n").unwrap();
    let run = rig.run_with_advice("review", &["--timeout-ms", "240000"]);
    assert_eq!(run.code, 0, "{cli}: {} {}", run.json, run.stderr);
    assert_eq!(run.json["output"]["response"], WORKER_TEXT, "{}", run.json);
    let nodes = run.json["dag"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        nodes.len(),
        2,
        "{cli}: the adviser was not admitted: {}",
        run.json["dag"]
    );
    let adviser = &nodes[1];
    assert_eq!(adviser["targetHarness"], adviser_cli, "{adviser}");
    assert!(adviser.get("attenuated").is_none(), "{adviser}");
    if adviser_cli == "opencode" {
        assert_eq!(adviser["isolation"]["enforcement"], "handoff", "{adviser}");
    }
    assert!(
        rig.server
            .model_calls()
            .iter()
            .any(|r| r.route.as_deref() == Some("Operation: advice")),
        "{cli}: the adviser never reached the model"
    );
    // The adviser's shell ran, and nothing it tried landed.
    let (call_id, _) = rig
        .server
        .requests()
        .into_iter()
        .filter(|r| r.route.as_deref() == Some("Operation: advice"))
        .find_map(|r| match r.reply {
            Reply::ToolCall { call_id, input, .. } if input.to_string().contains("planted.txt") => {
                Some((call_id, input))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("{cli}: the adviser never called its shell: {}", run.json));
    let shell_output = rig
        .server
        .tool_output(&call_id)
        .unwrap_or_else(|| panic!("{cli}: the adviser's shell output never came back"));
    eprintln!("[{cli}] the hostile adviser's shell said: {shell_output}");
    // Its temporary directory was its own, and went with the run.
    let temp = shell_output
        .lines()
        .find_map(|l| l.trim().strip_prefix("TEMP="))
        .unwrap_or_else(|| panic!("{cli}: no TEMP= line: {shell_output}"));
    assert!(temp.starts_with('/'), "{cli}: {shell_output}");
    if temp == "/tmp" {
        // handoff's sandbox: a /tmp of the run's own, which the host's /tmp is not.
        assert!(
            !Path::new(&format!("/tmp/left-behind-{tag}")).exists(),
            "{cli}"
        );
    } else {
        assert!(
            !Path::new(temp).exists(),
            "{cli}: the adviser's temporary directory {temp} outlived the run"
        );
    }
    for p in &shared {
        assert!(!p.exists(), "{cli}: {} was written", p.display());
    }
    if made_tmp_claude {
        let _ = std::fs::remove_dir("/tmp/claude");
    }
    assert_eq!(
        std::fs::read_to_string(rig.root.join("home/.bashrc")).unwrap(),
        "# the user's\n"
    );
    assert!(
        !outside.exists(),
        "{cli}: a file outside the repository was created"
    );
    assert!(
        !asker.join("planted.txt").exists(),
        "{cli}: the asking worktree was written"
    );
    assert_eq!(run.json["git"]["changed"], false, "{}", run.json["git"]);
    drop(scratch);
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn claude_worker_asks_a_hostile_opencode_adviser_and_nothing_changes() {
    worker_asks_a_hostile_opencode_adviser("claude");
}

/// Claude Code's sandboxed shell, asked by a Codex review worker, writes only its temporary
/// directory, the run's own.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_worker_asks_a_hostile_claude_adviser_and_nothing_is_left() {
    worker_asks_a_hostile_adviser("codex", "claude");
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_worker_asks_a_hostile_opencode_adviser_and_nothing_changes() {
    worker_asks_a_hostile_opencode_adviser("codex");
}
