//! Every record goes in and comes back out unchanged, in order.

use handoff_core::{
    AgentId, HandoffContext, HandoffId, HandoffOutcome, NewHandoff, Route, StoreError, TaskAgent,
    TaskId, TaskStore, TimelineEvent, now_iso,
};

use crate::{agent, new_task, open, records, temp, turn};

#[test]
fn tasks_round_trip() {
    let (_dir, path) = temp();
    let store = open(&path);
    let a = store.create_task(&new_task("/p/project")).unwrap();
    assert!(TaskId::parse(a.id.as_str()).is_some());
    assert_eq!(a.created_at, a.updated_at);
    assert_eq!(a.parent, None);
    let mut other = new_task("/p/other-worktree");
    other.project_root = "/p/other".into();
    other.branch = None;
    let b = store.create_task(&other).unwrap();

    assert_eq!(store.task(&a.id).unwrap(), a);
    assert_eq!(store.task(&b.id).unwrap(), b);
    assert_eq!(store.tasks(None).unwrap(), vec![a.clone(), b.clone()]);
    assert_eq!(
        store.tasks(Some("/p/other".into())).unwrap(),
        vec![b.clone()]
    );
    assert_eq!(store.tasks(Some("/nowhere".into())).unwrap(), vec![]);
    assert_eq!(
        store.task_for_worktree("/p/project".into()).unwrap(),
        Some(a.clone())
    );
    assert_eq!(store.task_for_worktree("/p/none".into()).unwrap(), None);

    // The newest task of a worktree is its current one.
    let a2 = store.create_task(&new_task("/p/project")).unwrap();
    assert_eq!(
        store.task_for_worktree("/p/project".into()).unwrap(),
        Some(a2)
    );

    // Reopening finds everything.
    drop(store);
    assert_eq!(open(&path).task(&b.id).unwrap(), b);
}

#[test]
fn agents_are_updated() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let codex = TaskAgent {
        provider: AgentId::CODEX,
        model: None,
        account: None,
    };
    let updated = store.set_agent(&task.id, &codex).unwrap();
    assert_eq!(updated.agent, codex);
    assert!(updated.updated_at >= task.updated_at);
    assert_eq!(updated.created_at, task.created_at);
    assert_eq!(store.task(&task.id).unwrap(), updated);

    let missing = TaskId::generate();
    assert!(matches!(
        store.set_agent(&missing, &codex),
        Err(StoreError::NotFound { what: "task", .. })
    ));
    let bad = TaskAgent {
        model: Some(String::new()),
        ..codex
    };
    assert!(matches!(
        store.set_agent(&task.id, &bad),
        Err(StoreError::Invalid { field: "model", .. })
    ));
}

#[test]
fn every_kind_of_entry_round_trips_in_order() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let mut appended = Vec::new();
    for (i, record) in records().into_iter().enumerate() {
        // Times out of order on purpose: the timeline is in the order entries were accepted.
        let at = format!("2025-0{}-01T00:00:00.000Z", 9 - i % 9);
        let entry = store.append_at(&task.id, &at, &record).unwrap();
        assert_eq!(entry.at, at);
        assert_eq!(entry.task, task.id);
        assert_eq!(entry.event, TimelineEvent::from(record));
        appended.push(entry);
    }
    let now = store.append(&task.id, &turn("now")).unwrap();
    appended.push(now);

    let timeline = store.timeline(&task.id).unwrap();
    assert_eq!(timeline, appended);
    assert!(timeline.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(store.task(&task.id).unwrap().updated_at >= task.updated_at);

    // Reopened, the same.
    drop(store);
    assert_eq!(open(&path).timeline(&task.id).unwrap(), appended);
}

#[test]
fn timelines_are_per_task() {
    let (_dir, path) = temp();
    let store = open(&path);
    let a = store.create_task(&new_task("/p/a")).unwrap();
    let b = store.create_task(&new_task("/p/b")).unwrap();
    for i in 0..10 {
        let task = if i % 2 == 0 { &a } else { &b };
        store.append(&task.id, &turn(&format!("{i}"))).unwrap();
    }
    let summaries = |t: &TaskId| -> Vec<String> {
        store
            .timeline(t)
            .unwrap()
            .into_iter()
            .map(|e| match e.event {
                TimelineEvent::Turn(t) => t.summary,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(summaries(&a.id), ["0", "2", "4", "6", "8"]);
    assert_eq!(summaries(&b.id), ["1", "3", "5", "7", "9"]);
}

fn new_handoff() -> NewHandoff {
    NewHandoff {
        source: agent("claude", Some("opus")),
        target: agent("codex", Some("gpt-5")),
        context: HandoffContext {
            note_path: Some("/p/w/.handoff/note.md".into()),
            note_digest: Some(format!("sha256:{}", "1".repeat(64))),
            transcript_messages: Some(42),
            message: Some("finish the parser".into()),
            details: Some(serde_json::Map::from_iter([
                ("session".into(), serde_json::json!("abc")),
                ("carried".into(), serde_json::json!({"tools": [1, 2]})),
            ])),
        },
        route: Route::SameThread,
    }
}

#[test]
fn handoffs_are_recorded_then_finished() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    store.append(&task.id, &turn("before")).unwrap();

    let row = store.record_handoff(&task.id, &new_handoff()).unwrap();
    assert!(HandoffId::parse(row.id.as_str()).is_some());
    assert_eq!(row.outcome, HandoffOutcome::Pending);
    assert_eq!(row.finished_at, None);
    assert_eq!(row.context, new_handoff().context);
    assert_eq!(store.handoff(&row.id).unwrap(), row);
    let timeline = store.timeline(&task.id).unwrap();
    assert_eq!(timeline.len(), 2);
    assert_eq!(timeline[1].event, TimelineEvent::Handoff(row.clone()));
    assert_eq!(timeline[1].at, row.started_at);

    let outcome = HandoffOutcome::NotStarted {
        reason: "codex is not installed".into(),
    };
    let finished = store.finish_handoff(&row.id, &outcome).unwrap();
    assert_eq!(finished.outcome, outcome);
    assert!(finished.finished_at.as_deref() >= Some(row.started_at.as_str()));
    assert_eq!(
        store.timeline(&task.id).unwrap()[1].event,
        TimelineEvent::Handoff(finished.clone())
    );

    assert!(matches!(
        store.finish_handoff(&row.id, &HandoffOutcome::Started),
        Err(StoreError::AlreadyFinished { id, .. }) if id == row.id
    ));
    let second = store.record_handoff(&task.id, &new_handoff()).unwrap();
    assert!(matches!(
        store.finish_handoff(&second.id, &HandoffOutcome::Pending),
        Err(StoreError::Invalid {
            field: "outcome",
            ..
        })
    ));
    let dry = store
        .finish_handoff(&second.id, &HandoffOutcome::DryRun)
        .unwrap();
    assert_eq!(dry.outcome, HandoffOutcome::DryRun);

    let missing = HandoffId::generate();
    assert!(matches!(
        store.handoff(&missing),
        Err(StoreError::NotFound {
            what: "handoff",
            ..
        })
    ));
    assert!(matches!(
        store.finish_handoff(&missing, &HandoffOutcome::Started),
        Err(StoreError::NotFound {
            what: "handoff",
            ..
        })
    ));
}

#[test]
fn details_learnt_later_are_added_to_a_handoff() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let row = store.record_handoff(&task.id, &new_handoff()).unwrap();
    let added = serde_json::Map::from_iter([
        (
            "continuity".into(),
            serde_json::json!({"result": "continued"}),
        ),
        ("session".into(), serde_json::json!("def")),
    ]);
    let updated = store.add_handoff_details(&row.id, &added).unwrap();
    let details = updated.context.details.clone().unwrap();
    assert_eq!(details["session"], "def", "a key already there is replaced");
    assert_eq!(details["carried"], serde_json::json!({"tools": [1, 2]}));
    assert_eq!(details["continuity"]["result"], "continued");
    assert_eq!(store.handoff(&row.id).unwrap(), updated);
    assert_eq!(
        store.timeline(&task.id).unwrap()[0].event,
        TimelineEvent::Handoff(updated)
    );
    // A handoff recorded without details gets some.
    let bare = NewHandoff {
        context: HandoffContext::default(),
        ..new_handoff()
    };
    let row = store.record_handoff(&task.id, &bare).unwrap();
    let updated = store.add_handoff_details(&row.id, &added).unwrap();
    assert_eq!(updated.context.details.unwrap().len(), 2);
    assert!(matches!(
        store.add_handoff_details(&HandoffId::generate(), &added),
        Err(StoreError::NotFound {
            what: "handoff",
            ..
        })
    ));
}

#[test]
fn a_minimal_handoff_round_trips() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let new = NewHandoff {
        source: agent("kiro", None),
        target: agent("opencode", None),
        context: HandoffContext::default(),
        route: Route::NoteOnly,
    };
    let row = store.record_handoff(&task.id, &new).unwrap();
    let row = store
        .finish_handoff(&row.id, &HandoffOutcome::Started)
        .unwrap();
    assert_eq!(store.handoff(&row.id).unwrap(), row);
    assert_eq!(row.context, HandoffContext::default());
    assert_eq!(row.route, Route::NoteOnly);
}

#[test]
fn bad_input_and_missing_tasks_are_refused() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let missing = TaskId::generate();

    assert!(matches!(
        store.create_task(&new_task("relative/worktree")),
        Err(StoreError::Invalid {
            field: "worktree",
            ..
        })
    ));
    assert!(matches!(
        store.append_at(&task.id, "yesterday", &turn("x")),
        Err(StoreError::Invalid { field: "at", .. })
    ));
    assert!(matches!(
        store.append(&missing, &turn("x")),
        Err(StoreError::NotFound { what: "task", id }) if id == missing.as_str()
    ));
    assert!(matches!(
        store.timeline(&missing),
        Err(StoreError::NotFound { what: "task", .. })
    ));
    assert!(matches!(
        store.task(&missing),
        Err(StoreError::NotFound { what: "task", .. })
    ));
    assert!(matches!(
        store.record_handoff(&missing, &new_handoff()),
        Err(StoreError::NotFound { what: "task", .. })
    ));
    let mut relative_note = new_handoff();
    relative_note.context.note_path = Some("note.md".into());
    assert!(matches!(
        store.record_handoff(&task.id, &relative_note),
        Err(StoreError::Invalid {
            field: "notePath",
            ..
        })
    ));
    // Nothing half-written: the refused writes left no rows behind.
    assert_eq!(store.timeline(&task.id).unwrap(), vec![]);
    assert_eq!(store.tasks(None).unwrap().len(), 1);
    assert!(store.integrity_problems().unwrap().is_empty());
}

#[test]
fn values_that_do_not_read_back_are_reported_as_corrupt() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    store.record_handoff(&task.id, &new_handoff()).unwrap();
    crate::raw(&path)
        .execute("UPDATE handoffs SET route = 'carrier-pigeon'", [])
        .unwrap();
    let err = store.timeline(&task.id).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Corrupt {
                what: "handoffs.route",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!err.to_string().contains('\n'));

    crate::raw(&path)
        .execute("UPDATE tasks SET provider = 'Not An Id'", [])
        .unwrap();
    assert!(matches!(
        store.task(&task.id),
        Err(StoreError::Corrupt {
            what: "tasks.provider",
            ..
        })
    ));
    // The schema itself refuses details that are not a JSON object.
    let refused = crate::raw(&path).execute("UPDATE handoffs SET details = '[1]'", []);
    assert!(refused.is_err());
}

#[test]
fn timestamps_are_iso_utc_milliseconds() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let entry = store.append(&task.id, &records().remove(0)).unwrap();
    for at in [&task.created_at, &entry.at] {
        handoff_core::check_timestamp("at", at).unwrap();
    }
    assert!(entry.at <= now_iso());
}

#[test]
fn a_worktrees_stat_record_is_kept_replaced_and_found_from_inside_it() {
    use handoff_core::TaskStore;
    let (_dir, path) = crate::temp();
    let store = crate::open(&path);
    let wt = camino::Utf8Path::new("/work/repo");
    assert_eq!(store.stat_record(wt).unwrap(), None);
    store.save_stat_record(wt, b"one").unwrap();
    store.save_stat_record(wt, b"two").unwrap();
    // Found from a directory inside it, not from a sibling that shares a prefix.
    assert_eq!(
        store.stat_record(&wt.join("src/deep")).unwrap(),
        Some((wt.to_owned(), b"two".to_vec()))
    );
    assert_eq!(
        store
            .stat_record(camino::Utf8Path::new("/work/repository"))
            .unwrap(),
        None
    );
    // A worktree inside another is the deeper match.
    let inner = wt.join("vendor/lib");
    store.save_stat_record(&inner, b"inner").unwrap();
    assert_eq!(
        store.stat_record(&inner.join("x")).unwrap(),
        Some((inner.clone(), b"inner".to_vec()))
    );
}

#[test]
fn a_saved_fingerprints_basis_is_kept_by_digest_and_worktree_and_the_oldest_let_go() {
    use handoff_core::{FingerprintBasis, TaskStore};
    let (_dir, path) = crate::temp();
    let store = crate::open(&path);
    let wt = camino::Utf8Path::new("/work/repo");
    let other = camino::Utf8Path::new("/work/clone");
    let basis = |n: usize, worktree: &camino::Utf8Path| FingerprintBasis {
        digest: format!("sha256:{n:064x}"),
        worktree: worktree.to_owned(),
        record: vec![n as u8; 70_000 + n],
        baseline: format!("{{\"n\":{n}}}").into_bytes(),
    };
    let first = basis(0, wt);
    assert_eq!(store.fingerprint_basis(&first.digest, wt).unwrap(), None);
    store.save_fingerprint_basis(&first).unwrap();
    // The same digest of another worktree is another basis.
    store.save_fingerprint_basis(&basis(0, other)).unwrap();
    assert_eq!(
        store.fingerprint_basis(&first.digest, wt).unwrap(),
        Some(first.clone())
    );
    assert_eq!(
        store.fingerprint_basis(&first.digest, other).unwrap(),
        Some(basis(0, other))
    );
    // Saved again: replaced, not doubled.
    let again = FingerprintBasis {
        record: b"again".to_vec(),
        ..first.clone()
    };
    store.save_fingerprint_basis(&again).unwrap();
    assert_eq!(
        store.fingerprint_basis(&first.digest, wt).unwrap(),
        Some(again)
    );
    // Sixteen more of the same worktree: the oldest goes, the other worktree's stays.
    for n in 1..=16 {
        store.save_fingerprint_basis(&basis(n, wt)).unwrap();
    }
    assert_eq!(store.fingerprint_basis(&first.digest, wt).unwrap(), None);
    assert_eq!(
        store.fingerprint_basis(&basis(1, wt).digest, wt).unwrap(),
        Some(basis(1, wt))
    );
    assert!(
        store
            .fingerprint_basis(&first.digest, other)
            .unwrap()
            .is_some()
    );
    // What is not a digest, or a baseline that is not a JSON object, is not kept.
    let bad = FingerprintBasis {
        digest: "md5:00".to_owned(),
        ..basis(20, wt)
    };
    assert!(store.save_fingerprint_basis(&bad).is_err());
    let bad = FingerprintBasis {
        baseline: b"[1]".to_vec(),
        ..basis(21, wt)
    };
    assert!(store.save_fingerprint_basis(&bad).is_err());
}
