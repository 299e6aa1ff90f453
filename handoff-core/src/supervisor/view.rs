//! What a nested adviser works on: the asking node's live worktree, read-only, or a snapshot of
//! it ([`choose`] decides, [`AdviserWorktree`] prepares and cleans up).

use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};

use crate::engine::NestedView;
use crate::isolation::{FilesystemWrite, Isolation};
use crate::workspace::{Workspace, WorktreeView};

/// The view an adviser running under `isolation` gets of the asking node's worktree: the live
/// worktree when the adviser cannot write it, else a snapshot.
///
/// A snapshot exists for two reasons: the adviser must not write into the asking worker's
/// files, and it must see one stable state. Copying a worktree is not cheap (about 1.9 s for
/// 100,000 files, all of it before the adviser starts), and for most advisers neither reason
/// needs a copy:
///
/// - An adviser whose enforced filesystem write level is `none` or `temp` cannot write the
///   worktree at all (Codex `read-only`, Claude Code's sandboxed review, OpenCode without a
///   shell, Cursor with the worktree in `--readonly-paths`): `temp` never includes the
///   worktree. It works in the asking node's own worktree: the root's, or for an adviser of an
///   adviser, the directory that adviser works in (its own live view or snapshot).
/// - The state stays stable because the asking worker is waiting: it asks through `handoff
///   advice`, a synchronous tool call, so its shell is blocked until the answer comes back.
///   Only a process it left running in the background (or anything else on the machine) could
///   write the worktree meanwhile. The engine fingerprints the worktree the adviser works in
///   before the adviser starts and again once its process tree is gone; advice is read-only, so
///   any difference, whoever made it, means the adviser may have read a moving tree, and the
///   node does not succeed (`blocked`, the "worktree changed during the read-only advice" outcome),
///   its result saying it ran on the live worktree (`view: "live"`). A change during the call
///   fails closed; it never goes unnoticed.
///
/// What the live view gives up is a worker's freedom to keep changing its worktree while an
/// adviser reads it (with a snapshot, the adviser answered about the frozen state); that is
/// now a failed advice call, which the worker's prompt warns about.
///
/// An adviser that could write the worktree it runs in (`worktree` and above) keeps the
/// snapshot: on the live worktree its writes would land in the worker's files before the
/// after-fingerprint could say so.
pub(super) fn choose(isolation: &Isolation) -> WorktreeView {
    match isolation.filesystem_write {
        FilesystemWrite::None | FilesystemWrite::Temp => WorktreeView::Live,
        FilesystemWrite::Worktree
        | FilesystemWrite::WorktreeAndTemp
        | FilesystemWrite::Anywhere => WorktreeView::Snapshot,
    }
}

/// The worktree an admitted adviser works in: where it is, and what must be made before the
/// adviser starts and removed once it ended.
#[derive(Debug, Clone)]
pub(super) struct AdviserWorktree {
    view: WorktreeView,
    root: Utf8PathBuf,
}

impl AdviserWorktree {
    /// The worktree of an adviser with `view`, asked by a node working in `asking`; a snapshot
    /// goes in a new directory under `snapshots` (made by [`prepare`](Self::prepare)).
    pub(super) fn new(view: WorktreeView, asking: &Utf8Path, snapshots: &Utf8Path) -> Self {
        let root = match view {
            WorktreeView::Live => asking.to_owned(),
            WorktreeView::Snapshot => {
                snapshots.join(format!("snap-{}", uuid::Uuid::new_v4().simple()))
            }
        };
        AdviserWorktree { view, root }
    }

    /// The view.
    pub(super) fn view(&self) -> WorktreeView {
        self.view
    }

    /// The root of the worktree the adviser works in (the asked `cwd` maps into it).
    pub(super) fn root(&self) -> &Utf8Path {
        &self.root
    }

    /// `rel` (relative to the asking node's worktree) inside this one.
    pub(super) fn join(&self, rel: &Utf8Path) -> Utf8PathBuf {
        if rel.as_str().is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    /// Makes the worktree ready: nothing for a live view; for a snapshot, the copy of the
    /// worktree that contains `source`.
    pub(super) async fn prepare(
        &self,
        workspace: Arc<dyn Workspace>,
        source: &Utf8Path,
    ) -> Result<NestedView, String> {
        match self.view {
            WorktreeView::Live => Ok(NestedView::Live),
            WorktreeView::Snapshot => {
                let source = source.to_owned();
                let dest = self.root.clone();
                tokio::task::spawn_blocking(move || workspace.snapshot(&source, &dest))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()))
                    .map(NestedView::Snapshot)
                    .map_err(|m| format!("cannot snapshot the worktree for the adviser: {m}"))
            }
        }
    }

    /// Removes what [`prepare`](Self::prepare) made: the snapshot; never the live worktree.
    pub(super) async fn remove(self) {
        if self.view == WorktreeView::Snapshot {
            let dest = self.root;
            let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dest)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::{Fingerprint, Snapshot, WorkspaceError};

    #[test]
    fn only_advisers_that_cannot_write_the_worktree_work_on_it_live() {
        for &level in FilesystemWrite::ALL {
            let isolation = Isolation {
                filesystem_write: level,
                ..Isolation::unconfined()
            };
            let expected = match level {
                FilesystemWrite::None | FilesystemWrite::Temp => WorktreeView::Live,
                _ => WorktreeView::Snapshot,
            };
            assert_eq!(choose(&isolation), expected, "{level}");
        }
    }

    /// A workspace whose snapshots are empty directories.
    struct Copies;

    impl Workspace for Copies {
        fn fingerprint(&self, cwd: &Utf8Path) -> Result<Fingerprint, WorkspaceError> {
            Err(WorkspaceError::NotAWorktree { path: cwd.into() })
        }

        fn snapshot(&self, cwd: &Utf8Path, dest: &Utf8Path) -> Result<Snapshot, WorkspaceError> {
            std::fs::create_dir(dest).map_err(|source| WorkspaceError::Io {
                path: dest.into(),
                source,
            })?;
            Ok(Snapshot {
                source_root: cwd.into(),
                root: dest.into(),
                commit: "0".repeat(40),
                base: None,
                files: 0,
            })
        }
    }

    #[tokio::test]
    async fn a_live_view_is_the_asking_worktree_and_is_never_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(tmp.path()).unwrap();
        let asking = base.join("worktree");
        let snapshots = base.join("snapshots");
        std::fs::create_dir_all(asking.join("src")).unwrap();
        std::fs::create_dir_all(&snapshots).unwrap();

        let live = AdviserWorktree::new(WorktreeView::Live, &asking, &snapshots);
        assert_eq!(live.root(), asking);
        assert_eq!(live.join(Utf8Path::new("src")), asking.join("src"));
        assert_eq!(live.join(Utf8Path::new("")), asking);
        let made = live.prepare(Arc::new(Copies), &asking).await.unwrap();
        assert!(matches!(made, NestedView::Live));
        live.remove().await;
        assert!(asking.join("src").is_dir(), "the live worktree stays");
        assert_eq!(std::fs::read_dir(&snapshots).unwrap().count(), 0);

        let snap = AdviserWorktree::new(WorktreeView::Snapshot, &asking, &snapshots);
        assert_eq!(snap.root().parent(), Some(snapshots.as_path()));
        assert_eq!(
            snap.join(Utf8Path::new("src")),
            snap.root().join("src"),
            "the asked cwd maps into the snapshot"
        );
        let made = snap.prepare(Arc::new(Copies), &asking).await.unwrap();
        let NestedView::Snapshot(made) = made else {
            panic!("a snapshot was asked for")
        };
        assert_eq!(made.root, snap.root());
        assert!(snap.root().is_dir());
        let root = snap.root().to_owned();
        snap.remove().await;
        assert!(!root.exists(), "the snapshot is removed");
        assert!(asking.is_dir());
    }
}
