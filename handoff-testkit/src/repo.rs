//! A throwaway Git repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

const GIT_USER: [&str; 4] = [
    "-c",
    "user.name=handoff",
    "-c",
    "user.email=handoff@example.invalid",
];

/// A temporary Git repository on branch `main` with `README.md`, a `.gitignore` holding
/// `target/`, and one commit. Removed when dropped.
///
/// Git runs with `GIT_CONFIG_GLOBAL=/dev/null` and `GIT_CONFIG_NOSYSTEM=1` so the host's
/// configuration (signing, hooks, default branch) cannot leak in.
#[derive(Debug)]
pub struct ScratchRepo {
    _dir: TempDir,
    path: PathBuf,
}

impl ScratchRepo {
    /// Creates the repository.
    ///
    /// # Panics
    ///
    /// When the temp dir cannot be created or a git command fails.
    pub fn new() -> ScratchRepo {
        let dir = tempfile::Builder::new()
            .prefix("handoff-scratch-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let path = dir
            .path()
            .canonicalize()
            .unwrap_or_else(|e| panic!("cannot canonicalize {}: {e}", dir.path().display()));
        let repo = ScratchRepo { _dir: dir, path };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.write("README.md", "# scratch\n");
        repo.write(".gitignore", "target/\n");
        repo.commit_all("initial commit");
        repo
    }

    /// The repository's canonical path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `content` to `rel` (creating parent directories).
    ///
    /// # Panics
    ///
    /// On I/O errors.
    pub fn write(&self, rel: &str, content: &str) {
        let path = self.path.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
        }
        std::fs::write(&path, content)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// `git add -A && git commit -q -m <message>` as `handoff <handoff@example.invalid>`.
    ///
    /// # Panics
    ///
    /// When git fails.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        let mut args: Vec<&str> = GIT_USER.to_vec();
        args.extend(["commit", "-q", "--no-gpg-sign", "-m", message]);
        self.git(&args);
    }

    /// Runs `git <args>` in the repository and returns its stdout.
    ///
    /// # Panics
    ///
    /// When git cannot run or exits non-zero.
    pub fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(args)
            .current_dir(&self.path)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .output()
            .unwrap_or_else(|e| panic!("cannot run git {args:?}: {e}"));
        assert!(
            output.status.success(),
            "git {args:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Default for ScratchRepo {
    fn default() -> Self {
        ScratchRepo::new()
    }
}

/// Every path under `dir` (a git directory), relative, directories ending in `/`, loose
/// objects (`objects/xx/`) left out: what a run left there is what two listings differ by.
pub fn git_dir_paths(dir: &Path) -> std::collections::BTreeSet<String> {
    fn walk(dir: &Path, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if !(prefix == "objects/" && name.len() == 2) {
                    out.insert(format!("{rel}/"));
                    walk(&e.path(), &format!("{rel}/"), out);
                }
            } else {
                out.insert(rel);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(dir, "", &mut out);
    out
}
