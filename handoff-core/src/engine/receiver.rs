//! Continuation receivers: an agent that takes over a task in its own session. Planned and
//! preflighted like a run ([`Engine::prepare_receiver`]), then started for its first turn
//! ([`Engine::start_receiver`]); no verdict, the caller judges the turn.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use tokio::sync::watch;

use super::Engine;
use super::launch::write_private;
use super::plan::apply_config_env;
use crate::config::config_secrets;
use crate::continuation::{ReceiverReport, ReceiverRequest, ResumeCommand};
use crate::names::AgentId;
use crate::preflight::locate;
use crate::process::{Ending, supervise_with_tap};
use crate::provider::{Provider, RawOutput, RunDir};
use crate::redact::{credential_name, credential_values, redact, redact_known, truncate_tail};

/// A receiver whose process is planned, whose CLI passed preflight and whose files are written:
/// everything that can refuse has run. Dropping it removes its private directory.
pub struct PreparedReceiver {
    // Kept for its Drop: the private directory lives as long as the receiver.
    _run_dir: crate::private_dir::PrivateDir,
    invocation: crate::provider::Invocation,
    /// The CLI and its environment as the adapter planned them (before handoff's sandbox, if
    /// any, wrapped the command line): what reads and writes the CLI's session store.
    plain: (Utf8PathBuf, BTreeMap<String, String>),
    /// Directories made to be mounted read-only in handoff's sandbox, removed after the run.
    made: Vec<Utf8PathBuf>,
    /// The proxy to serve for the receiver's own network namespace (socket and policy).
    proxy: Option<crate::sandbox::ProxyPlan>,
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
    /// The agent's configuration the receiver runs with.
    agent_config: crate::config::AgentConfig,
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
            vars: self.plain.1.clone(),
            executable: Some(self.plain.0.clone()),
            scratch: Some(self._run_dir.path().to_owned()),
        }
    }

    /// The argv (program first) that will run, secrets masked.
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.invocation.program.to_string())
            .chain(self.invocation.args.iter().cloned())
            .map(|a| redact_known(&a, &self.secrets).0)
            .collect()
    }

    /// How to resume `session_id` interactively in the receiver's worktree; without one (a
    /// receiver that reports none), the worktree's newest conversation, when its CLI keys
    /// conversations by directory ([`crate::Receiver::resume_latest`]).
    pub fn resume_command(&self, session_id: Option<&str>) -> Option<ResumeCommand> {
        let r = self.provider.receiver()?;
        let argv = match session_id {
            Some(id) => r.resume_command(id, &self.agent_config),
            None => r.resume_latest(&self.agent_config)?,
        };
        let mut env = self.resume_env.clone();
        env.extend(r.resume_env(&self.agent_config));
        Some(ResumeCommand::new(self.request.cwd.clone(), env, argv))
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
    /// How its processes were contained.
    pub containment: crate::process::Containment,
    /// What the proxy of its own network namespace let through and refused, when it had one.
    pub traffic: Option<crate::sandbox::proxy::Traffic>,
    /// What was swept of the mount points its CLI's own sandbox leaves (when it leaves any
    /// and its whole process tree is known gone).
    pub sweep: Option<crate::Sweep>,
}

impl ReceiverRun {
    /// A receiver that could not be started.
    fn not_started(message: String) -> ReceiverRun {
        ReceiverRun {
            ending: Ending::SpawnFailed { message },
            exit_code: None,
            report: ReceiverReport::default(),
            stderr_tail: String::new(),
            pid: None,
            containment: crate::process::Containment::ProcessGroup,
            traffic: None,
            sweep: None,
        }
    }

    /// Why the turn did not complete, or `None` when it did.
    pub fn failure(&self) -> Option<String> {
        if self.containment == crate::process::Containment::ReaperLost {
            return Some(
                "the receiver's processes escaped their reaper (it was stopped, killed or \
                 outrun): some may outlive its turn"
                    .into(),
            );
        }
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
        crate::config::known_secrets(&self.options.env, &self.options.config)
    }

    /// The adapter for `id`, if registered.
    pub fn provider(&self, id: &AgentId) -> Option<Arc<dyn Provider>> {
        self.registry.get(id).cloned()
    }

    /// The store of a session written by `id` on this machine, as that CLI saw it: handoff's
    /// environment with the configuration's `env` for the agent and, when named, the account's
    /// variables on top (they may move the store: `CLAUDE_CONFIG_DIR`, `CODEX_HOME`); the CLI's
    /// executable when installed; and `scratch`. An import of a sandboxed run's state into
    /// that store still under way ([`crate::state_import`]) is waited for first (up to
    /// [`SETTLE_LIMIT`]), so that what it carries is found there.
    pub fn user_store(
        &self,
        id: &AgentId,
        scratch: &Utf8Path,
        account: Option<&str>,
    ) -> crate::carry::StoreEnv {
        if let Ok(base) = self.private_base() {
            let settle = || crate::state_import::settle(&base, id.as_str(), SETTLE_LIMIT);
            // On a runtime's worker, the wait lets the runtime's other tasks go on.
            match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
                Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
                    tokio::task::block_in_place(settle);
                }
                _ => {
                    settle();
                }
            }
        }
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
        let run_path = run_dir.path().to_owned();
        let exe = locate(spec, &self.options.env);
        let plan = RunDir {
            handoff_sandbox: provider.asks_for_handoff_sandbox()
                && crate::sandbox::bubblewrap_here().is_some(),
            confined: false,
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
        crate::provider::give_run_temp(&mut invocation, &plan.temp());
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
        let plain = (invocation.program.clone(), invocation.env.clone());
        let (made, proxy) = self.sandbox_receiver(&request, &run_path, &mut invocation)?;
        Ok(PreparedReceiver {
            _run_dir: run_dir,
            policy: invocation.policy.clone(),
            plain,
            made,
            proxy,
            invocation,
            provider,
            prompt: prompt.to_owned(),
            secrets,
            request,
            version: pf.version,
            resume_env: agent_config
                .env
                .iter()
                .filter(|(k, _)| !credential_name(k))
                .chain(account_env.iter().filter(|(k, _)| !credential_name(k)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            agent_config: agent_config.clone(),
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
        self.start_receiver_holding(prepared, timeout, cancel, None)
            .await
    }

    /// Puts a receiver under handoff's own sandbox when its adapter asks for one and one can
    /// run here, as a delegated run ([`crate::sandbox`]): the worktree writable for the
    /// `implement` role only, its git directories read-only always. The receipt goes in
    /// `policy.sandbox`.
    fn sandbox_receiver(
        &self,
        request: &ReceiverRequest,
        run_path: &Utf8Path,
        invocation: &mut crate::provider::Invocation,
    ) -> Result<(Vec<Utf8PathBuf>, Option<crate::sandbox::ProxyPlan>), String> {
        let Some(spec) = invocation.sandbox.clone() else {
            return Ok((Vec::new(), None));
        };
        if let Some(why) = crate::sandbox::refused_here() {
            return Err(format!("the receiver is not run: {why}"));
        }
        let Some(bwrap) = crate::sandbox::bubblewrap_here() else {
            if let Some(policy) = invocation.policy.as_object_mut() {
                policy.insert("sandbox".into(), crate::sandbox::unavailable_receipt());
            }
            return Ok((Vec::new(), None));
        };
        let protected = self
            .workspace()
            .protected_paths(&request.cwd)
            .map_err(|e| format!("cannot find the git paths to protect: {e}"))?;
        // The worktree's root holds its `.git`, the first protected path.
        let worktree = protected
            .first()
            .filter(|p| p.file_name() == Some(".git"))
            .and_then(|p| p.parent())
            .map_or_else(|| request.cwd.clone(), Utf8Path::to_owned);
        let layout = crate::sandbox::Layout {
            worktree,
            writable: request.role == crate::continuation::ReceiverRole::Implement,
            protected,
            run_dir: run_path.to_owned(),
            home: crate::lease::passwd_home(),
            read_only: Vec::new(),
            writable_extra: Vec::new(),
            relay: self.options.handoff_exe.clone(),
        };
        let made = crate::sandbox::make_protected(&layout)?;
        let wrapped = crate::sandbox::wrap(&bwrap, &layout, &spec, invocation)
            .map_err(|e| format!("cannot set up handoff's sandbox: {e}"))?;
        if let Some(policy) = invocation.policy.as_object_mut() {
            policy.insert("sandbox".into(), wrapped.receipt);
        }
        Ok((made, wrapped.proxy))
    }

    /// [`Engine::start_receiver`], its reaper holding `hold` (a descriptor of the worktree
    /// lease's lock, [`crate::RootLease::hold`]) until the receiver's process tree is gone.
    pub async fn start_receiver_holding(
        &self,
        prepared: &PreparedReceiver,
        timeout: Duration,
        cancel: watch::Receiver<bool>,
        hold: Option<std::os::fd::OwnedFd>,
    ) -> ReceiverRun {
        let tap = self.progress_tap(
            &prepared.provider,
            &format!("receiver-{}", prepared.request.session_id),
            true,
            "receiver".to_owned(),
            &prepared.secrets,
        );
        let proxy = match &prepared.proxy {
            Some((socket, policy)) => {
                match crate::sandbox::proxy::Proxy::start(socket, policy.clone()) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        crate::sandbox::remove_made(&prepared.made);
                        return ReceiverRun::not_started(format!(
                            "cannot start the sandbox's proxy at {socket}: {e}"
                        ));
                    }
                }
            }
            None => None,
        };
        let request = &prepared.request;
        let artifacts = self.watch_artifacts([&request.target], &request.cwd);
        let report = supervise_with_tap(
            &prepared.invocation,
            prepared.prompt.as_bytes(),
            timeout,
            cancel,
            tap,
            self.reaper(hold),
        )
        .await;
        let traffic = proxy.map(crate::sandbox::proxy::Proxy::stop);
        crate::sandbox::remove_made(&prepared.made);
        // Only once no process of the receiver can still write behind a mount point.
        let gone = matches!(
            report.containment,
            crate::process::Containment::Reaper { .. }
        );
        let sweep = artifacts.filter(|_| gone).and_then(|watch| {
            let table = prepared.provider.sandbox_artifacts()?;
            Some(watch.sweep(&table.paths_for(prepared.version.as_deref())))
        });
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
            containment: report.containment,
            traffic,
            sweep,
        }
    }
}

/// How long a reader of an agent's store waits for imports into it under way: longer than an
/// import's commands may take (each is stopped after 30 s).
pub const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(100);
