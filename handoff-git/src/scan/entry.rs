//! One tracked path as the scan sees it: its stat data, what kind of thing it is, and its
//! content's id, from handoff's record when that vouches for it, else hashed.

use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;

use gix::ObjectId;
use gix::bstr::{BStr, ByteSlice};
use gix::index::entry::{Flags, Mode, Stat, stat};
use handoff_core::{RecordLookup, Stamp, WorkspaceError};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode as Perms, SFlag, fstatat};

use super::{Kind, ScanInput};
use crate::hash;
use crate::paths::entry_key;
use crate::state::Wt;

/// The stat data of `stat` at full width.
pub(crate) fn stamp_of(stat: &FileStat) -> Stamp {
    Stamp {
        dev: handoff_core::platform::device(stat),
        ino: stat.st_ino,
        mode: handoff_core::platform::mode(stat),
        uid: stat.st_uid,
        gid: stat.st_gid,
        size: stat.st_size,
        mtime: (stat.st_mtime, stat.st_mtime_nsec),
        ctime: (stat.st_ctime, stat.st_ctime_nsec),
    }
}

/// The worktree state of one path, `name` in the directory `dir`, tracked as `stages`; with
/// its stamp and content id when it is a file or symlink worth recording for the next scan.
pub(super) fn stat_entry(
    input: &ScanInput<'_>,
    lookup: &mut Option<RecordLookup<'_>>,
    dir: BorrowedFd<'_>,
    name: &[u8],
    path: &BStr,
    stages: &[gix::index::Entry],
    buf: &mut Vec<u8>,
) -> Result<(Wt, Option<(Stamp, ObjectId)>), WorkspaceError> {
    let entry = &stages[0];
    let single = stages.len() == 1 && entry.stage_raw() == 0;
    let stat = match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(errno) if is_absent(errno) => return Ok((Wt::Missing, None)),
        Err(errno) => return Err(io_error(input, path, errno)),
    };
    let mode = match kind_of(&stat) {
        Kind::Dir if entry.mode == Mode::COMMIT => return Ok((Wt::Nested, None)),
        Kind::Dir => return Ok((Wt::Dir, None)),
        Kind::Other => return Ok((Wt::Other, None)),
        Kind::Symlink => 0o120000,
        Kind::File if !input.symlinks && entry.mode == Mode::SYMLINK => 0o120000,
        Kind::File if !input.file_mode => {
            if entry.mode == Mode::FILE_EXECUTABLE {
                0o100755
            } else {
                0o100644
            }
        }
        Kind::File if stat.st_mode & 0o100 != 0 => 0o100755,
        Kind::File => 0o100644,
    };
    let same_mode = mode == entry.mode.bits();
    let stamp = stamp_of(&stat);
    // Worth recording: on the worktree's device, and unchanged since well before this scan.
    let recordable = stamp.dev == input.root_dev
        && stamp.mtime < input.record_before
        && stamp.ctime < input.record_before;
    let seen = |wt: Wt, id: ObjectId| Ok((wt, recordable.then_some((stamp, id))));
    let known = match lookup {
        // handoff's own record, never the index's stat data.
        Some(record) => input
            .use_stat_cache
            .then(|| record.get(path.as_bytes()))
            .flatten()
            .filter(|(recorded, _)| *recorded == stamp && recordable)
            .and_then(|(_, id)| ObjectId::try_from(id.as_slice()).ok()),
        None => (single
            && same_mode
            && input.use_stat_cache
            && !entry.flags.contains(Flags::INTENT_TO_ADD)
            && !entry
                .stat
                .is_racy(input.state.timestamp(), input.stat_options)
            && entry.stat.matches(&index_stat(&stat), input.stat_options))
        .then_some(entry.id),
    };
    if let Some(id) = known {
        return if single && same_mode && id == entry.id {
            seen(Wt::Same, id)
        } else {
            seen(Wt::Blob { mode, id }, id)
        };
    }
    let hashed = if SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK
    {
        readlinkat(dir, name).and_then(|target| {
            use std::os::unix::ffi::OsStrExt;
            hash::blob_id(input.object_hash, target.as_bytes()).map_err(errno_of)
        })
    } else {
        openat(dir, name, file_flags(), Perms::empty()).and_then(|fd| {
            let mut file = File::from(fd);
            let len = u64::try_from(stat.st_size).unwrap_or(0);
            hash::file_blob_id(input.object_hash, &mut file, len, buf).map_err(errno_of)
        })
    };
    let id = match hashed {
        Ok(id) => id,
        // Removed, or replaced by something else, since it was stat-ed.
        Err(errno) if is_absent(errno) || errno == Errno::ELOOP => return Ok((Wt::Missing, None)),
        Err(errno) => return Err(io_error(input, path, errno)),
    };
    if single && same_mode && id == entry.id {
        seen(Wt::Same, id)
    } else {
        seen(Wt::Blob { mode, id }, id)
    }
}

/// The kind of what `stat` describes.
pub(crate) fn kind_of(stat: &FileStat) -> Kind {
    match SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFLNK => Kind::Symlink,
        SFlag::S_IFDIR => Kind::Dir,
        _ => Kind::Other,
    }
}

/// `stat` in the index's representation (truncated to 32 bits where the index is).
pub(crate) fn index_stat(stat: &FileStat) -> Stat {
    Stat {
        mtime: stat::Time {
            secs: stat.st_mtime as u32,
            nsecs: stat.st_mtime_nsec as u32,
        },
        ctime: stat::Time {
            secs: stat.st_ctime as u32,
            nsecs: stat.st_ctime_nsec as u32,
        },
        dev: stat.st_dev as u32,
        ino: stat.st_ino as u32,
        uid: stat.st_uid,
        gid: stat.st_gid,
        size: stat.st_size as u32,
    }
}

pub(crate) fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn file_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY
}

/// Whether `errno` means that the path does not exist (anymore), or that a parent is no
/// directory (or a symbolic link where a directory was expected).
pub(crate) fn is_absent(errno: Errno) -> bool {
    matches!(errno, Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP)
}

fn errno_of(err: io::Error) -> Errno {
    err.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
}

pub(super) fn io_error(input: &ScanInput<'_>, path: &BStr, errno: Errno) -> WorkspaceError {
    WorkspaceError::Io {
        path: input.display_root.join(entry_key(path)),
        source: io::Error::from(errno),
    }
}
