//! Attribution: which provider changed what while it held a task, read from the task's
//! timeline and git.
//!
//! The timeline is cut into *segments*, one per provider that held the task, in order. Segment 0
//! belongs to the first owner (the source of the first started handoff, else the task's agent)
//! and runs from the base (the parent of the first checkpoint's commit, or that commit itself
//! when it is a root commit) to the checkpoint of the first started handoff. Segment `i` belongs
//! to the target of started handoff `i` and runs from that handoff's checkpoint
//! (`context.details.checkpoint`, else the last checkpoint recorded before it) to the next
//! started handoff's checkpoint; the last segment runs to the worktree as it is now, committed,
//! uncommitted and untracked (not ignored) files included. Only started handoffs move the task:
//! same-thread ones always, a new-thread one only in the task it created and that task's own
//! forks (the task its `details.task` names, else the first new-thread handoff after a fork
//! marker, where `handoff continue` records it).
//!
//! Each changed file is flagged when it deserves a second look: `configuration` (agent, CI and
//! MCP configuration), `lockfile`, `permissions` (a mode change or a new executable),
//! `generated` (a build output path or a header saying so) and `outside-scope` (not under any
//! path the segment's handoff note names; only when the note names some).
//!
//! The worktree is diffed through a private index, so the user's index is never touched.
//!
//! With `verify`, the commands of the latest started handoff's note ("How to verify": lines of
//! fenced shell code blocks, or list items that start with a backticked command) run one by one
//! with `sh -c` in the worktree, and each is recorded as a check on HEAD in the timeline.
//!
//! [`Attribution::json`] is one object:
//!
//! ```text
//! { "schemaVersion": "handoff.attribution.v1",
//!   "taskId", "parent": id|null, "worktree", "branch": str|null,
//!   "owner": { "provider", "model": str|null },
//!   "base": { "commit", "rule": "parent-of-first-checkpoint" | "root-checkpoint",
//!             "firstCheckpoint" },
//!   "segments": [ { "index", "provider", "model", "handoffId": id|null,
//!                   "from": sha, "to": sha|null (null: the worktree now),
//!                   "scope": { "known": bool, "note": path|null, "paths": [str],
//!                              "reason": str|null },
//!                   "files": [ { "path", "oldPath": str|null,
//!                                "status": "added" | "modified" | "deleted" | "renamed" |
//!                                          "copied" | "type-changed" | "unmerged" | "unknown",
//!                                "added": n|null, "removed": n|null (null: binary),
//!                                "binary": bool, "oldMode": str|null, "newMode": str|null,
//!                                "flags": [ "configuration" | "lockfile" | "permissions" |
//!                                           "generated" | "outside-scope" ] } ],
//!                   "totals": { "files", "added", "removed", "binary" } } ],
//!   "providers": [ { "provider", "segments": [n], "files" (distinct paths), "added",
//!                    "removed", "binary", "flags": { flag: n } } ],
//!   "checks": null | [ { "command", "exitCode": n|null, "signal": str|null,
//!                        "ending": "exited" | "timed-out" | "output-limit" | "spawn-failed",
//!                        "passed": bool, "commit", "durationMs" } ] }
//! ```
//!
//! Exit codes: 0 attributed (and with `--verify`, every check passed); 2 a check failed; 5 refused
//! (no task, a gone worktree, an unusable store, no note or no commands to verify), nothing
//! changed; 1 git or the store failed; 9 cancelled while a check ran.

mod plan;
mod report;
mod scope;
mod segment;
#[cfg(test)]
mod tests;
mod verify;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentRef, AnswerSource, CheckRun, Ending, HandoffOutcome, HandoffRow, Invocation, Markdown,
    MarkdownKind, Record, Route, Section, SharedTaskStore, StdinSource, Task, TaskId, TaskStore,
    TimelineEntry, TimelineEvent, check_cwd, parse_note, read_note, supervise,
};
use handoff_git::Git;
use serde_json::{Value, json};
use tokio::sync::watch;

use plan::*;
use report::*;
use scope::*;
use segment::*;
use verify::*;
pub use verify::{CheckResult, Checks};

use crate::error::{Failed, OrReject, Phase, Rejection};

/// The JSON report's schema version.
pub const ATTRIBUTION_SCHEMA: &str = "handoff.attribution.v1";

/// How long one verification command may run.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// How many lines of a failed check's output are kept.
const OUTPUT_TAIL_LINES: usize = 20;

/// Which task to attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttributeRequest {
    /// The task (`task-<uuid>`); by default, the task of the worktree of `cwd`.
    pub task: Option<String>,
    /// Absolute path of a directory in the worktree whose task to attribute (default: the
    /// current directory). Not used with `task`.
    pub cwd: Option<String>,
    /// Also prepare the commands under "How to verify" in the latest handoff note, to be run
    /// with [`Attribution::verify`].
    pub verify: bool,
    /// The secrets to mask in what the report and the checks show (file names included): the
    /// configuration's and the environment's ([`handoff_core::known_secrets`]).
    pub secrets: Vec<String>,
}

/// Why attribution stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeError {
    /// Refused, nothing changed (exit 5): no task, a gone worktree, an unusable store, no note
    /// or no commands to verify.
    #[error("{0}")]
    Rejected(Rejection),
    /// Git or the store failed (exit 1).
    #[error("{0}")]
    Failed(Failed),
}

impl From<Rejection> for AttributeError {
    fn from(r: Rejection) -> Self {
        AttributeError::Rejected(r)
    }
}

/// A task's changes attributed to the providers that held it.
pub struct Attribution {
    store: std::sync::Arc<dyn TaskStore>,
    task: Task,
    base: Base,
    segments: Vec<Segment>,
    git: Git,
    /// With `verify`: the commands, and HEAD when they were planned.
    checks: Option<(Vec<String>, String)>,
    /// What everything shown goes through.
    masker: handoff_core::Masker,
}

/// Attributes the task `request` names, read from `store` (opened once the request is checked).
/// With `verify`, everything the checks need is checked too, before anything runs.
pub fn attribute(
    request: &AttributeRequest,
    store: &SharedTaskStore,
) -> Result<Attribution, AttributeError> {
    let masker = handoff_core::Masker::try_new(&request.secrets)
        .map_err(|e| Rejection::new("masking", e.to_string()))?;
    attribute_with(request, store, masker.clone()).map_err(|e| match e {
        AttributeError::Rejected(mut r) => {
            r.reason = masker.mask(&r.reason).text.into_owned();
            AttributeError::Rejected(r)
        }
        AttributeError::Failed(mut f) => {
            f.message = masker.mask(&f.message).text.into_owned();
            AttributeError::Failed(f)
        }
    })
}

fn attribute_with(
    request: &AttributeRequest,
    store: &SharedTaskStore,
    masker: handoff_core::Masker,
) -> Result<Attribution, AttributeError> {
    let id =
        match &request.task {
            Some(t) => Some(TaskId::parse(t).ok_or_else(|| {
                Rejection::new("--task", format!("--task: invalid task id '{t}'"))
            })?),
            None => None,
        };
    let cwd_worktree = match &id {
        Some(_) => None,
        None => {
            let cwd = match &request.cwd {
                Some(cwd) => check_cwd(cwd).rejected("--cwd")?,
                None => current_dir().rejected("--cwd")?,
            };
            Some(
                handoff_git::repo_state(&cwd)
                    .rejected("repository")?
                    .repository,
            )
        }
    };
    let store = store.open().rejected("task store")?;
    let task = match (&id, &cwd_worktree) {
        (Some(id), _) => store.task(id).rejected("--task")?,
        (None, Some(worktree)) => store
            .task_for_worktree(worktree)
            .rejected("task store")?
            .ok_or_else(|| {
                Rejection::new(
                    "--cwd",
                    format!("no task recorded for the worktree '{worktree}' yet"),
                )
            })?,
        (None, None) => return Err(Rejection::new("--task", "pass --task or --cwd").into()),
    };
    if !task.worktree.is_dir() {
        return Err(Rejection::new(
            "worktree",
            format!(
                "the worktree of task {} is gone: '{}' is not a directory",
                task.id, task.worktree
            ),
        )
        .into());
    }
    let state = handoff_git::repo_state(&task.worktree)
        .map_err(|e| {
            format!(
                "the worktree of task {} ('{}') is not usable: {e}",
                task.id, task.worktree
            )
        })
        .rejected("worktree")?;
    let git = Git::new(state.repository.clone());
    let timeline = store.timeline(&task.id).rejected("task store")?;
    let lineage = lineage(store.as_ref(), &task).rejected("task store")?;
    let plan = plan(&task, &lineage, &timeline, &git).rejected("timeline")?;

    // Everything verification needs is checked before anything runs.
    let checks = if request.verify {
        let head = git.commit_id("HEAD").ok_or_else(|| {
            Rejection::new(
                "--verify",
                format!("HEAD has no commit in '{}': nothing to verify", git.root()),
            )
        })?;
        let commands = verify_commands(&plan).rejected("--verify")?;
        // Every check is recorded: refuse now rather than run commands that cannot be.
        store.check_writable().rejected("task store")?;
        Some((commands, head))
    } else {
        None
    };

    let notes: Vec<Utf8PathBuf> = plan
        .transfers
        .iter()
        .filter_map(|t| t.row.context.note_path.clone())
        .collect();
    let mut segments = Vec::new();
    for (index, span) in plan.spans.iter().enumerate() {
        segments.push(
            segment(&git, index, span, &notes)
                .map_err(|e| AttributeError::Failed(Failed::new(Phase::Record, e)))?,
        );
    }
    let base = plan.base;
    Ok(Attribution {
        store,
        task,
        base,
        segments,
        git,
        checks,
        masker,
    })
}

impl Attribution {
    fn report(&self) -> Report<'_> {
        Report {
            task: &self.task,
            base: &self.base,
            segments: &self.segments,
        }
    }

    /// The report for a person, secrets masked (an agent can name a file after one).
    pub fn human(&self) -> String {
        self.masker.mask(&self.report().human()).text.into_owned()
    }

    /// The report as one `handoff.attribution.v1` object, with the checks that ran, secrets
    /// masked.
    pub fn json(&self, checks: Option<&Checks>) -> Value {
        let mut value = self
            .report()
            .json(checks.map(|c| c.results.iter().map(CheckResult::json).collect()));
        self.masker.mask_json(&mut value);
        value
    }

    /// Whether verification was asked for (and is ready to run).
    pub fn verifies(&self) -> bool {
        self.checks.is_some()
    }

    /// Runs the note's verification commands one by one with `sh -c` in the worktree (10
    /// minutes each) and records each as a check on the commit it tested; `on_check` sees each
    /// as it ends. Nothing runs unless the attribution was made with `verify`.
    pub async fn verify(
        &self,
        env: &BTreeMap<String, String>,
        cancel: watch::Receiver<bool>,
        on_check: &mut dyn FnMut(&CheckResult),
    ) -> Checks {
        let Some((commands, head)) = &self.checks else {
            return Checks::default();
        };
        // Each check is shown with its command and output masked.
        let mut show = |check: &CheckResult| {
            let mut check = check.clone();
            check.command = self.masker.mask(&check.command).text.into_owned();
            for line in &mut check.output_tail {
                *line = self.masker.mask(line).text.into_owned();
            }
            on_check(&check);
        };
        run_checks(
            self.store.as_ref(),
            &self.task,
            &self.git,
            (commands, head),
            env,
            cancel,
            &mut show,
        )
        .await
    }
}

/// Git's standard output, or the failure as one line.
fn stdout(git: &Git, args: &[&str]) -> Result<Vec<u8>, String> {
    git.run(args).map(|o| o.stdout).map_err(String::from)
}

fn current_dir() -> Result<Utf8PathBuf, String> {
    let dir =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let dir = Utf8PathBuf::from_path_buf(dir)
        .map_err(|p| format!("the current directory '{}' is not UTF-8", p.display()))?;
    check_cwd(dir.as_str())
}

/// The first bytes of each blob, read through one `git cat-file --batch`.
fn headers<'b>(
    git: &Git,
    blobs: impl Iterator<Item = &'b str>,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    const KEEP: u64 = 4096;
    let blobs: BTreeSet<&str> = blobs.collect();
    let mut headers = BTreeMap::new();
    if blobs.is_empty() {
        return Ok(headers);
    }
    let failed = |e: std::io::Error| format!("git cat-file --batch: {e}");
    let mut child = git
        .command(&["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(failed)?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("git cat-file --batch: no pipes".to_owned());
    };
    let mut reader = BufReader::new(stdout);
    let mut result = Ok(());
    // One object at a time: git flushes each answer, so neither pipe fills up.
    for blob in blobs {
        let step = (|| {
            writeln!(stdin, "{blob}")?;
            stdin.flush()?;
            let mut line = Vec::new();
            reader.read_until(b'\n', &mut line)?;
            let line = String::from_utf8_lossy(&line);
            let size = match line.trim_end().rsplit_once(' ') {
                Some((_, size)) if line.contains(" blob ") => size.parse::<u64>().ok(),
                _ => None,
            };
            let Some(size) = size else {
                return Ok(());
            };
            let mut head = Vec::new();
            reader
                .by_ref()
                .take(size.min(KEEP))
                .read_to_end(&mut head)?;
            std::io::copy(
                &mut reader.by_ref().take(size - size.min(KEEP) + 1),
                &mut std::io::sink(),
            )?;
            headers.insert(blob.to_owned(), head);
            Ok::<_, std::io::Error>(())
        })();
        if let Err(e) = step {
            result = Err(failed(e));
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    result.map(|()| headers)
}
