//! Which paths are staged: where the index differs from HEAD's tree, as `git status` reports.
//!
//! HEAD's tree and the index are walked side by side, directory by directory. The index's
//! cache-tree extension records, for directories whose entries have not changed since, the id of
//! the tree they make up: where that equals HEAD's tree for the directory, nothing below it is
//! staged and the directory is skipped without reading a single tree object — the common case.
//! Unmerged paths (conflict stages) and intent-to-add entries are not staged.

use std::cmp::Ordering;

use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice, ByteVec};
use gix::index::entry::{Flags, Mode};
use gix::index::extension::Tree as CacheTree;
use gix::objs::tree::EntryKind;
use handoff_core::WorkspaceError;

use crate::repo::git_error;

/// The staged paths of `state` against the tree `head` (`None`: unborn, everything is staged),
/// sorted; `tree` is the index's cache tree.
pub(crate) fn staged(
    repo: &gix::Repository,
    state: &gix::index::State,
    tree: Option<&CacheTree>,
    head: Option<ObjectId>,
) -> Result<Vec<BString>, WorkspaceError> {
    let mut differ = Differ {
        repo,
        state,
        out: Vec::new(),
    };
    let root = tree.filter(|tree| tree.name.is_empty());
    differ.dir(
        head,
        &mut BString::default(),
        0,
        state.entries().len(),
        root,
    )?;
    differ.out.sort();
    differ.out.dedup();
    Ok(differ.out)
}

struct Differ<'a> {
    repo: &'a gix::Repository,
    state: &'a gix::index::State,
    out: Vec<BString>,
}

/// A tree entry: name, kind, id.
type TreeEntry = (BString, EntryKind, ObjectId);

/// One name in an index directory: a path (its stages `lo..hi`) or a subdirectory (entries
/// `lo..hi` below it).
struct IndexChild<'a> {
    name: &'a [u8],
    dir: bool,
    /// A sparse-directory entry (`dir/` itself, with the id of the tree it stands for).
    sparse: bool,
    lo: usize,
    hi: usize,
}

impl<'a> Differ<'a> {
    /// Compares the directory `prefix` (`dir/`, or empty for the root): `tree` in HEAD, the index
    /// entries `lo..hi` below it, and its cache-tree node.
    fn dir(
        &mut self,
        tree: Option<ObjectId>,
        prefix: &mut BString,
        lo: usize,
        hi: usize,
        cache: Option<&CacheTree>,
    ) -> Result<(), WorkspaceError> {
        if let (Some(tree), Some(cache)) = (tree, cache)
            && cache.num_entries.is_some()
            && cache.id == tree
        {
            return Ok(());
        }
        if tree.is_none() && lo == hi {
            return Ok(());
        }
        let tree_entries = match tree {
            Some(id) => self.tree_entries(id)?,
            None => Vec::new(),
        };
        let children = self.children(prefix.len(), lo, hi);
        let (mut t, mut c) = (0, 0);
        while t < tree_entries.len() || c < children.len() {
            let order = match (tree_entries.get(t), children.get(c)) {
                (Some(te), Some(ch)) => key_cmp(&te.0, te.1 == EntryKind::Tree, ch.name, ch.dir),
                (Some(_), None) => Ordering::Less,
                _ => Ordering::Greater,
            };
            match order {
                Ordering::Less => {
                    let (name, kind, id) = &tree_entries[t];
                    self.only_in_tree(prefix, name.as_bstr(), *kind, *id)?;
                    t += 1;
                }
                Ordering::Greater => {
                    let child = &children[c];
                    self.only_in_index(child.lo, child.hi);
                    c += 1;
                }
                Ordering::Equal => {
                    let (name, kind, id) = &tree_entries[t];
                    let child = &children[c];
                    if child.sparse {
                        let entry = &self.state.entries()[child.lo];
                        if entry.id != *id {
                            self.out.push(entry.path(self.state).to_owned());
                        }
                    } else if child.dir {
                        let sub = cache.and_then(|cache| {
                            cache
                                .children
                                .iter()
                                .find(|sub| sub.name.as_slice() == name.as_slice())
                        });
                        let len = prefix.len();
                        prefix.push_str(name);
                        prefix.push_byte(b'/');
                        self.dir(Some(*id), prefix, child.lo, child.hi, sub)?;
                        prefix.truncate(len);
                    } else {
                        self.compare_path(child.lo, child.hi, *kind, *id);
                    }
                    t += 1;
                    c += 1;
                }
            }
        }
        Ok(())
    }

    /// The names of the directory whose path is the first `prefix_len` bytes of entries `lo..hi`.
    fn children(&self, prefix_len: usize, lo: usize, hi: usize) -> Vec<IndexChild<'a>> {
        let state = self.state;
        let entries = state.entries();
        let mut children = Vec::new();
        let mut i = lo;
        while i < hi {
            let path = entries[i].path(state);
            let rest = &path[prefix_len..];
            match rest.find_byte(b'/') {
                Some(pos) if pos + 1 == rest.len() && entries[i].mode == Mode::DIR => {
                    children.push(IndexChild {
                        name: &rest[..pos],
                        dir: true,
                        sparse: true,
                        lo: i,
                        hi: i + 1,
                    });
                    i += 1;
                }
                Some(pos) => {
                    let sub = &path[..prefix_len + pos + 1];
                    let end =
                        i + entries[i..hi].partition_point(|e| e.path(state).starts_with(sub));
                    children.push(IndexChild {
                        name: &rest[..pos],
                        dir: true,
                        sparse: false,
                        lo: i,
                        hi: end,
                    });
                    i = end;
                }
                None => {
                    let mut end = i + 1;
                    while end < hi && entries[end].path(state) == path {
                        end += 1;
                    }
                    children.push(IndexChild {
                        name: rest,
                        dir: false,
                        sparse: false,
                        lo: i,
                        hi: end,
                    });
                    i = end;
                }
            }
        }
        children
    }

    fn tree_entries(&self, id: ObjectId) -> Result<Vec<TreeEntry>, WorkspaceError> {
        let tree = self
            .repo
            .find_tree(id)
            .map_err(|err| git_error(&format!("cannot read the tree {id}"), err))?;
        let decoded = tree
            .decode()
            .map_err(|err| git_error(&format!("cannot decode the tree {id}"), err))?;
        Ok(decoded
            .entries
            .iter()
            .map(|entry| {
                (
                    entry.filename.to_owned(),
                    entry.mode.kind(),
                    entry.oid.to_owned(),
                )
            })
            .collect())
    }

    /// A path or directory in HEAD that the index does not have: staged for deletion.
    fn only_in_tree(
        &mut self,
        prefix: &BString,
        name: &BStr,
        kind: EntryKind,
        id: ObjectId,
    ) -> Result<(), WorkspaceError> {
        let mut path = prefix.clone();
        path.push_str(name);
        if kind == EntryKind::Tree {
            for (name, kind, id) in self.tree_entries(id)? {
                let mut sub = path.clone();
                sub.push_byte(b'/');
                self.only_in_tree(&sub, name.as_bstr(), kind, id)?;
            }
        } else {
            self.out.push(path);
        }
        Ok(())
    }

    /// Index entries `lo..hi` with nothing in HEAD: staged additions, except for conflicts and
    /// intent-to-add entries.
    fn only_in_index(&mut self, lo: usize, hi: usize) {
        let state = self.state;
        for entry in &state.entries()[lo..hi] {
            if entry.stage_raw() == 0 && !entry.flags.contains(Flags::INTENT_TO_ADD) {
                self.out.push(entry.path(state).to_owned());
            }
        }
    }

    /// One path in both: staged if its stage-0 entry differs in mode or id.
    fn compare_path(&mut self, lo: usize, hi: usize, kind: EntryKind, id: ObjectId) {
        let state = self.state;
        let entry = &state.entries()[lo];
        if hi - lo != 1 || entry.stage_raw() != 0 || entry.flags.contains(Flags::INTENT_TO_ADD) {
            return;
        }
        if entry.mode.bits() != canonical_mode(kind) || entry.id != id {
            self.out.push(entry.path(state).to_owned());
        }
    }
}

/// The mode an index entry has for a tree entry of `kind`.
fn canonical_mode(kind: EntryKind) -> u32 {
    match kind {
        EntryKind::Tree => 0o040000,
        EntryKind::Blob => 0o100644,
        EntryKind::BlobExecutable => 0o100755,
        EntryKind::Link => 0o120000,
        EntryKind::Commit => 0o160000,
    }
}

/// Git's order of names in a tree, where a directory sorts as if its name ended in `/` (which
/// is also the order of index paths).
fn key_cmp(a: &[u8], a_dir: bool, b: &[u8], b_dir: bool) -> Ordering {
    let a = a.iter().chain(a_dir.then_some(&b'/'));
    let b = b.iter().chain(b_dir.then_some(&b'/'));
    a.cmp(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_sort_as_if_they_ended_in_a_slash() {
        assert_eq!(key_cmp(b"a", true, b"a.txt", false), Ordering::Greater);
        assert_eq!(key_cmp(b"a", false, b"a.txt", false), Ordering::Less);
        assert_eq!(key_cmp(b"a", true, b"a", true), Ordering::Equal);
        assert_eq!(key_cmp(b"a", true, b"a", false), Ordering::Greater);
        assert_eq!(key_cmp(b"a", true, b"a0", false), Ordering::Less);
    }
}
