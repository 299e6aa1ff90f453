//! Snapshots of a worktree for a nested adviser: [`Workspace::snapshot`] for [`GitWorkspace`].
//!
//! A snapshot is a new repository whose HEAD is a detached commit holding the worktree's state
//! as it is now, checked out with a clean index. It borrows the source's objects through
//! `objects/info/alternates` (the common directory's `objects`, so linked worktrees work too):
//! content the source already has is not copied, and everything new (blobs of changed and
//! untracked files, trees, the commit) is written to the snapshot's own object database. Nothing
//! is ever written to the source repository.
//!
//! What the commit holds:
//!
//! * every tracked path as the worktree has it now: its content, executable bit or symbolic
//!   link target (a tracked path missing from the worktree is left out, as a commit of
//!   everything would leave it out); conflicted paths as the worktree has them;
//! * every untracked file and symbolic link that is not ignored, found as a fingerprint finds
//!   them (`.gitignore`, `info/exclude`, `core.excludesFile`); an untracked nested repository
//!   is left out;
//! * gitlinks (submodules) with the commit the index records, checked out as an empty
//!   directory: submodules are not copied;
//! * skip-worktree entries (sparse checkouts) with the index's content, not checked out and
//!   marked skip-worktree in the snapshot's index, as in the source.
//!
//! Each file is read once: the bytes hashed are the bytes checked out, whatever the agent that
//! owns the worktree writes meanwhile. A file that vanishes between listing and reading is left
//! out. Files are reached one path component at a time without following symbolic links, on
//! both sides, so neither reading nor writing leaves either tree.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use camino::{Utf8Path, Utf8PathBuf};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice, ByteVec};
use gix::index::entry::{Flags, Mode, Stat};
use gix::objs::Write as _;
use gix::objs::tree::{self, EntryKind};
use handoff_core::{Snapshot, WorkspaceError};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{Mode as Perms, fchmod, fstat, fstatat, mkdirat};

use crate::paths::entry_key;
use crate::scan::{self, Kind, ScanInput, dir_flags, index_stat, is_absent, kind_of};
use crate::untracked::{self, What};
use crate::workspace::{GitWorkspace, discover, git_error, head_commit, read_index};
use crate::{hash, par};

/// The author and committer of snapshot commits.
const AUTHOR_NAME: &str = "handoff";
/// Their email address.
const AUTHOR_EMAIL: &str = "handoff@localhost";

/// Files up to this size are read into memory whole; larger ones are streamed.
const IN_MEMORY: u64 = 8 << 20;

/// Paths copied per task of the parallel copy.
const CHUNK: usize = 32;

/// The snapshot's `info/attributes`: its files hold the worktree's bytes as they are (no clean
/// filter ran on them), so git in the snapshot must not convert line endings or run filters on
/// them, or it would see every file it rehashes as modified.
const RAW_ATTRIBUTES: &str = "* -text -eol -filter -ident -working-tree-encoding\n";

/// Makes the snapshot of the worktree that contains `cwd` at `dest`.
pub(crate) fn snapshot(
    options: &GitWorkspace,
    cwd: &Utf8Path,
    dest: &Utf8Path,
) -> Result<Snapshot, WorkspaceError> {
    let repo = discover(cwd)?;
    let Some(workdir) = repo.workdir() else {
        return Err(WorkspaceError::NotAWorktree {
            path: cwd.to_owned(),
        });
    };
    let root = workdir.to_owned();
    let source_root = utf8(root.clone())?;
    let target = create_dest(&repo, &root, dest)?;
    let result = utf8(target.clone()).and_then(|display| {
        let source = Source {
            repo: &repo,
            root: &root,
            display_root: &source_root,
        };
        fill(&source, &target, &display, options)
    });
    if result.is_err() {
        // Made by this call: nobody else has it yet.
        let _ = std::fs::remove_dir_all(&target);
    }
    result
}

/// The repository a snapshot is taken of.
struct Source<'a> {
    repo: &'a gix::Repository,
    root: &'a Path,
    display_root: &'a Utf8Path,
}

/// Checks `dest` and creates it (mode 0700): its parent must exist, it must not, and it must
/// be neither inside the source's worktree nor inside its git directories. Returns it with the
/// parent's symbolic links resolved.
fn create_dest(
    repo: &gix::Repository,
    root: &Path,
    dest: &Utf8Path,
) -> Result<PathBuf, WorkspaceError> {
    let io = |source| WorkspaceError::Io {
        path: dest.to_owned(),
        source,
    };
    let invalid = |why: &str| io(io::Error::new(io::ErrorKind::InvalidInput, why.to_owned()));
    let absolute = std::path::absolute(dest).map_err(io)?;
    let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
        return Err(invalid(
            "a snapshot needs a new directory in an existing one",
        ));
    };
    let target = std::fs::canonicalize(parent).map_err(io)?.join(name);
    for inside in [root, repo.git_dir(), repo.common_dir()] {
        if target.starts_with(std::fs::canonicalize(inside).map_err(io)?) {
            return Err(invalid(
                "a snapshot must be outside the worktree and the repository it copies",
            ));
        }
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&target)
        .map_err(io)?;
    Ok(target)
}

/// Fills the new, empty directory `target` with the snapshot repository.
fn fill(
    source: &Source<'_>,
    target: &Path,
    display: &Utf8Path,
    options: &GitWorkspace,
) -> Result<Snapshot, WorkspaceError> {
    let repo = source.repo;
    let git_dir = init(repo, target, display)?;

    let index = read_index(repo)?;
    let state: &gix::index::State = &index;
    let base = head_commit(repo)?;
    let threads = options.threads();
    let plan = plan(source, state, threads)?;

    let source_fd = open_dir(source.root, source.display_root)?;
    let target_fd = open_dir(target, display)?;
    let config = repo.config_snapshot();
    let checkout = Checkout {
        state,
        object_hash: repo.object_hash(),
        source: source.display_root,
        target: display,
        source_fd: &source_fd,
        target_fd: &target_fd,
        file_mode: config.boolean("core.fileMode").unwrap_or(true),
        symlinks: config.boolean("core.symlinks").unwrap_or(true),
    };
    let chunks: Vec<Range<usize>> = (0..plan.items.len())
        .step_by(CHUNK)
        .map(|start| start..(start + CHUNK).min(plan.items.len()))
        .collect();
    let copied = par::map(&chunks, threads, |range, buf| {
        checkout.chunk(&plan.items[range.clone()], buf)
    })?;

    let mut leaves = plan.index_only;
    let mut gitlinks = Vec::new();
    for (item, copied) in plan.items.into_iter().zip(copied.into_iter().flatten()) {
        match copied {
            Copied::Leaf { mode, id, stat } => leaves.push(Leaf {
                path: item.path,
                mode,
                id,
                stat,
                skip_worktree: false,
            }),
            Copied::Gitlink(id) => gitlinks.push((item.path, id)),
            Copied::Nothing => {}
        }
    }
    let files = leaves.iter().filter(|leaf| !leaf.skip_worktree).count() as u64;
    leaves.extend(checkout.gitlinks(gitlinks)?);
    leaves.sort_by(|a, b| a.path.cmp(&b.path));
    drop_shadowed(&mut leaves);

    let snap = gix::open_opts(target, gix::open::Options::isolated())
        .map_err(|err| git_error("cannot open the snapshot repository", err))?;
    store_blobs(&snap, &checkout, &leaves, threads)?;
    let tree = write_tree(&snap, &leaves, 0)?;
    let signature = gix::actor::Signature {
        name: AUTHOR_NAME.into(),
        email: AUTHOR_EMAIL.into(),
        time: gix::date::Time::now_local_or_utc(),
    };
    let commit = gix::objs::Commit {
        tree,
        parents: base.into_iter().collect(),
        author: signature.clone(),
        committer: signature,
        encoding: None,
        message: format!("handoff snapshot of {}\n", source.display_root).into(),
        extra_headers: Vec::new(),
    };
    let commit = snap
        .write_object(&commit)
        .map_err(|err| git_error("cannot write the snapshot commit", err))?
        .detach();
    let head = git_dir.join("HEAD");
    std::fs::write(&head, format!("{}\n", commit.to_hex())).map_err(|source| {
        WorkspaceError::Io {
            path: display.join(".git/HEAD"),
            source,
        }
    })?;
    // Last, so that the index is newer than every file it describes.
    write_index(&snap, &leaves, &git_dir)?;
    Ok(Snapshot {
        source_root: source.display_root.to_owned(),
        root: display.to_owned(),
        commit: commit.to_hex().to_string(),
        base: base.map(|id| id.to_hex().to_string()),
        files,
    })
}

/// Makes `target` a repository that borrows the objects of `repo` and treats files as bytes;
/// returns its git directory.
fn init(
    repo: &gix::Repository,
    target: &Path,
    display: &Utf8Path,
) -> Result<PathBuf, WorkspaceError> {
    gix::create::into(
        target,
        gix::create::Kind::WithWorktree,
        gix::create::Options {
            destination_must_be_empty: Some(true),
            fs_capabilities: None,
            object_hash: Some(repo.object_hash()),
        },
    )
    .map_err(|err| git_error("cannot create the snapshot repository", err))?;
    let git_dir = target.join(".git");
    let write = |rela: &str, content: &[u8]| -> Result<(), WorkspaceError> {
        let path = git_dir.join(rela);
        let io = |source| WorkspaceError::Io {
            path: display.join(".git").join(rela),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&path, content).map_err(io)
    };
    let common = repo.common_dir();
    let objects =
        std::fs::canonicalize(common.join("objects")).map_err(|source| WorkspaceError::Io {
            path: Utf8PathBuf::from(common.join("objects").to_string_lossy().into_owned()),
            source,
        })?;
    let mut alternates = objects.as_os_str().as_bytes().to_vec();
    if alternates.contains(&b'\n') {
        return Err(WorkspaceError::Git {
            message: format!(
                "the object directory '{}' cannot be an alternate: its path has a line break",
                objects.display()
            ),
        });
    }
    alternates.push(b'\n');
    write("objects/info/alternates", &alternates)?;
    write("info/attributes", RAW_ATTRIBUTES.as_bytes())?;
    // A shallow source's history ends where its `shallow` file says; so must the snapshot's.
    match std::fs::read(common.join("shallow")) {
        Ok(shallow) => write("shallow", &shallow)?,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(WorkspaceError::Io {
                path: Utf8PathBuf::from(common.join("shallow").to_string_lossy().into_owned()),
                source,
            });
        }
    }
    Ok(git_dir)
}

/// What to take from the source.
struct Plan {
    /// Paths to copy from the worktree, sorted.
    items: Vec<Item>,
    /// Skip-worktree entries and sparse directories, taken from the index as they are.
    index_only: Vec<Leaf>,
}

/// A path to copy from the worktree.
struct Item {
    path: BString,
    /// Its index entries (every stage); empty for an untracked path.
    stages: Range<usize>,
}

/// One entry of the snapshot's tree and index.
struct Leaf {
    /// Repository-relative; a sparse directory's ends with `/`.
    path: BString,
    mode: Mode,
    id: ObjectId,
    stat: Stat,
    /// In the tree and the index, not in the worktree.
    skip_worktree: bool,
}

/// Lists what to take: the index's paths and the untracked, not ignored ones.
fn plan(
    source: &Source<'_>,
    state: &gix::index::State,
    threads: usize,
) -> Result<Plan, WorkspaceError> {
    let repo = source.repo;
    let config = repo.config_snapshot();
    let input = ScanInput {
        root: source.root,
        display_root: source.display_root,
        state,
        stat_options: repo
            .stat_options()
            .map_err(|err| git_error("cannot read the stat options", err))?,
        use_stat_cache: true,
        file_mode: config.boolean("core.fileMode").unwrap_or(true),
        symlinks: config.boolean("core.symlinks").unwrap_or(true),
        object_hash: repo.object_hash(),
        threads,
    };
    let candidates = scan::candidates(&input)?;
    let found = untracked::classify(
        repo,
        state,
        source.root,
        source.display_root,
        candidates,
        false,
    )?;

    let entries = state.entries();
    let mut items = Vec::with_capacity(entries.len() + found.len());
    let mut index_only = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let entry = &entries[i];
        let path = entry.path(state);
        let mut end = i + 1;
        while end < entries.len() && entries[end].path(state) == path {
            end += 1;
        }
        let name = if entry.mode == Mode::DIR {
            path.strip_suffix(b"/").unwrap_or(path).as_bstr()
        } else {
            path
        };
        if !is_safe(name) {
            return Err(WorkspaceError::Git {
                message: format!(
                    "the index holds a path that cannot be checked out: '{}'",
                    entry_key(path)
                ),
            });
        }
        let single = end == i + 1 && entry.stage_raw() == 0;
        if entry.mode == Mode::DIR || (single && entry.flags.contains(Flags::SKIP_WORKTREE)) {
            index_only.push(Leaf {
                path: path.to_owned(),
                mode: entry.mode,
                id: entry.id,
                stat: Stat::default(),
                skip_worktree: true,
            });
        } else {
            items.push(Item {
                path: path.to_owned(),
                stages: i..end,
            });
        }
        i = end;
    }
    // Git could not track the others (`.GIT` on a case-sensitive file system, say) either.
    items.extend(
        found
            .into_iter()
            .filter(|found| found.what != What::Repo && is_safe(found.path.as_bstr()))
            .map(|found| Item {
                path: found.path,
                stages: 0..0,
            }),
    );
    items.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Plan { items, index_only })
}

/// Whether `path` is a relative path that stays below the worktree and out of `.git`: no empty,
/// `.` or `..` component, none named `.git` in any case.
fn is_safe(path: &BStr) -> bool {
    !path.is_empty()
        && path
            .split(|&b| b == b'/')
            .all(|part| !matches!(part, b"" | b"." | b"..") && !part.eq_ignore_ascii_case(b".git"))
}

/// What copying one path gave.
enum Copied {
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
struct Checkout<'a> {
    state: &'a gix::index::State,
    object_hash: gix::hash::Kind,
    /// The source's worktree root, for messages.
    source: &'a Utf8Path,
    /// The snapshot's root, for messages.
    target: &'a Utf8Path,
    source_fd: &'a OwnedFd,
    target_fd: &'a OwnedFd,
    /// The source's `core.fileMode`.
    file_mode: bool,
    /// The source's `core.symlinks`.
    symlinks: bool,
}

impl Checkout<'_> {
    /// Copies `items`, one result per item.
    fn chunk(&self, items: &[Item], buf: &mut Vec<u8>) -> Result<Vec<Copied>, WorkspaceError> {
        let mut source = Dirs::new(self.source_fd.as_fd(), false);
        let mut target = Dirs::new(self.target_fd.as_fd(), true);
        items
            .iter()
            .map(|item| self.item(&mut source, &mut target, item, buf))
            .collect()
    }

    fn item(
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
    fn file(
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
    fn symlink(
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
    fn gitlinks(&self, gitlinks: Vec<(BString, ObjectId)>) -> Result<Vec<Leaf>, WorkspaceError> {
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

    fn source_error(&self, path: &BStr, source: io::Error) -> WorkspaceError {
        WorkspaceError::Io {
            path: self.source.join(entry_key(path)),
            source,
        }
    }

    fn target_error(&self, path: &BStr, source: io::Error) -> WorkspaceError {
        WorkspaceError::Io {
            path: self.target.join(entry_key(path)),
            source,
        }
    }
}

/// Writes the blobs of the checked-out `leaves` that the snapshot's object database (its own
/// and the source's, through the alternates) does not have yet, read back from the checked-out
/// files: the source's files are read once, and only what is new is compressed and stored.
fn store_blobs(
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

/// Directories below a root, reached one component at a time without following symbolic
/// links, and kept open along the path last asked for: consecutive paths in one directory cost
/// one lookup each.
struct Dirs<'a> {
    root: BorrowedFd<'a>,
    /// Create directories that are not there.
    create: bool,
    /// The components of the directory open last, each with its descriptor.
    open: Vec<(Vec<u8>, OwnedFd)>,
}

impl<'a> Dirs<'a> {
    fn new(root: BorrowedFd<'a>, create: bool) -> Self {
        Dirs {
            root,
            create,
            open: Vec::new(),
        }
    }

    /// The directory `dir` (`a/b`, empty for the root); `None` if it is not a directory (a
    /// symbolic link, a file, nothing).
    fn get(&mut self, dir: &[u8]) -> Result<Option<BorrowedFd<'_>>, Errno> {
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
fn split(path: &BStr) -> (&[u8], &[u8]) {
    match path.rfind_byte(b'/') {
        Some(pos) => (&path[..pos], &path[pos + 1..]),
        None => (b"", path),
    }
}

/// Opens a file to read without following a symbolic link or blocking on a FIFO; `None` if it
/// is gone or is a symbolic link now.
fn open_file(dir: BorrowedFd<'_>, name: &[u8]) -> Result<Option<File>, Errno> {
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
fn create_file(dir: BorrowedFd<'_>, name: &[u8], exec: bool) -> Result<Option<File>, Errno> {
    let flags =
        OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let perms = Perms::from_bits_truncate(if exec { 0o777 } else { 0o666 });
    match openat(dir, name, flags, perms) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(Errno::EEXIST) => Ok(None),
        Err(errno) => Err(errno),
    }
}

fn open_dir(path: &Path, display: &Utf8Path) -> Result<OwnedFd, WorkspaceError> {
    openat(nix::fcntl::AT_FDCWD, path, dir_flags(), Perms::empty()).map_err(|errno| {
        WorkspaceError::Io {
            path: display.to_owned(),
            source: errno.into(),
        }
    })
}

/// Drops the skip-worktree entries that the checked-out paths leave no room for (a file where
/// a sparse directory was, say), keeping `leaves` sorted.
fn drop_shadowed(leaves: &mut Vec<Leaf>) {
    if !leaves.iter().any(|leaf| leaf.skip_worktree) {
        return;
    }
    let mut taken = std::collections::HashSet::new();
    for leaf in leaves.iter().filter(|leaf| !leaf.skip_worktree) {
        taken.insert(leaf.path.as_slice());
        for pos in slashes(&leaf.path) {
            taken.insert(&leaf.path[..=pos]);
        }
    }
    let shadowed: Vec<bool> = leaves
        .iter()
        .map(|leaf| {
            if !leaf.skip_worktree {
                return false;
            }
            let path = leaf.path.as_slice();
            let own = path.strip_suffix(b"/").unwrap_or(path);
            let mut dir = own.to_vec();
            dir.push(b'/');
            // Its own place, as a file or as a directory, and every directory above it.
            taken.contains(own)
                || taken.contains(dir.as_slice())
                || slashes(own).any(|pos| taken.contains(&own[..pos]))
        })
        .collect();
    let mut keep = shadowed.iter().map(|s| !s);
    leaves.retain(|_| keep.next().unwrap_or(true));
}

/// The positions of the `/` in `path`.
fn slashes(path: &[u8]) -> impl Iterator<Item = usize> + '_ {
    path.iter()
        .enumerate()
        .filter_map(|(pos, &b)| (b == b'/').then_some(pos))
}

/// Writes the tree of `leaves` (sorted, all below the directory `leaves[..].path[..prefix_len]`)
/// and the trees below it; returns its id.
fn write_tree(
    repo: &gix::Repository,
    leaves: &[Leaf],
    prefix_len: usize,
) -> Result<ObjectId, WorkspaceError> {
    let mut entries = Vec::new();
    let mut i = 0;
    while i < leaves.len() {
        let leaf = &leaves[i];
        let rest = &leaf.path[prefix_len..];
        match rest.find_byte(b'/') {
            Some(pos) if pos + 1 < rest.len() => {
                let dir = &leaf.path[..prefix_len + pos + 1];
                let end = i + leaves[i..].partition_point(|l| l.path.starts_with(dir));
                entries.push(tree::Entry {
                    mode: EntryKind::Tree.into(),
                    filename: rest[..pos].into(),
                    oid: write_tree(repo, &leaves[i..end], dir.len())?,
                });
                i = end;
            }
            _ => {
                let mode = leaf
                    .mode
                    .to_tree_entry_mode()
                    .ok_or_else(|| WorkspaceError::Git {
                        message: format!(
                            "'{}' has a mode a tree cannot hold: {:o}",
                            entry_key(leaf.path.as_bstr()),
                            leaf.mode.bits()
                        ),
                    })?;
                entries.push(tree::Entry {
                    mode,
                    filename: rest.strip_suffix(b"/").unwrap_or(rest).into(),
                    oid: leaf.id,
                });
                i += 1;
            }
        }
    }
    entries.sort();
    Ok(repo
        .write_object(&gix::objs::Tree { entries })
        .map_err(|err| git_error("cannot write a snapshot tree", err))?
        .detach())
}

/// Writes the snapshot's index: one entry per leaf, with a sparse directory's files listed one
/// by one (skip-worktree, as the rest of the snapshot's index is not sparse).
fn write_index(
    repo: &gix::Repository,
    leaves: &[Leaf],
    git_dir: &Path,
) -> Result<(), WorkspaceError> {
    let mut state = gix::index::State::new(repo.object_hash());
    for leaf in leaves {
        if leaf.mode == Mode::DIR {
            expand_sparse(repo, leaf.path.clone(), leaf.id, &mut state)?;
            continue;
        }
        let flags = if leaf.skip_worktree {
            Flags::SKIP_WORKTREE | Flags::EXTENDED
        } else {
            Flags::empty()
        };
        state.dangerously_push_entry(leaf.stat, leaf.id, flags, leaf.mode, leaf.path.as_bstr());
    }
    state.sort_entries();
    gix::index::File::from_state(state, git_dir.join("index"))
        .write(gix::index::write::Options::default())
        .map_err(|err| git_error("cannot write the snapshot's index", err))
}

/// Adds the files of the tree `id`, at `prefix` (`dir/`), to `state` as skip-worktree entries.
fn expand_sparse(
    repo: &gix::Repository,
    prefix: BString,
    id: ObjectId,
    state: &mut gix::index::State,
) -> Result<(), WorkspaceError> {
    let context = || {
        format!(
            "cannot read the sparse directory '{}'",
            entry_key(prefix.as_bstr())
        )
    };
    let tree = repo
        .find_tree(id)
        .map_err(|err| git_error(&context(), err))?;
    let decoded = tree.decode().map_err(|err| git_error(&context(), err))?;
    for entry in &decoded.entries {
        let mut path = prefix.clone();
        path.push_str(entry.filename);
        let mode = match entry.mode.kind() {
            EntryKind::Tree => {
                path.push_byte(b'/');
                expand_sparse(repo, path, entry.oid.to_owned(), state)?;
                continue;
            }
            EntryKind::Blob => Mode::FILE,
            EntryKind::BlobExecutable => Mode::FILE_EXECUTABLE,
            EntryKind::Link => Mode::SYMLINK,
            EntryKind::Commit => Mode::COMMIT,
        };
        state.dangerously_push_entry(
            Stat::default(),
            entry.oid.to_owned(),
            Flags::SKIP_WORKTREE | Flags::EXTENDED,
            mode,
            path.as_bstr(),
        );
    }
    Ok(())
}

fn utf8(path: PathBuf) -> Result<Utf8PathBuf, WorkspaceError> {
    Utf8PathBuf::from_path_buf(path).map_err(|path| WorkspaceError::Git {
        message: format!("'{}' is not valid UTF-8", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths_are_refused() {
        for path in ["a/b", "a", ".gitignore", "a/.github/x", "..a", "a.."] {
            assert!(is_safe(BStr::new(path)), "{path}");
        }
        for path in [
            "",
            "/a",
            "a/",
            "a//b",
            ".",
            "..",
            "../a",
            "a/../b",
            "a/..",
            ".git",
            ".GIT/x",
            "a/.Git/config",
            "./a",
        ] {
            assert!(!is_safe(BStr::new(path)), "{path}");
        }
    }

    #[test]
    fn paths_split_into_directory_and_name() {
        assert_eq!(split(BStr::new("a/b/c")), (&b"a/b"[..], &b"c"[..]));
        assert_eq!(split(BStr::new("c")), (&b""[..], &b"c"[..]));
    }

    fn leaf(path: &str, skip_worktree: bool) -> Leaf {
        Leaf {
            path: path.into(),
            mode: if path.ends_with('/') {
                Mode::DIR
            } else {
                Mode::FILE
            },
            id: ObjectId::null(gix::hash::Kind::Sha1),
            stat: Stat::default(),
            skip_worktree,
        }
    }

    #[test]
    fn checked_out_paths_shadow_skip_worktree_entries() {
        let mut leaves = vec![
            leaf("a", true),
            leaf("a/x", false),
            leaf("b/", true),
            leaf("b", false),
            leaf("c/d", true),
            leaf("c", false),
            leaf("e/", true),
            leaf("e/f", false),
            leaf("g", true),
            leaf("h/i", true),
            leaf("h/j", false),
        ];
        leaves.sort_by(|a, b| a.path.cmp(&b.path));
        drop_shadowed(&mut leaves);
        let kept: Vec<String> = leaves
            .iter()
            .map(|l| format!("{}{}", l.path, if l.skip_worktree { "*" } else { "" }))
            .collect();
        assert_eq!(kept, ["a/x", "b", "c", "e/f", "g*", "h/i*", "h/j"]);
    }
}
