//! The state strings of tracked paths, and what `git status` says about them.

use std::fmt::Write as _;

use gix::ObjectId;
use gix::index::entry::{Flags, Mode};

/// The worktree state of an index entry's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wt {
    /// Same mode and content as the entry (which is a single stage-0 entry).
    Same,
    /// A file or symlink with this git mode (`100644`, `100755`, `120000`) and blob id.
    Blob {
        /// Git mode.
        mode: u32,
        /// Blob id of the content (of the target text, for a symlink).
        id: ObjectId,
    },
    /// Nothing there, or a parent is not a directory.
    Missing,
    /// A directory (for a gitlink, one without a repository in it).
    Dir,
    /// The directory of a gitlink: resolved later into the nested repository's state.
    Nested,
    /// A FIFO, socket or device.
    Other,
    /// A sparse-directory entry of a sparse index: not looked at.
    Sparse,
}

/// `git status`'s view of a tracked path: unstaged (worktree differs from the index), and among
/// those, deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Unstaged {
    pub(crate) unstaged: bool,
    pub(crate) deleted: bool,
}

/// What a nested repository says about itself, for the state of a gitlink.
#[derive(Debug, Clone)]
pub(crate) struct Nested {
    /// `repo <digest>`, or `repo unreadable`, `repo too-deep`, `dir` (no repository there).
    pub(crate) state: String,
    /// The commit its HEAD resolves to.
    pub(crate) head: Option<String>,
    /// Whether its own status is clean.
    pub(crate) clean: bool,
}

/// The state of a tracked path: `tracked <index>` and, where the worktree differs from the
/// index, `; worktree <state>`.
///
/// The index part is `<mode> <id>` for a plain entry, `<stage>:<mode> <id>,…` for a conflict,
/// each followed by `+intent-to-add`, `+skip-worktree` or `+assume-unchanged` as flagged. The
/// worktree part is `<mode> <blob id>`, `missing`, `dir`, `repo <digest>`, `other` or `sparse`.
pub(crate) fn tracked_state(
    stages: &[gix::index::Entry],
    wt: &Wt,
    nested: Option<&Nested>,
) -> String {
    let mut out = String::with_capacity(64);
    write_tracked_state(&mut out, stages, wt, nested);
    out
}

/// Appends [`tracked_state`] to `out`.
pub(crate) fn write_tracked_state(
    out: &mut String,
    stages: &[gix::index::Entry],
    wt: &Wt,
    nested: Option<&Nested>,
) {
    out.push_str("tracked ");
    let plain = stages.len() == 1 && stages[0].stage_raw() == 0;
    for (n, entry) in stages.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        if !plain {
            let _ = write!(out, "{}:", entry.stage_raw());
        }
        push_mode_and_id(out, entry.mode.bits(), &entry.id);
        for (flag, name) in [
            (Flags::INTENT_TO_ADD, "+intent-to-add"),
            (Flags::SKIP_WORKTREE, "+skip-worktree"),
            (Flags::ASSUME_VALID, "+assume-unchanged"),
        ] {
            if entry.flags.contains(flag) {
                out.push_str(name);
            }
        }
    }
    match wt {
        Wt::Same => {}
        Wt::Blob { mode, id } => {
            out.push_str("; worktree ");
            push_mode_and_id(out, *mode, id);
        }
        Wt::Missing => out.push_str("; worktree missing"),
        Wt::Dir => out.push_str("; worktree dir"),
        Wt::Nested => {
            out.push_str("; worktree ");
            out.push_str(nested.map_or("repo unreadable", |n| n.state.as_str()));
        }
        Wt::Other => out.push_str("; worktree other"),
        Wt::Sparse => out.push_str("; worktree sparse"),
    }
}

/// Appends `<mode> <hex id>`, the mode as six octal digits.
fn push_mode_and_id(out: &mut String, mode: u32, id: &gix::oid) {
    match mode {
        0o100644 => out.push_str("100644"),
        0o100755 => out.push_str("100755"),
        0o120000 => out.push_str("120000"),
        0o160000 => out.push_str("160000"),
        _ => {
            let _ = write!(out, "{mode:06o}");
        }
    }
    out.push(' ');
    let mut buf = [0u8; 64];
    out.push_str(id.hex_to_buf(&mut buf));
}

/// Whether a tracked path counts as unstaged (and deleted), as `git status` has it.
pub(crate) fn unstaged(stages: &[gix::index::Entry], wt: &Wt, nested: Option<&Nested>) -> Unstaged {
    let entry = &stages[0];
    let yes = |deleted| Unstaged {
        unstaged: true,
        deleted,
    };
    if stages.len() > 1 || entry.stage_raw() != 0 || entry.flags.contains(Flags::INTENT_TO_ADD) {
        return yes(false);
    }
    if entry
        .flags
        .intersects(Flags::SKIP_WORKTREE | Flags::ASSUME_VALID)
    {
        return Unstaged::default();
    }
    match wt {
        Wt::Same | Wt::Sparse => Unstaged::default(),
        Wt::Missing => yes(true),
        // A submodule that is not checked out.
        Wt::Dir if entry.mode == Mode::COMMIT => Unstaged::default(),
        Wt::Dir => yes(true),
        Wt::Blob { .. } | Wt::Other => yes(false),
        Wt::Nested => {
            let moved = nested.is_some_and(|nested| {
                nested.head.as_deref() != Some(entry.id.to_hex().to_string().as_str())
                    || !nested.clean
            });
            if moved {
                yes(false)
            } else {
                Unstaged::default()
            }
        }
    }
}
