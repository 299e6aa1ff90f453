//! Opening a repository as the evidence reads it: found from a directory in its worktree, blind
//! to the `GIT_*` variables of whoever started handoff; its index; its HEAD commit; and gix's
//! errors as [`WorkspaceError`]s.

use camino::Utf8Path;
use gix::ObjectId;
use handoff_core::WorkspaceError;

use crate::index_file::{Index, Unread};

/// Wraps a gix error, with what was being done, into [`WorkspaceError::Git`].
///
/// The message is the context followed by each error of gix's chain, outermost first.
pub(crate) fn git_error(context: &str, err: gix::Error) -> WorkspaceError {
    let mut message = context.to_owned();
    for cause in err.iter_errors().filter(|e| !e.is::<gix::Error>()) {
        let cause = cause.to_string();
        if !cause.is_empty() && !message.ends_with(&cause) {
            message.push_str(": ");
            message.push_str(&cause);
        }
    }
    WorkspaceError::Git { message }
}

/// How handoff opens a repository: as git would, but blind to the `GIT_*` variables of the
/// process that runs handoff (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`,
/// `GIT_OBJECT_DIRECTORY`, `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`…). Whoever started handoff (an
/// agent's shell) must not be able to point the evidence at another worktree, index or object
/// store, nor change the configuration it is read with. The same variables are removed from
/// every git command handoff runs (see [`crate::Git`]).
pub(crate) fn open_options(level: Option<gix::sec::Trust>) -> gix::open::Options {
    use gix::sec::trust::DefaultForLevel;
    let mut options = level.map_or_else(
        gix::open::Options::default,
        gix::open::Options::default_for_level,
    );
    options.permissions.env.git_prefix = gix::sec::Permission::Deny;
    options.permissions.env.objects = gix::sec::Permission::Deny;
    options.permissions.config.env = false;
    options
}

/// Finds the repository with a worktree that contains `cwd`.
pub(crate) fn discover(cwd: &Utf8Path) -> Result<gix::Repository, WorkspaceError> {
    let io = |source| WorkspaceError::Io {
        path: cwd.to_owned(),
        source,
    };
    let not_a_worktree = || WorkspaceError::NotAWorktree {
        path: cwd.to_owned(),
    };
    if !std::fs::metadata(cwd).map_err(io)?.is_dir() {
        return Err(not_a_worktree());
    }
    let start = std::path::absolute(cwd).map_err(io)?;
    let trust = gix::sec::trust::Mapping {
        full: open_options(Some(gix::sec::Trust::Full)),
        reduced: open_options(Some(gix::sec::Trust::Reduced)),
    };
    let repo = match gix::ThreadSafeRepository::discover_opts(
        &start,
        gix::discover::upwards::Options::default(),
        trust,
    ) {
        Ok(repo) => gix::Repository::from(repo),
        Err(err) => {
            return Err(
                if err
                    .downcast_any_ref::<gix::discover::upwards::Error>()
                    .is_some()
                {
                    not_a_worktree()
                } else {
                    git_error(
                        &format!("cannot open the repository containing '{cwd}'"),
                        err,
                    )
                },
            );
        }
    };
    if repo.workdir().is_none() {
        return Err(not_a_worktree());
    }
    Ok(repo)
}

/// Reads the index without verifying its checksum (git writes it atomically; the entries are
/// still parsed and checked); a repository without an index has an empty one. The index is
/// read as a stream ([`crate::index_file`]); one with a mandatory extension (a split or sparse
/// index) is left to gix.
pub(crate) fn read_index(repo: &gix::Repository) -> Result<Index, WorkspaceError> {
    let path = repo.index_path();
    match crate::index_file::read(&path, repo.object_hash()) {
        Ok(index) => Ok(index),
        Err(Unread::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => Ok(Index {
            state: gix::index::State::new(repo.object_hash()),
            tree: None,
        }),
        Err(Unread::Io(err)) => Err(WorkspaceError::Git {
            message: format!("cannot read the index: {err}"),
        }),
        Err(Unread::Corrupt(what)) => Err(WorkspaceError::Git {
            message: format!("cannot read the index: {what}"),
        }),
        Err(Unread::Mandatory) => {
            let file = gix::index::File::at(
                &path,
                repo.object_hash(),
                true,
                gix::index::decode::Options::default(),
            )
            .map_err(|err| git_error("cannot read the index", err))?;
            let (mut state, _) = file.into_parts();
            let tree = state.remove_tree();
            Ok(Index { state, tree })
        }
    }
}

/// The commit HEAD resolves to, `None` when the branch is unborn.
pub(crate) fn head_commit(repo: &gix::Repository) -> Result<Option<ObjectId>, WorkspaceError> {
    let mut head = repo
        .head()
        .map_err(|err| git_error("cannot read HEAD", err))?;
    Ok(head
        .try_peel_to_id()
        .map_err(|err| git_error("cannot resolve HEAD", err))?
        .map(|id| id.detach()))
}
