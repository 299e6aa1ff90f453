//! What `git gc` during a run costs the fingerprint after it, on a repository with 3,000 commits
//! in one pack (39,000 objects): the old pack goes (every object the refs reached is looked up)
//! and a new one comes (every object of it is verified). Ignored: it prints seconds, run with
//! `cargo test -p handoff-git --test it gc_cost -- --ignored --nocapture`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use camino::Utf8Path;
use handoff_core::Workspace;
use handoff_git::GitWorkspace;

use crate::support::git_in;

/// Writes 3,000 commits of five 40-line files each (of 2,000) into the empty repository at `dir`.
fn history(dir: &std::path::Path, commits: usize) {
    let mut import = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = std::io::BufWriter::new(import.stdin.take().unwrap());
    for c in 0..commits {
        let msg = format!("c{c}\n");
        write!(
            input,
            "commit refs/heads/main\ncommitter A <a@b> {} +0000\ndata {}\n{msg}",
            1_600_000_000 + c,
            msg.len()
        )
        .unwrap();
        for k in 0..5 {
            let f = (c * 7 + k * 131) % 2000;
            let body: String = (0..40)
                .map(|i| format!("line {i} of file {f} commit {c}\n"))
                .collect();
            write!(
                input,
                "M 100644 inline src/d{}/f{f}.txt\ndata {}\n{body}\n",
                f % 50,
                body.len()
            )
            .unwrap();
        }
    }
    drop(input);
    assert!(import.wait().unwrap().success());
}

#[test]
#[ignore = "a measurement: prints seconds"]
fn gc_cost() {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(dir.path()).unwrap();
    git_in(dir.path(), &["init", "-q", "-b", "main"]);
    history(dir.path(), 3000);
    git_in(dir.path(), &["checkout", "-q", "main"]);
    git_in(dir.path(), &["gc", "-q"]);
    // Work since the last gc: loose objects that the gc during the run packs.
    for i in 0..20 {
        std::fs::write(dir.path().join(format!("new{i}.txt")), format!("{i}\n")).unwrap();
        git_in(dir.path(), &["add", "-A"]);
        git_in(dir.path(), &["commit", "-q", "-m", &format!("n{i}")]);
    }
    let ws = GitWorkspace::new();
    let t = Instant::now();
    let before = ws.fingerprint(root).unwrap();
    eprintln!("fingerprint before: {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let same = ws.fingerprint_since(root, &before).unwrap();
    eprintln!(
        "fingerprint after, nothing done: {:.3} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(same.digest, before.digest);
    let t = Instant::now();
    git_in(dir.path(), &["gc", "-q"]);
    eprintln!("git gc: {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let after = ws.fingerprint_since(root, &before).unwrap();
    eprintln!(
        "fingerprint after git gc: {:.3} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(after.digest, before.digest, "git gc is no change");
}
