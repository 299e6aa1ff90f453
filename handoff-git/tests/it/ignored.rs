//! Ignored files: left out by default, fingerprinted on request.

use handoff_core::Workspace;
use handoff_git::GitWorkspace;

use crate::support::{TestRepo, changed};

#[test]
fn ignored_files_count_when_asked_for() {
    let repo = TestRepo::with_commit();
    let ws = GitWorkspace::new().with_ignored(true);
    repo.write("target/debug/app", "binary\n");
    let before = repo.fingerprint_with(ws.clone());
    assert!(before.includes_ignored);
    assert!(before.entries["target/debug/app"].starts_with("ignored 100644 "));
    // Not a change of git status.
    assert_eq!(before.change_counts.untracked, 0);

    repo.write("target/debug/app", "rebuilt\n");
    repo.write("debug.log", "noise\n");
    let after = repo.fingerprint_with(ws);
    assert_eq!(changed(&before, &after), ["debug.log", "target/debug/app"]);

    // Without the opt-in they are invisible.
    let plain = repo.fingerprint();
    assert!(!plain.includes_ignored);
    assert!(!plain.entries.contains_key("debug.log"));
}

/// What a run creates under the rules before it is summarized per top-most new path with a
/// file count, out of the digest; a tree that was there before is not read again.
#[test]
fn new_ignored_trees_are_counted_not_listed() {
    let repo = TestRepo::with_commit();
    repo.write(".gitignore", "*.log\ntarget/\nnode_modules/\n");
    repo.write("target/old", "x\n");
    let before = repo.fingerprint();
    repo.write("target/debug/app", "binary\n");
    repo.write("debug.log", "noise\n");
    for i in 0..3 {
        repo.write(&format!("node_modules/pkg/f{i}.js"), "x\n");
    }
    let after = GitWorkspace::new()
        .fingerprint_since(repo.root(), &before)
        .unwrap();
    assert_eq!(after.digest, before.digest);
    let got: Vec<(&str, u64)> = after
        .ignored_created
        .iter()
        .map(|t| (t.path.as_str(), t.files))
        .collect();
    assert_eq!(got, [("debug.log", 1), ("node_modules/", 3)]);
    assert!(before.ignored_created.is_empty());
}

#[test]
fn racily_clean_files_are_hashed() {
    // Modified in the same second as the index was written, with the same size: only the racy
    // check catches it.
    for _ in 0..5 {
        let repo = TestRepo::init();
        repo.write("f.txt", "one\n");
        repo.git(&["add", "f.txt"]);
        let before = repo.fingerprint();
        repo.write("f.txt", "two\n");
        let after = repo.fingerprint();
        assert_eq!(changed(&before, &after), ["f.txt"]);
    }
}

#[test]
fn touching_files_is_not_a_change() {
    let repo = TestRepo::with_commit();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let before = repo.fingerprint();
    for file in ["a.txt", "src/lib.rs", ".gitignore"] {
        let f = std::fs::File::options()
            .write(true)
            .open(repo.path(file))
            .unwrap();
        f.set_modified(std::time::SystemTime::now()).unwrap();
    }
    let after = repo.fingerprint();
    assert!(changed(&before, &after).is_empty());
}
