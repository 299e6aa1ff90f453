use super::*;
use crate::names::{Mode, Operation, Status};

fn agent(id: &str) -> AgentRef {
    AgentRef {
        provider: AgentId::parse(id).unwrap(),
        model: Some("m-1".into()),
    }
}

#[test]
fn ids_round_trip_and_are_checked() {
    let t = TaskId::generate();
    assert!(t.as_str().starts_with("task-"));
    assert_eq!(TaskId::parse(t.as_str()), Some(t.clone()));
    let h = HandoffId::generate();
    assert_eq!(HandoffId::parse(h.as_str()), Some(h.clone()));
    assert_eq!(TaskId::parse(h.as_str()), None);
    for bad in [
        "",
        "task-",
        "task-not-a-uuid",
        "TASK-00000000-0000-0000-0000-000000000000",
        "task-00000000-0000-0000-0000-00000000000A",
        "task-00000000000000000000000000000000",
        "handoff-00000000-0000-0000-0000-000000000000",
    ] {
        assert!(TaskId::parse(bad).is_none(), "{bad}");
    }
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(serde_json::from_str::<TaskId>(&json).unwrap(), t);
    assert!(serde_json::from_str::<TaskId>("\"task-x\"").is_err());
}

#[test]
fn timeline_entries_serialize_with_a_kind_tag() {
    let entries = vec![
        TimelineEvent::Turn(Turn {
            author: agent("claude"),
            summary: "did a thing".into(),
        }),
        TimelineEvent::Handoff(HandoffRow {
            id: HandoffId::generate(),
            source: agent("claude"),
            target: agent("codex"),
            context: HandoffContext {
                transcript_messages: Some(3),
                details: Some(serde_json::Map::from_iter([("k".into(), 1.into())])),
                ..HandoffContext::default()
            },
            route: Route::SameThread,
            outcome: HandoffOutcome::NotStarted {
                reason: "codex missing".into(),
            },
            started_at: now_iso(),
            finished_at: Some(now_iso()),
        }),
        TimelineEvent::Forked(ForkMarker {
            from: TaskId::generate(),
            through_seq: Some(4),
        }),
        TimelineEvent::DelegatedRun(DelegatedRun {
            run_id: "r1".into(),
            operation: Operation::Handoff,
            mode: Some(Mode::Build),
            target: AgentId::CODEX,
            status: Status::Succeeded,
            exit_code: 0,
            result_path: None,
            result_hash: None,
            host: None,
        }),
    ];
    for event in entries {
        let entry = TimelineEntry {
            seq: 1,
            task: TaskId::generate(),
            at: now_iso(),
            event,
        };
        let json = serde_json::to_value(&entry).unwrap();
        assert_eq!(json["event"]["kind"], entry.event.kind());
        let back: TimelineEntry = serde_json::from_value(json).unwrap();
        assert_eq!(back, entry);
    }
    let outcome = serde_json::to_value(HandoffOutcome::DryRun).unwrap();
    assert_eq!(outcome, serde_json::json!({"state": "dry-run"}));
}

#[test]
fn outcomes_round_trip_through_their_parts() {
    for o in [
        HandoffOutcome::Pending,
        HandoffOutcome::Started,
        HandoffOutcome::NotStarted { reason: "x".into() },
        HandoffOutcome::DryRun,
        HandoffOutcome::NoteWritten,
    ] {
        let back = HandoffOutcome::from_parts(o.as_str(), o.reason().map(str::to_owned));
        assert_eq!(back, Some(o));
    }
    assert_eq!(
        HandoffOutcome::from_parts("started", Some("x".into())),
        None
    );
    assert_eq!(HandoffOutcome::from_parts("not-started", None), None);
    for r in Route::ALL {
        assert_eq!(Route::parse(r.as_str()), Some(r));
    }
}

#[test]
fn timestamps_are_checked() {
    check_timestamp("at", &now_iso()).unwrap();
    check_timestamp("at", "2025-01-31T23:59:60.999Z").unwrap();
    for bad in [
        "",
        "2025-01-31T12:34:56Z",
        "2025-01-31 12:34:56.789Z",
        "2025-13-31T12:34:56.789Z",
        "2025-01-31T24:00:00.000Z",
        "2025-01-31T12:34:56.789+00:00",
        "2025-01-31T12:34:56.7890",
    ] {
        assert!(
            matches!(
                check_timestamp("at", bad),
                Err(StoreError::Invalid { field: "at", .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn records_are_validated() {
    let task = NewTask {
        project_root: "relative".into(),
        worktree: "/w".into(),
        branch: None,
        agent: TaskAgent {
            provider: AgentId::CLAUDE,
            model: None,
            account: None,
        },
    };
    assert!(matches!(
        task.validate(),
        Err(StoreError::Invalid {
            field: "projectRoot",
            ..
        })
    ));
    let check = Record::from(CheckRun {
        command: "cargo test".into(),
        exit_code: Some(0),
        commit: "ABC".into(),
    });
    assert!(matches!(
        check.validate(),
        Err(StoreError::Invalid {
            field: "commit",
            ..
        })
    ));
    let turn = Record::from(Turn {
        author: AgentRef {
            provider: AgentId::CODEX,
            model: Some(String::new()),
        },
        summary: String::new(),
    });
    assert!(matches!(
        turn.validate(),
        Err(StoreError::Invalid { field: "model", .. })
    ));
}

#[test]
fn store_errors_are_one_line() {
    let e = StoreError::Locked {
        path: "/s/tasks.sqlite3".into(),
        waited_ms: 5000,
    };
    let msg = e.to_string();
    assert!(!msg.contains('\n'));
    assert!(msg.contains("/s/tasks.sqlite3"));
    assert!(msg.contains("another handoff process"));
}
