//! `--new-thread`: a fork gets a copy of the timeline; the original is left untouched.

use handoff_core::{
    AgentId, Fork, ForkMarker, HandoffContext, HandoffOutcome, NewHandoff, Route, StoreError,
    TaskAgent, TaskId, TaskStore, TimelineEvent,
};

use crate::{agent, new_task, open, records, temp, turn};

fn fork_to(worktree: &str, branch: &str) -> Fork {
    Fork {
        worktree: worktree.into(),
        branch: Some(branch.into()),
        agent: Some(TaskAgent {
            provider: AgentId::CODEX,
            model: Some("gpt-5".into()),
            account: None,
        }),
    }
}

#[test]
fn a_fork_copies_the_timeline_and_leaves_the_original_untouched() {
    let (_dir, path) = temp();
    let store = open(&path);
    let original = store.create_task(&new_task("/p/w")).unwrap();
    for record in records() {
        store.append(&original.id, &record).unwrap();
    }
    let handoff = store
        .record_handoff(
            &original.id,
            &NewHandoff {
                source: agent("claude", Some("opus")),
                target: agent("codex", None),
                context: HandoffContext::default(),
                route: Route::NewThread,
            },
        )
        .unwrap();
    let original = store.task(&original.id).unwrap();
    let before = store.timeline(&original.id).unwrap();

    let fork = store
        .fork_task(&original.id, &fork_to("/p/w-2", "handoff/continue"))
        .unwrap();
    assert_ne!(fork.id, original.id);
    assert_eq!(fork.parent, Some(original.id.clone()));
    assert_eq!(fork.project_root, original.project_root);
    assert_eq!(fork.worktree, "/p/w-2");
    assert_eq!(fork.branch.as_deref(), Some("handoff/continue"));
    assert_eq!(fork.agent.provider, AgentId::CODEX);
    assert_eq!(store.task(&fork.id).unwrap(), fork);
    assert_eq!(
        store.task_for_worktree("/p/w-2".into()).unwrap(),
        Some(fork.clone())
    );

    // The original: same row, same timeline.
    assert_eq!(store.task(&original.id).unwrap(), original);
    assert_eq!(store.timeline(&original.id).unwrap(), before);

    // The fork: a copy in the same order, with the original times, then the marker.
    let copied = store.timeline(&fork.id).unwrap();
    assert_eq!(copied.len(), before.len() + 1);
    for (copy, orig) in copied.iter().zip(&before) {
        assert_eq!(copy.task, fork.id);
        assert_eq!(copy.at, orig.at);
        assert_eq!(copy.event, orig.event);
        assert!(copy.seq > before.last().unwrap().seq);
    }
    assert!(copied.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(
        copied.last().unwrap().event,
        TimelineEvent::Forked(ForkMarker {
            from: original.id.clone(),
            through_seq: Some(before.last().unwrap().seq),
        })
    );

    // What happens on one thread afterwards stays there.
    store.append(&fork.id, &turn("on the new thread")).unwrap();
    store
        .append(&original.id, &turn("on the old thread"))
        .unwrap();
    assert_eq!(
        store.timeline(&original.id).unwrap().len(),
        before.len() + 1
    );
    assert_eq!(store.timeline(&fork.id).unwrap().len(), before.len() + 2);

    // A copied handoff is the same handoff: finishing it shows on both timelines.
    let finished = store
        .finish_handoff(&handoff.id, &HandoffOutcome::Started)
        .unwrap();
    for task in [&original.id, &fork.id] {
        assert!(
            store
                .timeline(task)
                .unwrap()
                .iter()
                .any(|e| e.event == TimelineEvent::Handoff(finished.clone()))
        );
    }
    assert!(store.integrity_problems().unwrap().is_empty());
}

#[test]
fn a_fork_keeps_the_agent_when_none_is_given_and_can_be_forked_again() {
    let (_dir, path) = temp();
    let store = open(&path);
    let original = store.create_task(&new_task("/p/w")).unwrap();
    let mut fork = fork_to("/p/w-2", "b2");
    fork.agent = None;
    let first = store.fork_task(&original.id, &fork).unwrap();
    assert_eq!(first.agent, original.agent);
    assert_eq!(
        store.timeline(&first.id).unwrap()[0].event,
        TimelineEvent::Forked(ForkMarker {
            from: original.id.clone(),
            through_seq: None,
        })
    );
    store.append(&first.id, &turn("t")).unwrap();
    let second = store
        .fork_task(&first.id, &fork_to("/p/w-3", "b3"))
        .unwrap();
    let timeline = store.timeline(&second.id).unwrap();
    let kinds: Vec<_> = timeline.iter().map(|e| e.event.kind()).collect();
    assert_eq!(kinds, ["forked", "turn", "forked"]);
    assert_eq!(second.parent, Some(first.id));
}

#[test]
fn a_fork_needs_a_new_worktree_and_branch_and_writes_nothing_otherwise() {
    let (_dir, path) = temp();
    let store = open(&path);
    let original = store.create_task(&new_task("/p/w")).unwrap();
    store.append(&original.id, &turn("t")).unwrap();
    assert!(matches!(
        store.fork_task(&original.id, &fork_to("/p/w", "other")),
        Err(StoreError::Invalid {
            field: "worktree",
            ..
        })
    ));
    assert!(matches!(
        store.fork_task(&original.id, &fork_to("/p/w-2", "main")),
        Err(StoreError::Invalid {
            field: "branch",
            ..
        })
    ));
    assert!(matches!(
        store.fork_task(&original.id, &fork_to("w-2", "b")),
        Err(StoreError::Invalid {
            field: "worktree",
            ..
        })
    ));
    assert!(matches!(
        store.fork_task(&TaskId::generate(), &fork_to("/p/w-2", "b")),
        Err(StoreError::NotFound { what: "task", .. })
    ));
    assert_eq!(
        store.tasks(None).unwrap(),
        vec![store.task(&original.id).unwrap()]
    );
    assert_eq!(store.timeline(&original.id).unwrap().len(), 1);
}

#[test]
fn a_task_keeps_its_first_configuration_state_and_a_fork_inherits_it() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    assert_eq!(store.config_state(&task.id).unwrap(), None);
    let mut first = handoff_core::ConfigState::default();
    first
        .hooks
        .insert(".git/hooks/pre-commit".into(), "file 100755 a".into());
    assert!(store.save_config_state(&task.id, &first).unwrap());
    let mut later = first.clone();
    later
        .hooks
        .insert(".git/hooks/pre-commit".into(), "file 100755 b".into());
    assert!(
        !store.save_config_state(&task.id, &later).unwrap(),
        "a later state replaced the first"
    );
    assert_eq!(store.config_state(&task.id).unwrap(), Some(first.clone()));

    let fork = store
        .fork_task(&task.id, &fork_to("/p/w-2", "handoff/continue"))
        .unwrap();
    assert_eq!(store.config_state(&fork.id).unwrap(), Some(first));
    // Reopened, the state reads back.
    drop(store);
    assert!(open(&path).config_state(&fork.id).unwrap().is_some());
}

#[test]
fn a_worktree_keeps_its_first_state_until_a_task_takes_it_over() {
    let (_dir, path) = temp();
    let store = open(&path);
    let mut first = handoff_core::ConfigState::default();
    first.hooks.insert("core.hooksPath".into(), String::new());
    let mut later = first.clone();
    later
        .hooks
        .insert(".git/hooks/pre-commit".into(), "x".into());
    let worktree = camino::Utf8Path::new("/p/w");
    assert!(store.save_worktree_config_state(worktree, &first).unwrap());
    assert!(!store.save_worktree_config_state(worktree, &later).unwrap());
    assert_eq!(
        store.worktree_config_state(worktree).unwrap(),
        Some(first.clone())
    );
    let task = store.create_task(&new_task("/p/w")).unwrap();
    assert!(store.save_config_state(&task.id, &first).unwrap());
    assert_eq!(store.worktree_config_state(worktree).unwrap(), None);
}

#[test]
fn a_worktree_reached_through_a_link_finds_the_state_it_kept() {
    // `core.worktree` can name the worktree through a symbolic link: the state kept under one
    // spelling must be found under the other, or the worktree would look new and trust all.
    let (dir, path) = temp();
    let store = open(&path);
    let real = dir.path().join("repo");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let real = camino::Utf8PathBuf::from_path_buf(real).unwrap();
    let link = camino::Utf8PathBuf::from_path_buf(link).unwrap();
    let mut kept = handoff_core::ConfigState::default();
    kept.hooks.insert("core.hooksPath".into(), String::new());
    assert!(store.save_worktree_config_state(&real, &kept).unwrap());
    assert_eq!(
        store.worktree_config_state(&link).unwrap(),
        Some(kept.clone())
    );
    assert!(!store.save_worktree_config_state(&link, &kept).unwrap());
}
