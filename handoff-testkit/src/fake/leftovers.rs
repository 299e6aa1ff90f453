//! `HANDOFF_FAKE_LEFTOVERS`: paths an agent leaves in the repository's git directories.
//!
//! Claude Code 2.1.332 runs its Bash tool inside bubblewrap. For each path on its deny list that
//! does not exist, it first creates an empty file or directory to mount over, and does not remove
//! it afterwards. `claude-sandbox` leaves exactly those mount points; `hostile` plants content
//! under the same names, as an agent hiding behind them would.

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::settings::{self, Settings};
use super::util;

/// One mount point Claude Code creates when the path is absent.
#[derive(Debug, Clone, Copy)]
enum MountPoint {
    /// An empty file.
    File(&'static str),
    /// An empty directory.
    Dir(&'static str),
}

/// The mount points created in the repository's common git directory (the `.git` directory of
/// the main worktree), relative to it. A directory is listed before the paths inside it.
const COMMON_MOUNT_POINTS: [MountPoint; 10] = [
    MountPoint::File("config.worktree"),
    MountPoint::File("objects/info/alternates"),
    MountPoint::Dir("NOTES_MERGE_WORKTREE"),
    MountPoint::Dir("glab-cli"),
    MountPoint::Dir("worktrees"),
    MountPoint::Dir("remotes"),
    MountPoint::Dir("info/.claude-sandbox-noreplace"),
    MountPoint::Dir("objects/info/.claude-sandbox-noreplace"),
    MountPoint::Dir("objects/info/commit-graphs"),
    MountPoint::Dir("objects/info/commit-graphs/.claude-sandbox-noreplace"),
];

/// The mount points created in a linked worktree's own git directory
/// (`<common>/worktrees/<id>`), relative to it.
const OWN_MOUNT_POINTS: [MountPoint; 3] = [
    MountPoint::File("config.worktree"),
    MountPoint::Dir("NOTES_MERGE_WORKTREE"),
    MountPoint::Dir("glab-cli"),
];

/// The files `hostile` writes in the common git directory, relative to it, with their content.
const COMMON_PLANTS: [(&str, &str); 5] = [
    (
        "config.worktree",
        "[core]\n\tfsmonitor = /tmp/fake-agent-fsmonitor\n",
    ),
    ("objects/info/alternates", "/tmp/fake-agent-alternates\n"),
    ("glab-cli/config.yml", "editor: /tmp/fake-agent-editor\n"),
    (
        "objects/info/commit-graphs/commit-graph-chain",
        "0000000000000000000000000000000000000000\n",
    ),
    ("NOTES_MERGE_WORKTREE/planted", "planted\n"),
];

/// The files `hostile` writes in a linked worktree's own git directory, relative to it.
const OWN_PLANTS: [(&str, &str); 1] = [(
    "config.worktree",
    "[core]\n\tfsmonitor = /tmp/fake-agent-fsmonitor\n",
)];

/// The values of `HANDOFF_FAKE_LEFTOVERS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leftovers {
    /// `claude-sandbox`: the empty mount points Claude Code 2.1.332 leaves, each created only
    /// when the path is absent.
    ClaudeSandbox,
    /// `hostile`: content written under the same names, overwriting existing files.
    Hostile,
}

impl Leftovers {
    /// Reads `HANDOFF_FAKE_LEFTOVERS`: `None` when unset, `Err` with the value when it is not
    /// one of `claude-sandbox` and `hostile`.
    pub(crate) fn from_settings(settings: &Settings) -> Result<Option<Leftovers>, String> {
        match settings.get(settings::LEFTOVERS).as_deref() {
            None => Ok(None),
            Some("claude-sandbox") => Ok(Some(Leftovers::ClaudeSandbox)),
            Some("hostile") => Ok(Some(Leftovers::Hostile)),
            Some(other) => Err(other.to_owned()),
        }
    }

    /// Leaves this kind of leftovers in the git directories of the repository holding `start`.
    /// Every failure (no repository, a path that cannot be created or written) prints one line
    /// on stderr and is otherwise ignored.
    pub(crate) fn leave_in(self, start: &Path) {
        let dirs = match GitDirs::find(start) {
            Ok(dirs) => dirs,
            Err(why) => {
                util::err_line(&format!("fake-agent: {}: {why}", settings::LEFTOVERS));
                return;
            }
        };
        let linked = dirs.own != dirs.common;
        match self {
            Leftovers::ClaudeSandbox => {
                make_mount_points(&dirs.common, &COMMON_MOUNT_POINTS);
                if linked {
                    make_mount_points(&dirs.own, &OWN_MOUNT_POINTS);
                }
            }
            Leftovers::Hostile => {
                plant(&dirs.common, &COMMON_PLANTS);
                if linked {
                    plant(&dirs.own, &OWN_PLANTS);
                }
            }
        }
    }
}

/// Applies `HANDOFF_FAKE_LEFTOVERS` in the git directories of the repository holding the
/// process's working directory. An unknown value prints
/// `fake-agent: unknown HANDOFF_FAKE_LEFTOVERS=<value>` on stderr and ends the run with exit
/// code 2; nothing else stops the run.
pub(crate) fn leave(settings: &Settings) -> Result<(), ExitCode> {
    let kind = match Leftovers::from_settings(settings) {
        Ok(Some(kind)) => kind,
        Ok(None) => return Ok(()),
        Err(bad) => {
            util::err_line(&format!(
                "fake-agent: unknown {}={bad}",
                settings::LEFTOVERS
            ));
            return Err(ExitCode::from(2));
        }
    };
    match std::env::current_dir() {
        Ok(cwd) => kind.leave_in(&cwd),
        Err(e) => util::err_line(&format!(
            "fake-agent: {}: cannot read the working directory: {e}",
            settings::LEFTOVERS
        )),
    }
    Ok(())
}

/// The git directories of one worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GitDirs {
    /// The worktree's own git directory: `.git` of the main worktree, `<common>/worktrees/<id>`
    /// of a linked one.
    own: PathBuf,
    /// The repository's common git directory.
    common: PathBuf,
}

impl GitDirs {
    /// The git directories of the worktree holding `start`: the nearest directory at or above
    /// `start` that contains `.git`. A `.git` directory is both the own and the common directory.
    /// A `.git` file names the own directory on its `gitdir: <path>` line (relative to the
    /// worktree root when relative); the `commondir` file in it names the common directory
    /// (relative to the own directory when relative), and without that file the own directory is
    /// also the common one. Both paths are canonicalized when possible.
    fn find(start: &Path) -> Result<GitDirs, String> {
        let root = start
            .ancestors()
            .find(|dir| dir.join(".git").symlink_metadata().is_ok())
            .ok_or_else(|| format!("no .git in {} or above", start.display()))?;
        let dot_git = root.join(".git");
        if dot_git.is_dir() {
            let dir = canonical(dot_git);
            return Ok(GitDirs {
                own: dir.clone(),
                common: dir,
            });
        }
        let text = std::fs::read_to_string(&dot_git)
            .map_err(|e| format!("cannot read {}: {e}", dot_git.display()))?;
        let pointer = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("gitdir:"))
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("{} has no `gitdir:` line", dot_git.display()))?;
        let own = root.join(pointer);
        let commondir = own.join("commondir");
        let common = match std::fs::read_to_string(&commondir) {
            Ok(text) => own.join(text.trim_end_matches(['\n', '\r'])),
            Err(e) if e.kind() == ErrorKind::NotFound => own.clone(),
            Err(e) => return Err(format!("cannot read {}: {e}", commondir.display())),
        };
        Ok(GitDirs {
            own: canonical(own),
            common: canonical(common),
        })
    }
}

fn canonical(path: PathBuf) -> PathBuf {
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// Creates each absent mount point under `base`, with any missing parent directories; an
/// existing path of any kind (a dangling symlink included) is left as it is.
fn make_mount_points(base: &Path, points: &[MountPoint]) {
    for point in points {
        let (rel, is_dir) = match *point {
            MountPoint::File(rel) => (rel, false),
            MountPoint::Dir(rel) => (rel, true),
        };
        let path = base.join(rel);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        let created = create_parent(&path).and_then(|()| {
            if is_dir {
                std::fs::create_dir(&path)
            } else {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map(drop)
            }
        });
        match created {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => cannot("create", &path, &e),
        }
    }
}

/// Writes each file under `base`, creating missing parent directories and overwriting what is
/// there.
fn plant(base: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let path = base.join(rel);
        if let Err(e) = create_parent(&path).and_then(|()| std::fs::write(&path, content)) {
            cannot("write", &path, &e);
        }
    }
}

fn create_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(parent) => std::fs::create_dir_all(parent),
        None => Ok(()),
    }
}

fn cannot(what: &str, path: &Path, e: &std::io::Error) {
    util::err_line(&format!(
        "fake-agent: {}: cannot {what} {}: {e}",
        settings::LEFTOVERS,
        path.display()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::process::Command;

    /// Runs `git <args>` in `dir`, isolated from the user's and the system's configuration.
    fn git(dir: &Path, args: &[&str]) {
        let output = Command::new("git")
            .args(["-c", "user.name=Fake", "-c", "user.email=fake@example.com"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_COMMON_DIR")
            .output()
            .expect("git runs");
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// A temporary directory holding `main/` (a repository with one commit, whose `.git/info`
    /// and `.git/objects/info` exist and which holds none of the mount points) and, when
    /// `linked`, `wt/`, a linked worktree of it (so `main/.git/worktrees/` exists).
    fn repos(linked: bool) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let main = tmp.path().join("main");
        std::fs::create_dir(&main).unwrap();
        git(&main, &["init", "-q"]);
        git(
            &main,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "--no-gpg-sign",
                "-m",
                "init",
            ],
        );
        if linked {
            git(&main, &["worktree", "add", "-q", "../wt"]);
        }
        let common = main.join(".git");
        std::fs::create_dir_all(common.join("info")).unwrap();
        std::fs::create_dir_all(common.join("objects/info")).unwrap();
        for point in COMMON_MOUNT_POINTS {
            let (MountPoint::File(rel) | MountPoint::Dir(rel)) = point;
            if rel == "worktrees" && linked {
                continue;
            }
            let path = common.join(rel);
            if path.is_dir() {
                std::fs::remove_dir_all(&path).unwrap();
            } else if path.exists() {
                std::fs::remove_file(&path).unwrap();
            }
        }
        tmp
    }

    /// Every path under `root`, relative to it: `dir` for a directory, the content for a file,
    /// `-> target` for a symlink.
    fn snapshot(root: &Path) -> BTreeMap<String, String> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let meta = path.symlink_metadata().unwrap();
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&path).unwrap();
                    out.insert(rel, format!("-> {}", target.display()));
                } else if meta.is_dir() {
                    out.insert(rel, "dir".to_owned());
                    walk(root, &path, out);
                } else {
                    let bytes = std::fs::read(&path).unwrap();
                    out.insert(rel, String::from_utf8_lossy(&bytes).into_owned());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(root, root, &mut out);
        out
    }

    /// The paths that are new or changed in `after`, with their snapshot value; panics when a
    /// path disappeared.
    fn changes(
        before: &BTreeMap<String, String>,
        after: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        for path in before.keys() {
            assert!(after.contains_key(path), "{path} disappeared");
        }
        after
            .iter()
            .filter(|(path, value)| before.get(*path) != Some(*value))
            .map(|(path, value)| (path.clone(), value.clone()))
            .collect()
    }

    fn expected(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(path, value)| ((*path).to_owned(), (*value).to_owned()))
            .collect()
    }

    /// Runs `kind` from `start` and returns what changed under `root`.
    fn run(kind: Leftovers, root: &Path, start: &Path) -> BTreeMap<String, String> {
        let before = snapshot(root);
        kind.leave_in(start);
        changes(&before, &snapshot(root))
    }

    const FSMONITOR: &str = "[core]\n\tfsmonitor = /tmp/fake-agent-fsmonitor\n";

    #[test]
    fn claude_sandbox_in_a_main_worktree_leaves_the_common_mount_points() {
        let tmp = repos(false);
        let start = tmp.path().join("main/src/deep");
        std::fs::create_dir_all(&start).unwrap();
        let changed = run(Leftovers::ClaudeSandbox, tmp.path(), &start);
        assert_eq!(
            changed,
            expected(&[
                ("main/.git/config.worktree", ""),
                ("main/.git/objects/info/alternates", ""),
                ("main/.git/NOTES_MERGE_WORKTREE", "dir"),
                ("main/.git/glab-cli", "dir"),
                ("main/.git/worktrees", "dir"),
                ("main/.git/remotes", "dir"),
                ("main/.git/info/.claude-sandbox-noreplace", "dir"),
                ("main/.git/objects/info/.claude-sandbox-noreplace", "dir"),
                ("main/.git/objects/info/commit-graphs", "dir"),
                (
                    "main/.git/objects/info/commit-graphs/.claude-sandbox-noreplace",
                    "dir"
                ),
            ])
        );
        // A second run finds everything in place and changes nothing.
        assert!(run(Leftovers::ClaudeSandbox, tmp.path(), &start).is_empty());
    }

    #[test]
    fn claude_sandbox_in_a_linked_worktree_also_uses_its_own_git_dir() {
        let tmp = repos(true);
        let changed = run(Leftovers::ClaudeSandbox, tmp.path(), &tmp.path().join("wt"));
        assert_eq!(
            changed,
            expected(&[
                ("main/.git/config.worktree", ""),
                ("main/.git/objects/info/alternates", ""),
                ("main/.git/NOTES_MERGE_WORKTREE", "dir"),
                ("main/.git/glab-cli", "dir"),
                ("main/.git/remotes", "dir"),
                ("main/.git/info/.claude-sandbox-noreplace", "dir"),
                ("main/.git/objects/info/.claude-sandbox-noreplace", "dir"),
                ("main/.git/objects/info/commit-graphs", "dir"),
                (
                    "main/.git/objects/info/commit-graphs/.claude-sandbox-noreplace",
                    "dir"
                ),
                ("main/.git/worktrees/wt/config.worktree", ""),
                ("main/.git/worktrees/wt/NOTES_MERGE_WORKTREE", "dir"),
                ("main/.git/worktrees/wt/glab-cli", "dir"),
            ])
        );
    }

    #[test]
    fn claude_sandbox_leaves_existing_paths_alone_and_creates_missing_parents() {
        let tmp = repos(true);
        let common = tmp.path().join("main/.git");
        let own = common.join("worktrees/wt");
        std::fs::write(common.join("config.worktree"), "keep\n").unwrap();
        std::fs::write(common.join("glab-cli"), "a file, not a directory\n").unwrap();
        std::os::unix::fs::symlink("/nonexistent/remotes", common.join("remotes")).unwrap();
        std::fs::create_dir(common.join("NOTES_MERGE_WORKTREE")).unwrap();
        std::fs::write(common.join("NOTES_MERGE_WORKTREE/note"), "note\n").unwrap();
        std::fs::write(own.join("config.worktree"), "own\n").unwrap();
        std::fs::remove_dir_all(common.join("objects/info")).unwrap();
        std::fs::remove_dir_all(common.join("info")).unwrap();

        let changed = run(Leftovers::ClaudeSandbox, tmp.path(), &tmp.path().join("wt"));
        assert_eq!(
            changed,
            expected(&[
                ("main/.git/objects/info", "dir"),
                ("main/.git/objects/info/alternates", ""),
                ("main/.git/info", "dir"),
                ("main/.git/info/.claude-sandbox-noreplace", "dir"),
                ("main/.git/objects/info/.claude-sandbox-noreplace", "dir"),
                ("main/.git/objects/info/commit-graphs", "dir"),
                (
                    "main/.git/objects/info/commit-graphs/.claude-sandbox-noreplace",
                    "dir"
                ),
                ("main/.git/worktrees/wt/NOTES_MERGE_WORKTREE", "dir"),
                ("main/.git/worktrees/wt/glab-cli", "dir"),
            ])
        );
        let after = snapshot(tmp.path());
        assert_eq!(after["main/.git/config.worktree"], "keep\n");
        assert_eq!(after["main/.git/glab-cli"], "a file, not a directory\n");
        assert_eq!(after["main/.git/remotes"], "-> /nonexistent/remotes");
        assert_eq!(after["main/.git/NOTES_MERGE_WORKTREE/note"], "note\n");
        assert_eq!(after["main/.git/worktrees/wt/config.worktree"], "own\n");
    }

    #[test]
    fn hostile_plants_content_and_overwrites() {
        let tmp = repos(true);
        let common = tmp.path().join("main/.git");
        std::fs::write(common.join("config.worktree"), "keep\n").unwrap();
        let changed = run(Leftovers::Hostile, tmp.path(), &tmp.path().join("wt"));
        assert_eq!(
            changed,
            expected(&[
                ("main/.git/config.worktree", FSMONITOR),
                (
                    "main/.git/objects/info/alternates",
                    "/tmp/fake-agent-alternates\n"
                ),
                ("main/.git/glab-cli", "dir"),
                (
                    "main/.git/glab-cli/config.yml",
                    "editor: /tmp/fake-agent-editor\n"
                ),
                ("main/.git/objects/info/commit-graphs", "dir"),
                (
                    "main/.git/objects/info/commit-graphs/commit-graph-chain",
                    "0000000000000000000000000000000000000000\n"
                ),
                ("main/.git/NOTES_MERGE_WORKTREE", "dir"),
                ("main/.git/NOTES_MERGE_WORKTREE/planted", "planted\n"),
                ("main/.git/worktrees/wt/config.worktree", FSMONITOR),
            ])
        );
    }

    #[test]
    fn hostile_in_a_main_worktree_writes_only_the_common_files() {
        let tmp = repos(true);
        let changed = run(Leftovers::Hostile, tmp.path(), &tmp.path().join("main"));
        let paths: Vec<&str> = changed.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            [
                "main/.git/NOTES_MERGE_WORKTREE",
                "main/.git/NOTES_MERGE_WORKTREE/planted",
                "main/.git/config.worktree",
                "main/.git/glab-cli",
                "main/.git/glab-cli/config.yml",
                "main/.git/objects/info/alternates",
                "main/.git/objects/info/commit-graphs",
                "main/.git/objects/info/commit-graphs/commit-graph-chain",
            ]
        );
    }

    #[test]
    fn a_relative_gitdir_line_is_resolved_from_the_worktree_root() {
        let tmp = repos(true);
        std::fs::write(
            tmp.path().join("wt/.git"),
            "gitdir: ../main/.git/worktrees/wt\n",
        )
        .unwrap();
        let dirs = GitDirs::find(&tmp.path().join("wt")).unwrap();
        let common = std::fs::canonicalize(tmp.path().join("main/.git")).unwrap();
        assert_eq!(
            dirs,
            GitDirs {
                own: common.join("worktrees/wt"),
                common,
            }
        );
    }

    #[test]
    fn outside_a_repository_nothing_is_created() {
        let tmp = tempfile::tempdir().unwrap();
        // The temporary directory may itself sit inside a repository; only a start below a
        // `.git`-less root is checked here when it does not.
        if GitDirs::find(tmp.path()).is_err() {
            assert!(run(Leftovers::ClaudeSandbox, tmp.path(), tmp.path()).is_empty());
            assert!(run(Leftovers::Hostile, tmp.path(), tmp.path()).is_empty());
        }
    }

    #[test]
    fn switch_values() {
        let read = |value: &str| {
            Leftovers::from_settings(&Settings::with(&[(settings::LEFTOVERS, value)]))
        };
        assert_eq!(read("claude-sandbox"), Ok(Some(Leftovers::ClaudeSandbox)));
        assert_eq!(read("hostile"), Ok(Some(Leftovers::Hostile)));
        assert_eq!(read(""), Ok(None));
        assert_eq!(read("bogus"), Err("bogus".to_owned()));
        assert!(leave(&Settings::with(&[(settings::LEFTOVERS, "bogus")])).is_err());
    }
}
