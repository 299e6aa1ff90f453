//! What an agent CLI's own sandbox leaves in the repository: the fake Claude Code leaves the
//! empty mount points Claude Code 2.1.332 leaves (`HANDOFF_FAKE_LEFTOVERS=claude-sandbox`), and
//! a hostile one fills them (`hostile`). Bare mount points made during the run are swept and
//! listed in `policy.sandbox.artifacts`; anything with content, anything there before, any
//! other agent's, and any version outside the table stays evidence.

use std::collections::BTreeSet;
use std::path::Path;

use handoff_testkit::git_dir_paths;
use handoff_testkit::keys::{LEFTOVERS, VERSION};
use serde_json::Value;

use crate::support::{Run, Sandbox};

fn new_paths(before: &BTreeSet<String>, dir: &Path) -> Vec<String> {
    git_dir_paths(dir).difference(before).cloned().collect()
}

fn swept(result: &Value) -> Vec<String> {
    result["policy"]["sandbox"]["artifacts"]
        .as_array()
        .unwrap_or_else(|| panic!("no policy.sandbox.artifacts: {result}"))
        .iter()
        .map(|a| a["path"].as_str().unwrap().to_owned())
        .collect()
}

fn changed(run: &Run) -> Vec<String> {
    serde_json::from_value(run.json["git"]["changedFiles"].clone()).unwrap_or_default()
}

/// A sandbox whose fake Claude Code reports `version` and leaves `leftovers`.
fn claude(version: &str, leftovers: &str) -> Sandbox {
    let sb = Sandbox::new();
    sb.agents.set(&format!("{VERSION}@claude"), version);
    sb.agents.set(&format!("{LEFTOVERS}@claude"), leftovers);
    sb
}

/// What Claude Code 2.1.332 leaves in a main worktree's `.git`.
const MAIN_WORKTREE: [&str; 10] = [
    ".git/NOTES_MERGE_WORKTREE",
    ".git/config.worktree",
    ".git/glab-cli",
    ".git/info/.claude-sandbox-noreplace",
    ".git/objects/info/.claude-sandbox-noreplace",
    ".git/objects/info/alternates",
    ".git/objects/info/commit-graphs",
    ".git/objects/info/commit-graphs/.claude-sandbox-noreplace",
    ".git/remotes",
    ".git/worktrees",
];

fn main_worktree() -> Vec<&'static str> {
    MAIN_WORKTREE.to_vec()
}

#[test]
fn the_newest_claude_codes_mount_points_are_swept_after_a_review_and_a_build() {
    let sb = claude("2.1.332", "claude-sandbox");
    let git = sb.repo.path().join(".git");
    let before = git_dir_paths(&git);
    let review = sb.delegate("codex", "claude", "review", &[]);
    assert_eq!(review.code, 0, "{review:?}");
    assert!(changed(&review).is_empty(), "{review:?}");
    assert_eq!(swept(&review.json), main_worktree(), "{}", review.json);
    assert_eq!(new_paths(&before, &git), Vec::<String>::new());

    let build = sb.delegate("codex", "claude", "build", &[]);
    assert_eq!(build.code, 0, "{build:?}");
    assert_eq!(changed(&build), ["fake-build.txt"], "{build:?}");
    let flags = build.json["git"]["flags"].as_array().map_or(0, Vec::len);
    assert_eq!(flags, 0, "{}", build.json);
    assert_eq!(swept(&build.json), main_worktree());
    assert_eq!(new_paths(&before, &git), Vec::<String>::new());
}

#[test]
fn a_claude_code_older_than_the_table_leaves_its_paths_as_evidence() {
    // 2.1.197 left nothing: the same paths from it are not its sandbox's.
    let sb = claude("2.1.197", "claude-sandbox");
    let review = sb.delegate("codex", "claude", "review", &[]);
    assert_eq!(review.code, 10, "{review:?}");
    assert!(
        changed(&review).contains(&".git/config.worktree".to_owned()),
        "{review:?}"
    );
    assert_eq!(swept(&review.json), Vec::<String>::new());
    assert!(sb.repo.path().join(".git/config.worktree").exists());
}

#[test]
fn another_agents_run_never_sweeps_claude_codes_paths() {
    // Codex's sandbox leaves nothing: the same paths made during its run are its change.
    let sb = claude("2.1.332", "claude-sandbox");
    sb.agents
        .set(&format!("{LEFTOVERS}@codex"), "claude-sandbox");
    let review = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(review.code, 10, "{review:?}");
    assert!(
        changed(&review).contains(&".git/objects/info/alternates".to_owned()),
        "{review:?}"
    );
    assert!(review.json["policy"]["sandbox"]["artifacts"].is_null());
}

#[test]
fn a_hostile_agent_that_fills_the_mount_points_is_blocked_and_nothing_it_wrote_is_removed() {
    for mode in ["review", "build"] {
        let sb = claude("2.1.332", "hostile");
        let git = sb.repo.path().join(".git");
        let run = sb.delegate("codex", "claude", mode, &[]);
        assert_eq!(run.code, 10, "{mode}: {run:?}");
        let files = changed(&run);
        for path in [
            ".git/config.worktree",
            ".git/objects/info/alternates",
            ".git/glab-cli",
            ".git/NOTES_MERGE_WORKTREE",
            ".git/objects/info/commit-graphs",
        ] {
            assert!(
                files.contains(&path.to_owned()),
                "{mode}: {path} in {files:?}"
            );
        }
        let flagged: Vec<&str> = run.json["git"]["flags"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == "sandbox-mount-point")
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert!(flagged.contains(&".git/glab-cli"), "{mode}: {run:?}");
        let kept = run.json["policy"]["sandbox"]["artifactsKept"]
            .as_array()
            .unwrap_or_else(|| panic!("{mode}: {}", run.json));
        assert!(kept.len() >= 5, "{mode}: {kept:?}");
        assert_eq!(
            std::fs::read_to_string(git.join("glab-cli/config.yml")).unwrap(),
            "editor: /tmp/fake-agent-editor\n"
        );
        assert!(
            std::fs::metadata(git.join("config.worktree"))
                .unwrap()
                .len()
                > 0
        );
        if mode == "build" {
            let message = run.json["diagnostics"]["message"].as_str().unwrap();
            assert!(
                message.contains("added or changed what git runs"),
                "{message}"
            );
        }
    }
}

#[test]
fn mount_points_that_existed_before_the_run_are_left_alone() {
    let sb = claude("2.1.332", "claude-sandbox");
    let git = sb.repo.path().join(".git");
    std::fs::write(git.join("config.worktree"), "").unwrap();
    std::fs::create_dir(git.join("glab-cli")).unwrap();
    let review = sb.delegate("codex", "claude", "review", &[]);
    assert_eq!(review.code, 0, "{review:?}");
    let swept = swept(&review.json);
    assert!(
        !swept.contains(&".git/config.worktree".to_owned()),
        "{swept:?}"
    );
    assert!(!swept.contains(&".git/glab-cli".to_owned()), "{swept:?}");
    assert!(git.join("config.worktree").is_file());
    assert!(git.join("glab-cli").is_dir());
}

#[test]
fn a_linked_worktrees_own_git_directory_is_swept_too() {
    let sb = claude("2.1.332", "claude-sandbox");
    let linked = sb.root.join("linked");
    sb.repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "side",
        linked.to_str().unwrap(),
    ]);
    let common = sb.repo.path().join(".git");
    let before = git_dir_paths(&common);
    let ins = sb.instructions("Review this.");
    let run = sb.run(&[
        "run",
        "--caller-harness",
        "codex",
        "--harness",
        "claude",
        "--mode",
        "review",
        "--cwd",
        linked.to_str().unwrap(),
        "--instructions",
        &ins,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let swept = swept(&run.json);
    for own in [
        ".git/worktrees/linked/config.worktree",
        ".git/worktrees/linked/glab-cli",
        ".git/config.worktree",
        ".git/objects/info/alternates",
    ] {
        assert!(swept.contains(&own.to_owned()), "{own} in {swept:?}");
    }
    assert_eq!(new_paths(&before, &common), Vec::<String>::new());
    assert!(
        std::fs::symlink_metadata(linked.join(".git"))
            .unwrap()
            .is_file()
    );
}

#[test]
fn a_panel_with_claude_code_sweeps_once_every_member_is_gone() {
    let sb = claude("2.1.332", "claude-sandbox");
    let git = sb.repo.path().join(".git");
    let before = git_dir_paths(&git);
    let ins = sb.instructions("Is this fine?");
    let cwd = sb.cwd();
    let run = sb.run(&[
        "advice",
        "--caller-harness",
        "codex",
        "--harness",
        "codex,claude",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["status"], "succeeded", "{}", run.json);
    let members = run.json["members"].as_array().unwrap();
    let claude = members
        .iter()
        .find(|m| m["target"]["harness"] == "claude")
        .unwrap();
    assert_eq!(swept(claude), main_worktree(), "{claude}");
    let codex = members
        .iter()
        .find(|m| m["target"]["harness"] == "codex")
        .unwrap();
    assert!(codex["policy"]["sandbox"]["artifacts"].is_null(), "{codex}");
    assert_eq!(new_paths(&before, &git), Vec::<String>::new());
}

/// A continuation receiver's own sandbox: its mount points are swept after its turn and listed
/// in its receipt; a review receiver that fills them changed the worktree.
#[test]
fn a_claude_code_receiver_is_swept_after_its_turn_and_a_hostile_one_is_caught() {
    use crate::continuation::{continue_, sandbox};
    let sb = sandbox();
    sb.agents.set(&format!("{VERSION}@claude"), "2.1.332");
    sb.agents
        .set(&format!("{LEFTOVERS}@claude"), "claude-sandbox");
    let git = sb.repo.path().join(".git");
    let before = git_dir_paths(&git);
    let run = continue_(
        &sb,
        &["--from", "codex", "--to", "claude", "--role", "review"],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(
        run.json["receiver"]["worktreeUnchanged"], true,
        "{}",
        run.json
    );
    assert_eq!(
        swept(&run.json["receiver"]),
        main_worktree(),
        "{}",
        run.json["receiver"]
    );
    assert_eq!(new_paths(&before, &git), Vec::<String>::new());

    sb.agents.set(&format!("{LEFTOVERS}@claude"), "hostile");
    let run = continue_(&sb, &["--to", "claude", "--role", "review"]);
    assert_eq!(run.code, 10, "{run:#?}");
    assert_eq!(run.json["outcome"], "review-changed");
    let changed: Vec<String> =
        serde_json::from_value(run.json["receiver"]["changed"].clone()).unwrap();
    assert!(changed.contains(&".git/glab-cli".to_owned()), "{changed:?}");
    assert!(git.join("glab-cli/config.yml").is_file());
}

/// Nested advice through Claude Code: the worker's sandbox leaves its mount points before it
/// asks, the adviser on the live worktree is not blamed for them, and the root sweeps them.
#[test]
fn nested_advice_through_claude_code_succeeds_and_leaves_nothing() {
    use handoff_testkit::keys::ADVICE;
    let sb = claude("2.1.332", "claude-sandbox");
    sb.agents.set(ADVICE, "claude");
    let git = sb.repo.path().join(".git");
    let before = git_dir_paths(&git);
    let ins = sb.instructions("Review this; ask for advice if useful.");
    let cwd = sb.cwd();
    let run = sb.run(&[
        "run-with-advice",
        "--caller-harness",
        "codex",
        "--harness",
        "claude",
        "--mode",
        "review",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let nodes = run.json["dag"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{:#}", run.json["dag"]);
    assert!(
        nodes.iter().all(|n| n["state"] == "succeeded"),
        "{:#}",
        run.json["dag"]
    );
    assert_eq!(swept(&run.json), main_worktree(), "{}", run.json);
    assert_eq!(new_paths(&before, &git), Vec::<String>::new());
}
