//! Copying the worktree's files into the snapshot: blobs stored, files checked out.

use super::*;

/// What copying one path gave.
pub(super) enum Copied {
    /// A file or symbolic link, written and checked out.
    Leaf {
        mode: Mode,
        id: ObjectId,
        stat: Stat,
    },
    /// A gitlink whose directory is there: created once every file is.
    Gitlink(ObjectId),
    /// Nothing to take: gone, a directory, or something git does not track.
    Nothing,
}

/// Copies paths from the source's worktree into the snapshot.
pub(super) struct Checkout<'a> {
    pub(super) state: &'a gix::index::State,
    pub(super) object_hash: gix::hash::Kind,
    /// The source's worktree root, for messages.
    pub(super) source: &'a Utf8Path,
    /// The snapshot's root, for messages.
    pub(super) target: &'a Utf8Path,
    pub(super) source_fd: &'a OwnedFd,
    pub(super) target_fd: &'a OwnedFd,
    /// The source's `core.fileMode`.
    pub(super) file_mode: bool,
    /// The source's `core.symlinks`.
    pub(super) symlinks: bool,
}

impl Checkout<'_> {
    /// Copies `items`, one result per item.
    pub(super) fn chunk(
        &self,
        items: &[Item],
        buf: &mut Vec<u8>,
    ) -> Result<Vec<Copied>, WorkspaceError> {
        let mut source = Dirs::new(self.source_fd.as_fd(), false);
        let mut target = Dirs::new(self.target_fd.as_fd(), true);
        items
            .iter()
            .map(|item| self.item(&mut source, &mut target, item, buf))
            .collect()
    }

    pub(super) fn item(
        &self,
        source: &mut Dirs<'_>,
        target: &mut Dirs<'_>,
        item: &Item,
        buf: &mut Vec<u8>,
    ) -> Result<Copied, WorkspaceError> {
        let path = item.path.as_bstr();
        let (parent, name) = split(path);
        let read_error = |errno: Errno| self.source_error(path, io::Error::from(errno));
        let Some(dir) = source.get(parent).map_err(read_error)? else {
            return Ok(Copied::Nothing);
        };
        let stat = match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(errno) if is_absent(errno) => return Ok(Copied::Nothing),
            Err(errno) => return Err(read_error(errno)),
        };
        let stages = &self.state.entries()[item.stages.clone()];
        // The entry whose mode stands for the path: stage 0, else "ours" of a conflict.
        let tracked = stages
            .iter()
            .find(|e| e.stage_raw() == 0)
            .or_else(|| stages.iter().find(|e| e.stage_raw() == 2))
            .or(stages.first());
        let kind = kind_of(&stat);
        let content = match kind {
            Kind::Dir => {
                let gitlink = stages
                    .iter()
                    .filter(|e| e.mode == Mode::COMMIT)
                    .find(|e| e.stage_raw() == 0 || e.stage_raw() == 2)
                    .or_else(|| stages.iter().find(|e| e.mode == Mode::COMMIT));
                return Ok(gitlink.map_or(Copied::Nothing, |e| Copied::Gitlink(e.id)));
            }
            Kind::Other => return Ok(Copied::Nothing),
            Kind::Symlink => match readlinkat(dir, name) {
                Ok(link) => link.as_bytes().to_vec(),
                Err(errno) if is_absent(errno) || errno == Errno::EINVAL => {
                    return Ok(Copied::Nothing);
                }
                Err(errno) => return Err(read_error(errno)),
            },
            // Without `core.symlinks`, a symbolic link is checked out as a file holding its
            // target.
            Kind::File if !self.symlinks && tracked.is_some_and(|e| e.mode == Mode::SYMLINK) => {
                let Some(mut file) = open_file(dir, name).map_err(read_error)? else {
                    return Ok(Copied::Nothing);
                };
                let mut link = Vec::new();
                file.read_to_end(&mut link)
                    .map_err(|err| self.source_error(path, err))?;
                link
            }
            Kind::File => {
                let exec_in_index = tracked.is_some_and(|e| e.mode == Mode::FILE_EXECUTABLE);
                return self.file(dir, target, path, exec_in_index, buf);
            }
        };
        self.symlink(target, path, &content)
    }

    /// Copies the regular file `path` (`name` in `dir`).
    pub(super) fn file(
        &self,
        dir: BorrowedFd<'_>,
        target: &mut Dirs<'_>,
        path: &BStr,
        exec_in_index: bool,
        buf: &mut Vec<u8>,
    ) -> Result<Copied, WorkspaceError> {
        let (parent, name) = split(path);
        let read_error = |err: io::Error| self.source_error(path, err);
        let write_error = |err: io::Error| self.target_error(path, err);
        let Some(mut file) = open_file(dir, name).map_err(|e| read_error(e.into()))? else {
            return Ok(Copied::Nothing);
        };
        let stat = fstat(&file).map_err(|e| read_error(e.into()))?;
        if kind_of(&stat) != Kind::File {
            return Ok(Copied::Nothing);
        }
        let exec = if self.file_mode {
            stat.st_mode & 0o100 != 0
        } else {
            exec_in_index
        };
        let mode = if exec {
            Mode::FILE_EXECUTABLE
        } else {
            Mode::FILE
        };
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        let (out, id) = if size <= IN_MEMORY {
            buf.clear();
            file.read_to_end(buf).map_err(read_error)?;
            let id = hash::blob_id(self.object_hash, buf).map_err(read_error)?;
            let Some(dir) = target.get(parent).map_err(|e| write_error(e.into()))? else {
                return Ok(Copied::Nothing);
            };
            let Some(mut out) = create_file(dir, name, exec).map_err(|e| write_error(e.into()))?
            else {
                return Ok(Copied::Nothing);
            };
            out.write_all(buf).map_err(write_error)?;
            (out, id)
        } else {
            let Some(dir) = target.get(parent).map_err(|e| write_error(e.into()))? else {
                return Ok(Copied::Nothing);
            };
            let Some(mut out) = create_file(dir, name, exec).map_err(|e| write_error(e.into()))?
            else {
                return Ok(Copied::Nothing);
            };
            let len = io::copy(&mut file, &mut out).map_err(read_error)?;
            // The copy is the snapshot's own and stays as it is: hash it.
            out.seek(SeekFrom::Start(0)).map_err(write_error)?;
            let id =
                hash::file_blob_id(self.object_hash, &mut out, len, buf).map_err(write_error)?;
            (out, id)
        };
        let mut written = fstat(&out).map_err(|e| write_error(e.into()))?;
        if (written.st_mode & 0o100 != 0) != exec {
            // The umask took the executable bit away (or gave it): set it as the mode says.
            let perms = if exec {
                written.st_mode | 0o100
            } else {
                written.st_mode & !0o111
            };
            fchmod(&out, Perms::from_bits_truncate(perms & 0o7777))
                .map_err(|e| write_error(e.into()))?;
            written = fstat(&out).map_err(|e| write_error(e.into()))?;
        }
        Ok(Copied::Leaf {
            mode,
            id,
            stat: index_stat(&written),
        })
    }

    /// Makes the symbolic link `path` to `link`.
    pub(super) fn symlink(
        &self,
        target: &mut Dirs<'_>,
        path: &BStr,
        link: &[u8],
    ) -> Result<Copied, WorkspaceError> {
        let (parent, name) = split(path);
        let write_error = |errno: Errno| self.target_error(path, errno.into());
        let id =
            hash::blob_id(self.object_hash, link).map_err(|err| self.source_error(path, err))?;
        let Some(dir) = target.get(parent).map_err(write_error)? else {
            return Ok(Copied::Nothing);
        };
        match nix::unistd::symlinkat(link, dir, name) {
            Ok(()) => {}
            Err(Errno::EEXIST) => return Ok(Copied::Nothing),
            Err(errno) => return Err(write_error(errno)),
        }
        let stat = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(write_error)?;
        Ok(Copied::Leaf {
            mode: Mode::SYMLINK,
            id,
            stat: index_stat(&stat),
        })
    }

    /// Creates the directories of `gitlinks` (path, commit), after every file so that none is
    /// placed inside one; a gitlink whose place is taken is left out.
    pub(super) fn gitlinks(
        &self,
        gitlinks: Vec<(BString, ObjectId)>,
    ) -> Result<Vec<Leaf>, WorkspaceError> {
        let mut target = Dirs::new(self.target_fd.as_fd(), true);
        let mut leaves = Vec::with_capacity(gitlinks.len());
        for (path, id) in gitlinks {
            let (parent, name) = split(path.as_bstr());
            let write_error = |errno: Errno| self.target_error(path.as_bstr(), errno.into());
            let Some(dir) = target.get(parent).map_err(write_error)? else {
                continue;
            };
            match mkdirat(dir, name, Perms::from_bits_truncate(0o777)) {
                Ok(()) => {}
                Err(Errno::EEXIST) => continue,
                Err(errno) => return Err(write_error(errno)),
            }
            let stat = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(write_error)?;
            leaves.push(Leaf {
                path,
                mode: Mode::COMMIT,
                id,
                stat: index_stat(&stat),
                skip_worktree: false,
            });
        }
        Ok(leaves)
    }

    pub(super) fn source_error(&self, path: &BStr, source: io::Error) -> WorkspaceError {
        WorkspaceError::Io {
            path: self.source.join(entry_key(path)),
            source,
        }
    }

    pub(super) fn target_error(&self, path: &BStr, source: io::Error) -> WorkspaceError {
        WorkspaceError::Io {
            path: self.target.join(entry_key(path)),
            source,
        }
    }
}

/// Writes the blobs of the checked-out `leaves` that the snapshot's object database (its own
/// and the source's, through the alternates) does not have yet, read back from the checked-out
/// files: the source's files are read once, and only what is new is compressed and stored.
pub(super) fn store_blobs(
    snap: &gix::Repository,
    checkout: &Checkout<'_>,
    leaves: &[Leaf],
    threads: usize,
) -> Result<(), WorkspaceError> {
    let mut seen = std::collections::HashSet::new();
    let missing: Vec<&Leaf> = leaves
        .iter()
        .filter(|leaf| {
            !leaf.skip_worktree
                && matches!(
                    leaf.mode,
                    Mode::FILE | Mode::FILE_EXECUTABLE | Mode::SYMLINK
                )
                && !snap.objects.exists_without_refresh(&leaf.id)
                && seen.insert(leaf.id)
        })
        .collect();
    let loose = gix::odb::loose::Store::at(snap.git_dir().join("objects"), snap.object_hash());
    let target = checkout.target_fd.as_fd();
    par::map(&missing, threads, |leaf, _| {
        let path = leaf.path.as_bstr();
        let io_error = |err: io::Error| checkout.target_error(path, err);
        let store_error = |err| git_error(&format!("cannot store '{}'", entry_key(path)), err);
        if leaf.mode == Mode::SYMLINK {
            let link = readlinkat(target, path.as_bytes()).map_err(|e| io_error(e.into()))?;
            loose
                .write_buf_with_known_id(gix::objs::Kind::Blob, link.as_bytes(), leaf.id)
                .map_err(store_error)?;
        } else {
            let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let mut file = openat(target, path.as_bytes(), flags, Perms::empty())
                .map(File::from)
                .map_err(|e| io_error(e.into()))?;
            let len = file.metadata().map_err(io_error)?.len();
            loose
                .write_stream_with_known_id(gix::objs::Kind::Blob, len, &mut file, leaf.id)
                .map_err(store_error)?;
        }
        Ok(())
    })?;
    Ok(())
}
