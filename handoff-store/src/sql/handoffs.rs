//! Handoff rows: recording, reading, finishing them, and adding to their details.

use camino::Utf8PathBuf;
use rusqlite::{Connection, OptionalExtension, Row, params};

use handoff_core::{HandoffContext, HandoffId, HandoffOutcome, HandoffRow, Route, StoreError};

use super::{Ctx, SqlResult, agent_ref, execute, get, query_one, signed, unsigned};

const TOUCH_HANDOFF_TASKS: &str = "UPDATE tasks SET updated_at = max(updated_at, ?2) \
     WHERE id IN (SELECT task_id FROM timeline WHERE handoff_id = ?1)";

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

fn handoff_id(c: &Ctx, s: String) -> Result<HandoffId, StoreError> {
    HandoffId::parse(&s)
        .ok_or_else(|| c.corrupt("handoffs.id", format!("'{s}' is not a handoff id")))
}

pub(super) fn handoff_row(row: &Row<'_>, c: &Ctx) -> Result<HandoffRow, StoreError> {
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
