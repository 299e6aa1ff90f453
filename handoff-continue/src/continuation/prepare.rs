//! Phase 2: the source session, the receiver, and how the conversation reaches it. Nothing
//! changes here.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    ContinueCarry, ContinueReceiver, ContinueResult, ContinueTarget, PreparedReceiver,
    ReceiverRequest, TimelineEntry,
};

use super::validate::Plan;
use super::{ContinueContext, ContinueRequest, Fallback};
use crate::carry::{self, Source};
use crate::error::{OrReject, Rejection};
use crate::ssh::{self, Destination};

/// The conversation as planned.
pub(super) struct Conversation {
    /// The receiver's request; `resume` is set once the carried session is known.
    pub request: ReceiverRequest,
    /// The task's timeline before this handoff.
    pub timeline: Vec<TimelineEntry>,
    /// The source session, if one was found.
    pub source: Option<Source>,
    /// The receiver prepared in the worktree (none with `note_only` or `on`).
    pub planned: Option<PreparedReceiver>,
    /// How the conversation is carried, when it is.
    pub planned_carry: Option<carry::Planned>,
    /// Why it is not carried.
    pub not_carried: Option<String>,
    /// The other machine, with `on`.
    pub destination: Option<Destination>,
    /// What the result says of the carry.
    pub carry_report: ContinueCarry,
    /// An earlier carried copy this carry replaces: its session id and file.
    pub replace: Option<(String, Utf8PathBuf)>,
}

/// Finds the source session and plans the receiver and the carry.
pub(super) async fn conversation(
    req: &ContinueRequest,
    ctx: &ContinueContext<'_>,
    plan: &Plan,
    scratch: &Utf8Path,
    known: &[String],
    result: &mut ContinueResult,
) -> Result<Conversation, Rejection> {
    let engine = ctx.engine;
    // The receiver, planned in the worktree it will work in; the real prompt comes later, once
    // the note is rendered against the checkpoint.
    let receiver_cwd = plan
        .new_thread
        .as_ref()
        .map_or_else(|| plan.root.clone(), |(path, _)| path.clone());
    let mut request = ReceiverRequest {
        target: plan.target.provider.clone(),
        cwd: receiver_cwd.clone(),
        role: req.role,
        model: plan.target.model.clone(),
        effort: plan.target.effort.clone(),
        session_id: uuid::Uuid::new_v4().hyphenated().to_string(),
        resume: None,
    };

    let timeline = match &plan.task {
        Some(t) => ctx.store.timeline(&t.id).rejected("task store")?,
        None => Vec::new(),
    };
    let last_receiver = carry::last_receiver_session(&timeline, &plan.source.provider);
    let mut cwds = vec![plan.cwd.clone(), plan.root.clone()];
    cwds.dedup();
    let source = carry::find_source(
        engine,
        &plan.source.provider,
        plan.source.account.as_deref(),
        req.session.as_deref(),
        last_receiver.as_deref(),
        &cwds,
        scratch,
    )
    .await
    .rejected("--session")?;
    let fallback = req.fallback == Some(Fallback::FreshAgent);
    // A receiver whose store handoff cannot write (Cursor, Kiro) only ever starts from the
    // note and a recap: no session to name would change that.
    let fresh_only = engine
        .provider(&plan.target.provider)
        .and_then(|p| p.receiver().map(|r| r.level()))
        == Some(handoff_core::ReceiverLevel::FreshAgent);
    let refuse = |why: &str| {
        let target = &plan.target.provider;
        Rejection::new(
            "session",
            if fresh_only {
                format!(
                    "{target} takes a task over only from the note and a recap ({why}); pass --fallback fresh-agent to start it so"
                )
            } else {
                format!(
                    "cannot carry the conversation to {target}: {why}; pass --session to name the session, or --fallback fresh-agent to start {target} from the note and a recap alone"
                )
            },
        )
    };
    let mut planned_carry: Option<carry::Planned> = None;
    let mut not_carried: Option<String> = None;
    let destination = req
        .on
        .as_deref()
        .map(|on| ssh::destination_of(on, &engine.config().hosts))
        .transpose()
        .rejected("--on")?;
    let planned = if req.note_only {
        not_carried = Some("--note-only: no receiver is started".into());
        None
    } else if destination.is_some() {
        // The receiver runs on the other machine, which carries the conversation itself.
        if let Err(why) = &source {
            if !fallback {
                return Err(refuse(why));
            }
            not_carried = Some(why.clone());
        }
        None
    } else {
        let mut p = engine
            .prepare_receiver(&request, "", req.account.as_deref())
            .await
            .rejected("--to")?;
        let why = match &source {
            _ if fresh_only => Some(format!(
                "handoff cannot write a conversation into {}'s store",
                plan.target.provider
            )),
            Err(why) => Some(why.clone()),
            Ok(src) => match carry::plan(src, &p, &receiver_cwd, known).await {
                Ok(c) => {
                    // The receiver again, resuming: its CLI must be able to.
                    let mut with_resume = request.clone();
                    with_resume.resume = Some(c.resume.clone());
                    match engine
                        .prepare_receiver(&with_resume, "", req.account.as_deref())
                        .await
                    {
                        Ok(resuming) => {
                            p = resuming;
                            request.resume = Some(c.resume.clone());
                            planned_carry = Some(c);
                            None
                        }
                        Err(e) => Some(e),
                    }
                }
                Err(e) => Some(e),
            },
        };
        if let Some(why) = why {
            if !fallback {
                return Err(refuse(&why));
            }
            not_carried = Some(why);
        }
        result.target = Some(ContinueTarget {
            model: p.request.model.clone(),
            effort: p.request.effort.clone(),
            ..plan.target.clone()
        });
        result.receiver = Some(ContinueReceiver {
            argv: p.argv(),
            version: p.version.clone(),
            policy: p.policy.clone(),
            session_id: None,
            resume: None,
            last_message: None,
            exit_code: None,
            worktree_unchanged: None,
            changed: Vec::new(),
        });
        Some(p)
    };
    let source = source.ok();
    let mut carry_report = carry::report(
        source.as_ref(),
        planned_carry.is_some() || (destination.is_some() && source.is_some()),
        planned_carry.as_ref().map(|c| c.mode),
        not_carried.clone(),
    );
    if let Some(c) = &planned_carry {
        carry_report.session_id = Some(if c.resume.fork {
            request.session_id.clone()
        } else {
            c.resume.session_id.clone()
        });
        carry_report.files = c.files.clone();
        carry_report.bytes = c.bytes;
        carry_report.secrets_masked = c.secrets;
    }
    Ok(Conversation {
        request,
        timeline,
        source,
        planned,
        planned_carry,
        not_carried,
        destination,
        carry_report,
        replace: None,
    })
}

/// An earlier carried copy of the same source for the same CLI is replaced only when this
/// carry holds all of it and no agent runs it. Returns why it is kept, when it is: then
/// nothing may change.
pub(super) async fn earlier_copy(conv: &mut Conversation, plan: &Plan) -> Option<String> {
    let (Some(src), Some(c), Some(p)) = (&conv.source, &conv.planned_carry, &conv.planned) else {
        return None;
    };
    let id = carry::earlier_copy(
        &conv.timeline,
        &carry::SourceRefKey {
            provider: &src.session.provider,
            session_id: &src.session.session_id,
        },
        &plan.target.provider,
    )?;
    match carry::judge_earlier(p, &id, c.messages(src)).await {
        carry::Earlier::None => None,
        carry::Earlier::Replace { session_id, path } => {
            conv.replace = Some((session_id, path));
            None
        }
        carry::Earlier::Keep(why) => Some(why),
    }
}
