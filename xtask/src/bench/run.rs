//! What a whole `handoff advice` run costs next to one `git status`: the run path (the "before"
//! fingerprint trusting the record the task store kept, the agent, the "after" fingerprint and
//! the record kept for the next run), in wall time and in peak memory over the whole process
//! tree (see [`super::tree`]).
//!
//! The agent is the fake Codex (`handoff-testkit`), which answers at once, so what is measured
//! is handoff's own work. The runs have a private `HOME` (so a private preflight cache and task
//! store), `PATH` = the fake agents and the system directories, and `bwrap`/`socat` stubs, as
//! in the hermetic tests ([`AdviceSandbox`], which the panel section shares). Two runs first,
//! so that the preflight cache and the stored record exist; each measured run's "before" must
//! say it was verified by that `record`.
//!
//! `git status` is pinned to what it costs without help: `core.untrackedCache=false`,
//! `core.fsmonitor=false`, no system or global configuration, `-uall`, warm cache.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
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
pub(super) const MEMORY_ROUNDS: usize = 3;
/// The states of the repository each size is measured in, in order: as committed, then with
/// every hundredth file modified ([`super::modify`]).
pub(super) const STATES: [&str; 2] = ["clean", "1% modified"];

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

/// A private world for `handoff advice` runs with the fake agents: its own `HOME` (so its own
/// preflight cache and task store) and `TMPDIR`, `PATH` = the fake agents (every agent name,
/// with `bwrap`/`socat` stubs, as in the hermetic tests) and the system directories, one
/// instructions file, and one file every run's stdout goes to.
pub(super) struct AdviceSandbox {
    /// The instructions every run is given.
    instructions: PathBuf,
    /// Where each run's stdout (its result line) goes; read back by the checks.
    pub(super) out: PathBuf,
    /// The whole environment of every run.
    pub(super) env: Vec<(OsString, OsString)>,
    /// The fake agents the runs start.
    agents: FakeAgents,
}

impl AdviceSandbox {
    /// Creates `base/name` afresh (removing what an earlier run left there) and installs the
    /// fake agents in it.
    pub(super) fn new(base: &Path, name: &str) -> Result<AdviceSandbox> {
        let root = base.join(name);
        if root.exists() {
            std::fs::remove_dir_all(&root)
                .with_context(|| format!("cannot remove {}", root.display()))?;
        }
        for dir in ["home", "tmp"] {
            let dir = root.join(dir);
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let agents = FakeAgents::install(&root).with_sandbox_tools();
        let instructions = root.join("instructions.txt");
        std::fs::write(&instructions, "Review the repository and advise.")
            .with_context(|| format!("cannot write {}", instructions.display()))?;
        let env = vec![
            ("PATH".into(), agents.path_env()),
            ("HOME".into(), root.join("home").into()),
            ("TMPDIR".into(), root.join("tmp").into()),
            ("LANG".into(), "C.UTF-8".into()),
        ];
        Ok(AdviceSandbox {
            instructions,
            out: root.join("stdout"),
            env,
            agents,
        })
    }

    /// The fake agent installed as `exe`.
    pub(super) fn agent(&self, exe: &str) -> PathBuf {
        self.agents.bin(exe)
    }

    /// The arguments of `handoff advice` on `repo` from Claude Code to `harness` (one agent,
    /// or several separated by commas: a panel), with the sandbox's instructions.
    pub(super) fn advice_args(&self, harness: &str, repo: &Path) -> Vec<OsString> {
        [
            "advice",
            "--caller-harness",
            "claude",
            "--harness",
            harness,
            "--cwd",
        ]
        .iter()
        .map(OsString::from)
        .chain([
            repo.as_os_str().to_owned(),
            "--instructions".into(),
            self.instructions.as_os_str().to_owned(),
        ])
        .collect()
    }
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
    let sandbox = AdviceSandbox::new(base, "run-sandbox")?;
    let out = &sandbox.out;
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
        let advice_args = sandbox.advice_args("codex", &repo);
        let advice = Invocation {
            name: "handoff advice",
            program: handoff,
            args: &advice_args,
            env: &sandbox.env,
            dir: &repo,
        };
        let status = Invocation {
            name: "git status",
            program: git,
            args: &git_args,
            env: &git_env,
            dir: &repo,
        };
        let both = [&advice, &status];
        // Only the advice run prints a result to check.
        let check = |n: usize| {
            if n == 0 {
                advice_result(out, true)
            } else {
                Ok(())
            }
        };
        for state in STATES {
            if state != STATES[0] {
                super::modify(&repo, files)?;
            }
            // The preflight cache and the stored record, then one of each warm.
            for _ in 0..2 {
                timed(&advice, out)?;
                advice_result(out, false)?;
            }
            timed(&status, out)?;
            let walls = medians(&both, runs, out, check)?;
            let (a, g) = (walls[0], walls[1]);
            let wall = a.as_secs_f64() / g.as_secs_f64().max(1e-9);
            let memory = if time_v {
                Some(tree_peaks(&both, out, check)?)
            } else {
                None
            };
            let (peaks, ratio) = match memory.as_deref() {
                Some(&[ra, rg]) => {
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
                _ => ("-".to_owned(), "-".to_owned()),
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

/// `runs` rounds, each running every one of `whats` once, in order, unobserved, and checking
/// each run with `check` (given the run's index in `whats`, its stdout in `out`): the median
/// wall time of each.
pub(super) fn medians(
    whats: &[&Invocation<'_>],
    runs: usize,
    out: &Path,
    mut check: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<Duration>> {
    let mut times = vec![Vec::with_capacity(runs); whats.len()];
    for _ in 0..runs.max(1) {
        for (n, what) in whats.iter().enumerate() {
            times[n].push(timed(what, out)?);
            check(n)?;
        }
    }
    Ok(times.into_iter().map(median).collect())
}

/// [`MEMORY_ROUNDS`] rounds, each running every one of `whats` once, in order, with its tree
/// sampled ([`tree::run`]) and its run checked with `check` as in [`medians`]: the run of each
/// whose tree peaked highest.
pub(super) fn tree_peaks(
    whats: &[&Invocation<'_>],
    out: &Path,
    mut check: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<TreeRun>> {
    let mut peaks: Vec<Option<TreeRun>> = vec![None; whats.len()];
    for _ in 0..MEMORY_ROUNDS {
        for (n, what) in whats.iter().enumerate() {
            let run = tree::run(what, out)?;
            check(n)?;
            if peaks[n].is_none_or(|p| run.peak_kib() > p.peak_kib()) {
                peaks[n] = Some(run);
            }
        }
    }
    peaks
        .into_iter()
        .map(|p| p.context("no memory round was run"))
        .collect()
}

/// Runs `what` once, unobserved: its wall time.
pub(super) fn timed(what: &Invocation<'_>, stdout: &Path) -> Result<Duration> {
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
pub(super) fn advice_result(stdout: &Path, trusted: bool) -> Result<()> {
    check_advice(&printed(stdout)?, trusted)
}

/// The one JSON line `handoff` printed into `stdout`.
pub(super) fn printed(stdout: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(stdout)
        .with_context(|| format!("cannot read {}", stdout.display()))?;
    serde_json::from_str(text.trim())
        .with_context(|| format!("handoff advice printed no result: {text}"))
}

/// Checks one advice result (a run's, or a panel member's): it succeeded and, when `trusted`,
/// its "before" trusted the stored record.
pub(super) fn check_advice(result: &Value, trusted: bool) -> Result<()> {
    if result["status"] != "succeeded" {
        bail!("the advice run did not succeed: {result}");
    }
    let verified = &result["git"]["before"]["verifiedBy"];
    if trusted && verified != "record" {
        bail!("the advice run's \"before\" was verified by {verified}, not the stored record");
    }
    Ok(())
}

/// The median of `times` (the upper one of an even count); zero when there are none.
pub(super) fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// `kib` KiB in MiB.
pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
