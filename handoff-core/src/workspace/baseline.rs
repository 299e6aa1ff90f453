//! [`Baseline`]: what a fingerprint saw that a later fingerprint of the same worktree judges by,
//! rather than by what a run may have rewritten in between.

use std::collections::{BTreeMap, BTreeSet};

/// What a "before" fingerprint saw that the "after" judges by: the ignore rules and the object
/// store as they stood before the run.
///
/// An agent can write an ignore rule that hides what it did (a new directory holding a
/// `.gitignore` of `*`), or rewrite an object file so that a commit means other content. So
/// the "after" decides which paths are ignored by the rules recorded here, and re-verifies the
/// object files and packs whose stat data differs from the stamps recorded here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    /// Every ignore file that applied, by key (a worktree path ending in `.gitignore`,
    /// `.git/info/exclude`, or `core.excludesFile`), with its content.
    pub ignore_files: BTreeMap<String, Vec<u8>>,
    /// The object store's files (loose objects `ab/cdef…`, packs and their indexes
    /// `pack/pack-….pack`), by path below the objects directory, with their stat data.
    pub object_files: BTreeMap<String, String>,
    /// The object ids HEAD and the refs pointed at (hex), sorted.
    pub tips: Vec<String>,
    /// The top-most ignored paths (worktree paths; nothing above them is ignored) that were
    /// there, not read: an ignored path the "after" finds that is not here was created during
    /// the run, and is summarized in [`crate::Fingerprint::ignored_created`].
    pub ignored: BTreeSet<String>,
}
