//! Phase 3: the worktree is free — no root run or continuation holds it, no agent works in it.

use std::time::Duration;

use camino::Utf8Path;
use handoff_core::{Engine, Holder, LeaseError, RootLease, Wait, agents_working_in};
use tokio::sync::watch;

use crate::error::{ContinueError, OrReject, Rejection};

/// How often `wait` looks again for agents working in the worktree.
const AGENT_POLL: Duration = Duration::from_millis(250);

/// Takes the worktree's root lease, in the engine's runtime directory, for the length of the
/// handoff.
pub(super) async fn hold(
    engine: &Engine,
    root: &Utf8Path,
    wait: bool,
    cancel: watch::Receiver<bool>,
) -> Result<RootLease, ContinueError> {
    let dir = engine.runtime_dir().rejected("runtime directory")?;
    let holder = Holder {
        run_id: format!("continue-{}", uuid::Uuid::new_v4().hyphenated()),
        verb: "continue".into(),
        cwd: root.to_owned(),
    };
    match RootLease::try_acquire(&dir, root, &holder) {
        Ok(lease) => Ok(lease),
        Err(LeaseError::Busy { .. }) if wait => {
            RootLease::acquire(&dir, root, &holder, Wait::Until(cancel))
                .await
                .map_err(|e| match e {
                    LeaseError::Cancelled { .. } => ContinueError::Cancelled(
                        "cancelled by a signal while waiting for the worktree".into(),
                    ),
                    e => Rejection::new("worktree", e.to_string()).into(),
                })
        }
        Err(e) => Err(Rejection::new("worktree", e.to_string()).into()),
    }
}

/// Refuses (or with `wait`, waits) while an agent process works in the worktree.
pub(super) async fn wait_for_agents(
    engine: &Engine,
    root: &Utf8Path,
    wait: bool,
    source: Option<u32>,
    mut cancel: watch::Receiver<bool>,
) -> Result<(), ContinueError> {
    let names: Vec<&str> = engine
        .registry()
        .iter()
        .map(|p| p.spec().executable)
        .collect();
    loop {
        let mut working = agents_working_in(root, &names);
        // The agent the task moves from, still running after its hook started the move (and
        // its own descendants: its shells and tools): it is the source, not another agent.
        if let Some(source) = source {
            working.retain(|a| !handoff_core::descends_from(a.pid, source));
        }
        let Some(first) = working.first() else {
            return Ok(());
        };
        if !wait {
            return Err(Rejection::new(
                "worktree",
                format!(
                    "{} (pid {}) is working in '{}': let it finish, or pass --wait",
                    first.name, first.pid, first.cwd
                ),
            )
            .into());
        }
        tokio::select! {
            () = tokio::time::sleep(AGENT_POLL) => {}
            _ = cancel.changed() => {}
        }
        if *cancel.borrow() {
            return Err(ContinueError::Cancelled(
                "cancelled by a signal while waiting for the agents in the worktree".into(),
            ));
        }
    }
}
