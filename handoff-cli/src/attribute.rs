//! `handoff attribute`: which provider changed what while it held a task, read from the task's
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
//! With `--verify`, the commands of the latest started handoff's note ("How to verify": lines of
//! shell code blocks, or list items that start with a backticked command) run one by one with
//! `sh -c` in the worktree, and each is recorded as a check on HEAD in the timeline.
//!
//! `--json` prints one object:
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

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use clap::Args;
use handoff_core::{
    AgentRef, AnswerSource, CheckRun, Ending, HandoffOutcome, HandoffRow, Invocation, Record,
    Route, Section, StdinSource, Task, TaskId, TaskStore, TimelineEntry, TimelineEvent, check_cwd,
    exit, parse_note, read_note, supervise,
};
use serde_json::{Value, json};

const AFTER_HELP: &str = "\
Exit codes:
  0   attributed; with --verify, every check passed
  1   git or the task store failed
  2   with --verify: a check failed (or was killed)
  5   refused, nothing changed: no task, its worktree is gone, the task store cannot be used,
      or (--verify) no note or no commands to run
  9   with --verify: cancelled by SIGINT/SIGTERM while a check ran (it is not recorded)";

/// The JSON report's schema version.
const SCHEMA: &str = "handoff.attribution.v1";

/// Exit code when git or the store fails.
const FAILED: u8 = 1;

/// How long one verification command may run.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// How many lines of a failed check's output are shown.
const OUTPUT_TAIL_LINES: usize = 20;

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

/// Why the command stopped: refused (nothing changed, exit 5) or failed (exit 1).
enum Stop {
    Refused(String),
    Failed(String),
}

impl From<String> for Stop {
    fn from(value: String) -> Self {
        Stop::Refused(value)
    }
}

/// Runs `handoff attribute`; returns the exit code.
pub async fn main(args: AttributeArgs) -> u8 {
    match attribute(&args).await {
        Ok(code) => code,
        Err(Stop::Refused(message)) => {
            let _ = writeln!(std::io::stderr(), "handoff: {message}");
            exit::USAGE
        }
        Err(Stop::Failed(message)) => {
            let _ = writeln!(std::io::stderr(), "handoff: {message}");
            FAILED
        }
    }
}

async fn attribute(args: &AttributeArgs) -> Result<u8, Stop> {
    let id = match &args.task {
        Some(t) => Some(TaskId::parse(t).ok_or_else(|| format!("--task: invalid task id '{t}'"))?),
        None => None,
    };
    let cwd_worktree = match &id {
        Some(_) => None,
        None => {
            let cwd = match &args.cwd {
                Some(cwd) => check_cwd(cwd)?,
                None => current_dir()?,
            };
            Some(
                handoff_git::repo_state(&cwd)
                    .map_err(|e| e.to_string())?
                    .repository,
            )
        }
    };
    let store = crate::checkpoint::open_store()?;
    let task = match (&id, &cwd_worktree) {
        (Some(id), _) => store.task(id).map_err(|e| e.to_string())?,
        (None, Some(worktree)) => store
            .task_for_worktree(worktree)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no task recorded for the worktree '{worktree}' yet"))?,
        (None, None) => return Err("pass --task or --cwd".to_owned().into()),
    };
    if !task.worktree.is_dir() {
        return Err(format!(
            "the worktree of task {} is gone: '{}' is not a directory",
            task.id, task.worktree
        )
        .into());
    }
    let state = handoff_git::repo_state(&task.worktree).map_err(|e| {
        format!(
            "the worktree of task {} ('{}') is not usable: {e}",
            task.id, task.worktree
        )
    })?;
    let git = Git {
        root: state.repository.clone(),
    };
    let timeline = store.timeline(&task.id).map_err(|e| e.to_string())?;
    let lineage = lineage(&store, &task)?;
    let plan = plan(&task, &lineage, &timeline, &git)?;

    // Everything --verify needs is checked before anything runs.
    let checks = if args.verify {
        let head = git
            .commit("HEAD")
            .ok_or_else(|| format!("HEAD has no commit in '{}': nothing to verify", git.root))?;
        let commands = verify_commands(&plan)?;
        // Every check is recorded: refuse now rather than run commands that cannot be.
        store.check_writable().map_err(|e| e.to_string())?;
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
        segments.push(segment(&git, index, span, &notes).map_err(Stop::Failed)?);
    }
    let report = Report {
        task: &task,
        base: &plan.base,
        segments,
    };
    let mut out = std::io::stdout().lock();
    if !args.json {
        let _ = write!(out, "{}", report.human());
        let _ = out.flush();
    }
    drop(out);

    let Some((commands, head)) = checks else {
        if args.json {
            print_json(&report.json(None));
        }
        return Ok(exit::OK);
    };
    let ran = run_checks(&store, &task, &git, &commands, &head, args.json).await;
    let json_checks: Vec<Value> = ran.results.iter().map(CheckResult::json).collect();
    if args.json {
        print_json(&report.json(Some(json_checks)));
    }
    if let Some(message) = ran.store_error {
        return Err(Stop::Failed(message));
    }
    if ran.cancelled {
        let _ = writeln!(
            std::io::stderr(),
            "handoff: cancelled while a check ran; it was not recorded"
        );
        return Ok(exit::CANCELLED);
    }
    if ran.results.iter().all(|r| r.passed()) {
        Ok(exit::OK)
    } else {
        Ok(exit::PROVIDER_FAILED)
    }
}

fn print_json(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

fn current_dir() -> Result<Utf8PathBuf, String> {
    let dir =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let dir = Utf8PathBuf::from_path_buf(dir)
        .map_err(|p| format!("the current directory '{}' is not UTF-8", p.display()))?;
    check_cwd(dir.as_str())
}

// ---------------------------------------------------------------------------------------------
// The plan: base, started handoffs and the spans between them.
// ---------------------------------------------------------------------------------------------

/// Where segment 0 starts, and why there.
struct Base {
    commit: String,
    first_checkpoint: String,
    /// The first checkpoint is a root commit, so it is its own base.
    root: bool,
}

/// A started handoff that moved the task to its target.
struct Transfer<'a> {
    row: &'a HandoffRow,
    /// The commit the receiver started from.
    checkpoint: String,
}

struct Plan<'a> {
    base: Base,
    transfers: Vec<Transfer<'a>>,
    spans: Vec<Span<'a>>,
}

/// One owner's stretch of the task, before it is diffed.
struct Span<'a> {
    owner: AgentRef,
    /// The started handoff that gave the owner the task; none for the first owner.
    handoff: Option<&'a HandoffRow>,
    from: String,
    /// `None`: the worktree now.
    to: Option<String>,
}

fn plan<'a>(
    task: &Task,
    lineage: &[TaskId],
    timeline: &'a [TimelineEntry],
    git: &Git,
) -> Result<Plan<'a>, String> {
    let mut transfers = Vec::new();
    for (position, row) in moves(lineage, timeline) {
        let recorded = row
            .context
            .details
            .as_ref()
            .and_then(|d| d.get("checkpoint"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let checkpoint = match recorded {
            Some(c) => c,
            None => timeline[..position]
                .iter()
                .rev()
                .find_map(|e| match &e.event {
                    TimelineEvent::Checkpoint(c) => Some(c.commit.clone()),
                    _ => None,
                })
                .ok_or_else(|| {
                    format!(
                        "handoff {} records no checkpoint and none was recorded before it",
                        row.id
                    )
                })?,
        };
        let checkpoint = git.commit(&checkpoint).ok_or_else(|| {
            format!(
                "commit {checkpoint} of handoff {} is not in the repository (rewritten or \
                 garbage-collected?)",
                row.id
            )
        })?;
        transfers.push(Transfer { row, checkpoint });
    }

    let first = timeline
        .iter()
        .find_map(|e| match &e.event {
            TimelineEvent::Checkpoint(c) => Some(c.commit.clone()),
            _ => None,
        })
        .or_else(|| transfers.first().map(|t| t.checkpoint.clone()))
        .ok_or_else(|| {
            format!(
                "task {} has no checkpoint yet: nothing to attribute",
                task.id
            )
        })?;
    let first_checkpoint = git.commit(&first).ok_or_else(|| {
        format!(
            "the first checkpoint {first} of task {} is not in the repository (rewritten or \
             garbage-collected?)",
            task.id
        )
    })?;
    let parent = git.commit(&format!("{first_checkpoint}^"));
    let base = Base {
        commit: parent.clone().unwrap_or_else(|| first_checkpoint.clone()),
        root: parent.is_none(),
        first_checkpoint,
    };

    let mut spans = Vec::new();
    let mut owner = match transfers.first() {
        Some(t) => t.row.source.clone(),
        None => AgentRef {
            provider: task.agent.provider.clone(),
            model: task.agent.model.clone(),
        },
    };
    let mut from = base.commit.clone();
    let mut handoff = None;
    for t in &transfers {
        spans.push(Span {
            owner: owner.clone(),
            handoff,
            from: from.clone(),
            to: Some(t.checkpoint.clone()),
        });
        owner = t.row.target.clone();
        from = t.checkpoint.clone();
        handoff = Some(t.row);
    }
    spans.push(Span {
        owner,
        handoff,
        from,
        to: None,
    });
    Ok(Plan {
        base,
        transfers,
        spans,
    })
}

/// The started handoffs that moved this task (or a task it was forked from) to their target,
/// with their timeline positions. A handoff naming its task (`details.task`) counts when that is
/// this task or an ancestor (`lineage`). Otherwise a same-thread handoff counts, and a new-thread
/// one counts when it is the first new-thread handoff after a fork marker: it is recorded on the
/// task it created, right after the copied timeline, and copied on into that task's own forks.
fn moves<'a>(lineage: &[TaskId], timeline: &'a [TimelineEntry]) -> Vec<(usize, &'a HandoffRow)> {
    let mut forked = false;
    let mut moves = Vec::new();
    for (i, entry) in timeline.iter().enumerate() {
        let h = match &entry.event {
            TimelineEvent::Forked(_) => {
                forked = true;
                continue;
            }
            TimelineEvent::Handoff(h) => h,
            _ => continue,
        };
        let named = h
            .context
            .details
            .as_ref()
            .and_then(|d| d.get("task"))
            .and_then(Value::as_str);
        let counts = match (named, h.route) {
            (Some(named), _) => lineage.iter().any(|id| id.as_str() == named),
            (None, Route::SameThread) => true,
            (None, Route::NewThread) => std::mem::take(&mut forked),
            (None, Route::NoteOnly) => false,
        };
        if counts && h.outcome == HandoffOutcome::Started {
            moves.push((i, h));
        }
    }
    moves
}

/// The task and the tasks it was forked from, nearest first.
fn lineage(store: &dyn TaskStore, task: &Task) -> Result<Vec<TaskId>, String> {
    let mut ids = vec![task.id.clone()];
    let mut parent = task.parent.clone();
    while let Some(id) = parent {
        if ids.contains(&id) || ids.len() > 256 {
            break;
        }
        parent = match store.task(&id) {
            Ok(t) => t.parent,
            Err(handoff_core::StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e.to_string()),
        };
        ids.push(id);
    }
    Ok(ids)
}

// ---------------------------------------------------------------------------------------------
// Segments: the diff of each span, its files and their flags.
// ---------------------------------------------------------------------------------------------

/// Why a file deserves a second look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Flag {
    Configuration,
    Lockfile,
    Permissions,
    Generated,
    OutsideScope,
}

impl Flag {
    const ALL: [Flag; 5] = [
        Flag::Configuration,
        Flag::Lockfile,
        Flag::Permissions,
        Flag::Generated,
        Flag::OutsideScope,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Flag::Configuration => "configuration",
            Flag::Lockfile => "lockfile",
            Flag::Permissions => "permissions",
            Flag::Generated => "generated",
            Flag::OutsideScope => "outside-scope",
        }
    }
}

/// One changed file of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileChange {
    path: String,
    old_path: Option<String>,
    status: &'static str,
    /// Lines added and removed; `None` for a binary file.
    lines: Option<(u64, u64)>,
    old_mode: Option<String>,
    new_mode: Option<String>,
    /// The new blob, when there is one to read.
    new_blob: Option<String>,
    flags: Vec<Flag>,
}

impl FileChange {
    fn json(&self) -> Value {
        json!({
            "path": self.path,
            "oldPath": self.old_path,
            "status": self.status,
            "added": self.lines.map(|l| l.0),
            "removed": self.lines.map(|l| l.1),
            "binary": self.lines.is_none(),
            "oldMode": self.old_mode,
            "newMode": self.new_mode,
            "flags": self.flags.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        })
    }
}

/// What the segment's note says is in scope.
struct Scope {
    note: Option<Utf8PathBuf>,
    /// Repository-relative paths; empty when the scope is unknown.
    paths: Vec<String>,
    /// Why the scope is unknown.
    unknown: Option<String>,
}

struct Segment {
    index: usize,
    owner: AgentRef,
    handoff: Option<String>,
    from: String,
    to: Option<String>,
    scope: Scope,
    files: Vec<FileChange>,
}

impl Segment {
    fn totals(&self) -> (usize, u64, u64, usize) {
        let added = self.files.iter().filter_map(|f| f.lines).map(|l| l.0).sum();
        let removed = self.files.iter().filter_map(|f| f.lines).map(|l| l.1).sum();
        let binary = self.files.iter().filter(|f| f.lines.is_none()).count();
        (self.files.len(), added, removed, binary)
    }
}

fn segment(
    git: &Git,
    index: usize,
    span: &Span<'_>,
    notes: &[Utf8PathBuf],
) -> Result<Segment, String> {
    let mut files = match &span.to {
        Some(to) => {
            let raw = git.run(&["diff-tree", "-r", "-M", "-z", "--raw", &span.from, to])?;
            let numstat = git.run(&["diff-tree", "-r", "-M", "-z", "--numstat", &span.from, to])?;
            join(&raw, &numstat)
        }
        None => {
            let index = PrivateIndex::new(git)?;
            if git.commit("HEAD").is_some() {
                index.run(git, &["read-tree", "HEAD"])?;
            }
            index.run(git, &["add", "-A"])?;
            let raw = index.run(
                git,
                &["diff-index", "--cached", "-r", "-M", "-z", &span.from],
            )?;
            let numstat = index.run(
                git,
                &[
                    "diff-index",
                    "--cached",
                    "-r",
                    "-M",
                    "-z",
                    "--numstat",
                    &span.from,
                ],
            )?;
            // Notes written inside the worktree are handoff's, not anybody's work.
            let mut files = join(&raw, &numstat);
            files.retain(|f| !notes.contains(&git.root.join(&f.path)));
            files
        }
    };
    let scope = scope(span.handoff, &git.root, index);
    let headers = git.headers(
        files
            .iter()
            .filter_map(|f| f.lines.is_some().then_some(f.new_blob.as_deref()).flatten()),
    )?;
    for f in &mut files {
        let generated = f
            .new_blob
            .as_ref()
            .and_then(|b| headers.get(b))
            .is_some_and(|h| says_generated(h));
        f.flags = flags(f, generated, &scope);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Segment {
        index,
        owner: span.owner.clone(),
        handoff: span.handoff.map(|h| h.id.to_string()),
        from: span.from.clone(),
        to: span.to.clone(),
        scope,
        files,
    })
}

fn flags(f: &FileChange, generated: bool, scope: &Scope) -> Vec<Flag> {
    let mut flags = Vec::new();
    if is_configuration(&f.path) || f.old_path.as_deref().is_some_and(is_configuration) {
        flags.push(Flag::Configuration);
    }
    if is_lockfile(&f.path) {
        flags.push(Flag::Lockfile);
    }
    if mode_changed(f.old_mode.as_deref(), f.new_mode.as_deref()) {
        flags.push(Flag::Permissions);
    }
    if generated || is_generated_path(&f.path) {
        flags.push(Flag::Generated);
    }
    if scope.unknown.is_none() && !in_scope(&f.path, &scope.paths) {
        flags.push(Flag::OutsideScope);
    }
    flags
}

/// A mode change of an existing file, or a new file that is executable.
fn mode_changed(old: Option<&str>, new: Option<&str>) -> bool {
    match (old, new) {
        (Some(old), Some(new)) => old != new,
        (None, Some(new)) => new == "100755",
        _ => false,
    }
}

fn is_configuration(path: &str) -> bool {
    const DIRS: [&str; 10] = [
        ".claude",
        ".codex",
        ".cursor",
        ".opencode",
        ".kiro",
        ".gemini",
        ".circleci",
        ".buildkite",
        ".husky",
        ".woodpecker",
    ];
    const FILES: [&str; 22] = [
        "AGENTS.md",
        "CLAUDE.md",
        "CLAUDE.local.md",
        "GEMINI.md",
        ".mcp.json",
        "opencode.json",
        "opencode.jsonc",
        ".cursorrules",
        ".windsurfrules",
        ".gitlab-ci.yml",
        ".travis.yml",
        "azure-pipelines.yml",
        "bitbucket-pipelines.yml",
        "appveyor.yml",
        ".appveyor.yml",
        ".drone.yml",
        ".woodpecker.yml",
        "Jenkinsfile",
        "cloudbuild.yaml",
        ".pre-commit-config.yaml",
        "lefthook.yml",
        "codecov.yml",
    ];
    let parts: Vec<&str> = path.split('/').collect();
    let (name, dirs) = match parts.split_last() {
        Some((name, dirs)) => (*name, dirs),
        None => return false,
    };
    dirs.iter().any(|d| DIRS.contains(d))
        || FILES.contains(&name)
        || path.starts_with(".github/workflows/")
        || path.starts_with(".github/actions/")
        || path == ".github/copilot-instructions.md"
        || path.starts_with(".gitlab/ci/")
}

fn is_lockfile(path: &str) -> bool {
    const NAMES: [&str; 27] = [
        "Cargo.lock",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lockb",
        "bun.lock",
        "deno.lock",
        "poetry.lock",
        "uv.lock",
        "Pipfile.lock",
        "pdm.lock",
        "pixi.lock",
        "conda-lock.yml",
        "Gemfile.lock",
        "go.sum",
        "go.work.sum",
        "composer.lock",
        "flake.lock",
        "mix.lock",
        "pubspec.lock",
        "Podfile.lock",
        "Package.resolved",
        "packages.lock.json",
        "gradle.lockfile",
        "stack.yaml.lock",
        ".terraform.lock.hcl",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    NAMES.contains(&name)
}

fn is_generated_path(path: &str) -> bool {
    const DIRS: [&str; 8] = [
        "dist",
        "build",
        "target",
        "node_modules",
        "__pycache__",
        ".next",
        ".nuxt",
        ".svelte-kit",
    ];
    const SUFFIXES: [&str; 12] = [
        ".min.js",
        ".min.css",
        ".min.mjs",
        ".pb.go",
        ".pb.cc",
        ".pb.h",
        "_pb2.py",
        "_pb2_grpc.py",
        ".g.dart",
        ".freezed.dart",
        ".pyc",
        ".js.map",
    ];
    let parts: Vec<&str> = path.split('/').collect();
    let Some((name, dirs)) = parts.split_last() else {
        return false;
    };
    let stem = name.split('.').next().unwrap_or(name);
    dirs.iter().any(|d| DIRS.contains(d))
        || SUFFIXES.iter().any(|s| name.ends_with(s))
        || (stem.ends_with("_generated") && name.len() > stem.len())
        || name.contains(".generated.")
}

/// Whether the first five lines of a file say it is generated.
fn says_generated(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines()
        .take(5)
        .any(|l| l.contains("@generated") || l.contains("DO NOT EDIT"))
}

/// Joins `--raw -z` and `--numstat -z` output of the same diff by path.
fn join(raw: &[u8], numstat: &[u8]) -> Vec<FileChange> {
    let mut lines: BTreeMap<String, Option<(u64, u64)>> = BTreeMap::new();
    let mut tokens = raw_tokens(numstat);
    while let Some(token) = tokens.next() {
        let mut fields = token.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = if path.is_empty() {
            // A rename: the source and the destination follow.
            let _ = tokens.next();
            tokens.next().unwrap_or_default()
        } else {
            path.to_owned()
        };
        let counts = match (added.parse(), removed.parse()) {
            (Ok(a), Ok(r)) => Some((a, r)),
            _ => None,
        };
        lines.insert(path, counts);
    }

    let mut files = Vec::new();
    let mut tokens = raw_tokens(raw);
    while let Some(meta) = tokens.next() {
        let Some(meta) = meta.strip_prefix(':') else {
            continue;
        };
        let fields: Vec<&str> = meta.split(' ').collect();
        let [old_mode, new_mode, _old_blob, new_blob, status] = fields[..] else {
            continue;
        };
        let letter = status.chars().next().unwrap_or('X');
        let (old_path, path) = if matches!(letter, 'R' | 'C') {
            let old = tokens.next().unwrap_or_default();
            (Some(old), tokens.next().unwrap_or_default())
        } else {
            (None, tokens.next().unwrap_or_default())
        };
        let mode = |m: &str| (!m.trim_start_matches('0').is_empty()).then(|| m.to_owned());
        let blob = new_blob.trim_start_matches('0');
        files.push(FileChange {
            lines: lines.get(&path).copied().flatten(),
            old_path,
            status: match letter {
                'A' => "added",
                'M' => "modified",
                'D' => "deleted",
                'R' => "renamed",
                'C' => "copied",
                'T' => "type-changed",
                'U' => "unmerged",
                _ => "unknown",
            },
            old_mode: mode(old_mode),
            new_mode: mode(new_mode),
            new_blob: (!blob.is_empty() && matches!(new_mode, "100644" | "100755"))
                .then(|| new_blob.to_owned()),
            path,
            flags: Vec::new(),
        });
    }
    files
}

fn raw_tokens(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

// ---------------------------------------------------------------------------------------------
// Scope: the paths a handoff note names.
// ---------------------------------------------------------------------------------------------

fn scope(handoff: Option<&HandoffRow>, root: &Utf8Path, index: usize) -> Scope {
    let unknown = |note: Option<Utf8PathBuf>, reason: String| Scope {
        note,
        paths: Vec::new(),
        unknown: Some(reason),
    };
    let Some(handoff) = handoff else {
        let reason = if index == 0 {
            "the first owner received no handoff note"
        } else {
            "no handoff note"
        };
        return unknown(None, reason.to_owned());
    };
    let Some(path) = handoff.context.note_path.clone() else {
        return unknown(None, format!("handoff {} recorded no note", handoff.id));
    };
    let text = match read_note(path.as_std_path()) {
        Ok(text) => text,
        Err(e) => return unknown(Some(path), format!("the note is unreadable: {e}")),
    };
    let paths = note_paths(&text, root);
    if paths.is_empty() {
        return unknown(Some(path), "the note names no paths".to_owned());
    }
    Scope {
        note: Some(path),
        paths,
        unknown: None,
    }
}

/// The repository paths a note names, in backticks or as bare path-like words, outside its
/// "Git state" section (which lists the repository, not the work).
fn note_paths(text: &str, root: &Utf8Path) -> Vec<String> {
    let note = parse_note(text);
    let mut texts = vec![note.preamble.as_str()];
    texts.extend(
        note.sections
            .iter()
            .filter(|s| s.section != Section::GitState)
            .map(|s| s.body.as_str()),
    );
    let mut paths = BTreeSet::new();
    for text in texts {
        for word in text.split(|c: char| c.is_whitespace() || "`()[]<>\"',;|{}".contains(c)) {
            if let Some(path) = path_like(word, root) {
                paths.insert(path);
            }
        }
    }
    paths.into_iter().collect()
}

/// A word as a repository-relative path, when it looks like one.
fn path_like(word: &str, root: &Utf8Path) -> Option<String> {
    const NAMES: [&str; 9] = [
        "Makefile",
        "Dockerfile",
        "Justfile",
        "justfile",
        "Rakefile",
        "Gemfile",
        "Procfile",
        "LICENSE",
        "Jenkinsfile",
    ];
    let word = word
        .trim_start_matches('*')
        .trim_end_matches(|c: char| ".:!?*".contains(c));
    // `src/lib.rs:42` names the file.
    let word = match word.split_once(':') {
        Some((path, line)) if line.split(':').all(|n| n.parse::<u32>().is_ok()) => path,
        _ => word,
    };
    if word.is_empty()
        || word.contains("://")
        || word.starts_with('-')
        || !word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "./_-+*?".contains(c))
    {
        return None;
    }
    let word = if let Some(abs) = word.strip_prefix('/') {
        let rel = Utf8Path::new("/").join(abs);
        rel.strip_prefix(root).ok()?.as_str().to_owned()
    } else {
        word.trim_start_matches("./").to_owned()
    };
    let looks = if word.contains('/') {
        true
    } else {
        match word.rsplit_once('.') {
            Some((stem, ext)) => {
                !ext.is_empty()
                    && ext.len() <= 10
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
                    && !matches!(word.as_str(), "e.g" | "i.e" | "etc")
                    && (!stem.is_empty() || word.starts_with('.'))
            }
            None => NAMES.contains(&word.as_str()),
        }
    };
    if !looks {
        return None;
    }
    // A glob names the directories before its first wildcard.
    let mut parts = Vec::new();
    for part in word.split('/') {
        if part.contains(['*', '?']) {
            break;
        }
        if part == ".." {
            return None;
        }
        if !part.is_empty() && part != "." {
            parts.push(part);
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Whether `path` is one of `scope`, under one of its directories, or (for a scope entry
/// without a `/`) has a component of that name.
fn in_scope(path: &str, scope: &[String]) -> bool {
    scope.iter().any(|s| {
        path == s
            || path
                .strip_prefix(s.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
            || (!s.contains('/') && path.split('/').any(|part| part == s))
    })
}

// ---------------------------------------------------------------------------------------------
// Verification: the note's commands, run and recorded.
// ---------------------------------------------------------------------------------------------

/// The commands of the latest started handoff's note, or why there are none.
fn verify_commands(plan: &Plan<'_>) -> Result<Vec<String>, String> {
    let Some(latest) = plan.transfers.last() else {
        return Err(
            "--verify: no started handoff in this task, so no note to take commands from"
                .to_owned(),
        );
    };
    let Some(path) = &latest.row.context.note_path else {
        return Err(format!(
            "--verify: handoff {} recorded no note",
            latest.row.id
        ));
    };
    let text = read_note(path.as_std_path())
        .map_err(|e| format!("--verify: cannot read the note '{path}': {e}"))?;
    let commands = note_commands(&text);
    if commands.is_empty() {
        return Err(format!(
            "--verify: the note '{path}' lists no commands under \"How to verify\" (shell code \
             blocks, or list items that start with a backticked command)"
        ));
    }
    Ok(commands)
}

/// The commands under "How to verify": the lines of shell code blocks (only the `$ ` lines when
/// a block has prompts; comments and blank lines skipped; `\` continues a line), and list items
/// that start with a backticked command (the rest of the item is the expected result).
fn note_commands(text: &str) -> Vec<String> {
    const SHELLS: [&str; 8] = [
        "",
        "sh",
        "bash",
        "shell",
        "zsh",
        "console",
        "shell-session",
        "shellsession",
    ];
    let Some(body) = parse_note(text).body(Section::HowToVerify) else {
        return Vec::new();
    };
    let mut commands = Vec::new();
    let mut lines = body.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let fence = fence_of(trimmed);
        if let Some((marker, info)) = fence {
            let mut block = Vec::new();
            for inner in lines.by_ref() {
                let t = inner.trim();
                if t.starts_with(marker.as_str())
                    && t.trim_start_matches(marker.as_str()).is_empty()
                {
                    break;
                }
                block.push(inner);
            }
            let language = info.split_whitespace().next().unwrap_or("");
            if SHELLS.contains(&language.to_ascii_lowercase().as_str()) {
                commands.extend(block_commands(&block));
            }
            continue;
        }
        if let Some(item) = list_item(trimmed)
            && let Some(command) = leading_code(item)
        {
            commands.push(command);
        }
    }
    commands
}

/// A fence's marker (three or more backticks or tildes) and info string.
fn fence_of(line: &str) -> Option<(String, String)> {
    let c = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = line.chars().take_while(|x| *x == c).count();
    (n >= 3).then(|| (c.to_string().repeat(n), line[n..].trim().to_owned()))
}

fn block_commands(block: &[&str]) -> Vec<String> {
    let prompted = block.iter().any(|l| l.trim_start().starts_with("$ "));
    let mut commands = Vec::new();
    let mut pending: Option<String> = None;
    for line in block {
        let t = line.trim();
        if let Some(mut joined) = pending.take() {
            joined.push(' ');
            joined.push_str(t.trim_end_matches('\\').trim_end());
            if t.ends_with('\\') {
                pending = Some(joined);
            } else {
                commands.push(joined);
            }
            continue;
        }
        let t = if prompted {
            match t.strip_prefix("$ ") {
                Some(c) => c.trim(),
                None => continue,
            }
        } else {
            t
        };
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            pending = Some(head.trim_end().to_owned());
        } else {
            commands.push(t.to_owned());
        }
    }
    commands.extend(pending.filter(|p| !p.is_empty()));
    commands
}

/// The text of a bullet (`-`, `*`, `+`) or numbered (`1.`, `1)`) list item.
fn list_item(line: &str) -> Option<&str> {
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return Some(rest.trim());
        }
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = &line[digits..];
    rest.strip_prefix(". ")
        .or_else(|| rest.strip_prefix(") "))
        .map(str::trim)
}

/// The command of an item that starts with a code span and has no other.
fn leading_code(item: &str) -> Option<String> {
    let n = item.chars().take_while(|c| *c == '`').count();
    if n == 0 {
        return None;
    }
    let ticks = "`".repeat(n);
    let rest = &item[n..];
    let end = rest.find(&ticks)?;
    let code = rest[..end].trim();
    let after = &rest[end + n..];
    (!code.is_empty() && !after.contains('`')).then(|| code.to_owned())
}

/// One verification command as it ran.
struct CheckResult {
    command: String,
    commit: String,
    exit_code: Option<i32>,
    signal: Option<String>,
    ending: &'static str,
    duration: Duration,
}

impl CheckResult {
    fn passed(&self) -> bool {
        self.ending == "exited" && self.exit_code == Some(0)
    }

    fn json(&self) -> Value {
        json!({
            "command": self.command,
            "exitCode": self.exit_code,
            "signal": self.signal,
            "ending": self.ending,
            "passed": self.passed(),
            "commit": self.commit,
            "durationMs": u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

struct Checks {
    results: Vec<CheckResult>,
    cancelled: bool,
    store_error: Option<String>,
}

async fn run_checks(
    store: &dyn TaskStore,
    task: &Task,
    git: &Git,
    commands: &[String],
    head: &str,
    json: bool,
) -> Checks {
    let cancel = crate::cancel_on_signals();
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut checks = Checks {
        results: Vec::new(),
        cancelled: false,
        store_error: None,
    };
    for command in commands {
        // The commit each check tests: HEAD when it starts (an earlier check may commit).
        let commit = git.commit("HEAD").unwrap_or_else(|| head.to_owned());
        let invocation = Invocation {
            program: Utf8PathBuf::from("/bin/sh"),
            args: vec!["-c".to_owned(), command.clone()],
            env: env.clone(),
            cwd: git.root.clone(),
            stdin: StdinSource::Null,
            dirs: Vec::new(),
            files: Vec::new(),
            answer: AnswerSource::Stdout,
            policy: Value::Null,
            secrets: Vec::new(),
        };
        let started = Instant::now();
        let report = supervise(&invocation, &[], CHECK_TIMEOUT, cancel.clone()).await;
        let ending = match &report.ending {
            Ending::Exited => "exited",
            Ending::TimedOut => "timed-out",
            Ending::OutputLimit { .. } => "output-limit",
            Ending::SpawnFailed { .. } => "spawn-failed",
            Ending::Cancelled => {
                checks.cancelled = true;
                break;
            }
        };
        let result = CheckResult {
            command: command.clone(),
            commit,
            exit_code: report.exit_code,
            signal: report.signal.clone(),
            ending,
            duration: started.elapsed(),
        };
        let recorded = store.append(
            &task.id,
            &Record::Check(CheckRun {
                command: result.command.clone(),
                exit_code: if ending == "exited" {
                    result.exit_code
                } else {
                    None
                },
                commit: result.commit.clone(),
            }),
        );
        if !json {
            print_check(&result, &report);
        }
        checks.results.push(result);
        if let Err(e) = recorded {
            checks.store_error = Some(format!("could not record the check `{command}`: {e}"));
            break;
        }
    }
    checks
}

fn print_check(result: &CheckResult, report: &handoff_core::ProcessReport) {
    let how = match (result.ending, result.exit_code, &result.signal) {
        ("exited", Some(code), _) => format!("exit {code}"),
        ("timed-out", ..) => format!("killed after {} minutes", CHECK_TIMEOUT.as_secs() / 60),
        ("output-limit", ..) => "killed: too much output".to_owned(),
        ("spawn-failed", ..) => "could not start /bin/sh".to_owned(),
        (_, _, Some(signal)) => format!("killed by {signal}"),
        _ => "ended".to_owned(),
    };
    let verdict = if result.passed() { "passed" } else { "FAILED" };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "check `{}` on {}: {verdict} ({how}, {:.1} s)",
        result.command,
        short(&result.commit),
        result.duration.as_secs_f64()
    );
    let _ = out.flush();
    if !result.passed() {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&report.stdout),
            String::from_utf8_lossy(&report.stderr)
        );
        let lines: Vec<&str> = text.lines().collect();
        let mut err = std::io::stderr().lock();
        for line in &lines[lines.len().saturating_sub(OUTPUT_TAIL_LINES)..] {
            let _ = writeln!(err, "  | {line}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The report.
// ---------------------------------------------------------------------------------------------

struct Report<'a> {
    task: &'a Task,
    base: &'a Base,
    segments: Vec<Segment>,
}

/// A provider's share over all its segments.
struct Share {
    provider: String,
    segments: Vec<usize>,
    paths: BTreeSet<String>,
    added: u64,
    removed: u64,
    binary: usize,
    flags: BTreeMap<Flag, usize>,
}

impl Report<'_> {
    fn shares(&self) -> Vec<Share> {
        let mut shares: Vec<Share> = Vec::new();
        for s in &self.segments {
            let provider = s.owner.provider.to_string();
            let i = match shares.iter().position(|sh| sh.provider == provider) {
                Some(i) => i,
                None => {
                    shares.push(Share {
                        provider,
                        segments: Vec::new(),
                        paths: BTreeSet::new(),
                        added: 0,
                        removed: 0,
                        binary: 0,
                        flags: BTreeMap::new(),
                    });
                    shares.len() - 1
                }
            };
            let share = &mut shares[i];
            share.segments.push(s.index);
            let (_, added, removed, binary) = s.totals();
            share.added += added;
            share.removed += removed;
            share.binary += binary;
            for f in &s.files {
                share.paths.insert(f.path.clone());
                for flag in &f.flags {
                    *share.flags.entry(*flag).or_default() += 1;
                }
            }
        }
        shares
    }

    fn json(&self, checks: Option<Vec<Value>>) -> Value {
        let segments: Vec<Value> = self
            .segments
            .iter()
            .map(|s| {
                let (files, added, removed, binary) = s.totals();
                json!({
                    "index": s.index,
                    "provider": s.owner.provider,
                    "model": s.owner.model,
                    "handoffId": s.handoff,
                    "from": s.from,
                    "to": s.to,
                    "scope": {
                        "known": s.scope.unknown.is_none(),
                        "note": s.scope.note,
                        "paths": s.scope.paths,
                        "reason": s.scope.unknown,
                    },
                    "files": s.files.iter().map(FileChange::json).collect::<Vec<_>>(),
                    "totals": {
                        "files": files,
                        "added": added,
                        "removed": removed,
                        "binary": binary,
                    },
                })
            })
            .collect();
        let providers: Vec<Value> = self
            .shares()
            .iter()
            .map(|sh| {
                let flags: serde_json::Map<String, Value> = sh
                    .flags
                    .iter()
                    .map(|(f, n)| (f.as_str().to_owned(), json!(n)))
                    .collect();
                json!({
                    "provider": sh.provider,
                    "segments": sh.segments,
                    "files": sh.paths.len(),
                    "added": sh.added,
                    "removed": sh.removed,
                    "binary": sh.binary,
                    "flags": flags,
                })
            })
            .collect();
        json!({
            "schemaVersion": SCHEMA,
            "taskId": self.task.id,
            "parent": self.task.parent,
            "worktree": self.task.worktree,
            "branch": self.task.branch,
            "owner": {
                "provider": self.task.agent.provider,
                "model": self.task.agent.model,
            },
            "base": {
                "commit": self.base.commit,
                "rule": if self.base.root { "root-checkpoint" } else { "parent-of-first-checkpoint" },
                "firstCheckpoint": self.base.first_checkpoint,
            },
            "segments": segments,
            "providers": providers,
            "checks": checks,
        })
    }

    fn human(&self) -> String {
        let mut out = String::new();
        let t = self.task;
        let owner = agent(&AgentRef {
            provider: t.agent.provider.clone(),
            model: t.agent.model.clone(),
        });
        out.push_str(&format!(
            "task {} on {} in {} (now {owner})\n",
            t.id,
            t.branch.as_deref().unwrap_or("(detached)"),
            t.worktree
        ));
        let base = &self.base;
        if base.root {
            out.push_str(&format!(
                "base {}: the first checkpoint itself (a root commit)\n",
                short(&base.commit)
            ));
        } else {
            out.push_str(&format!(
                "base {}: the parent of the first checkpoint {}\n",
                short(&base.commit),
                short(&base.first_checkpoint)
            ));
        }
        for s in &self.segments {
            let to = s.to.as_deref().map_or("worktree", short);
            let scope = match &s.scope.unknown {
                Some(reason) => format!("scope unknown: {reason}"),
                None => format!(
                    "scope: {} path(s) named by {}",
                    s.scope.paths.len(),
                    s.scope.note.as_ref().map_or("", |p| p.as_str())
                ),
            };
            out.push_str(&format!(
                "\nsegment {} by {}: {}..{to} ({scope})\n",
                s.index,
                agent(&s.owner),
                short(&s.from)
            ));
            for f in &s.files {
                let counts = match f.lines {
                    Some((a, r)) => format!("+{a} -{r}"),
                    None => "binary".to_owned(),
                };
                let name = match &f.old_path {
                    Some(old) => format!("{old} → {}", f.path),
                    None => f.path.clone(),
                };
                let flags = if f.flags.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = f.flags.iter().map(|f| f.as_str()).collect();
                    format!("  [{}]", names.join(", "))
                };
                out.push_str(&format!("  {counts:<12} {name} ({}){flags}\n", f.status));
            }
            let (files, added, removed, binary) = s.totals();
            out.push_str(&format!(
                "  {files} file(s), +{added} -{removed}{}\n",
                if binary > 0 {
                    format!(", {binary} binary")
                } else {
                    String::new()
                }
            ));
        }
        out.push_str("\nby provider:\n");
        for sh in self.shares() {
            let segments: Vec<String> = sh.segments.iter().map(ToString::to_string).collect();
            let flags: Vec<String> = Flag::ALL
                .iter()
                .filter_map(|f| sh.flags.get(f).map(|n| format!("{n} {}", f.as_str())))
                .collect();
            out.push_str(&format!(
                "  {} (segment {}): {} file(s), +{} -{}{}{}\n",
                sh.provider,
                segments.join(", "),
                sh.paths.len(),
                sh.added,
                sh.removed,
                if sh.binary > 0 {
                    format!(", {} binary", sh.binary)
                } else {
                    String::new()
                },
                if flags.is_empty() {
                    String::new()
                } else {
                    format!("; flagged: {}", flags.join(", "))
                }
            ));
        }
        out
    }
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

// ---------------------------------------------------------------------------------------------
// Git.
// ---------------------------------------------------------------------------------------------

/// The git CLI, run at the worktree root, never touching the user's index.
struct Git {
    root: Utf8PathBuf,
}

impl Git {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.args(args)
            .current_dir(&self.root)
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            // Reading must not refresh the user's index behind their back.
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(Stdio::null());
        c
    }

    fn finish(out: std::io::Result<Output>, args: &[&str]) -> Result<Vec<u8>, String> {
        let out = out.map_err(|e| format!("cannot run git {}: {e}", args.join(" ")))?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let lines: Vec<&str> = stderr
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            Err(format!(
                "git {} failed ({}): {}",
                args.join(" "),
                out.status,
                lines[lines.len().saturating_sub(3)..].join(" | ")
            ))
        }
    }

    /// Runs git; a non-zero exit is an error naming the command and the tail of its stderr.
    fn run(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        Self::finish(self.command(args).output(), args)
    }

    /// The full id of the commit `rev` names, if it names one.
    fn commit(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{commit}}");
        let out = self
            .run(&[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ])
            .ok()?;
        let id = String::from_utf8_lossy(&out).trim().to_owned();
        (!id.is_empty()).then_some(id)
    }

    /// The first bytes of each blob, read through one `git cat-file --batch`.
    fn headers<'b>(
        &self,
        blobs: impl Iterator<Item = &'b str>,
    ) -> Result<BTreeMap<String, Vec<u8>>, String> {
        const KEEP: u64 = 4096;
        let blobs: BTreeSet<&str> = blobs.collect();
        let mut headers = BTreeMap::new();
        if blobs.is_empty() {
            return Ok(headers);
        }
        let failed = |e: std::io::Error| format!("git cat-file --batch: {e}");
        let mut child = self
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
}

/// A temporary index file in the git directory, removed when dropped.
struct PrivateIndex {
    path: Utf8PathBuf,
}

impl PrivateIndex {
    fn new(git: &Git) -> Result<PrivateIndex, String> {
        let out = git.run(&["rev-parse", "--path-format=absolute", "--git-dir"])?;
        let dir = Utf8PathBuf::from(String::from_utf8_lossy(&out).trim());
        Ok(PrivateIndex {
            path: dir.join(format!("handoff-attribute-{}.index", uuid::Uuid::new_v4())),
        })
    }

    fn run(&self, git: &Git, args: &[&str]) -> Result<Vec<u8>, String> {
        let mut command = git.command(args);
        command.env("GIT_INDEX_FILE", &self.path);
        Git::finish(command.output(), args)
    }
}

impl Drop for PrivateIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(format!("{}.lock", self.path));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_and_raw_join_by_path_with_renames_and_binaries() {
        let raw = b":100644 100755 aaa bbb M\0run.sh\0:000000 100644 000 ccc A\0new.txt\0\
:100644 100644 ddd eee R090\0old.rs\0new.rs\0:100644 000000 fff 000 D\0gone.bin\0";
        let numstat = b"0\t0\trun.sh\x002\t0\tnew.txt\x001\t1\t\0old.rs\0new.rs\0-\t-\tgone.bin\0";
        let files = join(raw, numstat);
        type Row<'a> = (&'a str, &'a str, Option<(u64, u64)>, bool);
        let summary: Vec<Row<'_>> = files
            .iter()
            .map(|f| {
                (
                    f.path.as_str(),
                    f.status,
                    f.lines,
                    mode_changed(f.old_mode.as_deref(), f.new_mode.as_deref()),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("run.sh", "modified", Some((0, 0)), true),
                ("new.txt", "added", Some((2, 0)), false),
                ("new.rs", "renamed", Some((1, 1)), false),
                ("gone.bin", "deleted", None, false),
            ]
        );
        assert_eq!(files[2].old_path.as_deref(), Some("old.rs"));
        assert_eq!(files[3].new_blob, None);
        assert_eq!(files[1].new_blob.as_deref(), Some("ccc"));
    }

    #[test]
    fn paths_are_classified() {
        for p in [
            ".claude/settings.json",
            "AGENTS.md",
            "sub/CLAUDE.md",
            ".github/workflows/ci.yml",
            ".gitlab-ci.yml",
            ".circleci/config.yml",
            ".mcp.json",
            "opencode.json",
        ] {
            assert!(is_configuration(p), "{p}");
        }
        for p in ["src/claude.rs", ".github/CODEOWNERS", "docs/AGENTS.txt"] {
            assert!(!is_configuration(p), "{p}");
        }
        for p in ["Cargo.lock", "web/package-lock.json", "go.sum", "uv.lock"] {
            assert!(is_lockfile(p), "{p}");
        }
        assert!(!is_lockfile("Cargo.toml"));
        for p in [
            "dist/app.js",
            "web/node_modules/x/index.js",
            "a.min.js",
            "api/v1/api.pb.go",
            "schema_generated.rs",
        ] {
            assert!(is_generated_path(p), "{p}");
        }
        for p in ["build.rs", "src/builder.rs", "generated.md"] {
            assert!(!is_generated_path(p), "{p}");
        }
        assert!(says_generated(
            b"// Code generated by protoc. DO NOT EDIT.\n"
        ));
        assert!(says_generated(b"#!/bin/sh\n\n\n\n# @generated\n"));
        assert!(!says_generated(b"1\n2\n3\n4\n5\n// @generated\n"));
    }

    #[test]
    fn a_note_names_paths_in_backticks_or_bare() {
        let root = Utf8Path::new("/repo");
        let note = "# Handoff\n\n## Goal\nFix `src/parser/` and README.md (see \
                    https://example.com/x.rs), e.g. `cargo test -p core`.\n\n## Current state\n\
                    Touched /repo/docs/guide.md:12 and `crates/*/Cargo.toml`; not /etc/passwd.\n\n\
                    ## Git state\n- `other/file.rs`\n";
        assert_eq!(
            note_paths(note, root),
            ["README.md", "crates", "docs/guide.md", "src/parser"]
        );
        let scope = note_paths(note, root);
        assert!(in_scope("src/parser/mod.rs", &scope));
        assert!(in_scope("sub/README.md", &scope));
        assert!(!in_scope("src/parsers.rs", &scope));
        assert!(!in_scope("other/file.rs", &scope));
    }

    #[test]
    fn verification_commands_come_from_code_blocks_and_list_items() {
        let note = "## How to verify\n\
                    - `cargo test -p handoff-cli` passes\n\
                    - run `make` twice\n\
                    1. `just lint`\n\
                    ```sh\n# comment\ncargo build \\\n  --release\n\nnpm test\n```\n\
                    ```console\n$ echo hi\nhi\n```\n\
                    ```text\nnot a command\n```\n\
                    ## Git state\n```sh\nrm -rf /\n```\n";
        assert_eq!(
            note_commands(note),
            [
                "cargo test -p handoff-cli",
                "just lint",
                "cargo build --release",
                "npm test",
                "echo hi",
            ]
        );
        assert!(note_commands("## Goal\n`x`\n").is_empty());
    }
}
