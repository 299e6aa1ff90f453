//! Running a panel: the same read-only request put to several members at once, each a complete
//! root run of its own, their results put together by [`PanelResult::assemble`].
//!
//! Everything a member could be refused for is checked before any member starts: the members
//! and the quorum, that the request is read-only (`advice`, or `run --mode review|verify`),
//! every member's own request (its agent and model on the shared inputs), the result file, and
//! the worktree lease. A refusal is one rejected panel (exit 5) and no agent process.
//!
//! # The worktree lease
//!
//! A root run takes the worktree's lease, an exclusive `flock` (see [`crate::lease`]): a second
//! root run on the same worktree is refused, even from the same process, since each acquisition
//! opens the lock file anew. So the panel takes the lease once, as the one root run on its
//! worktree, and hands it to every member: a member takes none of its own, and checks that the
//! lease it was given is on its worktree. Each member's reaper holds a descriptor of that same
//! lock while its agent's tree lives, so the worktree stays leased until the last member's
//! agent is gone. Members only read, so sharing the worktree between them is sound.
//!
//! # The evidence
//!
//! The panel takes the worktree's "before" once, with the lease, and every member is judged
//! against it; the "after" is taken once, when every member's agent (and its whole process
//! tree) is gone, and every member is judged by it (see [`super::shared`]). A change to the
//! worktree while the members ran cannot be pinned on one of them, so it blocks every member
//! (10), and so the panel. A member's own `timing` ends with its agent.

use std::sync::Arc;

use tokio::sync::{Semaphore, watch};

use super::draft::Draft;
use super::shared::{Seat, SharedEvidence};
use super::verdict::Ended;
use super::{Engine, RunOutcome};
use crate::input::{RunInput, Verb};
use crate::lease::RootLease;
use crate::names::{Mode, Status, Verdict};
use crate::panel::{PanelMember, PanelResult, PanelSpecError, check_quorum};
use crate::paths::ResultFile;
use crate::request::Request;
use crate::timestamp::now_iso;

/// How a panel runs, beyond its members and request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PanelOptions {
    /// How many members must succeed; `None`: every member.
    pub quorum: Option<usize>,
    /// Most members running at once; `None`: all of them.
    pub max_concurrency: Option<usize>,
}

/// What a panel produced.
#[derive(Debug, Clone)]
pub struct PanelOutcome {
    /// The panel's result.
    pub result: PanelResult,
    /// The exact bytes printed on stdout and written to the result file (JSON + `\n`).
    pub line: String,
    /// The process exit code.
    pub exit_code: u8,
}

impl PanelOutcome {
    /// The outcome of `result`: its line and exit code.
    pub fn new(result: PanelResult) -> PanelOutcome {
        let mut line = serde_json::to_string(&result).unwrap_or_default();
        line.push('\n');
        PanelOutcome {
            exit_code: result.exit.driver,
            result,
            line,
        }
    }
}

/// What was asked, as typed, when it may write the worktree; `None` when it is read-only.
fn writing(input: &RunInput) -> Option<String> {
    match (input.verb, input.mode.as_deref()) {
        (Verb::Advice, _) => None,
        (Verb::Run, Some(m)) if Mode::parse(m).is_some_and(|m| !m.writes()) => None,
        (Verb::Run, Some(m)) => Some(format!("run --mode {m}")),
        (Verb::Run, None) => Some("run without --mode".to_owned()),
        (Verb::RunWithAdvice, _) => Some("run-with-advice".to_owned()),
    }
}

/// A member's own input: the shared request with its agent and, when it names one, its model
/// (otherwise the shared `--model`, if any). The result file is the panel's.
fn member_input(input: &RunInput, member: &PanelMember) -> RunInput {
    let mut own = input.clone();
    own.harness = Some(member.harness.to_string());
    if let Some(model) = &member.model {
        own.model = Some(model.clone());
    }
    own.result = None;
    own
}

/// The message of a step that stopped the panel before any member started.
fn refusal(ended: Ended) -> String {
    match ended {
        Ended::Rejected(message) | Ended::NotRun(message) => message,
        Ended::InputRejected(r) => r.reason,
        _ => "the panel's worktree could not be read".to_owned(),
    }
}

impl Engine {
    /// Runs a panel: `input`, the request every member shares (`advice`, or `run` with
    /// `--mode review|verify`: cwd, instructions, grants, budgets…), put to each of `members`
    /// as a root run of its own with the member's agent and model, concurrently (at most
    /// [`PanelOptions::max_concurrency`] at a time). `cancel` stops every member. Never panics;
    /// every outcome is a panel result, a refusal (exit 5) coming before any agent starts.
    pub async fn panel(
        &self,
        members: Vec<PanelMember>,
        input: RunInput,
        options: PanelOptions,
        cancel: watch::Receiver<bool>,
    ) -> PanelOutcome {
        let at = now_iso();
        let refused = |message: String| PanelOutcome::new(PanelResult::refused(message, &at));
        if let Err(e) = check(&members, &input, options) {
            return refused(e.to_string());
        }
        let inputs: Vec<RunInput> = members.iter().map(|m| member_input(&input, m)).collect();
        let mut requests = Vec::with_capacity(inputs.len());
        for (member, own) in members.iter().zip(&inputs) {
            match own.validate_with(&self.registry, &self.options.config) {
                Ok(v) => requests.push(v.request),
                Err(r) => return refused(format!("member {member}: {}", r.reason)),
            }
        }
        let reserved = match input.result.as_deref().map(ResultFile::reserve) {
            Some(Err(message)) => return refused(message),
            Some(Ok(f)) => Some(f),
            None => None,
        };
        // The panel's own id: the root of its DAG, and the holder of the worktree's lease.
        let run_id = format!("run-{}", uuid::Uuid::new_v4());
        let shared = match self
            .panel_lease(&run_id, &inputs[0], &requests[0], &cancel)
            .await
        {
            Ok((lease, mut scratch)) => {
                let (Some(before), Some(cwd)) = (scratch.before.take(), scratch.cwd.clone()) else {
                    return refused("the panel's worktree could not be read".to_owned());
                };
                let workspace = match self.evidence_workspace(&requests[0]) {
                    Ok(w) => w,
                    Err(ended) => return refused(refusal(ended)),
                };
                let artifacts =
                    self.watch_artifacts(requests.iter().map(|r| &r.target.harness), &cwd);
                Arc::new(SharedEvidence::new(
                    before,
                    scratch.config_state.take(),
                    Arc::new(lease),
                    cwd,
                    workspace,
                    members.len(),
                    artifacts,
                ))
            }
            Err(Ended::Cancelled(_)) => {
                let mut result = PanelResult::refused(
                    "the panel was cancelled while waiting for the worktree".to_owned(),
                    &at,
                );
                result.run_id = Some(run_id);
                result.status = Status::Cancelled;
                result.exit.driver = Verdict::CANCELLED.code();
                result.exit.cancelled = true;
                return PanelOutcome::new(result);
            }
            Err(ended) => return refused(refusal(ended)),
        };

        let outcomes = self
            .members(inputs.clone(), &shared, options, &cancel)
            .await;
        drop(shared);
        let mut pairs = Vec::with_capacity(members.len());
        for ((member, own), outcome) in members.into_iter().zip(inputs).zip(outcomes) {
            let outcome = match outcome {
                Some(o) => o,
                None => {
                    self.reject(own, "the member's run stopped unexpectedly".to_owned())
                        .await
                }
            };
            pairs.push((member, outcome.result));
        }
        let cancelled = *cancel.borrow();
        let mut result = PanelResult::assemble(&run_id, pairs, options.quorum, cancelled);
        if let Some(file) = reserved {
            let line = PanelOutcome::new(result.clone()).line;
            if let Err(e) = file.write(line.as_bytes()) {
                // stdout still holds the panel, with a consistent status and code.
                if result.exit.driver != Verdict::POLICY_BLOCKED.code() {
                    result.status = Verdict::INVALID_OUTPUT.status();
                    result.exit.driver = Verdict::INVALID_OUTPUT.code();
                }
                result.message = Some(match result.message.take() {
                    Some(m) => format!("{m}; {e}"),
                    None => e,
                });
            }
        }
        PanelOutcome::new(result)
    }

    /// Takes the "before" of the worktree of `request` and the root lease on it, once for
    /// every member, as a root run would (its ancestry checked; with `--wait`, waiting for the
    /// worktree); the draft holds the "before" and the configuration state.
    async fn panel_lease(
        &self,
        run_id: &str,
        input: &RunInput,
        request: &Request,
        cancel: &watch::Receiver<bool>,
    ) -> Result<(RootLease, Draft), Ended> {
        let mut scratch = Draft::new(input, &self.registry);
        scratch.set_request(request, &self.registry);
        let before = self.before(request, &mut scratch).await?;
        let lease = self
            .root_lease(run_id, input, request, &before.root, cancel)
            .await?;
        Ok((lease, scratch))
    }

    /// Runs every member on the shared lease and evidence, at most `max_concurrency` at a
    /// time; their outcomes in order (`None` for a member whose task did not finish).
    async fn members(
        &self,
        inputs: Vec<RunInput>,
        shared: &Arc<SharedEvidence>,
        options: PanelOptions,
        cancel: &watch::Receiver<bool>,
    ) -> Vec<Option<RunOutcome>> {
        let count = inputs.len();
        let gate = Arc::new(Semaphore::new(
            options
                .max_concurrency
                .unwrap_or(count)
                .clamp(1, count.max(1)),
        ));
        let mut running = tokio::task::JoinSet::new();
        let mut tasks = std::collections::HashMap::new();
        for (i, own) in inputs.into_iter().enumerate() {
            let engine = self.clone();
            let gate = Arc::clone(&gate);
            let shared = Arc::clone(shared);
            let cancel = cancel.clone();
            let task = running.spawn(async move {
                let seat = Seat {
                    shared,
                    index: i,
                    slot: Arc::new(std::sync::Mutex::new(gate.acquire_owned().await.ok())),
                };
                (
                    i,
                    engine
                        .run_holding(
                            own,
                            cancel,
                            super::Start {
                                seat: Some(seat),
                                ..super::Start::default()
                            },
                        )
                        .await,
                )
            });
            tasks.insert(task.id(), i);
        }
        let mut outcomes: Vec<Option<RunOutcome>> = vec![None; count];
        while let Some(joined) = running.join_next_with_id().await {
            match joined {
                Ok((_, (i, outcome))) => outcomes[i] = Some(outcome),
                // A member whose task failed never arrives at the shared "after": the others
                // must not wait for it.
                Err(e) => {
                    if let Some(&i) = tasks.get(&e.id()) {
                        shared.give_up(self, i).await;
                    }
                }
            }
        }
        outcomes
    }
}

/// The refusals that need nothing but the members, the options and the verb and mode.
fn check(
    members: &[PanelMember],
    input: &RunInput,
    options: PanelOptions,
) -> Result<(), PanelSpecError> {
    if members.is_empty() {
        return Err(PanelSpecError::Empty);
    }
    if let Some(duplicate) = members
        .iter()
        .enumerate()
        .find(|(i, m)| members[..*i].contains(m))
    {
        return Err(PanelSpecError::Duplicate {
            member: duplicate.1.id(),
        });
    }
    if let Some(asked) = writing(input) {
        return Err(PanelSpecError::NotReadOnly { asked });
    }
    check_quorum(options.quorum, members.len())?;
    if options.max_concurrency == Some(0) {
        return Err(PanelSpecError::Concurrency);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::AgentId;

    fn member(agent: AgentId, model: Option<&str>) -> PanelMember {
        PanelMember {
            harness: agent,
            model: model.map(str::to_owned),
        }
    }

    fn run(mode: Option<&str>) -> RunInput {
        let mut input = RunInput::new(Verb::Run);
        input.mode = mode.map(str::to_owned);
        input
    }

    #[test]
    fn only_read_only_requests_make_a_panel() {
        let two = [member(AgentId::CODEX, None), member(AgentId::CLAUDE, None)];
        let ok = PanelOptions::default();
        assert_eq!(check(&two, &RunInput::new(Verb::Advice), ok), Ok(()));
        assert_eq!(check(&two, &run(Some("review")), ok), Ok(()));
        assert_eq!(check(&two, &run(Some("verify")), ok), Ok(()));
        for (input, asked) in [
            (run(Some("build")), "run --mode build"),
            (run(Some("phase")), "run --mode phase"),
            (run(Some("bogus")), "run --mode bogus"),
            (run(None), "run without --mode"),
            (RunInput::new(Verb::RunWithAdvice), "run-with-advice"),
        ] {
            let refused = check(&two, &input, ok).unwrap_err();
            assert_eq!(
                refused,
                PanelSpecError::NotReadOnly {
                    asked: asked.to_owned()
                }
            );
            assert_eq!(refused.field(), "--mode");
        }
    }

    #[test]
    fn members_quorum_and_concurrency_are_checked() {
        let advice = RunInput::new(Verb::Advice);
        let codex = member(AgentId::CODEX, None);
        let opts = |quorum, max_concurrency| PanelOptions {
            quorum,
            max_concurrency,
        };
        assert_eq!(
            check(&[], &advice, opts(None, None)),
            Err(PanelSpecError::Empty)
        );
        assert_eq!(
            check(&[codex.clone(), codex.clone()], &advice, opts(None, None)),
            Err(PanelSpecError::Duplicate {
                member: "codex".to_owned()
            })
        );
        let pair = [codex.clone(), member(AgentId::CODEX, Some("o3"))];
        assert_eq!(check(&pair, &advice, opts(Some(2), Some(1))), Ok(()));
        assert_eq!(
            check(&pair, &advice, opts(Some(3), None)),
            Err(PanelSpecError::Quorum {
                quorum: 3,
                members: 2
            })
        );
        assert_eq!(
            check(&pair, &advice, opts(None, Some(0))),
            Err(PanelSpecError::Concurrency)
        );
    }

    #[test]
    fn a_member_gets_its_agent_and_model_and_no_result_file() {
        let mut shared = RunInput::new(Verb::Advice);
        shared.model = Some("shared-model".to_owned());
        shared.result = Some("/r.json".to_owned());
        let own = member_input(&shared, &member(AgentId::CLAUDE, Some("opus")));
        assert_eq!(own.harness.as_deref(), Some("claude"));
        assert_eq!(own.model.as_deref(), Some("opus"));
        assert_eq!(own.result, None);
        let plain = member_input(&shared, &member(AgentId::CODEX, None));
        assert_eq!(plain.model.as_deref(), Some("shared-model"));
    }
}
