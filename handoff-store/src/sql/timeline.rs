//! The timeline: appending entries and the records they point at (turns, checkpoints, checks,
//! delegated runs), copying a task's timeline to a fork, and reading it back in order.

use std::collections::HashMap;
use std::hash::Hash;

use camino::Utf8PathBuf;
use rusqlite::{Connection, Row, params};

use handoff_core::{
    CheckRun, Checkpoint, DelegatedRun, ForkMarker, HandoffId, HandoffRow, Mode, Operation, Record,
    Status, StoreError, TaskId, TimelineEntry, TimelineEvent, Turn,
};

use super::handoffs::handoff_row;
use super::{
    Ctx, SqlResult, agent_id, agent_ref, execute, get, query_all, signed, task_id, unsigned,
};

macro_rules! timeline_columns {
    () => {
        "task_id, at, kind, turn_id, handoff_id, checkpoint_id, check_id, run_id, forked_from, \
         forked_through"
    };
}

const INSERT_TURN: &str = "INSERT INTO turns (provider, model, summary) VALUES (?1, ?2, ?3)";
const INSERT_CHECKPOINT: &str =
    "INSERT INTO checkpoints (commit_id, provider, model, message) VALUES (?1, ?2, ?3, ?4)";
const INSERT_CHECKPOINT_FILE: &str = "INSERT INTO checkpoint_files \
     (checkpoint_id, committed, position, path) VALUES (?1, ?2, ?3, ?4)";
const INSERT_CHECK: &str = "INSERT INTO checks (command, exit_code, commit_id) VALUES (?1, ?2, ?3)";
const INSERT_RUN: &str = "INSERT INTO delegated_runs \
     (run_id, operation, mode, target, status, exit_code, result_path, result_hash, host) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

const INSERT_ENTRY: &str = concat!(
    "INSERT INTO timeline (",
    timeline_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
);
// `ORDER BY seq` makes the copies' new seqs follow the originals' order.
const COPY_TIMELINE: &str = concat!(
    "INSERT INTO timeline (",
    timeline_columns!(),
    ") SELECT ?2, at, kind, turn_id, handoff_id, checkpoint_id, check_id, run_id, \
     forked_from, forked_through FROM timeline WHERE task_id = ?1 ORDER BY seq"
);
const LAST_SEQ: &str = "SELECT max(seq) FROM timeline WHERE task_id = ?1";
const SELECT_ENTRIES: &str = concat!(
    "SELECT seq, ",
    timeline_columns!(),
    " FROM timeline WHERE task_id = ?1 ORDER BY seq"
);
const SELECT_TASK_TURNS: &str = "SELECT id, provider, model, summary FROM turns \
     WHERE id IN (SELECT turn_id FROM timeline WHERE task_id = ?1)";
const SELECT_TASK_HANDOFFS: &str = concat!(
    "SELECT ",
    handoff_columns!(),
    " FROM handoffs WHERE id IN (SELECT handoff_id FROM timeline WHERE task_id = ?1)"
);
const SELECT_TASK_CHECKPOINTS: &str = "SELECT id, commit_id, provider, model, message \
     FROM checkpoints WHERE id IN (SELECT checkpoint_id FROM timeline WHERE task_id = ?1)";
const SELECT_TASK_CHECKPOINT_FILES: &str = "SELECT checkpoint_id, committed, path \
     FROM checkpoint_files \
     WHERE checkpoint_id IN (SELECT checkpoint_id FROM timeline WHERE task_id = ?1) \
     ORDER BY checkpoint_id, committed, position";
const SELECT_TASK_CHECKS: &str = "SELECT id, command, exit_code, commit_id FROM checks \
     WHERE id IN (SELECT check_id FROM timeline WHERE task_id = ?1)";
const SELECT_TASK_RUNS: &str = "SELECT id, run_id, operation, mode, target, status, exit_code, \
     result_path, result_hash, host FROM delegated_runs \
     WHERE id IN (SELECT run_id FROM timeline WHERE task_id = ?1)";

/// What a timeline row points at.
pub(crate) enum Link<'a> {
    Turn(i64),
    Handoff(&'a HandoffId),
    Checkpoint(i64),
    Check(i64),
    Run(i64),
    Forked {
        from: &'a TaskId,
        through: Option<i64>,
    },
}

// The stored kinds are the serialized `TimelineEvent` tags.
const TURN: &str = "turn";
const HANDOFF: &str = "handoff";
const CHECKPOINT: &str = "checkpoint";
const CHECK: &str = "check";
const DELEGATED_RUN: &str = "delegated-run";
const FORKED: &str = "forked";

const STATUSES: [Status; 7] = [
    Status::Succeeded,
    Status::Blocked,
    Status::Failed,
    Status::TimedOut,
    Status::Cancelled,
    Status::Rejected,
    Status::NotRun,
];
const OPERATIONS: [Operation; 2] = [Operation::Advice, Operation::Handoff];

fn run_row(row: &Row<'_>, c: &Ctx) -> Result<DelegatedRun, StoreError> {
    let operation: String = get(row, "operation", c)?;
    let mode: Option<String> = get(row, "mode", c)?;
    let status: String = get(row, "status", c)?;
    Ok(DelegatedRun {
        run_id: get(row, "run_id", c)?,
        operation: OPERATIONS
            .into_iter()
            .find(|o| o.as_str() == operation)
            .ok_or_else(|| c.corrupt("delegated_runs.operation", &operation))?,
        mode: mode
            .map(|m| Mode::parse(&m).ok_or_else(|| c.corrupt("delegated_runs.mode", &m)))
            .transpose()?,
        target: agent_id(c, "delegated_runs.target", get(row, "target", c)?)?,
        status: STATUSES
            .into_iter()
            .find(|s| s.as_str() == status)
            .ok_or_else(|| c.corrupt("delegated_runs.status", &status))?,
        exit_code: get(row, "exit_code", c)?,
        result_path: get::<Option<String>>(row, "result_path", c)?.map(Utf8PathBuf::from),
        result_hash: get(row, "result_hash", c)?,
        host: get(row, "host", c)?,
    })
}

/// Writes a record's details; the link for its timeline row.
pub(crate) fn insert_record<'a>(
    conn: &Connection,
    c: &Ctx,
    record: &'a Record,
) -> Result<Link<'a>, StoreError> {
    Ok(match record {
        Record::Turn(t) => {
            execute(
                conn,
                c,
                INSERT_TURN,
                params![t.author.provider.as_str(), t.author.model, t.summary],
            )?;
            Link::Turn(conn.last_insert_rowid())
        }
        Record::Checkpoint(cp) => {
            execute(
                conn,
                c,
                INSERT_CHECKPOINT,
                params![
                    cp.commit,
                    cp.author.provider.as_str(),
                    cp.author.model,
                    cp.message
                ],
            )?;
            let id = conn.last_insert_rowid();
            let mut stmt = conn.prepare_cached(INSERT_CHECKPOINT_FILE).ctx(c)?;
            for (committed, paths) in [(true, &cp.committed), (false, &cp.uncommitted)] {
                for (position, path) in paths.iter().enumerate() {
                    let position = signed(position as u64)?;
                    stmt.execute(params![id, committed, position, path])
                        .ctx(c)?;
                }
            }
            Link::Checkpoint(id)
        }
        Record::Check(ch) => {
            execute(
                conn,
                c,
                INSERT_CHECK,
                params![ch.command, ch.exit_code, ch.commit],
            )?;
            Link::Check(conn.last_insert_rowid())
        }
        Record::DelegatedRun(r) => {
            execute(
                conn,
                c,
                INSERT_RUN,
                params![
                    r.run_id,
                    r.operation.as_str(),
                    r.mode.map(Mode::as_str),
                    r.target.as_str(),
                    r.status.as_str(),
                    r.exit_code,
                    r.result_path.as_ref().map(|p| p.as_str()),
                    r.result_hash,
                    r.host,
                ],
            )?;
            Link::Run(conn.last_insert_rowid())
        }
    })
}

/// Appends a timeline row; its seq.
pub(crate) fn insert_entry(
    conn: &Connection,
    c: &Ctx,
    task: &TaskId,
    at: &str,
    link: &Link<'_>,
) -> Result<u64, StoreError> {
    let (mut turn, mut handoff, mut checkpoint, mut check, mut run) =
        (None, None, None, None, None);
    let (mut forked_from, mut forked_through) = (None, None);
    let kind = match *link {
        Link::Turn(id) => {
            turn = Some(id);
            TURN
        }
        Link::Handoff(id) => {
            handoff = Some(id.as_str());
            HANDOFF
        }
        Link::Checkpoint(id) => {
            checkpoint = Some(id);
            CHECKPOINT
        }
        Link::Check(id) => {
            check = Some(id);
            CHECK
        }
        Link::Run(id) => {
            run = Some(id);
            DELEGATED_RUN
        }
        Link::Forked { from, through } => {
            forked_from = Some(from.as_str());
            forked_through = through;
            FORKED
        }
    };
    execute(
        conn,
        c,
        INSERT_ENTRY,
        params![
            task.as_str(),
            at,
            kind,
            turn,
            handoff,
            checkpoint,
            check,
            run,
            forked_from,
            forked_through
        ],
    )?;
    unsigned(c, "timeline.seq", conn.last_insert_rowid())
}

/// The last seq of the task's timeline.
pub(crate) fn last_seq(
    conn: &Connection,
    c: &Ctx,
    task: &TaskId,
) -> Result<Option<i64>, StoreError> {
    conn.prepare_cached(LAST_SEQ)
        .ctx(c)?
        .query_row([task.as_str()], |r| r.get(0))
        .ctx(c)
}

/// Appends a copy of `from`'s timeline, in order, to `to`'s.
pub(crate) fn copy_timeline(
    conn: &Connection,
    c: &Ctx,
    from: &TaskId,
    to: &TaskId,
) -> Result<(), StoreError> {
    execute(conn, c, COPY_TIMELINE, params![from.as_str(), to.as_str()])?;
    Ok(())
}

fn detail<K: Eq + Hash, V: Clone>(
    c: &Ctx,
    map: &HashMap<K, V>,
    key: Option<K>,
    what: &'static str,
) -> Result<V, StoreError> {
    key.and_then(|k| map.get(&k).cloned())
        .ok_or_else(|| c.corrupt(what, "a timeline row points at a missing record"))
}

/// The task's timeline, in order. Call inside one transaction, so the queries see one state.
pub(crate) fn timeline(
    conn: &Connection,
    c: &Ctx,
    task: &TaskId,
) -> Result<Vec<TimelineEntry>, StoreError> {
    let id = [task.as_str()];
    let turns: HashMap<i64, Turn> = query_all(conn, c, SELECT_TASK_TURNS, id, |r| {
        let turn = Turn {
            author: agent_ref(r, c, "provider", "model")?,
            summary: get(r, "summary", c)?,
        };
        Ok((get(r, "id", c)?, turn))
    })?
    .into_iter()
    .collect();
    let handoffs: HashMap<String, HandoffRow> =
        query_all(conn, c, SELECT_TASK_HANDOFFS, id, |r| {
            let row = handoff_row(r, c)?;
            Ok((row.id.as_str().to_owned(), row))
        })?
        .into_iter()
        .collect();
    let mut files: HashMap<i64, (Vec<String>, Vec<String>)> = HashMap::new();
    for (checkpoint, committed, path) in
        query_all(conn, c, SELECT_TASK_CHECKPOINT_FILES, id, |r| {
            Ok((
                get::<i64>(r, "checkpoint_id", c)?,
                get::<bool>(r, "committed", c)?,
                get::<String>(r, "path", c)?,
            ))
        })?
    {
        let lists = files.entry(checkpoint).or_default();
        let list = if committed {
            &mut lists.0
        } else {
            &mut lists.1
        };
        list.push(path);
    }
    let checkpoints: HashMap<i64, Checkpoint> =
        query_all(conn, c, SELECT_TASK_CHECKPOINTS, id, |r| {
            let id: i64 = get(r, "id", c)?;
            let (committed, uncommitted) = files.remove(&id).unwrap_or_default();
            let checkpoint = Checkpoint {
                commit: get(r, "commit_id", c)?,
                author: agent_ref(r, c, "provider", "model")?,
                message: get(r, "message", c)?,
                committed,
                uncommitted,
            };
            Ok((id, checkpoint))
        })?
        .into_iter()
        .collect();
    let checks: HashMap<i64, CheckRun> = query_all(conn, c, SELECT_TASK_CHECKS, id, |r| {
        let check = CheckRun {
            command: get(r, "command", c)?,
            exit_code: get(r, "exit_code", c)?,
            commit: get(r, "commit_id", c)?,
        };
        Ok((get(r, "id", c)?, check))
    })?
    .into_iter()
    .collect();
    let runs: HashMap<i64, DelegatedRun> = query_all(conn, c, SELECT_TASK_RUNS, id, |r| {
        Ok((get(r, "id", c)?, run_row(r, c)?))
    })?
    .into_iter()
    .collect();

    query_all(conn, c, SELECT_ENTRIES, id, |r| {
        let kind: String = get(r, "kind", c)?;
        let event = match kind.as_str() {
            TURN => TimelineEvent::Turn(detail(c, &turns, get(r, "turn_id", c)?, "turns")?),
            HANDOFF => {
                TimelineEvent::Handoff(detail(c, &handoffs, get(r, "handoff_id", c)?, "handoffs")?)
            }
            CHECKPOINT => TimelineEvent::Checkpoint(detail(
                c,
                &checkpoints,
                get(r, "checkpoint_id", c)?,
                "checkpoints",
            )?),
            CHECK => TimelineEvent::Check(detail(c, &checks, get(r, "check_id", c)?, "checks")?),
            DELEGATED_RUN => {
                TimelineEvent::DelegatedRun(detail(c, &runs, get(r, "run_id", c)?, "runs")?)
            }
            FORKED => TimelineEvent::Forked(ForkMarker {
                from: task_id(c, "timeline.forked_from", get(r, "forked_from", c)?)?,
                through_seq: get::<Option<i64>>(r, "forked_through", c)?
                    .map(|n| unsigned(c, "timeline.forked_through", n))
                    .transpose()?,
            }),
            other => return Err(c.corrupt("timeline.kind", format!("unknown kind '{other}'"))),
        };
        Ok(TimelineEntry {
            seq: unsigned(c, "timeline.seq", get(r, "seq", c)?)?,
            task: task_id(c, "timeline.task_id", get(r, "task_id", c)?)?,
            at: get(r, "at", c)?,
            event,
        })
    })
}
