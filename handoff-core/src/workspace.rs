//! The `Workspace` trait: git evidence taken before and after a run.
//!
//! Core only defines the shape of a fingerprint and how two fingerprints compare; reading a
//! repository is the job of an implementation (`handoff-git` on gix).

use std::collections::{BTreeMap, BTreeSet};

use camino::{Utf8Path, Utf8PathBuf};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Schema version of a serialized [`Fingerprint`].
pub const FINGERPRINT_SCHEMA: &str = "handoff.git-fingerprint.v1";

/// Reads git evidence for a worktree.
pub trait Workspace: Send + Sync {
    /// Fingerprints the repository that contains `cwd` (the whole worktree, not only `cwd`).
    fn fingerprint(&self, cwd: &Utf8Path) -> Result<Fingerprint, WorkspaceError>;
}

/// Why a fingerprint could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The directory is not inside a git worktree.
    #[error("'{path}' is not inside a git worktree")]
    NotAWorktree {
        /// The directory that was asked about.
        path: Utf8PathBuf,
    },
    /// A file or directory could not be read.
    #[error("cannot read '{path}': {source}")]
    Io {
        /// What was being read.
        path: Utf8PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The git library reported an error.
    #[error("git: {message}")]
    Git {
        /// The library's message.
        message: String,
    },
}

/// Counts of the status entries of a fingerprint, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeCounts {
    /// Paths whose index entry differs from HEAD.
    pub staged: u64,
    /// Tracked paths whose worktree content or mode differs from the index.
    pub unstaged: u64,
    /// Untracked, not ignored paths.
    pub untracked: u64,
    /// Tracked paths missing from the worktree.
    pub deleted: u64,
}

/// One path that `git status` would report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusChange {
    /// Repository-relative path with `/` separators.
    pub path: String,
    /// The index entry differs from HEAD.
    pub staged: bool,
    /// The worktree differs from the index.
    pub unstaged: bool,
    /// Not tracked and not ignored.
    pub untracked: bool,
    /// Tracked but missing from the worktree.
    pub deleted: bool,
}

/// A content-addressed picture of a worktree at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fingerprint {
    /// Always [`FINGERPRINT_SCHEMA`].
    pub schema_version: String,
    /// Hash algorithm of `digest` (`sha256`).
    pub algorithm: String,
    /// `sha256:<hex>` over HEAD and every entry's state, in path order.
    pub digest: String,
    /// The worktree root that was fingerprinted.
    #[schemars(with = "String")]
    pub root: Utf8PathBuf,
    /// The commit HEAD points at, or null on an unborn branch.
    pub head: Option<String>,
    /// How many paths were fingerprinted.
    pub entry_count: u64,
    /// Status entries by kind.
    pub change_counts: ChangeCounts,
    /// What `git status` reports, sorted by path.
    pub changes: Vec<StatusChange>,
    /// Per-path state (`path` → opaque state string, equal iff the path is unchanged).
    /// Kept in memory for comparison; not part of the serialized evidence.
    #[serde(skip)]
    #[schemars(skip)]
    pub entries: BTreeMap<String, String>,
}

/// What changed between two fingerprints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitEvidence {
    /// Fingerprint before the agent ran (null when the run stopped before it was taken).
    pub before: Option<Fingerprint>,
    /// Fingerprint after the agent ran (null when it could not be taken).
    pub after: Option<Fingerprint>,
    /// Whether the digests differ.
    pub changed: bool,
    /// Every path whose state differs, sorted bytewise.
    pub changed_files: Vec<String>,
}

impl Fingerprint {
    /// Compares this fingerprint (before) with `after`.
    pub fn compare(&self, after: &Fingerprint) -> GitEvidence {
        let changed = self.digest != after.digest;
        let mut files = BTreeSet::new();
        if changed {
            for (path, state) in &self.entries {
                if after.entries.get(path) != Some(state) {
                    files.insert(path.clone());
                }
            }
            for path in after.entries.keys() {
                if !self.entries.contains_key(path) {
                    files.insert(path.clone());
                }
            }
        }
        GitEvidence {
            before: Some(self.clone()),
            after: Some(after.clone()),
            changed,
            changed_files: files.into_iter().collect(),
        }
    }
}

impl GitEvidence {
    /// Evidence for a run where only the "before" fingerprint exists (or none).
    pub fn partial(before: Option<Fingerprint>) -> Self {
        GitEvidence {
            before,
            after: None,
            changed: false,
            changed_files: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(digest: &str, entries: &[(&str, &str)]) -> Fingerprint {
        Fingerprint {
            schema_version: FINGERPRINT_SCHEMA.into(),
            algorithm: "sha256".into(),
            digest: digest.into(),
            root: "/r".into(),
            head: None,
            entry_count: entries.len() as u64,
            change_counts: ChangeCounts::default(),
            changes: vec![],
            entries: entries
                .iter()
                .map(|(p, s)| (p.to_string(), s.to_string()))
                .collect(),
        }
    }

    #[test]
    fn compare_lists_added_removed_and_modified_paths_sorted() {
        let a = fp("sha256:a", &[("a", "1"), ("b", "1"), ("c", "1")]);
        let b = fp("sha256:b", &[("a", "1"), ("b", "2"), ("d", "1")]);
        let e = a.compare(&b);
        assert!(e.changed);
        assert_eq!(e.changed_files, vec!["b", "c", "d"]);
    }

    #[test]
    fn equal_digests_mean_no_change() {
        let a = fp("sha256:a", &[("a", "1")]);
        let e = a.compare(&a.clone());
        assert!(!e.changed);
        assert!(e.changed_files.is_empty());
    }
}
