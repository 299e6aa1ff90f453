//! Turning git's byte paths into entry keys and filesystem paths.

use std::path::{Path, PathBuf};

use gix::bstr::{BStr, ByteSlice};
use handoff_core::WorkspaceError;

/// The entry key of a repository-relative git path: the path itself when it is valid UTF-8
/// (the normal case); otherwise every byte that is not part of valid UTF-8 becomes `\xNN`.
pub(crate) fn entry_key(rela_path: &BStr) -> String {
    match rela_path.to_str() {
        Ok(s) => s.to_owned(),
        Err(_) => {
            let mut out = String::with_capacity(rela_path.len() + 8);
            for chunk in rela_path.utf8_chunks() {
                out.push_str(chunk.valid());
                for byte in chunk.invalid() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            }
            out
        }
    }
}

/// The location on disk of a repository-relative git path below `root`.
///
/// Fails only where the platform cannot represent the path (never on unix).
pub(crate) fn worktree_path(root: &Path, rela_path: &BStr) -> Result<PathBuf, WorkspaceError> {
    match gix::path::from_bstr(rela_path) {
        Ok(rela) => Ok(root.join(rela)),
        Err(err) => Err(crate::repo::git_error(
            &format!(
                "'{}' cannot be a path on this platform",
                entry_key(rela_path)
            ),
            err,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_paths_are_kept_verbatim() {
        assert_eq!(entry_key(BStr::new("dir/file é.txt")), "dir/file é.txt");
    }

    #[test]
    fn invalid_bytes_are_escaped() {
        assert_eq!(entry_key(BStr::new(b"a\xffb/c")), "a\\xffb/c");
    }
}
