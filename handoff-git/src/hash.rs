//! Git blob ids of worktree content, so that a file can be compared with its index entry directly.
//!
//! A blob id is the SHA-1 (with collision detection, as git computes it) of `blob <len>\0`
//! followed by the content. Files are streamed in [`CHUNK`]-sized reads, never read whole.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use gix::ObjectId;
use gix::hash::Kind;

/// Files are hashed in reads of this size.
pub(crate) const CHUNK: usize = 64 * 1024;

/// The blob id of `data`.
pub(crate) fn blob_id(kind: Kind, data: &[u8]) -> io::Result<ObjectId> {
    let mut hasher = gix::hash::hasher(kind);
    hasher.update(format!("blob {}\0", data.len()).as_bytes());
    hasher.update(data);
    finalize(hasher)
}

/// The blob id of the content of `file`, which `fstat` said is `len` bytes long; `buf` is scratch
/// space reused across calls.
///
/// Should the file turn out shorter than `len` (it is being written to), it is read again in one
/// go and hashed at the length it has then.
pub(crate) fn file_blob_id(
    kind: Kind,
    file: &mut File,
    len: u64,
    buf: &mut Vec<u8>,
) -> io::Result<ObjectId> {
    let mut hasher = gix::hash::hasher(kind);
    hasher.update(format!("blob {len}\0").as_bytes());
    if buf.len() < CHUNK {
        buf.resize(CHUNK, 0);
    }
    let mut left = len;
    while left > 0 {
        let want = usize::try_from(left).map_or(CHUNK, |left| left.min(CHUNK));
        match file.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                left -= n as u64;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    if left == 0 {
        return finalize(hasher);
    }
    file.seek(SeekFrom::Start(0))?;
    let mut all = Vec::new();
    file.read_to_end(&mut all)?;
    blob_id(kind, &all)
}

fn finalize(hasher: gix::hash::Hasher) -> io::Result<ObjectId> {
    hasher
        .try_finalize()
        .map_err(|err| io::Error::other(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_hash_object(path: &std::path::Path) -> String {
        let out = std::process::Command::new("git")
            .args(["hash-object", "--no-filters"])
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    #[test]
    fn blob_ids_match_git() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = Vec::new();
        for size in [0usize, 1, 100, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17] {
            let path = dir.path().join(format!("f{size}"));
            let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, &content).unwrap();
            let expected = git_hash_object(&path);
            assert_eq!(blob_id(Kind::Sha1, &content).unwrap().to_string(), expected);
            let mut file = File::open(&path).unwrap();
            let id = file_blob_id(Kind::Sha1, &mut file, size as u64, &mut buf).unwrap();
            assert_eq!(id.to_string(), expected, "size {size}");
        }
    }

    #[test]
    fn a_file_shorter_than_its_stat_is_hashed_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "short").unwrap();
        let mut file = File::open(&path).unwrap();
        let id = file_blob_id(Kind::Sha1, &mut file, 1000, &mut Vec::new()).unwrap();
        assert_eq!(id, blob_id(Kind::Sha1, b"short").unwrap());
    }
}
