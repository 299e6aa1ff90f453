//! Repositories nested in a worktree (submodules, and untracked directories holding a
//! repository): each one's state is its own fingerprint's digest, judged by its own baseline.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use gix::bstr::BStr;
use handoff_core::{Baseline, WorkspaceError};

use crate::GitWorkspace;
use crate::paths::{entry_key, worktree_path};
use crate::repo::open_options;
use crate::state::Nested;
use crate::workspace::fingerprint_repository;

/// How deep nested repositories are followed.
const MAX_NESTING: usize = 8;

/// The state of a gitlink's directory that holds no repository.
pub(crate) const NO_REPOSITORY: &str = "dir";

/// The nested repositories of one worktree as a fingerprint reads them: what each is judged by
/// (the baseline an earlier fingerprint of the worktree recorded for it), and the baselines
/// this fingerprint records for the next.
pub(crate) struct NestedRepos<'a> {
    root: &'a Path,
    judged_by: Option<&'a Baseline>,
    baselines: BTreeMap<String, Baseline>,
}

impl<'a> NestedRepos<'a> {
    /// The nested repositories of the worktree at `root`, judged by `judged_by`'s.
    pub(crate) fn new(root: &'a Path, judged_by: Option<&'a Baseline>) -> Self {
        NestedRepos {
            root,
            judged_by,
            baselines: BTreeMap::new(),
        }
    }

    /// The state of the directory `path` (a gitlink's, or an untracked one with a `.git`): the
    /// fingerprint digest of the repository in it, or [`NO_REPOSITORY`] when there is none.
    /// A repository the earlier fingerprint saw is judged by its ignore rules and object store
    /// as they stood then, like the worktree around it: a `.gitignore` written inside a
    /// submodule hides nothing written there.
    pub(crate) fn state(
        &mut self,
        path: &BStr,
        depth: usize,
        options: &GitWorkspace,
    ) -> Result<Nested, WorkspaceError> {
        let dir = worktree_path(self.root, path)?;
        let unreadable = |state: &str| Nested {
            state: state.to_owned(),
            head: None,
            clean: true,
        };
        if std::fs::symlink_metadata(dir.join(".git")).is_err() {
            return Ok(unreadable(NO_REPOSITORY));
        }
        if depth >= MAX_NESTING {
            return Ok(unreadable("repo too-deep"));
        }
        let Ok(repo) = gix::open_opts(&dir, open_options(None)) else {
            return Ok(unreadable("repo unreadable"));
        };
        let key = entry_key(path);
        let judged_by = self
            .judged_by
            .and_then(|b| b.nested.get(&key))
            .map(|b| Arc::new(b.clone()));
        Ok(
            match fingerprint_repository(&repo, depth + 1, options, None, judged_by) {
                Ok(fingerprint) => {
                    if let Some(baseline) = fingerprint.baseline {
                        self.baselines.insert(key, Arc::unwrap_or_clone(baseline));
                    }
                    Nested {
                        state: format!("repo {}", fingerprint.digest),
                        clean: fingerprint.changes.is_empty(),
                        head: fingerprint.head,
                    }
                }
                Err(_) => unreadable("repo unreadable"),
            },
        )
    }

    /// The baselines of the repositories read, by worktree path.
    pub(crate) fn into_baselines(self) -> BTreeMap<String, Baseline> {
        self.baselines
    }
}
