//! `handoff continue`: hand the task itself to another agent.
//!
//! The order is fixed and every refusal comes before the first change:
//!
//! 1. validate: the flags, the note (all nine sections), the repository (a branch with a
//!    commit), the task store and who has the task, the checkpoint's contents (no note, no
//!    likely secret staged, `git diff --check`), the remote for `--push`, and the receiver
//!    (an adapter that keeps resumable sessions, installed, passing preflight, model, effort
//!    and account accepted);
//! 2. the worktree: no delegated run or other continuation holds it (the root lease; `--wait`
//!    waits) and no agent process works in it (found by its cwd; `--wait` waits);
//! 3. checkpoint: tracked changes and staged files are committed (with `--new-thread` the
//!    commit is made without touching the original branch, worktree or index); `--push`
//!    pushes the branch, never forced;
//! 4. the note, rendered with the git state read from the repository, is written outside the
//!    repository (`$XDG_STATE_HOME/handoff/notes/<task>/`) and a handoff row is recorded;
//! 5. the conversation: the source session (found before anything changed, see [`crate::carry`])
//!    is forked, copied or converted into the receiver's store, and a bounded recap is written
//!    next to the note;
//! 6. the receiver's first turn runs headless on the carried session (or a new one its CLI
//!    persists), with the note and `--message` as its prompt; a review receiver must leave the
//!    worktree's fingerprint unchanged;
//! 7. continuity: the receiver's store, the source and, where needed, a probe question say
//!    whether it really continued;
//! 8. one JSON line (`handoff.continue.v1`) is printed.
//!
//! Exit codes: 0 started (or `--dry-run`, `--note-only`); 1 not started or not continued — the
//! task stays with its provider, the timeline says why; 5 rejected, nothing
//! changed; 9 cancelled; 10 a review receiver changed the worktree.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use clap::{Args, ValueEnum};
use handoff_core::{
    AgentRef, Checkpoint, ContinueCheckpoint, ContinueMessage, ContinueNote, ContinueOutcome,
    ContinuePush, ContinueReceiver, ContinueResult, ContinueTarget, ContinueWorktree, Continuity,
    ContinuityChecks, ContinuityResult, Engine, Fork, HandoffContext, HandoffOutcome, Holder,
    MAX_NOTE_BYTES, NewHandoff, NewTask, NoteOrigin, PreparedReceiver, ReceiverRequest,
    ReceiverRole, Record, RootLease, Route, Task, TaskAgent, TaskStore, Turn, Wait, Workspace,
    agents_working_in, check_cwd, check_model, check_note, decode_note, default_runtime_dir, exit,
    now_iso, parse_note, read_note, redact, render_note, valid_account_name,
};
use handoff_store::SqliteStore;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::carry;
use crate::checkpoint::{Git, Prepared, Stop, is_note, known_provider, open_store, split_z};
use crate::remote;

const AFTER_HELP: &str = "\
Exit codes:
  0   the receiver started and finished its first turn (or --dry-run, --note-only)
  1   the receiver did not start, its first turn failed, or it did not continue the carried
      conversation (continuity not-continued); the task stays where it was
  5   rejected before anything changed
  9   cancelled by SIGINT/SIGTERM
  10  a review receiver changed the worktree

Once the arguments parse, one JSON line (handoff.continue.v1) is printed on stdout, whatever the outcome.";

/// Exit code when the receiver did not start.
const NOT_STARTED: u8 = 1;
/// Exit code when a review receiver changed the worktree.
const REVIEW_CHANGED: u8 = exit::POLICY_BLOCK;
/// The receiver's first turn may take this long unless `--timeout` says otherwise.
const DEFAULT_TIMEOUT_SECS: u64 = 30 * 60;
/// How long the receiver may take to show it resumed the carried session.
const DEFAULT_READY_SECS: u64 = 120;
/// How often `--wait` looks again for agents working in the worktree.
const AGENT_POLL: Duration = Duration::from_millis(250);

/// File names that are never committed by a checkpoint when only staged.
const SECRET_NAMES: [&str; 8] = [
    ".env",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "credentials.json",
];
const SECRET_SUFFIXES: [&str; 4] = [".pem", ".key", ".p12", ".pfx"];

/// What to do when the conversation can't be carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fallback {
    /// Start the receiver from the note and a recap alone.
    FreshAgent,
}

/// The receiver's role.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoleArg {
    /// Carry the work on: edit files, run commands.
    Implement,
    /// Review the work without changing the worktree.
    Review,
}

impl RoleArg {
    /// The role's name.
    pub fn as_str(self) -> &'static str {
        role_of(self).as_str()
    }
}

/// Arguments of `handoff continue`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ContinueArgs {
    /// The agent that takes the task over.
    #[arg(long, value_name = "PROVIDER")]
    pub to: String,
    /// The receiver's model (default: the configuration's, else the CLI's).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The receiver's reasoning effort, one its CLI accepts.
    #[arg(long, value_name = "EFFORT")]
    pub effort: Option<String>,
    /// The receiver's account, one of `[agents.<provider>.accounts.<name>]` in the
    /// configuration. Another account of the task's current provider implies --new-thread.
    #[arg(long, value_name = "NAME")]
    pub account: Option<String>,
    /// What the receiver may do.
    #[arg(long, value_enum, default_value = "implement")]
    pub role: RoleArg,
    /// The handoff note (`handoff note template`), or `-` for stdin. All nine sections must
    /// be filled in ("None" counts).
    #[arg(long, value_name = "FILE")]
    pub note_file: String,
    /// A message for the receiver, sent after the note.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// Absolute path of a directory in the worktree; HEAD must be on a branch with a commit.
    #[arg(long, value_name = "DIR")]
    pub cwd: String,
    /// Who has the task now (required when the worktree has no task yet).
    #[arg(long, value_name = "PROVIDER")]
    pub from: Option<String>,
    /// The model the current agent runs.
    #[arg(long, value_name = "MODEL")]
    pub from_model: Option<String>,
    /// Start the receiver on a new task, in a new linked worktree and branch made from the
    /// checkpoint; the original task, worktree, branch and index are left untouched.
    #[arg(long)]
    pub new_thread: bool,
    /// Checkpoint and write the note, but start no receiver.
    #[arg(long, conflicts_with = "new_thread")]
    pub note_only: bool,
    /// Continue on another machine: an ssh destination (an alias from ~/.ssh/config,
    /// user@host, ssh://user@host:port) and optionally the repository's path there
    /// (default: the same path as here if it holds the repository, else ~/handoff/<repo>).
    /// The branch must be on a git remote both machines reach (--push pushes it); the other
    /// machine needs handoff and the receiver's CLI.
    #[arg(long, value_name = "DEST[:PATH]", conflicts_with_all = ["new_thread", "note_only"])]
    pub on: Option<String>,
    /// Validate and plan everything, print what would happen, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Push the branch to its remote after the checkpoint (never forced).
    #[arg(long)]
    pub push: bool,
    /// Wait while a delegated run or continuation holds the worktree, or an agent works in
    /// it, instead of refusing.
    #[arg(long)]
    pub wait: bool,
    /// No status line on a terminal: stderr carries only diagnostics.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// The session to carry: its id in the source CLI's store, or the absolute path of its
    /// file. Default: the calling agent's own session (CLAUDE_CODE_SESSION_ID,
    /// CODEX_THREAD_ID), else the session of the task's last receiver, else the newest session
    /// that ran in the worktree.
    #[arg(long, value_name = "ID|FILE")]
    pub session: Option<String>,
    /// When the conversation can't be carried, start the receiver from the note and a recap
    /// alone (continuity `fresh-agent`) instead of refusing.
    #[arg(long, value_enum, value_name = "ROUTE")]
    pub fallback: Option<Fallback>,
    /// Seconds the receiver may take to show, in its own session store, that it resumed the
    /// carried conversation; after that it is stopped and continuity is `inconclusive`.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_READY_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub ready_timeout: u64,
    /// Also ask the receiver what it was last working on and compare its answer with the
    /// note's Current state and Next steps (always done when its store can't be read).
    #[arg(long)]
    pub probe: bool,
    /// Seconds the receiver's first turn may take.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
}

/// Runs `handoff continue`; returns the exit code. `live` is the status line being drawn, if
/// any; it is cleared before anything else is written.
pub async fn main(
    args: ContinueArgs,
    engine: Result<Engine, String>,
    live: Option<crate::live::Live>,
) -> u8 {
    let cancel = crate::cancel_on_signals();
    let mut result = ContinueResult::new(ContinueOutcome::Rejected, exit::USAGE);
    let code = match engine {
        Err(message) => reject(&mut result, message),
        Ok(engine) => match run(&args, &engine, &mut result, cancel).await {
            Ok(code) => code,
            Err(End::Rejected(message)) => reject(&mut result, message),
            Err(End::NotStarted(message)) => {
                result.outcome = ContinueOutcome::NotStarted;
                result.exit_code = NOT_STARTED;
                result.reason = Some(message);
                NOT_STARTED
            }
            Err(End::Cancelled(message)) => {
                result.outcome = ContinueOutcome::NotStarted;
                result.exit_code = exit::CANCELLED;
                result.reason = Some(message);
                exit::CANCELLED
            }
        },
    };
    if let Some(live) = live {
        live.finish().await;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}",
        serde_json::to_string(&result).unwrap_or_default()
    );
    let _ = out.flush();
    if let Some(reason) = &result.reason {
        let _ = writeln!(std::io::stderr(), "handoff: {reason}");
    }
    code
}

fn reject(result: &mut ContinueResult, message: String) -> u8 {
    result.outcome = ContinueOutcome::Rejected;
    result.exit_code = exit::USAGE;
    result.reason = Some(message);
    // Nothing happened: nothing was handed over.
    result.handoff_id = None;
    exit::USAGE
}

/// How `run` stopped early.
enum End {
    /// Before any change (exit 5).
    Rejected(String),
    /// After a change: the receiver did not start (exit 1).
    NotStarted(String),
    /// By a signal (exit 9).
    Cancelled(String),
}

impl From<String> for End {
    fn from(value: String) -> Self {
        End::Rejected(value)
    }
}

impl From<Stop> for End {
    fn from(value: Stop) -> Self {
        match value {
            Stop::Refused(m) => End::Rejected(m),
            Stop::Failed(m) => End::NotStarted(m),
        }
    }
}

/// Everything validated, before the first change.
struct Plan {
    git: Git,
    root: Utf8PathBuf,
    cwd: Utf8PathBuf,
    branch: String,
    head: String,
    task: Option<Task>,
    source: TaskAgent,
    target: ContinueTarget,
    route: Route,
    prepared: Prepared,
    uncommitted: Vec<String>,
    push_remote: Option<String>,
    new_thread: Option<(Utf8PathBuf, String)>,
    note: handoff_core::Note,
    note_text: String,
    git_remote: Option<handoff_core::GitRemote>,
    note_dir: Utf8PathBuf,
    message: Option<String>,
}

async fn run(
    args: &ContinueArgs,
    engine: &Engine,
    result: &mut ContinueResult,
    cancel: watch::Receiver<bool>,
) -> Result<u8, End> {
    let store = open_store()?;
    let plan = validate(args, &store, result)?;
    if !args.dry_run {
        store.check_writable().map_err(|e| e.to_string())?;
    }
    let known = engine.known_secrets();
    let scratch = tempfile::Builder::new()
        .prefix("handoff-carry-")
        .tempdir()
        .map_err(|e| format!("cannot create a private directory: {e}"))?;
    let scratch_path = Utf8Path::from_path(scratch.path())
        .map(Utf8Path::to_owned)
        .ok_or_else(|| "the temporary directory is not UTF-8".to_owned())?;

    // The receiver, planned in the worktree it will work in; the real prompt comes later, once
    // the note is rendered against the checkpoint.
    let receiver_cwd = plan
        .new_thread
        .as_ref()
        .map_or_else(|| plan.root.clone(), |(path, _)| path.clone());
    let mut request = ReceiverRequest {
        target: plan.target.provider.clone(),
        cwd: receiver_cwd.clone(),
        role: role_of(args.role),
        model: plan.target.model.clone(),
        effort: plan.target.effort.clone(),
        session_id: uuid::Uuid::new_v4().hyphenated().to_string(),
        resume: None,
    };

    // The conversation: the source session, and how it reaches the receiver.
    let timeline = match &plan.task {
        Some(t) => store.timeline(&t.id).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    let last_receiver = carry::last_receiver_session(&timeline, &plan.source.provider);
    let mut cwds = vec![plan.cwd.clone(), plan.root.clone()];
    cwds.dedup();
    let source = carry::find_source(
        engine,
        &plan.source.provider,
        plan.source.account.as_deref(),
        args.session.as_deref(),
        last_receiver.as_deref(),
        &cwds,
        &scratch_path,
    )
    .await?;
    let fallback = args.fallback == Some(Fallback::FreshAgent);
    let mut planned_carry: Option<carry::Planned> = None;
    let mut not_carried: Option<String> = None;
    let destination = args
        .on
        .as_deref()
        .map(remote::parse_destination)
        .transpose()?;
    let planned = if args.note_only {
        not_carried = Some("--note-only: no receiver is started".into());
        None
    } else if destination.is_some() {
        // The receiver runs on the other machine, which carries the conversation itself.
        if let Err(why) = &source {
            if !fallback {
                return Err(End::Rejected(format!(
                    "cannot carry the conversation to {}: {why}; pass --session to name the session, or --fallback fresh-agent to start {} from the note and a recap alone",
                    plan.target.provider, plan.target.provider
                )));
            }
            not_carried = Some(why.clone());
        }
        None
    } else {
        let mut p = engine
            .prepare_receiver(&request, "", args.account.as_deref())
            .await?;
        let why = match &source {
            Err(why) => Some(why.clone()),
            Ok(src) => match carry::plan(src, &p, &receiver_cwd, &known).await {
                Ok(c) => {
                    // The receiver again, resuming: its CLI must be able to.
                    let mut with_resume = request.clone();
                    with_resume.resume = Some(c.resume.clone());
                    match engine
                        .prepare_receiver(&with_resume, "", args.account.as_deref())
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
                return Err(End::Rejected(format!(
                    "cannot carry the conversation to {}: {why}; pass --session to name the session, or --fallback fresh-agent to start {} from the note and a recap alone",
                    plan.target.provider, plan.target.provider
                )));
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

    // An earlier carried copy of the same source for the same CLI is replaced only when this
    // carry holds all of it and no agent runs it.
    let mut replace: Option<(String, Utf8PathBuf)> = None;
    if let (Some(src), Some(c), Some(p)) = (&source, &planned_carry, &planned)
        && let Some(id) = carry::earlier_copy(
            &timeline,
            &carry::SourceRefKey {
                provider: &src.session.provider,
                session_id: &src.session.session_id,
            },
            &plan.target.provider,
        )
    {
        match carry::judge_earlier(p, &id, c.messages(src)).await {
            carry::Earlier::None => {}
            carry::Earlier::Replace { session_id, path } => replace = Some((session_id, path)),
            carry::Earlier::Keep(why) => {
                result.carry = Some(carry_report);
                result.continuity = Some(carry::continuity(
                    ContinuityResult::NotContinued,
                    why.clone(),
                    Some(format!(
                        "nothing was changed; the task stays with {}",
                        plan.source.provider
                    )),
                    ContinuityChecks::default(),
                ));
                result.outcome = ContinueOutcome::NotContinued;
                result.exit_code = NOT_STARTED;
                result.reason = Some(format!("not continued: {why}"));
                return Ok(NOT_STARTED);
            }
        }
    }

    // The other machine, inspected without changing anything there.
    let remote_plan = match &destination {
        Some(dest) => Some(inspect_remote(engine, &plan, dest, args).await?),
        None => None,
    };
    if let Some(rp) = &remote_plan {
        result.remote = Some(rp.report());
    }

    // The worktree must be free: no root run or continuation, no agent working in it.
    let lease = hold_worktree(&plan.root, args.wait, cancel.clone()).await?;
    wait_for_agents(engine, &plan.root, args.wait, cancel.clone()).await?;

    let note_name = format!(
        "{}-{}.md",
        now_iso().replace([':', '.'], ""),
        plan.target.provider
    );
    let note_path = plan
        .note_dir
        .join(
            plan.task
                .as_ref()
                .map_or_else(|| "new-task".to_owned(), |t| t.id.to_string()),
        )
        .join(&note_name);
    result.note = Some(ContinueNote {
        path: note_path.clone(),
        digest: None,
    });
    result.checkpoint = Some(ContinueCheckpoint {
        commit: plan
            .prepared
            .committed
            .is_empty()
            .then(|| plan.head.clone()),
        created: !plan.prepared.committed.is_empty(),
        committed: plan.prepared.committed.clone(),
        uncommitted: plan.uncommitted.clone(),
    });
    if args.dry_run {
        if let Some(src) = &source {
            let (recap, _, masked) = carry::write_recap(&note_path, &src.transcript, &known, true)?;
            carry_report.recap = Some(recap);
            carry_report.secrets_masked += masked;
        }
        result.carry = Some(carry_report);
        result.outcome = ContinueOutcome::DryRun;
        result.exit_code = exit::OK;
        drop(lease);
        return Ok(exit::OK);
    }
    if *cancel.borrow() {
        return Err(End::Cancelled(
            "cancelled by a signal before anything changed".into(),
        ));
    }

    // From here on, things change. The checkpoint first.
    let Plan {
        git,
        root,
        cwd: _,
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
        git_remote: _,
        note_dir,
        message,
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
                End::NotStarted(format!(
                    "checkpoint {commit} made but the task store failed: {e}"
                ))
            })?,
    };
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
        .map_err(|e| End::NotStarted(format!("checkpoint {commit} made but not recorded: {e}")))?;

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
            .map_err(End::NotStarted)?;
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
                    End::NotStarted(format!(
                        "worktree {path} made but the task store failed: {e}"
                    ))
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
        git.run(&["push", "-q", remote, &refspec])
            .map_err(|e| End::NotStarted(format!("push failed (checkpoint {commit} kept): {e}")))?;
        result.push = Some(ContinuePush {
            remote: remote.clone(),
            branch: work_branch.clone(),
            pushed: true,
        });
    }

    // The note, rendered against the receiver's worktree, outside the repository; secrets
    // masked.
    let git_state =
        handoff_git::repo_state(&work_root).map_err(|e| End::NotStarted(e.to_string()))?;
    let origin = NoteOrigin {
        created_at: Some(now_iso()),
        source_provider: Some(from.provider.clone()),
        source_model: from.model.clone(),
    };
    let (rendered, note_secrets) = redact(&render_note(&note, &git_state, &origin), &known);
    carry_report.secrets_masked += note_secrets;
    let note_path = note_dir.join(work_task.id.as_str()).join(&note_name);
    write_private_file(&note_path, &rendered).map_err(End::NotStarted)?;
    let digest = format!("sha256:{:x}", Sha256::digest(rendered.as_bytes()));
    result.note = Some(ContinueNote {
        path: note_path.clone(),
        digest: Some(digest.clone()),
    });
    let recap_text = match &source {
        Some(src) => {
            let (recap, text, masked) =
                carry::write_recap(&note_path, &src.transcript, &known, false)
                    .map_err(End::NotStarted)?;
            carry_report.recap = Some(recap);
            carry_report.secrets_masked += masked;
            Some(text)
        }
        None => None,
    };

    if let Some(rp) = remote_plan {
        result.carry = Some(carry_report);
        let digest = result
            .note
            .as_ref()
            .and_then(|n| n.digest.clone())
            .unwrap_or_default();
        let local = LocalHandoff {
            store: &store,
            task: &work_task,
            commit: &commit,
            branch: &work_branch,
            note_path: &note_path,
            note_text: &note_text,
            digest: &digest,
            source: source.as_ref(),
            from: &from,
            target: &target,
            route,
            message: message.clone(),
            known: &known,
        };
        let code = finish_remote(args, &rp, &local, result, cancel.clone()).await?;
        drop(lease);
        return Ok(code);
    }

    // The receiver's store gets the carried session.
    // The receiver as planned (resuming) knows its store.
    let receiver_for_carry = planned.filter(|_| planned_carry.is_some());
    let carried = match (&planned_carry, &source, &receiver_for_carry) {
        (Some(c), Some(src), Some(p)) => {
            let done = carry::perform(c, src, p, &work_root)
                .await
                .map_err(|e| End::NotStarted(format!("the conversation was not carried: {e}")))?;
            request.resume = Some(done.resume.clone());
            carry_report.session_id = Some(done.session_id.clone());
            carry_report.files = done.files.clone();
            carry_report.bytes = done.bytes;
            carry_report.warnings.extend(done.warnings.iter().cloned());
            carry_report.warnings.dedup();
            if let Some((old, path)) = &replace
                && *old != done.session_id
                && std::fs::remove_file(path).is_ok()
            {
                // A Claude Code session keeps sub-agent transcripts and large tool results in a
                // folder named after it.
                let companion = path.with_extension("");
                if companion.is_dir() && companion.file_name() == Some(old.as_str()) {
                    let _ = std::fs::remove_dir_all(&companion);
                }
                carry_report.replaced = Some(old.clone());
            }
            Some(done)
        }
        _ => None,
    };
    result.carry = Some(carry_report.clone());

    let target_ref = AgentRef {
        provider: target.provider.clone(),
        model: result
            .target
            .as_ref()
            .and_then(|t| t.model.clone())
            .or_else(|| target.model.clone()),
    };
    let mut details = serde_json::Map::new();
    details.insert("checkpoint".into(), commit.clone().into());
    details.insert("task".into(), work_task.id.as_str().into());
    details.insert("role".into(), target.role.as_str().into());
    details.insert("worktree".into(), work_root.as_str().into());
    details.insert("branch".into(), work_branch.clone().into());
    if let Some(a) = &target.account {
        details.insert("account".into(), a.clone().into());
    }
    if let Some(e) = result.target.as_ref().and_then(|t| t.effort.clone()) {
        details.insert("effort".into(), e.into());
    }
    let mut carry_details = serde_json::to_value(&carry_report).unwrap_or_default();
    if let (Some(src), Some(_), Some(obj)) = (&source, &carried, carry_details.as_object_mut()) {
        obj.insert("turns".into(), carry::listed_turns(&src.transcript));
    }
    details.insert("carry".into(), carry_details);
    let row = store
        .record_handoff(
            &work_task.id,
            &NewHandoff {
                source: source_ref.clone(),
                target: target_ref.clone(),
                context: HandoffContext {
                    note_path: Some(note_path.clone()),
                    note_digest: Some(digest),
                    transcript_messages: carried.as_ref().map(|c| c.baseline.messages.len() as u64),
                    message: message.clone(),
                    details: Some(details),
                },
                route,
            },
        )
        .map_err(|e| End::NotStarted(format!("the task store failed: {e}")))?;
    result.handoff_id = Some(row.id.clone());

    if args.note_only {
        store
            .finish_handoff(&row.id, &HandoffOutcome::NoteWritten)
            .map_err(|e| End::NotStarted(format!("the task store failed: {e}")))?;
        let c = carry::continuity(
            ContinuityResult::FreshAgent,
            "--note-only: no receiver was started; the next agent starts from the note and the recap",
            Some(format!("give the next agent the note at {note_path}")),
            ContinuityChecks::default(),
        );
        annotate(&store, &row.id, &c, None);
        result.continuity = Some(c);
        result.outcome = ContinueOutcome::NoteWritten;
        result.exit_code = exit::OK;
        result.message = message.map(|text| ContinueMessage { text, sent: false });
        return Ok(exit::OK);
    }

    // The receiver.
    let context = match (&carried, &source, &recap_text) {
        (Some(c), Some(src), _) => Some(format!(
            "Your session holds the conversation so far, carried over from {} ({} messages); a bounded recap of it is also at {}.",
            src.session.provider,
            c.baseline.messages.len(),
            carry::recap_path(&note_path)
        )),
        (None, Some(src), Some(text)) => Some(format!(
            "## Conversation so far (a recap of {}'s session {})\n\n{text}",
            src.session.provider, src.session.session_id
        )),
        _ => None,
    };
    let prompt = receiver_prompt(
        &rendered,
        &note_path,
        &source_ref,
        role_of(args.role),
        message.as_deref(),
        context.as_deref(),
    );
    let not_started = |reason: String, result: &mut ContinueResult| {
        receiver_not_started(&store, &row.id, message.as_ref(), result, "", reason)
    };
    let receiver = match engine
        .prepare_receiver(&request, &prompt, args.account.as_deref())
        .await
    {
        Ok(r) => r,
        Err(reason) => return Err(not_started(reason, result)),
    };
    let workspace = handoff_git::GitWorkspace::new();
    let before = if request.role.writes() {
        None
    } else {
        Some(
            workspace
                .fingerprint(&work_root)
                .map_err(|e| not_started(e.to_string(), result))?,
        )
    };
    let watched = watch_receiver(
        engine,
        &receiver,
        Duration::from_secs(args.timeout),
        Duration::from_secs(args.ready_timeout),
        cancel.clone(),
        carried.as_ref(),
    )
    .await;
    let run = &watched.run;
    record_receiver(result, &receiver, run);
    let receiver_session = carried
        .as_ref()
        .map(|c| c.session_id.clone())
        .or_else(|| run.report.session_id.clone());
    if let Some(id) = &receiver_session {
        let mut d = serde_json::Map::new();
        d.insert("receiverSession".into(), id.clone().into());
        let _ = store.add_handoff_details(&row.id, &d);
    }
    if !watched.stopped_starting
        && let Some(reason) = run.failure()
    {
        if matches!(run.ending, handoff_core::Ending::Cancelled) {
            let _ = store.finish_handoff(
                &row.id,
                &HandoffOutcome::NotStarted {
                    reason: reason.clone(),
                },
            );
            return Err(End::Cancelled(reason));
        }
        return Err(not_started(reason, result));
    }

    // Did it continue?
    let resume_shell = result
        .receiver
        .as_ref()
        .and_then(|r| r.resume.as_ref())
        .map(|r| r.shell.clone());
    let mut verdict = match (&carried, &source) {
        (Some(c), Some(src)) => {
            decide(
                engine,
                &receiver,
                c,
                src,
                run,
                &watched,
                args.ready_timeout,
                from.account.as_deref(),
                &scratch_path,
            )
            .await
        }
        _ => carry::continuity(
            ContinuityResult::FreshAgent,
            format!(
                "started from the note{} alone (--fallback fresh-agent): {}",
                if recap_text.is_some() {
                    " and a recap"
                } else {
                    ""
                },
                not_carried.as_deref().unwrap_or("nothing to carry")
            ),
            None,
            ContinuityChecks::default(),
        ),
    };
    verdict.last_message = run.report.last_message.clone();
    let unreadable = verdict.result == ContinuityResult::Inconclusive && !watched.stopped_starting;
    if (args.probe || unreadable)
        && let Some(session) = &receiver_session
        && verdict.result != ContinuityResult::NotContinued
    {
        match carry::probe(
            engine,
            &receiver,
            session,
            &carry::probe_reference(&note),
            Duration::from_secs(args.ready_timeout),
            cancel.clone(),
            args.account.as_deref(),
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
            &note_path,
            &from.provider,
        )
    });
    annotate(&store, &row.id, &verdict, None);
    let continued = verdict.result != ContinuityResult::NotContinued;
    // A receiver stopped before it resumed anything has not taken the task.
    let takes_task = continued && !watched.stopped_starting;
    result.continuity = Some(verdict.clone());

    // Started: the task is the receiver's now, unless it did not continue.
    store
        .finish_handoff(&row.id, &HandoffOutcome::Started)
        .map_err(|e| End::NotStarted(format!("the receiver ran but the task store failed: {e}")))?;
    result.message = message.map(|text| ContinueMessage { text, sent: true });
    let summary = run
        .report
        .last_message
        .clone()
        .unwrap_or_else(|| "started (no message)".into());
    let _ = store.append(
        &work_task.id,
        &Record::Turn(Turn {
            author: target_ref.clone(),
            summary: summary.chars().take(2000).collect(),
        }),
    );
    if !continued {
        result.outcome = ContinueOutcome::NotContinued;
        result.exit_code = NOT_STARTED;
        result.reason = Some(format!("not continued: {}", verdict.reason));
        return Ok(NOT_STARTED);
    }
    if takes_task {
        let _ = store.set_agent(
            &work_task.id,
            &TaskAgent {
                provider: target.provider.clone(),
                model: target_ref.model.clone(),
                account: target.account.clone(),
            },
        );
    }
    result.outcome = ContinueOutcome::Started;
    result.exit_code = exit::OK;
    if let Some(before) = before {
        let after = workspace.fingerprint(&work_root);
        let evidence = after.as_ref().map(|a| before.compare(a));
        let (unchanged, changed) = match &evidence {
            Ok(e) => (!e.changed, e.changed_files.clone()),
            Err(_) => (false, Vec::new()),
        };
        if let Some(r) = result.receiver.as_mut() {
            r.worktree_unchanged = Some(unchanged);
            r.changed = changed.clone();
        }
        if !unchanged {
            result.outcome = ContinueOutcome::ReviewChanged;
            result.exit_code = REVIEW_CHANGED;
            result.reason = Some(match evidence {
                Ok(_) => format!(
                    "the review receiver changed the worktree ({}); its changes are left in place",
                    changed.join(", ")
                ),
                Err(e) => format!("cannot check the review receiver's worktree: {e}"),
            });
            return Ok(REVIEW_CHANGED);
        }
    }
    drop(lease);
    drop(scratch);
    Ok(exit::OK)
}

/// The receiver's run, watched: whether its store showed the carried session resumed, and
/// whether it was stopped for not showing that within the ready timeout.
struct Watched {
    run: handoff_core::ReceiverRun,
    seen_continued: bool,
    stopped_starting: bool,
}

/// Runs the receiver's first turn. With a carried session, its store is read every half
/// second; when it shows nothing resumed within `ready`, the receiver is stopped.
async fn watch_receiver(
    engine: &Engine,
    receiver: &PreparedReceiver,
    timeout: Duration,
    ready: Duration,
    mut cancel: watch::Receiver<bool>,
    carried: Option<&carry::Carried>,
) -> Watched {
    let (stop, stopped) = watch::channel(false);
    let turn = engine.start_receiver(receiver, timeout, stopped);
    tokio::pin!(turn);
    let started = std::time::Instant::now();
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
                        carry::StoreVerdict::Read(handoff_core::Resumption::Continued) => seen = true,
                        // Can't tell from the store: the turn goes on; the probe decides later.
                        carry::StoreVerdict::Unreadable(_) => {}
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

/// The continuity verdict for a carried conversation, from the source and the receiver's store.
#[allow(clippy::too_many_arguments)]
async fn decide(
    engine: &Engine,
    receiver: &PreparedReceiver,
    carried: &carry::Carried,
    source: &carry::Source,
    run: &handoff_core::ReceiverRun,
    watched: &Watched,
    ready_secs: u64,
    account: Option<&str>,
    scratch: &Utf8Path,
) -> Continuity {
    let original = carry::original_appended(engine, source, account, scratch).await;
    let mut checks = ContinuityChecks {
        original_appended: Some(original),
        session_resumed: None,
        turn_after_carried: None,
    };
    let verdict = carry::store_verdict(receiver, carried).await;
    match &verdict {
        carry::StoreVerdict::Read(r) => {
            checks.session_resumed = Some(*r != handoff_core::Resumption::Diverged);
            checks.turn_after_carried = Some(*r == handoff_core::Resumption::Continued);
        }
        carry::StoreVerdict::Missing => checks.session_resumed = Some(false),
        carry::StoreVerdict::Unreadable(_) => {}
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
    match verdict {
        carry::StoreVerdict::Read(handoff_core::Resumption::Continued) => carry::continuity(
            ContinuityResult::Continued,
            format!(
                "the receiver resumed the carried session {} and wrote a turn after its {} messages",
                carried.session_id,
                carried.baseline.messages.len()
            ),
            None,
            checks,
        ),
        carry::StoreVerdict::Read(handoff_core::Resumption::NothingAfter) => carry::continuity(
            ContinuityResult::NotContinued,
            format!(
                "the receiver's session {} holds the carried conversation but no turn after it",
                carried.session_id
            ),
            None,
            checks,
        ),
        carry::StoreVerdict::Read(handoff_core::Resumption::Diverged) => carry::continuity(
            ContinuityResult::NotContinued,
            format!(
                "the receiver's session {} no longer starts with the carried conversation",
                carried.session_id
            ),
            None,
            checks,
        ),
        carry::StoreVerdict::Missing => carry::continuity(
            ContinuityResult::NotContinued,
            format!(
                "the carried session {} is not in the receiver's store",
                carried.session_id
            ),
            None,
            checks,
        ),
        carry::StoreVerdict::Unreadable(e) => carry::continuity(
            ContinuityResult::Inconclusive,
            format!("the receiver's store can't be read: {e}"),
            None,
            checks,
        ),
    }
}

/// What to do after a verdict.
fn next_step(
    c: &Continuity,
    resume: Option<&str>,
    note: &Utf8Path,
    source: &handoff_core::AgentId,
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

/// Keeps the continuity verdict in the handoff's details, for the timeline.
fn annotate(
    store: &SqliteStore,
    id: &handoff_core::HandoffId,
    c: &Continuity,
    extra: Option<(&str, serde_json::Value)>,
) {
    let mut d = serde_json::Map::new();
    d.insert("continuity".into(), carry::timeline_details(c));
    if let Some((k, v)) = extra {
        d.insert(k.into(), v);
    }
    let _ = store.add_handoff_details(id, &d);
}

/// The other machine, as inspected before anything changed.
struct RemotePlan {
    ssh: remote::Ssh,
    destination: String,
    inspection: remote::Inspection,
    url: String,
}

impl RemotePlan {
    fn report(&self) -> handoff_core::ContinueRemote {
        let i = &self.inspection;
        handoff_core::ContinueRemote {
            destination: self.destination.clone(),
            path: i.path.clone(),
            cloned: i.repo == "absent",
            handoff_version: i.handoff_version.clone(),
            receiver_cli: i.receiver.clone(),
            branch_head: i.branch_head.clone(),
            task_id: None,
            handoff_id: None,
            log: Some(self.ssh.interactive(&format!(
                "handoff log --cwd {}",
                handoff_core::shell_word(&i.path)
            ))),
        }
    }
}

/// How long one inspection or preparation step over ssh may take.
const REMOTE_STEP: Duration = Duration::from_secs(120);

/// Inspects the other machine and refuses what can't work there, changing nothing.
async fn inspect_remote(
    engine: &Engine,
    plan: &Plan,
    dest: &remote::Destination,
    args: &ContinueArgs,
) -> Result<RemotePlan, End> {
    let Some(git_remote) = &plan.git_remote else {
        return Err(End::Rejected(format!(
            "--on: branch '{}' has no git remote both machines can reach (add one with git remote add)",
            plan.branch
        )));
    };
    let Some(url) = git_remote.url.clone() else {
        return Err(End::Rejected(format!(
            "--on: the remote '{}' has no URL",
            git_remote.name
        )));
    };
    let exe = engine
        .provider(&plan.target.provider)
        .map(|p| p.spec().executable)
        .unwrap_or("?");
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let ssh = remote::Ssh::new(&dest.host, &env);
    let name = plan.root.file_name().unwrap_or("repo");
    let first = plan
        .git
        .run(&["rev-list", "--max-parents=0", "HEAD"])
        .map_err(End::Rejected)?;
    let first = String::from_utf8_lossy(&first.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let script = remote::inspect_script(
        dest.path.as_deref(),
        plan.root.as_str(),
        name,
        exe,
        &url,
        &plan.branch,
        &first,
    );
    let out = ssh
        .step("inspecting the other machine", &script, b"", REMOTE_STEP)
        .await
        .map_err(|e| End::Rejected(format!("--on: {e}")))?;
    let i = remote::read_inspection(&out);
    let host = &dest.host;
    if i.handoff.is_none() {
        return Err(End::Rejected(format!(
            "--on: handoff is not installed on {host} (not found on its PATH)"
        )));
    }
    let ours = format!("handoff {}", env!("CARGO_PKG_VERSION"));
    if i.handoff_version.as_deref() != Some(ours.as_str()) {
        return Err(End::Rejected(format!(
            "--on: {host} runs {}, this machine {ours}: install the same version there",
            i.handoff_version
                .as_deref()
                .unwrap_or("a handoff without a version")
        )));
    }
    if i.no_setsid {
        return Err(End::Rejected(format!(
            "--on: {host} has no setsid (util-linux), which keeps the receiver running after the connection closes"
        )));
    }
    if i.receiver.is_none() {
        return Err(End::Rejected(format!(
            "--on: {exe} ({}) is not installed on {host} (not found on its PATH)",
            plan.target.provider
        )));
    }
    match i.repo.as_str() {
        "not-a-repo" => {
            return Err(End::Rejected(format!(
                "--on: '{}' on {host} exists and is not a git repository",
                i.path
            )));
        }
        "present" if i.foreign => {
            return Err(End::Rejected(format!(
                "--on: '{}' on {host} is another project's repository (it lacks this one's first commit {})",
                i.path,
                remote::short(&first)
            )));
        }
        "present" if i.dirty => {
            return Err(End::Rejected(format!(
                "--on: '{}' on {host} has uncommitted changes; commit or stash them there first",
                i.path
            )));
        }
        _ => {}
    }
    if let Some(there) = &i.branch_there {
        // The checkpoint descends from HEAD: the branch there must be behind HEAD or at it.
        let behind = plan
            .git
            .run(&["merge-base", "--is-ancestor", there, "HEAD"])
            .is_ok();
        if !behind {
            return Err(End::Rejected(format!(
                "--on: branch '{}' in '{}' on {host} is at {}, which is not in this branch's history: merge or drop those commits there first",
                plan.branch,
                i.path,
                remote::short(there)
            )));
        }
    }
    if let Some(e) = &i.ls_remote_error {
        return Err(End::Rejected(format!(
            "--on: {host} cannot reach the git remote '{}' ({url}): {e}",
            git_remote.name
        )));
    }
    let needs_push =
        !plan.prepared.committed.is_empty() || i.branch_head.as_deref() != Some(plan.head.as_str());
    if needs_push && !args.push {
        let where_ = match &i.branch_head {
            None => format!("branch '{}' is not on '{}'", plan.branch, git_remote.name),
            Some(h) if !plan.prepared.committed.is_empty() => format!(
                "the checkpoint will be a new commit on '{}' (now at {})",
                plan.branch,
                remote::short(h)
            ),
            Some(h) => format!(
                "'{}' on '{}' is at {}, not at HEAD {}",
                plan.branch,
                git_remote.name,
                remote::short(h),
                remote::short(&plan.head)
            ),
        };
        return Err(End::Rejected(format!(
            "--on: {where_}: pass --push so that {host} can fetch it"
        )));
    }
    Ok(RemotePlan {
        ssh,
        destination: dest.host.clone(),
        inspection: i,
        url,
    })
}

/// What the local side of a remote handoff records.
struct LocalHandoff<'a> {
    store: &'a SqliteStore,
    task: &'a Task,
    commit: &'a str,
    branch: &'a str,
    note_path: &'a Utf8Path,
    note_text: &'a str,
    digest: &'a str,
    source: Option<&'a carry::Source>,
    from: &'a TaskAgent,
    target: &'a ContinueTarget,
    route: Route,
    message: Option<String>,
    known: &'a [String],
}

/// Puts the repository on the other machine at the checkpoint, sends it the note and the
/// source session, starts its `handoff continue` detached, waits for its result and records
/// everything in the local timeline.
async fn finish_remote(
    args: &ContinueArgs,
    rp: &RemotePlan,
    local: &LocalHandoff<'_>,
    result: &mut ContinueResult,
    mut cancel: watch::Receiver<bool>,
) -> Result<u8, End> {
    let path = rp.inspection.path.clone();
    let ssh = &rp.ssh;
    let source_ref = AgentRef {
        provider: local.from.provider.clone(),
        model: local.from.model.clone(),
    };
    let target_ref = AgentRef {
        provider: local.target.provider.clone(),
        model: local.target.model.clone(),
    };
    let mut details = serde_json::Map::new();
    details.insert("checkpoint".into(), local.commit.into());
    details.insert("task".into(), local.task.id.as_str().into());
    details.insert("role".into(), local.target.role.as_str().into());
    details.insert("branch".into(), local.branch.into());
    details.insert(
        "remote".into(),
        serde_json::json!({ "destination": rp.destination, "path": path }),
    );
    let row = local
        .store
        .record_handoff(
            &local.task.id,
            &NewHandoff {
                source: source_ref.clone(),
                target: target_ref.clone(),
                context: HandoffContext {
                    note_path: Some(local.note_path.to_owned()),
                    note_digest: Some(local.digest.to_owned()),
                    transcript_messages: None,
                    message: local.message.clone(),
                    details: Some(details),
                },
                route: local.route,
            },
        )
        .map_err(|e| End::NotStarted(format!("the task store failed: {e}")))?;
    result.handoff_id = Some(row.id.clone());
    let on = format!(" on {}", rp.destination);
    let fail = |reason: String, result: &mut ContinueResult| {
        receiver_not_started(
            local.store,
            &row.id,
            local.message.as_ref(),
            result,
            &on,
            reason,
        )
    };

    // The repository there, at the checkpoint.
    let id = uuid::Uuid::new_v4().simple().to_string();
    let prepared = match ssh
        .step(
            "preparing the repository",
            &remote::prepare_script(&path, &rp.url, local.branch, local.commit),
            b"",
            // A clone can take long.
            Duration::from_secs(args.timeout).max(REMOTE_STEP),
        )
        .await
    {
        Ok(out) => out,
        Err(e) => {
            // A clone that failed half-way is removed; an existing repository was only fetched.
            if rp.inspection.repo == "absent" {
                let _ = ssh
                    .run(
                        &remote::undo_script(&path, local.branch, true, &remote::Before::default()),
                        b"",
                        REMOTE_STEP,
                    )
                    .await;
            }
            return Err(fail(e, result));
        }
    };
    let cloned = prepared.value("cloned").is_some();
    let before = remote::Before {
        previous: prepared.value("previous").filter(|s| !s.is_empty()),
        branch_was: prepared.value("branchWas").filter(|s| !s.is_empty()),
    };
    let undo = |ssh: &remote::Ssh| {
        let script = format!(
            "{}\nrm -rf \"{}\"",
            remote::undo_script(&path, local.branch, cloned, &before),
            remote::incoming_dir(&id)
        );
        let ssh = ssh.clone();
        async move {
            let _ = ssh.run(&script, b"", REMOTE_STEP).await;
        }
    };
    if let Some(r) = result.remote.as_mut() {
        r.cloned = cloned;
    }

    // The note and the source session, into a private directory there.
    let note_file = match ssh
        .step(
            "sending the note",
            &remote::upload_script(&id, "note.md"),
            redact(local.note_text, local.known).0.as_bytes(),
            REMOTE_STEP,
        )
        .await
    {
        Ok(out) => out.value("file").unwrap_or_default(),
        Err(e) => {
            undo(ssh).await;
            return Err(fail(e, result));
        }
    };
    let mut session_file = None;
    if let Some(src) = local.source {
        let bytes = match std::fs::read(&src.session.path) {
            Ok(b) => b,
            Err(e) => {
                undo(ssh).await;
                return Err(fail(
                    format!("cannot read {}: {e}", src.session.path),
                    result,
                ));
            }
        };
        let name = src.session.path.file_name().unwrap_or("session.jsonl");
        match ssh
            .step(
                "sending the session",
                &remote::upload_script(&id, name),
                &bytes,
                REMOTE_STEP,
            )
            .await
        {
            Ok(out) => session_file = out.value("file"),
            Err(e) => {
                undo(ssh).await;
                return Err(fail(e, result));
            }
        }
    }

    // handoff continue there, detached: it survives this connection.
    let mut remote_args: Vec<String> = vec![
        "--cwd".into(),
        path.clone(),
        "--from".into(),
        local.from.provider.to_string(),
        "--to".into(),
        local.target.provider.to_string(),
        "--note-file".into(),
        note_file,
        "--role".into(),
        args.role.as_str().into(),
        "--ready-timeout".into(),
        args.ready_timeout.to_string(),
        "--timeout".into(),
        args.timeout.to_string(),
        "--quiet".into(),
    ];
    let mut opt = |flag: &str, v: Option<&String>| {
        if let Some(v) = v {
            remote_args.push(flag.into());
            remote_args.push(v.clone());
        }
    };
    opt("--from-model", local.from.model.as_ref());
    opt("--model", args.model.as_ref());
    opt("--effort", args.effort.as_ref());
    opt("--account", args.account.as_ref());
    opt("--message", local.message.as_ref());
    opt("--session", session_file.as_ref());
    if args.fallback == Some(Fallback::FreshAgent) {
        remote_args.extend(["--fallback".into(), "fresh-agent".into()]);
    }
    if args.probe {
        remote_args.push("--probe".into());
    }
    if args.wait {
        remote_args.push("--wait".into());
    }
    if let Err(e) = ssh
        .step(
            "starting handoff continue",
            &remote::start_script(&id, &path, &remote_args),
            b"",
            REMOTE_STEP,
        )
        .await
    {
        undo(ssh).await;
        return Err(fail(e, result));
    }

    // Its result.
    let deadline =
        std::time::Instant::now() + Duration::from_secs(args.timeout + args.ready_timeout + 120);
    let poll = remote::poll_script(&id);
    let outcome = loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = cancel.changed() => {}
        }
        if *cancel.borrow() {
            let _ = ssh.run(&remote::stop_script(&id), b"", REMOTE_STEP).await;
            let _ = local.store.finish_handoff(
                &row.id,
                &HandoffOutcome::NotStarted {
                    reason: "cancelled by a signal".into(),
                },
            );
            return Err(End::Cancelled(format!(
                "cancelled by a signal; handoff continue on {} was stopped",
                rp.destination
            )));
        }
        match ssh.run(&poll, b"", REMOTE_STEP).await {
            Ok(out) if out.code == 0 && out.value("running").as_deref() == Some("0") => break out,
            Ok(_) | Err(_) if std::time::Instant::now() < deadline => {}
            Ok(out) => {
                let _ = ssh.run(&remote::stop_script(&id), b"", REMOTE_STEP).await;
                return Err(fail(
                    format!(
                        "no result from handoff continue there in time; it was stopped: {}",
                        out.stderr_tail()
                    ),
                    result,
                ));
            }
            Err(e) => {
                let _ = ssh.run(&remote::stop_script(&id), b"", REMOTE_STEP).await;
                return Err(fail(e, result));
            }
        }
    };
    // Undone only while the repository there is exactly the checkpoint: a run that got further
    // may have work in it.
    let untouched = ssh
        .run(
            &remote::untouched_script(&path, local.commit),
            b"",
            REMOTE_STEP,
        )
        .await
        .is_ok_and(|o| o.code == 0);
    let text = outcome.value("result").unwrap_or_default();
    let there: ContinueResult = match serde_json::from_str(text.trim()) {
        Ok(r) => r,
        Err(_) => {
            let why = outcome.value("stderr").unwrap_or_default();
            if untouched {
                undo(ssh).await;
            }
            return Err(fail(
                format!("handoff continue there printed no result: {}", why.trim()),
                result,
            ));
        }
    };
    if there.outcome == ContinueOutcome::Rejected && untouched {
        undo(ssh).await;
    }
    // What was sent is not needed any more (the note there is rendered into its own store).
    let _ = ssh
        .run(
            &format!("rm -rf \"{}\"", remote::incoming_dir(&id)),
            b"",
            REMOTE_STEP,
        )
        .await;

    // Its result is ours, with the local checks and records added.
    result.carry = there.carry.clone();
    result.receiver = there.receiver.clone().map(|mut r| {
        if let Some(resume) = r.resume.as_mut() {
            resume.shell = ssh.interactive(&resume.shell);
        }
        r
    });
    result.message = there.message.clone();
    if let Some(r) = result.remote.as_mut() {
        r.task_id = there.task_id.as_ref().map(|t| t.to_string());
        r.handoff_id = there.handoff_id.as_ref().map(|h| h.to_string());
    }
    let mut continuity = there.continuity.clone();
    if let (Some(src), Some(c)) = (local.source, continuity.as_mut())
        && let Some(snapshot) = &src.snapshot
    {
        let kept = snapshot.still_prefix().unwrap_or(false);
        c.checks.original_appended = Some(kept);
        if !kept && c.result != ContinuityResult::NotContinued {
            c.result = ContinuityResult::NotContinued;
            c.reason = format!(
                "the source session {} changed here while it was carried",
                src.session.session_id
            );
        }
    }
    result.continuity = continuity.clone();
    let mut extra = serde_json::Map::new();
    extra.insert(
        "remote".into(),
        serde_json::to_value(&result.remote).unwrap_or_default(),
    );
    if let Some(c) = &continuity {
        extra.insert("continuity".into(), carry::timeline_details(c));
    }
    if let Some(carry) = &result.carry {
        let mut value = serde_json::to_value(carry).unwrap_or_default();
        if let (Some(src), true, Some(obj)) = (local.source, carry.carried, value.as_object_mut()) {
            obj.insert("turns".into(), carry::listed_turns(&src.transcript));
        }
        extra.insert("carry".into(), value);
    }
    let _ = local.store.add_handoff_details(&row.id, &extra);
    let started = matches!(
        there.outcome,
        ContinueOutcome::Started | ContinueOutcome::ReviewChanged | ContinueOutcome::NotContinued
    );
    if !started {
        let reason = there
            .reason
            .clone()
            .unwrap_or_else(|| format!("{:?}", there.outcome));
        let _ = local.store.finish_handoff(
            &row.id,
            &HandoffOutcome::NotStarted {
                reason: reason.clone(),
            },
        );
        result.outcome = ContinueOutcome::NotStarted;
        result.exit_code = NOT_STARTED;
        result.reason = Some(format!("on {}: {reason}", rp.destination));
        return Ok(NOT_STARTED);
    }
    let _ = local
        .store
        .finish_handoff(&row.id, &HandoffOutcome::Started);
    if let Some(last) = result
        .receiver
        .as_ref()
        .and_then(|r| r.last_message.clone())
    {
        let _ = local.store.append(
            &local.task.id,
            &Record::Turn(Turn {
                author: target_ref.clone(),
                summary: format!(
                    "on {}: {}",
                    rp.destination,
                    last.chars().take(2000).collect::<String>()
                ),
            }),
        );
    }
    let not_continued = continuity
        .as_ref()
        .is_some_and(|c| c.result == ContinuityResult::NotContinued);
    if not_continued {
        result.outcome = ContinueOutcome::NotContinued;
        result.exit_code = NOT_STARTED;
        result.reason = Some(format!(
            "not continued on {}: {}",
            rp.destination,
            continuity.map(|c| c.reason).unwrap_or_default()
        ));
        return Ok(NOT_STARTED);
    }
    let _ = local.store.set_agent(
        &local.task.id,
        &TaskAgent {
            provider: local.target.provider.clone(),
            model: target_ref.model.clone(),
            account: local.target.account.clone(),
        },
    );
    result.outcome = there.outcome;
    result.exit_code = there.exit_code;
    result.reason = there.reason.clone();
    Ok(there.exit_code)
}

/// Records that the receiver (`where_`: "" or " on <host>") did not start, and reports the
/// message unsent.
fn receiver_not_started(
    store: &SqliteStore,
    row: &handoff_core::HandoffId,
    message: Option<&String>,
    result: &mut ContinueResult,
    where_: &str,
    reason: String,
) -> End {
    let _ = store.finish_handoff(
        row,
        &HandoffOutcome::NotStarted {
            reason: reason.clone(),
        },
    );
    result.message = message
        .cloned()
        .map(|text| ContinueMessage { text, sent: false });
    End::NotStarted(format!("the receiver did not start{where_}: {reason}"))
}

fn role_of(role: RoleArg) -> ReceiverRole {
    match role {
        RoleArg::Implement => ReceiverRole::Implement,
        RoleArg::Review => ReceiverRole::Review,
    }
}

fn record_receiver(
    result: &mut ContinueResult,
    receiver: &PreparedReceiver,
    run: &handoff_core::ReceiverRun,
) {
    let session = run.report.session_id.clone();
    result.receiver = Some(ContinueReceiver {
        argv: receiver.argv(),
        version: receiver.version.clone(),
        policy: receiver.policy.clone(),
        resume: session.as_deref().and_then(|s| receiver.resume_command(s)),
        session_id: session,
        last_message: run.report.last_message.clone(),
        exit_code: run.exit_code,
        worktree_unchanged: None,
        changed: Vec::new(),
    });
}

/// Checks everything that can be checked without changing anything.
fn validate(
    args: &ContinueArgs,
    store: &SqliteStore,
    result: &mut ContinueResult,
) -> Result<Plan, End> {
    let cwd = check_cwd(&args.cwd)?;
    let to = known_provider("--to", &args.to)?;
    if let Some(m) = &args.model {
        check_model(m)?;
    }
    if let Some(m) = &args.from_model {
        check_model(m).map_err(|e| e.replace("--model", "--from-model"))?;
    }
    if let Some(a) = &args.account
        && !valid_account_name(a)
    {
        return Err(format!("--account: invalid account name '{a}'").into());
    }
    if let Some(e) = &args.effort
        && e.trim().is_empty()
    {
        return Err("--effort must not be empty".to_owned().into());
    }
    if let Some(m) = &args.message
        && m.trim().is_empty()
    {
        return Err("--message must not be empty".to_owned().into());
    }
    let message = args.message.clone();
    result.message = message
        .clone()
        .map(|text| ContinueMessage { text, sent: false });

    // The note.
    let text = if args.note_file == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_NOTE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("note -: cannot read stdin: {e}"))?;
        decode_note(&bytes)
            .map(str::to_owned)
            .map_err(|e| format!("note -: {e}"))?
    } else {
        read_note(std::path::Path::new(&args.note_file))
            .map_err(|e| format!("note {}: {e}", args.note_file))?
    };
    let note = parse_note(&text);
    check_note(&note).map_err(|errors| format!("note {}: {errors}", args.note_file))?;

    // The repository.
    let state = handoff_git::repo_state(&cwd).map_err(|e| e.to_string())?;
    let root = state.repository.clone();
    let Some(branch) = state.branch.clone() else {
        return Err(format!(
            "HEAD is detached in '{root}': check out the branch the work is on, then continue"
        )
        .into());
    };
    let Some(head) = state.head.clone() else {
        return Err(format!(
            "branch '{branch}' in '{root}' has no commit yet: commit the work, then continue"
        )
        .into());
    };
    let git = Git { root: root.clone() };

    // The task and who has it.
    let task = store.task_for_worktree(&root).map_err(|e| e.to_string())?;
    result.task_id = task.as_ref().map(|t| t.id.clone());
    let from = match &args.from {
        Some(f) => Some(known_provider("--from", f)?),
        None => None,
    };
    let source = match (&task, from) {
        (Some(t), Some(f)) if f != t.agent.provider => {
            return Err(format!(
                "the task {} is with {}, not {f}: leave --from out or continue from {}",
                t.id, t.agent.provider, t.agent.provider
            )
            .into());
        }
        (Some(t), _) => TaskAgent {
            model: args.from_model.clone().or_else(|| t.agent.model.clone()),
            ..t.agent.clone()
        },
        (None, Some(f)) => TaskAgent {
            provider: f,
            model: args.from_model.clone(),
            account: None,
        },
        (None, None) => {
            return Err("first handoff of this worktree: pass --from <provider> (the agent that has the task now)"
                .to_owned()
                .into());
        }
    };
    result.source = Some(source.clone());
    let target = ContinueTarget {
        provider: to.clone(),
        model: args.model.clone(),
        effort: args.effort.clone(),
        account: args.account.clone(),
        role: role_of(args.role),
    };
    result.target = Some(target.clone());
    let other_account =
        to == source.provider && args.account.is_some() && args.account != source.account;
    let route = if args.note_only {
        Route::NoteOnly
    } else if args.new_thread || other_account {
        Route::NewThread
    } else {
        Route::SameThread
    };
    result.route = Some(route);

    // What the checkpoint commits: tracked changes and staged files.
    let tracked = git.run(&["diff", "--name-only", "-z", "HEAD"])?;
    let staged = git.run(&["diff", "--cached", "--name-only", "-z", "HEAD"])?;
    let staged = split_z(&staged.stdout);
    for path in &staged {
        if is_note(&root.join(path)) {
            return Err(format!(
                "'{path}' is a handoff note and is staged: unstage it (git restore --staged '{path}'); notes are never committed"
            )
            .into());
        }
        if looks_secret(path) {
            return Err(format!(
                "'{path}' is staged and looks like a secret: unstage it or commit it yourself before continuing"
            )
            .into());
        }
    }
    let mut pathspecs = split_z(&tracked.stdout);
    pathspecs.extend(staged);
    pathspecs.sort();
    pathspecs.dedup();
    let prepared = Prepared::new(&git, &pathspecs)?;
    let uncommitted: Vec<String> = state
        .uncommitted
        .iter()
        .map(|c| c.path.clone())
        .filter(|p| !prepared.committed.contains(p))
        .collect();

    // --push: a remote, and the note not staged.
    let push_remote = if args.push {
        let Some(remote) = state.remote.as_ref() else {
            return Err(format!(
                "--push: branch '{branch}' has no remote to push to (add one with git remote add, or leave out --push)"
            )
            .into());
        };
        if args.note_file != "-" {
            let note_abs = cwd.join(&args.note_file);
            if let Ok(rel) = note_abs.strip_prefix(&root) {
                let listed =
                    git.run(&["diff", "--cached", "--name-only", "-z", "--", rel.as_str()])?;
                if !listed.stdout.is_empty() {
                    return Err(format!(
                        "--push: the note '{rel}' is staged; unstage it before pushing"
                    )
                    .into());
                }
            }
        }
        Some(remote.name.clone())
    } else {
        None
    };

    // --new-thread: a fresh worktree path and branch.
    let new_thread = if route == Route::NewThread {
        let short = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let name = root.file_name().unwrap_or("worktree");
        let parent = root.parent().unwrap_or(&root);
        let path = parent.join(format!("{name}.{to}-{short}"));
        let new_branch = format!("handoff/{to}-{short}");
        if path.exists() {
            return Err(format!("--new-thread: '{path}' exists already").into());
        }
        Some((path, new_branch))
    } else {
        None
    };

    let env: BTreeMap<String, String> = std::env::vars().collect();
    let store_path = handoff_store::default_path(&env).map_err(|e| e.to_string())?;
    let state_dir = store_path
        .parent()
        .map_or_else(|| Utf8PathBuf::from("."), Utf8Path::to_owned);
    let note_dir = state_dir.join("notes");

    Ok(Plan {
        git,
        root,
        cwd,
        branch,
        head,
        task,
        source,
        target,
        route,
        prepared,
        uncommitted,
        push_remote,
        new_thread,
        note,
        note_text: text,
        git_remote: state.remote.clone(),
        note_dir,
        message,
    })
}

fn looks_secret(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    SECRET_NAMES.contains(&name)
        || (name.starts_with(".env.") && !name.ends_with(".example") && !name.ends_with(".sample"))
        || SECRET_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Takes the worktree's root lease for the length of the handoff.
async fn hold_worktree(
    root: &Utf8Path,
    wait: bool,
    cancel: watch::Receiver<bool>,
) -> Result<RootLease, End> {
    let dir = default_runtime_dir().map_err(|e| e.to_string())?;
    let holder = Holder {
        run_id: format!("continue-{}", uuid::Uuid::new_v4().hyphenated()),
        verb: "continue".into(),
        cwd: root.to_owned(),
    };
    match RootLease::try_acquire(&dir, root, &holder) {
        Ok(lease) => Ok(lease),
        Err(handoff_core::LeaseError::Busy { .. }) if wait => {
            RootLease::acquire(&dir, root, &holder, Wait::Until(cancel))
                .await
                .map_err(|e| match e {
                    handoff_core::LeaseError::Cancelled { .. } => End::Cancelled(
                        "cancelled by a signal while waiting for the worktree".into(),
                    ),
                    e => End::Rejected(e.to_string()),
                })
        }
        Err(e) => Err(End::Rejected(e.to_string())),
    }
}

/// Refuses (or with `--wait`, waits) while an agent process works in the worktree.
async fn wait_for_agents(
    engine: &Engine,
    root: &Utf8Path,
    wait: bool,
    mut cancel: watch::Receiver<bool>,
) -> Result<(), End> {
    let names: Vec<&str> = engine
        .registry()
        .iter()
        .map(|p| p.spec().executable)
        .collect();
    loop {
        let working = agents_working_in(root, &names);
        let Some(first) = working.first() else {
            return Ok(());
        };
        if !wait {
            return Err(End::Rejected(format!(
                "{} (pid {}) is working in '{}': let it finish, or pass --wait",
                first.name, first.pid, first.cwd
            )));
        }
        tokio::select! {
            () = tokio::time::sleep(AGENT_POLL) => {}
            _ = cancel.changed() => {}
        }
        if *cancel.borrow() {
            return Err(End::Cancelled(
                "cancelled by a signal while waiting for the agents in the worktree".into(),
            ));
        }
    }
}

/// Writes a file privately (0600 in a 0700 directory), never over an existing file.
pub(crate) fn write_private_file(path: &Utf8Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create '{dir}': {e}"))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot write '{path}': {e}"))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write '{path}': {e}"))
}

/// The receiver's first prompt: who hands over and how, the note, the message.
fn receiver_prompt(
    note: &str,
    note_path: &Utf8Path,
    source: &AgentRef,
    role: ReceiverRole,
    message: Option<&str>,
    context: Option<&str>,
) -> String {
    let from = match &source.model {
        Some(m) => format!("{} ({m})", source.provider),
        None => source.provider.to_string(),
    };
    let role_line = match role {
        ReceiverRole::Implement => {
            "You take this task over and carry it on in this worktree: you may edit files and run commands."
        }
        ReceiverRole::Review => {
            "You take this task over as its reviewer: read and run read-only commands, change nothing in the worktree, and report what you find."
        }
    };
    let mut p = format!(
        "{from} handed this task over to you. {role_line}\n\
         The handoff note below is also at {note_path}. Follow its receiver instructions.\n\n\
         {note}"
    );
    if let Some(c) = context {
        p.push_str("\n\n");
        p.push_str(c);
        p.push('\n');
    }
    if let Some(m) = message {
        p.push_str("\n\n## Message from the user\n\n");
        p.push_str(m);
        p.push('\n');
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::AgentId;

    #[test]
    fn secrets_are_recognised_by_name() {
        for p in [
            ".env",
            "a/.env.local",
            "keys/server.pem",
            "id_rsa",
            "x/credentials.json",
        ] {
            assert!(looks_secret(p), "{p}");
        }
        for p in [".env.example", "src/env.rs", "README.md", "keys.md"] {
            assert!(!looks_secret(p), "{p}");
        }
    }

    #[test]
    fn the_prompt_names_the_source_the_note_and_the_message() {
        let source = AgentRef {
            provider: AgentId::CLAUDE,
            model: Some("opus".into()),
        };
        let p = receiver_prompt(
            "NOTE",
            Utf8Path::new("/s/n.md"),
            &source,
            ReceiverRole::Review,
            Some("look at the parser"),
            None,
        );
        assert!(
            p.starts_with("claude (opus) handed this task over to you."),
            "{p}"
        );
        assert!(p.contains("change nothing") && p.contains("/s/n.md") && p.contains("\n\nNOTE"));
        assert!(
            p.ends_with("## Message from the user\n\nlook at the parser\n"),
            "{p}"
        );
    }
}
