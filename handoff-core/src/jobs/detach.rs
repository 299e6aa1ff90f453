//! Starting a job in the background ([`detach_job`]) and the supervisor that runs it
//! ([`supervise_job`], `handoff __job <id>`): the job's own `handoff <verb> …` as a child, the same
//! run a foreground command makes (reaper, lease, evidence), its result recorded at the end.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Stdio;

use camino::{Utf8Path, Utf8PathBuf};
use tokio::io::AsyncReadExt;

use super::{Job, JobId, JobOrigin, NewJob, ProcessRef};
use crate::task::{StoreError, TaskStore};

/// The hidden verb of a job's supervisor: `handoff __job <id>`.
pub const JOB_VERB: &str = "__job";

/// The flags whose value `-` means standard input: a detached job reads it now, into a
/// private file its command line names instead.
const STDIN_FLAGS: [&str; 2] = ["--instructions", "--note-file"];

/// File of a job's own command line in its directory (private: it may hold what the store
/// keeps masked).
const ARGV_FILE: &str = "argv.json";

/// Why a job could not be started. One line each.
#[derive(Debug, thiserror::Error)]
pub enum DetachError {
    /// The task store refused.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The job's directory, its files or its supervisor could not be made.
    #[error("cannot start the job: {0}")]
    Io(String),
}

/// A job just started: its record, and its supervisor.
#[derive(Debug, Clone)]
pub struct Detached {
    /// The job as recorded.
    pub job: Job,
}

/// Starts `exe <verb> <args>` as a background job: records it in `store`, moves a `-` value of
/// `--instructions` / `--note-file` into a private file (`stdin` holds what was read), and
/// starts its supervisor `exe __job <id>` in a new session, detached from the terminal, with
/// this process's environment. `masked` is `args` as the store may show them.
pub fn detach_job(
    store: &dyn TaskStore,
    exe: &Utf8Path,
    jobs_dir: &Utf8Path,
    verb: &str,
    args: Vec<String>,
    masked: Vec<String>,
    stdin: Option<Vec<u8>>,
) -> Result<Detached, DetachError> {
    let id = JobId::generate();
    let dir = jobs_dir.join(id.as_str());
    let io = |e: std::io::Error| DetachError::Io(e.to_string());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(io)?;
    let mut argv = args;
    if let Some(bytes) = stdin {
        let file = dir.join("stdin");
        private_write(&file, &bytes).map_err(io)?;
        for i in 0..argv.len() {
            let flag = argv[i].clone();
            if STDIN_FLAGS.contains(&flag.as_str())
                && argv.get(i + 1).map(String::as_str) == Some("-")
            {
                argv[i + 1] = file.to_string();
            } else if let Some(f) = STDIN_FLAGS.iter().find(|f| flag == format!("{f}=-")) {
                argv[i] = format!("{f}={file}");
            }
        }
    }
    let line = serde_json::to_vec(&(verb, &argv)).map_err(|e| DetachError::Io(e.to_string()))?;
    private_write(&dir.join(ARGV_FILE), &line).map_err(io)?;
    let value = |flag: &str| flag_value(&masked, flag);
    store.create_job(&NewJob {
        id: id.clone(),
        origin: JobOrigin::Cli,
        verb: verb.to_owned(),
        cwd: value("--cwd"),
        target: value("--harness").or_else(|| value("--to")),
        mode: value("--mode"),
        args: masked,
        started_at: crate::now_iso(),
        supervisor: None,
    })?;
    let mut cmd = std::process::Command::new(exe);
    // The job's own handoff cleans its PATH as this one did; it starts from the user's.
    if let Some(path) = crate::original_path() {
        cmd.env("PATH", path);
    }
    cmd.arg(JOB_VERB)
        .arg(id.as_str())
        .arg(jobs_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // The supervisor holds the stop signals until it catches them: `cancel` may signal it as
    // soon as it is recorded, below.
    // SAFETY: `setsid` and blocking signals are async-signal-safe and touch nothing of the
    // parent's state.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            crate::stop_signals::block_in_child()
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = store.finish_job(&id, crate::exit::PROVIDER_UNAVAILABLE, None);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(DetachError::Io(format!(
                "cannot start its supervisor {exe}: {e}"
            )));
        }
    };
    let supervisor = ProcessRef::of(child.id()).unwrap_or(ProcessRef {
        pid: child.id(),
        start_time: 0,
    });
    // The supervisor is not waited for: it outlives this process (init reaps it).
    drop(child);
    store.set_job_supervisor(&id, supervisor)?;
    Ok(Detached {
        job: store.job(&id)?,
    })
}

/// The job supervisor (`handoff __job <id> <jobs dir>`): runs the job's `exe <verb> <args>` as
/// its child, forwards SIGTERM and SIGINT to it (the run stops its agent and writes its result
/// with exit 9), and records how it ended: its exit code (9 when a signal ended it without
/// one) and the result line it printed. The job's directory is removed at the end.
pub async fn supervise_job(
    store: &dyn TaskStore,
    exe: &Utf8Path,
    id: &JobId,
    jobs_dir: &Utf8Path,
) -> Result<u8, DetachError> {
    let dir: Utf8PathBuf = jobs_dir.join(id.as_str());
    let finish = |code: u8, result: Option<&str>| -> Result<u8, DetachError> {
        store.finish_job(id, code, result)?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(code)
    };
    let argv = std::fs::read(dir.join(ARGV_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<(String, Vec<String>)>(&b).ok());
    let Some((verb, args)) = argv else {
        return finish(crate::exit::PROVIDER_UNAVAILABLE, None);
    };
    let mut cmd = tokio::process::Command::new(exe);
    if let Some(path) = crate::original_path() {
        cmd.env("PATH", path);
    }
    cmd.arg(&verb)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(false);
    // A supervisor killed outright takes its run down as SIGTERM would (the run stops its agent);
    // the job is then lost, never left running unseen. The run starts with the stop signals
    // held until it catches them: one forwarded before then waits instead of killing it
    // without a result.
    // SAFETY: asking for a parent-death signal and blocking signals are async-signal-safe and
    // touch only this child.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            crate::platform::signal_on_parent_death(nix::sys::signal::Signal::SIGTERM)?;
            crate::stop_signals::block_in_child()
        });
    }
    // Caught before the run exists, so that a cancel sent at once is forwarded, not fatal.
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    // Held since this process started (`detach_job`): one that came meanwhile arrives now.
    crate::stop_signals::unblock_stop_signals();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(_) => return finish(crate::exit::PROVIDER_UNAVAILABLE, None),
    };
    let pid = child.id();
    let mut stdout = child.stdout.take();
    let reader = tokio::spawn(async move {
        let mut buf = Vec::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_end(&mut buf).await;
        }
        buf
    });
    let status = {
        loop {
            tokio::select! {
                status = child.wait() => break status,
                Some(()) = async { term.as_mut()?.recv().await } => forward(pid),
                Some(()) = async { int.as_mut()?.recv().await } => forward(pid),
                // A job outlives the terminal that started it.
                Some(()) = async { hup.as_mut()?.recv().await } => {}
            }
        }
    };
    let out = reader.await.unwrap_or_default();
    let code = match status {
        Ok(s) => s
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .or_else(|| s.signal().map(|_| crate::exit::CANCELLED))
            .unwrap_or(crate::exit::PROVIDER_FAILED),
        Err(_) => crate::exit::PROVIDER_FAILED,
    };
    let text = String::from_utf8_lossy(&out);
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('{') && serde_json::from_str::<serde_json::Value>(l).is_ok());
    finish(code, line)
}

fn forward(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}

fn private_write(path: &Utf8Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// The value of `flag` in a command line (`--flag v` or `--flag=v`).
pub fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let eq = format!("{flag}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix(&eq).map(str::to_owned)
        }
    })
}
