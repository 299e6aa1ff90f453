//! Timeouts, cancellation, secrets, preflight cache.
//!
//! - A timed-out or cancelled run leaves no process behind (the agent and its grandchild are
//!   killed as a group), still writes its result, and removes its private run directory.
//! - Secrets (MCP values, API keys) never reach argv, stdout, the result file, handoff's stderr
//!   or leftover temporary files; the agent's environment is an allowlist.
//! - The preflight cache is reused while its key is unchanged and invalidated when the
//!   executable or (for Claude) the sandbox helpers change.

use std::collections::BTreeSet;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use handoff_testkit::keys::{GRANDCHILD_PID_FILE, MODE, READY_FILE};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{
    HANDOFF, Run, Sandbox, is_gone, private_dirs_in, recorded_run_dirs, work_dir,
};

/// How long a process may take to disappear after handoff reported it killed.
const GONE_WITHIN: Duration = Duration::from_secs(3);
/// Upper bound for a run that should end quickly (probes + a killed agent).
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// Secrets the fake agent itself prints in `stderr-secret` mode (see `handoff-testkit`'s
/// `fake/task.rs`).
const FAKE_STDERR_SECRETS: [&str; 2] =
    ["sk-fakesecret0123456789abcdef", "tok-fakesecret0123456789"];

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The other root agent, used as the caller.
fn caller_for(target: &str) -> &'static str {
    if target == "codex" { "claude" } else { "codex" }
}

/// `n` random ASCII alphanumerics from the OS generator.
fn random_alnum(n: usize) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).unwrap();
    buf.iter()
        .map(|b| CHARS[usize::from(*b) % CHARS.len()] as char)
        .collect()
}

/// The arguments of `handoff run` for `target`/`mode` with a fresh instruction file and result
/// path (returned too).
fn run_args(sb: &Sandbox, target: &str, mode: &str, extra: &[&str]) -> (Vec<String>, String) {
    let ins = sb.instructions("Make the change described here, then report.");
    let result = sb.result_path();
    let mut args: Vec<String> = [
        "run",
        "--caller-harness",
        caller_for(target),
        "--harness",
        target,
        "--mode",
        mode,
        "--cwd",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(sb.cwd());
    args.extend([
        "--instructions".into(),
        ins,
        "--result".into(),
        result.clone(),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    (args, result)
}

/// Runs `cmd` to completion and checks the one-line stdout / result file contract.
fn exec_checked(sb: &Sandbox, cmd: &mut Command, result: &str) -> Run {
    let run = sb.exec(cmd);
    assert_eq!(
        run.stdout.lines().count(),
        1,
        "stdout must be one line: {run:?}"
    );
    let file = std::fs::read_to_string(result)
        .unwrap_or_else(|e| panic!("result file {result} missing ({e}): {run:?}"));
    assert_eq!(file, run.stdout, "result file and stdout differ");
    run
}

/// Polls for up to [`GONE_WITHIN`] until `pid` is gone.
fn assert_gone(pid: i32, what: &str) {
    let start = Instant::now();
    while !is_gone(pid) {
        if start.elapsed() > GONE_WITHIN {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            panic!("{what} (pid {pid}) survived the run: {stat}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_pid(path: &Path) -> i32 {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("pid file {} missing: {e}", path.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("pid file {} holds {text:?}: {e}", path.display()))
}

/// The run directories a running agent was handed on its command line.
fn run_dirs_of(pid: i32) -> BTreeSet<PathBuf> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    private_dirs_in(
        &String::from_utf8_lossy(&cmdline).replace('\0', " "),
        "handoff-run-",
    )
}

/// Every entry (files and directories) under `dir`, recursively.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.filter_map(Result::ok) {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                out.extend(walk(&path));
                out.push(path);
            }
            _ => out.push(path),
        }
    }
    out
}

/// Sets the fake's switches for a `hang`/`grandchild` run; returns (ready file, grandchild file).
fn hang_switches(sb: &Sandbox, mode: &str) -> (PathBuf, PathBuf) {
    let ready = sb.root.join("agent.pid");
    let grandchild = sb.root.join("grandchild.pid");
    sb.agents.set(MODE, mode);
    sb.agents.set(READY_FILE, &ready);
    sb.agents.set(GRANDCHILD_PID_FILE, &grandchild);
    (ready, grandchild)
}

/// Reads the invocation records so far and clears them.
fn take_invocations(sb: &Sandbox, records: &Path) -> Vec<Value> {
    let calls = sb.agents.invocations();
    for e in std::fs::read_dir(records).unwrap().filter_map(Result::ok) {
        std::fs::remove_file(e.path()).unwrap();
    }
    calls
}

fn is_run(call: &Value) -> bool {
    call["stdin"]
        .as_str()
        .is_some_and(|s| s.contains("delegated coding agent"))
}

fn argv(call: &Value) -> Vec<String> {
    call["argv"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `handoff` running in the background, its stdout and stderr drained by threads. If the test
/// fails while it runs, handoff and the agent's process group are killed on drop.
struct Spawned {
    child: Child,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
    ready: Option<PathBuf>,
    done: bool,
}

fn drain(mut r: impl std::io::Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

impl Spawned {
    fn launch(mut cmd: Command, ready: Option<PathBuf>) -> Spawned {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().map(drain);
        let err = child.stderr.take().map(drain);
        Spawned {
            child,
            out,
            err,
            ready,
            done: false,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    /// Waits until `path` holds a pid written by the fake; panics if handoff ends first.
    fn wait_for_pid(&mut self, path: &Path) -> i32 {
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(path)
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            if self.child.try_wait().unwrap().is_some() {
                let run = self.wait(RUN_LIMIT);
                panic!("handoff ended before {} appeared: {run:?}", path.display());
            }
            assert!(
                start.elapsed() < RUN_LIMIT,
                "{} did not appear within {RUN_LIMIT:?}",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).unwrap();
    }

    /// Waits for handoff to exit (at most `limit`) and collects what it printed.
    fn wait(&mut self, limit: Duration) -> Run {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(
                start.elapsed() < limit,
                "handoff did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        self.done = true;
        let stdout = self
            .out
            .take()
            .map(|t| t.join().unwrap())
            .unwrap_or_default();
        let stderr = self
            .err
            .take()
            .map(|t| t.join().unwrap())
            .unwrap_or_default();
        let stdout = String::from_utf8(stdout).unwrap();
        let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        Run {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            json,
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // The test failed mid-run: don't leave handoff or the agent's group (the agent is its
        // leader; the grandchild may outlive it) behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(ready) = &self.ready
            && let Ok(text) = std::fs::read_to_string(ready)
            && let Ok(pid) = text.trim().parse::<i32>()
        {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Timeout
// ---------------------------------------------------------------------------------------------

fn timeout_leaves_nothing_behind(target: &str) {
    let sb = Sandbox::new();
    let (ready, grandchild) = hang_switches(&sb, "grandchild");
    let run = sb.delegate(
        caller_for(target),
        target,
        "build",
        &["--timeout-ms", "2000"],
    );
    assert_eq!(run.code, 8, "{run:?}");
    assert_eq!(run.status(), "timed_out", "{run:?}");
    assert_eq!(run.json["exit"]["timedOut"], true, "{run:?}");
    assert_eq!(run.json["exit"]["cancelled"], false, "{run:?}");
    assert!(
        run.json["exit"]["signal"]
            .as_str()
            .is_some_and(|s| s.starts_with("SIG")),
        "exit.signal must name the signal that ended the agent: {run:?}"
    );
    let agent = read_pid(&ready);
    let gc = read_pid(&grandchild);
    assert_ne!(agent, gc);
    assert_gone(agent, &format!("{target} agent"));
    assert_gone(gc, &format!("{target} agent's grandchild"));
    let left = walk(&sb.tmp);
    assert!(left.is_empty(), "TMPDIR not empty after the run: {left:?}");
}

#[test]
fn timeout_kills_codex_agent_and_grandchild() {
    timeout_leaves_nothing_behind("codex");
}

#[test]
fn timeout_kills_claude_agent_and_grandchild() {
    timeout_leaves_nothing_behind("claude");
}

// ---------------------------------------------------------------------------------------------
// 2. Cancellation
// ---------------------------------------------------------------------------------------------

fn cancel_with(signal: Signal) {
    let sb = Sandbox::new();
    let (ready, grandchild) = hang_switches(&sb, "grandchild");
    let (args, result) = run_args(&sb, "codex", "build", &[]);
    let mut cmd = sb.command();
    cmd.args(&args);
    let mut handoff = Spawned::launch(cmd, Some(ready.clone()));
    let agent = handoff.wait_for_pid(&ready);
    let gc = handoff.wait_for_pid(&grandchild);
    // While the agent runs, its private run directory exists (so the check below means
    // something).
    let dirs = run_dirs_of(agent);
    assert_eq!(dirs.len(), 1, "expected one run directory: {dirs:?}");
    assert!(dirs.iter().all(|d| d.is_dir()), "{dirs:?}");
    assert!(
        !is_gone(agent) && !is_gone(gc),
        "agent and grandchild must be running"
    );

    handoff.signal(signal);
    let run = handoff.wait(RUN_LIMIT);
    assert_eq!(run.code, 9, "{run:?}");
    assert_eq!(run.status(), "cancelled", "{run:?}");
    assert_eq!(run.json["exit"]["cancelled"], true, "{run:?}");
    assert_eq!(run.json["exit"]["timedOut"], false, "{run:?}");
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
    let file = std::fs::read_to_string(&result)
        .unwrap_or_else(|e| panic!("a cancelled run must still write its result ({e}): {run:?}"));
    assert_eq!(file, run.stdout, "result file and stdout differ");

    assert_gone(agent, "agent");
    assert_gone(gc, "agent's grandchild");
    assert!(dirs.iter().all(|d| !d.exists()), "left behind: {dirs:?}");
    let left = walk(&sb.tmp);
    assert!(left.is_empty(), "TMPDIR not empty after the run: {left:?}");
}

#[test]
fn sigterm_cancels_and_cleans_up() {
    cancel_with(Signal::SIGTERM);
}

#[test]
fn sigint_cancels_and_cleans_up() {
    cancel_with(Signal::SIGINT);
}

// ---------------------------------------------------------------------------------------------
// 3. Secrets
// ---------------------------------------------------------------------------------------------

struct Secrets {
    mcp_token: String,
    mcp_auth: String,
    auth_token: String,
    openai: String,
    anthropic: String,
    unrelated: String,
}

impl Secrets {
    fn new() -> Secrets {
        let auth_token = format!("auth-secret-{}", random_alnum(16));
        Secrets {
            mcp_token: format!("mcp-secret-{}", random_alnum(16)),
            mcp_auth: format!("Bearer {auth_token}"),
            auth_token,
            openai: format!("sk-fake-{}", random_alnum(20)),
            anthropic: format!("sk-ant-fake-{}", random_alnum(20)),
            unrelated: format!("zzz{}", random_alnum(20)),
        }
    }

    /// Every value that must never show up in argv or anything handoff leaves behind.
    fn all(&self) -> Vec<&str> {
        let mut v = vec![
            self.mcp_token.as_str(),
            self.mcp_auth.as_str(),
            self.auth_token.as_str(),
            self.openai.as_str(),
            self.anthropic.as_str(),
            self.unrelated.as_str(),
        ];
        v.extend(FAKE_STDERR_SECRETS);
        v
    }

    fn apply(&self, cmd: &mut Command) {
        cmd.env("MY_MCP_TOKEN", &self.mcp_token)
            .env("MY_MCP_AUTH", &self.mcp_auth)
            .env("OPENAI_API_KEY", &self.openai)
            .env("ANTHROPIC_API_KEY", &self.anthropic)
            .env("UNRELATED_SECRET", &self.unrelated);
    }

    fn assert_absent(&self, place: &str, text: &str) {
        for s in self.all() {
            assert!(
                !text.contains(s),
                "secret {s:?} leaked into {place}: {text}"
            );
        }
    }

    /// The run's directories (`handed`) are gone, and no file left in `tmp` holds a secret.
    fn assert_nothing_left(&self, handed: &BTreeSet<PathBuf>, tmp: &Path) {
        assert!(!handed.is_empty(), "no run directory was handed out");
        let left: Vec<_> = handed.iter().filter(|d| d.exists()).collect();
        assert!(left.is_empty(), "run directory left behind: {left:?}");
        for f in walk(tmp).into_iter().filter(|p| p.is_file()) {
            let bytes = std::fs::read(&f).unwrap_or_default();
            self.assert_absent(
                &format!("leftover file {}", f.display()),
                &String::from_utf8_lossy(&bytes),
            );
        }
    }
}

/// An MCP descriptor with a stdio and an http server whose secrets are environment references,
/// written 0600 in the private directory.
fn mcp_descriptor(sb: &Sandbox) -> String {
    let path = sb.private.join("mcp.json");
    let descriptor = serde_json::json!({
        "schemaVersion": "handoff.mcp.v1",
        "servers": [
            {
                "name": "docs",
                "transport": "stdio",
                "command": "/bin/cat",
                "args": [],
                "env": {"TOKEN": {"fromEnv": "MY_MCP_TOKEN"}},
            },
            {
                "name": "search",
                "transport": "http",
                "url": "https://mcp.example.invalid/rpc",
                "headers": {"Authorization": {"fromEnv": "MY_MCP_AUTH"}},
            },
        ],
    });
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, descriptor.to_string().as_bytes()).unwrap();
    path.to_string_lossy().into_owned()
}

/// While a `hang` agent runs, its argv (`/proc/<pid>/cmdline`) holds no secret; its
/// environment holds the target's API key but not the unrelated variable.
fn secrets_not_in_running_argv(target: &str) {
    let sb = Sandbox::new();
    let secrets = Secrets::new();
    let (ready, _) = hang_switches(&sb, "hang");
    let mcp = mcp_descriptor(&sb);
    let (args, result) = run_args(&sb, target, "build", &["--mcp-config", &mcp]);
    let mut cmd = sb.command();
    secrets.apply(&mut cmd);
    cmd.args(&args);
    let mut handoff = Spawned::launch(cmd, Some(ready.clone()));
    let agent = handoff.wait_for_pid(&ready);
    let handed = run_dirs_of(agent);

    let cmdline = std::fs::read(format!("/proc/{agent}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    // The MCP servers were planned into this invocation (so the check is not vacuous).
    let mcp_named = match target {
        "codex" => cmdline.contains("mcp_servers.docs") && cmdline.contains("mcp_servers.search"),
        _ => cmdline.contains("--mcp-config") && !cmdline.contains(r#"{"mcpServers":{}}"#),
    };
    assert!(
        mcp_named,
        "MCP servers missing from {target} argv: {cmdline}"
    );
    secrets.assert_absent(&format!("{target} argv"), &cmdline);

    let environ = std::fs::read(format!("/proc/{agent}/environ")).unwrap();
    let environ: Vec<String> = String::from_utf8_lossy(&environ)
        .split('\0')
        .map(str::to_owned)
        .collect();
    let key = match target {
        "codex" => format!("OPENAI_API_KEY={}", secrets.openai),
        _ => format!("ANTHROPIC_API_KEY={}", secrets.anthropic),
    };
    assert!(
        environ.contains(&key),
        "{target} must receive its API key: {environ:?}"
    );
    assert!(
        !environ.iter().any(|e| e.contains(&secrets.unrelated)),
        "UNRELATED_SECRET reached {target}: {environ:?}"
    );

    handoff.signal(Signal::SIGTERM);
    let run = handoff.wait(RUN_LIMIT);
    assert_eq!(run.code, 9, "{run:?}");
    let file = std::fs::read_to_string(&result).unwrap();
    assert_eq!(file, run.stdout);
    secrets.assert_absent("stdout", &run.stdout);
    secrets.assert_absent("handoff's stderr", &run.stderr);
    secrets.assert_nothing_left(&handed, &sb.tmp);
    assert_gone(agent, "agent");
}

#[test]
fn secrets_not_in_running_codex_argv() {
    secrets_not_in_running_argv("codex");
}

#[test]
fn secrets_not_in_running_claude_argv() {
    secrets_not_in_running_argv("claude");
}

/// A full run whose agent prints secrets on stderr: everything handoff produces is clean, the
/// agent's argv is clean, its environment is the allowlist.
fn secrets_never_leak(target: &str) {
    let sb = Sandbox::new();
    let secrets = Secrets::new();
    sb.agents.set(MODE, "stderr-secret");
    sb.record();
    let mcp = mcp_descriptor(&sb);
    let (args, result) = run_args(&sb, target, "build", &["--mcp-config", &mcp]);
    let mut cmd = sb.command();
    secrets.apply(&mut cmd);
    cmd.args(&args);
    let run = exec_checked(&sb, &mut cmd, &result);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "succeeded", "{run:?}");
    assert!(
        run.json["diagnostics"]["redactionCount"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "the agent's stderr secrets must be counted as redacted: {run:?}"
    );
    assert_eq!(
        run.json["grants"]["mcp"]["servers"],
        serde_json::json!(["docs", "search"]),
        "{run:?}"
    );

    secrets.assert_absent("stdout", &run.stdout);
    secrets.assert_absent(
        "the result file",
        &std::fs::read_to_string(&result).unwrap(),
    );
    secrets.assert_absent("handoff's stderr", &run.stderr);
    secrets.assert_nothing_left(&recorded_run_dirs(&sb), &sb.tmp);

    let calls = sb.agents.invocations();
    assert!(!calls.is_empty(), "nothing recorded");
    for call in &calls {
        secrets.assert_absent(&format!("{target} argv"), &argv(call).join(" "));
        secrets.assert_absent(
            &format!("{target} stdin"),
            call["stdin"].as_str().unwrap_or_default(),
        );
        let env = call["env"].as_object().unwrap();
        for name in ["UNRELATED_SECRET", "MY_MCP_TOKEN", "MY_MCP_AUTH"] {
            assert!(
                !env.contains_key(name),
                "{name} is not on the allowlist but reached {target}: {call}"
            );
        }
        let env_text = serde_json::to_string(env).unwrap();
        assert!(
            !env_text.contains(&secrets.unrelated),
            "UNRELATED_SECRET's value reached {target}"
        );
    }

    let runs = sb.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let env = runs[0]["env"].as_object().unwrap();
    assert!(env.contains_key("PATH"), "PATH missing: {env:?}");
    assert_eq!(
        env.get("HOME").and_then(Value::as_str),
        Some(sb.root.join("home").to_str().unwrap()),
        "HOME must pass through"
    );
    let (own, own_value, foreign) = match target {
        "codex" => ("OPENAI_API_KEY", &secrets.openai, "ANTHROPIC_API_KEY"),
        _ => ("ANTHROPIC_API_KEY", &secrets.anthropic, "OPENAI_API_KEY"),
    };
    assert_eq!(
        env.get(own).and_then(Value::as_str),
        Some(own_value.as_str()),
        "{own} must reach {target} (logins keep working)"
    );
    assert!(
        !env.contains_key(foreign),
        "{foreign} is not on {target}'s allowlist"
    );
    if target == "codex" {
        // Codex receives MCP secrets through its environment, never argv.
        assert_eq!(
            env.get("TOKEN").and_then(Value::as_str),
            Some(secrets.mcp_token.as_str())
        );
        assert!(
            env.values()
                .any(|v| v.as_str() == Some(secrets.auth_token.as_str())),
            "the MCP bearer token must reach codex through its environment"
        );
    }
}

#[test]
fn secrets_never_leak_codex() {
    secrets_never_leak("codex");
}

#[test]
fn secrets_never_leak_claude() {
    secrets_never_leak("claude");
}

// ---------------------------------------------------------------------------------------------
// 4. Preflight cache
// ---------------------------------------------------------------------------------------------

fn probes(calls: &[Value]) -> Vec<Vec<String>> {
    calls.iter().filter(|c| !is_run(c)).map(argv).collect()
}

fn assert_probed(calls: &[Value], what: &str) {
    let probes = probes(calls);
    assert!(
        probes.iter().any(|a| a == &["--version"]),
        "{what}: expected a --version probe, got {probes:?}"
    );
    assert!(
        probes.iter().any(|a| a.iter().any(|x| x == "--help")),
        "{what}: expected a help probe, got {probes:?}"
    );
}

fn assert_cached(calls: &[Value], what: &str) {
    let probes = probes(calls);
    assert!(
        probes.is_empty(),
        "{what}: the cache was not used, probes ran: {probes:?}"
    );
    assert_eq!(
        calls.iter().filter(|c| is_run(c)).count(),
        1,
        "{what}: expected exactly the run itself: {calls:?}"
    );
}

#[test]
fn preflight_cache_codex_reused_until_the_executable_changes() {
    let sb = Sandbox::new();
    // A real copy of the fake (not a symlink or hard link to the shared binary) so this test
    // alone owns its mtime.
    let exe = sb.agents.bin("codex");
    std::fs::remove_file(&exe).unwrap();
    std::fs::copy(handoff_testkit::fake_agent_bin(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    sb.agents.set(MODE, "no-change");
    let records = sb.record();

    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let calls = take_invocations(&sb, &records);
    assert_probed(&calls, "first run");
    assert_eq!(calls.iter().filter(|c| is_run(c)).count(), 1);

    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_cached(&take_invocations(&sb, &records), "second run");

    // A new mtime on the executable (e.g. an upgrade in place) invalidates the cache.
    let earlier = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::open(&exe)
        .unwrap()
        .set_modified(earlier)
        .unwrap();
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_probed(
        &take_invocations(&sb, &records),
        "after changing the executable",
    );

    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_cached(&take_invocations(&sb, &records), "fourth run");
}

#[test]
fn preflight_cache_claude_keyed_on_sandbox_tools() {
    let sb = Sandbox::new();
    // PATH is the fake agents' directory alone (handoff needs nothing else on it), so whether
    // bubblewrap is there is this test's choice, whatever the machine has installed.
    let delegate = || {
        let (args, result) = run_args(&sb, "claude", "review", &[]);
        let mut cmd = sb.command();
        cmd.env("PATH", &sb.agents.bin_dir).args(&args);
        exec_checked(&sb, &mut cmd, &result)
    };
    sb.agents.set(MODE, "no-change");
    let records = sb.record();

    let run = delegate();
    assert_eq!(run.code, 0, "{run:?}");
    assert_probed(&take_invocations(&sb, &records), "first run");

    let run = delegate();
    assert_eq!(run.code, 0, "{run:?}");
    assert_cached(&take_invocations(&sb, &records), "second run");

    // Without bubblewrap the key changes: probed again, and the sandbox refusal is reported.
    sb.agents.uninstall("bwrap");
    assert!(!sb.agents.bin("bwrap").exists());
    let run = delegate();
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.status(), "not_run", "{run:?}");
    let message = run.json["diagnostics"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("sandbox required but unavailable"),
        "the message must quote Claude's sandbox refusal: {run:?}"
    );
    assert!(
        run.stderr.contains("sandbox required but unavailable"),
        "{run:?}"
    );
    let calls = take_invocations(&sb, &records);
    assert_probed(&calls, "without bwrap");
    assert!(
        calls.iter().all(|c| !is_run(c)),
        "the agent must not run: {calls:?}"
    );

    // Back again: it works.
    let _ = sb.agents.clone().with_sandbox_tools();
    let run = delegate();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "succeeded", "{run:?}");
}

// ---------------------------------------------------------------------------------------------
// 5. Overhead (a measurement, not an assertion)
// ---------------------------------------------------------------------------------------------

#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn overhead_median_of_10() {
    let sb = Sandbox::new();
    sb.agents.set(MODE, "no-change");
    // Warm the preflight cache.
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let mut ms: Vec<f64> = (0..10)
        .map(|_| {
            let (args, _) = run_args(&sb, "codex", "review", &[]);
            let start = Instant::now();
            let run = sb.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
            let elapsed = start.elapsed().as_secs_f64() * 1000.0;
            assert_eq!(run.code, 0, "{run:?}");
            elapsed
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let median = (ms[4] + ms[5]) / 2.0;
    println!(
        "handoff per-run overhead (fake codex review, warm preflight cache, {HANDOFF}): median {median:.1} ms of 10 (min {:.1}, max {:.1})",
        ms[0], ms[9]
    );
}

/// A handoff process killed before it could clean up leaves its private directories (a run
/// directory can hold an agent's MCP configuration, a carry scratch a transcript); the next
/// root run removes them — only directories no live process holds locked. They are in the
/// real private work directory (see `support::work_dir`), under names no run makes.
#[test]
fn directories_left_by_a_killed_run_are_removed_by_the_next() {
    use nix::fcntl::{Flock, FlockArg};

    let sb = Sandbox::new();
    let work = work_dir();
    let tag = random_alnum(12);
    let old = SystemTime::now() - Duration::from_secs(3600);
    let mut stale = Vec::new();
    for prefix in [
        "handoff-run-",
        "handoff-snapshots-",
        "handoff-carry-",
        "handoff-mcp-",
    ] {
        let dir = work.join(format!("{prefix}it-{tag}-left"));
        std::fs::create_dir_all(dir.join("mcp")).unwrap();
        std::fs::write(dir.join("mcp/config.json"), "{}").unwrap();
        std::fs::File::open(&dir)
            .unwrap()
            .set_modified(old)
            .unwrap();
        stale.push(dir);
    }
    // Held by a live process (this test), as a running handoff holds its own.
    let live = work.join(format!("handoff-run-it-{tag}-live"));
    std::fs::create_dir(&live).unwrap();
    std::fs::File::open(&live)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let held = Flock::lock(
        std::fs::File::open(&live).unwrap(),
        FlockArg::LockExclusiveNonblock,
    )
    .unwrap();

    sb.record();
    let run = sb.delegate("claude", "codex", "review", &[]);
    let live_kept = live.exists();
    drop(held);
    let _ = std::fs::remove_dir(&live);
    assert_eq!(run.code, 0, "{run:?}");
    let left: Vec<_> = stale.iter().filter(|d| d.exists()).collect();
    assert!(
        left.is_empty(),
        "dead runs' directories are still there: {left:?}"
    );
    assert!(live_kept, "a live process's directory was removed");
    // This run's own directory is gone too, as always.
    let handed = recorded_run_dirs(&sb);
    assert_eq!(handed.len(), 1, "{handed:?}");
    assert!(handed.iter().all(|d| !d.exists()), "{handed:?}");
}

/// A Codex `workspace-write` worker may write `$TMPDIR` (the run's own temporary directory)
/// and `/tmp`. Its run directory (the output schema it is held to, the file its answer is read
/// from, MCP configuration) is not there: it is a private (0700) directory in handoff's private work directory, which the
/// worker's sandbox does not open — so the worker cannot rewrite its own settings or answer
/// file, nor an adviser's.
#[test]
fn a_run_directory_is_out_of_reach_of_what_its_agent_may_write() {
    let sb = Sandbox::new();
    let (ready, _) = hang_switches(&sb, "hang");
    let (args, _result) = run_args(&sb, "codex", "build", &[]);
    let mut cmd = sb.command();
    cmd.args(&args);
    let mut handoff = Spawned::launch(cmd, Some(ready.clone()));
    let agent = handoff.wait_for_pid(&ready);

    // What the running agent was given: its argv and environment.
    let proc_list = |file: &str| -> Vec<String> {
        let bytes = std::fs::read(format!("/proc/{agent}/{file}")).unwrap();
        String::from_utf8_lossy(&bytes)
            .split('\0')
            .map(str::to_owned)
            .collect()
    };
    let argv = proc_list("cmdline");
    let flag = |name: &str| {
        let i = argv.iter().position(|a| a == name).unwrap();
        PathBuf::from(&argv[i + 1])
    };
    let handed = [flag("--output-last-message"), flag("--output-schema")];
    // The temporary directories the agent was told about, and those any process may write.
    let agent_tmp = proc_list("environ")
        .iter()
        .find_map(|e| e.strip_prefix("TMPDIR=").map(PathBuf::from))
        .unwrap();
    let work = work_dir();
    let dirs = run_dirs_of(agent);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = dirs.first().unwrap();
    // Its temporary directory is the run's own, beside what it must not rewrite.
    assert_eq!(agent_tmp, dir.join("tmp"));
    assert!(agent_tmp.is_dir(), "{agent_tmp:?}");
    let writable = [agent_tmp, PathBuf::from("/tmp"), std::env::temp_dir()];
    for path in &handed {
        assert_eq!(path.parent(), Some(dir.as_path()), "{path:?}");
        for place in &writable {
            assert!(!path.starts_with(place), "{path:?} is under {place:?}");
        }
    }
    assert_eq!(dir.parent(), Some(work.as_path()), "{dir:?}");
    for place in &writable[1..] {
        assert!(!dir.starts_with(place), "{dir:?} is under {place:?}");
    }
    assert!(!work.starts_with("/tmp"), "{work:?}");
    let meta = std::fs::symlink_metadata(dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{dir:?}");
    let meta = std::fs::symlink_metadata(&work).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{work:?}");
    // Nothing of the run's is in the agent's temporary directory.
    let in_tmp = walk(&sb.tmp);
    assert!(in_tmp.is_empty(), "{in_tmp:?}");

    handoff.signal(Signal::SIGTERM);
    let run = handoff.wait(RUN_LIMIT);
    assert_eq!(run.code, 9, "{run:?}");
    assert_gone(agent, "agent");
    assert!(!dir.exists(), "{dir:?} left behind");
}
