//! This machine's side of a run on a host: checked here, the code pushed there, the host's
//! `handoff` running it as a background job, its result brought back (and a writing run's
//! change applied here), everything it left there removed.

use std::collections::BTreeMap;
use std::time::Duration;

use camino::Utf8PathBuf;
use handoff_core::{
    Engine, HandoffResult, Host, Masker, ResultFile, RunHost, RunInput, RunOutcome, Status,
    Workspace as _, exit,
};
use handoff_git::{Git, GitWorkspace};
use tokio::sync::watch;

use crate::code;
use crate::link::{CallError, Link, SHORT};
use crate::pending::{self, Leftover};
use crate::protocol::{HostReply, HostRequest, StartRun};

/// What a run on a host needs besides its request.
pub struct RemoteContext<'a> {
    /// The engine: agents and configuration (`[hosts]`), and how refusals are rendered.
    pub engine: &'a Engine,
    /// handoff's environment (`HANDOFF_SSH`).
    pub env: BTreeMap<String, String>,
    /// handoff's state directory (what runs left on hosts is kept there).
    pub state_dir: Utf8PathBuf,
    /// The secrets to mask in what is sent.
    pub known_secrets: Vec<String>,
}

/// How many times a dropped connection is tried again before the host counts as lost.
const RECONNECTS: u32 = 3;

/// How long `--wait` waits between attempts on a full host.
const BUSY_POLL: Duration = Duration::from_secs(2);

/// Extra time, beyond the run's own budget, the wait for its result may take.
const MARGIN: Duration = Duration::from_secs(600);

/// Runs `input` on the host `on` names and reports its result as a local run's. Never panics;
/// every outcome is a result.
pub async fn run_on_host(
    ctx: &RemoteContext<'_>,
    input: RunInput,
    on: &str,
    cancel: watch::Receiver<bool>,
) -> RunOutcome {
    let engine = ctx.engine;
    let started = std::time::Instant::now();
    let host = match handoff_core::resolve_host(on, &engine.config().hosts) {
        Ok(h) => h,
        Err(e) => return engine.reject(input, e).await,
    };
    if input.mcp_config.is_some() {
        return engine
            .reject(
                input,
                "--mcp-config cannot go with --on: the MCP servers it names run on this machine"
                    .to_owned(),
            )
            .await;
    }
    let validated = match input.validate_with(engine.registry(), engine.config()) {
        Ok(v) => v,
        Err(rejection) => return engine.reject_input(input, rejection).await,
    };
    // The chain may go on here (a lost host): it is checked as a run here checks it.
    if let Err(rejection) = engine.check_failover(&input) {
        return engine.reject_input(input, rejection).await;
    }
    let request = validated.request;
    let reserved = match input.result.as_deref().map(ResultFile::reserve) {
        Some(Err(message)) => return engine.reject(input, message).await,
        Some(Ok(f)) => Some(f),
        None => None,
    };
    let input_result = input.result.clone();
    let link = match Link::new(host, &ctx.env) {
        Ok(l) => l,
        Err(e) => return engine.reject(input, e).await,
    };
    let mut remote = Remote {
        ctx,
        link,
        run: uuid::Uuid::new_v4().simple().to_string()[..12].to_owned(),
        project: String::new(),
        commit: None,
        worktree: None,
        job: None,
        root: None,
    };
    let mut reserved = reserved;
    let outcome = match remote.go(&input, &request, cancel.clone()).await {
        Ok(mut result) => {
            result.host = Some(remote.report());
            finished(ctx, result)
        }
        Err(Stop::Rejected(m)) => engine.reject(input, m).await,
        Err(Stop::NotRun(m)) => engine.not_run(input, m).await,
        Err(Stop::Lost(m)) => {
            let mut o = engine.host_lost(input.clone(), m).await;
            o.result.host = Some(remote.report());
            o.result.timing.duration_ms = started.elapsed().as_millis() as u64;
            // The host is what failed, not the agent: a chain goes on here, recorded here as
            // a run here is, with the attempt there first.
            let there = handoff_core::FailoverEntry {
                harness: request.target.harness.clone(),
                account: None,
                model: input.model.clone(),
            };
            let earlier = handoff_core::Attempt::ended(&there, &o.result);
            match engine
                .fail_over_here(&input, earlier, reserved.take(), cancel)
                .await
            {
                Ok(here) => return here,
                Err(kept) => reserved = kept,
            }
            RunOutcome::restated(o.result)
        }
        Err(Stop::Cancelled) => engine.cancelled_before_start(input).await,
    };
    let mut outcome = match reserved.map(|file| file.write(outcome.line.as_bytes())) {
        // As for a run here: stdout still holds the result, which says the file is missing.
        Some(Err(e)) => {
            let mut r = outcome.result;
            if r.status != Status::Blocked {
                r.status = Status::Failed;
                r.exit.driver = exit::INVALID_OUTPUT;
            }
            r.diagnostics.message = Some(e);
            RunOutcome::restated(r)
        }
        _ => outcome,
    };
    // In this worktree's task, as a run here: `handoff log` shows it, its result names the host.
    if let Some(root) = &remote.root {
        engine.record_elsewhere(&mut outcome, input_result.as_deref(), root);
    }
    outcome
}

/// Why a run on a host stopped before it had a result of the host's.
enum Stop {
    /// Refused before anything ran there (exit 5).
    Rejected(String),
    /// The host could not be prepared for it (exit 3).
    NotRun(String),
    /// The host stopped answering (exit 2, `host_lost`).
    Lost(String),
    /// A signal stopped it before it started there (exit 9).
    Cancelled,
}

impl From<CallError> for Stop {
    fn from(e: CallError) -> Stop {
        match e {
            CallError::Unreachable(m) => Stop::NotRun(format!("--on: {m}")),
            CallError::Refused(m) => Stop::Rejected(format!("--on: {m}")),
        }
    }
}

/// One run on a host, as far as it got.
struct Remote<'a> {
    ctx: &'a RemoteContext<'a>,
    link: Link,
    /// The run's id (its refs and directory there).
    run: String,
    /// The project's key there.
    project: String,
    /// The commit it started from, once pushed.
    commit: Option<String>,
    /// Its worktree there, once started.
    worktree: Option<String>,
    /// Its job there, once started.
    job: Option<String>,
    /// The worktree here, once found: where the run is recorded.
    root: Option<Utf8PathBuf>,
}

impl Remote<'_> {
    fn host(&self) -> &Host {
        &self.link.host
    }

    fn report(&self) -> RunHost {
        RunHost {
            name: self.host().name.clone(),
            ssh: self.host().ssh.clone(),
            commit: self.commit.clone(),
            worktree: self.worktree.clone(),
            job: self.job.clone(),
        }
    }

    fn leftover(&self) -> Leftover {
        Leftover {
            host: self.host().label().to_owned(),
            ssh: self.host().ssh.clone(),
            dir: self.host().dir.clone(),
            project: self.project.clone(),
            run: self.run.clone(),
            job: self.job.clone(),
            owner: Some(handoff_core::ProcessRef::current()),
        }
    }

    async fn go(
        &mut self,
        input: &RunInput,
        request: &handoff_core::Request,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<HandoffResult, Stop> {
        let root = handoff_git::repo_state(camino::Utf8Path::new(&request.cwd))
            .map_err(|e| Stop::Rejected(format!("--cwd: {e}")))?
            .repository;
        self.root = Some(root.clone());
        let git = Git::new(root.clone());
        self.project = code::project_key(&git).map_err(Stop::Rejected)?;
        // This worktree before anything is read from it: a writing run's change is applied
        // only onto exactly this.
        let workspace = GitWorkspace::new().with_ignored(request.include_ignored);
        let before = workspace
            .fingerprint(&root)
            .map_err(|e| Stop::NotRun(format!("cannot fingerprint {root}: {e}")))?;
        // What goes there: the task's commit, uncommitted work as a commit on it.
        let work =
            handoff_continue::work_commit(&root, "handoff: the work to run on another machine")
                .map_err(|r| Stop::Rejected(r.reason))?;
        let masker = Masker::try_new(
            self.ctx
                .known_secrets
                .iter()
                .cloned()
                .chain(Masker::recognised(&request.instructions)),
        )
        .map_err(|e| Stop::Rejected(e.to_string()))?;
        let instructions = masker.mask(&request.instructions).text.into_owned();
        if *cancel.borrow() {
            return Err(Stop::Cancelled);
        }

        // The first call also checks the version and protocol there.
        let repo = self
            .call(&HostRequest::Repo {
                dir: self.host().dir.clone(),
                project: self.project.clone(),
            })
            .await?
            .repo
            .ok_or_else(|| Stop::NotRun("the host named no repository".into()))?;
        self.sweep().await;
        code::push(&git, &self.link, &repo, &work.commit, &self.run).map_err(Stop::NotRun)?;
        self.commit = Some(work.commit.clone());
        pending::remember(&self.ctx.state_dir, &self.leftover()).map_err(Stop::NotRun)?;

        let budget = Duration::from_millis(request.budgets.limits.root_timeout_ms);
        let started = self
            .start(input, &work.commit, instructions, budget, &mut cancel)
            .await?;
        self.worktree = started.worktree;
        self.job = started.job;
        let _ = pending::remember(&self.ctx.state_dir, &self.leftover());
        let job = self
            .job
            .clone()
            .ok_or_else(|| Stop::NotRun("the host started no job".into()))?;
        let writes = request.mode.is_some_and(|m| m.writes());
        let reply = self.finish(&job, writes, budget, cancel).await?;
        let result: HandoffResult = reply
            .result
            .as_deref()
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| {
                Stop::Lost(format!(
                    "the run on {} ended (exit {}) without a result; see `{}`",
                    self.host().label(),
                    reply.exit.map_or("?".into(), |c| c.to_string()),
                    self.link.log_command(&job)
                ))
            })?;
        let back = Back {
            git: &git,
            workspace: &workspace,
            repo: &repo,
            before: &before,
            start: &work.commit,
        };
        let result = self.bring_back(&back, result, &reply);
        self.cleanup().await;
        Ok(result)
    }

    /// A short request; a refusal is a rejection.
    async fn call(&self, request: &HostRequest) -> Result<HostReply, Stop> {
        let reply = self.link.call(request, SHORT).await?;
        if reply.ok {
            Ok(reply)
        } else {
            Err(Stop::NotRun(format!(
                "{}: {}",
                self.host().label(),
                reply.error.unwrap_or_default()
            )))
        }
    }

    /// Starts the run there; a full host is waited for with `--wait`, else refused.
    async fn start(
        &mut self,
        input: &RunInput,
        commit: &str,
        instructions: String,
        budget: Duration,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<HostReply, Stop> {
        let start = HostRequest::Start(Box::new(StartRun {
            dir: self.host().dir.clone(),
            project: self.project.clone(),
            run: self.run.clone(),
            commit: commit.to_owned(),
            verb: input.verb.as_str().to_owned(),
            args: forwarded(input),
            instructions,
            max_runs: self.host().max_runs,
        }));
        let deadline = tokio::time::Instant::now() + budget;
        loop {
            let reply = match self.link.call(&start, SHORT).await {
                Ok(r) => r,
                Err(e) => {
                    self.cleanup().await;
                    return Err(e.into());
                }
            };
            if reply.ok {
                return Ok(reply);
            }
            let why = format!(
                "--on: {} {}",
                self.host().label(),
                reply.error.clone().unwrap_or_default()
            );
            if !reply.busy {
                self.cleanup().await;
                return Err(Stop::NotRun(why));
            }
            if !input.wait || tokio::time::Instant::now() >= deadline {
                self.cleanup().await;
                return Err(Stop::Rejected(format!(
                    "{why}{}",
                    if input.wait {
                        ""
                    } else {
                        "; pass --wait to wait for a free run there"
                    }
                )));
            }
            tokio::select! {
                () = tokio::time::sleep(BUSY_POLL) => {}
                _ = cancel.wait_for(|c| *c) => {
                    self.cleanup().await;
                    return Err(Stop::Cancelled);
                }
            }
        }
    }

    /// Waits for the run's result there. A signal here stops the run there; a dropped
    /// connection is tried again, and the host is lost when it does not come back.
    async fn finish(
        &self,
        job: &str,
        collect: bool,
        budget: Duration,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<HostReply, Stop> {
        let request = HostRequest::Finish {
            dir: self.host().dir.clone(),
            project: self.project.clone(),
            run: self.run.clone(),
            job: job.to_owned(),
            collect,
        };
        let mut failures = 0;
        let mut cancelled = false;
        loop {
            let call = self.link.call(&request, budget + MARGIN);
            tokio::pin!(call);
            let answered = if cancelled {
                call.await
            } else {
                tokio::select! {
                    r = &mut call => r,
                    _ = cancel.wait_for(|c| *c) => {
                        cancelled = true;
                        let _ = self
                            .link
                            .call(&HostRequest::Cancel { job: job.to_owned() }, SHORT)
                            .await;
                        call.await
                    }
                }
            };
            match answered {
                Ok(reply) if reply.ok => return Ok(reply),
                Ok(reply) => {
                    return Err(Stop::Lost(format!(
                        "{}: {}",
                        self.host().label(),
                        reply.error.unwrap_or_default()
                    )));
                }
                // A connection that dropped (its login ended without a reply) or a host
                // that does not answer: tried again, then lost.
                Err(CallError::Refused(m) | CallError::Unreachable(m)) => {
                    failures += 1;
                    if failures > RECONNECTS {
                        return Err(Stop::Lost(format!(
                            "{} stopped answering while the run went on there ({m}); what it left there is removed at the next contact",
                            self.host().label()
                        )));
                    }
                    tokio::time::sleep(Duration::from_secs(u64::from(failures))).await;
                }
            }
        }
    }

    /// The host's result, with a writing run's change fetched and applied here.
    fn bring_back(
        &self,
        back: &Back<'_>,
        mut result: HandoffResult,
        reply: &HostReply,
    ) -> HandoffResult {
        let Back {
            git,
            workspace,
            repo,
            before,
            start,
        } = *back;
        if let Some(why) = &reply.uncollected {
            if let Some(g) = result.git.as_mut() {
                g.applied = Some(false);
            }
            return blocked(
                result,
                format!(
                    "the change made on {} cannot come back here: {why}",
                    self.host().label()
                ),
            );
        }
        let Some(commit) = reply.commit.as_deref() else {
            return result;
        };
        // Whether this worktree is still as it was when the run started, read before the
        // fetch adds the branch.
        let root = git.root().to_owned();
        let now = workspace.fingerprint(&root);
        let unchanged = now.as_ref().is_ok_and(|n| n.digest == before.digest);
        let branch = format!("handoff/{}", self.run);
        let fetched = match code::fetch(git, &self.link, repo, &self.run) {
            Ok(c) if c == commit => c,
            Ok(c) => {
                return blocked(
                    result,
                    format!("the fetched change {c} is not the commit the host made ({commit})"),
                );
            }
            Err(e) => return blocked(result, e),
        };
        let remote_files = result
            .git
            .as_ref()
            .map(|g| g.changed_files.clone())
            .unwrap_or_default();
        match code::changed_between(git, start, &fetched) {
            Ok(files) if files == remote_files => {}
            Ok(files) => {
                return blocked(
                    result,
                    format!(
                        "the change on {branch} touches {files:?}, the host's evidence {remote_files:?}"
                    ),
                );
            }
            Err(e) => return blocked(result, e),
        }
        let set = |result: &mut HandoffResult, applied: bool| {
            if let Some(g) = result.git.as_mut() {
                g.applied = Some(applied);
                g.branch = (!applied).then(|| branch.clone());
            }
        };
        if !unchanged {
            set(&mut result, false);
            result.diagnostics.message = Some(format!(
                "this worktree changed while the run went on {}: its change is on branch {branch}, not applied",
                self.host().label()
            ));
            return result;
        }
        if let Err(e) = code::apply(git, start, &fetched) {
            set(&mut result, false);
            return blocked(result, format!("{e}; the change is on branch {branch}"));
        }
        // Proven here: what changed in this worktree is what the host's evidence says (the
        // branch is gone first: it is not part of the change).
        let _ = code::delete_branch(git, &self.run);
        let here = workspace
            .fingerprint(&root)
            .map(|after| before.compare(&after).changed_files);
        match here {
            Ok(files) if files == remote_files => set(&mut result, true),
            Ok(files) => {
                let kept = code::keep_branch(git, &self.run, &fetched).is_ok();
                set(&mut result, true);
                if let Some(g) = result.git.as_mut() {
                    g.branch = kept.then(|| branch.clone());
                }
                return blocked(
                    result,
                    format!(
                        "applied here, this worktree's change {files:?} is not the host's {remote_files:?}"
                    ),
                );
            }
            Err(e) => return blocked(result, format!("cannot fingerprint {root}: {e}")),
        }
        result
    }

    /// Removes what the run left there; kept for later when the host cannot do it now.
    async fn cleanup(&self) {
        let request = HostRequest::Cleanup {
            dir: self.host().dir.clone(),
            project: self.project.clone(),
            run: self.run.clone(),
            job: self.job.clone(),
        };
        match self.link.call(&request, SHORT).await {
            Ok(r) if r.ok => pending::forget(&self.ctx.state_dir, &self.run),
            _ => {
                let _ = pending::remember(&self.ctx.state_dir, &self.leftover());
            }
        }
    }

    /// Cleans up what earlier runs left on this host.
    async fn sweep(&self) {
        for left in pending::leftovers(&self.ctx.state_dir) {
            if left.ssh != self.host().ssh || left.run == self.run || !left.abandoned() {
                continue;
            }
            let request = HostRequest::Cleanup {
                dir: left.dir.clone(),
                project: left.project.clone(),
                run: left.run.clone(),
                job: left.job.clone(),
            };
            if let Ok(r) = self.link.call(&request, SHORT).await
                && r.ok
            {
                pending::forget(&self.ctx.state_dir, &left.run);
            }
        }
    }
}

/// What bringing a writing run's change back needs.
struct Back<'a> {
    git: &'a Git,
    /// Fingerprints this worktree (ignored files too when the run covers them).
    workspace: &'a GitWorkspace,
    /// The project's repository there.
    repo: &'a str,
    /// This worktree before anything was read from it.
    before: &'a handoff_core::Fingerprint,
    /// The commit the run started from.
    start: &'a str,
}

/// A result whose change this machine could not take as the host's evidence says: blocked
/// (exit 10), the reason said.
fn blocked(mut result: HandoffResult, why: String) -> HandoffResult {
    result.status = Status::Blocked;
    result.exit.driver = exit::POLICY_BLOCK;
    result.diagnostics.message = Some(why);
    result
}

/// The host's result as this machine reports it: every secret known here masked again.
fn finished(ctx: &RemoteContext<'_>, result: HandoffResult) -> RunOutcome {
    let outcome = RunOutcome::restated(result);
    let masker = Masker::new(ctx.known_secrets.clone());
    let masked = masker.mask(&outcome.line);
    if masked.count == 0 {
        return outcome;
    }
    match serde_json::from_str::<HandoffResult>(masked.text.trim_end()) {
        Ok(mut r) => {
            r.diagnostics.redaction_count += masked.count;
            RunOutcome::restated(r)
        }
        Err(_) => outcome,
    }
}

/// The command line the host's `handoff` runs: the request's flags as given here, without
/// what the host decides itself (`--cwd`, `--instructions`, `--result`) or what stays here.
fn forwarded(input: &RunInput) -> Vec<String> {
    let mut args = Vec::new();
    let mut flag = |name: &str, value: &Option<String>| {
        if let Some(v) = value {
            args.push(format!("--{name}"));
            args.push(v.clone());
        }
    };
    flag("caller-harness", &input.caller_harness);
    flag("harness", &input.harness);
    flag("mode", &input.mode);
    flag("model", &input.model);
    flag("effort", &input.effort);
    flag("max-turns", &input.max_turns);
    flag("bash", &input.bash);
    flag("web-search", &input.web_search);
    flag("max-depth", &input.max_depth);
    flag("max-nodes", &input.max_nodes);
    flag("max-advice-nodes", &input.max_advice_nodes);
    flag("max-handoff-nodes", &input.max_handoff_nodes);
    flag("max-concurrency", &input.max_concurrency);
    flag("root-timeout-ms", &input.root_timeout_ms);
    flag("timeout-ms", &input.timeout_ms);
    flag("failover", &input.failover);
    if input.allow_git_config {
        args.push("--allow-git-config".into());
    }
    if input.ignored {
        args.push("--ignored".into());
    }
    args
}
