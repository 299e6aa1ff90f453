//! [`Baseline`]: what a fingerprint saw that a later fingerprint of the same worktree judges by,
//! rather than by what a run may have rewritten in between.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// What a "before" fingerprint saw that the "after" judges by: the ignore rules and the object
/// store as they stood before the run.
///
/// An agent can write an ignore rule that hides what it did (a new directory holding a
/// `.gitignore` of `*`), or rewrite an object file so that a commit means other content. So
/// the "after" decides which paths are ignored by the rules recorded here, and re-verifies the
/// object files and packs whose stat data differs from the stamps recorded here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// Every ignore file that applied, by key (a worktree path ending in `.gitignore`,
    /// `.git/info/exclude`, or `core.excludesFile`), with its content.
    #[serde(with = "hex_values")]
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
    /// The baselines of the repositories nested in this worktree (submodules, and untracked
    /// directories holding a repository), by worktree path: each is judged by its own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nested: BTreeMap<String, Baseline>,
}

impl Baseline {
    /// The baseline as bytes to keep (JSON), for [`Baseline::from_bytes`].
    pub fn to_bytes(&self) -> Vec<u8> {
        // A map of strings and byte strings always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A baseline kept by [`Baseline::to_bytes`]; `None` when `bytes` are not one.
    pub fn from_bytes(bytes: &[u8]) -> Option<Baseline> {
        serde_json::from_slice(bytes).ok()
    }
}

/// What a task store keeps of a saved fingerprint for a later comparison with it
/// ([`crate::TaskStore::save_fingerprint_basis`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintBasis {
    /// The fingerprint's digest (`sha256:…`).
    pub digest: String,
    /// The root of the worktree it was taken of.
    pub worktree: camino::Utf8PathBuf,
    /// Its record, as [`crate::StatRecord::to_bytes`] writes it.
    pub record: Vec<u8>,
    /// Its baseline, as [`Baseline::to_bytes`] writes it.
    pub baseline: Vec<u8>,
}

/// Byte strings as hex text, so that the kept form is plain JSON.
mod hex_values {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(
        map: &BTreeMap<String, Vec<u8>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_map(map.iter().map(|(key, value)| (key, hex::encode(value))))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<String, Vec<u8>>, D::Error> {
        BTreeMap::<String, String>::deserialize(deserializer)?
            .into_iter()
            .map(|(key, value)| Ok((key, hex::decode(value).map_err(D::Error::custom)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_baseline_round_trips_through_its_bytes() {
        let inner = Baseline {
            ignore_files: [(".gitignore".to_owned(), b"*\n\xff".to_vec())].into(),
            ..Baseline::default()
        };
        let baseline = Baseline {
            ignore_files: [(".git/info/exclude".to_owned(), b"# x\n".to_vec())].into(),
            object_files: [("ab/cdef".to_owned(), "100444 1 2 3.4 5.6".to_owned())].into(),
            tips: vec!["ab".repeat(20)],
            ignored: ["target/".to_owned()].into(),
            nested: [("sub".to_owned(), inner)].into(),
        };
        let bytes = baseline.to_bytes();
        assert_eq!(Baseline::from_bytes(&bytes), Some(baseline));
        assert_eq!(Baseline::from_bytes(b"{\"nope\":1}"), None);
        assert_eq!(Baseline::from_bytes(b"not json"), None);
    }
}
