//! Every statement the store runs, and the typed mapping between rows and core's records.
//!
//! Functions here take a connection (or a transaction, which derefs to one) and do no
//! transaction handling of their own: `store.rs` decides what one transaction holds.
//!
//! One file per concern: tasks (`tasks`), the timeline and the records it points at
//! (`timeline`), handoff rows (`handoffs`), the per-worktree and per-task records kept beside
//! them (`records`: stat records, configuration states) and background jobs (`jobs`). Here: the
//! error mapping, the generic query helpers and the row converters they share.

use std::fmt::Display;

use camino::Utf8PathBuf;
use rusqlite::types::FromSql;
use rusqlite::{Connection, ErrorCode, Params, Row, RowIndex};

use handoff_core::{AgentId, AgentRef, StoreError, TaskId};

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

// Shared by `handoffs` and `timeline`: defined before the modules that use it.
macro_rules! handoff_columns {
    () => {
        "id, source_provider, source_model, target_provider, target_model, note_path, \
         note_digest, transcript_messages, message, details, route, outcome, outcome_reason, \
         started_at, finished_at"
    };
}

mod handoffs;
mod jobs;
mod records;
mod tasks;
mod timeline;

pub(crate) use self::handoffs::{
    finish_handoff, handoff, handoff_finished_at, insert_handoff, set_handoff_details,
};
pub(crate) use self::jobs::{finish_job, insert_job, job, jobs, set_job_supervisor};
pub(crate) use self::records::{
    config_state, copy_config_state, fingerprint_basis, save_config_state, save_fingerprint_basis,
    save_stat_record, save_worktree_config_state, stat_record, worktree_config_state,
};
pub(crate) use self::tasks::{insert_task, set_agent, task, task_for_worktree, tasks, touch};
pub(crate) use self::timeline::{
    Link, copy_timeline, insert_entry, insert_record, last_seq, timeline,
};

const INTEGRITY_CHECK: &str = "PRAGMA integrity_check";
const FOREIGN_KEY_CHECK: &str = "PRAGMA foreign_key_check";

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
