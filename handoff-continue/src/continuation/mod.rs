//! Continuing a task on another agent: the library behind `handoff continue`.
//!
//! [`continue_task`] runs the phases in a fixed order, each in its own file, and every refusal
//! comes before the first change:
//!
//! 1. [`validate`]: the request, the note (all nine sections), the repository (a branch with a
//!    commit), the task store and who has the task, the checkpoint's contents (no note, no
//!    likely secret staged, `git diff --check`), the remote for `push`;
//! 2. [`prepare`]: the source session (found before anything changed, see [`crate::carry`]),
//!    the receiver (an adapter that keeps resumable sessions, installed, passing preflight,
//!    model, effort and account accepted) and how the conversation reaches it; with `on`, the
//!    other machine is inspected ([`remote`]);
//! 3. [`worktree`]: no delegated run or other continuation holds it (the root lease; `wait`
//!    waits) and no agent process works in it;
//! 4. [`checkpoint`]: tracked changes and staged files are committed (with `new_thread` the
//!    commit is made without touching the original branch, worktree or index); `push` pushes
//!    the branch, never forced;
//! 5. [`note`]: the note, rendered with the git state read from the repository, is written
//!    outside the repository (`<state dir>/notes/<task>/`) with a bounded recap;
//! 6. [`carry`]: the conversation is forked, copied or converted into the receiver's store,
//!    and the handoff row is recorded ([`record`]);
//! 7. [`receive`]: the receiver's first turn runs headless on the carried session (or a new
//!    one its CLI persists), with the note and the message as its prompt; a review receiver
//!    must leave the worktree's fingerprint unchanged;
//! 8. [`continuity`]: the receiver's store, the source and, where needed, a probe question say
//!    whether it really continued; [`record`] keeps the verdict and moves the task.
//!
//! The result is one [`ContinueResult`] (`handoff.continue.v1`), whatever the outcome. Exit
//! codes: 0 started (or dry run, note only); 1 not started or not continued — the task stays
//! with its provider, the timeline says why; 5 rejected, nothing changed; 9 cancelled; 10 a
//! review receiver changed the worktree.

mod carry;
mod checkpoint;
mod continuity;
mod note;
mod prepare;
mod receive;
mod record;
mod remote;
mod validate;
pub(crate) use validate::looks_secret;
mod worktree;

use std::collections::BTreeMap;
use std::time::Duration;

use camino::Utf8PathBuf;
use handoff_core::{ContinueOutcome, ContinueResult, Engine, ReceiverRole, TaskStore, exit};
use tokio::sync::watch;

use crate::error::{ContinueError, OrReject};

/// Exit code when the receiver did not start or did not continue.
pub const NOT_STARTED: u8 = 1;
/// Exit code when a review receiver changed the worktree.
pub const REVIEW_CHANGED: u8 = exit::POLICY_BLOCK;
/// The receiver's first turn may take this long unless the request says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long the receiver may take to show it resumed the carried session, by default.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the handoff note comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoteInput {
    /// A file (read with the note's size limit; refused when not UTF-8).
    File(String),
    /// This process's standard input, read (with the note's size limit) where the note is
    /// checked: after the request's other inputs, so a refusal never waits on it. Named `-`.
    Stdin,
    /// Bytes already read, named `label` in messages.
    Bytes {
        /// How messages name it (`-` for standard input).
        label: String,
        /// The note's bytes.
        bytes: Vec<u8>,
    },
}

impl NoteInput {
    /// How messages name the note.
    pub fn label(&self) -> &str {
        match self {
            NoteInput::File(path) => path,
            NoteInput::Stdin => "-",
            NoteInput::Bytes { label, .. } => label,
        }
    }
}

/// What to do when the conversation can't be carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Start the receiver from the note and a recap alone (continuity `fresh-agent`).
    FreshAgent,
}

/// A continuation: the library form of `handoff continue`'s flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueRequest {
    /// The agent that takes the task over (`--to`); with a destination phrase it may be left
    /// out.
    pub to: Option<String>,
    /// The receiver as a person names it, `"codex gpt-5 high on devbox"`
    /// ([`crate::destination`]): read before anything changes; a flag that says otherwise is
    /// refused.
    pub destination: Option<String>,
    /// The receiver's model (default: the configuration's, else the CLI's).
    pub model: Option<String>,
    /// The receiver's reasoning effort.
    pub effort: Option<String>,
    /// The receiver's account, from the configuration.
    pub account: Option<String>,
    /// What the receiver may do.
    pub role: ReceiverRole,
    /// The handoff note.
    pub note: NoteInput,
    /// A message for the receiver, sent after the note.
    pub message: Option<String>,
    /// Absolute path of a directory in the worktree.
    pub cwd: String,
    /// Who has the task now (required when the worktree has no task yet).
    pub from: Option<String>,
    /// The model the current agent runs.
    pub from_model: Option<String>,
    /// Start the receiver on a new task, in a new linked worktree and branch.
    pub new_thread: bool,
    /// Checkpoint and write the note, but start no receiver.
    pub note_only: bool,
    /// Continue on another machine: `<ssh destination>[:<path>]`.
    pub on: Option<String>,
    /// Validate and plan everything, change nothing.
    pub dry_run: bool,
    /// Push the branch to its remote after the checkpoint (never forced).
    pub push: bool,
    /// Wait while the worktree is held or an agent works in it, instead of refusing.
    pub wait: bool,
    /// The session to carry: an id in the source CLI's store, or the absolute path of a file.
    pub session: Option<String>,
    /// What to do when the conversation can't be carried.
    pub fallback: Option<Fallback>,
    /// How long the receiver may take to show it resumed the carried conversation.
    pub ready_timeout: Duration,
    /// Also ask the receiver the probe question.
    pub probe: bool,
    /// How long the receiver's first turn may take.
    pub timeout: Duration,
    /// Run the checkpoint's hooks even when hooks or hook managers' configuration changed
    /// since the task's first event (a person's decision).
    pub run_hooks: bool,
    /// Start the receiver even when agent configuration (`.claude/`, `AGENTS.md`,
    /// `opencode.json`, …) changed since the task's first event (a person's decision, after
    /// reviewing it).
    pub trust_project_config: bool,
    /// Why the task moves when not on a person's request: `limit:<cause>` when a hook moved it
    /// because its agent stopped on its limit (recorded in the handoff's details).
    pub trigger: Option<String>,
    /// The process of the agent the task moves from, when it still runs (a Claude Code whose
    /// hook started the move): not counted as an agent working in the worktree.
    pub source_pid: Option<u32>,
    /// handoff wrote the note (its agent stopped on its limit): the note's front matter says
    /// `generated: true`.
    pub generated_note: bool,
}

impl ContinueRequest {
    /// A request for the receiver a destination phrase names (`"codex gpt-5 high on devbox"`),
    /// with the defaults of `handoff continue`.
    pub fn to_destination(
        phrase: impl Into<String>,
        cwd: impl Into<String>,
        note: NoteInput,
    ) -> Self {
        let mut request = ContinueRequest::new("", cwd, note);
        request.to = None;
        request.destination = Some(phrase.into());
        request
    }

    /// A request with the defaults of `handoff continue`: implement, the default timeouts.
    pub fn new(to: impl Into<String>, cwd: impl Into<String>, note: NoteInput) -> Self {
        ContinueRequest {
            to: Some(to.into()),
            destination: None,
            model: None,
            effort: None,
            account: None,
            role: ReceiverRole::Implement,
            note,
            message: None,
            cwd: cwd.into(),
            from: None,
            from_model: None,
            new_thread: false,
            note_only: false,
            on: None,
            dry_run: false,
            push: false,
            wait: false,
            session: None,
            fallback: None,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            probe: false,
            timeout: DEFAULT_TIMEOUT,
            run_hooks: false,
            trust_project_config: false,
            trigger: None,
            source_pid: None,
            generated_note: false,
        }
    }
}

/// What a continuation works with.
pub struct ContinueContext<'a> {
    /// The engine: agents, configuration, receivers.
    pub engine: &'a Engine,
    /// The task store.
    pub store: &'a dyn TaskStore,
    /// Where notes are written (`<state_dir>/notes/<task>/`); the task store's directory.
    pub state_dir: Utf8PathBuf,
    /// The environment the continuation runs in (ssh settings for `on`).
    pub env: BTreeMap<String, String>,
}

/// Continues a task as `request` says and reports how it went; `cancel` turning `true` stops
/// it (the receiver included). The result's `exit_code` is the documented exit code.
pub async fn continue_task(
    request: &ContinueRequest,
    ctx: &ContinueContext<'_>,
    cancel: watch::Receiver<bool>,
) -> ContinueResult {
    match try_continue_task(request, ctx, cancel).await {
        Ok(result) => result,
        Err(stopped) => stopped.result,
    }
}

/// A continuation that stopped before it finished: the result to report (rejected, not
/// started or cancelled, with everything known so far), and why, typed by when it happened.
#[derive(Debug, Clone)]
pub struct Stopped {
    /// The result, as [`continue_task`] returns it.
    pub result: ContinueResult,
    /// Why it stopped.
    pub error: ContinueError,
}

/// Like [`continue_task`], but a continuation that stopped early is an error that says in
/// which phase, for callers that act on it rather than print it. A continuation that ran the
/// receiver is `Ok`, whatever its continuity.
pub async fn try_continue_task(
    request: &ContinueRequest,
    ctx: &ContinueContext<'_>,
    cancel: watch::Receiver<bool>,
) -> Result<ContinueResult, Stopped> {
    let mut result = ContinueResult::new(ContinueOutcome::Rejected, exit::USAGE);
    // The secrets handoff knows, and those the note and message show (see `validate`).
    let mut known = ctx.engine.known_secrets();
    let outcome = match handoff_core::Masker::try_new(&known) {
        Ok(_) => run(request, ctx, &mut result, &mut known, cancel).await,
        Err(e) => Err(ContinueError::Rejected(crate::error::Rejection::new(
            "masking",
            e.to_string(),
        ))),
    };
    let masker = handoff_core::Masker::new(&known);
    match outcome {
        Ok(code) => {
            result.exit_code = code;
            Ok(masked(result, &masker))
        }
        Err(error) => {
            let result = match &error {
                ContinueError::Rejected(r) => rejected(result, r.reason.clone()),
                ContinueError::Failed(f) => {
                    result.outcome = ContinueOutcome::NotStarted;
                    result.exit_code = NOT_STARTED;
                    result.reason = Some(f.message.clone());
                    result
                }
                ContinueError::Cancelled(message) => {
                    result.outcome = ContinueOutcome::NotStarted;
                    result.exit_code = exit::CANCELLED;
                    result.reason = Some(message.clone());
                    result
                }
            };
            Err(Stopped {
                result: masked(result, &masker),
                error,
            })
        }
    }
}

/// The result with every string masked: the message, reasons, commands, paths, whatever an
/// agent or a person put in it.
fn masked(result: ContinueResult, masker: &handoff_core::Masker) -> ContinueResult {
    let Ok(mut value) = serde_json::to_value(&result) else {
        return result;
    };
    if masker.mask_json(&mut value) == 0 {
        return result;
    }
    // Masking can leave a typed field unreadable (a short secret that is a whole value, such
    // as an agent's name): then only what cannot hold a secret is kept, never the unmasked
    // result.
    serde_json::from_value(value).unwrap_or_else(|_| {
        let mut withheld = ContinueResult::new(result.outcome, result.exit_code);
        withheld.task_id = result.task_id;
        withheld.reason = Some(
            "the continuation's details are withheld: they hold a known secret in a field that \
             cannot be masked"
                .to_owned(),
        );
        withheld
    })
}

/// The result of a continuation refused before it started (e.g. an unusable configuration).
pub fn rejected_result(reason: String) -> ContinueResult {
    rejected(
        ContinueResult::new(ContinueOutcome::Rejected, exit::USAGE),
        reason,
    )
}

fn rejected(mut result: ContinueResult, reason: String) -> ContinueResult {
    result.outcome = ContinueOutcome::Rejected;
    result.exit_code = exit::USAGE;
    result.reason = Some(reason);
    // Nothing happened: nothing was handed over.
    result.handoff_id = None;
    result
}

/// A private scratch directory for the length of a continuation, where the engine keeps its
/// private directories (not under `$TMPDIR` or `/tmp`, which a sandboxed agent may write).
struct Scratch {
    dir: handoff_core::PrivateDir,
    path: Utf8PathBuf,
}

impl Scratch {
    fn new(engine: &Engine) -> Result<Scratch, crate::error::Rejection> {
        let dir = engine
            .private_dir(handoff_core::PrivateDirKind::Carry)
            .map_err(|e| format!("cannot create a private directory: {e}"))
            .rejected("scratch")?;
        let path = dir.path().to_owned();
        Ok(Scratch { dir, path })
    }
}

async fn run(
    req: &ContinueRequest,
    ctx: &ContinueContext<'_>,
    result: &mut ContinueResult,
    known: &mut Vec<String>,
    cancel: watch::Receiver<bool>,
) -> Result<u8, ContinueError> {
    let (resolved, destination) =
        crate::destination::resolve(req, ctx.engine.registry()).rejected("destination")?;
    result.destination = destination;
    let req = &resolved;
    let plan = validate::validate(req, ctx, result, known)?;
    if !req.dry_run {
        ctx.store.check_writable().rejected("task store")?;
    }
    let known: &[String] = known;
    let scratch = Scratch::new(ctx.engine)?;
    let mut conv = prepare::conversation(req, ctx, &plan, &scratch.path, known, result).await?;
    if let Some(why) = prepare::earlier_copy(&mut conv, &plan).await {
        record::earlier_copy_kept(result, &conv, &why, &plan.source.provider);
        return Ok(NOT_STARTED);
    }
    let remote_plan = match &conv.destination {
        Some(dest) => Some(remote::inspect(ctx, &plan, dest, req).await?),
        None => None,
    };
    if let Some(rp) = &remote_plan {
        result.remote = Some(rp.report());
    }

    // The worktree must be free: no root run or continuation, no agent working in it.
    let lease = worktree::hold(ctx.engine, &plan.root, req.wait, cancel.clone()).await?;
    worktree::wait_for_agents(
        ctx.engine,
        &plan.root,
        req.wait,
        req.source_pid,
        cancel.clone(),
    )
    .await?;

    let note_name = note::file_name(&plan.target.provider);
    note::predict(result, &plan, &note_name);
    if req.dry_run {
        note::predict_recap(result, &conv, known)?;
        result.outcome = ContinueOutcome::DryRun;
        drop(lease);
        return Ok(exit::OK);
    }
    if *cancel.borrow() {
        return Err(ContinueError::Cancelled(
            "cancelled by a signal before anything changed".into(),
        ));
    }

    // From here on, things change. The checkpoint first.
    let mut moved = checkpoint::make(ctx, plan, result)?;
    moved.generated_note = req.generated_note;
    let written = note::write(&moved, &note_name, &mut conv, known, result)?;
    if let Some(rp) = remote_plan {
        result.carry = Some(conv.carry_report.clone());
        let code = remote::finish(
            req, ctx, &rp, &moved, &written, &conv, known, result, cancel,
        )
        .await?;
        drop(lease);
        return Ok(code);
    }
    let carried = carry::perform(&mut conv, &moved.work_root).await?;
    result.carry = Some(conv.carry_report.clone());
    let mut row = record::handoff(
        ctx,
        &moved,
        &written,
        &conv,
        carried.as_ref(),
        known,
        result,
    )?;
    if let Some(trigger) = &req.trigger {
        let mut details = serde_json::Map::new();
        let (kind, cause) = trigger.split_once(':').unwrap_or((trigger, ""));
        details.insert("trigger".into(), kind.into());
        if !cause.is_empty() {
            details.insert("cause".into(), cause.into());
        }
        row = ctx
            .store
            .add_handoff_details(&row.id, &details)
            .unwrap_or(row);
    }
    if req.note_only {
        return record::note_only(ctx, &row, &written, req, result);
    }
    let received = receive::first_turn(
        req,
        ctx,
        &moved,
        &written,
        &conv,
        carried.as_ref(),
        &row,
        result,
        cancel.clone(),
        // The receiver's reaper holds the worktree until its tree is gone, even if this
        // process is killed.
        lease.hold().ok(),
    )
    .await?;
    let verdict = continuity::judge(
        req,
        ctx,
        &moved,
        &written,
        &conv,
        carried.as_ref(),
        &received,
        &scratch.path,
        result,
        cancel,
    )
    .await;
    let code = record::finish(ctx, req, &moved, &row, &received, verdict, result)?;
    drop(lease);
    drop(scratch.dir);
    Ok(code)
}

#[cfg(test)]
mod masking_tests {
    use super::*;

    #[test]
    fn a_result_masking_cannot_read_back_is_withheld_not_shown() {
        let mut result = ContinueResult::new(ContinueOutcome::Rejected, exit::USAGE);
        result.reason = Some("the token is supersecretvalue12345, from claude".to_owned());
        result.source = serde_json::from_value(serde_json::json!({"provider": "claude"})).ok();
        // `claude` is a short secret: masked as a whole value, the provider no longer parses.
        let masker = handoff_core::Masker::new(["claude", "supersecretvalue12345"]);
        let shown = masked(result, &masker);
        let text = serde_json::to_string(&shown).unwrap();
        assert!(!text.contains("supersecretvalue12345"), "{text}");
        assert_eq!(shown.exit_code, exit::USAGE);
        assert!(shown.reason.unwrap().contains("withheld"));
    }
}
