//! Files only their owner may read.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

use camino::Utf8Path;

/// Writes a file privately (0600 in a 0700 directory), never over an existing file. A write
/// that fails part-way removes what it wrote.
pub fn write_private_file(path: &Utf8Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create '{dir}': {e}"))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot write '{path}': {e}"))?;
    f.write_all(text.as_bytes()).map_err(|e| {
        let _ = std::fs::remove_file(path);
        format!("cannot write '{path}': {e}")
    })
}
