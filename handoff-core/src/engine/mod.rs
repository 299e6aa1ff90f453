//! The delegation engine: contract → plan → launch → observe → verdict, for one run.
//!
//! One file per step: `contract` (inputs to a validated request on a worktree the run holds),
//! `plan` (the agent process, worked out by the adapter's pure `invocation`), `launch`
//! (preflight, then the process supervisor), `observe` (git before and after, the process's
//! end and the adapter's pure `parse`), and `verdict`, the one pure function every outcome
//! goes through, which documents the order. The result being built is a `draft`; continuation
//! receivers reuse plan and launch (`receiver`).
//!
//! A run with advice stops its supervisor before the verdict (every adviser still running is
//! cancelled and awaited), and its result embeds the final DAG. Nested advisers go through the
//! same steps from the plan on (the supervisor has done the contract and the admission), on
//! the asking worker's live worktree or a snapshot of it; on the live worktree any change
//! between their before- and after-fingerprints fails them, whoever made it.

mod contract;
mod draft;
mod failover;
mod launch;
mod observe;
mod panel;
mod plan;
mod receiver;
mod record;
mod shared;
mod turns;
mod verdict;
mod worker_advice;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use tokio::sync::watch;

use self::draft::Draft;
use self::launch::cancelled;
use self::observe::observe;
pub use self::panel::{PanelOptions, PanelOutcome};
pub use self::plan::provider_output_schema;
pub use self::receiver::{PreparedReceiver, ReceiverRun};
use self::verdict::{Ended, Evidence, decide};
pub use self::worker_advice::WorkerAdvice;
use crate::config::Config;
use crate::env::agent_env;
use crate::input::{InputRejection, RunInput, Validated};
use crate::lease::default_runtime_dir;
use crate::mcp::McpDescriptor;
use crate::names::{Mode, Operation};
use crate::paths::ResultFile;
use crate::preflight::{PreflightCache, locate};
use crate::private_dir::{self, PrivateDir, PrivateDirKind};
use crate::process::ReaperSpec;
use crate::provider::{NestedAccess, ProbeEnv, Provider, Registry};
use crate::request::{BudgetLimits, Request};
use crate::result::*;
use crate::supervisor::SupervisorContext;
use crate::timestamp::now_iso;
use crate::workspace::{Snapshot, Workspace, WorktreeView};

/// How an engine is set up.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// handoff's own environment (the source of the allowlist and MCP secret references).
    pub env: BTreeMap<String, String>,
    /// Directory of the preflight cache; `None` disables caching.
    pub preflight_cache: Option<Utf8PathBuf>,
    /// Where the private directories of a run are made (its agent's run directory, advisers'
    /// snapshots, a continuation's carry scratch). `None`, the default: the private work
    /// directory `~/.local/state/handoff/work` (home directory from the password database),
    /// or `/tmp` when there is no home directory; see [`crate::private_dir_base`]. A directory
    /// set here wins: choose one no agent may write — not `$TMPDIR` or `/tmp`, which a
    /// sandboxed build agent may write (tests give one of their own).
    pub tmp_dir: Option<Utf8PathBuf>,
    /// The user's configuration (per-agent defaults, environment, endpoints).
    pub config: Config,
    /// The file the configuration came from, if any (named in policy receipts).
    pub config_path: Option<Utf8PathBuf>,
    /// Absolute path of the `handoff` binary: a worker runs it to ask for nested advice, and
    /// every agent runs under it as its reaper (`handoff __reap`, see [`crate::reaper`]), so
    /// that the agent's whole process tree dies with the run. Needed by `run-with-advice` and
    /// root `advice`; `None` refuses them, and leaves other runs contained by their process
    /// group only (the result's `processes.containment` says so). A program embedding the
    /// library may name its own binary here if it calls [`crate::reaper::main_if_reaper`]
    /// first thing in `main`.
    pub handoff_exe: Option<Utf8PathBuf>,
    /// Whether a sandboxed run's state (an OpenCode session) is imported into the user's store
    /// after the result, by a detached `handoff_exe __import` ([`crate::state_import`]), rather
    /// than before it. Off by default: a program that turns it on must call
    /// [`crate::state_import::serve`] when its binary is started that way. The `handoff`
    /// binary turns it on.
    pub import_in_background: bool,
    /// The per-user runtime directory (root leases); `None`: the default
    /// (`/run/user/<uid>/handoff`, else `/tmp/handoff-<uid>`).
    pub runtime_dir: Option<Utf8PathBuf>,
    /// Where live progress goes; `None` reads none.
    pub progress: Option<crate::progress::ProgressHook>,
    /// The task store root runs are recorded in (on the task of the worktree they ran in);
    /// `None` records nothing.
    pub task_store: Option<SharedTaskStore>,
}

/// The task store the engine records root runs in: one the embedding program already opened,
/// or one opened only when a run is to be recorded (runs rejected up front never open it).
#[derive(Clone)]
pub struct SharedTaskStore(Arc<OpenStore>);

type OpenStore =
    dyn Fn() -> Result<Arc<dyn crate::task::TaskStore>, String> + Send + Sync + 'static;

impl SharedTaskStore {
    /// A store already open.
    pub fn new(store: Arc<dyn crate::task::TaskStore>) -> SharedTaskStore {
        SharedTaskStore(Arc::new(move || Ok(Arc::clone(&store))))
    }

    /// A store `open` opens the first time a run needs it (to read or record): once, then
    /// shared; an error is the run's record warning and is tried again next time.
    pub fn lazy(
        open: impl Fn() -> Result<Arc<dyn crate::task::TaskStore>, String> + Send + Sync + 'static,
    ) -> SharedTaskStore {
        let opened: std::sync::OnceLock<Arc<dyn crate::task::TaskStore>> =
            std::sync::OnceLock::new();
        SharedTaskStore(Arc::new(move || {
            if let Some(store) = opened.get() {
                return Ok(Arc::clone(store));
            }
            let store = open()?;
            Ok(Arc::clone(opened.get_or_init(|| store)))
        }))
    }

    /// The store, opened.
    pub fn open(&self) -> Result<Arc<dyn crate::task::TaskStore>, String> {
        (self.0)()
    }
}

impl std::fmt::Debug for SharedTaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskStore")
    }
}

impl EngineOptions {
    /// Options from the current process: its environment and the default cache location
    /// (`$XDG_CACHE_HOME/handoff/preflight`, else `~/.cache/handoff/preflight`). Private
    /// directories take their default place (not `$TMPDIR`: the environment does not move
    /// them).
    pub fn from_process() -> EngineOptions {
        let mut env: BTreeMap<String, String> = std::env::vars().collect();
        // Agents run with the PATH the process started with, not the one it cleaned for its own
        // programs (every lookup of handoff's filters it the same way: `crate::programs`).
        if let Some(path) = crate::original_path() {
            env.insert("PATH".into(), path);
        }
        let cache = env
            .get("XDG_CACHE_HOME")
            .filter(|v| v.starts_with('/'))
            .map(|d| Utf8PathBuf::from(d).join("handoff/preflight"))
            .or_else(|| {
                env.get("HOME")
                    .filter(|v| v.starts_with('/'))
                    .map(|h| Utf8PathBuf::from(h).join(".cache/handoff/preflight"))
            });
        EngineOptions {
            env,
            preflight_cache: cache,
            tmp_dir: None,
            config: Config::default(),
            config_path: None,
            handoff_exe: None,
            import_in_background: false,
            runtime_dir: None,
            progress: None,
            task_store: None,
        }
    }
}

/// The delegation engine: a registry of providers, a workspace implementation, and options.
#[derive(Clone)]
pub struct Engine {
    registry: Registry,
    workspace: Arc<dyn Workspace>,
    options: EngineOptions,
    cache: PreflightCache,
    /// Per worktree, the record the task store holds, as this engine last read or wrote it: a
    /// record that has not changed is not written again while the store still holds it.
    stored_records: Arc<std::sync::Mutex<BTreeMap<Utf8PathBuf, StoredRecord>>>,
}

/// A record in the task store, as an engine read or wrote it.
#[derive(Debug, Clone, Copy)]
pub(super) struct StoredRecord {
    /// [`crate::StatRecord::identity`] of the record.
    pub(super) identity: [u8; 32],
    /// BLAKE3 of the bytes in the store.
    pub(super) content: [u8; 32],
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The result.
    pub result: HandoffResult,
    /// The exact bytes printed on stdout and written to the result file (JSON + `\n`).
    pub line: String,
    /// The process exit code.
    pub exit_code: u8,
    /// The input validation refused (`--mode`, `--cwd`, … as [`InputRejection::field`] names
    /// it), when that is why the run was rejected.
    pub rejected_field: Option<&'static str>,
    /// Why the run could not be recorded in the task store, when it could not (the result and
    /// exit code stand).
    pub record_warning: Option<String>,
}

impl RunOutcome {
    /// The outcome of a result made elsewhere (the run another machine made and reported):
    /// the line is the result as JSON, the exit code the one the result records.
    pub fn restated(result: HandoffResult) -> RunOutcome {
        let mut line = serde_json::to_string(&result).unwrap_or_default();
        line.push('\n');
        RunOutcome {
            exit_code: result.exit.driver,
            result,
            line,
            rejected_field: None,
            record_warning: None,
        }
    }
}

/// How the agent process of a run is launched, beyond its request.
pub(crate) struct Launch {
    /// The worker's supervisor context (`HANDOFF_SUPERVISOR_CONTEXT`), when it may ask for
    /// advice.
    pub context: Option<SupervisorContext>,
    /// What its sandbox must let it reach for that.
    pub access: Option<NestedAccess>,
    /// The prompt text naming the nested command.
    pub nested_text: Option<String>,
    /// The agent's time budget.
    pub timeout: Duration,
    /// What a nested adviser works on; `None` for a root run.
    pub view: Option<NestedView>,
    /// Whether handoff's sandbox holds the agent although its adapter would not ask for it (a
    /// nested adviser confined against its worker).
    pub confined: bool,
}

/// The worktree a nested adviser works on, made ready by the supervisor.
#[derive(Debug, Clone)]
pub(crate) enum NestedView {
    /// The asking node's own worktree, which the adviser cannot write.
    Live,
    /// A read-only snapshot of it.
    Snapshot(Snapshot),
}

impl Engine {
    /// An engine over `registry` and `workspace`.
    pub fn new(
        registry: Registry,
        workspace: Arc<dyn Workspace>,
        options: EngineOptions,
    ) -> Engine {
        let cache = PreflightCache::new(options.preflight_cache.clone());
        if let Some(dir) = &options.preflight_cache {
            crate::sandbox::remember_proofs_in(dir.clone());
        }
        Engine {
            registry,
            workspace,
            options,
            cache,
            stored_records: Default::default(),
        }
    }

    /// The registered providers.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The user configuration.
    pub fn config(&self) -> &Config {
        &self.options.config
    }

    /// The workspace implementation.
    pub(crate) fn workspace(&self) -> Arc<dyn Workspace> {
        Arc::clone(&self.workspace)
    }

    /// The runtime directory of root leases:
    /// [`EngineOptions::runtime_dir`] (created 0700 if needed), else the per-user default.
    pub fn runtime_dir(&self) -> Result<Utf8PathBuf, String> {
        match &self.options.runtime_dir {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .and_then(|()| {
                        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
                    })
                    .map_err(|e| format!("cannot create the runtime directory {d}: {e}"))?;
                Ok(d.clone())
            }
            None => default_runtime_dir().map_err(|e| e.to_string()),
        }
    }

    /// Where this engine's private directories go ([`EngineOptions::tmp_dir`], else the
    /// private work directory).
    pub(super) fn private_base(&self) -> Result<Utf8PathBuf, crate::lease::LeaseError> {
        crate::lease::private_dir_base(self.options.tmp_dir.as_deref())
    }

    /// A new private directory of `kind` where this engine keeps them, held until the value
    /// is dropped (a stale one is swept by a later root run).
    pub fn private_dir(&self, kind: PrivateDirKind) -> Result<PrivateDir, crate::LeaseError> {
        PrivateDir::create(self.options.tmp_dir.as_deref(), kind)
    }

    pub(super) fn probe_env(&self, provider: &dyn Provider, scratch: &Utf8Path) -> ProbeEnv {
        let mut env = agent_env(provider.spec(), &self.options.env);
        env.insert("NO_COLOR".into(), "1".into());
        env.insert("TERM".into(), "dumb".into());
        ProbeEnv {
            env,
            scratch: scratch.to_owned(),
        }
    }

    /// The reaper agents run under: the handoff binary, where one is known and the platform
    /// has subreapers; `None` leaves only the process group.
    pub(super) fn reaper(&self, hold: Option<std::os::fd::OwnedFd>) -> Option<ReaperSpec> {
        if !crate::reaper::AVAILABLE {
            return None;
        }
        let exe = self.options.handoff_exe.clone()?;
        Some(ReaperSpec {
            exe,
            hold: hold.into_iter().collect(),
        })
    }

    pub(super) fn scratch_dir(&self) -> Result<PrivateDir, crate::LeaseError> {
        self.private_dir(PrivateDirKind::Run)
    }

    /// Reports every registered provider's capabilities and preflight.
    pub async fn capabilities(&self) -> Capabilities {
        let bwrap = crate::sandbox::bubblewrap_here();
        let mut providers = Vec::new();
        for p in self.registry.iter() {
            let spec = p.spec();
            let exe = locate(spec, &self.options.env);
            let preflight = match (&exe, self.scratch_dir()) {
                (None, _) => PreflightReport {
                    installed: false,
                    ok: false,
                    path: None,
                    version: None,
                    reason: Some(format!("{} was not found on PATH", spec.executable)),
                    cached: false,
                },
                (Some(exe), Ok(scratch)) => {
                    let probe = self.probe_env(p.as_ref(), scratch.path());
                    let (pf, cached) = self.cache.preflight(p.as_ref(), exe, &probe).await;
                    PreflightReport {
                        installed: true,
                        ok: pf.failure.is_none(),
                        path: Some(exe.to_string()),
                        version: pf.version,
                        reason: pf.failure,
                        cached,
                    }
                }
                (Some(exe), Err(e)) => PreflightReport {
                    installed: true,
                    ok: false,
                    path: Some(exe.to_string()),
                    version: None,
                    reason: Some(format!("cannot create a scratch directory: {e}")),
                    cached: false,
                },
            };
            let version = crate::VersionReport::new(
                spec.id.as_str(),
                preflight.version.clone(),
                p.tested_versions(),
            );
            providers.push(ProviderCapabilities {
                id: spec.id.clone(),
                executable: spec.executable.into(),
                preflight,
                version,
                sandbox_artifacts: p.sandbox_artifacts().map(Into::into),
                selection: spec.selection_capabilities(),
                grants: spec.grants,
                isolation: p.isolation_capabilities_where(bwrap.is_some()),
                continuation: ContinuationCapabilities {
                    receive: p.receiver().is_some(),
                    sessions: p.sessions().is_some(),
                    receiver: p
                        .receiver()
                        .map_or(crate::ReceiverLevel::None, |r| r.level()),
                    verified: p.receiver().map(|r| r.verified()),
                },
            });
        }
        Capabilities {
            schema_version: CAPABILITIES_SCHEMA.into(),
            driver_version: DRIVER_VERSION.into(),
            operations: vec![Operation::Advice, Operation::Handoff],
            root_forms: RootForms::default(),
            nested_operations: vec![Operation::Advice],
            modes: Mode::ALL.to_vec(),
            defaults: BudgetLimits::default(),
            sandbox: crate::result::SandboxCapability {
                tool: "bubblewrap".into(),
                available: bwrap.is_some(),
                path: bwrap.map(|p| p.to_string()),
            },
            platform: crate::result::PlatformCapability {
                os: crate::platform::NAME.into(),
                proven: crate::platform::PROVEN,
                caveats: crate::platform::CAVEATS
                    .iter()
                    .map(|c| (*c).to_owned())
                    .collect(),
            },
            providers,
        }
    }

    /// A `rejected` result for inputs refused before the engine could read them (e.g. a command
    /// line that does not parse). Echoes what `input` holds; nothing runs, nothing is written.
    pub async fn reject(&self, input: RunInput, message: String) -> RunOutcome {
        self.rejected(input, Ended::Rejected(message)).await
    }

    /// A `rejected` result for inputs validation refused outside a run (as
    /// [`Engine::reject`]); the outcome names the input at fault.
    pub async fn reject_input(&self, input: RunInput, rejection: InputRejection) -> RunOutcome {
        self.rejected(input, Ended::InputRejected(rejection)).await
    }

    /// A `failed` result (exit 2, cause `host_lost`) for a run sent to another machine that
    /// stopped answering before it reported its result.
    pub async fn host_lost(&self, input: RunInput, message: String) -> RunOutcome {
        self.rejected(input, Ended::HostLost(message)).await
    }

    /// A `not_run` result (exit 3) for a run whose agent could not be started elsewhere (the
    /// other machine could not be prepared for it).
    pub async fn not_run(&self, input: RunInput, message: String) -> RunOutcome {
        self.rejected(input, Ended::NotRun(message)).await
    }

    /// A `cancelled` result (exit 9) for a run stopped by a signal before its agent started.
    pub async fn cancelled_before_start(&self, input: RunInput) -> RunOutcome {
        self.rejected(input, Ended::Cancelled(verdict::Signal::BeforeStart))
            .await
    }

    async fn rejected(&self, input: RunInput, ended: Ended) -> RunOutcome {
        let draft = Draft::new(&input, &self.registry);
        self.finish(draft, None, ended).await
    }

    /// Runs one delegation to completion. Never panics; every outcome is a result.
    pub async fn run(&self, input: RunInput, cancel: watch::Receiver<bool>) -> RunOutcome {
        self.run_holding(input, cancel, Start::default()).await
    }

    /// [`Engine::run`], started as `start` says: a panel's member, or the rest of a chain
    /// whose first attempt ran elsewhere.
    async fn run_holding(
        &self,
        input: RunInput,
        cancel: watch::Receiver<bool>,
        start: Start,
    ) -> RunOutcome {
        // What handoff processes killed before they could clean up left behind goes first.
        if let Ok(base) = self.private_base() {
            private_dir::sweep(&base);
        }
        let mut draft = Draft::new(&input, &self.registry);
        draft.seat = start.seat;
        draft.result.attempts = start.earlier;
        if let Some(entry) = start.entry {
            draft.account = self.account_of(&entry);
            draft.failover = Some(entry);
        }
        let reserved = match (start.reserved, input.result.as_deref()) {
            (Some(f), _) => Some(f),
            (None, Some(p)) => match ResultFile::reserve(p) {
                Ok(f) => Some(f),
                Err(message) => return self.finish(draft, None, Ended::Rejected(message)).await,
            },
            (None, None) => None,
        };
        let ended = self
            .execute(&input, &mut draft, cancel)
            .await
            .unwrap_or_else(|stopped| stopped);
        // Nothing outlives the root: advisers still running are stopped before the verdict.
        if let Some(supervisor) = draft.supervisor.take() {
            draft.finished = Some(supervisor.shutdown().await);
        }
        let config_state = draft.config_state.take();
        let mut outcome = self.finish(draft, reserved, ended).await;
        if let Some(store) = &self.options.task_store {
            outcome.record_warning = record::delegated_run(
                store,
                self.workspace.as_ref(),
                &outcome,
                input.result.as_deref(),
                config_state.as_ref(),
            )
            .err()
            .map(|e| format!("the run was not recorded in the task store: {e}"));
        }
        outcome
    }

    /// Records a root run that ran elsewhere (on another machine, `--on`) in the task of the
    /// worktree at `worktree` here, as a run here is recorded; a store that cannot be used
    /// leaves the outcome with a warning, its result and exit code as they are.
    pub fn record_elsewhere(
        &self,
        outcome: &mut RunOutcome,
        result_path: Option<&str>,
        worktree: &Utf8Path,
    ) {
        if let Some(store) = &self.options.task_store {
            outcome.record_warning = record::delegated_run_at(
                store,
                self.workspace.as_ref(),
                outcome,
                result_path,
                None,
                worktree.to_owned(),
            )
            .err()
            .map(|e| format!("the run was not recorded in the task store: {e}"));
        }
    }

    /// Runs a nested adviser the supervisor admitted (no result file, no lease).
    pub(crate) async fn run_nested(
        &self,
        request: Request,
        mcp: Option<McpDescriptor>,
        launch: Launch,
        cancel: watch::Receiver<bool>,
    ) -> RunOutcome {
        let mut draft = Draft::nested(&request, &self.registry);
        match &launch.view {
            Some(NestedView::Live) => draft.result.view = Some(WorktreeView::Live),
            Some(NestedView::Snapshot(snapshot)) => {
                draft.result.view = Some(WorktreeView::Snapshot);
                draft.result.snapshot = Some(snapshot.clone());
            }
            None => {}
        }
        let ended = self
            .nested_execute(&request, mcp, &mut draft, cancel, launch)
            .await
            .unwrap_or_else(|stopped| stopped);
        self.finish(draft, None, ended).await
    }

    /// The result of a nested node whose agent could not be started.
    pub(crate) async fn nested_not_run(&self, request: Request, message: String) -> RunOutcome {
        let draft = Draft::nested(&request, &self.registry);
        self.finish(draft, None, Ended::NotRun(message)).await
    }

    // The steps return `Err` where one stops the run early and `Ok` once the agent's run was
    // observed to its end; either way, how the run ended.

    /// A root run: the contract, then the agent.
    async fn execute(
        &self,
        input: &RunInput,
        draft: &mut Draft,
        cancel: watch::Receiver<bool>,
    ) -> Result<Ended, Ended> {
        // A panel's member fails over on its own seat: the same shared "before" and lease.
        let chain = self.failover_chain(input)?;
        let (Validated { request, mcp }, before) = self.contract(input, draft, &cancel).await?;
        let launch = self.root_launch(input, &request, mcp.as_ref(), &before, draft, &cancel)?;
        if chain.is_empty() {
            return self.agent(&request, mcp, draft, cancel, launch).await;
        }
        self.agent_with_failover(input, request, mcp, &before, launch, chain, draft, cancel)
            .await
    }

    /// A nested adviser: its worktree's "before", then the agent.
    async fn nested_execute(
        &self,
        request: &Request,
        mcp: Option<McpDescriptor>,
        draft: &mut Draft,
        cancel: watch::Receiver<bool>,
        launch: Launch,
    ) -> Result<Ended, Ended> {
        cancelled(&cancel)?;
        self.before(request, draft).await?;
        self.agent(request, mcp, draft, cancel, launch).await
    }

    /// Plans, starts and observes the agent process of `request`.
    async fn agent(
        &self,
        request: &Request,
        mcp: Option<McpDescriptor>,
        draft: &mut Draft,
        cancel: watch::Receiver<bool>,
        launch: Launch,
    ) -> Result<Ended, Ended> {
        let plan = self.plan(request, mcp, draft, &launch)?;
        let provider = Arc::clone(&plan.provider);
        let ran = self
            .start(request, plan, draft, cancel, launch.timeout)
            .await?;
        Ok(observe(provider.as_ref(), ran, launch.timeout, draft))
    }

    /// Git after the run, the verdict, and the result: printed, and written to the result file
    /// when one was asked for (when that fails, the verdict says so).
    async fn finish(
        &self,
        mut draft: Draft,
        reserved: Option<ResultFile>,
        ended: Ended,
    ) -> RunOutcome {
        let after = match draft.seat.take() {
            // A panel's member: its own time ends with its agent; the worktree is compared
            // once every member's agent is gone.
            Some(seat) => {
                draft.result.timing.finished_at = now_iso();
                draft.result.timing.duration_ms = draft.started.elapsed().as_millis() as u64;
                seat.free_slot();
                let left = self.artifacts_left_by(&draft);
                let (after, evidence, sweep) = seat.shared.arrive(self, seat.index, left).await;
                if let Some(sweep) = sweep
                    && self.leaves_artifacts(&draft)
                {
                    sweep.record(&mut draft.result.policy);
                }
                // A member refused before it took the shared "before" has no evidence.
                draft.result.git.is_some().then(|| {
                    if let Some(evidence) = evidence {
                        draft.result.git = Some(evidence);
                    }
                    after
                })
            }
            None => {
                let after = self.after(&mut draft).await;
                draft.result.timing.finished_at = now_iso();
                draft.result.timing.duration_ms = draft.started.elapsed().as_millis() as u64;
                after
            }
        };
        let mut evidence = Evidence {
            ended,
            after,
            writes: draft.writes.unwrap_or(false),
            allow_git_config: draft.request.as_ref().is_some_and(|r| r.allow_git_config),
            shared: draft.result.view == Some(WorktreeView::Live),
            task: draft
                .request
                .as_ref()
                .map(Request::task_name)
                .unwrap_or("run"),
            result_file: None,
        };
        let mut outcome = draft.render(&decide(&evidence));
        if let Some(file) = reserved
            && let Err(e) = file.write(outcome.line.as_bytes())
        {
            evidence.result_file = Some(e);
            outcome = draft.render(&decide(&evidence));
        }
        outcome
    }
}

/// How a root run starts besides its input.
#[derive(Default)]
struct Start {
    /// A panel's member: on the panel's worktree lease and its shared "before" and "after"
    /// instead of its own.
    seat: Option<shared::Seat>,
    /// Attempts made before this run, elsewhere (a lost host's): they head `attempts`.
    earlier: Vec<crate::Attempt>,
    /// The failover entry the run's agent stands for (its account), when the run goes on
    /// with a chain.
    entry: Option<crate::FailoverEntry>,
    /// The result file, when the caller already reserved it.
    reserved: Option<ResultFile>,
}
