//! The root lease: one root run per worktree, and no root run inside another.
//!
//! A *root run* is a top-level `handoff run`, `run-with-advice` or `advice`. Two rules hold:
//!
//! 1. One root run per worktree at a time. The worktree lease is a `flock` on
//!    `<dir>/leases/<sha256 of the canonical worktree path>.lock`, which also carries a JSON
//!    [`HolderRecord`] so that a second root run can name the holder. The file is never deleted
//!    (deleting a locked file races with a waiter); releasing truncates and unlocks it.
//! 2. No process descended from a live root run starts a root run. Every root registers
//!    itself as `<dir>/roots/<pid>-<start time>-<worktree hash>.lock`, locked for the life of
//!    its [`RootLease`]. [`check_ancestry`] walks the parent chain through `/proc/<pid>/stat`
//!    and refuses when an ancestor, identified by pid *and* start time so that a reused pid
//!    never matches, holds such an entry. Environment variables play no part: a worker that
//!    strips them is still a descendant. An ancestor whose entry was deleted is still found
//!    through its open descriptor in `/proc/<pid>/fd`.
//!
//! Locks are `flock`s, which the kernel drops when the holder dies: a crashed root leaves no
//! lock behind, only a file that the next check removes. Every file is opened `O_NOFOLLOW`,
//! `O_CLOEXEC`, mode 0600, so agents spawned by the root never inherit a lock: an orphaned
//! agent cannot keep the lease.
//!
//! The runtime directory is per user and not derived from anything a worker can change
//! ([`default_runtime_dir`]); every call also takes an explicit directory for library users
//! and tests.
//!
//! Limits: outside Linux there is no `/proc` and the ancestry check is a no-op. On Linux a
//! process that leaves the process tree (started by `systemd-run`, `at`, an existing `tmux`
//! server, a PID namespace hiding its ancestors) is not a descendant and is not refused. A
//! worker that double-forks stays a descendant only if the root called [`adopt_orphans`].

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::libc;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::timestamp::now_iso;

const ROOTS: &str = "roots";
const LEASES: &str = "leases";
const LOCK_SUFFIX: &str = ".lock";
/// How often a waiting root retries the worktree lease.
const POLL: Duration = Duration::from_millis(50);
/// Longest holder record read back; anything longer is not ours.
const MAX_RECORD_BYTES: u64 = 64 * 1024;
/// Bound on the parent walk, in case `/proc` ever shows a cycle.
const MAX_ANCESTORS: usize = 4096;

/// Who asks for the lease: the root run being started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The root run's id.
    pub run_id: String,
    /// The command that holds the worktree, as typed (`run`, `run-with-advice`, `advice`,
    /// `continue`).
    pub verb: String,
    /// The directory it was started from.
    pub cwd: Utf8PathBuf,
}

/// What a lease file says about its holder; written by the holder, read back to name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HolderRecord {
    /// The holder's process id.
    pub pid: u32,
    /// The holder's start time (`/proc/<pid>/stat` field 22, clock ticks since boot; 0 where
    /// there is no `/proc`).
    pub start_time: u64,
    /// The root run's id.
    pub run_id: String,
    /// The command as typed (`run`, `run-with-advice`, `advice`, `continue`).
    pub verb: String,
    /// The directory the root run was started from.
    pub cwd: Utf8PathBuf,
    /// The canonical worktree root the lease is for.
    pub worktree: Utf8PathBuf,
    /// When the lease was taken (ISO-8601 UTC).
    pub started_at: String,
}

/// What to do when another root run holds the worktree.
#[derive(Debug, Clone)]
pub enum Wait {
    /// Refuse at once with [`LeaseError::Busy`].
    Refuse,
    /// Retry until the holder releases the lease, or until the receiver reads `true`
    /// ([`LeaseError::Cancelled`]).
    Until(watch::Receiver<bool>),
}

/// Why a root lease was not granted.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The current process descends from a live root run.
    #[error("{}", inside_root_message(.pid, .holder))]
    InsideRoot {
        /// The ancestor that is a root run.
        pid: u32,
        /// Its record, when it could be read.
        holder: Option<Box<HolderRecord>>,
    },
    /// Another root run holds the worktree.
    #[error("{}", busy_message(.worktree, .holder))]
    Busy {
        /// The canonical worktree root.
        worktree: Utf8PathBuf,
        /// The holder's record, when it could be read (it is written just after locking).
        holder: Option<Box<HolderRecord>>,
    },
    /// Waiting for the worktree was cancelled.
    #[error("stopped waiting for the lease on worktree {worktree}: cancelled")]
    Cancelled {
        /// The canonical worktree root.
        worktree: Utf8PathBuf,
    },
    /// The runtime directory (or a directory or file in it) could let another user in.
    #[error(
        "refusing runtime path {path}: {reason}; it must be a directory owned by you with mode 0700"
    )]
    UnsafeDir {
        /// The offending path.
        path: Utf8PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The process could not be made a child subreaper.
    #[error("cannot adopt orphaned descendants (PR_SET_CHILD_SUBREAPER): {0}")]
    Subreaper(#[source] Errno),
    /// A file system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`cannot open`, …).
        action: &'static str,
        /// The path it was done to.
        path: Utf8PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

fn inside_root_message(pid: &u32, holder: &Option<Box<HolderRecord>>) -> String {
    let run = match holder {
        Some(h) => format!("root run {} (pid {pid}, `{}`)", h.run_id, h.verb),
        None => format!("a root run (pid {pid})"),
    };
    format!(
        "handoff is running inside {run}; a worker cannot start a root run, it asks for advice \
         through its supervisor"
    )
}

fn busy_message(worktree: &Utf8Path, holder: &Option<Box<HolderRecord>>) -> String {
    let who = match holder {
        Some(h) => format!(
            "another root run (pid {}, {}, `{}` since {})",
            h.pid, h.run_id, h.verb, h.started_at
        ),
        None => "another root run".to_owned(),
    };
    format!("{who} holds worktree {worktree}; wait for it to finish or pass --wait")
}

fn io_error(action: &'static str, path: &Utf8Path) -> impl FnOnce(io::Error) -> LeaseError {
    let path = path.to_owned();
    move |source| LeaseError::Io {
        action,
        path,
        source,
    }
}

/// The per-user runtime directory: `/run/user/<uid>/handoff` when `/run/user/<uid>` is a
/// directory owned by the user, else `/tmp/handoff-<uid>`. Created 0700 when missing; refused
/// when it is a symlink, not owned by the user, or open to group or others. Nothing here reads
/// the environment (`XDG_RUNTIME_DIR`, `TMPDIR`): a worker must not be able to move it.
pub fn default_runtime_dir() -> Result<Utf8PathBuf, LeaseError> {
    let uid = nix::unistd::getuid().as_raw();
    let run_user = Utf8PathBuf::from(format!("/run/user/{uid}"));
    let dir = match fs::symlink_metadata(&run_user) {
        Ok(meta) if meta.is_dir() && meta.uid() == uid => run_user.join("handoff"),
        _ => Utf8PathBuf::from(format!("/tmp/handoff-{uid}")),
    };
    ensure_private_dir(&dir)?;
    Ok(dir)
}

/// Creates `path` (not its parents) with mode 0700 when missing, then checks that it is a
/// real directory owned by the current user and closed to group and others.
fn ensure_private_dir(path: &Utf8Path) -> Result<(), LeaseError> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_error("cannot create", path)(e)),
    }
    let meta = fs::symlink_metadata(path).map_err(io_error("cannot inspect", path))?;
    let unsafe_dir = |reason: String| LeaseError::UnsafeDir {
        path: path.to_owned(),
        reason,
    };
    if meta.file_type().is_symlink() {
        return Err(unsafe_dir("it is a symlink".to_owned()));
    }
    if !meta.is_dir() {
        return Err(unsafe_dir("it is not a directory".to_owned()));
    }
    let uid = nix::unistd::getuid().as_raw();
    if meta.uid() != uid {
        return Err(unsafe_dir(format!(
            "it is owned by uid {}, not by you (uid {uid})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(unsafe_dir(format!(
            "its mode {:04o} lets group or others in",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Opens a lock file without following symlinks, close-on-exec, creating it 0600 if asked.
fn open_lock(path: &Utf8Path, create: bool) -> Result<File, LeaseError> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    if create {
        options.write(true).create(true).mode(0o600);
    }
    let file = options.open(path).map_err(io_error("cannot open", path))?;
    let meta = file.metadata().map_err(io_error("cannot inspect", path))?;
    if !meta.is_file() {
        return Err(LeaseError::UnsafeDir {
            path: path.to_owned(),
            reason: "it is not a regular file".to_owned(),
        });
    }
    Ok(file)
}

fn read_record(file: &File) -> Option<Box<HolderRecord>> {
    let mut buf = Vec::new();
    file.take(MAX_RECORD_BYTES).read_to_end(&mut buf).ok()?;
    serde_json::from_slice(&buf).ok()
}

/// Truncates a locked file and writes the record into it.
fn write_record(
    lock: &mut Flock<File>,
    path: &Utf8Path,
    record: &HolderRecord,
) -> Result<(), LeaseError> {
    let bytes = serde_json::to_vec(record)
        .map_err(|e| io_error("cannot write", path)(io::Error::other(e)))?;
    lock.set_len(0).map_err(io_error("cannot truncate", path))?;
    lock.write_all(&bytes)
        .map_err(io_error("cannot write", path))
}

/// A process as `/proc/<pid>/stat` shows it.
struct ProcStat {
    ppid: u32,
    start_time: u64,
}

/// Reads `/proc/<pid>/stat` (`pid` may be `self`). The command name (field 2) is in
/// parentheses and may itself hold spaces and parentheses, so fields are counted from the last
/// `)`: what follows starts at field 3.
fn proc_stat(pid: &str) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        ppid: fields.get(4 - 3)?.parse().ok()?,
        start_time: fields.get(22 - 3)?.parse().ok()?,
    })
}

/// The current process's start time, 0 where there is no `/proc`.
fn own_start_time() -> Result<u64, LeaseError> {
    if !cfg!(target_os = "linux") {
        return Ok(0);
    }
    proc_stat("self")
        .map(|s| s.start_time)
        .ok_or_else(|| proc_unreadable("/proc/self/stat"))
}

fn proc_unreadable(path: &str) -> LeaseError {
    LeaseError::Io {
        action: "cannot read (is /proc mounted?)",
        path: path.into(),
        source: io::Error::from(io::ErrorKind::NotFound),
    }
}

/// `(pid, start time)` of every ancestor, parent first, up to and including pid 1 (handoff may
/// be pid 1 in a container).
fn ancestors() -> Result<Vec<(u32, u64)>, LeaseError> {
    let me = proc_stat("self").ok_or_else(|| proc_unreadable("/proc/self/stat"))?;
    let mut out = Vec::new();
    let mut pid = me.ppid;
    while pid != 0 && out.len() < MAX_ANCESTORS {
        // An ancestor that exits mid-walk ends the chain: its children were reparented.
        let Some(stat) = proc_stat(&pid.to_string()) else {
            break;
        };
        out.push((pid, stat.start_time));
        pid = stat.ppid;
    }
    Ok(out)
}

/// An agent CLI process whose working directory is inside a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkingAgent {
    /// Its process id.
    pub pid: u32,
    /// The executable name it was recognised by.
    pub name: String,
    /// Its working directory.
    pub cwd: Utf8PathBuf,
}

/// Interpreters an agent CLI may run under (`node /usr/bin/claude …`): for these the script's
/// name is looked at too.
const INTERPRETERS: [&str; 5] = ["node", "bun", "deno", "python3", "python"];

/// The agent processes whose working directory is `worktree` or inside it, recognised by the
/// basename of their program (or, under an interpreter, of its script) being one of `names`.
/// This process and its ancestors are left out: the agent that runs handoff is not "another
/// agent working in the worktree". Processes that can't be read are skipped. Empty outside
/// Linux.
pub fn agents_working_in(worktree: &Utf8Path, names: &[&str]) -> Vec<WorkingAgent> {
    if !cfg!(target_os = "linux") {
        return Vec::new();
    }
    let mut skip: Vec<u32> = ancestors()
        .map(|a| a.into_iter().map(|(pid, _)| pid).collect())
        .unwrap_or_default();
    skip.push(std::process::id());
    let worktree = worktree
        .canonicalize_utf8()
        .unwrap_or_else(|_| worktree.to_owned());
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if skip.contains(&pid) {
            continue;
        }
        let Ok(cwd) = fs::read_link(format!("/proc/{pid}/cwd")) else {
            continue;
        };
        let Ok(cwd) = Utf8PathBuf::from_path_buf(cwd) else {
            continue;
        };
        if !cwd.starts_with(&worktree) {
            continue;
        }
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if let Some(name) = agent_name(&cmdline, names) {
            found.push(WorkingAgent {
                pid,
                name: name.to_owned(),
                cwd,
            });
        }
    }
    found.sort_by_key(|a| a.pid);
    found
}

/// The agent name a NUL-separated command line runs, if any.
fn agent_name<'a>(cmdline: &[u8], names: &[&'a str]) -> Option<&'a str> {
    let mut args = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned());
    let base = |a: &str| a.rsplit('/').next().unwrap_or(a).to_owned();
    let program = base(&args.next()?);
    let pick = |b: &str| names.iter().copied().find(|n| *n == b);
    if let Some(n) = pick(&program) {
        return Some(n);
    }
    if INTERPRETERS.contains(&program.as_str()) {
        let script = args.find(|a| !a.starts_with('-'))?;
        return pick(&base(&script));
    }
    None
}

/// Parses a registry file name `<pid>-<start time>-<hash>.lock`.
fn parse_entry_name(name: &str) -> Option<(u32, u64)> {
    let stem = name.strip_suffix(LOCK_SUFFIX)?;
    let mut parts = stem.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let start_time = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((pid, start_time))
}

fn is_alive(pid: u32, start_time: u64) -> bool {
    proc_stat(&pid.to_string()).is_some_and(|s| s.start_time == start_time)
}

/// Refuses when the current process descends from a live root run registered in `dir`.
///
/// Walks the parent chain through `/proc/<pid>/stat` and, for each ancestor, looks for a
/// registry entry with its pid and start time whose lock is held; an ancestor whose entry was
/// deleted is still found through its open descriptor in `/proc/<pid>/fd`. Entries of
/// processes that are gone and whose lock is free are removed on the way. On Linux, an
/// unreadable `/proc/self/stat` is an error (the check fails closed); elsewhere the check is a
/// no-op.
pub fn check_ancestry(dir: &Utf8Path) -> Result<(), LeaseError> {
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    ensure_private_dir(dir)?;
    let roots = dir.join(ROOTS);
    ensure_private_dir(&roots)?;
    let names: Vec<String> = fs::read_dir(&roots)
        .map_err(io_error("cannot list", &roots))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    remove_stale_entries(&roots, &names);
    // Descriptor links show the canonical path.
    let canonical_roots = roots
        .canonicalize_utf8()
        .map_err(io_error("cannot resolve", &roots))?;

    for (pid, start_time) in ancestors()? {
        let prefix = format!("{pid}-{start_time}-");
        for name in names.iter().filter(|n| n.starts_with(&prefix)) {
            let path = roots.join(name);
            let Ok(file) = open_lock(&path, false) else {
                continue;
            };
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Err((file, Errno::EWOULDBLOCK)) => {
                    return Err(LeaseError::InsideRoot {
                        pid,
                        holder: read_record(&file),
                    });
                }
                // Free: a leftover of an earlier process with the same identity, not a root.
                _ => continue,
            }
        }
        if let Some(holder) = open_entry_of(pid, &prefix, &canonical_roots) {
            return Err(LeaseError::InsideRoot { pid, holder });
        }
    }
    Ok(())
}

/// Looks through `/proc/<pid>/fd` for a registry entry in `roots` named with `prefix`,
/// deleted or not. `Some(record)` when one is open, the record read through the descriptor.
fn open_entry_of(pid: u32, prefix: &str, roots: &Utf8Path) -> Option<Option<Box<HolderRecord>>> {
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    for fd in fds.flatten() {
        let Ok(target) = fs::read_link(fd.path()) else {
            continue;
        };
        let Some(target) = target.to_str() else {
            continue;
        };
        let target = Utf8Path::new(target.strip_suffix(" (deleted)").unwrap_or(target));
        let ours = target.parent() == Some(roots)
            && target
                .file_name()
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(LOCK_SUFFIX));
        if ours {
            return Some(File::open(fd.path()).ok().and_then(|f| read_record(&f)));
        }
    }
    None
}

/// Removes registry entries of processes that are gone and whose lock is free. A live root
/// is never touched, even in the instant between creating its entry and locking it.
fn remove_stale_entries(roots: &Utf8Path, names: &[String]) {
    for name in names {
        let Some((pid, start_time)) = parse_entry_name(name) else {
            continue;
        };
        if is_alive(pid, start_time) {
            continue;
        }
        let path = roots.join(name);
        let Ok(file) = open_lock(&path, false) else {
            continue;
        };
        if let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            let _ = fs::remove_file(&path);
            drop(lock);
        }
    }
}

/// Makes the current process adopt its orphaned descendants (Linux `PR_SET_CHILD_SUBREAPER`),
/// so that a worker which double-forks (`cmd &` in a subshell, `setsid`, `nohup`) stays a
/// descendant of its root run and is still refused by [`check_ancestry`].
///
/// Process-wide and permanent: orphans become children of this process and stay zombies until
/// it reaps them or exits. [`RootLease::acquire`] does not call it; a root run should, before
/// spawning workers. A no-op outside Linux.
pub fn adopt_orphans() -> Result<(), LeaseError> {
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_child_subreaper(true).map_err(LeaseError::Subreaper)?;
    Ok(())
}

/// A held root lease: this process is the one root run on its worktree and is registered as
/// a live root. Dropping it releases both.
#[derive(Debug)]
pub struct RootLease {
    // Fields drop in order: the registry entry is released before the worktree lease.
    _entry: Flock<File>,
    entry_path: Utf8PathBuf,
    worktree_lock: Flock<File>,
    record: HolderRecord,
}

impl RootLease {
    /// Takes the root lease on `worktree_root` in the runtime directory `dir`: checks the
    /// ancestry ([`check_ancestry`]), locks the worktree, then registers the process as a live
    /// root. With [`Wait::Until`], a busy worktree is retried every 50 ms until it is released
    /// or the receiver reads `true`; the ancestry is checked once.
    ///
    /// To tell the user who they are waiting for, call [`RootLease::try_acquire`] first and wait
    /// only on [`LeaseError::Busy`].
    pub async fn acquire(
        dir: &Utf8Path,
        worktree_root: &Utf8Path,
        holder: &Holder,
        wait: Wait,
    ) -> Result<RootLease, LeaseError> {
        check_ancestry(dir)?;
        let site = Site::prepare(dir, worktree_root)?;
        let mut cancel = match wait {
            Wait::Refuse => return site.lock(holder),
            Wait::Until(cancel) => cancel,
        };
        let mut sender_alive = true;
        loop {
            match site.lock(holder) {
                Err(LeaseError::Busy { .. }) => {}
                done => return done,
            }
            if *cancel.borrow_and_update() {
                return Err(LeaseError::Cancelled {
                    worktree: site.worktree,
                });
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                // A dropped sender can no longer cancel: keep polling on the timer alone.
                changed = cancel.changed(), if sender_alive => sender_alive = changed.is_ok(),
            }
        }
    }

    /// [`RootLease::acquire`] with [`Wait::Refuse`], for callers without a runtime.
    pub fn try_acquire(
        dir: &Utf8Path,
        worktree_root: &Utf8Path,
        holder: &Holder,
    ) -> Result<RootLease, LeaseError> {
        check_ancestry(dir)?;
        let site = Site::prepare(dir, worktree_root)?;
        site.lock(holder)
    }

    /// What this lease wrote about its holder.
    pub fn record(&self) -> &HolderRecord {
        &self.record
    }

    /// The canonical worktree root the lease is for.
    pub fn worktree(&self) -> &Utf8Path {
        &self.record.worktree
    }
}

impl Drop for RootLease {
    fn drop(&mut self) {
        // Removed while still locked; a checker that opened it meanwhile finds the lock free
        // and the process alive, and leaves it alone.
        let _ = fs::remove_file(&self.entry_path);
        // The lease file stays (a waiter may have it open); only its record goes.
        let _ = self.worktree_lock.set_len(0);
    }
}

/// Where one worktree's lease and registry entry live.
struct Site {
    worktree: Utf8PathBuf,
    lease_path: Utf8PathBuf,
    entry_path: Utf8PathBuf,
    start_time: u64,
}

impl Site {
    fn prepare(dir: &Utf8Path, worktree_root: &Utf8Path) -> Result<Site, LeaseError> {
        let worktree = worktree_root
            .canonicalize_utf8()
            .map_err(io_error("cannot resolve worktree", worktree_root))?;
        let hash = hex::encode(Sha256::digest(worktree.as_str().as_bytes()));
        ensure_private_dir(dir)?;
        let leases = dir.join(LEASES);
        ensure_private_dir(&leases)?;
        let roots = dir.join(ROOTS);
        ensure_private_dir(&roots)?;
        let start_time = own_start_time()?;
        Ok(Site {
            lease_path: leases.join(format!("{hash}{LOCK_SUFFIX}")),
            entry_path: roots.join(format!(
                "{}-{start_time}-{hash}{LOCK_SUFFIX}",
                std::process::id()
            )),
            worktree,
            start_time,
        })
    }

    /// One attempt: lock the worktree, then register as a live root.
    fn lock(&self, holder: &Holder) -> Result<RootLease, LeaseError> {
        let file = open_lock(&self.lease_path, true)?;
        let mut worktree_lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((file, Errno::EWOULDBLOCK)) => {
                return Err(LeaseError::Busy {
                    worktree: self.worktree.clone(),
                    holder: read_record(&file),
                });
            }
            Err((_, errno)) => return Err(io_error("cannot lock", &self.lease_path)(errno.into())),
        };
        let record = HolderRecord {
            pid: std::process::id(),
            start_time: self.start_time,
            run_id: holder.run_id.clone(),
            verb: holder.verb.clone(),
            cwd: holder.cwd.clone(),
            worktree: self.worktree.clone(),
            started_at: now_iso(),
        };
        write_record(&mut worktree_lock, &self.lease_path, &record)?;

        // The name is unique to this process and worktree, and the worktree lock is ours, so
        // nobody else can hold this lock.
        let file = open_lock(&self.entry_path, true)?;
        let mut entry = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| io_error("cannot lock", &self.entry_path)(errno.into()))?;
        if let Err(e) = write_record(&mut entry, &self.entry_path, &record) {
            let _ = fs::remove_file(&self.entry_path);
            return Err(e);
        }
        Ok(RootLease {
            _entry: entry,
            entry_path: self.entry_path.clone(),
            worktree_lock,
            record,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    use super::*;

    /// Runtime directory for the child process that runs [`ancestry_probe`].
    const PROBE_DIR: &str = "HANDOFF_LEASE_TEST_DIR";
    /// For [`ancestry_probe`]: wait until this pid is the parent before checking.
    const PROBE_PARENT: &str = "HANDOFF_LEASE_TEST_PARENT";
    /// For [`ancestry_probe`]: write `<exit code> <pid>` here.
    const PROBE_OUT: &str = "HANDOFF_LEASE_TEST_OUT";
    /// Worktree for [`orphaning_root`].
    const PROBE_WORKTREE: &str = "HANDOFF_LEASE_TEST_WORKTREE";
    /// Probe exit codes.
    const ALLOWED: i32 = 0;
    const REFUSED: i32 = 3;
    const FAILED: i32 = 4;

    fn test_name(name: &str) -> String {
        let module = module_path!();
        let module = module.split_once("::").map_or(module, |(_, rest)| rest);
        format!("{module}::{name}")
    }

    fn utf8(dir: &tempfile::TempDir) -> Utf8PathBuf {
        Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).unwrap()
    }

    fn holder(run_id: &str) -> Holder {
        Holder {
            run_id: run_id.to_owned(),
            verb: "run".into(),
            cwd: "/somewhere".into(),
        }
    }

    /// A runtime directory and a worktree.
    fn setup() -> (
        tempfile::TempDir,
        Utf8PathBuf,
        tempfile::TempDir,
        Utf8PathBuf,
    ) {
        let rt = tempfile::tempdir().unwrap();
        let wt = tempfile::tempdir().unwrap();
        // tempfile's directories follow the umask; the runtime directory is created inside.
        let (rt_path, wt_path) = (utf8(&rt).join("rt"), utf8(&wt));
        (rt, rt_path, wt, wt_path)
    }

    fn entries(dir: &Utf8Path, sub: &str) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// Runs [`ancestry_probe`] in a child process, through `sh -c` when `via_shell` (so the
    /// probe is a grandchild), and returns its exit code.
    fn probe(dir: &Utf8Path, via_shell: bool) -> i32 {
        let exe = std::env::current_exe().unwrap();
        let name = test_name("ancestry_probe");
        let mut command = if via_shell {
            let mut c = Command::new("/bin/sh");
            // Not the last command, so the shell forks instead of exec'ing the probe.
            c.arg("-c")
                .arg(r#""$0" --exact "$1" --ignored --test-threads=1; rc=$?; exit $rc"#)
                .arg(&exe)
                .arg(&name);
            c
        } else {
            let mut c = Command::new(&exe);
            c.args(["--exact", &name, "--ignored", "--test-threads=1"]);
            c
        };
        let output = command
            .env(PROBE_DIR, dir)
            .env_remove(PROBE_PARENT)
            .env_remove(PROBE_OUT)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        output.status.code().unwrap()
    }

    /// Helper run in a child process: checks its ancestry and exits [`ALLOWED`], [`REFUSED`] or
    /// [`FAILED`]. Does nothing when run directly.
    #[test]
    fn agent_names_come_from_the_program_or_its_script() {
        let names = ["claude", "codex"];
        assert_eq!(agent_name(b"/usr/bin/codex\0exec\0", &names), Some("codex"));
        assert_eq!(
            agent_name(b"node\0--no-warnings\0/usr/local/bin/claude\0-p\0", &names),
            Some("claude")
        );
        assert_eq!(agent_name(b"bash\0claude\0", &names), None);
        assert_eq!(agent_name(b"", &names), None);
    }

    #[test]
    fn agents_working_in_finds_a_process_by_its_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path())
            .unwrap()
            .canonicalize_utf8()
            .unwrap();
        let sub = root.join("sub");
        fs::create_dir(&sub).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(&sub)
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until the child has exec'd, its command line is still this test's.
        while !fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep")) {
            std::thread::yield_now();
        }
        let found = agents_working_in(&root, &["sleep"]);
        let elsewhere = agents_working_in(&root.join("other"), &["sleep"]);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            found
                .iter()
                .any(|a| a.pid == pid && a.name == "sleep" && a.cwd == sub),
            "{found:?}"
        );
        assert!(elsewhere.iter().all(|a| a.pid != pid));
        // The process itself is never reported.
        let exe = std::env::current_exe().unwrap();
        let me = exe.file_name().unwrap().to_str().unwrap().to_owned();
        let mine = agents_working_in(Utf8Path::new("/"), &[me.as_str()]);
        assert!(mine.iter().all(|a| a.pid != std::process::id()), "{mine:?}");
    }

    #[test]
    #[ignore = "helper: run in a child process by the ancestry tests"]
    fn ancestry_probe() {
        let Ok(dir) = std::env::var(PROBE_DIR) else {
            return;
        };
        if let Ok(parent) = std::env::var(PROBE_PARENT) {
            let parent: i32 = parent.parse().unwrap();
            let deadline = Instant::now() + Duration::from_secs(5);
            while nix::unistd::getppid().as_raw() != parent && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let code = match check_ancestry(Utf8Path::new(&dir)) {
            Ok(()) => ALLOWED,
            Err(LeaseError::InsideRoot { .. }) => REFUSED,
            Err(_) => FAILED,
        };
        if let Ok(out) = std::env::var(PROBE_OUT) {
            let tmp = format!("{out}.tmp");
            fs::write(&tmp, format!("{code} {}", std::process::id())).unwrap();
            fs::rename(&tmp, &out).unwrap();
        }
        std::process::exit(code);
    }

    #[test]
    fn second_acquire_on_the_same_worktree_is_refused_naming_the_holder() {
        let (_rt, dir, _wt, worktree) = setup();
        let first = RootLease::try_acquire(&dir, &worktree, &holder("run-first")).unwrap();
        // Another spelling of the same worktree is the same worktree.
        let other_spelling = worktree.join(".");
        let err = RootLease::try_acquire(&dir, &other_spelling, &holder("run-second")).unwrap_err();
        let LeaseError::Busy {
            worktree: busy,
            holder: Some(record),
        } = &err
        else {
            panic!("expected Busy with a holder, got {err:?}");
        };
        assert_eq!(busy, first.worktree());
        assert_eq!(**record, *first.record());
        assert_eq!(record.pid, std::process::id());
        assert_eq!(record.run_id, "run-first");
        assert_eq!(record.verb, "run");
        assert!(err.to_string().contains("run-first"), "{err}");
    }

    #[test]
    fn different_worktrees_are_leased_independently() {
        let (_rt, dir, _wt, worktree) = setup();
        let other = tempfile::tempdir().unwrap();
        let a = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        let b = RootLease::try_acquire(&dir, &utf8(&other), &holder("run-b")).unwrap();
        assert_ne!(a.worktree(), b.worktree());
        assert_eq!(entries(&dir, ROOTS).len(), 2);
    }

    #[test]
    fn release_then_reacquire() {
        let (_rt, dir, _wt, worktree) = setup();
        let first = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        drop(first);
        // The lease file stays, emptied; the registry entry goes.
        let leases = entries(&dir, LEASES);
        assert_eq!(leases.len(), 1);
        assert_eq!(fs::read(dir.join(LEASES).join(&leases[0])).unwrap(), b"");
        assert!(entries(&dir, ROOTS).is_empty());
        let again = RootLease::try_acquire(&dir, &worktree, &holder("run-b")).unwrap();
        assert_eq!(again.record().run_id, "run-b");
    }

    #[test]
    fn lease_files_are_private() {
        let (_rt, dir, _wt, worktree) = setup();
        let _lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        for sub in [LEASES, ROOTS] {
            let mode = fs::metadata(dir.join(sub)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{sub}");
            for name in entries(&dir, sub) {
                let mode = fs::metadata(dir.join(sub).join(name))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o777, 0o600, "{sub}");
            }
        }
    }

    #[tokio::test]
    async fn waiting_acquires_once_the_holder_releases() {
        let (_rt, dir, _wt, worktree) = setup();
        let first = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        let (_cancel, wait) = watch::channel(false);
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(first);
        });
        let second = tokio::time::timeout(
            Duration::from_secs(5),
            RootLease::acquire(&dir, &worktree, &holder("run-b"), Wait::Until(wait)),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(second.record().run_id, "run-b");
        releaser.join().unwrap();
    }

    #[tokio::test]
    async fn waiting_stops_on_cancel() {
        let (_rt, dir, _wt, worktree) = setup();
        let _first = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        let (cancel, wait) = watch::channel(false);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.send(true).unwrap();
        });
        let err = tokio::time::timeout(
            Duration::from_secs(5),
            RootLease::acquire(&dir, &worktree, &holder("run-b"), Wait::Until(wait)),
        )
        .await
        .unwrap()
        .unwrap_err();
        assert!(matches!(err, LeaseError::Cancelled { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn refuse_mode_does_not_wait() {
        let (_rt, dir, _wt, worktree) = setup();
        let _first = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        let err = RootLease::acquire(&dir, &worktree, &holder("run-b"), Wait::Refuse)
            .await
            .unwrap_err();
        assert!(matches!(err, LeaseError::Busy { .. }), "{err:?}");
    }

    #[test]
    fn spawned_processes_do_not_inherit_the_locks() {
        let (_rt, dir, _wt, worktree) = setup();
        let lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        let mut child = Command::new("sleep").arg("10").spawn().unwrap();
        drop(lease);
        let again = RootLease::try_acquire(&dir, &worktree, &holder("run-b"));
        child.kill().unwrap();
        child.wait().unwrap();
        again.unwrap();
    }

    #[test]
    fn a_child_of_a_root_is_refused_until_the_lease_is_dropped() {
        let (_rt, dir, _wt, worktree) = setup();
        assert_eq!(probe(&dir, false), ALLOWED);
        let lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        assert_eq!(probe(&dir, false), REFUSED);
        assert_eq!(probe(&dir, true), REFUSED, "grandchild through sh -c");
        drop(lease);
        assert_eq!(probe(&dir, false), ALLOWED);
        assert_eq!(probe(&dir, true), ALLOWED);
    }

    #[test]
    fn a_root_whose_entry_was_deleted_still_refuses_its_children() {
        let (_rt, dir, _wt, worktree) = setup();
        let _lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        for name in entries(&dir, ROOTS) {
            fs::remove_file(dir.join(ROOTS).join(name)).unwrap();
        }
        assert_eq!(probe(&dir, true), REFUSED);
    }

    #[test]
    fn the_refusal_names_the_root_run() {
        let (_rt, dir, _wt, worktree) = setup();
        let lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
        // In-process, the current process is not its own ancestor: allowed.
        check_ancestry(&dir).unwrap();
        let message = inside_root_message(&7, &Some(Box::new(lease.record().clone())));
        assert!(
            message.contains("run-a") && message.contains("pid 7"),
            "{message}"
        );
    }

    #[test]
    fn a_stale_entry_does_not_refuse_and_is_removed() {
        let (_rt, dir, _wt, _worktree) = setup();
        ensure_private_dir(&dir).unwrap();
        ensure_private_dir(&dir.join(ROOTS)).unwrap();
        // An entry for this (live) process whose lock nobody holds: not a root, kept.
        let me = format!(
            "{}-{}-{}.lock",
            std::process::id(),
            own_start_time().unwrap(),
            "0".repeat(64)
        );
        fs::write(dir.join(ROOTS).join(&me), b"{}").unwrap();
        // An entry for a process that cannot exist (above any pid_max): removed.
        let gone = format!("4194999-1-{}.lock", "0".repeat(64));
        fs::write(dir.join(ROOTS).join(&gone), b"{}").unwrap();
        assert_eq!(probe(&dir, false), ALLOWED);
        assert_eq!(entries(&dir, ROOTS), vec![me]);
    }

    #[test]
    fn unsafe_runtime_dirs_are_refused() {
        let base = tempfile::tempdir().unwrap();
        let base_path = utf8(&base);
        let (_wt, worktree) = {
            let wt = tempfile::tempdir().unwrap();
            let p = utf8(&wt);
            (wt, p)
        };

        let open = base_path.join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let err = RootLease::try_acquire(&open, &worktree, &holder("run-a")).unwrap_err();
        assert!(matches!(err, LeaseError::UnsafeDir { .. }), "{err:?}");

        let good = base_path.join("good");
        let link = base_path.join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        fs::create_dir(&good).unwrap();
        fs::set_permissions(&good, fs::Permissions::from_mode(0o700)).unwrap();
        let err = RootLease::try_acquire(&link, &worktree, &holder("run-a")).unwrap_err();
        assert!(matches!(err, LeaseError::UnsafeDir { .. }), "{err:?}");
        let err = check_ancestry(&link).unwrap_err();
        assert!(matches!(err, LeaseError::UnsafeDir { .. }), "{err:?}");

        // A subdirectory opened up later is refused too.
        fs::create_dir(good.join(LEASES)).unwrap();
        fs::set_permissions(good.join(LEASES), fs::Permissions::from_mode(0o755)).unwrap();
        let err = RootLease::try_acquire(&good, &worktree, &holder("run-a")).unwrap_err();
        assert!(matches!(err, LeaseError::UnsafeDir { .. }), "{err:?}");

        // A missing directory is created private.
        let fresh = base_path.join("fresh");
        let _lease = RootLease::try_acquire(&fresh, &worktree, &holder("run-a")).unwrap();
        let mode = fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn stat_parsing_survives_odd_command_names() {
        let me = proc_stat("self").unwrap();
        assert_eq!(me.ppid, nix::unistd::getppid().as_raw() as u32);
        assert_eq!(parse_entry_name("12-345-abc.lock"), Some((12, 345)));
        assert_eq!(parse_entry_name("12-345.lock"), None);
        assert_eq!(parse_entry_name("x-345-abc.lock"), None);
    }

    /// Helper run in a child process: a root that adopts orphans, takes a lease, orphans a
    /// probe through `sh -c 'probe &'`, and exits 0 when the reparented probe was refused.
    #[test]
    #[ignore = "helper: run in a child process by the orphan test"]
    fn orphaning_root() {
        let (Ok(dir), Ok(worktree)) = (std::env::var(PROBE_DIR), std::env::var(PROBE_WORKTREE))
        else {
            return;
        };
        let dir = Utf8PathBuf::from(dir);
        adopt_orphans().unwrap();
        let lease = RootLease::try_acquire(&dir, worktree.as_ref(), &holder("run-a")).unwrap();
        let out = dir.join("probe-result");
        let status = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#""$0" --exact "$1" --ignored --test-threads=1 >/dev/null 2>&1 &"#)
            .arg(std::env::current_exe().unwrap())
            .arg(test_name("ancestry_probe"))
            .env(PROBE_DIR, &dir)
            .env(PROBE_PARENT, std::process::id().to_string())
            .env(PROBE_OUT, &out)
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        let result = loop {
            if let Ok(text) = fs::read_to_string(&out) {
                break text;
            }
            assert!(Instant::now() < deadline, "the probe never reported");
            std::thread::sleep(Duration::from_millis(10));
        };
        let (code, pid) = result.split_once(' ').unwrap();
        // The probe is our child now: reap it.
        let pid = nix::unistd::Pid::from_raw(pid.parse().unwrap());
        let _ = nix::sys::wait::waitpid(pid, None);
        drop(lease);
        std::process::exit(if code.parse::<i32>().unwrap() == REFUSED {
            0
        } else {
            1
        });
    }

    #[test]
    fn an_orphaned_descendant_of_a_root_that_adopts_orphans_is_refused() {
        let (_rt, dir, _wt, worktree) = setup();
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &test_name("orphaning_root"),
                "--ignored",
                "--test-threads=1",
            ])
            .env(PROBE_DIR, &dir)
            .env(PROBE_WORKTREE, &worktree)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
