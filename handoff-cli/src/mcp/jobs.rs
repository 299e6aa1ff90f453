//! The `handoff` child processes the MCP server runs: one [`Job`] each, kept for the server's
//! life, and recorded in the task store while they run (`handoff jobs` lists them; they die
//! with the server, and one still recorded as running after that is reported lost).

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::sync::watch;

use handoff_core::{JobId, JobOrigin, NewJob, PrivateDir, ProcessRef, TaskStore};

/// How much of a child's stdout is kept (a result line is far smaller).
const STDOUT_LIMIT: usize = 64 << 20;
/// How much of the end of a child's stderr is kept.
const STDERR_TAIL: usize = 64 << 10;
/// How long a job gets between SIGTERM and SIGKILL when the server shuts down (the CLI stops
/// its agent within a few seconds of SIGTERM).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long the output readers may run on after the child exited.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// One `handoff` command line to run: the verb, its flags, and texts to pass as private files.
#[derive(Debug)]
pub struct Launch {
    pub verb: &'static str,
    pub args: Vec<String>,
    /// (flag, text): the text is written to a new private file passed as `flag <path>`.
    pub inline: Vec<(&'static str, String)>,
}

impl Launch {
    pub fn new(verb: &'static str) -> Launch {
        Launch {
            verb,
            args: Vec::new(),
            inline: Vec::new(),
        }
    }
}

/// How a job's process ended.
#[derive(Debug)]
pub struct Finished {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
    /// The CLI's one-line message: the first line of its stderr that is not a warning, without
    /// the `handoff: ` (or clap's `error: `) prefix.
    pub fn message(&self) -> Option<String> {
        let line = self
            .stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| {
                l.strip_prefix("handoff: ")
                    .or_else(|| l.strip_prefix("error: "))
                    .unwrap_or(l)
            })
            .find(|l| !l.starts_with("warning: "))
            .map(str::to_owned);
        match (line, self.signal) {
            (Some(l), _) => Some(l),
            (None, Some(s)) => Some(format!("killed by signal {s}")),
            (None, None) => None,
        }
    }

    /// The result JSON's `status` (`outcome` for `continue`).
    fn status(&self) -> Option<String> {
        let v: Value = serde_json::from_str(self.stdout.trim()).ok()?;
        v.get("status")
            .or_else(|| v.get("outcome"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    }
}

/// A `handoff` child process started by the server.
pub struct Job {
    pub id: String,
    pub verb: &'static str,
    pub pid: Option<u32>,
    started: Instant,
    cancel_requested: AtomicBool,
    done: watch::Receiver<Option<Arc<Finished>>>,
}

impl Job {
    pub fn elapsed(&self) -> Duration {
        match self.finished() {
            Some(f) => f.elapsed,
            None => self.started.elapsed(),
        }
    }

    /// The end of the job, if it has ended.
    pub fn finished(&self) -> Option<Arc<Finished>> {
        self.done.borrow().clone()
    }

    /// Waits for the job to end.
    pub async fn wait(&self) -> Arc<Finished> {
        let mut rx = self.done.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(f) => f.clone().unwrap_or_else(lost),
            Err(_) => lost(),
        }
    }

    /// Asks the job to stop (SIGTERM, once): the CLI stops its agent and reports `cancelled`.
    pub fn terminate(&self) {
        if self.cancel_requested.swap(true, Ordering::SeqCst) || self.finished().is_some() {
            return;
        }
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
    }

    /// Kills the job's process group (it was started as its own group's leader).
    fn kill(&self) {
        if self.finished().is_some() {
            return;
        }
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }

    /// `{jobId, verb, state, pid, elapsedMs, exitCode, status, cancelRequested}`; `state` is
    /// `running`, `finished` or `cancelled` (exit 9, or killed after a cancel).
    pub fn status(&self) -> Value {
        let finished = self.finished();
        let cancel_requested = self.cancel_requested.load(Ordering::SeqCst);
        let state = match &finished {
            None => "running",
            Some(f) if f.exit_code == Some(i32::from(handoff_core::exit::CANCELLED)) => "cancelled",
            Some(f) if f.exit_code.is_none() && cancel_requested => "cancelled",
            Some(_) => "finished",
        };
        json!({
            "jobId": self.id,
            "verb": self.verb,
            "state": state,
            "pid": self.pid,
            "elapsedMs": u64::try_from(self.elapsed().as_millis()).unwrap_or(u64::MAX),
            "exitCode": finished.as_ref().and_then(|f| f.exit_code),
            "signal": finished.as_ref().and_then(|f| f.signal),
            "status": finished.as_ref().and_then(|f| f.status()),
            "cancelRequested": cancel_requested,
        })
    }
}

fn lost() -> Arc<Finished> {
    Arc::new(Finished {
        exit_code: None,
        signal: None,
        stdout: String::new(),
        stderr: "handoff: the job's supervisor stopped".into(),
        elapsed: Duration::ZERO,
    })
}

/// Every job of the server, and what starting one needs.
pub struct Jobs {
    exe: PathBuf,
    dir: PrivateDir,
    all: Mutex<Vec<Arc<Job>>>,
    closing: AtomicBool,
    /// Where the jobs are recorded; `None` when the store cannot be opened (the jobs still run).
    store: Option<Arc<dyn TaskStore>>,
}

impl Jobs {
    pub fn new(exe: PathBuf, dir: PrivateDir, store: Option<Arc<dyn TaskStore>>) -> Jobs {
        Jobs {
            exe,
            dir,
            all: Mutex::new(Vec::new()),
            closing: AtomicBool::new(false),
            store,
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.all().into_iter().find(|j| j.id == id)
    }

    pub fn all(&self) -> Vec<Arc<Job>> {
        self.all.lock().map(|a| a.clone()).unwrap_or_default()
    }

    /// Starts `handoff <verb> <args…>` with stdout and stderr captured, in a process group of
    /// its own (so only this server decides when it stops), and its stdin a lifeline that ends
    /// when this server does.
    pub fn start(&self, launch: Launch) -> Result<Arc<Job>, String> {
        if self.closing.load(Ordering::SeqCst) {
            return Err("the handoff MCP server is shutting down".into());
        }
        let job_id = JobId::generate();
        let id = job_id.to_string();
        let mut args = launch.args;
        // What the store shows: the command line before private files were added to it.
        let shown = args.clone();
        let mut files = Vec::new();
        for (flag, text) in &launch.inline {
            let name = format!("{id}-{}.txt", flag.trim_start_matches('-'));
            match self.dir.write_file(&name, text.as_bytes()) {
                Ok(path) => {
                    args.push((*flag).to_owned());
                    args.push(path.to_string());
                    files.push(path.into_std_path_buf());
                }
                Err(e) => {
                    remove(&files);
                    return Err(format!("cannot write {}/{name}: {e}", self.dir.path()));
                }
            }
        }
        let mut command = tokio::process::Command::new(&self.exe);
        if let Some(path) = handoff_core::original_path() {
            command.env("PATH", path);
        }
        command
            .arg(launch.verb)
            .args(&args)
            .env("HANDOFF_LIFELINE", format!("stdin:{}", std::process::id()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        let started = Instant::now();
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => {
                remove(&files);
                return Err(format!("cannot start {}: {e}", self.exe.display()));
            }
        };
        let recorded = self.store.clone().filter(|store| {
            let value = |flag: &str| handoff_core::flag_value(&shown, flag);
            store
                .create_job(&NewJob {
                    id: job_id.clone(),
                    origin: JobOrigin::Mcp,
                    verb: launch.verb.to_owned(),
                    args: shown.clone(),
                    cwd: value("--cwd"),
                    target: value("--harness").or_else(|| value("--to")),
                    mode: value("--mode"),
                    started_at: handoff_core::now_iso(),
                    supervisor: child.id().and_then(ProcessRef::of),
                })
                .is_ok()
        });
        let (tx, rx) = watch::channel(None);
        let job = Arc::new(Job {
            id,
            verb: launch.verb,
            pid: child.id(),
            started,
            cancel_requested: AtomicBool::new(false),
            done: rx,
        });
        // The job's standard input, never written, held until it exits: when this server dies,
        // however it dies, the job reads its end and stops (`HANDOFF_LIFELINE=stdin:<pid>`).
        let lifeline = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        tokio::spawn(async move {
            let out = tokio::spawn(read_head(stdout, STDOUT_LIMIT));
            let err = tokio::spawn(read_tail(stderr, STDERR_TAIL));
            let status = child.wait().await;
            drop(lifeline);
            let elapsed = started.elapsed();
            let stdout = tokio::time::timeout(DRAIN_GRACE, out).await;
            let stderr = tokio::time::timeout(DRAIN_GRACE, err).await;
            remove(&files);
            let (exit_code, signal) = match status {
                Ok(s) => (s.code(), s.signal()),
                Err(_) => (None, None),
            };
            let stdout = stdout.ok().and_then(Result::ok).unwrap_or_default();
            if let Some(store) = &recorded {
                let code = exit_code
                    .and_then(|c| u8::try_from(c).ok())
                    .unwrap_or(handoff_core::exit::CANCELLED);
                let text = String::from_utf8_lossy(&stdout);
                let line = text
                    .lines()
                    .rev()
                    .map(str::trim)
                    .find(|l| l.starts_with('{') && serde_json::from_str::<Value>(l).is_ok());
                let _ = store.finish_job(&job_id, code, line);
            }
            let _ = tx.send(Some(Arc::new(Finished {
                exit_code,
                signal,
                stdout: String::from_utf8_lossy(&stdout).into_owned(),
                stderr: String::from_utf8_lossy(
                    &stderr.ok().and_then(Result::ok).unwrap_or_default(),
                )
                .into_owned(),
                elapsed,
            })));
        });
        if let Ok(mut all) = self.all.lock() {
            all.push(job.clone());
        }
        Ok(job)
    }

    /// Stops every running job: SIGTERM, then SIGKILL after the grace period; refuses new
    /// jobs from now on.
    pub async fn shutdown(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let running: Vec<Arc<Job>> = self
            .all()
            .into_iter()
            .filter(|j| j.finished().is_none())
            .collect();
        for job in &running {
            job.terminate();
        }
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        for job in &running {
            if tokio::time::timeout_at(deadline, job.wait()).await.is_err() {
                job.kill();
                let _ = tokio::time::timeout(DRAIN_GRACE, job.wait()).await;
            }
        }
    }
}

fn remove(files: &[PathBuf]) {
    for f in files {
        let _ = std::fs::remove_file(f);
    }
}

/// Reads everything, keeping the first `limit` bytes.
async fn read_head<R: AsyncRead + Unpin>(reader: Option<R>, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut reader) = reader else {
        return kept;
    };
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
            }
        }
    }
}

/// Reads everything, keeping the last `limit` bytes.
async fn read_tail<R: AsyncRead + Unpin>(reader: Option<R>, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut reader) = reader else {
        return kept;
    };
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > limit {
                    kept.drain(..kept.len() - limit);
                }
            }
        }
    }
}

/// The server's stdin, which reports end of file (the client went away) as soon as it is read.
pub struct EofWatch<R> {
    inner: R,
    closed: watch::Sender<bool>,
}

impl<R> EofWatch<R> {
    pub fn new(inner: R, closed: watch::Sender<bool>) -> EofWatch<R> {
        EofWatch { inner, closed }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for EofWatch<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let eof = match &poll {
            Poll::Ready(Ok(())) => buf.filled().len() == before && buf.remaining() > 0,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        if eof {
            self.closed.send_replace(true);
        }
        poll
    }
}
