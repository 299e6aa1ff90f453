//! Background jobs on the command line: `--detach` on `run`, `advice`, `run-with-advice` and
//! `continue`, and `jobs`, `wait`, `result` and `cancel`. The jobs themselves are the
//! library's (`handoff_core::detach_job`, the task store); this prints.

use std::io::Write;
use std::time::Duration;

use camino::Utf8PathBuf;
use clap::Args;
use handoff_core::{Cancel, EXIT_STILL_RUNNING, Job, JobId, JobState, TaskStore, exit, printable};

/// How often `wait` reads the store.
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, Args)]
pub struct JobsArgs {
    /// Print one JSON object per line (`handoff.job.v1`) instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct JobArgs {
    /// The job's id (`job-…`), as `--detach` printed it.
    #[arg(value_name = "JOB")]
    pub id: String,
    /// `cancel` only: print the job as one JSON line.
    #[arg(long, hide = true)]
    pub json: bool,
}

/// Where detached jobs keep their private files: `jobs/` next to the task store.
fn jobs_dir(store: &handoff_store::SqliteStore) -> Utf8PathBuf {
    store.sibling_dir("jobs")
}

fn err(message: &str) -> u8 {
    let _ = writeln!(std::io::stderr(), "handoff: {}", printable(message, true));
    exit::USAGE
}

fn store() -> Result<handoff_store::SqliteStore, u8> {
    crate::open_store().map_err(|e| err(&e))
}

fn job_id(text: &str) -> Result<JobId, u8> {
    JobId::parse(text).ok_or_else(|| {
        err(&format!(
            "{:?} is not a job id (job-<uuid>, as `--detach` printed it)",
            printable(text, false)
        ))
    })
}

/// The object `--json` prints for a job (`handoff.job.v1`; its result: `handoff result`).
fn job_json(job: &Job) -> String {
    serde_json::to_string(&handoff_core::JobReport::from(job)).unwrap_or_default()
}

/// `--detach`: records the job and starts its supervisor; prints its id (or `--json`, a
/// small object) and returns 0 at once. `args` is the command line after the verb, `--detach`
/// left out; `stdin` what `-` stood for.
pub fn detach(verb: &str, args: Vec<String>, stdin: Option<Vec<u8>>, json: bool) -> u8 {
    if std::env::var_os(handoff_core::CONTEXT_ENV).is_some_and(|v| !v.is_empty()) {
        return refuse_inside_worker();
    }
    let store = match store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let exe = match std::env::current_exe()
        .ok()
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
    {
        Some(p) => p,
        None => return err("cannot start the job: the path of this handoff binary is unknown"),
    };
    let masker = handoff_core::Masker::new(crate::known_secrets());
    let masked = args
        .iter()
        .map(|a| masker.mask(a).text.into_owned())
        .collect();
    let dir = jobs_dir(&store);
    match handoff_core::detach_job(&store, &exe, &dir, verb, args, masked, stdin) {
        Ok(started) => {
            let id = started.job.id.as_str();
            let mut out = std::io::stdout().lock();
            let _ = if json {
                writeln!(out, "{}", job_json(&started.job))
            } else {
                writeln!(
                    out,
                    "{id} started in the background: `handoff wait {id}`, `handoff result {id}`, `handoff cancel {id}`"
                )
            };
            exit::OK
        }
        Err(e) => err(&e.to_string()),
    }
}

/// A worker's nested request may not outlive the run that asked it.
pub fn refuse_inside_worker() -> u8 {
    err(
        "--detach is not accepted inside a worker: nested advice is answered while its worker waits",
    )
}

/// `handoff __job <id> <jobs dir>`: the supervisor of a detached job.
pub async fn supervise(id: &str, dir: &str) -> u8 {
    let (Some(id), Ok(store), Ok(exe)) = (
        JobId::parse(id),
        crate::open_store(),
        std::env::current_exe(),
    ) else {
        return exit::USAGE;
    };
    let Ok(exe) = Utf8PathBuf::from_path_buf(exe) else {
        return exit::USAGE;
    };
    handoff_core::supervise_job(&store, &exe, &id, camino::Utf8Path::new(dir))
        .await
        .unwrap_or(exit::PROVIDER_FAILED)
}

/// `handoff jobs`: this user's jobs, running first.
pub fn list(args: JobsArgs) -> u8 {
    let store = match store() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let jobs = match handoff_core::list_jobs(&store) {
        Ok(j) => j,
        Err(e) => return err(&e.to_string()),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        for job in &jobs {
            let _ = writeln!(out, "{}", job_json(job));
        }
        return exit::OK;
    }
    if jobs.is_empty() {
        let _ = writeln!(out, "no jobs");
        return exit::OK;
    }
    for job in &jobs {
        let what = [
            Some(job.verb.as_str()),
            job.target.as_deref(),
            job.mode.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
        let state = match (job.state, job.exit_code) {
            (JobState::Finished, Some(code)) => format!("finished (exit {code})"),
            (state, _) => state.as_str().to_owned(),
        };
        let _ = writeln!(
            out,
            "{}  {state:<18} {}  {}  {}",
            job.id,
            printable(&what, false),
            job.started_at,
            printable(job.cwd.as_deref().unwrap_or("-"), false),
        );
    }
    exit::OK
}

/// The line for a job that did not finish, and its exit code.
fn unfinished(job: &Job) -> u8 {
    match job.state {
        JobState::Lost => {
            let _ = writeln!(
                std::io::stderr(),
                "handoff: job {} was lost: its supervisor ended without recording how the job ended",
                job.id
            );
            exit::PROVIDER_FAILED
        }
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "handoff: job {} is still running (`handoff wait {}`)",
                job.id,
                job.id
            );
            EXIT_STILL_RUNNING
        }
    }
}

/// Prints a finished job's result line (if it printed one) and returns its exit code.
fn print_result(job: &Job) -> u8 {
    if let Some(line) = &job.result {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
    }
    job.exit_code.unwrap_or(exit::PROVIDER_FAILED)
}

/// `handoff result <id>`: the job's result JSON and exit code; exit 4 while it still runs.
pub fn result(args: JobArgs) -> u8 {
    let (store, id) = match (store(), job_id(&args.id)) {
        (Ok(s), Ok(id)) => (s, id),
        (Err(c), _) | (_, Err(c)) => return c,
    };
    match store.job(&id).map(Job::judged) {
        Ok(job) if job.state == JobState::Finished => print_result(&job),
        Ok(job) => unfinished(&job),
        Err(e) => err(&e.to_string()),
    }
}

/// `handoff wait <id>`: blocks until the job ends, then prints its result and exits with its
/// exit code.
pub async fn wait(args: JobArgs) -> u8 {
    let (store, id) = match (store(), job_id(&args.id)) {
        (Ok(s), Ok(id)) => (s, id),
        (Err(c), _) | (_, Err(c)) => return c,
    };
    let cancel = crate::cancel_on_signals();
    match handoff_core::wait_job(&store, &id, POLL, &cancel).await {
        Ok(Some(job)) if job.state == JobState::Finished => print_result(&job),
        Ok(Some(job)) => unfinished(&job),
        // Interrupted: the job goes on.
        Ok(None) => exit::CANCELLED,
        Err(e) => err(&e.to_string()),
    }
}

/// `handoff cancel <id>`: stops the job as SIGTERM stops a run (it records exit 9).
pub fn cancel(args: JobArgs) -> u8 {
    let (store, id) = match (store(), job_id(&args.id)) {
        (Ok(s), Ok(id)) => (s, id),
        (Err(c), _) | (_, Err(c)) => return c,
    };
    let mut out = std::io::stdout().lock();
    match handoff_core::cancel_job(&store, &id) {
        Ok(Cancel::Signalled(job)) => {
            let _ = writeln!(
                out,
                "{} is being stopped; `handoff wait {}` returns when it has",
                job.id, job.id
            );
            exit::OK
        }
        Ok(Cancel::Finished(job)) => {
            let _ = writeln!(
                out,
                "{} had finished already (exit {})",
                job.id,
                job.exit_code.map_or("?".into(), |c| c.to_string())
            );
            exit::OK
        }
        Ok(Cancel::Lost(job)) => unfinished(&job),
        Err(e) => err(&e.to_string()),
    }
}

/// The store the MCP server records its jobs in, when it can be opened.
pub fn mcp_store() -> Option<std::sync::Arc<dyn TaskStore>> {
    crate::open_store()
        .ok()
        .map(|s| std::sync::Arc::new(s) as std::sync::Arc<dyn TaskStore>)
}

/// The command line after the verb, without `--detach` and `--json` (the job's own run
/// prints its result; those two only shape what starting it prints).
pub fn after_verb(args: &[String]) -> Vec<String> {
    args.iter()
        .skip(2)
        .filter(|a| *a != "--detach" && *a != "--json")
        .cloned()
        .collect()
}

/// Whether a command line reads its note from standard input (`--note-file -`).
pub fn note_from_stdin(args: &[String]) -> bool {
    args.windows(2)
        .any(|w| w[0] == "--note-file" && w[1] == "-")
        || args.iter().any(|a| a == "--note-file=-")
}

/// `run`, `advice` or `run-with-advice` with `--detach`: a request validation refuses is
/// refused now, in the foreground, with its `rejected` result (exit 5), as any run is; a valid
/// one becomes a job. What only the run can tell (the worktree held by another run, an agent
/// that is not installed) is the job's result.
pub async fn detached(
    verb: handoff_core::Verb,
    input: handoff_core::RunInput,
    args: &[String],
    quorum: Option<&str>,
    json: bool,
) -> u8 {
    if !crate::panel::wanted(&input, quorum) {
        let config = match crate::load_config() {
            Ok(c) => c,
            Err(message) => return crate::rejected_early(input, message).await,
        };
        let registry = handoff_adapters::default_registry();
        if input.validate_with(&registry, &config.config).is_err() {
            return crate::run_delegation(input, true, None).await;
        }
    }
    let stdin = match &input.instructions {
        Some(handoff_core::Instructions::Stdin(bytes)) => Some(bytes.clone()),
        _ => None,
    };
    detach(verb.as_str(), after_verb(args), stdin, json)
}
