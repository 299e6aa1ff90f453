//! `handoff attribute`: the arguments, the report printed, and the checks shown as they run.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use handoff_continue::attribute::{AttributeError, CheckResult};
use handoff_continue::{AttributeRequest, attribute};
use handoff_core::exit;

const AFTER_HELP: &str = "\
Exit codes:
  0   attributed; with --verify, every check passed
  1   git or the task store failed
  2   with --verify: a check failed (or was killed)
  5   refused, nothing changed: no task, its worktree is gone, the task store cannot be used,
      or (--verify) no note or no commands to run
  9   with --verify: cancelled by SIGINT/SIGTERM while a check ran (it is not recorded)";

/// Exit code when git or the store fails.
const FAILED: u8 = 1;

/// Arguments of `handoff attribute`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct AttributeArgs {
    /// The task to attribute (`task-<uuid>`); by default, the task of the worktree of --cwd.
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Absolute path of a directory in the worktree whose task to attribute (default: the
    /// current directory). Not used with --task.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Also run the commands under "How to verify" in the latest handoff note, in the worktree
    /// (`sh -c`, 10 minutes each), and record each as a check on HEAD in the timeline.
    #[arg(long)]
    pub verify: bool,
    /// Print the report as one JSON object (`handoff.attribution.v1`) on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `handoff attribute`; returns the exit code.
pub async fn main(args: AttributeArgs) -> u8 {
    let request = AttributeRequest {
        task: args.task,
        cwd: args.cwd,
        verify: args.verify,
        secrets: crate::known_secrets(),
    };
    let store = crate::task_store();
    let attribution = match attribute(&request, &store) {
        Ok(a) => a,
        Err(AttributeError::Rejected(r)) => return fail(&r.reason, exit::USAGE),
        Err(AttributeError::Failed(f)) => return fail(&f.message, FAILED),
    };
    if !args.json {
        print(&attribution.human());
    }
    if !attribution.verifies() {
        if args.json {
            print(&format!("{}\n", attribution.json(None)));
        }
        return exit::OK;
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let json = args.json;
    let mut show = |check: &CheckResult| {
        if !json {
            print(&format!("{}\n", check.line()));
            let mut err = std::io::stderr().lock();
            for line in &check.output_tail {
                let _ = writeln!(err, "  | {}", handoff_core::printable(line, false));
            }
        }
    };
    let checks = attribution
        .verify(&env, crate::cancel_on_signals(), &mut show)
        .await;
    if json {
        print(&format!("{}\n", attribution.json(Some(&checks))));
    }
    if let Some(message) = checks.store_error {
        return fail(&message, FAILED);
    }
    if checks.cancelled {
        return fail(
            "cancelled while a check ran; it was not recorded",
            exit::CANCELLED,
        );
    }
    if checks.all_passed() {
        exit::OK
    } else {
        exit::PROVIDER_FAILED
    }
}

/// Prints `text` with the control characters an agent may have put in a file name or a check's
/// output escaped (a file named with an OSC 52 or a screen clear must not reach the terminal
/// as one); JSON output escapes them by itself.
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(handoff_core::printable(text, true).as_bytes());
    let _ = out.flush();
}

fn fail(message: &str, code: u8) -> u8 {
    let _ = writeln!(
        std::io::stderr(),
        "handoff: {}",
        handoff_core::printable(message, false)
    );
    code
}
