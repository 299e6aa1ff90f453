//! What a checkpoint or continuation trusts of the worktree's configuration: what was there at
//! the task's first event. Hooks that changed since then do not run at the checkpoint (unless a
//! person passes `--run-hooks`), repository program settings that changed are left out of
//! handoff's git calls, and a receiver is not started on agent configuration that changed
//! (unless a person passes `--trust-project-config`).

use camino::Utf8Path;
use handoff_core::{ConfigChanges, ConfigState, StoreError, Task, TaskId, TaskStore};
use handoff_git::{Git, Trust};

use crate::error::{OrReject, Rejection};

/// The worktree's configuration now, and what changed since the task's first event.
#[derive(Debug, Clone)]
pub(crate) struct TaskTrust {
    /// The state now.
    pub now: ConfigState,
    /// The state at the task's first event, or at the worktree's when that made no task; none
    /// when this is the first event.
    pub start: Option<ConfigState>,
    /// What changed since then (nothing, when this is the first event).
    pub changes: ConfigChanges,
}

impl TaskTrust {
    /// Reads the worktree at `root` and the state `task` kept.
    pub fn read(
        store: &dyn TaskStore,
        task: Option<&Task>,
        root: &Utf8Path,
    ) -> Result<TaskTrust, Rejection> {
        let now = handoff_git::config_state(root)
            .map_err(|e| format!("cannot read the repository's configuration: {e}"))
            .rejected("repository")?;
        let mut start = match task {
            Some(t) => store.config_state(&t.id).rejected("task store")?,
            None => None,
        };
        if start.is_none() {
            start = store.worktree_config_state(root).rejected("task store")?;
        }
        let changes = start
            .as_ref()
            .map(|start| now.changed_since(start))
            .unwrap_or_default();
        Ok(TaskTrust {
            now,
            start,
            changes,
        })
    }

    /// The runner for `root`, trusting what did not change; hooks also when `run_hooks`.
    pub fn git(&self, root: &Utf8Path, run_hooks: bool) -> Git {
        Git::new(root).trusting(Trust {
            repo_programs: self.changes.git_programs.is_empty(),
            hooks: run_hooks || self.hooks_skipped(false).is_empty(),
        })
    }

    /// The changed hooks and hook-manager files because of which a commit's hooks do not run
    /// (none when `run_hooks`).
    pub fn hooks_skipped(&self, run_hooks: bool) -> Vec<String> {
        if run_hooks {
            return Vec::new();
        }
        self.changes.hooks.clone()
    }

    /// Keeps the state at the first event as the task's, unless it has one.
    pub fn keep(&self, store: &dyn TaskStore, task: &TaskId) -> Result<(), StoreError> {
        store
            .save_config_state(task, self.start.as_ref().unwrap_or(&self.now))
            .map(|_| ())
    }

    /// Refuses to start a receiver on agent configuration that changed since the task's first
    /// event, unless a person trusts it.
    pub fn check_receiver(&self, trust_project_config: bool) -> Result<(), Rejection> {
        if trust_project_config || self.changes.agent_config.is_empty() {
            return Ok(());
        }
        Err(Rejection::new(
            "--trust-project-config",
            format!(
                "agent configuration changed since the task began: {}; the receiver would load \
                 it: review it, then pass --trust-project-config",
                self.changes.agent_config.join(", ")
            ),
        ))
    }
}
