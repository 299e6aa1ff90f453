//! handoff's own record of the tracked files a fingerprint saw: each path's stat data and
//! object id, compact and sorted, for the next fingerprint of the same worktree to trust.

use std::cmp::Ordering;

use super::{Pages, RECORD_PAGE, RecordLookup, RecordedId};

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
    pub(super) len: usize,
    /// The last path in `bytes`, which the next one must sort after.
    last: Vec<u8>,
    /// The full pages, when parked.
    pub(super) pages: Option<Pages>,
    /// The pages of an earlier record this one is likely to repeat, shared where it does.
    echo: Option<Pages>,
}

/// Paths per block of a [`StatRecord`]: a lookup reads at most this many.
pub const RECORD_BLOCK: usize = 16;

/// The record's header: magic, id width, device.
pub(super) const RECORD_HEADER: usize = 4 + 1 + 8;
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
pub(super) struct RecordItem<'a> {
    pub(super) shared: usize,
    pub(super) rest: &'a [u8],
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

    /// This record, in memory, without the paths `drop` picks (given each one's place in the
    /// record and its bytes); `None` when a parked page does not read back as written.
    pub fn without(&self, mut drop: impl FnMut(usize, &[u8]) -> bool) -> Option<StatRecord> {
        let mut out = StatRecord::new(self.id_len());
        let mut i = 0;
        let whole = self.for_each(|path, stamp, id| {
            if !drop(i, path) {
                out.push(path, stamp, id);
            }
            i += 1;
        });
        whole.then_some(out)
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
    pub(super) fn from_written(bytes: Vec<u8>) -> Option<StatRecord> {
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
    pub(super) fn get_here(&self, path: &[u8]) -> Option<(Stamp, &[u8])> {
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
pub(super) fn read_item(bytes: &[u8], at: usize, id_len: usize) -> Option<(RecordItem<'_>, usize)> {
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
