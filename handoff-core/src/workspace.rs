//! The `Workspace` trait: git evidence taken before and after a run.
//!
//! Core only defines the shape of a fingerprint and how two fingerprints compare; reading a
//! repository is the job of an implementation (`handoff-git` on gix).

use std::cmp::Ordering;
use std::collections::BTreeSet;

use camino::{Utf8Path, Utf8PathBuf};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod parked;
mod record_pages;
pub use parked::{ParkedError, ParkedFingerprint, StateFile, StatesReader, StatesWriter};
use record_pages::Pages;
pub use record_pages::{RECORD_PAGE, RecordLookup, RecordedId};

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
/// A record is one byte buffer, the same in memory as in a store: the header `HSR2`, the id
/// width (1 byte) and the device all its files are on (8 bytes), then per path, sorted bytewise:
/// how many leading bytes it shares with the previous path (2 bytes; none at the start of each
/// block of [`RECORD_BLOCK`] paths, so that a block reads on its own), the length of the rest
/// (2 bytes), the rest, the stamp's other fields (inode, size, mtime seconds, ctime seconds: 8
/// bytes each; mtime and ctime nanoseconds, mode, owner, group: 4 bytes each) and the id; all
/// integers little-endian. 100,000 files cost about 80 bytes each.
///
/// A record made with [`StatRecord::parked`] keeps only its last, unfinished page of
/// [`RECORD_PAGE`] paths in memory: each full page goes to an unnamed file, with its first path
/// and its SHA-256 kept in memory, and is read back (and checked) a page at a time by a
/// [`RecordLookup`]. A page that does not read back as written vouches for nothing, so an agent
/// that reaches the file (through `/proc/<pid>/fd`) can only make files be read. Two records
/// always compare equal: a record is how a fingerprint was taken, not what it found.
#[derive(Debug, Clone)]
pub struct StatRecord {
    /// The header, then the paths after the parked pages (all of them, when none are).
    bytes: Vec<u8>,
    /// Where each block starts in `bytes`.
    blocks: Vec<u32>,
    /// Paths in `bytes`.
    len: usize,
    /// The last path in `bytes`, which the next one must sort after.
    last: Vec<u8>,
    /// The full pages, when parked.
    pages: Option<Pages>,
    /// The pages of an earlier record this one is likely to repeat, shared where it does.
    echo: Option<Pages>,
}

/// Paths per block of a [`StatRecord`]: a lookup reads at most this many.
pub const RECORD_BLOCK: usize = 16;

/// The record's header: magic, id width, device.
const RECORD_HEADER: usize = 4 + 1 + 8;
/// The stamp's fields other than the device, as stored.
const RECORD_STAMP: usize = 4 * 8 + 5 * 4;

impl Default for StatRecord {
    fn default() -> Self {
        StatRecord::new(20)
    }
}

impl PartialEq for StatRecord {
    fn eq(&self, _: &StatRecord) -> bool {
        true
    }
}

impl Eq for StatRecord {}

/// One path of a record as stored: its shared prefix with the previous path, the rest, the
/// stamp's fields and the id.
struct RecordItem<'a> {
    shared: usize,
    rest: &'a [u8],
    stamp: &'a [u8],
    id: &'a [u8],
}

impl StatRecord {
    /// An empty record for object ids of `id_len` bytes.
    pub fn new(id_len: usize) -> StatRecord {
        let mut bytes = Vec::with_capacity(RECORD_HEADER);
        bytes.extend_from_slice(b"HSR2");
        bytes.push(u8::try_from(id_len).unwrap_or(0));
        bytes.extend_from_slice(&0u64.to_le_bytes());
        StatRecord {
            bytes,
            blocks: Vec::new(),
            len: 0,
            last: Vec::new(),
            pages: None,
            echo: None,
        }
    }

    /// An empty record whose full pages go to an unnamed file in `dir`; an in-memory one
    /// ([`StatRecord::new`]) when the file cannot be made.
    pub fn parked(id_len: usize, dir: &std::path::Path) -> StatRecord {
        let mut record = StatRecord::new(id_len);
        record.pages = Pages::create(dir).ok();
        record
    }

    /// [`StatRecord::parked`], sharing each full page that is the same, at the same place, as
    /// one of `earlier`'s (the record a scan trusts, which an unchanged worktree repeats page
    /// for page) rather than writing it again.
    pub fn parked_echoing(
        id_len: usize,
        dir: &std::path::Path,
        earlier: Option<&StatRecord>,
    ) -> StatRecord {
        let mut record = StatRecord::parked(id_len, dir);
        record.echo = earlier.and_then(|e| e.pages.clone());
        record
    }

    /// This record, parked in `dir` as [`StatRecord::parked`] would have it (itself when it
    /// cannot be). Its full pages are cut from its bytes as they are, not encoded again.
    pub fn park(mut self, dir: &std::path::Path) -> StatRecord {
        if self.pages.is_some() || self.len < RECORD_PAGE {
            return self;
        }
        let Ok(mut pages) = Pages::create(dir) else {
            return self;
        };
        let id_len = self.id_len();
        let dev = self.dev();
        let mut path = Vec::new();
        let mut at = RECORD_HEADER;
        let mut page_start = at;
        let mut paths = 0;
        while let Some((item, next)) = read_item(&self.bytes, at, id_len) {
            path.truncate(item.shared);
            path.extend_from_slice(item.rest);
            paths += 1;
            at = next;
            if paths == RECORD_PAGE {
                pages.write(
                    &self.bytes[..RECORD_HEADER],
                    &self.bytes[page_start..at],
                    paths,
                    &path,
                    dev,
                    None,
                );
                page_start = at;
                paths = 0;
            }
        }
        if pages.is_empty() || pages.paths() + paths != self.len {
            return self;
        }
        // What is left, a block boundary on, stays in memory.
        let rest = self.bytes[page_start..].to_vec();
        self.bytes.truncate(RECORD_HEADER);
        self.bytes.extend_from_slice(&rest);
        self.bytes.shrink_to_fit();
        self.blocks = block_starts(&self.bytes, id_len);
        self.len = paths;
        self.pages = Some(pages);
        self
    }

    /// What this record holds, in 32 bytes: equal for two records with the same bytes cut into
    /// the same pages (a record taken since another that repeats it page for page), computed
    /// without reading any page back.
    pub fn identity(&self) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"handoff stat record identity\n");
        hasher.update(&self.bytes[..RECORD_HEADER.min(self.bytes.len())]);
        if let Some(pages) = self.pages.as_ref().filter(|p| !p.is_empty()) {
            pages.identify(&mut hasher);
        }
        hasher.update(&(self.bytes.len() as u64).to_le_bytes());
        hasher.update(&self.bytes);
        hasher.finalize().into()
    }

    /// Whether full pages go to a file.
    pub fn is_parked(&self) -> bool {
        self.pages.is_some()
    }

    /// Makes room for `bytes` more bytes, as [`StatRecord::to_bytes`] counts them.
    pub fn reserve(&mut self, bytes: usize) {
        self.bytes.reserve(bytes);
        let paths = bytes / (4 + RECORD_STAMP + self.id_len());
        self.blocks.reserve(paths / RECORD_BLOCK + 1);
    }

    fn id_len(&self) -> usize {
        usize::from(self.bytes[4])
    }

    fn dev(&self) -> u64 {
        u64::from_le_bytes(self.bytes[5..RECORD_HEADER].try_into().unwrap_or([0; 8]))
    }

    /// Adds `path`; paths must come in bytewise order, all on one device (others are left out,
    /// as are paths of 64 KiB or more and ids of another width).
    pub fn push(&mut self, path: &[u8], stamp: Stamp, id: &[u8]) {
        if self.len > 0 && (self.last.as_slice() >= path || stamp.dev != self.dev()) {
            return;
        }
        if self.len == 0
            && let Some(pages) = &self.pages
            && !pages.accepts(path, stamp.dev)
        {
            return;
        }
        let shared = if self.len.is_multiple_of(RECORD_BLOCK) {
            0
        } else {
            common_prefix(&self.last, path)
        };
        let fits = |n: i64| u32::try_from(n).is_ok();
        if id.len() != self.id_len()
            || path.is_empty()
            || path.len() > usize::from(u16::MAX)
            || !fits(stamp.mtime.1)
            || !fits(stamp.ctime.1)
            || u32::try_from(self.bytes.len() + 4 + path.len() + RECORD_STAMP + id.len()).is_err()
        {
            return;
        }
        if self.len == 0 {
            self.bytes[5..RECORD_HEADER].copy_from_slice(&stamp.dev.to_le_bytes());
        }
        let start = self.bytes.len();
        if self.len.is_multiple_of(RECORD_BLOCK) {
            self.blocks.push(start as u32);
        }
        let rest = &path[shared..];
        self.bytes.extend_from_slice(&(shared as u16).to_le_bytes());
        self.bytes
            .extend_from_slice(&(rest.len() as u16).to_le_bytes());
        self.bytes.extend_from_slice(rest);
        for v in [
            stamp.ino,
            stamp.size as u64,
            stamp.mtime.0 as u64,
            stamp.ctime.0 as u64,
        ] {
            self.bytes.extend_from_slice(&v.to_le_bytes());
        }
        for v in [
            stamp.mtime.1 as u32,
            stamp.ctime.1 as u32,
            stamp.mode,
            stamp.uid,
            stamp.gid,
        ] {
            self.bytes.extend_from_slice(&v.to_le_bytes());
        }
        self.bytes.extend_from_slice(id);
        self.last.clear();
        self.last.extend_from_slice(path);
        self.len += 1;
        let dev = self.dev();
        if self.len == RECORD_PAGE
            && let Some(pages) = &mut self.pages
        {
            // The page goes to the file; the next path starts a new one (and a new block).
            pages.write(
                &self.bytes[..RECORD_HEADER],
                &self.bytes[RECORD_HEADER..],
                self.len,
                &self.last,
                dev,
                self.echo.as_ref(),
            );
            self.bytes.truncate(RECORD_HEADER);
            self.blocks.clear();
            self.len = 0;
        }
    }

    /// Appends another record whose paths all sort after this one's.
    pub fn append(&mut self, other: &StatRecord) {
        // A page of `other` that does not read back ends what is taken from it: the paths
        // after it are left out, and so read next time.
        let _whole = other.for_each(|path, stamp, id| self.push(path, stamp, id));
    }

    /// How many paths it holds.
    pub fn len(&self) -> usize {
        self.len + self.pages.as_ref().map_or(0, Pages::paths)
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The record as bytes, for a store to keep ([`StatRecord::from_bytes`] reads them back);
    /// `None` when a parked page does not read back as it was written.
    pub fn to_bytes(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        let Some(pages) = &self.pages else {
            return Some(std::borrow::Cow::Borrowed(&self.bytes));
        };
        if pages.is_empty() {
            return Some(std::borrow::Cow::Borrowed(&self.bytes));
        }
        let mut bytes = Vec::with_capacity(pages.bytes() + self.bytes.len());
        bytes.extend_from_slice(&self.bytes[..RECORD_HEADER]);
        bytes[5..RECORD_HEADER].copy_from_slice(&pages.dev().to_le_bytes());
        for page in 0..pages.len() {
            bytes.extend_from_slice(&pages.read(page)?[RECORD_HEADER..]);
        }
        bytes.extend_from_slice(&self.bytes[RECORD_HEADER..]);
        Some(std::borrow::Cow::Owned(bytes))
    }

    /// A record from [`StatRecord::as_bytes`]; `None` when the bytes are not one this build
    /// writes (then nothing is trusted and every file is read). Each path is checked to sort
    /// after the previous one and to share with it exactly the bytes it says.
    pub fn from_bytes(bytes: Vec<u8>) -> Option<StatRecord> {
        if bytes.len() < RECORD_HEADER || !bytes.starts_with(b"HSR2") {
            return None;
        }
        let id_len = usize::from(bytes[4]);
        let mut record = StatRecord {
            bytes,
            blocks: Vec::new(),
            len: 0,
            last: Vec::new(),
            pages: None,
            echo: None,
        };
        u32::try_from(record.bytes.len()).ok()?;
        let mut at = RECORD_HEADER;
        while at < record.bytes.len() {
            let (item, next) = read_item(&record.bytes, at, id_len)?;
            let last = &record.last;
            let in_order = if record.len.is_multiple_of(RECORD_BLOCK) {
                record.blocks.push(at as u32);
                item.shared == 0 && (record.len == 0 || item.rest > last.as_slice())
            } else {
                // Exactly the bytes it shares with the previous path, then a greater byte (or
                // the previous path is all it shares).
                item.shared <= last.len()
                    && item
                        .rest
                        .first()
                        .is_some_and(|&b| last.get(item.shared).is_none_or(|&l| b > l))
            };
            if !in_order || item.rest.is_empty() {
                return None;
            }
            record.last.truncate(item.shared);
            record.last.extend_from_slice(item.rest);
            record.len += 1;
            at = next;
        }
        Some(record)
    }

    /// A record from bytes this process wrote and has checked since (a parked page): its
    /// paths are not checked again; `None` when they do not cut into whole paths.
    fn from_written(bytes: Vec<u8>) -> Option<StatRecord> {
        let id_len = usize::from(*bytes.get(4)?);
        let blocks = block_starts(&bytes, id_len);
        let mut at = RECORD_HEADER;
        let mut len = 0;
        while let Some((_, next)) = read_item(&bytes, at, id_len) {
            at = next;
            len += 1;
        }
        (at == bytes.len()).then_some(StatRecord {
            bytes,
            blocks,
            len,
            last: Vec::new(),
            pages: None,
            echo: None,
        })
    }

    /// The stamp and object id recorded for `path` (a parked page read for it; a
    /// [`RecordLookup`] keeps the page for the next path).
    pub fn get(&self, path: &[u8]) -> Option<(Stamp, RecordedId)> {
        self.lookup().get(path)
    }

    /// Looks paths up, keeping the last parked page read.
    pub fn lookup(&self) -> RecordLookup<'_> {
        RecordLookup::new(self)
    }

    /// [`StatRecord::get`] in the paths held in memory.
    fn get_here(&self, path: &[u8]) -> Option<(Stamp, &[u8])> {
        let id_len = self.id_len();
        // The last block whose first path is not after `path`.
        let block = self.blocks.partition_point(|&start| {
            read_item(&self.bytes, start as usize, id_len)
                .is_some_and(|(item, _)| item.rest <= path)
        });
        let mut at = *self.blocks.get(block.checked_sub(1)?)? as usize;
        // How many leading bytes the previous path shares with `path`, which sorts after it.
        let mut matched = 0;
        for n in 0..RECORD_BLOCK {
            if at >= self.bytes.len() {
                return None;
            }
            let (item, next) = read_item(&self.bytes, at, id_len)?;
            if n > 0 && item.shared != matched {
                if item.shared < matched {
                    // It differs from the previous path, and so from `path`, at a byte where
                    // it sorts after both.
                    return None;
                }
                // It agrees with the previous path past where that one left `path`: it sorts
                // before `path` too.
                at = next;
                continue;
            }
            let wanted = &path[matched.min(path.len())..];
            match item.rest.cmp(wanted) {
                Ordering::Equal => return Some((self.stamp(&item), item.id)),
                Ordering::Greater => return None,
                Ordering::Less => {
                    matched += common_prefix(item.rest, wanted);
                }
            }
            at = next;
        }
        None
    }

    /// Calls `f` with each path, stamp and id, in order; `false` when a parked page does not
    /// read back as written (`f` has seen the paths before it).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], Stamp, &[u8])) -> bool {
        if let Some(pages) = &self.pages {
            for page in 0..pages.len() {
                let Some(page) = pages.load(page) else {
                    return false;
                };
                page.for_each_here(&mut f);
            }
        }
        self.for_each_here(f);
        true
    }

    /// [`StatRecord::for_each`] over the paths held in memory.
    fn for_each_here(&self, mut f: impl FnMut(&[u8], Stamp, &[u8])) {
        let id_len = self.id_len();
        let mut path = Vec::new();
        let mut at = RECORD_HEADER;
        while let Some((item, next)) = read_item(&self.bytes, at, id_len) {
            path.truncate(item.shared);
            path.extend_from_slice(item.rest);
            f(&path, self.stamp(&item), item.id);
            at = next;
        }
    }

    fn stamp(&self, item: &RecordItem<'_>) -> Stamp {
        let s = item.stamp;
        let u64_at = |i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(s[i..i + 4].try_into().unwrap_or([0; 4]));
        Stamp {
            dev: self.dev(),
            ino: u64_at(0),
            size: u64_at(8) as i64,
            mtime: (u64_at(16) as i64, i64::from(u32_at(32))),
            ctime: (u64_at(24) as i64, i64::from(u32_at(36))),
            mode: u32_at(40),
            uid: u32_at(44),
            gid: u32_at(48),
        }
    }
}

/// Where each block of [`RECORD_BLOCK`] paths starts in a record's bytes.
fn block_starts(bytes: &[u8], id_len: usize) -> Vec<u32> {
    let mut blocks = Vec::new();
    let mut at = RECORD_HEADER;
    let mut n = 0usize;
    while let Some((_, next)) = read_item(bytes, at, id_len) {
        if n.is_multiple_of(RECORD_BLOCK) {
            blocks.push(at as u32);
        }
        n += 1;
        at = next;
    }
    blocks
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The path stored at `at` in a record's bytes, and where the next one starts; `None` past the
/// end or when the bytes are cut short.
fn read_item(bytes: &[u8], at: usize, id_len: usize) -> Option<(RecordItem<'_>, usize)> {
    let u16_at = |i: usize| -> Option<usize> {
        Some(usize::from(u16::from_le_bytes(
            bytes.get(i..i + 2)?.try_into().ok()?,
        )))
    };
    let shared = u16_at(at)?;
    let rest_len = u16_at(at + 2)?;
    let rest_at = at + 4;
    let stamp_at = rest_at + rest_len;
    let id_at = stamp_at + RECORD_STAMP;
    let next = id_at + id_len;
    Some((
        RecordItem {
            shared,
            rest: bytes.get(rest_at..stamp_at)?,
            stamp: bytes.get(stamp_at..id_at)?,
            id: bytes.get(id_at..next)?,
        },
        next,
    ))
}

/// The per-entry states of a [`Fingerprint`]: entry keys, unique and sorted bytewise, each with
/// a state string.
///
/// Stored as a few runs of consecutive entries, each one text buffer and a list of offsets, so
/// that a fingerprint of a repository with 100,000 files costs a few hundred allocations rather
/// than 200,000, and a run made elsewhere (a scan's rows) is taken over without a copy
/// ([`append_run`](Self::append_run)). Looks up like a sorted map: [`get`](Self::get),
/// `entries["path"]`, [`iter`](Self::iter) in key order. Two tables are equal when their entries
/// are, however they are split into runs.
#[derive(Debug, Clone, Default)]
pub struct Entries {
    /// The runs, in key order; [`push`](Self::push) adds to the last.
    runs: Vec<EntryRun>,
    /// The position of each run's first entry.
    starts: Vec<usize>,
    len: usize,
}

/// Consecutive entries of an [`Entries`] in one buffer.
#[derive(Debug, Clone, Default)]
struct EntryRun {
    text: String,
    /// Per entry, where its key ends and where its state ends in `text`; an entry starts where
    /// the previous one ends.
    ends: Vec<(usize, usize)>,
}

impl EntryRun {
    fn at(&self, i: usize) -> (&str, &str) {
        let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
        let (key_end, end) = self.ends[i];
        (&self.text[start..key_end], &self.text[key_end..end])
    }

    /// Whether `ends` cut `text` into entries, on character boundaries, with keys in strictly
    /// increasing order.
    fn well_formed(&self) -> bool {
        let mut start = 0;
        let mut last: Option<&str> = None;
        for &(key_end, end) in &self.ends {
            if !(start <= key_end
                && key_end <= end
                && end <= self.text.len()
                && self.text.is_char_boundary(key_end)
                && self.text.is_char_boundary(end))
            {
                return false;
            }
            let key = &self.text[start..key_end];
            if last.is_some_and(|l| l >= key) {
                return false;
            }
            last = Some(key);
            start = end;
        }
        true
    }
}

impl PartialEq for Entries {
    fn eq(&self, other: &Entries) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Entries {}

impl Entries {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table with room for `entries` entries of `text` bytes in all.
    pub fn with_capacity(entries: usize, text: usize) -> Self {
        let mut table = Entries::new();
        table.reserve(entries, text);
        table
    }

    /// Makes room for `entries` more entries of `text` more bytes in all.
    pub fn reserve(&mut self, entries: usize, text: usize) {
        let run = self.open_run();
        run.text.reserve(text);
        run.ends.reserve(entries);
    }

    /// The last run, made if there is none.
    fn open_run(&mut self) -> &mut EntryRun {
        if self.runs.is_empty() {
            self.runs.push(EntryRun::default());
            self.starts.push(self.len);
        }
        let last = self.runs.len() - 1;
        &mut self.runs[last]
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
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
                let run = self.open_run();
                run.text.push('|');
                run.text.push_str(state);
                let end = run.text.len();
                if let Some(last) = run.ends.last_mut() {
                    last.1 = end;
                }
                true
            }
            _ => {
                let run = self.open_run();
                run.text.push_str(key);
                let key_end = run.text.len();
                run.text.push_str(state);
                run.ends.push((key_end, run.text.len()));
                self.len += 1;
                true
            }
        }
    }

    /// Takes over a run of entries made elsewhere, without copying it: `text` holds each
    /// entry's key then its state, and `ends` says, per entry, where its key and its state end
    /// in `text` (an entry starts where the previous one ends). The keys must be strictly
    /// increasing and sort after the last key; otherwise nothing is added and `text` and `ends`
    /// are handed back (for [`push`](Self::push), which joins equal keys).
    pub fn append_run(
        &mut self,
        text: String,
        ends: Vec<(usize, usize)>,
    ) -> Result<(), (String, Vec<(usize, usize)>)> {
        let run = EntryRun { text, ends };
        let first = (!run.ends.is_empty()).then(|| run.ends[0].0);
        let after_last = match (first, self.last_key()) {
            (Some(key_end), Some(last)) => run.text.get(..key_end).is_some_and(|k| k > last),
            _ => true,
        };
        if !after_last || !run.well_formed() {
            return Err((run.text, run.ends));
        }
        if run.ends.is_empty() {
            return Ok(());
        }
        // An empty run left at the end (reserved, never filled) gives way.
        if self.runs.last().is_some_and(|r| r.ends.is_empty()) {
            self.runs.pop();
            self.starts.pop();
        }
        self.starts.push(self.len);
        self.len += run.ends.len();
        self.runs.push(run);
        Ok(())
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
        let run = self.starts.partition_point(|&start| start <= i) - 1;
        self.runs[run].at(i - self.starts[run])
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

    /// This fingerprint without its per-path states and its record: all that it serializes.
    pub fn summary(&self) -> Fingerprint {
        Fingerprint {
            changes: self.changes.clone(),
            record: None,
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
            ctime: (-n - 1, 999_999_999),
        }
    }

    proptest::proptest! {
        /// A record survives its bytes, finds exactly its own paths, and bytes that are not a
        /// record are refused whole.
        #[test]
        fn a_stat_record_round_trips_through_its_bytes(
            paths in proptest::collection::btree_set("[a-c/.]{1,12}", 0..60),
            probes in proptest::collection::vec("[a-c/.]{0,13}", 0..40),
            cut in 0usize..64,
            flip in 0usize..4096,
        ) {
            let mut record = StatRecord::new(20);
            for (i, p) in paths.iter().enumerate() {
                record.push(p.as_bytes(), stamp(i as i64), &[i as u8; 20]);
            }
            proptest::prop_assert_eq!(record.len(), paths.len());
            let bytes = record.to_bytes().unwrap().to_vec();
            let back = StatRecord::from_bytes(bytes.clone()).unwrap();
            proptest::prop_assert_eq!(back.len(), record.len());
            for (i, p) in paths.iter().enumerate() {
                let (s, id) = back.get(p.as_bytes()).unwrap();
                proptest::prop_assert_eq!(s, stamp(i as i64));
                proptest::prop_assert_eq!(id.as_slice(), &[i as u8; 20][..]);
            }
            for probe in &probes {
                proptest::prop_assert_eq!(
                    back.get(probe.as_bytes()).is_some(),
                    paths.contains(probe),
                    "{}", probe
                );
            }
            let mut seen = Vec::new();
            back.for_each(|p, _, _| seen.push(String::from_utf8(p.to_vec()).unwrap()));
            proptest::prop_assert_eq!(seen, paths.iter().cloned().collect::<Vec<_>>());
            if !paths.is_empty() && cut > 0 && cut < bytes.len() - RECORD_HEADER {
                proptest::prop_assert!(
                    StatRecord::from_bytes(bytes[..bytes.len() - cut].to_vec()).is_none()
                );
            }
            // A record that reads as one after a byte changed still holds sorted paths.
            let mut flipped = bytes.clone();
            let at = flip % flipped.len();
            flipped[at] ^= 0x41;
            if let Some(other) = StatRecord::from_bytes(flipped) {
                let mut last: Option<Vec<u8>> = None;
                other.for_each(|p, _, _| {
                    assert!(last.as_deref().is_none_or(|l| l < p));
                    last = Some(p.to_vec());
                });
            }
            proptest::prop_assert!(StatRecord::from_bytes(b"HSR1".to_vec()).is_none());
        }
    }

    /// `n` sorted paths spread over a few directories, the `i`th with stamp `i` and id `i`.
    fn many(n: usize) -> Vec<(String, Stamp, [u8; 20])> {
        (0..n)
            .map(|i| {
                let id = [(i % 251) as u8; 20];
                (format!("d{}/f{i:06}", i % 7), (stamp(i as i64), id))
            })
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .map(|(p, (s, id))| (p, s, id))
            .collect()
    }

    fn filled(mut record: StatRecord, paths: &[(String, Stamp, [u8; 20])]) -> StatRecord {
        for (p, s, id) in paths {
            record.push(p.as_bytes(), *s, id);
        }
        record
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// A record whose full pages wait in a file holds, finds, lists and writes out exactly
        /// what the same record in memory does, however many pages it fills.
        #[test]
        fn a_parked_record_is_the_record_in_memory(
            n in 0usize..(3 * RECORD_PAGE + 40),
            probes in proptest::collection::vec(0usize..4000, 0..64),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let paths = many(n);
            let memory = filled(StatRecord::new(20), &paths);
            let parked = filled(StatRecord::parked(20, dir.path()), &paths);
            proptest::prop_assert!(parked.is_parked());
            proptest::prop_assert_eq!(parked.len(), n);
            let (parked_bytes, memory_bytes) = (parked.to_bytes().unwrap(), memory.to_bytes().unwrap());
            proptest::prop_assert_eq!(parked_bytes.as_ref(), memory_bytes.as_ref());
            let mut lookup = parked.lookup();
            for (p, s, id) in &paths {
                let (found, found_id) = lookup.get(p.as_bytes()).unwrap();
                proptest::prop_assert_eq!(found, *s);
                proptest::prop_assert_eq!(found_id.as_slice(), &id[..]);
            }
            for probe in probes {
                // Absent paths between, before and after the pages.
                for absent in [format!("d{}/f{probe:06}x", probe % 7), format!("d{probe}"), "e".into(), "".into()] {
                    proptest::prop_assert!(parked.get(absent.as_bytes()).is_none(), "{}", absent);
                }
            }
            let mut seen = Vec::new();
            proptest::prop_assert!(parked.for_each(|p, _, _| seen.push(p.to_vec())));
            proptest::prop_assert_eq!(seen.len(), n);
            let again = memory.park(dir.path());
            proptest::prop_assert_eq!(again.is_parked(), n >= RECORD_PAGE);
            proptest::prop_assert_eq!(again.len(), n);
            let mut lookup = again.lookup();
            for (p, s, _) in &paths {
                proptest::prop_assert_eq!(lookup.get(p.as_bytes()).map(|f| f.0), Some(*s));
            }
            let again_bytes = again.to_bytes().unwrap();
            proptest::prop_assert_eq!(again_bytes.as_ref(), parked_bytes.as_ref());
        }
    }

    /// An agent that reaches a parked page (through `/proc/<pid>/fd`) and rewrites a path's
    /// stamp there, so that the record vouches for a file it changed, only makes that page
    /// vouch for nothing: its paths are looked up as absent (and so read), the other pages
    /// still serve, and the record is not written out.
    #[test]
    fn a_rewritten_parked_page_vouches_for_nothing() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let paths = many(3 * RECORD_PAGE);
        let record = filled(StatRecord::parked(20, dir.path()), &paths);
        let pages = record.pages.as_ref().unwrap();
        assert_eq!(pages.len(), 3);
        // A path of the second page gets another inode, as the agent would give it the stamp
        // of the file it changed.
        // (The first path of a block is stored whole.)
        let (target, _, _) = &paths[RECORD_PAGE + RECORD_BLOCK];
        let mut file_bytes = vec![0u8; pages.bytes()];
        record_pages_file(&record)
            .read_exact_at(&mut file_bytes, 0)
            .unwrap();
        let mut stored = vec![0, 0];
        stored.extend_from_slice(&(target.len() as u16).to_le_bytes());
        stored.extend_from_slice(target.as_bytes());
        let at = file_bytes
            .windows(stored.len())
            .position(|w| w == stored)
            .unwrap();
        let forged = stamp(999_999);
        let stamp_at = at + stored.len();
        record_pages_file(&record)
            .write_all_at(&forged.ino.to_le_bytes(), stamp_at as u64)
            .unwrap();
        let mut lookup = record.lookup();
        for (i, (p, s, _)) in paths.iter().enumerate() {
            let found = lookup.get(p.as_bytes());
            if (RECORD_PAGE..2 * RECORD_PAGE).contains(&i) {
                assert!(found.is_none(), "{p} is on the rewritten page");
            } else {
                assert_eq!(found.unwrap().0, *s);
            }
        }
        assert!(record.to_bytes().is_none());
        assert!(!record.for_each(|_, _, _| {}));
        // Read without its digest, the page vouches for the forged stamp.
        let page = &pages.pages_for_tests()[1];
        record_pages_file(&record)
            .read_exact_at(&mut file_bytes, 0)
            .unwrap();
        let mut unchecked = b"HSR2\x14".to_vec();
        unchecked.extend_from_slice(&pages.dev().to_le_bytes());
        unchecked.extend_from_slice(&file_bytes[page.0 as usize..page.0 as usize + page.1]);
        let unchecked = StatRecord::from_bytes(unchecked).unwrap();
        assert_eq!(unchecked.get(target.as_bytes()).unwrap().0.ino, forged.ino);
    }

    /// A record taken since another shares the pages it repeats instead of writing them: all
    /// of them when nothing changed, all but the changed one's page when a stamp changed, and
    /// those from the first shifted one on when a path was added. It holds and writes out the
    /// same either way.
    #[test]
    fn a_record_shares_the_pages_it_repeats_from_the_one_it_was_taken_since() {
        let dir = tempfile::tempdir().unwrap();
        let paths = many(4 * RECORD_PAGE + 7);
        let earlier = filled(StatRecord::parked(20, dir.path()), &paths);
        let own_pages = |r: &StatRecord| r.pages.as_ref().unwrap().own_pages_for_tests();
        assert_eq!(own_pages(&earlier), 4);

        let same = filled(
            StatRecord::parked_echoing(20, dir.path(), Some(&earlier)),
            &paths,
        );
        assert_eq!(own_pages(&same), 0);
        assert_eq!(same.to_bytes(), earlier.to_bytes());

        let mut touched = paths.clone();
        touched[2 * RECORD_PAGE + 3].1 = stamp(123_456);
        let one = filled(
            StatRecord::parked_echoing(20, dir.path(), Some(&earlier)),
            &touched,
        );
        assert_eq!(own_pages(&one), 1);
        let memory = filled(StatRecord::new(20), &touched);
        assert_eq!(one.to_bytes(), memory.to_bytes());
        let mut lookup = one.lookup();
        for (p, s, _) in &touched {
            assert_eq!(lookup.get(p.as_bytes()).unwrap().0, *s);
        }

        let mut added = paths.clone();
        added.insert(
            RECORD_PAGE + 5,
            (format!("{}a", paths[RECORD_PAGE + 4].0), stamp(7), [7; 20]),
        );
        let shifted = filled(
            StatRecord::parked_echoing(20, dir.path(), Some(&earlier)),
            &added,
        );
        assert_eq!(own_pages(&shifted), 3);
        assert_eq!(
            shifted.to_bytes(),
            filled(StatRecord::new(20), &added).to_bytes()
        );
    }

    /// The record a store holds, parked, and the records of unchanged worktrees taken since
    /// it, one after another, are the same record: their identities are equal, so it is not
    /// written again. One changed stamp, one path more or a small record's tail tell them
    /// apart.
    #[test]
    fn records_that_repeat_the_stored_one_share_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        for n in [40, RECORD_PAGE, 3 * RECORD_PAGE + 5] {
            let paths = many(n);
            let bytes = filled(StatRecord::new(20), &paths)
                .to_bytes()
                .unwrap()
                .into_owned();
            let stored = StatRecord::from_bytes(bytes).unwrap().park(dir.path());
            let before = filled(
                StatRecord::parked_echoing(20, dir.path(), Some(&stored)),
                &paths,
            );
            let after = filled(
                StatRecord::parked_echoing(20, dir.path(), Some(&before)),
                &paths,
            );
            assert_eq!(before.identity(), stored.identity(), "{n}");
            assert_eq!(after.identity(), stored.identity(), "{n}");
            let mut touched = paths.clone();
            touched[n - 1].1 = stamp(-5);
            let changed = filled(
                StatRecord::parked_echoing(20, dir.path(), Some(&before)),
                &touched,
            );
            assert_ne!(changed.identity(), stored.identity(), "{n}");
            let shorter = filled(
                StatRecord::parked_echoing(20, dir.path(), Some(&before)),
                &paths[..n - 1],
            );
            assert_ne!(shorter.identity(), stored.identity(), "{n}");
        }
    }

    fn record_pages_file(record: &StatRecord) -> std::sync::Arc<std::fs::File> {
        record.pages.as_ref().unwrap().file_for_tests()
    }

    #[test]
    fn a_stat_record_leaves_out_what_it_cannot_hold_at_full_width() {
        let mut record = StatRecord::new(20);
        record.push(b"a", stamp(1), &[1; 20]);
        // Another device, out of order, a negative nanosecond count, another id width.
        record.push(b"b", Stamp { dev: 2, ..stamp(2) }, &[2; 20]);
        record.push(b"a", stamp(3), &[3; 20]);
        record.push(
            b"c",
            Stamp {
                mtime: (4, -1),
                ..stamp(4)
            },
            &[4; 20],
        );
        record.push(b"d", stamp(5), &[5; 32]);
        record.push(b"e", stamp(6), &[6; 20]);
        assert_eq!(record.len(), 2);
        assert!(record.get(b"b").is_none());
        assert_eq!(record.get(b"e").unwrap().0, stamp(6));
        // A record in the format of an earlier build is not one.
        let mut old = b"HSR1".to_vec();
        old.push(20);
        assert!(StatRecord::from_bytes(old).is_none());
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
        assert_eq!(e.before.as_ref().unwrap().entries.get("c"), Some("1"));
        // The same evidence without the per-path states.
        let s = a.compare_summaries(&b);
        assert_eq!((s.changed, &s.changed_files), (e.changed, &e.changed_files));
        assert!(s.before.unwrap().entries.is_empty() && s.after.unwrap().entries.is_empty());
        assert_eq!(
            serde_json::to_value(a.compare_summaries(&b)).unwrap(),
            serde_json::to_value(&e).unwrap()
        );
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
    fn entries_take_over_runs_made_elsewhere() {
        let run = |pairs: &[(&str, &str)]| {
            let mut text = String::new();
            let mut ends = Vec::new();
            for (k, v) in pairs {
                text.push_str(k);
                let key_end = text.len();
                text.push_str(v);
                ends.push((key_end, text.len()));
            }
            (text, ends)
        };
        let mut e = Entries::new();
        assert!(e.push("a", "1"));
        let (text, ends) = run(&[("b", "2"), ("c", "3")]);
        assert!(e.append_run(text, ends).is_ok());
        assert!(e.push("d", "4"));
        assert!(e.push("d", "5"));
        let whole: Entries = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4|5")]
            .into_iter()
            .collect();
        assert_eq!(e, whole);
        assert_eq!(e.get("c"), Some("3"));
        assert_eq!(e.get_index(3), Some(("d", "4|5")));
        assert_eq!(e.keys().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
        // Handed back: a key not after the last one, keys out of order or equal, ends that do
        // not cut the text.
        for (text, ends) in [
            run(&[("d", "6")]),
            run(&[("f", "1"), ("e", "2")]),
            run(&[("f", "1"), ("f", "2")]),
            ("fé".to_owned(), vec![(2, 3)]),
            ("f1".to_owned(), vec![(1, 3)]),
        ] {
            let back = e.append_run(text.clone(), ends.clone());
            assert_eq!(back, Err((text, ends)));
        }
        assert_eq!(e, whole);
        let mut empty = Entries::with_capacity(4, 16);
        let (text, ends) = run(&[("x", "1")]);
        assert!(empty.append_run(text, ends).is_ok());
        assert_eq!(empty.iter().collect::<Vec<_>>(), [("x", "1")]);
    }

    #[test]
    fn equal_digests_mean_no_change() {
        let a = fp("sha256:a", &[("a", "1")]);
        let e = a.compare(&a.clone());
        assert!(!e.changed);
        assert!(e.changed_files.is_empty());
    }
}
