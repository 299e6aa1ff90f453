//! The `Workspace` trait: git evidence taken before and after a run.
//!
//! Core only defines the shape of a fingerprint and how two fingerprints compare; reading a
//! repository is the job of an implementation (`handoff-git` on gix).

use std::cmp::Ordering;
use std::collections::BTreeSet;

use camino::{Utf8Path, Utf8PathBuf};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod baseline;
mod entries;
mod parked;
mod record_pages;
mod stat_record;
pub use baseline::{Baseline, FingerprintBasis};
pub use entries::Entries;
pub use parked::{ParkedError, ParkedFingerprint, StateFile, StatesReader, StatesWriter};
use record_pages::Pages;
pub use record_pages::{RECORD_PAGE, RecordLookup, RecordedId};
pub use stat_record::{RECORD_BLOCK, Stamp, StatRecord};
use stat_record::{RECORD_HEADER, read_item};

/// Schema version of a serialized [`Fingerprint`].
pub const FINGERPRINT_SCHEMA: &str = "handoff.git-fingerprint.v1";

/// Reads git evidence for a worktree.
pub trait Workspace: Send + Sync {
    /// Fingerprints the repository that contains `cwd` (the whole worktree, not only `cwd`).
    fn fingerprint(&self, cwd: &Utf8Path) -> Result<Fingerprint, WorkspaceError>;

    /// A fingerprint of the worktree containing `cwd` taken after `before` (of the same
    /// worktree): a file counts as unchanged without being read only where `before`'s own
    /// record ([`StatRecord`]) vouches for it, never on the index's stat data, which an agent
    /// can rewrite. The default takes a plain [`Workspace::fingerprint`].
    fn fingerprint_since(
        &self,
        cwd: &Utf8Path,
        before: &Fingerprint,
    ) -> Result<Fingerprint, WorkspaceError> {
        let _ = before;
        self.fingerprint(cwd)
    }

    /// [`Workspace::fingerprint_since`] given `before` to keep: an implementation may let go
    /// of `before`'s record as soon as it has no more use for it, before it has finished the
    /// new fingerprint. The default lends it to [`Workspace::fingerprint_since`].
    fn fingerprint_after(
        &self,
        cwd: &Utf8Path,
        before: Fingerprint,
    ) -> Result<Fingerprint, WorkspaceError> {
        self.fingerprint_since(cwd, &before)
    }

    /// The same reader, but fingerprinting ignored files too (each one hashed every time: slow
    /// where build output is large); `None` when it cannot.
    fn including_ignored(&self) -> Option<std::sync::Arc<dyn Workspace>> {
        None
    }

    /// Makes a read-only snapshot of the worktree that contains `cwd` for a nested adviser:
    /// a new, independent repository at `dest` (which must not exist; its parent must) whose
    /// HEAD is a detached commit built from the worktree's current state (HEAD, staged,
    /// unstaged and untracked files; ignored files left out) and whose files are checked out
    /// with a clean index. The source repository is not written to: no ref moves, no object is
    /// added to it. The caller removes `dest` when done.
    fn snapshot(&self, cwd: &Utf8Path, dest: &Utf8Path) -> Result<Snapshot, WorkspaceError> {
        let _ = (cwd, dest);
        Err(WorkspaceError::Unsupported {
            what: "worktree snapshots",
        })
    }

    /// What an agent working in the worktree that contains `cwd` must never write, even when
    /// it may write the worktree: the repository's git directories (`.git`, and the common
    /// directory of a linked worktree) and the directory `core.hooksPath` names. Paths that
    /// do not exist are left out, but for the hooks directory, which is named even before it
    /// exists (a run could make it). handoff's own sandbox mounts them read-only.
    fn protected_paths(&self, cwd: &Utf8Path) -> Result<Vec<Utf8PathBuf>, WorkspaceError> {
        let _ = cwd;
        Err(WorkspaceError::Unsupported {
            what: "protected paths",
        })
    }

    /// The git directories of the worktree that contains `cwd`: its own and the repository's
    /// common one (one entry when they are the same), each with the key fingerprints give its
    /// paths. Where an agent CLI's sandbox leaves its mount points ([`crate::ArtifactWatch`]).
    fn git_dirs(&self, cwd: &Utf8Path) -> Result<Vec<crate::GitDir>, WorkspaceError> {
        let _ = cwd;
        Err(WorkspaceError::Unsupported {
            what: "git directories",
        })
    }

    /// Where the worktree that contains `cwd` belongs: its project (the main worktree) and the
    /// branch HEAD is on. Used to find or create the task a run is recorded in.
    fn location(&self, cwd: &Utf8Path) -> Result<WorktreeLocation, WorkspaceError> {
        let _ = cwd;
        Err(WorkspaceError::Unsupported {
            what: "worktree locations",
        })
    }

    /// The state of the configuration that runs programs in the worktree containing `cwd`
    /// (hooks, repository-level program settings, agents' configuration): what a task trusts
    /// from its first event on.
    fn config_state(&self, cwd: &Utf8Path) -> Result<crate::ConfigState, WorkspaceError> {
        let _ = cwd;
        Err(WorkspaceError::Unsupported {
            what: "configuration states",
        })
    }
}

/// Where a worktree belongs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeLocation {
    /// The project's main worktree (for a linked worktree, the one that holds the common git
    /// directory; else the worktree itself).
    pub project_root: Utf8PathBuf,
    /// The branch HEAD is on; `None` when detached.
    pub branch: Option<String>,
}

/// What a nested adviser works on: the asking node's own worktree, or a copy of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorktreeView {
    /// The asking node's worktree itself, which the adviser's sandbox cannot write (its
    /// filesystem write level is `none` or `temp`). Its fingerprints before and after the
    /// adviser's run must be equal: a change made meanwhile, by anyone, fails the advice.
    Live,
    /// A read-only copy made by [`Workspace::snapshot`], for an adviser that could write the
    /// worktree it runs in.
    Snapshot,
}

impl WorktreeView {
    /// The view as it reads in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WorktreeView::Live => "live",
            WorktreeView::Snapshot => "snapshot",
        }
    }
}

/// A read-only copy of a worktree's state, made by [`Workspace::snapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Snapshot {
    /// The worktree root the snapshot was taken of.
    #[schemars(with = "String")]
    pub source_root: Utf8PathBuf,
    /// The snapshot's worktree root (`dest`).
    #[schemars(with = "String")]
    pub root: Utf8PathBuf,
    /// The commit object holding the state (hex object id).
    pub commit: String,
    /// The commit the source's HEAD pointed at (the snapshot commit's parent), null on an
    /// unborn branch.
    pub base: Option<String>,
    /// How many files were checked out.
    pub files: u64,
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
    /// The implementation does not offer this.
    #[error("this workspace does not support {what}")]
    Unsupported {
        /// What was asked.
        what: &'static str,
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

/// A content-addressed picture of a worktree, and of the repository state next to it (HEAD,
/// refs, hooks, config, `info/*`), at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fingerprint {
    /// Always [`FINGERPRINT_SCHEMA`].
    pub schema_version: String,
    /// Hash algorithm of `digest` (`sha256`).
    pub algorithm: String,
    /// `sha256:<hex>` over every entry (key and state) in key order: equal iff the entries are.
    pub digest: String,
    /// The worktree root that was fingerprinted.
    #[schemars(with = "String")]
    pub root: Utf8PathBuf,
    /// The commit HEAD points at, or null on an unborn branch.
    pub head: Option<String>,
    /// How many entries were fingerprinted (worktree paths and `.git/…` entries).
    pub entry_count: u64,
    /// Status entries by kind.
    pub change_counts: ChangeCounts,
    /// What `git status` reports, sorted by path.
    pub changes: Vec<StatusChange>,
    /// Refs left out of the fingerprint because another linked worktree of the same repository
    /// has them checked out (its own work moves them), sorted; e.g. `refs/heads/feature`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_refs: Vec<String>,
    /// Whether ignored files were fingerprinted too (an opt-in).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub includes_ignored: bool,
    /// Per-path state (entry key → state string, equal iff nothing about the entry changed).
    ///
    /// Keys are repository-relative worktree paths and `.git/…` paths (HEAD, refs, hooks,
    /// config, `info/*`). Kept in memory for comparison and not part of the serialized form, which
    /// stays small however large the repository is; `handoff fingerprint --json` prints it.
    #[serde(skip)]
    #[schemars(skip)]
    pub entries: Entries,
    /// How the contents of tracked files were known: `record` (handoff's own record of an
    /// earlier fingerprint, each file whose stat data differs hashed), `index` (the index's
    /// stat data, read with git's strictest settings whatever the repository says), or
    /// `hashed: <why>` (every file read, e.g. on a network filesystem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    /// What was created since the baseline among the paths that the ignore rules of the
    /// baseline ignore (build output such as `target/` or `node_modules/`): one entry per
    /// top-most new ignored path, with how many files it holds, sorted by path, at most
    /// [`IGNORED_CREATED_LIMIT`]. Not part of the digest or of `changedFiles`: shown, not
    /// evidence. Empty without a baseline and when ignored files are fingerprinted one by one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_created: Vec<IgnoredTree>,
    /// How many more new ignored paths there were than `ignoredCreated` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ignored_created_omitted: u64,
    /// The `core.hooksPath` directory when it lies inside the worktree (a worktree path ending
    /// in `/`, e.g. `.husky/_/`): the files under it are hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_dir: Option<String>,
    /// handoff's own record of the tracked files it saw, for a later fingerprint of the same
    /// worktree to trust instead of the index ([`Workspace::fingerprint_since`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub record: Option<std::sync::Arc<StatRecord>>,
    /// The ignore rules and object store as this fingerprint saw them, for a later fingerprint
    /// of the same worktree to judge by ([`Workspace::fingerprint_since`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub baseline: Option<std::sync::Arc<Baseline>>,
}

/// How many new ignored paths [`Fingerprint::ignored_created`] lists at most.
pub const IGNORED_CREATED_LIMIT: usize = 100;
/// How many files are counted at most below one new ignored directory.
pub const IGNORED_COUNT_LIMIT: u64 = 100_000;

/// A path created during a run that the ignore rules before the run ignore, summarized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IgnoredTree {
    /// The worktree path; a directory ends in `/` (e.g. `target/`).
    pub path: String,
    /// How many files (regular files and symbolic links) it holds, below every level; 1 for a
    /// file. Not followed: symbolic links, nested repositories' `.git`.
    pub files: u64,
    /// Counting stopped at [`IGNORED_COUNT_LIMIT`] files: `files` is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
    /// The changed paths that configure programs (hooks, git settings that run a program,
    /// attributes, hook managers, agents' configuration), in `changedFiles` order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<crate::flags::Flag>,
    /// How many distinct paths held a secret and are shown masked (`leak-[REDACTED].txt`);
    /// left out when none did. The evidence was taken on the real paths.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub masked_paths: u64,
    /// For a writing run on another machine (`--on`): whether its change was applied to this
    /// worktree. `false` when this worktree changed while it ran: the change is then left on
    /// [`GitEvidence::branch`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<bool>,
    /// For a writing run on another machine whose change was not applied: the local branch
    /// (`handoff/<run>`) holding it as one commit on the commit the run started from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl Fingerprint {
    /// A fingerprint that holds nothing but a record of the worktree at `root` (one a store
    /// kept): what [`Workspace::fingerprint_since`] needs to trust that record.
    pub fn record_only(root: Utf8PathBuf, record: StatRecord) -> Fingerprint {
        Fingerprint {
            schema_version: FINGERPRINT_SCHEMA.into(),
            algorithm: "sha256".into(),
            digest: String::new(),
            root,
            head: None,
            entry_count: 0,
            change_counts: ChangeCounts::default(),
            changes: Vec::new(),
            excluded_refs: Vec::new(),
            includes_ignored: false,
            entries: Entries::default(),
            verified_by: None,
            ignored_created: Vec::new(),
            ignored_created_omitted: 0,
            hooks_dir: None,
            record: Some(std::sync::Arc::new(record)),
            baseline: None,
        }
    }

    /// This fingerprint without its per-path states and status list: what a later
    /// [`Workspace::fingerprint_since`] needs of it (its root and record), cheap to move to
    /// another thread.
    pub fn slim(&self) -> Fingerprint {
        Fingerprint {
            schema_version: self.schema_version.clone(),
            algorithm: self.algorithm.clone(),
            digest: self.digest.clone(),
            root: self.root.clone(),
            head: self.head.clone(),
            entry_count: self.entry_count,
            change_counts: self.change_counts.clone(),
            changes: Vec::new(),
            excluded_refs: self.excluded_refs.clone(),
            includes_ignored: self.includes_ignored,
            entries: Entries::default(),
            verified_by: self.verified_by.clone(),
            ignored_created: self.ignored_created.clone(),
            ignored_created_omitted: self.ignored_created_omitted,
            hooks_dir: self.hooks_dir.clone(),
            record: self.record.clone(),
            baseline: self.baseline.clone(),
        }
    }

    /// This fingerprint without its per-path states and its record: all that it serializes.
    pub fn summary(&self) -> Fingerprint {
        Fingerprint {
            changes: self.changes.clone(),
            record: None,
            baseline: None,
            ..self.slim()
        }
    }

    /// Compares this fingerprint (before) with `after`; the evidence holds copies of both.
    ///
    /// `changed` is whether the digests differ and `changed_files` every entry key whose state
    /// differs. When the two fingerprints left out different refs (another worktree checked out
    /// another branch meanwhile), the refs left out by either are not compared, and `changed` is
    /// decided entry by entry.
    pub fn compare(&self, after: &Fingerprint) -> GitEvidence {
        GitEvidence {
            before: Some(self.clone()),
            after: Some(after.clone()),
            ..self.compare_summaries(after)
        }
    }

    /// [`compare`](Self::compare), but the evidence holds both fingerprints as their
    /// [`summary`](Self::summary) (all that is serialized): their per-path states are not
    /// copied.
    pub fn compare_summaries(&self, after: &Fingerprint) -> GitEvidence {
        compare_states(self, self.entries.len(), self.entries.iter(), after)
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
            flags: Vec::new(),
            masked_paths: 0,
            applied: None,
            branch: None,
        }
    }
}

/// [`Fingerprint::compare_summaries`] of `before` (whose per-path states are `before_states`:
/// `before_len` entries in key order, wherever they are kept) with `after`.
pub(crate) fn compare_states<K: AsRef<str>, S: AsRef<str>>(
    before: &Fingerprint,
    before_len: usize,
    before_states: impl Iterator<Item = (K, S)>,
    after: &Fingerprint,
) -> GitEvidence {
    let same_exclusions = before.excluded_refs == after.excluded_refs;
    let by_entries = !same_exclusions && before_len > 0 && !after.entries.is_empty();
    let skipped: BTreeSet<String> = if by_entries {
        before
            .excluded_refs
            .iter()
            .chain(&after.excluded_refs)
            .map(|name| format!(".git/{name}"))
            .collect()
    } else {
        BTreeSet::new()
    };
    // Each changed key with its state before (none when it was not there).
    let mut files: Vec<(String, Option<String>)> = Vec::new();
    if before.digest != after.digest {
        let mut earlier = before_states.peekable();
        let mut later = after.entries.iter().peekable();
        loop {
            let (key, was) = match (earlier.peek(), later.peek()) {
                (None, None) => break,
                (Some(_), None) => match earlier.next() {
                    Some((k, s)) => (k.as_ref().to_owned(), Some(s.as_ref().to_owned())),
                    None => break,
                },
                (None, Some((a, _))) => {
                    let key = (*a).to_owned();
                    later.next();
                    (key, None)
                }
                (Some((b, bs)), Some((a, as_))) => match b.as_ref().cmp(a) {
                    Ordering::Less => match earlier.next() {
                        Some((k, s)) => (k.as_ref().to_owned(), Some(s.as_ref().to_owned())),
                        None => break,
                    },
                    Ordering::Greater => {
                        let key = (*a).to_owned();
                        later.next();
                        (key, None)
                    }
                    Ordering::Equal => {
                        let same = bs.as_ref() == *as_;
                        let entry = earlier.next();
                        later.next();
                        match entry {
                            Some(_) if same => continue,
                            Some((k, s)) => (k.as_ref().to_owned(), Some(s.as_ref().to_owned())),
                            None => break,
                        }
                    }
                },
            };
            if !skipped.contains(&key) {
                files.push((key, was));
            }
        }
    }
    let changed = if by_entries {
        !files.is_empty()
    } else {
        before.digest != after.digest
    };
    // A hooks directory either side names: one set during the run counts too.
    let hooks_dirs: Vec<&str> = [&before.hooks_dir, &after.hooks_dir]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let flags = files
        .iter()
        .filter_map(|(f, was)| {
            crate::flags::flag(f, was.as_deref(), after.entries.get(f), &hooks_dirs)
        })
        .collect();
    GitEvidence {
        before: Some(before.summary()),
        after: Some(after.summary()),
        changed,
        changed_files: files.into_iter().map(|(f, _)| f).collect(),
        flags,
        masked_paths: 0,
        applied: None,
        branch: None,
    }
}

#[cfg(test)]
mod tests;
