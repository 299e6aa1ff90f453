//! With `on`: the other machine, inspected before anything changes, then put at the checkpoint
//! with the note and the source session, running its own `handoff continue` detached; its
//! result becomes ours and is recorded in the local timeline.

use std::time::Duration;

use handoff_core::{
    AgentRef, ContinueOutcome, ContinueRemote, ContinueResult, ContinuityResult, HandoffContext,
    HandoffOutcome, NewHandoff, Record, TaskAgent, Turn, redact, shell_word,
};
use tokio::sync::watch;

use super::checkpoint::Moved;
use super::note::Written;
use super::prepare::Conversation;
use super::record::receiver_not_started;
use super::validate::Plan;
use super::{ContinueContext, ContinueError, ContinueRequest, Fallback, NOT_STARTED};
use crate::carry;
use crate::error::{Failed, OrReject, Phase, Rejection};
use crate::ssh::{self, Destination, Ssh};

/// The other machine, as inspected before anything changed.
pub(super) struct RemotePlan {
    ssh: Ssh,
    destination: String,
    inspection: ssh::Inspection,
    url: String,
}

impl RemotePlan {
    /// What the result says of the other machine before anything changed there.
    pub(super) fn report(&self) -> ContinueRemote {
        let i = &self.inspection;
        ContinueRemote {
            destination: self.destination.clone(),
            path: i.path.clone(),
            cloned: i.repo == "absent",
            handoff_version: i.handoff_version.clone(),
            receiver_cli: i.receiver.clone(),
            branch_head: i.branch_head.clone(),
            task_id: None,
            handoff_id: None,
            log: Some(
                self.ssh
                    .interactive(&format!("handoff log --cwd {}", shell_word(&i.path))),
            ),
        }
    }
}

/// How long one inspection or preparation step over ssh may take.
const REMOTE_STEP: Duration = Duration::from_secs(120);

/// Inspects the other machine and refuses what can't work there, changing nothing.
pub(super) async fn inspect(
    ctx: &ContinueContext<'_>,
    plan: &Plan,
    dest: &Destination,
    args: &ContinueRequest,
) -> Result<RemotePlan, Rejection> {
    let engine = ctx.engine;
    let Some(git_remote) = &plan.git_remote else {
        return Err(Rejection::new(
            "--on",
            format!(
                "--on: branch '{}' has no git remote both machines can reach (add one with git remote add)",
                plan.branch
            ),
        ));
    };
    let Some(url) = git_remote.url.clone() else {
        return Err(Rejection::new(
            "--on",
            format!("--on: the remote '{}' has no URL", git_remote.name),
        ));
    };
    let exe = engine
        .provider(&plan.target.provider)
        .map(|p| p.spec().executable)
        .unwrap_or("?");
    ssh::check_url(&url).map_err(|e| Rejection::new("--on", format!("--on: {e}")))?;
    let ssh =
        Ssh::new(&dest.host, &ctx.env).map_err(|e| Rejection::new("--on", format!("--on: {e}")))?;
    let name = plan.root.file_name().unwrap_or("repo");
    let first = plan
        .git
        .text(&["rev-list", "--max-parents=0", "HEAD"])
        .rejected("repository")?;
    let first = first.lines().next().unwrap_or_default().to_owned();
    let script = ssh::inspect_script(
        dest,
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
        .map_err(|e| Rejection::new("--on", format!("--on: {e}")))?;
    let i = ssh::read_inspection(&out);
    let host = &dest.host;
    if i.handoff.is_none() {
        return Err(Rejection::new(
            "--on",
            format!("--on: handoff is not installed on {host} (not found on its PATH)"),
        ));
    }
    let ours = format!("handoff {}", env!("CARGO_PKG_VERSION"));
    if i.handoff_version.as_deref() != Some(ours.as_str()) {
        return Err(Rejection::new(
            "--on",
            format!(
                "--on: {host} runs {}, this machine {ours}: install the same version there",
                i.handoff_version
                    .as_deref()
                    .unwrap_or("a handoff without a version")
            ),
        ));
    }
    if i.no_setsid {
        return Err(Rejection::new(
            "--on",
            format!(
                "--on: {host} has no setsid (util-linux), which keeps the receiver running after the connection closes"
            ),
        ));
    }
    if i.receiver.is_none() {
        return Err(Rejection::new(
            "--on",
            format!(
                "--on: {exe} ({}) is not installed on {host} (not found on its PATH)",
                plan.target.provider
            ),
        ));
    }
    match i.repo.as_str() {
        "not-a-repo" => {
            return Err(Rejection::new(
                "--on",
                format!(
                    "--on: '{}' on {host} exists and is not a git repository",
                    i.path
                ),
            ));
        }
        "present" if i.foreign => {
            return Err(Rejection::new(
                "--on",
                format!(
                    "--on: '{}' on {host} is another project's repository (it lacks this one's first commit {})",
                    i.path,
                    ssh::short(&first)
                ),
            ));
        }
        "present" if i.dirty => {
            return Err(Rejection::new(
                "--on",
                format!(
                    "--on: '{}' on {host} has uncommitted changes; commit or stash them there first",
                    i.path
                ),
            ));
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
            return Err(Rejection::new(
                "--on",
                format!(
                    "--on: branch '{}' in '{}' on {host} is at {}, which is not in this branch's history: merge or drop those commits there first",
                    plan.branch,
                    i.path,
                    ssh::short(there)
                ),
            ));
        }
    }
    if let Some(e) = &i.ls_remote_error {
        return Err(Rejection::new(
            "--on",
            format!(
                "--on: {host} cannot reach the git remote '{}' ({url}): {e}",
                git_remote.name
            ),
        ));
    }
    let needs_push =
        !plan.prepared.committed.is_empty() || i.branch_head.as_deref() != Some(plan.head.as_str());
    if needs_push && !args.push {
        let where_ = match &i.branch_head {
            None => format!("branch '{}' is not on '{}'", plan.branch, git_remote.name),
            Some(h) if !plan.prepared.committed.is_empty() => format!(
                "the checkpoint will be a new commit on '{}' (now at {})",
                plan.branch,
                ssh::short(h)
            ),
            Some(h) => format!(
                "'{}' on '{}' is at {}, not at HEAD {}",
                plan.branch,
                git_remote.name,
                ssh::short(h),
                ssh::short(&plan.head)
            ),
        };
        return Err(Rejection::new(
            "--on",
            format!("--on: {where_}: pass --push so that {host} can fetch it"),
        ));
    }
    Ok(RemotePlan {
        ssh,
        destination: dest.host.clone(),
        inspection: i,
        url,
    })
}

/// Puts the repository on the other machine at the checkpoint, sends it the note and the
/// source session, starts its `handoff continue` detached, waits for its result and records
/// everything in the local timeline.
#[allow(clippy::too_many_arguments)]
pub(super) async fn finish(
    args: &ContinueRequest,
    ctx: &ContinueContext<'_>,
    rp: &RemotePlan,
    moved: &Moved,
    written: &Written,
    conv: &Conversation,
    known: &[String],
    result: &mut ContinueResult,
    mut cancel: watch::Receiver<bool>,
) -> Result<u8, ContinueError> {
    let local = Local {
        store: ctx.store,
        task: &moved.work_task,
        commit: &moved.commit,
        branch: &moved.work_branch,
        note_path: &written.path,
        note_text: &moved.note_text,
        digest: &written.digest,
        source: conv.source.as_ref(),
        from: &moved.from,
        target: &moved.target,
        route: moved.route,
        message: moved.message.clone(),
        known,
    };
    let local = &local;
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
        .map_err(|e| Failed::new(Phase::Record, format!("the task store failed: {e}")))?;
    result.handoff_id = Some(row.id.clone());
    let on = format!(" on {}", rp.destination);
    let fail = |reason: String, result: &mut ContinueResult| -> ContinueError {
        receiver_not_started(
            local.store,
            &row.id,
            local.message.as_ref(),
            result,
            &on,
            reason,
        )
        .into()
    };

    // The repository there, at the checkpoint.
    let id = uuid::Uuid::new_v4().simple().to_string();
    let prepared = match ssh
        .step(
            "preparing the repository",
            &ssh::prepare_script(&path, &rp.url, local.branch, local.commit),
            b"",
            // A clone can take long.
            args.timeout.max(REMOTE_STEP),
        )
        .await
    {
        Ok(out) => out,
        Err(e) => {
            // A clone that failed half-way is removed; an existing repository was only fetched.
            if rp.inspection.repo == "absent" {
                let _ = ssh
                    .run(
                        &ssh::undo_script(&path, local.branch, true, &ssh::Before::default()),
                        b"",
                        REMOTE_STEP,
                    )
                    .await;
            }
            return Err(fail(e, result));
        }
    };
    let cloned = prepared.value("cloned").is_some();
    let before = ssh::Before {
        previous: prepared.value("previous").filter(|s| !s.is_empty()),
        branch_was: prepared.value("branchWas").filter(|s| !s.is_empty()),
    };
    let undo = |ssh: &Ssh| {
        let script = format!(
            "{}\nrm -rf \"{}\"",
            ssh::undo_script(&path, local.branch, cloned, &before),
            ssh::incoming_dir(&id)
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
            &ssh::upload_script(&id, "note.md"),
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
    // The message, as a file: never on a command line here or there.
    let mut message_file = None;
    if let Some(message) = &local.message {
        match ssh
            .step(
                "sending the message",
                &ssh::upload_script(&id, "message.txt"),
                redact(message, local.known).0.as_bytes(),
                REMOTE_STEP,
            )
            .await
        {
            Ok(out) => message_file = out.value("file"),
            Err(e) => {
                undo(ssh).await;
                return Err(fail(e, result));
            }
        }
    }
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
        // Masked here, with every secret this machine knows, before it leaves.
        let masked = redact(&String::from_utf8_lossy(&bytes), local.known).0;
        match ssh
            .step(
                "sending the session",
                &ssh::upload_script(&id, name),
                masked.as_bytes(),
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
        args.ready_timeout.as_secs().to_string(),
        "--timeout".into(),
        args.timeout.as_secs().to_string(),
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
    opt("--message-file", message_file.as_ref());
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
            &ssh::start_script(&id, &path, &remote_args),
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
        std::time::Instant::now() + args.timeout + args.ready_timeout + Duration::from_secs(120);
    let poll = ssh::poll_script(&id);
    let outcome = loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = cancel.changed() => {}
        }
        if *cancel.borrow() {
            let _ = ssh.run(&ssh::stop_script(&id), b"", REMOTE_STEP).await;
            let _ = local.store.finish_handoff(
                &row.id,
                &HandoffOutcome::NotStarted {
                    reason: "cancelled by a signal".into(),
                },
            );
            return Err(ContinueError::Cancelled(format!(
                "cancelled by a signal; handoff continue on {} was stopped",
                rp.destination
            )));
        }
        match ssh.run(&poll, b"", REMOTE_STEP).await {
            Ok(out) if out.code == 0 && out.value("running").as_deref() == Some("0") => break out,
            Ok(_) | Err(_) if std::time::Instant::now() < deadline => {}
            Ok(out) => {
                let _ = ssh.run(&ssh::stop_script(&id), b"", REMOTE_STEP).await;
                return Err(fail(
                    format!(
                        "no result from handoff continue there in time; it was stopped: {}",
                        out.stderr_tail()
                    ),
                    result,
                ));
            }
            Err(e) => {
                let _ = ssh.run(&ssh::stop_script(&id), b"", REMOTE_STEP).await;
                return Err(fail(e, result));
            }
        }
    };
    // Undone only while the repository there is exactly the checkpoint: a run that got further
    // may have work in it.
    let untouched = ssh
        .run(
            &ssh::untouched_script(&path, local.commit),
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
            &format!("rm -rf \"{}\"", ssh::incoming_dir(&id)),
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

/// What the local side of a remote handoff records.
struct Local<'a> {
    store: &'a dyn handoff_core::TaskStore,
    task: &'a handoff_core::Task,
    commit: &'a str,
    branch: &'a str,
    note_path: &'a camino::Utf8Path,
    note_text: &'a str,
    digest: &'a str,
    source: Option<&'a carry::Source>,
    from: &'a TaskAgent,
    target: &'a handoff_core::ContinueTarget,
    route: handoff_core::Route,
    message: Option<String>,
    known: &'a [String],
}
