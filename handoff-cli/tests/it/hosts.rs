//! `--on` on `run`: the whole run happens on a host reached through `$HANDOFF_SSH` =
//! `fake-ssh -F <config>` (see `remote.rs` for what the other machine is), the code pushed
//! to the host's repository of the project, the host's handoff running it as a background job,
//! a build's change brought back here.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::remote::{Other, other_machine};
use crate::support::{Run, Sandbox};

/// The sandbox here, recording every agent invocation: a run on the host starts none here, not
/// even a probe.
fn sandbox() -> Sandbox {
    let sb = crate::carry::sandbox();
    sb.record();
    sb
}

/// Nothing ran here.
fn nothing_ran_here(sb: &Sandbox) {
    let calls = sb.agents.invocations();
    assert!(calls.is_empty(), "{calls:#?}");
}

/// `[hosts.devbox]` naming the other machine, its directory under its home.
fn configure(sb: &Sandbox, other: &Other, extra: &str) -> PathBuf {
    let dir = other.home.join("handoff");
    sb.write_config(&format!(
        "[hosts.devbox]\nssh = \"{}\"\ndir = \"{}\"\n{extra}",
        other.host.alias(),
        dir.display()
    ));
    dir
}

/// `handoff <verb> --caller-harness claude --harness codex [--mode <mode>] --cwd <repo>
/// --instructions <file holding `task`> --on <host> <extra…>` through the ssh command `ssh`.
fn host_command(
    sb: &Sandbox,
    ssh: &[String],
    (verb, mode): (&str, Option<&str>),
    task: &str,
    host: &str,
    extra: &[&str],
) -> std::process::Command {
    let ins = sb.instructions(task);
    let cwd = sb.cwd();
    let mut cmd = sb.command();
    cmd.env("HANDOFF_SSH", ssh.join(" ")).args([
        verb,
        "--caller-harness",
        "claude",
        "--harness",
        "codex",
    ]);
    if let Some(mode) = mode {
        cmd.args(["--mode", mode]);
    }
    cmd.args(["--cwd", &cwd, "--instructions", &ins, "--on", host])
        .args(extra);
    cmd
}

/// `handoff run --mode <mode> … --on devbox <extra…>` to the other machine.
fn on_command(sb: &Sandbox, other: &Other, mode: &str, extra: &[&str]) -> std::process::Command {
    host_command(
        sb,
        &other.host.ssh_command(),
        ("run", Some(mode)),
        "Make the change described here, then report.",
        "devbox",
        extra,
    )
}

fn run_on(sb: &Sandbox, other: &Other, mode: &str, extra: &[&str]) -> Run {
    let run = sb.exec(&mut on_command(sb, other, mode, extra));
    assert_eq!(
        run.stdout.lines().count(),
        1,
        "{run:#?}\n{}",
        other.host.log_text()
    );
    run
}

/// The delegated runs `handoff log` records in this worktree's task.
fn recorded_runs(sb: &Sandbox) -> Vec<Value> {
    let cwd = sb.cwd();
    let log = sb.run(&["log", "--cwd", &cwd, "--json"]);
    assert_eq!(log.code, 0, "{log:?}");
    log.json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].clone())
        .filter(|e| e["kind"] == "delegated-run")
        .collect()
}

/// What is left under the host's directory of runs.
fn runs_left(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("runs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn refs_left(dir: &Path) -> String {
    let repos: Vec<PathBuf> = std::fs::read_dir(dir.join("repos"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    repos
        .iter()
        .map(|r| {
            let out = std::process::Command::new("git")
                .args(["-c", "safe.directory=*", "for-each-ref"])
                .current_dir(r)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
        .collect()
}

/// Holds every run on the other machine at its agent until [`Gate::open`]: the agent writes
/// `ready` once it runs, then waits for `gate`.
struct Gate {
    gate: PathBuf,
    ready: PathBuf,
}

impl Gate {
    fn hold(other: &Other) -> Gate {
        let gate = other.home.join("gate");
        other.agents.set("HANDOFF_FAKE_WAIT_FILE", &gate);
        let ready = other.home.join("ready");
        other.agents.set("HANDOFF_FAKE_CONTEXT_FILE", &ready);
        Gate { gate, ready }
    }

    /// Waits until an agent runs there.
    fn reached(&self) {
        wait_for(&self.ready, Duration::from_secs(60));
    }

    fn open(&self, other: &Other) {
        std::fs::write(&self.gate, "").unwrap();
        other.own(&self.gate);
    }
}

/// Starts `cmd` with its output captured.
fn spawn(mut cmd: std::process::Command) -> std::process::Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn status(sb: &Sandbox) -> String {
    sb.repo
        .git(&["status", "--porcelain", "--untracked-files=all"])
}

#[test]
fn a_review_runs_on_the_host_and_leaves_nothing_there() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "");
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    let run = run_on(&sb, &other, "review", &[]);
    assert_eq!(run.code, 0, "{run:#?}\n{}", other.host.log_text());
    let r = &run.json;
    assert_eq!(r["status"], "succeeded");
    assert_eq!(r["host"]["name"], "devbox");
    assert_eq!(
        r["host"]["commit"],
        head.trim(),
        "nothing uncommitted: HEAD itself"
    );
    // The evidence is the host's: its worktree, unchanged.
    let remote_root = r["git"]["before"]["root"].as_str().unwrap();
    assert!(
        remote_root.starts_with(dir.to_str().unwrap()),
        "{remote_root}"
    );
    assert_eq!(r["git"]["changed"], false);
    assert!(r["git"].get("applied").is_none(), "{:#}", r["git"]);
    // The fake agent ran there, not here.
    nothing_ran_here(&sb);
    assert_eq!(runs_left(&dir), Vec::<String>::new());
    assert_eq!(refs_left(&dir), "");
    assert_eq!(status(&sb), "");
    // This worktree's task records it, as a run here.
    let runs = recorded_runs(&sb);
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0]["runId"], r["lineage"]["runId"]);
    assert_eq!(runs[0]["status"], "succeeded");
    assert_eq!(runs[0]["host"], "devbox");
    let text = sb.run(&["log", "--cwd", &sb.cwd()]);
    assert!(
        text.stdout.contains("on codex at devbox: succeeded"),
        "{text:?}"
    );
}

#[test]
fn a_build_comes_back_uncommitted_with_the_work_it_started_from() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "");
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    // Uncommitted work goes with the run, as a commit that moves no branch.
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n// wip\n");
    sb.repo.write("notes/plan.md", "plan\n");
    let run = run_on(&sb, &other, "build", &[]);
    assert_eq!(run.code, 0, "{run:#?}\n{}", other.host.log_text());
    let r = &run.json;
    assert_eq!(r["status"], "succeeded");
    assert_eq!(
        r["git"]["changedFiles"],
        serde_json::json!(["fake-build.txt"])
    );
    assert_eq!(r["git"]["applied"], true, "{:#}", r["git"]);
    assert!(r["git"].get("branch").is_none());
    let checkpoint = r["host"]["commit"].as_str().unwrap();
    assert_ne!(checkpoint, head.trim());
    // Here: the build's file, uncommitted, next to the work that was here; no branch moved.
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head);
    assert!(sb.repo.path().join("fake-build.txt").is_file());
    let st = status(&sb);
    for line in [" M src/lib.rs", "?? fake-build.txt", "?? notes/plan.md"] {
        assert!(st.contains(line), "{st}");
    }
    assert_eq!(sb.repo.git(&["branch", "--list", "handoff/*"]), "");
    assert_eq!(runs_left(&dir), Vec::<String>::new());
    assert_eq!(refs_left(&dir), "");
}

#[test]
fn a_local_change_during_a_remote_build_leaves_the_change_on_a_branch() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    configure(&sb, &other, "");
    let gate = Gate::hold(&other);
    let child = spawn(on_command(&sb, &other, "build", &[]));
    gate.reached();
    sb.repo.write("README.md", "changed here meanwhile\n");
    gate.open(&other);
    let out = child.wait_with_output().unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{r:#}");
    assert_eq!(r["git"]["applied"], false, "{:#}", r["git"]);
    let branch = r["git"]["branch"].as_str().unwrap();
    assert!(branch.starts_with("handoff/"), "{branch}");
    assert!(
        r["diagnostics"]["message"]
            .as_str()
            .unwrap()
            .contains(branch)
    );
    // The change waits on the branch, one commit on the run's start; nothing applied here.
    assert!(!sb.repo.path().join("fake-build.txt").exists());
    let files = sb
        .repo
        .git(&["diff", "--name-only", &format!("{branch}~1"), branch]);
    assert_eq!(files.trim(), "fake-build.txt");
}

fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn another_version_on_the_host_is_refused_before_anything_goes_there() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "");
    let fake = other.bin.join("handoff");
    std::fs::remove_file(&fake).unwrap();
    std::fs::write(&fake, "#!/bin/sh\necho 'handoff 0.0.1'\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    other.own(&fake);
    let run = run_on(&sb, &other, "review", &[]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert_eq!(run.json["status"], "rejected");
    let message = run.json["diagnostics"]["message"].as_str().unwrap();
    assert!(message.contains("runs handoff 0.0.1"), "{message}");
    assert!(!dir.exists(), "nothing was made there");
}

#[test]
fn a_full_host_refuses_a_second_run_unless_told_to_wait() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "max_runs = 1\n");
    let gate = Gate::hold(&other);
    let first = spawn(on_command(&sb, &other, "review", &[]));
    gate.reached();
    let second = run_on(&sb, &other, "review", &[]);
    assert_eq!(second.code, 5, "{second:#?}");
    let message = second.json["diagnostics"]["message"].as_str().unwrap();
    assert!(message.contains("max_runs = 1"), "{message}");
    assert!(message.contains("--wait"), "{message}");
    // Never here instead.
    nothing_ran_here(&sb);
    gate.open(&other);
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(runs_left(&dir), Vec::<String>::new());
}

#[test]
fn a_host_that_drops_mid_run_ends_it_host_lost_and_is_cleaned_at_the_next_contact() {
    let sb = sandbox();
    let mut other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "");
    let gate = Gate::hold(&other);
    let child = spawn(on_command(&sb, &other, "review", &[]));
    gate.reached();
    other.host.stop();
    let out = child.wait_with_output().unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2), "{r:#}");
    assert_eq!(r["status"], "failed");
    assert_eq!(r["diagnostics"]["cause"], "host_lost");
    assert_eq!(r["host"]["name"], "devbox");
    assert!(r["host"]["job"].is_string());
    assert_eq!(runs_left(&dir).len(), 1, "the run is still there");
    let doctor = sb.run(&["doctor", "--json"]);
    let left = &doctor.json["hostLeftovers"];
    assert_eq!(left[0]["host"], "devbox", "{left:#}");
    assert_eq!(left[0]["job"], r["host"]["job"]);
    // The next contact removes it (its job stopped first).
    other.host.resume();
    other.agents.unset("HANDOFF_FAKE_WAIT_FILE");
    let next = run_on(&sb, &other, "review", &[]);
    assert_eq!(next.code, 0, "{next:#?}");
    assert_eq!(runs_left(&dir), Vec::<String>::new());
    assert_eq!(refs_left(&dir), "");
}

#[test]
fn with_failover_a_lost_host_hands_the_run_to_the_next_agent_here() {
    let sb = sandbox();
    let mut other = other_machine(&["codex"]);
    configure(&sb, &other, "");
    let gate = Gate::hold(&other);
    sb.repo.write("notes/plan.md", "plan\n");
    let result = sb.private.join("result.json");
    let result_arg = result.to_str().unwrap().to_owned();
    let child = spawn(on_command(
        &sb,
        &other,
        "build",
        &["--failover", "claude", "--result", &result_arg],
    ));
    gate.reached();
    other.host.stop();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{r:#}");
    assert_eq!(r["status"], "succeeded");
    assert_eq!(r["target"]["harness"], "claude");
    // The build here started from this worktree as it was: the work here is kept, the change
    // is the one made here.
    assert_eq!(
        r["git"]["changedFiles"],
        serde_json::json!(["fake-build.txt"])
    );
    let st = status(&sb);
    assert!(st.contains("?? notes/plan.md"), "{st}");
    // It ran here: no host of its own, the lost attempt there first.
    assert!(r["host"].is_null(), "{:#}", r["host"]);
    let attempts = r["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{r:#}");
    assert_eq!(attempts[0]["harness"], "codex");
    assert_eq!(attempts[0]["status"], "failed");
    assert_eq!(attempts[0]["cause"], "host_lost");
    assert_eq!(attempts[0]["host"], "devbox");
    // Its time there: from the start until the host counted as lost (retries included).
    assert!(attempts[0]["durationMs"].as_u64() > Some(1000), "{r:#}");
    assert_eq!(attempts[1]["harness"], "claude");
    assert_eq!(attempts[1]["status"], "succeeded");
    assert!(attempts[1].get("host").is_none(), "{:#}", attempts[1]);
    let runs = sb.runs();
    assert_eq!(runs.len(), 1, "one agent ran here: {runs:#?}");
    assert_eq!(std::fs::read_to_string(&result).unwrap(), stdout);
    // Recorded once, as the run here it ended as; what the lost run left there is listed.
    let recorded = recorded_runs(&sb);
    assert_eq!(recorded.len(), 1, "{recorded:#?}");
    assert_eq!(recorded[0]["runId"], r["lineage"]["runId"]);
    let doctor = sb.run(&["doctor", "--json"]);
    assert_eq!(doctor.json["hostLeftovers"][0]["host"], "devbox");
}

#[test]
fn a_cancel_here_stops_the_agents_tree_there() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "");
    let pid_file = other.home.join("grandchild.pid");
    other.agents.set("HANDOFF_FAKE_MODE", "grandchild");
    other
        .agents
        .set("HANDOFF_FAKE_GRANDCHILD_PID_FILE", &pid_file);
    let ready = other.home.join("ready");
    other.agents.set("HANDOFF_FAKE_READY_FILE", &ready);
    let child = spawn(on_command(&sb, &other, "review", &[]));
    wait_for(&pid_file, Duration::from_secs(60));
    wait_for(&ready, Duration::from_secs(60));
    let grandchild: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(9), "{r:#}");
    assert_eq!(r["status"], "cancelled");
    // Proven there: the host's reaper saw the whole tree gone.
    assert_eq!(r["processes"]["treeGone"], true, "{:#}", r["processes"]);
    assert!(crate::support::proc_state(grandchild).is_none_or(|s| s == 'Z'));
    assert_eq!(runs_left(&dir), Vec::<String>::new());
}

#[test]
fn what_is_sent_is_masked_here() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    configure(&sb, &other, "");
    let record = other.agents.record_dir();
    other.own(&record);
    let secret = "sk-proj-Zq8xT3mV9kL2wR7nB4cY6hJ1";
    let mut cmd = host_command(
        &sb,
        &other.host.ssh_command(),
        ("run", Some("review")),
        &format!("Use the key {secret} to review."),
        "devbox",
        &[],
    );
    cmd.env("OPENAI_API_KEY", secret);
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 0, "{run:#?}");
    let seen: String = other
        .agents
        .invocations()
        .iter()
        .map(|i| i.to_string())
        .collect();
    assert!(seen.contains("review"), "the agent ran there: {record:?}");
    assert!(!seen.contains(secret), "the secret reached the host");
    assert!(!run.stdout.contains(secret));
}

#[test]
fn bad_hosts_are_refused_in_one_line() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    configure(&sb, &other, "");
    for (on, named) in [
        ("bad host", "not an ssh destination"),
        ("-oProxyCommand=x", "no host"),
        ("me@box:relative", "must be absolute"),
    ] {
        let ins = sb.instructions("x");
        let run = sb.run(&[
            "run",
            "--caller-harness",
            "claude",
            "--harness",
            "codex",
            "--mode",
            "review",
            "--cwd",
            &sb.cwd(),
            "--instructions",
            &ins,
            &format!("--on={on}"),
        ]);
        assert_eq!(run.code, 5, "{run:#?}");
        assert!(run.stderr.contains(named), "{}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    }
    let mcp = sb.instructions("{}");
    let run = run_on(&sb, &other, "review", &["--mcp-config", &mcp]);
    assert_eq!(run.code, 5);
    assert!(
        run.stderr.contains("--mcp-config cannot go with --on"),
        "{}",
        run.stderr
    );
    // A chain that could go on here is checked here, before anything goes there.
    let run = run_on(&sb, &other, "review", &["--failover", "nosuchagent"]);
    assert_eq!(run.code, 5);
    assert!(run.stderr.contains("--failover"), "{}", run.stderr);
    assert!(runs_left(&other.home.join("handoff")).is_empty());
    // Nothing is pushed to the user's remotes: a run has no --push.
    let run = run_on(&sb, &other, "review", &["--push"]);
    assert_eq!(run.code, 5);
    assert!(run.stderr.contains("'--push'"), "{}", run.stderr);
    sb.write_config("[hosts.devbox]\nssh = \"box\"\nmax_runs = 0\n");
    let run = run_on(&sb, &other, "review", &[]);
    assert_eq!(run.code, 5);
    assert!(run.stderr.contains("max_runs"), "{}", run.stderr);
}

#[test]
fn with_wait_a_second_run_waits_for_the_full_host() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "max_runs = 1\n");
    let record = other.agents.record_dir();
    other.own(&record);
    let gate = Gate::hold(&other);
    let first = spawn(on_command(&sb, &other, "review", &[]));
    gate.reached();
    let second = spawn(on_command(&sb, &other, "review", &["--wait"]));
    std::thread::sleep(Duration::from_millis(1500));
    gate.open(&other);
    for child in [first, second] {
        let out = child.wait_with_output().unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(0), "{r:#}");
    }
    let runs = other
        .agents
        .invocations()
        .iter()
        .filter(|i| {
            i["stdin"]
                .as_str()
                .is_some_and(|s| s.contains("Mode: review"))
        })
        .count();
    assert_eq!(runs, 2);
    assert_eq!(runs_left(&dir), Vec::<String>::new());
}

#[test]
fn capabilities_on_a_host_are_that_hosts() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    configure(&sb, &other, "");
    let mut cmd = sb.command();
    cmd.env("HANDOFF_SSH", other.host.ssh_command().join(" "))
        .args(["capabilities", "--on", "devbox", "--json"]);
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 0, "{run:#?}");
    let installed = |id: &str| {
        run.json["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .map(|p| p["preflight"]["installed"].clone())
    };
    // Only Codex is installed there; here every fake agent is.
    assert_eq!(installed("codex"), Some(Value::Bool(true)));
    assert_eq!(installed("claude"), Some(Value::Bool(false)));
    let mut cmd = sb.command();
    cmd.env("HANDOFF_SSH", other.host.ssh_command().join(" "))
        .args(["capabilities", "--on", "nowhere-host"]);
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 5, "{run:#?}");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[test]
fn a_workers_advisers_run_on_the_host_too() {
    let sb = sandbox();
    let other = other_machine(&["codex", "claude"]);
    configure(&sb, &other, "");
    other.agents.set("HANDOFF_FAKE_ADVICE", "claude");
    let record = other.agents.record_dir();
    other.own(&record);
    let mut cmd = host_command(
        &sb,
        &other.host.ssh_command(),
        ("run-with-advice", Some("build")),
        "Build it, asking for advice.",
        "devbox",
        &[],
    );
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 0, "{run:#?}");
    let nodes = run.json["dag"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{:#}", run.json["dag"]);
    assert_eq!(nodes[1]["targetHarness"], "claude");
    // The adviser ran there: nothing ran here.
    let advised_there = other.agents.invocations().iter().any(|i| {
        i["stdin"]
            .as_str()
            .is_some_and(|s| s.contains("Operation: advice"))
    });
    assert!(advised_there);
    nothing_ran_here(&sb);
    assert!(sb.repo.path().join("fake-build.txt").is_file());
}

#[test]
fn uncommitted_work_named_like_a_secret_never_leaves() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "");
    sb.repo
        .write("deploy/server.pem", "-----BEGIN PRIVATE KEY-----\n");
    let run = run_on(&sb, &other, "review", &[]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stderr.contains("deploy/server.pem"), "{}", run.stderr);
    assert!(run.stderr.contains("looks like a secret"), "{}", run.stderr);
    assert!(!dir.exists(), "nothing went there");
}

#[test]
fn advice_runs_on_the_host_too() {
    let sb = sandbox();
    let other = other_machine(&["codex"]);
    let dir = configure(&sb, &other, "");
    let mut cmd = host_command(
        &sb,
        &other.host.ssh_command(),
        ("advice", None),
        "What do you think of the layout?",
        "devbox",
        &[],
    );
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["operation"], "advice");
    assert_eq!(run.json["host"]["name"], "devbox");
    nothing_ran_here(&sb);
    assert_eq!(runs_left(&dir), Vec::<String>::new());
}

/// An agent on the host that writes into its repository's git directory gets nothing back
/// here, even where the request allows git settings. What Claude Code's sandbox leaves there
/// (`config.worktree`, empty directories) passes the host's evidence, and a commit cannot carry
/// it: `blocked`. A hostile rewrite (a `core.fsmonitor` program, other object alternates)
/// leaves the host unable to read the run's objects: `failed`. Either way nothing reaches this
/// worktree.
#[test]
fn a_hostile_agents_git_directory_never_comes_back() {
    for (leftovers, code) in [("claude-sandbox", 10), ("hostile", 7)] {
        let sb = sandbox();
        let other = other_machine(&["codex"]);
        let dir = configure(&sb, &other, "");
        other.agents.set("HANDOFF_FAKE_LEFTOVERS", leftovers);
        let head = sb.repo.git(&["rev-parse", "HEAD"]);
        let run = run_on(&sb, &other, "build", &["--allow-git-config"]);
        assert_eq!(run.code, code, "{leftovers}: {run:#?}");
        assert_ne!(run.json["status"], "succeeded");
        if code == 10 {
            assert_eq!(run.json["git"]["applied"], false, "{:#}", run.json["git"]);
            let message = run.json["diagnostics"]["message"].as_str().unwrap();
            assert!(message.contains("cannot come back here"), "{message}");
        }
        // Here: nothing applied, no branch, no git setting.
        assert_eq!(status(&sb), "", "{leftovers}");
        assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head);
        assert_eq!(sb.repo.git(&["branch", "--list", "handoff/*"]), "");
        assert!(!sb.repo.path().join(".git/config.worktree").exists());
        assert_eq!(runs_left(&dir), Vec::<String>::new());
        nothing_ran_here(&sb);
    }
}

/// Two hosts, each with its own HOME, state and agents, behind one ssh configuration: one
/// holds a review while a build goes to the other, whose `max_runs` is its own.
#[test]
fn two_hosts_run_side_by_side_each_with_its_own_state() {
    let sb = sandbox();
    let a = crate::remote::other_machine_named(&["codex"], "host-a");
    let b = crate::remote::other_machine_named(&["codex"], "host-b");
    let ssh = handoff_testkit::fake_ssh::FakeSshHosts::new(&[&a.host, &b.host]);
    sb.write_config(&format!(
        "[hosts.a]\nssh = \"host-a\"\ndir = \"{}\"\n\n[hosts.b]\nssh = \"host-b\"\ndir = \"{}\"\n",
        a.home.join("handoff").display(),
        b.home.join("handoff").display()
    ));
    let ssh = ssh.ssh_command();
    let on =
        |host: &str, mode: &str| host_command(&sb, &ssh, ("run", Some(mode)), "Do it.", host, &[]);
    let gate = Gate::hold(&a);
    let review = spawn(on("a", "review"));
    gate.reached();
    let build = sb.exec(&mut on("b", "build"));
    assert_eq!(build.code, 0, "{build:#?}");
    assert_eq!(build.json["host"]["name"], "b");
    assert_eq!(build.json["git"]["applied"], true);
    assert!(sb.repo.path().join("fake-build.txt").is_file());
    gate.open(&a);
    let out = review.wait_with_output().unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{r:#}");
    assert_eq!(r["host"]["name"], "a");
    // Each host's own store holds its own job only.
    for (host, verb_mode) in [(&a, "review"), (&b, "build")] {
        let (code, stdout, stderr) = host.host.exec("handoff jobs --json");
        assert_eq!(code, 0, "{stderr}");
        let jobs: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(jobs.len(), 1, "{stdout}");
        assert_eq!(jobs[0]["mode"], verb_mode);
        assert_eq!(runs_left(&host.home.join("handoff")), Vec::<String>::new());
    }
    nothing_ran_here(&sb);
}

/// With `--ignored` the evidence covers ignored files on both machines: a build that writes
/// one brings it back, and the proof here counts it too.
#[test]
fn an_ignored_file_a_build_writes_comes_back_with_ignored() {
    let sb = sandbox();
    sb.repo.write(".gitignore", "fake-build.txt\n");
    sb.repo.commit_all("ignore the build's file");
    let other = other_machine(&["codex"]);
    configure(&sb, &other, "");
    let run = run_on(&sb, &other, "build", &["--ignored"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(
        run.json["git"]["changedFiles"],
        serde_json::json!(["fake-build.txt"])
    );
    assert_eq!(run.json["git"]["applied"], true, "{:#}", run.json["git"]);
    assert!(sb.repo.path().join("fake-build.txt").is_file());
}
