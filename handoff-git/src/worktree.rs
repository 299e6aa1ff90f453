//! The state of one path in the worktree: kind, executable bit and content hash.
//!
//! Content-based only: neither timestamps nor inode data take part, so touching a file or
//! refreshing the index's stat cache leaves the state as it was.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::Path;

use camino::Utf8Path;
use handoff_core::WorkspaceError;
use sha2::{Digest, Sha256};

use crate::workspace;

/// Files are hashed in chunks of this size; they are never read into memory whole.
const CHUNK: usize = 64 * 1024;

/// How deep nested repositories (submodules, repositories inside the worktree) are followed.
const MAX_NESTING: usize = 8;

/// The state of `path` in the worktree, as an opaque string that is equal iff nothing about the
/// path changed:
///
/// * `missing` — nothing there (or a parent is no longer a directory);
/// * `file:<644|755>:<sha256>` — a regular file, its executable bit and content hash;
/// * `symlink:<sha256>` — a symbolic link and the hash of its target text;
/// * `repo:<digest>` — a directory holding a nested repository (e.g. a checked-out submodule),
///   represented by that repository's own fingerprint digest;
/// * `dir` — a plain directory (e.g. a submodule that is not checked out);
/// * `other` — a FIFO, socket or device.
///
/// `display` names the path in errors; `depth` is the nesting level of the repository it is in.
pub(crate) fn state(
    path: &Path,
    display: &Utf8Path,
    depth: usize,
) -> Result<String, WorkspaceError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if is_absent(&err) => return Ok("missing".to_owned()),
        Err(source) => return Err(io_error(display, source)),
    };
    let kind = meta.file_type();
    if kind.is_file() {
        let mode = if is_executable(&meta) { "755" } else { "644" };
        match sha256_file(path) {
            Ok(hash) => Ok(format!("file:{mode}:{hash}")),
            Err(err) if is_absent(&err) => Ok("missing".to_owned()),
            Err(source) => Err(io_error(display, source)),
        }
    } else if kind.is_symlink() {
        match std::fs::read_link(path) {
            Ok(target) => Ok(format!(
                "symlink:{}",
                hex::encode(Sha256::digest(link_target_bytes(&target)))
            )),
            Err(err) if is_absent(&err) => Ok("missing".to_owned()),
            Err(source) => Err(io_error(display, source)),
        }
    } else if kind.is_dir() {
        match std::fs::symlink_metadata(path.join(".git")) {
            Ok(_) => Ok(nested_repository_state(path, depth)),
            Err(err) if is_absent(&err) => Ok("dir".to_owned()),
            Err(source) => Err(io_error(display, source)),
        }
    } else {
        Ok("other".to_owned())
    }
}

/// The state of a directory that contains `.git`: the digest of that repository's fingerprint.
///
/// A nested repository that cannot be opened or read yields a fixed marker rather than failing the
/// fingerprint of the enclosing repository.
fn nested_repository_state(path: &Path, depth: usize) -> String {
    if depth >= MAX_NESTING {
        return "repo:too-deep".to_owned();
    }
    let Ok(repo) = gix::open(path) else {
        return "repo:unreadable".to_owned();
    };
    match workspace::fingerprint_repository(&repo, depth + 1) {
        Ok(fingerprint) => format!("repo:{}", fingerprint.digest),
        Err(_) => "repo:unreadable".to_owned(),
    }
}

/// Whether `err` means that the path does not exist (anymore).
fn is_absent(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn io_error(display: &Utf8Path, source: io::Error) -> WorkspaceError {
    WorkspaceError::Io {
        path: display.to_owned(),
        source,
    }
}

/// Git's notion of "executable": the owner's execute bit.
#[cfg(unix)]
fn is_executable(meta: &Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o100 != 0
}

/// Without unix permissions there is no executable bit to observe.
#[cfg(not(unix))]
fn is_executable(_meta: &Metadata) -> bool {
    false
}

/// The bytes of a symbolic link's target text.
#[cfg(unix)]
fn link_target_bytes(target: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    target.as_os_str().as_bytes()
}

/// The bytes of a symbolic link's target text (lossy where it is not Unicode).
#[cfg(not(unix))]
fn link_target_bytes(target: &Path) -> Vec<u8> {
    target.to_string_lossy().into_owned().into_bytes()
}

/// The hex SHA-256 of the file at `path`, streamed in [`CHUNK`]-sized reads.
fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf8(path: &Path) -> &Utf8Path {
        Utf8Path::from_path(path).unwrap()
    }

    #[test]
    fn missing_paths_and_missing_parents_are_missing() {
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("absent");
        assert_eq!(state(&absent, utf8(&absent), 0).unwrap(), "missing");
        std::fs::write(dir.path().join("f"), "x").unwrap();
        let below_file = dir.path().join("f/child");
        assert_eq!(state(&below_file, utf8(&below_file), 0).unwrap(), "missing");
    }

    #[test]
    fn file_state_is_mode_and_content_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "hello").unwrap();
        assert_eq!(
            state(&path, utf8(&path), 0).unwrap(),
            "file:644:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
    }

    #[test]
    fn large_files_hash_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let content: Vec<u8> = (0..(3 * CHUNK + 17)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        assert_eq!(
            sha256_file(&path).unwrap(),
            hex::encode(Sha256::digest(&content))
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlink_state_hashes_the_target_text() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink("does-not-exist", &link).unwrap();
        assert_eq!(
            state(&link, utf8(&link), 0).unwrap(),
            format!("symlink:{}", hex::encode(Sha256::digest(b"does-not-exist")))
        );
    }

    #[test]
    fn plain_directories_are_dir() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(state(dir.path(), utf8(dir.path()), 0).unwrap(), "dir");
    }
}
