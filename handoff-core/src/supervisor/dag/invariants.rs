//! The invariants every DAG snapshot keeps, checked from the snapshot alone.

use std::collections::{HashMap, HashSet};

use super::budget::count;
use crate::names::Operation;
use crate::request::{BudgetRemaining, DelegationMode, DependencyKind, MAX_DEPENDENCIES};
use crate::result::{DAG_SCHEMA, Dag, DagStatus, NodeState};

/// Checks every invariant of a DAG snapshot; the first violation is returned as one line.
///
/// Unique run ids; the root first (depth 0, no parent, no dependencies, null request and result
/// hashes); every other node advice with no mode, after its parent, at depth parent + 1 ≤
/// `maxDepth`, asked by its parent's target, under an `advice-only` parent, with an intent no
/// ancestor has, an isolation no weaker than its parent's on any dimension (when both are
/// recorded), an attenuation (when there is one) naming a grant withheld and a reason, a
/// request hash, and dependencies (≤ 64, distinct) on earlier finished nodes
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
        || root.attenuated.is_some()
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
        if let (Some(mine), Some(theirs)) = (&n.isolation, &parent.isolation)
            && let Some(d) = mine.weaker_than(theirs).first()
        {
            return Err(format!(
                "node {id:?} is less isolated than its parent ({d}: {} vs {})",
                mine.level(*d),
                theirs.level(*d)
            ));
        }
        if n.attenuated
            .as_ref()
            .is_some_and(|a| (a.withheld.is_empty() && !a.handoff_sandbox) || a.because.is_empty())
        {
            return Err(format!(
                "node {id:?} is attenuated without a grant withheld, handoff's sandbox or a reason"
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
