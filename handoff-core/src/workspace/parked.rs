//! A "before" fingerprint whose per-path states wait out the agent in a file rather than in
//! memory.
//!
//! The states of a large worktree are most of what a run holds while its agent works and
//! while the "after" is taken (about 100 bytes a path). They are needed again only when the
//! two digests differ, to name the changed paths, and then once, in key order: so they are
//! written to an unnamed file (created and unlinked at once in handoff's private directory)
//! and read back streaming.
//!
//! The file is not trusted: an agent running as the same user may reach it (through
//! `/proc/<pid>/fd`). Its BLAKE3 digest, taken as it is written, stays in memory, and a read that
//! does not end on exactly the bytes written (altered, cut short or grown) fails, so a
//! comparison read from an altered file is never used.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{Entries, Fingerprint, GitEvidence, compare_states};

/// States are read back in pieces of this many bytes.
const READ_CHUNK: usize = 64 * 1024;

/// A fingerprint whose per-path states may be parked in a file: everything else (the summary,
/// the record) stays in memory.
#[derive(Debug)]
pub struct ParkedFingerprint {
    /// The fingerprint, without its states when they are parked.
    head: Fingerprint,
    /// The parked states; `None` when they are in `head`.
    file: Option<StateFile>,
    /// The states being written, on a thread of their own ([`ParkedFingerprint::park_behind`]).
    writing: Option<std::thread::JoinHandle<Result<StateFile, std::sync::Arc<Entries>>>>,
    /// The states were lost (the thread writing them panicked): nothing can be named.
    lost: bool,
}

/// Key and state pairs, in order, as a [`StatesWriter`] wrote them: in an unnamed file, or in
/// memory.
#[derive(Debug)]
pub struct StateFile {
    file: Source,
    /// How many bytes were written.
    len: u64,
    /// How many entries.
    entries: usize,
    /// BLAKE3 digest of the bytes written.
    digest: [u8; 32],
}

/// Where a [`StateFile`]'s bytes are.
#[derive(Debug)]
enum Source {
    File(File),
    Memory(Vec<u8>),
}

impl Source {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self {
            Source::File(file) => file.read_exact_at(buf, offset),
            Source::Memory(bytes) => {
                let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
                let piece = bytes
                    .get(start..start + buf.len())
                    .ok_or(io::ErrorKind::UnexpectedEof)?;
                buf.copy_from_slice(piece);
                Ok(())
            }
        }
    }

    fn write_all_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        match self {
            Source::File(file) => file.write_all_at(buf, offset),
            Source::Memory(bytes) => {
                debug_assert_eq!(bytes.len() as u64, offset);
                bytes.extend_from_slice(buf);
                Ok(())
            }
        }
    }
}

/// Writes key and state pairs as they come, a buffer at a time, to an unnamed file (or
/// memory), hashing what it writes: each as its key's length (4 bytes, little-endian), the key,
/// its state's length and the state.
#[derive(Debug)]
pub struct StatesWriter {
    file: Source,
    buf: Vec<u8>,
    hasher: blake3::Hasher,
    len: u64,
    entries: usize,
    failed: Option<io::Error>,
}

impl StatesWriter {
    /// A writer to an unnamed file in `dir`; to memory without one, or when the file cannot be
    /// made.
    pub fn new(dir: Option<&Path>) -> StatesWriter {
        let file = match dir.map(tempfile::tempfile_in) {
            Some(Ok(file)) => Source::File(file),
            _ => Source::Memory(Vec::new()),
        };
        StatesWriter {
            file,
            buf: Vec::with_capacity(READ_CHUNK + 1024),
            hasher: blake3::Hasher::new(),
            len: 0,
            entries: 0,
            failed: None,
        }
    }

    /// A writer to an unnamed file in `dir`, or the error making it.
    fn in_file(dir: &Path) -> io::Result<StatesWriter> {
        let mut writer = StatesWriter::new(None);
        writer.file = Source::File(tempfile::tempfile_in(dir)?);
        Ok(writer)
    }

    /// Adds a pair after the last.
    pub fn push(&mut self, key: &str, state: &str) {
        if self.failed.is_some() {
            return;
        }
        for text in [key, state] {
            let Ok(n) = u32::try_from(text.len()) else {
                self.failed = Some(io::ErrorKind::InvalidInput.into());
                return;
            };
            self.buf.extend_from_slice(&n.to_le_bytes());
            self.buf.extend_from_slice(text.as_bytes());
        }
        self.entries += 1;
        if self.buf.len() >= READ_CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.hasher.update(&self.buf);
        if self.file.write_all_at(&self.buf, self.len).is_err() {
            // A full disk: what was written so far comes back into memory, and the rest goes
            // there too (what comes back is checked against the digest when read).
            let mut bytes = vec![0; usize::try_from(self.len).unwrap_or(usize::MAX)];
            match self.file.read_exact_at(&mut bytes, 0) {
                Ok(()) => {
                    bytes.extend_from_slice(&self.buf);
                    self.file = Source::Memory(bytes);
                }
                Err(e) => self.failed = Some(e),
            }
        }
        self.len += self.buf.len() as u64;
        self.buf.clear();
    }

    /// The pairs written, or the error that stopped writing them.
    pub fn finish(mut self) -> io::Result<StateFile> {
        self.flush();
        if let Some(e) = self.failed {
            return Err(e);
        }
        Ok(StateFile {
            file: self.file,
            len: self.len,
            entries: self.entries,
            digest: self.hasher.finalize().into(),
        })
    }
}

impl StateFile {
    /// How many pairs it holds.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// How many bytes it holds (each pair as its two texts and their 4-byte lengths).
    pub fn byte_len(&self) -> u64 {
        self.len
    }

    /// The pairs, in order; [`StatesReader::finish`] says whether they read back as written.
    pub fn reader(&self) -> StatesReader<'_> {
        StatesReader(StateReader::new(self))
    }
}

/// Reads a [`StateFile`]'s pairs back in order; stops at the first thing wrong.
pub struct StatesReader<'a>(StateReader<'a>);

impl StatesReader<'_> {
    /// The next pair, borrowed from the reader's buffer (no copy); `None` at the end or at the
    /// first thing wrong.
    pub fn next_pair(&mut self) -> Option<(&str, &str)> {
        self.0.next_pair()
    }

    /// Whether every pair read back exactly as written, all of them read.
    pub fn finish(self) -> Result<(), ParkedError> {
        self.0.finish()
    }
}

impl Iterator for StatesReader<'_> {
    type Item = (String, String);

    fn next(&mut self) -> Option<(String, String)> {
        self.0.next()
    }
}

/// Parked states (or pairs of a [`StateFile`]) could not be read back as they were written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the worktree's state before the run, kept in a file while it ran, {0}")]
pub struct ParkedError(String);

impl ParkedError {
    /// What went wrong, without saying whose states they were (e.g. `was altered after it
    /// was written`).
    pub fn reason(&self) -> &str {
        &self.0
    }
}

impl ParkedFingerprint {
    /// `fingerprint` with its states kept in memory.
    pub fn in_memory(fingerprint: Fingerprint) -> ParkedFingerprint {
        ParkedFingerprint {
            head: fingerprint,
            file: None,
            writing: None,
            lost: false,
        }
    }

    /// `fingerprint` with its states written to an unnamed file in `dir`; kept in memory
    /// instead when the file cannot be made or written.
    pub fn park(mut fingerprint: Fingerprint, dir: &Path) -> ParkedFingerprint {
        match write_states(&fingerprint.entries, dir) {
            Ok(file) => {
                fingerprint.entries = Entries::default();
                ParkedFingerprint {
                    head: fingerprint,
                    file: Some(file),
                    writing: None,
                    lost: false,
                }
            }
            Err(_) => ParkedFingerprint::in_memory(fingerprint),
        }
    }

    /// [`ParkedFingerprint::park`], the states written on a thread of their own while the
    /// caller goes on (an agent starts); they are waited for when next needed.
    pub fn park_behind(mut fingerprint: Fingerprint, dir: &Path) -> ParkedFingerprint {
        let entries = std::sync::Arc::new(std::mem::take(&mut fingerprint.entries));
        let theirs = std::sync::Arc::clone(&entries);
        let dir = dir.to_owned();
        let writer = std::thread::Builder::new()
            .name("handoff-park".to_owned())
            .spawn(move || write_states(&theirs, &dir).map_err(|_| theirs));
        match writer {
            Ok(handle) => ParkedFingerprint {
                head: fingerprint,
                file: None,
                writing: Some(handle),
                lost: false,
            },
            Err(_) => {
                fingerprint.entries = unshare(entries);
                ParkedFingerprint::in_memory(fingerprint)
            }
        }
    }

    /// Waits for states being written: then in the file, or back in memory when they could
    /// not be written.
    fn settle(&mut self) {
        let Some(handle) = self.writing.take() else {
            return;
        };
        match handle.join() {
            Ok(Ok(file)) => self.file = Some(file),
            Ok(Err(entries)) => self.head.entries = unshare(entries),
            Err(_) => self.lost = true,
        }
    }

    /// Whether the states are in a file (waiting for them to be written).
    pub fn is_parked(&mut self) -> bool {
        self.settle();
        self.file.is_some()
    }

    /// What the fingerprint serializes ([`Fingerprint::summary`]).
    pub fn summary(&self) -> Fingerprint {
        self.head.summary()
    }

    /// What a later fingerprint is taken since ([`Fingerprint::slim`]), once the states are
    /// written: the record goes with it, and is no longer held here.
    pub fn take_since(&mut self) -> Fingerprint {
        // The states are out of memory before the "after" is taken next to them (an agent that
        // ended at once leaves no time to write them while it ran).
        self.settle();
        // What the "before" freed in small blocks is not kept resident next to the "after".
        crate::allocator::give_back_free_memory();
        let since = self.head.slim();
        self.head.record = None;
        since
    }

    /// [`Fingerprint::compare_summaries`] with `after`, reading the parked states back when
    /// the digests differ; fails when they do not read back as written.
    pub fn compare_summaries(&mut self, after: &Fingerprint) -> Result<GitEvidence, ParkedError> {
        self.settle();
        if self.lost {
            return Err(ParkedError("could not be kept".to_owned()));
        }
        let Some(file) = &self.file else {
            return Ok(self.head.compare_summaries(after));
        };
        if self.head.digest == after.digest {
            // Equal digests: the states are not read (there is no changed path to name).
            return Ok(compare_states(
                &self.head,
                file.entries,
                std::iter::empty::<(&str, &str)>(),
                after,
            ));
        }
        let mut reader = StateReader::new(file);
        let evidence = compare_states(&self.head, file.entries, reader.by_ref(), after);
        reader.finish()?;
        Ok(evidence)
    }

    /// The whole fingerprint back, its states read back when parked.
    pub fn into_fingerprint(mut self) -> Result<Fingerprint, ParkedError> {
        self.settle();
        if self.lost {
            return Err(ParkedError("could not be kept".to_owned()));
        }
        let Some(file) = &self.file else {
            return Ok(self.head);
        };
        let mut reader = StateReader::new(file);
        let mut entries = Entries::new();
        for (key, state) in reader.by_ref() {
            entries.push(&key, &state);
        }
        reader.finish()?;
        let mut head = self.head;
        head.entries = entries;
        Ok(head)
    }

    /// The unnamed file, for tests that alter it as an agent would.
    #[doc(hidden)]
    pub fn parked_file(&mut self) -> Option<&File> {
        self.settle();
        match self.file.as_ref().map(|f| &f.file) {
            Some(Source::File(file)) => Some(file),
            _ => None,
        }
    }
}

/// The entries of `shared`, which no one else holds any more (copied if someone does).
fn unshare(shared: std::sync::Arc<Entries>) -> Entries {
    std::sync::Arc::try_unwrap(shared).unwrap_or_else(|still| (*still).clone())
}

/// Writes `entries` to an unnamed file in `dir`.
fn write_states(entries: &Entries, dir: &Path) -> io::Result<StateFile> {
    let mut writer = StatesWriter::in_file(dir)?;
    for (key, state) in entries.iter() {
        writer.push(key, state);
    }
    writer.finish()
}

/// Reads the entries of a [`StateFile`] back in order, hashing what it reads; stops at the
/// first thing wrong, which [`StateReader::finish`] reports.
struct StateReader<'a> {
    source: &'a StateFile,
    /// Bytes read from the file, not yet taken.
    buf: Vec<u8>,
    /// Where `buf`'s unread bytes start.
    at: usize,
    /// The file offset after `buf`.
    offset: u64,
    hasher: blake3::Hasher,
    read: usize,
    failed: Option<String>,
}

impl<'a> StateReader<'a> {
    fn new(source: &'a StateFile) -> Self {
        StateReader {
            source,
            buf: Vec::with_capacity(READ_CHUNK),
            at: 0,
            offset: 0,
            hasher: blake3::Hasher::new(),
            read: 0,
            failed: None,
        }
    }

    /// The next pair without copying it: its texts are checked to be UTF-8 where they lie in
    /// the buffer.
    fn next_pair(&mut self) -> Option<(&str, &str)> {
        if self.failed.is_some() || self.read == self.source.entries {
            return None;
        }
        let len_at = |buf: &[u8], at: usize| -> usize {
            u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize
        };
        self.fill(4)?;
        let key_len = len_at(&self.buf, self.at);
        self.fill(4 + key_len + 4)?;
        let state_len = len_at(&self.buf, self.at + 4 + key_len);
        let whole = 4 + key_len + 4 + state_len;
        self.fill(whole)?;
        let start = self.at;
        self.at += whole;
        self.read += 1;
        let key = std::str::from_utf8(&self.buf[start + 4..start + 4 + key_len]);
        let state = std::str::from_utf8(&self.buf[start + 8 + key_len..start + whole]);
        match (key, state) {
            (Ok(key), Ok(state)) => Some((key, state)),
            _ => {
                self.failed = Some("holds text that is not UTF-8".to_owned());
                None
            }
        }
    }

    /// Makes at least `n` unread bytes be in the buffer (read from the file as needed);
    /// `None` at a failure.
    fn fill(&mut self, n: usize) -> Option<()> {
        let unread = self.buf.len() - self.at;
        if unread < n {
            let left = self.source.len - self.offset;
            if ((n - unread) as u64) > left {
                self.failed = Some("is shorter than it was written".to_owned());
                return None;
            }
            self.buf.drain(..self.at);
            self.at = 0;
            let want = (n - unread).max(READ_CHUNK).min(left as usize);
            let start = self.buf.len();
            self.buf.resize(start + want, 0);
            if let Err(e) = self
                .source
                .file
                .read_exact_at(&mut self.buf[start..], self.offset)
            {
                self.failed = Some(format!("cannot be read: {e}"));
                return None;
            }
            self.hasher.update(&self.buf[start..]);
            self.offset += want as u64;
        }
        Some(())
    }

    /// Whether everything read is exactly what was written.
    fn finish(mut self) -> Result<(), ParkedError> {
        if let Some(why) = self.failed.take() {
            return Err(ParkedError(why));
        }
        if self.read != self.source.entries || self.offset != self.source.len {
            return Err(ParkedError("was not read to its end".to_owned()));
        }
        // Whatever else is in the file now, only what was written counts; bytes added after
        // it are not read, and a change to what was read shows in the digest.
        let digest: [u8; 32] = self.hasher.finalize().into();
        if digest != self.source.digest {
            return Err(ParkedError("was altered after it was written".to_owned()));
        }
        Ok(())
    }
}

impl Iterator for StateReader<'_> {
    type Item = (String, String);

    fn next(&mut self) -> Option<(String, String)> {
        self.next_pair()
            .map(|(key, state)| (key.to_owned(), state.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprint(entries: &[(&str, &str)], digest: &str) -> Fingerprint {
        let mut fp = Fingerprint::record_only("/w".into(), super::super::StatRecord::new(20));
        fp.record = None;
        fp.digest = digest.to_owned();
        fp.entries = entries.iter().map(|(k, v)| (*k, *v)).collect();
        fp
    }

    fn states() -> Vec<(String, String)> {
        (0..3000)
            .map(|i| (format!("dir/{i:05}.rs"), format!("tracked 100644 {i:040x}")))
            .collect()
    }

    fn with(states: &[(String, String)], digest: &str) -> Fingerprint {
        let refs: Vec<(&str, &str)> = states
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        fingerprint(&refs, digest)
    }

    #[test]
    fn parked_states_compare_as_in_memory_ones() {
        let dir = tempfile::tempdir().unwrap();
        let before = with(&states(), "sha256:a");
        let mut later = states();
        later[17].1 = "tracked 100644 ffff".to_owned();
        later.remove(2500);
        later.push(("zz/new".to_owned(), "untracked file".to_owned()));
        let after = with(&later, "sha256:b");
        let expected = before.compare_summaries(&after);
        assert_eq!(
            expected.changed_files,
            ["dir/00017.rs", "dir/02500.rs", "zz/new"]
        );
        let mut parked = ParkedFingerprint::park_behind(before.clone(), dir.path());
        assert!(parked.is_parked());
        assert!(parked.head.entries.is_empty());
        assert_eq!(parked.compare_summaries(&after).unwrap(), expected);
        assert_eq!(parked.summary(), before.summary());
        assert_eq!(parked.into_fingerprint().unwrap().entries, before.entries);
        // Parked before returning, too.
        let mut parked = ParkedFingerprint::park(before.clone(), dir.path());
        assert!(parked.file.is_some() && parked.writing.is_none());
        assert_eq!(parked.compare_summaries(&after).unwrap(), expected);
    }

    #[test]
    fn equal_digests_do_not_read_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let before = with(&states(), "sha256:a");
        let mut parked = ParkedFingerprint::park_behind(before.clone(), dir.path());
        // Even a file emptied by someone else is not read when nothing changed.
        parked.parked_file().unwrap().set_len(0).unwrap();
        let evidence = parked.compare_summaries(&before).unwrap();
        assert!(!evidence.changed);
        assert!(evidence.changed_files.is_empty());
    }

    /// Every way an agent reaching the file could alter it is caught: a changed state (the
    /// change it would hide), a cut, bytes added, bytes of a valid other table.
    #[test]
    fn an_altered_file_fails_the_comparison() {
        let dir = tempfile::tempdir().unwrap();
        let mut later = states();
        later[5].1 = "tracked 100644 ffff".to_owned();
        let after = with(&later, "sha256:b");
        type Alteration = (&'static str, fn(&File));
        let alterations: [Alteration; 4] = [
            ("hide the change", |f| {
                // Rewrite dir/00005.rs's state in place to the one after.
                let mut bytes = vec![0u8; f.metadata().unwrap().len() as usize];
                f.read_exact_at(&mut bytes, 0).unwrap();
                let old = format!("tracked 100644 {:040x}", 5);
                let at = bytes
                    .windows(old.len())
                    .position(|w| w == old.as_bytes())
                    .unwrap();
                let new = format!("{:<width$}", "tracked 100644 ffff", width = old.len());
                f.write_all_at(new.as_bytes(), at as u64).unwrap();
            }),
            ("cut", |f| {
                let len = f.metadata().unwrap().len();
                f.set_len(len / 2).unwrap();
            }),
            ("grow", |f| {
                let len = f.metadata().unwrap().len();
                f.write_all_at(b"\x01\0\0\0z\x01\0\0\0z", len).unwrap();
            }),
            ("zero the lengths", |f| {
                f.write_all_at(&[0u8; 64], 0).unwrap();
            }),
        ];
        for (what, alter) in alterations {
            let mut parked =
                ParkedFingerprint::park_behind(with(&states(), "sha256:a"), dir.path());
            alter(parked.parked_file().unwrap());
            match (what, parked.compare_summaries(&after)) {
                // Bytes after what was written are never read: the comparison stands.
                ("grow", Ok(evidence)) => assert_eq!(evidence.changed_files, ["dir/00005.rs"]),
                (_, Ok(evidence)) => panic!("{what}: compared as {:?}", evidence.changed_files),
                (_, Err(e)) => assert!(e.to_string().contains("before the run"), "{what}: {e}"),
            }
            let mut parked =
                ParkedFingerprint::park_behind(with(&states(), "sha256:a"), dir.path());
            alter(parked.parked_file().unwrap());
            assert_eq!(what == "grow", parked.into_fingerprint().is_ok(), "{what}");
        }
    }

    /// Pairs written as they come read back the same, copied or borrowed, from a file or from
    /// memory, across buffer refills and with a state longer than a refill; an altered file
    /// does not finish.
    #[test]
    fn written_pairs_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut pairs = states();
        pairs.insert(1500, ("dir/01499b".to_owned(), "x".repeat(3 * READ_CHUNK)));
        for place in [Some(dir.path()), None] {
            let mut writer = StatesWriter::new(place);
            for (k, v) in &pairs {
                writer.push(k, v);
            }
            let file = writer.finish().unwrap();
            assert_eq!(file.len(), pairs.len());
            assert_eq!(matches!(file.file, Source::File(_)), place.is_some());
            let mut reader = file.reader();
            let copied: Vec<(String, String)> = reader.by_ref().collect();
            reader.finish().unwrap();
            assert_eq!(copied, pairs);
            let mut reader = file.reader();
            let mut borrowed = Vec::new();
            while let Some((k, v)) = reader.next_pair() {
                borrowed.push((k.to_owned(), v.to_owned()));
            }
            reader.finish().unwrap();
            assert_eq!(borrowed, pairs);
            if let Source::File(f) = &file.file {
                f.write_all_at(b"Z", 100).unwrap();
                let mut reader = file.reader();
                while reader.next_pair().is_some() {}
                assert!(reader.finish().is_err());
            }
        }
    }

    /// A file that stops taking writes (a full disk) hands over to memory: the pairs read back
    /// all the same.
    #[test]
    fn pairs_a_file_stops_taking_go_to_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("full");
        let mut writer = StatesWriter::new(None);
        writer.file = Source::File(File::create(&path).unwrap());
        let pairs = states();
        for (i, (k, v)) in pairs.iter().enumerate() {
            if i == 2000 {
                // From now on every write fails, as on a full disk.
                let written = std::fs::read(&path).unwrap();
                assert!(!written.is_empty());
                let Source::File(file) = &mut writer.file else {
                    panic!("still a file")
                };
                *file = File::open(&path).unwrap();
            }
            writer.push(k, v);
        }
        let file = writer.finish().unwrap();
        assert!(matches!(file.file, Source::Memory(_)));
        let mut reader = file.reader();
        let back: Vec<(String, String)> = reader.by_ref().collect();
        reader.finish().unwrap();
        assert_eq!(back, pairs);
    }

    #[test]
    fn a_directory_that_takes_no_file_keeps_the_states_in_memory() {
        let before = with(&states(), "sha256:a");
        let mut parked =
            ParkedFingerprint::park_behind(before.clone(), Path::new("/nonexistent/handoff"));
        assert!(!parked.is_parked());
        assert_eq!(parked.into_fingerprint().unwrap(), before);
    }
}
