//! Nested repositories: submodules and repositories inside the worktree.

use crate::support::{TestRepo, changed, git_in};

#[test]
fn changes_inside_an_untracked_nested_repository_are_detected() {
    let repo = TestRepo::with_commit();
    let nested = repo.path("vendor/inner");
    std::fs::create_dir_all(&nested).unwrap();
    git_in(&nested, &["init", "-q", "-b", "main"]);
    std::fs::write(nested.join("f.txt"), "1\n").unwrap();

    let before = repo.fingerprint();
    // The nested repository is one entry, like `git status` shows it.
    assert!(before.entries["vendor/inner"].starts_with("untracked repo sha256:"));
    assert!(!before.entries.contains_key("vendor/inner/f.txt"));
    assert_eq!(repo.fingerprint(), before);

    std::fs::write(nested.join("f.txt"), "2\n").unwrap();
    let after = repo.fingerprint();
    assert_eq!(changed(&before, &after), ["vendor/inner"]);
}

#[test]
fn changes_inside_a_submodule_are_detected() {
    let upstream = TestRepo::with_commit();
    let repo = TestRepo::with_commit();
    repo.git(&["submodule", "add", "-q", upstream.root().as_str(), "sub"]);
    repo.commit("add submodule");

    let before = repo.fingerprint();
    assert!(
        before.entries["sub"].starts_with("tracked 160000 "),
        "{}",
        &before.entries["sub"]
    );
    assert!(before.entries["sub"].contains("; worktree repo sha256:"));
    assert!(before.changes.is_empty(), "{:?}", before.changes);
    assert_eq!(repo.fingerprint(), before);

    std::fs::write(repo.path("sub/a.txt"), "edited in the submodule\n").unwrap();
    let after = repo.fingerprint();
    assert_eq!(changed(&before, &after), ["sub"]);
    assert!(after.changes.iter().any(|c| c.path == "sub" && c.unstaged));
}

#[test]
fn a_submodule_that_is_not_checked_out_is_clean() {
    let upstream = TestRepo::with_commit();
    let repo = TestRepo::with_commit();
    repo.git(&["submodule", "add", "-q", upstream.root().as_str(), "sub"]);
    repo.commit("add submodule");
    repo.git(&["submodule", "deinit", "-q", "-f", "sub"]);
    assert_eq!(std::fs::read_dir(repo.path("sub")).unwrap().count(), 0);
    assert_eq!(repo.git(&["status", "--porcelain"]), "");

    let fingerprint = repo.fingerprint();
    assert!(fingerprint.changes.is_empty(), "{:?}", fingerprint.changes);
    assert!(fingerprint.entries["sub"].ends_with("; worktree dir"));
}
