fn stamp(n: i64) -> Stamp {
    Stamp {
        dev: 1,
        ino: n as u64,
        mode: 0o100644,
        uid: 1000,
        gid: 1000,
        size: n,
        mtime: (n, n * 3),
        ctime: (-n - 1, 999_999_999),
    }
}

proptest::proptest! {
    /// A record survives its bytes, finds exactly its own paths, and bytes that are not a
    /// record are refused whole.
    #[test]
    fn a_stat_record_round_trips_through_its_bytes(
        paths in proptest::collection::btree_set("[a-c/.]{1,12}", 0..60),
        probes in proptest::collection::vec("[a-c/.]{0,13}", 0..40),
        cut in 0usize..64,
        flip in 0usize..4096,
    ) {
        let mut record = StatRecord::new(20);
        for (i, p) in paths.iter().enumerate() {
            record.push(p.as_bytes(), stamp(i as i64), &[i as u8; 20]);
        }
        proptest::prop_assert_eq!(record.len(), paths.len());
        let bytes = record.to_bytes().unwrap().to_vec();
        let back = StatRecord::from_bytes(bytes.clone()).unwrap();
        proptest::prop_assert_eq!(back.len(), record.len());
        for (i, p) in paths.iter().enumerate() {
            let (s, id) = back.get(p.as_bytes()).unwrap();
            proptest::prop_assert_eq!(s, stamp(i as i64));
            proptest::prop_assert_eq!(id.as_slice(), &[i as u8; 20][..]);
        }
        for probe in &probes {
            proptest::prop_assert_eq!(
                back.get(probe.as_bytes()).is_some(),
                paths.contains(probe),
                "{}", probe
            );
        }
        let mut seen = Vec::new();
        back.for_each(|p, _, _| seen.push(String::from_utf8(p.to_vec()).unwrap()));
        proptest::prop_assert_eq!(seen, paths.iter().cloned().collect::<Vec<_>>());
        if !paths.is_empty() && cut > 0 && cut < bytes.len() - RECORD_HEADER {
            proptest::prop_assert!(
                StatRecord::from_bytes(bytes[..bytes.len() - cut].to_vec()).is_none()
            );
        }
        // A record that reads as one after a byte changed still holds sorted paths.
        let mut flipped = bytes.clone();
        let at = flip % flipped.len();
        flipped[at] ^= 0x41;
        if let Some(other) = StatRecord::from_bytes(flipped) {
            let mut last: Option<Vec<u8>> = None;
            other.for_each(|p, _, _| {
                assert!(last.as_deref().is_none_or(|l| l < p));
                last = Some(p.to_vec());
            });
        }
        proptest::prop_assert!(StatRecord::from_bytes(b"HSR1".to_vec()).is_none());
    }
}

/// `n` sorted paths spread over a few directories, the `i`th with stamp `i` and id `i`.
fn many(n: usize) -> Vec<(String, Stamp, [u8; 20])> {
    (0..n)
        .map(|i| {
            let id = [(i % 251) as u8; 20];
            (format!("d{}/f{i:06}", i % 7), (stamp(i as i64), id))
        })
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_iter()
        .map(|(p, (s, id))| (p, s, id))
        .collect()
}

fn filled(mut record: StatRecord, paths: &[(String, Stamp, [u8; 20])]) -> StatRecord {
    for (p, s, id) in paths {
        record.push(p.as_bytes(), *s, id);
    }
    record
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// A record whose full pages wait in a file holds, finds, lists and writes out exactly
    /// what the same record in memory does, however many pages it fills.
    #[test]
    fn a_parked_record_is_the_record_in_memory(
        n in 0usize..(3 * RECORD_PAGE + 40),
        probes in proptest::collection::vec(0usize..4000, 0..64),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let paths = many(n);
        let memory = filled(StatRecord::new(20), &paths);
        let parked = filled(StatRecord::parked(20, dir.path()), &paths);
        proptest::prop_assert!(parked.is_parked());
        proptest::prop_assert_eq!(parked.len(), n);
        let (parked_bytes, memory_bytes) = (parked.to_bytes().unwrap(), memory.to_bytes().unwrap());
        proptest::prop_assert_eq!(parked_bytes.as_ref(), memory_bytes.as_ref());
        let mut lookup = parked.lookup();
        for (p, s, id) in &paths {
            let (found, found_id) = lookup.get(p.as_bytes()).unwrap();
            proptest::prop_assert_eq!(found, *s);
            proptest::prop_assert_eq!(found_id.as_slice(), &id[..]);
        }
        for probe in probes {
            // Absent paths between, before and after the pages.
            for absent in [format!("d{}/f{probe:06}x", probe % 7), format!("d{probe}"), "e".into(), "".into()] {
                proptest::prop_assert!(parked.get(absent.as_bytes()).is_none(), "{}", absent);
            }
        }
        let mut seen = Vec::new();
        proptest::prop_assert!(parked.for_each(|p, _, _| seen.push(p.to_vec())));
        proptest::prop_assert_eq!(seen.len(), n);
        let again = memory.park(dir.path());
        proptest::prop_assert_eq!(again.is_parked(), n >= RECORD_PAGE);
        proptest::prop_assert_eq!(again.len(), n);
        let mut lookup = again.lookup();
        for (p, s, _) in &paths {
            proptest::prop_assert_eq!(lookup.get(p.as_bytes()).map(|f| f.0), Some(*s));
        }
        let again_bytes = again.to_bytes().unwrap();
        proptest::prop_assert_eq!(again_bytes.as_ref(), parked_bytes.as_ref());
    }
}

/// An agent that reaches a parked page (through `/proc/<pid>/fd`) and rewrites a path's
/// stamp there, so that the record vouches for a file it changed, only makes that page
/// vouch for nothing: its paths are looked up as absent (and so read), the other pages
/// still serve, and the record is not written out.
#[test]
fn a_rewritten_parked_page_vouches_for_nothing() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let paths = many(3 * RECORD_PAGE);
    let record = filled(StatRecord::parked(20, dir.path()), &paths);
    let pages = record.pages.as_ref().unwrap();
    assert_eq!(pages.len(), 3);
    // A path of the second page gets another inode, as the agent would give it the stamp
    // of the file it changed.
    // (The first path of a block is stored whole.)
    let (target, _, _) = &paths[RECORD_PAGE + RECORD_BLOCK];
    let mut file_bytes = vec![0u8; pages.bytes()];
    record_pages_file(&record)
        .read_exact_at(&mut file_bytes, 0)
        .unwrap();
    let mut stored = vec![0, 0];
    stored.extend_from_slice(&(target.len() as u16).to_le_bytes());
    stored.extend_from_slice(target.as_bytes());
    let at = file_bytes
        .windows(stored.len())
        .position(|w| w == stored)
        .unwrap();
    let forged = stamp(999_999);
    let stamp_at = at + stored.len();
    record_pages_file(&record)
        .write_all_at(&forged.ino.to_le_bytes(), stamp_at as u64)
        .unwrap();
    let mut lookup = record.lookup();
    for (i, (p, s, _)) in paths.iter().enumerate() {
        let found = lookup.get(p.as_bytes());
        if (RECORD_PAGE..2 * RECORD_PAGE).contains(&i) {
            assert!(found.is_none(), "{p} is on the rewritten page");
        } else {
            assert_eq!(found.unwrap().0, *s);
        }
    }
    assert!(record.to_bytes().is_none());
    assert!(!record.for_each(|_, _, _| {}));
    // Read without its digest, the page vouches for the forged stamp.
    let page = &pages.pages_for_tests()[1];
    record_pages_file(&record)
        .read_exact_at(&mut file_bytes, 0)
        .unwrap();
    let mut unchecked = b"HSR2\x14".to_vec();
    unchecked.extend_from_slice(&pages.dev().to_le_bytes());
    unchecked.extend_from_slice(&file_bytes[page.0 as usize..page.0 as usize + page.1]);
    let unchecked = StatRecord::from_bytes(unchecked).unwrap();
    assert_eq!(unchecked.get(target.as_bytes()).unwrap().0.ino, forged.ino);
}

/// A record taken since another shares the pages it repeats instead of writing them: all
/// of them when nothing changed, all but the changed one's page when a stamp changed, and
/// those from the first shifted one on when a path was added. It holds and writes out the
/// same either way.
#[test]
fn a_record_shares_the_pages_it_repeats_from_the_one_it_was_taken_since() {
    let dir = tempfile::tempdir().unwrap();
    let paths = many(4 * RECORD_PAGE + 7);
    let earlier = filled(StatRecord::parked(20, dir.path()), &paths);
    let own_pages = |r: &StatRecord| r.pages.as_ref().unwrap().own_pages_for_tests();
    assert_eq!(own_pages(&earlier), 4);

    let same = filled(
        StatRecord::parked_echoing(20, dir.path(), Some(&earlier)),
        &paths,
    );
    assert_eq!(own_pages(&same), 0);
    assert_eq!(same.to_bytes(), earlier.to_bytes());

    let mut touched = paths.clone();
    touched[2 * RECORD_PAGE + 3].1 = stamp(123_456);
    let one = filled(
        StatRecord::parked_echoing(20, dir.path(), Some(&earlier)),
        &touched,
    );
    assert_eq!(own_pages(&one), 1);
    let memory = filled(StatRecord::new(20), &touched);
    assert_eq!(one.to_bytes(), memory.to_bytes());
    let mut lookup = one.lookup();
    for (p, s, _) in &touched {
        assert_eq!(lookup.get(p.as_bytes()).unwrap().0, *s);
    }

    let mut added = paths.clone();
    added.insert(
        RECORD_PAGE + 5,
        (format!("{}a", paths[RECORD_PAGE + 4].0), stamp(7), [7; 20]),
    );
    let shifted = filled(
        StatRecord::parked_echoing(20, dir.path(), Some(&earlier)),
        &added,
    );
    assert_eq!(own_pages(&shifted), 3);
    assert_eq!(
        shifted.to_bytes(),
        filled(StatRecord::new(20), &added).to_bytes()
    );
}

/// The record a store holds, parked, and the records of unchanged worktrees taken since
/// it, one after another, are the same record: their identities are equal, so it is not
/// written again. One changed stamp, one path more or a small record's tail tell them
/// apart.
#[test]
fn records_that_repeat_the_stored_one_share_its_identity() {
    let dir = tempfile::tempdir().unwrap();
    for n in [40, RECORD_PAGE, 3 * RECORD_PAGE + 5] {
        let paths = many(n);
        let bytes = filled(StatRecord::new(20), &paths)
            .to_bytes()
            .unwrap()
            .into_owned();
        let stored = StatRecord::from_bytes(bytes).unwrap().park(dir.path());
        let before = filled(
            StatRecord::parked_echoing(20, dir.path(), Some(&stored)),
            &paths,
        );
        let after = filled(
            StatRecord::parked_echoing(20, dir.path(), Some(&before)),
            &paths,
        );
        assert_eq!(before.identity(), stored.identity(), "{n}");
        assert_eq!(after.identity(), stored.identity(), "{n}");
        let mut touched = paths.clone();
        touched[n - 1].1 = stamp(-5);
        let changed = filled(
            StatRecord::parked_echoing(20, dir.path(), Some(&before)),
            &touched,
        );
        assert_ne!(changed.identity(), stored.identity(), "{n}");
        let shorter = filled(
            StatRecord::parked_echoing(20, dir.path(), Some(&before)),
            &paths[..n - 1],
        );
        assert_ne!(shorter.identity(), stored.identity(), "{n}");
    }
}

fn record_pages_file(record: &StatRecord) -> std::sync::Arc<std::fs::File> {
    record.pages.as_ref().unwrap().file_for_tests()
}

#[test]
fn a_stat_record_leaves_out_what_it_cannot_hold_at_full_width() {
    let mut record = StatRecord::new(20);
    record.push(b"a", stamp(1), &[1; 20]);
    // Another device, out of order, a negative nanosecond count, another id width.
    record.push(b"b", Stamp { dev: 2, ..stamp(2) }, &[2; 20]);
    record.push(b"a", stamp(3), &[3; 20]);
    record.push(
        b"c",
        Stamp {
            mtime: (4, -1),
            ..stamp(4)
        },
        &[4; 20],
    );
    record.push(b"d", stamp(5), &[5; 32]);
    record.push(b"e", stamp(6), &[6; 20]);
    assert_eq!(record.len(), 2);
    assert!(record.get(b"b").is_none());
    assert_eq!(record.get(b"e").unwrap().0, stamp(6));
    // A record in the format of an earlier build is not one.
    let mut old = b"HSR1".to_vec();
    old.push(20);
    assert!(StatRecord::from_bytes(old).is_none());
}

use super::*;

fn fp(digest: &str, entries: &[(&str, &str)]) -> Fingerprint {
    Fingerprint {
        schema_version: FINGERPRINT_SCHEMA.into(),
        algorithm: "sha256".into(),
        digest: digest.into(),
        root: "/r".into(),
        head: None,
        entry_count: entries.len() as u64,
        change_counts: ChangeCounts::default(),
        changes: vec![],
        excluded_refs: vec![],
        includes_ignored: false,
        ignored_created: vec![],
        ignored_created_omitted: 0,
        entries: entries
            .iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect(),
        verified_by: None,
        hooks_dir: None,
        record: None,
        baseline: None,
    }
}

#[test]
fn compare_lists_added_removed_and_modified_paths_sorted() {
    let a = fp("sha256:a", &[("a", "1"), ("b", "1"), ("c", "1")]);
    let b = fp("sha256:b", &[("a", "1"), ("b", "2"), ("d", "1")]);
    let e = a.compare(&b);
    assert!(e.changed);
    assert_eq!(e.changed_files, vec!["b", "c", "d"]);
    assert_eq!(e.before.as_ref().unwrap().entries.get("c"), Some("1"));
    // The same evidence without the per-path states.
    let s = a.compare_summaries(&b);
    assert_eq!((s.changed, &s.changed_files), (e.changed, &e.changed_files));
    assert!(s.before.unwrap().entries.is_empty() && s.after.unwrap().entries.is_empty());
    assert_eq!(
        serde_json::to_value(a.compare_summaries(&b)).unwrap(),
        serde_json::to_value(&e).unwrap()
    );
}

#[test]
fn refs_excluded_on_either_side_are_not_compared() {
    let mut a = fp(
        "sha256:a",
        &[(".git/refs/heads/one", "1"), (".git/refs/heads/two", "1")],
    );
    a.excluded_refs = vec!["refs/heads/three".into()];
    // Another worktree switched from `three` to `one`, and moved `one` and `three`.
    let mut b = fp(
        "sha256:b",
        &[(".git/refs/heads/two", "1"), (".git/refs/heads/three", "2")],
    );
    b.excluded_refs = vec!["refs/heads/one".into()];
    let e = a.compare(&b);
    assert!(!e.changed, "{e:?}");
    assert!(e.changed_files.is_empty());
    // A change elsewhere is still seen.
    b.entries = [(".git/refs/heads/two", "2"), (".git/refs/heads/three", "2")]
        .into_iter()
        .collect();
    let e = a.compare(&b);
    assert!(e.changed);
    assert_eq!(e.changed_files, vec![".git/refs/heads/two"]);
}

#[test]
fn new_fields_are_left_out_of_the_json_when_empty() {
    let a = fp("sha256:a", &[("a", "1")]);
    let json = serde_json::to_value(&a).unwrap();
    assert!(json.get("excludedRefs").is_none());
    assert!(json.get("includesIgnored").is_none());
    assert!(json.get("entries").is_none());
    let back: Fingerprint = serde_json::from_value(json).unwrap();
    assert!(back.entries.is_empty());
    assert!(back.excluded_refs.is_empty());
}

#[test]
fn entries_are_a_sorted_table() {
    let mut e: Entries = [("b", "2"), ("a", "1"), ("c", "3")].into_iter().collect();
    assert_eq!(e.len(), 3);
    assert_eq!(e.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(e.get("b"), Some("2"));
    assert_eq!(&e["c"], "3");
    assert_eq!(e.get("bb"), None);
    assert!(!e.contains_key(""));
    assert!(!e.push("a0", "x"), "out of order");
    assert!(e.push("c", "4"), "same key");
    assert_eq!(e.get("c"), Some("3|4"));
    assert!(e.push("d", ""));
    assert_eq!(e.get("d"), Some(""));
    assert_eq!(e.last_key(), Some("d"));
    let json = serde_json::to_string(&e).unwrap();
    assert_eq!(json, r#"{"a":"1","b":"2","c":"3|4","d":""}"#);
    assert_eq!(serde_json::from_str::<Entries>(&json).unwrap(), e);
    assert!(Entries::new().get("a").is_none());
}

#[test]
fn entries_take_over_runs_made_elsewhere() {
    let run = |pairs: &[(&str, &str)]| {
        let mut text = String::new();
        let mut ends = Vec::new();
        for (k, v) in pairs {
            text.push_str(k);
            let key_end = text.len();
            text.push_str(v);
            ends.push((key_end, text.len()));
        }
        (text, ends)
    };
    let mut e = Entries::new();
    assert!(e.push("a", "1"));
    let (text, ends) = run(&[("b", "2"), ("c", "3")]);
    assert!(e.append_run(text, ends).is_ok());
    assert!(e.push("d", "4"));
    assert!(e.push("d", "5"));
    let whole: Entries = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4|5")]
        .into_iter()
        .collect();
    assert_eq!(e, whole);
    assert_eq!(e.get("c"), Some("3"));
    assert_eq!(e.get_index(3), Some(("d", "4|5")));
    assert_eq!(e.keys().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    // Handed back: a key not after the last one, keys out of order or equal, ends that do
    // not cut the text.
    for (text, ends) in [
        run(&[("d", "6")]),
        run(&[("f", "1"), ("e", "2")]),
        run(&[("f", "1"), ("f", "2")]),
        ("fé".to_owned(), vec![(2, 3)]),
        ("f1".to_owned(), vec![(1, 3)]),
    ] {
        let back = e.append_run(text.clone(), ends.clone());
        assert_eq!(back, Err((text, ends)));
    }
    assert_eq!(e, whole);
    let mut empty = Entries::with_capacity(4, 16);
    let (text, ends) = run(&[("x", "1")]);
    assert!(empty.append_run(text, ends).is_ok());
    assert_eq!(empty.iter().collect::<Vec<_>>(), [("x", "1")]);
}

#[test]
fn equal_digests_mean_no_change() {
    let a = fp("sha256:a", &[("a", "1")]);
    let e = a.compare(&a.clone());
    assert!(!e.changed);
    assert!(e.changed_files.is_empty());
}
