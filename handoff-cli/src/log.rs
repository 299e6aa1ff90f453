//! `handoff log`: a task's timeline, one line per entry, or the task and its timeline as JSON.
//!
//! Exit codes: 0 printed; 5 when there is no such task, the worktree has none yet, or the store
//! cannot be opened. Every failure is one line on stderr.

use std::io::Write;

use clap::Args;
use handoff_core::{
    AgentRef, HandoffRow, TaskId, TaskStore, TimelineEntry, TimelineEvent, check_cwd, exit,
};

const AFTER_HELP: &str = "\
Exit codes:
  0   printed
  5   no such task, no task for the worktree yet, or the task store cannot be used";

/// Arguments of `handoff log`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct LogArgs {
    /// Absolute path of a directory in the worktree whose task to show.
    #[arg(long, value_name = "DIR", required_unless_present = "task")]
    pub cwd: Option<String>,
    /// The task to show (`task-<uuid>`) instead of the worktree's.
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Print `{"task": …, "timeline": […]}` as one JSON line on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `handoff log`; returns the exit code.
pub fn main(args: LogArgs) -> u8 {
    match log(&args) {
        Ok(()) => exit::OK,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "handoff: {message}");
            exit::USAGE
        }
    }
}

fn log(args: &LogArgs) -> Result<(), String> {
    let id = match &args.task {
        Some(t) => Some(TaskId::parse(t).ok_or_else(|| format!("--task: invalid task id '{t}'"))?),
        None => None,
    };
    let worktree = match (&id, &args.cwd) {
        (None, Some(cwd)) => {
            let cwd = check_cwd(cwd)?;
            Some(
                handoff_git::repo_state(&cwd)
                    .map_err(|e| e.to_string())?
                    .repository,
            )
        }
        _ => None,
    };
    let store = crate::open_store()?;
    let task = match (id, worktree) {
        (Some(id), _) => store.task(&id).map_err(|e| e.to_string())?,
        (None, Some(worktree)) => store
            .task_for_worktree(&worktree)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no task recorded for this worktree yet".to_owned())?,
        (None, None) => return Err("pass --cwd or --task".to_owned()),
    };
    let timeline = store.timeline(&task.id).map_err(|e| e.to_string())?;

    let mut out = std::io::stdout().lock();
    if args.json {
        let line = serde_json::json!({ "task": task, "timeline": timeline });
        let _ = writeln!(out, "{line}");
    } else {
        let _ = writeln!(
            out,
            "task {} on {} in {} (now {})",
            task.id,
            task.branch.as_deref().unwrap_or("(detached)"),
            task.worktree,
            agent(&AgentRef {
                provider: task.agent.provider.clone(),
                model: task.agent.model.clone(),
            }),
        );
        for entry in &timeline {
            let _ = writeln!(out, "{}", line(entry));
        }
    }
    let _ = out.flush();
    Ok(())
}

fn agent(a: &AgentRef) -> String {
    match &a.model {
        Some(model) => format!("{}/{model}", a.provider),
        None => a.provider.to_string(),
    }
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// One human line for a timeline entry: `seq at kind …`.
fn line(entry: &TimelineEntry) -> String {
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
            "delegated-run {} {} on {}: {} (exit {})",
            r.run_id,
            r.operation.as_str(),
            r.target,
            r.status.as_str(),
            r.exit_code
        ),
        TimelineEvent::Forked(f) => format!("forked from {}", f.from),
    };
    format!("{} {} {what}", entry.seq, entry.at)
}

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
    for turn in handoff_continue::carry::carried_turns(h) {
        out.push_str("\n    ");
        out.push_str(&turn);
    }
    out
}
