//! `handoff note`: the handoff note's template, its check, and its rendering with the git state
//! read from the repository.
//!
//! Exit codes: 0 success; 5 when the note cannot be read, fails its check, or the repository
//! cannot be used (not a worktree, detached HEAD, no commit yet). Every failure is one line on
//! stderr, and nothing is written anywhere.

use std::io::Write;

use camino::Utf8PathBuf;
use clap::{Args, Subcommand};
use handoff_core::{
    AgentId, GitState, NoteCheck, NoteOrigin, check_model, check_note, exit, note_template,
    now_iso, parse_note, read_note, render_note,
};

const AFTER_HELP: &str = "\
Exit codes:
  0   success
  5   the note cannot be read or fails its check, or the repository cannot be used";

/// The `handoff note` commands.
#[derive(Debug, Subcommand)]
#[command(after_help = AFTER_HELP)]
pub enum NoteCommand {
    /// Print the template: the nine sections, each with one line of guidance for the author.
    Template,
    /// Check that a note has each of the nine sections once, each filled in ("None" counts).
    #[command(after_help = AFTER_HELP)]
    Check(CheckArgs),
    /// Print the note for its receiver: front matter and Git state filled in from the
    /// repository (whatever the note said about them is replaced), and receiver instructions
    /// appended.
    #[command(after_help = AFTER_HELP)]
    Render(RenderArgs),
}

/// Arguments of `handoff note check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The note (UTF-8 Markdown, at most 256 KiB).
    #[arg(value_name = "FILE")]
    pub file: Utf8PathBuf,
    /// Print the result as one JSON line (`handoff.note-check.v1`) on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `handoff note render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The note (UTF-8 Markdown, at most 256 KiB); it must pass `handoff note check`.
    #[arg(value_name = "FILE")]
    pub file: Utf8PathBuf,
    /// A directory of the repository the work is in; HEAD must be on a branch with a commit.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub cwd: Utf8PathBuf,
    /// The agent that wrote the note, recorded in the front matter.
    #[arg(long, value_name = "AGENT")]
    pub source_agent: Option<String>,
    /// The model that agent ran, recorded in the front matter.
    #[arg(long, value_name = "MODEL")]
    pub source_model: Option<String>,
}

/// Runs a `handoff note` command; returns the exit code.
pub fn main(command: NoteCommand) -> u8 {
    match command {
        NoteCommand::Template => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(note_template().as_bytes());
            let _ = out.flush();
            exit::OK
        }
        NoteCommand::Check(args) => check(&args),
        NoteCommand::Render(args) => match render(&args) {
            Ok(text) => {
                // The note's body is the agent's text: its control characters are escaped.
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(handoff_core::printable(&text, true).as_bytes());
                let _ = out.flush();
                exit::OK
            }
            Err(message) => fail(&message),
        },
    }
}

fn check(args: &CheckArgs) -> u8 {
    let file = args.file.as_str();
    let read = read_note(args.file.as_std_path());
    let outcome = read.as_ref().map(|text| check_note(&parse_note(text)));
    if args.json {
        let report = NoteCheck::new(file, outcome.clone());
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&report).unwrap_or_default()
        );
        let _ = out.flush();
    }
    match outcome {
        Ok(Ok(())) => {
            if !args.json {
                let _ = writeln!(std::io::stdout().lock(), "{file}: ok");
            }
            exit::OK
        }
        Ok(Err(errors)) => fail(&format!("note {file}: {errors}")),
        Err(err) => fail(&format!("note {file}: {err}")),
    }
}

/// The rendered note, or the one line that says why it cannot be rendered.
fn render(args: &RenderArgs) -> Result<String, String> {
    let file = args.file.as_str();
    let source_provider = match &args.source_agent {
        None => None,
        Some(agent) => Some(
            AgentId::parse(agent)
                .ok_or_else(|| format!("--source-agent: invalid agent id '{agent}'"))?,
        ),
    };
    if let Some(model) = &args.source_model {
        check_model(model).map_err(|e| e.replace("--model", "--source-model"))?;
    }
    let text = read_note(args.file.as_std_path()).map_err(|err| format!("note {file}: {err}"))?;
    let note = parse_note(&text);
    check_note(&note).map_err(|errors| format!("note {file}: {errors}"))?;
    let git = handoff_git::repo_state(&args.cwd).map_err(|err| err.to_string())?;
    usable(&git)?;
    let origin = NoteOrigin {
        created_at: Some(now_iso()),
        source_provider,
        source_model: args.source_model.clone(),
        generated: false,
    };
    Ok(render_note(&note, &git, &origin))
}

/// A note is handed off from a branch with a commit: the receiver checks out that commit and
/// pushes to that branch.
fn usable(git: &GitState) -> Result<(), String> {
    let Some(branch) = &git.branch else {
        return Err(format!(
            "HEAD is detached in '{}': check out the branch the work is on, then render the note",
            git.repository
        ));
    };
    if git.head.is_none() {
        return Err(format!(
            "branch '{branch}' in '{}' has no commit yet: commit the work, then render the note",
            git.repository
        ));
    }
    Ok(())
}

fn fail(message: &str) -> u8 {
    let _ = writeln!(
        std::io::stderr(),
        "handoff: {}",
        handoff_core::printable(message, false)
    );
    exit::USAGE
}
