//! `handoff checkpoint`: the arguments, and the checkpoint printed.

use std::io::Write;

use clap::Args;
use handoff_continue::{CheckpointError, CheckpointRequest, DEFAULT_MESSAGE};
use handoff_core::{exit, printable};

const AFTER_HELP: &str = "\
Exit codes:
  0   committed and recorded
  1   git (a hook, the commit) or the task store failed while committing or recording
  5   refused before anything changed";

/// Exit code when git or the store fails after validation.
const FAILED: u8 = 1;

/// Arguments of `handoff checkpoint`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct CheckpointArgs {
    /// The files to commit (relative to --cwd, or absolute), inside the worktree. Each must
    /// exist or be a tracked deletion.
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,
    /// Commit every change to tracked files instead of naming them.
    #[arg(long, conflicts_with = "paths")]
    pub tracked: bool,
    /// The commit message.
    #[arg(long, short = 'm', value_name = "MESSAGE", default_value = DEFAULT_MESSAGE)]
    pub message: String,
    /// Absolute path of a directory in the worktree; HEAD must be on a branch with a commit.
    #[arg(long, value_name = "DIR")]
    pub cwd: String,
    /// The agent whose work this is (required for a worktree's first checkpoint).
    #[arg(long, value_name = "PROVIDER")]
    pub agent: Option<String>,
    /// The model that agent ran.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Run the commit's hooks even though hooks or a hook manager's configuration changed
    /// since the task's first event (by default such a commit runs none). Review them first.
    #[arg(long)]
    pub run_hooks: bool,
    /// Print the result as one JSON line (`handoff.checkpoint.v1`) on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `handoff checkpoint`; returns the exit code.
pub fn main(args: CheckpointArgs) -> u8 {
    let store = crate::task_store();
    let request = CheckpointRequest {
        cwd: args.cwd,
        paths: args.paths,
        tracked: args.tracked,
        message: args.message,
        agent: args.agent,
        model: args.model,
        run_hooks: args.run_hooks,
        secrets: crate::known_secrets(),
    };
    let mut show = |status: &[u8]| {
        let _ = std::io::stderr().write_all(status);
    };
    let show: Option<handoff_continue::checkpoint::StatusSink<'_>> =
        if args.json { None } else { Some(&mut show) };
    let registry = handoff_adapters::default_registry();
    let report = match handoff_continue::checkpoint(&request, &store, &registry, show) {
        Ok(r) => r,
        Err(CheckpointError::Rejected(r)) => return fail(&r.reason, exit::USAGE),
        Err(CheckpointError::Failed(f)) => return fail(&f.message, FAILED),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(out, "{}", report.json());
    } else {
        let head = &report.commit;
        let short = head.get(..12).unwrap_or(head);
        let _ = writeln!(
            out,
            "checkpoint {short} on {} by {}: {} committed, {} left uncommitted (task {})",
            report.branch,
            report.author.provider,
            report.committed.len(),
            report.uncommitted.len(),
            report.task_id
        );
        for path in &report.uncommitted {
            let _ = writeln!(out, "  uncommitted: {}", printable(path, false));
        }
        if !report.hooks_skipped.is_empty() {
            let _ = writeln!(
                out,
                "  hooks not run: changed since the task began: {} (review them; --run-hooks runs them)",
                printable(&report.hooks_skipped.join(", "), false)
            );
        }
    }
    let _ = out.flush();
    exit::OK
}

fn fail(message: &str, code: u8) -> u8 {
    let _ = writeln!(std::io::stderr(), "handoff: {}", printable(message, true));
    code
}
