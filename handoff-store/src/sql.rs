//! Every statement the store runs, and the typed mapping between rows and core's records.
//!
//! Functions here take a connection (or a transaction, which derefs to one) and do no
//! transaction handling of their own: `store.rs` decides what one transaction holds.

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;

use camino::{Utf8Path, Utf8PathBuf};
use rusqlite::types::FromSql;
use rusqlite::{Connection, ErrorCode, OptionalExtension, Params, Row, RowIndex, params};

use handoff_core::{
    AgentId, AgentRef, CheckRun, Checkpoint, DelegatedRun, ForkMarker, HandoffContext, HandoffId,
    HandoffOutcome, HandoffRow, Mode, Operation, Record, Route, Status, StoreError, Task,
    TaskAgent, TaskId, TimelineEntry, TimelineEvent, Turn,
};

/// What error messages need to know about the store.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    /// The database file.
    pub(crate) path: Utf8PathBuf,
    /// The busy timeout, for [`StoreError::Locked`].
    pub(crate) waited_ms: u64,
}

impl Ctx {
    /// Whether SQLite gave up waiting for a lock.
    pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
        matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        )
    }

    pub(crate) fn locked(&self) -> StoreError {
        StoreError::Locked {
            path: self.path.clone(),
            waited_ms: self.waited_ms,
        }
    }

    pub(crate) fn corrupt(&self, what: &'static str, message: impl Display) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what,
            message: message.to_string(),
        }
    }

    pub(crate) fn sql(&self, e: rusqlite::Error) -> StoreError {
        use rusqlite::Error as E;
        if Ctx::is_busy(&e) {
            return self.locked();
        }
        match e {
            E::FromSqlConversionFailure(..)
            | E::InvalidColumnType(..)
            | E::IntegralValueOutOfRange(..) => self.corrupt("column", e),
            e => StoreError::Sqlite {
                path: self.path.clone(),
                message: e.to_string(),
            },
        }
    }
}

/// `?` for SQLite results, naming the store in the error.
pub(crate) trait SqlResult<T> {
    fn ctx(self, c: &Ctx) -> Result<T, StoreError>;
}

impl<T> SqlResult<T> for rusqlite::Result<T> {
    fn ctx(self, c: &Ctx) -> Result<T, StoreError> {
        self.map_err(|e| c.sql(e))
    }
}

macro_rules! task_columns {
    () => {
        "id, project_root, worktree, branch, provider, model, account, parent_id, created_at, \
         updated_at"
    };
}

macro_rules! handoff_columns {
    () => {
        "id, source_provider, source_model, target_provider, target_model, note_path, \
         note_digest, transcript_messages, message, details, route, outcome, outcome_reason, \
         started_at, finished_at"
    };
}

macro_rules! timeline_columns {
    () => {
        "task_id, at, kind, turn_id, handoff_id, checkpoint_id, check_id, run_id, forked_from, \
         forked_through"
    };
}

const INSERT_TASK: &str = concat!(
    "INSERT INTO tasks (",
    task_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
);
const SELECT_TASK: &str = concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = ?1");
const SELECT_TASK_FOR_WORKTREE: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE worktree = ?1 ORDER BY created_at DESC, rowid DESC LIMIT 1"
);
const SELECT_TASKS: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks ORDER BY created_at, rowid"
);
const SELECT_PROJECT_TASKS: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE project_root = ?1 ORDER BY created_at, rowid"
);
const UPDATE_AGENT: &str =
    "UPDATE tasks SET provider = ?2, model = ?3, account = ?4, updated_at = ?5 WHERE id = ?1";
const TOUCH_TASK: &str = "UPDATE tasks SET updated_at = max(updated_at, ?2) WHERE id = ?1";
const TOUCH_HANDOFF_TASKS: &str = "UPDATE tasks SET updated_at = max(updated_at, ?2) \
     WHERE id IN (SELECT task_id FROM timeline WHERE handoff_id = ?1)";

const INSERT_TURN: &str = "INSERT INTO turns (provider, model, summary) VALUES (?1, ?2, ?3)";
const INSERT_CHECKPOINT: &str =
    "INSERT INTO checkpoints (commit_id, provider, model, message) VALUES (?1, ?2, ?3, ?4)";
const INSERT_CHECKPOINT_FILE: &str = "INSERT INTO checkpoint_files \
     (checkpoint_id, committed, position, path) VALUES (?1, ?2, ?3, ?4)";
const INSERT_CHECK: &str = "INSERT INTO checks (command, exit_code, commit_id) VALUES (?1, ?2, ?3)";
const INSERT_RUN: &str = "INSERT INTO delegated_runs \
     (run_id, operation, mode, target, status, exit_code, result_path, result_hash) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
const INSERT_HANDOFF: &str = concat!(
    "INSERT INTO handoffs (",
    handoff_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
);
const SELECT_HANDOFF: &str = concat!(
    "SELECT ",
    handoff_columns!(),
    " FROM handoffs WHERE id = ?1"
);
const SET_HANDOFF_DETAILS: &str = "UPDATE handoffs SET details = ?2 WHERE id = ?1";
const SELECT_HANDOFF_FINISHED: &str = "SELECT finished_at FROM handoffs WHERE id = ?1";
const FINISH_HANDOFF: &str = "UPDATE handoffs SET outcome = ?2, outcome_reason = ?3, \
     finished_at = ?4 WHERE id = ?1 AND finished_at IS NULL";

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
     result_path, result_hash FROM delegated_runs \
     WHERE id IN (SELECT run_id FROM timeline WHERE task_id = ?1)";

const INTEGRITY_CHECK: &str = "PRAGMA integrity_check";
const FOREIGN_KEY_CHECK: &str = "PRAGMA foreign_key_check";

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

fn get<T: FromSql>(row: &Row<'_>, column: impl RowIndex, c: &Ctx) -> Result<T, StoreError> {
    row.get(column).ctx(c)
}

fn query_all<T>(
    conn: &Connection,
    c: &Ctx,
    sql: &str,
    params: impl Params,
    mut map: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).ctx(c)?;
    let mut rows = stmt.query(params).ctx(c)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().ctx(c)? {
        out.push(map(row)?);
    }
    Ok(out)
}

fn query_one<T>(
    conn: &Connection,
    c: &Ctx,
    sql: &str,
    params: impl Params,
    map: impl FnMut(&Row<'_>) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    Ok(query_all(conn, c, sql, params, map)?.into_iter().next())
}

fn execute(
    conn: &Connection,
    c: &Ctx,
    sql: &str,
    params: impl Params,
) -> Result<usize, StoreError> {
    conn.prepare_cached(sql).ctx(c)?.execute(params).ctx(c)
}

fn agent_id(c: &Ctx, what: &'static str, s: String) -> Result<AgentId, StoreError> {
    AgentId::parse(&s).ok_or_else(|| c.corrupt(what, format!("'{s}' is not an agent id")))
}

fn task_id(c: &Ctx, what: &'static str, s: String) -> Result<TaskId, StoreError> {
    TaskId::parse(&s).ok_or_else(|| c.corrupt(what, format!("'{s}' is not a task id")))
}

fn handoff_id(c: &Ctx, s: String) -> Result<HandoffId, StoreError> {
    HandoffId::parse(&s)
        .ok_or_else(|| c.corrupt("handoffs.id", format!("'{s}' is not a handoff id")))
}

fn unsigned(c: &Ctx, what: &'static str, n: i64) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| c.corrupt(what, format!("{n} is negative")))
}

fn signed(n: u64) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| StoreError::Invalid {
        field: "integer",
        reason: format!("{n} is too large to store"),
    })
}

fn agent_ref(
    row: &Row<'_>,
    c: &Ctx,
    provider: &'static str,
    model: &'static str,
) -> Result<AgentRef, StoreError> {
    Ok(AgentRef {
        provider: agent_id(c, provider, get(row, provider, c)?)?,
        model: get(row, model, c)?,
    })
}

fn task_row(row: &Row<'_>, c: &Ctx) -> Result<Task, StoreError> {
    Ok(Task {
        id: task_id(c, "tasks.id", get(row, "id", c)?)?,
        project_root: Utf8PathBuf::from(get::<String>(row, "project_root", c)?),
        worktree: Utf8PathBuf::from(get::<String>(row, "worktree", c)?),
        branch: get(row, "branch", c)?,
        agent: TaskAgent {
            provider: agent_id(c, "tasks.provider", get(row, "provider", c)?)?,
            model: get(row, "model", c)?,
            account: get(row, "account", c)?,
        },
        parent: get::<Option<String>>(row, "parent_id", c)?
            .map(|p| task_id(c, "tasks.parent_id", p))
            .transpose()?,
        created_at: get(row, "created_at", c)?,
        updated_at: get(row, "updated_at", c)?,
    })
}

fn handoff_row(row: &Row<'_>, c: &Ctx) -> Result<HandoffRow, StoreError> {
    let details = get::<Option<String>>(row, "details", c)?
        .map(|json| serde_json::from_str(&json).map_err(|e| c.corrupt("handoffs.details", e)))
        .transpose()?;
    let route: String = get(row, "route", c)?;
    let outcome: String = get(row, "outcome", c)?;
    Ok(HandoffRow {
        id: handoff_id(c, get(row, "id", c)?)?,
        source: agent_ref(row, c, "source_provider", "source_model")?,
        target: agent_ref(row, c, "target_provider", "target_model")?,
        context: HandoffContext {
            note_path: get::<Option<String>>(row, "note_path", c)?.map(Utf8PathBuf::from),
            note_digest: get(row, "note_digest", c)?,
            transcript_messages: get::<Option<i64>>(row, "transcript_messages", c)?
                .map(|n| unsigned(c, "handoffs.transcript_messages", n))
                .transpose()?,
            message: get(row, "message", c)?,
            details,
        },
        route: Route::parse(&route)
            .ok_or_else(|| c.corrupt("handoffs.route", format!("unknown route '{route}'")))?,
        outcome: HandoffOutcome::from_parts(&outcome, get(row, "outcome_reason", c)?)
            .ok_or_else(|| c.corrupt("handoffs.outcome", format!("bad outcome '{outcome}'")))?,
        started_at: get(row, "started_at", c)?,
        finished_at: get(row, "finished_at", c)?,
    })
}

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
    })
}

pub(crate) fn insert_task(conn: &Connection, c: &Ctx, t: &Task) -> Result<(), StoreError> {
    execute(
        conn,
        c,
        INSERT_TASK,
        params![
            t.id.as_str(),
            t.project_root.as_str(),
            t.worktree.as_str(),
            t.branch,
            t.agent.provider.as_str(),
            t.agent.model,
            t.agent.account,
            t.parent.as_ref().map(TaskId::as_str),
            t.created_at,
            t.updated_at,
        ],
    )?;
    Ok(())
}

pub(crate) fn task(conn: &Connection, c: &Ctx, id: &TaskId) -> Result<Option<Task>, StoreError> {
    query_one(conn, c, SELECT_TASK, [id.as_str()], |r| task_row(r, c))
}

/// A record is read from its blob in pieces of this many bytes.
const BLOB_PIECE: usize = 64 * 1024;

/// Keeps `record` for `worktree`, replacing the one kept before.
///
/// SQLite makes the row in memory whole, so saving a record costs about twice its size for a
/// moment, however the blob is handed over (bound, or made as `zeroblob` and written in
/// pieces): only a blob in a table's last column is written without that copy.
pub(crate) fn save_stat_record(
    conn: &Connection,
    c: &Ctx,
    worktree: &Utf8Path,
    record: &[u8],
    at: &str,
) -> Result<(), StoreError> {
    // Room first (a zeroblob, the row's last column), then the bytes in pieces: the record is
    // never copied whole into a row image.
    let len = i64::try_from(record.len()).map_err(|_| StoreError::Invalid {
        field: "stat record",
        reason: format!("{} bytes is too large", record.len()),
    })?;
    execute(
        conn,
        c,
        "INSERT INTO stat_records (worktree, saved_at, record) VALUES (?1, ?2, zeroblob(?3)) \
         ON CONFLICT (worktree) DO UPDATE SET saved_at = excluded.saved_at, record = zeroblob(?3)",
        rusqlite::params![worktree.as_str(), at, len],
    )?;
    let row = query_one(
        conn,
        c,
        "SELECT rowid FROM stat_records WHERE worktree = ?1",
        [worktree.as_str()],
        |r| get::<i64>(r, 0, c),
    )?
    .ok_or_else(|| c.corrupt("stat record", "the row just written is missing"))?;
    let mut blob = conn
        .blob_open(rusqlite::MAIN_DB, "stat_records", "record", row, false)
        .ctx(c)?;
    for (i, piece) in record.chunks(BLOB_PIECE).enumerate() {
        blob.write_at(piece, i * BLOB_PIECE).ctx(c)?;
    }
    Ok(())
}

/// Keeps `state` as the task's configuration state unless it has one; whether it was kept.
pub(crate) fn save_config_state(
    conn: &Connection,
    c: &Ctx,
    task: &TaskId,
    state: &str,
    at: &str,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        c,
        "INSERT INTO task_config_states (task_id, state, recorded_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (task_id) DO NOTHING",
        rusqlite::params![task.as_str(), state, at],
    )?;
    // The task has its state now: what its worktree kept before it existed is taken over.
    execute(
        conn,
        c,
        "DELETE FROM worktree_config_states \
         WHERE worktree = (SELECT worktree FROM tasks WHERE id = ?1)",
        [task.as_str()],
    )?;
    Ok(n > 0)
}

/// Keeps `state` for the worktree unless it has one; whether it was kept.
pub(crate) fn save_worktree_config_state(
    conn: &Connection,
    c: &Ctx,
    worktree: &Utf8Path,
    state: &str,
    at: &str,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        c,
        "INSERT INTO worktree_config_states (worktree, state, recorded_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (worktree) DO NOTHING",
        rusqlite::params![worktree.as_str(), state, at],
    )?;
    Ok(n > 0)
}

/// The configuration state a worktree keeps for the task it does not have yet, as JSON.
pub(crate) fn worktree_config_state(
    conn: &Connection,
    c: &Ctx,
    worktree: &Utf8Path,
) -> Result<Option<String>, StoreError> {
    query_one(
        conn,
        c,
        "SELECT state FROM worktree_config_states WHERE worktree = ?1",
        [worktree.as_str()],
        |r| get::<String>(r, 0, c),
    )
}

/// The configuration state kept for the task, as JSON.
pub(crate) fn config_state(
    conn: &Connection,
    c: &Ctx,
    task: &TaskId,
) -> Result<Option<String>, StoreError> {
    query_one(
        conn,
        c,
        "SELECT state FROM task_config_states WHERE task_id = ?1",
        [task.as_str()],
        |r| get::<String>(r, 0, c),
    )
}

/// Gives task `to` the configuration state of task `from`, if it has one.
pub(crate) fn copy_config_state(
    conn: &Connection,
    c: &Ctx,
    from: &TaskId,
    to: &TaskId,
) -> Result<(), StoreError> {
    execute(
        conn,
        c,
        "INSERT INTO task_config_states (task_id, state, recorded_at) \
         SELECT ?2, state, recorded_at FROM task_config_states WHERE task_id = ?1",
        rusqlite::params![from.as_str(), to.as_str()],
    )?;
    Ok(())
}

/// The record of the deepest worktree that is `path` or contains it, read from its blob in
/// pieces into one buffer (reading the column would have SQLite assemble a copy first).
pub(crate) fn stat_record(
    conn: &Connection,
    c: &Ctx,
    path: &Utf8Path,
) -> Result<Option<(camino::Utf8PathBuf, Vec<u8>)>, StoreError> {
    for candidate in path.ancestors() {
        let found = query_one(
            conn,
            c,
            "SELECT rowid FROM stat_records WHERE worktree = ?1",
            [candidate.as_str()],
            |r| get::<i64>(r, 0, c),
        )?;
        if let Some(row) = found {
            let blob = conn
                .blob_open(rusqlite::MAIN_DB, "stat_records", "record", row, true)
                .ctx(c)?;
            let mut record = vec![0; blob.len()];
            for (i, piece) in record.chunks_mut(BLOB_PIECE).enumerate() {
                blob.read_at_exact(piece, i * BLOB_PIECE).ctx(c)?;
            }
            return Ok(Some((candidate.to_owned(), record)));
        }
    }
    Ok(None)
}

pub(crate) fn task_for_worktree(
    conn: &Connection,
    c: &Ctx,
    worktree: &Utf8Path,
) -> Result<Option<Task>, StoreError> {
    query_one(
        conn,
        c,
        SELECT_TASK_FOR_WORKTREE,
        [worktree.as_str()],
        |r| task_row(r, c),
    )
}

pub(crate) fn tasks(
    conn: &Connection,
    c: &Ctx,
    project_root: Option<&Utf8Path>,
) -> Result<Vec<Task>, StoreError> {
    match project_root {
        Some(root) => query_all(conn, c, SELECT_PROJECT_TASKS, [root.as_str()], |r| {
            task_row(r, c)
        }),
        None => query_all(conn, c, SELECT_TASKS, [], |r| task_row(r, c)),
    }
}

/// Whether the task exists.
pub(crate) fn set_agent(
    conn: &Connection,
    c: &Ctx,
    id: &TaskId,
    agent: &TaskAgent,
    now: &str,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        c,
        UPDATE_AGENT,
        params![
            id.as_str(),
            agent.provider.as_str(),
            agent.model,
            agent.account,
            now
        ],
    )?;
    Ok(n == 1)
}

/// Marks the task changed; whether it exists.
pub(crate) fn touch(
    conn: &Connection,
    c: &Ctx,
    id: &TaskId,
    now: &str,
) -> Result<bool, StoreError> {
    Ok(execute(conn, c, TOUCH_TASK, params![id.as_str(), now])? == 1)
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

pub(crate) fn insert_handoff(conn: &Connection, c: &Ctx, h: &HandoffRow) -> Result<(), StoreError> {
    let details = h
        .context
        .details
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Invalid {
            field: "details",
            reason: e.to_string(),
        })?;
    let transcript = h.context.transcript_messages.map(signed).transpose()?;
    execute(
        conn,
        c,
        INSERT_HANDOFF,
        params![
            h.id.as_str(),
            h.source.provider.as_str(),
            h.source.model,
            h.target.provider.as_str(),
            h.target.model,
            h.context.note_path.as_ref().map(|p| p.as_str()),
            h.context.note_digest,
            transcript,
            h.context.message,
            details,
            h.route.as_str(),
            h.outcome.as_str(),
            h.outcome.reason(),
            h.started_at,
            h.finished_at,
        ],
    )?;
    Ok(())
}

pub(crate) fn handoff(
    conn: &Connection,
    c: &Ctx,
    id: &HandoffId,
) -> Result<Option<HandoffRow>, StoreError> {
    query_one(conn, c, SELECT_HANDOFF, [id.as_str()], |r| {
        handoff_row(r, c)
    })
}

/// `None` when there is no such handoff, `Some(None)` while it is pending.
pub(crate) fn handoff_finished_at(
    conn: &Connection,
    c: &Ctx,
    id: &HandoffId,
) -> Result<Option<Option<String>>, StoreError> {
    conn.prepare_cached(SELECT_HANDOFF_FINISHED)
        .ctx(c)?
        .query_row([id.as_str()], |r| r.get(0))
        .optional()
        .ctx(c)
}

/// Sets a pending handoff's outcome and marks the tasks whose timelines show it as changed.
pub(crate) fn finish_handoff(
    conn: &Connection,
    c: &Ctx,
    id: &HandoffId,
    outcome: &HandoffOutcome,
    now: &str,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        c,
        FINISH_HANDOFF,
        params![id.as_str(), outcome.as_str(), outcome.reason(), now],
    )?;
    execute(conn, c, TOUCH_HANDOFF_TASKS, params![id.as_str(), now])?;
    Ok(n == 1)
}

/// Replaces a handoff's details.
pub(crate) fn set_handoff_details(
    conn: &Connection,
    c: &Ctx,
    id: &HandoffId,
    details: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), StoreError> {
    let json = serde_json::to_string(details).map_err(|e| StoreError::Invalid {
        field: "details",
        reason: e.to_string(),
    })?;
    execute(conn, c, SET_HANDOFF_DETAILS, params![id.as_str(), json])?;
    Ok(())
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

/// The problems `PRAGMA integrity_check` and `PRAGMA foreign_key_check` report; empty when
/// the file is sound.
pub(crate) fn integrity_problems(conn: &Connection, c: &Ctx) -> Result<Vec<String>, StoreError> {
    let mut problems: Vec<String> =
        query_all(conn, c, INTEGRITY_CHECK, [], |r| get::<String>(r, 0, c))?
            .into_iter()
            .filter(|line| line != "ok")
            .collect();
    problems.extend(query_all(conn, c, FOREIGN_KEY_CHECK, [], |r| {
        let table: String = get(r, 0, c)?;
        let parent: String = get(r, 2, c)?;
        Ok(format!(
            "a row of {table} points at a missing row of {parent}"
        ))
    })?);
    Ok(problems)
}
