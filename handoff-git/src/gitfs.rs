//! Reading the files of a git directory: each file's state, a sorted walk, the git directories
//! of submodules, paths with symbolic links resolved.

use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice, ByteVec};

use crate::hash;

/// The state of a file in the git directory: `file <mode> <blob id>`; `None` for directories.
pub(crate) fn file_state(
    kind: gix::hash::Kind,
    path: &Path,
    meta: &Metadata,
) -> io::Result<Option<String>> {
    let file_type = meta.file_type();
    if file_type.is_file() {
        use std::os::unix::fs::PermissionsExt;
        let mode = if meta.permissions().mode() & 0o100 != 0 {
            "100755"
        } else {
            "100644"
        };
        let mut file = std::fs::File::open(path)?;
        let id = hash::file_blob_id(kind, &mut file, meta.len(), &mut Vec::new())?;
        Ok(Some(format!("file {mode} {id}")))
    } else if file_type.is_symlink() {
        use std::os::unix::ffi::OsStrExt;
        let target = std::fs::read_link(path)?;
        let id = hash::blob_id(kind, target.as_os_str().as_bytes())?;
        Ok(Some(format!("file 120000 {id}")))
    } else if file_type.is_dir() {
        Ok(None)
    } else {
        Ok(Some("other".to_owned()))
    }
}

pub(crate) fn walk(
    path: &Path,
    rela: BString,
    visit: &mut dyn FnMut(&Path, &BStr, &Metadata) -> io::Result<()>,
) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    visit(path, rela.as_bstr(), &meta)?;
    if meta.is_dir() {
        let mut children: Vec<(PathBuf, BString)> = Vec::new();
        for item in std::fs::read_dir(path)? {
            let item = item?;
            let name = gix::path::os_str_into_bstr(&item.file_name())
                .map(|name| name.to_owned())
                .map_err(io::Error::other)?;
            children.push((item.path(), name));
        }
        children.sort();
        for (child, name) in children {
            let mut child_rela = rela.clone();
            if !child_rela.is_empty() {
                child_rela.push_byte(b'/');
            }
            child_rela.push_str(&name);
            walk(&child, child_rela, visit)?;
        }
    }
    Ok(())
}

/// The git directories below `dir` (a `modules/` directory), with their names relative to the
/// common directory (`modules/a/b`), sorted; a submodule's name may hold slashes, and a git
/// directory is one with a `HEAD`. Objects, refs and logs are not descended into.
pub(crate) fn module_dirs(dir: &Path, rela: &str) -> io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for (name, child) in subdirectories(dir)? {
        let child_rela = format!("{rela}/{name}");
        if child.join("HEAD").is_file() {
            out.push((child_rela.clone(), child.clone()));
            out.extend(module_dirs(
                &child.join("modules"),
                &format!("{child_rela}/modules"),
            )?);
        } else {
            out.extend(module_dirs(&child, &child_rela)?);
        }
    }
    Ok(out)
}

/// The subdirectories of `dir` (none if it does not exist), by name, sorted.
pub(crate) fn subdirectories(dir: &Path) -> io::Result<Vec<(String, PathBuf)>> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut out = Vec::new();
    for item in read {
        let item = item?;
        if item.file_type()?.is_dir() {
            out.push((item.file_name().to_string_lossy().into_owned(), item.path()));
        }
    }
    out.sort();
    Ok(out)
}

pub(crate) fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}
