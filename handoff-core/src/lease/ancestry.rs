//! The second rule: no root run inside another. The registry of live roots, and the walk up
//! this process's ancestors that looks them up.

use std::fs::{self, File};

use camino::Utf8Path;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::process::{ancestors, proc_stat};
use super::runtime_dir::ensure_private_dir;
use super::{HolderRecord, LOCK_SUFFIX, LeaseError, ROOTS, io_error, open_lock, read_record};

/// Parses a registry file name `<pid>-<start time>-<hash>.lock`.
pub(super) fn parse_entry_name(name: &str) -> Option<(u32, u64)> {
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
    if !crate::platform::PROC_FS {
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
        // Not `/proc/locks` to skip ancestors that hold no lock: reading it takes the
        // kernel's file-lock semaphore for writing, an RCU grace period (10-25 ms) per run,
        // more than looking through a few ancestors' descriptors.
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
/// spawning workers. A no-op where there is no subreaper ([`crate::platform::SUBREAPER`]).
pub fn adopt_orphans() -> Result<(), LeaseError> {
    if crate::platform::SUBREAPER {
        crate::platform::adopt_orphans().map_err(LeaseError::Subreaper)?;
    }
    Ok(())
}
