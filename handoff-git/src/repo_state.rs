//! [`repo_state`]: what a handoff note records about a repository, read with gix.

use camino::Utf8Path;
use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::remote::Direction;
use handoff_core::{GitRemote, GitState, WorkspaceError, strip_url_credentials};

use crate::repo::{discover, git_error, head_commit};
use crate::workspace::{GitWorkspace, fingerprint_repository};

/// The remote a branch without a configured one is assumed to use.
const DEFAULT_REMOTE: &str = "origin";

/// Reads the state of the repository whose worktree contains `cwd`: its root, the checked-out
/// branch (`None` when HEAD is detached), the commit HEAD points at, the branch's remote (its
/// `branch.<name>.remote`, else `origin` when that exists) with credentials removed from its
/// URL, the remote-tracking ref HEAD is compared with, whether HEAD is contained in it, and
/// the uncommitted files, as `git status` reports them (from the worktree's fingerprint).
///
/// The tracking ref is the one `branch.<name>.merge` maps to through the remote's fetch
/// refspecs, else `refs/remotes/<remote>/<branch>`; `upstream` and `pushed` are `None` when it
/// does not exist. `pushed` is also `None` when the history between the two commits cannot be
/// read (a shallow clone, say). Nothing is written to the repository.
pub fn repo_state(cwd: &Utf8Path) -> Result<GitState, WorkspaceError> {
    let repo = discover(cwd)?;
    let fingerprint = fingerprint_repository(&repo, 0, &GitWorkspace::new(), None, None)?;
    let head_name = repo
        .head_name()
        .map_err(|err| git_error("cannot read HEAD", err))?;
    let branch_ref =
        head_name.filter(|name| name.category() == Some(gix::refs::Category::LocalBranch));
    let branch = branch_ref
        .as_ref()
        .map(|name| name.shorten().to_str_lossy().into_owned());
    let head = head_commit(&repo)?;

    // The branch's configured remote, else `origin` when it exists. A URL configured in place
    // of a remote's name is reported as both, with no tracking ref to compare with.
    let configured = branch
        .as_deref()
        .and_then(|branch| repo.branch_remote_name(branch, Direction::Fetch));
    let (remote_name, remote) = match configured {
        Some(gix::remote::Name::Url(url)) => {
            let url = strip_url_credentials(&url.to_str_lossy());
            let remote = GitRemote {
                name: url.clone(),
                url: Some(url),
            };
            (None, Some(remote))
        }
        configured => {
            let name = configured
                .and_then(|name| match name {
                    gix::remote::Name::Symbol(name) => Some(name.into_owned()),
                    gix::remote::Name::Url(_) => None,
                })
                // `.` is the repository itself.
                .filter(|name| name != ".")
                .or_else(|| {
                    repo.remote_names()
                        .iter()
                        .any(|name| name.to_str_lossy() == DEFAULT_REMOTE)
                        .then(|| DEFAULT_REMOTE.to_owned())
                });
            let remote = name.as_ref().map(|name| GitRemote {
                name: name.clone(),
                url: repo
                    .config_snapshot()
                    .plumbing()
                    .string_by("remote", Some(name.as_bytes().as_bstr()), "url")
                    .map(|url| strip_url_credentials(&url.to_str_lossy())),
            });
            (name, remote)
        }
    };

    let tracking = match (&branch_ref, &remote_name) {
        (Some(full), Some(remote)) => {
            let configured = repo
                .branch_remote_tracking_ref_name(full.as_ref(), Direction::Fetch)
                .and_then(Result::ok)
                .map(|name| name.as_bstr().to_str_lossy().into_owned());
            Some(configured.unwrap_or_else(|| {
                format!("refs/remotes/{remote}/{}", full.shorten().to_str_lossy())
            }))
        }
        _ => None,
    };
    let upstream = match tracking {
        Some(name) => tracking_commit(&repo, &name)?.map(|id| (name, id)),
        None => None,
    };
    let pushed = match (head, &upstream) {
        (Some(head), Some((_, tip))) => contains(&repo, *tip, head),
        _ => None,
    };
    Ok(GitState {
        repository: fingerprint.root,
        branch,
        head: head.map(|id| id.to_hex().to_string()),
        remote,
        upstream: upstream.map(|(name, _)| name),
        pushed,
        uncommitted: fingerprint.changes,
    })
}

/// The commit the ref `name` points at, `None` when there is no such ref (or `name` is not a
/// valid ref name).
fn tracking_commit(repo: &gix::Repository, name: &str) -> Result<Option<ObjectId>, WorkspaceError> {
    let Ok(found) = repo.try_find_reference(name) else {
        return Ok(None);
    };
    match found {
        None => Ok(None),
        Some(mut reference) => reference
            .peel_to_id()
            .map(|id| Some(id.detach()))
            .map_err(|err| git_error(&format!("cannot resolve '{name}'"), err)),
    }
}

/// Whether `commit` is `tip` or one of its ancestors; `None` when the history cannot be read.
fn contains(repo: &gix::Repository, tip: ObjectId, commit: ObjectId) -> Option<bool> {
    if tip == commit {
        return Some(true);
    }
    let walk = repo
        .rev_walk([tip])
        .sorting(gix::revision::walk::Sorting::ByCommitTime(
            gix::traverse::commit::simple::CommitTimeOrder::NewestFirst,
        ))
        .all()
        .ok()?;
    for info in walk {
        if info.ok()?.id == commit {
            return Some(true);
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use camino::Utf8PathBuf;

    use super::*;
    use crate::testing::git;

    /// A repository on `main` with one commit, in a temporary directory that also holds room
    /// for a bare remote.
    struct Fixture {
        _dir: tempfile::TempDir,
        base: Utf8PathBuf,
        root: Utf8PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let base = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
            let root = base.join("work");
            std::fs::create_dir(&root).unwrap();
            git(root.as_std_path(), &["init", "-q", "-b", "main"]);
            std::fs::write(root.join("a.txt"), "a\n").unwrap();
            git(root.as_std_path(), &["add", "-A"]);
            git(root.as_std_path(), &["commit", "-q", "-m", "one"]);
            Fixture {
                _dir: dir,
                base,
                root,
            }
        }

        fn git(&self, args: &[&str]) -> String {
            git(self.root.as_std_path(), args)
        }

        fn head(&self) -> String {
            self.git(&["rev-parse", "HEAD"])
        }

        /// A bare repository next to the worktree, added as remote `name`.
        fn bare_remote(&self, name: &str) -> Utf8PathBuf {
            let bare = self.base.join(format!("{name}.git"));
            git(
                self.base.as_std_path(),
                &["init", "-q", "--bare", bare.as_str()],
            );
            self.git(&["remote", "add", name, bare.as_str()]);
            bare
        }

        fn state(&self) -> GitState {
            repo_state(&self.root).unwrap()
        }
    }

    #[test]
    fn branch_head_and_clean_worktree() {
        let repo = Fixture::new();
        let state = repo.state();
        assert_eq!(state.repository, repo.root);
        assert_eq!(state.branch.as_deref(), Some("main"));
        assert_eq!(state.head, Some(repo.head()));
        assert_eq!(state.remote, None);
        assert_eq!(state.upstream, None);
        assert_eq!(state.pushed, None);
        assert!(state.uncommitted.is_empty());
        // From a subdirectory too.
        std::fs::create_dir(repo.root.join("sub")).unwrap();
        assert_eq!(repo_state(&repo.root.join("sub")).unwrap(), state);
    }

    #[test]
    fn detached_head_has_no_branch() {
        let repo = Fixture::new();
        let head = repo.head();
        repo.git(&["checkout", "-q", "--detach"]);
        let state = repo.state();
        assert_eq!(state.branch, None);
        assert_eq!(state.head, Some(head));
        assert_eq!(state.upstream, None);
    }

    #[test]
    fn unborn_branch_has_no_head() {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
        git(root.as_std_path(), &["init", "-q", "-b", "trunk"]);
        let state = repo_state(&root).unwrap();
        assert_eq!(state.branch.as_deref(), Some("trunk"));
        assert_eq!(state.head, None);
        assert_eq!(state.pushed, None);
    }

    #[test]
    fn uncommitted_files_are_listed_with_their_status() {
        let repo = Fixture::new();
        std::fs::write(repo.root.join("a.txt"), "changed\n").unwrap();
        std::fs::write(repo.root.join("new.txt"), "new\n").unwrap();
        std::fs::write(repo.root.join("staged.txt"), "s\n").unwrap();
        repo.git(&["add", "staged.txt"]);
        let state = repo.state();
        let listed: Vec<(String, String)> = state
            .uncommitted
            .iter()
            .map(|c| (c.path.clone(), handoff_core::status_words(c)))
            .collect();
        assert_eq!(
            listed,
            [
                ("a.txt".to_owned(), "modified".to_owned()),
                ("new.txt".to_owned(), "untracked".to_owned()),
                ("staged.txt".to_owned(), "staged".to_owned()),
            ]
        );
    }

    #[test]
    fn remote_url_loses_its_credentials() {
        let repo = Fixture::new();
        repo.git(&[
            "remote",
            "add",
            "origin",
            "https://me:s3cret-token@example.com/o/r.git",
        ]);
        let state = repo.state();
        assert_eq!(
            state.remote,
            Some(GitRemote {
                name: "origin".into(),
                url: Some("https://example.com/o/r.git".into()),
            })
        );
        assert!(!serde_json::to_string(&state).unwrap().contains("s3cret"));
        // No tracking ref was ever fetched.
        assert_eq!(state.upstream, None);
        assert_eq!(state.pushed, None);
    }

    #[test]
    fn the_branchs_configured_remote_wins_over_origin() {
        let repo = Fixture::new();
        repo.git(&["remote", "add", "origin", "https://example.com/origin.git"]);
        let fork = repo.bare_remote("fork");
        repo.git(&["push", "-q", "-u", "fork", "main"]);
        let state = repo.state();
        assert_eq!(
            state.remote,
            Some(GitRemote {
                name: "fork".into(),
                url: Some(fork.to_string()),
            })
        );
        assert_eq!(state.upstream.as_deref(), Some("refs/remotes/fork/main"));
        assert_eq!(state.pushed, Some(true));
    }

    #[test]
    fn pushed_follows_the_tracking_ref() {
        let repo = Fixture::new();
        repo.bare_remote("origin");
        // A remote but nothing fetched: no upstream, pushed unknown.
        assert_eq!(repo.state().pushed, None);

        // Pushed without `-u`: the tracking ref is found by name.
        repo.git(&["push", "-q", "origin", "main"]);
        let state = repo.state();
        assert_eq!(state.upstream.as_deref(), Some("refs/remotes/origin/main"));
        assert_eq!(state.pushed, Some(true));

        // A local commit on top: not pushed.
        std::fs::write(repo.root.join("b.txt"), "b\n").unwrap();
        repo.git(&["add", "b.txt"]);
        repo.git(&["commit", "-q", "-m", "two"]);
        assert_eq!(repo.state().pushed, Some(false));

        // Pushed again, then the remote moves ahead: HEAD is an ancestor, so still pushed.
        repo.git(&["push", "-q", "origin", "main"]);
        let before = repo.head();
        repo.git(&["commit", "-q", "--allow-empty", "-m", "three"]);
        repo.git(&["push", "-q", "origin", "main"]);
        repo.git(&["reset", "-q", "--hard", &before]);
        let state = repo.state();
        assert_eq!(state.head, Some(before));
        assert_eq!(state.pushed, Some(true));

        // Diverged: a commit the remote does not have.
        repo.git(&["commit", "-q", "--allow-empty", "-m", "four"]);
        assert_eq!(repo.state().pushed, Some(false));
    }

    #[test]
    fn upstream_configured_under_another_name_is_followed() {
        let repo = Fixture::new();
        repo.bare_remote("origin");
        repo.git(&["push", "-q", "origin", "main:trunk"]);
        repo.git(&["branch", "-q", "--set-upstream-to=origin/trunk"]);
        let state = repo.state();
        assert_eq!(state.upstream.as_deref(), Some("refs/remotes/origin/trunk"));
        assert_eq!(state.pushed, Some(true));
    }
}
