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
        "jobs",
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

/// Every byte of the store on disk: the file, its WAL and shared memory.
fn bytes_on_disk(path: &camino::Utf8Path) -> Vec<u8> {
    ["", "-wal", "-shm"]
        .iter()
        .flat_map(|s| std::fs::read(format!("{path}{s}")).unwrap_or_default())
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn what_the_store_writes_is_masked_with_what_the_caller_knows() {
    let (_dir, path) = temp();
    let known = "plainGatewayValue7731qq";
    let store = SqliteStore::open_with(
        &path,
        &handoff_store::StoreOptions::new().masker(handoff_core::Masker::new([known])),
    )
    .unwrap();
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let pattern = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    store
        .append(&task.id, &turn(&format!("used {known} and {pattern}")))
        .unwrap();
    // An agent names the files it creates: a checkpoint's paths are masked too.
    let checkpoint = handoff_core::Record::Checkpoint(handoff_core::Checkpoint {
        commit: "a".repeat(40),
        author: handoff_core::AgentRef {
            provider: handoff_core::AgentId::CODEX,
            model: None,
        },
        message: "checkpoint".into(),
        committed: vec![format!("notes/{known}.txt")],
        uncommitted: vec![format!("{pattern}.env")],
    });
    store.append(&task.id, &checkpoint).unwrap();
    let timeline = store.timeline(&task.id).unwrap();
    let text = format!("{timeline:?}");
    assert!(!text.contains(known) && !text.contains(pattern), "{text}");
    assert!(text.contains("notes/"), "{text}");
    drop(store);
    let disk = bytes_on_disk(&path);
    assert!(!contains(&disk, known), "the known secret is on disk");
    assert!(!contains(&disk, pattern), "the token is on disk");
}

#[test]
fn a_store_written_before_masking_is_scrubbed_once_by_its_migration() {
    let (_dir, path) = temp();
    let pattern = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let task = {
        let store = open(&path);
        let task = store.create_task(&new_task("/p/w")).unwrap();
        store.append(&task.id, &turn("kept")).unwrap();
        task
    };
    // As an older handoff left it: the text unmasked, the schema before the scrub.
    {
        let conn = raw(&path);
        conn.execute(
            "UPDATE turns SET summary = ?1",
            [format!("the token is {pattern}, the key {KNOWN}")],
        )
        .unwrap();
        // Version 3: the last schema before the scrub (migration 4).
        conn.pragma_update(None, "user_version", 3).unwrap();
    }
    // The scrub masks with what the opener knows, not only the patterns.
    const KNOWN: &str = "plainGatewayValue7731qq";
    let store = SqliteStore::open_with(
        &path,
        &handoff_store::StoreOptions::new().masker(handoff_core::Masker::new([KNOWN])),
    )
    .unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let text = format!("{:?}", store.timeline(&task.id).unwrap());
    assert!(!text.contains(pattern), "{text}");
    assert!(!text.contains(KNOWN), "{text}");
    assert!(text.contains("the token is"), "{text}");
    drop(store);
    assert!(
        !contains(&bytes_on_disk(&path), pattern) && !contains(&bytes_on_disk(&path), KNOWN),
        "the old text is on disk"
    );
}

#[test]
fn a_kept_stat_record_survives_moving_it_to_the_end_of_its_row() {
    let (_dir, path) = temp();
    let wt = camino::Utf8Path::new("/p/w");
    let record: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    open(&path).save_stat_record(wt, &record).unwrap();
    raw(&path).pragma_update(None, "user_version", 4).unwrap();
    let store = open(&path);
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(
        store.stat_record(wt).unwrap(),
        Some((wt.to_owned(), record.clone()))
    );
    // Written again in place, shorter.
    store.save_stat_record(wt, &record[..1000]).unwrap();
    assert_eq!(store.stat_record(wt).unwrap().unwrap().1, record[..1000]);
    assert!(store.integrity_problems().unwrap().is_empty());
}

#[test]
fn a_store_from_before_jobs_gets_its_jobs_table_and_keeps_its_data() {
    let (_dir, fresh) = temp();
    drop(open(&fresh));
    let (_dir, path) = temp();
    let wt = camino::Utf8Path::new("/p/w");
    let (task, timeline, config) = {
        let store = open(&path);
        let task = store.create_task(&new_task(wt.as_str())).unwrap();
        store.append(&task.id, &turn("kept")).unwrap();
        store.save_stat_record(wt, b"record").unwrap();
        let mut config = handoff_core::ConfigState::default();
        config
            .hooks
            .insert(".git/hooks/pre-commit".into(), "file 100755 a".into());
        assert!(store.save_config_state(&task.id, &config).unwrap());
        (task.id.clone(), store.timeline(&task.id).unwrap(), config)
    };
    // As the last handoff before jobs left it: version 5, no jobs table (migration 6 adds it).
    {
        let conn = raw(&path);
        conn.execute_batch("DROP TABLE jobs").unwrap();
        conn.pragma_update(None, "user_version", 5).unwrap();
    }
    assert!(!schema_objects(&path).iter().any(|o| o.contains("jobs")));
    let store = open(&path);
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(schema_objects(&path), schema_objects(&fresh));
    assert_eq!(store.timeline(&task).unwrap(), timeline);
    assert_eq!(store.config_state(&task).unwrap(), Some(config));
    assert_eq!(
        store.stat_record(wt).unwrap(),
        Some((wt.to_owned(), b"record".to_vec()))
    );
    assert_eq!(store.jobs().unwrap(), vec![]);
    let job = handoff_core::NewJob {
        id: handoff_core::JobId::generate(),
        origin: handoff_core::JobOrigin::Cli,
        verb: "advice".into(),
        args: vec!["--harness".into(), "codex".into()],
        cwd: None,
        target: Some("codex".into()),
        mode: None,
        started_at: handoff_core::now_iso(),
        supervisor: None,
    };
    store.create_job(&job).unwrap();
    assert_eq!(store.jobs().unwrap().len(), 1);
    assert!(store.integrity_problems().unwrap().is_empty());
}
