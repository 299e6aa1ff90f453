//! The process supervisor: one agent process in its own process group, stdin fed, stdout and
//! stderr drained concurrently and bounded, killed as a group on timeout, cancel or overflow.
//! Adapters run their short commands (probes, calls into a CLI's session store) through it too
//! ([`run_command`]), so every process handoff starts is killed with its group.
//!
//! An agent runs under a reaper when one is given ([`ReaperSpec`], see [`crate::reaper`]):
//! then a process that leaves the group (`setsid`, a double fork) dies with the run too, the
//! run ends only once the agent's whole tree is gone, and the tree dies when handoff does.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::process::Stdio;
use std::time::Duration;

use camino::Utf8Path;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use crate::provider::{Invocation, StdinSource};
use crate::reaper::{Args as ReaperArgs, Report as ReaperReport};

/// Largest stdout or stderr kept from an agent; more is a contract failure.
pub const OUTPUT_LIMIT: usize = 1024 * 1024;
/// How long a process group gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(1500);
/// How long pipe readers may outlive the process (an escaped grandchild may hold them).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How long a reaper gets, after SIGTERM, to stop its tree (its own grace period, then
/// SIGKILL to every descendant) before handoff kills the group itself.
const REAPER_GRACE: Duration = Duration::from_millis(4500);

/// The reaper an agent runs under: a binary that answers to [`crate::reaper::REAPER_ARG`]
/// (the handoff binary), and descriptors it holds until the agent's tree is gone (the
/// worktree lease's lock).
#[derive(Debug)]
pub struct ReaperSpec {
    /// The binary.
    pub exe: camino::Utf8PathBuf,
    /// Descriptors handed to the reaper to hold.
    pub hold: Vec<OwnedFd>,
}

/// How an agent's processes were contained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// Only its process group was killed: a process that left the group may have survived.
    ProcessGroup,
    /// A reaper ran it and every descendant is gone.
    Reaper {
        /// Descendants still running when the agent ended (killed by the reaper).
        leftover: u32,
        /// The cgroup v2 the agent ran in and that was killed with it, where one could be
        /// made.
        cgroup: Option<String>,
    },
    /// The reaper cannot vouch for the tree: it ended without reporting (something killed
    /// it), was stopped, or gave up on a tree that outran it. Processes of the agent's tree
    /// may have survived.
    ReaperLost,
}

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself.
    Exited,
    /// The timeout expired and the group was killed.
    TimedOut,
    /// Cancellation was requested and the group was killed.
    Cancelled,
    /// stdout or stderr went over [`OUTPUT_LIMIT`] and the group was killed.
    OutputLimit {
        /// `stdout` or `stderr`.
        stream: &'static str,
    },
    /// The process could not be started.
    SpawnFailed {
        /// Why.
        message: String,
    },
}

/// What the supervisor observed.
#[derive(Debug, Clone)]
pub struct ProcessReport {
    /// How it ended.
    pub ending: Ending,
    /// Captured stdout (at most [`OUTPUT_LIMIT`] bytes).
    pub stdout: Vec<u8>,
    /// Captured stderr (at most [`OUTPUT_LIMIT`] bytes).
    pub stderr: Vec<u8>,
    /// Exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// Name of the signal that ended it, if any.
    pub signal: Option<String>,
    /// The process id (and process group id), when it started: the reaper's, under one.
    pub pid: Option<u32>,
    /// How its processes were contained.
    pub containment: Containment,
}

async fn drain<R: AsyncRead + Unpin>(
    mut reader: R,
    limit: usize,
    overflow: watch::Sender<bool>,
    tap: Option<mpsc::UnboundedSender<Vec<u8>>>,
) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    // Where the line being read started, for the tap.
    let mut line_start = 0;
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if buf.len() + n > limit {
                    let room = limit - buf.len();
                    buf.extend_from_slice(&chunk[..room]);
                    let _ = overflow.send(true);
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(tap) = &tap {
                    while let Some(end) = buf[line_start..].iter().position(|b| *b == b'\n') {
                        let _ = tap.send(buf[line_start..line_start + end].to_vec());
                        line_start += end + 1;
                    }
                }
            }
        }
    }
    if let Some(tap) = &tap
        && line_start < buf.len()
    {
        let _ = tap.send(buf[line_start..].to_vec());
    }
    buf
}

fn signal_group(pid: u32, signal: Signal) {
    // ESRCH (group already gone) is the normal case after a clean exit.
    let _ = killpg(Pid::from_raw(pid as i32), signal);
}

/// Runs `invocation` to completion under the supervisor.
pub async fn supervise(
    invocation: &Invocation,
    prompt: &[u8],
    timeout: Duration,
    cancel: watch::Receiver<bool>,
) -> ProcessReport {
    supervise_with_tap(invocation, prompt, timeout, cancel, None, None).await
}

/// [`supervise`], also sending each complete line of stdout to `tap` as it arrives (the last,
/// unterminated one when stdout closes), and running the agent under `reaper` when given.
pub async fn supervise_with_tap(
    invocation: &Invocation,
    prompt: &[u8],
    timeout: Duration,
    cancel: watch::Receiver<bool>,
    tap: Option<mpsc::UnboundedSender<Vec<u8>>>,
    reaper: Option<ReaperSpec>,
) -> ProcessReport {
    let containment = if reaper.is_some() {
        Containment::ReaperLost
    } else {
        Containment::ProcessGroup
    };
    match run(
        invocation,
        prompt,
        timeout,
        cancel,
        Stdout::Captured(tap),
        reaper,
    )
    .await
    {
        Ok(report) => report,
        Err(e) => ProcessReport {
            ending: Ending::SpawnFailed {
                message: format!("cannot start {}: {e}", invocation.program),
            },
            stdout: Vec::new(),
            stderr: Vec::new(),
            exit_code: None,
            signal: None,
            pid: None,
            containment,
        },
    }
}

/// [`supervise`] for a short command of handoff's own (a probe of an agent CLI, a call into a
/// CLI's session store) that nothing cancels: stdout goes to the file `(path, limit)` (created
/// or truncated) when one is given, at most `limit` bytes of it — more ends the command with
/// [`Ending::OutputLimit`]. `Err` when the file can't be created or the process can't start.
pub async fn run_command(
    invocation: &Invocation,
    stdin: &[u8],
    timeout: Duration,
    stdout_file: Option<(&Utf8Path, u64)>,
) -> std::io::Result<ProcessReport> {
    let stdout = match stdout_file {
        Some((path, limit)) => Stdout::File(tokio::fs::File::create(path).await?, limit),
        None => Stdout::Captured(None),
    };
    let (_never, cancel) = watch::channel(false);
    run(invocation, stdin, timeout, cancel, stdout, None).await
}

/// Where the child's stdout goes.
enum Stdout {
    /// A pipe drained into the report (bounded), each line also sent to the tap.
    Captured(Option<mpsc::UnboundedSender<Vec<u8>>>),
    /// A file, written up to the limit.
    File(tokio::fs::File, u64),
}

/// Copies `reader` into `file` until its end or `limit` bytes (then `overflow` is sent).
async fn drain_to_file<R: AsyncRead + Unpin>(
    mut reader: R,
    mut file: tokio::fs::File,
    limit: u64,
    overflow: watch::Sender<bool>,
) -> Vec<u8> {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut written: u64 = 0;
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = usize::try_from(limit - written).unwrap_or(usize::MAX);
                if n > room {
                    let _ = file.write_all(&chunk[..room]).await;
                    let _ = overflow.send(true);
                    break;
                }
                if file.write_all(&chunk[..n]).await.is_err() {
                    break;
                }
                written += n as u64;
            }
        }
    }
    let _ = file.flush().await;
    Vec::new()
}

async fn run(
    invocation: &Invocation,
    prompt: &[u8],
    timeout: Duration,
    mut cancel: watch::Receiver<bool>,
    stdout: Stdout,
    reaper: Option<ReaperSpec>,
) -> std::io::Result<ProcessReport> {
    let prompted = matches!(invocation.stdin, StdinSource::Prompt);
    let (mut cmd, channel) = match &reaper {
        None => {
            let mut cmd = tokio::process::Command::new(invocation.program.as_std_path());
            cmd.args(&invocation.args).stdin(if prompted {
                Stdio::piped()
            } else {
                Stdio::null()
            });
            (cmd, None)
        }
        Some(spec) => {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
            let args = ReaperArgs {
                parent: std::process::id(),
                stdin: prompted.then_some(prompt.len()),
                program: invocation.program.as_os_str().to_owned(),
                args: invocation.args.iter().map(Into::into).collect(),
            };
            let mut cmd = tokio::process::Command::new(spec.exe.as_std_path());
            cmd.args(args.to_argv())
                .stdin(Stdio::from(OwnedFd::from(theirs)));
            // A run cancelled as the reaper starts signals it at once: held until the reaper
            // catches them, the stop signals cannot kill it before it can report.
            // SAFETY: blocking signals is async-signal-safe and touches only the child.
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(crate::stop_signals::block_in_child);
            }
            (cmd, Some(ours))
        }
    };
    cmd.env_clear()
        .envs(&invocation.env)
        .current_dir(invocation.cwd.as_std_path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // A reaper is never killed from here on a drop (its tree would escape): its channel
        // closes instead, and it kills the tree.
        .kill_on_drop(channel.is_none());

    let mut child = cmd.spawn()?;
    drop(cmd);
    let pid = child.id();

    let report_task = match (channel, &reaper) {
        (Some(channel), Some(spec)) => Some(AbortOnDrop(Some(talk_to_reaper(
            channel,
            &spec.hold,
            prompted.then(|| prompt.to_vec()),
        )?))),
        _ => None,
    };
    drop(reaper);
    if let Some(mut stdin) = child.stdin.take() {
        let prompt = prompt.to_vec();
        tokio::spawn(async move {
            // An agent that exits without reading its prompt closes the pipe: not our error.
            let _ = stdin.write_all(&prompt).await;
            let _ = stdin.shutdown().await;
        });
    }
    let (overflow_tx, mut overflow_rx) = watch::channel(false);
    let out_task = child.stdout.take().map(|r| match stdout {
        Stdout::Captured(tap) => tokio::spawn(drain(r, OUTPUT_LIMIT, overflow_tx.clone(), tap)),
        Stdout::File(file, limit) => {
            tokio::spawn(drain_to_file(r, file, limit, overflow_tx.clone()))
        }
    });
    let (err_overflow_tx, mut err_overflow_rx) = watch::channel(false);
    let err_task = child
        .stderr
        .take()
        .map(|r| tokio::spawn(drain(r, OUTPUT_LIMIT, err_overflow_tx, None)));
    drop(overflow_tx);

    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);

    let mut ending = Ending::Exited;
    let mut cancel_live = true;
    if *cancel.borrow() {
        ending = Ending::Cancelled;
    }
    // A reaper that something stopped (SIGSTOP from the agent: same user) can neither reap
    // nor kill: it is continued, and the run's containment counts as broken.
    let mut tampered = false;
    let mut watch_reaper = tokio::time::interval(REAPER_CHECK);
    let status = loop {
        if ending != Ending::Exited {
            break None;
        }
        tokio::select! {
            status = child.wait() => break status.ok(),
            _ = watch_reaper.tick(), if report_task.is_some() => {
                if let Some(pid) = pid
                    && is_stopped(pid)
                {
                    tampered = true;
                    let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
                }
            }
            () = &mut deadline => { ending = Ending::TimedOut; break None; }
            res = cancel.changed(), if cancel_live => {
                match res {
                    Ok(()) if *cancel.borrow() => { ending = Ending::Cancelled; break None; }
                    Ok(()) => {}
                    // The sender is gone: cancellation can no longer be requested.
                    Err(_) => cancel_live = false,
                }
            }
            res = overflow_rx.changed(), if res_ok(&overflow_rx) => {
                if res.is_ok() && *overflow_rx.borrow() { ending = Ending::OutputLimit { stream: "stdout" }; break None; }
            }
            res = err_overflow_rx.changed(), if res_ok(&err_overflow_rx) => {
                if res.is_ok() && *err_overflow_rx.borrow() { ending = Ending::OutputLimit { stream: "stderr" }; break None; }
            }
        }
    };
    let status = match status {
        Some(s) => Some(s),
        None => {
            // A reaper passes SIGTERM on to the whole tree and SIGKILLs it after its own grace
            // period; it gets that long before the group is killed from here.
            if let Some(pid) = pid {
                if report_task.is_some() {
                    // The reaper passes it on, once, to every process of the tree.
                    let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
                    let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
                } else {
                    signal_group(pid, Signal::SIGTERM);
                }
            }
            let grace = if report_task.is_some() {
                REAPER_GRACE
            } else {
                GRACE
            };
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(s) => s.ok(),
                Err(_) => {
                    if let Some(pid) = pid {
                        signal_group(pid, Signal::SIGKILL);
                    }
                    child.wait().await.ok()
                }
            }
        }
    };
    // Whatever the agent left running in its group dies with it.
    if let Some(pid) = pid {
        signal_group(pid, Signal::SIGKILL);
    }

    let collect = |task: Option<tokio::task::JoinHandle<Vec<u8>>>| async move {
        match task {
            Some(t) => match tokio::time::timeout(DRAIN_GRACE, t).await {
                Ok(Ok(buf)) => buf,
                _ => Vec::new(),
            },
            None => Vec::new(),
        }
    };
    let reaper_report = match report_task {
        Some(mut task) => Some(
            collect(task.0.take())
                .await
                .split(|b| *b == b'\n')
                .next()
                .and_then(|line| serde_json::from_slice::<ReaperReport>(line).ok()),
        ),
        None => None,
    };
    let stdout = collect(out_task).await;
    let stderr = collect(err_task).await;
    // An agent that exits the moment its output was cut can be seen exiting first: the cut
    // output still makes the ending, once the streams are drained and their flags final.
    if ending == Ending::Exited {
        if *overflow_rx.borrow() {
            ending = Ending::OutputLimit { stream: "stdout" };
        } else if *err_overflow_rx.borrow() {
            ending = Ending::OutputLimit { stream: "stderr" };
        }
    }

    use std::os::unix::process::ExitStatusExt;
    let mut exit_code = status.and_then(|s| s.code());
    let mut signal = status
        .and_then(|s| s.signal())
        .and_then(|n| Signal::try_from(n).ok())
        .map(|s| s.as_str().to_owned());
    if matches!(&reaper_report, Some(None)) || tampered {
        // The reaper cannot vouch for the tree; where it had put the agent in a cgroup of its
        // own, that cgroup still holds whatever survived, and goes now.
        if let Some(pid) = pid {
            let _ =
                tokio::task::spawn_blocking(move || crate::reaper::cgroup::kill_left_by(pid)).await;
        }
    }
    let containment = match reaper_report {
        None => Containment::ProcessGroup,
        Some(None) => Containment::ReaperLost,
        Some(Some(report)) if tampered || report.escaped => Containment::ReaperLost,
        Some(Some(report)) => {
            // The reaper's own status mirrors the agent's; the report says it exactly.
            exit_code = report.exit_code;
            signal = report.signal;
            if let Some(message) = report.spawn_error
                && ending == Ending::Exited
            {
                ending = Ending::SpawnFailed {
                    message: format!("cannot start {}: {message}", invocation.program),
                };
            }
            Containment::Reaper {
                leftover: report.leftover,
                cgroup: report.cgroup,
            }
        }
    };
    Ok(ProcessReport {
        ending,
        stdout,
        stderr,
        exit_code,
        signal,
        pid,
        containment,
    })
}

/// How often a running reaper is checked for having been stopped.
const REAPER_CHECK: Duration = Duration::from_millis(250);

/// Whether `/proc` shows `pid` stopped (by a signal or a tracer).
fn is_stopped(pid: u32) -> bool {
    crate::reaper::tree::read(&pid.to_string()).is_some_and(|p| matches!(p.state, 'T' | 't'))
}

/// The task reading the reaper's channel: aborted (which closes the channel, so the reaper
/// kills the tree) when the run is dropped before it ends.
struct AbortOnDrop(Option<tokio::task::JoinHandle<Vec<u8>>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// Hands the reaper what it holds and the prompt, then keeps the channel open (its lifeline)
/// and reads the reaper's report until the reaper exits.
fn talk_to_reaper(
    channel: std::os::unix::net::UnixStream,
    hold: &[OwnedFd],
    prompt: Option<Vec<u8>>,
) -> std::io::Result<tokio::task::JoinHandle<Vec<u8>>> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fds: Vec<RawFd> = hold.iter().map(AsRawFd::as_raw_fd).collect();
    let rights = [ControlMessage::ScmRights(&fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    // The socket is new and empty: one byte never blocks.
    sendmsg::<()>(
        channel.as_raw_fd(),
        &[std::io::IoSlice::new(b"h")],
        cmsgs,
        MsgFlags::empty(),
        None,
    )
    .map_err(std::io::Error::from)?;
    channel.set_nonblocking(true)?;
    let mut channel = tokio::net::UnixStream::from_std(channel)?;
    Ok(tokio::spawn(async move {
        if let Some(prompt) = prompt {
            // A reaper that refused to start the agent may not read it all: its report
            // still follows.
            let _ = channel.write_all(&prompt).await;
        }
        let mut report = Vec::new();
        let _ = (&mut channel)
            .take(64 * 1024)
            .read_to_end(&mut report)
            .await;
        report
    }))
}

fn res_ok(rx: &watch::Receiver<bool>) -> bool {
    // Stop polling a channel whose sender is gone (the reader finished).
    rx.has_changed().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::provider::AnswerSource;

    fn sh(script: &str) -> Invocation {
        let mut env = BTreeMap::new();
        env.insert("PATH".into(), "/usr/bin:/bin".into());
        Invocation {
            sandbox: None,
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env,
            cwd: "/".into(),
            stdin: StdinSource::Prompt,
            dirs: vec![],
            files: vec![],
            answer: AnswerSource::Stdout,
            policy: serde_json::Value::Null,
            secrets: vec![],
        }
    }

    fn alive(pid: i32) -> bool {
        nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok()
    }

    #[tokio::test]
    async fn captures_output_and_exit_code() {
        let (_tx, rx) = watch::channel(false);
        let r = supervise(
            &sh("cat; echo err >&2; exit 3"),
            b"hello",
            Duration::from_secs(10),
            rx,
        )
        .await;
        assert_eq!(r.ending, Ending::Exited);
        assert_eq!(r.stdout, b"hello");
        assert_eq!(r.stderr, b"err\n");
        assert_eq!(r.exit_code, Some(3));
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("gc");
        let script = format!("sleep 1000 & echo $! > {}; wait", pidfile.display());
        let (_tx, rx) = watch::channel(false);
        let r = supervise(&sh(&script), b"", Duration::from_millis(500), rx).await;
        assert_eq!(r.ending, Ending::TimedOut);
        let gc: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild was in the group: it must be gone (reaped by init or a zombie at most).
        std::thread::sleep(Duration::from_millis(200));
        let stat = std::fs::read_to_string(format!("/proc/{gc}/stat")).unwrap_or_default();
        assert!(
            !alive(gc) || stat.contains(") Z "),
            "grandchild {gc} survived: {stat}"
        );
    }

    #[tokio::test]
    async fn cancel_kills_and_reports() {
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            supervise(&sh("sleep 1000"), b"", Duration::from_secs(60), rx).await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        tx.send(true).unwrap();
        let r = task.await.unwrap();
        assert_eq!(r.ending, Ending::Cancelled);
        assert_eq!(r.signal.as_deref(), Some("SIGTERM"));
    }

    #[tokio::test]
    async fn output_over_the_limit_is_cut_and_killed() {
        let (_tx, rx) = watch::channel(false);
        let r = supervise(
            &sh("head -c 3000000 /dev/zero; sleep 100"),
            b"",
            Duration::from_secs(30),
            rx,
        )
        .await;
        assert_eq!(r.ending, Ending::OutputLimit { stream: "stdout" });
        assert_eq!(r.stdout.len(), OUTPUT_LIMIT);
    }

    #[tokio::test]
    async fn output_over_the_limit_is_cut_even_when_the_agent_exits_at_once() {
        // The agent's last write fits in the pipe, so it can exit 0 before the limit is
        // crossed on this side: its exit and the cut race, and the cut must win every time.
        for stream in ["stdout", "stderr"] {
            let redirect = if stream == "stderr" { " >&2" } else { "" };
            for _ in 0..100 {
                let (_tx, rx) = watch::channel(false);
                let r = supervise(
                    &sh(&format!("head -c 1060000 /dev/zero{redirect}; exit 0")),
                    b"",
                    Duration::from_secs(30),
                    rx,
                )
                .await;
                assert_eq!(r.ending, Ending::OutputLimit { stream });
            }
        }
    }

    #[tokio::test]
    async fn a_command_writes_stdout_to_a_file_up_to_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = Utf8Path::from_path(dir.path()).unwrap().join("out");
        // Past the in-memory limit, within the file's.
        let r = run_command(
            &sh("cat >/dev/null; head -c 3000000 /dev/zero; echo err >&2"),
            b"in",
            Duration::from_secs(30),
            Some((&file, 4_000_000)),
        )
        .await
        .unwrap();
        assert_eq!(r.ending, Ending::Exited);
        assert_eq!(r.exit_code, Some(0));
        assert!(r.stdout.is_empty());
        assert_eq!(r.stderr, b"err\n");
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 3_000_000);

        // A command that writes without end is stopped at the limit.
        let r = run_command(
            &sh("cat /dev/zero"),
            b"",
            Duration::from_secs(30),
            Some((&file, 1_000_000)),
        )
        .await
        .unwrap();
        assert_eq!(r.ending, Ending::OutputLimit { stream: "stdout" });
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 1_000_000);
    }

    #[tokio::test]
    async fn a_command_that_times_out_dies_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("gc");
        let script = format!("sleep 1000 & echo $! > {}; wait", pidfile.display());
        let r = run_command(&sh(&script), b"", Duration::from_millis(500), None)
            .await
            .unwrap();
        assert_eq!(r.ending, Ending::TimedOut);
        let gc: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let stat = std::fs::read_to_string(format!("/proc/{gc}/stat")).unwrap_or_default();
        assert!(
            !alive(gc) || stat.contains(") Z "),
            "grandchild {gc} survived: {stat}"
        );
    }

    #[tokio::test]
    async fn a_command_that_cannot_start_is_an_error() {
        let mut inv = sh("true");
        inv.program = "/nonexistent/agent".into();
        let err = run_command(&inv, b"", Duration::from_secs(1), None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn spawn_failure_is_reported() {
        let (_tx, rx) = watch::channel(false);
        let mut inv = sh("true");
        inv.program = "/nonexistent/agent".into();
        let r = supervise(&inv, b"", Duration::from_secs(1), rx).await;
        assert!(matches!(r.ending, Ending::SpawnFailed { .. }));
    }
}
