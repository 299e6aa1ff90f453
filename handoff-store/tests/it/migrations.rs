//! A fresh store gets the latest schema; reopening changes nothing; a newer store or another
//! program's file is refused with one clear line.

use handoff_core::{StoreError, TaskStore};
use handoff_store::{APPLICATION_ID, SCHEMA_VERSION, SqliteStore};

use crate::{new_task, open, raw, temp, turn};

fn schema_objects(path: &camino::Utf8Path) -> Vec<String> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare("SELECT type || ' ' || name FROM sqlite_schema ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn pragma<T: rusqlite::types::FromSql>(path: &camino::Utf8Path, name: &str) -> T {
    raw(path)
        .pragma_query_value(None, name, |r| r.get(0))
        .unwrap()
}

#[test]
fn a_fresh_store_gets_the_latest_schema() {
    let (_dir, path) = temp();
    let store = open(&path);
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(pragma::<u32>(&path, "user_version"), SCHEMA_VERSION);
    assert_eq!(pragma::<i32>(&path, "application_id"), APPLICATION_ID);
    assert_eq!(pragma::<String>(&path, "journal_mode"), "wal");
    let objects = schema_objects(&path);
    for table in [
        "tasks",
        "timeline",
        "turns",
        "handoffs",
        "checkpoints",
        "checkpoint_files",
        "checks",
        "delegated_runs",
    ] {
        assert!(objects.contains(&format!("table {table}")), "{objects:?}");
    }
    assert!(store.integrity_problems().unwrap().is_empty());
}

#[test]
fn reopening_is_idempotent() {
    let (_dir, path) = temp();
    let task = {
        let store = open(&path);
        let task = store.create_task(&new_task("/p/w")).unwrap();
        store.append(&task.id, &turn("kept")).unwrap();
        task
    };
    let objects = schema_objects(&path);
    for _ in 0..3 {
        let store = open(&path);
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(store.timeline(&task.id).unwrap().len(), 1);
    }
    assert_eq!(schema_objects(&path), objects);
}

#[test]
fn a_store_from_a_newer_handoff_is_refused() {
    let (_dir, path) = temp();
    drop(open(&path));
    raw(&path)
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    let StoreError::NewerSchema {
        path: reported,
        found,
        supported,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(reported, &path);
    assert_eq!((*found, *supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
    let line = err.to_string();
    assert!(!line.contains('\n'));
    assert!(line.contains("newer handoff"), "{line}");
    // Refusing did not touch it.
    assert_eq!(pragma::<u32>(&path, "user_version"), SCHEMA_VERSION + 1);
}

#[test]
fn another_programs_database_is_refused_untouched() {
    let (_dir, path) = temp();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    raw(&path)
        .execute_batch("CREATE TABLE theirs (x); INSERT INTO theirs VALUES (1);")
        .unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotAStore {
                application_id: 0,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(pragma::<String>(&path, "journal_mode"), "delete");
    assert_eq!(schema_objects(&path), ["table theirs"]);

    let (_dir, path) = temp();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    raw(&path)
        .pragma_update(None, "application_id", 0x1234)
        .unwrap();
    assert!(matches!(
        SqliteStore::open(&path),
        Err(StoreError::NotAStore {
            application_id: 0x1234,
            ..
        })
    ));
}

#[test]
fn a_file_that_is_not_a_database_is_one_clear_line() {
    let (_dir, path) = temp();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        "this is not an SQLite file, it is a shopping list\n".repeat(20),
    )
    .unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Sqlite { .. }), "{err:?}");
    let line = err.to_string();
    assert!(!line.contains('\n'), "{line}");
    assert!(line.contains(path.as_str()), "{line}");
}
