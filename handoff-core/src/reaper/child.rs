//! The reaper process: it starts the agent, adopts whatever the agent's tree orphans, and does
//! not exit before every descendant is gone.
//!
//! Its events come to one loop on a single-threaded runtime: `SIGCHLD` (reap),
//! `SIGTERM`/`SIGINT`/`SIGHUP` (handoff stops the run: terminate the tree, then kill it), the
//! end of the channel to handoff (handoff is gone: kill the tree now), `SIGUSR1` (the
//! parent-death signal, a backup: acted on only when `getppid()` no longer names handoff,
//! since it also fires when the *thread* that started the reaper exits) and a tick while the
//! tree is being stopped. The stop signals are held from the reaper's exec until they are
//! caught ([`crate::stop_signals`]); the agent starts with an empty signal mask and default
//! handlers.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::socket::{ControlMessageOwned, recvmsg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getppid};
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{SignalKind, signal};

use super::tree::{self, Proc};
use super::{Args, Report};

/// Between SIGTERM and SIGKILL for what is left when the run stops or the agent ends.
const GRACE: Duration = Duration::from_millis(1500);
/// How often the tree is scanned and signalled again while it is being stopped.
const TICK: Duration = Duration::from_millis(50);
/// How long the reaper goes on killing a tree that keeps producing processes (a fork-and-exit
/// chain can outrun a scan of `/proc`) before it gives up and says so.
const KILL_LIMIT: Duration = Duration::from_secs(10);
/// Most descriptors handoff hands over to hold (the worktree lease's lock).
const MAX_HELD: usize = 4;

/// Where the reaper is in stopping the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The agent runs; nothing is being stopped.
    Running,
    /// SIGTERM went to every descendant; SIGKILL follows at `until`.
    Terminating { until: Instant },
    /// Every descendant found is sent SIGKILL, again on each tick, until none is left.
    Killing,
}

/// Runs the reaper; returns its exit code (the agent's code, or 128 + the signal that ended
/// it; 125 when the reaper could not start the agent, 126/127 when its program could not be
/// run).
pub(super) fn run(args: &Args) -> i32 {
    let channel = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => return refuse(None, &format!("no channel to handoff on stdin: {e}")),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return refuse(Some(&channel), &format!("cannot start: {e}")),
    };
    runtime.block_on(reap_agent(args, channel))
}

/// The signals the reaper listens to, installed before anything can send them.
struct Listening {
    child: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    parent_death: tokio::signal::unix::Signal,
}

fn listen() -> std::io::Result<Listening> {
    Ok(Listening {
        child: signal(SignalKind::child())?,
        term: signal(SignalKind::terminate())?,
        int: signal(SignalKind::interrupt())?,
        hup: signal(SignalKind::hangup())?,
        parent_death: signal(SignalKind::user_defined1())?,
    })
}

async fn reap_agent(args: &Args, channel: UnixStream) -> i32 {
    let mut listening = match listen() {
        Ok(l) => l,
        Err(e) => return refuse(Some(&channel), &format!("cannot catch signals: {e}")),
    };
    crate::stop_signals::unblock_stop_signals();
    if let Err(e) = crate::platform::adopt_orphans() {
        return refuse(Some(&channel), &format!("cannot become a subreaper: {e}"));
    }
    // Other processes of the user may neither trace the reaper nor open its descriptors.
    crate::platform::deny_tracing();
    let _ = crate::platform::signal_on_parent_death(Signal::SIGUSR1);
    if !parent_is(args.parent) {
        return refuse(Some(&channel), "handoff ended before the agent started");
    }
    // The descriptors to hold (the worktree lease) arrive with the first byte; they stay
    // open, close-on-exec, until the reaper exits.
    let _held = match receive_held(&channel) {
        Ok(fds) => fds,
        Err(e) => return refuse(Some(&channel), &format!("no word from handoff: {e}")),
    };
    let prompt = match args.stdin {
        Some(n) => {
            let mut buf = vec![0u8; n];
            let mut reader = &channel;
            if let Err(e) = reader.read_exact(&mut buf) {
                return refuse(Some(&channel), &format!("cannot read the prompt: {e}"));
            }
            Some(buf)
        }
        None => None,
    };

    // The agent starts in a cgroup of its own where one can be made.
    let cgroup = super::cgroup::RunCgroup::make();
    let (agent, stdin, cgroup) = match start_agent(args, prompt.is_some(), cgroup) {
        Ok(started) => started,
        Err(e) => {
            let report = Report {
                spawn_error: Some(format!("{e}")),
                ..Report::default()
            };
            send(&channel, &report);
            return if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
        }
    };
    if let (Some(prompt), Some(mut stdin)) = (prompt, stdin) {
        std::thread::spawn(move || {
            // An agent that exits without reading its prompt closes the pipe: not an error.
            let _ = stdin.write_all(&prompt);
        });
    }
    let lifeline = channel
        .try_clone()
        .and_then(|c| {
            c.set_nonblocking(true)?;
            tokio::net::UnixStream::from_std(c)
        })
        .ok();

    let mut report = watch(
        args.parent,
        agent,
        &mut listening,
        lifeline,
        cgroup.as_ref(),
    )
    .await;
    report.cgroup = cgroup.as_ref().map(|c| c.path().display().to_string());
    send(&channel, &report);
    match (report.exit_code, report.signal_number) {
        (Some(code), _) => code,
        (None, Some(n)) => 128 + n,
        (None, None) => 125,
    }
}

/// Reads the channel until it ends (handoff is gone).
/// Starts the agent: in `cgroup` from birth where `clone3` allows; else with the reaper
/// stepping into the cgroup for the start and straight back out, so that killing the cgroup
/// spares it; else (or when the reaper cannot step out) in no cgroup of its own. Returns its
/// pid, the pipe to its standard input when it is prompted, and the cgroup it runs in.
fn start_agent(
    args: &Args,
    prompted: bool,
    cgroup: Option<super::cgroup::RunCgroup>,
) -> std::io::Result<(u32, Option<std::fs::File>, Option<super::cgroup::RunCgroup>)> {
    if let Some(dir) = cgroup.as_ref().and_then(|c| c.open())
        && let Some((pid, stdin)) = born_in(args, prompted, &dir)?
    {
        return Ok((pid, stdin, cgroup));
    }
    let mut command = Command::new(&args.program);
    command
        .args(&args.args)
        .stdin(if prompted {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    let joined = cgroup.as_ref().is_some_and(|c| c.join());
    let spawned = command.spawn();
    // A reaper that cannot step back out gives the cgroup up: killing it would kill the reaper.
    let cgroup = cgroup.filter(|c| joined && c.leave());
    let mut child = spawned?;
    let stdin = child
        .stdin
        .take()
        .map(|s| std::fs::File::from(std::os::fd::OwnedFd::from(s)));
    Ok((child.id(), stdin, cgroup))
}

/// The agent started by `clone3` in the cgroup open as `dir`; `None` when that is not
/// possible here (nothing was started).
fn born_in(
    args: &Args,
    prompted: bool,
    dir: &std::fs::File,
) -> std::io::Result<Option<(u32, Option<std::fs::File>)>> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let text = |s: &OsStr| CString::new(s.as_bytes()).ok();
    // A bare name is looked up on PATH: `Command` does that.
    let Some(program) = text(&args.program).filter(|p| p.as_bytes().contains(&b'/')) else {
        return Ok(None);
    };
    let Some(argv) = std::iter::once(args.program.as_os_str())
        .chain(args.args.iter().map(OsString::as_os_str))
        .map(text)
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let Some(envp) = std::env::vars_os()
        .map(|(k, v)| {
            let mut pair = k;
            pair.push("=");
            pair.push(v);
            text(&pair)
        })
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    // Both ends close on exec: the agent gets the read end as its standard input only.
    let (input, writer): (std::os::fd::OwnedFd, _) = if prompted {
        let (r, w) = std::io::pipe()?;
        (
            r.into(),
            Some(std::fs::File::from(std::os::fd::OwnedFd::from(w))),
        )
    } else {
        (std::fs::File::open("/dev/null")?.into(), None)
    };
    use crate::platform::CgroupSpawn;
    match crate::platform::spawn_in_cgroup(&program, &argv, &envp, input.as_fd(), dir.as_fd()) {
        CgroupSpawn::Started(pid) => Ok(Some((pid, writer))),
        CgroupSpawn::Unsupported => Ok(None),
        CgroupSpawn::Failed(e) => Err(e),
    }
}

async fn closed(lifeline: &mut Option<tokio::net::UnixStream>) {
    match lifeline {
        Some(stream) => {
            let mut buf = [0u8; 64];
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
        }
        None => std::future::pending().await,
    }
}

/// The loop: reaps, and stops the tree when the agent ends, handoff asks or handoff is gone,
/// until no child is left.
async fn watch(
    parent: u32,
    agent: u32,
    on: &mut Listening,
    mut lifeline: Option<tokio::net::UnixStream>,
    cgroup: Option<&super::cgroup::RunCgroup>,
) -> Report {
    // SIGKILL to the tree: to each process found, and to the whole cgroup at once.
    let kill_all = |me: u32| {
        if let Some(c) = cgroup {
            c.kill();
        }
        signal_all(&tree::descendants(&tree::scan(), me), Signal::SIGKILL);
    };
    let me = std::process::id();
    let mut report = Report::default();
    let mut agent_done = false;
    let mut stop = Stop::Running;
    let mut handoff_alive = true;
    let mut killing_since: Option<Instant> = None;
    loop {
        let none_left = reap(agent, &mut report, &mut agent_done);
        if agent_done && none_left {
            if let Some(c) = cgroup.filter(|c| c.populated()) {
                // Something left the reaper's tree but not the cgroup: it goes too.
                c.kill();
            }
            return report;
        }
        if let Stop::Killing = stop {
            let since = *killing_since.get_or_insert_with(Instant::now);
            if since.elapsed() > KILL_LIMIT {
                report.escaped = true;
                return report;
            }
        }
        if agent_done && stop == Stop::Running {
            // The agent ended: whatever it left behind (a `setsid` daemon, a background job)
            // goes too.
            let rest = tree::descendants(&tree::scan(), me);
            report.leftover = u32::try_from(rest.len()).unwrap_or(u32::MAX);
            stop = terminate(&rest);
            continue;
        }
        let ticking = stop != Stop::Running;
        let mut lost = false;
        let mut stop_asked = false;
        tokio::select! {
            _ = on.child.recv() => {}
            _ = on.term.recv() => stop_asked = true,
            _ = on.int.recv() => stop_asked = true,
            _ = on.hup.recv() => stop_asked = true,
            _ = on.parent_death.recv() => lost = !parent_is(parent),
            () = closed(&mut lifeline), if handoff_alive => {
                handoff_alive = false;
                lost = true;
            }
            () = tokio::time::sleep(TICK), if ticking => {}
        }
        if lost {
            report.lost_handoff = true;
            stop = Stop::Killing;
        } else if stop_asked && stop == Stop::Running {
            stop = terminate(&tree::descendants(&tree::scan(), me));
            continue;
        }
        match stop {
            Stop::Terminating { until } if Instant::now() >= until => {
                stop = Stop::Killing;
                kill_all(me);
            }
            Stop::Killing => kill_all(me),
            _ => {}
        }
    }
}

/// Sends SIGTERM to `procs`; SIGKILL follows after [`GRACE`].
fn terminate(procs: &[Proc]) -> Stop {
    signal_all(procs, Signal::SIGTERM);
    Stop::Terminating {
        until: Instant::now() + GRACE,
    }
}

/// Reaps every ended child; records the agent's status. `true` when no child is left.
fn reap(agent: u32, report: &mut Report, agent_done: &mut bool) -> bool {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                if pid.as_raw() as u32 == agent {
                    report.exit_code = Some(code);
                    *agent_done = true;
                }
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) => {
                if pid.as_raw() as u32 == agent {
                    report.signal = Some(signal.as_str().to_owned());
                    report.signal_number = Some(signal as i32);
                    *agent_done = true;
                }
            }
            Ok(WaitStatus::StillAlive) => return false,
            Ok(_) => {}
            Err(Errno::EINTR) => {}
            Err(_) => return true,
        }
    }
}

/// Signals each process, through a pidfd where the kernel has them, so that a process that
/// ended after the scan and whose id was reused is never hit.
fn signal_all(procs: &[Proc], signal: Signal) {
    for p in procs {
        signal_one(p, signal);
    }
}

fn signal_one(p: &Proc, signal: Signal) {
    // The descriptor names one process; it is the scanned one if its start time still matches
    // now that the descriptor pins it.
    let same = || tree::read(&p.pid.to_string()).is_some_and(|now| now.start_time == p.start_time);
    if !crate::platform::signal_pinned(p.pid, same, signal) {
        let _ = kill(Pid::from_raw(p.pid as i32), signal);
    }
}

fn parent_is(parent: u32) -> bool {
    getppid().as_raw() as u32 == parent
}

/// Reads the first byte from handoff and the descriptors sent with it (close-on-exec).
fn receive_held(channel: &UnixStream) -> std::io::Result<Vec<RawFd>> {
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; MAX_HELD]);
    let msg = loop {
        match recvmsg::<()>(
            channel.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            crate::platform::RECV_CLOEXEC,
        ) {
            Err(Errno::EINTR) => {}
            other => break other.map_err(std::io::Error::from)?,
        }
    };
    if msg.bytes == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(received) = cmsg {
            fds.extend(received);
        }
    }
    crate::platform::close_received_on_exec(&fds);
    Ok(fds)
}

fn send(channel: &UnixStream, report: &Report) {
    if let Ok(mut line) = serde_json::to_vec(report) {
        line.push(b'\n');
        let mut writer = channel;
        let _ = writer.write_all(&line);
    }
}

/// Ends the reaper before any agent started, saying why on the channel (when there is one).
fn refuse(channel: Option<&UnixStream>, why: &str) -> i32 {
    let report = Report {
        spawn_error: Some(format!("reaper: {why}")),
        ..Report::default()
    };
    if let Some(channel) = channel {
        send(channel, &report);
    }
    125
}
