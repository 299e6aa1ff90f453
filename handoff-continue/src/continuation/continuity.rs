//! Phase 8: did the receiver really continue? Its own store, the source and, where needed, a
//! probe question decide.

use camino::Utf8Path;
use handoff_core::{
    AgentId, ContinueResult, Continuity, ContinuityChecks, ContinuityResult, Engine,
    PreparedReceiver, Resumption,
};
use tokio::sync::watch;

use super::checkpoint::Moved;
use super::note::Written;
use super::prepare::Conversation;
use super::receive::{Received, Watched};
use super::{ContinueContext, ContinueRequest};
use crate::carry::{self, Carried, Source, StoreVerdict};

/// The continuity verdict, with the probe's answer where one was asked and what to do next.
#[allow(clippy::too_many_arguments)]
pub(super) async fn judge(
    req: &ContinueRequest,
    ctx: &ContinueContext<'_>,
    moved: &Moved,
    written: &Written,
    conv: &Conversation,
    carried: Option<&Carried>,
    received: &Received,
    scratch: &Utf8Path,
    result: &ContinueResult,
    cancel: watch::Receiver<bool>,
) -> Continuity {
    let run = &received.watched.run;
    let resume_shell = result
        .receiver
        .as_ref()
        .and_then(|r| r.resume.as_ref())
        .map(|r| r.shell.clone());
    let mut verdict = match (carried, &conv.source) {
        (Some(c), Some(src)) => {
            carried_verdict(
                ctx.engine,
                &received.receiver,
                c,
                src,
                &received.watched,
                req.ready_timeout.as_secs(),
                moved.from.account.as_deref(),
                scratch,
            )
            .await
        }
        _ => carry::continuity(
            ContinuityResult::FreshAgent,
            format!(
                "started from the note{} alone (--fallback fresh-agent): {}",
                if written.recap_text.is_some() {
                    " and a recap"
                } else {
                    ""
                },
                conv.not_carried.as_deref().unwrap_or("nothing to carry")
            ),
            None,
            ContinuityChecks::default(),
        ),
    };
    verdict.last_message = run.report.last_message.clone();
    let unreadable =
        verdict.result == ContinuityResult::Inconclusive && !received.watched.stopped_starting;
    if (req.probe || unreadable)
        && let Some(session) = &received.session
        && verdict.result != ContinuityResult::NotContinued
    {
        match carry::probe(
            ctx.engine,
            &received.receiver,
            session,
            &carry::probe_reference(&moved.note),
            req.ready_timeout,
            cancel,
            req.account.as_deref(),
        )
        .await
        {
            Ok(p) => verdict.probe = Some(p),
            Err(e) => {
                verdict.next = Some(format!("the probe failed: {e}"));
            }
        }
    }
    verdict.next = verdict.next.take().or_else(|| {
        next_step(
            &verdict,
            resume_shell.as_deref(),
            &written.path,
            &moved.from.provider,
        )
    });
    verdict
}

/// The continuity verdict for a carried conversation, from the source and the receiver's store.
#[allow(clippy::too_many_arguments)]
async fn carried_verdict(
    engine: &Engine,
    receiver: &PreparedReceiver,
    carried: &Carried,
    source: &Source,
    watched: &Watched,
    ready_secs: u64,
    account: Option<&str>,
    scratch: &Utf8Path,
) -> Continuity {
    let run = &watched.run;
    let original = carry::original_appended(engine, source, account, scratch).await;
    let mut checks = ContinuityChecks {
        original_appended: Some(original),
        session_resumed: None,
        turn_after_carried: None,
    };
    let verdict = carry::store_verdict(receiver, carried).await;
    match &verdict {
        StoreVerdict::Read(r) => {
            checks.session_resumed = Some(*r != Resumption::Diverged);
            checks.turn_after_carried = Some(*r == Resumption::Continued);
        }
        StoreVerdict::Missing => checks.session_resumed = Some(false),
        StoreVerdict::Unreadable(_) => {}
    }
    if !original {
        return carry::continuity(
            ContinuityResult::NotContinued,
            format!(
                "the source session {} changed while it was carried: what it held is no longer the same",
                source.session.session_id
            ),
            None,
            checks,
        );
    }
    if let Some(reported) = &run.report.session_id
        && *reported != carried.session_id
    {
        checks.session_resumed = Some(false);
        return carry::continuity(
            ContinuityResult::NotContinued,
            format!(
                "the receiver worked in a new session {reported} instead of the carried {}",
                carried.session_id
            ),
            None,
            checks,
        );
    }
    if watched.stopped_starting && !watched.seen_continued {
        return carry::continuity(
            ContinuityResult::Inconclusive,
            format!(
                "the receiver had not resumed the carried session {} after {ready_secs} s and was stopped",
                carried.session_id
            ),
            Some(format!(
                "the task stays with {}; run handoff continue again with a longer --ready-timeout",
                source.session.provider
            )),
            checks,
        );
    }
    let (result, reason) = match verdict {
        StoreVerdict::Read(Resumption::Continued) => (
            ContinuityResult::Continued,
            format!(
                "the receiver resumed the carried session {} and wrote a turn after its {} messages",
                carried.session_id,
                carried.baseline.messages.len()
            ),
        ),
        StoreVerdict::Read(Resumption::NothingAfter) => (
            ContinuityResult::NotContinued,
            format!(
                "the receiver's session {} holds the carried conversation but no turn after it",
                carried.session_id
            ),
        ),
        StoreVerdict::Read(Resumption::Diverged) => (
            ContinuityResult::NotContinued,
            format!(
                "the receiver's session {} no longer starts with the carried conversation",
                carried.session_id
            ),
        ),
        StoreVerdict::Missing => (
            ContinuityResult::NotContinued,
            format!(
                "the carried session {} is not in the receiver's store",
                carried.session_id
            ),
        ),
        StoreVerdict::Unreadable(e) => (
            ContinuityResult::Inconclusive,
            format!("the receiver's store can't be read: {e}"),
        ),
    };
    carry::continuity(result, reason, None, checks)
}

/// What to do after a verdict.
fn next_step(
    c: &Continuity,
    resume: Option<&str>,
    note: &Utf8Path,
    source: &AgentId,
) -> Option<String> {
    let resume = resume.map_or_else(|| "its CLI".to_owned(), |r| format!("`{r}`"));
    match c.result {
        ContinuityResult::Continued => None,
        ContinuityResult::FreshAgent => Some(format!(
            "the receiver has the note and recap but not the conversation; check its first turn with {resume}"
        )),
        ContinuityResult::NotContinued => Some(format!(
            "the task stays with {source}; the receiver's session is kept: look at it with {resume}, then continue again"
        )),
        ContinuityResult::Inconclusive => Some(match &c.probe {
            Some(p) if p.comparison.matched => format!(
                "its answer to the probe matches the note; check its first turn with {resume}"
            ),
            Some(_) => format!(
                "its answer to the probe does not match the note's Current state and Next steps: resume it with {resume} and point it at {note}"
            ),
            None => format!("check it with {resume}"),
        }),
    }
}
