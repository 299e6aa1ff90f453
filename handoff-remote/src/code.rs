//! The code's way there and back, by git over ssh: the task's commit pushed to the host's
//! repository of the project, a writing run's change fetched back onto a local branch and
//! applied to the worktree as a local run would have left it (uncommitted).

use std::io::Write as _;
use std::process::Stdio;

use handoff_git::{Git, split_z};

use crate::link::Link;

/// The project's key on hosts: the worktree's directory name (letters, digits, `.`, `_`, `-`)
/// and the first 12 digits of its first commit.
pub(crate) fn project_key(git: &Git) -> Result<String, String> {
    let first = git
        .text(&["rev-list", "--max-parents=0", "HEAD"])
        .map_err(|e| format!("cannot read the repository's first commit: {e}"))?;
    let first: String = first
        .lines()
        .last()
        .unwrap_or_default()
        .chars()
        .take(12)
        .collect();
    let name: String = git
        .root()
        .file_name()
        .unwrap_or("repo")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let name = name.trim_start_matches(['.', '-']);
    let name = if name.is_empty() { "repo" } else { name };
    Ok(format!("{name}-{first}"))
}

/// Pushes `commit` to `refs/handoff/runs/<run>` of `repo` on the host: no branch of the
/// user's remotes is touched.
pub(crate) fn push(
    git: &Git,
    link: &Link,
    repo: &str,
    commit: &str,
    run: &str,
) -> Result<(), String> {
    let refspec = format!("{commit}:refs/handoff/runs/{run}");
    let url = link.git_url(repo);
    let mut args: Vec<&str> = Vec::new();
    let settings = link.git_ssh_settings();
    args.extend(settings.iter().map(String::as_str));
    args.extend(["push", "-q", "--no-verify", "--", &url, &refspec]);
    git.run(&args).map(|_| ()).map_err(|e| {
        format!(
            "cannot push the task's commit to {}: {e}",
            link.host.label()
        )
    })
}

/// Fetches `refs/heads/handoff/<run>` of `repo` on the host into the local branch
/// `handoff/<run>`; returns its commit.
pub(crate) fn fetch(git: &Git, link: &Link, repo: &str, run: &str) -> Result<String, String> {
    let refspec = format!("+refs/heads/handoff/{run}:refs/heads/handoff/{run}");
    let url = link.git_url(repo);
    let mut args: Vec<&str> = Vec::new();
    let settings = link.git_ssh_settings();
    args.extend(settings.iter().map(String::as_str));
    args.extend([
        "fetch",
        "-q",
        "--no-tags",
        "--no-write-fetch-head",
        "--",
        &url,
        &refspec,
    ]);
    git.run(&args)
        .map_err(|e| format!("cannot fetch the change from {}: {e}", link.host.label()))?;
    git.commit_id(&format!("refs/heads/handoff/{run}"))
        .ok_or_else(|| "the fetched branch is not there".to_owned())
}

/// The paths that differ between two commits, sorted.
pub(crate) fn changed_between(git: &Git, from: &str, to: &str) -> Result<Vec<String>, String> {
    let out = git
        .run(&["diff", "--name-only", "--no-renames", "-z", from, to])
        .map_err(|e| e.to_string())?;
    let mut files = split_z(&out.stdout);
    files.sort();
    Ok(files)
}

/// Applies the change from `from` to `to` to the worktree only (the index untouched), as the
/// agent would have left it here.
pub(crate) fn apply(git: &Git, from: &str, to: &str) -> Result<(), String> {
    let diff = git
        .run(&["diff", "--binary", "--no-renames", "--full-index", from, to])
        .map_err(|e| format!("cannot read the change: {e}"))?;
    let mut cmd = git.command(&["apply", "--whitespace=nowarn", "-"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run git apply: {e}"))?;
    if let Some(mut input) = child.stdin.take() {
        input
            .write_all(&diff.stdout)
            .map_err(|e| format!("cannot run git apply: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot run git apply: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git apply failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Deletes the local branch `handoff/<run>`.
pub(crate) fn delete_branch(git: &Git, run: &str) -> Result<(), String> {
    git.run(&["update-ref", "-d", &format!("refs/heads/handoff/{run}")])
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Points the local branch `handoff/<run>` at `commit` again.
pub(crate) fn keep_branch(git: &Git, run: &str, commit: &str) -> Result<(), String> {
    git.run(&["update-ref", &format!("refs/heads/handoff/{run}"), commit])
        .map(|_| ())
        .map_err(|e| e.to_string())
}
