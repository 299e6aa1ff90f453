//! Observe: what git shows before and after a run (through the [`Workspace`] trait), and what
//! the agent's process left: how it ended, the adapter's runtime check, and its answer read by
//! the adapter's pure [`Provider::parse`] and checked against the answer contract.

use std::sync::Arc;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};

use super::draft::Draft;
use super::launch::Ran;
use super::verdict::{After, Ended, Signal};
use super::{Engine, StoredRecord};
use crate::flags::FlagKind;
use crate::output::ProviderOutput;
use crate::process::Ending;
use crate::provider::{Observation, Provider};
use crate::request::Request;
use crate::result::{OutputInfo, Usage, UsageSource};
use crate::workspace::{
    Fingerprint, GitEvidence, ParkedFingerprint, StatRecord, Workspace, WorkspaceError,
};
use crate::{AgentId, ArtifactPath, ArtifactWatch, Sweep};

impl Engine {
    /// The git fingerprint before the run (a `--cwd` outside any worktree is refused here).
    pub(super) async fn before(
        &self,
        request: &Request,
        draft: &mut Draft,
    ) -> Result<Fingerprint, Ended> {
        let cwd = Utf8PathBuf::from(&request.cwd);
        // No program handoff starts from here on comes from a directory the agent may write.
        crate::guard_worktrees_of(&cwd);
        let workspace = self.evidence_workspace(request)?;
        // The record the last run in this worktree left, if the task store keeps one: trusted
        // rather than the index, which an agent may have rewritten since.
        let kept = self.kept_record(&cwd).await;
        let before = fingerprint(&workspace, &cwd, kept)
            .await
            .map_err(|e| match e {
                WorkspaceError::NotAWorktree { .. } => {
                    Ended::Rejected(format!("--cwd {cwd} is not inside a git worktree"))
                }
                e => Ended::Rejected(format!("cannot read git state: {e}")),
            })?;
        // A run inside a git directory (or the hooks directory) would make git's own files
        // its worktree: a build there writes hooks.
        if let Ok(protected) = self.workspace.protected_paths(&cwd) {
            let real = cwd.canonicalize_utf8().unwrap_or_else(|_| cwd.clone());
            if let Some(dir) = protected.iter().find(|p| real.starts_with(p)) {
                return Err(Ended::Rejected(format!(
                    "--cwd {cwd} is inside the git directory {dir}: give a directory of the \
                     worktree"
                )));
            }
        }
        if self.options.task_store.is_some() && request.lineage.parent_run_id.is_none() {
            draft.config_state = self.config_state(&cwd).await;
        }
        draft.artifacts = self.watch_artifacts([&request.target.harness], &cwd);
        // The per-path states are kept once, in the draft, for the comparison after the run;
        // the result and the caller only need what is serialized.
        let summary = before.summary();
        draft.result.git = Some(GitEvidence::partial(Some(summary.clone())));
        draft.before = Some(self.park(before));
        Ok(summary)
    }

    /// `before` with its per-path states moved out of memory until the "after" (into an
    /// unnamed file in the engine's private directory), or kept in memory when they cannot be.
    fn park(&self, before: Fingerprint) -> ParkedFingerprint {
        match self.private_base() {
            // Written while the agent starts and runs.
            Ok(dir) => ParkedFingerprint::park_behind(before, dir.as_std_path()),
            Err(_) => ParkedFingerprint::in_memory(before),
        }
    }

    /// The configuration that runs programs in the worktree containing `cwd`, if the workspace
    /// reader can tell.
    async fn config_state(&self, cwd: &Utf8Path) -> Option<crate::ConfigState> {
        let workspace = Arc::clone(&self.workspace);
        let cwd = cwd.to_owned();
        tokio::task::spawn_blocking(move || workspace.config_state(&cwd).ok())
            .await
            .ok()
            .flatten()
    }

    /// The record a task store keeps for the worktree containing `cwd`, as a fingerprint to
    /// take the next one since; `None` without a store, a record, or a readable one.
    async fn kept_record(&self, cwd: &Utf8Path) -> Option<Fingerprint> {
        let store = self.options.task_store.clone()?;
        let cwd = cwd.to_owned();
        let park = self.private_base().ok();
        let kept = tokio::task::spawn_blocking(move || {
            let real = cwd.canonicalize_utf8().ok()?;
            let (root, bytes) = store.open().ok()?.stat_record(&real).ok()??;
            let content: [u8; 32] = blake3::hash(&bytes).into();
            let record = StatRecord::from_bytes(bytes)?;
            // Out of memory while the "before" is taken next to it.
            let record = match park {
                Some(dir) => record.park(dir.as_std_path()),
                None => record,
            };
            let stored = StoredRecord {
                identity: record.identity(),
                content,
            };
            Some((Fingerprint::record_only(root.clone(), record), root, stored))
        })
        .await
        .ok()
        .flatten()?;
        let (fingerprint, root, stored) = kept;
        self.stored_records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(root, stored);
        Some(fingerprint)
    }

    /// Keeps the record of a root run's "after" (of the worktree at `root`) in the task store,
    /// for the next run.
    async fn keep_record(&self, root: Utf8PathBuf, record: Arc<StatRecord>, secrets: &[String]) {
        let Some(store) = self.options.task_store.clone() else {
            return;
        };
        // The record the store held when it was read, which an unchanged worktree repeats page
        // for page, need not be written again if the store still holds it: an agent may have
        // rewritten the store while it ran, and its forgery must not outlive the run.
        let identity = record.identity();
        let known = self
            .stored_records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&root)
            .filter(|stored| stored.identity == identity);
        // A path that holds a secret is never kept: its file is hashed every time instead.
        // (Checked only for a record about to be written: one the store already holds was
        // checked when it was.)
        let mut secrets_known = self.known_secrets();
        secrets_known.extend(secrets.iter().cloned());
        let masker = crate::redact::masker(&secrets_known);
        let saved = tokio::task::spawn_blocking(move || {
            let store = store.open().ok()?;
            if let Some(known) = known {
                let now = store.stat_record(&root).ok().flatten();
                if now.is_some_and(|(_, bytes)| *blake3::hash(&bytes).as_bytes() == known.content) {
                    return Some((root, known));
                }
            }
            let (record, identity) = match masker.record_to_keep(&record) {
                crate::KeptRecord::AsIs => (record, identity),
                crate::KeptRecord::Without(kept) => {
                    let identity = kept.identity();
                    (Arc::new(*kept), identity)
                }
                crate::KeptRecord::Nothing => return None,
            };
            // A parked page that does not read back as written: nothing is kept, and the
            // next run reads what the index cannot vouch for.
            let bytes = record.to_bytes()?;
            store.save_stat_record(&root, &bytes).ok()?;
            let content = blake3::hash(&bytes).into();
            Some((root, StoredRecord { identity, content }))
        })
        .await
        .ok()
        .flatten();
        if let Some((root, stored)) = saved {
            self.stored_records
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(root, stored);
        }
    }

    /// Which of the paths that the sandboxes of `agents` may leave are absent from the git
    /// directories of the worktree containing `cwd` now; `None` when none of them has a
    /// sandbox that leaves any, or the git directories cannot be found.
    pub(super) fn watch_artifacts<'a>(
        &self,
        agents: impl IntoIterator<Item = &'a AgentId>,
        cwd: &Utf8Path,
    ) -> Option<ArtifactWatch> {
        let mut paths: Vec<ArtifactPath> = Vec::new();
        for agent in agents {
            let table = self.registry.get(agent).and_then(|p| p.sandbox_artifacts());
            for path in table.map(|t| t.all_paths()).unwrap_or_default() {
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
        }
        if paths.is_empty() {
            return None;
        }
        let dirs = self.workspace.git_dirs(cwd).ok()?;
        Some(ArtifactWatch::take(&dirs, &paths))
    }

    /// The paths the sandbox of the run of `draft` leaves, for its CLI's version, once its
    /// whole process tree is known to be gone (a process still alive could fill a mount point
    /// between its check and its removal); `None` otherwise, or when its CLI leaves none.
    pub(super) fn artifacts_left_by(&self, draft: &Draft) -> Option<Vec<ArtifactPath>> {
        // A run that never started an agent left nothing and has nothing left running.
        let gone = draft
            .result
            .processes
            .as_ref()
            .is_none_or(|p| p.tree_gone == Some(true));
        let table = draft
            .request
            .as_ref()
            .and_then(|r| self.registry.get(&r.target.harness))
            .and_then(|p| p.sandbox_artifacts());
        gone.then(|| {
            table.map_or_else(Vec::new, |t| {
                t.paths_for(draft.result.target.version.as_deref())
            })
        })
    }

    /// Whether the target of `draft` has a sandbox that leaves artifacts in some version (its
    /// receipt lists what was swept).
    pub(super) fn leaves_artifacts(&self, draft: &Draft) -> bool {
        draft
            .request
            .as_ref()
            .and_then(|r| self.registry.get(&r.target.harness))
            .and_then(|p| p.sandbox_artifacts())
            .is_some_and(|t| !t.all_paths().is_empty())
    }

    /// The workspace reader the evidence of `request` is taken with: ignored files covered when
    /// it asks (`--ignored`).
    pub(super) fn evidence_workspace(
        &self,
        request: &Request,
    ) -> Result<Arc<dyn Workspace>, Ended> {
        if !request.include_ignored {
            return Ok(Arc::clone(&self.workspace));
        }
        self.workspace.including_ignored().ok_or_else(|| {
            Ended::Rejected("--ignored: this workspace reader cannot cover ignored files".into())
        })
    }

    /// The worktree after the run compared with the fingerprint before it, recorded in the
    /// result; `None` when there was no "before".
    pub(super) async fn after(&self, draft: &mut Draft) -> Option<After> {
        let (Some(before), Some(cwd)) = (draft.before.take(), draft.cwd.clone()) else {
            return None;
        };
        // Judged against handoff's own record of the "before", never the index's stat data,
        // which the agent could rewrite.
        let workspace = match draft.request.as_ref() {
            Some(request) => match self.evidence_workspace(request) {
                Ok(w) => w,
                Err(_) => return Some(After::Unreadable("ignored files cannot be covered".into())),
            },
            None => Arc::clone(&self.workspace),
        };
        let sweep = match (draft.artifacts.take(), self.artifacts_left_by(draft)) {
            (Some(watch), Some(paths)) => Some(watch.sweep(&paths)),
            _ => None,
        };
        if let Some(sweep) = &sweep {
            sweep.record(&mut draft.result.policy);
        }
        let root_run = draft
            .request
            .as_ref()
            .is_some_and(|r| r.lineage.parent_run_id.is_none());
        let keep = root_run.then_some(draft.secrets.as_slice());
        let (after, evidence) = self.compare(before, &cwd, workspace, keep).await;
        let (after, evidence) = with_kept(after, evidence, sweep.as_ref());
        if let Some(evidence) = evidence {
            draft.result.git = Some(evidence);
        }
        Some(after)
    }

    /// The worktree containing `cwd` now, compared with `before` (taken there earlier), and
    /// the evidence to record; with `keep`, the record of "now" is kept in the task store for
    /// the next run, without the paths that hold a secret (those `keep` names or any other).
    pub(super) async fn compare(
        &self,
        mut before: ParkedFingerprint,
        cwd: &Utf8Path,
        workspace: Arc<dyn Workspace>,
        keep: Option<&[String]>,
    ) -> (After, Option<GitEvidence>) {
        // The record goes with the request for the "after" alone, which lets go of it once it
        // has read it.
        let since = before.take_since();
        match fingerprint(&workspace, cwd, Some(since)).await {
            Ok(after) => {
                let evidence = match before.compare_summaries(&after) {
                    Ok(evidence) => evidence,
                    // The states are read only when the digests differ: the worktree changed,
                    // but which paths did cannot be told.
                    Err(e) => {
                        let evidence = GitEvidence {
                            before: Some(before.summary()),
                            after: Some(after.summary()),
                            changed: true,
                            changed_files: Vec::new(),
                            flags: Vec::new(),
                            masked_paths: 0,
                            applied: None,
                            branch: None,
                        };
                        return (After::Unnamed(e.to_string()), Some(evidence));
                    }
                };
                // Nothing needs the per-path states any more: only the record is kept.
                drop(before);
                let record = after.record.clone();
                drop(after);
                if let Some(secrets) = keep
                    && let Some(record) = record
                    && let Some(root) = evidence.after.as_ref().map(|a| a.root.clone())
                {
                    self.keep_record(root, record, secrets).await;
                }
                let after = After::Compared {
                    changed: evidence.changed,
                    files: evidence.changed_files.clone(),
                    git_programs: evidence
                        .flags
                        .iter()
                        .filter(|f| f.kind.blocks())
                        .map(|f| f.path.clone())
                        .collect(),
                };
                (after, Some(evidence))
            }
            Err(e) => (After::Unreadable(e.to_string()), None),
        }
    }
}

/// How the agent's run ended, from its process's end and its output; what the answer says is
/// recorded in the result (output, usage) for the verdict to judge.
pub(super) fn observe(
    provider: &dyn Provider,
    ran: Ran,
    timeout: Duration,
    draft: &mut Draft,
) -> Ended {
    let Ran {
        ending,
        raw,
        turn_limit,
    } = ran;
    // Whatever else happened, processes that may outlive the run outrank it.
    if draft
        .result
        .processes
        .as_ref()
        .is_some_and(|p| p.tree_gone == Some(false))
    {
        draft.result.exit.timed_out = ending == Ending::TimedOut;
        draft.result.exit.cancelled = ending == Ending::Cancelled;
        return Ended::NotIsolated(
            "the agent's processes escaped their reaper (it was stopped, killed or outrun): \
             some may outlive the run"
                .to_owned(),
        );
    }
    if let Some(limit) = turn_limit {
        // Stopped by handoff at the limit: what the CLI counted so far is still its usage.
        if let Ok(
            Observation::Answer { usage: Some(u), .. }
            | Observation::AgentFailure { usage: Some(u), .. },
        ) = provider.parse(&raw)
        {
            draft.result.usage = u;
        }
        return Ended::AgentFailure {
            agent: provider.spec().id.clone(),
            message: super::turns::message(limit),
            reason: crate::FailureReason::new(crate::FailureCause::Other),
        };
    }
    match ending {
        Ending::TimedOut => {
            draft.result.exit.timed_out = true;
            return Ended::TimedOut {
                budget_ms: timeout.as_millis(),
            };
        }
        Ending::Cancelled => {
            draft.result.exit.cancelled = true;
            return Ended::Cancelled(Signal::DuringRun);
        }
        Ending::OutputLimit { stream } => return Ended::OutputLimit { stream },
        Ending::SpawnFailed { message } => return Ended::NotRun(message),
        Ending::Exited => {}
    }
    if let Some(reason) = provider.runtime_check(&raw) {
        return Ended::NotIsolated(reason);
    }
    let agent = provider.spec().id.clone();
    let observation = match provider.parse(&raw) {
        Ok(o) => o,
        Err(e) => return Ended::InvalidOutput(e.to_string()),
    };
    match observation {
        Observation::Unavailable { message } => Ended::PreflightFailed(message),
        Observation::AgentFailure {
            message,
            usage,
            reason,
        } => {
            if let Some(u) = usage {
                draft.result.usage = u;
            }
            Ended::AgentFailure {
                agent,
                message,
                reason,
            }
        }
        Observation::Answer { payload, usage } => {
            let out = match ProviderOutput::parse_strict(&payload) {
                Ok(out) => out,
                Err(e) => return Ended::InvalidOutput(e.to_string()),
            };
            draft.result.usage = usage.unwrap_or_else(|| self_reported(&out));
            draft.result.output = OutputInfo {
                response: Some(out.response.clone()),
                evidence: out.evidence.clone(),
                findings: out.findings.clone(),
                verdict: out.verdict,
            };
            Ended::Answered {
                agent,
                exit_code: raw.exit_code,
                status: out.status,
            }
        }
    }
}

/// `after` and `evidence` with the paths a sweep kept (of a sandbox's mount points, absent
/// before the run, with content now) counted as changes that block a writing run
/// ([`FlagKind::SandboxMountPoint`]): the fingerprint need not cover them for a write behind
/// a mount point to be seen.
pub(super) fn with_kept(
    mut after: After,
    mut evidence: Option<GitEvidence>,
    sweep: Option<&Sweep>,
) -> (After, Option<GitEvidence>) {
    let kept: Vec<&str> = sweep
        .map(|s| s.kept.iter().map(|k| k.path.as_str()).collect())
        .unwrap_or_default();
    if kept.is_empty() {
        return (after, evidence);
    }
    let add = |list: &mut Vec<String>| {
        for path in &kept {
            if !list.iter().any(|p| p == path) {
                list.push((*path).to_owned());
            }
        }
        list.sort();
    };
    if let After::Compared {
        changed,
        files,
        git_programs,
    } = &mut after
    {
        *changed = true;
        add(files);
        add(git_programs);
    }
    if let Some(e) = evidence.as_mut() {
        e.changed = true;
        add(&mut e.changed_files);
        for path in &kept {
            if !e.flags.iter().any(|f| f.path == *path) {
                e.flags.push(FlagKind::SandboxMountPoint.on(path));
            }
        }
    }
    (after, evidence)
}

/// A fingerprint of the worktree containing `cwd`, after `since` when given (whose record it
/// takes).
async fn fingerprint(
    ws: &Arc<dyn Workspace>,
    cwd: &Utf8Path,
    since: Option<Fingerprint>,
) -> Result<Fingerprint, WorkspaceError> {
    let ws = Arc::clone(ws);
    let cwd = cwd.to_owned();
    tokio::task::spawn_blocking(move || match since {
        Some(before) => ws.fingerprint_after(&cwd, before),
        None => ws.fingerprint(&cwd),
    })
    .await
    .unwrap_or_else(|e| {
        Err(WorkspaceError::Git {
            message: format!("fingerprint task failed: {e}"),
        })
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
        premium_requests: None,
    }
}
