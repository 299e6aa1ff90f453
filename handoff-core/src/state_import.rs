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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::private_dir::{PrivateDir, held};
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
    /// What the record says (written again as `failed` when the import fails).
    entry: ImportRecord,
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
    // Never through a symlink, never a directory another user can write.
    if let Err(e) = crate::lease::ensure_private_dir(&records) {
        return fail(dir, e.to_string());
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
    let forget = |dir: PrivateDir, e: String| {
        let _ = std::fs::remove_file(&record);
        Err((dir, e))
    };
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
        entry,
        secrets: handover.secrets.to_vec(),
    };
    let bytes = match serde_json::to_vec(&job) {
        Ok(b) => b,
        Err(e) => return forget(dir, e.to_string()),
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
        Err(e) => return forget(dir, format!("cannot start {exe} {IMPORT_VERB}: {e}")),
    };
    // The importer holds the lock now (the same open file): this process lets go of the
    // directory without unlocking it.
    dir.hand_over();
    // The job is written, and the importer reaped, by a thread of its own: an importer slow
    // to read never holds up the run's result. Once this process is gone, init reaps it.
    let stdin = child.stdin.take();
    std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // An importer that died at once leaves its record importing, then lost.
            let _ = stdin.write_all(&bytes);
            // Closed here: the importer reads to its end.
            drop(stdin);
        }
        child.wait()
    });
    Ok(record)
}

/// The run directory's lock an importer was started with (descriptor 3), taken before
/// anything else of the process opens a file: `None` when there is none (started by hand).
/// It is closed on exec from here, so no program the import runs holds the directory.
pub fn take_lock() -> Option<std::fs::File> {
    // SAFETY: F_GETFD only reads the descriptor table.
    #[allow(unsafe_code)]
    if unsafe { nix::libc::fcntl(LOCK_FD, nix::libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: descriptor 3 is open (above) and nothing of this process uses it: `start` set it
    // up for this process, which owns it from here.
    #[allow(unsafe_code)]
    let fd = unsafe { OwnedFd::from_raw_fd(LOCK_FD) };
    // SAFETY: F_SETFD on a descriptor this process owns.
    #[allow(unsafe_code)]
    unsafe {
        nix::libc::fcntl(fd.as_raw_fd(), nix::libc::F_SETFD, nix::libc::FD_CLOEXEC);
    }
    Some(std::fs::File::from(fd))
}

/// The importer (`handoff __import`): with the run directory's `lock` ([`take_lock`]),
/// imports the state its job names with `registry`'s adapter, records how that went, removes
/// the run directory. Returns the exit code.
pub async fn serve(registry: &Registry, lock: Option<std::fs::File>) -> u8 {
    let Some(lock) = lock else {
        return crate::exit::USAGE;
    };
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
    // The descriptor must be the job's directory, as `start` opened it, and that a run
    // directory of the work directory its record is kept in: the importer removes it.
    if !same_file(&lock, &job.run_dir) || !is_run_dir_of(&job.run_dir, &job.record) {
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
            // One import into an agent's store at a time: each checks that the store lacks
            // its session before it imports it.
            let base = job.record.parent().and_then(Utf8Path::parent);
            let _one = base.and_then(|b| one_at_a_time(b, &job.harness));
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
    // Recorded while the directory is still held: a reader never sees it lost meanwhile.
    let code = match outcome {
        Ok(_) => {
            let _ = std::fs::remove_file(&job.record);
            crate::exit::OK
        }
        Err(why) => {
            let mut entry = job.entry.clone();
            entry.state = ImportState::Failed;
            entry.message = Some(crate::redact(&why, &job.secrets).0);
            let _ = write_record(&job.record, &entry);
            crate::exit::PROVIDER_FAILED
        }
    };
    let _ = std::fs::remove_dir_all(&job.run_dir);
    drop(lock);
    code
}

/// Holds the lock of imports into `harness`'s store (`imports/<harness>.lock` under `base`),
/// waiting for one under way; `None` when it cannot be taken (the import goes on without).
pub(crate) fn one_at_a_time(base: &Utf8Path, harness: &str) -> Option<Flock<std::fs::File>> {
    let records = records_dir(base);
    crate::lease::ensure_private_dir(&records).ok()?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(records.join(format!("{harness}.lock")))
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    Flock::lock(file, FlockArg::LockExclusive).ok()
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
        .filter_map(|p| read_record(base, &p))
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

/// Whether `run_dir` is a run's private directory of the work directory whose `imports/`
/// holds `record` (as [`start`] made them).
fn is_run_dir_of(run_dir: &Utf8Path, record: &Utf8Path) -> bool {
    let base = run_dir.parent();
    let named = run_dir
        .file_name()
        .is_some_and(|n| n.starts_with(crate::PrivateDirKind::Run.prefix()));
    named && base.is_some() && record.parent() == base.map(records_dir).as_deref()
}

fn same_file(file: &std::fs::File, path: &Utf8Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(on_fd) = file.metadata() else {
        return false;
    };
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_dir() && m.dev() == on_fd.dev() && m.ino() == on_fd.ino())
}

/// The record at `path` under `base`, only if it is one handoff could have written: a plain
/// file of this user's, 0600, named after its run, about a run directory of `base`.
fn read_record(base: &Utf8Path, path: &Utf8Path) -> Option<ImportRecord> {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    let mine = meta.uid() == nix::unistd::getuid().as_raw() && meta.mode() & 0o077 == 0;
    if !meta.is_file() || !mine {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(64 * 1024).read_to_end(&mut bytes).ok()?;
    let record: ImportRecord = serde_json::from_slice(&bytes).ok()?;
    let named = path.file_stem() == Some(record.run_id.as_str());
    let of_base = record.run_dir.parent() == Some(base)
        && record
            .run_dir
            .file_name()
            .is_some_and(|n| n.starts_with(crate::PrivateDirKind::Run.prefix()));
    (named && of_base).then_some(record)
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

/// Removes records (and their half-written copies) older than [`KEEP_RECORDS`].
fn forget_old(records: &Utf8Path) {
    let Ok(entries) = std::fs::read_dir(records) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.ends_with(".json") || name.contains(".tmp-")) {
            continue;
        }
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
        // Files planted next to them that handoff could not have written are skipped: not
        // JSON, readable by others, named after another run, about a directory elsewhere.
        let dir = records_dir(base);
        std::fs::write(dir.join("c.json"), "not json").unwrap();
        let planted = |name: &str, run: &str, run_dir: &str, mode: u32| {
            let entry = ImportRecord {
                run_id: run.into(),
                harness: "opencode".into(),
                what: "session x".into(),
                started_at: "2026-12-07T00:00:09.000Z".into(),
                run_dir: run_dir.into(),
                state: ImportState::Importing,
                message: None,
            };
            let path = dir.join(name);
            write_record(&path, &entry).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let inside = base.join("handoff-run-x").to_string();
        planted("d.json", "d", &inside, 0o644);
        planted("e.json", "other", &inside, 0o600);
        planted("f.json", "f", "/home", 0o600);
        planted("g.json", "g", base.join("handoff-mcp-x").as_ref(), 0o600);
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

    #[test]
    fn an_importer_only_removes_a_run_directory_next_to_its_records() {
        let base = Utf8Path::new("/w");
        let record = records_dir(base).join("run-1.json");
        assert!(is_run_dir_of(&base.join("handoff-run-ab"), &record));
        assert!(!is_run_dir_of(Utf8Path::new("/home/me"), &record));
        assert!(!is_run_dir_of(&base.join("handoff-mcp-ab"), &record));
        assert!(!is_run_dir_of(Utf8Path::new("/x/handoff-run-ab"), &record));
        assert!(!is_run_dir_of(Utf8Path::new("/"), &record));
    }

    #[test]
    fn imports_never_go_through_a_planted_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(tmp.path()).unwrap();
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, records_dir(base)).unwrap();
        assert!(one_at_a_time(base, "opencode").is_none());
        let dir = crate::private_dir::PrivateDir::new(base, crate::PrivateDirKind::Run).unwrap();
        let run_dir = dir.path().to_owned();
        let state = SandboxedState {
            executable: Utf8Path::new("/bin/true"),
            env: &BTreeMap::new(),
            parent_env: &BTreeMap::new(),
            run_dir: &run_dir,
            cwd: base,
            stdout: b"",
        };
        let handover = Handover {
            run_id: "run-1",
            harness: "opencode",
            what: "session x",
            state: &state,
            secrets: &[],
        };
        // Refused before anything starts: the directory comes back for an import here.
        let (back, why) = start(Utf8Path::new("/bin/true"), base, dir, &handover).unwrap_err();
        assert!(why.contains("symlink"), "{why}");
        assert!(back.path().is_dir());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}
