//! Temporary repositories driven by the system `git` CLI (tests only).

use std::path::{Path, PathBuf};
use std::process::Command;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{Fingerprint, GitEvidence, Workspace};
use handoff_git::GitWorkspace;

/// A throwaway repository in a temporary directory.
pub struct TestRepo {
    _dir: tempfile::TempDir,
    root: Utf8PathBuf,
}

impl TestRepo {
    /// `git init` in a fresh temporary directory (branch `main`, no commits).
    pub fn init() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Canonical so that it compares equal with the root gix reports.
        let root = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
        let repo = TestRepo { _dir: dir, root };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// A repository with `a.txt`, `src/lib.rs` and `.gitignore` (ignoring `*.log` and `target/`)
    /// committed.
    pub fn with_commit() -> Self {
        let repo = Self::init();
        repo.write("a.txt", "alpha\n");
        repo.write("src/lib.rs", "pub fn f() {}\n");
        repo.write(".gitignore", "*.log\ntarget/\n");
        repo.git(&["add", "-A"]);
        repo.commit("initial");
        repo
    }

    pub fn root(&self) -> &Utf8Path {
        &self.root
    }

    pub fn path(&self, rela: &str) -> PathBuf {
        self.root.join(rela).into_std_path_buf()
    }

    /// Runs `git` in the repository root with a configuration isolated from the machine's.
    pub fn git(&self, args: &[&str]) -> String {
        git_in(self.root.as_std_path(), args)
    }

    pub fn commit(&self, message: &str) {
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
    }

    pub fn write(&self, rela: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rela);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, content).unwrap();
    }

    pub fn remove(&self, rela: &str) {
        std::fs::remove_file(self.path(rela)).unwrap();
    }

    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint_with(GitWorkspace::new())
    }

    pub fn fingerprint_with(&self, workspace: GitWorkspace) -> Fingerprint {
        workspace.fingerprint(&self.root).unwrap()
    }
}

/// Runs `git` in `dir` with an isolated configuration; panics unless it succeeds.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The paths that changed between two fingerprints (asserting that `changed` agrees).
pub fn changed(before: &Fingerprint, after: &Fingerprint) -> Vec<String> {
    let evidence: GitEvidence = before.compare(after);
    assert_eq!(
        evidence.changed,
        !evidence.changed_files.is_empty(),
        "digest change must agree with per-path change: {evidence:#?}"
    );
    evidence.changed_files
}

/// Rewrites the index entry of `rel` with the file's current stat data, keeping its object id:
/// git, and a fingerprint that trusts the index, then take the file for what the index says.
///
/// Like git when it writes an index, entries that were racily clean under the old index (their
/// mtime's second not older than the index file's) are smudged (their size zeroed), so that the
/// newer index file does not turn an unnoticed same-second edit of another file into a clean one.
pub fn forge_index(repo: &TestRepo, rel: &str) {
    let path = repo.path(".git/index");
    let written = gix::index::fs::Metadata::from_path_no_follow(&path).unwrap();
    let written = gix::index::entry::Stat::from_fs(&written).unwrap().mtime;
    let mut index = gix::index::File::at(
        &path,
        gix::hash::Kind::Sha1,
        false,
        gix::index::decode::Options::default(),
    )
    .unwrap();
    let meta = gix::index::fs::Metadata::from_path_no_follow(&repo.path(rel)).unwrap();
    let stat = gix::index::entry::Stat::from_fs(&meta).unwrap();
    let i = index
        .entry_index_by_path(rel.into())
        .expect("the path is tracked");
    for (j, entry) in index.entries_mut().iter_mut().enumerate() {
        if j == i {
            entry.stat = stat;
        } else if entry.stat.mtime.secs >= written.secs {
            entry.stat.size = 0;
        }
    }
    index.write(gix::index::write::Options::default()).unwrap();
}

/// The keys of a fingerprint that are worktree paths (not `.git/…`).
pub fn worktree_keys(fp: &Fingerprint) -> Vec<&str> {
    fp.entries
        .keys()
        .filter(|key| !key.starts_with(".git/"))
        .collect()
}
