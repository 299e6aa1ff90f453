//! What a run created that the ignore rules before it ignore (build output: `target/`,
//! `node_modules/`), summarized per top-most path with a file count rather than file by file.
//!
//! A fingerprint without ignored files does not read ignored directories, and records the
//! top-most ignored paths it found ([`handoff_core::Baseline::ignored`]). The fingerprint after
//! a run lists those of its own that are not in that record, and counts the files below each
//! new directory: one walk of the new trees only, at most [`IGNORED_COUNT_LIMIT`] files each.
//! A directory that was there and ignored before the run is not read again.

use std::collections::BTreeSet;
use std::path::Path;

use gix::bstr::{BString, ByteSlice};
use handoff_core::{IGNORED_COUNT_LIMIT, IGNORED_CREATED_LIMIT, IgnoredTree};

use crate::paths::{entry_key, worktree_path};

/// The keys of `tops` (top-most ignored paths, with whether each is a directory), for the
/// baseline.
pub(crate) fn keys(tops: &[(BString, bool)]) -> BTreeSet<String> {
    tops.iter()
        .map(|(path, _)| entry_key(path.as_bstr()))
        .collect()
}

/// The paths among `tops` that `before` does not hold, each with its file count, sorted by path
/// and at most [`IGNORED_CREATED_LIMIT`]; and how many more there were.
pub(crate) fn created(
    root: &Path,
    tops: &[(BString, bool)],
    before: &BTreeSet<String>,
) -> (Vec<IgnoredTree>, u64) {
    let mut listed = Vec::new();
    let mut omitted = 0u64;
    for (path, is_dir) in tops {
        let key = entry_key(path.as_bstr());
        if before.contains(&key) {
            continue;
        }
        if listed.len() == IGNORED_CREATED_LIMIT {
            omitted += 1;
            continue;
        }
        let tree = if *is_dir {
            let (files, capped) = match worktree_path(root, path.as_bstr()) {
                Ok(dir) => count_files(&dir),
                Err(_) => (0, false),
            };
            IgnoredTree {
                path: format!("{key}/"),
                files,
                capped,
            }
        } else {
            IgnoredTree {
                path: key,
                files: 1,
                capped: false,
            }
        };
        listed.push(tree);
    }
    (listed, omitted)
}

/// How many regular files and symbolic links are below `dir` (not following symbolic links,
/// leaving out `.git`), and whether counting stopped at [`IGNORED_COUNT_LIMIT`]. What cannot be
/// read is not counted: this is a summary, not evidence.
fn count_files(dir: &Path) -> (u64, bool) {
    let mut files = 0u64;
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for item in read.flatten() {
            if item.file_name() == ".git" {
                continue;
            }
            let Ok(file_type) = item.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                pending.push(item.path());
            } else if file_type.is_file() || file_type.is_symlink() {
                files += 1;
                if files == IGNORED_COUNT_LIMIT {
                    return (files, true);
                }
            }
        }
    }
    (files, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_paths_are_counted_and_old_ones_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("target/debug/deps")).unwrap();
        for i in 0..5 {
            std::fs::write(root.join(format!("target/debug/deps/f{i}")), "x").unwrap();
        }
        std::fs::write(root.join("target/debug/app"), "x").unwrap();
        std::os::unix::fs::symlink("app", root.join("target/debug/link")).unwrap();
        std::fs::create_dir_all(root.join("node_modules")).unwrap();
        std::fs::write(root.join("app.log"), "x").unwrap();
        let tops = vec![
            (BString::from("app.log"), false),
            (BString::from("node_modules"), true),
            (BString::from("old"), true),
            (BString::from("target"), true),
        ];
        let before = BTreeSet::from(["old".to_owned()]);
        let (listed, omitted) = created(root, &tops, &before);
        assert_eq!(omitted, 0);
        let got: Vec<(&str, u64)> = listed.iter().map(|t| (t.path.as_str(), t.files)).collect();
        assert_eq!(got, [("app.log", 1), ("node_modules/", 0), ("target/", 7)]);
    }

    #[test]
    fn at_most_the_limit_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let tops: Vec<(BString, bool)> = (0..IGNORED_CREATED_LIMIT + 3)
            .map(|i| (BString::from(format!("f{i:04}.log")), false))
            .collect();
        let (listed, omitted) = created(dir.path(), &tops, &BTreeSet::new());
        assert_eq!(listed.len(), IGNORED_CREATED_LIMIT);
        assert_eq!(omitted, 3);
    }
}
