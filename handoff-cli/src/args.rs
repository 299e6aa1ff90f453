//! The command line: `handoff`'s verbs and the options of `run`, `run-with-advice` and
//! `advice`, as clap parses them. Each verb's handling lives with the verb.

use clap::{Args, Parser, Subcommand};

use crate::{attribute, checkpoint, continuation, doctor, fingerprint, hook, jobs, log, note};

const AFTER_HELP: &str = "\
Exit codes:
  0   succeeded
  2   the agent failed, or said it was blocked
  3   the agent CLI is unavailable (not installed, failed preflight)
  4   `handoff result`: the job is still running
  5   the request was rejected before anything ran
  7   the agent's output (or the result file) is not what the contract says
  8   the per-node timeout expired
  9   cancelled by SIGINT/SIGTERM
  10  blocked by policy (a build changed nothing, the worktree changed during a read-only run)

Only exit 0 with status \"succeeded\" is success.";

/// Delegate coding work to another agent CLI (Codex, Claude Code, Grok, Kiro, OpenCode, Cursor,
/// GitHub Copilot CLI, Gemini CLI, Qwen Code) and verify the result with git, or hand the task itself over.
#[derive(Debug, Parser)]
#[command(name = "handoff", version, after_help = AFTER_HELP, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Hand a bounded task (build, phase, review, verify) to another agent. The worker cannot
    /// call handoff.
    Run(DelegateArgs),
    /// Like `run`, but the worker may ask further agents for read-only advice through a
    /// supervisor that enforces the DAG budgets.
    RunWithAdvice(DelegateArgs),
    /// Ask another agent for a read-only opinion. Inside a worker (HANDOFF_SUPERVISOR_CONTEXT
    /// set) this is the only verb, answered by the root's supervisor.
    Advice(DelegateArgs),
    /// Report every agent's capabilities and preflight (no model calls).
    Capabilities(CapabilitiesArgs),
    /// Show or check the user configuration (per-agent defaults, environment, endpoints).
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print the git fingerprint of a worktree (digest, counts, changes), or what changed since
    /// a saved one.
    Fingerprint(fingerprint::FingerprintArgs),
    /// Write and check handoff notes: the template, its check, and its rendering with the git
    /// state read from the repository.
    #[command(subcommand)]
    Note(note::NoteCommand),
    /// Commit the reviewed files of a worktree (named paths, or --tracked) and record the
    /// checkpoint in the task's timeline. Never commits a handoff note, never pushes.
    Checkpoint(checkpoint::CheckpointArgs),
    /// Show a task's timeline: turns, checkpoints, checks, delegated runs and handoffs.
    Log(log::LogArgs),
    /// Hand the task itself to another agent: checkpoint, write the verified note outside the
    /// repository, start the receiver in a session it keeps, and record the handoff.
    Continue(continuation::ContinueArgs),
    /// Attribute a task's changes to the providers that held it (files, lines, flags for
    /// configuration, lockfiles, permissions, generated and out-of-scope files); --verify runs
    /// the handoff note's verification commands and records them as checks.
    Attribute(attribute::AttributeArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page, handoff(1), generated from these definitions.
    Man,
    /// Report this installation: the binary, configuration, task store, every agent CLI and its
    /// preflight, and whether the plugin is installed in Claude Code and Codex.
    Doctor(doctor::DoctorArgs),
    /// Serve the Model Context Protocol on stdin/stdout: tools for run, advice, continue and
    /// capabilities, and background jobs (start, status, result, cancel) for long runs.
    Mcp,
    /// List this user's background jobs (`--detach`, and the MCP server's while they run),
    /// running first.
    Jobs(jobs::JobsArgs),
    /// Wait for a background job to end; print its result and exit with its exit code.
    Wait(jobs::JobArgs),
    /// Print a background job's result JSON and exit with its exit code (4 while it runs).
    Result(jobs::JobArgs),
    /// Stop a background job as SIGTERM stops a run: it stops its agent and records exit 9.
    Cancel(jobs::JobArgs),
    /// What Claude Code's hooks run (the plugin registers them): on a turn that ended on an
    /// API error, move the task or say what would ([failover] in the configuration).
    Hook(hook::HookArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the effective configuration, credentials masked.
    Show {
        /// Print it as one JSON line.
        #[arg(long)]
        json: bool,
    },
    /// Validate a configuration file (default: the one handoff would use).
    Check {
        /// The file to check.
        file: Option<String>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct CapabilitiesArgs {
    /// Print the capabilities as one JSON line (`handoff.capabilities.v1`).
    #[arg(long)]
    pub(crate) json: bool,
    /// Another machine's: a `[hosts.NAME]` of the configuration, or an ssh destination.
    #[arg(long, value_name = "HOST")]
    pub(crate) on: Option<String>,
}

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct DelegateArgs {
    /// No status line on a terminal: stderr carries only diagnostics.
    #[arg(long, short = 'q')]
    pub(crate) quiet: bool,
    /// The agent that is asking: codex or claude for run (any agent for advice). Self-asserted
    /// metadata, recorded in the result.
    #[arg(long, value_name = "AGENT")]
    pub(crate) caller_harness: Option<String>,
    /// The agent that does the work: codex, grok, kiro, claude, opencode, cursor, copilot,
    /// gemini or qwen. A comma-separated list (`codex,claude:opus`, each agent optionally with
    /// `:model`, at most 8) asks a panel: every member answers the same read-only request
    /// (advice, or run --mode review|verify) and one `handoff.panel.v1` line merges their
    /// answers.
    #[arg(long, value_name = "AGENT[:MODEL],…")]
    pub(crate) harness: Option<String>,
    /// build | phase (must change the worktree) or review | verify (must not). Not for advice.
    #[arg(long)]
    pub(crate) mode: Option<String>,
    /// Absolute path inside a git worktree, without symlinks (use `$(pwd -P)`).
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<String>,
    /// Absolute path of a private UTF-8 file with the task (≤ 2,000,000 bytes), or `-` for stdin.
    #[arg(long, value_name = "FILE")]
    pub(crate) instructions: Option<String>,
    /// Where to write the result JSON: must not exist; its directory must be yours and not
    /// writable by others. The same JSON is always printed on stdout.
    #[arg(long, value_name = "FILE")]
    pub(crate) result: Option<String>,
    /// Exact model name passed to the agent CLI.
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Reasoning effort; accepted values depend on the agent (see `handoff capabilities`).
    #[arg(long)]
    pub(crate) effort: Option<String>,
    /// Turn limit, 1-100 (Claude Code and Grok only).
    #[arg(long, value_name = "N")]
    pub(crate) max_turns: Option<String>,
    /// Allow shell commands: true (default) or false.
    #[arg(long, value_name = "BOOL")]
    pub(crate) bash: Option<String>,
    /// Allow web search: true or false (default).
    #[arg(long, value_name = "BOOL")]
    pub(crate) web_search: Option<String>,
    /// Absolute path of an MCP descriptor (`handoff.mcp.v1` or `handoff.mcp.v0.3`); secrets are
    /// references to environment variables, never literals.
    #[arg(long, value_name = "FILE")]
    pub(crate) mcp_config: Option<String>,
    /// Deepest advice nesting, 0-32 (default 3).
    #[arg(long, value_name = "N")]
    pub(crate) max_depth: Option<String>,
    /// Most nodes in the DAG, 1-256 (default 16).
    #[arg(long, value_name = "N")]
    pub(crate) max_nodes: Option<String>,
    /// Most advice nodes, 0-256 (default 12).
    #[arg(long, value_name = "N")]
    pub(crate) max_advice_nodes: Option<String>,
    /// Most handoff nodes, 0-256 (default 4).
    #[arg(long, value_name = "N")]
    pub(crate) max_handoff_nodes: Option<String>,
    /// Most nodes running at once, 1-32 (default 4). For a panel: most members running at
    /// once (default: all).
    #[arg(long, value_name = "N")]
    pub(crate) max_concurrency: Option<String>,
    /// For a panel: how many members must succeed for the panel to succeed (default: every
    /// member). Makes a panel even of one agent.
    #[arg(long, value_name = "N")]
    pub(crate) quorum: Option<String>,
    /// Wall-clock limit of the whole DAG in ms, 100-86400000 (default 1800000).
    #[arg(long, value_name = "MS")]
    pub(crate) root_timeout_ms: Option<String>,
    /// Wall-clock limit of the agent process in ms, 100-3600000 (default 600000).
    #[arg(long, value_name = "MS")]
    pub(crate) timeout_ms: Option<String>,
    /// A typed link to an earlier DAG node (`requires:<id>`, `advises:<id>`, `verifies:<id>`);
    /// nested requests only. Repeatable.
    #[arg(long, value_name = "TYPE:ID")]
    pub(crate) dependency: Vec<String>,
    /// If another root run holds this worktree, wait for it to finish instead of refusing.
    #[arg(long)]
    pub(crate) wait: bool,
    /// Let a build or phase run add or change git hooks and git settings that run a program
    /// (otherwise such a change blocks it, exit 10).
    #[arg(long)]
    pub(crate) allow_git_config: bool,
    /// Cover ignored files in the evidence too (`.env`, `.venv/`, local agent settings): each
    /// is hashed before and after the run.
    #[arg(long)]
    pub(crate) ignored: bool,
    /// Agents to run the same request on, in order, when the agent's attempt ends rate-limited,
    /// with a server error, without credit, not installed or failing preflight:
    /// `AGENT[@ACCOUNT][:MODEL],…` (at most 8; `none` turns the configured `[failover]`
    /// default off). Each entry is checked before anything starts. With `--on`, the chain is
    /// followed on the host; when the host is lost, it goes on here.
    #[arg(long, value_name = "AGENT[@ACCOUNT][:MODEL],…")]
    pub(crate) failover: Option<String>,
    /// Start the run as a background job and return at once, printing its id: it survives
    /// this terminal; collect it with `handoff wait`, `handoff result`, `handoff cancel`.
    #[arg(long)]
    pub(crate) detach: bool,
    /// With --detach: print the job as one JSON object (`handoff.job.v1`).
    #[arg(long, requires = "detach")]
    pub(crate) json: bool,
    /// Run it on another machine: a `[hosts.NAME]` of the configuration, or an ssh destination
    /// (`user@host`, `user@host:~/dir`). Its handoff does the work there; a build's change
    /// comes back here.
    #[arg(long, value_name = "HOST")]
    pub(crate) on: Option<String>,
}
