//! Taking a fingerprint must not write anything into the repository.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use crate::support::TestRepo;

/// Every file below `dir`: its content and modification time.
fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                out.insert(
                    entry.path().display().to_string(),
                    (
                        std::fs::read(entry.path()).unwrap_or_default(),
                        meta.modified().unwrap(),
                    ),
                );
            }
        }
    }
    out
}

#[test]
fn fingerprinting_does_not_write_to_the_repository() {
    let repo = TestRepo::with_commit();
    // A stale stat cache, staged and unstaged changes and untracked files: all the situations
    // in which a status implementation might be tempted to refresh and write the index.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    repo.write("a.txt", "alpha\n");
    repo.write("src/lib.rs", "changed\n");
    repo.write("new.txt", "new\n");
    repo.write("b.txt", "staged\n");
    repo.git(&["add", "b.txt"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));

    let git_before = snapshot(&repo.path(".git"));
    let worktree_before = snapshot(repo.root().as_std_path());
    let first = repo.fingerprint();
    let second = repo.fingerprint();
    assert_eq!(first, second);
    assert_eq!(snapshot(&repo.path(".git")), git_before);
    assert_eq!(snapshot(repo.root().as_std_path()), worktree_before);
}

#[test]
fn fingerprinting_a_repository_without_an_index_creates_none() {
    let repo = TestRepo::init();
    repo.write("a.txt", "a\n");
    let _ = repo.fingerprint();
    assert!(!repo.path(".git/index").exists());
}

/// Peak resident memory of this process, in KiB (Linux).
fn peak_rss_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// 100,000 files within 100 MB: slow to set up, so run on request
/// (`cargo test -p handoff-git -- --ignored`).
#[test]
#[ignore]
fn a_hundred_thousand_files_fit_in_the_memory_target() {
    let repo = TestRepo::init();
    for i in 0..100_000 {
        repo.write(
            &format!(
                "d{}/e{}/f{}/file{i}.txt",
                (i / 1000) % 10,
                (i / 100) % 10,
                (i / 10) % 10
            ),
            format!("content of file {i}\n"),
        );
    }
    repo.git(&["add", "-A"]);
    repo.commit("many");
    for i in (0..100_000).step_by(100) {
        repo.write(
            &format!(
                "d{}/e{}/f{}/file{i}.txt",
                (i / 1000) % 10,
                (i / 100) % 10,
                (i / 10) % 10
            ),
            "modified\n",
        );
    }
    let fp = repo.fingerprint();
    assert_eq!(fp.change_counts.unstaged, 1000);
    assert!(fp.entry_count > 100_000);
    let peak = peak_rss_kib().unwrap_or(0);
    eprintln!("peak RSS: {} MiB", peak / 1024);
    assert!(peak < 100 * 1024, "peak RSS {peak} KiB");
}
