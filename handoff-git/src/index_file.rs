//! Reads `.git/index` as a stream: entries are decoded from a small buffer as the file is read,
//! so the file's bytes and their decoded form are never in memory together (mapping the whole
//! file and decoding it, as git and gix do, holds both at once: for 100,000 paths, 9 MB of file
//! next to 10 MB of entries).
//!
//! The format is git's (`Documentation/gitformat-index.txt`): a 12-byte header (`DIRC`, version
//! 2, 3 or 4, entry count), the entries, extensions (a 4-byte signature, a 4-byte size, the
//! data), and the checksum. Entries decode exactly as gix decodes them; of the extensions only
//! the cache tree (`TREE`) is kept, the only one handoff reads. An index that needs more than
//! this, one with a mandatory extension (a split index's `link`, a sparse index's `sdir`, or
//! one not known), is left to gix, which reads it whole. The checksum is not verified (git
//! writes the index atomically; gix is asked not to verify it either).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use gix::ObjectId;
use gix::bstr::BStr;
use gix::index::State;
use gix::index::entry::{Flags, Mode, Stat, stat::Time};
use gix::index::extension::Tree;

/// Bytes read from the file at a time.
const CHUNK: usize = 64 * 1024;
/// `DIRC`, version, entry count.
const HEADER: usize = 12;
/// ctime, mtime (seconds and nanoseconds each), dev, ino, mode, uid, gid, size.
const STAT_FIELDS: usize = 40;
/// The low bits of an entry's on-disk flags: its path's length, or all ones for a longer path.
const PATH_LEN: u16 = 0x0fff;
/// On-disk flag: two more bytes of flags follow.
const EXTENDED: u16 = 0x4000;
/// The extended flags git defines (intent-to-add, skip-worktree); any other is corruption.
const EXTENDED_KNOWN: u16 = (1 << 13) | (1 << 14);

/// A decoded index: its entries (the state's cache tree is left empty) and its cache tree.
pub(crate) struct Index {
    /// Entries, paths and the file's modification time.
    pub(crate) state: State,
    /// The cache tree, if the index has one that decodes.
    pub(crate) tree: Option<Tree>,
}

/// Why an index was not read here.
#[derive(Debug)]
pub(crate) enum Unread {
    /// The file could not be read.
    Io(io::Error),
    /// The file is not an index git could have written.
    Corrupt(String),
    /// The index has a mandatory extension: it is for gix to read.
    Mandatory,
}

impl From<io::Error> for Unread {
    fn from(err: io::Error) -> Self {
        if err.kind() == io::ErrorKind::UnexpectedEof {
            Unread::Corrupt("the file ends early".to_owned())
        } else {
            Unread::Io(err)
        }
    }
}

fn corrupt(what: impl Into<String>) -> Unread {
    Unread::Corrupt(what.into())
}

/// Reads the index at `path`.
pub(crate) fn read(path: &Path, object_hash: gix::hash::Kind) -> Result<Index, Unread> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    let size = usize::try_from(meta.len()).map_err(|_| corrupt("the file is too large"))?;
    let hash_len = object_hash.len_in_bytes();
    if size < HEADER + hash_len {
        return Err(corrupt("the file is too small even for a header"));
    }
    let mut reader = Reader::new(file, size);
    let header = reader.take(HEADER)?;
    if &header[..4] != b"DIRC" {
        return Err(corrupt("it does not start with the signature 'DIRC'"));
    }
    let version = be32(header, 4);
    let delta_paths = match version {
        2 | 3 => false,
        4 => true,
        other => return Err(corrupt(format!("version {other} is not supported"))),
    };
    let count = be32(header, 8);
    // An entry takes at least its fixed fields, padded to 8 bytes before version 4, and at
    // least a length byte and a terminator in version 4; a count that cannot fit is corrupt.
    let fixed = STAT_FIELDS + hash_len + 2;
    let smallest = if delta_paths {
        fixed + 2
    } else {
        fixed.next_multiple_of(8)
    };
    if count as usize > (size - hash_len - HEADER) / smallest {
        return Err(corrupt(format!(
            "it claims {count} entries, more than its size can hold"
        )));
    }

    let mut state = State::new(object_hash);
    state.set_timestamp(filetime::FileTime::from_last_modification_time(&meta));
    let mut path = Vec::new();
    for number in 0..count {
        let previous: Option<&[u8]> = state.entries().last().map(|e| e.path(&state).as_ref());
        let entry = reader
            .entry(&mut path, fixed, delta_paths, previous)
            .map_err(|err| match err {
                Unread::Corrupt(what) => corrupt(format!("entry {number}: {what}")),
                other => other,
            })?;
        state.dangerously_push_entry(
            entry.stat,
            entry.id,
            entry.flags,
            entry.mode,
            BStr::new(&path),
        );
    }

    // Extensions, up to the checksum.
    let mut tree = None;
    let mut left = reader
        .left
        .checked_sub(hash_len)
        .ok_or_else(|| corrupt("its entries run into the checksum"))?;
    while left > 0 {
        if left < 8 {
            return Err(corrupt("it has bytes after its extensions"));
        }
        let head = reader.take(8)?;
        let signature = [head[0], head[1], head[2], head[3]];
        let len = be32(head, 4) as usize;
        left -= 8;
        if len > left {
            return Err(corrupt("an extension runs past the end of the file"));
        }
        left -= len;
        if signature[0].is_ascii_lowercase() {
            return Err(Unread::Mandatory);
        }
        if &signature == b"TREE" {
            tree = gix::index::extension::tree::decode(reader.take(len)?, object_hash, None);
        } else {
            reader.skip(len)?;
        }
    }
    Ok(Index { state, tree })
}

/// The big-endian `u32` at `at` in `bytes`.
fn be32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// What an entry decodes to, besides its path.
struct Decoded {
    stat: Stat,
    id: ObjectId,
    flags: Flags,
    mode: Mode,
}

/// The file, read forward through a buffer.
struct Reader {
    file: File,
    buf: Vec<u8>,
    /// The unread bytes in `buf`.
    start: usize,
    end: usize,
    /// Bytes of the file not yet taken (in `buf` or still in the file).
    left: usize,
}

impl Reader {
    fn new(file: File, size: usize) -> Self {
        Reader {
            file,
            buf: vec![0; CHUNK.min(size)],
            start: 0,
            end: 0,
            left: size,
        }
    }

    /// Makes at least `n` unread bytes available, or as many as the file has left; returns how
    /// many are.
    fn fill(&mut self, n: usize) -> io::Result<usize> {
        let want = n.min(self.left);
        if self.end - self.start >= want {
            return Ok(self.end - self.start);
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.buf.len() < want {
            self.buf.resize(want.max(CHUNK), 0);
        }
        while self.end < want {
            // Never read past the size measured at the start: a file that grows meanwhile is
            // read as it was that long.
            let room = self.buf.len().min(self.left) - self.end;
            let read = match self.file.read(&mut self.buf[self.end..self.end + room]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(read) => read,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            self.end += read;
        }
        Ok(self.end - self.start)
    }

    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Result<&[u8], Unread> {
        if self.fill(n)? < n {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        let at = self.start;
        self.start += n;
        self.left -= n;
        Ok(&self.buf[at..at + n])
    }

    /// Passes over the next `n` bytes.
    fn skip(&mut self, mut n: usize) -> Result<(), Unread> {
        while n > 0 {
            let step = n.min(CHUNK);
            self.take(step)?;
            n -= step;
        }
        Ok(())
    }

    /// The bytes up to the next NUL, which is passed over; `None` if there is none before the
    /// end of the file.
    fn until_nul(&mut self, out: &mut Vec<u8>) -> Result<bool, Unread> {
        loop {
            let available = self.fill(1)?;
            if available == 0 {
                return Ok(false);
            }
            let bytes = &self.buf[self.start..self.end];
            if let Some(at) = bytes.iter().position(|&b| b == 0) {
                out.extend_from_slice(&bytes[..at]);
                self.start += at + 1;
                self.left -= at + 1;
                return Ok(true);
            }
            out.extend_from_slice(bytes);
            self.left -= available;
            self.start = self.end;
        }
    }

    /// Decodes one entry; its path goes to `path`. `previous` is the path of the entry before,
    /// which a version 4 path is a change of.
    fn entry(
        &mut self,
        path: &mut Vec<u8>,
        fixed: usize,
        delta_paths: bool,
        previous: Option<&[u8]>,
    ) -> Result<Decoded, Unread> {
        let head = self.take(fixed)?;
        let word = |at: usize| be32(head, at);
        let stat = Stat {
            ctime: Time {
                secs: word(0),
                nsecs: word(4),
            },
            mtime: Time {
                secs: word(8),
                nsecs: word(12),
            },
            dev: word(16),
            ino: word(20),
            uid: word(28),
            gid: word(32),
            size: word(36),
        };
        let mode = Mode::from_bits_truncate(word(24));
        let id = ObjectId::from_bytes_or_panic(&head[STAT_FIELDS..fixed - 2]);
        let on_disk = u16::from_be_bytes([head[fixed - 2], head[fixed - 1]]);
        let mut flags = Flags::from_bits_retain(u32::from(on_disk));
        let mut taken = fixed;
        if on_disk & EXTENDED != 0 {
            let extended = self.take(2)?;
            let extended = u16::from_be_bytes([extended[0], extended[1]]);
            if extended & !EXTENDED_KNOWN != 0 {
                return Err(corrupt("it has extended flags git does not define"));
            }
            flags |= Flags::from_bits_retain(u32::from(extended) << 16);
            taken += 2;
        }

        path.clear();
        if delta_paths {
            let strip = self.varint()?;
            if let Some(previous) = previous {
                let keep = usize::try_from(strip)
                    .ok()
                    .and_then(|strip| previous.len().checked_sub(strip))
                    .ok_or_else(|| corrupt("its path removes more than the path before it has"))?;
                path.extend_from_slice(&previous[..keep]);
            }
            if !self.until_nul(path)? {
                return Err(corrupt("its path has no end"));
            }
        } else {
            let len = usize::from(on_disk & PATH_LEN);
            let nul_taken = if len == usize::from(PATH_LEN) {
                // A path of 4095 bytes or more: its length is where its NUL is.
                if !self.until_nul(path)? {
                    return Err(corrupt("its path has no end"));
                }
                1
            } else {
                path.extend_from_slice(self.take(len)?);
                0
            };
            // Entries are padded with NULs to a multiple of 8 bytes, at least one NUL.
            let end = taken + path.len();
            let padded = (end + 8) & !7;
            self.take(padded - end - nul_taken)?;
        }
        Ok(Decoded {
            stat,
            id,
            flags: flags & !Flags::PATH_LEN,
            mode,
        })
    }

    /// A version 4 path's strip length: git's variable-length integer, in which each byte
    /// after the first adds one before shifting.
    fn varint(&mut self) -> Result<u64, Unread> {
        let mut byte = self.take(1)?[0];
        let mut value = u64::from(byte & 0x7f);
        while byte & 0x80 != 0 {
            byte = self.take(1)?[0];
            value = value
                .checked_add(1)
                .ok_or_else(|| corrupt("its path's strip length overflows"))?
                .wrapping_shl(7)
                | u64::from(byte & 0x7f);
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use proptest::prelude::*;

    use super::*;
    use crate::testing::git;

    const SHA1: gix::hash::Kind = gix::hash::Kind::Sha1;

    /// The index as gix reads it whole, with its cache tree taken out.
    fn by_gix(path: &Path) -> Option<(State, Option<Tree>)> {
        let file =
            gix::index::File::at(path, SHA1, true, gix::index::decode::Options::default()).ok()?;
        let (mut state, _) = file.into_parts();
        let tree = state.remove_tree();
        Some((state, tree))
    }

    /// Asserts that `index` holds what gix reads from `path`.
    fn assert_same(index: &Index, path: &Path) {
        let (state, tree) = by_gix(path).expect("gix reads the index");
        assert_eq!(index.state.entries(), state.entries());
        assert_eq!(index.state.path_backing(), state.path_backing());
        assert_eq!(index.state.timestamp(), state.timestamp());
        assert_eq!(index.tree, tree);
    }

    /// A repository whose index has every kind of entry: nested files, an executable, a
    /// symlink, a gitlink, an intent-to-add path, skip-worktree and assume-unchanged entries, a
    /// conflict in three stages, a resolved conflict (resolve-undo) and an untracked cache.
    fn repository() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        git(&root, &["init", "-q", "-b", "main"]);
        for n in 0..300 {
            let path = root.join(format!("d{}/e{}/f{n}.txt", n % 7, n % 3));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("{n}\n")).unwrap();
        }
        std::fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        git(&root, &["update-index", "--add", "--chmod=+x", "run.sh"]);
        std::os::unix::fs::symlink("run.sh", root.join("link")).unwrap();
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-q", "-m", "one"]);
        let blob = git(&root, &["rev-parse", "HEAD:run.sh"]);
        let commit = git(&root, &["rev-parse", "HEAD"]);
        git(
            &root,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{commit},sub"),
            ],
        );
        std::fs::write(root.join("new.txt"), "new\n").unwrap();
        git(&root, &["add", "-N", "new.txt"]);
        git(&root, &["update-index", "--skip-worktree", "d0/e0/f0.txt"]);
        git(
            &root,
            &["update-index", "--assume-unchanged", "d1/e1/f1.txt"],
        );
        // A conflict, resolved (which leaves resolve-undo data), and another left in stages.
        for path in ["resolved.txt", "conflict.txt"] {
            let info = (1..=3)
                .map(|stage| format!("100644 {blob} {stage}\t{path}\n"))
                .collect::<String>();
            let mut child = std::process::Command::new("git")
                .args(["update-index", "--index-info"])
                .current_dir(&root)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write as _;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(info.as_bytes())
                .unwrap();
            assert!(child.wait().unwrap().success());
        }
        std::fs::write(root.join("resolved.txt"), "resolved\n").unwrap();
        git(&root, &["add", "resolved.txt"]);
        git(&root, &["config", "core.untrackedCache", "true"]);
        git(&root, &["update-index", "--untracked-cache"]);
        git(&root, &["status", "--porcelain"]);
        (dir, root)
    }

    #[test]
    fn every_version_reads_as_gix_reads_it() {
        let (_dir, root) = repository();
        let path = root.join(".git/index");
        for version in ["2", "3", "4", "2"] {
            git(&root, &["update-index", "--index-version", version]);
            let index = read(&path, SHA1).unwrap();
            // Extended flags (intent-to-add, skip-worktree) keep a version 2 index at 3.
            let header = std::fs::read(&path).unwrap();
            assert_eq!(header[7], if version == "4" { 4 } else { 3 });
            assert!(index.state.entries().len() > 300);
            assert!(
                index
                    .state
                    .entries()
                    .iter()
                    .any(|e| e.flags.contains(Flags::INTENT_TO_ADD))
            );
            assert!(
                index
                    .state
                    .entries()
                    .iter()
                    .any(|e| e.flags.contains(Flags::SKIP_WORKTREE))
            );
            assert!(index.state.entries().iter().any(|e| e.stage_raw() == 3));
            assert_same(&index, &path);
        }
    }

    #[test]
    fn the_cache_tree_is_kept() {
        let (_dir, root) = repository();
        git(&root, &["rm", "-q", "--cached", "conflict.txt"]);
        git(&root, &["write-tree"]);
        let path = root.join(".git/index");
        let index = read(&path, SHA1).unwrap();
        let tree = index.tree.as_ref().expect("a cache tree");
        assert_eq!(tree.name.len(), 0);
        assert!(!tree.children.is_empty());
        assert_same(&index, &path);
    }

    #[test]
    fn an_index_with_offset_tables_reads_as_gix_reads_it() {
        let (_dir, root) = repository();
        for n in 0..2000 {
            std::fs::write(root.join(format!("many{n}")), "x").unwrap();
        }
        git(
            &root,
            &[
                "-c",
                "index.recordEndOfIndexEntries=true",
                "-c",
                "index.recordOffsetTable=true",
                "-c",
                "index.threads=4",
                "add",
                "-A",
            ],
        );
        let path = root.join(".git/index");
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.windows(4).any(|w| w == b"EOIE"));
        let index = read(&path, SHA1).unwrap();
        assert_same(&index, &path);
    }

    #[test]
    fn split_and_sparse_indexes_are_left_to_gix() {
        let (_dir, root) = repository();
        git(&root, &["update-index", "--split-index"]);
        let path = root.join(".git/index");
        assert!(matches!(read(&path, SHA1), Err(Unread::Mandatory)));
        git(&root, &["update-index", "--no-split-index"]);
        git(&root, &["rm", "-q", "--cached", "conflict.txt"]);
        git(&root, &["commit", "-q", "-m", "two"]);
        git(
            &root,
            &["sparse-checkout", "set", "--cone", "--sparse-index", "d1"],
        );
        assert!(matches!(read(&path, SHA1), Err(Unread::Mandatory)));
    }

    #[test]
    fn a_path_of_4095_bytes_or_more_is_read_to_its_nul_and_padding() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        let blob = {
            std::fs::write(root.join("x"), "x").unwrap();
            git(root, &["hash-object", "-w", "x"])
        };
        // Every length of entry modulo 8, and the entry after each, which is only found if
        // the padding was passed over.
        let mut long: Vec<String> = (4093..4103)
            .map(|n| format!("{}/t", "d".repeat(n)))
            .collect();
        long.push("zz".to_owned());
        for path in &long {
            git(
                root,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{blob},{path}"),
                ],
            );
        }
        for version in ["2", "4"] {
            git(root, &["update-index", "--index-version", version]);
            let index = read(&root.join(".git/index"), SHA1).unwrap();
            let paths: Vec<String> = index
                .state
                .entries()
                .iter()
                .map(|e| e.path(&index.state).to_string())
                .collect();
            assert_eq!(paths, long);
        }
    }

    #[test]
    fn a_missing_or_cut_index_is_an_error() {
        let (_dir, root) = repository();
        let path = root.join(".git/index");
        let whole = std::fs::read(&path).unwrap();
        let cut = root.join("cut");
        // Every cut shorter than the entries, and a few into the extensions.
        for len in (0..whole.len() - 20).step_by(97) {
            std::fs::write(&cut, &whole[..len]).unwrap();
            assert!(
                matches!(read(&cut, SHA1), Err(Unread::Corrupt(_))),
                "a file cut to {len} bytes was read"
            );
        }
        assert!(matches!(
            read(&root.join("nothing"), SHA1),
            Err(Unread::Io(err)) if err.kind() == io::ErrorKind::NotFound
        ));
        let mut more = whole.clone();
        more[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        std::fs::write(&cut, &more).unwrap();
        assert!(matches!(read(&cut, SHA1), Err(Unread::Corrupt(what)) if what.contains("claims")));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever bytes of a real index are changed, an index this reader accepts is one gix
        /// accepts, with the same entries and cache tree: it is never more lenient.
        #[test]
        fn never_more_lenient_than_gix(
            version in prop::sample::select(vec!["2", "3", "4"]),
            changes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        ) {
            let (dir, whole) = fixture(version);
            let mut bytes = whole.clone();
            for (at, byte) in &changes {
                let at = at.index(bytes.len());
                bytes[at] = *byte;
            }
            let path = dir.path().join(format!("changed{version}"));
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(index) = read(&path, SHA1) {
                let (state, tree) = by_gix(&path).expect("gix accepts what is accepted here");
                prop_assert_eq!(index.state.entries(), state.entries());
                prop_assert_eq!(index.state.path_backing(), state.path_backing());
                prop_assert_eq!(index.tree, tree);
            }
        }
    }

    /// One small repository per index version, made once.
    fn fixture(version: &str) -> (&'static tempfile::TempDir, Vec<u8>) {
        use std::sync::OnceLock;
        static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
        let dir = DIR.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            for version in ["2", "3", "4"] {
                let root = dir.path().join(version);
                std::fs::create_dir(&root).unwrap();
                git(&root, &["init", "-q"]);
                for n in 0..12 {
                    let path = root.join(format!("a{}/b{n}", n % 3));
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, format!("{n}")).unwrap();
                }
                git(&root, &["add", "-A"]);
                if version != "2" {
                    std::fs::write(root.join("later"), "l").unwrap();
                    git(&root, &["add", "-N", "later"]);
                }
                let _tree = git(&root, &["write-tree"]);
                git(&root, &["update-index", "--index-version", version]);
            }
            dir
        });
        let whole = std::fs::read(dir.path().join(version).join(".git/index")).unwrap();
        let header_version = u32::from_be_bytes(whole[4..8].try_into().unwrap());
        assert_eq!(header_version.to_string(), version);
        (dir, whole)
    }
}
