//! What `/proc` says about a process: its parent and start time, and this process's ancestors.

use std::io;

use super::LeaseError;

/// Bound on the parent walk, in case `/proc` ever shows a cycle.
const MAX_ANCESTORS: usize = 4096;

/// A process as `/proc/<pid>/stat` shows it.
pub(super) type ProcStat = crate::reaper::tree::Proc;

/// Reads `/proc/<pid>/stat` (`pid` may be `self`).
pub(super) fn proc_stat(pid: &str) -> Option<ProcStat> {
    crate::reaper::tree::read(pid)
}

/// The current process's start time, 0 where there is no `/proc`.
pub(super) fn own_start_time() -> Result<u64, LeaseError> {
    if !crate::platform::PROC_FS {
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
pub(super) fn ancestors() -> Result<Vec<(u32, u64)>, LeaseError> {
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
