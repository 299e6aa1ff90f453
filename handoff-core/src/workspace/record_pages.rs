//! The full pages of a parked [`StatRecord`]: written to an unnamed file as they fill, read
//! back a page at a time and checked against the BLAKE3 digest taken when each was written.
//!
//! A record vouches for files so that they need not be read. Its pages wait in a file an
//! agent running as the same user can reach (through `/proc/<pid>/fd`): rewritten, a page could
//! vouch for a file the agent changed. So each page's digest stays in memory, and a page that
//! does not read back exactly as written is not used: its paths are looked up as absent, and
//! their files are read.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{RECORD_BLOCK, RECORD_HEADER, Stamp, StatRecord, read_item};

/// Paths per page of a parked record: whole blocks, about 20 KiB. A scan's run of index
/// entries reads the few pages its paths are on.
pub const RECORD_PAGE: usize = 16 * RECORD_BLOCK;

/// The widest object id a record holds (SHA-256).
const MAX_ID: usize = 32;

/// The object id a record holds for a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedId {
    bytes: [u8; MAX_ID],
    len: u8,
}

impl RecordedId {
    fn new(id: &[u8]) -> Option<RecordedId> {
        let mut bytes = [0; MAX_ID];
        bytes.get_mut(..id.len())?.copy_from_slice(id);
        Some(RecordedId {
            bytes,
            len: id.len() as u8,
        })
    }

    /// The id's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The full pages of a record, in an unnamed file.
#[derive(Debug, Clone)]
pub(super) struct Pages {
    /// Where this record's own pages are written.
    file: Arc<File>,
    /// Bytes written to `file`.
    written: u64,
    pages: Vec<Page>,
    /// Paths in all pages.
    paths: usize,
    /// Bytes of all pages (without headers).
    bytes: usize,
    /// The last path of the last page.
    last: Vec<u8>,
    /// The device and the id width of every page.
    dev: u64,
    id_len: u8,
    /// A page could not be written: no path is taken after it (they are left out, as a full
    /// record leaves out what it cannot hold, and so are read next time).
    broken: bool,
}

/// One page: where it is (in this record's file, or in an earlier record's that held the
/// same page), its first path, its digest.
#[derive(Debug, Clone)]
struct Page {
    file: Arc<File>,
    offset: u64,
    len: usize,
    first: Vec<u8>,
    digest: [u8; 32],
}

impl Pages {
    /// No pages yet, in a new unnamed file in `dir`.
    pub(super) fn create(dir: &Path) -> std::io::Result<Pages> {
        Ok(Pages {
            file: Arc::new(tempfile::tempfile_in(dir)?),
            written: 0,
            pages: Vec::new(),
            paths: 0,
            bytes: 0,
            last: Vec::new(),
            dev: 0,
            id_len: 0,
            broken: false,
        })
    }

    /// The file, for tests that alter it as an agent would.
    #[cfg(test)]
    pub(super) fn file_for_tests(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    /// How many pages are in this record's own file, for tests.
    #[cfg(test)]
    pub(super) fn own_pages_for_tests(&self) -> usize {
        self.pages
            .iter()
            .filter(|p| Arc::ptr_eq(&p.file, &self.file))
            .count()
    }

    /// Each page's offset and length, for tests.
    #[cfg(test)]
    pub(super) fn pages_for_tests(&self) -> Vec<(u64, usize)> {
        self.pages.iter().map(|p| (p.offset, p.len)).collect()
    }

    /// Feeds what identifies the pages (device, id width, and each page's length and digest)
    /// to `hasher`.
    pub(super) fn identify(&self, hasher: &mut blake3::Hasher) {
        hasher.update(&self.dev.to_le_bytes());
        hasher.update(&[self.id_len]);
        hasher.update(&(self.pages.len() as u64).to_le_bytes());
        for page in &self.pages {
            hasher.update(&(page.len as u64).to_le_bytes());
            hasher.update(&page.digest);
        }
    }

    /// How many paths the pages hold.
    pub(super) fn paths(&self) -> usize {
        self.paths
    }

    /// How many pages there are.
    pub(super) fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether there are none.
    pub(super) fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Bytes of all pages, without headers.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The device of every page.
    pub(super) fn dev(&self) -> u64 {
        self.dev
    }

    /// Whether a page may start with `path` on device `dev`: after the last page's last path,
    /// on its device, and no page was lost.
    pub(super) fn accepts(&self, path: &[u8], dev: u64) -> bool {
        !self.broken && (self.pages.is_empty() || (path > self.last.as_slice() && dev == self.dev))
    }

    /// Writes a full page: `body` holds `paths` paths of a record with `header`, the first
    /// at a block's start, the last `last`, all on `dev`. When `echo` (the pages of the record
    /// this one was taken since) holds the same page at the same place, as it does for every
    /// page of an unchanged worktree, that one is shared instead of written again.
    pub(super) fn write(
        &mut self,
        header: &[u8],
        body: &[u8],
        paths: usize,
        last: &[u8],
        dev: u64,
        echo: Option<&Pages>,
    ) {
        let id_len = header[4];
        let Some(first) = read_item(body, 0, usize::from(id_len))
            .filter(|(item, _)| item.shared == 0)
            .map(|(item, _)| item.rest.to_vec())
        else {
            self.broken = true;
            return;
        };
        let digest: [u8; 32] = blake3::hash(body).into();
        let same = echo
            .filter(|echo| echo.dev == dev && echo.id_len == id_len)
            .and_then(|echo| echo.pages.get(self.pages.len()))
            .filter(|page| page.digest == digest && page.len == body.len() && page.first == first);
        let page = match same {
            Some(page) => page.clone(),
            None => {
                let offset = self.written;
                if self.file.write_all_at(body, offset).is_err() {
                    self.broken = true;
                    return;
                }
                self.written += body.len() as u64;
                Page {
                    file: Arc::clone(&self.file),
                    offset,
                    len: body.len(),
                    first,
                    digest,
                }
            }
        };
        self.pages.push(page);
        self.paths += paths;
        self.bytes += body.len();
        self.last.clear();
        self.last.extend_from_slice(last);
        self.dev = dev;
        self.id_len = id_len;
    }

    /// Page `page` as a record's bytes (header included); `None` when it does not read back
    /// as it was written.
    pub(super) fn read(&self, page: usize) -> Option<Vec<u8>> {
        let page = self.pages.get(page)?;
        let mut bytes = Vec::with_capacity(RECORD_HEADER + page.len);
        bytes.extend_from_slice(b"HSR2");
        bytes.push(self.id_len);
        bytes.extend_from_slice(&self.dev.to_le_bytes());
        bytes.resize(RECORD_HEADER + page.len, 0);
        page.file
            .read_exact_at(&mut bytes[RECORD_HEADER..], page.offset)
            .ok()?;
        let digest: [u8; 32] = blake3::hash(&bytes[RECORD_HEADER..]).into();
        (digest == page.digest).then_some(bytes)
    }

    /// Page `page` as a record of its own; `None` when it does not read back as written.
    pub(super) fn load(&self, page: usize) -> Option<StatRecord> {
        // Read back as written: the paths were checked when they were pushed.
        let record = StatRecord::from_written(self.read(page)?)?;
        (record.len == RECORD_PAGE).then_some(record)
    }

    /// The page that would hold `path`: the last one whose first path is not after it.
    /// `None` when `path` sorts before every page, or after the last page's last path.
    /// `near` is a page to try first (paths are looked up in order).
    fn page_of(&self, path: &[u8], near: Option<usize>) -> Option<usize> {
        if path > self.last.as_slice() {
            return None;
        }
        if let Some(at) = near
            && self
                .pages
                .get(at)
                .is_some_and(|p| p.first.as_slice() <= path)
            && self
                .pages
                .get(at + 1)
                .is_none_or(|next| path < next.first.as_slice())
        {
            return Some(at);
        }
        self.pages
            .partition_point(|page| page.first.as_slice() <= path)
            .checked_sub(1)
    }
}

/// Looks paths up in a record, keeping the parked page it read last (paths looked up in order
/// read each page once).
pub struct RecordLookup<'a> {
    record: &'a StatRecord,
    /// The page read last, and what it read as (`None`: not as written).
    page: Option<(usize, Option<StatRecord>)>,
}

impl<'a> RecordLookup<'a> {
    pub(super) fn new(record: &'a StatRecord) -> Self {
        RecordLookup { record, page: None }
    }

    /// The stamp and object id recorded for `path`.
    pub fn get(&mut self, path: &[u8]) -> Option<(Stamp, RecordedId)> {
        let found = match self.record.pages.as_ref().filter(|p| !p.is_empty()) {
            Some(pages) => match pages.page_of(path, self.page.as_ref().map(|(at, _)| *at)) {
                Some(page) => {
                    if self.page.as_ref().is_none_or(|(at, _)| *at != page) {
                        self.page = Some((page, pages.load(page)));
                    }
                    let (_, loaded) = self.page.as_ref()?;
                    loaded.as_ref()?.get_here(path)
                }
                None if path > pages.last.as_slice() => self.record.get_here(path),
                None => None,
            },
            None => self.record.get_here(path),
        };
        found.and_then(|(stamp, id)| Some((stamp, RecordedId::new(id)?)))
    }
}
