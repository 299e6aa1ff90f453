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

mod jobs;

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

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
// Tool inputs
// -------------------------------------------------------------------------------------------

/// `harness`: one agent, or the members of a panel.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Harness {
    /// One agent.
    One(String),
    /// A panel's members, each `agent` or `agent:model`.
    Panel(Vec<String>),
}

impl Default for Harness {
    fn default() -> Self {
        Harness::One(String::new())
    }
}

impl Harness {
    /// The value of `--harness`: the agent, or the members joined with commas.
    fn flag(&self) -> Result<String, String> {
        match self {
            Harness::One(h) => Ok(h.clone()),
            Harness::Panel(members) => {
                if let Some(bad) = members.iter().find(|m| m.contains(',')) {
                    return Err(format!("harness: the member {bad:?} holds a comma"));
                }
                Ok(members.join(","))
            }
        }
    }
}

/// The fields `handoff run`, `run-with-advice` and `advice` share, mirroring their flags.
macro_rules! delegate_input {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Default, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            /// The agent that does the work: codex, claude, grok, kiro, opencode or cursor
            /// (`--harness`); or, for a read-only request (advice, review, verify), a list of
            /// agents, each optionally `agent:model`, asked as a panel (one `handoff.panel.v1`
            /// result with the members' findings merged).
            pub harness: Harness,
            /// A panel succeeds when at least this many members succeed (`--quorum`; default:
            /// all of them).
            pub quorum: Option<u32>,
            /// The agent that is asking (`--caller-harness`): codex or claude for runs, any
            /// agent for advice. Self-asserted, recorded in the result.
            pub caller_harness: Option<String>,
            /// Absolute, normalized path inside a git worktree, without symlinks (`--cwd`).
            pub cwd: String,
            /// The task (or question) as text; written to a private file and passed as
            /// `--instructions`. Give this or `instructionsFile`.
            pub instructions: Option<String>,
            /// Absolute path of a private UTF-8 file with the task (`--instructions`).
            pub instructions_file: Option<String>,
            /// Exact model name for the agent CLI (`--model`).
            pub model: Option<String>,
            /// Reasoning effort; accepted values depend on the agent (`--effort`).
            pub effort: Option<String>,
            /// Turn limit 1-100, Claude Code and Grok only (`--max-turns`).
            pub max_turns: Option<u32>,
            /// Allow shell commands (`--bash`, default true).
            pub bash: Option<bool>,
            /// Allow web search (`--web-search`, default false).
            pub web_search: Option<bool>,
            /// Absolute path of a `handoff.mcp.v1` descriptor: the only MCP servers the agent
            /// sees (`--mcp-config`).
            pub mcp_config: Option<String>,
            /// Wall-clock limit of the agent in ms, 100-3600000 (`--timeout-ms`, default
            /// 600000).
            pub timeout_ms: Option<u64>,
            /// Also write the result JSON to this new file in a private directory (`--result`).
            pub result_file: Option<String>,
            /// If another root run holds the worktree, wait for it instead of being refused
            /// (`--wait`).
            pub wait: Option<bool>,
            /// A build or phase run may add or change git hooks and git settings that run a
            /// program (`--allow-git-config`); otherwise such a change blocks it.
            pub allow_git_config: Option<bool>,
            /// Cover ignored files in the evidence too (`--ignored`).
            pub ignored: Option<bool>,
            /// Agents that take the same request, in order, when an attempt ends rate-limited,
            /// with a server error, without credit, not installed or failing preflight:
            /// `AGENT[@ACCOUNT][:MODEL],…` (`--failover`; `none` turns the configured default
            /// off).
            pub failover: Option<String>,
            /// Advice DAG budget: deepest nesting, 0-32 (`--max-depth`, default 3).
            pub max_depth: Option<u32>,
            /// Advice DAG budget: most nodes, 1-256 (`--max-nodes`, default 16).
            pub max_nodes: Option<u32>,
            /// Advice DAG budget: most advice nodes, 0-256 (`--max-advice-nodes`, default 12).
            pub max_advice_nodes: Option<u32>,
            /// Advice DAG budget: most handoff nodes, 0-256 (`--max-handoff-nodes`, default 4).
            pub max_handoff_nodes: Option<u32>,
            /// Advice DAG budget: most nodes running at once, 1-32 (`--max-concurrency`,
            /// default 4).
            pub max_concurrency: Option<u32>,
            /// Advice DAG budget: wall-clock limit of the whole DAG in ms (`--root-timeout-ms`,
            /// default 1800000).
            pub root_timeout_ms: Option<u64>,
        }

        impl $name {
            fn shared_flags(&self, launch: &mut Launch) -> Result<(), String> {
                launch.value("--harness", Some(&self.harness.flag()?));
                // A list is a panel even of one member: `--quorum` (all of them, unless given)
                // says so.
                let quorum = match (&self.quorum, &self.harness) {
                    (Some(q), _) => Some(q.to_string()),
                    (None, Harness::Panel(members)) => Some(members.len().to_string()),
                    (None, Harness::One(_)) => None,
                };
                launch.value("--quorum", quorum.as_ref());
                launch.value("--caller-harness", self.caller_harness.as_ref());
                launch.value("--cwd", Some(&self.cwd));
                launch.text_or_file(
                    "--instructions",
                    ("instructions", self.instructions.as_ref()),
                    ("instructionsFile", self.instructions_file.as_ref()),
                )?;
                launch.value("--model", self.model.as_ref());
                launch.value("--effort", self.effort.as_ref());
                launch.value("--max-turns", self.max_turns.as_ref());
                launch.value("--bash", self.bash.as_ref());
                launch.value("--web-search", self.web_search.as_ref());
                launch.value("--mcp-config", self.mcp_config.as_ref());
                launch.value("--timeout-ms", self.timeout_ms.as_ref());
                launch.value("--result", self.result_file.as_ref());
                launch.switch("--wait", self.wait);
                launch.switch("--allow-git-config", self.allow_git_config);
                launch.switch("--ignored", self.ignored);
                launch.value("--failover", self.failover.as_ref());
                launch.value("--max-depth", self.max_depth.as_ref());
                launch.value("--max-nodes", self.max_nodes.as_ref());
                launch.value("--max-advice-nodes", self.max_advice_nodes.as_ref());
                launch.value("--max-handoff-nodes", self.max_handoff_nodes.as_ref());
                launch.value("--max-concurrency", self.max_concurrency.as_ref());
                launch.value("--root-timeout-ms", self.root_timeout_ms.as_ref());
                Ok(())
            }
        }
    };
}

delegate_input!(
    /// `handoff run` (or `run-with-advice` with `withAdvice`).
    RunInput {
        /// build | phase (must change the worktree) or review | verify (must not) (`--mode`).
        mode: String,
        /// Let the worker ask other agents for read-only advice through a budgeted supervisor
        /// (`handoff run-with-advice`).
        with_advice: Option<bool>,
    }
);

delegate_input!(
    /// `handoff advice`: a read-only answer.
    AdviceInput {}
);

/// `handoff continue`: hand the task itself to another agent.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueInput {
    /// The receiver in one phrase, as the person said it: "<agent> [model] [effort] [on
    /// <machine>[:<path>] | on this machine]", e.g. "codex gpt-5 high on devbox" (the
    /// positional argument of `handoff continue`; give this or `to`).
    pub destination: Option<String>,
    /// The agent that takes the task over (`--to`): claude, codex or opencode with the carried
    /// conversation; cursor or kiro from the note and a recap (`fallback: fresh-agent`).
    pub to: Option<String>,
    /// Absolute path of a directory in the worktree; HEAD must be on a branch with a commit
    /// (`--cwd`).
    pub cwd: String,
    /// The handoff note as text (all nine sections of `handoff note template`); written to a
    /// private file and passed as `--note-file`. Give this or `noteFile`.
    pub note: Option<String>,
    /// Path of the handoff note (`--note-file`).
    pub note_file: Option<String>,
    /// A message for the receiver, sent after the note (`--message`).
    pub message: Option<String>,
    /// implement (default: may edit and run commands) or review (read-only) (`--role`).
    pub role: Option<String>,
    /// Who has the task now; needed for a worktree's first handoff (`--from`).
    pub from: Option<String>,
    /// The model the current agent runs (`--from-model`).
    pub from_model: Option<String>,
    /// The receiver's model (`--model`).
    pub model: Option<String>,
    /// The receiver's reasoning effort (`--effort`).
    pub effort: Option<String>,
    /// The receiver's account from the configuration (`--account`).
    pub account: Option<String>,
    /// Start the receiver on a new task in a new linked worktree and branch (`--new-thread`).
    pub new_thread: Option<bool>,
    /// Checkpoint and write the note, but start no receiver (`--note-only`).
    pub note_only: Option<bool>,
    /// Validate and plan everything, change nothing (`--dry-run`).
    pub dry_run: Option<bool>,
    /// Push the branch to its remote after the checkpoint, never forced (`--push`).
    pub push: Option<bool>,
    /// Wait while another run or agent holds the worktree instead of refusing (`--wait`).
    pub wait: Option<bool>,
    /// Seconds the receiver's first turn may take, 1-86400 (`--timeout`, default 1800).
    pub timeout: Option<u64>,
    /// The session to carry: an id in the source CLI's store or the absolute path of its file
    /// (`--session`; default: the caller's own session, else the newest in the worktree).
    pub session: Option<String>,
    /// `fresh-agent`: when the conversation can't be carried, start the receiver from the note
    /// and a recap alone instead of refusing (`--fallback`).
    pub fallback: Option<String>,
    /// Seconds the receiver may take to show it resumed the carried conversation, 1-86400
    /// (`--ready-timeout`, default 120).
    pub ready_timeout: Option<u64>,
    /// Also ask the receiver what it was last working on and compare with the note (`--probe`).
    pub probe: Option<bool>,
    /// Continue on another machine: an ssh destination and optionally the repository's path
    /// there, `host[:path]` (`--on`).
    pub on: Option<String>,
}

/// What `handoff_start` runs in the background: exactly one of `run`, `advice`, `continue`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartInput {
    /// The arguments of `handoff_run`.
    pub run: Option<RunInput>,
    /// The arguments of `handoff_advice`.
    pub advice: Option<AdviceInput>,
    /// The arguments of `handoff_continue`.
    #[serde(rename = "continue")]
    pub continue_: Option<ContinueInput>,
}

/// A job of this server.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobInput {
    /// The id `handoff_start` returned.
    pub job_id: String,
}

/// `handoff_status`: one job, or every job when `jobId` is left out.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusInput {
    /// The id `handoff_start` returned; leave out to list every job of this server.
    pub job_id: Option<String>,
}

/// `handoff_result`: the final result of a job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultInput {
    /// The id `handoff_start` returned.
    pub job_id: String,
    /// Wait up to this many seconds (at most 600) for a running job to finish; default 0.
    pub wait_seconds: Option<u64>,
}

impl RunInput {
    fn launch(&self) -> Result<Launch, String> {
        let verb = if self.with_advice == Some(true) {
            "run-with-advice"
        } else {
            "run"
        };
        let mut launch = Launch::new(verb);
        launch.value("--mode", Some(&self.mode));
        self.shared_flags(&mut launch)?;
        Ok(launch)
    }
}

impl AdviceInput {
    fn launch(&self) -> Result<Launch, String> {
        let mut launch = Launch::new("advice");
        self.shared_flags(&mut launch)?;
        Ok(launch)
    }
}

impl ContinueInput {
    fn launch(&self) -> Result<Launch, String> {
        let mut launch = Launch::new("continue");
        if let Some(phrase) = &self.destination {
            // A phrase starts with the agent's name; one that starts with '-' would be read as
            // a flag.
            if phrase.trim_start().starts_with('-') {
                return Err("destination starts with the agent's name, not '-'".into());
            }
            launch.args.push(phrase.clone());
        }
        if self.destination.is_none() && self.to.is_none() {
            return Err("give destination (\"codex gpt-5 high\") or to".into());
        }
        launch.value("--to", self.to.as_ref());
        launch.value("--cwd", Some(&self.cwd));
        launch.text_or_file(
            "--note-file",
            ("note", self.note.as_ref()),
            ("noteFile", self.note_file.as_ref()),
        )?;
        // Through a private file, never on the job's command line, which other local users
        // can read.
        if let Some(message) = &self.message {
            launch.inline.push(("--message-file", message.clone()));
        }
        launch.value("--role", self.role.as_ref());
        launch.value("--from", self.from.as_ref());
        launch.value("--from-model", self.from_model.as_ref());
        launch.value("--model", self.model.as_ref());
        launch.value("--effort", self.effort.as_ref());
        launch.value("--account", self.account.as_ref());
        launch.switch("--new-thread", self.new_thread);
        launch.switch("--note-only", self.note_only);
        launch.switch("--dry-run", self.dry_run);
        launch.switch("--push", self.push);
        launch.switch("--wait", self.wait);
        launch.value("--timeout", self.timeout.as_ref());
        launch.value("--session", self.session.as_ref());
        launch.value("--fallback", self.fallback.as_ref());
        launch.value("--ready-timeout", self.ready_timeout.as_ref());
        launch.switch("--probe", self.probe);
        launch.value("--on", self.on.as_ref());
        Ok(launch)
    }
}

impl StartInput {
    fn launch(&self) -> Result<Launch, String> {
        match (&self.run, &self.advice, &self.continue_) {
            (Some(r), None, None) => r.launch(),
            (None, Some(a), None) => a.launch(),
            (None, None, Some(c)) => c.launch(),
            _ => Err("give exactly one of run, advice, continue".into()),
        }
    }
}

impl Launch {
    fn value<T: Display>(&mut self, flag: &str, value: Option<&T>) {
        if let Some(v) = value {
            self.args.push(flag.to_owned());
            self.args.push(v.to_string());
        }
    }

    fn switch(&mut self, flag: &str, on: Option<bool>) {
        if on == Some(true) {
            self.args.push(flag.to_owned());
        }
    }

    /// `flag` with a path, or with inline text the job writes to a private file.
    fn text_or_file(
        &mut self,
        flag: &'static str,
        (text_name, text): (&str, Option<&String>),
        (file_name, file): (&str, Option<&String>),
    ) -> Result<(), String> {
        match (text, file) {
            (Some(_), Some(_)) => Err(format!("give {text_name} or {file_name}, not both")),
            (Some(t), None) => {
                self.inline.push((flag, t.clone()));
                Ok(())
            }
            (None, f) => {
                self.value(flag, f);
                Ok(())
            }
        }
    }
}

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
    instructions = "handoff delegates bounded coding tasks to other agent CLIs (codex, claude, grok, kiro, opencode, cursor), asks them for read-only advice, and hands whole tasks over. Every tool runs the `handoff` command; its result is the command's JSON line plus its exit code (only exit 0 with status \"succeeded\" is success). Agent runs can take many minutes: prefer handoff_start, then poll handoff_status / handoff_result (with waitSeconds), and handoff_cancel to stop a job."
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
    let jobs = Arc::new(Jobs::new(exe, dir));
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
mod tests {
    use super::*;

    #[test]
    fn a_harness_list_asks_a_panel() {
        let input: AdviceInput = serde_json::from_value(serde_json::json!({
            "harness": ["codex", "claude:opus"],
            "quorum": 1,
            "cwd": "/r",
            "instructions": "Is this right?",
        }))
        .unwrap();
        let mut launch = Launch::new("advice");
        input.shared_flags(&mut launch).unwrap();
        let at = launch.args.iter().position(|a| a == "--harness").unwrap();
        assert_eq!(launch.args[at + 1], "codex,claude:opus");
        let q = launch.args.iter().position(|a| a == "--quorum").unwrap();
        assert_eq!(launch.args[q + 1], "1");
        let one: AdviceInput = serde_json::from_value(serde_json::json!({
            "harness": "codex", "cwd": "/r", "instructions": "x",
        }))
        .unwrap();
        assert_eq!(one.harness.flag().unwrap(), "codex");
        // A one-member list is still a panel: it is launched with a quorum.
        let listed: AdviceInput = serde_json::from_value(serde_json::json!({
            "harness": ["codex"], "cwd": "/r", "instructions": "x",
        }))
        .unwrap();
        let mut launch = Launch::new("advice");
        listed.shared_flags(&mut launch).unwrap();
        let q = launch.args.iter().position(|a| a == "--quorum").unwrap();
        assert_eq!(launch.args[q + 1], "1");
        let mut launch = Launch::new("advice");
        one.shared_flags(&mut launch).unwrap();
        assert!(!launch.args.iter().any(|a| a == "--quorum"));
        let bad: AdviceInput = serde_json::from_value(serde_json::json!({
            "harness": ["codex,claude"], "cwd": "/r", "instructions": "x",
        }))
        .unwrap();
        assert!(bad.harness.flag().is_err());
    }

    #[test]
    fn a_continue_message_travels_in_a_private_file_not_on_the_command_line() {
        let input = ContinueInput {
            to: Some("codex".into()),
            cwd: "/r".into(),
            note_file: Some("/n.md".into()),
            message: Some("db password: S3cr3t!x".into()),
            ..ContinueInput::default()
        };
        let launch = input.launch().unwrap();
        assert!(
            !launch.args.iter().any(|a| a.contains("S3cr3t")),
            "{:?}",
            launch.args
        );
        assert!(!launch.args.iter().any(|a| a == "--message"));
        assert_eq!(
            launch.inline,
            [("--message-file", "db password: S3cr3t!x".to_owned())]
        );
    }

    #[test]
    fn a_continue_destination_is_the_positional_phrase() {
        let input: ContinueInput = serde_json::from_value(serde_json::json!({
            "destination": "codex gpt-5 high on devbox", "cwd": "/r", "noteFile": "/n.md",
        }))
        .unwrap();
        let launch = input.launch().unwrap();
        assert_eq!(launch.args[0], "codex gpt-5 high on devbox");
        assert!(!launch.args.iter().any(|a| a == "--to"));
        for bad in [
            serde_json::json!({"destination": "-x", "cwd": "/r", "noteFile": "/n.md"}),
            serde_json::json!({"cwd": "/r", "noteFile": "/n.md"}),
        ] {
            let input: ContinueInput = serde_json::from_value(bad).unwrap();
            assert!(input.launch().is_err());
        }
    }
}
