//! An agent that changes a file and covers its tracks in the stat data: it keeps the size,
//! sets the mtime back, and rewrites the index so that the entry's stat data matches the new
//! file while keeping the old object id. Git, and a fingerprint that trusts the index, see
//! nothing; a fingerprint taken since handoff's own record reads the file.

use std::fs::{File, FileTimes};
use std::time::Duration;

use handoff_core::Workspace;
use handoff_git::GitWorkspace;

use crate::support::{TestRepo, changed, forge_index};

/// Lets the files written so far age past the record's timestamp granularity, so that the
/// first fingerprint records them (a file younger than that is read every time).
fn age() {
    std::thread::sleep(Duration::from_millis(2100));
}

/// Rewrites `rel` in place with `content` (the same size) and sets its mtime back.
fn rewrite_keeping_mtime(repo: &TestRepo, rel: &str, content: &str) {
    let path = repo.path(rel);
    let old = std::fs::read(&path).unwrap();
    assert_eq!(old.len(), content.len(), "the attack keeps the size");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, content).unwrap();
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_times(FileTimes::new().set_modified(mtime))
        .unwrap();
}

#[test]
fn a_forged_index_does_not_hide_a_change_from_a_fingerprint_since_the_record() {
    let repo = TestRepo::with_commit();
    age();
    let before = repo.fingerprint();
    assert_eq!(before.verified_by.as_deref(), Some("index"));

    rewrite_keeping_mtime(&repo, "src/lib.rs", "pub fn g() {}\n");
    forge_index(&repo, "src/lib.rs");
    // The attack evades git and a fingerprint that trusts the index.
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(repo.fingerprint().digest, before.digest);

    let after = GitWorkspace::new()
        .fingerprint_since(repo.root(), &before)
        .unwrap();
    assert_eq!(after.verified_by.as_deref(), Some("record"));
    assert_eq!(changed(&before, &after), ["src/lib.rs"]);
}

#[test]
fn a_repository_that_distrusts_ctime_does_not_loosen_the_evidence() {
    let repo = TestRepo::with_commit();
    repo.git(&["config", "core.trustctime", "false"]);
    repo.git(&["config", "core.checkStat", "minimal"]);
    age();
    // An index written now: its entries are no longer racily clean, so git trusts their stat
    // data as configured.
    repo.git(&["update-index", "--really-refresh"]);
    repo.git(&["add", "-A"]);
    let before = repo.fingerprint();
    // A same-size edit with the mtime set back: invisible to git under these settings.
    rewrite_keeping_mtime(&repo, "a.txt", "omega\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");

    let after = GitWorkspace::new()
        .fingerprint_since(repo.root(), &before)
        .unwrap();
    assert_eq!(changed(&before, &after), ["a.txt"]);
    // A first fingerprint reads the index with git's strictest settings too.
    assert_eq!(changed(&before, &repo.fingerprint()), ["a.txt"]);
}

#[test]
fn an_unchanged_worktree_is_vouched_for_by_the_record() {
    let repo = TestRepo::with_commit();
    age();
    let before = repo.fingerprint();
    let after = GitWorkspace::new()
        .fingerprint_since(repo.root(), &before)
        .unwrap();
    assert_eq!(after.digest, before.digest);
    assert_eq!(after.verified_by.as_deref(), Some("record"));
    // A record of another worktree vouches for nothing here: every file is read, and the
    // result is the same.
    let other = TestRepo::with_commit();
    let foreign = GitWorkspace::new()
        .fingerprint_since(repo.root(), &other.fingerprint())
        .unwrap();
    assert_eq!(foreign.digest, before.digest);
}

#[test]
fn a_file_replaced_by_another_with_the_same_stat_data_but_a_new_inode_is_read() {
    let repo = TestRepo::with_commit();
    age();
    let before = repo.fingerprint();
    // A new file renamed over the old one, its mtime set back: a new inode and ctime.
    let path = repo.path("a.txt");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let tmp = repo.path("a.txt.new");
    std::fs::write(&tmp, "omega\n").unwrap();
    File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_times(FileTimes::new().set_modified(mtime))
        .unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    forge_index(&repo, "a.txt");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    let after = GitWorkspace::new()
        .fingerprint_since(repo.root(), &before)
        .unwrap();
    assert_eq!(changed(&before, &after), ["a.txt"]);
}
