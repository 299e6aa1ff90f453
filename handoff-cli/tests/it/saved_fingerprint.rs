//! `handoff fingerprint --json`, then `--diff`: as strong as a run's own comparison. What the
//! saved fingerprint was taken by (handoff's record of the files, the ignore rules and object
//! store as they stood) is kept in the task store under its digest, so a later `--diff` judges
//! a forged index, a directory that ignores itself, or a rewritten object as a run's "after"
//! does; without it, every file is hashed and `--diff` says so.

use std::path::PathBuf;
use std::time::Duration;

use crate::evidence::forge;
use crate::support::{Run, Sandbox};

/// `fingerprint --json` of the sandbox's repository, saved to a file; its path.
fn save(sb: &Sandbox) -> PathBuf {
    let saved = sb.run(&["fingerprint", "--cwd", &sb.cwd(), "--json"]);
    assert_eq!(saved.code, 0, "{saved:?}");
    assert_eq!(saved.stderr, "", "the basis was not kept");
    let path = sb.private.join("before.json");
    std::fs::write(&path, &saved.stdout).unwrap();
    path
}

fn diff_json(sb: &Sandbox, before: &std::path::Path) -> Run {
    sb.run(&[
        "fingerprint",
        "--cwd",
        &sb.cwd(),
        "--json",
        "--diff",
        before.to_str().unwrap(),
    ])
}

fn changed(run: &Run) -> Vec<String> {
    run.json["changedFiles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_directory_that_ignores_itself_after_the_save_hides_nothing_from_diff() {
    let sb = Sandbox::new();
    sb.repo.write("a.rs", "fn a() {}\n");
    sb.repo.commit_all("a");
    let before = save(&sb);
    sb.repo.write("stash/.gitignore", "*\n");
    sb.repo.write("stash/notes.txt", "planted\n");
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), "");
    let diff = diff_json(&sb, &before);
    assert_eq!(diff.code, 1, "{diff:?}");
    assert_eq!(diff.stderr, "", "judged by the kept basis");
    assert_eq!(changed(&diff), ["stash/.gitignore", "stash/notes.txt"]);
}

#[test]
fn a_rewritten_object_after_the_save_is_a_change_to_diff() {
    let sb = Sandbox::new();
    sb.repo.write("main.rs", "fn main() {}\n");
    sb.repo.commit_all("main");
    let id = sb.repo.git(&["rev-parse", "HEAD:main.rs"]);
    let id = id.trim();
    let file = format!(".git/objects/{}/{}", &id[..2], &id[2..]);
    let before = save(&sb);
    let evil = sb.repo.path().join("evil.txt");
    std::fs::write(&evil, "fn main() { evil() }\n").unwrap();
    let new = sb.repo.git(&["hash-object", "-w", "evil.txt"]);
    std::fs::remove_file(&evil).unwrap();
    let new = new.trim();
    let object = sb.repo.path().join(&file);
    let mut perms = std::fs::metadata(&object).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
    std::fs::set_permissions(&object, perms).unwrap();
    let planted = sb
        .repo
        .path()
        .join(format!(".git/objects/{}/{}", &new[..2], &new[2..]));
    std::fs::copy(&planted, &object).unwrap();
    assert_eq!(
        sb.repo.git(&["cat-file", "blob", "HEAD:main.rs"]),
        "fn main() { evil() }\n"
    );
    let diff = diff_json(&sb, &before);
    assert_eq!(diff.code, 1, "{diff:?}");
    assert!(
        changed(&diff).contains(&file),
        "{file}: {:?}",
        changed(&diff)
    );
}

/// With the basis, `--diff` trusts handoff's own record rather than the index: a change
/// covered in the index's stat data is seen without every file being hashed.
#[test]
fn a_forged_index_after_the_save_hides_nothing_from_diff() {
    let sb = Sandbox::new();
    sb.repo.write("a.rs", "fn a() {}\n");
    sb.repo.commit_all("a.rs");
    // Older than the record's cutoff, so the record vouches for it by its stat data.
    std::thread::sleep(Duration::from_millis(2100));
    let before = save(&sb);
    forge(sb.repo.path(), "a.rs", "fn b() {}\n");
    assert_eq!(sb.repo.git(&["status", "--porcelain", "--", "a.rs"]), "");
    let diff = diff_json(&sb, &before);
    assert_eq!(diff.code, 1, "{diff:?}");
    assert_eq!(diff.stderr, "", "judged by the kept basis");
    assert_eq!(changed(&diff), ["a.rs"]);
    assert_eq!(
        diff.json["after"]["verifiedBy"], "record",
        "{}",
        diff.stdout
    );
}

/// A saved fingerprint the task store has no basis for (here: its store was deleted) is
/// compared by hashing every file, and `--diff` says so in one line.
#[test]
fn without_a_kept_basis_diff_hashes_every_file_and_says_so() {
    let sb = Sandbox::new();
    sb.repo.write("a.rs", "fn a() {}\n");
    sb.repo.commit_all("a.rs");
    std::thread::sleep(Duration::from_millis(2100));
    let before = save(&sb);
    let state = sb.root.join("home/.local/state/handoff");
    assert!(state.join("tasks.sqlite3").exists(), "{}", state.display());
    std::fs::remove_dir_all(&state).unwrap();
    forge(sb.repo.path(), "a.rs", "fn b() {}\n");
    let diff = diff_json(&sb, &before);
    assert_eq!(diff.code, 1, "{diff:?}");
    assert_eq!(changed(&diff), ["a.rs"]);
    assert_eq!(diff.stderr.lines().count(), 1, "{}", diff.stderr);
    assert!(
        diff.stderr
            .contains("the task store has no record of it: every file was hashed"),
        "{}",
        diff.stderr
    );
}

/// A saved fingerprint edited after it was saved (an entry made to match the worktree now) is
/// refused: its entries no longer give its digest.
#[test]
fn a_saved_fingerprint_edited_after_the_save_is_refused() {
    let sb = Sandbox::new();
    sb.repo.write("a.txt", "one\n");
    let before = save(&sb);
    sb.repo.write("a.txt", "two\n");
    let now = sb.run(&["fingerprint", "--cwd", &sb.cwd(), "--json"]);
    let mut saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&before).unwrap()).unwrap();
    saved["entries"]["a.txt"] = now.json["entries"]["a.txt"].clone();
    std::fs::write(&before, saved.to_string()).unwrap();
    let diff = diff_json(&sb, &before);
    assert_eq!(diff.code, 5, "{diff:?}");
    assert_eq!(diff.stdout, "");
    assert!(
        diff.stderr
            .contains("was changed after it was saved: its entries do not match its digest"),
        "{}",
        diff.stderr
    );
    assert_eq!(diff.stderr.lines().count(), 1, "{}", diff.stderr);
}

/// `handoff fingerprint --diff` shows each changed path with its states before and after.
#[test]
fn a_saved_fingerprint_shows_what_changed_since_with_both_states() {
    let sb = Sandbox::new();
    sb.repo.write("a.txt", "one\n");
    let cwd = sb.cwd();
    let saved = sb.run(&["fingerprint", "--cwd", &cwd, "--json"]);
    assert_eq!(saved.code, 0, "{saved:?}");
    let before = sb.private.join("before.json");
    std::fs::write(&before, &saved.stdout).unwrap();
    sb.repo.write("a.txt", "two\n");
    let before = before.to_str().unwrap();
    let diff = sb.run(&["fingerprint", "--cwd", &cwd, "--diff", before]);
    assert_eq!(diff.code, 1, "{diff:?}");
    let out = &diff.stdout;
    assert!(out.contains("~ a.txt\n    was untracked 100644 "), "{out}");
    assert!(out.contains("\n    now untracked 100644 "), "{out}");
}

/// `--diff` on a FIFO (or anything but a regular file) is refused at once, not waited on.
#[test]
fn fingerprint_diff_refuses_a_fifo_without_waiting() {
    let sb = Sandbox::new();
    let fifo = sb.private.join("before.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let cwd = sb.cwd();
    let mut child = sb
        .command()
        .args(["fingerprint", "--cwd", &cwd, "--diff"])
        .arg(&fifo)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut waited = Duration::ZERO;
    while child.try_wait().unwrap().is_none() {
        if waited > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("`fingerprint --diff <fifo>` is still waiting");
        }
        std::thread::sleep(Duration::from_millis(50));
        waited += Duration::from_millis(50);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a regular file"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
