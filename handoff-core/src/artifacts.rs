//! What an agent CLI's own sandbox leaves in the repository, and the sweep that takes it away.
//!
//! A sandbox that denies writing a path mounts over it, and where the path did not exist it
//! first makes an empty file or directory to mount on, which outlives the run: Claude Code
//! 2.1.332 leaves an empty `.git/config.worktree`, `.git/objects/info/alternates` and a few
//! empty directories in every repository it runs a command in. Each adapter lists what its
//! CLI leaves, per version range ([`SandboxArtifacts`]); the engine notes which of those paths
//! are absent before a run ([`ArtifactWatch::take`]) and, once the agent's processes are gone
//! and before the "after" fingerprint, removes each that is still an empty regular file or an
//! empty directory ([`ArtifactWatch::sweep`]). Anything with content, anything that existed
//! before, a symbolic link and anything outside the table stays, and is evidence.

use camino::{Utf8Path, Utf8PathBuf};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compat::{Version, VersionRange};

/// What a sandbox leaves at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ArtifactKind {
    /// An empty regular file.
    EmptyFile,
    /// An empty directory.
    EmptyDirectory,
}

/// One path a sandbox may leave, relative to a git directory (the worktree's own and the
/// repository's common one, which are the same outside linked worktrees).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactPath {
    /// The path inside the git directory (`objects/info/alternates`).
    pub path: &'static str,
    /// What is left there.
    pub kind: ArtifactKind,
}

/// The paths a CLI's sandbox leaves in the versions of `versions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactRule {
    /// The CLI versions (as `--version` prints them) that leave them.
    pub versions: VersionRange,
    /// What they leave.
    pub paths: &'static [ArtifactPath],
}

/// How a table was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactsChecked {
    /// Read off the real binary (the versions it was checked on).
    Real(&'static str),
    /// Not checked on a real binary; why.
    Unproven(&'static str),
}

/// What an agent CLI's own sandbox leaves in repositories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxArtifacts {
    /// How the table was established.
    pub checked: ArtifactsChecked,
    /// The paths, by version range.
    pub rules: &'static [ArtifactRule],
}

impl SandboxArtifacts {
    /// The paths the CLI of `version` (a `--version` line) leaves: those of every rule whose
    /// range holds it; of every rule when the version is unknown (the sweep only ever removes
    /// empty paths that were absent before, so sweeping more is harmless, and less would
    /// report the CLI's own mount points as the agent's change).
    pub fn paths_for(&self, version: Option<&str>) -> Vec<ArtifactPath> {
        let version = version.and_then(Version::find);
        let mut out: Vec<ArtifactPath> = Vec::new();
        for rule in self.rules {
            if version.as_ref().is_none_or(|v| rule.versions.contains(v)) {
                for p in rule.paths {
                    if !out.contains(p) {
                        out.push(*p);
                    }
                }
            }
        }
        out
    }

    /// Every path of every rule, whatever the version.
    pub fn all_paths(&self) -> Vec<ArtifactPath> {
        self.paths_for(None)
    }
}

/// A git directory of a worktree, and the key its paths take in fingerprints (`.git` for the
/// common directory, `.git/worktrees/<id>` for a linked worktree's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDir {
    /// Its absolute path.
    pub path: Utf8PathBuf,
    /// The key prefix of its paths.
    pub key: String,
}

/// A path swept after a run, or one in the table that was left because it is not a bare
/// mount point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SweptArtifact {
    /// The path as fingerprints key it (`.git/config.worktree`).
    pub path: String,
    /// What was there.
    pub kind: ArtifactKind,
}

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sweep {
    /// Removed: empty, absent before the run, in the table.
    pub removed: Vec<SweptArtifact>,
    /// In the table and absent before the run, but left as evidence, with why (it has
    /// content, is a link, or is not what the table says).
    pub kept: Vec<KeptArtifact>,
}

/// A path of the table left in place after a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeptArtifact {
    /// The path as fingerprints key it.
    pub path: String,
    /// Why it stays.
    pub reason: String,
}

impl Sweep {
    /// The receipt that goes in `policy.sandbox`: `artifacts` (what was removed) and, when
    /// any, `artifactsKept`.
    pub fn receipt(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut out = serde_json::Map::new();
        out.insert(
            "artifacts".into(),
            serde_json::to_value(&self.removed).unwrap_or_default(),
        );
        if !self.kept.is_empty() {
            out.insert(
                "artifactsKept".into(),
                serde_json::to_value(&self.kept).unwrap_or_default(),
            );
        }
        out
    }

    /// Adds this sweep to `policy.sandbox` (made an object when it is not one).
    pub fn record(&self, policy: &mut serde_json::Value) {
        let Some(policy) = policy.as_object_mut() else {
            return;
        };
        let sandbox = policy
            .entry("sandbox")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        if !sandbox.is_object() {
            *sandbox = serde_json::Value::Object(Default::default());
        }
        if let Some(sandbox) = sandbox.as_object_mut() {
            sandbox.extend(self.receipt());
        }
    }
}

/// One path of the table that did not exist before the run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Watched {
    /// The git directory it is in.
    root: Utf8PathBuf,
    path: Utf8PathBuf,
    key: String,
    artifact: ArtifactPath,
}

/// The paths of a table that were absent when the run began: the only ones a sweep may
/// remove.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArtifactWatch {
    absent: Vec<Watched>,
}

impl ArtifactWatch {
    /// Notes which of `paths`, in each of `git_dirs`, do not exist now (nothing is followed:
    /// a dangling link exists).
    pub fn take(git_dirs: &[GitDir], paths: &[ArtifactPath]) -> ArtifactWatch {
        let mut absent = Vec::new();
        for dir in git_dirs {
            for artifact in paths {
                let path = dir.path.join(artifact.path);
                if std::fs::symlink_metadata(&path)
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
                {
                    absent.push(Watched {
                        root: dir.path.clone(),
                        path,
                        key: format!("{}/{}", dir.key, artifact.path),
                        artifact: *artifact,
                    });
                }
            }
        }
        absent.dedup_by(|a, b| a.path == b.path);
        ArtifactWatch { absent }
    }

    /// Whether nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.absent.is_empty()
    }

    /// Removes each watched path of `applicable` that is now an empty regular file or an
    /// empty directory, as its table says, deepest first. Call it only once every process
    /// that could write there is gone.
    pub fn sweep(&self, applicable: &[ArtifactPath]) -> Sweep {
        let mut watched: Vec<&Watched> = self
            .absent
            .iter()
            .filter(|w| applicable.contains(&w.artifact))
            .collect();
        // Deepest first, so that a directory the sandbox made inside another goes first.
        watched.sort_by_key(|w| std::cmp::Reverse(w.path.components().count()));
        let mut sweep = Sweep::default();
        for w in watched {
            let removed = match followed_link(&w.root, &w.path) {
                Some(link) => Err(format!("{link} on its path is not a plain directory")),
                None => remove_if_bare(&w.path, w.artifact.kind),
            };
            match removed {
                Ok(true) => sweep.removed.push(SweptArtifact {
                    path: w.key.clone(),
                    kind: w.artifact.kind,
                }),
                Ok(false) => {}
                Err(reason) => sweep.kept.push(KeptArtifact {
                    path: w.key.clone(),
                    reason,
                }),
            }
        }
        sweep.removed.sort_by(|a, b| a.path.cmp(&b.path));
        sweep.kept.sort_by(|a, b| a.path.cmp(&b.path));
        sweep
    }
}

/// The first of `root` and the directories between it and `path` that is not a plain
/// directory (a symbolic link put in place of one would make the sweep remove a path outside
/// the git directory).
fn followed_link(root: &Utf8Path, path: &Utf8Path) -> Option<Utf8PathBuf> {
    let mut dir = root.to_owned();
    let mut check = vec![dir.clone()];
    if let Ok(rest) = path.strip_prefix(root) {
        let parts: Vec<_> = rest.components().collect();
        for part in parts.iter().take(parts.len().saturating_sub(1)) {
            dir.push(part);
            check.push(dir.clone());
        }
    }
    // A missing directory ends the walk: the path is not there to remove.
    check
        .into_iter()
        .map_while(|d| std::fs::symlink_metadata(&d).ok().map(|m| (d, m)))
        .find(|(_, m)| !m.file_type().is_dir())
        .map(|(d, _)| d)
}

/// Removes `path` when it is what `kind` says and empty: `Ok(true)` removed, `Ok(false)` not
/// there, `Err(why)` left in place.
fn remove_if_bare(path: &Utf8Path, kind: ArtifactKind) -> Result<bool, String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("cannot be read: {e}")),
    };
    let t = meta.file_type();
    match kind {
        ArtifactKind::EmptyFile if t.is_file() && meta.len() == 0 => std::fs::remove_file(path)
            .map(|()| true)
            .map_err(|e| format!("cannot be removed: {e}")),
        ArtifactKind::EmptyFile if t.is_file() => {
            Err(format!("has content ({} bytes)", meta.len()))
        }
        // `rmdir` removes a directory only when it is empty.
        ArtifactKind::EmptyDirectory if t.is_dir() => match std::fs::remove_dir(path) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => Err("has content".into()),
            Err(e) => Err(format!("cannot be removed: {e}")),
        },
        _ if t.is_symlink() => Err("is a symbolic link".into()),
        ArtifactKind::EmptyFile => Err("is not a regular file".into()),
        ArtifactKind::EmptyDirectory => Err("is not a directory".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: ArtifactPath = ArtifactPath {
        path: "config.worktree",
        kind: ArtifactKind::EmptyFile,
    };
    const DIR: ArtifactPath = ArtifactPath {
        path: "glab-cli",
        kind: ArtifactKind::EmptyDirectory,
    };
    const OUTER: ArtifactPath = ArtifactPath {
        path: "objects/info/commit-graphs",
        kind: ArtifactKind::EmptyDirectory,
    };
    const INNER: ArtifactPath = ArtifactPath {
        path: "objects/info/commit-graphs/.marker",
        kind: ArtifactKind::EmptyDirectory,
    };
    const ALL: [ArtifactPath; 4] = [FILE, DIR, OUTER, INNER];

    fn git_dir() -> (tempfile::TempDir, GitDir) {
        let tmp = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(tmp.path().join(".git")).unwrap();
        std::fs::create_dir_all(path.join("objects/info")).unwrap();
        (
            tmp,
            GitDir {
                path,
                key: ".git".into(),
            },
        )
    }

    fn keys(list: &[SweptArtifact]) -> Vec<&str> {
        list.iter().map(|a| a.path.as_str()).collect()
    }

    #[test]
    fn bare_mount_points_made_during_the_run_are_swept_deepest_first() {
        let (_tmp, dir) = git_dir();
        let watch = ArtifactWatch::take(std::slice::from_ref(&dir), &ALL);
        std::fs::write(dir.path.join("config.worktree"), "").unwrap();
        std::fs::create_dir(dir.path.join("glab-cli")).unwrap();
        std::fs::create_dir_all(dir.path.join("objects/info/commit-graphs/.marker")).unwrap();
        let sweep = watch.sweep(&ALL);
        assert_eq!(
            keys(&sweep.removed),
            [
                ".git/config.worktree",
                ".git/glab-cli",
                ".git/objects/info/commit-graphs",
                ".git/objects/info/commit-graphs/.marker"
            ]
        );
        assert!(sweep.kept.is_empty(), "{:?}", sweep.kept);
        assert!(!dir.path.join("objects/info/commit-graphs").exists());
        assert!(dir.path.join("objects/info").is_dir());
    }

    #[test]
    fn content_earlier_paths_links_and_paths_outside_the_table_stay() {
        let (_tmp, dir) = git_dir();
        // There before the run, empty: not the run's.
        std::fs::create_dir(dir.path.join("glab-cli")).unwrap();
        let watch = ArtifactWatch::take(std::slice::from_ref(&dir), &ALL);
        std::fs::write(
            dir.path.join("config.worktree"),
            "[core]\n\tfsmonitor = evil\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path.join("objects/info/commit-graphs")).unwrap();
        std::fs::write(
            dir.path.join("objects/info/commit-graphs/graph-1.graph"),
            "x",
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc", dir.path.join("objects/info/commit-graphs/.marker"))
            .unwrap();
        // Not in the table.
        std::fs::create_dir(dir.path.join("NOT_IN_TABLE")).unwrap();
        let sweep = watch.sweep(&ALL);
        assert!(sweep.removed.is_empty(), "{:?}", sweep.removed);
        let kept: Vec<(&str, &str)> = sweep
            .kept
            .iter()
            .map(|k| (k.path.as_str(), k.reason.as_str()))
            .collect();
        assert_eq!(
            kept,
            [
                (".git/config.worktree", "has content (25 bytes)"),
                (".git/objects/info/commit-graphs", "has content"),
                (
                    ".git/objects/info/commit-graphs/.marker",
                    "is a symbolic link"
                ),
            ]
        );
        assert!(dir.path.join("glab-cli").is_dir());
        assert!(dir.path.join("NOT_IN_TABLE").is_dir());
    }

    #[test]
    fn a_link_put_in_place_of_a_directory_on_the_path_makes_nothing_outside_removable() {
        let (tmp, dir) = git_dir();
        let watch = ArtifactWatch::take(std::slice::from_ref(&dir), &ALL);
        // An empty directory of the user's, outside the repository, named like a mount point.
        let victim = tmp.path().join("victim");
        std::fs::create_dir_all(victim.join("commit-graphs")).unwrap();
        std::fs::rename(dir.path.join("objects/info"), tmp.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.path.join("objects/info")).unwrap();
        let sweep = watch.sweep(&ALL);
        assert!(victim.join("commit-graphs").is_dir(), "{sweep:?}");
        assert!(sweep.removed.is_empty(), "{sweep:?}");
        assert!(
            sweep
                .kept
                .iter()
                .any(|k| k.path == ".git/objects/info/commit-graphs"
                    && k.reason
                        .ends_with("objects/info on its path is not a plain directory")),
            "{sweep:?}"
        );
    }

    #[test]
    fn a_path_of_the_other_kind_stays_and_only_applicable_paths_are_swept() {
        let (_tmp, dir) = git_dir();
        let watch = ArtifactWatch::take(std::slice::from_ref(&dir), &ALL);
        std::fs::create_dir(dir.path.join("config.worktree")).unwrap();
        std::fs::write(dir.path.join("glab-cli"), "").unwrap();
        let sweep = watch.sweep(&ALL);
        assert!(sweep.removed.is_empty());
        assert_eq!(sweep.kept.len(), 2, "{:?}", sweep.kept);
        std::fs::remove_dir(dir.path.join("config.worktree")).unwrap();
        std::fs::write(dir.path.join("config.worktree"), "").unwrap();
        // A table that does not apply to this version removes nothing.
        assert!(watch.sweep(&[DIR]).removed.is_empty());
        assert!(dir.path.join("config.worktree").exists());
    }

    #[test]
    fn rules_apply_by_version_and_to_every_version_when_it_is_unknown() {
        static OLD: [ArtifactPath; 1] = [FILE];
        static NEW: [ArtifactPath; 1] = [DIR];
        static RULES: [ArtifactRule; 2] = [
            ArtifactRule {
                versions: VersionRange {
                    min: None,
                    max: Some("1.9"),
                },
                paths: &OLD,
            },
            ArtifactRule {
                versions: VersionRange::from("2.0"),
                paths: &NEW,
            },
        ];
        let table = SandboxArtifacts {
            checked: ArtifactsChecked::Real("2.1.332"),
            rules: &RULES,
        };
        assert_eq!(table.paths_for(Some("1.5 (Claude Code)")), [FILE]);
        assert_eq!(table.paths_for(Some("2.1.332 (Claude Code)")), [DIR]);
        assert_eq!(table.paths_for(None), [FILE, DIR]);
        assert_eq!(table.paths_for(Some("no version")), [FILE, DIR]);
    }

    #[test]
    fn the_receipt_lands_in_policy_sandbox() {
        let sweep = Sweep {
            removed: vec![SweptArtifact {
                path: ".git/glab-cli".into(),
                kind: ArtifactKind::EmptyDirectory,
            }],
            kept: vec![],
        };
        let mut policy = serde_json::json!({"sandbox": {"enforcement": "native"}});
        sweep.record(&mut policy);
        assert_eq!(
            policy["sandbox"],
            serde_json::json!({
                "enforcement": "native",
                "artifacts": [{"path": ".git/glab-cli", "kind": "empty-directory"}],
            })
        );
        let mut bare = serde_json::json!({});
        Sweep::default().record(&mut bare);
        assert_eq!(bare, serde_json::json!({"sandbox": {"artifacts": []}}));
    }
}
