//! `handoff continue`: the arguments, and the one JSON line of `handoff_continue::continue_task`.

use std::io::Write;
use std::time::Duration;

use clap::{Args, ValueEnum};
use handoff_continue::{ContinueContext, ContinueRequest, Fallback, NoteInput};
use handoff_core::{ContinueResult, Engine, ReceiverRole};

const AFTER_HELP: &str = "\
The destination phrase, in place of --to/--model/--effort/--on:
  phrase = agent { model | effort } [place]   (at most one model and one effort, either order)
  agent  = codex, claude, opencode, cursor, kiro, grok, copilot, gemini, qwen, … or claude-code, cursor-agent, kiro-cli
  effort = minimal, low, medium, high, xhigh, max (the receiver's CLI must accept it)
  model  = any other word: gpt-5, o3, sonnet, …
  place  = on <machine>[:<path>] | on this machine | here | locally
  Agents, efforts and place words match in any case. A word within two edits of one of them
  (one, for three letters or fewer) is refused as a typo: give such a model with --model. A flag
  that says otherwise than the phrase is refused; --dry-run shows how the phrase was read
  (`destination` in the JSON). Examples:
    handoff continue \"codex gpt-5 high on devbox\" --cwd \"$PWD\" --note-file note.md
    handoff continue \"opencode on this machine\" --cwd \"$PWD\" --note-file note.md --dry-run

Exit codes:
  0   the receiver started and finished its first turn (or --dry-run, --note-only)
  1   the receiver did not start, its first turn failed, or it did not continue the carried
      conversation (continuity not-continued); the task stays where it was
  5   rejected before anything changed
  9   cancelled by SIGINT/SIGTERM
  10  a review receiver changed the worktree

Once the arguments parse, one JSON line (handoff.continue.v1) is printed on stdout, whatever the outcome.";

/// What to do when the conversation can't be carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FallbackArg {
    /// Start the receiver from the note and a recap alone.
    FreshAgent,
}

/// The receiver's role.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoleArg {
    /// Carry the work on: edit files, run commands.
    Implement,
    /// Review the work without changing the worktree.
    Review,
}

impl RoleArg {
    fn role(self) -> ReceiverRole {
        match self {
            RoleArg::Implement => ReceiverRole::Implement,
            RoleArg::Review => ReceiverRole::Review,
        }
    }

    /// The role's name.
    pub fn as_str(self) -> &'static str {
        self.role().as_str()
    }
}

/// Arguments of `handoff continue`.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
#[command(group(clap::ArgGroup::new("receiver").required(true).multiple(true).args(["destination", "to"])))]
pub struct ContinueArgs {
    /// The receiver in one phrase: "<agent> [model] [effort] [on <machine>[:<path>] | on this
    /// machine]", e.g. "codex gpt-5 high on devbox" (the grammar is below).
    #[arg(value_name = "DESTINATION")]
    pub destination: Option<String>,
    /// The agent that takes the task over (or name it in the destination phrase).
    #[arg(long, value_name = "PROVIDER")]
    pub to: Option<String>,
    /// The receiver's model (default: the configuration's, else the CLI's).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// The receiver's reasoning effort, one its CLI accepts.
    #[arg(long, value_name = "EFFORT")]
    pub effort: Option<String>,
    /// The receiver's account, one of `[agents.<provider>.accounts.<name>]` in the
    /// configuration. Another account of the task's current provider implies --new-thread.
    #[arg(long, value_name = "NAME")]
    pub account: Option<String>,
    /// What the receiver may do.
    #[arg(long, value_enum, default_value = "implement")]
    pub role: RoleArg,
    /// The handoff note (`handoff note template`), or `-` for stdin. All nine sections must
    /// be filled in ("None" counts).
    #[arg(long, value_name = "FILE")]
    pub note_file: String,
    /// A message for the receiver, sent after the note.
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    /// The message from a file instead (kept out of the command line, which other local users
    /// can read).
    #[arg(long, value_name = "FILE", conflicts_with = "message")]
    pub message_file: Option<String>,
    /// Absolute path of a directory in the worktree; HEAD must be on a branch with a commit.
    #[arg(long, value_name = "DIR")]
    pub cwd: String,
    /// Who has the task now (required when the worktree has no task yet).
    #[arg(long, value_name = "PROVIDER")]
    pub from: Option<String>,
    /// The model the current agent runs.
    #[arg(long, value_name = "MODEL")]
    pub from_model: Option<String>,
    /// Start the receiver on a new task, in a new linked worktree and branch made from the
    /// checkpoint; the original task, worktree, branch and index are left untouched.
    #[arg(long)]
    pub new_thread: bool,
    /// Checkpoint and write the note, but start no receiver.
    #[arg(long, conflicts_with = "new_thread")]
    pub note_only: bool,
    /// Continue on another machine: an ssh destination (an alias from ~/.ssh/config,
    /// user@host, ssh://user@host:port) and optionally the repository's path there
    /// (default: the same path as here if it holds the repository, else <dir>/<repo>, where
    /// <dir> is the `dir` of a host named in [hosts], ~/handoff otherwise).
    /// The branch must be on a git remote both machines reach (--push pushes it); the other
    /// machine needs handoff and the receiver's CLI.
    #[arg(long, value_name = "DEST[:PATH]", conflicts_with_all = ["new_thread", "note_only"])]
    pub on: Option<String>,
    /// Validate and plan everything, print what would happen, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Push the branch to its remote after the checkpoint (never forced).
    #[arg(long)]
    pub push: bool,
    /// Wait while a delegated run or continuation holds the worktree, or an agent works in
    /// it, instead of refusing.
    #[arg(long)]
    pub wait: bool,
    /// No status line on a terminal: stderr carries only diagnostics.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Hand the task over as a background job and return at once, printing its id; collect
    /// it with `handoff wait`, `handoff result`, `handoff cancel`.
    #[arg(long)]
    pub detach: bool,
    /// The session to carry: its id in the source CLI's store, or the absolute path of its
    /// file. Default: the calling agent's own session (CLAUDE_CODE_SESSION_ID,
    /// CODEX_THREAD_ID), else the session of the task's last receiver, else the newest session
    /// that ran in the worktree.
    #[arg(long, value_name = "ID|FILE")]
    pub session: Option<String>,
    /// When the conversation can't be carried, start the receiver from the note and a recap
    /// alone (continuity `fresh-agent`) instead of refusing.
    #[arg(long, value_enum, value_name = "ROUTE")]
    pub fallback: Option<FallbackArg>,
    /// Seconds the receiver may take to show, in its own session store, that it resumed the
    /// carried conversation; after that it is stopped and continuity is `inconclusive`.
    #[arg(long, value_name = "SECS", default_value_t = handoff_continue::DEFAULT_READY_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub ready_timeout: u64,
    /// Also ask the receiver what it was last working on and compare its answer with the
    /// note's Current state and Next steps (always done when its store can't be read).
    #[arg(long)]
    pub probe: bool,
    /// Seconds the receiver's first turn may take.
    #[arg(long, value_name = "SECS", default_value_t = handoff_continue::DEFAULT_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    /// Run the checkpoint's hooks even though hooks or a hook manager's configuration changed
    /// since the task's first event (by default such a checkpoint runs none). Review them
    /// first.
    #[arg(long)]
    pub run_hooks: bool,
    /// Start the receiver even though agent configuration (.claude/, AGENTS.md, opencode.json,
    /// .mcp.json, …) changed since the task's first event; the receiver loads it. Review it
    /// first.
    #[arg(long)]
    pub trust_project_config: bool,
    /// Why the task moves, when a hook moves it (`limit:<cause>`); recorded in the handoff.
    #[arg(long, hide = true, value_name = "KIND:CAUSE")]
    pub trigger: Option<String>,
    /// The still-running process of the agent the task moves from (its hook started the move).
    #[arg(long, hide = true, value_name = "PID")]
    pub source_pid: Option<u32>,
    /// The note was written by handoff, not by the agent (its front matter says so).
    #[arg(long, hide = true)]
    pub generated_note: bool,
}

impl ContinueArgs {
    /// The library request (`--note-file -` is standard input, read where the note is checked).
    fn request(self) -> ContinueRequest {
        let note = if self.note_file == "-" {
            NoteInput::Stdin
        } else {
            NoteInput::File(self.note_file)
        };
        ContinueRequest {
            to: self.to,
            destination: self.destination,
            model: self.model,
            effort: self.effort,
            account: self.account,
            role: self.role.role(),
            note,
            message: self.message,
            cwd: self.cwd,
            from: self.from,
            from_model: self.from_model,
            new_thread: self.new_thread,
            note_only: self.note_only,
            on: self.on,
            dry_run: self.dry_run,
            push: self.push,
            wait: self.wait,
            session: self.session,
            fallback: self
                .fallback
                .map(|FallbackArg::FreshAgent| Fallback::FreshAgent),
            ready_timeout: Duration::from_secs(self.ready_timeout),
            probe: self.probe,
            timeout: Duration::from_secs(self.timeout),
            run_hooks: self.run_hooks,
            trust_project_config: self.trust_project_config,
            trigger: self.trigger,
            source_pid: self.source_pid,
            generated_note: self.generated_note,
        }
    }
}

/// The longest `--message-file`, in bytes.
const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The text of `--message-file`: a private regular file, read as `--instructions` is.
fn read_message(path: &str) -> Result<String, String> {
    let bytes = handoff_core::read_input_file("--message-file", path, MAX_MESSAGE_BYTES)?;
    String::from_utf8(bytes).map_err(|_| format!("--message-file {path}: not UTF-8 text"))
}

/// Runs `handoff continue`; returns the exit code. `live` is the status line being drawn, if
/// any; it is cleared before anything else is written.
pub async fn main(
    args: ContinueArgs,
    engine: Result<Engine, String>,
    live: Option<crate::live::Live>,
) -> u8 {
    let cancel = crate::cancel_on_signals();
    let result = match run(args, engine, cancel).await {
        Ok(r) => r,
        Err(message) => handoff_continue::rejected_result(message),
    };
    let terminal = live.is_some();
    if let Some(live) = live {
        live.finish().await;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}",
        serde_json::to_string(&result).unwrap_or_default()
    );
    let _ = out.flush();
    // On a terminal, a human summary; otherwise only why it stopped.
    if terminal {
        let _ = writeln!(
            std::io::stderr(),
            "handoff: {}",
            handoff_core::summary::continue_summary(&result)
        );
    } else if let Some(reason) = &result.reason {
        let _ = writeln!(
            std::io::stderr(),
            "handoff: {}",
            handoff_core::printable(reason, true)
        );
    }
    result.exit_code
}

async fn run(
    args: ContinueArgs,
    engine: Result<Engine, String>,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> Result<ContinueResult, String> {
    let engine = engine?;
    let store = crate::open_store()?;
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let state_dir = handoff_store::default_path(&env)
        .map_err(|e| e.to_string())?
        .parent()
        .map_or_else(|| ".".into(), camino::Utf8Path::to_owned);
    let mut args = args;
    if let Some(path) = args.message_file.take() {
        args.message = Some(read_message(&path)?);
    }
    let request = args.request();
    let ctx = ContinueContext {
        engine: &engine,
        store: &store,
        state_dir,
        env,
    };
    Ok(handoff_continue::continue_task(&request, &ctx, cancel).await)
}
