//! Contract: a root run's inputs become a validated [`Request`] against the target's static
//! capabilities, on a worktree the run holds alone. Every refusal here happens before any
//! process starts.

use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};
use tokio::sync::watch;

use super::Engine;
use super::draft::Draft;
use super::launch::cancelled;
use super::verdict::{Ended, Signal};
use crate::input::{RunInput, Validated};
use crate::lease::{Holder, LeaseError, RootLease, Wait};
use crate::request::Request;
use crate::workspace::{Fingerprint, GitEvidence};

impl Engine {
    /// Validates `input` into the request (echoed in the draft), reads the worktree's
    /// fingerprint before the run, and takes the root lease: one root run per worktree, none
    /// from inside another root's process tree (with `--wait`, waits for the worktree). A
    /// panel's member (seated in the draft) takes neither: it is given the "before" and the
    /// lease the panel took for all its members.
    pub(super) async fn contract(
        &self,
        input: &RunInput,
        draft: &mut Draft,
        cancel: &watch::Receiver<bool>,
    ) -> Result<(Validated, Fingerprint), Ended> {
        let validated = input
            .validate_with(&self.registry, &self.options.config)
            .map_err(Ended::InputRejected)?;
        let request = &validated.request;
        draft.set_request(request, &self.registry);
        cancelled(cancel)?;
        if let Some(seat) = draft.seat.clone() {
            // A panel's member: the panel took the "before" and the lease for every member,
            // on the same cwd.
            let shared = &seat.shared;
            let before = shared.summary.clone();
            draft.result.git = Some(GitEvidence::partial(Some(before.clone())));
            draft.config_state = shared.config_state.clone();
            draft.lease = Some(Arc::clone(&shared.lease));
            return Ok((validated, before));
        }
        let before = self.before(request, draft).await?;
        let lease = self
            .root_lease(
                &request.lineage.run_id,
                input,
                request,
                &before.root,
                cancel,
            )
            .await?;
        draft.lease = Some(Arc::new(lease));
        Ok((validated, before))
    }

    /// The root lease on the worktree at `root`, held by `run_id` (a run, or a panel for all
    /// its members): refused while another root run holds it, or waited for with `--wait`.
    pub(super) async fn root_lease(
        &self,
        run_id: &str,
        input: &RunInput,
        request: &Request,
        root: &Utf8Path,
        cancel: &watch::Receiver<bool>,
    ) -> Result<RootLease, Ended> {
        let dir = self.runtime_dir().map_err(Ended::Rejected)?;
        let holder = Holder {
            run_id: run_id.to_owned(),
            verb: input.verb.as_str().to_owned(),
            cwd: Utf8PathBuf::from(&request.cwd),
        };
        let wait = if input.wait {
            Wait::Until(cancel.clone())
        } else {
            Wait::Refuse
        };
        RootLease::acquire(&dir, root, &holder, wait)
            .await
            .map_err(|e| match e {
                LeaseError::Cancelled { .. } => Ended::Cancelled(Signal::WaitingForWorktree),
                e => Ended::Rejected(e.to_string()),
            })
    }
}
