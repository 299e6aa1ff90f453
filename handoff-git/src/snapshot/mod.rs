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

mod checkout;
mod files;
mod index;
mod plan;

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
use crate::repo::{discover, git_error, head_commit, read_index};
use crate::scan::{self, Kind, ScanInput, dir_flags, index_stat, is_absent, kind_of};
use crate::untracked::{self, What};
use crate::{hash, par};

use checkout::*;
use files::*;
use index::*;
use plan::*;

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
    threads: usize,
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
        fill(&source, &target, &display, threads)
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
    threads: usize,
) -> Result<Snapshot, WorkspaceError> {
    let repo = source.repo;
    let git_dir = init(repo, target, display)?;

    let index = read_index(repo)?;
    let state: &gix::index::State = &index.state;
    let base = head_commit(repo)?;
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
