//! A sandboxed run's state carried into the user's own store after the run, in the
//! background ([`Provider::import_sandboxed_state`]): the run's result does not wait for it.
//!
//! [`start`] hands the run's private directory, with the lock that keeps it from being swept, to
//! a detached `handoff __import` ([`IMPORT_VERB`], [`serve`]), which reads what to import on its
//! standard input, imports it and removes the directory. Until an import succeeds it is
//! recorded in `imports/` of the private work directory: `handoff doctor` lists the ones that
//! failed or whose importer died ([`records`]), and [`settle`] lets a reader of the user's store
//! wait for one under way.
//!
//! Nothing the agent wrote steers the importer: what it imports and where it reads come from
//! the run's handoff on the pipe, the record is written in a directory the agent's sandbox
//! never mounts, and the adapter's import treats the run directory as untrusted (it always has).

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use nix::fcntl::{Flock, FlockArg, OFlag};
use serde::{Deserialize, Serialize};

use crate::private_dir::PrivateDir;
use crate::provider::{Registry, SandboxedState};

/// The hidden verb of a background importer: `handoff __import`.
pub const IMPORT_VERB: &str = "__import";

/// The descriptor the importer finds the run directory's lock on.
const LOCK_FD: i32 = 3;

/// Records older than this are removed when a new import starts.
const KEEP_RECORDS: Duration = Duration::from_secs(14 * 24 * 3600);

/// Largest job read from the importer's standard input.
const MAX_JOB: u64 = 64 * 1024 * 1024;

/// What the importer is told on its standard input.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Job {
    harness: String,
    executable: Utf8PathBuf,
    env: BTreeMap<String, String>,
    parent_env: BTreeMap<String, String>,
    run_dir: Utf8PathBuf,
    cwd: Utf8PathBuf,
    stdout: String,
    record: Utf8PathBuf,
    /// Masked out of what the record says.
    secrets: Vec<String>,
}

/// How an import stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportState {
    /// Its importer is at work.
    Importing,
    /// It failed (`message` says why); the run's state is gone.
    Failed,
    /// Its importer died before it finished (recorded as importing, its directory no longer
    /// held).
    Lost,
}

/// One import that has not succeeded yet (`imports/<run>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportRecord {
    /// The run whose state it is.
    pub run_id: String,
    /// Its agent.
    pub harness: String,
    /// What is carried, as the receipt says it.
    pub what: String,
    /// When the import started.
    pub started_at: String,
    /// The run's private directory, held by the importer.
    pub run_dir: Utf8PathBuf,
    /// How it stands.
    pub state: ImportState,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where the records of imports are kept, under the private work directory `base`.
pub fn records_dir(base: &Utf8Path) -> Utf8PathBuf {
    base.join("imports")
}

/// A finished sandboxed run whose state is to be imported in the background.
pub(crate) struct Handover<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) harness: &'a str,
    pub(crate) what: &'a str,
    pub(crate) state: &'a SandboxedState<'a>,
    /// The run's known secrets: what the record says is masked with them.
    pub(crate) secrets: &'a [String],
}

/// Starts a detached `exe __import` that imports `handover`'s state and then removes the run
/// directory `dir`, which it holds from now on (it is swept by no one meanwhile). On success
/// the record's path; on failure `dir` comes back untouched, for the caller to import the
/// state itself.
pub(crate) fn start(
    exe: &Utf8Path,
    base: &Utf8Path,
    dir: PrivateDir,
    handover: &Handover<'_>,
) -> Result<Utf8PathBuf, (PrivateDir, String)> {
    let records = records_dir(base);
    let fail = |dir: PrivateDir, e: String| Err((dir, e));
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&records)
    {
        return fail(dir, format!("cannot create {records}: {e}"));
    }
    forget_old(&records);
    let record = records.join(format!("{}.json", handover.run_id));
    let entry = ImportRecord {
        run_id: handover.run_id.to_owned(),
        harness: handover.harness.to_owned(),
        what: handover.what.to_owned(),
        started_at: crate::now_iso(),
        run_dir: dir.path().to_owned(),
        state: ImportState::Importing,
        message: None,
    };
    if let Err(e) = write_record(&record, &entry) {
        return fail(dir, e);
    }
    let state = handover.state;
    let job = Job {
        harness: handover.harness.to_owned(),
        executable: state.executable.to_owned(),
        env: state.env.clone(),
        parent_env: state.parent_env.clone(),
        run_dir: state.run_dir.to_owned(),
        cwd: state.cwd.to_owned(),
        stdout: String::from_utf8_lossy(state.stdout).into_owned(),
        record: record.clone(),
        secrets: handover.secrets.to_vec(),
    };
    let bytes = match serde_json::to_vec(&job) {
        Ok(b) => b,
        Err(e) => return fail(dir, e.to_string()),
    };
    let lock = dir.lock_fd();
    let mut cmd = std::process::Command::new(exe);
    if let Some(path) = crate::original_path() {
        cmd.env("PATH", path);
    }
    cmd.arg(IMPORT_VERB)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: `setsid`, `dup2` and `fcntl` are async-signal-safe and touch only the child.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            // The lock goes to the importer as descriptor 3, open across exec.
            let done = if lock == LOCK_FD {
                nix::libc::fcntl(LOCK_FD, nix::libc::F_SETFD, 0)
            } else {
                nix::libc::dup2(lock, LOCK_FD)
            };
            if done < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_file(&record);
            return fail(dir, format!("cannot start {exe} {IMPORT_VERB}: {e}"));
        }
    };
    // The importer holds the lock now (the same open file): this process lets go of the
    // directory without unlocking it.
    dir.hand_over();
    if let Some(mut stdin) = child.stdin.take() {
        // An importer that died at once leaves its record importing, then lost.
        let _ = stdin.write_all(&bytes);
    }
    // Reaped here while this process lives; by init once it is gone.
    std::thread::spawn(move || child.wait());
    Ok(record)
}

/// The importer (`handoff __import`): imports the state its job names with `registry`'s
/// adapter, records how that went, removes the run directory. Returns the exit code.
pub async fn serve(registry: &Registry) -> u8 {
    // Started by hand, without the directory's lock: nothing to do.
    // SAFETY: F_GETFD only reads the descriptor table.
    #[allow(unsafe_code)]
    if unsafe { nix::libc::fcntl(LOCK_FD, nix::libc::F_GETFD) } < 0 {
        return crate::exit::USAGE;
    }
    // SAFETY: descriptor 3 is open (above); `start` set it up for this process, which owns it
    // from here.
    #[allow(unsafe_code)]
    let lock = unsafe { OwnedFd::from_raw_fd(LOCK_FD) };
    let mut text = Vec::new();
    if std::io::stdin()
        .take(MAX_JOB)
        .read_to_end(&mut text)
        .is_err()
    {
        return crate::exit::USAGE;
    }
    let Ok(job) = serde_json::from_slice::<Job>(&text) else {
        return crate::exit::USAGE;
    };
    // The descriptor must be the job's directory, as `start` opened it.
    if !same_file(&lock, &job.run_dir) {
        return crate::exit::USAGE;
    }
    let provider = registry
        .ids()
        .into_iter()
        .find(|id| id.as_str() == job.harness)
        .and_then(|id| registry.get(&id).cloned());
    let outcome = match provider {
        None => Err(format!("no adapter for {}", job.harness)),
        Some(provider) => {
            provider
                .import_sandboxed_state(&SandboxedState {
                    executable: &job.executable,
                    env: &job.env,
                    parent_env: &job.parent_env,
                    run_dir: &job.run_dir,
                    cwd: &job.cwd,
                    stdout: job.stdout.as_bytes(),
                })
                .await
        }
    };
    let _ = std::fs::remove_dir_all(&job.run_dir);
    drop(lock);
    match outcome {
        Ok(_) => {
            let _ = std::fs::remove_file(&job.record);
            crate::exit::OK
        }
        Err(why) => {
            if let Some(mut entry) = read_record(&job.record) {
                entry.state = ImportState::Failed;
                entry.message = Some(crate::redact(&why, &job.secrets).0);
                let _ = write_record(&job.record, &entry);
            }
            crate::exit::PROVIDER_FAILED
        }
    }
}

/// The imports under the private work directory `base` that have not succeeded: failed, lost,
/// or still under way. Records that cannot be read are skipped.
pub fn records(base: &Utf8Path) -> Vec<ImportRecord> {
    let Ok(entries) = std::fs::read_dir(records_dir(base)) else {
        return Vec::new();
    };
    let mut out: Vec<ImportRecord> = entries
        .flatten()
        .filter_map(|e| Utf8PathBuf::from_path_buf(e.path()).ok())
        .filter(|p| p.extension() == Some("json"))
        .filter_map(|p| read_record(&p))
        .map(|mut r| {
            if r.state == ImportState::Importing && !held(&r.run_dir) {
                r.state = ImportState::Lost;
            }
            r
        })
        .collect();
    out.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    out
}

/// Waits, at most `limit`, while an import of `harness`'s state into the user's store is under
/// way, so that a reader of that store finds what it carries. Returns whether none is left.
pub fn settle(base: &Utf8Path, harness: &str, limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        let busy = records(base)
            .iter()
            .any(|r| r.harness == harness && r.state == ImportState::Importing);
        if !busy {
            return true;
        }
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether a live process holds `dir`'s lock (an importer at work).
fn held(dir: &Utf8Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits())
        .open(dir)
    else {
        return false;
    };
    Flock::lock(file, FlockArg::LockExclusiveNonblock).is_err()
}

fn same_file(fd: &OwnedFd, path: &Utf8Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(on_fd) = nix::sys::stat::fstat(fd) else {
        return false;
    };
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_dir() && m.dev() == on_fd.st_dev && m.ino() == on_fd.st_ino)
}

fn read_record(path: &Utf8Path) -> Option<ImportRecord> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(64 * 1024).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes `entry` at `path` whole (a new file renamed over the old one), 0600.
fn write_record(path: &Utf8Path, entry: &ImportRecord) -> Result<(), String> {
    let bytes = serde_json::to_vec(entry).map_err(|e| e.to_string())?;
    let fresh = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&fresh)
        .and_then(|mut f| f.write_all(&bytes))
        .and_then(|()| std::fs::rename(&fresh, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&fresh);
        format!("cannot write {path}: {e}")
    })
}

/// Removes records (and files that are not records) older than [`KEEP_RECORDS`].
fn forget_old(records: &Utf8Path) {
    let Ok(entries) = std::fs::read_dir(records) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > KEEP_RECORDS);
        if old && e.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handed_over_directory_stays_locked_by_its_new_holder_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(tmp.path()).unwrap();
        let dir = crate::private_dir::PrivateDir::new(base, crate::PrivateDirKind::Run).unwrap();
        let path = dir.path().to_owned();
        // The importer's copy of the descriptor: the same open file, as `start` passes it.
        // SAFETY: a fresh duplicate, owned here from now on.
        #[allow(unsafe_code)]
        let theirs = unsafe { OwnedFd::from_raw_fd(nix::libc::dup(dir.lock_fd())) };
        dir.hand_over();
        // Neither removed nor unlocked by this process letting go: a sweep leaves it.
        assert!(path.is_dir());
        assert!(held(&path));
        drop(theirs);
        assert!(!held(&path), "the lock ends with its last holder");
    }

    #[test]
    fn a_record_importing_without_a_holder_is_lost_and_settle_does_not_wait_for_it() {
        let tmp = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(tmp.path()).unwrap();
        let held_dir =
            crate::private_dir::PrivateDir::new(base, crate::PrivateDirKind::Run).unwrap();
        let gone = base.join("handoff-run-gone");
        std::fs::create_dir_all(records_dir(base)).unwrap();
        for (run, dir) in [("a", held_dir.path().to_owned()), ("b", gone)] {
            let entry = ImportRecord {
                run_id: run.into(),
                harness: "opencode".into(),
                what: "session x".into(),
                started_at: format!("2026-12-07T00:00:0{}.000Z", run.len()),
                run_dir: dir,
                state: ImportState::Importing,
                message: None,
            };
            write_record(&records_dir(base).join(format!("{run}.json")), &entry).unwrap();
        }
        // A file planted next to them that is not a record is skipped.
        std::fs::write(records_dir(base).join("c.json"), "not json").unwrap();
        let states: Vec<(String, ImportState)> = records(base)
            .into_iter()
            .map(|r| (r.run_id, r.state))
            .collect();
        assert_eq!(
            states,
            vec![
                ("a".to_owned(), ImportState::Importing),
                ("b".to_owned(), ImportState::Lost)
            ]
        );
        // One under way: another agent's readers do not wait, this agent's do (up to the
        // limit).
        assert!(settle(base, "kiro", Duration::ZERO));
        assert!(!settle(base, "opencode", Duration::from_millis(120)));
        drop(held_dir);
        assert!(settle(base, "opencode", Duration::from_millis(120)));
    }
}
