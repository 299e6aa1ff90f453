//! Finding the repository: subdirectories, unborn branches, and directories that are no worktree.

use std::path::{Path, PathBuf};

use camino::Utf8PathBuf;
use handoff_core::{Workspace, WorkspaceError};
use handoff_git::{GitWorkspace, HEAD_ENTRY};

use crate::support::{TestRepo, changed, git_in, worktree_keys};

#[test]
fn unborn_repository_without_commits_has_no_head() {
    let repo = TestRepo::init();
    let empty = repo.fingerprint();
    assert_eq!(empty.head, None);
    assert!(worktree_keys(&empty).is_empty());
    assert_eq!(&empty.entries[HEAD_ENTRY], "ref refs/heads/main");
    assert!(!empty.entries.contains_key(".git/refs/heads/main"));

    repo.write("first.txt", "1\n");
    let untracked = repo.fingerprint();
    assert_eq!(untracked.head, None);
    assert_eq!(changed(&empty, &untracked), ["first.txt"]);
    assert_eq!(untracked.change_counts.untracked, 1);

    repo.git(&["add", "first.txt"]);
    let staged = repo.fingerprint();
    assert_eq!(changed(&untracked, &staged), ["first.txt"]);
    // Against the empty tree of an unborn branch, every index entry is staged.
    assert_eq!(staged.change_counts.staged, 1);

    repo.commit("first");
    let born = repo.fingerprint();
    assert!(born.head.is_some());
    // The branch is born; HEAD still names it.
    assert_eq!(changed(&staged, &born), [".git/refs/heads/main"]);
    assert_eq!(&born.entries[HEAD_ENTRY], "ref refs/heads/main");
}

#[test]
fn subdirectory_cwd_fingerprints_the_whole_repository() {
    let repo = TestRepo::with_commit();
    let from_root = repo.fingerprint();
    let from_sub = GitWorkspace::new()
        .fingerprint(&repo.root().join("src"))
        .unwrap();
    assert_eq!(from_root, from_sub);
    assert_eq!(from_sub.root, repo.root());
    assert!(from_sub.entries.contains_key("a.txt"));

    // A change outside the subdirectory is seen from inside it.
    repo.write("a.txt", "changed\n");
    let after = GitWorkspace::new()
        .fingerprint(&repo.root().join("src"))
        .unwrap();
    assert_eq!(changed(&from_sub, &after), ["a.txt"]);
}

/// A new directory with no repository in it or above it: under the first of the usual temporary
/// locations none of whose ancestors holds a `.git` or looks like a git directory (`HEAD`), so
/// discovery has nothing to find whatever the machine's layout (e.g. `TMPDIR` inside a checkout).
fn outside_any_repository() -> tempfile::TempDir {
    let might_be_a_repository = |dir: &Path| dir.join(".git").exists() || dir.join("HEAD").exists();
    let candidates = [
        std::env::temp_dir(),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
        PathBuf::from("/dev/shm"),
    ];
    for base in &candidates {
        let Ok(base) = base.canonicalize() else {
            continue;
        };
        if base.ancestors().any(might_be_a_repository) {
            continue;
        }
        if let Ok(dir) = tempfile::tempdir_in(&base) {
            return dir;
        }
    }
    panic!("every candidate directory is inside a git repository: {candidates:?}");
}

#[test]
fn directory_outside_any_repository_is_not_a_worktree() {
    let dir = outside_any_repository();
    let path = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    match GitWorkspace::new().fingerprint(&path) {
        Err(WorkspaceError::NotAWorktree { path: reported }) => assert_eq!(reported, path),
        other => panic!("expected NotAWorktree, got {other:?}"),
    }
}

#[test]
fn bare_repository_is_not_a_worktree() {
    let dir = tempfile::tempdir().unwrap();
    git_in(dir.path(), &["init", "-q", "--bare", "repo.git"]);
    let path = Utf8PathBuf::from_path_buf(dir.path().join("repo.git")).unwrap();
    match GitWorkspace::new().fingerprint(&path) {
        Err(WorkspaceError::NotAWorktree { path: reported }) => assert_eq!(reported, path),
        other => panic!("expected NotAWorktree, got {other:?}"),
    }
}

#[test]
fn missing_directory_is_an_io_error_naming_it() {
    let repo = TestRepo::with_commit();
    let missing = repo.root().join("does/not/exist");
    match GitWorkspace::new().fingerprint(&missing) {
        Err(WorkspaceError::Io { path, source }) => {
            assert_eq!(path, missing);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn a_file_is_not_a_worktree() {
    let repo = TestRepo::with_commit();
    let file = repo.root().join("a.txt");
    assert!(matches!(
        GitWorkspace::new().fingerprint(&file),
        Err(WorkspaceError::NotAWorktree { .. })
    ));
}

#[test]
fn linked_worktree_is_fingerprinted_on_its_own() {
    let repo = TestRepo::with_commit();
    let linked_dir = tempfile::tempdir().unwrap();
    let linked = linked_dir.path().join("wt");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        linked.to_str().unwrap(),
        "-b",
        "side",
    ]);
    let linked = Utf8PathBuf::from_path_buf(linked.canonicalize().unwrap()).unwrap();
    let fp = GitWorkspace::new().fingerprint(&linked).unwrap();
    assert_eq!(fp.root, linked);
    assert_eq!(&fp.entries[HEAD_ENTRY], "ref refs/heads/side");
    let main = repo.fingerprint();
    assert_eq!(fp.head, main.head);

    std::fs::write(linked.join("a.txt"), "in the linked worktree\n").unwrap();
    let after = GitWorkspace::new().fingerprint(&linked).unwrap();
    assert_eq!(changed(&fp, &after), ["a.txt"]);
    // The main worktree did not change.
    assert!(changed(&main, &repo.fingerprint()).is_empty());
}

#[test]
fn workspace_is_usable_as_a_trait_object_across_threads() {
    let repo = TestRepo::with_commit();
    let ws: std::sync::Arc<dyn Workspace> = std::sync::Arc::new(GitWorkspace::default());
    let root = repo.root().to_owned();
    let handle = std::thread::spawn({
        let ws = ws.clone();
        move || ws.fingerprint(&root).unwrap()
    });
    assert_eq!(handle.join().unwrap(), ws.fingerprint(repo.root()).unwrap());
}

#[test]
fn corrupt_index_is_a_git_error() {
    let repo = TestRepo::with_commit();
    std::fs::write(repo.path(".git/index"), b"DIRC garbage").unwrap();
    match GitWorkspace::new().fingerprint(repo.root()) {
        Err(WorkspaceError::Git { message }) => {
            eprintln!("message: {message}");
            assert!(message.starts_with("cannot read the index"), "{message}");
        }
        other => panic!("expected a Git error, got {other:?}"),
    }
}

#[test]
fn unreadable_head_is_a_git_error() {
    let repo = TestRepo::with_commit();
    std::fs::write(repo.path(".git/refs/heads/main"), "not an object id\n").unwrap();
    match GitWorkspace::new().fingerprint(repo.root()) {
        Err(WorkspaceError::Git { message }) => {
            eprintln!("message: {message}");
            assert!(message.contains("HEAD"), "{message}");
        }
        other => panic!("expected a Git error, got {other:?}"),
    }
}
