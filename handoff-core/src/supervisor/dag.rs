//! The advice DAG store: every node of one root run, the budgets, the loop guard, dependency
//! rules and the root deadline. Pure: no I/O, no locking (the caller wraps it as it needs).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use super::clock::Clock;
use crate::names::{AgentId, Mode, Operation, Status};
use crate::redact::quote;
use crate::request::{
    BudgetLimits, BudgetRemaining, DelegationMode, Dependency, DependencyKind, GrantKind, Lineage,
    MAX_DEPENDENCIES, Request,
};
use crate::result::{DAG_SCHEMA, Dag, DagNode, DagStatus, NodeState};
use crate::timestamp::iso;

/// What a nested request asks of the DAG: everything [`DagStore::admit`] needs to decide.
///
/// The supervisor fills it from the capability it verified (parent, caller) and the request it
/// prepared (target, intent, dependencies); the worker never asserts the caller itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRequest {
    /// The node that asks: the run the capability token was minted for.
    pub parent_run_id: String,
    /// Must be [`Operation::Advice`].
    pub operation: Operation,
    /// The agent that asks; must be the parent's target.
    pub caller_harness: AgentId,
    /// The agent that answers.
    pub target_harness: AgentId,
    /// Must be `None` (advice has no mode).
    pub mode: Option<Mode>,
    /// The new node's own nested capability.
    pub delegation: DelegationMode,
    /// `sha256:<hex>` intent of the prepared request (see [`crate::intent_hash`]).
    pub intent_hash: String,
    /// Typed links to earlier, finished nodes.
    pub dependencies: Vec<Dependency>,
}

/// A request the DAG would accept now, with the lineage and budgets the request must carry.
///
/// Produced by [`DagStore::admit`] without changing the store; [`DagStore::commit`] turns it into
/// a node. Dropping it leaves no trace. It is valid only for the store that produced it and
/// only while that store's revision is unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    run_id: String,
    lineage: Lineage,
    remaining: BudgetRemaining,
    timeout: Duration,
    revision: u64,
    request: NodeRequest,
}

impl Admission {
    /// The run id the node will have (`run-<uuid>`).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The lineage the node's request must carry.
    pub fn lineage(&self) -> &Lineage {
        &self.lineage
    }

    /// The budgets left once the node is registered (the request's `budgets.remaining`).
    pub fn remaining(&self) -> BudgetRemaining {
        self.remaining
    }

    /// The node's time budget as of the admission: min(per-node timeout, time left until the
    /// root deadline). [`RegisteredNode::timeout`] is recomputed at commit.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The request that was admitted.
    pub fn request(&self) -> &NodeRequest {
        &self.request
    }
}

/// A node just added to the DAG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredNode {
    /// The node as it appears in snapshots (state `running`).
    pub node: DagNode,
    /// The node's lineage.
    pub lineage: Lineage,
    /// Budgets left after this node.
    pub remaining: BudgetRemaining,
    /// The node's time budget: min(per-node timeout, time left until the root deadline).
    pub timeout: Duration,
    /// The DAG's revision after the registration.
    pub revision: u64,
}

/// Why the DAG refused a change. Every variant leaves the store unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// The DAG is closed.
    #[error("the advice DAG is already closed ({})", dag_status_name(*status))]
    Closed {
        /// Its final status.
        status: DagStatus,
    },
    /// The root deadline has passed.
    #[error("the root deadline has passed; no nested node can start")]
    RootDeadlinePassed,
    /// The parent is not a node of this DAG.
    #[error("parent run {run_id:?} is not a node of this DAG")]
    UnknownParent {
        /// The run named (quoted, at most 128 bytes).
        run_id: String,
    },
    /// The parent has finished.
    #[error("parent run {run_id:?} is no longer running ({})", state_name(*state))]
    ParentNotRunning {
        /// The parent.
        run_id: String,
        /// Its state.
        state: NodeState,
    },
    /// The parent's delegation is `none`.
    #[error("parent run {run_id:?} has no nested capability (delegation none)")]
    ParentCannotDelegate {
        /// The parent.
        run_id: String,
    },
    /// The node is not advice (operation `handoff`, or a mode).
    #[error("a nested node must be read-only advice (operation advice, no mode)")]
    NotAdvice,
    /// A hash is not `sha256:<64 lowercase hex>`.
    #[error("{field} must be sha256:<64 lowercase hex>")]
    InvalidHash {
        /// `intentHash`, `requestHash` or `resultHash`.
        field: &'static str,
    },
    /// The depth budget is spent.
    #[error("depth {depth} exceeds the depth budget ({max})")]
    DepthExceeded {
        /// The depth the node would have.
        depth: u32,
        /// `maxDepth`.
        max: u32,
    },
    /// The caller is not the parent's target.
    #[error("caller {caller} is not the parent's target {expected}")]
    CallerMismatch {
        /// The caller given.
        caller: AgentId,
        /// The parent's target.
        expected: AgentId,
    },
    /// The node budget is spent.
    #[error("node budget exhausted ({max} nodes)")]
    NodesExhausted {
        /// `maxNodes`.
        max: u32,
    },
    /// The advice-node budget is spent.
    #[error("advice-node budget exhausted ({max} advice nodes)")]
    AdviceNodesExhausted {
        /// `maxAdviceNodes`.
        max: u32,
    },
    /// Too many nodes are running.
    #[error("concurrency budget exhausted ({max} nodes running, the root included)")]
    ConcurrencyExhausted {
        /// `maxConcurrency`.
        max: u32,
    },
    /// An ancestor asked the same thing (loop guard).
    #[error("loop guard: ancestor run {ancestor:?} has the same intent")]
    RepeatedIntent {
        /// The ancestor with the same intent hash.
        ancestor: String,
    },
    /// More than [`MAX_DEPENDENCIES`] dependencies.
    #[error("{count} dependencies exceed the limit of {max}")]
    TooManyDependencies {
        /// How many were given.
        count: usize,
        /// [`MAX_DEPENDENCIES`].
        max: usize,
    },
    /// A run is named twice among the dependencies.
    #[error("dependency on run {run_id:?} is given twice")]
    DuplicateDependency {
        /// The run named twice.
        run_id: String,
    },
    /// A dependency names no node of this DAG.
    #[error("dependency on run {run_id:?}, which is not a node of this DAG")]
    UnknownDependency {
        /// The run named.
        run_id: String,
    },
    /// A node depends on itself.
    #[error("run {run_id:?} cannot depend on itself")]
    SelfDependency {
        /// The node.
        run_id: String,
    },
    /// A dependency has not finished.
    #[error("dependency on run {run_id:?}, which has not finished ({})", state_name(*state))]
    DependencyNotTerminal {
        /// The dependency.
        run_id: String,
        /// Its state.
        state: NodeState,
    },
    /// A `requires` dependency did not succeed.
    #[error("run {run_id:?} is required but ended {}", state_name(*state))]
    DependencyNotSucceeded {
        /// The dependency.
        run_id: String,
        /// Its state.
        state: NodeState,
    },
    /// The store changed between [`DagStore::admit`] and [`DagStore::commit`].
    #[error("the DAG changed since the admission (revision {admitted} → {current}); admit again")]
    Stale {
        /// The revision the admission was made at.
        admitted: u64,
        /// The store's revision now.
        current: u64,
    },
    /// No node has this run id.
    #[error("run {run_id:?} is not a node of this DAG")]
    UnknownNode {
        /// The run named.
        run_id: String,
    },
    /// The node has already finished.
    #[error("run {run_id:?} has already finished ({})", state_name(*state))]
    NodeNotRunning {
        /// The node.
        run_id: String,
        /// Its state.
        state: NodeState,
    },
    /// A result hash was given for the root (the root result embeds the DAG).
    #[error("the root node carries no result hash (its result embeds the DAG)")]
    RootResultHash,
    /// A child asked for a grant its parent lacks.
    #[error("a nested request cannot gain {grant}, which its parent lacks")]
    GrantNotHeld {
        /// The grant.
        grant: GrantKind,
    },
    /// A child asked for an MCP server its parent lacks.
    #[error("a nested request cannot use MCP server {server:?}, which its parent lacks")]
    McpServerNotHeld {
        /// The server name (quoted, at most 128 bytes).
        server: String,
    },
    /// A child named an MCP server twice.
    #[error("MCP server {server:?} is requested twice")]
    DuplicateMcpServer {
        /// The server name (quoted, at most 128 bytes).
        server: String,
    },
}

/// The advice DAG of one root run.
///
/// Created with the root node `running` at revision 1. Every successful mutation
/// ([`register`](Self::register)/[`commit`](Self::commit), [`terminalize`](Self::terminalize),
/// [`close`](Self::close)) bumps the revision by exactly one; every refusal leaves the store
/// as it was. Counters in [`snapshot`](Self::snapshot) are computed from the nodes, so they are
/// consistent by construction ([`check_dag_invariants`] verifies it).
#[derive(Debug, Clone)]
pub struct DagStore {
    root_run_id: String,
    revision: u64,
    status: DagStatus,
    limits: BudgetLimits,
    nodes: Vec<DagNode>,
    index: HashMap<String, usize>,
    clock: Clock,
    started: Instant,
    started_wall: OffsetDateTime,
    deadline: Instant,
    node_timeout: Duration,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    nodes: u32,
    advice: u32,
    handoff: u32,
    running: u32,
}

impl DagStore {
    /// The DAG of a root run on the system clock. `started_at` is the root result's
    /// `timing.startedAt` and `started` the instant the root run started: the root deadline is
    /// `started + rootTimeoutMs`.
    pub fn new(root: &Request, started_at: &str, started: Instant) -> DagStore {
        DagStore::with_clock(root, started_at, started, Clock::system())
    }

    /// [`DagStore::new`] on a given clock.
    pub fn with_clock(
        root: &Request,
        started_at: &str,
        started: Instant,
        clock: Clock,
    ) -> DagStore {
        let limits = root.budgets.limits;
        let root_timeout = Duration::from_millis(limits.root_timeout_ms);
        let since_start = clock.now().saturating_duration_since(started);
        let node = DagNode {
            run_id: root.lineage.run_id.clone(),
            parent_run_id: None,
            depth: 0,
            operation: root.operation,
            caller_harness: root.caller.harness.clone(),
            target_harness: root.target.harness.clone(),
            mode: root.mode,
            delegation: root.delegation.mode,
            intent_hash: root.intent_hash.clone(),
            dependencies: Vec::new(),
            state: NodeState::Running,
            request_hash: None,
            result_hash: None,
            started_at: Some(started_at.to_owned()),
            finished_at: None,
        };
        DagStore {
            root_run_id: root.lineage.root_run_id.clone(),
            revision: 1,
            status: DagStatus::Running,
            limits,
            index: HashMap::from([(node.run_id.clone(), 0)]),
            nodes: vec![node],
            clock,
            started,
            started_wall: OffsetDateTime::now_utc() - since_start,
            deadline: started.checked_add(root_timeout).unwrap_or(started),
            node_timeout: Duration::from_millis(limits.timeout_ms),
        }
    }

    /// The root run id.
    pub fn root_run_id(&self) -> &str {
        &self.root_run_id
    }

    /// The current revision.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The DAG's status.
    pub fn status(&self) -> DagStatus {
        self.status
    }

    /// The budget limits.
    pub fn limits(&self) -> BudgetLimits {
        self.limits
    }

    /// A node by run id.
    pub fn node(&self, run_id: &str) -> Option<&DagNode> {
        self.index.get(run_id).and_then(|&i| self.nodes.get(i))
    }

    /// The root deadline on the monotonic clock.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The root deadline as ISO-8601 UTC with milliseconds.
    pub fn deadline_at(&self) -> String {
        iso(self.wall(self.deadline))
    }

    /// Time left until the root deadline (zero once it has passed).
    pub fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(self.clock.now())
    }

    /// The time budget a node started now would get: min(per-node timeout, time left), or
    /// `None` once the root deadline has passed.
    pub fn node_timeout(&self) -> Option<Duration> {
        let left = self.time_left();
        (!left.is_zero()).then(|| self.node_timeout.min(left))
    }

    /// The snapshot the contract describes; counters are computed from the nodes.
    pub fn snapshot(&self) -> Dag {
        let c = self.counts();
        Dag {
            schema_version: DAG_SCHEMA.into(),
            root_run_id: self.root_run_id.clone(),
            revision: self.revision,
            status: self.status,
            limits: self.limits,
            remaining: self.remaining(c),
            active_count: c.running,
            nodes: self.nodes.clone(),
        }
    }

    /// Checks the snapshot against every invariant ([`check_dag_invariants`]) and the store's own
    /// index.
    pub fn check_invariants(&self) -> Result<(), String> {
        check_dag_invariants(&self.snapshot())?;
        if self.index.len() != self.nodes.len()
            || self
                .nodes
                .iter()
                .enumerate()
                .any(|(i, n)| self.index.get(&n.run_id) != Some(&i))
        {
            return Err("the run-id index disagrees with the nodes".into());
        }
        if self.root_run_id != self.nodes.first().map_or("", |n| n.run_id.as_str()) {
            return Err("the root run id is not the first node's".into());
        }
        Ok(())
    }

    /// Decides whether `req` may become a node now, without changing anything. On success,
    /// returns the run id, lineage, budgets and time budget the node's request must carry.
    ///
    /// # Decision order (also that of [`DagStore::register`])
    ///
    /// The first failing rule is returned; a refusal never changes the store.
    ///
    /// 1. the DAG is still `running` — [`DagError::Closed`];
    /// 2. the root deadline has not passed — [`DagError::RootDeadlinePassed`];
    /// 3. the parent is a node of this DAG — [`DagError::UnknownParent`];
    /// 4. the parent is `running` — [`DagError::ParentNotRunning`];
    /// 5. the parent's delegation is `advice-only` — [`DagError::ParentCannotDelegate`];
    /// 6. the new node is advice (operation `advice`, no mode; its delegation is at most the
    ///    parent's, which step 5 makes any value) — [`DagError::NotAdvice`]; its intent hash is
    ///    `sha256:<64 hex>` — [`DagError::InvalidHash`];
    /// 7. depth = parent depth + 1 ≤ `maxDepth` — [`DagError::DepthExceeded`];
    /// 8. the caller is the parent's target (derived, never asserted) —
    ///    [`DagError::CallerMismatch`];
    /// 9. nodes < `maxNodes` — [`DagError::NodesExhausted`];
    /// 10. advice nodes < `maxAdviceNodes` — [`DagError::AdviceNodesExhausted`];
    /// 11. running nodes (the root included) < `maxConcurrency` —
    ///     [`DagError::ConcurrencyExhausted`];
    /// 12. loop guard: no ancestor (parent, …, root) has the same intent hash —
    ///     [`DagError::RepeatedIntent`];
    /// 13. dependencies: at most [`MAX_DEPENDENCIES`] — [`DagError::TooManyDependencies`]; no run
    ///     named twice — [`DagError::DuplicateDependency`]; then each in order: it is not the
    ///     new node — [`DagError::SelfDependency`], it exists — [`DagError::UnknownDependency`],
    ///     it is terminal — [`DagError::DependencyNotTerminal`], and a `requires` target
    ///     `succeeded` — [`DagError::DependencyNotSucceeded`] (`advises`/`verifies` accept any
    ///     final state).
    ///
    /// [`DagStore::commit`] then checks that the store did not change since the admission
    /// ([`DagError::Stale`]), the deadline again, and the request hash's syntax.
    pub fn admit(&self, req: &NodeRequest) -> Result<Admission, DagError> {
        self.admit_as(req, format!("run-{}", uuid::Uuid::new_v4()))
    }

    fn admit_as(&self, req: &NodeRequest, run_id: String) -> Result<Admission, DagError> {
        // 1-2. The DAG accepts nodes at all.
        if self.status != DagStatus::Running {
            return Err(DagError::Closed {
                status: self.status,
            });
        }
        let left = self.time_left();
        if left.is_zero() {
            return Err(DagError::RootDeadlinePassed);
        }
        // 3-5. The parent.
        let parent = self
            .node(&req.parent_run_id)
            .ok_or_else(|| DagError::UnknownParent {
                run_id: quote(&req.parent_run_id),
            })?;
        if parent.state != NodeState::Running {
            return Err(DagError::ParentNotRunning {
                run_id: parent.run_id.clone(),
                state: parent.state,
            });
        }
        if parent.delegation != DelegationMode::AdviceOnly {
            return Err(DagError::ParentCannotDelegate {
                run_id: parent.run_id.clone(),
            });
        }
        // 6. The node's shape.
        if req.operation != Operation::Advice || req.mode.is_some() {
            return Err(DagError::NotAdvice);
        }
        if !is_sha256(&req.intent_hash) {
            return Err(DagError::InvalidHash {
                field: "intentHash",
            });
        }
        // 7-8. Depth and caller.
        let depth = parent.depth.saturating_add(1);
        if depth > self.limits.max_depth {
            return Err(DagError::DepthExceeded {
                depth,
                max: self.limits.max_depth,
            });
        }
        if req.caller_harness != parent.target_harness {
            return Err(DagError::CallerMismatch {
                caller: req.caller_harness.clone(),
                expected: parent.target_harness.clone(),
            });
        }
        // 9-11. Budgets.
        let c = self.counts();
        if c.nodes >= self.limits.max_nodes {
            return Err(DagError::NodesExhausted {
                max: self.limits.max_nodes,
            });
        }
        if c.advice >= self.limits.max_advice_nodes {
            return Err(DagError::AdviceNodesExhausted {
                max: self.limits.max_advice_nodes,
            });
        }
        if c.running >= self.limits.max_concurrency {
            return Err(DagError::ConcurrencyExhausted {
                max: self.limits.max_concurrency,
            });
        }
        // 12. Loop guard.
        if let Some(ancestor) = self
            .ancestors(parent)
            .find(|a| a.intent_hash == req.intent_hash)
        {
            return Err(DagError::RepeatedIntent {
                ancestor: ancestor.run_id.clone(),
            });
        }
        // 13. Dependencies.
        self.check_dependencies(&req.dependencies, &run_id)?;

        let after = Counts {
            nodes: c.nodes + 1,
            advice: c.advice + 1,
            ..c
        };
        Ok(Admission {
            lineage: Lineage {
                root_run_id: self.root_run_id.clone(),
                run_id: run_id.clone(),
                parent_run_id: Some(parent.run_id.clone()),
                depth,
                dependencies: req.dependencies.clone(),
            },
            run_id,
            remaining: self.remaining(after),
            timeout: self.node_timeout.min(left),
            revision: self.revision,
            request: req.clone(),
        })
    }

    fn check_dependencies(&self, deps: &[Dependency], run_id: &str) -> Result<(), DagError> {
        if deps.len() > MAX_DEPENDENCIES {
            return Err(DagError::TooManyDependencies {
                count: deps.len(),
                max: MAX_DEPENDENCIES,
            });
        }
        let mut seen = HashSet::new();
        for d in deps {
            if !seen.insert(d.run_id.as_str()) {
                return Err(DagError::DuplicateDependency {
                    run_id: quote(&d.run_id),
                });
            }
        }
        for d in deps {
            if d.run_id == run_id {
                return Err(DagError::SelfDependency {
                    run_id: quote(&d.run_id),
                });
            }
            let target = self
                .node(&d.run_id)
                .ok_or_else(|| DagError::UnknownDependency {
                    run_id: quote(&d.run_id),
                })?;
            if target.state == NodeState::Running {
                return Err(DagError::DependencyNotTerminal {
                    run_id: target.run_id.clone(),
                    state: target.state,
                });
            }
            if d.kind == DependencyKind::Requires && target.state != NodeState::Succeeded {
                return Err(DagError::DependencyNotSucceeded {
                    run_id: target.run_id.clone(),
                    state: target.state,
                });
            }
        }
        Ok(())
    }

    /// Turns an admission into a `running` node whose request hashes to `request_hash`.
    ///
    /// Refused with [`DagError::Stale`] when the store's revision changed since the admission
    /// (admit again), with [`DagError::RootDeadlinePassed`] when the deadline passed meanwhile,
    /// and with [`DagError::InvalidHash`] for a malformed hash. The returned time budget is
    /// computed now.
    pub fn commit(
        &mut self,
        admission: Admission,
        request_hash: String,
    ) -> Result<RegisteredNode, DagError> {
        if admission.revision != self.revision || admission.lineage.root_run_id != self.root_run_id
        {
            return Err(DagError::Stale {
                admitted: admission.revision,
                current: self.revision,
            });
        }
        let now = self.clock.now();
        let left = self.deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(DagError::RootDeadlinePassed);
        }
        if !is_sha256(&request_hash) {
            return Err(DagError::InvalidHash {
                field: "requestHash",
            });
        }
        let Admission {
            run_id,
            lineage,
            remaining,
            request,
            ..
        } = admission;
        let node = DagNode {
            run_id: run_id.clone(),
            parent_run_id: lineage.parent_run_id.clone(),
            depth: lineage.depth,
            operation: request.operation,
            caller_harness: request.caller_harness,
            target_harness: request.target_harness,
            mode: request.mode,
            delegation: request.delegation,
            intent_hash: request.intent_hash,
            dependencies: request.dependencies,
            state: NodeState::Running,
            request_hash: Some(request_hash),
            result_hash: None,
            started_at: Some(iso(self.wall(now))),
            finished_at: None,
        };
        self.index.insert(run_id, self.nodes.len());
        self.nodes.push(node.clone());
        self.revision += 1;
        Ok(RegisteredNode {
            node,
            lineage,
            remaining,
            timeout: self.node_timeout.min(left),
            revision: self.revision,
        })
    }

    /// [`admit`](Self::admit) then [`commit`](Self::commit) in one step: `request_hash` builds
    /// the node's request from the admission (its lineage, remaining budgets and timeout) and
    /// returns the request's hash. Nothing changes unless the node is registered.
    pub fn register(
        &mut self,
        req: NodeRequest,
        request_hash: impl FnOnce(&Admission) -> String,
    ) -> Result<RegisteredNode, DagError> {
        let admission = self.admit(&req)?;
        let hash = request_hash(&admission);
        self.commit(admission, hash)
    }

    /// Records that a running node finished with `status` (and, for a nested node, the hash of
    /// its result). The root takes no result hash ([`DagError::RootResultHash`]).
    pub fn terminalize(
        &mut self,
        run_id: &str,
        status: Status,
        result_hash: Option<String>,
    ) -> Result<(), DagError> {
        let i = *self
            .index
            .get(run_id)
            .ok_or_else(|| DagError::UnknownNode {
                run_id: quote(run_id),
            })?;
        let now = iso(self.wall(self.clock.now()));
        let Some(node) = self.nodes.get_mut(i) else {
            return Err(DagError::UnknownNode {
                run_id: quote(run_id),
            });
        };
        if node.state != NodeState::Running {
            return Err(DagError::NodeNotRunning {
                run_id: node.run_id.clone(),
                state: node.state,
            });
        }
        match &result_hash {
            Some(_) if node.parent_run_id.is_none() => return Err(DagError::RootResultHash),
            Some(h) if !is_sha256(h) => {
                return Err(DagError::InvalidHash {
                    field: "resultHash",
                });
            }
            _ => {}
        }
        node.state = NodeState::from(status);
        node.result_hash = result_hash;
        node.finished_at = Some(now);
        self.revision += 1;
        Ok(())
    }

    /// Closes the DAG with the root's final status: every node still running becomes
    /// `cancelled` when `status` is cancelled, else `blocked`, and the DAG's status becomes
    /// [`DagStatus::closing`]`(status)`. Terminalize the root first so that it keeps its own
    /// status. A closed DAG refuses every further change ([`DagError::Closed`] or
    /// [`DagError::NodeNotRunning`]).
    pub fn close(&mut self, status: Status) -> Result<(), DagError> {
        if self.status != DagStatus::Running {
            return Err(DagError::Closed {
                status: self.status,
            });
        }
        let now = iso(self.wall(self.clock.now()));
        let state = if status == Status::Cancelled {
            NodeState::Cancelled
        } else {
            NodeState::Blocked
        };
        for node in &mut self.nodes {
            if node.state == NodeState::Running {
                node.state = state;
                node.finished_at = Some(now.clone());
            }
        }
        self.status = DagStatus::closing(status);
        self.revision += 1;
        Ok(())
    }

    /// The run ids of the nodes still running, root first.
    pub fn running(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.state == NodeState::Running)
            .map(|n| n.run_id.clone())
            .collect()
    }

    /// `node`, its parent, …, the root.
    fn ancestors<'a>(&'a self, node: &'a DagNode) -> impl Iterator<Item = &'a DagNode> + 'a {
        std::iter::successors(Some(node), move |n| {
            n.parent_run_id.as_deref().and_then(|p| self.node(p))
        })
        .take(self.nodes.len())
    }

    fn counts(&self) -> Counts {
        count(&self.nodes)
    }

    fn remaining(&self, c: Counts) -> BudgetRemaining {
        BudgetRemaining {
            nodes: self.limits.max_nodes.saturating_sub(c.nodes),
            advice_nodes: self.limits.max_advice_nodes.saturating_sub(c.advice),
            handoff_nodes: self.limits.max_handoff_nodes.saturating_sub(c.handoff),
        }
    }

    fn wall(&self, at: Instant) -> OffsetDateTime {
        self.started_wall + at.saturating_duration_since(self.started)
    }
}

fn count(nodes: &[DagNode]) -> Counts {
    let mut c = Counts::default();
    for n in nodes {
        c.nodes += 1;
        match n.operation {
            Operation::Advice => c.advice += 1,
            Operation::Handoff => c.handoff += 1,
        }
        if n.state == NodeState::Running {
            c.running += 1;
        }
    }
    c
}

/// Checks every invariant of a DAG snapshot; the first violation is returned as one line.
///
/// Unique run ids; the root first (depth 0, no parent, no dependencies, null request and result
/// hashes); every other node advice with no mode, after its parent, at depth parent + 1 ≤
/// `maxDepth`, asked by its parent's target, under an `advice-only` parent, with an intent no
/// ancestor has, a request hash, and dependencies (≤ 64, distinct) on earlier finished nodes
/// (`requires` ones succeeded); `finishedAt` set exactly on finished nodes; `activeCount` = the
/// running nodes ≤ `maxConcurrency`; each `remaining` = limit − count, no count above its
/// limit; a closed DAG has no running node.
pub fn check_dag_invariants(dag: &Dag) -> Result<(), String> {
    if dag.schema_version != DAG_SCHEMA {
        return Err(format!("schemaVersion is not {DAG_SCHEMA}"));
    }
    if dag.revision == 0 {
        return Err("revision is 0".into());
    }
    let Some(root) = dag.nodes.first() else {
        return Err("the DAG has no node".into());
    };
    let l = &dag.limits;
    if root.run_id != dag.root_run_id
        || root.parent_run_id.is_some()
        || root.depth != 0
        || !root.dependencies.is_empty()
        || root.request_hash.is_some()
        || root.result_hash.is_some()
    {
        return Err("the first node is not a well-formed root".into());
    }
    let mut at: HashMap<&str, usize> = HashMap::new();
    for (i, n) in dag.nodes.iter().enumerate() {
        let id = n.run_id.as_str();
        if at.insert(id, i).is_some() {
            return Err(format!("run id {id:?} appears twice"));
        }
        if !is_sha256(&n.intent_hash) {
            return Err(format!("node {id:?} has a malformed intent hash"));
        }
        if n.started_at.is_none() || (n.state == NodeState::Running) != n.finished_at.is_none() {
            return Err(format!("node {id:?} has inconsistent times for its state"));
        }
        if n.result_hash.as_deref().is_some_and(|h| !is_sha256(h)) {
            return Err(format!("node {id:?} has a malformed result hash"));
        }
        if i == 0 {
            continue;
        }
        let parent = n
            .parent_run_id
            .as_deref()
            .and_then(|p| at.get(p).filter(|&&pi| pi < i))
            .and_then(|&pi| dag.nodes.get(pi))
            .ok_or_else(|| format!("node {id:?} has no earlier parent"))?;
        if n.depth != parent.depth + 1 || n.depth > l.max_depth {
            return Err(format!("node {id:?} has a wrong depth"));
        }
        if n.operation != Operation::Advice || n.mode.is_some() {
            return Err(format!("node {id:?} is nested but not advice"));
        }
        if parent.delegation != DelegationMode::AdviceOnly {
            return Err(format!("node {id:?} has a parent without delegation"));
        }
        if n.caller_harness != parent.target_harness {
            return Err(format!(
                "node {id:?} has a caller other than its parent's target"
            ));
        }
        if !n.request_hash.as_deref().is_some_and(is_sha256) {
            return Err(format!("node {id:?} lacks a well-formed request hash"));
        }
        let mut ancestor = Some(parent);
        let mut steps = 0;
        while let Some(a) = ancestor {
            if a.intent_hash == n.intent_hash {
                return Err(format!("node {id:?} repeats an ancestor's intent"));
            }
            steps += 1;
            ancestor = a
                .parent_run_id
                .as_deref()
                .and_then(|p| at.get(p))
                .and_then(|&pi| dag.nodes.get(pi))
                .filter(|_| steps <= dag.nodes.len());
        }
        if n.dependencies.len() > MAX_DEPENDENCIES {
            return Err(format!("node {id:?} has too many dependencies"));
        }
        let mut seen = HashSet::new();
        for d in &n.dependencies {
            let target = at
                .get(d.run_id.as_str())
                .filter(|&&di| di < i)
                .and_then(|&di| dag.nodes.get(di))
                .ok_or_else(|| format!("node {id:?} depends on no earlier node"))?;
            if !seen.insert(d.run_id.as_str())
                || target.state == NodeState::Running
                || (d.kind == DependencyKind::Requires && target.state != NodeState::Succeeded)
            {
                return Err(format!("node {id:?} has an invalid dependency"));
            }
        }
    }
    let c = count(&dag.nodes);
    if c.nodes > l.max_nodes || c.advice > l.max_advice_nodes || c.handoff > l.max_handoff_nodes {
        return Err("more nodes than the budgets allow".into());
    }
    let expected = BudgetRemaining {
        nodes: l.max_nodes - c.nodes,
        advice_nodes: l.max_advice_nodes - c.advice,
        handoff_nodes: l.max_handoff_nodes - c.handoff,
    };
    if dag.remaining != expected {
        return Err("remaining budgets disagree with the nodes".into());
    }
    if dag.active_count != c.running || c.running > l.max_concurrency {
        return Err("activeCount disagrees with the running nodes or the budget".into());
    }
    if dag.status != DagStatus::Running && c.running > 0 {
        return Err("a closed DAG still has running nodes".into());
    }
    Ok(())
}

/// `sha256:` and 64 lowercase hex digits.
pub(crate) fn is_sha256(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn state_name(s: NodeState) -> &'static str {
    match s {
        NodeState::Running => "running",
        NodeState::Succeeded => "succeeded",
        NodeState::Blocked => "blocked",
        NodeState::Failed => "failed",
        NodeState::TimedOut => "timed_out",
        NodeState::Cancelled => "cancelled",
        NodeState::Rejected => "rejected",
        NodeState::NotRun => "not_run",
    }
}

fn dag_status_name(s: DagStatus) -> &'static str {
    match s {
        DagStatus::Running => "running",
        DagStatus::Succeeded => "succeeded",
        DagStatus::Blocked => "blocked",
        DagStatus::Failed => "failed",
        DagStatus::TimedOut => "timed_out",
        DagStatus::Cancelled => "cancelled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::*;
    use proptest::prelude::*;
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
                Box::new(|d| {
                    d.nodes[1].dependencies = vec![dep("run-root", DependencyKind::Advises)]
                }),
            ),
            (
                "budget",
                Box::new(|d| {
                    d.limits.max_concurrency = 1;
                }),
            ),
            ("empty", Box::new(|d| d.nodes.clear())),
        ];
        for (name, f) in broken {
            let mut d = good.clone();
            f(&mut d);
            assert!(check_dag_invariants(&d).is_err(), "{name} not caught");
        }
        assert_eq!(s.node(&a).unwrap().state, NodeState::Running);
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
}
