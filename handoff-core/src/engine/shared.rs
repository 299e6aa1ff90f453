//! The evidence a panel's members share: one "before" of their worktree, taken by the panel
//! before any member starts, and one "after", taken once every member's agent (and its whole
//! process tree) is gone.
//!
//! Members run at once on the same worktree, so a change made while they run cannot be pinned
//! on one of them: a member's own "after", taken while another member still runs, would judge
//! that member by what the other did, and a change made after it would escape it. One "after",
//! when nothing of any member is left, judges them all by the same worktree: any change blocks
//! every member, and so the panel (10). It is also a panel's cost: two fingerprints of the
//! worktree, as for one run, instead of two per member.

use std::sync::{Arc, Mutex};

use camino::Utf8PathBuf;
use tokio::sync::watch;

use super::Engine;
use super::verdict::After;
use crate::lease::RootLease;
use crate::workspace::{Fingerprint, GitEvidence, ParkedFingerprint, Workspace};
use crate::{ArtifactPath, ArtifactWatch, Sweep};

/// What every member compares against and how the comparison reaches them.
pub(super) struct SharedEvidence {
    /// The summary of the panel's "before": each member's `git.before`.
    pub(super) summary: Fingerprint,
    /// The configuration that runs programs, as it was before the panel.
    pub(super) config_state: Option<crate::ConfigState>,
    /// The worktree lease the panel took for every member.
    pub(super) lease: Arc<RootLease>,
    cwd: Utf8PathBuf,
    workspace: Arc<dyn Workspace>,
    pending: Mutex<Pending<ParkedFingerprint>>,
    /// What the members' own sandboxes may have left: the paths absent before the panel, and
    /// those the members' CLIs leave (`None` once a member's processes are not known gone).
    artifacts: Option<(crate::ArtifactWatch, Mutex<Option<Vec<ArtifactPath>>>)>,
    done: watch::Sender<Option<Compared>>,
}

/// The comparison every member gets, and what was swept before it.
type Compared = (After, Option<GitEvidence>, Option<Sweep>);

struct Pending<T> {
    /// The full "before" (per-path states and record), until the last member takes it.
    before: Option<T>,
    /// Which members have arrived at their "after" (or were given up).
    arrived: Vec<bool>,
}

impl<T> Pending<T> {
    /// Marks member `index` as arrived (again is a no-op); the "before" when every member has
    /// now arrived, once.
    fn arrive(&mut self, index: usize) -> Option<T> {
        if let Some(seat) = self.arrived.get_mut(index) {
            *seat = true;
        }
        if self.arrived.iter().all(|a| *a) {
            self.before.take()
        } else {
            None
        }
    }
}

/// A member's place in the panel: the shared evidence, its index, and its slot among the
/// members running at once (`--max-concurrency`), given back when its agent is gone so that a
/// member waiting for the others' "after" does not keep a waiting member from starting.
#[derive(Clone)]
pub(super) struct Seat {
    pub(super) shared: Arc<SharedEvidence>,
    pub(super) index: usize,
    pub(super) slot: Arc<Mutex<Option<tokio::sync::OwnedSemaphorePermit>>>,
}

impl Seat {
    /// Gives the member's slot back.
    pub(super) fn free_slot(&self) {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

impl SharedEvidence {
    /// The evidence shared by `members` members, from the panel's `before` of the worktree
    /// containing `cwd`, read by `workspace`.
    pub(super) fn new(
        before: ParkedFingerprint,
        config_state: Option<crate::ConfigState>,
        lease: Arc<RootLease>,
        cwd: Utf8PathBuf,
        workspace: Arc<dyn Workspace>,
        members: usize,
        artifacts: Option<ArtifactWatch>,
    ) -> SharedEvidence {
        SharedEvidence {
            summary: before.summary(),
            config_state,
            lease,
            cwd,
            workspace,
            pending: Mutex::new(Pending {
                before: Some(before),
                arrived: vec![false; members],
            }),
            artifacts: artifacts.map(|w| (w, Mutex::new(Some(Vec::new())))),
            done: watch::channel(None).0,
        }
    }

    /// Adds what a member's CLI leaves (`None`: its processes are not known gone, and
    /// nothing is swept).
    fn note_left(&self, left: Option<Vec<ArtifactPath>>) {
        let Some((_, all)) = &self.artifacts else {
            return;
        };
        let mut all = all.lock().unwrap_or_else(|e| e.into_inner());
        match (all.as_mut(), left) {
            (Some(all), Some(left)) => {
                for path in left {
                    if !all.contains(&path) {
                        all.push(path);
                    }
                }
            }
            _ => *all = None,
        }
    }

    /// Sweeps what the members left, when every member's processes are gone.
    fn sweep(&self) -> Option<Sweep> {
        let (watch, all) = self.artifacts.as_ref()?;
        let all = all.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
        Some(watch.sweep(&all))
    }

    /// Marks member `index` as arrived; the full "before" when it was the last to, once.
    fn arrive_at(&self, index: usize) -> Option<ParkedFingerprint> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .arrive(index)
    }

    /// Member `index`'s agent is gone: waits until every member's is, and returns the one
    /// comparison of the worktree with the panel's "before". The last member to arrive takes
    /// the "after" (and keeps its record for the next run) for all.
    pub(super) async fn arrive(
        &self,
        engine: &Engine,
        index: usize,
        left: Option<Vec<ArtifactPath>>,
    ) -> Compared {
        let mut done = self.done.subscribe();
        self.note_left(left);
        if let Some(before) = self.arrive_at(index) {
            self.compare(engine, before).await;
        }
        match done.wait_for(Option::is_some).await {
            Ok(compared) => compared.clone().unwrap_or_else(unreadable),
            Err(_) => unreadable(),
        }
    }

    /// Member `index` stopped without arriving (its task failed): it is counted as arrived, so
    /// the others do not wait for it; when it was the last, the comparison is taken now.
    pub(super) async fn give_up(&self, engine: &Engine, index: usize) {
        self.note_left(None);
        if let Some(before) = self.arrive_at(index) {
            self.compare(engine, before).await;
        }
    }

    async fn compare(&self, engine: &Engine, before: ParkedFingerprint) {
        let sweep = self.sweep();
        let (after, evidence) = engine
            .compare(before, &self.cwd, Arc::clone(&self.workspace), Some(&[]))
            .await;
        let (after, evidence) = super::observe::with_kept(after, evidence, sweep.as_ref());
        self.done.send_replace(Some((after, evidence, sweep)));
    }
}

fn unreadable() -> Compared {
    (
        After::Unreadable("the panel's worktree was not compared".into()),
        None,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::Pending;

    #[test]
    fn the_before_goes_to_the_last_member_to_arrive_once() {
        let mut pending = Pending {
            before: Some("before"),
            arrived: vec![false; 3],
        };
        assert_eq!(pending.arrive(2), None);
        // A member counted twice (it arrived, then its task failed) is still one member.
        assert_eq!(pending.arrive(2), None);
        assert_eq!(pending.arrive(0), None);
        assert_eq!(pending.arrive(1), Some("before"));
        assert_eq!(pending.arrive(1), None);
        // An index out of range counts for no one.
        let mut one = Pending {
            before: Some(1),
            arrived: vec![false],
        };
        assert_eq!(one.arrive(5), None);
        assert_eq!(one.arrive(0), Some(1));
    }
}
