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
pub(crate) fn prepare(path: &Utf8Path) -> Result<(), StoreError> {
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
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
