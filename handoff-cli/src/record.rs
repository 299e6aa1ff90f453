//! Recording a root delegation in the task store, so `handoff log` shows it with the
//! continuation's turns, checkpoints and handoffs.
//!
//! A run is recorded on the task of the worktree it ran in; a worktree without a task gets one,
//! owned by the calling agent. Runs rejected before they started are not recorded. The store is
//! a side record: when it can't be used, one warning goes to stderr and the run's result and
//! exit code stay as they are.

use std::collections::BTreeMap;
use std::io::Write;

use camino::Utf8PathBuf;
use handoff_core::{DelegatedRun, NewTask, Record, RunOutcome, Status, TaskAgent, TaskStore};
use handoff_store::SqliteStore;
use sha2::{Digest, Sha256};

/// Appends the finished run to its worktree's task; warns (never fails) when it can't.
pub fn delegated_run(outcome: &RunOutcome, result_path: Option<&str>) {
    if let Err(e) = record(outcome, result_path) {
        let _ = writeln!(
            std::io::stderr(),
            "handoff: warning: the run was not recorded in the task store: {e}"
        );
    }
}

fn record(outcome: &RunOutcome, result_path: Option<&str>) -> Result<(), String> {
    let r = &outcome.result;
    if r.status == Status::Rejected {
        return Ok(());
    }
    // The worktree root as the fingerprint found it; a run that never got that far is not
    // tied to a worktree.
    let Some(root) = r
        .git
        .as_ref()
        .and_then(|g| g.before.as_ref())
        .map(|f| f.root.clone())
    else {
        return Ok(());
    };
    let (Some(lineage), Some(operation), Some(target)) =
        (&r.lineage, r.operation, r.target.harness.clone())
    else {
        return Ok(());
    };
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let store = SqliteStore::open_default(&env).map_err(|e| e.to_string())?;
    let task = match store.task_for_worktree(&root).map_err(|e| e.to_string())? {
        Some(t) => t,
        None => {
            let Some(caller) = &r.caller else {
                return Ok(());
            };
            let state = handoff_git::repo_state(&root).map_err(|e| e.to_string())?;
            store
                .create_task(&NewTask {
                    project_root: project_root(&root),
                    worktree: root.clone(),
                    branch: state.branch,
                    agent: TaskAgent {
                        provider: caller.harness.clone(),
                        model: None,
                        account: None,
                    },
                })
                .map_err(|e| e.to_string())?
        }
    };
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
            }),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The main worktree of the repository `root` belongs to.
fn project_root(root: &camino::Utf8Path) -> Utf8PathBuf {
    handoff_git::Git::new(root).project_root()
}
