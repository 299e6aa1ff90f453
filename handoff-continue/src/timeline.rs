//! A task's timeline: finding the task, and its entries as lines for a person.

use handoff_core::{
    AgentRef, HandoffRow, SharedTaskStore, Task, TaskId, TimelineEntry, TimelineEvent, check_cwd,
};

use crate::error::{OrReject, Rejection};

/// The task `task` names (`task-<uuid>`), else the task of the worktree of `cwd`, and its
/// timeline, from `store` (opened once the request is checked).
pub fn load(
    store: &SharedTaskStore,
    task: Option<&str>,
    cwd: Option<&str>,
) -> Result<(Task, Vec<TimelineEntry>), Rejection> {
    let id =
        match task {
            Some(t) => Some(TaskId::parse(t).ok_or_else(|| {
                Rejection::new("--task", format!("--task: invalid task id '{t}'"))
            })?),
            None => None,
        };
    let worktree = match (&id, cwd) {
        (None, Some(cwd)) => {
            let cwd = check_cwd(cwd).rejected("--cwd")?;
            Some(
                handoff_git::repo_state(&cwd)
                    .rejected("repository")?
                    .repository,
            )
        }
        _ => None,
    };
    let store = store.open().rejected("task store")?;
    let task = match (id, worktree) {
        (Some(id), _) => store.task(&id).rejected("--task")?,
        (None, Some(worktree)) => store
            .task_for_worktree(&worktree)
            .rejected("task store")?
            .ok_or_else(|| Rejection::new("--cwd", "no task recorded for this worktree yet"))?,
        (None, None) => return Err(Rejection::new("--task", "pass --cwd or --task")),
    };
    let timeline = store.timeline(&task.id).rejected("task store")?;
    Ok((task, timeline))
}

/// The task and its timeline for a person: a heading line, then one line per entry.
pub fn render(task: &Task, timeline: &[TimelineEntry]) -> String {
    let mut out = format!(
        "task {} on {} in {} (now {})\n",
        task.id,
        task.branch.as_deref().unwrap_or("(detached)"),
        task.worktree,
        agent(&AgentRef {
            provider: task.agent.provider.clone(),
            model: task.agent.model.clone(),
        }),
    );
    for entry in timeline {
        out.push_str(&line(entry));
        out.push('\n');
    }
    out
}

/// An agent as `provider/model`, or `provider`.
pub fn agent(a: &AgentRef) -> String {
    match &a.model {
        Some(model) => format!("{}/{model}", a.provider),
        None => a.provider.to_string(),
    }
}

/// The first twelve characters of a commit id.
pub fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// One human line (or a few, for a handoff with carried turns) for a timeline entry:
/// `seq at kind …`.
pub fn line(entry: &TimelineEntry) -> String {
    let what = match &entry.event {
        TimelineEvent::Turn(t) => format!("turn by {}: {}", agent(&t.author), t.summary),
        TimelineEvent::Handoff(h) => handoff(h),
        TimelineEvent::Checkpoint(c) => format!(
            "checkpoint {} by {} ({} files)",
            short(&c.commit),
            c.author.provider,
            c.committed.len()
        ),
        TimelineEvent::Check(c) => format!(
            "check `{}` on {}: exit {}",
            c.command,
            short(&c.commit),
            c.exit_code
                .map_or_else(|| "signal".to_owned(), |c| c.to_string())
        ),
        TimelineEvent::DelegatedRun(r) => format!(
            "delegated-run {} {} on {}{}: {} (exit {})",
            r.run_id,
            r.operation.as_str(),
            r.target,
            r.host
                .as_deref()
                .map_or_else(String::new, |h| format!(" at {h}")),
            r.status.as_str(),
            r.exit_code
        ),
        TimelineEvent::Forked(f) => format!("forked from {}", f.from),
    };
    format!("{} {} {what}", entry.seq, entry.at)
}

/// A handoff row: who to whom, the route, the outcome, what was transferred, continuity and
/// the carried turns.
fn handoff(h: &HandoffRow) -> String {
    let mut transferred = Vec::new();
    if h.context.note_path.is_some() || h.context.note_digest.is_some() {
        transferred.push("note".to_owned());
    }
    if let Some(n) = h.context.transcript_messages {
        transferred.push(format!("transcript ({n} messages)"));
    }
    if h.context.message.is_some() {
        transferred.push("message".to_owned());
    }
    let transferred = if transferred.is_empty() {
        "nothing".to_owned()
    } else {
        transferred.join("/")
    };
    let outcome = match h.outcome.reason() {
        Some(reason) => format!("{} ({reason})", h.outcome.as_str()),
        None => h.outcome.as_str().to_owned(),
    };
    let details = h.context.details.as_ref();
    let continuity = details
        .and_then(|d| d.get("continuity"))
        .and_then(|c| {
            let result = c.get("result")?.as_str()?;
            let probe = c
                .get("probe")
                .and_then(|p| p.get("comparison")?.get("matched")?.as_bool())
                .map(|m| {
                    if m {
                        ", probe matched"
                    } else {
                        ", probe did not match"
                    }
                })
                .unwrap_or("");
            let original = match c
                .get("checks")
                .and_then(|k| k.get("originalAppended"))
                .and_then(serde_json::Value::as_bool)
            {
                Some(false) => ", source changed",
                _ => "",
            };
            Some(format!(", continuity: {result}{probe}{original}"))
        })
        .unwrap_or_default();
    let mut out = format!(
        "handoff {} → {}, {}, {outcome}, transferred: {transferred}{continuity}",
        agent(&h.source),
        agent(&h.target),
        h.route.as_str()
    );
    for turn in crate::carry::carried_turns(h) {
        out.push_str("\n    ");
        out.push_str(&turn);
    }
    out
}
