//! `handoff checkpoint` and `handoff log` on scratch repositories, with the task store in the
//! sandbox.

use std::path::Path;

use crate::support::{Run, Sandbox};

fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    sb.repo.git(&["config", "user.name", "handoff test"]);
    sb.repo
        .git(&["config", "user.email", "test@example.invalid"]);
    sb.repo.git(&["config", "commit.gpgsign", "false"]);
    sb
}

/// `handoff <args>` with the store under `state`.
fn handoff_in(sb: &Sandbox, state: &Path, args: &[&str]) -> Run {
    let mut cmd = sb.command();
    cmd.env("XDG_STATE_HOME", state).args(args);
    sb.exec(&mut cmd)
}

fn handoff(sb: &Sandbox, args: &[&str]) -> Run {
    handoff_in(sb, &sb.root.join("state"), args)
}

fn checkpoint(sb: &Sandbox, extra: &[&str]) -> Run {
    let cwd = sb.cwd();
    let mut args = vec!["checkpoint", "--cwd", cwd.as_str()];
    args.extend(extra);
    handoff(sb, &args)
}

fn head(sb: &Sandbox) -> String {
    sb.repo.git(&["rev-parse", "HEAD"]).trim().to_owned()
}

fn strings(v: &serde_json::Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

#[test]
fn first_checkpoint_without_an_agent_is_refused() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    let before = head(&sb);
    let run = checkpoint(&sb, &["a.txt"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr
            .contains("first checkpoint of this worktree: pass --agent <provider>"),
        "{run:?}"
    );
    let run = checkpoint(&sb, &["a.txt", "--agent", "nope"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr.contains("\"nope\" is not a known agent"),
        "{run:?}"
    );
    let run = checkpoint(&sb, &["--agent", "claude"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr
            .contains("name the files to commit or pass --tracked")
    );
    assert_eq!(head(&sb), before);
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), "?? a.txt\n");
}

#[test]
fn named_paths_are_committed_alone_and_recorded() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    sb.repo.write("b.txt", "b\n");
    sb.repo.write("README.md", "# changed\n");
    let before = head(&sb);
    let run = checkpoint(
        &sb,
        &[
            "a.txt",
            "README.md",
            "--agent",
            "claude",
            "--model",
            "opus",
            "--message",
            "reviewed a",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let commit = head(&sb);
    assert_ne!(commit, before);
    assert_eq!(run.json["schemaVersion"], "handoff.checkpoint.v1");
    assert_eq!(run.json["commit"], commit.as_str());
    assert_eq!(strings(&run.json["committed"]), ["README.md", "a.txt"]);
    assert_eq!(strings(&run.json["uncommitted"]), ["b.txt"]);
    assert_eq!(run.json["message"], "reviewed a");
    assert_eq!(
        sb.repo
            .git(&["show", "--name-only", "--format=%s", "HEAD"])
            .trim(),
        "reviewed a\n\nREADME.md\na.txt"
    );
    // The user's index caught up: only the file left out shows.
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), "?? b.txt\n");

    let cwd = sb.cwd();
    let log = handoff(&sb, &["log", "--cwd", &cwd, "--json"]);
    assert_eq!(log.code, 0, "{log:?}");
    assert_eq!(log.json["task"]["id"], run.json["taskId"]);
    assert_eq!(log.json["task"]["agent"]["provider"], "claude");
    assert_eq!(log.json["task"]["branch"], "main");
    let timeline = log.json["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 1);
    let event = &timeline[0]["event"];
    assert_eq!(event["kind"], "checkpoint");
    assert_eq!(event["commit"], commit.as_str());
    assert_eq!(event["author"]["provider"], "claude");
    assert_eq!(event["author"]["model"], "opus");
    assert_eq!(strings(&event["committed"]), ["README.md", "a.txt"]);
    assert_eq!(strings(&event["uncommitted"]), ["b.txt"]);
}

#[test]
fn tracked_commits_every_tracked_change_with_the_tasks_agent() {
    let sb = sandbox();
    sb.repo.write("first.txt", "1\n");
    assert_eq!(checkpoint(&sb, &["first.txt", "--agent", "codex"]).code, 0);
    sb.repo.write("README.md", "# changed\n");
    sb.repo.write("first.txt", "2\n");
    sb.repo.write("new.txt", "new\n");
    let run = checkpoint(&sb, &["--tracked", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(strings(&run.json["committed"]), ["README.md", "first.txt"]);
    assert_eq!(strings(&run.json["uncommitted"]), ["new.txt"]);
    assert_eq!(
        sb.repo.git(&["log", "-1", "--format=%s"]).trim(),
        "handoff checkpoint"
    );
    let cwd = sb.cwd();
    let log = handoff(&sb, &["log", "--cwd", &cwd, "--json"]);
    let timeline = log.json["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 2);
    assert_eq!(timeline[1]["event"]["author"]["provider"], "codex");
}

#[test]
fn whitespace_errors_are_refused_and_nothing_changes() {
    let sb = sandbox();
    sb.repo.write("README.md", "# staged\n");
    sb.repo.git(&["add", "README.md"]);
    sb.repo.write("bad.txt", "trailing  \n");
    let before = head(&sb);
    let index = sb.repo.git(&["ls-files", "-s"]);
    let status = sb.repo.git(&["status", "--porcelain"]);
    let run = checkpoint(&sb, &["bad.txt", "--agent", "claude"]);
    assert_eq!(run.code, 5, "{run:?}");
    let last = run.stderr.lines().last().unwrap();
    assert!(last.starts_with("handoff: git diff --check:"), "{run:?}");
    assert!(last.contains("bad.txt:1: trailing whitespace"), "{run:?}");
    assert_eq!(head(&sb), before);
    assert_eq!(sb.repo.git(&["ls-files", "-s"]), index);
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), status);
}

#[test]
fn a_handoff_note_is_never_committed() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    sb.repo.write(
        "notes/handoff.md",
        "---\nschema: \"handoff.note.v1\"\nbranch: \"main\"\n---\n# Handoff\n",
    );
    let before = head(&sb);
    let run = checkpoint(&sb, &["a.txt", "notes", "--agent", "claude"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr
            .contains("'notes/handoff.md' is a handoff note (handoff.note.v1)"),
        "{run:?}"
    );
    assert_eq!(head(&sb), before);
    let cwd = sb.cwd();
    let log = handoff(&sb, &["log", "--cwd", &cwd]);
    assert_eq!(log.code, 5, "{log:?}");
    assert_eq!(
        log.stderr,
        "handoff: no task recorded for this worktree yet\n"
    );
}

#[test]
fn detached_head_is_refused() {
    let sb = sandbox();
    sb.repo.git(&["checkout", "-q", "--detach"]);
    sb.repo.write("README.md", "# changed\n");
    let run = checkpoint(&sb, &["--tracked", "--agent", "claude"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("HEAD is detached"), "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), " M README.md\n");
}

#[test]
fn paths_outside_the_worktree_are_refused() {
    let sb = sandbox();
    std::fs::write(sb.root.join("outside.txt"), "x\n").unwrap();
    let outside = sb.root.join("outside.txt");
    let before = head(&sb);
    for path in ["../outside.txt", outside.to_str().unwrap(), "missing.txt"] {
        let run = checkpoint(&sb, &[path, "--agent", "claude"]);
        assert_eq!(run.code, 5, "{path}: {run:?}");
        let last = run.stderr.lines().last().unwrap();
        assert!(
            last.contains("outside the worktree") || last.contains("does not exist"),
            "{path}: {run:?}"
        );
    }
    assert_eq!(head(&sb), before);
}

#[test]
fn log_prints_one_line_per_entry() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    let run = checkpoint(&sb, &["a.txt", "--agent", "grok", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let commit = head(&sb);
    let cwd = sb.cwd();
    let log = handoff(&sb, &["log", "--cwd", &cwd]);
    assert_eq!(log.code, 0, "{log:?}");
    let lines: Vec<&str> = log.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{log:?}");
    assert!(lines[0].starts_with(&format!(
        "task {} on main",
        run.json["taskId"].as_str().unwrap()
    )));
    assert!(lines[1].starts_with("1 "), "{log:?}");
    assert!(
        lines[1].ends_with(&format!("checkpoint {} by grok (1 files)", &commit[..12])),
        "{log:?}"
    );
    let task = run.json["taskId"].as_str().unwrap();
    let by_id = handoff(&sb, &["log", "--task", task, "--json"]);
    assert_eq!(by_id.code, 0, "{by_id:?}");
    assert_eq!(by_id.json["task"]["id"], task);
    let unknown = handoff(
        &sb,
        &["log", "--task", "task-00000000-0000-0000-0000-000000000000"],
    );
    assert_eq!(unknown.code, 5, "{unknown:?}");
}

#[test]
fn concurrent_checkpoints_on_two_repositories_share_one_store() {
    let (a, b) = (sandbox(), sandbox());
    let state = a.root.join("state");
    let mut children = Vec::new();
    for (sb, file) in [(&a, "one.txt"), (&b, "two.txt")] {
        sb.repo.write(file, "x\n");
        let mut cmd = sb.command();
        cmd.env("XDG_STATE_HOME", &state)
            .args([
                "checkpoint",
                "--cwd",
                &sb.cwd(),
                file,
                "--agent",
                "claude",
                "--json",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        children.push(cmd.spawn().unwrap());
    }
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let mut ids = Vec::new();
    for (sb, file) in [(&a, "one.txt"), (&b, "two.txt")] {
        let log = handoff_in(sb, &state, &["log", "--cwd", &sb.cwd(), "--json"]);
        assert_eq!(log.code, 0, "{log:?}");
        let timeline = log.json["timeline"].as_array().unwrap();
        assert_eq!(timeline.len(), 1);
        assert_eq!(strings(&timeline[0]["event"]["committed"]), [file]);
        assert_eq!(timeline[0]["event"]["commit"], head(sb).as_str());
        ids.push(log.json["task"]["id"].clone());
    }
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn a_failing_hook_fails_the_checkpoint_and_records_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let sb = sandbox();
    let hook = sb.repo.path().join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\necho 'lint says no' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    sb.repo.write("a.txt", "a\n");
    let before = head(&sb);
    let run = checkpoint(&sb, &["a.txt", "--agent", "claude"]);
    assert_eq!(run.code, 1, "{run:?}");
    let last = run.stderr.lines().last().unwrap();
    assert!(last.contains("git commit failed"), "{run:?}");
    assert!(last.contains("lint says no"), "{run:?}");
    assert_eq!(head(&sb), before);
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), "?? a.txt\n");
    let cwd = sb.cwd();
    assert_eq!(handoff(&sb, &["log", "--cwd", &cwd]).code, 5);
}

#[test]
fn an_unusable_store_is_refused_before_committing() {
    let sb = sandbox();
    let state = sb.root.join("bad-state");
    std::fs::create_dir_all(&state).unwrap();
    // The store's directory is a file: the store cannot be opened.
    std::fs::write(state.join("handoff"), "not a directory\n").unwrap();
    sb.repo.write("a.txt", "a\n");
    let before = head(&sb);
    let cwd = sb.cwd();
    let run = handoff_in(
        &sb,
        &state,
        &["checkpoint", "--cwd", &cwd, "a.txt", "--agent", "claude"],
    );
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr.lines().last().unwrap().contains("task store"),
        "{run:?}"
    );
    assert_eq!(head(&sb), before);
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), "?? a.txt\n");
}

/// Git variables in handoff's own environment (an agent's shell, a hook) cannot point its git
/// at another repository, index or object store, nor inject configuration.
#[test]
fn the_callers_git_variables_cannot_redirect_a_checkpoint() {
    let sb = sandbox();
    let decoy = Sandbox::new();
    let decoy_head = decoy.repo.git(&["rev-parse", "HEAD"]);
    let elsewhere = sb.root.join("objects-elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    sb.repo.write("a.txt", "a\n");
    let before = head(&sb);
    let cwd = sb.cwd();
    let decoy_git = decoy.repo.path().join(".git");
    let mut cmd = sb.command();
    cmd.env("XDG_STATE_HOME", sb.root.join("state"))
        .env("GIT_DIR", &decoy_git)
        .env("GIT_WORK_TREE", decoy.repo.path())
        .env("GIT_INDEX_FILE", decoy_git.join("index"))
        .env("GIT_OBJECT_DIRECTORY", &elsewhere)
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "user.name")
        .env("GIT_CONFIG_VALUE_0", "injected")
        .args([
            "checkpoint",
            "--cwd",
            &cwd,
            "--agent",
            "claude",
            "a.txt",
            "--json",
        ]);
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 0, "{run:?}");
    let commit = run.json["commit"].as_str().unwrap();
    assert_eq!(head(&sb), commit);
    assert_eq!(
        sb.repo.git(&["rev-parse", "HEAD~1"]).trim(),
        before.as_str()
    );
    assert_eq!(
        sb.repo.git(&["log", "-1", "--format=%an"]).trim(),
        "handoff test"
    );
    assert_eq!(decoy.repo.git(&["rev-parse", "HEAD"]), decoy_head);
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// The evidence is read from the worktree handoff was pointed at, whatever `GIT_*` variables
/// its caller set: a forged index or another worktree named in the environment change nothing.
#[test]
fn the_callers_git_variables_cannot_change_the_fingerprint() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    let decoy = Sandbox::new();
    decoy.repo.write("b.txt", "b\n");
    let cwd = sb.cwd();
    let plain = handoff(&sb, &["fingerprint", "--cwd", &cwd, "--json"]);
    assert_eq!(plain.code, 0, "{plain:?}");
    let decoy_git = decoy.repo.path().join(".git");
    let mut cmd = sb.command();
    cmd.env("GIT_DIR", &decoy_git)
        .env("GIT_WORK_TREE", decoy.repo.path())
        .env("GIT_INDEX_FILE", decoy_git.join("index"))
        .env("GIT_OBJECT_DIRECTORY", decoy_git.join("objects"))
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "core.excludesFile")
        .env("GIT_CONFIG_VALUE_0", "/dev/null")
        .args(["fingerprint", "--cwd", &cwd, "--json"]);
    let steered = sb.exec(&mut cmd);
    assert_eq!(steered.code, 0, "{steered:?}");
    assert_eq!(plain.json["digest"], steered.json["digest"], "{steered:?}");
    assert_eq!(steered.json["root"].as_str(), Some(cwd.as_str()));
}

/// A refused request changes nothing, the task store included: `checkpoint`, `attribute` and
/// `log` open it only once their arguments are checked.
#[test]
fn refusals_leave_no_task_store_behind() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    let state = sb.root.join("fresh-state");
    let cwd = sb.cwd();
    for args in [
        vec![
            "checkpoint",
            "--json",
            "--cwd",
            "relative",
            "--agent",
            "claude",
            "a.txt",
        ],
        vec![
            "checkpoint",
            "--json",
            "--cwd",
            cwd.as_str(),
            "--agent",
            "nope",
            "a.txt",
        ],
        vec![
            "checkpoint",
            "--json",
            "--cwd",
            cwd.as_str(),
            "--agent",
            "claude",
            "missing.txt",
        ],
        vec![
            "checkpoint",
            "--json",
            "--cwd",
            cwd.as_str(),
            "--agent",
            "claude",
            "../outside",
        ],
        vec!["attribute", "--task", "not-a-task"],
        vec!["attribute", "--cwd", "relative"],
        vec!["log", "--task", "not-a-task"],
        vec!["log", "--cwd", "relative"],
    ] {
        let run = handoff_in(&sb, &state, &args);
        assert_eq!(run.code, 5, "{args:?}: {run:?}");
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {run:?}");
        assert!(!state.exists(), "{args:?} made {}", state.display());
    }
    // The first accepted request makes it.
    let run = handoff_in(
        &sb,
        &state,
        &["checkpoint", "--cwd", &cwd, "--agent", "claude", "a.txt"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(state.join("handoff").is_dir());
}

/// An agent can write `.git/config`: an fsmonitor it names there must neither run (outside any
/// sandbox) nor decide what a checkpoint sees as changed.
#[test]
fn a_planted_fsmonitor_neither_runs_nor_hides_a_change() {
    use std::os::unix::fs::PermissionsExt;

    let sb = sandbox();
    let marker = sb.root.join("fsmonitor-ran");
    let hook = sb.root.join("fsmonitor.sh");
    // Claims that nothing changed, and leaves a trace.
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ntouch '{}'\nprintf 'token\\0'\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    sb.repo
        .git(&["config", "core.fsmonitor", &hook.to_string_lossy()]);
    sb.repo.write("README.md", "# changed behind git's back\n");
    let run = checkpoint(&sb, &["--tracked", "--agent", "claude", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(strings(&run.json["committed"]), ["README.md"]);
    assert!(!marker.exists(), "the planted fsmonitor ran");
}

#[test]
fn a_machine_without_a_git_identity_is_refused_before_anything_changes() {
    let sb = Sandbox::new();
    // No name or email anywhere, and no guessing one from the host name.
    sb.repo.git(&["config", "user.useConfigOnly", "true"]);
    sb.repo.write("a.txt", "a\n");
    let before = head(&sb);
    let run = checkpoint(&sb, &["a.txt", "--agent", "claude"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr.contains("git has no identity") && run.stderr.contains("user.email"),
        "{run:?}"
    );
    assert_eq!(head(&sb), before);
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), "?? a.txt\n");
}
