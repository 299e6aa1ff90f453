//! A request's place in its DAG: its budgets (from the root's flags, or the parent's limits for
//! a nested request) and its dependencies on earlier nodes.

use super::{InputRejection, NestedParent, RunInput, parse_int};
use crate::names::Operation;
use crate::redact::quote;
use crate::request::*;

impl RunInput {
    /// A nested node's budgets: the root's limits, with a shorter per-node timeout if asked.
    /// The remaining counts are filled in by the DAG when the node is admitted.
    pub(super) fn nested_budgets(
        &self,
        parent: NestedParent<'_>,
    ) -> Result<Budgets, InputRejection> {
        let mut limits = parent.limits;
        if self.timeout_ms.is_some() {
            limits.timeout_ms = parse_int(
                "--timeout-ms",
                &self.timeout_ms,
                100,
                parent.limits.timeout_ms,
                parent.limits.timeout_ms,
            )?;
        }
        Ok(Budgets {
            limits,
            remaining: BudgetRemaining {
                nodes: 0,
                advice_nodes: 0,
                handoff_nodes: 0,
            },
        })
    }

    pub(super) fn budgets(&self, op: Operation) -> Result<Budgets, InputRejection> {
        let d = BudgetLimits::default();
        let limits = BudgetLimits {
            max_depth: parse_int("--max-depth", &self.max_depth, 0, 32, d.max_depth)?,
            max_nodes: parse_int("--max-nodes", &self.max_nodes, 1, 256, d.max_nodes)?,
            max_advice_nodes: parse_int(
                "--max-advice-nodes",
                &self.max_advice_nodes,
                0,
                256,
                d.max_advice_nodes,
            )?,
            max_handoff_nodes: parse_int(
                "--max-handoff-nodes",
                &self.max_handoff_nodes,
                0,
                256,
                d.max_handoff_nodes,
            )?,
            max_concurrency: parse_int(
                "--max-concurrency",
                &self.max_concurrency,
                1,
                32,
                d.max_concurrency,
            )?,
            root_timeout_ms: parse_int(
                "--root-timeout-ms",
                &self.root_timeout_ms,
                100,
                86_400_000,
                d.root_timeout_ms,
            )?,
            timeout_ms: parse_int(
                "--timeout-ms",
                &self.timeout_ms,
                100,
                3_600_000,
                d.timeout_ms,
            )?,
        };
        if limits.max_advice_nodes + limits.max_handoff_nodes < limits.max_nodes {
            return Err(InputRejection::new(
                "--max-nodes",
                "--max-advice-nodes plus --max-handoff-nodes must be at least --max-nodes",
            ));
        }
        if limits.timeout_ms > limits.root_timeout_ms {
            return Err(InputRejection::new(
                "--timeout-ms",
                "--timeout-ms must not exceed --root-timeout-ms",
            ));
        }
        let (advice, handoff) = match op {
            Operation::Advice => (1, 0),
            Operation::Handoff => (0, 1),
        };
        if limits.max_advice_nodes < advice {
            return Err(InputRejection::new(
                "--max-advice-nodes",
                "--max-advice-nodes 0 leaves no node for this advice request",
            ));
        }
        if limits.max_handoff_nodes < handoff {
            return Err(InputRejection::new(
                "--max-handoff-nodes",
                "--max-handoff-nodes 0 leaves no node for this handoff",
            ));
        }
        Ok(Budgets {
            limits,
            remaining: BudgetRemaining {
                nodes: limits.max_nodes - 1,
                advice_nodes: limits.max_advice_nodes - advice,
                handoff_nodes: limits.max_handoff_nodes - handoff,
            },
        })
    }
}

/// Parses `--dependency` values (`requires:<id>`, `advises:<id>`, `verifies:<id>`).
pub(super) fn parse_dependencies(values: &[String]) -> Result<Vec<Dependency>, InputRejection> {
    if values.len() > MAX_DEPENDENCIES {
        return Err(InputRejection::new(
            "--dependency",
            format!("at most {MAX_DEPENDENCIES} --dependency values are accepted"),
        ));
    }
    values
        .iter()
        .map(|v| parse_dependency(v).map_err(InputRejection::at("--dependency")))
        .collect()
}

/// One `--dependency` value, or why it is refused.
fn parse_dependency(v: &str) -> Result<Dependency, String> {
    let (kind, id) = v.split_once(':').ok_or_else(|| {
        format!(
            "--dependency must be requires:<runId>, advises:<runId> or verifies:<runId>; got {:?}",
            quote(v)
        )
    })?;
    let kind = match kind {
        "requires" => DependencyKind::Requires,
        "advises" => DependencyKind::Advises,
        "verifies" => DependencyKind::Verifies,
        _ => {
            return Err(format!(
                "--dependency type must be requires, advises or verifies; got {:?}",
                quote(kind)
            ));
        }
    };
    if id.is_empty()
        || id.len() > 128
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "--dependency run id must be 1-128 letters, digits, '-' or '_'; got {:?}",
            quote(id)
        ));
    }
    Ok(Dependency {
        run_id: id.to_owned(),
        kind,
    })
}
