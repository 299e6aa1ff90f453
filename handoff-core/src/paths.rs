//! Safe handling of the paths a user hands in: working directory, instruction file, MCP file,
//! result file.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};

use camino::{Utf8Path, Utf8PathBuf};

/// Largest instruction text, in bytes.
pub const MAX_INSTRUCTIONS_BYTES: usize = 2_000_000;

/// Lexical check: absolute, no control characters, no empty, `.` or `..` segments.
pub fn check_lexical(flag: &str, p: &str) -> Result<(), String> {
    if !p.starts_with('/') {
        return Err(format!("{flag} must be an absolute path, got {p:?}"));
    }
    if p.chars().any(char::is_control) {
        return Err(format!("{flag} contains control characters"));
    }
    if p.len() > 4096 {
        return Err(format!("{flag} is longer than 4096 bytes"));
    }
    if p != "/"
        && p[1..]
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(format!(
            "{flag} must be normalized (no empty, '.' or '..' segments, no trailing '/'): {p:?}"
        ));
    }
    Ok(())
}

/// The path has no symlink anywhere in it: its canonical form is itself.
fn check_canonical(flag: &str, p: &Utf8Path) -> Result<(), String> {
    let real = std::fs::canonicalize(p).map_err(|e| format!("{flag} {p}: {e}"))?;
    if real.as_path() != p.as_std_path() {
        return Err(format!(
            "{flag} {p} goes through a symlink (resolves to {}); pass the real path, e.g. $(pwd -P)",
            real.display()
        ));
    }
    Ok(())
}

/// Checks `--cwd`: absolute, normalized, an existing directory, no symlink in it.
pub fn check_cwd(p: &str) -> Result<Utf8PathBuf, String> {
    check_lexical("--cwd", p)?;
    let path = Utf8PathBuf::from(p);
    std::fs::symlink_metadata(&path).map_err(|e| format!("--cwd {p}: {e}"))?;
    // Symlinks first (the last component included), so the message names the real path.
    check_canonical("--cwd", &path)?;
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
        return Err(format!("--cwd {p} is not a directory"));
    }
    Ok(path)
}

/// Reads a file a person names (a saved fingerprint, say): a regular file, symbolic links
/// followed, at most `limit` bytes. A FIFO, a device, a socket or a directory is refused at
/// once, never waited on.
pub fn read_regular_file(p: &str, limit: usize) -> Result<Vec<u8>, String> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| format!("cannot read '{p}': {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read '{p}': {e}"))?;
    if !meta.is_file() {
        return Err(format!("'{p}' is not a regular file"));
    }
    if meta.len() > limit as u64 {
        return Err(format!("'{p}' is larger than {limit} bytes"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read '{p}': {e}"))?;
    if bytes.len() > limit {
        return Err(format!("'{p}' is larger than {limit} bytes"));
    }
    Ok(bytes)
}

/// Reads a private input file (instructions, MCP descriptor) safely: absolute, normalized,
/// a regular file that is not a symlink, no symlinked ancestors, at most `limit` bytes, and
/// unchanged while it was read.
pub fn read_input_file(flag: &str, p: &str, limit: usize) -> Result<Vec<u8>, String> {
    check_lexical(flag, p)?;
    let path = Utf8PathBuf::from(p);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| format!("{flag} {p}: {e}"))?;
    if meta.file_type().is_symlink() {
        return Err(format!("{flag} {p} is a symlink"));
    }
    if !meta.is_file() {
        return Err(format!("{flag} {p} is not a regular file"));
    }
    check_canonical(flag, &path)?;
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("{flag} {p}: {e}"))?;
    let before = file.metadata().map_err(|e| format!("{flag} {p}: {e}"))?;
    if before.len() as usize > limit {
        return Err(format!("{flag} {p} is larger than {limit} bytes"));
    }
    let mut bytes = Vec::with_capacity(before.len() as usize);
    (&mut file)
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{flag} {p}: {e}"))?;
    let after = file.metadata().map_err(|e| format!("{flag} {p}: {e}"))?;
    let same = |a: &std::fs::Metadata, b: &std::fs::Metadata| {
        a.dev() == b.dev() && a.ino() == b.ino() && a.len() == b.len() && a.mtime() == b.mtime()
    };
    if !same(&before, &after) || !same(&meta, &before) || bytes.len() as u64 != after.len() {
        return Err(format!("{flag} {p} changed while it was being read"));
    }
    if bytes.len() > limit {
        return Err(format!("{flag} {p} is larger than {limit} bytes"));
    }
    Ok(bytes)
}

/// Checks instruction bytes: strict UTF-8, no NUL, not blank, within the limit.
pub fn check_instructions(bytes: Vec<u8>) -> Result<String, String> {
    if bytes.len() > MAX_INSTRUCTIONS_BYTES {
        return Err(format!(
            "instructions are larger than {MAX_INSTRUCTIONS_BYTES} bytes"
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| "instructions are not valid UTF-8")?;
    if text.contains('\0') {
        return Err("instructions contain a NUL byte".into());
    }
    if text.trim().is_empty() {
        return Err("instructions are blank".into());
    }
    Ok(text)
}

/// A result file reserved at the start of a run: created with `O_EXCL`, mode 0600, in a
/// directory owned by the current user that no one else can write. Written once at the end.
#[derive(Debug)]
pub struct ResultFile {
    path: Utf8PathBuf,
    file: File,
    dev: u64,
    ino: u64,
}

impl ResultFile {
    /// Validates and reserves `p`.
    pub fn reserve(p: &str) -> Result<ResultFile, String> {
        check_lexical("--result", p)?;
        let path = Utf8PathBuf::from(p);
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {
                return Err(format!(
                    "--result {p} already exists; handoff never overwrites"
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("--result {p}: {e}")),
        }
        let parent = path
            .parent()
            .ok_or_else(|| format!("--result {p} has no parent directory"))?;
        std::fs::symlink_metadata(parent)
            .map_err(|e| format!("--result directory {parent}: {e}"))?;
        check_canonical("--result directory", parent)?;
        let pmeta = std::fs::symlink_metadata(parent)
            .map_err(|e| format!("--result directory {parent}: {e}"))?;
        if !pmeta.is_dir() {
            return Err(format!("--result directory {parent} is not a directory"));
        }
        let uid = nix::unistd::geteuid().as_raw();
        if pmeta.uid() != uid {
            return Err(format!(
                "--result directory {parent} is not owned by the current user (uid {uid})"
            ));
        }
        if pmeta.permissions().mode() & 0o022 != 0 {
            return Err(format!(
                "--result directory {parent} is writable by group or others; use a private directory"
            ));
        }
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| format!("--result {p}: {e}"))?;
        let meta = file.metadata().map_err(|e| format!("--result {p}: {e}"))?;
        Ok(ResultFile {
            path,
            dev: meta.dev(),
            ino: meta.ino(),
            file,
        })
    }

    /// The reserved path.
    pub fn path(&self) -> &Utf8Path {
        &self.path
    }

    /// Writes the result, after checking the path still names the file reserved and that it is
    /// still empty.
    pub fn write(mut self, bytes: &[u8]) -> Result<(), String> {
        use std::io::Write;
        let now = std::fs::symlink_metadata(&self.path)
            .map_err(|e| format!("result file {}: {e}", self.path))?;
        if now.file_type().is_symlink() || now.dev() != self.dev || now.ino() != self.ino {
            return Err(format!(
                "result file {} was replaced during the run",
                self.path
            ));
        }
        if now.len() != 0 {
            return Err(format!(
                "result file {} was written by someone else",
                self.path
            ));
        }
        self.file
            .write_all(bytes)
            .and_then(|()| self.file.sync_all())
            .map_err(|e| format!("result file {}: {e}", self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lexical_rules() {
        assert!(check_lexical("--cwd", "/a/b").is_ok());
        for bad in ["a/b", "/a//b", "/a/./b", "/a/../b", "/a/b/", "/a\nb"] {
            assert!(check_lexical("--cwd", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn instructions_rules() {
        assert!(check_instructions(b"do it".to_vec()).is_ok());
        assert!(check_instructions(b"  \n".to_vec()).is_err());
        assert!(check_instructions(vec![0xff]).is_err());
        assert!(check_instructions(b"a\0b".to_vec()).is_err());
        assert!(check_instructions(vec![b'a'; MAX_INSTRUCTIONS_BYTES + 1]).is_err());
    }

    #[test]
    fn result_file_is_exclusive_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let d = Utf8PathBuf::from_path_buf(std::fs::canonicalize(dir.path()).unwrap()).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let p = d.join("r.json");
        let r = ResultFile::reserve(p.as_str()).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(ResultFile::reserve(p.as_str()).is_err());
        r.write(b"{}\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{}\n");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(ResultFile::reserve(d.join("s.json").as_str()).is_err());
    }

    proptest! {
        #[test]
        fn lexical_never_panics(s in "\\PC{0,64}") {
            let _ = check_lexical("--cwd", &s);
        }

        #[test]
        fn dot_segments_always_refused(a in "[a-z]{1,5}", b in "[a-z]{1,5}", dot in prop::sample::select(vec![".", "..", ""])) {
            let p = format!("/{a}/{dot}/{b}");
            prop_assert!(check_lexical("--cwd", &p).is_err());
        }
    }
}
