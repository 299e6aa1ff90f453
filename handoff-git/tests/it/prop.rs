//! Property: random writes and deletes are detected iff the content actually changed.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use crate::support::{TestRepo, changed};

/// The paths the property plays with; no name is both a file and a directory.
const NAMES: [&str; 6] = ["a", "b.txt", "dir/c", "dir/d", "dir/sub/e", "f"];

#[derive(Debug, Clone)]
enum Op {
    Write(usize, Vec<u8>),
    Delete(usize),
}

fn content() -> impl Strategy<Value = Vec<u8>> {
    // Few distinct contents, so that rewriting a file with what it already holds is common.
    prop_oneof![
        Just(b"one\n".to_vec()),
        Just(b"two\n".to_vec()),
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NAMES.len(), content()).prop_map(|(i, c)| Op::Write(i, c)),
        1 => (0..NAMES.len()).prop_map(Op::Delete),
    ]
}

/// Initial files: `(content, committed)` for a subset of the names.
fn initial() -> impl Strategy<Value = BTreeMap<usize, (Vec<u8>, bool)>> {
    proptest::collection::btree_map(0..NAMES.len(), (content(), any::<bool>()), 0..NAMES.len())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn writes_and_deletes_are_detected_iff_content_changed(
        files in initial(),
        ops in proptest::collection::vec(op(), 0..8),
    ) {
        let repo = TestRepo::init();
        let mut model: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        for (&i, (bytes, committed)) in &files {
            repo.write(NAMES[i], bytes);
            model.insert(NAMES[i], bytes.clone());
            if *committed {
                repo.git(&["add", NAMES[i]]);
            }
        }
        repo.commit("initial");
        let before = repo.fingerprint();

        let initial_model = model.clone();
        for op in &ops {
            match op {
                Op::Write(i, bytes) => {
                    repo.write(NAMES[*i], bytes);
                    model.insert(NAMES[*i], bytes.clone());
                }
                Op::Delete(i) => {
                    if model.remove(NAMES[*i]).is_some() {
                        repo.remove(NAMES[*i]);
                    }
                }
            }
        }
        let after = repo.fingerprint();

        let expected: BTreeSet<&str> = NAMES
            .iter()
            .copied()
            .filter(|name| initial_model.get(name) != model.get(name))
            .collect();
        let actual = changed(&before, &after);
        let actual: BTreeSet<&str> = actual.iter().map(String::as_str).collect();
        prop_assert_eq!(&actual, &expected);
        prop_assert_eq!(before.digest == after.digest, expected.is_empty());
    }
}
