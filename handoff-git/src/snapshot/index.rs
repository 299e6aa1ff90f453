//! The snapshot's trees and index, written from what was copied.

use super::*;

/// Writes the tree of `leaves` (sorted, all below the directory `leaves[..].path[..prefix_len]`)
/// and the trees below it; returns its id.
pub(super) fn write_tree(
    repo: &gix::Repository,
    leaves: &[Leaf],
    prefix_len: usize,
) -> Result<ObjectId, WorkspaceError> {
    let mut entries = Vec::new();
    let mut i = 0;
    while i < leaves.len() {
        let leaf = &leaves[i];
        let rest = &leaf.path[prefix_len..];
        match rest.find_byte(b'/') {
            Some(pos) if pos + 1 < rest.len() => {
                let dir = &leaf.path[..prefix_len + pos + 1];
                let end = i + leaves[i..].partition_point(|l| l.path.starts_with(dir));
                entries.push(tree::Entry {
                    mode: EntryKind::Tree.into(),
                    filename: rest[..pos].into(),
                    oid: write_tree(repo, &leaves[i..end], dir.len())?,
                });
                i = end;
            }
            _ => {
                let mode = leaf
                    .mode
                    .to_tree_entry_mode()
                    .ok_or_else(|| WorkspaceError::Git {
                        message: format!(
                            "'{}' has a mode a tree cannot hold: {:o}",
                            entry_key(leaf.path.as_bstr()),
                            leaf.mode.bits()
                        ),
                    })?;
                entries.push(tree::Entry {
                    mode,
                    filename: rest.strip_suffix(b"/").unwrap_or(rest).into(),
                    oid: leaf.id,
                });
                i += 1;
            }
        }
    }
    entries.sort();
    Ok(repo
        .write_object(&gix::objs::Tree { entries })
        .map_err(|err| git_error("cannot write a snapshot tree", err))?
        .detach())
}

/// Writes the snapshot's index: one entry per leaf, with a sparse directory's files listed one
/// by one (skip-worktree, as the rest of the snapshot's index is not sparse).
pub(super) fn write_index(
    repo: &gix::Repository,
    leaves: &[Leaf],
    git_dir: &Path,
) -> Result<(), WorkspaceError> {
    let mut state = gix::index::State::new(repo.object_hash());
    for leaf in leaves {
        if leaf.mode == Mode::DIR {
            expand_sparse(repo, leaf.path.clone(), leaf.id, &mut state)?;
            continue;
        }
        let flags = if leaf.skip_worktree {
            Flags::SKIP_WORKTREE | Flags::EXTENDED
        } else {
            Flags::empty()
        };
        state.dangerously_push_entry(leaf.stat, leaf.id, flags, leaf.mode, leaf.path.as_bstr());
    }
    state.sort_entries();
    gix::index::File::from_state(state, git_dir.join("index"))
        .write(gix::index::write::Options::default())
        .map_err(|err| git_error("cannot write the snapshot's index", err))
}

/// Adds the files of the tree `id`, at `prefix` (`dir/`), to `state` as skip-worktree entries.
pub(super) fn expand_sparse(
    repo: &gix::Repository,
    prefix: BString,
    id: ObjectId,
    state: &mut gix::index::State,
) -> Result<(), WorkspaceError> {
    let context = || {
        format!(
            "cannot read the sparse directory '{}'",
            entry_key(prefix.as_bstr())
        )
    };
    let tree = repo
        .find_tree(id)
        .map_err(|err| git_error(&context(), err))?;
    let decoded = tree.decode().map_err(|err| git_error(&context(), err))?;
    for entry in &decoded.entries {
        let mut path = prefix.clone();
        path.push_str(entry.filename);
        let mode = match entry.mode.kind() {
            EntryKind::Tree => {
                path.push_byte(b'/');
                expand_sparse(repo, path, entry.oid.to_owned(), state)?;
                continue;
            }
            EntryKind::Blob => Mode::FILE,
            EntryKind::BlobExecutable => Mode::FILE_EXECUTABLE,
            EntryKind::Link => Mode::SYMLINK,
            EntryKind::Commit => Mode::COMMIT,
        };
        state.dangerously_push_entry(
            Stat::default(),
            entry.oid.to_owned(),
            Flags::SKIP_WORKTREE | Flags::EXTENDED,
            mode,
            path.as_bstr(),
        );
    }
    Ok(())
}
