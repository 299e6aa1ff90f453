//! Phase 4, the first change: the checkpoint commit, the task, the new thread's worktree and
//! the push.

use camino::Utf8PathBuf;
use handoff_core::{
    AgentRef, Checkpoint, ContinueCheckpoint, ContinuePush, ContinueResult, ContinueTarget,
    ContinueWorktree, Fork, NewTask, Note, Record, Route, Task, TaskAgent,
};

use super::ContinueContext;
use super::validate::Plan;
use crate::error::{Failed, OrFail, Phase};

/// The task after the checkpoint: where the receiver works and what it gets.
pub(super) struct Moved {
    /// The note was written by handoff, not by the agent (`--generated-note`).
    pub generated_note: bool,
    /// The checkpoint commit.
    pub commit: String,
    /// The task the receiver works on (the new one with a new thread).
    pub work_task: Task,
    pub work_root: Utf8PathBuf,
    pub work_branch: String,
    pub from: TaskAgent,
    pub source_ref: AgentRef,
    pub target: ContinueTarget,
    pub route: Route,
    pub note: Note,
    pub note_text: String,
    pub note_dir: Utf8PathBuf,
    pub message: Option<String>,
}

/// Commits the checkpoint, records it, makes the new thread's worktree and pushes.
pub(super) fn make(
    ctx: &ContinueContext<'_>,
    plan: Plan,
    result: &mut ContinueResult,
) -> Result<Moved, Failed> {
    let store = ctx.store;
    let Plan {
        git,
        root,
        branch,
        head,
        task,
        source: from,
        target,
        route,
        prepared,
        uncommitted,
        push_remote,
        new_thread,
        note,
        note_text,
        note_dir,
        message,
        trust,
        ..
    } = plan;
    let committed = prepared.committed.clone();
    let checkpoint_message = format!(
        "handoff: checkpoint before continuing on {}",
        target.provider
    );
    let commit = match (&new_thread, committed.is_empty()) {
        (_, true) => head.clone(),
        (None, false) => prepared.commit(&git, &checkpoint_message)?,
        (Some(_), false) => prepared.commit_detached(&git, &checkpoint_message)?,
    };
    if let Some(c) = result.checkpoint.as_mut() {
        c.commit = Some(commit.clone());
    }
    let task = match task {
        Some(t) => t,
        None => store
            .create_task(&NewTask {
                project_root: git.project_root(),
                worktree: root.clone(),
                branch: Some(branch.clone()),
                agent: from.clone(),
            })
            .map_err(|e| {
                Failed::new(
                    Phase::Record,
                    format!("checkpoint {commit} made but the task store failed: {e}"),
                )
            })?,
    };
    trust.keep(store, &task.id).map_err(|e| {
        Failed::new(
            Phase::Record,
            format!("checkpoint {commit} made but the task store failed: {e}"),
        )
    })?;
    result.task_id = Some(task.id.clone());
    let source_ref = AgentRef {
        provider: from.provider.clone(),
        model: from.model.clone(),
    };
    store
        .append(
            &task.id,
            &Record::Checkpoint(Checkpoint {
                commit: commit.clone(),
                author: source_ref.clone(),
                message: checkpoint_message,
                committed,
                uncommitted,
            }),
        )
        .map_err(|e| {
            Failed::new(
                Phase::Record,
                format!("checkpoint {commit} made but not recorded: {e}"),
            )
        })?;

    // The branch the receiver works on, pushed when asked.
    let (work_root, work_branch, work_task) = match &new_thread {
        None => (root.clone(), branch.clone(), task.clone()),
        Some((path, new_branch)) => {
            git.run(&[
                "worktree",
                "add",
                "-q",
                "-b",
                new_branch,
                path.as_str(),
                &commit,
            ])
            .failed(Phase::Worktree)?;
            let forked = store
                .fork_task(
                    &task.id,
                    &Fork {
                        worktree: path.clone(),
                        branch: Some(new_branch.clone()),
                        agent: Some(from.clone()),
                    },
                )
                .map_err(|e| {
                    Failed::new(
                        Phase::Record,
                        format!("worktree {path} made but the task store failed: {e}"),
                    )
                })?;
            result.parent_task_id = Some(task.id.clone());
            result.task_id = Some(forked.id.clone());
            (path.clone(), new_branch.clone(), forked)
        }
    };
    result.worktree = Some(ContinueWorktree {
        path: work_root.clone(),
        branch: work_branch.clone(),
        created: new_thread.is_some(),
    });
    if let Some(remote) = &push_remote {
        let refspec = format!("{commit}:refs/heads/{work_branch}");
        git.run(&["push", "-q", remote, &refspec]).map_err(|e| {
            Failed::new(
                Phase::Push,
                format!("push failed (checkpoint {commit} kept): {e}"),
            )
        })?;
        result.push = Some(ContinuePush {
            remote: remote.clone(),
            branch: work_branch.clone(),
            pushed: true,
        });
    }
    Ok(Moved {
        generated_note: false,
        commit,
        work_task,
        work_root,
        work_branch,
        from,
        source_ref,
        target,
        route,
        note,
        note_text,
        note_dir,
        message,
    })
}

/// What the result says of the checkpoint before it is made.
pub(super) fn predicted(plan: &Plan) -> ContinueCheckpoint {
    ContinueCheckpoint {
        commit: plan
            .prepared
            .committed
            .is_empty()
            .then(|| plan.head.clone()),
        created: !plan.prepared.committed.is_empty(),
        committed: plan.prepared.committed.clone(),
        uncommitted: plan.uncommitted.clone(),
        // A new thread's commit is made without `git commit`, so without hooks either way.
        hooks_skipped: if plan.prepared.committed.is_empty() || plan.new_thread.is_some() {
            Vec::new()
        } else {
            plan.trust.hooks_skipped(plan.git.trust().hooks)
        },
    }
}
