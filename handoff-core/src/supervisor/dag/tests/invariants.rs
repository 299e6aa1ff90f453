//! The invariant checker, and random operation sequences that must keep every invariant.

use super::*;
use proptest::prelude::*;

/// The shell withheld because it writes temporary directories the caller cannot.
fn attenuation() -> crate::isolation::Attenuation {
    crate::isolation::Attenuation {
        withheld: vec![crate::request::GrantKind::Bash],
        because: vec![crate::isolation::WeakerLevel {
            dimension: crate::isolation::Dimension::FilesystemWrite,
            caller: "none".into(),
            asked: "temp".into(),
        }],
        handoff_sandbox: false,
    }
}

#[test]
fn the_invariant_checker_catches_inconsistent_snapshots() {
    let (mut s, _) = store(limits());
    let a = ok(&mut s, ask_root(1));
    let good = s.snapshot();
    check_dag_invariants(&good).unwrap();
    type Breaker = (&'static str, Box<dyn Fn(&mut Dag)>);
    let broken: Vec<Breaker> = vec![
        ("active", Box::new(|d| d.active_count += 1)),
        ("remaining", Box::new(|d| d.remaining.nodes += 1)),
        ("advice", Box::new(|d| d.remaining.advice_nodes -= 1)),
        ("revision", Box::new(|d| d.revision = 0)),
        ("schema", Box::new(|d| d.schema_version = "x".into())),
        ("dup", Box::new(|d| d.nodes[1].run_id = "run-root".into())),
        (
            "caller",
            Box::new(|d| d.nodes[1].caller_harness = AgentId::GROK),
        ),
        ("depth", Box::new(|d| d.nodes[1].depth = 2)),
        ("parent", Box::new(|d| d.nodes[1].parent_run_id = None)),
        ("loop", Box::new(|d| d.nodes[1].intent_hash = h(0))),
        ("mode", Box::new(|d| d.nodes[1].mode = Some(Mode::Build))),
        ("reqhash", Box::new(|d| d.nodes[1].request_hash = None)),
        (
            "roothash",
            Box::new(|d| d.nodes[0].request_hash = Some(h(1))),
        ),
        (
            "finished",
            Box::new(|d| d.nodes[1].finished_at = Some("t".into())),
        ),
        ("closed", Box::new(|d| d.status = DagStatus::Succeeded)),
        (
            "dep",
            Box::new(|d| d.nodes[1].dependencies = vec![dep("run-root", DependencyKind::Advises)]),
        ),
        (
            "budget",
            Box::new(|d| {
                d.limits.max_concurrency = 1;
            }),
        ),
        ("empty", Box::new(|d| d.nodes.clear())),
        (
            "rootattenuated",
            Box::new(|d| d.nodes[0].attenuated = Some(attenuation())),
        ),
        (
            "nowithheld",
            Box::new(|d| {
                d.nodes[1].attenuated = Some(crate::isolation::Attenuation {
                    withheld: vec![],
                    ..attenuation()
                })
            }),
        ),
        (
            "noreason",
            Box::new(|d| {
                d.nodes[1].attenuated = Some(crate::isolation::Attenuation {
                    because: vec![],
                    ..attenuation()
                })
            }),
        ),
        (
            "isolation",
            Box::new(|d| {
                // The root confined to nothing less than no network; its adviser reaching any host.
                d.nodes[0].isolation = Some(crate::isolation::Isolation {
                    network: crate::isolation::Network::None,
                    ..crate::isolation::Isolation::unconfined()
                });
            }),
        ),
    ];
    let mut attenuated = good.clone();
    attenuated.nodes[1].attenuated = Some(attenuation());
    check_dag_invariants(&attenuated).unwrap();
    for (name, f) in broken {
        let mut d = good.clone();
        f(&mut d);
        assert!(check_dag_invariants(&d).is_err(), "{name} not caught");
    }
    assert_eq!(s.node(&a).unwrap().state, NodeState::Running);
    // The node records the isolation it was admitted with; an unknown root's constrains nothing.
    assert_eq!(
        s.node(&a).unwrap().isolation,
        Some(crate::isolation::Isolation::unconfined())
    );
    assert_eq!(good.nodes[0].isolation, None);
}

// ---- property: random operation sequences keep every invariant -------------------------

#[derive(Debug, Clone)]
enum Op {
    Register {
        parent: usize,
        target: usize,
        intent: u8,
        wrong_caller: bool,
        handoff: bool,
        no_delegation: bool,
        deps: Vec<(usize, u8)>,
    },
    Terminalize {
        node: usize,
        status: usize,
        hash: bool,
    },
    Close {
        status: usize,
    },
    Advance {
        ms: u64,
    },
}

const STATUSES: [Status; 7] = [
    Status::Succeeded,
    Status::Blocked,
    Status::Failed,
    Status::TimedOut,
    Status::Cancelled,
    Status::Rejected,
    Status::NotRun,
];
const TARGETS: [AgentId; 3] = [AgentId::CODEX, AgentId::CLAUDE, AgentId::GROK];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        24 => (
            0usize..20,
            0usize..3,
            0u8..6,
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.1),
            prop::collection::vec((0usize..20, 0u8..3), 0..3),
        )
            .prop_map(|(parent, target, intent, wrong_caller, handoff, no_delegation, deps)| {
                Op::Register {
                    parent,
                    target,
                    intent,
                    wrong_caller,
                    handoff,
                    no_delegation,
                    deps,
                }
            }),
        8 => (0usize..20, 0usize..7, any::<bool>())
            .prop_map(|(node, status, hash)| Op::Terminalize { node, status, hash }),
        1 => (0usize..7).prop_map(|status| Op::Close { status }),
        2 => (0u64..400).prop_map(|ms| Op::Advance { ms }),
    ]
}

fn limits_strategy() -> impl Strategy<Value = (BudgetLimits, bool)> {
    (
        0u32..5,
        1u32..10,
        0u32..10,
        1u32..3,
        1u32..5,
        200u64..3_000,
        100u64..3_000,
        any::<bool>(),
    )
        .prop_map(|(d, n, a, ho, c, root, node, advice_root)| {
            (
                BudgetLimits {
                    max_depth: d,
                    max_nodes: n,
                    max_advice_nodes: if advice_root { a.max(1) } else { a },
                    max_handoff_nodes: ho,
                    max_concurrency: c,
                    root_timeout_ms: root,
                    timeout_ms: node.min(root),
                },
                advice_root,
            )
        })
}

fn apply(s: &mut DagStore, clock: &Clock, op: &Op) -> Result<(), DagError> {
    let ids: Vec<String> = s.snapshot().nodes.into_iter().map(|n| n.run_id).collect();
    let running = s.running();
    // Indices 18.. name no node, 15..18 any node, below that a running node (so that
    // most requests reach the later rules).
    let pick = |i: usize| match i {
        18.. => "run-missing".to_owned(),
        15.. => ids[i % ids.len()].clone(),
        _ if running.is_empty() => ids[i % ids.len()].clone(),
        _ => running[i % running.len()].clone(),
    };
    match op {
        Op::Register {
            parent,
            target,
            intent,
            wrong_caller,
            handoff,
            no_delegation,
            deps,
        } => {
            let parent_id = pick(*parent);
            let parent_target = s
                .node(&parent_id)
                .map_or(AgentId::CODEX, |n| n.target_harness.clone());
            let caller = if *wrong_caller {
                TARGETS
                    .iter()
                    .find(|t| **t != parent_target)
                    .cloned()
                    .unwrap_or(AgentId::KIRO)
            } else {
                parent_target
            };
            let kinds = [
                DependencyKind::Requires,
                DependencyKind::Advises,
                DependencyKind::Verifies,
            ];
            let req = NodeRequest {
                parent_run_id: parent_id,
                operation: if *handoff {
                    Operation::Handoff
                } else {
                    Operation::Advice
                },
                caller_harness: caller,
                target_harness: TARGETS[*target].clone(),
                mode: None,
                delegation: if *no_delegation {
                    DelegationMode::None
                } else {
                    DelegationMode::AdviceOnly
                },
                intent_hash: h(*intent),
                dependencies: deps
                    .iter()
                    .map(|(i, k)| dep(&pick(*i), kinds[usize::from(*k)]))
                    .collect(),
                isolation: None,
                view: None,
                attenuated: None,
            };
            let left = s.time_left();
            let per_node = Duration::from_millis(s.limits().timeout_ms);
            let n = reg(s, req)?;
            assert!(n.timeout <= per_node && n.timeout <= left && !n.timeout.is_zero());
            assert_eq!(n.remaining, s.snapshot().remaining);
            assert_eq!(n.revision, s.revision());
            Ok(())
        }
        Op::Terminalize { node, status, hash } => {
            // Mostly a nested node: finishing the root early ends most sequences.
            let nested: Vec<&String> = running.iter().skip(1).collect();
            let id = match *node {
                17 => s.root_run_id().to_owned(),
                18.. => "run-missing".to_owned(),
                _ if !nested.is_empty() => nested[*node % nested.len()].clone(),
                _ if ids.len() > 1 => ids[1 + *node % (ids.len() - 1)].clone(),
                _ => "run-missing".to_owned(),
            };
            let is_root = id == s.root_run_id();
            let hash = (*hash && !is_root).then(|| h(200));
            s.terminalize(&id, STATUSES[*status], hash)
        }
        Op::Close { status } => s.close(STATUSES[*status]),
        Op::Advance { ms } => {
            clock.advance(Duration::from_millis(*ms));
            Ok(())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn random_operations_keep_every_invariant(
        (l, advice_root) in limits_strategy(),
        ops in prop::collection::vec(op(), 0..48),
    ) {
        let op_kind = if advice_root { Operation::Advice } else { Operation::Handoff };
        let (mut s, clock) = store_with(op_kind, DelegationMode::AdviceOnly, l);
        prop_assert!(s.check_invariants().is_ok());
        for op in &ops {
            let before = s.snapshot();
            let mutates = !matches!(op, Op::Advance { .. });
            match apply(&mut s, &clock, op) {
                Ok(()) if mutates => prop_assert_eq!(s.revision(), before.revision + 1),
                _ => prop_assert_eq!(&s.snapshot(), &before),
            }
            if let Err(e) = s.check_invariants() {
                return Err(TestCaseError::fail(format!("{e} after {op:?}")));
            }
            // Closing settles everything.
            if s.status() != DagStatus::Running {
                prop_assert!(s.running().is_empty());
            }
        }
    }
}
