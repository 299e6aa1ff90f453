//! `handoff mcp`: the Model Context Protocol over stdin/stdout.
//!
//! Every tool runs this same `handoff` binary as a child process with the CLI's own flags, so
//! validation, leases, exit codes and the result JSON are exactly the command line's: the
//! server only maps tool inputs to flags and the child's stdout line and exit code back to a
//! tool result (`isError` when the exit code is not 0).
//!
//! Agent runs outlast the tool-call timeouts of most hosts, so besides the synchronous tools
//! (`handoff_run`, `handoff_advice`, `handoff_continue`, `handoff_capabilities`) a run can be
//! started in the background (`handoff_start`) and followed with `handoff_status`,
//! `handoff_result` and `handoff_cancel`. Jobs live in memory for the server's life; when stdin
//! closes (or the server gets SIGINT/SIGTERM) every running job gets SIGTERM — the CLI then
//! stops its agent and reports `cancelled` — and is killed if it is still there after a grace
//! period, so no process outlives the server.
//!
//! Instructions or a note given inline are written to a new 0600 file in a private 0700
//! directory in handoff's private work directory (never in the repository, nor under `$TMPDIR`
//! or `/tmp`, where a sandboxed agent may write), passed by path, and removed when the job
//! ends.

mod inputs;
mod jobs;

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde_json::{Value, json};

use inputs::{
    AdviceInput, ContinueInput, JobInput, ResultInput, RunInput, StartInput, StatusInput,
};
use jobs::{Finished, Job, Jobs, Launch};

/// How often a long call reports progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// The longest `handoff_result` waits for a job.
const MAX_WAIT_SECS: u64 = 600;
/// How long `handoff_cancel` waits for the job to stop before it answers.
const CANCEL_WAIT: Duration = Duration::from_secs(15);
/// Exit code of a request refused before anything ran (the CLI's).
const REJECTED: i32 = handoff_core::exit::USAGE as i32;

// -------------------------------------------------------------------------------------------
// The server
// -------------------------------------------------------------------------------------------

/// The MCP server: the `handoff` executable it runs and the jobs it started.
#[derive(Clone)]
pub struct Server {
    jobs: Arc<Jobs>,
}

#[tool_router]
impl Server {
    /// Runs `handoff run` (or `run-with-advice`) to completion.
    #[tool(
        name = "handoff_run",
        description = "Hand a bounded task (mode build, phase, review or verify) to another agent \
            CLI and wait for its verified result: runs `handoff run` (`handoff run-with-advice` \
            with withAdvice). Returns the result JSON (handoff.result.v1) and the exit code; \
            isError when the exit code is not 0. Runs can take many minutes: for long tasks use \
            handoff_start."
    )]
    async fn handoff_run(
        &self,
        Parameters(input): Parameters<RunInput>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.run_to_end(input.launch(), &context).await)
    }

    /// Runs `handoff advice` to completion.
    #[tool(
        name = "handoff_advice",
        description = "Ask another agent CLI for a read-only answer (no mode) and wait for it: \
            runs `handoff advice`. Returns the result JSON (handoff.result.v1) and the exit \
            code; isError when the exit code is not 0.",
        annotations(read_only_hint = true)
    )]
    async fn handoff_advice(
        &self,
        Parameters(input): Parameters<AdviceInput>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.run_to_end(input.launch(), &context).await)
    }

    /// Runs `handoff continue` to completion.
    #[tool(
        name = "handoff_continue",
        description = "Hand the task itself to another agent: checkpoint, write the verified \
            note outside the repository, start the receiver in a session it keeps (runs \
            `handoff continue`). Returns the handoff.continue.v1 JSON and the exit code (0 \
            started or dry run, 1 not started, 5 rejected, 9 cancelled, 10 a review receiver \
            changed the worktree); isError when it is not 0."
    )]
    async fn handoff_continue(
        &self,
        Parameters(input): Parameters<ContinueInput>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(self.run_to_end(input.launch(), &context).await)
    }

    /// Runs `handoff capabilities --json`.
    #[tool(
        name = "handoff_capabilities",
        description = "Every agent CLI's controls (models, efforts, modes, grants) and whether it \
            is installed and passes preflight; no model call. Runs `handoff capabilities --json`.",
        annotations(read_only_hint = true)
    )]
    async fn handoff_capabilities(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut launch = Launch::new("capabilities");
        launch.args.push("--json".into());
        Ok(self.run_to_end(Ok(launch), &context).await)
    }

    /// Starts a job in the background.
    #[tool(
        name = "handoff_start",
        description = "Start a run, an advice or a continue in the background and return its \
            jobId at once (give exactly one of run, advice, continue, each with the arguments \
            of handoff_run, handoff_advice, handoff_continue). Follow it with handoff_status, \
            handoff_result and handoff_cancel. Jobs last as long as this server."
    )]
    async fn handoff_start(
        &self,
        Parameters(input): Parameters<StartInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let launch = match input.launch() {
            Ok(l) => l,
            Err(message) => return Ok(refused(&message)),
        };
        match self.jobs.start(launch) {
            Ok(job) => {
                let status = job.status();
                Ok(structured(
                    format!(
                        "started job {} (handoff {}, pid {}); poll handoff_status or handoff_result",
                        job.id,
                        job.verb,
                        job.pid.map_or("?".into(), |p| p.to_string())
                    ),
                    status,
                    false,
                ))
            }
            Err(message) => Ok(failed_to_start(&message)),
        }
    }

    /// Reports a job's state.
    #[tool(
        name = "handoff_status",
        description = "The state of a job started by handoff_start (running, finished or \
            cancelled), its elapsed time, pid, and once it ended its exit code and status; \
            every job of this server when jobId is left out.",
        annotations(read_only_hint = true)
    )]
    async fn handoff_status(
        &self,
        Parameters(input): Parameters<StatusInput>,
    ) -> Result<CallToolResult, ErrorData> {
        match input.job_id {
            Some(id) => match self.jobs.get(&id) {
                Some(job) => {
                    let status = job.status();
                    Ok(structured(status.to_string(), status, false))
                }
                None => Ok(unknown_job(&id)),
            },
            None => {
                let all: Vec<Value> = self.jobs.all().iter().map(|j| j.status()).collect();
                let value = json!({ "jobs": all });
                Ok(structured(value.to_string(), value, false))
            }
        }
    }

    /// Returns a job's final result, optionally waiting for it.
    #[tool(
        name = "handoff_result",
        description = "The final result of a job started by handoff_start: the command's JSON \
            line and exit code (isError when it is not 0), exactly as the synchronous tool would \
            have returned it. While the job runs it says so (state running); waitSeconds (at \
            most 600) waits for the end first.",
        annotations(read_only_hint = true)
    )]
    async fn handoff_result(
        &self,
        Parameters(input): Parameters<ResultInput>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(job) = self.jobs.get(&input.job_id) else {
            return Ok(unknown_job(&input.job_id));
        };
        let wait = Duration::from_secs(input.wait_seconds.unwrap_or(0).min(MAX_WAIT_SECS));
        let finished = if wait.is_zero() {
            job.finished()
        } else {
            tokio::time::timeout(wait, follow(&job, &context, false))
                .await
                .ok()
                .flatten()
        };
        Ok(match finished {
            Some(f) => cli_result(&job, &f),
            None => {
                let status = job.status();
                structured(
                    format!(
                        "job {} is still running ({} s); call handoff_result again, with \
                         waitSeconds to wait for it",
                        job.id,
                        job.elapsed().as_secs()
                    ),
                    status,
                    false,
                )
            }
        })
    }

    /// Cancels a job.
    #[tool(
        name = "handoff_cancel",
        description = "Stop a job started by handoff_start: SIGTERM to its handoff process, \
            which stops the agent and reports status cancelled (exit 9; a continue reports \
            exit 9 too). Waits up to 15 s for it to end and returns its state; \
            handoff_result then has the final JSON."
    )]
    async fn handoff_cancel(
        &self,
        Parameters(input): Parameters<JobInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(job) = self.jobs.get(&input.job_id) else {
            return Ok(unknown_job(&input.job_id));
        };
        if job.finished().is_none() {
            job.terminate();
            let _ = tokio::time::timeout(CANCEL_WAIT, job.wait()).await;
        }
        let status = job.status();
        Ok(structured(status.to_string(), status, false))
    }
}

#[tool_handler(
    name = "handoff",
    instructions = "handoff delegates bounded coding tasks to other agent CLIs (codex, claude, grok, kiro, opencode, cursor, copilot, gemini, qwen), asks them for read-only advice, and hands whole tasks over. Every tool runs the `handoff` command; its result is the command's JSON line plus its exit code (only exit 0 with status \"succeeded\" is success). Agent runs can take many minutes: prefer handoff_start, then poll handoff_status / handoff_result (with waitSeconds), and handoff_cancel to stop a job."
)]
impl ServerHandler for Server {}

impl Server {
    /// Starts `launch` as a job and waits for it, reporting progress and stopping the job when
    /// the client cancels the call.
    async fn run_to_end(
        &self,
        launch: Result<Launch, String>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let launch = match launch {
            Ok(l) => l,
            Err(message) => return refused(&message),
        };
        let job = match self.jobs.start(launch) {
            Ok(job) => job,
            Err(message) => return failed_to_start(&message),
        };
        let finished = match follow(&job, context, true).await {
            Some(f) => f,
            None => job.wait().await,
        };
        cli_result(&job, &finished)
    }
}

/// Waits for `job`, sending "running, N s" progress notifications when the client asked for
/// progress. When the client cancels the request, a job the request owns is stopped (and
/// still waited for); otherwise the wait ends with `None`.
async fn follow(
    job: &Arc<Job>,
    context: &RequestContext<RoleServer>,
    owns_job: bool,
) -> Option<Arc<Finished>> {
    let token = context.meta.get_progress_token();
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    let mut cancelled = false;
    loop {
        tokio::select! {
            finished = job.wait() => return Some(finished),
            _ = context.ct.cancelled(), if !cancelled => {
                if !owns_job {
                    return None;
                }
                cancelled = true;
                job.terminate();
            }
            _ = ticks.tick() => {
                if let Some(token) = &token {
                    let secs = job.elapsed().as_secs();
                    let _ = context
                        .peer
                        .notify_progress(
                            ProgressNotificationParam::new(token.clone(), secs as f64)
                                .with_message(format!("handoff {}: running, {secs} s", job.verb)),
                        )
                        .await;
                }
            }
        }
    }
}

/// The tool result of a finished CLI run: its stdout JSON line as text, the exit code and the
/// CLI's one-line message, and the same as structured content.
fn cli_result(job: &Job, finished: &Finished) -> CallToolResult {
    let stdout = finished.stdout.trim_end();
    let parsed: Option<Value> = serde_json::from_str(stdout).ok();
    let message = finished.message();
    let code = finished
        .exit_code
        .map_or("none".to_owned(), |c| c.to_string());
    let mut content = Vec::new();
    if !stdout.is_empty() {
        content.push(ContentBlock::text(stdout));
    }
    content.push(ContentBlock::text(match &message {
        Some(m) => format!("exit {code}: {m}"),
        None => format!("exit {code}"),
    }));
    let mut result = if finished.exit_code == Some(0) {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = Some(json!({
        "jobId": job.id,
        "exitCode": finished.exit_code,
        "message": message,
        "result": parsed,
    }));
    result
}

/// A request refused by the server itself before any process started, shaped like the CLI's
/// rejections (exit 5).
fn refused(message: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "exit {REJECTED}: {message}"
    ))]);
    result.structured_content = Some(json!({
        "jobId": null,
        "exitCode": REJECTED,
        "message": message,
        "result": null,
    }));
    result
}

fn failed_to_start(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.to_owned())])
}

fn unknown_job(id: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "no job {id} on this server (jobs last as long as the server that started them)"
    ))])
}

fn structured(text: String, value: Value, is_error: bool) -> CallToolResult {
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(value);
    result
}

// -------------------------------------------------------------------------------------------
// Serving
// -------------------------------------------------------------------------------------------

/// Runs `handoff mcp` until stdin closes or a signal arrives; returns the exit code.
pub async fn main() -> u8 {
    use std::io::Write;
    let exe = match std::env::current_exe().and_then(|p| p.canonicalize()) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "handoff: cannot find myself: {e}");
            return 1;
        }
    };
    // In the private work directory, out of reach of the agents the jobs start; held (and so
    // never swept) while the server runs, removed when it ends.
    let dir = match handoff_core::PrivateDir::create(None, handoff_core::PrivateDirKind::Mcp) {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "handoff: {e}");
            return 1;
        }
    };
    let jobs = Arc::new(Jobs::new(exe, dir, crate::jobs::mcp_store()));
    let server = Server { jobs: jobs.clone() };
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let (closed_tx, mut closed_rx) = tokio::sync::watch::channel(false);
    let stdin = jobs::EofWatch::new(stdin, closed_tx);
    let running = match server.serve((stdin, stdout)).await {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "handoff: mcp: {e}");
            jobs.shutdown().await;
            return 1;
        }
    };
    let stop = running.cancellation_token();
    let watcher = {
        let jobs = jobs.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                let _ = closed_rx.wait_for(|c| *c).await.is_ok();
                jobs.shutdown().await;
                return;
            };
            let signalled = tokio::select! {
                // stdin closed: stop the jobs at once so calls still waiting on them end.
                _ = async { closed_rx.wait_for(|c| *c).await.is_ok() } => false,
                _ = int.recv() => true,
                _ = term.recv() => true,
            };
            jobs.shutdown().await;
            if signalled {
                stop.cancel();
            }
        })
    };
    let _ = running.waiting().await;
    jobs.shutdown().await;
    watcher.abort();
    0
}

#[cfg(test)]
mod tests;
