//! Why the DAG refused a change.

use crate::isolation::WeakerDimension;
use crate::names::AgentId;
use crate::request::GrantKind;
use crate::result::{DagStatus, NodeState};

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
    /// More than [`MAX_DEPENDENCIES`](crate::MAX_DEPENDENCIES) dependencies.
    #[error("{count} dependencies exceed the limit of {max}")]
    TooManyDependencies {
        /// How many were given.
        count: usize,
        /// [`MAX_DEPENDENCIES`](crate::MAX_DEPENDENCIES).
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
    /// The store changed between [`DagStore::admit`](super::DagStore::admit) and [`DagStore::commit`](super::DagStore::commit).
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
    /// The adviser would be less isolated than the worker that asks for it, on at least one
    /// dimension, and no isolation handoff can give it is as strong.
    #[error(
        "adviser {target} is less isolated than its caller {caller}: {}",
        weaker_list(weaker)
    )]
    WeakerIsolation {
        /// The asking worker's agent.
        caller: AgentId,
        /// The adviser's agent.
        target: AgentId,
        /// Each dimension on which the adviser is weaker, with both levels (at least one).
        weaker: Vec<WeakerDimension>,
    },
    /// A child named an MCP server twice.
    #[error("MCP server {server:?} is requested twice")]
    DuplicateMcpServer {
        /// The server name (quoted, at most 128 bytes).
        server: String,
    },
}

fn weaker_list(weaker: &[WeakerDimension]) -> String {
    weaker
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
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
