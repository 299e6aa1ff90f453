//! The schema, its migrations, and the checks that a file is a store this build can use.
//!
//! `PRAGMA user_version` is the number of migrations applied. A migration is never edited once
//! released: a change to the schema is a new entry at the end of [`MIGRATIONS`].

use rusqlite::{Connection, TransactionBehavior};

use handoff_core::StoreError;

use crate::sql::{Ctx, SqlResult};

/// The schema version this build writes: the number of migrations.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// `PRAGMA application_id` of a handoff store (`"HNDF"`).
pub const APPLICATION_ID: i32 = 0x484E_4446;

const IDENTITY: &str = "SELECT (SELECT user_version FROM pragma_user_version), \
     (SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_schema)";

/// One migration: SQL, or a step written in Rust.
enum Migration {
    Sql(&'static str),
    /// Masks, with every credential pattern, the free text stores written before handoff masked
    /// what it writes: turn summaries, handoff messages, reasons and details, checkpoint
    /// messages, check commands. With `secure_delete` on, the old text is zeroed.
    Scrub,
    /// A column added to a table unless it is there already: applying it again changes
    /// nothing, as with the other migrations.
    AddColumn {
        table: &'static str,
        column: &'static str,
        definition: &'static str,
    },
}

/// Migration `i` takes a store from version `i` to `i + 1`.
const MIGRATIONS: [Migration; 8] = [
    Migration::Sql(V1),
    Migration::Sql(V2),
    Migration::Sql(V3),
    Migration::Scrub,
    Migration::Sql(V5),
    Migration::Sql(V6),
    Migration::Sql(V7),
    // Where a delegated run ran, when it was sent to another machine (`--on`): the host's
    // name, else its ssh destination. Null for a run here.
    Migration::AddColumn {
        table: "delegated_runs",
        column: "host",
        definition: "TEXT CHECK (host IS NULL OR length(host) BETWEEN 1 AND 256)",
    },
];

/// What a later `handoff fingerprint --diff` judges a saved fingerprint by: its record and its
/// baseline (JSON), by digest and worktree; the record last, written in place like a stat
/// record's.
const V7: &str = "
CREATE TABLE IF NOT EXISTS fingerprint_bases (
    digest   TEXT NOT NULL CHECK (substr(digest, 1, 7) = 'sha256:'),
    worktree TEXT NOT NULL,
    saved_at TEXT NOT NULL,
    baseline TEXT NOT NULL CHECK (json_type(baseline) = 'object'),
    record   BLOB NOT NULL,
    PRIMARY KEY (digest, worktree)
) STRICT;
CREATE INDEX IF NOT EXISTS fingerprint_bases_by_worktree ON fingerprint_bases (worktree, saved_at);
";

/// Background jobs (`--detach`, the MCP server's): who runs each, its command line (masked, a
/// JSON array), its supervisor, and how it ended. Only `running` and `finished` are stored: a
/// job is judged `lost` when read, from its supervisor. A finished job has its end time and exit
/// code; a running one has neither, nor a result. Applying it again changes nothing, as with
/// the scrub and V5.
const V6: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id                    TEXT PRIMARY KEY CHECK (substr(id, 1, 4) = 'job-'),
    origin                TEXT NOT NULL CHECK (origin IN ('cli', 'mcp')),
    verb                  TEXT NOT NULL,
    args                  TEXT NOT NULL CHECK (json_type(args) = 'array'),
    cwd                   TEXT,
    target                TEXT,
    mode                  TEXT,
    state                 TEXT NOT NULL CHECK (state IN ('running', 'finished')),
    started_at            TEXT NOT NULL,
    finished_at           TEXT,
    supervisor_pid        INTEGER CHECK (supervisor_pid >= 0),
    supervisor_start_time INTEGER CHECK (supervisor_start_time >= 0),
    exit_code             INTEGER CHECK (exit_code BETWEEN 0 AND 255),
    result                TEXT CHECK (result IS NULL OR json_valid(result)),
    CHECK ((supervisor_pid IS NULL) = (supervisor_start_time IS NULL)),
    CHECK ((state = 'finished') = (finished_at IS NOT NULL)),
    CHECK ((state = 'finished') = (exit_code IS NOT NULL)),
    CHECK (state = 'finished' OR result IS NULL)
) STRICT;
CREATE INDEX IF NOT EXISTS jobs_by_start ON jobs (started_at, id);
";

/// The record last in its row, so that it can be written in place through a `zeroblob` and
/// incremental blob I/O: SQLite then never holds a whole row (a 100k-file record is about 8 MB)
/// in memory to save it.
const V5: &str = "
CREATE TABLE stat_records_next (
    worktree TEXT PRIMARY KEY,
    saved_at TEXT NOT NULL,
    record   BLOB NOT NULL
) STRICT;
INSERT INTO stat_records_next (worktree, saved_at, record)
    SELECT worktree, saved_at, record FROM stat_records;
DROP TABLE stat_records;
ALTER TABLE stat_records_next RENAME TO stat_records;
";

/// What each task trusts: the state of the configuration that runs programs (hooks, program
/// settings, agents' configuration) at the task's first event, as JSON; written once. A
/// worktree's first event that made no task (a delegated run without a caller) keeps its state
/// by worktree until a task takes it over.
const V3: &str = "
CREATE TABLE task_config_states (
    task_id     TEXT PRIMARY KEY REFERENCES tasks (id),
    state       TEXT NOT NULL CHECK (json_type(state) = 'object'),
    recorded_at TEXT NOT NULL
) STRICT;

CREATE TABLE worktree_config_states (
    worktree    TEXT PRIMARY KEY,
    state       TEXT NOT NULL CHECK (json_type(state) = 'object'),
    recorded_at TEXT NOT NULL
) STRICT;
";

/// handoff's own record of each worktree's tracked files as the last run left them: one row per
/// worktree, replaced by each run.
const V2: &str = "
CREATE TABLE stat_records (
    worktree TEXT PRIMARY KEY,
    record   BLOB NOT NULL,
    saved_at TEXT NOT NULL
) STRICT;
";

/// Tasks, the timeline, and one table per kind of entry. Timeline rows point at their details
/// rather than owning them, so a forked task's copied timeline shares them (a copied handoff is
/// the same handoff). Enumerations are stored as their serialized names and checked on read.
const V1: &str = "
CREATE TABLE tasks (
    id           TEXT PRIMARY KEY,
    project_root TEXT NOT NULL,
    worktree     TEXT NOT NULL,
    branch       TEXT,
    provider     TEXT NOT NULL,
    model        TEXT,
    account      TEXT,
    parent_id    TEXT REFERENCES tasks (id),
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
) STRICT;
CREATE INDEX tasks_by_worktree ON tasks (worktree, created_at);
CREATE INDEX tasks_by_project ON tasks (project_root, created_at);

CREATE TABLE turns (
    id       INTEGER PRIMARY KEY,
    provider TEXT NOT NULL,
    model    TEXT,
    summary  TEXT NOT NULL
) STRICT;

CREATE TABLE handoffs (
    id                  TEXT PRIMARY KEY,
    source_provider     TEXT NOT NULL,
    source_model        TEXT,
    target_provider     TEXT NOT NULL,
    target_model        TEXT,
    note_path           TEXT,
    note_digest         TEXT,
    transcript_messages INTEGER CHECK (transcript_messages >= 0),
    message             TEXT,
    details             TEXT CHECK (details IS NULL OR json_type(details) = 'object'),
    route               TEXT NOT NULL,
    outcome             TEXT NOT NULL,
    outcome_reason      TEXT,
    started_at          TEXT NOT NULL,
    finished_at         TEXT,
    CHECK ((outcome = 'not-started') = (outcome_reason IS NOT NULL)),
    CHECK ((outcome = 'pending') = (finished_at IS NULL))
) STRICT;

CREATE TABLE checkpoints (
    id        INTEGER PRIMARY KEY,
    commit_id TEXT NOT NULL,
    provider  TEXT NOT NULL,
    model     TEXT,
    message   TEXT NOT NULL
) STRICT;

CREATE TABLE checkpoint_files (
    checkpoint_id INTEGER NOT NULL REFERENCES checkpoints (id),
    committed     INTEGER NOT NULL CHECK (committed IN (0, 1)),
    position      INTEGER NOT NULL,
    path          TEXT NOT NULL,
    PRIMARY KEY (checkpoint_id, committed, position)
) STRICT, WITHOUT ROWID;

CREATE TABLE checks (
    id        INTEGER PRIMARY KEY,
    command   TEXT NOT NULL,
    exit_code INTEGER,
    commit_id TEXT NOT NULL
) STRICT;

CREATE TABLE delegated_runs (
    id          INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL,
    operation   TEXT NOT NULL,
    mode        TEXT,
    target      TEXT NOT NULL,
    status      TEXT NOT NULL,
    exit_code   INTEGER NOT NULL CHECK (exit_code BETWEEN 0 AND 255),
    result_path TEXT,
    result_hash TEXT
) STRICT;

CREATE TABLE timeline (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id        TEXT NOT NULL REFERENCES tasks (id),
    at             TEXT NOT NULL,
    kind           TEXT NOT NULL,
    turn_id        INTEGER REFERENCES turns (id),
    handoff_id     TEXT REFERENCES handoffs (id),
    checkpoint_id  INTEGER REFERENCES checkpoints (id),
    check_id       INTEGER REFERENCES checks (id),
    run_id         INTEGER REFERENCES delegated_runs (id),
    forked_from    TEXT REFERENCES tasks (id),
    forked_through INTEGER,
    CHECK ((kind = 'turn') = (turn_id IS NOT NULL)),
    CHECK ((kind = 'handoff') = (handoff_id IS NOT NULL)),
    CHECK ((kind = 'checkpoint') = (checkpoint_id IS NOT NULL)),
    CHECK ((kind = 'check') = (check_id IS NOT NULL)),
    CHECK ((kind = 'delegated-run') = (run_id IS NOT NULL)),
    CHECK ((kind = 'forked') = (forked_from IS NOT NULL)),
    CHECK (kind = 'forked' OR forked_through IS NULL)
) STRICT;
CREATE INDEX timeline_by_task ON timeline (task_id, seq);
CREATE INDEX timeline_by_handoff ON timeline (handoff_id) WHERE handoff_id IS NOT NULL;
";

/// `user_version`, `application_id`, and whether the file holds any schema object, read in
/// one statement so that they describe one state of the file.
fn identity(conn: &Connection, ctx: &Ctx) -> Result<(u32, i32, bool), StoreError> {
    let (version, app, objects): (i64, i32, i64) = conn
        .query_row(IDENTITY, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .ctx(ctx)?;
    let version = u32::try_from(version).map_err(|_| ctx.corrupt("user_version", version))?;
    Ok((version, app, objects > 0))
}

/// Refuses a file this build must not touch: another program's database, or a store written
/// by a newer handoff. `Ok(version)` otherwise; no lock is taken.
pub(crate) fn check(conn: &Connection, ctx: &Ctx) -> Result<u32, StoreError> {
    let (version, app, objects) = identity(conn, ctx)?;
    let ours = app == APPLICATION_ID || (app == 0 && version == 0 && !objects);
    if !ours {
        return Err(StoreError::NotAStore {
            path: ctx.path.clone(),
            application_id: app,
        });
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: ctx.path.clone(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(version)
}

/// Brings the store to [`SCHEMA_VERSION`], one migration per immediate transaction. The
/// version is read again under the write lock, so processes opening a new store at the same
/// time apply each migration once. A scrub masks with `masker`: every secret the opener knows.
pub(crate) fn migrate(
    conn: &mut Connection,
    ctx: &Ctx,
    masker: &handoff_core::Masker,
) -> Result<(), StoreError> {
    if check(conn, ctx)? == SCHEMA_VERSION {
        return Ok(());
    }
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx(ctx)?;
        let version = check(&tx, ctx)?;
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        let next = version + 1;
        let failed = |e: rusqlite::Error| {
            if Ctx::is_busy(&e) {
                ctx.locked()
            } else {
                StoreError::Migration {
                    path: ctx.path.clone(),
                    version: next,
                    message: e.to_string(),
                }
            }
        };
        match &MIGRATIONS[version as usize] {
            Migration::Sql(sql) => tx.execute_batch(sql).map_err(failed)?,
            Migration::Scrub => scrub(&tx, masker).map_err(failed)?,
            Migration::AddColumn {
                table,
                column,
                definition,
            } => add_column(&tx, table, column, definition).map_err(failed)?,
        }
        tx.pragma_update(None, "user_version", next)
            .map_err(failed)?;
        if version == 0 {
            tx.pragma_update(None, "application_id", APPLICATION_ID)
                .map_err(failed)?;
        }
        tx.commit().map_err(failed)?;
        if matches!(MIGRATIONS[version as usize], Migration::Scrub) {
            // The old text out of the write-ahead log and into overwritten pages now.
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
    }
}

fn add_column(
    conn: &Connection,
    table: &str,
    column: &str,
    definition: &str,
) -> rusqlite::Result<()> {
    let there: bool = conn.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |r| r.get(0),
    )?;
    if !there {
        conn.execute_batch(&format!(
            "ALTER TABLE {table} ADD COLUMN {column} {definition}"
        ))?;
    }
    Ok(())
}

/// Masks every free-text column in place (see [`Migration::Scrub`]).
fn scrub(conn: &Connection, masker: &handoff_core::Masker) -> rusqlite::Result<()> {
    for (table, column) in [
        ("turns", "summary"),
        ("handoffs", "message"),
        ("handoffs", "outcome_reason"),
        ("checkpoints", "message"),
        ("checks", "command"),
    ] {
        let rows: Vec<(String, String)> = conn
            .prepare(&format!(
                "SELECT CAST(rowid AS TEXT), {column} FROM {table} WHERE {column} IS NOT NULL"
            ))?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (rowid, text) in rows {
            let masked = masker.mask(&text);
            if masked.count > 0 {
                conn.execute(
                    &format!("UPDATE {table} SET {column} = ?1 WHERE rowid = CAST(?2 AS INTEGER)"),
                    rusqlite::params![masked.text.as_ref(), rowid],
                )?;
            }
        }
    }
    let rows: Vec<(String, String)> = conn
        .prepare("SELECT id, details FROM handoffs WHERE details IS NOT NULL")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, details) in rows {
        let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&details) else {
            continue;
        };
        if masker.mask_json(&mut value) > 0 {
            conn.execute(
                "UPDATE handoffs SET details = ?1 WHERE id = ?2",
                rusqlite::params![value.to_string(), id],
            )?;
        }
    }
    Ok(())
}
