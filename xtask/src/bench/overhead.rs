//! A run's own overhead: a whole `handoff advice` with the fake Codex on a repository of one
//! committed file (so nothing is spent on the worktree), the preflight cached and the task
//! store's record trusted, next to the fake agent started alone. The difference is what handoff
//! adds to every run: its start, the request, the reaper, the run directory, the stat record,
//! the task store, the result.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::run::{AdviceSandbox, advice_result, median, timed};
use super::tree::Invocation;

/// What handoff may add to a run of the fake agent (median).
const TARGET: Duration = Duration::from_millis(25);

/// Prints the median of `runs` whole runs and of `runs` starts of the fake agent alone,
/// interleaved, and their difference against [`TARGET`].
pub(super) fn overhead(handoff: &Path, base: &Path, runs: usize) -> Result<()> {
    let sandbox = AdviceSandbox::new(base, "overhead-sandbox")?;
    let repo = base.join("repo-1");
    super::generate(&repo, 1)?;
    let out = &sandbox.out;
    let args = sandbox.advice_args("codex", &repo);
    let advice = Invocation {
        name: "handoff advice",
        program: handoff,
        args: &args,
        env: &sandbox.env,
        dir: &repo,
    };
    let fake = sandbox.agent("codex");
    let fake_args: Vec<OsString> = vec!["--version".into()];
    let agent = Invocation {
        name: "the fake agent alone",
        program: &fake,
        args: &fake_args,
        env: &sandbox.env,
        dir: &repo,
    };
    // The preflight cache and the stored record, then one of each warm.
    for _ in 0..2 {
        timed(&advice, out)?;
        advice_result(out, false)?;
    }
    timed(&agent, out)?;
    let mut whole = Vec::with_capacity(runs);
    let mut alone = Vec::with_capacity(runs);
    for _ in 0..runs {
        whole.push(timed(&advice, out)?);
        advice_result(out, true)?;
        alone.push(timed(&agent, out)?);
    }
    let (w, a) = (median(whole), median(alone));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let added = w.saturating_sub(a);
    println!(
        "\noverhead: a whole `handoff advice` on a 1-file repository takes {:.1} ms, the fake \
         agent alone {:.1} ms: +{:.1} ms per run (median of {runs}; target ≤ {} ms: {})",
        ms(w),
        ms(a),
        ms(added),
        TARGET.as_millis(),
        if added <= TARGET { "met" } else { "missed" }
    );
    Ok(())
}
