//! The `git status` view of a repository, read with gix's status machinery.
//!
//! One pass yields three things: the HEAD-tree ↔ index differences (staged), the index ↔ worktree
//! differences (unstaged, deleted) and the untracked, not ignored files of the worktree, listed
//! file by file. The stat-cache updates gix collects on the way are dropped, never written back.

use std::collections::BTreeMap;

use gix::bstr::{BStr, BString};
use gix::dir::walk::EmissionMode;
use gix::status::Item;
use gix::status::index_worktree::Item as WorktreeItem;
use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
use gix::status::tree_index::TrackRenames;
use gix::worktree::IndexPersistedOrInMemory;
use handoff_core::{StatusChange, WorkspaceError};

use crate::paths::entry_key;
use crate::workspace::git_error;

/// What `git status` reports for a repository.
#[derive(Debug, Default)]
pub(crate) struct StatusView {
    /// One change per path, keyed (and thus sorted) by entry key.
    pub(crate) changes: BTreeMap<String, StatusChange>,
    /// Untracked, not ignored paths, each file individually (nested repositories as a whole).
    pub(crate) untracked: Vec<BString>,
}

impl StatusView {
    fn mark(&mut self, rela_path: &BStr, apply: impl FnOnce(&mut StatusChange)) {
        let key = entry_key(rela_path);
        let change = self
            .changes
            .entry(key.clone())
            .or_insert_with(|| StatusChange {
                path: key,
                staged: false,
                unstaged: false,
                untracked: false,
                deleted: false,
            });
        apply(change);
    }
}

/// Computes the status of `repo` against `index` (the index as read once by the caller).
pub(crate) fn collect(
    repo: &gix::Repository,
    index: &gix::worktree::Index,
) -> Result<StatusView, WorkspaceError> {
    // Explicit options rather than `status.showUntrackedFiles` (which may even disable the walk):
    // untracked files are always wanted, one by one like `-uall`, and ignored files never.
    let dirwalk = repo
        .dirwalk_options()
        .map_err(|err| git_error("cannot configure the directory walk", err))?
        .emit_untracked(EmissionMode::Matching)
        .emit_ignored(None)
        .emit_tracked(false)
        .emit_pruned(false)
        .emit_empty_directories(false)
        .emit_collapsed(None)
        .recurse_repositories(false);
    let iter = repo
        .status(gix::progress::Discard)
        .map_err(|err| git_error("cannot prepare the status", err))?
        .index(IndexPersistedOrInMemory::Persisted(index.clone()))
        .tree_index_track_renames(TrackRenames::Disabled)
        .index_worktree_rewrites(None)
        .index_worktree_options_mut(|options| options.dirwalk_options = Some(dirwalk))
        .into_iter(Vec::<BString>::new())
        .map_err(|err| git_error("cannot compute the status", err))?;

    let mut view = StatusView::default();
    for item in iter {
        let item = item.map_err(|err| git_error("cannot compute the status", err))?;
        match item {
            Item::TreeIndex(change) => {
                if let gix::diff::index::ChangeRef::Rewrite {
                    source_location, ..
                } = &change
                {
                    view.mark(source_location.as_ref(), |c| c.staged = true);
                }
                view.mark(change.location(), |c| c.staged = true);
            }
            Item::IndexWorktree(WorktreeItem::Modification {
                rela_path, status, ..
            }) => match status {
                EntryStatus::Change(Change::Removed) => view.mark(rela_path.as_ref(), |c| {
                    c.unstaged = true;
                    c.deleted = true;
                }),
                EntryStatus::Change(_)
                | EntryStatus::Conflict { .. }
                | EntryStatus::IntentToAdd => view.mark(rela_path.as_ref(), |c| c.unstaged = true),
                // Only the stat cache is out of date; the content is unchanged.
                EntryStatus::NeedsUpdate(_) => {}
            },
            Item::IndexWorktree(WorktreeItem::DirectoryContents { entry, .. }) => {
                if entry.status == gix::dir::entry::Status::Untracked {
                    view.mark(entry.rela_path.as_ref(), |c| c.untracked = true);
                    view.untracked.push(entry.rela_path);
                }
            }
            Item::IndexWorktree(WorktreeItem::Rewrite {
                source,
                dirwalk_entry,
                ..
            }) => {
                // Rename tracking is disabled above; should it happen anyway, report both sides.
                if let gix::status::index_worktree::RewriteSource::RewriteFromIndex {
                    source_rela_path,
                    ..
                } = &source
                {
                    view.mark(source_rela_path.as_ref(), |c| {
                        c.unstaged = true;
                        c.deleted = true;
                    });
                }
                if dirwalk_entry.status == gix::dir::entry::Status::Untracked {
                    view.mark(dirwalk_entry.rela_path.as_ref(), |c| c.untracked = true);
                    view.untracked.push(dirwalk_entry.rela_path);
                }
            }
        }
    }
    Ok(view)
}
