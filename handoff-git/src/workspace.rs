//! [`GitWorkspace`]: fingerprints of a git worktree, taken with gix.

use std::collections::BTreeMap;
use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use gix::bstr::BStr;
use handoff_core::{
    ChangeCounts, FINGERPRINT_SCHEMA, Fingerprint, StatusChange, Workspace, WorkspaceError,
};
use sha2::{Digest, Sha256};

use crate::paths::{entry_key, worktree_path};
use crate::{status, worktree};

/// The pseudo-entry that records what HEAD resolves to and which branch it names.
///
/// Git never tracks paths below `.git`, so this key cannot clash with a real entry.
pub const HEAD_ENTRY: &str = ".git/HEAD";

/// Reads git evidence with gix: a content-addressed fingerprint of the whole worktree that
/// contains a directory. See the [crate documentation](crate) for what a fingerprint covers.
///
/// Taking a fingerprint never writes to the repository.
#[derive(Debug, Clone, Default)]
pub struct GitWorkspace {
    _private: (),
}

impl GitWorkspace {
    /// A workspace reader with default settings.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Workspace for GitWorkspace {
    fn fingerprint(&self, cwd: &Utf8Path) -> Result<Fingerprint, WorkspaceError> {
        let repo = discover(cwd)?;
        fingerprint_repository(&repo, 0)
    }
}

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

/// Finds the repository with a worktree that contains `cwd`.
fn discover(cwd: &Utf8Path) -> Result<gix::Repository, WorkspaceError> {
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
    let repo = match gix::discover(&start) {
        Ok(repo) => repo,
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

/// Fingerprints the worktree of `repo`; `depth` is how deeply it is nested inside the repository
/// the fingerprint was asked for (0 for that one).
pub(crate) fn fingerprint_repository(
    repo: &gix::Repository,
    depth: usize,
) -> Result<Fingerprint, WorkspaceError> {
    let Some(workdir) = repo.workdir() else {
        return Err(WorkspaceError::NotAWorktree {
            path: Utf8PathBuf::from(repo.git_dir().to_string_lossy().into_owned()),
        });
    };
    let root_path = workdir.to_owned();
    let root =
        Utf8PathBuf::from_path_buf(root_path.clone()).map_err(|path| WorkspaceError::Git {
            message: format!("the worktree root '{}' is not valid UTF-8", path.display()),
        })?;

    let (head, head_state) = head(repo)?;
    let index = repo
        .index_or_empty()
        .map_err(|err| git_error("cannot read the index", err))?;
    let status = status::collect(repo, &index)?;

    let mut entries = BTreeMap::new();
    entries.insert(HEAD_ENTRY.to_owned(), head_state);

    // Index entries are sorted by path and then stage, so the stages of a path are adjacent.
    let state: &gix::index::State = &index;
    let mut index_entries = state.entries().iter().peekable();
    while let Some(first) = index_entries.next() {
        let path = first.path(state);
        let mut stages = index_stage(first);
        while let Some(next) = index_entries.next_if(|e| e.path(state) == path) {
            stages.push(',');
            stages.push_str(&index_stage(next));
        }
        let worktree = path_state(&root_path, &root, path, depth)?;
        insert(
            &mut entries,
            entry_key(path),
            format!("tracked;index={stages};worktree={worktree}"),
        );
    }
    for path in &status.untracked {
        let worktree = path_state(&root_path, &root, path.as_ref(), depth)?;
        insert(
            &mut entries,
            entry_key(path.as_ref()),
            format!("untracked;worktree={worktree}"),
        );
    }

    let changes: Vec<StatusChange> = status.changes.into_values().collect();
    let change_counts = count(&changes);
    Ok(Fingerprint {
        schema_version: FINGERPRINT_SCHEMA.to_owned(),
        algorithm: "sha256".to_owned(),
        digest: digest(&entries),
        root,
        head,
        entry_count: entries.len() as u64,
        change_counts,
        changes,
        entries,
    })
}

/// The commit HEAD resolves to (`None` when unborn) and the state of [`HEAD_ENTRY`].
fn head(repo: &gix::Repository) -> Result<(Option<String>, String), WorkspaceError> {
    let mut head = repo
        .head()
        .map_err(|err| git_error("cannot read HEAD", err))?;
    let branch = head
        .referent_name()
        .map_or_else(|| "detached".to_owned(), |name| name.as_bstr().to_string());
    let id = head
        .try_peel_to_id()
        .map_err(|err| git_error("cannot resolve HEAD", err))?
        .map(|id| id.detach().to_hex().to_string());
    let state = format!("commit={};ref={branch}", id.as_deref().unwrap_or("unborn"));
    Ok((id, state))
}

/// `<stage>:<mode>:<object id>` plus the flags that are part of what the user staged.
fn index_stage(entry: &gix::index::Entry) -> String {
    use gix::index::entry::Flags;
    let mut out = format!(
        "{}:{:06o}:{}",
        entry.stage_raw(),
        entry.mode.bits(),
        entry.id.to_hex()
    );
    for (flag, name) in [
        (Flags::INTENT_TO_ADD, "+intent-to-add"),
        (Flags::SKIP_WORKTREE, "+skip-worktree"),
        (Flags::ASSUME_VALID, "+assume-unchanged"),
    ] {
        if entry.flags.contains(flag) {
            out.push_str(name);
        }
    }
    out
}

/// The worktree state of the repository-relative `path`.
fn path_state(
    root_path: &Path,
    root: &Utf8Path,
    path: &BStr,
    depth: usize,
) -> Result<String, WorkspaceError> {
    let display = root.join(entry_key(path));
    worktree::state(&worktree_path(root_path, path)?, &display, depth)
}

/// Adds an entry; should two distinct byte paths share a key (only possible for paths that are
/// not valid UTF-8), both states are kept.
fn insert(entries: &mut BTreeMap<String, String>, key: String, state: String) {
    entries
        .entry(key)
        .and_modify(|existing| {
            existing.push('|');
            existing.push_str(&state);
        })
        .or_insert(state);
}

fn count(changes: &[StatusChange]) -> ChangeCounts {
    let mut counts = ChangeCounts::default();
    for change in changes {
        counts.staged += u64::from(change.staged);
        counts.unstaged += u64::from(change.unstaged);
        counts.untracked += u64::from(change.untracked);
        counts.deleted += u64::from(change.deleted);
    }
    counts
}

/// `sha256:<hex>` over the schema version and every entry (path and state) in path order.
fn digest(entries: &BTreeMap<String, String>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(FINGERPRINT_SCHEMA.as_bytes());
    hasher.update(b"\n");
    for (path, state) in entries {
        hasher.update(path.as_bytes());
        hasher.update(b"\0");
        hasher.update(state.as_bytes());
        hasher.update(b"\n");
    }
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_depends_on_paths_and_states() {
        let a: BTreeMap<String, String> = [("a".to_owned(), "1".to_owned())].into();
        let b: BTreeMap<String, String> = [("a".to_owned(), "2".to_owned())].into();
        let c: BTreeMap<String, String> = [("b".to_owned(), "1".to_owned())].into();
        assert_ne!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
        assert_eq!(digest(&a), digest(&a.clone()));
        let d = digest(&a);
        assert!(d.starts_with("sha256:"));
        assert_eq!(d.len(), "sha256:".len() + 64);
    }

    #[test]
    fn counts_follow_the_flags() {
        let change = |staged, unstaged, untracked, deleted| StatusChange {
            path: "p".into(),
            staged,
            unstaged,
            untracked,
            deleted,
        };
        let counts = count(&[
            change(true, true, false, false),
            change(false, true, false, true),
            change(false, false, true, false),
        ]);
        assert_eq!(
            counts,
            ChangeCounts {
                staged: 1,
                unstaged: 2,
                untracked: 1,
                deleted: 1
            }
        );
    }
}
