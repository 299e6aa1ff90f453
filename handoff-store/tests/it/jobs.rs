//! Background jobs: recorded `running`, their supervisor and first end kept, their command line
//! and result masked, listed newest first; the table itself refuses what is not a job.

use handoff_core::{
    Job, JobId, JobOrigin, JobState, Masker, NewJob, ProcessRef, StoreError, TaskStore,
    check_timestamp, now_iso,
};
use handoff_store::{SqliteStore, StoreOptions};

use crate::{open, raw, temp};

fn new_job(started_at: &str) -> NewJob {
    NewJob {
        id: JobId::generate(),
        origin: JobOrigin::Cli,
        verb: "run".into(),
        args: vec![
            "--harness".into(),
            "codex".into(),
            "--mode".into(),
            "review".into(),
            "--cwd".into(),
            "/p/w".into(),
        ],
        cwd: Some("/p/w".into()),
        target: Some("codex".into()),
        mode: Some("review".into()),
        started_at: started_at.into(),
        supervisor: None,
    }
}

/// What a job just recorded reads back as.
fn recorded(job: &NewJob) -> Job {
    Job {
        id: job.id.clone(),
        origin: job.origin,
        verb: job.verb.clone(),
        args: job.args.clone(),
        cwd: job.cwd.clone(),
        target: job.target.clone(),
        mode: job.mode.clone(),
        state: JobState::Running,
        started_at: job.started_at.clone(),
        finished_at: None,
        supervisor: job.supervisor,
        exit_code: None,
        result: None,
    }
}

fn is_not_found(err: &StoreError, id: &JobId) -> bool {
    matches!(err, StoreError::NotFound { what: "job", id: found } if found == id.as_str())
}

#[test]
fn a_job_is_recorded_running_and_read_back() {
    let (_dir, path) = temp();
    let store = open(&path);
    let job = new_job(&now_iso());
    let created = store.create_job(&job).unwrap();
    assert_eq!(created, recorded(&job));
    assert_eq!(store.job(&job.id).unwrap(), created);

    // The MCP server knows its jobs' supervisor (itself) at once; a job may name no cwd,
    // target or mode.
    let mcp = NewJob {
        origin: JobOrigin::Mcp,
        verb: "continue".into(),
        args: vec![],
        cwd: None,
        target: None,
        mode: None,
        supervisor: Some(ProcessRef {
            pid: 4242,
            start_time: u64::try_from(i64::MAX).unwrap(),
        }),
        ..new_job(&now_iso())
    };
    assert_eq!(store.create_job(&mcp).unwrap(), recorded(&mcp));
    assert_eq!(store.job(&mcp.id).unwrap(), recorded(&mcp));

    // Reopened, it is still there.
    drop(store);
    assert_eq!(open(&path).job(&job.id).unwrap(), created);
}

#[test]
fn a_jobs_supervisor_is_recorded_and_nothing_else() {
    let (_dir, path) = temp();
    let store = open(&path);
    let job = new_job(&now_iso());
    store.create_job(&job).unwrap();
    let supervisor = ProcessRef {
        pid: 31337,
        start_time: 987_654,
    };
    store.set_job_supervisor(&job.id, supervisor).unwrap();
    let read = store.job(&job.id).unwrap();
    assert_eq!(
        read,
        Job {
            supervisor: Some(supervisor),
            ..recorded(&job)
        }
    );
    // Replaced by a later one; the state is left as it is, even once finished.
    store.finish_job(&job.id, 0, None).unwrap();
    let later = ProcessRef {
        pid: 7,
        start_time: 0,
    };
    store.set_job_supervisor(&job.id, later).unwrap();
    let read = store.job(&job.id).unwrap();
    assert_eq!(read.supervisor, Some(later));
    assert_eq!(read.state, JobState::Finished);

    let missing = JobId::generate();
    let err = store.set_job_supervisor(&missing, supervisor).unwrap_err();
    assert!(is_not_found(&err, &missing), "{err:?}");
}

#[test]
fn the_first_end_of_a_job_wins() {
    let (_dir, path) = temp();
    let store = open(&path);
    let job = new_job(&now_iso());
    store.create_job(&job).unwrap();
    // Keys out of order and spacing kept: nothing to mask, so the line is kept as given.
    let line = r#"{"schema":"handoff.result.v1","status":"succeeded", "exitCode":0}"#;
    let first = store.finish_job(&job.id, 0, Some(line)).unwrap();
    assert_eq!(first.state, JobState::Finished);
    assert_eq!(first.exit_code, Some(0));
    assert_eq!(first.result.as_deref(), Some(line));
    let finished_at = first.finished_at.clone().unwrap();
    check_timestamp("finishedAt", &finished_at).unwrap();
    assert!(finished_at >= job.started_at && finished_at <= now_iso());
    assert_eq!(
        first,
        Job {
            state: JobState::Finished,
            finished_at: Some(finished_at),
            exit_code: Some(0),
            result: Some(line.into()),
            ..recorded(&job)
        }
    );

    // A second end (the supervisor's after the starter gave up on it, say) changes nothing.
    let second = store
        .finish_job(&job.id, 9, Some(r#"{"status":"cancelled"}"#))
        .unwrap();
    assert_eq!(second, first);
    let third = store.finish_job(&job.id, 5, None).unwrap();
    assert_eq!(third, first);
    assert_eq!(store.job(&job.id).unwrap(), first);

    // A job that ended printing nothing has no result.
    let quiet = new_job(&now_iso());
    store.create_job(&quiet).unwrap();
    let ended = store.finish_job(&quiet.id, 3, None).unwrap();
    assert_eq!((ended.exit_code, ended.result), (Some(3), None));

    let missing = JobId::generate();
    let err = store.finish_job(&missing, 0, None).unwrap_err();
    assert!(is_not_found(&err, &missing), "{err:?}");
    let err = store.job(&missing).unwrap_err();
    assert!(is_not_found(&err, &missing), "{err:?}");
}

#[test]
fn secrets_in_a_jobs_command_line_and_result_are_masked() {
    let (_dir, path) = temp();
    let known = "plainGatewayValue7731qq";
    let pattern = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let store =
        SqliteStore::open_with(&path, &StoreOptions::new().masker(Masker::new([known]))).unwrap();
    let job = NewJob {
        args: vec![
            "--instructions".into(),
            format!("/tmp/{known}/brief.md"),
            format!("--note={pattern}"),
            "--cwd".into(),
            format!("/p/{known}"),
        ],
        cwd: Some(format!("/p/{known}")),
        target: Some(format!("x{known}")),
        ..new_job(&now_iso())
    };
    let created = store.create_job(&job).unwrap();
    let text = format!("{created:?}");
    assert!(!text.contains(known) && !text.contains(pattern), "{text}");
    assert_eq!(created.args.len(), 5);
    assert!(created.args[1].starts_with("/tmp/"), "{:?}", created.args);
    assert!(created.cwd.as_deref().unwrap().starts_with("/p/"));

    let result = serde_json::json!({
        "schema": "handoff.result.v1",
        "response": format!("the gateway key is {known} and the token {pattern}"),
        "env": { "apiKey": "short1" },
        "findings": [format!("{pattern} leaked")],
    })
    .to_string();
    let finished = store.finish_job(&job.id, 0, Some(&result)).unwrap();
    let stored = finished.result.unwrap();
    for secret in [known, pattern, "short1"] {
        assert!(!stored.contains(secret), "{secret} kept in {stored}");
    }
    // Still one JSON line, with what was not secret kept.
    assert!(!stored.contains('\n'));
    let value: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(value["schema"], "handoff.result.v1");
    assert!(
        value["response"]
            .as_str()
            .unwrap()
            .starts_with("the gateway key is ")
    );

    // Nothing of them in the file either.
    drop(store);
    let conn = raw(&path);
    let row: String = conn
        .query_row(
            "SELECT args || cwd || target || result FROM jobs WHERE id = ?1",
            [job.id.as_str()],
            |r| r.get(0),
        )
        .unwrap();
    for secret in [known, pattern, "short1"] {
        assert!(!row.contains(secret), "{secret} stored in {row}");
    }
}

#[test]
fn jobs_are_listed_newest_first() {
    let (_dir, path) = temp();
    let store = open(&path);
    assert_eq!(store.jobs().unwrap(), vec![]);
    let at = |s: u32| format!("2025-01-31T12:34:{s:02}.000Z");
    let middle = new_job(&at(20));
    let oldest = new_job(&at(10));
    let newest = new_job(&at(30));
    // Started in the same millisecond: the greater id first.
    let (mut twin_a, mut twin_b) = (new_job(&at(20)), new_job(&at(20)));
    if twin_a.id < twin_b.id {
        std::mem::swap(&mut twin_a.id, &mut twin_b.id);
    }
    for job in [&middle, &twin_b, &oldest, &newest, &twin_a] {
        store.create_job(job).unwrap();
    }
    let mut same = [&middle, &twin_a, &twin_b].map(|j| j.id.clone());
    same.sort_by(|a, b| b.cmp(a));
    let listed: Vec<JobId> = store.jobs().unwrap().into_iter().map(|j| j.id).collect();
    let mut expected = vec![newest.id.clone()];
    expected.extend(same);
    expected.push(oldest.id.clone());
    assert_eq!(listed, expected);
}

#[test]
fn bad_jobs_are_refused_and_leave_nothing() {
    let (_dir, path) = temp();
    let store = open(&path);
    let invalid = |job: NewJob, field: &str| {
        let err = store.create_job(&job).unwrap_err();
        assert!(
            matches!(&err, StoreError::Invalid { field: f, .. } if *f == field),
            "{field}: {err:?}"
        );
        assert!(!err.to_string().contains('\n'));
    };
    invalid(
        NewJob {
            verb: "mcp".into(),
            ..new_job(&now_iso())
        },
        "verb",
    );
    invalid(new_job("yesterday"), "startedAt");
    invalid(new_job("2025-01-31T12:34:56Z"), "startedAt");
    invalid(
        NewJob {
            target: Some(String::new()),
            ..new_job(&now_iso())
        },
        "target",
    );
    invalid(
        NewJob {
            mode: Some("x".repeat(257)),
            ..new_job(&now_iso())
        },
        "mode",
    );
    invalid(
        NewJob {
            target: Some("two\nlines".into()),
            ..new_job(&now_iso())
        },
        "target",
    );
    invalid(
        NewJob {
            cwd: Some(String::new()),
            ..new_job(&now_iso())
        },
        "cwd",
    );
    invalid(
        NewJob {
            args: vec!["x".repeat(128 * 1024 + 1)],
            ..new_job(&now_iso())
        },
        "args",
    );
    invalid(
        NewJob {
            args: vec!["x".repeat(100 * 1024); 21],
            ..new_job(&now_iso())
        },
        "args",
    );
    assert_eq!(store.jobs().unwrap(), vec![]);

    // The same id twice.
    let job = new_job(&now_iso());
    store.create_job(&job).unwrap();
    invalid(job.clone(), "id");
    // A result that is not JSON: the job is left running.
    let err = store.finish_job(&job.id, 0, Some("not json")).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                field: "result",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.job(&job.id).unwrap(), recorded(&job));
    assert_eq!(store.jobs().unwrap().len(), 1);
    assert!(store.integrity_problems().unwrap().is_empty());
}

#[test]
fn the_jobs_table_refuses_what_is_not_a_job() {
    let (_dir, path) = temp();
    drop(open(&path));
    let conn = raw(&path);
    // A running job, then each column in turn given a value the table must refuse.
    let insert = |overrides: &[(&str, &str)]| {
        let mut columns = vec![
            ("id", format!("'{}'", JobId::generate())),
            ("origin", "'cli'".to_owned()),
            ("verb", "'run'".to_owned()),
            ("args", "'[]'".to_owned()),
            ("state", "'running'".to_owned()),
            ("started_at", format!("'{}'", now_iso())),
        ];
        for (name, value) in overrides {
            match columns.iter_mut().find(|(n, _)| n == name) {
                Some(column) => column.1 = (*value).to_owned(),
                None => columns.push((name, (*value).to_owned())),
            }
        }
        let names: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let values: Vec<&str> = columns.iter().map(|c| c.1.as_str()).collect();
        conn.execute(
            &format!(
                "INSERT INTO jobs ({}) VALUES ({})",
                names.join(", "),
                values.join(", ")
            ),
            [],
        )
    };
    insert(&[]).unwrap();
    insert(&[
        ("state", "'finished'"),
        ("finished_at", "'2025-01-31T12:34:56.789Z'"),
        ("exit_code", "0"),
        ("result", "'{}'"),
        ("supervisor_pid", "1"),
        ("supervisor_start_time", "2"),
    ])
    .unwrap();
    for bad in [
        &[("state", "'lost'")][..],
        &[("state", "'finished'")],
        &[("origin", "'web'")],
        &[("origin", "'CLI'")],
        &[("id", "'task-1'")],
        &[("args", "'{}'")],
        &[("args", "'\"run\"'")],
        &[("exit_code", "256"), ("state", "'finished'")],
        &[("supervisor_pid", "1")],
        &[("supervisor_start_time", "1")],
        &[("result", "'{}'")],
        &[("finished_at", "'2025-01-31T12:34:56.789Z'")],
        &[("verb", "NULL")],
        &[("started_at", "NULL")],
    ] {
        assert!(insert(bad).is_err(), "{bad:?} was accepted");
    }
    let count: i64 = conn
        .query_row("SELECT count(*) FROM jobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 2);
}

#[test]
fn a_job_that_does_not_read_back_is_reported_as_corrupt() {
    let (_dir, path) = temp();
    let store = open(&path);
    let job = new_job(&now_iso());
    store.create_job(&job).unwrap();
    raw(&path)
        .execute("UPDATE jobs SET args = '[1]'", [])
        .unwrap();
    let err = store.job(&job.id).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Corrupt {
                what: "jobs.args",
                ..
            }
        ),
        "{err:?}"
    );
    let err = store.jobs().unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}
