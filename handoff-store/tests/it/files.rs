//! Where the store lives and who may read it.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{StoreError, TaskStore};
use handoff_store::{SqliteStore, default_path};

use crate::{new_task, turn};

fn mode(path: &Utf8Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn env(pairs: &[(&str, &Utf8Path)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_default_store_is_private_and_under_xdg_state_home() {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    let state = root.join("state");
    let store = SqliteStore::open_default(&env(&[
        ("XDG_STATE_HOME", &state),
        ("HOME", &root.join("home")),
    ]))
    .unwrap();
    let file = state.join("handoff/tasks.sqlite3");
    assert_eq!(store.path(), file);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    store.append(&task.id, &turn("t")).unwrap();

    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("handoff")), 0o700);
    assert_eq!(mode(&file), 0o600);
    let wal = Utf8PathBuf::from(format!("{file}-wal"));
    assert!(wal.exists());
    assert_eq!(mode(&wal), 0o600);
    assert_eq!(mode(&Utf8PathBuf::from(format!("{file}-shm"))), 0o600);
}

#[test]
fn without_xdg_state_home_the_store_is_under_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    let store = SqliteStore::open_default(&env(&[("HOME", &home)])).unwrap();
    let file = home.join(".local/state/handoff/tasks.sqlite3");
    assert_eq!(store.path(), file);
    assert_eq!(default_path(&env(&[("HOME", &home)])).unwrap(), file);
    assert_eq!(mode(&file), 0o600);
    assert!(matches!(
        SqliteStore::open_default(&BTreeMap::new()),
        Err(StoreError::NoStateDir)
    ));
}

#[test]
fn an_unwritable_directory_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    let blocker = root.join("file");
    std::fs::write(&blocker, "").unwrap();
    let err = SqliteStore::open(blocker.join("handoff/tasks.sqlite3")).unwrap_err();
    let StoreError::Io { path, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(path, &blocker.join("handoff"));
    assert!(!err.to_string().contains('\n'));
}
