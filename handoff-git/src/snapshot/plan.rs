//! What a snapshot holds: the paths to take from the worktree and the index, safe and not shadowed.

use super::*;

/// What to take from the source.
pub(super) struct Plan {
    /// Paths to copy from the worktree, sorted.
    pub(super) items: Vec<Item>,
    /// Skip-worktree entries and sparse directories, taken from the index as they are.
    pub(super) index_only: Vec<Leaf>,
}

/// A path to copy from the worktree.
pub(super) struct Item {
    pub(super) path: BString,
    /// Its index entries (every stage); empty for an untracked path.
    pub(super) stages: Range<usize>,
}

/// One entry of the snapshot's tree and index.
pub(super) struct Leaf {
    /// Repository-relative; a sparse directory's ends with `/`.
    pub(super) path: BString,
    pub(super) mode: Mode,
    pub(super) id: ObjectId,
    pub(super) stat: Stat,
    /// In the tree and the index, not in the worktree.
    pub(super) skip_worktree: bool,
}

/// Lists what to take: the index's paths and the untracked, not ignored ones.
pub(super) fn plan(
    source: &Source<'_>,
    state: &gix::index::State,
    threads: usize,
) -> Result<Plan, WorkspaceError> {
    let repo = source.repo;
    let config = repo.config_snapshot();
    let input = ScanInput {
        root: source.root,
        display_root: source.display_root,
        state,
        stat_options: repo
            .stat_options()
            .map_err(|err| git_error("cannot read the stat options", err))?,
        use_stat_cache: true,
        file_mode: config.boolean("core.fileMode").unwrap_or(true),
        symlinks: config.boolean("core.symlinks").unwrap_or(true),
        object_hash: repo.object_hash(),
        threads,
        since: None,
        record_before: (0, 0),
        root_dev: 0,
        park: None,
    };
    let candidates = scan::candidates(&input)?;
    let mut rules = crate::ignore_rules::IgnoreRules::new(repo, source.root, None)?;
    let found = untracked::classify(
        &mut rules,
        source.root,
        source.display_root,
        candidates,
        false,
    )?
    .found;

    let entries = state.entries();
    let mut items = Vec::with_capacity(entries.len() + found.len());
    let mut index_only = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let entry = &entries[i];
        let path = entry.path(state);
        let mut end = i + 1;
        while end < entries.len() && entries[end].path(state) == path {
            end += 1;
        }
        let name = if entry.mode == Mode::DIR {
            path.strip_suffix(b"/").unwrap_or(path).as_bstr()
        } else {
            path
        };
        if !is_safe(name) {
            return Err(WorkspaceError::Git {
                message: format!(
                    "the index holds a path that cannot be checked out: '{}'",
                    entry_key(path)
                ),
            });
        }
        let single = end == i + 1 && entry.stage_raw() == 0;
        if entry.mode == Mode::DIR || (single && entry.flags.contains(Flags::SKIP_WORKTREE)) {
            index_only.push(Leaf {
                path: path.to_owned(),
                mode: entry.mode,
                id: entry.id,
                stat: Stat::default(),
                skip_worktree: true,
            });
        } else {
            items.push(Item {
                path: path.to_owned(),
                stages: i..end,
            });
        }
        i = end;
    }
    // Git could not track the others (`.GIT` on a case-sensitive file system, say) either.
    items.extend(
        found
            .into_iter()
            .filter(|found| found.what != What::Repo && is_safe(found.path.as_bstr()))
            .map(|found| Item {
                path: found.path,
                stages: 0..0,
            }),
    );
    items.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Plan { items, index_only })
}

/// Whether `path` is a relative path that stays below the worktree and out of `.git`: no empty,
/// `.` or `..` component, none named `.git` in any case.
pub(super) fn is_safe(path: &BStr) -> bool {
    !path.is_empty()
        && path
            .split(|&b| b == b'/')
            .all(|part| !matches!(part, b"" | b"." | b"..") && !part.eq_ignore_ascii_case(b".git"))
}

/// Drops the skip-worktree entries that the checked-out paths leave no room for (a file where
/// a sparse directory was, say), keeping `leaves` sorted.
pub(super) fn drop_shadowed(leaves: &mut Vec<Leaf>) {
    if !leaves.iter().any(|leaf| leaf.skip_worktree) {
        return;
    }
    let mut taken = std::collections::HashSet::new();
    for leaf in leaves.iter().filter(|leaf| !leaf.skip_worktree) {
        taken.insert(leaf.path.as_slice());
        for pos in slashes(&leaf.path) {
            taken.insert(&leaf.path[..=pos]);
        }
    }
    let shadowed: Vec<bool> = leaves
        .iter()
        .map(|leaf| {
            if !leaf.skip_worktree {
                return false;
            }
            let path = leaf.path.as_slice();
            let own = path.strip_suffix(b"/").unwrap_or(path);
            let mut dir = own.to_vec();
            dir.push(b'/');
            // Its own place, as a file or as a directory, and every directory above it.
            taken.contains(own)
                || taken.contains(dir.as_slice())
                || slashes(own).any(|pos| taken.contains(&own[..pos]))
        })
        .collect();
    let mut keep = shadowed.iter().map(|s| !s);
    leaves.retain(|_| keep.next().unwrap_or(true));
}

/// The positions of the `/` in `path`.
pub(super) fn slashes(path: &[u8]) -> impl Iterator<Item = usize> + '_ {
    path.iter()
        .enumerate()
        .filter_map(|(pos, &b)| (b == b'/').then_some(pos))
}
