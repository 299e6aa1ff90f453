//! Properties: whatever is appended reads back, in the order it was accepted.

use handoff_core::{
    AgentId, AgentRef, CheckRun, Checkpoint, Record, TaskId, TaskStore, TimelineEvent, Turn,
};
use proptest::prelude::*;

use crate::{new_task, open, temp};

fn author() -> impl Strategy<Value = AgentRef> {
    (
        prop::sample::select(AgentId::BUILTIN.to_vec()),
        prop::option::of("[a-z0-9.-]{1,20}"),
    )
        .prop_map(|(provider, model)| AgentRef { provider, model })
}

fn record() -> impl Strategy<Value = Record> {
    prop_oneof![
        (author(), any::<String>()).prop_map(|(author, summary)| Turn { author, summary }.into()),
        (
            author(),
            "[0-9a-f]{40}",
            any::<String>(),
            prop::collection::vec("[^\u{0}]{1,30}", 0..5),
            prop::collection::vec("[^\u{0}]{1,30}", 0..5),
        )
            .prop_map(|(author, commit, message, committed, uncommitted)| {
                Checkpoint {
                    commit,
                    author,
                    message,
                    committed,
                    uncommitted,
                }
                .into()
            }),
        (".{1,40}", prop::option::of(any::<i32>()), "[0-9a-f]{64}").prop_map(
            |(command, exit_code, commit)| CheckRun {
                command,
                exit_code,
                commit,
            }
            .into()
        ),
    ]
}

/// A valid timestamp, in no particular order.
fn timestamp() -> impl Strategy<Value = String> {
    (
        2000u32..2100,
        1u32..=12,
        1u32..=28,
        0u32..24,
        0u32..60,
        0u32..60,
        0u32..1000,
    )
        .prop_map(|(y, mo, d, h, mi, s, ms)| {
            format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn appended_entries_read_back_in_order(
        batch in prop::collection::vec((timestamp(), record()), 0..40),
    ) {
        let (_dir, path) = temp();
        let store = open(&path);
        let task = store.create_task(&new_task("/p/w")).unwrap();
        let mut appended = Vec::new();
        for (at, record) in &batch {
            appended.push(store.append_at(&task.id, at, record).unwrap());
        }
        let timeline = store.timeline(&task.id).unwrap();
        prop_assert_eq!(&timeline, &appended);
        prop_assert!(timeline.windows(2).all(|w| w[0].seq < w[1].seq));
        for (entry, (at, record)) in timeline.iter().zip(batch) {
            prop_assert_eq!(&entry.at, &at);
            prop_assert_eq!(&entry.event, &TimelineEvent::from(record));
        }
    }

    #[test]
    fn generated_ids_parse_back_and_do_not_repeat(n in 1usize..200) {
        let ids: Vec<TaskId> = (0..n).map(|_| TaskId::generate()).collect();
        let unique: std::collections::BTreeSet<_> = ids.iter().collect();
        prop_assert_eq!(unique.len(), n);
        for id in &ids {
            prop_assert_eq!(TaskId::parse(id.as_str()), Some(id.clone()));
        }
    }
}
