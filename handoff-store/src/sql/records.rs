//! What is kept beside tasks: handoff's stat record of each worktree, what saved fingerprints are
//! compared by, and the configuration state each task (or a worktree that has no task yet)
//! trusts.

use camino::Utf8Path;
use rusqlite::Connection;

use handoff_core::{FingerprintBasis, StoreError, TaskId};

use super::{Ctx, SqlResult, execute, get, query_one};

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
    write_record(conn, c, "stat_records", row, record)
}

/// Writes `record` into the `record` column (a `zeroblob` of its length) of `table`'s row `row`,
/// in pieces.
fn write_record(
    conn: &Connection,
    c: &Ctx,
    table: &str,
    row: i64,
    record: &[u8],
) -> Result<(), StoreError> {
    let mut blob = conn
        .blob_open(rusqlite::MAIN_DB, table, "record", row, false)
        .ctx(c)?;
    for (i, piece) in record.chunks(BLOB_PIECE).enumerate() {
        blob.write_at(piece, i * BLOB_PIECE).ctx(c)?;
    }
    Ok(())
}

/// The `record` column of `table`'s row `row`, read from its blob in pieces into one buffer
/// (reading the column would have SQLite assemble a copy first).
fn read_record(conn: &Connection, c: &Ctx, table: &str, row: i64) -> Result<Vec<u8>, StoreError> {
    let blob = conn
        .blob_open(rusqlite::MAIN_DB, table, "record", row, true)
        .ctx(c)?;
    let mut record = vec![0; blob.len()];
    for (i, piece) in record.chunks_mut(BLOB_PIECE).enumerate() {
        blob.read_at_exact(piece, i * BLOB_PIECE).ctx(c)?;
    }
    Ok(record)
}

/// How many saved fingerprints' bases are kept per worktree: older ones are deleted.
const BASES_PER_WORKTREE: i64 = 16;

/// Keeps `basis`, replacing one of the same digest and worktree, and lets go of the oldest of
/// its worktree beyond [`BASES_PER_WORKTREE`].
pub(crate) fn save_fingerprint_basis(
    conn: &Connection,
    c: &Ctx,
    basis: &FingerprintBasis,
    at: &str,
) -> Result<(), StoreError> {
    let invalid = |reason: String| StoreError::Invalid {
        field: "fingerprint basis",
        reason,
    };
    let len = i64::try_from(basis.record.len())
        .map_err(|_| invalid(format!("{} bytes is too large", basis.record.len())))?;
    let baseline = std::str::from_utf8(&basis.baseline)
        .map_err(|_| invalid("the baseline is not UTF-8".to_owned()))?;
    let worktree = basis.worktree.as_str();
    execute(
        conn,
        c,
        "INSERT INTO fingerprint_bases (digest, worktree, saved_at, baseline, record) \
         VALUES (?1, ?2, ?3, ?4, zeroblob(?5)) \
         ON CONFLICT (digest, worktree) DO UPDATE SET saved_at = excluded.saved_at, \
         baseline = excluded.baseline, record = zeroblob(?5)",
        rusqlite::params![basis.digest, worktree, at, baseline, len],
    )?;
    let row = query_one(
        conn,
        c,
        "SELECT rowid FROM fingerprint_bases WHERE digest = ?1 AND worktree = ?2",
        [basis.digest.as_str(), worktree],
        |r| get::<i64>(r, 0, c),
    )?
    .ok_or_else(|| c.corrupt("fingerprint basis", "the row just written is missing"))?;
    write_record(conn, c, "fingerprint_bases", row, &basis.record)?;
    execute(
        conn,
        c,
        "DELETE FROM fingerprint_bases WHERE worktree = ?1 AND rowid NOT IN \
         (SELECT rowid FROM fingerprint_bases WHERE worktree = ?1 \
          ORDER BY saved_at DESC, rowid DESC LIMIT ?2)",
        rusqlite::params![worktree, BASES_PER_WORKTREE],
    )?;
    Ok(())
}

/// The basis kept for the fingerprint with `digest` of the worktree at `worktree`.
pub(crate) fn fingerprint_basis(
    conn: &Connection,
    c: &Ctx,
    digest: &str,
    worktree: &Utf8Path,
) -> Result<Option<FingerprintBasis>, StoreError> {
    let found = query_one(
        conn,
        c,
        "SELECT rowid, baseline FROM fingerprint_bases WHERE digest = ?1 AND worktree = ?2",
        [digest, worktree.as_str()],
        |r| Ok((get::<i64>(r, 0, c)?, get::<String>(r, 1, c)?)),
    )?;
    let Some((row, baseline)) = found else {
        return Ok(None);
    };
    Ok(Some(FingerprintBasis {
        digest: digest.to_owned(),
        worktree: worktree.to_owned(),
        record: read_record(conn, c, "fingerprint_bases", row)?,
        baseline: baseline.into_bytes(),
    }))
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

/// The record of the deepest worktree that is `path` or contains it.
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
            let record = read_record(conn, c, "stat_records", row)?;
            return Ok(Some((candidate.to_owned(), record)));
        }
    }
    Ok(None)
}
