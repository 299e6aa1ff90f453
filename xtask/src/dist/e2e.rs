//! `cargo xtask npm-e2e`: the npm packages installed the way a user installs them. The dev
//! build is put in release archives as `dist` lays them out (the other platforms' holding
//! stand-ins), every package is made from them as the release workflow makes them
//! ([`super::archives`]) and published to a local registry ([`super::registry`]),
//! `npm install -g handoff-cli` puts them in a new prefix with no Rust toolchain on `PATH`, the
//! registry is stopped, and the installed `handoff` is driven through its launcher: `--version`,
//! `capabilities --json`, a run on the fake agent (its reaper being the installed binary),
//! SIGINT during a run, `handoff mcp`, a signal that ends the binary, and a launcher whose
//! platform package is missing.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use handoff_testkit::{FakeAgents, ScratchRepo, keys};
use serde_json::{Value, json};

use super::npm;
use super::registry::{self, Registry};

/// How long one step may take.
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// Tools that must not be on the `PATH` the install and the runs use.
const TOOLCHAIN: &[&str] = &["cargo", "rustc", "rustup"];

fn find_on(path: &std::ffi::OsStr, tool: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// A user's machine: a home, an npm prefix and cache of its own, and a `PATH` of the system
/// directories, Node.js's and what the test adds, with no Rust toolchain.
struct User {
    home: PathBuf,
    prefix: PathBuf,
    path: std::ffi::OsString,
}

impl User {
    fn new(dir: &Path, extra: &[&Path]) -> Result<User> {
        let here = std::env::var_os("PATH").unwrap_or_default();
        let node = find_on(&here, "node").context("node is not on PATH")?;
        let node_dir = node
            .parent()
            .context("node has no directory")?
            .to_path_buf();
        let prefix = dir.join("prefix");
        let mut dirs: Vec<PathBuf> = vec![prefix.join("bin")];
        dirs.extend(extra.iter().map(|p| p.to_path_buf()));
        for d in [node_dir, "/usr/bin".into(), "/bin".into()] {
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        let path = std::env::join_paths(&dirs)?;
        for tool in TOOLCHAIN {
            if let Some(found) = find_on(&path, tool) {
                bail!(
                    "{tool} is on the PATH the install test uses ({}); the test needs a PATH without a Rust toolchain",
                    found.display()
                );
            }
        }
        let home = dir.join("home");
        crate::private_dir(&home)?;
        Ok(User { home, prefix, path })
    }

    /// A command with only this user's environment.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("npm_config_cache", self.home.join(".npm"))
            .env("npm_config_userconfig", self.home.join(".npmrc"));
        c
    }

    /// `handoff`, found on this user's `PATH` (the launcher's link in the prefix).
    fn handoff(&self) -> Command {
        self.command("handoff")
    }

    /// `npm install -g handoff-cli` from `registry`, with npm found on this user's `PATH`.
    fn install(&self, registry: &str) -> Result<()> {
        let step = format!("npm install -g {}", npm::LAUNCHER);
        eprintln!("==> {step} (registry {registry}, no Rust toolchain on PATH)");
        let out = self
            .command("npm")
            .args(["install", "-g", "--no-audit", "--no-fund", "--prefix"])
            .arg(&self.prefix)
            .args([npm::LAUNCHER, "--registry", registry])
            .output()
            .with_context(|| format!("cannot run {step}"))?;
        if !out.status.success() {
            bail!(
                "{step} failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let linked = self.prefix.join("bin/handoff");
        if find_on(&self.path, "handoff").as_ref() != Some(&linked) {
            bail!("{step} put no handoff at {}", linked.display());
        }
        Ok(())
    }
}

fn ok(what: &str) {
    eprintln!("    ok: {what}");
}

/// Waits for `child` at most `limit`; kills it past that.
fn wait_for(child: &mut Child, what: &str, limit: Duration) -> Result<ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} did not end within {}s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, name: &str) -> Result<()> {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .context("cannot run kill")?;
    if !status.success() {
        bail!("kill -{name} {pid} failed ({status})");
    }
    Ok(())
}

/// A process's parent, from `/proc/<pid>/stat` (the fields after the command's closing
/// parenthesis: state, then parent).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn exe_of(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

fn argv_of(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the first line of `path` as a pid, waiting up to `limit` for it to be written.
fn wait_for_pid(path: &Path, child: &mut Child, limit: Duration) -> Result<u32> {
    let started = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return Ok(pid);
        }
        if let Some(status) = child.try_wait()? {
            bail!("handoff ended ({status}) before the agent started");
        }
        if started.elapsed() > limit {
            bail!("the agent did not start within {}s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lane: `cargo xtask npm-e2e`.
pub fn npm_e2e() -> Result<()> {
    let started = Instant::now();
    let made = super::make_release_shaped()?;
    let root = made.target.join("npm-e2e");
    let verdaccio = registry::install(&root.join("verdaccio"))?;
    // The registry's storage under target/; the user's machine outside the repository (handoff
    // keeps the directories of a worktree off the PATH it runs agents with).
    let storage = tempfile::Builder::new()
        .prefix("registry-")
        .tempdir_in(&root)?;
    let tmp = tempfile::Builder::new()
        .prefix("handoff-npm-e2e-")
        .tempdir()?;
    let dir = &std::fs::canonicalize(tmp.path())?;

    let agents = FakeAgents::install(&dir.join("agents")).with_sandbox_tools();
    let user = User::new(dir, &[&agents.bin_dir])?;
    ok("no cargo, rustc or rustup on the PATH of the install and the runs");
    {
        let registry = Registry::start(&verdaccio, storage.path())?;
        // Every platform's package, as the release publishes them; npm installs only this
        // machine's.
        for (_, tarball) in &made.tarballs.platforms {
            registry.publish(tarball)?;
        }
        registry.publish(&made.tarballs.launcher)?;
        user.install(&registry.url)?;
        // Dropped here: everything below runs with the registry stopped.
    }
    let binary = installed_binary(&user, &made)?;
    check_version(&user, &made.version)?;
    check_capabilities(&user, &made.version)?;
    let repo = ScratchRepo::new();
    check_run(&user, &repo, dir)?;
    check_cancel(&user, &agents, &repo, dir, &binary)?;
    check_mcp(&user)?;
    check_signal_death(&user)?;
    check_missing_platform(&user, &made, dir)?;
    eprintln!(
        "==> npm install of {} {} passed in {:.1}s",
        npm::LAUNCHER,
        made.version,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The platform package's binary as installed: executable, the very file that was packed.
fn installed_binary(user: &User, made: &super::Made) -> Result<PathBuf> {
    let launcher = user.prefix.join("lib/node_modules").join(npm::LAUNCHER);
    let binary = launcher
        .join("node_modules")
        .join(made.platform.package())
        .join("bin/handoff");
    let meta = std::fs::metadata(&binary).with_context(|| {
        format!(
            "{} is not installed with {}",
            made.platform.package(),
            npm::LAUNCHER
        )
    })?;
    if meta.permissions().mode() & 0o111 == 0 {
        bail!("{} is not executable after install", binary.display());
    }
    if std::fs::read(&binary)? != std::fs::read(&made.binary)? {
        bail!(
            "{} differs from {}",
            binary.display(),
            made.binary.display()
        );
    }
    for (other, _) in &made.tarballs.platforms {
        let dir = launcher.join("node_modules").join(other.package());
        if *other != made.platform && dir.exists() {
            bail!(
                "{} was installed on {}",
                other.package(),
                made.platform.package()
            );
        }
    }
    ok(&format!(
        "{} installed (and no other platform's), its bin/handoff executable and the packed binary",
        made.platform.package()
    ));
    Ok(std::fs::canonicalize(binary)?)
}

fn output(cmd: &mut Command, what: &str) -> Result<std::process::Output> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {what}"))?;
    Ok(child.wait_with_output()?)
}

fn check_version(user: &User, version: &str) -> Result<()> {
    let out = output(user.handoff().arg("--version"), "handoff --version")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() != Some(0) || stdout.trim() != format!("handoff {version}") {
        bail!(
            "handoff --version: {} printed {stdout:?} {:?}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    ok(&format!(
        "handoff --version prints \"handoff {version}\", exit 0"
    ));
    Ok(())
}

fn check_capabilities(user: &User, version: &str) -> Result<()> {
    let out = output(
        user.handoff().args(["capabilities", "--json"]),
        "handoff capabilities --json",
    )?;
    let v: Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "handoff capabilities --json printed no JSON ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let codex = v["providers"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["id"] == "codex"));
    if out.status.code() != Some(0)
        || v["driverVersion"] != version
        || codex.is_none_or(|c| c["preflight"]["installed"] != true)
    {
        bail!("handoff capabilities --json ({}): {v}", out.status);
    }
    ok("capabilities --json: this version, the fake codex installed, exit 0");
    Ok(())
}

/// `handoff run` arguments of a build by the fake Codex, instructions on stdin.
fn run_args(repo: &ScratchRepo, result: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "run",
        "--caller-harness",
        "claude",
        "--harness",
        "codex",
        "--mode",
        "build",
        "--instructions",
        "-",
        "--cwd",
    ]
    .iter()
    .map(Into::into)
    .collect();
    args.extend([
        repo.path().into(),
        "--result".into(),
        result.as_os_str().to_owned(),
    ]);
    args
}

/// Reads a run's stdout (one JSON line) and its result file, which must hold the same.
fn read_result(stdout: &[u8], result: &Path) -> Result<Value> {
    let v: Value = serde_json::from_slice(stdout).with_context(|| {
        format!(
            "handoff run printed no result: {:?}",
            String::from_utf8_lossy(stdout)
        )
    })?;
    let file = std::fs::read(result)
        .with_context(|| format!("handoff run wrote no result file {}", result.display()))?;
    if file != stdout {
        bail!("the result file differs from what handoff run printed");
    }
    Ok(v)
}

fn check_run(user: &User, repo: &ScratchRepo, dir: &Path) -> Result<()> {
    let result = dir.join("result-run.json");
    let mut child = user
        .handoff()
        .args(run_args(repo, &result))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run handoff run")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(b"Add a greeting file for new contributors.\n")?;
    }
    let out = child.wait_with_output()?;
    let v = read_result(&out.stdout, &result)?;
    if out.status.code() != Some(0) || v["status"] != "succeeded" {
        bail!(
            "handoff run on the fake codex ({}): {v} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    ok("a build on the fake codex, instructions on stdin: succeeded, exit 0, result written");
    Ok(())
}

/// SIGINT to the launcher during a run: the run is cancelled (exit 9) and its result written.
/// While it runs, the agent's reaper is the installed binary started as `__reap`.
fn check_cancel(
    user: &User,
    agents: &FakeAgents,
    repo: &ScratchRepo,
    dir: &Path,
    binary: &Path,
) -> Result<()> {
    let ready = dir.join("agent.pid");
    agents.set(keys::MODE, "hang");
    agents.set(keys::READY_FILE, &ready);
    let result = dir.join("result-cancel.json");
    let stdout_path = dir.join("cancel.stdout");
    let mut child = user
        .handoff()
        .args(run_args(repo, &result))
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&stdout_path)?)
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run handoff run")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(b"Add a greeting file, slowly.\n")?;
    }
    let outcome = cancel_and_check(&mut child, &ready, binary, &stdout_path, &result);
    if outcome.is_err() && matches!(child.try_wait(), Ok(None)) {
        // Through the launcher, so handoff ends its agent before going.
        let _ = signal(child.id(), "TERM");
        let _ = wait_for(&mut child, "the run after SIGTERM", Duration::from_secs(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    agents.set(keys::MODE, "success");
    outcome
}

fn cancel_and_check(
    child: &mut Child,
    ready: &Path,
    binary: &Path,
    stdout_path: &Path,
    result: &Path,
) -> Result<()> {
    let agent = wait_for_pid(ready, child, STEP_LIMIT)?;
    check_reaper(agent, child.id(), binary)?;
    signal(child.id(), "INT")?;
    let status = wait_for(child, "the interrupted run", STEP_LIMIT)?;
    let v = read_result(&std::fs::read(stdout_path)?, result)?;
    if status.code() != Some(9) || v["status"] != "cancelled" {
        bail!("SIGINT during a run: {status}, {v}");
    }
    if Path::new(&format!("/proc/{agent}")).exists() {
        bail!("the agent ({agent}) outlived the cancelled run");
    }
    ok("SIGINT to the launcher during a run: cancelled, exit 9, result written, agent gone");
    Ok(())
}

/// Between the launcher and the agent: handoff, then its reaper, both the installed binary.
fn check_reaper(agent: u32, launcher: u32, binary: &Path) -> Result<()> {
    let mut chain = vec![agent];
    let mut pid = agent;
    while let Some(parent) = parent_of(pid) {
        if parent == launcher || parent <= 1 || chain.len() > 16 {
            break;
        }
        chain.push(parent);
        pid = parent;
    }
    if parent_of(pid) != Some(launcher) {
        bail!("the agent ({agent}) does not descend from the launcher ({launcher}): {chain:?}");
    }
    if exe_of(pid).as_deref() != Some(binary) {
        bail!(
            "the launcher's child runs {:?}, not {}",
            exe_of(pid),
            binary.display()
        );
    }
    let reaper = chain
        .iter()
        .find(|p| argv_of(**p).get(1).is_some_and(|a| a == "__reap"));
    match reaper {
        Some(r) if exe_of(*r).as_deref() == Some(binary) => {}
        Some(r) => bail!(
            "the agent's reaper runs {:?}, not {}",
            exe_of(*r),
            binary.display()
        ),
        None => bail!(
            "no `handoff __reap` between the launcher and the agent: {:?}",
            chain.iter().map(|p| argv_of(*p)).collect::<Vec<_>>()
        ),
    }
    ok("the launcher's child and the agent's reaper (`__reap`) run the installed binary");
    Ok(())
}

/// `handoff mcp` through the launcher, speaking JSON-RPC on its stdin and stdout.
struct Mcp {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Mcp {
    fn start(user: &User) -> Result<Mcp> {
        let mut child = user
            .handoff()
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run handoff mcp")?;
        let stdout = child.stdout.take().context("handoff mcp has no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Mcp { child, lines })
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let stdin = self
            .child
            .stdin
            .as_mut()
            .context("handoff mcp's stdin is closed")?;
        writeln!(stdin, "{message}")?;
        stdin.flush()?;
        Ok(())
    }

    /// Sends a request and returns the reply with its id.
    fn call(&mut self, id: u64, method: &str, params: Value) -> Result<Value> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + STEP_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .with_context(|| format!("handoff mcp did not answer {method}"))?;
            let v: Value = serde_json::from_str(&line)
                .with_context(|| format!("handoff mcp printed a line that is not JSON: {line}"))?;
            if v["id"] == id {
                return Ok(v);
            }
        }
    }

    fn initialize(&mut self) -> Result<Value> {
        let reply = self.call(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "npm-e2e", "version": "1"}}),
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(reply)
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn check_mcp(user: &User) -> Result<()> {
    let mut mcp = Mcp::start(user)?;
    let init = mcp.initialize()?;
    if init["result"]["serverInfo"]["name"].as_str().is_none() {
        bail!("handoff mcp answered initialize with {init}");
    }
    let tools = mcp.call(2, "tools/list", json!({}))?;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .map(|ts| ts.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    if !names.contains(&"handoff_run") {
        bail!("handoff mcp's tools/list has no handoff_run: {tools}");
    }
    drop(mcp.child.stdin.take());
    let status = wait_for(&mut mcp.child, "handoff mcp after stdin closed", STEP_LIMIT)?;
    if status.code() != Some(0) {
        bail!("handoff mcp ended with {status} when its stdin closed");
    }
    ok(&format!(
        "handoff mcp answered initialize and tools/list ({} tools), exit 0 when stdin closed",
        names.len()
    ));
    Ok(())
}

/// A signal handoff does not handle ends the binary; the launcher then ends by the same signal.
fn check_signal_death(user: &User) -> Result<()> {
    let mut mcp = Mcp::start(user)?;
    mcp.initialize()?;
    signal(mcp.child.id(), "HUP")?;
    let status = wait_for(&mut mcp.child, "handoff mcp after SIGHUP", STEP_LIMIT)?;
    if status.signal() != Some(1) {
        bail!("after SIGHUP, the launcher ended with {status}, not by SIGHUP");
    }
    ok("SIGHUP to the launcher ends handoff mcp, and the launcher by the same signal");
    Ok(())
}

/// The launcher without its platform package says what to install, in one line, exit 1.
fn check_missing_platform(user: &User, made: &super::Made, dir: &Path) -> Result<()> {
    let installed = user.prefix.join("lib/node_modules").join(npm::LAUNCHER);
    let lonely = dir.join("lonely").join(npm::LAUNCHER);
    std::fs::create_dir_all(lonely.join("bin"))?;
    for file in ["package.json", "bin/handoff"] {
        std::fs::copy(installed.join(file), lonely.join(file))?;
    }
    let out = output(
        user.command("node")
            .arg(lonely.join("bin/handoff"))
            .arg("--version"),
        "the launcher without its platform package",
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let wanted = made.platform.package();
    if out.status.code() != Some(1)
        || stderr.lines().count() != 1
        || !stderr.contains(&wanted)
        || !out.stdout.is_empty()
    {
        bail!(
            "the launcher without {wanted}: {} printed {stderr:?}",
            out.status
        );
    }
    ok(&format!("without {wanted}: one line naming it, exit 1"));
    Ok(())
}
