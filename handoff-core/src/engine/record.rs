//! A root run in the task store: the run is appended to the timeline of the task of the
//! worktree it ran in, so the task's history shows delegated work next to its turns,
//! checkpoints and handoffs. A worktree without a task gets one, owned by the calling agent.
//! Runs rejected before they started, and runs that never reached a worktree, are not recorded.
//! The store is a side record: when it can't be used, the run's result and exit code stay as
//! they are and the outcome carries a warning. A task without a configuration state gets the
//! one taken before this run: trust starts at the task's first event.

use camino::Utf8PathBuf;
use sha2::{Digest, Sha256};

use super::{RunOutcome, SharedTaskStore};
use crate::names::Status;
use crate::task::{DelegatedRun, NewTask, Record, TaskAgent};
use crate::workspace::Workspace;

/// Appends the finished run to its worktree's task in `store`.
pub(super) fn delegated_run(
    store: &SharedTaskStore,
    workspace: &dyn Workspace,
    outcome: &RunOutcome,
    result_path: Option<&str>,
    config_state: Option<&crate::ConfigState>,
) -> Result<(), String> {
    // The worktree root as the fingerprint found it; a run that never got that far is not
    // tied to a worktree.
    let Some(root) = outcome
        .result
        .git
        .as_ref()
        .and_then(|g| g.before.as_ref())
        .map(|f| f.root.clone())
    else {
        return Ok(());
    };
    delegated_run_at(store, workspace, outcome, result_path, config_state, root)
}

/// Appends the finished run to the task of the worktree at `root` (for a run on another
/// machine: the worktree here, which its evidence does not name).
pub(super) fn delegated_run_at(
    store: &SharedTaskStore,
    workspace: &dyn Workspace,
    outcome: &RunOutcome,
    result_path: Option<&str>,
    config_state: Option<&crate::ConfigState>,
    root: Utf8PathBuf,
) -> Result<(), String> {
    let r = &outcome.result;
    if r.status == Status::Rejected {
        return Ok(());
    }
    let (Some(lineage), Some(operation), Some(target)) =
        (&r.lineage, r.operation, r.target.harness.clone())
    else {
        return Ok(());
    };
    let store = store.open()?;
    let location = workspace.location(&root);
    let found = match &location {
        Ok(l) => store.task_at(&root, &l.project_root),
        Err(_) => store.task_for_worktree(&root),
    }
    .map_err(|e| e.to_string())?;
    let task = match found {
        Some(t) => t,
        None => {
            let Some(caller) = &r.caller else {
                // No task to keep it with: the worktree keeps the state until one is made.
                if let Some(state) = config_state {
                    store
                        .save_worktree_config_state(&root, state)
                        .map_err(|e| e.to_string())?;
                }
                return Ok(());
            };
            let location = location.map_err(|e| e.to_string())?;
            store
                .create_task(&NewTask {
                    project_root: location.project_root,
                    worktree: root.clone(),
                    branch: location.branch,
                    agent: TaskAgent {
                        provider: caller.harness.clone(),
                        model: None,
                        account: None,
                    },
                })
                .map_err(|e| e.to_string())?
        }
    };
    if let Some(state) = config_state {
        store
            .save_config_state(&task.id, state)
            .map_err(|e| e.to_string())?;
    }
    store
        .append(
            &task.id,
            &Record::DelegatedRun(DelegatedRun {
                run_id: lineage.run_id.clone(),
                operation,
                mode: r.mode,
                target,
                status: r.status,
                exit_code: outcome.exit_code,
                result_path: result_path.map(Utf8PathBuf::from),
                result_hash: Some(format!(
                    "sha256:{:x}",
                    Sha256::digest(outcome.line.trim_end().as_bytes())
                )),
                host: r
                    .host
                    .as_ref()
                    .map(|h| h.name.clone().unwrap_or_else(|| h.ssh.clone())),
            }),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}
