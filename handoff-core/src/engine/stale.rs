//! Directories a handoff process left behind when it could not clean up (SIGKILL, a crash).
//!
//! Every private directory a run makes for its agent or its advisers (`handoff-run-…`,
//! `handoff-snapshots-…`) is held under an exclusive `flock` for as long as the run uses it; the
//! kernel drops the lock when the process dies, however it dies. When a root run starts, the
//! directories of this user whose lock can be taken are removed: they may hold an agent's MCP
//! configuration or a snapshot of a worktree. A directory in use is never touched, whatever
//! its process id means in this PID namespace; one younger than [`GRACE`] is left alone too,
//! as its maker may not have locked it yet.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use camino::Utf8Path;
use nix::fcntl::{Flock, FlockArg, OFlag};

/// The prefixes of the directories runs make.
pub(crate) const PREFIXES: [&str; 2] = ["handoff-run-", "handoff-snapshots-"];

/// A directory this young is never swept.
const GRACE: Duration = Duration::from_secs(60);

/// A private (0700) directory under `base`, named `<prefix>…`, locked while this value lives
/// and removed when it is dropped.
pub(crate) struct LockedDir {
    dir: tempfile::TempDir,
    _lock: Flock<File>,
}

impl LockedDir {
    /// Makes and locks the directory.
    pub(crate) fn new(base: &Path, prefix: &str) -> std::io::Result<LockedDir> {
        let private = std::fs::Permissions::from_mode(0o700);
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .permissions(private)
            .tempdir_in(base)?;
        let lock = Flock::lock(open_dir(dir.path())?, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| std::io::Error::from(e))?;
        Ok(LockedDir { dir, _lock: lock })
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn open_dir(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits())
        .open(path)
}

/// Removes the directories under `base` that dead handoff processes of this user left; returns
/// how many were removed.
pub(crate) fn sweep(base: &Utf8Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let uid = nix::unistd::getuid().as_raw();
    let now = SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name
            .to_str()
            .is_some_and(|n| PREFIXES.iter().any(|p| n.starts_with(p)))
        {
            continue;
        }
        // Only this user's directories, never through a symlink, never a new one.
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let young = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_none_or(|age| age < GRACE);
        if !meta.is_dir() || meta.uid() != uid || young {
            continue;
        }
        // The lock is free only when no live process holds the directory.
        let Ok(file) = open_dir(&path) else { continue };
        let Ok(_held) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue;
        };
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets `path`'s modification time `secs` seconds back.
    fn age(path: &Path, secs: u64) {
        let old = SystemTime::now() - Duration::from_secs(secs);
        File::open(path).unwrap().set_modified(old).unwrap();
    }

    #[test]
    fn only_unlocked_old_directories_of_runs_go() {
        let base = tempfile::tempdir().unwrap();
        let base_path = Utf8Path::from_path(base.path()).unwrap().to_owned();
        // Left by a process that died: no lock.
        let stale = base.path().join("handoff-run-left");
        std::fs::create_dir_all(stale.join("inside")).unwrap();
        age(&stale, 600);
        let stale_snap = base.path().join("handoff-snapshots-left");
        std::fs::create_dir(&stale_snap).unwrap();
        age(&stale_snap, 600);
        // In use by a live run (this process), however old.
        let live = LockedDir::new(base.path(), "handoff-run-").unwrap();
        age(live.path(), 600);
        // Just made, not locked yet.
        let young = base.path().join("handoff-run-young");
        std::fs::create_dir(&young).unwrap();
        // Not a run's.
        let other = base.path().join("handoff-mcp-x");
        std::fs::create_dir(&other).unwrap();
        age(&other, 600);
        let file = base.path().join("handoff-run-file");
        std::fs::write(&file, "").unwrap();
        age(&file, 600);

        assert_eq!(sweep(&base_path), 2);
        assert!(!stale.exists() && !stale_snap.exists());
        assert!(live.path().exists() && young.exists() && other.exists() && file.exists());
        // Once the run is over its directory is gone with its lock.
        let path = live.path().to_owned();
        drop(live);
        assert!(!path.exists());
    }
}
