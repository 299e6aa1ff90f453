//! The private directories handoff makes for a run, and those a handoff process left behind
//! when it could not clean up (SIGKILL, a crash).
//!
//! Every private directory handoff makes while it works — a run's directory for its agent
//! (settings, MCP configuration, answer files), the supervisor's mailboxes, advisers' snapshots,
//! a continuation's carry scratch, the MCP server's inline instructions — is a [`PrivateDir`]:
//! 0700, named by its [`PrivateDirKind`], and held under an exclusive `flock` for as long as it
//! is used; the kernel drops the lock when the process dies, however it dies. When a root run starts, the
//! directories of this user whose lock can be taken are removed: they may hold an agent's MCP
//! configuration or a snapshot of a worktree. A directory in use is never touched, whatever
//! its process id means in this PID namespace; one younger than [`GRACE`] is left alone too,
//! as its maker may not have locked it yet.
//!
//! They live in the private work directory (see [`private_dir_base`]), never under `$TMPDIR`
//! or `/tmp`, which a sandboxed build agent may write (Codex's `workspace-write` can): an agent
//! must not be able to rewrite its own settings or answer file, nor an adviser's.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use camino::{Utf8Path, Utf8PathBuf};
use nix::fcntl::{Flock, FlockArg, OFlag};

use crate::lease::{LeaseError, private_dir_base};

/// What a private directory is for; each kind has its own name prefix, which the stale sweep
/// knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrivateDirKind {
    /// A run's directory for its agent (`handoff-run-…`).
    Run,
    /// The supervisor's mailboxes, one per node that may ask for advice
    /// (`handoff-mailboxes-…`).
    Mailboxes,
    /// Advisers' snapshots of the asking worktree (`handoff-snapshots-…`).
    Snapshots,
    /// A continuation's scratch for the transcript it carries (`handoff-carry-…`).
    Carry,
    /// The MCP server's inline instructions and notes (`handoff-mcp-…`).
    Mcp,
}

impl PrivateDirKind {
    /// Every kind.
    pub const ALL: [PrivateDirKind; 5] = [
        PrivateDirKind::Run,
        PrivateDirKind::Mailboxes,
        PrivateDirKind::Snapshots,
        PrivateDirKind::Carry,
        PrivateDirKind::Mcp,
    ];

    /// The prefix of the directory's name.
    pub fn prefix(self) -> &'static str {
        match self {
            PrivateDirKind::Run => "handoff-run-",
            PrivateDirKind::Mailboxes => "handoff-mailboxes-",
            PrivateDirKind::Snapshots => "handoff-snapshots-",
            PrivateDirKind::Carry => "handoff-carry-",
            PrivateDirKind::Mcp => "handoff-mcp-",
        }
    }
}

/// A directory this young is never swept.
const GRACE: Duration = Duration::from_secs(60);

/// A private (0700) directory, named `<prefix>…` after its kind, locked while this value lives
/// and removed when it is dropped.
#[derive(Debug)]
pub struct PrivateDir {
    // Removes the directory when dropped, while the lock (dropped after it) is still held.
    _dir: tempfile::TempDir,
    path: Utf8PathBuf,
    _lock: Flock<File>,
}

impl PrivateDir {
    /// Makes and locks a directory of `kind` in `base`.
    pub fn new(base: &Utf8Path, kind: PrivateDirKind) -> std::io::Result<PrivateDir> {
        let private = std::fs::Permissions::from_mode(0o700);
        let dir = tempfile::Builder::new()
            .prefix(kind.prefix())
            .permissions(private)
            .tempdir_in(base)?;
        let path = Utf8Path::from_path(dir.path())
            .ok_or_else(|| std::io::Error::other("the directory's path is not UTF-8"))?
            .to_owned();
        let lock = Flock::lock(open_dir(dir.path())?, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| std::io::Error::from(e))?;
        Ok(PrivateDir {
            _dir: dir,
            path,
            _lock: lock,
        })
    }

    /// Makes and locks a directory of `kind` where [`private_dir_base`] says: in `explicit`
    /// when given, else in the private work directory.
    pub fn create(
        explicit: Option<&Utf8Path>,
        kind: PrivateDirKind,
    ) -> Result<PrivateDir, LeaseError> {
        let base = private_dir_base(explicit)?;
        PrivateDir::new(&base, kind).map_err(|source| LeaseError::Io {
            action: "cannot create a private directory in",
            path: base,
            source,
        })
    }

    /// Its path.
    pub fn path(&self) -> &Utf8Path {
        &self.path
    }

    /// The descriptor its lock is on (for a process that is to hold it after this one).
    pub(crate) fn lock_fd(&self) -> RawFd {
        self._lock.as_raw_fd()
    }

    /// Lets go of the directory without removing or unlocking it: another process holds its
    /// lock (the same open file, inherited) and removes it when done.
    pub(crate) fn hand_over(self) {
        let PrivateDir {
            _dir,
            path: _,
            _lock,
        } = self;
        let _kept = _dir.keep();
        // Dropping the lock would unlock the open file the other process shares: its
        // descriptor is closed instead, which leaves the lock to the other.
        let fd = _lock.as_raw_fd();
        std::mem::forget(_lock);
        // SAFETY: `fd` belonged to the forgotten lock and is closed exactly once, here.
        #[allow(unsafe_code)]
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }

    /// Writes `contents` to a new file `name` in it that only its owner can read (never
    /// through a symlink, never over a file); returns the file's path.
    pub fn write_file(&self, name: &str, contents: &[u8]) -> std::io::Result<Utf8PathBuf> {
        let path = self.path.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)?;
        file.write_all(contents).and_then(|()| file.sync_all())?;
        Ok(path)
    }
}

fn open_dir(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits())
        .open(path)
}

/// Whether a live process holds the private directory at `path` (its lock is taken); a
/// directory that cannot be opened is held by no one.
pub(crate) fn held(path: &Utf8Path) -> bool {
    open_dir(path.as_std_path())
        .is_ok_and(|file| Flock::lock(file, FlockArg::LockExclusiveNonblock).is_err())
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
        if !name.to_str().is_some_and(|n| {
            PrivateDirKind::ALL
                .iter()
                .any(|k| n.starts_with(k.prefix()))
        }) {
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
    fn only_unlocked_old_private_directories_go() {
        let base = tempfile::tempdir().unwrap();
        let base_path = Utf8Path::from_path(base.path()).unwrap().to_owned();
        // Left by processes that died: no lock. Every kind is swept.
        let mut stale = Vec::new();
        for kind in PrivateDirKind::ALL {
            let dir = base.path().join(format!("{}left", kind.prefix()));
            std::fs::create_dir_all(dir.join("inside")).unwrap();
            age(&dir, 600);
            stale.push(dir);
        }
        // In use by a live run (this process), however old.
        let live = PrivateDir::new(&base_path, PrivateDirKind::Run).unwrap();
        age(live.path().as_std_path(), 600);
        let live_mcp = PrivateDir::new(&base_path, PrivateDirKind::Mcp).unwrap();
        age(live_mcp.path().as_std_path(), 600);
        // Just made, not locked yet.
        let young = base.path().join("handoff-carry-young");
        std::fs::create_dir(&young).unwrap();
        // Not handoff's.
        let other = base.path().join("handoff-other-x");
        std::fs::create_dir(&other).unwrap();
        age(&other, 600);
        let file = base.path().join("handoff-run-file");
        std::fs::write(&file, "").unwrap();
        age(&file, 600);

        assert_eq!(sweep(&base_path), PrivateDirKind::ALL.len());
        assert!(stale.iter().all(|d| !d.exists()), "{stale:?}");
        assert!(live.path().exists() && live_mcp.path().exists());
        assert!(young.exists() && other.exists() && file.exists());
        // Once the run is over its directory is gone with its lock.
        let path = live.path().to_owned();
        drop(live);
        assert!(!path.exists());
    }

    #[test]
    fn a_private_directory_is_closed_to_others_and_its_files_too() {
        let base = tempfile::tempdir().unwrap();
        let base_path = Utf8Path::from_path(base.path()).unwrap().to_owned();
        let dir = PrivateDir::new(&base_path, PrivateDirKind::Carry).unwrap();
        assert!(
            dir.path()
                .file_name()
                .unwrap()
                .starts_with("handoff-carry-")
        );
        let mode = std::fs::metadata(dir.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let file = dir.write_file("note.md", b"text").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"text");
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        // Never over a file that is already there.
        assert!(dir.write_file("note.md", b"other").is_err());
        assert_eq!(std::fs::read(&file).unwrap(), b"text");
    }
}
