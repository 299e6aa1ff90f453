//! Phase two of a fingerprint: which of the paths that the index does not know are untracked
//! (not ignored), listed file by file like `git status -uall` — and, when asked for, which are
//! ignored.
//!
//! Ignore rules are git's (`.gitignore` files, `info/exclude`, `core.excludesFile`), as
//! [`IgnoreRules`] holds them: read now, or as an earlier fingerprint recorded them. A path
//! below an ignored directory is ignored. A directory with a `.git` in it is a
//! nested repository and stays one entry. FIFOs, sockets and devices are left out, as git does.

use std::path::Path;

use camino::Utf8Path;
use gix::bstr::{BString, ByteSlice, ByteVec};
use handoff_core::WorkspaceError;

use crate::ignore_rules::IgnoreRules;
use crate::paths::{entry_key, worktree_path};
use crate::scan::Kind;

/// What an untracked or ignored path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum What {
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// A directory holding a nested repository.
    Repo,
}

/// One untracked or ignored path.
#[derive(Debug)]
pub(crate) struct Found {
    pub(crate) path: BString,
    pub(crate) what: What,
    pub(crate) ignored: bool,
}

/// What [`classify`] found.
#[derive(Debug, Default)]
pub(crate) struct Classified {
    /// The untracked paths (and, when asked for, the ignored ones), sorted by path.
    pub(crate) found: Vec<Found>,
    /// Without ignored paths asked for: the top-most ignored paths (nothing above them is
    /// ignored), not read, with whether each is a directory; sorted by path.
    pub(crate) ignored_tops: Vec<(BString, bool)>,
}

/// Classifies `candidates` (paths the index does not know, as found in tracked directories) and
/// walks the untracked directories among them; with `include_ignored`, ignored paths are kept
/// (and ignored directories walked) too.
pub(crate) fn classify(
    rules: &mut IgnoreRules<'_>,
    root: &Path,
    display_root: &Utf8Path,
    candidates: Vec<(BString, Kind)>,
    include_ignored: bool,
) -> Result<Classified, WorkspaceError> {
    if candidates.is_empty() {
        return Ok(Classified::default());
    }
    let mut walker = Walker {
        rules,
        root,
        display_root,
        include_ignored,
        found: Vec::new(),
        ignored_tops: Vec::new(),
    };
    for (path, kind) in candidates {
        walker.visit(path, kind, false)?;
    }
    let mut found = walker.found;
    found.sort_by(|a, b| a.path.cmp(&b.path));
    let mut ignored_tops = walker.ignored_tops;
    ignored_tops.sort();
    Ok(Classified {
        found,
        ignored_tops,
    })
}

struct Walker<'a, 'rules> {
    rules: &'a mut IgnoreRules<'rules>,
    root: &'a Path,
    display_root: &'a Utf8Path,
    include_ignored: bool,
    found: Vec<Found>,
    ignored_tops: Vec<(BString, bool)>,
}

impl Walker<'_, '_> {
    fn visit(
        &mut self,
        path: BString,
        kind: Kind,
        parent_ignored: bool,
    ) -> Result<(), WorkspaceError> {
        if kind == Kind::Other {
            return Ok(());
        }
        let ignored = parent_ignored || self.rules.is_ignored(path.as_bstr(), kind == Kind::Dir)?;
        if ignored && !self.include_ignored {
            if !parent_ignored {
                self.ignored_tops.push((path, kind == Kind::Dir));
            }
            return Ok(());
        }
        let what = match kind {
            Kind::File => What::File,
            Kind::Symlink => What::Symlink,
            _ => return self.visit_dir(path, ignored),
        };
        self.found.push(Found {
            path,
            what,
            ignored,
        });
        Ok(())
    }

    fn visit_dir(&mut self, path: BString, ignored: bool) -> Result<(), WorkspaceError> {
        let dir = worktree_path(self.root, path.as_bstr())?;
        let io = |source| WorkspaceError::Io {
            path: self.display_root.join(entry_key(path.as_bstr())),
            source,
        };
        if std::fs::symlink_metadata(dir.join(".git")).is_ok() {
            self.found.push(Found {
                path,
                what: What::Repo,
                ignored,
            });
            return Ok(());
        }
        let read = match std::fs::read_dir(&dir) {
            Ok(read) => read,
            Err(err) if is_absent(&err) => return Ok(()),
            Err(err) => return Err(io(err)),
        };
        let mut children = Vec::new();
        for item in read {
            let item = item.map_err(io)?;
            let name = gix::path::os_str_into_bstr(&item.file_name())
                .map(|name| name.to_owned())
                .map_err(|err| WorkspaceError::Git {
                    message: format!("a file name below '{}' is not valid: {err}", dir.display()),
                })?;
            if name == ".git" {
                continue;
            }
            let file_type = match item.file_type() {
                Ok(file_type) => file_type,
                Err(err) if is_absent(&err) => continue,
                Err(err) => return Err(io(err)),
            };
            let kind = if file_type.is_file() {
                Kind::File
            } else if file_type.is_symlink() {
                Kind::Symlink
            } else if file_type.is_dir() {
                Kind::Dir
            } else {
                Kind::Other
            };
            children.push((name, kind));
        }
        children.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in children {
            let mut child = path.clone();
            child.push_byte(b'/');
            child.push_str(&name);
            self.visit(child, kind, ignored)?;
        }
        Ok(())
    }
}

fn is_absent(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}
