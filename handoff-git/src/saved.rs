//! Saved fingerprints (`handoff fingerprint --json`) and what changed since one (`--diff`), as
//! strong as a run's own comparison.
//!
//! A run's "after" trusts nothing but what its "before" recorded: handoff's own stat record
//! (never the index, which an agent can rewrite), and the before's [`Baseline`] (the ignore
//! rules and object store as they stood). A fingerprint saved as JSON carries neither, so
//! [`save`] keeps both in the task store under the fingerprint's digest, and [`diff`] judges by
//! them when the store has them. When it does not (another machine's file, a store that was
//! deleted, one with a secret in it), every file is hashed and the rules and objects as they
//! are now are all there is to judge by; [`Judged`] says which.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    Baseline, Fingerprint, FingerprintBasis, GitEvidence, KeptRecord, Masker, StatRecord,
    TaskStore, Workspace, WorkspaceError,
};

use crate::{DetailedFingerprint, GitWorkspace};

/// The largest saved fingerprint [`read_saved`] reads (a repository of a million files is
/// about a tenth of it).
pub const MAX_SAVED_BYTES: usize = 1 << 30;

/// Why a saved fingerprint could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    /// Not a regular file, unreadable, or too large.
    #[error("{0}")]
    Unreadable(String),
    /// Not a fingerprint with its entries.
    #[error(
        "'{path}' is not a fingerprint saved by `handoff fingerprint --json` (with its `entries`): {reason}"
    )]
    NotAFingerprint {
        /// The file.
        path: Utf8PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Its entries are not the ones its digest was taken of.
    #[error("'{path}' was changed after it was saved: its entries do not match its digest")]
    Altered {
        /// The file.
        path: Utf8PathBuf,
    },
}

/// What a comparison with a saved fingerprint judged by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// The record and baseline the task store kept when it was saved, as a run's "after" does.
    ByBasis,
    /// Every file hashed, and the ignore rules and objects as they are now; why.
    Hashed(String),
}

/// Whether [`save`] kept the fingerprint's basis, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Kept: a later [`diff`] judges by it.
    Yes,
    /// Not kept; why.
    No(String),
}

/// Takes the fingerprint of the worktree containing `cwd` for saving, and keeps in `store` what
/// a later [`diff`] with it judges by. A path that holds one of `secrets` (in any form `masker`
/// finds) is left out of the kept record (its file is hashed every time); a baseline that holds
/// one is not kept at all.
pub fn save(
    workspace: &GitWorkspace,
    cwd: &Utf8Path,
    store: Result<&dyn TaskStore, String>,
    masker: &Masker,
) -> Result<(Fingerprint, Kept), WorkspaceError> {
    let fingerprint = workspace.fingerprint(cwd)?;
    let kept = match store {
        Ok(store) => keep(&fingerprint, store, masker),
        Err(why) => Kept::No(why),
    };
    Ok((fingerprint, kept))
}

fn keep(fingerprint: &Fingerprint, store: &dyn TaskStore, masker: &Masker) -> Kept {
    let (Some(record), Some(baseline)) = (&fingerprint.record, &fingerprint.baseline) else {
        return Kept::No("the fingerprint has no record".to_owned());
    };
    let baseline = baseline.to_bytes();
    let text = String::from_utf8_lossy(&baseline);
    if masker.mask(&text).text != text {
        return Kept::No("its ignore rules or object names hold a secret".to_owned());
    }
    let record = match masker.record_to_keep(record) {
        KeptRecord::AsIs => record.to_bytes().map(|bytes| bytes.into_owned()),
        KeptRecord::Without(kept) => kept.to_bytes().map(|bytes| bytes.into_owned()),
        KeptRecord::Nothing => None,
    };
    let Some(record) = record else {
        return Kept::No("its record could not be read back".to_owned());
    };
    let basis = FingerprintBasis {
        digest: fingerprint.digest.clone(),
        worktree: fingerprint.root.clone(),
        record,
        baseline,
    };
    match store.save_fingerprint_basis(&basis) {
        Ok(()) => Kept::Yes,
        Err(err) => Kept::No(format!("the task store did not keep it: {err}")),
    }
}

/// Reads a fingerprint saved by `handoff fingerprint --json` (a regular file only: a FIFO or a
/// device would never end) and checks that its entries are the ones its digest was taken of.
pub fn read_saved(path: &Utf8Path) -> Result<Fingerprint, SavedError> {
    let bytes = handoff_core::read_regular_file(path.as_str(), MAX_SAVED_BYTES)
        .map_err(SavedError::Unreadable)?;
    let not = |reason: String| SavedError::NotAFingerprint {
        path: path.to_owned(),
        reason,
    };
    let text = String::from_utf8(bytes).map_err(|_| not("it is not UTF-8".to_owned()))?;
    let detailed: DetailedFingerprint =
        serde_json::from_str(&text).map_err(|err| not(err.to_string()))?;
    let fingerprint: Fingerprint = detailed.into();
    let digest = crate::workspace::digest(&fingerprint, crate::par::default_threads())
        .map_err(|err| not(err.to_string()))?;
    if digest != fingerprint.digest {
        return Err(SavedError::Altered {
            path: path.to_owned(),
        });
    }
    Ok(fingerprint)
}

/// What changed in the worktree containing `cwd` since `before` (read by [`read_saved`]):
/// judged by the basis `store` kept for it when there is one, else by hashing every file.
/// `workspace` should fingerprint ignored files when `before` did.
pub fn diff(
    workspace: &GitWorkspace,
    cwd: &Utf8Path,
    before: &Fingerprint,
    store: Result<&dyn TaskStore, String>,
) -> Result<(GitEvidence, Judged), WorkspaceError> {
    let basis =
        store.and_then(
            |store| match store.fingerprint_basis(&before.digest, &before.root) {
                Ok(Some(basis)) => Ok(basis),
                Ok(None) => Err("the task store has no record of it".to_owned()),
                Err(err) => Err(format!("the task store could not be read: {err}")),
            },
        );
    let parts = basis.and_then(|basis| {
        let record = StatRecord::from_bytes(basis.record);
        let baseline = Baseline::from_bytes(&basis.baseline);
        record
            .zip(baseline)
            .ok_or_else(|| "the task store's record of it does not read back".to_owned())
    });
    let (after, judged) = match parts {
        Ok((record, baseline)) => {
            let mut since = before.slim();
            since.record = Some(std::sync::Arc::new(record));
            since.baseline = Some(std::sync::Arc::new(baseline));
            let after = workspace
                .clone()
                .with_stat_cache(true)
                .fingerprint_after(cwd, since)?;
            (after, Judged::ByBasis)
        }
        Err(why) => {
            let after = workspace.clone().with_stat_cache(false).fingerprint(cwd)?;
            (after, Judged::Hashed(why))
        }
    };
    Ok((before.compare(&after), judged))
}
