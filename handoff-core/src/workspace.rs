//! The `Workspace` trait: git evidence taken before and after a run.
//!
//! Core only defines the shape of a fingerprint and how two fingerprints compare; reading a
//! repository is the job of an implementation (`handoff-git` on gix).

use std::cmp::Ordering;
use std::collections::BTreeSet;

use camino::{Utf8Path, Utf8PathBuf};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// The `core.hooksPath` directory when it lies inside the worktree (a worktree path ending
    /// in `/`, e.g. `.husky/_/`): the files under it are hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_dir: Option<String>,
    /// handoff's own record of the tracked files it saw, for a later fingerprint of the same
    /// worktree to trust instead of the index ([`Workspace::fingerprint_since`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub record: Option<std::sync::Arc<StatRecord>>,
}

/// The stat data of one file as handoff saw it, at full width: what an agent cannot set back
/// all of (its ctime moves with every change and cannot be set without privileges).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Mode (type and permissions).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: i64,
    /// Modification time: seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// Status-change time: seconds and nanoseconds.
    pub ctime: (i64, i64),
}

/// handoff's own record of the tracked files a fingerprint saw: per path, its [`Stamp`] and the
/// object id of its content. A later fingerprint counts a path as unchanged without reading it
/// only if its stamp is the same and was older than the recording scan by more than the
/// filesystem's timestamp granularity (a file changed during the scan may share its stamp);
/// otherwise it hashes. The index's stat data, which an agent can rewrite, is not consulted.
///
/// Paths are kept sorted bytewise in one buffer, ids at a fixed width, so that 100,000 files
/// cost a few allocations. Two records always compare equal: a record is how a fingerprint was
/// taken, not what it found.
#[derive(Debug, Clone, Default)]
pub struct StatRecord {
    paths: Vec<u8>,
    ends: Vec<u32>,
    stamps: Vec<Stamp>,
    ids: Vec<u8>,
    id_len: usize,
}

impl PartialEq for StatRecord {
    fn eq(&self, _: &StatRecord) -> bool {
        true
    }
}

impl Eq for StatRecord {}

impl StatRecord {
    /// An empty record for object ids of `id_len` bytes.
    pub fn new(id_len: usize) -> StatRecord {
        StatRecord {
            id_len,
            ..StatRecord::default()
        }
    }

    /// Adds `path`; paths must come in bytewise order (others are left out).
    pub fn push(&mut self, path: &[u8], stamp: Stamp, id: &[u8]) {
        if id.len() != self.id_len
            || !self.is_empty() && self.path(self.len() - 1) >= path
            || u32::try_from(self.paths.len() + path.len()).is_err()
        {
            return;
        }
        self.paths.extend_from_slice(path);
        self.ends.push(self.paths.len() as u32);
        self.stamps.push(stamp);
        self.ids.extend_from_slice(id);
    }

    /// Appends another record whose paths all sort after this one's.
    pub fn append(&mut self, other: &StatRecord) {
        for i in 0..other.len() {
            self.push(other.path(i), other.stamps[i], other.id(i));
        }
    }

    /// How many paths it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn path(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.paths[start..self.ends[i] as usize]
    }

    fn id(&self, i: usize) -> &[u8] {
        &self.ids[i * self.id_len..(i + 1) * self.id_len]
    }

    /// The record as bytes, for a store to keep: a header (`HSR1`, the id width), then per path
    /// its length, its bytes, the stamp's ten fields and the id, all integers little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(8 + self.paths.len() + self.len() * (4 + 80) + self.ids.len());
        out.extend_from_slice(b"HSR1");
        out.push(self.id_len as u8);
        for i in 0..self.len() {
            let path = self.path(i);
            out.extend_from_slice(&(path.len() as u32).to_le_bytes());
            out.extend_from_slice(path);
            let s = &self.stamps[i];
            for v in [
                s.dev as i64,
                s.ino as i64,
                i64::from(s.mode),
                i64::from(s.uid),
                i64::from(s.gid),
                s.size,
                s.mtime.0,
                s.mtime.1,
                s.ctime.0,
                s.ctime.1,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(self.id(i));
        }
        out
    }

    /// A record from [`StatRecord::to_bytes`]; `None` when the bytes are not one (then nothing is
    /// trusted and every file is read).
    pub fn from_bytes(bytes: &[u8]) -> Option<StatRecord> {
        let rest = bytes.strip_prefix(b"HSR1")?;
        let (&id_len, mut rest) = rest.split_first()?;
        let mut record = StatRecord::new(usize::from(id_len));
        let take = |rest: &mut &[u8], n: usize| -> Option<Vec<u8>> {
            if rest.len() < n {
                return None;
            }
            let (head, tail) = rest.split_at(n);
            *rest = tail;
            Some(head.to_vec())
        };
        let int = |rest: &mut &[u8]| -> Option<i64> {
            Some(i64::from_le_bytes(take(rest, 8)?.try_into().ok()?))
        };
        while !rest.is_empty() {
            let len = u32::from_le_bytes(take(&mut rest, 4)?.try_into().ok()?) as usize;
            let path = take(&mut rest, len)?;
            let mut v = [0i64; 10];
            for slot in &mut v {
                *slot = int(&mut rest)?;
            }
            let stamp = Stamp {
                dev: v[0] as u64,
                ino: v[1] as u64,
                mode: u32::try_from(v[2]).ok()?,
                uid: u32::try_from(v[3]).ok()?,
                gid: u32::try_from(v[4]).ok()?,
                size: v[5],
                mtime: (v[6], v[7]),
                ctime: (v[8], v[9]),
            };
            let id = take(&mut rest, usize::from(id_len))?;
            let before = record.len();
            record.push(&path, stamp, &id);
            if record.len() == before {
                // Out of order or malformed: the bytes are not a record this build wrote.
                return None;
            }
        }
        Some(record)
    }

    /// The stamp and object id recorded for `path`.
    pub fn get(&self, path: &[u8]) -> Option<(Stamp, &[u8])> {
        let mut lo = 0;
        let mut hi = self.len();
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.path(mid).cmp(path) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some((self.stamps[mid], self.id(mid))),
            }
        }
        None
    }
}

/// The per-entry states of a [`Fingerprint`]: entry keys, unique and sorted bytewise, each with
/// a state string.
///
/// Stored as one text buffer and a list of offsets, so that a fingerprint of a repository with
/// 100,000 files costs two allocations rather than 200,000, and compares and clones as fast as
/// memory can be copied. Looks up like a sorted map: [`get`](Self::get), `entries["path"]`,
/// [`iter`](Self::iter) in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entries {
    text: String,
    /// Per entry, where its key ends and where its state ends in `text`; an entry starts where
    /// the previous one ends.
    ends: Vec<(usize, usize)>,
}

impl Entries {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table with room for `entries` entries of `text` bytes in all.
    pub fn with_capacity(entries: usize, text: usize) -> Self {
        Entries {
            text: String::with_capacity(text),
            ends: Vec::with_capacity(entries),
        }
    }

    /// Makes room for `entries` more entries of `text` more bytes in all.
    pub fn reserve(&mut self, entries: usize, text: usize) {
        self.text.reserve(text);
        self.ends.reserve(entries);
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The key of the last entry.
    pub fn last_key(&self) -> Option<&str> {
        self.len().checked_sub(1).map(|i| self.at(i).0)
    }

    /// Adds an entry after the last one. A key equal to the last key extends that entry's state
    /// with `|` and `state` (two paths that share a key). Returns `false`, adding nothing, if
    /// `key` sorts before the last key.
    pub fn push(&mut self, key: &str, state: &str) -> bool {
        match self.last_key().map(|last| key.cmp(last)) {
            Some(Ordering::Less) => false,
            Some(Ordering::Equal) => {
                self.text.push('|');
                self.text.push_str(state);
                if let Some(last) = self.ends.last_mut() {
                    last.1 = self.text.len();
                }
                true
            }
            _ => {
                self.text.push_str(key);
                let key_end = self.text.len();
                self.text.push_str(state);
                self.ends.push((key_end, self.text.len()));
                true
            }
        }
    }

    /// The state of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).map(|i| self.at(i).1)
    }

    /// Whether there is an entry for `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// The entry at position `i` in key order.
    pub fn get_index(&self, i: usize) -> Option<(&str, &str)> {
        (i < self.len()).then(|| self.at(i))
    }

    /// The entries, in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        (0..self.len()).map(|i| self.at(i))
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.iter().map(|(key, _)| key)
    }

    /// The entry at position `i` (which must be in range).
    fn at(&self, i: usize) -> (&str, &str) {
        let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
        let (key_end, end) = self.ends[i];
        (&self.text[start..key_end], &self.text[key_end..end])
    }

    fn position(&self, key: &str) -> Option<usize> {
        let mut lo = 0;
        let mut hi = self.len();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.at(mid).0.cmp(key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(mid),
            }
        }
        None
    }
}

impl std::ops::Index<&str> for Entries {
    type Output = str;

    /// The state of `key`; panics if there is none, like a map.
    fn index(&self, key: &str) -> &str {
        match self.get(key) {
            Some(state) => state,
            None => panic!("no entry for {key:?}"),
        }
    }
}

impl<K: Into<String>, V: AsRef<str>> FromIterator<(K, V)> for Entries {
    /// Sorts the entries by key; equal keys are joined as [`push`](Self::push) does.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut all: Vec<(String, V)> = iter.into_iter().map(|(k, v)| (k.into(), v)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let text = all
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().len() + 1)
            .sum();
        let mut entries = Entries::with_capacity(all.len(), text);
        for (key, state) in &all {
            entries.push(key, state.as_ref());
        }
        entries
    }
}

impl Serialize for Entries {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, String>::deserialize(deserializer)?;
        Ok(map.into_iter().collect())
    }
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
            hooks_dir: None,
            record: Some(std::sync::Arc::new(record)),
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
            hooks_dir: self.hooks_dir.clone(),
            record: self.record.clone(),
        }
    }

    /// Compares this fingerprint (before) with `after`.
    ///
    /// `changed` is whether the digests differ and `changed_files` every entry key whose state
    /// differs. When the two fingerprints left out different refs (another worktree checked out
    /// another branch meanwhile), the refs left out by either are not compared, and `changed` is
    /// decided entry by entry.
    pub fn compare(&self, after: &Fingerprint) -> GitEvidence {
        let same_exclusions = self.excluded_refs == after.excluded_refs;
        let by_entries = !same_exclusions && !self.entries.is_empty() && !after.entries.is_empty();
        let skipped: BTreeSet<String> = if by_entries {
            self.excluded_refs
                .iter()
                .chain(&after.excluded_refs)
                .map(|name| format!(".git/{name}"))
                .collect()
        } else {
            BTreeSet::new()
        };
        let mut files = Vec::new();
        if self.digest != after.digest {
            let mut before = self.entries.iter().peekable();
            let mut later = after.entries.iter().peekable();
            loop {
                let key = match (before.peek(), later.peek()) {
                    (None, None) => break,
                    (Some((b, _)), None) => {
                        let key = *b;
                        before.next();
                        key
                    }
                    (None, Some((a, _))) => {
                        let key = *a;
                        later.next();
                        key
                    }
                    (Some((b, bs)), Some((a, as_))) => match b.cmp(a) {
                        Ordering::Less => {
                            let key = *b;
                            before.next();
                            key
                        }
                        Ordering::Greater => {
                            let key = *a;
                            later.next();
                            key
                        }
                        Ordering::Equal => {
                            let (key, same) = (*b, bs == as_);
                            before.next();
                            later.next();
                            if same {
                                continue;
                            }
                            key
                        }
                    },
                };
                if !skipped.contains(key) {
                    files.push(key.to_owned());
                }
            }
        }
        let changed = if by_entries {
            !files.is_empty()
        } else {
            self.digest != after.digest
        };
        // A hooks directory either side names: one set during the run counts too.
        let hooks_dirs: Vec<&str> = [&self.hooks_dir, &after.hooks_dir]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        let flags = files
            .iter()
            .filter_map(|f| {
                crate::flags::flag(f, self.entries.get(f), after.entries.get(f), &hooks_dirs)
            })
            .collect();
        GitEvidence {
            before: Some(self.clone()),
            after: Some(after.clone()),
            changed,
            changed_files: files,
            flags,
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
            flags: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    fn stamp(n: i64) -> Stamp {
        Stamp {
            dev: 1,
            ino: n as u64,
            mode: 0o100644,
            uid: 1000,
            gid: 1000,
            size: n,
            mtime: (n, n * 3),
            ctime: (n + 1, -1),
        }
    }

    proptest::proptest! {
        /// A record survives its bytes, and bytes that are not a record are refused whole.
        #[test]
        fn a_stat_record_round_trips_through_its_bytes(
            paths in proptest::collection::btree_set("[a-z/.]{1,12}", 0..20),
            cut in 0usize..64,
        ) {
            let mut record = StatRecord::new(20);
            for (i, p) in paths.iter().enumerate() {
                record.push(p.as_bytes(), stamp(i as i64), &[i as u8; 20]);
            }
            let bytes = record.to_bytes();
            let back = StatRecord::from_bytes(&bytes).unwrap();
            proptest::prop_assert_eq!(back.len(), record.len());
            for (i, p) in paths.iter().enumerate() {
                let (s, id) = back.get(p.as_bytes()).unwrap();
                proptest::prop_assert_eq!(s, stamp(i as i64));
                proptest::prop_assert_eq!(id, &[i as u8; 20][..]);
            }
            if !paths.is_empty() && cut > 0 && cut < bytes.len() - 5 {
                proptest::prop_assert!(StatRecord::from_bytes(&bytes[..bytes.len() - cut]).is_none());
            }
            proptest::prop_assert!(StatRecord::from_bytes(b"HSR0").is_none());
        }
    }

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
            excluded_refs: vec![],
            includes_ignored: false,
            entries: entries
                .iter()
                .map(|(p, s)| (p.to_string(), s.to_string()))
                .collect(),
            verified_by: None,
            hooks_dir: None,
            record: None,
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
    fn refs_excluded_on_either_side_are_not_compared() {
        let mut a = fp(
            "sha256:a",
            &[(".git/refs/heads/one", "1"), (".git/refs/heads/two", "1")],
        );
        a.excluded_refs = vec!["refs/heads/three".into()];
        // Another worktree switched from `three` to `one`, and moved `one` and `three`.
        let mut b = fp(
            "sha256:b",
            &[(".git/refs/heads/two", "1"), (".git/refs/heads/three", "2")],
        );
        b.excluded_refs = vec!["refs/heads/one".into()];
        let e = a.compare(&b);
        assert!(!e.changed, "{e:?}");
        assert!(e.changed_files.is_empty());
        // A change elsewhere is still seen.
        b.entries = [(".git/refs/heads/two", "2"), (".git/refs/heads/three", "2")]
            .into_iter()
            .collect();
        let e = a.compare(&b);
        assert!(e.changed);
        assert_eq!(e.changed_files, vec![".git/refs/heads/two"]);
    }

    #[test]
    fn new_fields_are_left_out_of_the_json_when_empty() {
        let a = fp("sha256:a", &[("a", "1")]);
        let json = serde_json::to_value(&a).unwrap();
        assert!(json.get("excludedRefs").is_none());
        assert!(json.get("includesIgnored").is_none());
        assert!(json.get("entries").is_none());
        let back: Fingerprint = serde_json::from_value(json).unwrap();
        assert!(back.entries.is_empty());
        assert!(back.excluded_refs.is_empty());
    }

    #[test]
    fn entries_are_a_sorted_table() {
        let mut e: Entries = [("b", "2"), ("a", "1"), ("c", "3")].into_iter().collect();
        assert_eq!(e.len(), 3);
        assert_eq!(e.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(e.get("b"), Some("2"));
        assert_eq!(&e["c"], "3");
        assert_eq!(e.get("bb"), None);
        assert!(!e.contains_key(""));
        assert!(!e.push("a0", "x"), "out of order");
        assert!(e.push("c", "4"), "same key");
        assert_eq!(e.get("c"), Some("3|4"));
        assert!(e.push("d", ""));
        assert_eq!(e.get("d"), Some(""));
        assert_eq!(e.last_key(), Some("d"));
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, r#"{"a":"1","b":"2","c":"3|4","d":""}"#);
        assert_eq!(serde_json::from_str::<Entries>(&json).unwrap(), e);
        assert!(Entries::new().get("a").is_none());
    }

    #[test]
    fn equal_digests_mean_no_change() {
        let a = fp("sha256:a", &[("a", "1")]);
        let e = a.compare(&a.clone());
        assert!(!e.changed);
        assert!(e.changed_files.is_empty());
    }
}
