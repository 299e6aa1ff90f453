//! What the timeline keeps of a handoff: its row, the continuity verdict, the receiver's first
//! turn, and who has the task afterwards.

use handoff_core::{
    AgentRef, ContinueMessage, ContinueOutcome, ContinueResult, Continuity, ContinuityChecks,
    ContinuityResult, HandoffContext, HandoffId, HandoffOutcome, HandoffRow, NewHandoff, Record,
    TaskAgent, TaskStore, Turn, Workspace, exit,
};

use super::checkpoint::Moved;
use super::note::Written;
use super::prepare::Conversation;
use super::receive::Received;
use super::{ContinueContext, ContinueRequest, NOT_STARTED, REVIEW_CHANGED};
use crate::carry::{self, Carried};
use crate::error::{Failed, Phase};

/// Records the handoff row, with what was carried.
pub(super) fn handoff(
    ctx: &ContinueContext<'_>,
    moved: &Moved,
    written: &Written,
    conv: &Conversation,
    carried: Option<&Carried>,
    known: &[String],
    result: &mut ContinueResult,
) -> Result<HandoffRow, Failed> {
    let target = &moved.target;
    let mut details = serde_json::Map::new();
    details.insert("checkpoint".into(), moved.commit.clone().into());
    details.insert("task".into(), moved.work_task.id.as_str().into());
    details.insert("role".into(), target.role.as_str().into());
    details.insert("worktree".into(), moved.work_root.as_str().into());
    details.insert("branch".into(), moved.work_branch.clone().into());
    if let Some(a) = &target.account {
        details.insert("account".into(), a.clone().into());
    }
    if let Some(e) = result.target.as_ref().and_then(|t| t.effort.clone()) {
        details.insert("effort".into(), e.into());
    }
    let mut carry_details = serde_json::to_value(&conv.carry_report).unwrap_or_default();
    if let (Some(src), Some(_), Some(obj)) = (&conv.source, carried, carry_details.as_object_mut())
    {
        obj.insert("turns".into(), carry::listed_turns(&src.transcript));
    }
    details.insert("carry".into(), carry_details);
    let row = ctx
        .store
        .record_handoff(
            &moved.work_task.id,
            &NewHandoff {
                source: moved.source_ref.clone(),
                target: target_ref(moved, result),
                context: HandoffContext {
                    note_path: Some(written.path.clone()),
                    note_digest: Some(written.digest.clone()),
                    transcript_messages: carried.map(|c| c.baseline.messages.len() as u64),
                    // Masked with what the request showed as secrets too (the store knows
                    // only the configured ones).
                    message: moved
                        .message
                        .as_deref()
                        .map(|m| handoff_core::redact(m, known).0),
                    details: Some(details),
                },
                route: moved.route,
            },
        )
        .map_err(|e| Failed::new(Phase::Record, format!("the task store failed: {e}")))?;
    result.handoff_id = Some(row.id.clone());
    Ok(row)
}

/// The receiver as the timeline names it: the model it was prepared with, else the one asked.
pub(super) fn target_ref(moved: &Moved, result: &ContinueResult) -> AgentRef {
    AgentRef {
        provider: moved.target.provider.clone(),
        model: result
            .target
            .as_ref()
            .and_then(|t| t.model.clone())
            .or_else(|| moved.target.model.clone()),
    }
}

/// `note_only`: the note is written and the handoff ends there.
pub(super) fn note_only(
    ctx: &ContinueContext<'_>,
    row: &HandoffRow,
    written: &Written,
    req: &ContinueRequest,
    result: &mut ContinueResult,
) -> Result<u8, super::ContinueError> {
    ctx.store
        .finish_handoff(&row.id, &HandoffOutcome::NoteWritten)
        .map_err(|e| Failed::new(Phase::Record, format!("the task store failed: {e}")))?;
    let c = carry::continuity(
        ContinuityResult::FreshAgent,
        "--note-only: no receiver was started; the next agent starts from the note and the recap",
        Some(format!("give the next agent the note at {}", written.path)),
        ContinuityChecks::default(),
    );
    annotate(ctx.store, &row.id, &c);
    result.continuity = Some(c);
    result.outcome = ContinueOutcome::NoteWritten;
    result.message = req
        .message
        .clone()
        .map(|text| ContinueMessage { text, sent: false });
    Ok(exit::OK)
}

/// An earlier carried copy can't be replaced: nothing changed, the task stays.
pub(super) fn earlier_copy_kept(
    result: &mut ContinueResult,
    conv: &Conversation,
    why: &str,
    source: &handoff_core::AgentId,
) {
    result.carry = Some(conv.carry_report.clone());
    result.continuity = Some(carry::continuity(
        ContinuityResult::NotContinued,
        why.to_owned(),
        Some(format!("nothing was changed; the task stays with {source}")),
        ContinuityChecks::default(),
    ));
    result.outcome = ContinueOutcome::NotContinued;
    result.reason = Some(format!("not continued: {why}"));
}

/// Records that the receiver (`where_`: "" or " on <host>") did not start, and reports the
/// message unsent.
pub(super) fn receiver_not_started(
    store: &dyn TaskStore,
    row: &HandoffId,
    message: Option<&String>,
    result: &mut ContinueResult,
    where_: &str,
    reason: String,
) -> Failed {
    let _ = store.finish_handoff(
        row,
        &HandoffOutcome::NotStarted {
            reason: reason.clone(),
        },
    );
    result.message = message
        .cloned()
        .map(|text| ContinueMessage { text, sent: false });
    Failed::new(
        Phase::Receive,
        format!("the receiver did not start{where_}: {reason}"),
    )
}

/// Keeps the continuity verdict in the handoff's details, for the timeline.
pub(super) fn annotate(store: &dyn TaskStore, id: &HandoffId, c: &Continuity) {
    let mut d = serde_json::Map::new();
    d.insert("continuity".into(), carry::timeline_details(c));
    let _ = store.add_handoff_details(id, &d);
}

/// The receiver ran: the handoff is finished, its turn recorded, and the task is the
/// receiver's unless it did not continue. A review receiver must have left the worktree as it
/// was.
pub(super) fn finish(
    ctx: &ContinueContext<'_>,
    req: &ContinueRequest,
    moved: &Moved,
    row: &HandoffRow,
    received: &Received,
    verdict: Continuity,
    result: &mut ContinueResult,
) -> Result<u8, Failed> {
    let store = ctx.store;
    annotate(store, &row.id, &verdict);
    let continued = verdict.result != ContinuityResult::NotContinued;
    // A receiver stopped before it resumed anything has not taken the task.
    let takes_task = continued && !received.watched.stopped_starting;
    result.continuity = Some(verdict.clone());

    // Started: the task is the receiver's now, unless it did not continue.
    store
        .finish_handoff(&row.id, &HandoffOutcome::Started)
        .map_err(|e| {
            Failed::new(
                Phase::Record,
                format!("the receiver ran but the task store failed: {e}"),
            )
        })?;
    result.message = req
        .message
        .clone()
        .map(|text| ContinueMessage { text, sent: true });
    let target_ref = target_ref(moved, result);
    let summary = received
        .watched
        .run
        .report
        .last_message
        .clone()
        .unwrap_or_else(|| "started (no message)".into());
    let _ = store.append(
        &moved.work_task.id,
        &Record::Turn(Turn {
            author: target_ref.clone(),
            summary: summary.chars().take(2000).collect(),
        }),
    );
    if !continued {
        result.outcome = ContinueOutcome::NotContinued;
        result.reason = Some(format!("not continued: {}", verdict.reason));
        return Ok(NOT_STARTED);
    }
    if takes_task {
        let _ = store.set_agent(
            &moved.work_task.id,
            &TaskAgent {
                provider: moved.target.provider.clone(),
                model: target_ref.model.clone(),
                account: moved.target.account.clone(),
            },
        );
    }
    result.outcome = ContinueOutcome::Started;
    if let Some(before) = &received.before {
        // Judged against handoff's record of the "before", not the index the receiver could
        // rewrite.
        let after = handoff_git::GitWorkspace::new().fingerprint_since(&moved.work_root, before);
        let evidence = after.as_ref().map(|a| before.compare(a));
        let (mut unchanged, mut changed) = match &evidence {
            Ok(e) => (!e.changed, e.changed_files.clone()),
            Err(_) => (false, Vec::new()),
        };
        // A mount point of the receiver's own sandbox with content: written behind it.
        let kept = received.watched.run.sweep.iter().flat_map(|s| &s.kept);
        for k in kept {
            unchanged = false;
            if !changed.contains(&k.path) {
                changed.push(k.path.clone());
            }
        }
        if let Some(r) = result.receiver.as_mut() {
            r.worktree_unchanged = Some(unchanged);
            r.changed = changed.clone();
        }
        if !unchanged {
            result.outcome = ContinueOutcome::ReviewChanged;
            result.reason = Some(match evidence {
                Ok(_) => format!(
                    "the worktree changed while the review receiver ran ({}); the changes are left in place",
                    changed.join(", ")
                ),
                Err(e) => format!("cannot check the review receiver's worktree: {e}"),
            });
            return Ok(REVIEW_CHANGED);
        }
    }
    Ok(exit::OK)
}
