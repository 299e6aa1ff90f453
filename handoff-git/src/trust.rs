//! When stat data may stand in for reading a file: the worktree's filesystem, and how old a
//! file must be for its stamp to be recorded.

use std::path::Path;

use handoff_core::WorkspaceError;

/// How far a file's timestamps must predate a scan for its stamp to be recorded: more than
/// any local filesystem's timestamp granularity (the kernel stamps with a clock that ticks
/// every few milliseconds; FAT's is two seconds, but FAT is never trusted).
const GRANULARITY_SECS: i64 = 2;

/// What the worktree's filesystem is.
pub(crate) struct Filesystem {
    /// The root's device.
    pub(crate) dev: u64,
    /// Why its stat data cannot be trusted, if it cannot.
    pub(crate) untrusted: Option<&'static str>,
}

/// The filesystem of the worktree at `root`.
pub(crate) fn filesystem(root: &Path) -> Result<Filesystem, WorkspaceError> {
    let io = |errno: nix::errno::Errno| WorkspaceError::Io {
        path: camino::Utf8PathBuf::from(root.to_string_lossy().into_owned()),
        source: std::io::Error::from(errno),
    };
    let stat = nix::sys::stat::lstat(root).map_err(io)?;
    let fs = nix::sys::statfs::statfs(root).map_err(io)?;
    Ok(Filesystem {
        dev: handoff_core::platform::device(&stat),
        untrusted: handoff_core::platform::untrusted_filesystem(&fs),
    })
}

/// The time before which a file's mtime and ctime must lie for its stamp to be recorded by a
/// scan starting now (seconds, nanoseconds).
pub(crate) fn record_cutoff() -> (i64, i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    (secs - GRANULARITY_SECS, i64::from(now.subsec_nanos()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_worktree_is_trusted_and_its_device_known() {
        let tmp = tempfile::tempdir().unwrap();
        let fs = filesystem(tmp.path()).unwrap();
        let stat = nix::sys::stat::lstat(tmp.path()).unwrap();
        assert_eq!(fs.dev, handoff_core::platform::device(&stat));
        // The test machines keep their temporary directories on a local filesystem.
        assert_eq!(fs.untrusted, None);
    }

    #[test]
    fn the_cutoff_lies_before_now_by_the_granularity() {
        let (secs, _) = record_cutoff();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!((now - GRANULARITY_SECS - 1..=now - GRANULARITY_SECS).contains(&secs));
    }
}
