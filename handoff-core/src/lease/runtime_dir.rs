//! The per-user runtime directory the lease files live in.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};

use camino::{Utf8Path, Utf8PathBuf};

use super::{LeaseError, io_error};

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
pub(super) fn ensure_private_dir(path: &Utf8Path) -> Result<(), LeaseError> {
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
