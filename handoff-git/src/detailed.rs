//! [`DetailedFingerprint`]: a fingerprint together with its per-path table, for saving and
//! comparing later (`handoff fingerprint --json`, `--diff`).

use handoff_core::Fingerprint;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A [`Fingerprint`] that serializes with its [`entries`](Fingerprint::entries), which the
/// fingerprint's own serialized form leaves out to keep run results small.
///
/// The JSON is the fingerprint's fields plus `entries` (entry key → state), so that a saved copy
/// can be compared with a later fingerprint path by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetailedFingerprint(pub Fingerprint);

/// The serialized shape: the fingerprint's fields, and the table.
#[derive(Serialize, Deserialize)]
struct Shape<F, E> {
    #[serde(flatten)]
    fingerprint: F,
    entries: E,
}

impl Serialize for DetailedFingerprint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Shape {
            fingerprint: &self.0,
            entries: &self.0.entries,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for DetailedFingerprint {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let shape: Shape<Fingerprint, _> = Shape::deserialize(deserializer)?;
        let mut fingerprint = shape.fingerprint;
        fingerprint.entries = shape.entries;
        Ok(DetailedFingerprint(fingerprint))
    }
}

impl From<Fingerprint> for DetailedFingerprint {
    fn from(fingerprint: Fingerprint) -> Self {
        DetailedFingerprint(fingerprint)
    }
}

impl From<DetailedFingerprint> for Fingerprint {
    fn from(detailed: DetailedFingerprint) -> Self {
        detailed.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::{ChangeCounts, FINGERPRINT_SCHEMA};

    #[test]
    fn round_trips_through_json_with_its_entries() {
        let fingerprint = Fingerprint {
            schema_version: FINGERPRINT_SCHEMA.into(),
            algorithm: "sha256".into(),
            digest: "sha256:00".into(),
            root: "/r".into(),
            head: None,
            entry_count: 1,
            change_counts: ChangeCounts::default(),
            changes: vec![],
            excluded_refs: vec!["refs/heads/x".into()],
            includes_ignored: true,
            ignored_created: Vec::new(),
            ignored_created_omitted: 0,
            entries: [("a", "tracked 100644 00")].into_iter().collect(),
            verified_by: None,
            hooks_dir: None,
            record: None,
            baseline: None,
        };
        let json = serde_json::to_string(&DetailedFingerprint::from(fingerprint.clone())).unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["digest"], "sha256:00");
        assert_eq!(value["entries"]["a"], "tracked 100644 00");
        assert_eq!(value["excludedRefs"][0], "refs/heads/x");
        let back: DetailedFingerprint = serde_json::from_str(&json).unwrap();
        assert_eq!(Fingerprint::from(back), fingerprint);
        // The compact form has no table, and is not taken for a detailed one.
        assert!(
            serde_json::from_str::<DetailedFingerprint>(
                &serde_json::to_string(&fingerprint).unwrap()
            )
            .is_err()
        );
    }
}
