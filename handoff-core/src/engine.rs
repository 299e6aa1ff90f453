//! The delegation engine: contract → plan → launch → observe → verdict, for one run.
//!
//! Decision order (first match wins, then the two git overrides):
//! 1. the result location is invalid → `rejected` 5 (stdout only);
//! 2. any input or capability problem → `rejected` 5, no process started;
//! 3. `--cwd` is not in a git worktree → `rejected` 5; another root run holds that worktree, or
//!    this process descends from a live root run → `rejected` 5 (with `--wait`: wait; a signal
//!    while waiting → `cancelled` 9); a run with advice whose supervisor can't start →
//!    `not_run` 3;
//! 4. the invocation can't be planned (e.g. an MCP secret variable is unset) → `rejected` 5;
//! 5. the executable is missing or fails preflight → `not_run` 3;
//! 6. a signal arrived before launch → `cancelled` 9;
//! 7. after launch: timeout → `timed_out` 8; signal → `cancelled` 9; more than 1 MiB of output →
//!    `failed` 7; could not start → `not_run` 3;
//! 8. the adapter's runtime check finds isolation was not enforced → `blocked` 10;
//! 9. the CLI refused to start for an environmental reason → `not_run` 3; the agent reported its
//!    own failure → `failed` 2; its answer breaks the contract → `failed` 7; non-zero exit or
//!    answer status `failed` → `failed` 2; answer status `blocked` → `blocked` 2; else
//!    `succeeded` 0;
//! 10. a writing run that would succeed but left no git-visible change → `blocked` 10;
//! 11. a read-only run that changed the worktree → `blocked` 10, whatever happened before;
//! 12. the result file can't be written → `failed` 7 (or stays `blocked` 10 after a mutation).
//!
//! A run with advice stops its supervisor before the verdict (every adviser still running is
//! cancelled and awaited), and its result embeds the final DAG. Nested advisers go through the
//! same steps from 4 on (the supervisor has done 1–3 and the admission), on their snapshot.

use std::collections::BTreeMap;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::sync::Arc;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use tokio::sync::watch;

use crate::config::{AgentConfig, Config, config_secrets};
use crate::continuation::{ReceiverReport, ReceiverRequest, ResumeCommand};
use crate::env::{agent_env, credential_values};
use crate::input::{RunInput, Validated, request_hash};
use crate::mcp::McpDescriptor;
use crate::names::{AgentId, Mode, Operation, Status, Verdict};
use crate::output::{MAX_PROVIDER_OUTPUT_BYTES, ProviderOutput};
use crate::preflight::{PreflightCache, locate};
use crate::process::{Ending, supervise_with_tap};
use crate::prompt::build_prompt;
use crate::provider::{AnswerSource, Observation, ProbeEnv, Provider, RawOutput, Registry, RunDir};
use crate::redact::{redact, redact_known, truncate_tail};
use crate::request::{BudgetLimits, Caller, CallerProvenance, DelegationMode, Request};
use crate::result::*;
use crate::supervisor::{CONTEXT_ENV, Finished, Supervisor, SupervisorContext, SupervisorSetup};
use crate::workspace::{Fingerprint, GitEvidence, Workspace, WorkspaceError};

/// How an engine is set up.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// handoff's own environment (the source of the allowlist and MCP secret references).
    pub env: BTreeMap<String, String>,
    /// Directory of the preflight cache; `None` disables caching.
    pub preflight_cache: Option<Utf8PathBuf>,
    /// Where per-run private directories are created (default: `$TMPDIR` or `/tmp`).
    pub tmp_dir: Option<Utf8PathBuf>,
    /// The user's configuration (per-agent defaults, environment, endpoints).
    pub config: Config,
    /// The file the configuration came from, if any (named in policy receipts).
    pub config_path: Option<Utf8PathBuf>,
    /// Absolute path of the `handoff` binary a worker runs to ask for nested advice. Needed
    /// by `run-with-advice` and root `advice`; `None` refuses them.
    pub handoff_exe: Option<Utf8PathBuf>,
    /// The per-user runtime directory (root leases, supervisor sockets); `None`: the default
    /// (`/run/user/<uid>/handoff`, else `/tmp/handoff-<uid>`).
    pub runtime_dir: Option<Utf8PathBuf>,
    /// Where live progress goes; `None` reads none.
    pub progress: Option<crate::progress::ProgressHook>,
}

impl EngineOptions {
    /// Options from the current process: its environment and the default cache location
    /// (`$XDG_CACHE_HOME/handoff/preflight`, else `~/.cache/handoff/preflight`).
    pub fn from_process() -> EngineOptions {
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let cache = env
            .get("XDG_CACHE_HOME")
            .filter(|v| v.starts_with('/'))
            .map(|d| Utf8PathBuf::from(d).join("handoff/preflight"))
            .or_else(|| {
                env.get("HOME")
                    .filter(|v| v.starts_with('/'))
                    .map(|h| Utf8PathBuf::from(h).join(".cache/handoff/preflight"))
            });
        let tmp = env
            .get("TMPDIR")
            .filter(|v| v.starts_with('/'))
            .map(Utf8PathBuf::from);
        EngineOptions {
            env,
            preflight_cache: cache,
            tmp_dir: tmp,
            config: Config::default(),
            config_path: None,
            handoff_exe: None,
            runtime_dir: None,
            progress: None,
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
}

struct Stop {
    verdict: Verdict,
    message: String,
}

impl Stop {
    fn new(verdict: Verdict, message: impl Into<String>) -> Stop {
        Stop {
            verdict,
            message: message.into(),
        }
    }
}

/// The result being built during a run.
struct Draft {
    result: HandoffResult,
    started: Instant,
    secrets: Vec<String>,
    request: Option<Request>,
    writes: Option<bool>,
    before: Option<Fingerprint>,
    cwd: Option<Utf8PathBuf>,
    /// The supervisor of a root run with nested advice, while it runs.
    supervisor: Option<Supervisor>,
    /// What the supervisor left: the DAG and the token audit.
    finished: Option<Finished>,
    /// The root lease on the worktree, released when the draft is dropped (after the result
    /// is written).
    lease: Option<crate::lease::RootLease>,
}

/// How the agent process of a run is launched, beyond its request.
pub(crate) struct Launch {
    /// The worker's supervisor context (`HANDOFF_SUPERVISOR_CONTEXT`), when it may ask for
    /// advice.
    pub context: Option<SupervisorContext>,
    /// What its sandbox must let it reach for that.
    pub access: Option<crate::provider::NestedAccess>,
    /// The prompt text naming the nested command.
    pub nested_text: Option<String>,
    /// The agent's time budget.
    pub timeout: Duration,
    /// The snapshot a nested adviser runs on.
    pub snapshot: Option<crate::workspace::Snapshot>,
}

/// ISO-8601 UTC with milliseconds.
pub fn now_iso() -> String {
    iso(time::OffsetDateTime::now_utc())
}

/// `t` as ISO-8601 UTC with milliseconds.
pub(crate) fn iso(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

impl Draft {
    fn new(input: &RunInput, registry: &Registry) -> Draft {
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
                snapshot: None,
                diagnostics: Diagnostics::default(),
            },
            started: Instant::now(),
            secrets: Vec::new(),
            request: None,
            writes: None,
            before: None,
            cwd: None,
            supervisor: None,
            finished: None,
            lease: None,
        }
    }

    /// The draft of a nested node, whose request the supervisor built.
    fn nested(request: &Request, registry: &Registry) -> Draft {
        let mut draft = Draft::new(&RunInput::new(crate::input::Verb::Advice), registry);
        draft.set_request(request);
        draft.result.dag = None;
        draft
    }

    fn set_request(&mut self, r: &Request) {
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
        res.dag = Some(root_dag(r, &res.timing.started_at));
        self.writes = Some(r.writes());
        self.cwd = Some(Utf8PathBuf::from(&r.cwd));
        self.request = Some(r.clone());
    }
}

fn root_dag(r: &Request, started_at: &str) -> Dag {
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
        }],
    }
}

fn cancelled(cancel: &watch::Receiver<bool>) -> Result<(), Stop> {
    if *cancel.borrow() {
        Err(Stop::new(
            Verdict::CANCELLED,
            "cancelled by a signal before the agent started",
        ))
    } else {
        Ok(())
    }
}

/// The JSON Schema of the answer every agent must give: self-contained (no `$ref`), enums as
/// plain `enum` lists and no non-standard `format`s, so that every CLI's structured-output
/// feature (including OpenAI's strict mode) accepts it.
pub fn provider_output_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = generator
        .into_root_schema_for::<ProviderOutput>()
        .to_value();
    plain_schema(&mut schema);
    schema
}

fn plain_schema(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            // `oneOf` of string constants (documented enum variants) → one `enum`.
            let consts: Option<Vec<serde_json::Value>> = map
                .get("oneOf")
                .and_then(|o| o.as_array())
                .and_then(|items| items.iter().map(|i| i.get("const").cloned()).collect());
            if let Some(values) = consts
                && values.iter().all(serde_json::Value::is_string)
            {
                map.remove("oneOf");
                map.insert("type".into(), serde_json::json!("string"));
                map.insert("enum".into(), serde_json::Value::Array(values));
            }
            if map
                .get("format")
                .and_then(|f| f.as_str())
                .is_some_and(|f| f.starts_with("uint") || f.starts_with("int"))
            {
                map.remove("format");
            }
            map.values_mut().for_each(plain_schema);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(plain_schema),
        _ => {}
    }
}

async fn fingerprint(
    ws: &Arc<dyn Workspace>,
    cwd: &Utf8Path,
) -> Result<Fingerprint, WorkspaceError> {
    let ws = Arc::clone(ws);
    let cwd = cwd.to_owned();
    tokio::task::spawn_blocking(move || ws.fingerprint(&cwd))
        .await
        .unwrap_or_else(|e| {
            Err(WorkspaceError::Git {
                message: format!("fingerprint task failed: {e}"),
            })
        })
}

fn read_answer_file(path: &Utf8Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let mut buf = Vec::new();
    file.take(MAX_PROVIDER_OUTPUT_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .ok()?;
    Some(buf)
}

fn write_private(path: &Utf8Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(contents)
}

impl Engine {
    /// An engine over `registry` and `workspace`.
    pub fn new(
        registry: Registry,
        workspace: Arc<dyn Workspace>,
        options: EngineOptions,
    ) -> Engine {
        let cache = PreflightCache::new(options.preflight_cache.clone());
        Engine {
            registry,
            workspace,
            options,
            cache,
        }
    }

    /// The registered providers.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The user configuration.
    pub(crate) fn config(&self) -> &Config {
        &self.options.config
    }

    /// The workspace implementation.
    pub(crate) fn workspace(&self) -> Arc<dyn Workspace> {
        Arc::clone(&self.workspace)
    }

    /// The per-user runtime directory, created 0700 if needed.
    fn runtime_dir(&self) -> Result<Utf8PathBuf, String> {
        match &self.options.runtime_dir {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .and_then(|()| {
                        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
                    })
                    .map_err(|e| format!("cannot create the runtime directory {d}: {e}"))?;
                Ok(d.clone())
            }
            None => crate::lease::default_runtime_dir().map_err(|e| e.to_string()),
        }
    }

    fn tmp_base(&self) -> Utf8PathBuf {
        self.options
            .tmp_dir
            .clone()
            .unwrap_or_else(|| Utf8PathBuf::from("/tmp"))
    }

    fn probe_env(&self, provider: &dyn Provider, scratch: &Utf8Path) -> ProbeEnv {
        let mut env = agent_env(provider.spec(), &self.options.env);
        env.insert("NO_COLOR".into(), "1".into());
        env.insert("TERM".into(), "dumb".into());
        ProbeEnv {
            env,
            scratch: scratch.to_owned(),
        }
    }

    fn scratch_dir(&self) -> std::io::Result<tempfile::TempDir> {
        let base = self.tmp_base();
        let dir = tempfile::Builder::new()
            .prefix("handoff-run-")
            .tempdir_in(base.as_std_path())?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        Ok(dir)
    }

    /// A line tap for a run's stdout that feeds the progress hook, when one is installed.
    fn progress_tap(
        &self,
        provider: &Arc<dyn Provider>,
        run_id: &str,
        root: bool,
        label: String,
    ) -> Option<tokio::sync::mpsc::UnboundedSender<Vec<u8>>> {
        let hook = self.options.progress.clone()?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let provider = Arc::clone(provider);
        let run_id = run_id.to_owned();
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                for event in provider.progress(&line) {
                    (hook.0)(crate::progress::ProgressUpdate {
                        run_id: run_id.clone(),
                        root,
                        agent: provider.spec().id.clone(),
                        label: label.clone(),
                        event,
                    });
                }
            }
        });
        Some(tx)
    }

    /// Reports every registered provider's capabilities and preflight.
    pub async fn capabilities(&self) -> Capabilities {
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
                    let scratch_path = Utf8Path::from_path(scratch.path())
                        .map(Utf8Path::to_owned)
                        .unwrap_or_else(|| Utf8PathBuf::from("/tmp"));
                    let probe = self.probe_env(p.as_ref(), &scratch_path);
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
            providers.push(ProviderCapabilities {
                id: spec.id.clone(),
                executable: spec.executable.into(),
                preflight,
                selection: spec.selection_capabilities(),
                grants: spec.grants,
                isolation: spec.isolation_capabilities(),
                continuation: ContinuationCapabilities {
                    receive: p.receiver().is_some(),
                    sessions: p.sessions().is_some(),
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
            providers,
        }
    }

    /// A `rejected` result for inputs refused before the engine could read them (e.g. a command
    /// line that does not parse). Echoes what `input` holds; nothing runs, nothing is written.
    pub async fn reject(&self, input: RunInput, message: String) -> RunOutcome {
        let draft = Draft::new(&input, &self.registry);
        self.finish(draft, None, Stop::new(Verdict::REJECTED, message))
            .await
    }

    /// Runs one delegation to completion. Never panics; every outcome is a result.
    pub async fn run(&self, input: RunInput, cancel: watch::Receiver<bool>) -> RunOutcome {
        let mut draft = Draft::new(&input, &self.registry);
        let reserved = match input
            .result
            .as_deref()
            .map(crate::paths::ResultFile::reserve)
        {
            Some(Err(message)) => {
                return self
                    .finish(draft, None, Stop::new(Verdict::REJECTED, message))
                    .await;
            }
            Some(Ok(f)) => Some(f),
            None => None,
        };
        let stop = match self.execute(&input, &mut draft, cancel).await {
            Ok(verdict) => Stop::new(verdict, String::new()),
            Err(stop) => stop,
        };
        // Nothing outlives the root: advisers still running are stopped before the verdict.
        if let Some(supervisor) = draft.supervisor.take() {
            draft.finished = Some(supervisor.shutdown().await);
        }
        self.finish(draft, reserved, stop).await
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
        draft.result.snapshot = launch.snapshot.clone();
        let stop = match self
            .nested_execute(&request, mcp, &mut draft, cancel, launch)
            .await
        {
            Ok(verdict) => Stop::new(verdict, String::new()),
            Err(stop) => stop,
        };
        self.finish(draft, None, stop).await
    }

    /// The result of a nested node that ended before its agent started.
    pub(crate) async fn nested_stop(
        &self,
        request: Request,
        verdict: Verdict,
        message: String,
    ) -> RunOutcome {
        let draft = Draft::nested(&request, &self.registry);
        self.finish(draft, None, Stop::new(verdict, message)).await
    }

    async fn nested_execute(
        &self,
        request: &Request,
        mcp: Option<McpDescriptor>,
        draft: &mut Draft,
        cancel: watch::Receiver<bool>,
        launch: Launch,
    ) -> Result<Verdict, Stop> {
        cancelled(&cancel)?;
        self.before(request, draft).await?;
        self.launch(request, mcp, draft, cancel, launch).await
    }

    /// The git fingerprint before the run (a `--cwd` outside any worktree is refused here).
    async fn before(&self, request: &Request, draft: &mut Draft) -> Result<Fingerprint, Stop> {
        let cwd = Utf8PathBuf::from(&request.cwd);
        let before = fingerprint(&self.workspace, &cwd)
            .await
            .map_err(|e| match e {
                WorkspaceError::NotAWorktree { .. } => Stop::new(
                    Verdict::REJECTED,
                    format!("--cwd {cwd} is not inside a git worktree"),
                ),
                e => Stop::new(Verdict::REJECTED, format!("cannot read git state: {e}")),
            })?;
        draft.before = Some(before.clone());
        draft.result.git = Some(GitEvidence::partial(Some(before.clone())));
        Ok(before)
    }

    async fn execute(
        &self,
        input: &RunInput,
        draft: &mut Draft,
        cancel: watch::Receiver<bool>,
    ) -> Result<Verdict, Stop> {
        let Validated { request, mcp } = input
            .validate_with(&self.registry, &self.options.config)
            .map_err(|m| Stop::new(Verdict::REJECTED, m))?;
        draft.set_request(&request);
        cancelled(&cancel)?;
        let before = self.before(&request, draft).await?;

        // One root run per worktree; none from inside another root's process tree.
        let dir = self
            .runtime_dir()
            .map_err(|m| Stop::new(Verdict::REJECTED, m))?;
        let holder = crate::lease::Holder {
            run_id: request.lineage.run_id.clone(),
            verb: input.verb.as_str().to_owned(),
            cwd: Utf8PathBuf::from(&request.cwd),
        };
        let wait = if input.wait {
            crate::lease::Wait::Until(cancel.clone())
        } else {
            crate::lease::Wait::Refuse
        };
        let lease = crate::lease::RootLease::acquire(&dir, &before.root, &holder, wait)
            .await
            .map_err(|e| match e {
                crate::lease::LeaseError::Cancelled { .. } => Stop::new(
                    Verdict::CANCELLED,
                    "cancelled by a signal while waiting for the worktree",
                ),
                e => Stop::new(Verdict::REJECTED, e.to_string()),
            })?;
        draft.lease = Some(lease);

        let mut launch = Launch {
            context: None,
            access: None,
            nested_text: None,
            timeout: Duration::from_millis(request.budgets.limits.timeout_ms),
            snapshot: None,
        };
        if request.delegation.mode == DelegationMode::AdviceOnly {
            let exe = self.options.handoff_exe.clone().ok_or_else(|| {
                Stop::new(
                    Verdict::REJECTED,
                    format!(
                        "{} needs the path of the handoff binary for nested advice \
                         (EngineOptions::handoff_exe)",
                        input.verb.as_str()
                    ),
                )
            })?;
            let socket_parent = self
                .runtime_dir()
                .map_err(|m| Stop::new(Verdict::NOT_RUN, m))?;
            let supervisor = Supervisor::start(SupervisorSetup {
                engine: self.clone(),
                root: &request,
                root_mcp: mcp.clone(),
                worktree: before.root.clone(),
                started_at: &draft.result.timing.started_at,
                started: draft.started,
                handoff_exe: exe,
                socket_parent,
                snapshot_parent: self.tmp_base(),
                cancel: cancel.clone(),
            })
            .map_err(|m| Stop::new(Verdict::NOT_RUN, m))?;
            launch.context = Some(supervisor.root_context().clone());
            launch.access = Some(supervisor.access());
            launch.nested_text = Some(supervisor.root_prompt_text(&request));
            draft.supervisor = Some(supervisor);
        }
        self.launch(&request, mcp, draft, cancel, launch).await
    }

    /// Plans, starts and observes the agent process of `request`.
    async fn launch(
        &self,
        request: &Request,
        mcp: Option<McpDescriptor>,
        draft: &mut Draft,
        cancel: watch::Receiver<bool>,
        launch: Launch,
    ) -> Result<Verdict, Stop> {
        let provider = self
            .registry
            .get(&request.target.harness)
            .cloned()
            .ok_or_else(|| Stop::new(Verdict::REJECTED, "unknown target"))?;
        let spec = provider.spec();
        let run_dir = self.scratch_dir().map_err(|e| {
            Stop::new(
                Verdict::NOT_RUN,
                format!("cannot create a run directory: {e}"),
            )
        })?;
        let run_path = Utf8Path::from_path(run_dir.path())
            .map(Utf8Path::to_owned)
            .ok_or_else(|| Stop::new(Verdict::NOT_RUN, "the temporary directory is not UTF-8"))?;
        let exe = locate(spec, &self.options.env);
        let schema = provider_output_schema();
        let prompt = build_prompt(request, &schema, launch.nested_text.as_deref());
        let plan = RunDir {
            path: run_path.clone(),
            executable: exe
                .clone()
                .unwrap_or_else(|| Utf8PathBuf::from(spec.executable)),
            prompt: prompt.clone(),
            output_schema: schema,
            mcp,
            parent_env: self.options.env.clone(),
            agent_config: self.options.config.agent(&spec.id),
            nested: launch.access.clone(),
        };
        let mut invocation = provider
            .invocation(request, &plan)
            .map_err(|e| Stop::new(Verdict::REJECTED, e.to_string()))?;
        let agent_config = self.options.config.agent(&spec.id);
        let applied = apply_config_env(&mut invocation, &self.options.env, &agent_config, spec)
            .map_err(|m| Stop::new(Verdict::REJECTED, m))?;
        draft.secrets.extend(config_secrets(&agent_config));
        draft.result.policy = invocation.policy.clone();
        if let Some(obj) = draft.result.policy.as_object_mut() {
            obj.insert(
                "configuration".into(),
                configuration_receipt(
                    self.options.config_path.as_deref(),
                    request,
                    &agent_config,
                    applied,
                ),
            );
        }
        draft.secrets.extend(invocation.secrets.iter().cloned());
        draft.secrets.extend(credential_values(&invocation.env));
        if let Some(context) = &launch.context {
            draft.secrets.push(context.token.clone());
            invocation.env.insert(CONTEXT_ENV.into(), context.to_env());
        }

        let Some(exe) = exe else {
            return Err(Stop::new(
                Verdict::NOT_RUN,
                format!("{} was not found on PATH", spec.executable),
            ));
        };
        let probe = self.probe_env(provider.as_ref(), &run_path);
        let (pf, _cached) = self.cache.preflight(provider.as_ref(), &exe, &probe).await;
        draft.result.target.version = pf.version.clone();
        if let Some(reason) = pf.failure {
            return Err(Stop::new(
                Verdict::NOT_RUN,
                format!("{} preflight failed: {reason}", spec.id),
            ));
        }
        cancelled(&cancel)?;

        for d in &invocation.dirs {
            std::fs::create_dir_all(d)
                .and_then(|()| std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)))
                .map_err(|e| Stop::new(Verdict::NOT_RUN, format!("cannot create {d}: {e}")))?;
        }
        for f in &invocation.files {
            write_private(&f.path, &f.contents).map_err(|e| {
                Stop::new(Verdict::NOT_RUN, format!("cannot write {}: {e}", f.path))
            })?;
        }
        let timeout = launch.timeout;
        let label = request
            .mode
            .map_or_else(|| "advice".to_owned(), |m| m.as_str().to_owned());
        let tap = self.progress_tap(
            &provider,
            &request.lineage.run_id,
            request.lineage.parent_run_id.is_none(),
            label,
        );
        let report = supervise_with_tap(&invocation, prompt.as_bytes(), timeout, cancel, tap).await;
        draft.result.exit.provider = report.exit_code;
        draft.result.exit.signal = report.signal.clone();
        let answer_file = match &invocation.answer {
            AnswerSource::File(p) => read_answer_file(p),
            AnswerSource::Stdout => None,
        };
        let stderr = String::from_utf8_lossy(&report.stderr).into_owned();
        draft.result.diagnostics.provider_stderr = stderr;
        if matches!(invocation.answer, AnswerSource::File(_)) {
            draft.result.diagnostics.provider_stdout =
                String::from_utf8_lossy(&report.stdout).into_owned();
        }
        drop(run_dir);

        let raw = RawOutput {
            stdout: report.stdout,
            stderr: report.stderr,
            exit_code: report.exit_code,
            answer_file,
        };
        match report.ending {
            Ending::TimedOut => {
                draft.result.exit.timed_out = true;
                return Err(Stop::new(
                    Verdict::TIMED_OUT,
                    format!(
                        "the agent exceeded its time budget of {} ms and was killed",
                        timeout.as_millis()
                    ),
                ));
            }
            Ending::Cancelled => {
                draft.result.exit.cancelled = true;
                return Err(Stop::new(
                    Verdict::CANCELLED,
                    "cancelled by a signal; the agent was stopped",
                ));
            }
            Ending::OutputLimit { stream } => {
                return Err(Stop::new(
                    Verdict::INVALID_OUTPUT,
                    format!("the agent wrote more than 1 MiB to {stream} and was stopped"),
                ));
            }
            Ending::SpawnFailed { message } => return Err(Stop::new(Verdict::NOT_RUN, message)),
            Ending::Exited => {}
        }
        if let Some(reason) = provider.runtime_check(&raw) {
            return Err(Stop::new(Verdict::POLICY_BLOCKED, reason));
        }
        let observation = provider
            .parse(&raw)
            .map_err(|e| Stop::new(Verdict::INVALID_OUTPUT, e.to_string()))?;
        match observation {
            Observation::Unavailable { message } => Err(Stop::new(Verdict::NOT_RUN, message)),
            Observation::AgentFailure { message, usage } => {
                if let Some(u) = usage {
                    draft.result.usage = u;
                }
                Err(Stop::new(
                    Verdict::AGENT_FAILED,
                    format!("{} reported a failure: {message}", spec.id),
                ))
            }
            Observation::Answer { payload, usage } => {
                let out = ProviderOutput::parse_strict(&payload)
                    .map_err(|e| Stop::new(Verdict::INVALID_OUTPUT, e.to_string()))?;
                draft.result.usage = usage.unwrap_or_else(|| self_reported(&out));
                draft.result.output = OutputInfo {
                    response: Some(out.response.clone()),
                    evidence: out.evidence.clone(),
                    findings: out.findings.clone(),
                };
                if let Some(code) = raw.exit_code.filter(|c| *c != 0) {
                    return Err(Stop::new(
                        Verdict::AGENT_FAILED,
                        format!("{} exited with code {code}", spec.id),
                    ));
                }
                match out.status {
                    crate::output::ProviderStatus::Completed => Ok(Verdict::SUCCEEDED),
                    crate::output::ProviderStatus::Blocked => Err(Stop::new(
                        Verdict::AGENT_BLOCKED,
                        format!("{} reported that it is blocked", spec.id),
                    )),
                    crate::output::ProviderStatus::Failed => Err(Stop::new(
                        Verdict::AGENT_FAILED,
                        format!("{} reported that the task failed", spec.id),
                    )),
                }
            }
        }
    }

    async fn finish(
        &self,
        mut draft: Draft,
        reserved: Option<crate::paths::ResultFile>,
        stop: Stop,
    ) -> RunOutcome {
        let mut verdict = stop.verdict;
        let mut message = (!stop.message.is_empty()).then_some(stop.message);

        // Git evidence after the run, whenever a "before" exists.
        if let (Some(before), Some(cwd)) = (draft.before.clone(), draft.cwd.clone()) {
            match fingerprint(&self.workspace, &cwd).await {
                Ok(after) => {
                    let evidence = before.compare(&after);
                    let changed = evidence.changed;
                    let files = evidence.changed_files.clone();
                    draft.result.git = Some(evidence);
                    let writes = draft.writes.unwrap_or(false);
                    let task = draft
                        .request
                        .as_ref()
                        .map(Request::task_name)
                        .unwrap_or("run");
                    if writes && verdict == Verdict::SUCCEEDED && !changed {
                        verdict = Verdict::POLICY_BLOCKED;
                        message = Some(format!("{task} completed without a git-visible change"));
                    }
                    if !writes && changed {
                        let prior = message
                            .take()
                            .map(|m| format!("; before that: {m}"))
                            .unwrap_or_default();
                        verdict = Verdict::POLICY_BLOCKED;
                        message = Some(format!(
                            "read-only {task} changed the worktree ({}){prior}",
                            summarize(&files)
                        ));
                    }
                }
                Err(e) => {
                    let note = format!("cannot fingerprint the worktree after the run: {e}");
                    message = Some(match message {
                        Some(m) => format!("{m}; {note}"),
                        None => note,
                    });
                    if verdict == Verdict::SUCCEEDED {
                        verdict = Verdict::INVALID_OUTPUT;
                    }
                }
            }
        }

        draft.result.timing.finished_at = now_iso();
        draft.result.timing.duration_ms = draft.started.elapsed().as_millis() as u64;
        let mut outcome = self.render(&mut draft, verdict, message.clone());
        if let Some(file) = reserved
            && let Err(e) = file.write(outcome.line.as_bytes())
        {
            {
                // The file can't hold this result; stdout still does, with a consistent pair.
                let v = if verdict == Verdict::POLICY_BLOCKED {
                    verdict
                } else {
                    Verdict::INVALID_OUTPUT
                };
                let m = match message {
                    Some(m) => format!("{m}; {e}"),
                    None => e,
                };
                outcome = self.render(&mut draft, v, Some(m));
            }
        }
        outcome
    }

    fn render(&self, draft: &mut Draft, verdict: Verdict, message: Option<String>) -> RunOutcome {
        let mut result = draft.result.clone();
        result.status = verdict.status();
        if verdict == Verdict::CANCELLED {
            result.exit.cancelled = true;
        }
        result.exit.driver = verdict.code();
        if let Some(finished) = &draft.finished {
            let mut store = finished.dag.clone();
            let root = store.root_run_id().to_owned();
            let _ = store.terminalize(&root, verdict.status(), None);
            let _ = store.close(verdict.status());
            result.dag = Some(store.snapshot());
            if let Some(obj) = result.policy.as_object_mut() {
                obj.insert(
                    "supervisor".into(),
                    serde_json::json!({
                        "endpoint": "unix-socket",
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
            let (t, n) = redact(text, &draft.secrets);
            count += n;
            let (t, cut) = truncate_tail(&t);
            (t, cut)
        };
        let (msg, cut_m) = clean(message.as_deref().unwrap_or(""));
        let (err, cut_e) = clean(&result.diagnostics.provider_stderr);
        let (out, cut_o) = clean(&result.diagnostics.provider_stdout);
        // The answer itself: only exact known secrets are masked (patterns could hit code).
        let mut mask = |s: &mut String| {
            let (t, n) = redact_known(s, &draft.secrets);
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
        }
        result.diagnostics = Diagnostics {
            message: (!msg.is_empty()).then_some(msg),
            provider_stderr: err,
            provider_stdout: out,
            truncated: cut_m || cut_e || cut_o,
            redaction_count: count,
        };
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
        }
    }
}

/// A receiver whose process is planned, whose CLI passed preflight and whose files are written:
/// everything that can refuse has run. Dropping it removes its private directory.
pub struct PreparedReceiver {
    // Kept for its Drop: the private directory lives as long as the receiver.
    _run_dir: tempfile::TempDir,
    invocation: crate::provider::Invocation,
    provider: Arc<dyn Provider>,
    prompt: String,
    secrets: Vec<String>,
    /// The request as planned: model and effort filled from the configuration when not given.
    pub request: ReceiverRequest,
    /// First line of the CLI's `--version`.
    pub version: Option<String>,
    /// The adapter's policy receipt for the receiver.
    pub policy: serde_json::Value,
    /// The variables of the account it runs as (empty for the default login).
    pub account_env: BTreeMap<String, String>,
    /// The variables a person needs to resume the session: the configuration's `env` for this
    /// agent (credentials left out: they stay in the configuration, never in a printed
    /// command), then the account's.
    resume_env: BTreeMap<String, String>,
}

impl std::fmt::Debug for PreparedReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedReceiver")
            .field("request", &self.request)
            .field("argv", &self.argv())
            .finish_non_exhaustive()
    }
}

impl PreparedReceiver {
    /// The receiver's adapter.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The receiver's session store: the environment it runs with (account included), its
    /// executable, and its private directory as scratch.
    pub fn store_env(&self) -> crate::carry::StoreEnv {
        crate::carry::StoreEnv {
            vars: self.invocation.env.clone(),
            executable: Some(self.invocation.program.clone()),
            scratch: Utf8Path::from_path(self._run_dir.path()).map(Utf8Path::to_owned),
        }
    }

    /// The argv (program first) that will run, secrets masked.
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.invocation.program.to_string())
            .chain(self.invocation.args.iter().cloned())
            .map(|a| redact_known(&a, &self.secrets).0)
            .collect()
    }

    /// How to resume `session_id` interactively in the receiver's worktree.
    pub fn resume_command(&self, session_id: &str) -> Option<ResumeCommand> {
        self.provider
            .receiver()
            .map(|r| r.resume_command(session_id))
            .map(|argv| ResumeCommand::new(self.request.cwd.clone(), self.resume_env.clone(), argv))
    }
}

/// How a receiver's first turn ended.
#[derive(Debug, Clone)]
pub struct ReceiverRun {
    /// How the process ended.
    pub ending: Ending,
    /// Its exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// What its adapter read from the output.
    pub report: ReceiverReport,
    /// The last lines of its stderr, secrets masked.
    pub stderr_tail: String,
    /// Its process id, when it started.
    pub pid: Option<u32>,
}

impl ReceiverRun {
    /// Why the turn did not complete, or `None` when it did.
    pub fn failure(&self) -> Option<String> {
        match &self.ending {
            Ending::TimedOut => {
                return Some("the receiver exceeded its time budget and was stopped".into());
            }
            Ending::Cancelled => {
                return Some("cancelled by a signal; the receiver was stopped".into());
            }
            Ending::OutputLimit { stream } => {
                return Some(format!(
                    "the receiver wrote more than 1 MiB to {stream} and was stopped"
                ));
            }
            Ending::SpawnFailed { message } => return Some(message.clone()),
            Ending::Exited => {}
        }
        if let Some(f) = &self.report.failure {
            return Some(f.clone());
        }
        match self.exit_code {
            Some(0) => None,
            code => {
                let tail = self
                    .stderr_tail
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                Some(if tail.is_empty() {
                    format!("the receiver exited with code {code:?}")
                } else {
                    format!("the receiver exited with code {code:?}: {tail}")
                })
            }
        }
    }
}

impl Engine {
    /// The values `handoff config` masks: credentials in handoff's environment and every
    /// secret of the configuration.
    pub fn known_secrets(&self) -> Vec<String> {
        let mut known = credential_values(&self.options.env);
        for agent in self.options.config.agents.values() {
            known.extend(config_secrets(agent));
        }
        known.sort();
        known.dedup();
        known
    }

    /// The adapter for `id`, if registered.
    pub fn provider(&self, id: &AgentId) -> Option<Arc<dyn Provider>> {
        self.registry.get(id).cloned()
    }

    /// The store of a session written by `id` on this machine, as that CLI saw it: handoff's
    /// environment with the configuration's `env` for the agent and, when named, the account's
    /// variables on top (they may move the store: `CLAUDE_CONFIG_DIR`, `CODEX_HOME`); the CLI's
    /// executable when installed; and `scratch`.
    pub fn user_store(
        &self,
        id: &AgentId,
        scratch: &Utf8Path,
        account: Option<&str>,
    ) -> crate::carry::StoreEnv {
        let executable = self
            .registry
            .get(id)
            .and_then(|p| locate(p.spec(), &self.options.env));
        let config = self.options.config.agent(id);
        let mut vars = self.options.env.clone();
        vars.extend(config.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(acc) = account.and_then(|a| config.accounts.get(a)) {
            vars.extend(acc.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        crate::carry::StoreEnv {
            vars,
            executable,
            scratch: Some(scratch.to_owned()),
        }
    }

    /// Plans a continuation receiver and proves it can start: the adapter can receive, the CLI
    /// is installed and passes preflight, the configuration applies. Changes nothing outside its
    /// own private directory. `account` names one of the agent's configured accounts, whose
    /// variables are set last. Every error is one line (a rejection, exit 5).
    pub async fn prepare_receiver(
        &self,
        request: &ReceiverRequest,
        prompt: &str,
        account: Option<&str>,
    ) -> Result<PreparedReceiver, String> {
        let provider = self
            .registry
            .get(&request.target)
            .cloned()
            .ok_or_else(|| format!("unknown provider '{}'", request.target))?;
        let spec = provider.spec();
        let agent_config = self.options.config.agent(&spec.id);
        let mut request = request.clone();
        if request.model.is_none() {
            request.model = agent_config.model.clone();
        }
        if request.effort.is_none() {
            request.effort = agent_config.effort.clone();
        }
        if let Some(effort) = &request.effort
            && !spec.effort.contains(&effort.as_str())
        {
            return Err(if spec.effort.is_empty() {
                format!(
                    "{} has no exact effort control; leave --effort out",
                    spec.id
                )
            } else {
                format!(
                    "effort '{effort}' is not accepted by {}; expected one of: {}",
                    spec.id,
                    spec.effort.join(", ")
                )
            });
        }
        let run_dir = self
            .scratch_dir()
            .map_err(|e| format!("cannot create a private directory: {e}"))?;
        let run_path = Utf8Path::from_path(run_dir.path())
            .map(Utf8Path::to_owned)
            .ok_or_else(|| "the temporary directory is not UTF-8".to_owned())?;
        let exe = locate(spec, &self.options.env);
        let plan = RunDir {
            path: run_path.clone(),
            executable: exe
                .clone()
                .unwrap_or_else(|| Utf8PathBuf::from(spec.executable)),
            prompt: prompt.to_owned(),
            output_schema: serde_json::Value::Null,
            mcp: None,
            parent_env: self.options.env.clone(),
            agent_config: agent_config.clone(),
            nested: None,
        };
        let Some(receiver) = provider.receiver() else {
            return Err(format!(
                "{} cannot receive a continuation: {}",
                request.target,
                provider.why_no_receiver()
            ));
        };
        let mut invocation = receiver
            .receiver_invocation(&request, &plan)
            .map_err(|e| e.to_string())?;
        apply_config_env(&mut invocation, &self.options.env, &agent_config, spec)?;
        let account_env = match account {
            None => BTreeMap::new(),
            Some(name) => {
                let Some(acc) = agent_config.accounts.get(name) else {
                    let known: Vec<&str> =
                        agent_config.accounts.keys().map(String::as_str).collect();
                    return Err(if known.is_empty() {
                        format!(
                            "unknown account '{name}' for {}: the configuration defines none ([agents.{}.accounts.<name>] env = {{ … }})",
                            spec.id, spec.id
                        )
                    } else {
                        format!(
                            "unknown account '{name}' for {}; configured: {}",
                            spec.id,
                            known.join(", ")
                        )
                    });
                };
                acc.env.clone()
            }
        };
        invocation
            .env
            .extend(account_env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let Some(exe) = exe else {
            return Err(format!(
                "{} is not installed: {} was not found on PATH",
                spec.id, spec.executable
            ));
        };
        let probe = self.probe_env(provider.as_ref(), &run_path);
        let (pf, _cached) = self.cache.preflight(provider.as_ref(), &exe, &probe).await;
        if let Some(reason) = pf.failure {
            return Err(format!("{} preflight failed: {reason}", spec.id));
        }
        if request.resume.is_some() {
            receiver.resume_support(pf.version.as_deref())?;
        }
        for d in &invocation.dirs {
            std::fs::create_dir_all(d)
                .and_then(|()| std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)))
                .map_err(|e| format!("cannot create {d}: {e}"))?;
        }
        for f in &invocation.files {
            write_private(&f.path, &f.contents)
                .map_err(|e| format!("cannot write {}: {e}", f.path))?;
        }
        let mut secrets = invocation.secrets.clone();
        secrets.extend(credential_values(&invocation.env));
        secrets.extend(config_secrets(&agent_config));
        Ok(PreparedReceiver {
            _run_dir: run_dir,
            policy: invocation.policy.clone(),
            invocation,
            provider,
            prompt: prompt.to_owned(),
            secrets,
            request,
            version: pf.version,
            resume_env: agent_config
                .env
                .iter()
                .filter(|(k, _)| !crate::env::credential_name(k))
                .chain(
                    account_env
                        .iter()
                        .filter(|(k, _)| !crate::env::credential_name(k)),
                )
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            account_env,
        })
    }

    /// Runs the receiver's first turn to its end (or `timeout`, or cancellation) and reads it.
    pub async fn start_receiver(
        &self,
        prepared: &PreparedReceiver,
        timeout: Duration,
        cancel: watch::Receiver<bool>,
    ) -> ReceiverRun {
        let tap = self.progress_tap(
            &prepared.provider,
            &format!("receiver-{}", prepared.request.session_id),
            true,
            "receiver".to_owned(),
        );
        let report = supervise_with_tap(
            &prepared.invocation,
            prepared.prompt.as_bytes(),
            timeout,
            cancel,
            tap,
        )
        .await;
        let raw = RawOutput {
            stdout: report.stdout,
            stderr: report.stderr,
            exit_code: report.exit_code,
            answer_file: None,
        };
        let mut parsed = match prepared.provider.receiver() {
            Some(receiver) => receiver.parse_receiver(&raw),
            None => ReceiverReport {
                failure: Some(format!(
                    "{} cannot receive a continuation",
                    prepared.provider.spec().id
                )),
                ..ReceiverReport::default()
            },
        };
        let mask = |s: String| redact(&s, &prepared.secrets).0;
        parsed.last_message = parsed.last_message.map(mask);
        parsed.failure = parsed.failure.map(mask);
        let stderr = String::from_utf8_lossy(&raw.stderr).into_owned();
        let (tail, _) = truncate_tail(&mask(stderr));
        ReceiverRun {
            ending: report.ending,
            exit_code: raw.exit_code,
            report: parsed,
            stderr_tail: tail,
            pid: report.pid,
        }
    }
}

/// Applies `pass_env` and `env` of the agent's configuration to the planned environment.
/// A variable the adapter sets itself (for isolation) can't be overridden: that is refused.
fn apply_config_env(
    invocation: &mut crate::provider::Invocation,
    parent: &BTreeMap<String, String>,
    config: &AgentConfig,
    spec: &crate::provider::ProviderSpec,
) -> Result<Vec<String>, String> {
    let passed = agent_env(spec, parent);
    let adapter_owned = |env: &BTreeMap<String, String>, k: &str| {
        env.get(k).is_some_and(|v| passed.get(k) != Some(v))
    };
    let mut applied = Vec::new();
    if let Some(name) = config
        .pass_env
        .iter()
        .chain(config.env.keys())
        .find(|n| n.as_str() == CONTEXT_ENV)
    {
        return Err(format!(
            "config agents.{}: {name} is set by handoff only, for workers that may ask for advice",
            spec.id
        ));
    }
    for name in &config.pass_env {
        if adapter_owned(&invocation.env, name) {
            return Err(format!(
                "config agents.{}.pass_env: {name} is set by handoff for {}'s isolation",
                spec.id, spec.id
            ));
        }
        if let Some(v) = parent.get(name) {
            invocation.env.insert(name.clone(), v.clone());
            applied.push(format!("pass_env.{name}"));
        }
    }
    for (k, v) in &config.env {
        if adapter_owned(&invocation.env, k) {
            return Err(format!(
                "config agents.{}.env.{k}: {k} is set by handoff for {}'s isolation and cannot be overridden",
                spec.id, spec.id
            ));
        }
        invocation.env.insert(k.clone(), v.clone());
        applied.push(format!("env.{k}"));
    }
    Ok(applied)
}

fn configuration_receipt(
    path: Option<&Utf8Path>,
    request: &Request,
    config: &AgentConfig,
    env_applied: Vec<String>,
) -> serde_json::Value {
    use crate::request::SelectionSource;
    let id = &request.target.harness;
    let p = &request.selection.provenance;
    let mut applied: Vec<String> = [
        ("model", p.model),
        ("effort", p.effort),
        ("max_turns", p.max_turns),
    ]
    .iter()
    .filter(|(_, src)| *src == SelectionSource::Config)
    .map(|(k, _)| (*k).to_owned())
    .collect();
    applied.extend(env_applied);
    applied.extend(
        config
            .config
            .iter()
            .filter_map(|o| o.split_once('='))
            .map(|(k, _)| format!("config.{}", k.trim())),
    );
    if let Some(t) = &config.provider {
        applied.extend(t.keys().map(|k| format!("provider.{k}")));
    }
    let applied: Vec<String> = applied
        .into_iter()
        .map(|a| format!("agents.{id}.{a}"))
        .collect();
    serde_json::json!({
        "file": path.map(|p| p.to_string()),
        "applied": applied,
    })
}

fn self_reported(out: &ProviderOutput) -> Usage {
    let u = &out.usage;
    let any = u.input_tokens.is_some() || u.output_tokens.is_some() || u.total_tokens.is_some();
    Usage {
        source: if any {
            UsageSource::ProviderOutput
        } else {
            UsageSource::NotReported
        },
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        total_tokens: u.total_tokens,
        cache_read_tokens: None,
        cache_write_tokens: None,
        cost_usd: None,
    }
}

fn summarize(files: &[String]) -> String {
    const SHOWN: usize = 5;
    if files.is_empty() {
        return "git state changed".into();
    }
    let mut s = files
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        s.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    s
}
