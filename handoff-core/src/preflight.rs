//! Finding an agent executable and caching its preflight on disk.
//!
//! A cached outcome is reused only while everything it depends on is unchanged: the executable
//! (path, size, mtime, inode), handoff's own version, and whatever the adapter names in
//! [`Provider::preflight_key`] (e.g. the helper programs its sandbox needs). A probe whose
//! outcome can't be keyed is never cached, and neither is a failed preflight.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use camino::{Utf8Path, Utf8PathBuf};
use sha2::{Digest, Sha256};

use crate::provider::{Preflight, ProbeEnv, Provider, ProviderSpec};
use crate::result::DRIVER_VERSION;

/// Finds the executable of `spec` on `PATH`, then in its extra directories. Only absolute
/// directories are searched, and only regular files with an execute bit count.
pub fn locate(spec: &ProviderSpec, env: &BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    let home = env.get("HOME").map(String::as_str);
    let extra = spec
        .extra_dirs
        .iter()
        .filter_map(|d| match d.strip_prefix("~/") {
            Some(rest) => home.map(|h| format!("{h}/{rest}")),
            None => Some((*d).to_owned()),
        });
    first_executable(spec.executable, path_dirs(env).chain(extra))
}

/// Finds the program `name` on `PATH` of `env`, as [`locate`] does (helper programs such as a
/// sandbox's).
pub fn locate_on_path(name: &str, env: &BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    first_executable(name, path_dirs(env))
}

/// The directories of `PATH` in `env`, in order.
fn path_dirs(env: &BTreeMap<String, String>) -> impl Iterator<Item = String> + '_ {
    env.get("PATH")
        .into_iter()
        .flat_map(|p| p.split(':'))
        .map(str::to_owned)
}

/// The first `dir/name` that is an executable file, among the absolute `dirs`.
fn first_executable(name: &str, dirs: impl Iterator<Item = String>) -> Option<Utf8PathBuf> {
    dirs.filter(|d| d.starts_with('/'))
        .map(|d| Utf8PathBuf::from(d).join(name))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a regular file (after symlinks) with an execute bit.
pub fn is_executable(path: &Utf8Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A stable description of a file for cache keys: path, size, mtime, inode; or "missing".
pub fn file_identity(path: &Utf8Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) => format!(
            "{path}:{}:{}.{}:{}",
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ino()
        ),
        Err(_) => format!("{path}:missing"),
    }
}

/// The on-disk preflight cache.
#[derive(Debug, Clone)]
pub struct PreflightCache {
    dir: Option<Utf8PathBuf>,
}

impl PreflightCache {
    /// A cache in `dir` (created 0700 on first write); `None` disables caching.
    pub fn new(dir: Option<Utf8PathBuf>) -> PreflightCache {
        PreflightCache { dir }
    }

    /// Runs (or reuses) the preflight of `provider` for `executable`.
    /// Returns the outcome and whether it came from the cache.
    pub async fn preflight(
        &self,
        provider: &dyn Provider,
        executable: &Utf8Path,
        probe: &ProbeEnv,
    ) -> (Preflight, bool) {
        let key = provider.preflight_key(probe).map(|extra| {
            let mut h = Sha256::new();
            for part in [
                DRIVER_VERSION.to_owned(),
                provider.spec().id.to_string(),
                file_identity(executable),
            ]
            .into_iter()
            .chain(extra)
            {
                h.update((part.len() as u64).to_be_bytes());
                h.update(part.as_bytes());
            }
            hex::encode(h.finalize())
        });
        let file = match (&self.dir, &key) {
            (Some(dir), Some(key)) => {
                Some(dir.join(format!("{}-{}.json", provider.spec().id, &key[..32])))
            }
            _ => None,
        };
        if let Some(file) = &file
            && let Ok(bytes) = std::fs::read(file)
            && let Ok(p) = serde_json::from_slice::<Preflight>(&bytes)
        {
            return (p, true);
        }
        let outcome = provider.preflight(executable, probe).await;
        // Only successes are kept: a failure may be transient (a probe that timed out on a
        // loaded machine) and re-probing a broken setup costs little.
        if let (Some(dir), Some(file), None) = (&self.dir, &file, &outcome.failure) {
            // A cache that can't be written only costs speed.
            let _ = store(dir, file, &outcome);
        }
        (outcome, false)
    }
}

fn store(dir: &Utf8Path, file: &Utf8Path, outcome: &Preflight) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let tmp = dir.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
    std::fs::write(&tmp, serde_json::to_vec(outcome).unwrap_or_default())?;
    std::fs::rename(&tmp, file)
}
