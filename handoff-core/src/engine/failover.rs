//! Failover: a root run whose agent could not answer for a reason another agent does not
//! share (its usage limit, a failing provider, no credit, a CLI that is missing or cannot run
//! here) runs the same request on the next entry of its chain, under the same grants and the
//! same worktree lease, its evidence measured from the first attempt's "before".

use std::time::Instant;

use tokio::sync::watch;

use super::draft::Draft;
use super::verdict::{Ended, own_reason, summary as ended_summary};
use super::{Engine, Launch};
use crate::input::{InputRejection, RunInput, Validated};
use crate::mcp::McpDescriptor;
use crate::request::Request;
use crate::result::{OutputInfo, Usage};
use crate::workspace::Fingerprint;
use crate::{Attempt, FailoverEntry, FailureCause, continued_instructions, parse_failover};

/// The entries a root run fails over to, each validated as its own request.
pub(super) type Chain = Vec<(FailoverEntry, Validated)>;

impl Engine {
    /// The failover chain of `input` (`--failover`, else the configuration's default), every
    /// entry validated as the same request on its agent before anything starts: an entry that
    /// cannot take one of the request's controls refuses the run (`--failover`, exit 5).
    pub(super) fn failover_chain(&self, input: &RunInput) -> Result<Chain, Ended> {
        let config = &self.options.config;
        let Some(text) = self.chain_text(input) else {
            return Ok(Vec::new());
        };
        let refuse = |m: String| Ended::InputRejected(InputRejection::new("--failover", m));
        let entries = parse_failover(&text, &self.registry.ids(), config).map_err(refuse)?;
        let mut chain = Vec::with_capacity(entries.len());
        for entry in entries {
            let mut attempt = input.clone();
            attempt.harness = Some(entry.harness.to_string());
            attempt.model = entry.model.clone();
            attempt.failover = None;
            let validated = attempt
                .validate_with(&self.registry, config)
                .map_err(|r| refuse(format!("--failover {entry}: {}", r.reason)))?;
            chain.push((entry, validated));
        }
        Ok(chain)
    }

    /// Checks `input`'s failover chain as a run here would before anything starts (each entry
    /// a known agent that can take the request): a run sent elsewhere whose chain may go on
    /// here ([`Engine::fail_over_here`]) is refused up front for a bad one, as here.
    pub fn check_failover(&self, input: &RunInput) -> Result<(), InputRejection> {
        match self.failover_chain(input) {
            Ok(_) => Ok(()),
            Err(Ended::InputRejected(rejection)) => Err(rejection),
            Err(other) => Err(InputRejection::new(
                "--failover",
                super::verdict::summary(&other).1.unwrap_or_default(),
            )),
        }
    }

    /// The failover chain `input` names (`--failover`), else the configuration's default;
    /// `None` when there is neither.
    fn chain_text(&self, input: &RunInput) -> Option<String> {
        let default = &self.options.config.failover.agents;
        match &input.failover {
            Some(text) => Some(text.clone()),
            None if default.is_empty() => None,
            None => Some(default.join(",")),
        }
    }

    /// Runs the agent of `request`, then each entry of `chain` in turn while the attempt
    /// before it ended for a cause that fails over. How the last attempt ended is the run's.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn agent_with_failover(
        &self,
        input: &RunInput,
        request: Request,
        mcp: Option<McpDescriptor>,
        before: &Fingerprint,
        launch: Launch,
        chain: Chain,
        draft: &mut Draft,
        cancel: watch::Receiver<bool>,
    ) -> Result<Ended, Ended> {
        // A run that goes on with a chain begun elsewhere already stands for an entry.
        let mut current = draft.failover.clone().unwrap_or_else(|| FailoverEntry {
            harness: request.target.harness.clone(),
            account: None,
            model: input.model.clone(),
        });
        let (mut request, mut mcp, mut launch) = (request, mcp, Some(launch));
        let mut rest = chain.into_iter();
        draft.failover = Some(current.clone());
        loop {
            draft.attempt_started = Instant::now();
            let launch_now = match launch.take() {
                Some(l) => l,
                None => self.root_launch(input, &request, mcp.as_ref(), before, draft, &cancel)?,
            };
            let ended = self
                .agent(&request, mcp.clone(), draft, cancel.clone(), launch_now)
                .await
                .unwrap_or_else(|e| e);
            let cause = failover_cause(&ended);
            let next = match cause {
                Some(_) if !*cancel.borrow() => rest.next(),
                _ => None,
            };
            let (Some(cause), Some((entry, validated))) = (cause, next) else {
                return Ok(ended);
            };
            self.record_attempt(draft, &current, &ended);
            // Advisers of the attempt stop with it; the next attempt's worker gets its own.
            if let Some(supervisor) = draft.supervisor.take() {
                draft.finished = Some(supervisor.shutdown().await);
            }
            self.sweep_between_attempts(draft, &validated.request);
            let changed = if request.writes() {
                self.changed_so_far(draft).await
            } else {
                Vec::new()
            };
            let Validated {
                request: mut next_request,
                mcp: next_mcp,
            } = validated;
            next_request.lineage = request.lineage.clone();
            if request.writes() {
                next_request.instructions =
                    continued_instructions(&next_request.instructions, &current, cause, &changed);
            }
            draft.set_request(&next_request, &self.registry);
            reset_for_attempt(draft);
            draft.account = self.account_of(&entry);
            draft.failover = Some(entry.clone());
            current = entry;
            request = next_request;
            mcp = next_mcp;
        }
    }

    /// The configured account a chain entry names, when it names one.
    pub(super) fn account_of(&self, entry: &FailoverEntry) -> Option<crate::AccountConfig> {
        let account = entry.account.as_ref()?;
        let agent = self.options.config.agent(&entry.harness);
        agent.accounts.get(account).cloned()
    }

    /// After a run sent to another machine (`--on`) ended for a cause that fails over (its
    /// host was lost), runs the rest of its failover chain (`--failover`, else the
    /// configuration's) here: the chain's first entry as the run's agent, the others after
    /// it, `earlier` (the attempt there) heading the result's `attempts`. `reserved` is the
    /// run's result file when the caller reserved it; it is handed back (`Err`) when there is
    /// no chain to go on with or a cancel came, and the result from there stands.
    pub async fn fail_over_here(
        &self,
        input: &RunInput,
        earlier: Attempt,
        reserved: Option<crate::paths::ResultFile>,
        cancel: watch::Receiver<bool>,
    ) -> Result<super::RunOutcome, Option<crate::paths::ResultFile>> {
        let entries = self
            .chain_text(input)
            .and_then(|t| parse_failover(&t, &self.registry.ids(), &self.options.config).ok())
            .unwrap_or_default();
        let Some((first, rest)) = entries.split_first().filter(|_| !*cancel.borrow()) else {
            return Err(reserved);
        };
        let mut here = input.clone();
        here.harness = Some(first.harness.to_string());
        here.model = first.model.clone();
        here.failover = Some(if rest.is_empty() {
            "none".to_owned()
        } else {
            rest.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        });
        let start = super::Start {
            earlier: vec![earlier],
            entry: Some(first.clone()),
            reserved,
            ..super::Start::default()
        };
        Ok(self.run_holding(here, cancel, start).await)
    }

    /// Adds the attempt that just ended to the result's `attempts`.
    fn record_attempt(&self, draft: &mut Draft, entry: &FailoverEntry, ended: &Ended) {
        let (verdict, message) = ended_summary(ended);
        let reason = own_reason(ended);
        let message = message.map(|m| crate::redact(&m, &draft.secrets).0);
        draft.result.attempts.push(Attempt {
            harness: entry.harness.clone(),
            account: entry.account.clone(),
            model: entry.model.clone(),
            status: verdict.status(),
            cause: Some(reason.cause),
            retry_after_seconds: reason.retry_after_seconds,
            duration_ms: draft.attempt_started.elapsed().as_millis() as u64,
            usage: draft.result.usage.clone(),
            message,
            host: None,
        });
    }

    /// What the failed attempt's own sandbox left is swept as after any run; the next agent's
    /// leftovers are watched from now.
    fn sweep_between_attempts(&self, draft: &mut Draft, next: &Request) {
        if let (Some(watch), Some(paths)) = (draft.artifacts.take(), self.artifacts_left_by(draft))
        {
            watch.sweep(&paths);
        }
        if let Some(cwd) = draft.cwd.clone() {
            draft.artifacts = self.watch_artifacts([&next.target.harness], &cwd);
        }
    }

    /// The paths the attempts so far changed, compared with the run's "before" (empty when
    /// that cannot be told).
    async fn changed_so_far(&self, draft: &mut Draft) -> Vec<String> {
        let (Some(cwd), Some(request)) = (draft.cwd.clone(), draft.request.clone()) else {
            return Vec::new();
        };
        let Ok(workspace) = self.evidence_workspace(&request) else {
            return Vec::new();
        };
        let now = tokio::task::spawn_blocking(move || workspace.fingerprint(&cwd)).await;
        match (now, draft.before.as_mut()) {
            // The next agent is told these paths: one named after a secret goes masked.
            (Ok(Ok(now)), Some(before)) => before
                .compare_summaries(&now)
                .map(|mut e| {
                    crate::redact::masker(&draft.secrets).mask_paths(&mut e.changed_files);
                    e.changed_files
                })
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }
}

/// The cause an attempt ended for, when that cause fails over.
fn failover_cause(ended: &Ended) -> Option<FailureCause> {
    Some(own_reason(ended).cause).filter(|c| c.fails_over())
}

/// The draft without what the failed attempt's agent left in it: its answer, usage, exit,
/// processes and output streams.
fn reset_for_attempt(draft: &mut Draft) {
    let r = &mut draft.result;
    r.output = OutputInfo::default();
    r.usage = Usage::not_observed();
    r.exit.provider = None;
    r.exit.signal = None;
    r.exit.timed_out = false;
    r.processes = None;
    r.target.version = None;
    r.diagnostics.provider_stderr.clear();
    r.diagnostics.provider_stdout.clear();
}
