//! Checkpoints: commit the reviewed files of a worktree with the git CLI and record the commit
//! in the task's timeline.
//!
//! Everything that can be refused is checked before anything is committed: the repository (a
//! branch with a commit), the selection (named paths inside the worktree, or every tracked
//! change), the task store (a task, or an agent to create one), handoff notes among the files,
//! and `git diff --check` on exactly what would be committed. The commit is built in a private
//! index, so the user's index is untouched unless the commit is made. Hooks run; nothing is
//! pushed.

use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, AgentRef, Checkpoint, Masker, NOTE_SCHEMA, NewTask, Record, Registry, SharedTaskStore,
    TaskAgent, TaskId, check_cwd, check_model,
};
use handoff_git::{Git, PrivateIndex, split_z, tail};

use crate::error::{CheckpointError, Failed, OrFail, OrReject, Phase, Rejection};
use crate::trust::TaskTrust;

/// The commit message when none is given.
pub const DEFAULT_MESSAGE: &str = "handoff checkpoint";

/// The JSON schema version of a checkpoint report.
pub const CHECKPOINT_SCHEMA: &str = "handoff.checkpoint.v1";

/// What to commit, and for whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRequest {
    /// Absolute path of a directory in the worktree; HEAD must be on a branch with a commit.
    pub cwd: String,
    /// The files to commit (relative to `cwd`, or absolute), inside the worktree.
    pub paths: Vec<String>,
    /// Commit every change to tracked files instead of naming them.
    pub tracked: bool,
    /// The commit message.
    pub message: String,
    /// The agent whose work this is (required for a worktree's first checkpoint).
    pub agent: Option<String>,
    /// The model that agent ran.
    pub model: Option<String>,
    /// Run the commit's hooks even when hooks or hook managers' configuration changed since
    /// the task's first event (a person's decision, after reviewing them).
    pub run_hooks: bool,
    /// The secrets to mask in what the checkpoint reports (file names included): the
    /// configuration's and the environment's ([`handoff_core::known_secrets`]). What the
    /// message shows as a secret is added.
    pub secrets: Vec<String>,
}

/// A checkpoint made and recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointReport {
    /// The task it was recorded in.
    pub task_id: TaskId,
    /// The new HEAD.
    pub commit: String,
    /// The branch it is on.
    pub branch: String,
    /// Who the work is attributed to.
    pub author: AgentRef,
    /// Repository-relative paths the commit holds.
    pub committed: Vec<String>,
    /// Paths still changed in the worktree after it.
    pub uncommitted: Vec<String>,
    /// The commit message.
    pub message: String,
    /// The hooks and hook-manager files that changed since the task's first event, because of
    /// which the commit ran no hooks (empty when hooks ran).
    pub hooks_skipped: Vec<String>,
}

impl CheckpointReport {
    /// The report as `handoff.checkpoint.v1` JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "schemaVersion": CHECKPOINT_SCHEMA,
            "taskId": self.task_id,
            "commit": self.commit,
            "committed": self.committed,
            "uncommitted": self.uncommitted,
            "message": self.message,
            "hooksSkipped": self.hooks_skipped,
        })
    }
}

/// Receives `git status --short` before a checkpoint is committed.
pub type StatusSink<'a> = &'a mut dyn FnMut(&[u8]);

/// Commits the selected files and records the checkpoint in `store` (opened once the request
/// and the selection are checked, so a refused request leaves no store behind). `show_status`
/// receives `git status --short` of the worktree before anything is committed.
///
/// Every path and message it reports or shows goes through the masking service (an agent can
/// name a file after a secret); the commit and the evidence are made on the real paths.
pub fn checkpoint(
    request: &CheckpointRequest,
    store: &SharedTaskStore,
    registry: &Registry,
    show_status: Option<StatusSink<'_>>,
) -> Result<CheckpointReport, CheckpointError> {
    let known = request
        .secrets
        .iter()
        .cloned()
        .chain(Masker::recognised(&request.message));
    let masker = Masker::try_new(known).map_err(|e| Rejection::new("masking", e.to_string()))?;
    let mut masked_status;
    let show_status: Option<StatusSink<'_>> = match show_status {
        Some(show) => {
            masked_status = |status: &[u8]| {
                let text = String::from_utf8_lossy(status);
                let masked = masker.mask(&text);
                if masked.count > 0 {
                    show(masked.text.as_bytes());
                } else {
                    show(status);
                }
            };
            Some(&mut masked_status)
        }
        None => None,
    };
    match commit_and_record(request, store, registry, show_status) {
        Ok(mut report) => {
            masker.mask_paths(&mut report.committed);
            masker.mask_paths(&mut report.uncommitted);
            masker.mask_paths(&mut report.hooks_skipped);
            report.message = masker.mask(&report.message).text.into_owned();
            Ok(report)
        }
        Err(CheckpointError::Rejected(mut r)) => {
            r.reason = masker.mask(&r.reason).text.into_owned();
            Err(CheckpointError::Rejected(r))
        }
        Err(CheckpointError::Failed(mut f)) => {
            f.message = masker.mask(&f.message).text.into_owned();
            Err(CheckpointError::Failed(f))
        }
    }
}

fn commit_and_record(
    request: &CheckpointRequest,
    store: &SharedTaskStore,
    registry: &Registry,
    show_status: Option<StatusSink<'_>>,
) -> Result<CheckpointReport, CheckpointError> {
    let cwd = check_cwd(&request.cwd).rejected("--cwd")?;
    let agent = match &request.agent {
        Some(a) => Some(known_provider(registry, "--agent", a)?),
        None => None,
    };
    if let Some(model) = &request.model {
        check_model(model).rejected("--model")?;
    }
    if request.message.trim().is_empty() {
        return Err(Rejection::new("--message", "--message must not be empty").into());
    }
    if request.paths.is_empty() && !request.tracked {
        return Err(Rejection::new("paths", "name the files to commit or pass --tracked").into());
    }

    let state = handoff_git::repo_state(&cwd).rejected("repository")?;
    let root = state.repository.clone();
    let Some(branch) = state.branch.clone() else {
        return Err(Rejection::new(
            "repository",
            format!(
                "HEAD is detached in '{root}': check out the branch the work is on, then checkpoint"
            ),
        )
        .into());
    };
    if state.head.is_none() {
        return Err(Rejection::new(
            "repository",
            format!(
                "branch '{branch}' in '{root}' has no commit yet: make the first commit by hand"
            ),
        )
        .into());
    }
    // Reads only, with nothing of the repository's configuration trusted.
    let git = Git::new(root.clone());

    if let Some(show) = show_status {
        let status = git.run(&["status", "--short"]).rejected("repository")?;
        show(&status.stdout);
    }

    // The selection, as repository-relative pathspecs.
    let pathspecs = if request.tracked {
        let out = git
            .run(&["diff", "--name-only", "-z", "HEAD"])
            .rejected("repository")?;
        split_z(&out.stdout)
    } else {
        let mut specs = Vec::new();
        for p in &request.paths {
            specs.push(select(&git, &cwd, p).rejected("paths")?);
        }
        specs
    };
    if pathspecs.is_empty() {
        return Err(Rejection::new("paths", "nothing to commit: no tracked file changed").into());
    }

    // The store and the task, before anything is committed; what the task trusts.
    let store = store.open().rejected("task store")?;
    let task = store
        .task_at(&root, &git.project_root())
        .rejected("task store")?;
    let trust = TaskTrust::read(&*store, task.as_ref(), &root)?;
    let git = trust.git(&root, request.run_hooks);
    let author_provider = match (&agent, &task) {
        (Some(a), _) => a.clone(),
        (None, Some(t)) => t.agent.provider.clone(),
        (None, None) => {
            return Err(Rejection::new(
                "--agent",
                "first checkpoint of this worktree: pass --agent <provider>",
            )
            .into());
        }
    };
    let author = AgentRef {
        provider: author_provider,
        model: request
            .model
            .clone()
            .or_else(|| task.as_ref().and_then(|t| t.agent.model.clone())),
    };

    let prepared = Prepared::new(&git, &pathspecs)?;
    if prepared.committed.is_empty() {
        return Err(Rejection::new(
            "paths",
            "nothing to commit: the named files do not differ from HEAD",
        )
        .into());
    }
    let committed = prepared.committed.clone();
    let head = prepared.commit(&git, &request.message)?;

    let after = handoff_git::repo_state(&root).failed(Phase::Checkpoint)?;
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
        trust.keep(&*store, &task.id)?;
        store.append(
            &task.id,
            &Record::Checkpoint(Checkpoint {
                commit: head.clone(),
                author: author.clone(),
                message: request.message.clone(),
                committed: committed.clone(),
                uncommitted: uncommitted.clone(),
            }),
        )?;
        Ok::<_, handoff_core::StoreError>(task)
    })();
    let task = recorded.map_err(|e| {
        Failed::new(
            Phase::Record,
            format!("committed {head} but could not record the checkpoint: {e}"),
        )
    })?;
    Ok(CheckpointReport {
        task_id: task.id,
        commit: head,
        branch,
        author,
        committed,
        uncommitted,
        message: request.message.clone(),
        hooks_skipped: trust.hooks_skipped(request.run_hooks),
    })
}

/// The uncommitted work of a worktree, as one commit: see [`work_commit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkCommit {
    /// The commit: HEAD itself when nothing is uncommitted.
    pub commit: String,
    /// HEAD when it was made (its parent).
    pub head: String,
    /// Repository-relative paths it holds beyond HEAD.
    pub committed: Vec<String>,
}

/// The worktree at `root` as it is (tracked changes, staged files, untracked files that are
/// not ignored) as one commit on HEAD, made in a private index with `commit-tree`: no branch
/// moves, no hook runs, the user's index and worktree are untouched. Refused as a checkpoint
/// is: a handoff note or a file whose name says it holds a secret among the files, `git diff
/// --check` problems, no identity to commit with, no commit yet.
pub fn work_commit(root: &Utf8Path, message: &str) -> Result<WorkCommit, Rejection> {
    let git = Git::new(root.to_owned());
    let head = git.head().map_err(|e| {
        Rejection::new(
            "repository",
            format!("'{root}' has no commit to start from: {e}"),
        )
    })?;
    let mut pathspecs = Vec::new();
    for args in [
        &["diff", "--name-only", "-z", "HEAD"][..],
        &["diff", "--cached", "--name-only", "-z", "HEAD"][..],
        &["ls-files", "-z", "--others", "--exclude-standard"][..],
    ] {
        let out = git.run(args).rejected("repository")?;
        pathspecs.extend(split_z(&out.stdout));
    }
    pathspecs.sort();
    pathspecs.dedup();
    for path in &pathspecs {
        if crate::continuation::looks_secret(path) {
            return Err(Rejection::new(
                "repository",
                format!(
                    "'{path}' is uncommitted and looks like a secret: it would leave this machine; ignore it, move it out of the worktree or commit it yourself first"
                ),
            ));
        }
    }
    let prepared = Prepared::new(&git, &pathspecs)?;
    if prepared.committed.is_empty() {
        return Ok(WorkCommit {
            commit: head.clone(),
            head,
            committed: Vec::new(),
        });
    }
    let committed = prepared.committed.clone();
    let commit = prepared
        .commit_detached(&git, message)
        .map_err(|e| Rejection::new("repository", e.message))?;
    Ok(WorkCommit {
        commit,
        head,
        committed,
    })
}

/// A provider the registry knows, or the rejection of `flag`.
pub(crate) fn known_provider(
    registry: &Registry,
    flag: &'static str,
    name: &str,
) -> Result<AgentId, Rejection> {
    handoff_core::registered(registry, flag, name).rejected(flag)
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
    pub(crate) fn new(git: &Git, pathspecs: &[String]) -> Result<Prepared, Rejection> {
        let index = git.private_index("checkpoint").rejected("repository")?;
        let staging = index.git();
        staging.run(&["read-tree", "HEAD"]).rejected("repository")?;
        if !pathspecs.is_empty() {
            let mut add = vec!["--literal-pathspecs", "add", "-A", "--"];
            add.extend(pathspecs.iter().map(String::as_str));
            staging.run(&add).rejected("paths")?;
        }
        let names = staging
            .run(&["diff", "--cached", "--name-only", "-z", "HEAD"])
            .rejected("repository")?;
        let committed = split_z(&names.stdout);
        for path in &committed {
            if is_note(&git.root().join(path)) {
                return Err(Rejection::new(
                    "paths",
                    format!(
                        "'{path}' is a handoff note ({NOTE_SCHEMA}); notes are never committed: leave it out"
                    ),
                ));
            }
        }
        let check = staging
            .output(&["diff", "--cached", "--check", "HEAD"])
            .rejected("repository")?;
        if !check.status.success() {
            let problems = String::from_utf8_lossy(&check.stdout);
            let lines: Vec<&str> = problems
                .lines()
                .filter(|l| !l.starts_with('+'))
                .map(str::trim)
                .collect();
            return Err(Rejection::new(
                "paths",
                format!("git diff --check: {}", lines.join("; ")),
            ));
        }
        if !committed.is_empty() {
            check_identity(git)?;
        }
        Ok(Prepared { index, committed })
    }

    /// Makes the commit without moving any branch or touching the worktree or the user's index
    /// (`write-tree` + `commit-tree` on HEAD; no hooks). Returns its id.
    pub(crate) fn commit_detached(self, git: &Git, message: &str) -> Result<String, Failed> {
        let tree = self
            .index
            .git()
            .text(&["write-tree"])
            .failed(Phase::Checkpoint)?;
        git.text(&["commit-tree", &tree, "-p", "HEAD", "-m", message])
            .failed(Phase::Checkpoint)
    }

    /// Commits (hooks run if the runner trusts them), then lets the user's index catch up with the new HEAD for the
    /// committed paths only. Returns the new HEAD.
    pub(crate) fn commit(self, git: &Git, message: &str) -> Result<String, Failed> {
        let commit = self
            .index
            .git()
            .output(&["commit", "-q", "-m", message])
            .failed(Phase::Checkpoint)?;
        if !commit.status.success() {
            return Err(Failed::new(
                Phase::Checkpoint,
                format!("git commit failed ({}): {}", commit.status, tail(&commit)),
            ));
        }
        drop(self.index);
        let mut reset = vec!["--literal-pathspecs", "reset", "-q", "HEAD", "--"];
        reset.extend(self.committed.iter().map(String::as_str));
        git.run(&reset).failed(Phase::Checkpoint)?;
        git.head().failed(Phase::Checkpoint)
    }
}

/// Refuses a commit git would refuse for want of an identity (`user.name`, `user.email`), before
/// anything changed.
fn check_identity(git: &Git) -> Result<(), Rejection> {
    for ident in ["GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"] {
        let out = git.output(&["var", ident]).rejected("repository")?;
        if !out.status.success() {
            return Err(Rejection::new(
                "repository",
                "git has no identity to commit the checkpoint with: set it with git config \
                 user.name \"…\" and git config user.email \"…\" (--global, or in this \
                 repository), then try again",
            ));
        }
    }
    Ok(())
}

/// A named path as a pathspec relative to the worktree root, or why it cannot be committed.
fn select(git: &Git, cwd: &Utf8Path, given: &str) -> Result<String, String> {
    if given.is_empty() || given.contains('\0') {
        return Err(format!("invalid path '{given}'"));
    }
    let absolute = normalize(&cwd.join(given));
    let root = normalize(git.root());
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
        let tracked = git
            .run(&["--literal-pathspecs", "ls-files", "-z", "--", rel.as_str()])
            .map_err(String::from)?;
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
