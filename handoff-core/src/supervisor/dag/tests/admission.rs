//! Admission: lineage and budgets of a new node, every refusal rule and their order.

use super::*;

#[test]
fn register_derives_lineage_budgets_and_bumps_the_revision() {
    let (mut s, _) = store(limits());
    let mut seen = None;
    let n = s
        .register(ask_root(1), |a| {
            seen = Some(a.clone());
            hash_of("request")
        })
        .unwrap();
    let a = seen.unwrap();
    assert_eq!(a.run_id(), n.node.run_id);
    assert!(n.node.run_id.starts_with("run-"));
    assert!(uuid::Uuid::parse_str(&n.node.run_id["run-".len()..]).is_ok());
    assert_eq!(n.revision, 2);
    assert_eq!(s.revision(), 2);
    assert_eq!(
        n.lineage,
        Lineage {
            root_run_id: "run-root".into(),
            run_id: n.node.run_id.clone(),
            parent_run_id: Some("run-root".into()),
            depth: 1,
            dependencies: Vec::new(),
        }
    );
    assert_eq!(a.lineage(), &n.lineage);
    assert_eq!(a.request(), &ask_root(1));
    let dag = s.snapshot();
    assert_eq!(n.remaining, dag.remaining);
    assert_eq!(a.remaining(), dag.remaining);
    assert_eq!(
        dag.remaining,
        BudgetRemaining {
            nodes: 14,
            advice_nodes: 11,
            handoff_nodes: 3
        }
    );
    assert_eq!(dag.active_count, 2);
    assert_eq!(n.node.state, NodeState::Running);
    assert_eq!(n.node.depth, 1);
    assert_eq!(n.node.caller_harness, AgentId::CODEX);
    assert_eq!(n.node.request_hash, Some(hash_of("request")));
    assert_eq!(n.node.result_hash, None);
    assert!(n.node.started_at.is_some());
    assert_eq!(n.node.finished_at, None);
    assert_eq!(dag.nodes[1], n.node);
    assert_eq!(s.node(&n.node.run_id), Some(&n.node));
    // Plenty of root time: the per-node timeout.
    assert_eq!(n.timeout, Duration::from_millis(600_000));
    s.check_invariants().unwrap();

    // Its own worker (claude) may ask in turn, one level deeper.
    let g = reg(&mut s, ask(&n.node.run_id, AgentId::CLAUDE, 2)).unwrap();
    assert_eq!(g.node.depth, 2);
    assert_eq!(g.node.parent_run_id.as_deref(), Some(&*n.node.run_id));
    assert_eq!(g.revision, 3);
}

#[test]
fn the_caller_is_derived_from_the_parent_never_asserted() {
    let (mut s, _) = store(limits());
    assert_eq!(
        refused(&mut s, ask("run-root", AgentId::CLAUDE, 1)),
        DagError::CallerMismatch {
            caller: AgentId::CLAUDE,
            expected: AgentId::CODEX
        }
    );
    let child = ok(&mut s, ask_root(1));
    assert_eq!(
        refused(&mut s, ask(&child, AgentId::CODEX, 2)),
        DagError::CallerMismatch {
            caller: AgentId::CODEX,
            expected: AgentId::CLAUDE
        }
    );
}

#[test]
fn the_depth_budget() {
    let (mut s, _) = store(BudgetLimits {
        max_depth: 2,
        max_concurrency: 8,
        ..limits()
    });
    let a = ok(&mut s, ask_root(1));
    let b = ok(&mut s, ask(&a, AgentId::CLAUDE, 2));
    assert_eq!(
        refused(&mut s, ask(&b, AgentId::CLAUDE, 3)),
        DagError::DepthExceeded { depth: 3, max: 2 }
    );
    let (mut flat, _) = store(BudgetLimits {
        max_depth: 0,
        ..limits()
    });
    assert_eq!(
        refused(&mut flat, ask_root(1)),
        DagError::DepthExceeded { depth: 1, max: 0 }
    );
}

#[test]
fn the_node_budget() {
    let (mut s, _) = store(BudgetLimits {
        max_nodes: 3,
        ..limits()
    });
    for i in 1..=2 {
        let id = ok(&mut s, ask_root(i));
        s.terminalize(&id, Status::Succeeded, Some(h(100 + i)))
            .unwrap();
    }
    assert_eq!(s.snapshot().remaining.nodes, 0);
    assert_eq!(
        refused(&mut s, ask_root(3)),
        DagError::NodesExhausted { max: 3 }
    );
}

#[test]
fn the_advice_node_budget() {
    let (mut s, _) = store(BudgetLimits {
        max_advice_nodes: 2,
        ..limits()
    });
    ok(&mut s, ask_root(1));
    ok(&mut s, ask_root(2));
    assert_eq!(
        refused(&mut s, ask_root(3)),
        DagError::AdviceNodesExhausted { max: 2 }
    );
    // A root `handoff advice` is itself an advice node.
    let (mut s, _) = store_with(
        Operation::Advice,
        DelegationMode::AdviceOnly,
        BudgetLimits {
            max_advice_nodes: 2,
            ..limits()
        },
    );
    ok(&mut s, ask_root(1));
    assert_eq!(
        refused(&mut s, ask_root(2)),
        DagError::AdviceNodesExhausted { max: 2 }
    );
}

#[test]
fn the_concurrency_budget_counts_the_root_and_frees_on_finish() {
    let (mut s, _) = store(limits());
    let ids: Vec<String> = (1..=3).map(|i| ok(&mut s, ask_root(i))).collect();
    assert_eq!(s.snapshot().active_count, 4);
    assert_eq!(
        refused(&mut s, ask_root(4)),
        DagError::ConcurrencyExhausted { max: 4 }
    );
    s.terminalize(&ids[0], Status::Failed, Some(h(200)))
        .unwrap();
    ok(&mut s, ask_root(4));
}

#[test]
fn the_root_deadline_bounds_every_node() {
    let (mut s, clock) = store(BudgetLimits {
        root_timeout_ms: 1_000,
        timeout_ms: 600,
        ..limits()
    });
    assert_eq!(s.node_timeout(), Some(Duration::from_millis(600)));
    let n = reg(&mut s, ask_root(1)).unwrap();
    assert_eq!(n.timeout, Duration::from_millis(600));

    clock.advance(Duration::from_millis(700));
    assert_eq!(s.time_left(), Duration::from_millis(300));
    let admission = s.admit(&ask_root(2)).unwrap();
    assert_eq!(admission.timeout(), Duration::from_millis(300));
    clock.advance(Duration::from_millis(50));
    // Recomputed at commit.
    let n = s.commit(admission, hash_of("r2")).unwrap();
    assert_eq!(n.timeout, Duration::from_millis(250));

    // Admitted before the deadline, committed after it.
    let late = s.admit(&ask_root(3)).unwrap();
    clock.advance(Duration::from_millis(250));
    let before = s.snapshot();
    assert_eq!(
        s.commit(late, hash_of("r3")),
        Err(DagError::RootDeadlinePassed)
    );
    assert_eq!(s.snapshot(), before);
    assert_eq!(s.time_left(), Duration::ZERO);
    assert_eq!(s.node_timeout(), None);
    assert_eq!(refused(&mut s, ask_root(3)), DagError::RootDeadlinePassed);
    // Finishing and closing still work after the deadline.
    s.terminalize("run-root", Status::TimedOut, None).unwrap();
    s.close(Status::TimedOut).unwrap();
    assert_eq!(s.status(), DagStatus::TimedOut);
}

#[test]
fn the_loop_guard_refuses_an_ancestors_intent_only() {
    let (mut s, _) = store(BudgetLimits {
        max_concurrency: 8,
        ..limits()
    });
    // The root's own intent is h(0).
    assert_eq!(
        refused(&mut s, ask_root(0)),
        DagError::RepeatedIntent {
            ancestor: "run-root".into()
        }
    );
    let a = ok(&mut s, ask_root(1));
    assert_eq!(
        refused(&mut s, ask(&a, AgentId::CLAUDE, 1)),
        DagError::RepeatedIntent {
            ancestor: a.clone()
        }
    );
    assert_eq!(
        refused(&mut s, ask(&a, AgentId::CLAUDE, 0)),
        DagError::RepeatedIntent {
            ancestor: "run-root".into()
        }
    );
    // A sibling may ask the same thing: it is not in the ancestry.
    ok(&mut s, ask_root(1));
    ok(&mut s, ask(&a, AgentId::CLAUDE, 2));
}

#[test]
fn dependency_rules() {
    let (mut s, _) = store(BudgetLimits {
        max_concurrency: 8,
        ..limits()
    });
    let good = ok(&mut s, ask_root(1));
    s.terminalize(&good, Status::Succeeded, Some(h(101)))
        .unwrap();
    let bad = ok(&mut s, ask_root(2));
    s.terminalize(&bad, Status::Failed, Some(h(102))).unwrap();
    let busy = ok(&mut s, ask_root(3));
    let with = |deps: Vec<Dependency>| NodeRequest {
        dependencies: deps,
        ..ask_root(9)
    };

    assert_eq!(
        refused(&mut s, with(vec![dep("run-nope", DependencyKind::Advises)])),
        DagError::UnknownDependency {
            run_id: "run-nope".into()
        }
    );
    assert_eq!(
        refused(&mut s, with(vec![dep(&busy, DependencyKind::Verifies)])),
        DagError::DependencyNotTerminal {
            run_id: busy.clone(),
            state: NodeState::Running
        }
    );
    assert_eq!(
        refused(&mut s, with(vec![dep("run-root", DependencyKind::Advises)])),
        DagError::DependencyNotTerminal {
            run_id: "run-root".into(),
            state: NodeState::Running
        }
    );
    assert_eq!(
        refused(&mut s, with(vec![dep(&bad, DependencyKind::Requires)])),
        DagError::DependencyNotSucceeded {
            run_id: bad.clone(),
            state: NodeState::Failed
        }
    );
    assert_eq!(
        refused(
            &mut s,
            with(vec![
                dep(&good, DependencyKind::Requires),
                dep(&good, DependencyKind::Verifies)
            ])
        ),
        DagError::DuplicateDependency {
            run_id: good.clone()
        }
    );
    let many = (0..=MAX_DEPENDENCIES)
        .map(|i| dep(&format!("run-{i}"), DependencyKind::Advises))
        .collect();
    assert_eq!(
        refused(&mut s, with(many)),
        DagError::TooManyDependencies {
            count: MAX_DEPENDENCIES + 1,
            max: MAX_DEPENDENCIES
        }
    );
    // The order within the list decides which refusal is reported.
    assert!(matches!(
        refused(
            &mut s,
            with(vec![
                dep(&bad, DependencyKind::Requires),
                dep("run-nope", DependencyKind::Advises)
            ])
        ),
        DagError::DependencyNotSucceeded { .. }
    ));
    // Self: only reachable when the id is known in advance.
    let err = s
        .admit_as(
            &with(vec![dep("run-self", DependencyKind::Advises)]),
            "run-self".into(),
        )
        .unwrap_err();
    assert_eq!(
        err,
        DagError::SelfDependency {
            run_id: "run-self".into()
        }
    );

    // `advises`/`verifies` accept any final state; `requires` needs success.
    let deps = vec![
        dep(&good, DependencyKind::Requires),
        dep(&bad, DependencyKind::Advises),
    ];
    let n = reg(&mut s, with(deps.clone())).unwrap();
    assert_eq!(n.node.dependencies, deps);
    assert_eq!(n.lineage.dependencies, deps);
    s.check_invariants().unwrap();
}

#[test]
fn parent_rules() {
    let (mut s, _) = store(limits());
    assert_eq!(
        refused(&mut s, ask("run-ghost", AgentId::CODEX, 1)),
        DagError::UnknownParent {
            run_id: "run-ghost".into()
        }
    );
    let a = ok(&mut s, ask_root(1));
    s.terminalize(&a, Status::Succeeded, Some(h(1))).unwrap();
    assert_eq!(
        refused(&mut s, ask(&a, AgentId::CLAUDE, 2)),
        DagError::ParentNotRunning {
            run_id: a.clone(),
            state: NodeState::Succeeded
        }
    );
    // A node asked for with delegation none can exist, but cannot ask in turn.
    let leaf = ok(
        &mut s,
        NodeRequest {
            delegation: DelegationMode::None,
            ..ask_root(3)
        },
    );
    assert_eq!(
        refused(&mut s, ask(&leaf, AgentId::CLAUDE, 4)),
        DagError::ParentCannotDelegate { run_id: leaf }
    );
    // A plain `run` root has no nested capability at all.
    let (mut plain, _) = store_with(Operation::Handoff, DelegationMode::None, limits());
    assert_eq!(
        refused(&mut plain, ask_root(1)),
        DagError::ParentCannotDelegate {
            run_id: "run-root".into()
        }
    );
}

#[test]
fn nested_nodes_are_advice_with_a_well_formed_intent() {
    let (mut s, _) = store(limits());
    for req in [
        NodeRequest {
            operation: Operation::Handoff,
            ..ask_root(1)
        },
        NodeRequest {
            mode: Some(Mode::Review),
            ..ask_root(1)
        },
    ] {
        assert_eq!(refused(&mut s, req), DagError::NotAdvice);
    }
    for bad in [
        "",
        "sha256:abc",
        &h(1).to_uppercase(),
        &h(1).replace("sha256:", "md5:"),
    ] {
        assert_eq!(
            refused(
                &mut s,
                NodeRequest {
                    intent_hash: bad.into(),
                    ..ask_root(1)
                }
            ),
            DagError::InvalidHash {
                field: "intentHash"
            }
        );
    }
}

#[test]
fn the_decision_order_is_the_documented_one() {
    // A request breaking every rule reports the first one.
    let everything_wrong = NodeRequest {
        parent_run_id: "run-root".into(),
        operation: Operation::Handoff,
        caller_harness: AgentId::GROK,
        target_harness: AgentId::GROK,
        mode: Some(Mode::Build),
        delegation: DelegationMode::AdviceOnly,
        intent_hash: h(0),
        dependencies: vec![dep("run-x", DependencyKind::Requires); 2],
        isolation: None,
        view: None,
        attenuated: None,
    };
    let tight = BudgetLimits {
        max_depth: 0,
        max_nodes: 1,
        max_advice_nodes: 0,
        max_concurrency: 1,
        ..limits()
    };
    let (mut s, _) = store(tight);
    assert_eq!(
        refused(&mut s, everything_wrong.clone()),
        DagError::NotAdvice
    );
    let fixed_shape = NodeRequest {
        operation: Operation::Advice,
        mode: None,
        ..everything_wrong
    };
    assert!(matches!(
        refused(&mut s, fixed_shape.clone()),
        DagError::DepthExceeded { .. }
    ));
    let (mut s, _) = store(BudgetLimits {
        max_depth: 3,
        ..tight
    });
    assert!(matches!(
        refused(&mut s, fixed_shape.clone()),
        DagError::CallerMismatch { .. }
    ));
    let from_codex = NodeRequest {
        caller_harness: AgentId::CODEX,
        ..fixed_shape
    };
    assert!(matches!(
        refused(&mut s, from_codex.clone()),
        DagError::NodesExhausted { .. }
    ));
    let (mut s, _) = store(BudgetLimits {
        max_depth: 3,
        max_nodes: 4,
        ..tight
    });
    assert!(matches!(
        refused(&mut s, from_codex.clone()),
        DagError::AdviceNodesExhausted { .. }
    ));
    let (mut s, _) = store(BudgetLimits {
        max_depth: 3,
        max_nodes: 4,
        max_advice_nodes: 4,
        ..tight
    });
    assert!(matches!(
        refused(&mut s, from_codex.clone()),
        DagError::ConcurrencyExhausted { .. }
    ));
    let (mut s, _) = store(BudgetLimits {
        max_depth: 3,
        max_nodes: 4,
        max_advice_nodes: 4,
        max_concurrency: 4,
        ..tight
    });
    assert!(matches!(
        refused(&mut s, from_codex.clone()),
        DagError::RepeatedIntent { .. }
    ));
    let new_intent = NodeRequest {
        intent_hash: h(5),
        ..from_codex
    };
    assert!(matches!(
        refused(&mut s, new_intent),
        DagError::DuplicateDependency { .. }
    ));
    // Closed and past-deadline come before everything.
    s.close(Status::Cancelled).unwrap();
    assert_eq!(
        refused(&mut s, ask("run-ghost", AgentId::GROK, 0)),
        DagError::Closed {
            status: DagStatus::Cancelled
        }
    );
}

#[test]
fn admissions_change_nothing_until_committed_and_go_stale() {
    let (mut s, _) = store(limits());
    let before = s.snapshot();
    let dropped = s.admit(&ask_root(1)).unwrap();
    drop(dropped);
    assert_eq!(s.snapshot(), before);

    let first = s.admit(&ask_root(1)).unwrap();
    let second = s.admit(&ask_root(2)).unwrap();
    assert_ne!(first.run_id(), second.run_id());
    let malformed = s.commit(first.clone(), "sha256:nope".into());
    assert_eq!(
        malformed,
        Err(DagError::InvalidHash {
            field: "requestHash"
        })
    );
    assert_eq!(s.snapshot(), before);
    s.commit(first.clone(), hash_of("1")).unwrap();
    assert_eq!(
        s.commit(second, hash_of("2")),
        Err(DagError::Stale {
            admitted: 1,
            current: 2
        })
    );
    // The same admission cannot be committed twice.
    assert!(matches!(
        s.commit(first, hash_of("1")),
        Err(DagError::Stale { .. })
    ));
    assert_eq!(s.snapshot().nodes.len(), 2);
    s.check_invariants().unwrap();
}
