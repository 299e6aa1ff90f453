//! What a panel costs next to its members run alone: `handoff advice --harness
//! codex,claude,opencode` (one read-only question put to three agents at once: one "before"
//! fingerprint for all, the three agents, one "after" once every agent is gone) against a
//! standalone `handoff advice --harness X` for each X of the three, on the same repository with
//! the same instructions.
//!
//! The runs are set up as the run section's ([`super::run`]): the fake agents, which answer at
//! once, so that what is measured is handoff's own work, a private `HOME`, `PATH` and `TMPDIR`
//! ([`AdviceSandbox`]), the same generated repositories, clean and with 1% of the files
//! modified. Two rounds of all four first, so that every agent's preflight cache and the task
//! store's record exist; then the rounds are interleaved (the three standalone runs, then the
//! panel), and every measured run's "before" (each member's, for the panel) must have trusted
//! that record. A standalone result must have succeeded; the panel's line must be a
//! `handoff.panel.v1` that succeeded with one member per agent, each of which succeeded.
//!
//! Printed: each one's median wall time, and the panel's over the slowest standalone run's
//! against [`PANEL_TARGET`]; and, for information, the peak memory of the panel's process tree
//! next to the largest of the standalone runs' (see [`super::tree`]).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::run::{
    AdviceSandbox, MEMORY_ROUNDS, STATES, advice_result, check_advice, medians, mib, printed,
    timed, tree_peaks, verdict,
};
use super::tree::{self, Invocation};

/// A panel may take this many times the slowest of its members run alone.
pub(super) const PANEL_TARGET: f64 = 1.2;

/// The panel's members, each also measured alone.
const MEMBERS: [&str; 3] = ["codex", "claude", "opencode"];

/// Prints, for each size, clean and with 1% of the files modified: the median wall time of a
/// standalone advice run on each of [`MEMBERS`] and of the panel of all of them (`runs`
/// interleaved rounds after the warm-up), the panel's over the slowest standalone run's against
/// [`PANEL_TARGET`], and the peak memory of the panel's process tree next to the largest
/// standalone run's (each the largest of [`MEMORY_ROUNDS`] sampled rounds).
pub(super) fn panel_runs(
    handoff: &Path,
    base: &Path,
    sizes: &[usize],
    runs: usize,
    time_v: bool,
) -> Result<()> {
    let sandbox = AdviceSandbox::new(base, "panel-sandbox")?;
    let out = &sandbox.out;
    let panel_harness = MEMBERS.join(",");
    // Run `n` of a round: a standalone run of `MEMBERS[n]`, or the panel when `n` is past them.
    let check = |n: usize, trusted: bool| {
        if n < MEMBERS.len() {
            advice_result(out, trusted).with_context(|| format!("advice on {}", MEMBERS[n]))
        } else {
            panel_result(out, trusted)
        }
    };

    println!(
        "\npanel: `handoff advice --harness {panel_harness}` next to `handoff advice --harness X` \
         for each X (fake agents, preflight cached, the task store's record trusted):"
    );
    println!(
        "{:>8}  {:<11} {:>9} {:>9} {:>9} {:>9} {:>18}   tree peak MiB: panel / largest \
         standalone (agent)",
        "files",
        "state",
        MEMBERS[0],
        MEMBERS[1],
        MEMBERS[2],
        "panel",
        format!("vs slowest (≤{PANEL_TARGET}x)"),
    );
    for &files in sizes {
        let repo = base.join(format!("repo-{files}"));
        eprintln!("==> panel on {files} files");
        super::generate(&repo, files)?;
        let harnesses: Vec<&str> = MEMBERS
            .iter()
            .copied()
            .chain([panel_harness.as_str()])
            .collect();
        let names: Vec<String> = harnesses
            .iter()
            .map(|h| format!("handoff advice --harness {h}"))
            .collect();
        let args: Vec<Vec<OsString>> = harnesses
            .iter()
            .map(|h| sandbox.advice_args(h, &repo))
            .collect();
        let invocations: Vec<Invocation<'_>> = names
            .iter()
            .zip(&args)
            .map(|(name, args)| Invocation {
                name,
                program: handoff,
                args,
                env: &sandbox.env,
                dir: &repo,
            })
            .collect();
        let all: Vec<&Invocation<'_>> = invocations.iter().collect();
        for state in STATES {
            if state != STATES[0] {
                super::modify(&repo, files)?;
            }
            // Every agent's preflight cache and the stored record, then each one warm.
            for _ in 0..2 {
                for (n, what) in all.iter().enumerate() {
                    timed(what, out)?;
                    check(n, false)?;
                }
            }
            let walls = medians(&all, runs, out, |n| check(n, true))?;
            let (alone, panel) = walls.split_at(MEMBERS.len());
            let slowest = alone.iter().copied().max().unwrap_or_default();
            let ratio = panel[0].as_secs_f64() / slowest.as_secs_f64().max(1e-9);
            let memory = if time_v {
                let peaks = tree_peaks(&all, out, |n| check(n, true))?;
                let (alone, panel) = peaks.split_at(MEMBERS.len());
                let (agent, largest) = MEMBERS
                    .iter()
                    .zip(alone)
                    .max_by_key(|(_, run)| run.peak_kib())
                    .context("no standalone run was sampled")?;
                format!(
                    "{:.1} / {:.1} ({agent})",
                    mib(panel[0].peak_kib()),
                    mib(largest.peak_kib())
                )
            } else {
                "-".to_owned()
            };
            let s = |d: Duration| format!("{:.3} s", d.as_secs_f64());
            println!(
                "{:>8}  {:<11} {:>9} {:>9} {:>9} {:>9} {:>18}   {}",
                files,
                state,
                s(alone[0]),
                s(alone[1]),
                s(alone[2]),
                s(panel[0]),
                format!("{ratio:.2}x {}", verdict(ratio, PANEL_TARGET)),
                memory,
            );
        }
        // The next section starts from a clean tree.
        super::generate(&repo, files)?;
    }
    println!(
        "(wall: median of {runs} interleaved rounds after two warm-up rounds; `vs slowest` is the \
         panel / the slowest standalone run; tree peak: the largest of {MEMORY_ROUNDS} sampled \
         runs, as in the run section, every {} ms)",
        tree::PERIOD.as_millis()
    );
    Ok(())
}

/// Checks the panel whose line is in `stdout`: a `handoff.panel.v1` that succeeded (exit 0),
/// with one member per agent of [`MEMBERS`], each of which succeeded and, when `trusted`, whose
/// "before" trusted the stored record.
fn panel_result(stdout: &Path, trusted: bool) -> Result<()> {
    let panel = printed(stdout)?;
    if panel["schemaVersion"] != "handoff.panel.v1"
        || panel["status"] != "succeeded"
        || panel["exit"]["driver"] != 0
    {
        bail!("the panel did not succeed: {panel}");
    }
    let members = panel["members"]
        .as_array()
        .with_context(|| format!("the panel has no members: {panel}"))?;
    if members.len() != MEMBERS.len() {
        bail!(
            "the panel has {} members, not {}: {panel}",
            members.len(),
            MEMBERS.len()
        );
    }
    for agent in MEMBERS {
        let member = members
            .iter()
            .find(|m| m["target"]["harness"] == agent)
            .with_context(|| format!("the panel has no {agent} member: {panel}"))?;
        check_advice(member, trusted).with_context(|| format!("the panel's {agent} member"))?;
    }
    Ok(())
}
