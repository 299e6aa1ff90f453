//! The `git status` view (`changes`, `change_counts`) of a fingerprint.

use handoff_core::{ChangeCounts, StatusChange};

use crate::support::{TestRepo, changed};

fn change(
    path: &str,
    staged: bool,
    unstaged: bool,
    untracked: bool,
    deleted: bool,
) -> StatusChange {
    StatusChange {
        path: path.to_owned(),
        staged,
        unstaged,
        untracked,
        deleted,
    }
}

#[test]
fn clean_repository_has_no_changes() {
    let repo = TestRepo::with_commit();
    repo.write("ignored.log", "x\n");
    let fp = repo.fingerprint();
    assert!(fp.changes.is_empty());
    assert_eq!(fp.change_counts, ChangeCounts::default());
}

#[test]
fn status_view_matches_git_status() {
    let repo = TestRepo::with_commit();
    repo.write("gone.txt", "gone\n");
    repo.write("keep.txt", "keep\n");
    repo.git(&["add", "-A"]);
    repo.commit("more");

    repo.write("a.txt", "modified\n"); // unstaged
    repo.write("src/lib.rs", "staged\n");
    repo.git(&["add", "src/lib.rs"]);
    repo.write("src/lib.rs", "staged, then modified again\n"); // staged and unstaged
    repo.write("b.txt", "new\n");
    repo.git(&["add", "b.txt"]); // staged addition
    repo.write("new/x.txt", "untracked\n"); // untracked
    repo.remove("gone.txt"); // deleted from the worktree
    repo.git(&["rm", "-q", "keep.txt"]); // staged deletion
    repo.write("debug.log", "ignored\n"); // not reported

    let fp = repo.fingerprint();
    assert_eq!(
        fp.changes,
        [
            change("a.txt", false, true, false, false),
            change("b.txt", true, false, false, false),
            change("gone.txt", false, true, false, true),
            change("keep.txt", true, false, false, false),
            change("new/x.txt", false, false, true, false),
            change("src/lib.rs", true, true, false, false),
        ]
    );
    assert_eq!(
        fp.change_counts,
        ChangeCounts {
            staged: 3,
            unstaged: 3,
            untracked: 1,
            deleted: 1,
        }
    );
    // Cross-check the set of paths with git itself.
    let mut porcelain: Vec<String> = repo
        .git(&["status", "--porcelain", "-uall"])
        .lines()
        .map(|line| line[3..].to_owned())
        .collect();
    porcelain.sort();
    let paths: Vec<&str> = fp.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(porcelain, paths);
    // A staged deletion leaves no entry behind; everything else has one.
    assert!(!fp.entries.contains_key("keep.txt"));
    assert!(fp.entries.contains_key("gone.txt"));
}

#[test]
fn intent_to_add_is_unstaged_not_staged() {
    let repo = TestRepo::with_commit();
    repo.write("later.txt", "later\n");
    let before = repo.fingerprint();
    repo.git(&["add", "--intent-to-add", "later.txt"]);
    let fp = repo.fingerprint();
    assert_eq!(fp.changes, [change("later.txt", false, true, false, false)]);
    assert_eq!(changed(&before, &fp), ["later.txt"]);
}

#[test]
fn merge_conflicts_are_fingerprinted_and_resolution_is_a_change() {
    let repo = TestRepo::with_commit();
    repo.git(&["switch", "-q", "-c", "side"]);
    repo.write("a.txt", "side\n");
    repo.git(&["commit", "-q", "-am", "side"]);
    repo.git(&["switch", "-q", "main"]);
    repo.write("a.txt", "main\n");
    repo.git(&["commit", "-q", "-am", "main"]);
    // The merge fails with a conflict; run it without the helper's success assertion.
    let status = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "merge",
            "-q",
            "side",
        ])
        .current_dir(repo.root())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap()
        .status;
    assert!(!status.success());

    let conflicted = repo.fingerprint();
    let state = &conflicted.entries["a.txt"];
    assert!(
        state.starts_with("tracked 1:100644 ") && state.contains(",2:") && state.contains(",3:"),
        "{state}"
    );
    assert!(
        conflicted
            .changes
            .iter()
            .any(|c| c.path == "a.txt" && c.unstaged)
    );
    assert_eq!(repo.fingerprint(), conflicted);

    repo.write("a.txt", "resolved\n");
    repo.git(&["add", "a.txt"]);
    let resolved = repo.fingerprint();
    assert_eq!(changed(&conflicted, &resolved), ["a.txt"]);
}
