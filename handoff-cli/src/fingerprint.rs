//! `handoff fingerprint`: the git fingerprint of a worktree, for scripting and benchmarking, or
//! what changed since a saved one.
//!
//! Exit codes: 0 success (with `--diff`: nothing changed), 1 with `--diff` when something changed,
//! 5 when the fingerprint cannot be taken or the saved one cannot be read.

use std::io::{BufWriter, Write};

use camino::Utf8PathBuf;
use clap::Args;
use handoff_core::{Fingerprint, GitEvidence, Workspace, exit};
use handoff_git::{DetailedFingerprint, GitWorkspace};

/// Exit code of `--diff` when something changed.
const CHANGED: u8 = 1;

/// Arguments of `handoff fingerprint`.
#[derive(Debug, Args)]
#[command(after_help = "\
Exit codes:
  0   the fingerprint was printed; with --diff, nothing changed
  1   with --diff: something changed
  5   the fingerprint could not be taken, or BEFORE.json could not be read")]
pub struct FingerprintArgs {
    /// A directory of the worktree to fingerprint (the whole worktree is fingerprinted).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub cwd: Utf8PathBuf,
    /// Print JSON: the fingerprint with its per-path table (`entries`), which `--diff` reads
    /// back; with `--diff`, the git evidence (`changed`, `changedFiles`, before and after).
    #[arg(long)]
    pub json: bool,
    /// Compare with a fingerprint saved by `handoff fingerprint --json` and show what changed
    /// since.
    #[arg(long, value_name = "BEFORE.json")]
    pub diff: Option<Utf8PathBuf>,
    /// Fingerprint ignored files too (with --diff, the default is what BEFORE.json did).
    #[arg(long)]
    pub ignored: bool,
    /// Hash every file rather than trusting the index's stat data (slower; for benchmarks).
    #[arg(long)]
    pub full_hash: bool,
}

/// Runs `handoff fingerprint`; returns the exit code.
pub async fn main(args: FingerprintArgs) -> u8 {
    match tokio::task::spawn_blocking(move || run(&args)).await {
        Ok(code) => code,
        Err(err) => fail(&format!("the fingerprint task failed: {err}")),
    }
}

fn run(args: &FingerprintArgs) -> u8 {
    let before = match &args.diff {
        Some(path) => match load(path) {
            Ok(before) => Some(before),
            Err(message) => return fail(&message),
        },
        None => None,
    };
    let ignored = args.ignored || before.as_ref().is_some_and(|b| b.includes_ignored);
    // A saved fingerprint has no record of the stat data behind it, and the index's could have
    // been forged since: `--diff` reads and hashes every file, as a run's "after" does for
    // every file its record cannot vouch for.
    let workspace = GitWorkspace::new()
        .with_ignored(ignored)
        .with_stat_cache(!args.full_hash && before.is_none());
    let fingerprint = match workspace.fingerprint(&args.cwd) {
        Ok(fingerprint) => fingerprint,
        Err(err) => return fail(&err.to_string()),
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    let code = match before {
        None => {
            if args.json {
                let _ = serde_json::to_writer(&mut out, &DetailedFingerprint(fingerprint));
                let _ = writeln!(out);
            } else {
                let _ = print_fingerprint(&mut out, &fingerprint);
            }
            exit::OK
        }
        Some(before) => {
            let evidence = before.compare(&fingerprint);
            let code = if evidence.changed { CHANGED } else { exit::OK };
            if args.json {
                let _ = serde_json::to_writer(&mut out, &evidence);
                let _ = writeln!(out);
            } else {
                let _ = print_diff(&mut out, &evidence);
            }
            code
        }
    };
    let _ = out.flush();
    code
}

/// The largest saved fingerprint `--diff` reads (a repository of a million files is about a
/// tenth of it).
const MAX_SAVED_BYTES: usize = 1 << 30;

/// Reads a fingerprint saved by `handoff fingerprint --json`.
fn load(path: &Utf8PathBuf) -> Result<Fingerprint, String> {
    // A regular file only: a FIFO or a device would never end.
    let bytes = handoff_core::read_regular_file(path.as_str(), MAX_SAVED_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|_| format!("'{path}' is not UTF-8"))?;
    let detailed: DetailedFingerprint = serde_json::from_str(&text).map_err(|err| {
        format!(
            "'{path}' is not a fingerprint saved by `handoff fingerprint --json` \
             (with its `entries`): {err}"
        )
    })?;
    Ok(detailed.into())
}

fn fail(message: &str) -> u8 {
    let _ = writeln!(std::io::stderr(), "handoff fingerprint: {message}");
    exit::USAGE
}

/// The fingerprint as text: digest, counts, excluded refs, then the changes like
/// `git status --short` (`XY path`, `??` for untracked).
fn print_fingerprint(out: &mut impl Write, fp: &Fingerprint) -> std::io::Result<()> {
    writeln!(out, "digest   {}", fp.digest)?;
    writeln!(out, "root     {}", fp.root)?;
    writeln!(out, "head     {}", fp.head.as_deref().unwrap_or("(unborn)"))?;
    writeln!(
        out,
        "entries  {}{}",
        fp.entry_count,
        if fp.includes_ignored {
            " (ignored files included)"
        } else {
            ""
        }
    )?;
    let c = &fp.change_counts;
    writeln!(
        out,
        "changes  {} staged, {} unstaged, {} untracked, {} deleted",
        c.staged, c.unstaged, c.untracked, c.deleted
    )?;
    for name in &fp.excluded_refs {
        writeln!(
            out,
            "excluded {name} (checked out in another worktree of this repository)"
        )?;
    }
    for change in &fp.changes {
        let code = if change.untracked {
            "??".to_owned()
        } else {
            let x = if change.staged { 'M' } else { ' ' };
            let y = if change.deleted {
                'D'
            } else if change.unstaged {
                'M'
            } else {
                ' '
            };
            format!("{x}{y}")
        };
        writeln!(out, "{code} {}", change.path)?;
    }
    Ok(())
}

/// What changed: one line per entry (`+` new, `-` gone, `~` changed) with its states.
fn print_diff(out: &mut impl Write, evidence: &GitEvidence) -> std::io::Result<()> {
    let (Some(before), Some(after)) = (&evidence.before, &evidence.after) else {
        return Ok(());
    };
    if !evidence.changed {
        return writeln!(out, "unchanged  {}", after.digest);
    }
    writeln!(
        out,
        "changed    {} -> {} ({} entries)",
        before.digest,
        after.digest,
        evidence.changed_files.len()
    )?;
    for key in &evidence.changed_files {
        match (before.entries.get(key), after.entries.get(key)) {
            (None, Some(state)) => writeln!(out, "+ {key}\n    {state}")?,
            (Some(state), None) => writeln!(out, "- {key}\n    {state}")?,
            (Some(was), Some(now)) => writeln!(out, "~ {key}\n    was {was}\n    now {now}")?,
            (None, None) => writeln!(out, "~ {key}")?,
        }
    }
    Ok(())
}
