//! Background jobs: recording one, its supervisor and its end, and reading them back. Only
//! `running` and `finished` are stored; `lost` is judged when read ([`handoff_core::Job::judged`]).

use rusqlite::{Connection, Row, params};

use handoff_core::{Job, JobId, JobOrigin, JobState, NewJob, ProcessRef, StoreError};

use super::{Ctx, execute, get, query_all, query_one, signed, unsigned};

macro_rules! job_columns {
    () => {
        "id, origin, verb, args, cwd, target, mode, state, started_at, finished_at, \
         supervisor_pid, supervisor_start_time, exit_code, result"
    };
}

const INSERT_JOB: &str = concat!(
    "INSERT INTO jobs (",
    job_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
);
const SELECT_JOB: &str = concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = ?1");
const SELECT_JOBS: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs ORDER BY started_at DESC, id DESC"
);
const SET_JOB_SUPERVISOR: &str =
    "UPDATE jobs SET supervisor_pid = ?2, supervisor_start_time = ?3 WHERE id = ?1";
// The first end wins: a job that finished already is left as it is.
const FINISH_JOB: &str = "UPDATE jobs SET state = 'finished', exit_code = ?2, result = ?3, \
     finished_at = ?4 WHERE id = ?1 AND state = 'running'";

fn job_id(c: &Ctx, s: String) -> Result<JobId, StoreError> {
    JobId::parse(&s).ok_or_else(|| c.corrupt("jobs.id", format!("'{s}' is not a job id")))
}

/// The stored states: `lost` is never stored.
fn job_state(c: &Ctx, s: &str) -> Result<JobState, StoreError> {
    match s {
        "running" => Ok(JobState::Running),
        "finished" => Ok(JobState::Finished),
        other => Err(c.corrupt("jobs.state", format!("unknown state '{other}'"))),
    }
}

fn supervisor_columns(p: &ProcessRef) -> Result<(i64, i64), StoreError> {
    Ok((i64::from(p.pid), signed(p.start_time)?))
}

fn job_row(row: &Row<'_>, c: &Ctx) -> Result<Job, StoreError> {
    let origin: String = get(row, "origin", c)?;
    let args: String = get(row, "args", c)?;
    let state: String = get(row, "state", c)?;
    let pid: Option<i64> = get(row, "supervisor_pid", c)?;
    let start_time: Option<i64> = get(row, "supervisor_start_time", c)?;
    let supervisor = match (pid, start_time) {
        (None, None) => None,
        (Some(pid), Some(start_time)) => Some(ProcessRef {
            pid: u32::try_from(pid)
                .map_err(|_| c.corrupt("jobs.supervisor_pid", format!("{pid} is not a pid")))?,
            start_time: unsigned(c, "jobs.supervisor_start_time", start_time)?,
        }),
        _ => {
            return Err(c.corrupt(
                "jobs.supervisor_pid",
                "a supervisor's pid and start time are recorded together",
            ));
        }
    };
    Ok(Job {
        id: job_id(c, get(row, "id", c)?)?,
        origin: JobOrigin::parse(&origin)
            .ok_or_else(|| c.corrupt("jobs.origin", format!("unknown origin '{origin}'")))?,
        verb: get(row, "verb", c)?,
        args: serde_json::from_str(&args).map_err(|e| c.corrupt("jobs.args", e))?,
        cwd: get(row, "cwd", c)?,
        target: get(row, "target", c)?,
        mode: get(row, "mode", c)?,
        state: job_state(c, &state)?,
        started_at: get(row, "started_at", c)?,
        finished_at: get(row, "finished_at", c)?,
        supervisor,
        exit_code: get(row, "exit_code", c)?,
        result: get(row, "result", c)?,
    })
}

/// Records a job, `running`, as given (checked and masked already).
pub(crate) fn insert_job(conn: &Connection, c: &Ctx, job: &NewJob) -> Result<(), StoreError> {
    let args = serde_json::to_string(&job.args).map_err(|e| StoreError::Invalid {
        field: "args",
        reason: e.to_string(),
    })?;
    let supervisor = job
        .supervisor
        .as_ref()
        .map(supervisor_columns)
        .transpose()?;
    execute(
        conn,
        c,
        INSERT_JOB,
        params![
            job.id.as_str(),
            job.origin.as_str(),
            job.verb,
            args,
            job.cwd,
            job.target,
            job.mode,
            JobState::Running.as_str(),
            job.started_at,
            None::<String>,
            supervisor.map(|s| s.0),
            supervisor.map(|s| s.1),
            None::<i64>,
            None::<String>,
        ],
    )?;
    Ok(())
}

/// Records the job's supervisor; whether the job exists.
pub(crate) fn set_job_supervisor(
    conn: &Connection,
    c: &Ctx,
    id: &JobId,
    supervisor: &ProcessRef,
) -> Result<bool, StoreError> {
    let (pid, start_time) = supervisor_columns(supervisor)?;
    let n = execute(
        conn,
        c,
        SET_JOB_SUPERVISOR,
        params![id.as_str(), pid, start_time],
    )?;
    Ok(n == 1)
}

/// Records the end of a job that is still running; whether it was (a job that finished
/// already keeps its first end).
pub(crate) fn finish_job(
    conn: &Connection,
    c: &Ctx,
    id: &JobId,
    exit_code: u8,
    result: Option<&str>,
    now: &str,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        c,
        FINISH_JOB,
        params![id.as_str(), exit_code, result, now],
    )?;
    Ok(n == 1)
}

/// The job with this id, as stored.
pub(crate) fn job(conn: &Connection, c: &Ctx, id: &JobId) -> Result<Option<Job>, StoreError> {
    query_one(conn, c, SELECT_JOB, [id.as_str()], |r| job_row(r, c))
}

/// Every job, newest first (by start time, then id).
pub(crate) fn jobs(conn: &Connection, c: &Ctx) -> Result<Vec<Job>, StoreError> {
    query_all(conn, c, SELECT_JOBS, [], |r| job_row(r, c))
}
