//! Phase one of a fingerprint: the worktree state of every index entry, and the names in tracked
//! directories that the index does not know (candidates for untracked or ignored paths).
//!
//! A first fingerprint trusts the index's stat data, as git does but with git's strictest
//! settings whatever the repository's configuration says: an entry whose `lstat` (size, mtime,
//! ctime, inode, owner, mode) matches what the index recorded, and that is not racily clean
//! (modified no earlier than the index was written), has the content the index says, so its
//! blob id is taken from the index. A fingerprint taken after another ([`ScanInput::since`])
//! trusts handoff's own record instead ([`StatRecord`]): a file whose full-width stat data
//! equals the record's counts as holding the recorded content; the index, which an agent can
//! rewrite, is not consulted. Everything else is hashed. Each scan records what it saw, for
//! the next. The work is split into tasks (listing one tracked
//! directory, or stat-ing a run of index entries) spread over threads; files are looked up
//! relative to an open descriptor of their directory, so that the kernel resolves one path
//! component per `fstatat` rather than the whole path.

use std::fs::File;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use camino::Utf8Path;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{Mode, stat};
use handoff_core::{StatRecord, WorkspaceError};
use nix::fcntl::{AtFlags, openat};
use nix::sys::stat::{Mode as Perms, fstatat};

use crate::paths::entry_key;
use crate::state::Wt;
use crate::state::{Unstaged, unstaged, write_tracked_state};

mod entry;
pub(crate) use entry::{dir_flags, index_stat, is_absent, kind_of};
use entry::{io_error, stat_entry};

/// Index entries are stat-ed in runs of about this many entries per task.
const STAT_CHUNK: usize = 512;

/// What kind of thing a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// A directory.
    Dir,
    /// A FIFO, socket or device.
    Other,
}

/// What phase one needs to know.
pub(crate) struct ScanInput<'a> {
    /// The worktree root.
    pub(crate) root: &'a Path,
    /// The worktree root, for messages.
    pub(crate) display_root: &'a Utf8Path,
    /// The index.
    pub(crate) state: &'a gix::index::State,
    /// How the index's stat data is compared (from `core.trustCTime`, `core.checkStat`, …).
    pub(crate) stat_options: stat::Options,
    /// Trust the index's stat data; `false` hashes every file.
    pub(crate) use_stat_cache: bool,
    /// `core.fileMode`: whether the executable bit of the worktree is meaningful.
    pub(crate) file_mode: bool,
    /// `core.symlinks`: whether symbolic links are checked out as such.
    pub(crate) symlinks: bool,
    /// The repository's object hash.
    pub(crate) object_hash: gix::hash::Kind,
    /// How many threads to use.
    pub(crate) threads: usize,
    /// The record of an earlier fingerprint of this worktree: trusted instead of the index.
    pub(crate) since: Option<&'a StatRecord>,
    /// Files are recorded only if their mtime and ctime are older than this (seconds,
    /// nanoseconds): the scan's start less the timestamp granularity. A file changed during
    /// the scan may keep its stamp.
    pub(crate) record_before: (i64, i64),
    /// The worktree root's device: a file on another is never recorded.
    pub(crate) root_dev: u64,
    /// Where the record this scan makes keeps its full pages (an unnamed file there); `None`
    /// keeps it in memory.
    pub(crate) park: Option<&'a Path>,
}

/// What phase one found.
pub(crate) struct ScanOutput {
    /// One row per tracked path, in index order: entry key and state.
    pub(crate) rows: RowFile,
    /// The rows that need more than their state string: unstaged ones, gitlinks whose nested
    /// repository is still to be fingerprinted, and paths below a directory that is gone.
    pub(crate) marks: Vec<Mark>,
    /// Paths in the worktree that the index does not track, with their kind, sorted. Directories
    /// are not descended into.
    pub(crate) candidates: Vec<(BString, Kind)>,
    /// What this scan saw of the tracked files, for the next.
    pub(crate) record: StatRecord,
}

/// Rows of tracked paths, key and state, in one text buffer.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    text: String,
    /// Per row: end of its key and of its state in `text`.
    ends: Vec<(usize, usize)>,
    /// Per row: the index of its path's first entry.
    firsts: Vec<u32>,
}

impl Rows {
    fn with_capacity(rows: usize) -> Self {
        Rows {
            text: String::with_capacity(rows * 80),
            ends: Vec::with_capacity(rows),
            firsts: Vec::with_capacity(rows),
        }
    }

    fn push(&mut self, first: usize, path: &BStr, state: &str) {
        match path.to_str() {
            Ok(key) => self.text.push_str(key),
            Err(_) => self.text.push_str(&entry_key(path)),
        }
        let key_end = self.text.len();
        self.text.push_str(state);
        self.ends.push((key_end, self.text.len()));
        self.firsts.push(first as u32);
    }

    /// How many rows there are.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Key and state of row `i`.
    pub(crate) fn get(&self, i: usize) -> (&str, &str) {
        let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
        let (key_end, end) = self.ends[i];
        (&self.text[start..key_end], &self.text[key_end..end])
    }

    /// The index of the first entry of row `i`'s path.
    pub(crate) fn first(&self, i: usize) -> usize {
        self.firsts[i] as usize
    }
}

/// The rows of tracked paths, in index order: their keys and states written out as the scan
/// made them (to an unnamed file in the directory records are parked in, else to memory), so
/// that they are not held next to the index; each row's first index entry stays in memory.
#[derive(Debug)]
pub(crate) struct RowFile {
    pub(crate) states: handoff_core::StateFile,
    firsts: Vec<u32>,
}

impl RowFile {
    /// How many rows there are.
    pub(crate) fn len(&self) -> usize {
        self.firsts.len()
    }

    /// The index of the first entry of row `i`'s path.
    pub(crate) fn first(&self, i: usize) -> usize {
        self.firsts[i] as usize
    }

    /// The numbers of the rows whose first entry is in `lo..hi`.
    fn rows_of_entries(&self, lo: usize, hi: usize) -> std::ops::Range<usize> {
        let find = |entry: usize| self.firsts.partition_point(|&f| (f as usize) < entry);
        find(lo)..find(hi)
    }
}

/// A row that `git status` reports, or whose state is not final.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    /// Its position in [`ScanOutput::rows`].
    pub(crate) row: usize,
    /// What `git status` says.
    pub(crate) status: Unstaged,
    /// A gitlink with a directory: its state needs the nested repository's fingerprint.
    pub(crate) nested: bool,
    /// A parent directory is not one: the worktree state is `missing`, whatever the row says.
    pub(crate) missing: bool,
}

/// Rows of one run of index entries.
struct Chunk {
    rows: Rows,
    marks: Vec<Mark>,
}

/// The record of a scan, put together while it runs: each run of index entries adds what it
/// recorded as soon as the runs before it have, so that no run's record waits for the end of
/// the scan next to the whole.
struct RecordJoin {
    /// The first index entry of each run, in order.
    order: Vec<usize>,
    /// How many runs are in `record`.
    next: usize,
    /// Records and rows of runs done before an earlier run was, by first index entry.
    pending: std::collections::BTreeMap<usize, (StatRecord, Chunk)>,
    record: StatRecord,
    /// The rows of the runs joined so far, each row's first index entry, and their marks.
    rows: handoff_core::StatesWriter,
    firsts: Vec<u32>,
    marks: Vec<Mark>,
}

impl RecordJoin {
    fn new(tasks: &[Task], id_len: usize, park: Option<&Path>, since: Option<&StatRecord>) -> Self {
        RecordJoin {
            order: tasks
                .iter()
                .filter_map(|task| match task {
                    Task::Stat(range) => Some(range.start),
                    Task::List(_) => None,
                })
                .collect(),
            next: 0,
            pending: Default::default(),
            rows: handoff_core::StatesWriter::new(park),
            firsts: Vec::new(),
            marks: Vec::new(),
            record: match park {
                // Where the worktree did not change, its pages are the earlier record's.
                Some(dir) => StatRecord::parked_echoing(id_len, dir, since),
                None => StatRecord::new(id_len),
            },
        }
    }

    /// Adds the record and rows of the run starting at index entry `start`.
    fn add(&mut self, start: usize, record: StatRecord, chunk: Chunk) {
        self.pending.insert(start, (record, chunk));
        while let Some((record, chunk)) = self
            .order
            .get(self.next)
            .and_then(|first| self.pending.remove(first))
        {
            self.record.append(&record);
            let offset = self.firsts.len();
            for i in 0..chunk.rows.len() {
                let (key, state) = chunk.rows.get(i);
                self.rows.push(key, state);
                self.firsts.push(chunk.rows.first(i) as u32);
            }
            self.marks.extend(chunk.marks.into_iter().map(|mark| Mark {
                row: mark.row + offset,
                ..mark
            }));
            self.next += 1;
        }
    }
}

/// Listing one directory that holds tracked entries: the index entries `lo..hi` all live below
/// it, and its path is the first `prefix_len` bytes of their paths (`dir/`; empty for the root).
#[derive(Debug, Clone, Copy)]
struct ListTask {
    lo: usize,
    hi: usize,
    prefix_len: usize,
}

enum Task {
    List(ListTask),
    Stat(Range<usize>),
}

#[derive(Default)]
struct Out {
    candidates: Vec<(BString, Kind)>,
    /// Tracked directories that are not (or no longer) directories.
    broken: Vec<ListTask>,
}

/// One name below a tracked directory, as the index sees it.
struct Child<'a> {
    name: &'a [u8],
    /// Index entries live below `name/`.
    dir: bool,
    /// A gitlink or sparse-directory entry (its worktree directory is not walked).
    opaque: bool,
}

/// Phase one's work, done: the rows, records and candidates of each task, not yet joined.
pub(crate) struct Parts {
    outs: Vec<Out>,
    record: StatRecord,
    rows: RowFile,
    marks: Vec<Mark>,
}

/// Runs phase one; [`Parts::join`] puts its output together.
pub(crate) fn scan(input: &ScanInput<'_>) -> Result<Parts, WorkspaceError> {
    let (outs, join) = run(input, &tasks(input.state))?;
    let states = join.rows.finish().map_err(|source| WorkspaceError::Io {
        path: input.display_root.to_owned(),
        source,
    })?;
    Ok(Parts {
        outs,
        record: join.record,
        rows: RowFile {
            states,
            firsts: join.firsts,
        },
        marks: join.marks,
    })
}

impl Parts {
    /// The output of phase one, in index order; `state` is the index it was run on.
    pub(crate) fn join(self, state: &gix::index::State) -> ScanOutput {
        let mut candidates = Vec::new();
        let mut broken = Vec::new();
        for out in self.outs {
            candidates.extend(out.candidates);
            broken.extend(out.broken);
        }
        let rows = self.rows;
        let mut marks = self.marks;
        // Below a tracked directory that is not a directory, nothing is there, whatever a
        // lookup through a symbolic link in its place may have found.
        if !broken.is_empty() {
            let mut missing = vec![false; rows.len()];
            for task in &broken {
                missing[rows.rows_of_entries(task.lo, task.hi)]
                    .iter_mut()
                    .for_each(|m| *m = true);
            }
            drop_below_broken(state, &broken, &mut candidates);
            marks.retain(|mark| !missing[mark.row]);
            for (row, _) in missing.iter().enumerate().filter(|(_, m)| **m) {
                let stages = stages_at(state, rows.first(row));
                marks.push(Mark {
                    row,
                    status: unstaged(stages, &Wt::Missing, None),
                    nested: false,
                    missing: true,
                });
            }
            marks.sort_by_key(|mark| mark.row);
        }
        candidates.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        candidates.dedup_by(|a, b| a.0 == b.0);
        ScanOutput {
            rows,
            marks,
            candidates,
            record: self.record,
        }
    }
}

/// Only the names in tracked directories that the index does not know, as [`scan`] finds them,
/// without looking at the index entries' files; sorted.
pub(crate) fn candidates(input: &ScanInput<'_>) -> Result<Vec<(BString, Kind)>, WorkspaceError> {
    let mut tasks = tasks(input.state);
    tasks.retain(|task| matches!(task, Task::List(_)));
    let mut candidates = Vec::new();
    let mut broken = Vec::new();
    for out in run(input, &tasks)?.0 {
        candidates.extend(out.candidates);
        broken.extend(out.broken);
    }
    drop_below_broken(input.state, &broken, &mut candidates);
    candidates.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    candidates.dedup_by(|a, b| a.0 == b.0);
    Ok(candidates)
}

/// Runs `tasks` on the configured number of threads: what each thread found, and the record.
fn run(input: &ScanInput<'_>, tasks: &[Task]) -> Result<(Vec<Out>, RecordJoin), WorkspaceError> {
    let root_fd: OwnedFd = File::open(input.root)
        .map_err(|source| WorkspaceError::Io {
            path: input.display_root.to_owned(),
            source,
        })?
        .into();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let threads = input.threads.clamp(1, tasks.len().max(1));
    let join = Mutex::new(RecordJoin::new(
        tasks,
        input.object_hash.len_in_bytes(),
        input.park,
        input.since,
    ));
    let work = || worker(input, root_fd.as_fd(), tasks, &next, &failed, &join);
    let outs = if threads == 1 {
        vec![work()?]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            handles
                .into_iter()
                .map(|handle| {
                    handle.join().unwrap_or_else(|_| {
                        Err(WorkspaceError::Git {
                            message: "a fingerprint thread panicked".to_owned(),
                        })
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })?
    };
    let join = join.into_inner().unwrap_or_else(PoisonError::into_inner);
    Ok((outs, join))
}

/// Below a tracked directory that is not a directory, nothing is there, whatever a lookup
/// through a symbolic link in its place may have found: drops such candidates.
fn drop_below_broken(
    state: &gix::index::State,
    broken: &[ListTask],
    candidates: &mut Vec<(BString, Kind)>,
) {
    let entries = state.entries();
    for task in broken {
        let prefix = &entries[task.lo].path(state)[..task.prefix_len];
        candidates.retain(|(path, _)| !path.starts_with(prefix));
    }
}

/// The entries (stages) of the path whose first entry is at `first`.
pub(crate) fn stages_at(state: &gix::index::State, first: usize) -> &[gix::index::Entry] {
    let entries = state.entries();
    let path = entries[first].path(state);
    let mut end = first + 1;
    while end < entries.len() && entries[end].path(state) == path {
        end += 1;
    }
    &entries[first..end]
}

/// Every tracked directory to list, and the index split into runs to stat.
fn tasks(state: &gix::index::State) -> Vec<Task> {
    let entries = state.entries();
    let mut tasks = Vec::new();
    let mut stack = vec![ListTask {
        lo: 0,
        hi: entries.len(),
        prefix_len: 0,
    }];
    while let Some(task) = stack.pop() {
        tasks.push(Task::List(task));
        let mut i = task.lo;
        while i < task.hi {
            let path = entries[i].path(state);
            match subdir_len(&entries[i], path, task.prefix_len) {
                Some(sub_len) => {
                    let end = subdir_end(state, i, task.hi, &path[..sub_len]);
                    stack.push(ListTask {
                        lo: i,
                        hi: end,
                        prefix_len: sub_len,
                    });
                    i = end;
                }
                None => i += 1,
            }
        }
    }
    let mut lo = 0;
    while lo < entries.len() {
        let mut hi = (lo + STAT_CHUNK).min(entries.len());
        while hi < entries.len() && entries[hi].path(state) == entries[hi - 1].path(state) {
            hi += 1;
        }
        tasks.push(Task::Stat(lo..hi));
        lo = hi;
    }
    tasks
}

/// If the entry at `path` lives in a subdirectory of the directory `path[..prefix_len]`, the
/// length of `subdir/` within `path`. A sparse-directory entry (`subdir/` itself) is a leaf.
fn subdir_len(entry: &gix::index::Entry, path: &BStr, prefix_len: usize) -> Option<usize> {
    let pos = path[prefix_len..].find_byte(b'/')?;
    let sub_len = prefix_len + pos + 1;
    if entry.mode == Mode::DIR && sub_len == path.len() {
        None
    } else {
        Some(sub_len)
    }
}

/// The end of the run of entries, starting at `start`, whose paths begin with `prefix`.
fn subdir_end(state: &gix::index::State, start: usize, hi: usize, prefix: &[u8]) -> usize {
    let entries = state.entries();
    start + entries[start..hi].partition_point(|entry| entry.path(state).starts_with(prefix))
}

fn worker(
    input: &ScanInput<'_>,
    root: BorrowedFd<'_>,
    tasks: &[Task],
    next: &AtomicUsize,
    failed: &AtomicBool,
    join: &Mutex<RecordJoin>,
) -> Result<Out, WorkspaceError> {
    let mut out = Out::default();
    let mut buf = Vec::new();
    loop {
        if failed.load(Ordering::Relaxed) {
            return Ok(out);
        }
        let Some(task) = tasks.get(next.fetch_add(1, Ordering::Relaxed)) else {
            return Ok(out);
        };
        let result = match task {
            Task::List(task) => list(input, root, *task, &mut out),
            Task::Stat(range) => stat_run(input, root, range.clone(), &mut buf, join),
        };
        if let Err(err) = result {
            failed.store(true, Ordering::Relaxed);
            return Err(err);
        }
    }
}

/// Lists one tracked directory and records what in it the index does not know.
fn list(
    input: &ScanInput<'_>,
    root: BorrowedFd<'_>,
    task: ListTask,
    out: &mut Out,
) -> Result<(), WorkspaceError> {
    let state = input.state;
    let entries = state.entries();
    let prefix: &[u8] = if task.prefix_len == 0 {
        b""
    } else {
        &entries[task.lo].path(state)[..task.prefix_len]
    };
    let dir_path: &[u8] = if prefix.is_empty() {
        b"."
    } else {
        &prefix[..prefix.len() - 1]
    };
    let fd = match openat(root, dir_path, dir_flags(), Perms::empty()) {
        Ok(fd) => fd,
        Err(errno) if !prefix.is_empty() && is_absent(errno) => {
            out.broken.push(task);
            return Ok(());
        }
        Err(errno) => return Err(io_error(input, dir_path.as_bstr(), errno)),
    };
    let mut dir =
        nix::dir::Dir::from_fd(fd).map_err(|errno| io_error(input, dir_path.as_bstr(), errno))?;
    let mut listing: Vec<(Vec<u8>, Option<nix::dir::Type>)> = Vec::new();
    for item in dir.iter() {
        let item = item.map_err(|errno| io_error(input, dir_path.as_bstr(), errno))?;
        let name = item.file_name().to_bytes();
        if matches!(name, b"." | b".." | b".git") {
            continue;
        }
        listing.push((name.to_vec(), item.file_type()));
    }
    drop(dir);
    if listing.is_empty() {
        return Ok(());
    }

    let mut children = Vec::new();
    let mut i = task.lo;
    while i < task.hi {
        let entry = &entries[i];
        let path = entry.path(state);
        match subdir_len(entry, path, task.prefix_len) {
            Some(sub_len) => {
                let end = subdir_end(state, i, task.hi, &path[..sub_len]);
                children.push(Child {
                    name: &path[task.prefix_len..sub_len - 1],
                    dir: true,
                    opaque: false,
                });
                i = end;
            }
            None => {
                let name = path[task.prefix_len..].trim_end_with(|c| c == '/');
                children.push(Child {
                    name,
                    dir: false,
                    opaque: matches!(entry.mode, Mode::COMMIT | Mode::DIR),
                });
                i += 1;
            }
        }
    }
    children.sort_by(|a, b| a.name.cmp(b.name));

    let mut path = Vec::with_capacity(prefix.len() + 64);
    for (name, file_type) in listing {
        path.clear();
        path.extend_from_slice(prefix);
        path.extend_from_slice(&name);
        let kind = match file_type {
            Some(nix::dir::Type::File) => Kind::File,
            Some(nix::dir::Type::Symlink) => Kind::Symlink,
            Some(nix::dir::Type::Directory) => Kind::Dir,
            Some(_) => Kind::Other,
            None => match fstatat(root, path.as_slice(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(stat) => kind_of(&stat),
                Err(errno) if is_absent(errno) => continue,
                Err(errno) => return Err(io_error(input, path.as_bstr(), errno)),
            },
        };
        let start = children.partition_point(|c| c.name < name.as_slice());
        let (mut tracked_dir, mut tracked_file, mut opaque) = (false, false, false);
        for child in children[start..]
            .iter()
            .take_while(|c| c.name == name.as_slice())
        {
            tracked_dir |= child.dir;
            tracked_file |= !child.dir;
            opaque |= child.opaque;
        }
        let candidate = match (tracked_file, tracked_dir) {
            (false, false) => true,
            // A tracked directory that is something else now: that something is new.
            (false, true) => kind != Kind::Dir,
            // A tracked file that is a directory now: its content is new.
            (true, false) => kind == Kind::Dir && !opaque,
            (true, true) => false,
        };
        if candidate {
            out.candidates.push((BString::from(path.clone()), kind));
        }
    }
    Ok(())
}

/// Stats the index entries `range` (whole paths: all stages of a path are in it) and makes their
/// rows.
fn stat_run(
    input: &ScanInput<'_>,
    root: BorrowedFd<'_>,
    range: Range<usize>,
    buf: &mut Vec<u8>,
    join: &Mutex<RecordJoin>,
) -> Result<(), WorkspaceError> {
    let state = input.state;
    let entries = state.entries();
    let mut chunk = Chunk {
        rows: Rows::with_capacity(range.len()),
        marks: Vec::new(),
    };
    let mut record = StatRecord::new(input.object_hash.len_in_bytes());
    // The run's paths are in order: each parked page of the earlier record is read once.
    let mut lookup = input.since.map(StatRecord::lookup);
    let mut text = String::with_capacity(128);
    // The directory of the previous entry: its path and descriptor (`None`: the root, or not a
    // directory).
    let mut current: Option<(&BStr, Option<OwnedFd>)> = None;
    let mut i = range.start;
    while i < range.end {
        let entry = &entries[i];
        let path = entry.path(state);
        let mut end = i + 1;
        while end < range.end && entries[end].path(state) == path {
            end += 1;
        }
        let stages = &entries[i..end];
        let wt = if entry.mode == Mode::DIR {
            Wt::Sparse
        } else {
            let (parent, name) = match path.rfind_byte(b'/') {
                Some(pos) => (&path[..pos], &path[pos + 1..]),
                None => (BStr::new(b""), path),
            };
            if current.as_ref().is_none_or(|(dir, _)| *dir != parent) {
                let fd = if parent.is_empty() {
                    None
                } else {
                    match openat(root, parent.as_bytes(), dir_flags(), Perms::empty()) {
                        Ok(fd) => Some(fd),
                        Err(errno) if is_absent(errno) => None,
                        Err(errno) => return Err(io_error(input, parent, errno)),
                    }
                };
                current = Some((parent, fd));
            }
            let seen = match &current {
                Some((_, Some(fd))) => {
                    stat_entry(input, &mut lookup, fd.as_fd(), name, path, stages, buf)?
                }
                Some((dir, None)) if dir.is_empty() => {
                    stat_entry(input, &mut lookup, root, name, path, stages, buf)?
                }
                _ => (Wt::Missing, None),
            };
            if let Some((stamp, id)) = seen.1 {
                record.push(path, stamp, id.as_slice());
            }
            seen.0
        };
        let nested = wt == Wt::Nested;
        let status = unstaged(stages, &wt, None);
        if nested || status.unstaged {
            chunk.marks.push(Mark {
                row: chunk.rows.len(),
                status,
                nested,
                missing: false,
            });
        }
        text.clear();
        write_tracked_state(&mut text, stages, &wt, None);
        chunk.rows.push(i, path, &text);
        i = end;
    }
    join.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .add(range.start, record, chunk);
    Ok(())
}
