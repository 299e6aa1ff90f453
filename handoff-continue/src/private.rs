//! Files only their owner may read.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

use camino::Utf8Path;

/// Writes a file privately (0600 in a 0700 directory), never over an existing file. The text
/// goes to a temporary file next to it that is renamed into place only once complete, so a
/// reader never sees half a file and a failed write leaves nothing behind.
pub fn write_private_file(path: &Utf8Path, text: &str) -> Result<(), String> {
    let dir = path
        .parent()
        .filter(|d| !d.as_str().is_empty())
        .unwrap_or(Utf8Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create '{dir}': {e}"))?;
    let failed = |e: std::io::Error| format!("cannot write '{path}': {e}");
    let mut file = tempfile::Builder::new()
        .prefix(".handoff-")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.as_file().sync_all().map_err(failed)?;
    file.persist_noclobber(path)
        .map(drop)
        .map_err(|e| failed(e.error))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_private_file_is_0600_and_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap();
        let path = root.join("notes/a.md");
        write_private_file(&path, "one").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        let mode = |p: &Utf8Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&root.join("notes")), 0o700);
        let again = write_private_file(&path, "two").unwrap_err();
        assert!(again.contains("cannot write"), "{again}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        // Nothing is left behind by the refused write.
        let names: Vec<_> = std::fs::read_dir(root.join("notes"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.md"]);
    }
}
