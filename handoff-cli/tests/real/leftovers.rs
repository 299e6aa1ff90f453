//! What the agents' own sandboxes leave in the repository: a review, a build and a panel leave
//! nothing new under `.git` (the mount points a CLI's sandbox makes are swept and listed in
//! `policy.sandbox.artifacts`), in the main worktree and in a linked one.

use std::collections::BTreeSet;

use handoff_testkit::git_dir_paths;
use handoff_testkit::model_server::{Script, Step, provider_output};
use serde_json::Value;

use super::{Rig, clis};

/// What appeared under `.git`, but OpenCode's project id (`opencode`, the id of the root
/// commit), which OpenCode 1.18 writes in every repository it runs in, with or without handoff
/// (`opencode debug config` alone writes it): its cache, not a sandbox's mount point.
fn new_paths(before: &BTreeSet<String>, after: &BTreeSet<String>) -> Vec<String> {
    after
        .difference(before)
        .filter(|p| p.as_str() != "opencode")
        .cloned()
        .collect()
}

/// The artifacts a result's (or a panel member's) receipt lists as swept.
fn artifacts(result: &Value) -> Vec<String> {
    result["policy"]["sandbox"]["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["path"].as_str().map(str::to_owned))
        .collect()
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn a_review_and_a_build_leave_nothing_new_under_git() {
    for cli in clis() {
        let rig = Rig::new(cli, Script::text("unused"));
        let git = rig.repo.path().join(".git");
        let listing = rig.file("listing.txt");
        let before = git_dir_paths(&git);
        rig.server.set_script(Script::new([
            Step::shell("ls -a"),
            Step::Answer(provider_output("reviewed")),
        ]));
        let review = rig.run("review", &[]);
        let left = new_paths(&before, &git_dir_paths(&git));
        eprintln!(
            "{cli} review left {left:?}, swept {:?}",
            artifacts(&review.json)
        );
        assert_eq!(review.code, 0, "{cli} review: {}", review.json);
        assert!(review.changed().is_empty(), "{cli}: {:?}", review.changed());
        assert!(left.is_empty(), "{cli}: a review left {left:?} under .git");

        rig.server.set_script(Script::new([
            Step::shell(format!("ls -a > {listing}")),
            Step::Answer(provider_output("built")),
        ]));
        let build = rig.run("build", &[]);
        assert_eq!(build.code, 0, "{cli} build: {}", build.json);
        assert_eq!(build.changed(), ["listing.txt"], "{cli}: {}", build.json);
        let left = new_paths(&before, &git_dir_paths(&git));
        assert!(left.is_empty(), "{cli}: a build left {left:?} under .git");
    }
}

/// In a linked worktree (`.git` a file), the same: nothing new in its git directory or in the
/// repository's common one.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn a_review_in_a_linked_worktree_leaves_nothing_new_under_git() {
    for cli in clis() {
        let mut rig = Rig::new(cli, Script::text("unused"));
        let linked = rig.root.join("linked");
        rig.repo.git(&[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            linked.to_str().unwrap(),
        ]);
        let common = rig.repo.path().join(".git");
        let before = git_dir_paths(&common);
        rig.server.set_script(Script::new([
            Step::shell("ls -a"),
            Step::Answer(provider_output("reviewed")),
        ]));
        rig.cwd = Some(linked.clone());
        let review = rig.run("review", &[]);
        let left = new_paths(&before, &git_dir_paths(&common));
        eprintln!(
            "{cli} linked review left {left:?}, swept {:?}",
            artifacts(&review.json)
        );
        assert_eq!(review.code, 0, "{cli} review: {}", review.json);
        assert!(left.is_empty(), "{cli}: a review left {left:?} under .git");
        let dot_git = std::fs::symlink_metadata(linked.join(".git")).unwrap();
        assert!(
            dot_git.is_file(),
            "{cli}: the linked worktree's .git is a file"
        );
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn a_panel_with_claude_code_leaves_nothing_new_under_git() {
    let rig = Rig::new("claude", Script::answer(provider_output("fine")));
    let git = rig.repo.path().join(".git");
    let before = git_dir_paths(&git);
    rig.server.set_script(Script::new([
        Step::shell("ls -a"),
        Step::Answer(provider_output("fine")),
    ]));
    let ins = rig.root.join("private/question.txt");
    std::fs::write(&ins, "Is this fine?").unwrap();
    let out = rig
        .command()
        .args(["advice", "--caller-harness", "codex"])
        .args(["--harness", "claude,codex"])
        .arg("--cwd")
        .arg(rig.repo.path())
        .arg("--instructions")
        .arg(&ins)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let panel: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON line ({e}): {stdout}"));
    assert_eq!(out.status.code(), Some(0), "{panel:#}");
    assert_eq!(panel["status"], "succeeded", "{panel:#}");
    let left = new_paths(&before, &git_dir_paths(&git));
    assert!(left.is_empty(), "a panel left {left:?} under .git");
}
