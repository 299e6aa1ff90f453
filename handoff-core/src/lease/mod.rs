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
//!
//! Here: the lease itself and its files; `ancestry` is the second rule, `runtime_dir` where
//! the files live, `process` what `/proc` says, and `agents` which agent CLIs work in a
//! worktree.

mod agents;
mod ancestry;
mod process;
mod runtime_dir;
pub(crate) use runtime_dir::{ensure_private_dir, passwd_home};

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::libc;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

pub use self::agents::{WorkingAgent, agents_working_in};
pub use self::ancestry::{adopt_orphans, check_ancestry};
use self::process::own_start_time;
pub use self::runtime_dir::{default_runtime_dir, private_dir_base, private_work_dir};
use crate::timestamp::now_iso;

const ROOTS: &str = "roots";
const LEASES: &str = "leases";
const LOCK_SUFFIX: &str = ".lock";
/// How often a waiting root retries the worktree lease.
const POLL: Duration = Duration::from_millis(50);
/// Longest holder record read back; anything longer is not ours.
const MAX_RECORD_BYTES: u64 = 64 * 1024;

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
    #[error("cannot adopt orphaned descendants (a child subreaper): {0}")]
    Subreaper(#[source] std::io::Error),
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
    /// A second descriptor for the worktree lock (the same open file, so the same `flock`):
    /// whoever holds it keeps the worktree leased after this process is gone — the reaper of
    /// the run's agent, until the agent's tree is gone.
    pub fn hold(&self) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.worktree_lock.as_fd().try_clone_to_owned()
    }

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
mod tests;
