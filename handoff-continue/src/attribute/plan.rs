//! The plan: base, started handoffs and the spans between them.

use super::*;

// The plan: base, started handoffs and the spans between them.
// ---------------------------------------------------------------------------------------------

/// Where segment 0 starts, and why there.
pub(super) struct Base {
    pub(super) commit: String,
    pub(super) first_checkpoint: String,
    /// The first checkpoint is a root commit, so it is its own base.
    pub(super) root: bool,
}

/// A started handoff that moved the task to its target.
pub(super) struct Transfer<'a> {
    pub(super) row: &'a HandoffRow,
    /// The commit the receiver started from.
    pub(super) checkpoint: String,
}

pub(super) struct Plan<'a> {
    pub(super) base: Base,
    pub(super) transfers: Vec<Transfer<'a>>,
    pub(super) spans: Vec<Span<'a>>,
}

/// One owner's stretch of the task, before it is diffed.
pub(super) struct Span<'a> {
    pub(super) owner: AgentRef,
    /// The started handoff that gave the owner the task; none for the first owner.
    pub(super) handoff: Option<&'a HandoffRow>,
    pub(super) from: String,
    /// `None`: the worktree now.
    pub(super) to: Option<String>,
}

pub(super) fn plan<'a>(
    task: &Task,
    lineage: &[TaskId],
    timeline: &'a [TimelineEntry],
    git: &Git,
) -> Result<Plan<'a>, String> {
    let mut transfers = Vec::new();
    for (position, row) in moves(lineage, timeline) {
        let recorded = row
            .context
            .details
            .as_ref()
            .and_then(|d| d.get("checkpoint"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let checkpoint = match recorded {
            Some(c) => c,
            None => timeline[..position]
                .iter()
                .rev()
                .find_map(|e| match &e.event {
                    TimelineEvent::Checkpoint(c) => Some(c.commit.clone()),
                    _ => None,
                })
                .ok_or_else(|| {
                    format!(
                        "handoff {} records no checkpoint and none was recorded before it",
                        row.id
                    )
                })?,
        };
        let checkpoint = git.commit_id(&checkpoint).ok_or_else(|| {
            format!(
                "commit {checkpoint} of handoff {} is not in the repository (rewritten or \
                 garbage-collected?)",
                row.id
            )
        })?;
        transfers.push(Transfer { row, checkpoint });
    }

    let first = timeline
        .iter()
        .find_map(|e| match &e.event {
            TimelineEvent::Checkpoint(c) => Some(c.commit.clone()),
            _ => None,
        })
        .or_else(|| transfers.first().map(|t| t.checkpoint.clone()))
        .ok_or_else(|| {
            format!(
                "task {} has no checkpoint yet: nothing to attribute",
                task.id
            )
        })?;
    let first_checkpoint = git.commit_id(&first).ok_or_else(|| {
        format!(
            "the first checkpoint {first} of task {} is not in the repository (rewritten or \
             garbage-collected?)",
            task.id
        )
    })?;
    let parent = git.commit_id(&format!("{first_checkpoint}^"));
    let base = Base {
        commit: parent.clone().unwrap_or_else(|| first_checkpoint.clone()),
        root: parent.is_none(),
        first_checkpoint,
    };

    let mut spans = Vec::new();
    let mut owner = match transfers.first() {
        Some(t) => t.row.source.clone(),
        None => AgentRef {
            provider: task.agent.provider.clone(),
            model: task.agent.model.clone(),
        },
    };
    let mut from = base.commit.clone();
    let mut handoff = None;
    for t in &transfers {
        spans.push(Span {
            owner: owner.clone(),
            handoff,
            from: from.clone(),
            to: Some(t.checkpoint.clone()),
        });
        owner = t.row.target.clone();
        from = t.checkpoint.clone();
        handoff = Some(t.row);
    }
    spans.push(Span {
        owner,
        handoff,
        from,
        to: None,
    });
    Ok(Plan {
        base,
        transfers,
        spans,
    })
}

/// The started handoffs that moved this task (or a task it was forked from) to their target,
/// with their timeline positions. A handoff naming its task (`details.task`) counts when that is
/// this task or an ancestor (`lineage`). Otherwise a same-thread handoff counts, and a new-thread
/// one counts when it is the first new-thread handoff after a fork marker: it is recorded on the
/// task it created, right after the copied timeline, and copied on into that task's own forks.
pub(super) fn moves<'a>(
    lineage: &[TaskId],
    timeline: &'a [TimelineEntry],
) -> Vec<(usize, &'a HandoffRow)> {
    let mut forked = false;
    let mut moves = Vec::new();
    for (i, entry) in timeline.iter().enumerate() {
        let h = match &entry.event {
            TimelineEvent::Forked(_) => {
                forked = true;
                continue;
            }
            TimelineEvent::Handoff(h) => h,
            _ => continue,
        };
        let named = h
            .context
            .details
            .as_ref()
            .and_then(|d| d.get("task"))
            .and_then(Value::as_str);
        let counts = match (named, h.route) {
            (Some(named), _) => lineage.iter().any(|id| id.as_str() == named),
            (None, Route::SameThread) => true,
            (None, Route::NewThread) => std::mem::take(&mut forked),
            (None, Route::NoteOnly) => false,
        };
        if counts && h.outcome == HandoffOutcome::Started {
            moves.push((i, h));
        }
    }
    moves
}

/// The task and the tasks it was forked from, nearest first.
pub(super) fn lineage(store: &dyn TaskStore, task: &Task) -> Result<Vec<TaskId>, String> {
    let mut ids = vec![task.id.clone()];
    let mut parent = task.parent.clone();
    while let Some(id) = parent {
        if ids.contains(&id) || ids.len() > 256 {
            break;
        }
        parent = match store.task(&id) {
            Ok(t) => t.parent,
            Err(handoff_core::StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e.to_string()),
        };
        ids.push(id);
    }
    Ok(ids)
}

// ---------------------------------------------------------------------------------------------
