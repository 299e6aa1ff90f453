//! Phase 1: everything that can be checked without changing anything.

use std::io::Read;

use camino::Utf8PathBuf;
use handoff_core::{
    ContinueMessage, ContinueResult, ContinueTarget, GitRemote, MAX_NOTE_BYTES, Note, Route, Task,
    TaskAgent, check_cwd, check_model, check_note, decode_note, parse_note, read_note,
    valid_account_name,
};
use handoff_git::{Git, split_z};

use super::{ContinueContext, ContinueRequest, NoteInput};
use crate::checkpoint::{Prepared, is_note, known_provider};
use crate::error::{OrReject, Rejection};
use crate::trust::TaskTrust;

/// File names that are never committed by a checkpoint when only staged.
const SECRET_NAMES: [&str; 8] = [
    ".env",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "credentials.json",
];
const SECRET_SUFFIXES: [&str; 4] = [".pem", ".key", ".p12", ".pfx"];

/// Everything validated, before the first change.
pub(super) struct Plan {
    pub git: Git,
    pub root: Utf8PathBuf,
    pub cwd: Utf8PathBuf,
    pub branch: String,
    pub head: String,
    pub task: Option<Task>,
    pub source: TaskAgent,
    pub target: ContinueTarget,
    pub route: Route,
    pub prepared: Prepared,
    pub uncommitted: Vec<String>,
    pub push_remote: Option<String>,
    pub new_thread: Option<(Utf8PathBuf, String)>,
    pub note: Note,
    pub note_text: String,
    pub git_remote: Option<GitRemote>,
    pub note_dir: Utf8PathBuf,
    pub message: Option<String>,
    /// What the task trusts of the worktree's configuration.
    pub trust: TaskTrust,
}

/// Checks the request, the note, the repository and the task; fills in what the result can
/// already say.
pub(super) fn validate(
    req: &ContinueRequest,
    ctx: &ContinueContext<'_>,
    result: &mut ContinueResult,
    known: &mut Vec<String>,
) -> Result<Plan, Rejection> {
    let registry = ctx.engine.registry();
    let cwd = check_cwd(&req.cwd).rejected("--cwd")?;
    let to = known_provider(registry, "--to", req.to.as_deref().unwrap_or_default())?;
    if let Some(m) = &req.model {
        check_model(m).rejected("--model")?;
    }
    if let Some(m) = &req.from_model {
        check_model(m)
            .map_err(|e| e.replace("--model", "--from-model"))
            .rejected("--from-model")?;
    }
    if let Some(a) = &req.account
        && !valid_account_name(a)
    {
        return Err(Rejection::new(
            "--account",
            format!("--account: invalid account name '{a}'"),
        ));
    }
    if let Some(e) = &req.effort
        && e.trim().is_empty()
    {
        return Err(Rejection::new("--effort", "--effort must not be empty"));
    }
    if let Some(m) = &req.message
        && m.trim().is_empty()
    {
        return Err(Rejection::new("--message", "--message must not be empty"));
    }
    let message = req.message.clone();
    result.message = message
        .clone()
        .map(|text| ContinueMessage { text, sent: false });

    // The note.
    let label = req.note.label();
    let text = match &req.note {
        NoteInput::Stdin => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .take(MAX_NOTE_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("note -: cannot read stdin: {e}"))
                .rejected("note")?;
            decode_note(&bytes)
                .map(str::to_owned)
                .map_err(|e| format!("note -: {e}"))
                .rejected("note")?
        }
        NoteInput::Bytes { bytes, .. } => decode_note(bytes)
            .map(str::to_owned)
            .map_err(|e| format!("note {label}: {e}"))
            .rejected("note")?,
        NoteInput::File(path) => read_note(std::path::Path::new(path))
            .map_err(|e| format!("note {path}: {e}"))
            .rejected("note")?,
    };
    // A value the note or the message shows as a secret (`DATABASE_PASSWORD=…`) is masked
    // wherever the continuation prints or keeps it, alone too.
    known.extend(handoff_core::Masker::recognised(&text));
    if let Some(m) = &req.message {
        known.extend(handoff_core::Masker::recognised(m));
    }
    handoff_core::Masker::try_new(known.iter())
        .map_err(|e| e.to_string())
        .rejected("masking")?;
    let note = parse_note(&text);
    check_note(&note)
        .map_err(|errors| format!("note {label}: {errors}"))
        .rejected("note")?;

    // The repository.
    let state = handoff_git::repo_state(&cwd).rejected("repository")?;
    let root = state.repository.clone();
    let Some(branch) = state.branch.clone() else {
        return Err(Rejection::new(
            "repository",
            format!(
                "HEAD is detached in '{root}': check out the branch the work is on, then continue"
            ),
        ));
    };
    let Some(head) = state.head.clone() else {
        return Err(Rejection::new(
            "repository",
            format!(
                "branch '{branch}' in '{root}' has no commit yet: commit the work, then continue"
            ),
        ));
    };
    // The task and who has it.
    let project_root = Git::new(root.clone()).project_root();
    let task = ctx
        .store
        .task_at(&root, &project_root)
        .rejected("task store")?;
    result.task_id = task.as_ref().map(|t| t.id.clone());
    let from = match &req.from {
        Some(f) => Some(known_provider(registry, "--from", f)?),
        None => None,
    };
    let source = match (&task, from) {
        (Some(t), Some(f)) if f != t.agent.provider => {
            return Err(Rejection::new(
                "--from",
                format!(
                    "the task {} is with {}, not {f}: leave --from out or continue from {}",
                    t.id, t.agent.provider, t.agent.provider
                ),
            ));
        }
        (Some(t), _) => TaskAgent {
            model: req.from_model.clone().or_else(|| t.agent.model.clone()),
            ..t.agent.clone()
        },
        (None, Some(f)) => TaskAgent {
            provider: f,
            model: req.from_model.clone(),
            account: None,
        },
        (None, None) => {
            return Err(Rejection::new(
                "--from",
                "first handoff of this worktree: pass --from <provider> (the agent that has the task now)",
            ));
        }
    };
    result.source = Some(source.clone());

    // What the task trusts: the checkpoint's git runs with it, and a receiver is not started
    // on agent configuration that changed since the task's first event.
    let trust = TaskTrust::read(ctx.store, task.as_ref(), &root)?;
    let git = trust.git(&root, req.run_hooks);
    if !req.note_only {
        trust.check_receiver(req.trust_project_config)?;
    }
    let target = ContinueTarget {
        provider: to.clone(),
        model: req.model.clone(),
        effort: req.effort.clone(),
        account: req.account.clone(),
        role: req.role,
    };
    result.target = Some(target.clone());
    let other_account =
        to == source.provider && req.account.is_some() && req.account != source.account;
    let route = if req.note_only {
        Route::NoteOnly
    } else if req.new_thread || other_account {
        Route::NewThread
    } else {
        Route::SameThread
    };
    result.route = Some(route);

    // What the checkpoint commits: tracked changes and staged files.
    let tracked = git
        .run(&["diff", "--name-only", "-z", "HEAD"])
        .rejected("repository")?;
    let staged = git
        .run(&["diff", "--cached", "--name-only", "-z", "HEAD"])
        .rejected("repository")?;
    let staged = split_z(&staged.stdout);
    for path in &staged {
        if is_note(&root.join(path)) {
            return Err(Rejection::new(
                "repository",
                format!(
                    "'{path}' is a handoff note and is staged: unstage it (git restore --staged '{path}'); notes are never committed"
                ),
            ));
        }
        if looks_secret(path) {
            return Err(Rejection::new(
                "repository",
                format!(
                    "'{path}' is staged and looks like a secret: unstage it or commit it yourself before continuing"
                ),
            ));
        }
    }
    let mut pathspecs = split_z(&tracked.stdout);
    pathspecs.extend(staged);
    pathspecs.sort();
    pathspecs.dedup();
    let prepared = Prepared::new(&git, &pathspecs)?;
    let uncommitted: Vec<String> = state
        .uncommitted
        .iter()
        .map(|c| c.path.clone())
        .filter(|p| !prepared.committed.contains(p))
        .collect();

    // push: a remote, and the note not staged.
    let push_remote = if req.push {
        let Some(remote) = state.remote.as_ref() else {
            return Err(Rejection::new(
                "--push",
                format!(
                    "--push: branch '{branch}' has no remote to push to (add one with git remote add, or leave out --push)"
                ),
            ));
        };
        // A push the runner would refuse (the repository's remote settings changed since the
        // task began) is refused now, before anything is committed.
        let refused = &git.neutralised().remote;
        if !refused.is_empty() {
            return Err(Rejection::new(
                "--push",
                format!(
                    "--push: git would not push while the repository's configuration changed \
                     since the task began: {} (review it, or leave out --push)",
                    refused.join(", ")
                ),
            ));
        }
        if let NoteInput::File(path) = &req.note {
            let note_abs = cwd.join(path);
            if let Ok(rel) = note_abs.strip_prefix(&root) {
                let listed = git
                    .run(&["diff", "--cached", "--name-only", "-z", "--", rel.as_str()])
                    .rejected("repository")?;
                if !listed.stdout.is_empty() {
                    return Err(Rejection::new(
                        "--push",
                        format!("--push: the note '{rel}' is staged; unstage it before pushing"),
                    ));
                }
            }
        }
        Some(remote.name.clone())
    } else {
        None
    };

    // new thread: a fresh worktree path and branch.
    let new_thread = if route == Route::NewThread {
        let short = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let name = root.file_name().unwrap_or("worktree");
        let parent = root.parent().unwrap_or(&root);
        let path = parent.join(format!("{name}.{to}-{short}"));
        let new_branch = format!("handoff/{to}-{short}");
        if path.exists() {
            return Err(Rejection::new(
                "--new-thread",
                format!("--new-thread: '{path}' exists already"),
            ));
        }
        Some((path, new_branch))
    } else {
        None
    };

    Ok(Plan {
        git,
        root,
        cwd,
        branch,
        head,
        task,
        source,
        target,
        route,
        prepared,
        uncommitted,
        push_remote,
        new_thread,
        note,
        note_text: text,
        git_remote: state.remote.clone(),
        note_dir: ctx.state_dir.join("notes"),
        message,
        trust,
    })
}

/// Whether a staged path's name says it holds a secret.
pub(crate) fn looks_secret(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    SECRET_NAMES.contains(&name)
        || (name.starts_with(".env.") && !name.ends_with(".example") && !name.ends_with(".sample"))
        || SECRET_SUFFIXES.iter().any(|s| name.ends_with(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognised_by_name() {
        for p in [
            ".env",
            "a/.env.local",
            "keys/server.pem",
            "id_rsa",
            "x/credentials.json",
        ] {
            assert!(looks_secret(p), "{p}");
        }
        for p in [".env.example", "src/env.rs", "README.md", "keys.md"] {
            assert!(!looks_secret(p), "{p}");
        }
    }
}
