//! Tests of the DAG store: fixtures, and the store's lifecycle (creation, node times,
//! terminalize, close) and refusal messages; admission and invariants have their own files.

mod admission;
mod invariants;

use super::*;
use crate::names::{AgentId, Mode, Operation};
use crate::request::*;
use sha2::{Digest, Sha256};

fn h(n: u8) -> String {
    format!("sha256:{}", hex::encode([n; 32]))
}

fn hash_of(text: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

fn limits() -> BudgetLimits {
    BudgetLimits::default()
}

fn root_request(op: Operation, delegation: DelegationMode, l: BudgetLimits) -> Request {
    let (advice, handoff) = match op {
        Operation::Advice => (1, 0),
        Operation::Handoff => (0, 1),
    };
    Request {
        schema_version: REQUEST_SCHEMA.into(),
        operation: op,
        caller: Caller {
            harness: AgentId::CLAUDE,
            provenance: CallerProvenance::RootAsserted,
        },
        target: Target {
            harness: AgentId::CODEX,
        },
        mode: (op == Operation::Handoff).then_some(Mode::Build),
        cwd: "/repo".into(),
        instructions: "do the thing".into(),
        selection: Selection {
            requested: SelectionRequested {
                model: None,
                effort: None,
                max_turns: None,
            },
            resolved: SelectionResolved {
                model: PROVIDER_DEFAULT.into(),
                effort: PROVIDER_DEFAULT.into(),
                max_turns: None,
            },
            provenance: SelectionProvenance {
                model: SelectionSource::ProviderDefault,
                effort: SelectionSource::ProviderDefault,
                max_turns: SelectionSource::ProviderDefault,
            },
        },
        grants: Grants {
            requested: GrantsRequested {
                bash: true,
                web_search: false,
                mcp: false,
            },
            resolved: GrantsResolved {
                bash: true,
                web_search: false,
                mcp: false,
                write: op == Operation::Handoff,
            },
            provenance: GrantsProvenance {
                bash: GrantSource::OperationDefault,
                web_search: GrantSource::OperationDefault,
                mcp: GrantSource::OperationDefault,
                write: GrantSource::ModeDerived,
            },
            mcp: McpGrant {
                digest: None,
                servers: Vec::new(),
            },
        },
        delegation: Delegation {
            mode: delegation,
            provenance: DelegationSource::VerbDerived,
        },
        lineage: Lineage {
            root_run_id: "run-root".into(),
            run_id: "run-root".into(),
            parent_run_id: None,
            depth: 0,
            dependencies: Vec::new(),
        },
        budgets: Budgets {
            limits: l,
            remaining: BudgetRemaining {
                nodes: l.max_nodes - 1,
                advice_nodes: l.max_advice_nodes - advice,
                handoff_nodes: l.max_handoff_nodes - handoff,
            },
        },
        allow_git_config: false,
        include_ignored: false,
        intent_hash: h(0),
    }
}

const STARTED_AT: &str = "2025-01-02T03:04:05.678Z";

fn store_with(op: Operation, delegation: DelegationMode, l: BudgetLimits) -> (DagStore, Clock) {
    let started = Instant::now();
    let clock = Clock::manual(started);
    let store = DagStore::with_clock(
        &root_request(op, delegation, l),
        STARTED_AT,
        started,
        clock.clone(),
    );
    (store, clock)
}

fn store(l: BudgetLimits) -> (DagStore, Clock) {
    store_with(Operation::Handoff, DelegationMode::AdviceOnly, l)
}

/// An advice request from `parent`'s worker (`caller`) to claude.
fn ask(parent: &str, caller: AgentId, intent: u8) -> NodeRequest {
    NodeRequest {
        parent_run_id: parent.into(),
        operation: Operation::Advice,
        caller_harness: caller,
        target_harness: AgentId::CLAUDE,
        mode: None,
        delegation: DelegationMode::AdviceOnly,
        intent_hash: h(intent),
        dependencies: Vec::new(),
        isolation: Some(crate::isolation::Isolation::unconfined()),
        view: Some(crate::workspace::WorktreeView::Snapshot),
        attenuated: None,
    }
}

/// From the root's worker (codex).
fn ask_root(intent: u8) -> NodeRequest {
    ask("run-root", AgentId::CODEX, intent)
}

fn reg(s: &mut DagStore, req: NodeRequest) -> Result<RegisteredNode, DagError> {
    s.register(req, |a| hash_of(a.run_id()))
}

fn ok(s: &mut DagStore, req: NodeRequest) -> String {
    let n = reg(s, req).unwrap();
    s.check_invariants().unwrap();
    n.node.run_id
}

/// Registers `req`, expects a refusal, and checks the store did not change.
fn refused(s: &mut DagStore, req: NodeRequest) -> DagError {
    let before = s.snapshot();
    let err = reg(s, req).unwrap_err();
    assert_eq!(s.snapshot(), before, "a refusal changed the DAG: {err}");
    s.check_invariants().unwrap();
    err
}

fn dep(run_id: &str, kind: DependencyKind) -> Dependency {
    Dependency {
        run_id: run_id.into(),
        kind,
    }
}

#[test]
fn a_new_store_is_the_engines_single_node_dag() {
    for op in [Operation::Handoff, Operation::Advice] {
        let req = root_request(op, DelegationMode::AdviceOnly, limits());
        let s = DagStore::new(&req, STARTED_AT, Instant::now());
        let dag = s.snapshot();
        assert_eq!(dag.schema_version, DAG_SCHEMA);
        assert_eq!(dag.root_run_id, "run-root");
        assert_eq!(dag.revision, 1);
        assert_eq!(dag.status, DagStatus::Running);
        assert_eq!(dag.limits, req.budgets.limits);
        assert_eq!(dag.remaining, req.budgets.remaining);
        assert_eq!(dag.active_count, 1);
        assert_eq!(
            dag.nodes,
            vec![DagNode {
                run_id: "run-root".into(),
                parent_run_id: None,
                depth: 0,
                operation: op,
                caller_harness: AgentId::CLAUDE,
                target_harness: AgentId::CODEX,
                mode: req.mode,
                delegation: DelegationMode::AdviceOnly,
                intent_hash: h(0),
                dependencies: Vec::new(),
                state: NodeState::Running,
                request_hash: None,
                result_hash: None,
                started_at: Some(STARTED_AT.into()),
                finished_at: None,
                isolation: None,
                view: None,
                attenuated: None,
            }]
        );
        s.check_invariants().unwrap();
        assert_eq!(s.running(), vec!["run-root".to_owned()]);
        let json = serde_json::to_value(&dag).unwrap();
        assert_eq!(json["activeCount"], 1);
        assert_eq!(serde_json::from_value::<Dag>(json).unwrap(), dag);
    }
}

#[test]
fn node_times_follow_the_clock_from_the_root_start() {
    let (mut s, clock) = store(limits());
    clock.advance(Duration::from_millis(1_234));
    let n = reg(&mut s, ask_root(1)).unwrap();
    let started = n.node.started_at.unwrap();
    assert_eq!(started.len(), STARTED_AT.len());
    assert!(started.ends_with('Z'));
    let deadline = s.deadline_at();
    assert_eq!(deadline.len(), STARTED_AT.len());
    assert!(started < deadline);
    assert_eq!(
        s.deadline().duration_since(clock.now()),
        Duration::from_millis(1_800_000 - 1_234)
    );
}

#[test]
fn terminalize_records_the_outcome_once() {
    let (mut s, _) = store(limits());
    let a = ok(&mut s, ask_root(1));
    let before = s.snapshot();
    assert_eq!(
        s.terminalize("run-x", Status::Failed, None),
        Err(DagError::UnknownNode {
            run_id: "run-x".into()
        })
    );
    assert_eq!(
        s.terminalize("run-root", Status::Succeeded, Some(h(1))),
        Err(DagError::RootResultHash)
    );
    assert_eq!(
        s.terminalize(&a, Status::Succeeded, Some("sha256:x".into())),
        Err(DagError::InvalidHash {
            field: "resultHash"
        })
    );
    assert_eq!(s.snapshot(), before);

    s.terminalize(&a, Status::TimedOut, Some(h(7))).unwrap();
    assert_eq!(s.revision(), before.revision + 1);
    let node = s.node(&a).unwrap().clone();
    assert_eq!(node.state, NodeState::TimedOut);
    assert_eq!(node.result_hash, Some(h(7)));
    assert!(node.finished_at.is_some());
    assert_eq!(s.snapshot().active_count, 1);

    let before = s.snapshot();
    assert_eq!(
        s.terminalize(&a, Status::Succeeded, None),
        Err(DagError::NodeNotRunning {
            run_id: a.clone(),
            state: NodeState::TimedOut
        })
    );
    assert_eq!(s.snapshot(), before);
    // A nested node may end without a result (e.g. it could not start).
    let b = ok(&mut s, ask_root(2));
    s.terminalize(&b, Status::NotRun, None).unwrap();
    assert_eq!(s.node(&b).unwrap().state, NodeState::NotRun);
    s.terminalize("run-root", Status::Succeeded, None).unwrap();
    assert_eq!(s.snapshot().active_count, 0);
    // The DAG itself stays open until closed.
    assert_eq!(s.status(), DagStatus::Running);
    s.check_invariants().unwrap();
}

#[test]
fn cancel_turns_every_unfinished_node_cancelled() {
    let (mut s, _) = store(limits());
    let done = ok(&mut s, ask_root(1));
    s.terminalize(&done, Status::Succeeded, Some(h(1))).unwrap();
    let a = ok(&mut s, ask_root(2));
    let b = ok(&mut s, ask(&a, AgentId::CLAUDE, 3));
    let rev = s.revision();
    s.close(Status::Cancelled).unwrap();
    assert_eq!(s.revision(), rev + 1);
    let dag = s.snapshot();
    assert_eq!(dag.status, DagStatus::Cancelled);
    assert_eq!(dag.active_count, 0);
    for id in ["run-root", a.as_str(), b.as_str()] {
        let n = s.node(id).unwrap();
        assert_eq!(n.state, NodeState::Cancelled, "{id}");
        assert!(n.finished_at.is_some());
    }
    assert_eq!(s.node(&done).unwrap().state, NodeState::Succeeded);
    assert!(s.running().is_empty());
    s.check_invariants().unwrap();

    // Closed: nothing changes any more.
    let before = s.snapshot();
    assert_eq!(
        s.close(Status::Succeeded),
        Err(DagError::Closed {
            status: DagStatus::Cancelled
        })
    );
    assert_eq!(
        s.terminalize(&a, Status::Succeeded, Some(h(9))),
        Err(DagError::NodeNotRunning {
            run_id: a.clone(),
            state: NodeState::Cancelled
        })
    );
    assert_eq!(
        refused(&mut s, ask_root(5)),
        DagError::Closed {
            status: DagStatus::Cancelled
        }
    );
    assert_eq!(s.snapshot(), before);
}

#[test]
fn other_closings_block_unfinished_nodes_and_keep_the_roots_status() {
    let (mut s, _) = store(limits());
    let a = ok(&mut s, ask_root(1));
    s.terminalize("run-root", Status::Succeeded, None).unwrap();
    s.close(Status::Succeeded).unwrap();
    assert_eq!(s.status(), DagStatus::Succeeded);
    assert_eq!(s.node("run-root").unwrap().state, NodeState::Succeeded);
    assert_eq!(s.node(&a).unwrap().state, NodeState::Blocked);
    s.check_invariants().unwrap();

    for (status, dag_status) in [
        (Status::Rejected, DagStatus::Failed),
        (Status::NotRun, DagStatus::Failed),
        (Status::TimedOut, DagStatus::TimedOut),
        (Status::Blocked, DagStatus::Blocked),
    ] {
        let (mut s, _) = store(limits());
        s.close(status).unwrap();
        assert_eq!(s.status(), dag_status);
        assert_eq!(s.node("run-root").unwrap().state, NodeState::Blocked);
        s.check_invariants().unwrap();
    }
}

#[test]
fn refusals_are_one_bounded_line() {
    let (mut s, _) = store(limits());
    let nasty = format!("run-\n{}", "x".repeat(10_000));
    let err = refused(&mut s, ask(&nasty, AgentId::CODEX, 1));
    let text = err.to_string();
    assert!(!text.contains('\n'));
    assert!(text.len() < 400, "{}", text.len());
    let DagError::UnknownParent { run_id } = err else {
        panic!("wrong variant")
    };
    assert!(run_id.ends_with('…'));
    for e in [
        DagError::Closed {
            status: DagStatus::TimedOut,
        },
        DagError::RootDeadlinePassed,
        DagError::ParentNotRunning {
            run_id: "r".into(),
            state: NodeState::NotRun,
        },
        DagError::Stale {
            admitted: 1,
            current: 2,
        },
        DagError::GrantNotHeld {
            grant: GrantKind::WebSearch,
        },
    ] {
        let t = e.to_string();
        assert!(!t.contains('\n') && !t.is_empty(), "{t}");
    }
    assert_eq!(
        DagError::ParentNotRunning {
            run_id: "r".into(),
            state: NodeState::TimedOut
        }
        .to_string(),
        "parent run \"r\" is no longer running (timed_out)"
    );
}
