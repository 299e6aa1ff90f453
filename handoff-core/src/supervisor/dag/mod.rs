//! The advice DAG store: every node of one root run, the budgets, the loop guard, dependency
//! rules and the root deadline. Pure: no I/O, no locking (the caller wraps it as it needs).
//!
//! [`DagStore`] holds the nodes and their lifecycle (here); `admission` decides whether a
//! nested request may become a node; `budget` counts nodes against the limits and keeps the
//! root deadline; `invariants` checks a snapshot; `error` says why a change was refused.

mod admission;
mod budget;
mod error;
mod invariants;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use time::OffsetDateTime;

pub use self::admission::{Admission, NodeRequest, RegisteredNode};
pub use self::error::DagError;
pub use self::invariants::check_dag_invariants;
use self::invariants::is_sha256;
use super::clock::Clock;
use crate::isolation::Isolation;
use crate::names::Status;
use crate::redact::quote;
use crate::request::{BudgetLimits, Request};
use crate::result::{DAG_SCHEMA, Dag, DagNode, DagStatus, NodeState};
use crate::timestamp::iso;

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
            isolation: None,
            view: None,
            attenuated: None,
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

    /// The store with the isolation the root runs under recorded on its node.
    pub fn with_root_isolation(mut self, isolation: Option<Isolation>) -> DagStore {
        if let Some(root) = self.nodes.first_mut() {
            root.isolation = isolation;
        }
        self
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
    pub(super) fn ancestors<'a>(
        &'a self,
        node: &'a DagNode,
    ) -> impl Iterator<Item = &'a DagNode> + 'a {
        std::iter::successors(Some(node), move |n| {
            n.parent_run_id.as_deref().and_then(|p| self.node(p))
        })
        .take(self.nodes.len())
    }

    pub(super) fn wall(&self, at: Instant) -> OffsetDateTime {
        self.started_wall + at.saturating_duration_since(self.started)
    }
}

#[cfg(test)]
mod tests;
