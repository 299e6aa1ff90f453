//! Concurrent handoff processes (and threads) on one store: nothing is lost, nothing is
//! corrupted, and a writer that cannot get the lock in time fails with one clear line.
//!
//! Child processes are this test binary run again on the ignored test [`child`], told what to
//! do through environment variables.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    CheckRun, HandoffContext, HandoffOutcome, NewHandoff, Route, StoreError, TaskId, TaskStore,
    TimelineEvent,
};
use handoff_store::{SCHEMA_VERSION, SqliteStore, StoreOptions};

use crate::{agent, commit, new_task, open, raw, temp, turn};

const MODE: &str = "HANDOFF_STORE_TEST_CHILD";
const DB: &str = "HANDOFF_STORE_TEST_DB";
const TASK: &str = "HANDOFF_STORE_TEST_TASK";
const NAME: &str = "HANDOFF_STORE_TEST_NAME";
const COUNT: &str = "HANDOFF_STORE_TEST_COUNT";
const GO: &str = "HANDOFF_STORE_TEST_GO";
const HELD: &str = "HANDOFF_STORE_TEST_HELD";
const RELEASE: &str = "HANDOFF_STORE_TEST_RELEASE";

const WRITERS: usize = 4;
const ENTRIES: usize = 300;

/// Appends `count` entries named `"<name> <i>"` to `task`: mostly turns, every tenth a check
/// and every tenth a handoff recorded and then finished (two transactions).
fn write_entries(store: &SqliteStore, task: &TaskId, name: &str, count: usize) {
    for i in 0..count {
        let label = format!("{name} {i}");
        match i % 10 {
            4 => {
                let check = CheckRun {
                    command: label,
                    exit_code: Some(0),
                    commit: commit(i as u64),
                };
                store.append(task, &check.into()).unwrap();
            }
            9 => {
                let handoff = NewHandoff {
                    source: agent("claude", None),
                    target: agent("codex", None),
                    context: HandoffContext {
                        message: Some(label),
                        ..HandoffContext::default()
                    },
                    route: Route::SameThread,
                };
                let row = store.record_handoff(task, &handoff).unwrap();
                store
                    .finish_handoff(&row.id, &HandoffOutcome::Started)
                    .unwrap();
            }
            _ => {
                store.append(task, &turn(&label)).unwrap();
            }
        }
    }
}

fn label(event: &TimelineEvent) -> (String, usize) {
    let text = match event {
        TimelineEvent::Turn(t) => t.summary.clone(),
        TimelineEvent::Check(c) => c.command.clone(),
        TimelineEvent::Handoff(h) => {
            assert_eq!(h.outcome, HandoffOutcome::Started);
            h.context.message.clone().unwrap()
        }
        other => panic!("unexpected {other:?}"),
    };
    let (name, i) = text.rsplit_once(' ').unwrap();
    (name.to_owned(), i.parse().unwrap())
}

/// Every writer's entries are all there, each writer's in its own order, and the file is sound.
fn verify(path: &Utf8Path, task: &TaskId, writers: &[String], count: usize) {
    let store = open(path);
    let timeline = store.timeline(task).unwrap();
    assert_eq!(timeline.len(), writers.len() * count);
    assert!(timeline.windows(2).all(|w| w[0].seq < w[1].seq));
    let mut next: HashMap<String, usize> = writers.iter().map(|w| (w.clone(), 0)).collect();
    for entry in &timeline {
        let (name, i) = label(&entry.event);
        let expected = next.get_mut(&name).unwrap();
        assert_eq!(i, *expected, "{name}'s entries out of order");
        *expected += 1;
    }
    assert!(next.values().all(|&n| n == count));
    assert!(store.integrity_problems().unwrap().is_empty());
    let integrity: String = raw(path)
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

fn wait_for(file: &Utf8Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !file.exists() {
        assert!(Instant::now() < deadline, "{file} never appeared");
        thread::sleep(Duration::from_millis(2));
    }
}

fn spawn(mode: &str, envs: &[(&str, &str)]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "concurrency::child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MODE, mode)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: Child) {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "child failed: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "run as a child process by the other tests of this module"]
fn child() {
    let Ok(mode) = std::env::var(MODE) else {
        return;
    };
    let var = |k| std::env::var(k).unwrap();
    let db = Utf8PathBuf::from(var(DB));
    match mode.as_str() {
        "append" | "fresh" => {
            wait_for(Utf8Path::new(&var(GO)));
            let store = open(&db);
            let name = var(NAME);
            let task = match mode.as_str() {
                "append" => TaskId::parse(&var(TASK)).unwrap(),
                _ => {
                    store
                        .create_task(&new_task(&format!("/w/{name}")))
                        .unwrap()
                        .id
                }
            };
            write_entries(&store, &task, &name, var(COUNT).parse().unwrap());
        }
        "hold" => {
            let mut conn = raw(&db);
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
                .unwrap();
            std::fs::write(var(HELD), "").unwrap();
            wait_for(Utf8Path::new(&var(RELEASE)));
            tx.commit().unwrap();
        }
        other => panic!("unknown mode {other}"),
    }
}

#[test]
fn processes_appending_to_one_task_lose_nothing() {
    let (dir, path) = temp();
    let task = open(&path).create_task(&new_task("/p/w")).unwrap();
    let go = path.with_file_name("go");
    let writers = names("process-", WRITERS);
    let count = ENTRIES.to_string();
    let children: Vec<Child> = writers
        .iter()
        .map(|name| {
            spawn(
                "append",
                &[
                    (DB, path.as_str()),
                    (TASK, task.id.as_str()),
                    (NAME, name),
                    (COUNT, &count),
                    (GO, go.as_str()),
                ],
            )
        })
        .collect();
    std::fs::write(&go, "").unwrap();
    children.into_iter().for_each(finish);
    verify(&path, &task.id, &writers, ENTRIES);
    drop(dir);
}

#[test]
fn processes_creating_a_new_store_at_once_migrate_it_once() {
    let (_dir, path) = temp();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let go = path.with_file_name("go");
    let writers = names("fresh-", WRITERS);
    let children: Vec<Child> = writers
        .iter()
        .map(|name| {
            spawn(
                "fresh",
                &[
                    (DB, path.as_str()),
                    (NAME, name),
                    (COUNT, "50"),
                    (GO, go.as_str()),
                ],
            )
        })
        .collect();
    std::fs::write(&go, "").unwrap();
    children.into_iter().for_each(finish);

    let store = open(&path);
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let tasks = store.tasks(None).unwrap();
    assert_eq!(tasks.len(), WRITERS);
    for task in tasks {
        let name = task.worktree.file_name().unwrap().to_owned();
        verify(&path, &task.id, &[name], 50);
    }
}

#[test]
fn threads_with_their_own_connections_lose_nothing() {
    let (_dir, path) = temp();
    let task = open(&path).create_task(&new_task("/p/w")).unwrap();
    let writers = names("thread-", WRITERS);
    let barrier = Arc::new(Barrier::new(WRITERS));
    let handles: Vec<_> = writers
        .iter()
        .cloned()
        .map(|name| {
            let (path, task, barrier) = (path.clone(), task.id.clone(), barrier.clone());
            thread::spawn(move || {
                let store = open(&path);
                barrier.wait();
                write_entries(&store, &task, &name, ENTRIES);
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    verify(&path, &task.id, &writers, ENTRIES);
}

#[test]
fn threads_sharing_one_store_lose_nothing() {
    let (_dir, path) = temp();
    let store = Arc::new(open(&path));
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let writers = names("shared-", WRITERS);
    let handles: Vec<_> = writers
        .iter()
        .cloned()
        .map(|name| {
            let (store, task) = (store.clone(), task.id.clone());
            thread::spawn(move || write_entries(&store, &task, &name, ENTRIES))
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    verify(&path, &task.id, &writers, ENTRIES);
}

#[test]
fn threads_creating_a_new_store_at_once_migrate_it_once() {
    let (_dir, path) = temp();
    let barrier = Arc::new(Barrier::new(WRITERS));
    let handles: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (path, barrier) = (path.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                let store = open(&path);
                store.create_task(&new_task(&format!("/w/{i}"))).unwrap()
            })
        })
        .collect();
    let created: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let store = open(&path);
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(store.tasks(None).unwrap().len(), created.len());
    assert!(store.integrity_problems().unwrap().is_empty());
}

#[test]
fn a_writer_kept_waiting_past_the_busy_timeout_gets_one_clear_line() {
    let (_dir, path) = temp();
    let task = open(&path).create_task(&new_task("/p/w")).unwrap();
    let held = path.with_file_name("held");
    let release = path.with_file_name("release");
    let holder = spawn(
        "hold",
        &[
            (DB, path.as_str()),
            (HELD, held.as_str()),
            (RELEASE, release.as_str()),
        ],
    );
    wait_for(&held);

    // Opening a migrated store and reading it need no write lock.
    let impatient = SqliteStore::open_with(
        &path,
        &StoreOptions::new().busy_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    assert_eq!(impatient.timeline(&task.id).unwrap(), vec![]);

    let started = Instant::now();
    let err = impatient.append(&task.id, &turn("x")).unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(200));
    let StoreError::Locked {
        path: reported,
        waited_ms,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((reported, *waited_ms), (&path, 200));
    let line = err.to_string();
    assert!(!line.contains('\n'));
    assert!(line.contains(path.as_str()), "{line}");
    assert!(line.contains("another handoff process"), "{line}");
    assert!(matches!(
        impatient.fork_task(
            &task.id,
            &handoff_core::Fork {
                worktree: "/p/w-2".into(),
                branch: Some("b".into()),
                agent: None
            }
        ),
        Err(StoreError::Locked { .. })
    ));

    // A patient writer waits for the lock and gets it once it is released.
    let patient = {
        let (path, task) = (path.clone(), task.id.clone());
        thread::spawn(move || open(&path).append(&task, &turn("waited")))
    };
    thread::sleep(Duration::from_millis(300));
    std::fs::write(&release, "").unwrap();
    patient.join().unwrap().unwrap();
    finish(holder);
    let timeline = open(&path).timeline(&task.id).unwrap();
    assert_eq!(timeline.len(), 1);
    assert!(open(&path).integrity_problems().unwrap().is_empty());
}

/// `cargo test -p handoff-store --release -- --ignored --nocapture append_rate`
#[test]
#[ignore = "a measurement, not a test"]
fn append_rate() {
    let (_dir, path) = temp();
    let store = open(&path);
    let task = store.create_task(&new_task("/p/w")).unwrap();
    let n = 20_000;
    let started = Instant::now();
    for i in 0..n {
        store.append(&task.id, &turn(&format!("turn {i}"))).unwrap();
    }
    let elapsed = started.elapsed();
    let read = Instant::now();
    assert_eq!(store.timeline(&task.id).unwrap().len(), n);
    println!(
        "{n} appends in {elapsed:?}: {:.0} appends/s; timeline of {n} read in {:?}",
        n as f64 / elapsed.as_secs_f64(),
        read.elapsed()
    );
}
