//! Claude Code's commands for background jobs: their status, a result, a cancel.

use super::commands::Command;
use super::prose::FIND_BINARY;
use super::yaml::quoted;

/// `jobs`, `job-result` and `job-cancel`.
pub(super) fn job_commands() -> Vec<Command> {
    let front = |description: &str, hint: Option<&str>| {
        let mut f = format!("---\ndescription: {}\n", quoted(description));
        if let Some(h) = hint {
            f.push_str(&format!("argument-hint: {}\n", quoted(h)));
        }
        f.push_str("allowed-tools: [\"Bash\"]\n");
        if description.starts_with("Stop") {
            // Stopping work is the person's call.
            f.push_str("disable-model-invocation: true\n");
        }
        f.push_str("---\n\n");
        f
    };
    vec![
        Command {
            name: "jobs".into(),
            text: front(
                "List handoff's background jobs and how each one stands",
                None,
            ) + "# handoff's background jobs\n\n"
                + "Runs started with `--detach` (and the MCP server's jobs while they run) are \
kept by handoff: each has an id (`job-…`), a state (`running`, `finished` with its exit code, or \
`lost` when its supervisor died without recording an end) and, once finished, its result.\n\n"
                + FIND_BINARY
                + "\n## 2. List them\n\n```sh\n'<handoff>' jobs\n```\n\nShow the person the \
list as it is, running jobs first. For one job's outcome, `'<handoff>' result <job-id>`; to block \
until it ends, `'<handoff>' wait <job-id>` (it exits with the job's exit code). Never start, stop \
or change a job from here.\n",
        },
        Command {
            name: "job-result".into(),
            text: front(
                "Show the result of one of handoff's background jobs",
                Some("job id (job-…)"),
            ) + "# The result of a background job\n\nThe job: $ARGUMENTS\n\nIf no job id was \
given, run `'<handoff>' jobs` (below) and ask which one.\n\n"
                + FIND_BINARY
                + "\n## 2. Read its result\n\n```sh\n'<handoff>' result '<job-id>'\n```\n\n\
- Exit 4: it is still running; say so (and that `'<handoff>' wait <job-id>` blocks until it ends).\n\
- A `lost` job (exit 2, \"was lost\"): its supervisor died; its outcome cannot be known. Say so.\n\
- Otherwise the JSON on stdout is the run's own result and the exit code is the run's: only exit \
0 with `\"status\": \"succeeded\"` is success. Report the status, `output.response`, findings, \
`git.changedFiles`, and on failure `diagnostics.message` (quoted) and `diagnostics.cause`.\n",
        },
        Command {
            name: "job-cancel".into(),
            text: front(
                "Stop one of handoff's background jobs",
                Some("job id (job-…)"),
            ) + "# Stop a background job\n\nThe job: $ARGUMENTS\n\nIf no job id was given, run \
`'<handoff>' jobs` (below) and ask which one; never guess.\n\n"
                + FIND_BINARY
                + "\n## 2. Stop it\n\n```sh\n'<handoff>' cancel '<job-id>'\n```\n\nhandoff \
stops it as Ctrl-C stops a run: the agent is stopped and the job records exit 9 (`cancelled`). \
`'<handoff>' wait <job-id>` returns once it has. A build's partial changes stay in the worktree: \
tell the person to look at `git status` before going on.\n",
        },
    ]
}
