//! What a whole `handoff advice` run costs next to one `git status`: the run path (the "before"
//! fingerprint trusting the record the task store kept, the agent, the "after" fingerprint and
//! the record kept for the next run), in wall time and in peak memory over the whole process
//! tree (see [`super::tree`]).
//!
//! The agent is the fake Codex (`handoff-testkit`), which answers at once, so what is measured
//! is handoff's own work. The runs have a private `HOME` (so a private preflight cache and task
//! store), `PATH` = the fake agents and the system directories, and `bwrap`/`socat` stubs, as
//! in the hermetic tests. Two runs first, so that the preflight cache and the stored record
//! exist; each measured run's "before" must say it was verified by that `record`.
//!
//! `git status` is pinned to what it costs without help: `core.untrackedCache=false`,
//! `core.fsmonitor=false`, no system or global configuration, `-uall`, warm cache.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use handoff_testkit::FakeAgents;
use serde_json::Value;

use super::tree::{self, Invocation, TreeRun};

/// A whole advice run may take this many times one `git status`.
pub(super) const WALL_TARGET: f64 = 2.2;
/// Its process tree may peak at this many times `git status`'s peak.
pub(super) const MEMORY_TARGET: f64 = 1.1;
/// Memory is sampled in this many rounds (each the slower for the sampling).
const MEMORY_ROUNDS: usize = 3;

/// `git status` as the baseline: no untracked cache, no fsmonitor, every untracked file.
pub(super) const GIT_STATUS: [&str; 7] = [
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.fsmonitor=false",
    "status",
    "--porcelain=v2",
    "-uall",
];

/// `met` when `ratio` is within `target`, else `missed`.
pub(super) fn verdict(ratio: f64, target: f64) -> &'static str {
    if ratio <= target { "met" } else { "missed" }
}

/// The environment of `git` in the benchmarks: the system's `PATH`, no system or global
/// configuration.
pub(super) fn git_env() -> Vec<(OsString, OsString)> {
    vec![
        (
            "PATH".into(),
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        ),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

/// Prints, for each size, clean and with 1% of the files modified: the median wall time of a
/// whole advice run and of `git status` (`runs` interleaved rounds after the warm-up), and the
/// peak memory of each one's process tree (the largest of [`MEMORY_ROUNDS`] sampled rounds),
/// with the ratios against the targets.
pub(super) fn advice_runs(
    handoff: &Path,
    base: &Path,
    sizes: &[usize],
    runs: usize,
    time_v: bool,
) -> Result<()> {
    let root = base.join("run-sandbox");
    if root.exists() {
        std::fs::remove_dir_all(&root)?;
    }
    for dir in ["home", "tmp"] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    let agents = FakeAgents::install(&root).with_sandbox_tools();
    let instructions = root.join("instructions.txt");
    std::fs::write(&instructions, "Review the repository and advise.")?;
    let out = root.join("stdout");
    let advice_env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), agents.path_env()),
        ("HOME".into(), root.join("home").into()),
        ("TMPDIR".into(), root.join("tmp").into()),
        ("LANG".into(), "C.UTF-8".into()),
    ];
    let git_env = git_env();
    let git_args: Vec<OsString> = GIT_STATUS.iter().map(OsString::from).collect();
    let git = Path::new("git");

    println!(
        "\nrun: a whole `handoff advice` (fake Codex, preflight cached, the task store's record \
         trusted) next to `git status`:"
    );
    println!(
        "{:>8}  {:<11} {:>10} {:>11} {:>16}   {:<40} {:>16}",
        "files",
        "state",
        "advice",
        "git status",
        format!("wall (≤{WALL_TARGET}x)"),
        "tree peak MiB: advice (Σ PSS, 1 process) / git",
        format!("peak (≤{MEMORY_TARGET}x)"),
    );
    for &files in sizes {
        let repo = base.join(format!("repo-{files}"));
        eprintln!("==> run path on {files} files");
        super::generate(&repo, files)?;
        let advice_args: Vec<OsString> = [
            "advice",
            "--caller-harness",
            "claude",
            "--harness",
            "codex",
            "--cwd",
        ]
        .iter()
        .map(OsString::from)
        .chain([repo.clone().into_os_string()])
        .chain([
            "--instructions".into(),
            instructions.clone().into_os_string(),
        ])
        .collect();
        let advice = Invocation {
            name: "handoff advice",
            program: handoff,
            args: &advice_args,
            env: &advice_env,
            dir: &repo,
        };
        let status = Invocation {
            name: "git status",
            program: git,
            args: &git_args,
            env: &git_env,
            dir: &repo,
        };
        for state in ["clean", "1% modified"] {
            if state != "clean" {
                super::modify(&repo, files)?;
            }
            // The preflight cache and the stored record, then one of each warm.
            for _ in 0..2 {
                timed(&advice, &out)?;
                advice_result(&out, false)?;
            }
            timed(&status, &out)?;
            let (mut a, mut g) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                a.push(timed(&advice, &out)?);
                advice_result(&out, true)?;
                g.push(timed(&status, &out)?);
            }
            let (a, g) = (median(a), median(g));
            let wall = a.as_secs_f64() / g.as_secs_f64().max(1e-9);
            let memory = if time_v {
                let mut peaks: Option<(TreeRun, TreeRun)> = None;
                for _ in 0..MEMORY_ROUNDS {
                    let ra = tree::run(&advice, &out)?;
                    advice_result(&out, true)?;
                    let rg = tree::run(&status, &out)?;
                    peaks = Some(match peaks {
                        None => (ra, rg),
                        Some((pa, pg)) => (
                            if ra.peak_kib() > pa.peak_kib() {
                                ra
                            } else {
                                pa
                            },
                            if rg.peak_kib() > pg.peak_kib() {
                                rg
                            } else {
                                pg
                            },
                        ),
                    });
                }
                peaks
            } else {
                None
            };
            let (peaks, ratio) = match memory {
                Some((ra, rg)) => {
                    let ratio = ra.peak_kib() as f64 / (rg.peak_kib() as f64).max(1.0);
                    (
                        format!(
                            "{:.1} ({:.1}, {:.1}) / {:.1}",
                            mib(ra.peak_kib()),
                            mib(ra.pss_kib),
                            mib(ra.max_rss_kib),
                            mib(rg.peak_kib())
                        ),
                        format!("{ratio:.2}x {}", verdict(ratio, MEMORY_TARGET)),
                    )
                }
                None => ("-".to_owned(), "-".to_owned()),
            };
            println!(
                "{:>8}  {:<11} {:>8.3} s {:>9.3} s {:>16}   {:<40} {:>16}",
                files,
                state,
                a.as_secs_f64(),
                g.as_secs_f64(),
                format!("{wall:.2}x {}", verdict(wall, WALL_TARGET)),
                peaks,
                ratio,
            );
        }
        // The next section starts from a clean tree.
        super::generate(&repo, files)?;
    }
    println!(
        "(wall: median of {runs} interleaved runs after the warm-up; tree peak: the largest of \
         {MEMORY_ROUNDS} sampled runs, the larger of the sum of PSS over the process tree \
         sampled every {} ms and the largest single process's peak RSS from /usr/bin/time)",
        tree::PERIOD.as_millis()
    );
    Ok(())
}

/// Runs `what` once, unobserved: its wall time.
fn timed(what: &Invocation<'_>, stdout: &Path) -> Result<Duration> {
    let mut command = what.command(stdout)?;
    let start = Instant::now();
    let status = command
        .status()
        .with_context(|| format!("cannot run {}", what.name))?;
    let elapsed = start.elapsed();
    if !status.success() {
        bail!(
            "{} failed ({status}): {}",
            what.name,
            std::fs::read_to_string(stdout).unwrap_or_default()
        );
    }
    Ok(elapsed)
}

/// Checks the advice run whose result is in `stdout`: it succeeded and, when `trusted`, its
/// "before" trusted the stored record.
fn advice_result(stdout: &Path, trusted: bool) -> Result<()> {
    let text = std::fs::read_to_string(stdout)?;
    let result: Value = serde_json::from_str(text.trim())
        .with_context(|| format!("handoff advice printed no result: {text}"))?;
    if result["status"] != "succeeded" {
        bail!("the advice run did not succeed: {text}");
    }
    let verified = &result["git"]["before"]["verifiedBy"];
    if trusted && verified != "record" {
        bail!("the advice run's \"before\" was verified by {verified}, not the stored record");
    }
    Ok(())
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
