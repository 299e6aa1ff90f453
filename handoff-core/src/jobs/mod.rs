//! Background jobs: a `run`, `advice`, `run-with-advice` or `continue` started with `--detach`
//! runs under a supervisor of its own (a `handoff` process in a new session) and is kept in the
//! task store: who started it, its command line, the supervisor's identity, and, once it ends,
//! its exit code and result. A job whose supervisor is gone while the store still says
//! `running` is reported `lost`, never running forever. The MCP server's jobs are kept there
//! too while they run (they die with the server, by design).

mod detach;

use std::time::{Duration, SystemTime};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use self::detach::{DetachError, Detached, JOB_VERB, detach_job, flag_value, supervise_job};

pub use crate::task::JobId;

/// Exit code of `handoff result` for a job that is still running (no other command uses it).
pub const EXIT_STILL_RUNNING: u8 = 4;

/// How long a job may have no supervisor recorded before it counts as lost (the process that
/// started it records the supervisor right after starting it).
pub const SUPERVISOR_GRACE: Duration = Duration::from_secs(30);

/// Who runs a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum JobOrigin {
    /// `--detach` on the command line: a supervisor of its own, in a new session.
    Cli,
    /// The MCP server: the job dies with the server.
    Mcp,
}

impl JobOrigin {
    /// `cli` or `mcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobOrigin::Cli => "cli",
            JobOrigin::Mcp => "mcp",
        }
    }

    /// From [`JobOrigin::as_str`].
    pub fn parse(s: &str) -> Option<JobOrigin> {
        match s {
            "cli" => Some(JobOrigin::Cli),
            "mcp" => Some(JobOrigin::Mcp),
            _ => None,
        }
    }
}

/// Where a job is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum JobState {
    /// Its supervisor is alive and it has not ended.
    Running,
    /// It ended: its exit code (and, for runs, its result) are recorded.
    Finished,
    /// Its supervisor is gone without recording an end: how it ended cannot be known.
    Lost,
}

impl JobState {
    /// `running`, `finished` or `lost`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Finished => "finished",
            JobState::Lost => "lost",
        }
    }
}

/// A process, told apart from a later one that reuses its pid by its start time (clock ticks
/// since boot, `/proc/<pid>/stat` field 22; 0 where there is no `/proc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProcessRef {
    /// Its pid.
    pub pid: u32,
    /// Its start time.
    pub start_time: u64,
}

impl ProcessRef {
    /// This process.
    pub fn current() -> ProcessRef {
        ProcessRef::of(std::process::id()).unwrap_or(ProcessRef {
            pid: std::process::id(),
            start_time: 0,
        })
    }

    /// The running process `pid`, when there is one.
    pub fn of(pid: u32) -> Option<ProcessRef> {
        if crate::platform::PROC_FS {
            let stat = crate::reaper::tree::read(&pid.to_string())?;
            (stat.state != 'Z').then_some(ProcessRef {
                pid,
                start_time: stat.start_time,
            })
        } else {
            alive(pid).then_some(ProcessRef { pid, start_time: 0 })
        }
    }

    /// Whether this very process still runs (not a zombie, not a later process with its pid).
    pub fn is_alive(&self) -> bool {
        ProcessRef::of(self.pid).is_some_and(|now| now.start_time == self.start_time)
    }
}

/// The parent of `pid`, as `/proc` shows it now; `None` without one (or without `/proc`).
pub fn parent_pid(pid: u32) -> Option<u32> {
    crate::reaper::tree::read(&pid.to_string())
        .map(|p| p.ppid)
        .filter(|ppid| *ppid != 0 && *ppid != pid)
}

/// Whether `pid` is `ancestor` or one of its descendants, as `/proc` shows now.
pub fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut current = pid;
    for _ in 0..4096 {
        if current == ancestor {
            return true;
        }
        match parent_pid(current) {
            Some(parent) => current = parent,
            None => return false,
        }
    }
    false
}

fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// A job to record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewJob {
    /// Its id.
    pub id: JobId,
    /// Who runs it.
    pub origin: JobOrigin,
    /// `run`, `advice`, `run-with-advice` or `continue`.
    pub verb: String,
    /// Its command line after the verb, secrets masked (instructions are passed as a file).
    pub args: Vec<String>,
    /// The `--cwd` it names, when it names one.
    pub cwd: Option<String>,
    /// The `--harness` (or `continue`'s destination) it names, when it names one.
    pub target: Option<String>,
    /// The `--mode`, for runs.
    pub mode: Option<String>,
    /// When it was started (ISO-8601 UTC).
    pub started_at: String,
    /// Its supervisor, when known at once (the MCP server itself).
    pub supervisor: Option<ProcessRef>,
}

/// A job as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// Who runs it.
    pub origin: JobOrigin,
    /// `run`, `advice`, `run-with-advice` or `continue`.
    pub verb: String,
    /// Its command line after the verb, secrets masked.
    pub args: Vec<String>,
    /// The `--cwd` it names.
    pub cwd: Option<String>,
    /// The agent (or destination) it names.
    pub target: Option<String>,
    /// The `--mode` of a run.
    pub mode: Option<String>,
    /// Where it is: `running` or `finished` as recorded, `lost` when its supervisor is gone
    /// (see [`Job::judged`]).
    pub state: JobState,
    /// When it was started.
    pub started_at: String,
    /// When it ended; null while it runs or when it was lost.
    pub finished_at: Option<String>,
    /// Its supervisor, once recorded.
    pub supervisor: Option<ProcessRef>,
    /// handoff's exit code for it, once it ended.
    pub exit_code: Option<u8>,
    /// The result it printed (one JSON line: `handoff.result.v1`, `handoff.panel.v1` or
    /// `handoff.continue.v1`), once it ended; null when it printed none.
    pub result: Option<String>,
}

impl Job {
    /// The job with its state judged now: a `running` job whose supervisor is gone (or was
    /// never recorded within [`SUPERVISOR_GRACE`]) is `lost`.
    pub fn judged(mut self) -> Job {
        if self.state != JobState::Running {
            return self;
        }
        let gone = match &self.supervisor {
            Some(p) => !p.is_alive(),
            None => crate::timestamp::parse_iso(&self.started_at)
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_none_or(|age| age > SUPERVISOR_GRACE),
        };
        if gone {
            self.state = JobState::Lost;
        }
        self
    }
}

/// Schema version of [`JobReport`].
pub const JOB_SCHEMA: &str = "handoff.job.v1";

/// A job as `--detach --json` and `handoff jobs --json` print it: everything but its result
/// (`handoff result` prints that) and its command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobReport {
    /// Always [`JOB_SCHEMA`].
    pub schema_version: String,
    /// The job's id.
    pub id: JobId,
    /// `running`, `finished` or `lost`, judged when printed.
    pub state: JobState,
    /// `cli` (`--detach`) or `mcp`.
    pub origin: JobOrigin,
    /// `run`, `advice`, `run-with-advice` or `continue`.
    pub verb: String,
    /// The agent (or destination) it names.
    pub target: Option<String>,
    /// The `--mode` of a run.
    pub mode: Option<String>,
    /// The `--cwd` it names.
    pub cwd: Option<String>,
    /// When it was started.
    pub started_at: String,
    /// When it ended.
    pub finished_at: Option<String>,
    /// handoff's exit code for it, once it ended.
    pub exit_code: Option<u8>,
    /// The pid of its supervisor, once recorded.
    pub supervisor_pid: Option<u32>,
}

impl From<&Job> for JobReport {
    fn from(job: &Job) -> JobReport {
        JobReport {
            schema_version: JOB_SCHEMA.into(),
            id: job.id.clone(),
            state: job.state,
            origin: job.origin,
            verb: job.verb.clone(),
            target: job.target.clone(),
            mode: job.mode.clone(),
            cwd: job.cwd.clone(),
            started_at: job.started_at.clone(),
            finished_at: job.finished_at.clone(),
            exit_code: job.exit_code,
            supervisor_pid: job.supervisor.map(|p| p.pid),
        }
    }
}

/// What `cancel` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancel {
    /// SIGTERM was sent to the job's process; it stops its agent and records exit 9.
    Signalled(Job),
    /// The job had ended already.
    Finished(Job),
    /// The job's supervisor is gone: there is nothing left to stop.
    Lost(Job),
}

/// Stops a running job as SIGTERM stops a foreground run: the signal goes to its supervisor
/// (a detached job's `handoff __job`, an MCP job's own `handoff` process), checked to be that
/// very process.
pub fn cancel_job(store: &dyn crate::TaskStore, id: &JobId) -> Result<Cancel, crate::StoreError> {
    let job = store.job(id)?.judged();
    Ok(match job.state {
        JobState::Finished => Cancel::Finished(job),
        JobState::Lost => Cancel::Lost(job),
        JobState::Running => match job.supervisor {
            Some(p) if p.is_alive() => {
                let sent = i32::try_from(p.pid).is_ok_and(|pid| {
                    nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGTERM,
                    )
                    .is_ok()
                });
                if sent {
                    Cancel::Signalled(job)
                } else {
                    Cancel::Lost(job)
                }
            }
            // Started a moment ago, its supervisor not recorded yet: nothing to signal.
            _ => Cancel::Lost(job),
        },
    })
}

/// Waits until a job is no longer running (finished, or lost), reading the store every
/// `poll`; `None` when `cancel` turned true first.
pub async fn wait_job(
    store: &dyn crate::TaskStore,
    id: &JobId,
    poll: Duration,
    cancel: &tokio::sync::watch::Receiver<bool>,
) -> Result<Option<Job>, crate::StoreError> {
    loop {
        let job = store.job(id)?.judged();
        if job.state != JobState::Running {
            return Ok(Some(job));
        }
        if *cancel.borrow() {
            return Ok(None);
        }
        tokio::time::sleep(poll).await;
    }
}

/// Jobs as `handoff jobs` lists them: judged now, running first, then newest first.
pub fn list_jobs(store: &dyn crate::TaskStore) -> Result<Vec<Job>, crate::StoreError> {
    let mut jobs: Vec<Job> = store.jobs()?.into_iter().map(Job::judged).collect();
    jobs.sort_by(|a, b| {
        (a.state != JobState::Running)
            .cmp(&(b.state != JobState::Running))
            .then_with(|| b.started_at.cmp(&a.started_at))
    });
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(supervisor: Option<ProcessRef>, started_at: String) -> Job {
        Job {
            id: JobId::generate(),
            origin: JobOrigin::Cli,
            verb: "run".into(),
            args: vec![],
            cwd: None,
            target: None,
            mode: None,
            state: JobState::Running,
            started_at,
            finished_at: None,
            supervisor,
            exit_code: None,
            result: None,
        }
    }

    #[test]
    fn a_job_is_lost_when_its_supervisor_is_gone_or_never_came() {
        let now = crate::now_iso();
        assert_eq!(
            job(Some(ProcessRef::current()), now.clone()).judged().state,
            JobState::Running
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let gone = ProcessRef { pid, start_time: 1 };
        assert_eq!(job(Some(gone), now.clone()).judged().state, JobState::Lost);
        // Another process under the same pid is not the supervisor.
        let reused = ProcessRef {
            start_time: ProcessRef::current().start_time + 1,
            ..ProcessRef::current()
        };
        if crate::platform::PROC_FS {
            assert_eq!(
                job(Some(reused), now.clone()).judged().state,
                JobState::Lost
            );
        }
        assert_eq!(job(None, now).judged().state, JobState::Running);
        assert_eq!(
            job(None, "2020-01-01T00:00:00.000Z".into()).judged().state,
            JobState::Lost
        );
        assert!(JobId::parse(JobId::generate().as_str()).is_some());
    }
}
