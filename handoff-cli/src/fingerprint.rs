//! `handoff fingerprint`: the git fingerprint of a worktree, for scripting and benchmarking, or
//! what changed since a saved one.
//!
//! Exit codes: 0 success (with `--diff`: nothing changed), 1 with `--diff` when something changed,
//! 5 when the fingerprint cannot be taken or the saved one cannot be read.

use std::io::{BufWriter, Write};

use camino::Utf8PathBuf;
use clap::Args;
use handoff_core::{Fingerprint, GitEvidence, Masker, TaskStore, Workspace, exit};
use handoff_git::{DetailedFingerprint, GitWorkspace, Judged, Kept};

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
    /// back (what it judges by is kept in the task store); with `--diff`, the git evidence
    /// (`changed`, `changedFiles`, before and after).
    #[arg(long)]
    pub json: bool,
    /// Compare with a fingerprint saved by `handoff fingerprint --json` and show what changed
    /// since, judged as a run's "after" is by what the task store kept when it was saved (else
    /// every file is hashed).
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
        Some(path) => match handoff_git::read_saved(path) {
            Ok(before) => Some(before),
            Err(err) => return fail(&err.to_string()),
        },
        None => None,
    };
    let ignored = args.ignored || before.as_ref().is_some_and(|b| b.includes_ignored);
    let workspace = GitWorkspace::new()
        .with_ignored(ignored)
        .with_stat_cache(!args.full_hash);
    let mut out = BufWriter::new(std::io::stdout().lock());
    let code = match before {
        None if args.json => {
            // What a later `--diff` judges by is kept in the task store.
            let store = crate::open_store();
            let masker = Masker::new(crate::known_secrets());
            let store_ref = store
                .as_ref()
                .map(|s| s as &dyn TaskStore)
                .map_err(Clone::clone);
            let (fingerprint, kept) =
                match handoff_git::save(&workspace, &args.cwd, store_ref, &masker) {
                    Ok(saved) => saved,
                    Err(err) => return fail(&err.to_string()),
                };
            if let Kept::No(why) = kept {
                warn(&format!(
                    "not kept in the task store ({why}): a later --diff with it hashes every \
                     file and judges ignore rules and objects as they are then"
                ));
            }
            let _ = serde_json::to_writer(&mut out, &DetailedFingerprint(fingerprint));
            let _ = writeln!(out);
            exit::OK
        }
        None => match workspace.fingerprint(&args.cwd) {
            Ok(fingerprint) => {
                let _ = print_fingerprint(&mut out, &fingerprint);
                exit::OK
            }
            Err(err) => return fail(&err.to_string()),
        },
        Some(before) => {
            let store = crate::open_store();
            let store_ref = store
                .as_ref()
                .map(|s| s as &dyn TaskStore)
                .map_err(Clone::clone);
            let (evidence, judged) =
                match handoff_git::diff(&workspace, &args.cwd, &before, store_ref) {
                    Ok(diff) => diff,
                    Err(err) => return fail(&err.to_string()),
                };
            if let Judged::Hashed(why) = judged {
                warn(&format!(
                    "{why}: every file was hashed, and ignore rules and objects are judged as \
                     they are now"
                ));
            }
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

fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "handoff fingerprint: {message}");
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
