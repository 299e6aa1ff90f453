//! Trust starts at the task's first event: hooks, repository program settings and agent
//! configuration an agent left behind after that are not run by handoff's checkpoints, and no
//! receiver is started on them, unless a person says so.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use handoff_testkit::keys::SHELL;

use crate::continuation::{continue_, sandbox};
use crate::support::{Run, Sandbox};

/// A hook at `rel` that appends its name to `marker`.
fn hook(sb: &Sandbox, rel: &str, marker: &Path) -> PathBuf {
    let path = sb.repo.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let name = rel.rsplit('/').next().unwrap();
    std::fs::write(
        &path,
        format!("#!/bin/sh\necho {name} >> '{}'\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn ran(marker: &Path) -> String {
    std::fs::read_to_string(marker).unwrap_or_default()
}

fn checkpoint(sb: &Sandbox, extra: &[&str]) -> Run {
    let cwd = sb.cwd();
    let mut args = vec!["checkpoint", "--cwd", cwd.as_str(), "--json"];
    args.extend(extra);
    sb.run(&args)
}

fn head(sb: &Sandbox) -> String {
    sb.repo.git(&["rev-parse", "HEAD"]).trim().to_owned()
}

#[test]
fn hooks_there_at_the_first_event_run_and_hooks_planted_later_do_not() {
    let sb = sandbox();
    let marker = sb.root.join("hooks-ran");
    hook(&sb, ".git/hooks/pre-commit", &marker);
    sb.repo.write("a.txt", "one\n");
    let first = checkpoint(&sb, &["a.txt", "--agent", "claude"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(ran(&marker), "pre-commit\n", "the user's own hook runs");
    assert_eq!(first.json["hooksSkipped"], serde_json::json!([]));

    // What an agent leaves behind after the task began.
    hook(&sb, ".git/hooks/post-commit", &marker);
    std::fs::write(
        sb.repo.path().join(".git/hooks/pre-commit"),
        format!("#!/bin/sh\necho planted >> '{}'\n", marker.display()),
    )
    .unwrap();
    sb.repo.write("a.txt", "two\n");
    let second = checkpoint(&sb, &["a.txt"]);
    assert_eq!(second.code, 0, "{second:?}");
    assert_eq!(ran(&marker), "pre-commit\n", "a planted hook ran");
    assert_eq!(
        second.json["hooksSkipped"],
        serde_json::json!([".git/hooks/post-commit", ".git/hooks/pre-commit"])
    );
    assert_eq!(second.json["commit"], head(&sb));

    // Without --json a person is told, and pointed at the override.
    sb.repo.write("a.txt", "three\n");
    let cwd = sb.cwd();
    let plain = sb.run(&["checkpoint", "--cwd", &cwd, "a.txt"]);
    assert_eq!(plain.code, 0, "{plain:?}");
    assert!(
        plain
            .stdout
            .contains("hooks not run: changed since the task began")
            && plain.stdout.contains("--run-hooks"),
        "{plain:?}"
    );

    // A person who reviewed them runs them.
    sb.repo.write("a.txt", "four\n");
    let trusted = checkpoint(&sb, &["a.txt", "--run-hooks"]);
    assert_eq!(trusted.code, 0, "{trusted:?}");
    assert_eq!(ran(&marker), "pre-commit\nplanted\npost-commit\n");
    assert_eq!(trusted.json["hooksSkipped"], serde_json::json!([]));
}

#[test]
fn a_hook_planted_by_the_tasks_first_run_does_not_run_at_the_checkpoint() {
    // The first event is a delegated build; its "before" is what the task trusts. The build
    // plants a hook (and is blocked for it), and the hook stays behind.
    let sb = sandbox();
    let marker = sb.root.join("hooks-ran");
    let planted = sb.root.join("planted-hook");
    std::fs::write(
        &planted,
        format!("#!/bin/sh\necho planted >> '{}'\n", marker.display()),
    )
    .unwrap();
    sb.agents.set(
        SHELL,
        format!(
            "cp '{}' '{repo}/.git/hooks/pre-commit' && chmod +x '{repo}/.git/hooks/pre-commit' \
             && echo work > '{repo}/work.txt'",
            planted.display(),
            repo = sb.repo.path().display()
        ),
    );
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert!(sb.repo.path().join(".git/hooks/pre-commit").exists());

    let cp = checkpoint(&sb, &["work.txt"]);
    assert_eq!(cp.code, 0, "{cp:?}");
    assert_eq!(
        ran(&marker),
        "",
        "the planted hook ran outside every sandbox"
    );
    assert_eq!(
        cp.json["hooksSkipped"],
        serde_json::json!([".git/hooks/pre-commit"])
    );
}

#[test]
fn a_filter_configured_after_the_task_began_refuses_the_checkpoint_by_name() {
    let sb = sandbox();
    let marker = sb.root.join("filter-ran");
    sb.repo.write(".gitattributes", "*.txt filter=sneaky\n");
    sb.repo.write("a.txt", "one\n");
    let first = checkpoint(&sb, &[".gitattributes", "a.txt", "--agent", "claude"]);
    assert_eq!(first.code, 0, "{first:?}");

    sb.repo.git(&[
        "config",
        "filter.sneaky.clean",
        &format!("sh -c 'echo clean >> {}; cat'", marker.display()),
    ]);
    sb.repo.write("a.txt", "two\n");
    let before = head(&sb);
    let refused = checkpoint(&sb, &["a.txt"]);
    assert_eq!(refused.code, 5, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("filter.sneaky.clean in .git/config"),
        "{refused:?}"
    );
    assert_eq!(ran(&marker), "", "the repository's filter ran");
    assert_eq!(head(&sb), before, "something was committed");
}

#[test]
fn settings_there_at_the_first_event_stay_trusted() {
    // A repository-level filter the user set up before the task (git lfs install --local, say)
    // keeps working.
    let sb = sandbox();
    let marker = sb.root.join("filter-ran");
    sb.repo.git(&[
        "config",
        "filter.own.clean",
        &format!("sh -c 'echo clean >> {}; cat'", marker.display()),
    ]);
    sb.repo.write(".gitattributes", "*.txt filter=own\n");
    sb.repo.write("a.txt", "one\n");
    let first = checkpoint(&sb, &[".gitattributes", "a.txt", "--agent", "claude"]);
    assert_eq!(first.code, 0, "{first:?}");
    sb.repo.write("a.txt", "two\n");
    let second = checkpoint(&sb, &["a.txt"]);
    assert_eq!(second.code, 0, "{second:?}");
    assert!(
        ran(&marker).contains("clean"),
        "the user's filter did not run"
    );
}

#[test]
fn a_receiver_is_not_started_on_agent_configuration_changed_since_the_task_began() {
    let sb = sandbox();
    // The task's first event: a checkpoint.
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    11\n}\n");
    let cwd = sb.cwd();
    let first = sb.run(&[
        "checkpoint",
        "--cwd",
        &cwd,
        "--tracked",
        "--agent",
        "claude",
    ]);
    assert_eq!(first.code, 0, "{first:?}");

    // An agent writes configuration the receiver would load: an ignored local settings file
    // and a new MCP server.
    sb.repo.write(".gitignore", ".claude/settings.local.json\n");
    sb.repo.write(
        ".claude/settings.local.json",
        "{\"permissions\":{\"allow\":[\"Bash(*)\"]}}",
    );
    sb.repo.write(".mcp.json", "{\"mcpServers\":{}}");
    let refused = continue_(&sb, &["--to", "codex", "--dry-run"]);
    assert_eq!(refused.code, 5, "{refused:#?}");
    let text = refused.json["reason"].as_str().unwrap_or_default();
    assert!(
        text.contains(".claude/settings.local.json")
            && text.contains(".mcp.json")
            && text.contains("--trust-project-config"),
        "{refused:#?}"
    );

    let trusted = continue_(
        &sb,
        &["--to", "codex", "--dry-run", "--trust-project-config"],
    );
    assert_eq!(trusted.code, 0, "{trusted:#?}");
    // A note-only continuation starts no receiver, so it needs no trust.
    let note_only = continue_(&sb, &["--to", "codex", "--dry-run", "--note-only"]);
    assert_eq!(note_only.code, 0, "{note_only:#?}");
}

#[test]
fn a_filter_from_the_global_configuration_keeps_working_when_the_repository_redefines_it() {
    // git-lfs installed globally: the repository's own (changed) definition of the same filter
    // is replaced by the global one, not run and not refused.
    let sb = sandbox();
    let marker = sb.root.join("filter-ran");
    let home = sb.root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        format!(
            "[filter \"glob\"]\n\tclean = \"sh -c 'echo global >> {}; cat'\"\n",
            marker.display()
        ),
    )
    .unwrap();
    sb.repo.write(".gitattributes", "*.txt filter=glob\n");
    sb.repo.write("a.txt", "one\n");
    let first = checkpoint(&sb, &[".gitattributes", "a.txt", "--agent", "claude"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(ran(&marker).lines().next(), Some("global"));
    std::fs::remove_file(&marker).unwrap();

    sb.repo.git(&[
        "config",
        "filter.glob.clean",
        &format!("sh -c 'echo repository >> {}; cat'", marker.display()),
    ]);
    sb.repo.write("a.txt", "two\n");
    let second = checkpoint(&sb, &["a.txt"]);
    assert_eq!(second.code, 0, "{second:?}");
    let ran = ran(&marker);
    assert!(ran.contains("global"), "{ran}");
    assert!(
        !ran.contains("repository"),
        "the repository's filter ran: {ran}"
    );
}

#[test]
fn continue_without_a_git_identity_is_refused_before_anything_changes() {
    let sb = sandbox();
    for key in ["user.name", "user.email"] {
        sb.repo.git(&["config", "--unset", key]);
    }
    sb.repo.git(&["config", "user.useConfigOnly", "true"]);
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    12\n}\n");
    let before = head(&sb);
    let run = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(
        run.json["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("git has no identity"),
        "{run:#?}"
    );
    assert_eq!(head(&sb), before);
}

#[test]
fn redirecting_the_worktree_through_a_link_does_not_start_a_new_trusting_task() {
    let sb = sandbox();
    let marker = sb.root.join("hooks-ran");
    sb.repo.write("a.txt", "one\n");
    let first = checkpoint(&sb, &["a.txt", "--agent", "claude"]);
    assert_eq!(first.code, 0, "{first:?}");

    hook(&sb, ".git/hooks/pre-commit", &marker);
    std::os::unix::fs::symlink("..", sb.repo.path().join(".git/wt")).unwrap();
    sb.repo.git(&["config", "core.worktree", "wt"]);
    sb.repo.write("a.txt", "two\n");
    let second = checkpoint(&sb, &["--tracked"]);
    assert_eq!(ran(&marker), "", "the planted hook ran: {second:?}");
    assert_eq!(second.code, 5, "{second:?}");
    assert!(
        second.stderr.contains("core.worktree in .git/config"),
        "{second:?}"
    );
}

#[test]
fn a_push_git_would_refuse_is_refused_before_the_checkpoint_is_committed() {
    let sb = sandbox();
    sb.repo
        .git(&["remote", "add", "origin", "https://example.com/r.git"]);
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    12\n}\n");
    let cwd = sb.cwd();
    let first = sb.run(&[
        "checkpoint",
        "--cwd",
        &cwd,
        "--tracked",
        "--agent",
        "claude",
    ]);
    assert_eq!(first.code, 0, "{first:?}");
    // After the task began, the remote is rewritten to a repository on this machine.
    sb.repo.git(&[
        "config",
        "url./tmp/evil.git.insteadOf",
        "https://example.com/r.git",
    ]);
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    13\n}\n");
    let before = head(&sb);
    let refused = continue_(&sb, &["--to", "codex", "--push"]);
    assert_eq!(refused.code, 5, "{refused:#?}");
    let reason = refused.json["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("--push: git would not push") && reason.contains("insteadof"),
        "{refused:#?}"
    );
    assert_eq!(head(&sb), before, "nothing was committed");
}
