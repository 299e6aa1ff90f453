//! [`GitWorkspace`]: fingerprints of a git worktree, taken with gix.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};
use gix::bstr::ByteSlice;
use handoff_core::{
    Baseline, ChangeCounts, FINGERPRINT_SCHEMA, Fingerprint, Snapshot, StatRecord, StatusChange,
    Workspace, WorkspaceError, WorktreeLocation,
};
use sha2::{Digest, Sha256};

use crate::ignore_rules::IgnoreRules;
use crate::nested::{NO_REPOSITORY, NestedRepos};
use crate::paths::{entry_key, worktree_path};
use crate::repo::{discover, git_error, head_commit, read_index};
use crate::scan::{RowFile, ScanInput};
use crate::state::Wt;
use crate::untracked::{Found, What};
use crate::{gitdir, hash, ignored_trees, objects, par, scan, snapshot, staged, state, untracked};

/// Reads git evidence with gix: a content-addressed fingerprint of the whole worktree that
/// contains a directory, and of the repository state an agent could change besides it. See the
/// [crate documentation](crate) for what a fingerprint covers.
///
/// Taking a fingerprint never writes to the repository.
#[derive(Debug, Clone)]
pub struct GitWorkspace {
    include_ignored: bool,
    use_stat_cache: bool,
    threads: usize,
    park: Park,
}

/// Where a fingerprint's record keeps its full pages.
#[derive(Debug, Clone)]
enum Park {
    /// handoff's private work directory ([`handoff_core::private_work_dir`]).
    WorkDir,
    /// A directory of the embedding program's.
    In(PathBuf),
    /// In memory.
    Memory,
}

impl Default for GitWorkspace {
    fn default() -> Self {
        GitWorkspace {
            include_ignored: false,
            use_stat_cache: true,
            threads: 0,
            park: Park::WorkDir,
        }
    }
}

impl GitWorkspace {
    /// A workspace reader with default settings: ignored files left out, the index's stat data
    /// trusted, one thread per core.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also fingerprint ignored files (each file of an ignored directory individually). They are
    /// hashed every time, so this can be slow where build output is large.
    pub fn with_ignored(mut self, include: bool) -> Self {
        self.include_ignored = include;
        self
    }

    /// Whether to trust the index's stat data for files that look unchanged (the default). With
    /// `false`, every tracked file is hashed, as when the stat data cannot be trusted.
    pub fn with_stat_cache(mut self, use_it: bool) -> Self {
        self.use_stat_cache = use_it;
        self
    }

    /// How many threads stat and hash files; 0 (the default) means one per core.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Where the record of each fingerprint (handoff's own stat data of every tracked file,
    /// about 80 bytes a file) keeps its full pages: an unnamed file in `dir`, or, with `None`,
    /// memory. By default, handoff's private work directory; memory when it cannot be had.
    pub fn with_record_pages_in(mut self, dir: Option<PathBuf>) -> Self {
        self.park = dir.map_or(Park::Memory, Park::In);
        self
    }

    /// The directory records keep their full pages in, if any.
    pub(crate) fn park_dir(&self) -> Option<PathBuf> {
        match &self.park {
            Park::WorkDir => handoff_core::private_work_dir()
                .ok()
                .map(Utf8PathBuf::into_std_path_buf),
            Park::In(dir) => Some(dir.clone()),
            Park::Memory => None,
        }
    }

    pub(crate) fn threads(&self) -> usize {
        if self.threads == 0 {
            par::default_threads()
        } else {
            self.threads
        }
    }
}

impl Workspace for GitWorkspace {
    fn fingerprint(&self, cwd: &Utf8Path) -> Result<Fingerprint, WorkspaceError> {
        let repo = discover(cwd)?;
        fingerprint_repository(&repo, 0, self, None, None)
    }

    fn fingerprint_since(
        &self,
        cwd: &Utf8Path,
        before: &Fingerprint,
    ) -> Result<Fingerprint, WorkspaceError> {
        let repo = discover(cwd)?;
        let record = trusted_record(&repo, &before.root, before.record.clone());
        let baseline = trusted_baseline(&repo, &before.root, before.baseline.clone());
        fingerprint_repository(&repo, 0, self, Some(record), baseline)
    }

    fn fingerprint_after(
        &self,
        cwd: &Utf8Path,
        mut before: Fingerprint,
    ) -> Result<Fingerprint, WorkspaceError> {
        let repo = discover(cwd)?;
        let record = trusted_record(&repo, &before.root, before.record.take());
        let baseline = trusted_baseline(&repo, &before.root, before.baseline.take());
        drop(before);
        fingerprint_repository(&repo, 0, self, Some(record), baseline)
    }

    fn including_ignored(&self) -> Option<std::sync::Arc<dyn Workspace>> {
        Some(std::sync::Arc::new(self.clone().with_ignored(true)))
    }

    fn snapshot(&self, cwd: &Utf8Path, dest: &Utf8Path) -> Result<Snapshot, WorkspaceError> {
        snapshot::snapshot(self.threads(), cwd, dest)
    }

    fn protected_paths(&self, cwd: &Utf8Path) -> Result<Vec<Utf8PathBuf>, WorkspaceError> {
        let repo = discover(cwd)?;
        crate::gitdir::protected_paths(&repo)
    }

    fn git_dirs(&self, cwd: &Utf8Path) -> Result<Vec<handoff_core::GitDir>, WorkspaceError> {
        let repo = discover(cwd)?;
        crate::gitdir::git_dirs(&repo)
    }

    fn config_state(&self, cwd: &Utf8Path) -> Result<handoff_core::ConfigState, WorkspaceError> {
        crate::programs::config_state(cwd)
    }

    fn location(&self, cwd: &Utf8Path) -> Result<WorktreeLocation, WorkspaceError> {
        let repo = discover(cwd)?;
        let worktree =
            repo.workdir()
                .map(Path::to_path_buf)
                .ok_or_else(|| WorkspaceError::NotAWorktree {
                    path: cwd.to_owned(),
                })?;
        let worktree = Utf8PathBuf::from_path_buf(worktree).map_err(|p| WorkspaceError::Git {
            message: format!("the worktree '{}' is not UTF-8", p.display()),
        })?;
        // The main worktree holds the common git directory as its `.git`.
        let common = std::path::absolute(repo.common_dir()).ok();
        let project_root = common
            .filter(|dir| dir.file_name().is_some_and(|n| n == ".git"))
            .and_then(|dir| dir.parent().map(Path::to_path_buf))
            .and_then(|dir| Utf8PathBuf::from_path_buf(dir).ok())
            .unwrap_or(worktree);
        let branch = repo
            .head_name()
            .map_err(|err| git_error("cannot read HEAD", err))?
            .filter(|name| name.category() == Some(gix::refs::Category::LocalBranch))
            .map(|name| name.shorten().to_str_lossy().into_owned());
        Ok(WorktreeLocation {
            project_root,
            branch,
        })
    }
}

/// The record of an earlier fingerprint of the worktree at `root` to trust in `repo`: `record`
/// when `root` is `repo`'s worktree, else an empty one (a record of no worktree of this
/// repository's, or none at all: nothing is trusted but what is hashed).
fn trusted_record(
    repo: &gix::Repository,
    root: &Utf8Path,
    record: Option<Arc<StatRecord>>,
) -> Arc<StatRecord> {
    match record {
        Some(record) if repo.workdir().is_some_and(|w| w == root.as_std_path()) => record,
        _ => Arc::new(StatRecord::new(repo.object_hash().len_in_bytes())),
    }
}

/// The baseline of an earlier fingerprint of the worktree at `root` to judge `repo` by:
/// `baseline` when `root` is `repo`'s worktree, else none (the rules and objects as they are
/// now are all there is to judge by).
fn trusted_baseline(
    repo: &gix::Repository,
    root: &Utf8Path,
    baseline: Option<Arc<Baseline>>,
) -> Option<Arc<Baseline>> {
    baseline.filter(|_| repo.workdir().is_some_and(|w| w == root.as_std_path()))
}

/// Fingerprints the worktree of `repo`; `depth` is how deeply it is nested inside the repository
/// the fingerprint was asked for (0 for that one). With `judged_by`, the baseline of an earlier
/// fingerprint of the same worktree, ignore rules are that baseline's, and the object store's
/// files that changed since are verified.
pub(crate) fn fingerprint_repository(
    repo: &gix::Repository,
    depth: usize,
    options: &GitWorkspace,
    since: Option<Arc<StatRecord>>,
    judged_by: Option<Arc<Baseline>>,
) -> Result<Fingerprint, WorkspaceError> {
    let after_record = since.is_some();
    let Some(workdir) = repo.workdir() else {
        return Err(WorkspaceError::NotAWorktree {
            path: Utf8PathBuf::from(repo.git_dir().to_string_lossy().into_owned()),
        });
    };
    let root_path = workdir.to_owned();
    let root =
        Utf8PathBuf::from_path_buf(root_path.clone()).map_err(|path| WorkspaceError::Git {
            message: format!("the worktree root '{}' is not valid UTF-8", path.display()),
        })?;
    let threads = options.threads();

    let index = read_index(repo)?;
    let state: &gix::index::State = &index.state;
    let head = head_commit(repo)?;
    let head_tree = match head {
        Some(id) => Some(
            repo.find_commit(id)
                .and_then(|commit| commit.tree_id())
                .map_err(|err| git_error("cannot read HEAD's tree", err))?
                .detach(),
        ),
        None => None,
    };
    let filesystem = crate::trust::filesystem(&root_path)?;
    let hashed_why = if !options.use_stat_cache {
        Some("hashed: asked to".to_owned())
    } else {
        filesystem
            .untrusted
            .map(|fs| format!("hashed: the worktree is on {fs}, whose stat data cannot be trusted"))
    };
    let park = options.park_dir();
    let input = ScanInput {
        root: &root_path,
        display_root: &root,
        state,
        // Git's strictest comparison, whatever `core.trustCTime` and `core.checkStat` say: a
        // repository's configuration, which an agent may have written, must not loosen the
        // evidence.
        stat_options: gix::index::entry::stat::Options::default(),
        use_stat_cache: hashed_why.is_none(),
        // Likewise every mode bit and symbolic link counts, whatever `core.fileMode` and
        // `core.symlinks` say (see `untracked` for `core.ignoreCase`; contents are hashed as
        // they are on disk, so `core.autocrlf`, `core.eol` and attribute filters change nothing).
        file_mode: true,
        symlinks: true,
        object_hash: repo.object_hash(),
        threads,
        since: since.as_deref(),
        record_before: crate::trust::record_cutoff(),
        root_dev: filesystem.dev,
        park: park.as_deref(),
    };

    // The worktree scan runs on its own threads while this one reads the git directory and
    // compares the index with HEAD.
    let object_files = || objects::object_files(&repo.common_dir().join("objects"));
    let (scanned, git, staged) = if threads > 1 {
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| scan::scan(&input));
            let git = gitdir::scan(repo, &root_path).and_then(|git| Ok((git, object_files()?)));
            let staged = staged::staged(repo, state, index.tree.as_ref(), head_tree);
            let scanned = worker.join().unwrap_or_else(|_| {
                Err(WorkspaceError::Git {
                    message: "the worktree scan panicked".to_owned(),
                })
            });
            (scanned, git, staged)
        })
    } else {
        (
            scan::scan(&input),
            gitdir::scan(repo, &root_path).and_then(|git| Ok((git, object_files()?))),
            staged::staged(repo, state, index.tree.as_ref(), head_tree),
        )
    };
    let (scanned, (git, object_files), staged) = (scanned?, git?, staged?);
    // The earlier record has been read: it goes before this scan's own is put together.
    drop(since);
    let mut scanned = scanned.join(state);
    let record = std::mem::take(&mut scanned.record);
    // A nested repository's files, after an earlier fingerprint, are all read: handoff keeps
    // no record of them, and their index is as writable as this one's.
    let nested_options = if after_record {
        options.clone().with_stat_cache(false)
    } else {
        options.clone()
    };
    let mut nested_repos = NestedRepos::new(&root_path, judged_by.as_deref());

    // Ignored-ness is judged by the rules as they stood at the baseline: rules written since
    // hide nothing written since.
    let mut rules = IgnoreRules::new(
        repo,
        &root_path,
        judged_by.as_deref().map(|b| &b.ignore_files),
    )?;
    rules.read_tracked(state)?;
    let classified = untracked::classify(
        &mut rules,
        &root_path,
        &root,
        scanned.candidates,
        options.include_ignored,
    )?;
    let found = classified.found;
    // What the run created that the baseline's rules ignore: summarized, not evidence.
    let (ignored_created, ignored_created_omitted) = match &judged_by {
        Some(b) if !options.include_ignored => {
            ignored_trees::created(&root_path, &classified.ignored_tops, &b.ignored)
        }
        _ => (Vec::new(), 0),
    };
    let object_hash = repo.object_hash();
    let found_states = par::map(&found, threads, |found, buf| {
        found_state(object_hash, &root_path, &root, found, buf)
    })?;

    let mut changes: BTreeMap<String, StatusChange> = BTreeMap::new();
    let mut mark = |key: &str, apply: &dyn Fn(&mut StatusChange)| {
        let change = changes
            .entry(key.to_owned())
            .or_insert_with(|| StatusChange {
                path: key.to_owned(),
                staged: false,
                unstaged: false,
                untracked: false,
                deleted: false,
            });
        apply(change);
    };

    // Tracked paths: rows made by the scan, some finished here (gitlinks need their nested
    // repository's fingerprint; paths below a directory that is gone are missing).
    let rows = scanned.rows;
    let mut overrides: BTreeMap<usize, String> = BTreeMap::new();
    for scanned_mark in &scanned.marks {
        let mut status = scanned_mark.status;
        if scanned_mark.nested || scanned_mark.missing {
            let stages = scan::stages_at(state, rows.first(scanned_mark.row));
            let (wt, nested) = if scanned_mark.missing {
                (Wt::Missing, None)
            } else {
                let path = stages[0].path(state);
                match nested_repos.state(path, depth, &nested_options)? {
                    // A submodule that is not checked out: an (empty) directory, which git
                    // status does not report.
                    nested if nested.state == NO_REPOSITORY => (Wt::Dir, None),
                    nested => (Wt::Nested, Some(nested)),
                }
            };
            overrides.insert(
                scanned_mark.row,
                state::tracked_state(stages, &wt, nested.as_ref()),
            );
            status = state::unstaged(stages, &wt, nested.as_ref());
        }
        if status.unstaged {
            let first = &state.entries()[rows.first(scanned_mark.row)];
            mark(&entry_key(first.path(state)), &|c| {
                c.unstaged = true;
                c.deleted |= status.deleted;
            });
        }
    }
    for path in &staged {
        mark(&entry_key(path.as_bstr()), &|c| c.staged = true);
    }
    let mut extra: Vec<(String, String)> = Vec::with_capacity(found.len() + git.entries.len());
    for (found, state) in found.iter().zip(found_states) {
        let key = entry_key(found.path.as_bstr());
        let state = match (found.what, state) {
            (What::Repo, _) => {
                nested_repos
                    .state(found.path.as_bstr(), depth, &nested_options)?
                    .state
            }
            (_, Some(state)) => state,
            // Gone since it was listed.
            (_, None) => continue,
        };
        if found.ignored {
            extra.push((key, format!("ignored {state}")));
        } else {
            mark(&key, &|c| c.untracked = true);
            extra.push((key, format!("untracked {state}")));
        }
    }
    // The object store: what changed since the baseline is verified by id and content.
    let tips = objects::tips(&git.entries);
    if let Some(judged_by) = &judged_by {
        extra.extend(objects::verify(repo, judged_by, &object_files)?);
    }
    let baseline = Baseline {
        ignore_files: match &judged_by {
            // Still the rules it was judged by: those written since are not trusted later.
            Some(judged_by) => judged_by.ignore_files.clone(),
            None => rules.into_seen(),
        },
        object_files,
        tips,
        ignored: ignored_trees::keys(&classified.ignored_tops),
        nested: nested_repos.into_baselines(),
    };
    extra.extend(git.entries);
    let changes: Vec<StatusChange> = changes.into_values().collect();
    let mut fingerprint = Fingerprint {
        schema_version: FINGERPRINT_SCHEMA.to_owned(),
        algorithm: "sha256".to_owned(),
        digest: String::new(),
        root,
        head: head.map(|id| id.to_hex().to_string()),
        entry_count: 0,
        change_counts: count(&changes),
        changes,
        excluded_refs: git.excluded_refs,
        includes_ignored: options.include_ignored,
        ignored_created,
        ignored_created_omitted,
        entries: Default::default(),
        verified_by: Some(hashed_why.unwrap_or_else(|| {
            if after_record {
                "record".to_owned()
            } else {
                "index".to_owned()
            }
        })),
        hooks_dir: git.hooks_dir.clone(),
        record: Some(Arc::new(record)),
        baseline: Some(Arc::new(baseline)),
    };
    // The index is not needed any more: the entries are put together without it beside them.
    drop(index);
    merge(&mut fingerprint, rows, &overrides, extra)?;
    if !git.worktree_hooks.is_empty() {
        let missing: Vec<(String, String)> = git
            .worktree_hooks
            .into_iter()
            .filter(|(key, _)| !fingerprint.entries.contains_key(key))
            .collect();
        if !missing.is_empty() {
            fingerprint.entries = fingerprint
                .entries
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .chain(missing)
                .collect();
        }
    }
    fingerprint.digest = digest(&fingerprint, threads)?;
    fingerprint.entry_count = fingerprint.entries.len() as u64;
    Ok(fingerprint)
}

/// `<mode> <blob id>` of an untracked or ignored file or symlink; `None` if it is gone.
fn found_state(
    kind: gix::hash::Kind,
    root: &Path,
    display_root: &Utf8Path,
    found: &Found,
    buf: &mut Vec<u8>,
) -> Result<Option<String>, WorkspaceError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let path = worktree_path(root, found.path.as_bstr())?;
    let io = |source| WorkspaceError::Io {
        path: display_root.join(entry_key(found.path.as_bstr())),
        source,
    };
    let absent = |err: &std::io::Error| {
        matches!(
            err.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        ) || err.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32)
    };
    let result = match found.what {
        What::Repo => return Ok(None),
        What::Symlink => std::fs::read_link(&path).and_then(|target| {
            use std::os::unix::ffi::OsStrExt;
            Ok(format!(
                "120000 {}",
                hash::blob_id(kind, target.as_os_str().as_bytes())?
            ))
        }),
        What::File => std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(
                nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits(),
            )
            .open(&path)
            .and_then(|mut file| {
                let meta = file.metadata()?;
                if !meta.is_file() {
                    return Ok("other".to_owned());
                }
                let mode = if meta.permissions().mode() & 0o100 != 0 {
                    "100755"
                } else {
                    "100644"
                };
                let id = hash::file_blob_id(kind, &mut file, meta.len(), buf)?;
                Ok(format!("{mode} {id}"))
            }),
    };
    match result {
        Ok(state) => Ok(Some(state)),
        Err(err) if absent(&err) => Ok(None),
        Err(err) => Err(io(err)),
    }
}

fn count(changes: &[StatusChange]) -> ChangeCounts {
    let mut counts = ChangeCounts::default();
    for change in changes {
        counts.staged += u64::from(change.staged);
        counts.unstaged += u64::from(change.unstaged);
        counts.untracked += u64::from(change.untracked);
        counts.deleted += u64::from(change.deleted);
    }
    counts
}

/// Entries go into the digest in groups of this many.
const DIGEST_GROUP: usize = 1024;

/// The entries of a fingerprint: the rows of tracked paths (in index order, which is key order
/// but for paths that are not UTF-8), read back as the scan wrote them, with `overrides` of
/// some of their states, and the other entries; into `fingerprint`'s (empty) entries.
fn merge(
    fingerprint: &mut Fingerprint,
    rows: RowFile,
    overrides: &BTreeMap<usize, String>,
    mut extra: Vec<(String, String)>,
) -> Result<(), WorkspaceError> {
    extra.sort_by(|a, b| a.0.cmp(&b.0));
    let text = usize::try_from(rows.states.byte_len()).unwrap_or(0)
        + extra.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
    let mut entries = handoff_core::Entries::with_capacity(rows.len() + extra.len(), text);
    // Whether the rows and the other entries come in key order, as `Entries::push` takes them
    // one at a time (an equal key joins the last entry).
    let mut in_order = true;
    let mut extra_iter = extra.iter().peekable();
    let mut reader = rows.states.reader();
    let mut i = 0;
    while let Some((key, state)) = reader.next_pair() {
        let state = overrides.get(&i).map_or(state, String::as_str);
        while let Some((k, v)) = extra_iter.next_if(|(k, _)| k.as_str() < key) {
            in_order &= entries.push(k, v);
        }
        in_order &= entries.push(key, state);
        i += 1;
    }
    for (k, v) in extra_iter {
        in_order &= entries.push(k, v);
    }
    let unread = |why: handoff_core::ParkedError| WorkspaceError::Git {
        message: format!("the scan's rows, kept in a file, {}", why.reason()),
    };
    reader.finish().map_err(unread)?;
    if !in_order {
        // Paths that are not UTF-8 sort by bytes, not by their keys: all of it, sorted.
        drop(entries);
        let mut reader = rows.states.reader();
        let all: Vec<(String, String)> = reader
            .by_ref()
            .enumerate()
            .map(|(i, (key, state))| match overrides.get(&i) {
                Some(state) => (key, state.clone()),
                None => (key, state),
            })
            .collect();
        reader.finish().map_err(unread)?;
        entries = all.into_iter().chain(extra).collect();
    }
    fingerprint.entries = entries;
    Ok(())
}

/// `sha256:<hex>`: the SHA-256 of the schema version followed by the SHA-256 of each group of
/// [`DIGEST_GROUP`] consecutive entries, in key order. The groups are hashed in parallel.
///
/// An entry goes in as the length of its key (4 bytes, little-endian), the key, and its state:
/// the state of a plain, clean tracked path (`tracked <mode> <id>`, the bulk of every
/// fingerprint) as `1`, a mode code and the hex id; any other state as `0`, its length (4 bytes)
/// and its text. Either way the encoding is unambiguous, so equal digests mean equal entries.
pub(crate) fn digest(fingerprint: &Fingerprint, threads: usize) -> Result<String, WorkspaceError> {
    let entries = &fingerprint.entries;
    let groups: Vec<usize> = (0..entries.len()).step_by(DIGEST_GROUP).collect();
    let hashes = par::map(&groups, threads, |&start, buf| {
        // One contiguous buffer per group: hashing many small pieces costs more than the bytes.
        buf.clear();
        let end = (start + DIGEST_GROUP).min(entries.len());
        for (key, state) in (start..end).filter_map(|i| entries.get_index(i)) {
            buf.extend_from_slice(&(key.len() as u32).to_le_bytes());
            buf.extend_from_slice(key.as_bytes());
            match plain_tracked(state.as_bytes()) {
                Some((mode, id)) => {
                    buf.extend_from_slice(&[1, mode]);
                    buf.extend_from_slice(id);
                }
                None => {
                    buf.push(0);
                    buf.extend_from_slice(&(state.len() as u32).to_le_bytes());
                    buf.extend_from_slice(state.as_bytes());
                }
            }
        }
        Ok(Sha256::digest(&buf[..]))
    })?;
    let mut hasher = Sha256::new();
    hasher.update(FINGERPRINT_SCHEMA.as_bytes());
    hasher.update(b"\n");
    for hash in hashes {
        hasher.update(hash);
    }
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

/// A state that is exactly `tracked <mode> <40 bytes>`: a mode code and the 40 bytes (the hex
/// object id), which is all it takes to tell such states apart.
fn plain_tracked(state: &[u8]) -> Option<(u8, &[u8])> {
    if state.len() != 55 || !state.starts_with(b"tracked ") || state[14] != b' ' {
        return None;
    }
    let mode = match &state[8..14] {
        b"100644" => 1,
        b"100755" => 2,
        b"120000" => 3,
        b"160000" => 4,
        _ => return None,
    };
    Some((mode, &state[15..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, state: &str) -> (String, String) {
        (key.to_owned(), state.to_owned())
    }

    fn fingerprint(entries: &[(String, String)]) -> Fingerprint {
        Fingerprint {
            schema_version: FINGERPRINT_SCHEMA.into(),
            algorithm: "sha256".into(),
            digest: String::new(),
            root: "/r".into(),
            head: None,
            entry_count: 0,
            change_counts: ChangeCounts::default(),
            changes: vec![],
            excluded_refs: vec![],
            includes_ignored: false,
            ignored_created: Vec::new(),
            ignored_created_omitted: 0,
            entries: entries.iter().cloned().collect(),
            verified_by: None,
            hooks_dir: None,
            record: None,
            baseline: None,
        }
    }

    #[test]
    fn digest_depends_on_paths_and_states() {
        let digest = |entries: &[(String, String)]| digest(&fingerprint(entries), 2).unwrap();
        let a = [entry("a", "1")];
        let b = [entry("a", "2")];
        let c = [entry("b", "1")];
        assert_ne!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
        assert_eq!(digest(&a), digest(&a.clone()));
        // Across group boundaries, and whatever the number of threads.
        let many: Vec<_> = (0..3000).map(|i| entry(&format!("{i:05}"), "s")).collect();
        let mut other = many.clone();
        other[2500].1 = "t".into();
        assert_ne!(digest(&many), digest(&other));
        assert_eq!(
            digest(&many),
            super::digest(&fingerprint(&many), 1).unwrap()
        );
        let d = digest(&a);
        assert!(d.starts_with("sha256:"));
        assert_eq!(d.len(), "sha256:".len() + 64);
    }

    #[test]
    fn only_exact_plain_tracked_states_are_packed() {
        let id = "0123456789abcdef0123456789abcdef01234567";
        let state = format!("tracked 100755 {id}");
        let packed = plain_tracked(state.as_bytes()).unwrap();
        assert_eq!(packed.0, 2);
        assert_eq!(packed.1, id.as_bytes());
        for state in [
            format!("tracked 100644 {id}; worktree missing"),
            format!("tracked 0:100644 {id}"),
            format!("tracked 100600 {id}"),
            format!("untracked 100644 {id}"),
        ] {
            assert!(plain_tracked(state.as_bytes()).is_none(), "{state}");
        }
    }

    #[test]
    fn counts_follow_the_flags() {
        let change = |staged, unstaged, untracked, deleted| StatusChange {
            path: "p".into(),
            staged,
            unstaged,
            untracked,
            deleted,
        };
        let counts = count(&[
            change(true, true, false, false),
            change(false, true, false, true),
            change(false, false, true, false),
        ]);
        assert_eq!(
            counts,
            ChangeCounts {
                staged: 1,
                unstaged: 2,
                untracked: 1,
                deleted: 1
            }
        );
    }
}
