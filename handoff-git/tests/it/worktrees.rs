//! Linked worktrees: refs another worktree has checked out are left out, and said so.

use camino::Utf8PathBuf;
use handoff_core::{Fingerprint, Workspace};
use handoff_git::GitWorkspace;

use crate::support::{TestRepo, changed, git_in};

struct Linked {
    repo: TestRepo,
    _dir: tempfile::TempDir,
    linked: Utf8PathBuf,
}

/// A repository with a linked worktree on branch `side`.
fn linked() -> Linked {
    let repo = TestRepo::with_commit();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wt");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        path.to_str().unwrap(),
        "-b",
        "side",
    ]);
    let linked = Utf8PathBuf::from_path_buf(path.canonicalize().unwrap()).unwrap();
    Linked {
        repo,
        _dir: dir,
        linked,
    }
}

fn fingerprint(dir: &Utf8PathBuf) -> Fingerprint {
    GitWorkspace::new().fingerprint(dir).unwrap()
}

#[test]
fn a_commit_in_a_sibling_worktree_does_not_change_this_one() {
    let l = linked();
    let before = l.repo.fingerprint();
    assert_eq!(before.excluded_refs, ["refs/heads/side"]);
    assert!(!before.entries.contains_key(".git/refs/heads/side"));
    assert!(before.entries.contains_key(".git/worktrees/wt"));

    std::fs::write(l.linked.join("a.txt"), "work in the sibling\n").unwrap();
    git_in(
        l.linked.as_std_path(),
        &["commit", "-q", "-am", "sibling work"],
    );
    let after = l.repo.fingerprint();
    assert!(changed(&before, &after).is_empty());
    assert!(!before.compare(&after).changed);
}

#[test]
fn the_main_worktrees_branch_is_left_out_of_the_linked_one() {
    let l = linked();
    let before = fingerprint(&l.linked);
    assert_eq!(before.excluded_refs, ["refs/heads/main"]);
    assert_eq!(&before.entries[".git/HEAD"], "ref refs/heads/side");
    assert!(before.entries.contains_key(".git/refs/heads/side"));

    l.repo.commit("main moves on");
    let after = fingerprint(&l.linked);
    assert!(changed(&before, &after).is_empty());

    // Its own commits are changes (of the branch, and of the file committed).
    std::fs::write(l.linked.join("a.txt"), "here\n").unwrap();
    git_in(l.linked.as_std_path(), &["commit", "-q", "-am", "own work"]);
    let own = fingerprint(&l.linked);
    assert_eq!(changed(&after, &own), [".git/refs/heads/side", "a.txt"]);
}

#[test]
fn adding_a_worktree_is_a_change() {
    let repo = TestRepo::with_commit();
    let before = repo.fingerprint();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        path.to_str().unwrap(),
        "-b",
        "other",
    ]);
    let after = repo.fingerprint();
    // The new branch is checked out over there: left out, and said so.
    assert_eq!(changed(&before, &after), [".git/worktrees/other"]);
    assert_eq!(after.excluded_refs, ["refs/heads/other"]);
}

#[test]
fn a_sibling_switching_branches_is_not_a_change_here() {
    let l = linked();
    l.repo.git(&["branch", "third"]);
    let before = l.repo.fingerprint();
    git_in(l.linked.as_std_path(), &["switch", "-q", "third"]);
    let after = l.repo.fingerprint();
    assert_eq!(after.excluded_refs, ["refs/heads/third"]);
    // `side` is back in the fingerprint, `third` left it: neither counts.
    assert!(!before.compare(&after).changed);
}
