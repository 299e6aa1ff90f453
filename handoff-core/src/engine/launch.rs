//! Launch: the planned agent process is preflighted, its files written, and it runs under the
//! process supervisor (own process group, bounded output, time budget, cancellation) until it
//! ends. A root run with advice first starts the supervisor its worker may ask.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::sync::Arc;
use std::time::Duration;

use camino::Utf8Path;
use tokio::sync::watch;

use super::draft::Draft;
use super::plan::Plan;
use super::verdict::{Ended, Signal};
use super::{Engine, Launch};
use crate::input::RunInput;
use crate::mcp::McpDescriptor;
use crate::output::MAX_PROVIDER_OUTPUT_BYTES;
use crate::private_dir::{PrivateDir, PrivateDirKind};
use crate::process::{Ending, supervise_with_tap};
use crate::provider::{AnswerSource, Provider, RawOutput};
use crate::request::{DelegationMode, Request};
use crate::supervisor::{Supervisor, SupervisorSetup};
use crate::workspace::Fingerprint;

/// What the agent process left: how it ended and what it wrote.
pub(super) struct Ran {
    /// How the process ended.
    pub ending: Ending,
    /// Its output, for the adapter to read.
    pub raw: RawOutput,
    /// The turn limit handoff stopped it at ([`Provider::turns_counted_by_handoff`]), if it
    /// did.
    pub turn_limit: Option<u32>,
}

/// A run wrapped in handoff's sandbox.
pub(super) struct Sandboxed {
    /// The agent's environment as its adapter planned it.
    env: std::collections::BTreeMap<String, String>,
    /// Directories made to be mounted read-only ([`crate::sandbox::make_protected`]).
    made: Vec<camino::Utf8PathBuf>,
    /// The filtering proxy of the run's own network namespace.
    proxy: Option<crate::sandbox::proxy::Proxy>,
}

impl Sandboxed {
    /// Stops the run's proxy and records what it let through and refused in the receipt.
    pub(super) fn stop_proxy(&mut self, draft: &mut Draft) {
        let Some(proxy) = self.proxy.take() else {
            return;
        };
        let traffic = proxy.stop();
        if let Some(receipt) = draft
            .result
            .policy
            .get_mut("sandbox")
            .and_then(|s| s.get_mut("proxy"))
            .and_then(serde_json::Value::as_object_mut)
        {
            receipt.insert("traffic".into(), traffic.receipt());
        }
    }
}

fn set_receipt(draft: &mut Draft, receipt: serde_json::Value) {
    if let Some(policy) = draft.result.policy.as_object_mut() {
        policy.insert("sandbox".into(), receipt);
    }
}

/// Stops the run when a signal has arrived before the agent started.
pub(super) fn cancelled(cancel: &watch::Receiver<bool>) -> Result<(), Ended> {
    if *cancel.borrow() {
        Err(Ended::Cancelled(Signal::BeforeStart))
    } else {
        Ok(())
    }
}

impl Engine {
    /// The launch of a root run: its time budget and, for a run with advice, the supervisor
    /// its worker may ask (kept in the draft until the verdict).
    pub(super) fn root_launch(
        &self,
        input: &RunInput,
        request: &Request,
        mcp: Option<&McpDescriptor>,
        before: &Fingerprint,
        draft: &mut Draft,
        cancel: &watch::Receiver<bool>,
    ) -> Result<Launch, Ended> {
        let mut launch = Launch {
            context: None,
            access: None,
            nested_text: None,
            timeout: Duration::from_millis(request.budgets.limits.timeout_ms),
            view: None,
            confined: false,
        };
        if request.delegation.mode == DelegationMode::AdviceOnly {
            let exe = self.options.handoff_exe.clone().ok_or_else(|| {
                Ended::Rejected(format!(
                    "{} needs the path of the handoff binary for nested advice \
                     (EngineOptions::handoff_exe)",
                    input.verb.as_str()
                ))
            })?;
            let mailbox_dir = self
                .private_dir(PrivateDirKind::Mailboxes)
                .map_err(|e| Ended::NotRun(format!("cannot create the mailbox directory: {e}")))?;
            let snapshot_dir = self
                .private_dir(PrivateDirKind::Snapshots)
                .map_err(|e| Ended::NotRun(format!("cannot create the snapshot directory: {e}")))?;
            let supervisor = Supervisor::start(SupervisorSetup {
                engine: self.clone(),
                root: request,
                root_mcp: mcp.cloned(),
                worktree: before.root.clone(),
                started_at: &draft.result.timing.started_at,
                started: draft.started,
                handoff_exe: exe,
                mailbox_dir,
                snapshot_dir,
                cancel: cancel.clone(),
            })
            .map_err(Ended::NotRun)?;
            launch.context = Some(supervisor.root_context().clone());
            launch.access = Some(supervisor.access());
            launch.nested_text = Some(supervisor.root_prompt_text(request));
            draft.supervisor = Some(supervisor);
        }
        Ok(launch)
    }

    /// Preflights the planned CLI, writes its files and runs it to its end. The run's private
    /// directory is removed once the answer file is read.
    pub(super) async fn start(
        &self,
        request: &Request,
        plan: Plan,
        draft: &mut Draft,
        cancel: watch::Receiver<bool>,
        timeout: Duration,
    ) -> Result<Ran, Ended> {
        let Plan {
            provider,
            run_dir,
            run_path,
            exe,
            prompt,
            mut invocation,
            nested,
        } = plan;
        let spec = provider.spec();
        let Some(exe) = exe else {
            return Err(Ended::NotInstalled(format!(
                "{} was not found on PATH",
                spec.executable
            )));
        };
        let probe = self.probe_env(provider.as_ref(), &run_path);
        let (pf, _cached) = self.cache.preflight(provider.as_ref(), &exe, &probe).await;
        draft.result.target.version = pf.version.clone();
        if let Some(reason) = pf.failure {
            return Err(Ended::PreflightFailed(format!(
                "{} preflight failed: {reason}",
                spec.id
            )));
        }
        cancelled(&cancel)?;

        for d in &invocation.dirs {
            std::fs::create_dir_all(d)
                .and_then(|()| std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)))
                .map_err(|e| Ended::NotRun(format!("cannot create {d}: {e}")))?;
        }
        for f in &invocation.files {
            write_private(&f.path, &f.contents)
                .map_err(|e| Ended::NotRun(format!("cannot write {}: {e}", f.path)))?;
        }
        let mut sandboxed =
            self.sandbox(request, draft, &run_path, nested.as_ref(), &mut invocation)?;
        let label = request
            .mode
            .map_or_else(|| "advice".to_owned(), |m| m.as_str().to_owned());
        let tap = self.progress_tap(
            &provider,
            &request.lineage.run_id,
            request.lineage.parent_run_id.is_none(),
            label,
            &draft.secrets,
        );
        let limit = provider
            .turns_counted_by_handoff()
            .then_some(request.selection.resolved.max_turns)
            .flatten();
        let (tap, cancel, reached) = match limit {
            Some(limit) => {
                let watch = super::turns::TurnWatch::start(&provider, limit, tap, cancel);
                (Some(watch.tap), watch.cancel, Some(watch.reached))
            }
            None => (tap, cancel, None),
        };
        // The reaper holds the worktree lease until the agent's tree is gone, even if handoff
        // is killed first.
        let hold = draft.lease.as_ref().and_then(|l| l.hold().ok());
        let report = supervise_with_tap(
            &invocation,
            prompt.as_bytes(),
            timeout,
            cancel,
            tap,
            self.reaper(hold),
        )
        .await;
        let turn_limit = reached
            .filter(|r| report.ending == crate::process::Ending::Cancelled && r.reached())
            .and(limit);
        draft.result.processes = Some(crate::result::Processes::from(&report.containment));
        draft.result.exit.provider = report.exit_code;
        draft.result.exit.signal = report.signal.clone();
        let answer_file = match &invocation.answer {
            AnswerSource::File(p) | AnswerSource::StdoutWithReport(p) => read_answer_file(p),
            AnswerSource::Stdout => None,
        };
        let stderr = String::from_utf8_lossy(&report.stderr).into_owned();
        draft.result.diagnostics.provider_stderr = stderr;
        if matches!(invocation.answer, AnswerSource::File(_)) {
            draft.result.diagnostics.provider_stdout =
                String::from_utf8_lossy(&report.stdout).into_owned();
        }
        if let Some(state) = &mut sandboxed {
            crate::sandbox::remove_made(&state.made);
            state.stop_proxy(draft);
        }
        if let Some(state) = sandboxed {
            let state = crate::provider::SandboxedState {
                executable: &exe,
                env: &state.env,
                parent_env: &self.options.env,
                run_dir: &run_path,
                cwd: &invocation.cwd,
                stdout: &report.stdout,
            };
            let run = (request.lineage.run_id.as_str(), draft.secrets.as_slice());
            let value = self
                .carry_state(provider.as_ref(), &state, run_dir, run)
                .await;
            if let Some(receipt) = draft
                .result
                .policy
                .get_mut("sandbox")
                .and_then(serde_json::Value::as_object_mut)
                && !value.is_null()
            {
                receipt.insert("stateAfterRun".into(), value);
            }
        } else {
            drop(run_dir);
        }

        Ok(Ran {
            ending: report.ending,
            raw: RawOutput {
                stdout: report.stdout,
                stderr: report.stderr,
                exit_code: report.exit_code,
                answer_file,
            },
            turn_limit,
        })
    }

    /// Carries a sandboxed run's state into the user's store (the receipt's `stateAfterRun`;
    /// null when there is nothing to carry) and lets go of the run directory: in a detached
    /// importer that holds the directory until it is done, when the engine is set to
    /// ([`super::EngineOptions::import_in_background`]), so the result does not wait; else
    /// here, before the directory is removed.
    async fn carry_state(
        &self,
        provider: &dyn Provider,
        state: &crate::provider::SandboxedState<'_>,
        run_dir: PrivateDir,
        (run_id, secrets): (&str, &[String]),
    ) -> serde_json::Value {
        let Some(what) = provider.state_to_import(state.stdout) else {
            return serde_json::Value::Null;
        };
        let exe = self
            .options
            .handoff_exe
            .as_ref()
            .filter(|_| self.options.import_in_background);
        let run_dir = match (exe, self.private_base()) {
            (Some(exe), Ok(base)) => {
                let handover = crate::state_import::Handover {
                    run_id,
                    harness: provider.spec().id.as_str(),
                    what: &what,
                    state,
                    secrets,
                };
                match crate::state_import::start(exe, &base, run_dir, &handover) {
                    Ok(record) => {
                        return serde_json::json!({"importing": what, "record": record});
                    }
                    Err((dir, _)) => dir,
                }
            }
            _ => run_dir,
        };
        // One import into the agent's store at a time (see `state_import::one_at_a_time`).
        let one = match self.private_base() {
            Ok(base) => {
                let harness = provider.spec().id.as_str().to_owned();
                tokio::task::spawn_blocking(move || {
                    crate::state_import::one_at_a_time(&base, &harness)
                })
                .await
                .ok()
                .flatten()
            }
            Err(_) => None,
        };
        let imported = provider.import_sandboxed_state(state).await;
        drop(one);
        drop(run_dir);
        match imported {
            Ok(Some(what)) => serde_json::json!({"imported": what}),
            Ok(None) => serde_json::Value::Null,
            Err(why) => serde_json::json!({"notImported": why}),
        }
    }

    /// Puts the agent under handoff's own sandbox when its adapter asks for one and one can
    /// run here ([`crate::sandbox`]); records the receipt as `policy.sandbox`. Returns the
    /// agent's environment as planned when it was wrapped (for its state to be imported
    /// afterwards).
    fn sandbox(
        &self,
        request: &Request,
        draft: &mut Draft,
        run_path: &Utf8Path,
        nested: Option<&crate::provider::NestedAccess>,
        invocation: &mut crate::provider::Invocation,
    ) -> Result<Option<Sandboxed>, Ended> {
        let Some(spec) = invocation.sandbox.clone() else {
            return Ok(None);
        };
        if let Some(why) = crate::sandbox::refused_here() {
            return Err(Ended::NotRun(format!(
                "{} is not run: {why}",
                request.target.harness
            )));
        }
        let Some(bwrap) = crate::sandbox::bubblewrap_here() else {
            set_receipt(draft, crate::sandbox::unavailable_receipt());
            return Ok(None);
        };
        // The "before" in the result: the run's own, or the one a panel took for its members.
        let worktree = draft
            .result
            .git
            .as_ref()
            .and_then(|g| g.before.as_ref())
            .map(|b| b.root.clone())
            .ok_or_else(|| Ended::NotRun("the worktree was not fingerprinted".into()))?;
        let protected = self
            .workspace()
            .protected_paths(Utf8Path::new(&request.cwd))
            .map_err(|e| Ended::NotRun(format!("cannot find the git paths to protect: {e}")))?;
        let mut read_only = Vec::new();
        let mut writable_extra = Vec::new();
        if let Some(n) = nested {
            // The mailbox: its answers readable, its `in/` the one writable path.
            read_only.push(n.handoff_exe.clone());
            read_only.push(n.mailbox.clone());
            writable_extra.push(n.inbox());
        }
        let layout = crate::sandbox::Layout {
            worktree,
            writable: request.grants.resolved.write,
            protected,
            run_dir: run_path.to_owned(),
            home: crate::lease::passwd_home(),
            read_only,
            writable_extra,
            relay: self.options.handoff_exe.clone(),
        };
        let env = invocation.env.clone();
        let made = crate::sandbox::make_protected(&layout).map_err(Ended::NotRun)?;
        let mut spec = spec;
        let shared = self.shared_packages(&mut spec);
        let mut wrapped = crate::sandbox::wrap(&bwrap, &layout, &spec, invocation)
            .map_err(|e| Ended::NotRun(format!("cannot set up handoff's sandbox: {e}")))?;
        if let Some(shared) = shared {
            wrapped.receipt["packages"] = shared;
        }
        set_receipt(draft, wrapped.receipt);
        let proxy = match wrapped.proxy {
            Some((socket, policy)) => Some(
                crate::sandbox::proxy::Proxy::start(&socket, policy).map_err(|e| {
                    Ended::NotRun(format!("cannot start the sandbox's proxy at {socket}: {e}"))
                })?,
            ),
            None => None,
        };
        Ok(Some(Sandboxed { env, made, proxy }))
    }

    /// Makes the packages `spec` asks for available from handoff's own cache
    /// (`<cache>/handoff/packages`, next to the preflight cache), fetched outside the sandbox
    /// with the user's own environment, and adds their read-only binds to `spec`. Returns the
    /// receipt's `packages`, or `None` when the CLI asks for none or there is no cache.
    fn shared_packages(&self, spec: &mut crate::sandbox::SandboxSpec) -> Option<serde_json::Value> {
        let packages = spec.packages.as_ref()?;
        let cache = self
            .options
            .preflight_cache
            .as_ref()?
            .parent()?
            .join("packages");
        let (binds, report) =
            crate::sandbox::packages::prepare(&cache, packages, &self.options.env);
        spec.binds.extend(binds);
        Some(
            report
                .into_iter()
                .map(|p| {
                    serde_json::json!({
                        "name": p.name,
                        "source": p.source,
                        "outcome": p.outcome,
                        "agent": "read-only",
                    })
                })
                .collect(),
        )
    }

    /// A line tap for a run's stdout that feeds the progress hook, when one is installed.
    pub(super) fn progress_tap(
        &self,
        provider: &Arc<dyn Provider>,
        run_id: &str,
        root: bool,
        label: String,
        secrets: &[String],
    ) -> Option<tokio::sync::mpsc::UnboundedSender<Vec<u8>>> {
        let hook = self.options.progress.clone()?;
        // What the status line shows (a command, a path) is masked like every other output.
        let mut known = self.known_secrets();
        known.extend(secrets.iter().cloned());
        let masker = crate::Masker::new(known);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let provider = Arc::clone(provider);
        let run_id = run_id.to_owned();
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                for event in provider.progress(&line) {
                    let event = event.masked(&masker);
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

/// Writes a new file only its owner can read (never through a symlink, never over a file).
pub(super) fn write_private(path: &Utf8Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    f.write_all(contents)
}
