//! Budgets: how many nodes of each kind the DAG holds and may still take, and the root
//! deadline that bounds every node's time.

use std::time::{Duration, Instant};

use super::DagStore;
use crate::names::Operation;
use crate::request::BudgetRemaining;
use crate::result::{DagNode, NodeState};
use crate::timestamp::iso;

/// The DAG's nodes counted by operation, and those still running.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    pub nodes: u32,
    pub advice: u32,
    pub handoff: u32,
    pub running: u32,
}

impl DagStore {
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

    pub(super) fn counts(&self) -> Counts {
        count(&self.nodes)
    }

    pub(super) fn remaining(&self, c: Counts) -> BudgetRemaining {
        BudgetRemaining {
            nodes: self.limits.max_nodes.saturating_sub(c.nodes),
            advice_nodes: self.limits.max_advice_nodes.saturating_sub(c.advice),
            handoff_nodes: self.limits.max_handoff_nodes.saturating_sub(c.handoff),
        }
    }
}

pub(super) fn count(nodes: &[DagNode]) -> Counts {
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
