//! `handoff log`: a task's timeline, one line per entry, or the task and its timeline as JSON.

use std::io::Write;

use clap::Args;
use handoff_core::exit;

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
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            exit::OK
        }
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "handoff: {message}");
            exit::USAGE
        }
    }
}

fn log(args: &LogArgs) -> Result<String, String> {
    let (task, timeline) = handoff_continue::timeline::load(
        &crate::task_store(),
        args.task.as_deref(),
        args.cwd.as_deref(),
    )
    .map_err(|r| r.reason)?;
    Ok(if args.json {
        format!(
            "{}\n",
            serde_json::json!({ "task": task, "timeline": timeline })
        )
    } else {
        // Summaries and messages an agent wrote must not steer the terminal.
        handoff_core::printable(&handoff_continue::timeline::render(&task, &timeline), true)
            .into_owned()
    })
}
