//! Where the store lives, and creating its directory and file with private modes.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::StoreError;

/// The store's file name inside the state directory.
pub const FILE_NAME: &str = "tasks.sqlite3";

/// `$XDG_STATE_HOME/handoff/tasks.sqlite3`, else `$HOME/.local/state/handoff/tasks.sqlite3`,
/// read from `env`. A relative `XDG_STATE_HOME` is ignored, as the XDG spec says.
pub fn default_path(env: &BTreeMap<String, String>) -> Result<Utf8PathBuf, StoreError> {
    let absolute = |key: &str| env.get(key).map(Utf8Path::new).filter(|p| p.is_absolute());
    let state = match (absolute("XDG_STATE_HOME"), absolute("HOME")) {
        (Some(state), _) => state.to_owned(),
        (None, Some(home)) => home.join(".local").join("state"),
        (None, None) => return Err(StoreError::NoStateDir),
    };
    Ok(state.join("handoff").join(FILE_NAME))
}

/// Creates the file's missing directories (`0700`) and the file itself (`0600`, empty) unless
/// it exists. SQLite gives the `-wal` and `-shm` files it makes next to it the file's mode.
/// Whether this call created the file.
pub(crate) fn prepare(path: &Utf8Path) -> Result<bool, StoreError> {
    let io = |path: &Utf8Path| {
        let path = path.to_owned();
        move |source| StoreError::Io { path, source }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(dir))?;
    }
    match fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io(path)(e)),
    }
}

/// Whether the store file at `path`, which existed before this process opened it, is empty:
/// a store truncated to nothing (its history gone), not one another process is creating (that
/// one has its first page within moments: this waits up to two seconds for it).
pub(crate) fn is_empty_store(path: &Utf8Path) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match fs::metadata(path) {
            Ok(m) if m.len() == 0 => {}
            _ => return false,
        }
        if std::time::Instant::now() >= deadline {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// What is wrong with who may read the store at `path` and its directory: each one a line
/// naming the file, its mode and the fix. The store holds prompts, notes and results, so only
/// its owner may read it; handoff creates it 0600 in a 0700 directory.
pub fn access_problems(path: &Utf8Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::geteuid().as_raw();
    let mut problems = Vec::new();
    let mut check = |p: &Utf8Path, fix: &str| {
        let Ok(meta) = fs::metadata(p) else {
            return;
        };
        let mode = meta.mode() & 0o777;
        if mode & 0o077 != 0 {
            problems.push(format!(
                "'{p}' is readable or writable by others (mode {mode:04o}): chmod {fix} '{p}'"
            ));
        }
        if meta.uid() != uid {
            problems.push(format!(
                "'{p}' belongs to user {}, not to you ({uid})",
                meta.uid()
            ));
        }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_str().is_empty()) {
        check(dir, "700");
    }
    for suffix in ["", "-wal", "-shm"] {
        check(Utf8Path::new(&format!("{path}{suffix}")), "600");
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_others_can_read_is_a_problem() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap().join("state");
        let path = root.join("tasks.sqlite3");
        prepare(&path).unwrap();
        assert!(
            access_problems(&path).is_empty(),
            "{:?}",
            access_problems(&path)
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        let problems = access_problems(&path);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("mode 0755") && problems[0].contains("chmod 700"));
        assert!(problems[1].contains("mode 0644") && problems[1].contains("chmod 600"));
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn default_path_follows_xdg() {
        let p = default_path(&env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])).unwrap();
        assert_eq!(p, "/s/handoff/tasks.sqlite3");
        let p = default_path(&env(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])).unwrap();
        assert_eq!(p, "/h/.local/state/handoff/tasks.sqlite3");
        let p = default_path(&env(&[("HOME", "/h")])).unwrap();
        assert_eq!(p, "/h/.local/state/handoff/tasks.sqlite3");
        assert!(matches!(
            default_path(&env(&[("HOME", "")])),
            Err(StoreError::NoStateDir)
        ));
        assert!(matches!(
            default_path(&env(&[])),
            Err(StoreError::NoStateDir)
        ));
    }
}
