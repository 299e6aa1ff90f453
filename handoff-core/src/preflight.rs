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
    search(spec.executable, path_dirs(env).chain(extra))
}

/// Finds the executable `name` on `PATH` alone, by the rules of [`locate`].
pub fn locate_on_path(name: &str, env: &BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    search(name, path_dirs(env))
}

fn path_dirs(env: &BTreeMap<String, String>) -> impl Iterator<Item = String> + '_ {
    env.get("PATH")
        .into_iter()
        .flat_map(|p| p.split(':').map(str::to_owned))
}

/// The first executable file `name` in one of `dirs` that is absolute and not guarded (a
/// worktree handoff works on, its own run and work directories: see [`crate::programs`]).
fn search(name: &str, dirs: impl Iterator<Item = String>) -> Option<Utf8PathBuf> {
    dirs.filter(|d| d.starts_with('/') && !crate::programs::is_guarded(Utf8Path::new(d)))
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

/// Replaces `file` in `dir` (made 0700) with `outcome` at once: written to a private temporary
/// file (0600) beside it, then renamed over it. On any error the temporary file is removed.
fn store(dir: &Utf8Path, file: &Utf8Path, outcome: &Preflight) -> std::io::Result<()> {
    use std::io::Write as _;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(&serde_json::to_vec(outcome).unwrap_or_default())?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_dir() -> (tempfile::TempDir, Utf8PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Utf8PathBuf::from_path_buf(tmp.path().join("cache")).unwrap();
        (tmp, dir)
    }

    fn names(dir: &Utf8Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_stored_preflight_replaces_the_old_one_privately() {
        let (_tmp, dir) = cache_dir();
        let file = dir.join("codex-key.json");
        let ok = |v: &str| Preflight {
            version: Some(v.to_owned()),
            failure: None,
        };
        store(&dir, &file, &ok("1.0")).unwrap();
        store(&dir, &file, &ok("2.0")).unwrap();
        let read: Preflight = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(read, ok("2.0"));
        assert_eq!(names(&dir), ["codex-key.json"]);
        let mode = |p: &Utf8Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&file)), (0o700, 0o600));
    }

    #[test]
    fn a_failed_store_leaves_no_temporary_file() {
        let (_tmp, dir) = cache_dir();
        // A non-empty directory where the file goes: the rename over it fails.
        let file = dir.join("codex-key.json");
        std::fs::create_dir_all(file.join("in-the-way")).unwrap();
        let outcome = Preflight {
            version: None,
            failure: None,
        };
        assert!(store(&dir, &file, &outcome).is_err());
        assert_eq!(names(&dir), ["codex-key.json"]);
    }

    #[test]
    fn locate_on_path_takes_the_first_executable_in_an_absolute_directory() {
        use std::os::unix::fs::PermissionsExt as _;
        let (_tmp, root) = cache_dir();
        let dir = |name: &str| {
            let d = root.join(name);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let (plain, first, second) = (dir("plain"), dir("first"), dir("second"));
        std::fs::write(plain.join("agent"), "not executable").unwrap();
        for d in [&first, &second] {
            std::fs::write(d.join("agent"), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(d.join("agent"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let env = |path: String| BTreeMap::from([("PATH".to_owned(), path)]);
        assert_eq!(
            locate_on_path("agent", &env(format!("relative::{plain}:{first}:{second}"))),
            Some(first.join("agent"))
        );
        assert_eq!(locate_on_path("agent", &env(format!("{plain}"))), None);
        assert_eq!(locate_on_path("agent", &BTreeMap::new()), None);
    }
}
