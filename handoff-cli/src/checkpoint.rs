//! `handoff checkpoint`: commit the reviewed files of a worktree with the git CLI and record the
//! commit in the task's timeline.
//!
//! Everything that can be refused is checked before anything is committed: the repository (a
//! branch with a commit), the selection (named paths inside the worktree, or `--tracked`), the
//! task store (open, a task or an agent to create one), handoff notes among the files, and
//! `git diff --check` on exactly what would be committed. The commit is built in a private
//! index, so the user's index is untouched unless the commit is made. Hooks run; nothing is
//! force-pushed or pushed at all.
//!
//! Exit codes: 0 committed and recorded; 5 refused, nothing changed; 1 git or the store failed
//! while committing or recording.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output};

use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use clap::Args;
use handoff_core::{
    AgentId, AgentRef, Checkpoint, NOTE_SCHEMA, NewTask, Record, TaskAgent, TaskStore, check_cwd,
    check_model, exit,
};
use handoff_store::SqliteStore;

const AFTER_HELP: &str = "\
Exit codes:
  0   committed and recorded
  1   git (a hook, the commit) or the task store failed while committing or recording
  5   refused before anything changed";

const DEFAULT_MESSAGE: &str = "handoff checkpoint";

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
    /// Print the result as one JSON line (`handoff.checkpoint.v1`) on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Why a checkpoint was not made: refused (nothing changed) or failed (exit 1).
pub(crate) enum Stop {
    Refused(String),
    Failed(String),
}

impl From<String> for Stop {
    fn from(value: String) -> Self {
        Stop::Refused(value)
    }
}

/// Runs `handoff checkpoint`; returns the exit code.
pub fn main(args: CheckpointArgs) -> u8 {
    match checkpoint(&args) {
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

/// The providers handoff knows: those of the default registry.
pub(crate) fn known_provider(flag: &str, name: &str) -> Result<AgentId, String> {
    handoff_core::registered(&handoff_adapters::default_registry(), flag, name)
}

/// Opens the default task store, reading its location from the environment.
pub(crate) fn open_store() -> Result<SqliteStore, String> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    SqliteStore::open_default(&env).map_err(|e| e.to_string())
}

fn checkpoint(args: &CheckpointArgs) -> Result<u8, Stop> {
    let cwd = check_cwd(&args.cwd)?;
    let agent = match &args.agent {
        Some(a) => Some(known_provider("--agent", a)?),
        None => None,
    };
    if let Some(model) = &args.model {
        check_model(model)?;
    }
    if args.message.trim().is_empty() {
        return Err("--message must not be empty".to_owned().into());
    }
    if args.paths.is_empty() && !args.tracked {
        return Err("name the files to commit or pass --tracked"
            .to_owned()
            .into());
    }

    let state = handoff_git::repo_state(&cwd).map_err(|e| e.to_string())?;
    let root = state.repository.clone();
    let Some(branch) = state.branch.clone() else {
        return Err(format!(
            "HEAD is detached in '{root}': check out the branch the work is on, then checkpoint"
        )
        .into());
    };
    if state.head.is_none() {
        return Err(format!(
            "branch '{branch}' in '{root}' has no commit yet: make the first commit by hand"
        )
        .into());
    }
    let git = Git { root: root.clone() };

    if !args.json {
        let status = git.run(&["status", "--short"])?;
        let _ = std::io::stderr().write_all(&status.stdout);
    }

    // The selection, as repository-relative pathspecs.
    let pathspecs = if args.tracked {
        let out = git.run(&["diff", "--name-only", "-z", "HEAD"])?;
        split_z(&out.stdout)
    } else {
        let mut specs = Vec::new();
        for p in &args.paths {
            specs.push(select(&git, &cwd, p)?);
        }
        specs
    };
    if pathspecs.is_empty() {
        return Err("nothing to commit: no tracked file changed"
            .to_owned()
            .into());
    }

    // The store and the task, before anything is committed.
    let store = open_store()?;
    let task = store.task_for_worktree(&root).map_err(|e| e.to_string())?;
    let author_provider = match (&agent, &task) {
        (Some(a), _) => a.clone(),
        (None, Some(t)) => t.agent.provider.clone(),
        (None, None) => {
            return Err("first checkpoint of this worktree: pass --agent <provider>"
                .to_owned()
                .into());
        }
    };
    let author = AgentRef {
        provider: author_provider,
        model: args
            .model
            .clone()
            .or_else(|| task.as_ref().and_then(|t| t.agent.model.clone())),
    };

    let prepared = Prepared::new(&git, &pathspecs)?;
    if prepared.committed.is_empty() {
        return Err("nothing to commit: the named files do not differ from HEAD"
            .to_owned()
            .into());
    }
    let committed = prepared.committed.clone();
    let head = prepared.commit(&git, &args.message)?;

    let after = handoff_git::repo_state(&root).map_err(|e| Stop::Failed(e.to_string()))?;
    let uncommitted: Vec<String> = after.uncommitted.into_iter().map(|c| c.path).collect();

    let recorded = (|| {
        let task = match task {
            Some(t) => t,
            None => store.create_task(&NewTask {
                project_root: git.project_root(),
                worktree: root.clone(),
                branch: Some(branch.clone()),
                agent: TaskAgent {
                    provider: author.provider.clone(),
                    model: author.model.clone(),
                    account: None,
                },
            })?,
        };
        store.append(
            &task.id,
            &Record::Checkpoint(Checkpoint {
                commit: head.clone(),
                author: author.clone(),
                message: args.message.clone(),
                committed: committed.clone(),
                uncommitted: uncommitted.clone(),
            }),
        )?;
        Ok::<_, handoff_core::StoreError>(task)
    })();
    let task = recorded.map_err(|e| {
        Stop::Failed(format!(
            "committed {head} but could not record the checkpoint: {e}"
        ))
    })?;

    let mut out = std::io::stdout().lock();
    if args.json {
        let line = serde_json::json!({
            "schemaVersion": "handoff.checkpoint.v1",
            "taskId": task.id,
            "commit": head,
            "committed": committed,
            "uncommitted": uncommitted,
            "message": args.message,
        });
        let _ = writeln!(out, "{line}");
    } else {
        let short = head.get(..12).unwrap_or(&head);
        let _ = writeln!(
            out,
            "checkpoint {short} on {branch} by {}: {} committed, {} left uncommitted (task {})",
            author.provider,
            committed.len(),
            uncommitted.len(),
            task.id
        );
        for path in &uncommitted {
            let _ = writeln!(out, "  uncommitted: {path}");
        }
    }
    let _ = out.flush();
    Ok(exit::OK)
}

/// A commit built in a private index from HEAD plus the selected paths, checked and ready.
pub(crate) struct Prepared {
    index: PrivateIndex,
    /// Repository-relative paths the commit holds, as git lists them.
    pub committed: Vec<String>,
}

impl Prepared {
    /// Builds the index; refuses a handoff note among the files and `git diff --check`
    /// problems. Nothing outside the private index changes.
    pub(crate) fn new(git: &Git, pathspecs: &[String]) -> Result<Prepared, Stop> {
        let index = PrivateIndex::new(git)?;
        index.run(git, &["read-tree", "HEAD"])?;
        if !pathspecs.is_empty() {
            let mut add = vec!["--literal-pathspecs", "add", "-A", "--"];
            add.extend(pathspecs.iter().map(String::as_str));
            index.run(git, &add)?;
        }
        let names = index.run(git, &["diff", "--cached", "--name-only", "-z", "HEAD"])?;
        let committed = split_z(&names.stdout);
        for path in &committed {
            if is_note(&git.root.join(path)) {
                return Err(format!(
                    "'{path}' is a handoff note ({NOTE_SCHEMA}); notes are never committed: leave it out"
                )
                .into());
            }
        }
        let check = index.output(git, &["diff", "--cached", "--check", "HEAD"])?;
        if !check.status.success() {
            let problems = String::from_utf8_lossy(&check.stdout);
            let lines: Vec<&str> = problems
                .lines()
                .filter(|l| !l.starts_with('+'))
                .map(str::trim)
                .collect();
            return Err(format!("git diff --check: {}", lines.join("; ")).into());
        }
        Ok(Prepared { index, committed })
    }

    /// Makes the commit without moving any branch or touching the worktree or the user's index
    /// (`write-tree` + `commit-tree` on HEAD; no hooks). Returns its id.
    pub(crate) fn commit_detached(self, git: &Git, message: &str) -> Result<String, Stop> {
        let tree = self.index.run(git, &["write-tree"]).map_err(Stop::Failed)?;
        let tree = String::from_utf8_lossy(&tree.stdout).trim().to_owned();
        let commit = git
            .run(&["commit-tree", &tree, "-p", "HEAD", "-m", message])
            .map_err(Stop::Failed)?;
        Ok(String::from_utf8_lossy(&commit.stdout).trim().to_owned())
    }

    /// Commits (hooks run), then lets the user's index catch up with the new HEAD for the
    /// committed paths only. Returns the new HEAD.
    pub(crate) fn commit(self, git: &Git, message: &str) -> Result<String, Stop> {
        let commit = self.index.output(git, &["commit", "-q", "-m", message])?;
        if !commit.status.success() {
            return Err(Stop::Failed(format!(
                "git commit failed ({}): {}",
                commit.status,
                tail(&commit)
            )));
        }
        drop(self.index);
        let mut reset = vec!["--literal-pathspecs", "reset", "-q", "HEAD", "--"];
        reset.extend(self.committed.iter().map(String::as_str));
        git.run(&reset).map_err(Stop::Failed)?;
        git.head().map_err(Stop::Failed)
    }
}

/// A named path as a pathspec relative to the worktree root, or why it cannot be committed.
fn select(git: &Git, cwd: &Utf8Path, given: &str) -> Result<String, String> {
    if given.is_empty() || given.contains('\0') {
        return Err(format!("invalid path '{given}'"));
    }
    let absolute = normalize(&cwd.join(given));
    let root = normalize(&git.root);
    let rel = match absolute.strip_prefix(&root) {
        Ok(rel) if !rel.as_str().is_empty() => rel.to_owned(),
        Ok(_) => {
            return Err(format!(
                "'{given}' is the worktree itself: name files in it"
            ));
        }
        Err(_) => return Err(format!("'{given}' is outside the worktree '{root}'")),
    };
    if rel.components().next() == Some(Utf8Component::Normal(".git")) {
        return Err(format!("'{given}' is inside the git directory"));
    }
    if std::fs::symlink_metadata(&absolute).is_err() {
        let tracked = git.run(&["--literal-pathspecs", "ls-files", "-z", "--", rel.as_str()])?;
        if tracked.stdout.is_empty() {
            return Err(format!("'{given}' does not exist and is not tracked"));
        }
    }
    Ok(rel.into_string())
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Utf8Path) -> Utf8PathBuf {
    let mut out = Utf8PathBuf::new();
    for c in path.components() {
        match c {
            Utf8Component::CurDir => {}
            Utf8Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_str()),
        }
    }
    out
}

/// Whether the file starts with front matter naming the handoff note schema.
pub(crate) fn is_note(path: &Utf8Path) -> bool {
    let Ok(text) = std::fs::read(path) else {
        return false;
    };
    let text = String::from_utf8_lossy(&text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return false;
    }
    for line in lines {
        let line = line.trim();
        if line == "---" {
            return false;
        }
        if let Some(value) = line.strip_prefix("schema:") {
            let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
            if value == NOTE_SCHEMA {
                return true;
            }
        }
    }
    false
}

pub(crate) fn split_z(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The last lines of a failed command's output.
pub(crate) fn tail(output: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// The git CLI, run at the worktree root.
pub(crate) struct Git {
    pub(crate) root: Utf8PathBuf,
}

impl Git {
    /// The full id of HEAD.
    pub(crate) fn head(&self) -> Result<String, String> {
        let out = self.run(&["rev-parse", "--verify", "HEAD"])?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.args(args)
            .current_dir(&self.root)
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE");
        c
    }

    pub(crate) fn output_of(mut command: Command, args: &[&str]) -> Result<Output, String> {
        command
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run git {}: {e}", args.join(" ")))
    }

    /// Runs git; a non-zero exit is an error naming the command and its output's tail.
    pub(crate) fn run(&self, args: &[&str]) -> Result<Output, String> {
        let out = Self::output_of(self.command(args), args)?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(format!(
                "git {} failed ({}): {}",
                args.first().copied().unwrap_or_default(),
                out.status,
                tail(&out)
            ))
        }
    }

    /// The project's main worktree: the parent of the common git directory when it is a
    /// `.git` directory, else this worktree.
    pub(crate) fn project_root(&self) -> Utf8PathBuf {
        let common = self
            .run(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        match common.map(Utf8PathBuf::from) {
            Some(dir) if dir.file_name() == Some(".git") && dir.is_absolute() => dir
                .parent()
                .map_or_else(|| self.root.clone(), Utf8Path::to_owned),
            _ => self.root.clone(),
        }
    }
}

/// A temporary index file in the git directory, removed when dropped.
struct PrivateIndex {
    path: Utf8PathBuf,
}

impl PrivateIndex {
    fn new(git: &Git) -> Result<PrivateIndex, String> {
        let out = git.run(&["rev-parse", "--path-format=absolute", "--git-dir"])?;
        let dir = Utf8PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(PrivateIndex {
            path: dir.join(format!("handoff-checkpoint-{}.index", uuid::Uuid::new_v4())),
        })
    }

    fn output(&self, git: &Git, args: &[&str]) -> Result<Output, String> {
        let mut command = git.command(args);
        command.env("GIT_INDEX_FILE", &self.path);
        Git::output_of(command, args)
    }

    fn run(&self, git: &Git, args: &[&str]) -> Result<Output, String> {
        let out = self.output(git, args)?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(format!(
                "git {} failed ({}): {}",
                args.join(" "),
                out.status,
                tail(&out)
            ))
        }
    }
}

impl Drop for PrivateIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(format!("{}.lock", self.path));
    }
}
