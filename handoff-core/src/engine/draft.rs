//! The result of one run as it is being built, and how a decision turns it into the printed
//! line.

use std::sync::Arc;
use std::time::Instant;

use camino::Utf8PathBuf;

use super::RunOutcome;
use super::verdict::Decision;
use crate::input::{RunInput, Verb, request_hash};
use crate::isolation::Isolation;
use crate::lease::RootLease;
use crate::names::{AgentId, Mode, Operation, Status, Verdict};
use crate::provider::Registry;
use crate::redact::{redact, redact_known, truncate_tail};
use crate::request::{Caller, CallerProvenance, Request};
use crate::result::*;
use crate::supervisor::{Finished, Supervisor};
use crate::timestamp::now_iso;
use crate::workspace::ParkedFingerprint;

/// The result being built during a run.
pub(super) struct Draft {
    pub(super) result: HandoffResult,
    pub(super) started: Instant,
    pub(super) secrets: Vec<String>,
    pub(super) request: Option<Request>,
    pub(super) writes: Option<bool>,
    pub(super) before: Option<ParkedFingerprint>,
    /// The configuration that runs programs, as it was before the run (root runs with a task
    /// store): the task's trusted state when this run is its first event.
    pub(super) config_state: Option<crate::ConfigState>,
    pub(super) cwd: Option<Utf8PathBuf>,
    /// The supervisor of a root run with nested advice, while it runs.
    pub(super) supervisor: Option<Supervisor>,
    /// What the supervisor left: the DAG and the token audit.
    pub(super) finished: Option<Finished>,
    /// The root lease on the worktree, released when the draft is dropped (after the result
    /// is written) — unless a panel shares it with its other members, in which case the last
    /// of them (or the panel) releases it.
    pub(super) lease: Option<Arc<RootLease>>,
    /// A panel member's place: the "before" and "after" it shares with the other members.
    pub(super) seat: Option<super::shared::Seat>,
    /// Which of the paths the target's own sandbox may leave were absent before the run.
    pub(super) artifacts: Option<crate::ArtifactWatch>,
    /// The entry of the current attempt, when the run has a failover chain.
    pub(super) failover: Option<crate::FailoverEntry>,
    /// When the current attempt started.
    pub(super) attempt_started: Instant,
    /// The account the current attempt runs as (a failover entry's), when not the default.
    pub(super) account: Option<crate::AccountConfig>,
}

impl Draft {
    pub(super) fn new(input: &RunInput, registry: &Registry) -> Draft {
        // Echo what parsed, never invent: a field that is missing or invalid stays null.
        let op = input.verb.operation();
        let harness = |v: &Option<String>| {
            v.as_deref()
                .and_then(AgentId::parse)
                .filter(|id| registry.get(id).is_some())
        };
        let mode = match op {
            Operation::Handoff => input.mode.as_deref().and_then(Mode::parse),
            Operation::Advice => None,
        };
        let started_at = now_iso();
        Draft {
            result: HandoffResult {
                schema_version: RESULT_SCHEMA.into(),
                driver_version: DRIVER_VERSION.into(),
                operation: Some(op),
                caller: harness(&input.caller_harness).map(|h| Caller {
                    harness: h,
                    provenance: CallerProvenance::RootAsserted,
                }),
                target: TargetInfo {
                    harness: harness(&input.harness),
                    version: None,
                },
                mode,
                request_hash: None,
                intent_hash: None,
                selection: None,
                grants: None,
                delegation: None,
                lineage: None,
                status: Status::Rejected,
                exit: ExitInfo {
                    driver: 0,
                    provider: None,
                    signal: None,
                    timed_out: false,
                    cancelled: false,
                },
                output: OutputInfo::default(),
                git: None,
                timing: Timing {
                    started_at: started_at.clone(),
                    finished_at: started_at,
                    duration_ms: 0,
                },
                usage: Usage::not_observed(),
                policy: serde_json::json!({"enforcement": "not-established"}),
                dag: None,
                processes: None,
                view: None,
                snapshot: None,
                host: None,
                diagnostics: Diagnostics::default(),
                attempts: Vec::new(),
            },
            started: Instant::now(),
            secrets: Vec::new(),
            request: None,
            writes: None,
            before: None,
            config_state: None,
            cwd: None,
            supervisor: None,
            finished: None,
            lease: None,
            seat: None,
            artifacts: None,
            failover: None,
            attempt_started: Instant::now(),
            account: None,
        }
    }

    /// The draft of a nested node, whose request the supervisor built.
    pub(super) fn nested(request: &Request, registry: &Registry) -> Draft {
        let mut draft = Draft::new(&RunInput::new(Verb::Advice), registry);
        draft.set_request(request, registry);
        draft.result.dag = None;
        draft
    }

    pub(super) fn set_request(&mut self, r: &Request, registry: &Registry) {
        let res = &mut self.result;
        res.operation = Some(r.operation);
        res.caller = Some(r.caller.clone());
        res.target.harness = Some(r.target.harness.clone());
        res.mode = r.mode;
        res.request_hash = Some(request_hash(r));
        res.intent_hash = Some(r.intent_hash.clone());
        res.selection = Some(r.selection.clone());
        res.grants = Some(r.grants.clone());
        res.delegation = Some(r.delegation.clone());
        res.lineage = Some(r.lineage.clone());
        res.dag = Some(root_dag(
            r,
            &res.timing.started_at,
            crate::isolation::of_request(registry, r),
        ));
        self.writes = Some(r.writes());
        self.cwd = Some(Utf8PathBuf::from(&r.cwd));
        self.request = Some(r.clone());
    }

    /// The result of the run as decided: status and exit code set, the DAG closed, the message
    /// and diagnostics masked and bounded, and the JSON line to print.
    pub(super) fn render(&self, decision: &Decision) -> RunOutcome {
        let verdict = decision.verdict;
        let message = &decision.message;
        let mut result = self.result.clone();
        result.status = verdict.status();
        if verdict == Verdict::CANCELLED {
            result.exit.cancelled = true;
        }
        result.exit.driver = verdict.code();
        if let Some(finished) = &self.finished {
            let mut store = finished.dag.clone();
            let root = store.root_run_id().to_owned();
            let _ = store.terminalize(&root, verdict.status(), None);
            let _ = store.close(verdict.status());
            result.dag = Some(store.snapshot());
            if let Some(obj) = result.policy.as_object_mut() {
                obj.insert(
                    "supervisor".into(),
                    serde_json::json!({
                        "channel": "mailbox",
                        "tokenRefusals": finished.audit,
                        "tokenRefusalsDropped": finished.audit_dropped,
                    }),
                );
            }
        } else if let Some(dag) = result.dag.as_mut() {
            dag.status = DagStatus::closing(verdict.status());
            dag.active_count = 0;
            dag.revision += 1;
            if let Some(root) = dag.nodes.first_mut() {
                root.state = NodeState::from(verdict.status());
                root.finished_at = Some(result.timing.finished_at.clone());
            }
        }
        if verdict != Verdict::SUCCEEDED && result.output.response.is_none() {
            result.output = OutputInfo::default();
        }

        // Diagnostics: known secrets and credential patterns masked, then the tail kept.
        let mut count = 0;
        let mut clean = |text: &str| {
            let (t, n) = redact(text, &self.secrets);
            count += n;
            let (t, cut) = truncate_tail(&t);
            (t, cut)
        };
        let (msg, cut_m) = clean(message.as_deref().unwrap_or(""));
        let (err, cut_e) = clean(&result.diagnostics.provider_stderr);
        let (out, cut_o) = clean(&result.diagnostics.provider_stdout);
        // The answer itself: only exact known secrets are masked (patterns could hit code).
        let mut mask = |s: &mut String| {
            let (t, n) = redact_known(s, &self.secrets);
            count += n;
            *s = t;
        };
        if let Some(r) = result.output.response.as_mut() {
            mask(r);
        }
        for e in &mut result.output.evidence {
            mask(&mut e.summary);
        }
        for f in &mut result.output.findings {
            mask(&mut f.summary);
            if let Some(file) = f.file.as_mut() {
                mask(file);
            }
            if let Some(title) = f.title.as_mut() {
                mask(title);
            }
            if let Some(category) = f.category.as_mut() {
                mask(category);
            }
        }
        // Paths an agent named after a secret: shown masked, counted in `git.maskedPaths`.
        if let Some(git) = result.git.as_mut() {
            crate::redact::masker(&self.secrets).mask_evidence(git);
        }
        result.diagnostics = Diagnostics {
            message: (!msg.is_empty()).then_some(msg),
            provider_stderr: err,
            provider_stdout: out,
            truncated: cut_m || cut_e || cut_o,
            redaction_count: count,
            cause: decision.reason.map(|r| r.cause),
            retry_after_seconds: decision.reason.and_then(|r| r.retry_after_seconds),
        };
        if let Some(entry) = &self.failover {
            let mut last = crate::Attempt::ended(entry, &result);
            last.duration_ms = self.attempt_started.elapsed().as_millis() as u64;
            result.attempts.push(last);
        }
        let mut line = serde_json::to_string(&result).unwrap_or_else(|e| {
            format!(
                "{{\"schemaVersion\":\"{RESULT_SCHEMA}\",\"status\":\"failed\",\"error\":\"{e}\"}}"
            )
        });
        line.push('\n');
        RunOutcome {
            exit_code: verdict.code(),
            result,
            line,
            rejected_field: decision.rejected_field,
            record_warning: None,
        }
    }
}

fn root_dag(r: &Request, started_at: &str, isolation: Option<Isolation>) -> Dag {
    Dag {
        schema_version: DAG_SCHEMA.into(),
        root_run_id: r.lineage.root_run_id.clone(),
        revision: 1,
        status: DagStatus::Running,
        limits: r.budgets.limits,
        remaining: r.budgets.remaining,
        active_count: 1,
        nodes: vec![DagNode {
            run_id: r.lineage.run_id.clone(),
            parent_run_id: None,
            depth: 0,
            operation: r.operation,
            caller_harness: r.caller.harness.clone(),
            target_harness: r.target.harness.clone(),
            mode: r.mode,
            delegation: r.delegation.mode,
            intent_hash: r.intent_hash.clone(),
            dependencies: Vec::new(),
            state: NodeState::Running,
            request_hash: None,
            result_hash: None,
            started_at: Some(started_at.to_owned()),
            finished_at: None,
            isolation,
            view: None,
            attenuated: None,
        }],
    }
}
