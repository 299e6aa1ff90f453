//! Processes die with the run: every agent runs under handoff's reaper.
//!
//! Each test is an escape an agent tries: a `setsid` orphan, outliving a handoff killed with
//! SIGKILL (and the worktree lease with it), killing its own reaper. Each of the first two
//! succeeded before the reaper (the orphan and the agent ran on under init).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use handoff_testkit::keys::{ESCAPEE_PID_FILE, KILL_PARENT, MODE, READY_FILE};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::{Sandbox, is_gone};

/// Upper bound for anything these tests wait for.
const LIMIT: Duration = Duration::from_secs(60);

fn proc_stat(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()
}

fn parent_of(pid: i32) -> i32 {
    let stat = proc_stat(pid).unwrap_or_else(|| panic!("process {pid} is gone"));
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn wait_for_pid(path: &Path, handoff: &mut Child) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = read_pid(path) {
            return pid;
        }
        assert!(
            handoff.try_wait().unwrap().is_none(),
            "handoff ended before {} appeared",
            path.display()
        );
        assert!(start.elapsed() < LIMIT, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `pid` is gone; returns how long that took.
fn wait_gone(pid: i32, what: &str) -> Duration {
    let start = Instant::now();
    while !is_gone(pid) {
        assert!(
            start.elapsed() < LIMIT,
            "{what} (pid {pid}) is still running: {:?}",
            proc_stat(pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

/// Kills what a failed test may leave running.
struct Reap(Vec<i32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in &self.0 {
            if !is_gone(*pid) {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
        }
    }
}

/// `handoff run` for a fake Codex build, started in the background.
fn spawn_run(sb: &Sandbox) -> Child {
    let ins = sb.instructions("Make the change described here, then report.");
    let mut cmd = sb.command();
    cmd.args([
        "run",
        "--caller-harness",
        "claude",
        "--harness",
        "codex",
        "--mode",
        "build",
        "--cwd",
        &sb.cwd(),
        "--instructions",
        &ins,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    cmd.spawn().unwrap()
}

#[test]
fn a_setsid_orphan_dies_with_the_run() {
    let sb = Sandbox::new();
    let escapee = sb.root.join("escapee.pid");
    sb.agents.set(ESCAPEE_PID_FILE, escapee.to_str().unwrap());
    let run = sb.delegate("claude", "codex", "build", &[]);
    let pid = read_pid(&escapee).expect("the fake started its escapee");
    let _reap = Reap(vec![pid]);
    assert_eq!(run.code, 0, "{run:?}");
    // handoff returned only once the agent's whole tree was gone: no waiting here.
    assert!(
        is_gone(pid),
        "the setsid orphan outlived the run: {:?}",
        proc_stat(pid)
    );
    let processes = &run.json["processes"];
    assert_eq!(processes["containment"], "reaper", "{run:?}");
    assert_eq!(processes["treeGone"], true, "{run:?}");
    assert_eq!(processes["leftover"], 1, "{run:?}");
}

#[test]
fn a_timed_out_agent_takes_its_setsid_orphan_with_it() {
    let sb = Sandbox::new();
    let escapee = sb.root.join("escapee.pid");
    sb.agents.set(ESCAPEE_PID_FILE, escapee.to_str().unwrap());
    sb.agents.set(MODE, "hang");
    let run = sb.delegate("claude", "codex", "build", &["--timeout-ms", "1500"]);
    let pid = read_pid(&escapee).expect("the fake started its escapee");
    let _reap = Reap(vec![pid]);
    assert_eq!(run.status(), "timed_out", "{run:?}");
    assert!(
        is_gone(pid),
        "the orphan outlived the run: {:?}",
        proc_stat(pid)
    );
    assert_eq!(run.json["processes"]["treeGone"], true, "{run:?}");
}

/// What the reaper is handed to hold (the worktree lease's lock) stays locked as long as the
/// agent's tree lives, even once handoff's own descriptor is closed, and is free once the tree
/// is gone.
#[test]
fn the_reaper_holds_the_lease_lock_until_the_tree_is_gone() {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use rustix::fs::{FlockOperation, flock};
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::net::UnixStream;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lease.lock");
    let open = || std::fs::File::create(&path).unwrap();
    let try_lock = || flock(open(), FlockOperation::NonBlockingLockExclusive).is_ok();
    let lock = open();
    flock(&lock, FlockOperation::NonBlockingLockExclusive).unwrap();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut reaper = Command::new(crate::support::HANDOFF)
        .args(["__reap", "--parent", &std::process::id().to_string()])
        .args(["--stdin", "none", "--", "/bin/sleep", "1000"])
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .spawn()
        .unwrap();
    let _reap = Reap(vec![i32::try_from(reaper.id()).unwrap()]);
    let fds = [lock.as_raw_fd()];
    sendmsg::<()>(
        ours.as_raw_fd(),
        &[std::io::IoSlice::new(b"h")],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .unwrap();
    // Wait for the agent, so the reaper has taken what it holds.
    let start = Instant::now();
    let agent = loop {
        if let Some(&pid) = crate::support::children_of(reaper.id()).first() {
            break i32::try_from(pid).unwrap();
        }
        assert!(
            start.elapsed() < LIMIT,
            "the reaper never started its agent"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // This side lets go of its descriptor without unlocking, as a killed handoff does.
    drop(lock);
    assert!(
        !try_lock(),
        "the lock must stay held while the agent's tree lives"
    );

    kill(Pid::from_raw(agent), Signal::SIGKILL).unwrap();
    let status = reaper.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 9), "{status:?}");
    assert!(try_lock(), "the lock must be free once the tree is gone");
    drop(ours);
}

#[test]
fn sigkill_of_handoff_leaves_no_agent_process() {
    let sb = Sandbox::new();
    let ready = sb.root.join("ready.pid");
    let escapee = sb.root.join("escapee.pid");
    sb.agents.set(MODE, "hang");
    sb.agents.set(READY_FILE, ready.to_str().unwrap());
    sb.agents.set(ESCAPEE_PID_FILE, escapee.to_str().unwrap());
    let mut handoff = spawn_run(&sb);
    let agent = wait_for_pid(&ready, &mut handoff);
    let orphan = wait_for_pid(&escapee, &mut handoff);
    let _reap = Reap(vec![agent, orphan]);
    // The agent runs under a reaper of handoff's, with no signal blocked.
    let reaper = parent_of(agent);
    assert_eq!(parent_of(reaper), i32::try_from(handoff.id()).unwrap());
    let status = std::fs::read_to_string(format!("/proc/{agent}/status")).unwrap();
    assert!(
        status.contains("SigBlk:\t0000000000000000"),
        "the agent inherited a signal mask: {status}"
    );
    handoff.kill().unwrap();
    handoff.wait().unwrap();
    let agent_took = wait_gone(agent, "the agent");
    let orphan_took = wait_gone(orphan, "the agent's setsid orphan");
    eprintln!("after SIGKILL of handoff: agent gone in {agent_took:?}, orphan in {orphan_took:?}");
}

/// An agent that kills its reaper is blocked: the reaper cannot vouch for the tree. Where the
/// agent ran in a cgroup of its own, handoff still kills that cgroup, so the agent's `setsid`
/// orphan dies all the same.
#[test]
fn an_agent_that_kills_its_reaper_is_blocked() {
    let sb = Sandbox::new();
    let escapee = sb.root.join("escapee.pid");
    sb.agents.set(ESCAPEE_PID_FILE, escapee.to_str().unwrap());
    sb.agents.set(KILL_PARENT, "1");
    let run = sb.delegate("claude", "codex", "build", &[]);
    let pid = read_pid(&escapee).expect("the fake started its escapee");
    let _reap = Reap(vec![pid]);
    if delegated_cgroup().is_some() {
        wait_gone(pid, "the orphan of an agent that killed its reaper");
    }
    assert_eq!(run.code, 10, "{run:?}");
    assert_eq!(run.status(), "blocked", "{run:?}");
    assert_eq!(run.json["processes"]["treeGone"], false, "{run:?}");
    assert!(
        run.json["diagnostics"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("escaped their reaper")),
        "{run:?}"
    );
}

/// An agent that stops its reaper (SIGSTOP, then exits) cannot leave it frozen: handoff
/// continues it, the tree still dies, and the run is blocked.
#[test]
fn an_agent_that_stops_its_reaper_is_blocked_and_its_orphan_still_dies() {
    let sb = Sandbox::new();
    let escapee = sb.root.join("escapee.pid");
    sb.agents.set(ESCAPEE_PID_FILE, escapee.to_str().unwrap());
    sb.agents.set(KILL_PARENT, "STOP");
    let run = sb.delegate("claude", "codex", "build", &[]);
    let pid = read_pid(&escapee).expect("the fake started its escapee");
    let _reap = Reap(vec![pid]);
    assert_eq!(run.code, 10, "{run:?}");
    assert_eq!(run.json["processes"]["treeGone"], false, "{run:?}");
    assert!(
        is_gone(pid),
        "the orphan outlived the run: {:?}",
        proc_stat(pid)
    );
}

/// The reaper refuses a command line it does not understand, without starting anything.
#[test]
fn the_reaper_refuses_a_bad_command_line() {
    let out = Command::new(crate::support::HANDOFF)
        .args(["__reap", "--parent", "1", "--", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--stdin is required"),
        "{out:?}"
    );
}

/// Where this process's cgroup v2 is, when the user may make cgroups under it (as the reaper
/// would): the run's cgroup is then expected.
fn delegated_cgroup() -> Option<std::path::PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .to_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        (right.starts_with("cgroup2 ") && fields.get(3) == Some(&"/"))
            .then(|| fields.get(4).map(|m| (*m).to_owned()))?
    })?;
    let dir = Path::new(&mount).join(rel.trim_start_matches('/'));
    let probe = dir.join(format!("handoff-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    let killable = probe.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&probe);
    killable.then_some(dir)
}

/// A chain of processes that each ignore SIGTERM, start the next and exit: the agent leaves
/// it running. Where a cgroup v2 can be made, the run's cgroup is killed as a whole
/// (`cgroup.kill`) and removed; either way nothing of the chain is left when handoff returns.
#[test]
fn a_fork_and_exit_chain_dies_with_the_run_and_its_cgroup() {
    let sb = Sandbox::new();
    let chain = sb.root.join("chain-4321.sh");
    std::fs::write(
        &chain,
        format!(
            "trap '' TERM\nsleep 0.01\nsh {} </dev/null >/dev/null 2>&1 &\n",
            chain.display()
        ),
    )
    .unwrap();
    sb.agents.set(
        handoff_testkit::keys::SHELL,
        format!("sh {} </dev/null >/dev/null 2>&1 &", chain.display()),
    );
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("chain-4321.sh"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "the chain outlived the run");
    let processes = &run.json["processes"];
    assert_eq!(processes["treeGone"], true, "{run:?}");
    match delegated_cgroup() {
        Some(dir) => {
            let used = processes["cgroup"]
                .as_str()
                .unwrap_or_else(|| panic!("{run:?}"));
            assert!(used.starts_with(dir.to_str().unwrap()), "{used}");
            assert!(
                !Path::new(used).exists(),
                "the run's cgroup was left: {used}"
            );
        }
        None => assert!(processes["cgroup"].is_null(), "{run:?}"),
    }
}

/// A run cancelled while its reaper is still starting signals the reaper before it can catch
/// anything: the signal waits for it, and the run ends cancelled with the agent's tree
/// accounted for, not `blocked` for a reaper that died without a report.
#[test]
fn a_run_cancelled_while_its_reaper_starts_ends_cancelled_not_blocked() {
    let sb = Sandbox::new();
    // The reaper as handoff starts it, slowed down: not handoff yet, catching nothing.
    let (slow, started) = crate::support::slow_handoff(&sb, "slow-reaper", None);
    let mut options = crate::library::options_for(&sb, None);
    options.handoff_exe = Some(camino::Utf8PathBuf::from_path_buf(slow).unwrap());
    let engine = crate::library::engine_with(options);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (stop, cancel) = tokio::sync::watch::channel(false);
    let outcome = runtime.block_on(async {
        let stopper = tokio::spawn(async move {
            let start = Instant::now();
            while !started.exists() && start.elapsed() < LIMIT {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = stop.send(true);
            stop
        });
        let outcome = engine
            .run(crate::library::run_input(&sb, "review"), cancel)
            .await;
        drop(stopper.await);
        outcome
    });
    assert_eq!(outcome.exit_code, 9, "{}", outcome.line);
    assert_eq!(
        outcome.result.status.as_str(),
        "cancelled",
        "{}",
        outcome.line
    );
    let processes = outcome.result.processes.as_ref().expect("processes");
    assert_eq!(processes.tree_gone, Some(true), "{}", outcome.line);
}
