//! [`SqliteStore`]: opening the file, and one transaction per [`TaskStore`] method.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use handoff_core::{
    ConfigState, FingerprintBasis, Fork, HandoffId, HandoffOutcome, HandoffRow, Job, JobId, Masker,
    NewHandoff, NewJob, NewTask, ProcessRef, Record, StoreError, Task, TaskAgent, TaskId,
    TaskStore, TimelineEntry, check_timestamp, now_iso,
};

use crate::jobs;
use crate::location::{default_path, prepare};
use crate::schema;
use crate::sql::{self, Ctx, Link, SqlResult};

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    busy_timeout: Duration,
    masker: Masker,
}

impl StoreOptions {
    /// How long a write waits for another process's by default.
    pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

    /// The defaults.
    pub fn new() -> StoreOptions {
        StoreOptions {
            busy_timeout: StoreOptions::DEFAULT_BUSY_TIMEOUT,
            masker: Masker::default(),
        }
    }

    /// What masks the text the store writes (summaries, messages, reasons, details, commands):
    /// by default every credential pattern; give it the secrets the caller knows (its
    /// configuration's, its environment's credentials) to mask those too, in every encoding.
    pub fn masker(mut self, masker: Masker) -> StoreOptions {
        self.masker = masker;
        self
    }

    /// How long to wait for another process's write lock before failing with
    /// [`StoreError::Locked`].
    pub fn busy_timeout(mut self, timeout: Duration) -> StoreOptions {
        self.busy_timeout = timeout;
        self
    }
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions::new()
    }
}

/// A task store in an SQLite file. One connection, used by one thread at a time; open one
/// store per process (or per thread, for more concurrency) on the same file.
#[derive(Debug)]
pub struct SqliteStore {
    ctx: Ctx,
    conn: Mutex<Connection>,
    masker: Masker,
}

impl SqliteStore {
    /// Opens (creating and migrating as needed) the store at [`default_path`], masking what it
    /// writes with every secret known in `env` and its configuration.
    pub fn open_default(env: &BTreeMap<String, String>) -> Result<SqliteStore, StoreError> {
        // What it writes is masked with every secret handoff knows: the environment's
        // credentials and the configuration's (a configuration that does not load has none).
        let config = handoff_core::Config::load(env)
            .map(|l| l.config)
            .unwrap_or_default();
        let masker = Masker::new(handoff_core::known_secrets(env, &config));
        SqliteStore::open_with(default_path(env)?, &StoreOptions::new().masker(masker))
    }

    /// Opens (creating and migrating as needed) the store at `path`, with the default options.
    pub fn open(path: impl AsRef<Utf8Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, &StoreOptions::default())
    }

    /// Opens (creating and migrating as needed) the store at `path`. Missing directories are
    /// created `0700` and a missing file `0600`.
    pub fn open_with(
        path: impl AsRef<Utf8Path>,
        options: &StoreOptions,
    ) -> Result<SqliteStore, StoreError> {
        let ctx = Ctx {
            path: path.as_ref().to_owned(),
            waited_ms: u64::try_from(options.busy_timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let created = prepare(&ctx.path)?;
        // A store file that was there and holds nothing lost its history: it is never
        // re-created silently.
        if !created && crate::location::is_empty_store(&ctx.path) {
            return Err(StoreError::Empty {
                path: ctx.path.clone(),
            });
        }
        // No CREATE: the file exists with its mode. No URI: a path is a path.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(&ctx.path, flags).ctx(&ctx)?;
        conn.busy_timeout(options.busy_timeout).ctx(&ctx)?;
        conn.pragma_update(None, "foreign_keys", true).ctx(&ctx)?;
        // What is deleted or overwritten (a masked row's old text) is zeroed, not left in
        // free pages.
        conn.pragma_update(None, "secure_delete", true).ctx(&ctx)?;
        // Before anything writes to it: refuse another program's file or a newer store.
        schema::check(&conn, &ctx)?;
        enable_wal(&conn, &ctx, options.busy_timeout)?;
        // In WAL mode NORMAL cannot corrupt the file; a power cut may lose the last commits.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .ctx(&ctx)?;
        // Every `handoff` process opens the store once and closes it as it exits: the last one
        // out would move the log into the file (three syncs) on every run. The log is moved
        // when it grows past SQLite's threshold instead, by the writer that grows it, and the
        // log file is cut back to 32 MiB whenever it starts over.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        )
        .ctx(&ctx)?;
        conn.pragma_update(None, "journal_size_limit", 32 << 20)
            .ctx(&ctx)?;
        schema::migrate(&mut conn, &ctx, &options.masker)?;
        Ok(SqliteStore {
            ctx,
            conn: Mutex::new(conn),
            masker: options.masker.clone(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Utf8Path {
        &self.ctx.path
    }

    /// The private directory next to the store file named `name` (`jobs`, `notices`): where
    /// what belongs with the store but not in it is kept.
    pub fn sibling_dir(&self, name: &str) -> Utf8PathBuf {
        self.ctx
            .path
            .parent()
            .map_or_else(|| Utf8PathBuf::from(name), |d| d.join(name))
    }

    /// The file's schema version (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let conn = self.lock();
        schema::check(&conn, &self.ctx)
    }

    /// Takes the write lock and gives it back at once: fails with [`StoreError::Locked`] when
    /// another process holds it for longer than the busy timeout. Lets a command that must
    /// record what it does refuse before it does anything.
    /// What `PRAGMA integrity_check` and `PRAGMA foreign_key_check` find wrong with the file;
    /// empty when it is sound.
    pub fn integrity_problems(&self) -> Result<Vec<String>, StoreError> {
        self.read(sql::integrity_problems)
    }

    /// `record` with its free text masked, and the paths of a checkpoint (an agent names the
    /// files it creates).
    fn masked_record(&self, record: &Record) -> Record {
        let mask = |s: &str| self.masker.mask(s).text.into_owned();
        let masks = |paths: &[String]| paths.iter().map(|p| mask(p)).collect();
        match record {
            Record::Turn(t) => Record::Turn(handoff_core::Turn {
                summary: mask(&t.summary),
                ..t.clone()
            }),
            Record::Checkpoint(c) => Record::Checkpoint(handoff_core::Checkpoint {
                message: mask(&c.message),
                committed: masks(&c.committed),
                uncommitted: masks(&c.uncommitted),
                ..c.clone()
            }),
            Record::Check(c) => Record::Check(handoff_core::CheckRun {
                command: mask(&c.command),
                ..c.clone()
            }),
            Record::DelegatedRun(r) => Record::DelegatedRun(r.clone()),
        }
    }

    /// `handoff` with its message and details masked.
    fn masked_handoff(&self, handoff: &NewHandoff) -> NewHandoff {
        let mut out = handoff.clone();
        if let Some(message) = &out.context.message {
            out.context.message = Some(self.masker.mask(message).text.into_owned());
        }
        if let Some(details) = out.context.details.take() {
            let mut value = serde_json::Value::Object(details);
            self.masker.mask_json(&mut value);
            out.context.details = value.as_object().cloned();
        }
        out
    }

    fn parse_config_state(&self, json: Option<String>) -> Result<Option<ConfigState>, StoreError> {
        let Some(json) = json else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: self.ctx.path.clone(),
                what: "configuration state",
                message: e.to_string(),
            })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock dropped its transaction, which rolled back.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn transaction<T>(
        &self,
        behavior: TransactionBehavior,
        f: impl FnOnce(&Connection, &Ctx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(behavior).ctx(&self.ctx)?;
        let out = f(&tx, &self.ctx)?;
        tx.commit().ctx(&self.ctx)?;
        Ok(out)
    }

    /// A write: the write lock is taken first, so nothing fails halfway for want of it.
    fn write<T>(
        &self,
        f: impl FnOnce(&Connection, &Ctx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.transaction(TransactionBehavior::Immediate, f)
    }

    /// A read of one consistent state of the file.
    fn read<T>(
        &self,
        f: impl FnOnce(&Connection, &Ctx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.transaction(TransactionBehavior::Deferred, f)
    }
}

/// Switches the file to WAL mode (a no-op once it is). Turning a new file to WAL needs an
/// exclusive lock, and SQLite reports a conflict with another connection doing the same at once
/// as busy without waiting, so this retries until the busy timeout.
fn enable_wal(conn: &Connection, ctx: &Ctx, timeout: Duration) -> Result<(), StoreError> {
    let is_wal = |mode: &str| mode.eq_ignore_ascii_case("wal");
    let deadline = Instant::now() + timeout;
    loop {
        let attempt = conn
            .pragma_query_value(None, "journal_mode", |r| r.get::<_, String>(0))
            .and_then(|mode| {
                if is_wal(&mode) {
                    Ok(mode)
                } else {
                    conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
                }
            });
        match attempt {
            Ok(mode) if is_wal(&mode) => return Ok(()),
            Ok(mode) => {
                return Err(StoreError::Sqlite {
                    path: ctx.path.clone(),
                    message: format!("cannot use WAL mode (the journal mode stays '{mode}')"),
                });
            }
            Err(e) if Ctx::is_busy(&e) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(ctx.sql(e)),
        }
    }
}

fn no_task(id: &TaskId) -> StoreError {
    StoreError::NotFound {
        what: "task",
        id: id.to_string(),
    }
}

fn no_handoff(id: &HandoffId) -> StoreError {
    StoreError::NotFound {
        what: "handoff",
        id: id.to_string(),
    }
}

fn no_job(id: &JobId) -> StoreError {
    StoreError::NotFound {
        what: "job",
        id: id.to_string(),
    }
}

/// The one spelling of a worktree its configuration state is kept under: its path with symbolic
/// links resolved, so that a worktree reached another way (`core.worktree` naming it through a
/// link) finds the state it kept, and is not a worktree with no state, which trusts everything.
fn same_worktree(worktree: &Utf8Path) -> Utf8PathBuf {
    worktree
        .canonicalize_utf8()
        .unwrap_or_else(|_| worktree.to_owned())
}

impl TaskStore for SqliteStore {
    /// Takes the write lock and gives it back at once: fails with [`StoreError::Locked`] when
    /// another process holds it for longer than the busy timeout.
    fn check_writable(&self) -> Result<(), StoreError> {
        self.write(|_, _| Ok(()))
    }

    fn create_task(&self, task: &NewTask) -> Result<Task, StoreError> {
        task.validate()?;
        let now = now_iso();
        let task = Task {
            id: TaskId::generate(),
            project_root: task.project_root.clone(),
            worktree: task.worktree.clone(),
            branch: task.branch.clone(),
            agent: task.agent.clone(),
            parent: None,
            created_at: now.clone(),
            updated_at: now,
        };
        self.write(|conn, c| sql::insert_task(conn, c, &task))?;
        Ok(task)
    }

    fn task(&self, id: &TaskId) -> Result<Task, StoreError> {
        self.read(|conn, c| sql::task(conn, c, id))?
            .ok_or_else(|| no_task(id))
    }

    fn save_stat_record(&self, worktree: &Utf8Path, record: &[u8]) -> Result<(), StoreError> {
        self.write(|conn, c| sql::save_stat_record(conn, c, worktree, record, &now_iso()))
    }

    fn stat_record(
        &self,
        path: &Utf8Path,
    ) -> Result<Option<(camino::Utf8PathBuf, Vec<u8>)>, StoreError> {
        self.read(|conn, c| sql::stat_record(conn, c, path))
    }

    fn save_fingerprint_basis(&self, basis: &FingerprintBasis) -> Result<(), StoreError> {
        self.write(|conn, c| sql::save_fingerprint_basis(conn, c, basis, &now_iso()))
    }

    fn fingerprint_basis(
        &self,
        digest: &str,
        worktree: &camino::Utf8Path,
    ) -> Result<Option<FingerprintBasis>, StoreError> {
        self.read(|conn, c| sql::fingerprint_basis(conn, c, digest, worktree))
    }

    fn save_config_state(&self, task: &TaskId, state: &ConfigState) -> Result<bool, StoreError> {
        let json = serde_json::to_string(state).map_err(|e| StoreError::Invalid {
            field: "configuration state",
            reason: e.to_string(),
        })?;
        self.write(|conn, c| sql::save_config_state(conn, c, task, &json, &now_iso()))
    }

    fn config_state(&self, task: &TaskId) -> Result<Option<ConfigState>, StoreError> {
        let json = self.read(|conn, c| sql::config_state(conn, c, task))?;
        self.parse_config_state(json)
    }

    fn save_worktree_config_state(
        &self,
        worktree: &Utf8Path,
        state: &ConfigState,
    ) -> Result<bool, StoreError> {
        let json = serde_json::to_string(state).map_err(|e| StoreError::Invalid {
            field: "configuration state",
            reason: e.to_string(),
        })?;
        let worktree = same_worktree(worktree);
        self.write(|conn, c| sql::save_worktree_config_state(conn, c, &worktree, &json, &now_iso()))
    }

    fn worktree_config_state(
        &self,
        worktree: &Utf8Path,
    ) -> Result<Option<ConfigState>, StoreError> {
        let worktree = same_worktree(worktree);
        let json = self.read(|conn, c| sql::worktree_config_state(conn, c, &worktree))?;
        self.parse_config_state(json)
    }

    fn task_for_worktree(&self, worktree: &Utf8Path) -> Result<Option<Task>, StoreError> {
        self.read(|conn, c| sql::task_for_worktree(conn, c, worktree))
    }

    fn tasks(&self, project_root: Option<&Utf8Path>) -> Result<Vec<Task>, StoreError> {
        self.read(|conn, c| sql::tasks(conn, c, project_root))
    }

    fn set_agent(&self, id: &TaskId, agent: &TaskAgent) -> Result<Task, StoreError> {
        agent.validate()?;
        self.write(|conn, c| {
            if !sql::set_agent(conn, c, id, agent, &now_iso())? {
                return Err(no_task(id));
            }
            sql::task(conn, c, id)?.ok_or_else(|| no_task(id))
        })
    }

    fn append_at(
        &self,
        task: &TaskId,
        at: &str,
        record: &Record,
    ) -> Result<TimelineEntry, StoreError> {
        check_timestamp("at", at)?;
        let record = &self.masked_record(record);
        record.validate()?;
        let seq = self.write(|conn, c| {
            if !sql::touch(conn, c, task, &now_iso())? {
                return Err(no_task(task));
            }
            let link = sql::insert_record(conn, c, record)?;
            sql::insert_entry(conn, c, task, at, &link)
        })?;
        Ok(TimelineEntry {
            seq,
            task: task.clone(),
            at: at.to_owned(),
            event: record.clone().into(),
        })
    }

    fn timeline(&self, task: &TaskId) -> Result<Vec<TimelineEntry>, StoreError> {
        self.read(|conn, c| {
            if sql::task(conn, c, task)?.is_none() {
                return Err(no_task(task));
            }
            sql::timeline(conn, c, task)
        })
    }

    fn record_handoff(
        &self,
        task: &TaskId,
        handoff: &NewHandoff,
    ) -> Result<HandoffRow, StoreError> {
        let handoff = &self.masked_handoff(handoff);
        handoff.validate()?;
        let now = now_iso();
        let row = HandoffRow {
            id: HandoffId::generate(),
            source: handoff.source.clone(),
            target: handoff.target.clone(),
            context: handoff.context.clone(),
            route: handoff.route,
            outcome: HandoffOutcome::Pending,
            started_at: now.clone(),
            finished_at: None,
        };
        self.write(|conn, c| {
            if !sql::touch(conn, c, task, &now)? {
                return Err(no_task(task));
            }
            sql::insert_handoff(conn, c, &row)?;
            sql::insert_entry(conn, c, task, &now, &Link::Handoff(&row.id))
        })?;
        Ok(row)
    }

    fn handoff(&self, id: &HandoffId) -> Result<HandoffRow, StoreError> {
        self.read(|conn, c| sql::handoff(conn, c, id))?
            .ok_or_else(|| no_handoff(id))
    }

    fn finish_handoff(
        &self,
        id: &HandoffId,
        outcome: &HandoffOutcome,
    ) -> Result<HandoffRow, StoreError> {
        let outcome = &match outcome {
            HandoffOutcome::NotStarted { reason } => HandoffOutcome::NotStarted {
                reason: self.masker.mask(reason).text.into_owned(),
            },
            other => other.clone(),
        };
        if *outcome == HandoffOutcome::Pending {
            return Err(StoreError::Invalid {
                field: "outcome",
                reason: "a handoff cannot be finished as pending".into(),
            });
        }
        self.write(|conn, c| {
            match sql::handoff_finished_at(conn, c, id)? {
                None => return Err(no_handoff(id)),
                Some(Some(finished_at)) => {
                    return Err(StoreError::AlreadyFinished {
                        id: id.clone(),
                        finished_at,
                    });
                }
                Some(None) => {}
            }
            sql::finish_handoff(conn, c, id, outcome, &now_iso())?;
            sql::handoff(conn, c, id)?.ok_or_else(|| no_handoff(id))
        })
    }

    fn add_handoff_details(
        &self,
        id: &HandoffId,
        details: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<HandoffRow, StoreError> {
        let mut details = serde_json::Value::Object(details.clone());
        self.masker.mask_json(&mut details);
        let details = details.as_object().cloned().unwrap_or_default();
        self.write(|conn, c| {
            let row = sql::handoff(conn, c, id)?.ok_or_else(|| no_handoff(id))?;
            let mut merged = row.context.details.unwrap_or_default();
            merged.extend(details.iter().map(|(k, v)| (k.clone(), v.clone())));
            sql::set_handoff_details(conn, c, id, &merged)?;
            sql::handoff(conn, c, id)?.ok_or_else(|| no_handoff(id))
        })
    }

    fn fork_task(&self, id: &TaskId, fork: &Fork) -> Result<Task, StoreError> {
        self.write(|conn, c| {
            let original = sql::task(conn, c, id)?.ok_or_else(|| no_task(id))?;
            fork.validate(&original)?;
            let now = now_iso();
            let task = Task {
                id: TaskId::generate(),
                project_root: original.project_root.clone(),
                worktree: fork.worktree.clone(),
                branch: fork.branch.clone(),
                agent: fork.agent.clone().unwrap_or(original.agent),
                parent: Some(original.id),
                created_at: now.clone(),
                updated_at: now.clone(),
            };
            sql::insert_task(conn, c, &task)?;
            let through = sql::last_seq(conn, c, id)?;
            sql::copy_timeline(conn, c, id, &task.id)?;
            sql::copy_config_state(conn, c, id, &task.id)?;
            let marker = Link::Forked { from: id, through };
            sql::insert_entry(conn, c, &task.id, &now, &marker)?;
            Ok(task)
        })
    }

    fn create_job(&self, job: &NewJob) -> Result<Job, StoreError> {
        let job = &jobs::masked(&self.masker, job);
        jobs::validate(job)?;
        self.write(|conn, c| {
            if sql::job(conn, c, &job.id)?.is_some() {
                return Err(StoreError::Invalid {
                    field: "id",
                    reason: format!("job '{}' is recorded already", job.id),
                });
            }
            sql::insert_job(conn, c, job)?;
            sql::job(conn, c, &job.id)?.ok_or_else(|| no_job(&job.id))
        })
    }

    fn set_job_supervisor(&self, id: &JobId, supervisor: ProcessRef) -> Result<(), StoreError> {
        self.write(|conn, c| {
            if sql::set_job_supervisor(conn, c, id, &supervisor)? {
                Ok(())
            } else {
                Err(no_job(id))
            }
        })
    }

    fn finish_job(
        &self,
        id: &JobId,
        exit_code: u8,
        result: Option<&str>,
    ) -> Result<Job, StoreError> {
        let result = result
            .map(|r| jobs::masked_result(&self.masker, r))
            .transpose()?;
        self.write(|conn, c| {
            // A job that finished already keeps its first end: nothing is changed then.
            sql::finish_job(conn, c, id, exit_code, result.as_deref(), &now_iso())?;
            sql::job(conn, c, id)?.ok_or_else(|| no_job(id))
        })
    }

    fn job(&self, id: &JobId) -> Result<Job, StoreError> {
        self.read(|conn, c| sql::job(conn, c, id))?
            .ok_or_else(|| no_job(id))
    }

    fn jobs(&self) -> Result<Vec<Job>, StoreError> {
        self.read(sql::jobs)
    }
}
