//! Phase 7: the receiver's first turn, headless, on the carried session (or a new one its CLI
//! persists), watched through its own session store.

use std::time::{Duration, Instant};

use handoff_core::{
    ContinueReceiver, ContinueResult, Ending, Engine, Fingerprint, HandoffOutcome, HandoffRow,
    PreparedReceiver, ReceiverRun, Resumption, Workspace,
};
use tokio::sync::watch;

use super::checkpoint::Moved;
use super::note::{Written, receiver_prompt};
use super::prepare::Conversation;
use super::record::receiver_not_started;
use super::{ContinueContext, ContinueError, ContinueRequest};
use crate::carry::{self, Carried, StoreVerdict};

/// The receiver's run, watched: whether its store showed the carried session resumed, and
/// whether it was stopped for not showing that within the ready timeout.
pub(super) struct Watched {
    pub run: ReceiverRun,
    pub seen_continued: bool,
    pub stopped_starting: bool,
}

/// The receiver after its first turn.
pub(super) struct Received {
    pub receiver: PreparedReceiver,
    pub watched: Watched,
    /// The worktree's fingerprint before a review receiver ran.
    pub before: Option<Fingerprint>,
    /// The session it worked in.
    pub session: Option<String>,
}

/// Prepares the receiver with its prompt and runs its first turn.
#[allow(clippy::too_many_arguments)]
pub(super) async fn first_turn(
    req: &ContinueRequest,
    ctx: &ContinueContext<'_>,
    moved: &Moved,
    written: &Written,
    conv: &Conversation,
    carried: Option<&Carried>,
    row: &HandoffRow,
    result: &mut ContinueResult,
    cancel: watch::Receiver<bool>,
    hold: Option<std::os::fd::OwnedFd>,
) -> Result<Received, ContinueError> {
    let store = ctx.store;
    let context = match (carried, &conv.source, &written.recap_text) {
        (Some(c), Some(src), _) => Some(format!(
            "Your session holds the conversation so far, carried over from {} ({} messages); a bounded recap of it is also at {}.",
            src.session.provider,
            c.baseline.messages.len(),
            carry::recap_path(&written.path)
        )),
        (None, Some(src), Some(text)) => Some(format!(
            "## Conversation so far (a recap of {}'s session {})\n\n{text}",
            src.session.provider, src.session.session_id
        )),
        _ => None,
    };
    let prompt = receiver_prompt(
        &written.rendered,
        &written.path,
        &moved.source_ref,
        req.role,
        moved.message.as_deref(),
        context.as_deref(),
    );
    let not_started = |reason: String, result: &mut ContinueResult| {
        receiver_not_started(store, &row.id, moved.message.as_ref(), result, "", reason)
    };
    let receiver = match ctx
        .engine
        .prepare_receiver(&conv.request, &prompt, req.account.as_deref())
        .await
    {
        Ok(r) => r,
        Err(reason) => return Err(not_started(reason, result).into()),
    };
    let before = if conv.request.role.writes() {
        None
    } else {
        match handoff_git::GitWorkspace::new().fingerprint(&moved.work_root) {
            Ok(f) => Some(f),
            Err(e) => return Err(not_started(e.to_string(), result).into()),
        }
    };
    let watched = watch(
        ctx.engine,
        &receiver,
        req.timeout,
        req.ready_timeout,
        cancel,
        carried,
        hold,
    )
    .await;
    let run = &watched.run;
    report(result, &receiver, run);
    let session = carried
        .map(|c| c.session_id.clone())
        .or_else(|| run.report.session_id.clone());
    if let Some(id) = &session {
        let mut d = serde_json::Map::new();
        d.insert("receiverSession".into(), id.clone().into());
        let _ = store.add_handoff_details(&row.id, &d);
    }
    if !watched.stopped_starting
        && let Some(reason) = run.failure()
    {
        if matches!(run.ending, Ending::Cancelled) {
            let _ = store.finish_handoff(
                &row.id,
                &HandoffOutcome::NotStarted {
                    reason: reason.clone(),
                },
            );
            return Err(ContinueError::Cancelled(reason));
        }
        return Err(not_started(reason, result).into());
    }
    Ok(Received {
        receiver,
        watched,
        before,
        session,
    })
}

/// What the result says of the receiver after its turn.
fn report(result: &mut ContinueResult, receiver: &PreparedReceiver, run: &ReceiverRun) {
    let session = run.report.session_id.clone();
    let mut policy = receiver.policy.clone();
    if let Some(sweep) = &run.sweep {
        sweep.record(&mut policy);
    }
    result.receiver = Some(ContinueReceiver {
        argv: receiver.argv(),
        version: receiver.version.clone(),
        policy,
        resume: receiver.resume_command(session.as_deref()),
        session_id: session,
        last_message: run.report.last_message.clone(),
        exit_code: run.exit_code,
        worktree_unchanged: None,
        changed: Vec::new(),
    });
}

/// Runs the receiver's first turn. With a carried session, its store is read every half
/// second; when it shows nothing resumed within `ready`, the receiver is stopped.
async fn watch(
    engine: &Engine,
    receiver: &PreparedReceiver,
    timeout: Duration,
    ready: Duration,
    mut cancel: watch::Receiver<bool>,
    carried: Option<&Carried>,
    hold: Option<std::os::fd::OwnedFd>,
) -> Watched {
    let (stop, stopped) = watch::channel(false);
    let turn = engine.start_receiver_holding(receiver, timeout, stopped, hold);
    tokio::pin!(turn);
    let started = Instant::now();
    // Checks start every half second and slow down to every five (a store read through its
    // CLI, such as OpenCode's export, costs a process each time).
    let mut every = Duration::from_millis(500);
    let mut next = tokio::time::Instant::now() + every;
    let mut seen = false;
    let mut stopped_starting = false;
    let mut signals = true;
    loop {
        tokio::select! {
            run = &mut turn => {
                return Watched { run, seen_continued: seen, stopped_starting };
            }
            changed = cancel.changed(), if signals => {
                match changed {
                    Ok(()) if *cancel.borrow() => { let _ = stop.send(true); }
                    Ok(()) => {}
                    Err(_) => signals = false,
                }
            }
            () = tokio::time::sleep_until(next), if carried.is_some() && !seen && !stopped_starting => {
                if let Some(c) = carried {
                    match carry::store_verdict(receiver, c).await {
                        StoreVerdict::Read(Resumption::Continued) => seen = true,
                        // Can't tell from the store: the turn goes on; the probe decides later.
                        StoreVerdict::Unreadable(_) => {}
                        _ if started.elapsed() >= ready => {
                            stopped_starting = true;
                            let _ = stop.send(true);
                        }
                        _ => {}
                    }
                }
                every = (every * 3 / 2).min(Duration::from_secs(5));
                next = tokio::time::Instant::now() + every;
            }
        }
    }
}
