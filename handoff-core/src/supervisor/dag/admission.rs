//! Admission: whether a nested request may become a node now (the decision order of
//! [`DagStore::admit`]), and turning an admission into a node.

use std::collections::HashSet;
use std::time::Duration;

use super::budget::Counts;
use super::invariants::is_sha256;
use super::{DagError, DagStore};
use crate::isolation::Isolation;
use crate::names::{AgentId, Mode, Operation};
use crate::redact::quote;
use crate::request::{
    BudgetRemaining, DelegationMode, Dependency, DependencyKind, Lineage, MAX_DEPENDENCIES,
};
use crate::result::{DagNode, DagStatus, NodeState};
use crate::timestamp::iso;
use crate::workspace::WorktreeView;

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
    /// The isolation the node will run under, decided by the supervisor against its caller's.
    pub isolation: Option<Isolation>,
    /// What its adviser will work on, decided by the supervisor from that isolation.
    pub view: Option<WorktreeView>,
    /// The grants the supervisor withheld from what the node asked for, and why.
    pub attenuated: Option<crate::isolation::Attenuation>,
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

impl DagStore {
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

    pub(super) fn admit_as(
        &self,
        req: &NodeRequest,
        run_id: String,
    ) -> Result<Admission, DagError> {
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

    pub(super) fn check_dependencies(
        &self,
        deps: &[Dependency],
        run_id: &str,
    ) -> Result<(), DagError> {
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
            isolation: request.isolation,
            view: request.view,
            attenuated: request.attenuated,
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
}
