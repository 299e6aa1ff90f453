//! Directory-relative file operations inside the snapshot's worktree, never following a link.

use super::*;

/// Directories below a root, reached one component at a time without following symbolic
/// links, and kept open along the path last asked for: consecutive paths in one directory cost
/// one lookup each.
pub(super) struct Dirs<'a> {
    pub(super) root: BorrowedFd<'a>,
    /// Create directories that are not there.
    pub(super) create: bool,
    /// The components of the directory open last, each with its descriptor.
    pub(super) open: Vec<(Vec<u8>, OwnedFd)>,
}

impl<'a> Dirs<'a> {
    pub(super) fn new(root: BorrowedFd<'a>, create: bool) -> Self {
        Dirs {
            root,
            create,
            open: Vec::new(),
        }
    }

    /// The directory `dir` (`a/b`, empty for the root); `None` if it is not a directory (a
    /// symbolic link, a file, nothing).
    pub(super) fn get(&mut self, dir: &[u8]) -> Result<Option<BorrowedFd<'_>>, Errno> {
        let mut parts = dir.split(|&b| b == b'/').filter(|part| !part.is_empty());
        let mut keep = 0;
        let mut next = None;
        for part in parts.by_ref() {
            match self.open.get(keep) {
                Some((name, _)) if name.as_slice() == part => keep += 1,
                _ => {
                    next = Some(part);
                    break;
                }
            }
        }
        self.open.truncate(keep);
        for part in next.into_iter().chain(parts) {
            let parent = self.open.last().map_or(self.root, |(_, fd)| fd.as_fd());
            if self.create {
                match mkdirat(parent, part, Perms::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(errno) => return Err(errno),
                }
            }
            match openat(parent, part, dir_flags(), Perms::empty()) {
                Ok(fd) => self.open.push((part.to_vec(), fd)),
                Err(errno) if is_absent(errno) => return Ok(None),
                Err(errno) => return Err(errno),
            }
        }
        Ok(Some(
            self.open.last().map_or(self.root, |(_, fd)| fd.as_fd()),
        ))
    }
}

/// `dir/name` as `(dir, name)`; `dir` is empty at the root.
pub(super) fn split(path: &BStr) -> (&[u8], &[u8]) {
    match path.rfind_byte(b'/') {
        Some(pos) => (&path[..pos], &path[pos + 1..]),
        None => (b"", path),
    }
}

/// Opens a file to read without following a symbolic link or blocking on a FIFO; `None` if it
/// is gone or is a symbolic link now.
pub(super) fn open_file(dir: BorrowedFd<'_>, name: &[u8]) -> Result<Option<File>, Errno> {
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_CLOEXEC
        | OFlag::O_NOCTTY
        | OFlag::O_NONBLOCK;
    match openat(dir, name, flags, Perms::empty()) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(errno) if is_absent(errno) => Ok(None),
        Err(errno) => Err(errno),
    }
}

/// Creates a new file in the snapshot; `None` if something is there already (two paths of the
/// source that cannot both exist, as the worktree changed while it was read).
pub(super) fn create_file(
    dir: BorrowedFd<'_>,
    name: &[u8],
    exec: bool,
) -> Result<Option<File>, Errno> {
    let flags =
        OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let perms = Perms::from_bits_truncate(if exec { 0o777 } else { 0o666 });
    match openat(dir, name, flags, perms) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(Errno::EEXIST) => Ok(None),
        Err(errno) => Err(errno),
    }
}

pub(super) fn open_dir(path: &Path, display: &Utf8Path) -> Result<OwnedFd, WorkspaceError> {
    openat(nix::fcntl::AT_FDCWD, path, dir_flags(), Perms::empty()).map_err(|errno| {
        WorkspaceError::Io {
            path: display.to_owned(),
            source: errno.into(),
        }
    })
}
