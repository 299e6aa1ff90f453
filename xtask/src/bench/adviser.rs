//! How long a nested adviser takes to start: from the supervisor admitting the request to the
//! adviser's process running, on the live worktree and on a snapshot of it.
//!
//! Drives the `handoff` binary as the hermetic tests do, with the fake agents: a
//! `run-with-advice` review on OpenCode (a worker with a shell, unconfined) whose worker asks
//! OpenCode for advice once. With `--bash false` that adviser writes nowhere and works on the
//! live worktree; with a shell it could write anywhere and gets a snapshot. The start is the
//! time between the nested node's `startedAt` in the root's DAG (stamped at admission) and the
//! adviser's invocation record (written by the fake agent as its process starts, its name
//! carrying the wall-clock nanoseconds). Both are wall clocks of this machine; the DAG's has
//! millisecond resolution.
//!
//! The live view still fingerprints the worktree before the adviser starts (the evidence that
//! nothing changed during the call), so `handoff fingerprint` of the same worktree is printed
//! next to it: what is left of the start once that is taken away is planning, the preflight
//! cache and spawning under the reaper.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use handoff_testkit::FakeAgents;
use handoff_testkit::keys::{ADVICE, ADVICE_ARGS};
use serde_json::Value;

/// The line every adviser's prompt has.
const ADVICE_PROMPT: &str = "Operation: advice\n";

/// A private HOME and fake agents for the advice runs.
struct Agents {
    root: PathBuf,
    agents: FakeAgents,
    records: PathBuf,
    instructions: PathBuf,
}

impl Agents {
    fn new(base: &Path) -> Result<Agents> {
        let root = base.join("advice-sandbox");
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        std::fs::create_dir_all(root.join("home/.cache"))?;
        // A `bwrap` stub keeps OpenCode out of handoff's own sandbox, so that the fake adviser
        // can write its start record and a shell makes it an adviser that could write.
        let agents = FakeAgents::install(&root).with_sandbox_tools();
        let records = agents.record_dir();
        agents.set(ADVICE, "opencode");
        let instructions = root.join("instructions.txt");
        std::fs::write(
            &instructions,
            "Review the repository; ask for advice once before you answer.",
        )?;
        Ok(Agents {
            root,
            agents,
            records,
            instructions,
        })
    }

    /// One root run whose worker asks for advice once: how long the adviser took to start
    /// after its admission. `live`: the adviser has no shell (live view), else a snapshot.
    fn start(&self, handoff: &Path, repo: &Path, live: bool) -> Result<Duration> {
        for entry in std::fs::read_dir(&self.records)? {
            std::fs::remove_file(entry?.path())?;
        }
        if live {
            self.agents.set(ADVICE_ARGS, "--bash false");
        } else {
            self.agents.unset(ADVICE_ARGS);
        }
        let mut path = self.agents.bin_dir.clone().into_os_string();
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()));
        let out = Command::new(handoff)
            .args([
                "run-with-advice",
                "--caller-harness",
                "codex",
                "--harness",
                "opencode",
                "--mode",
                "review",
            ])
            .arg("--cwd")
            .arg(repo)
            .arg("--instructions")
            .arg(&self.instructions)
            .env("PATH", path)
            .env("HOME", self.root.join("home"))
            .env("XDG_CACHE_HOME", self.root.join("home/.cache"))
            .env_remove("HANDOFF_SUPERVISOR_CONTEXT")
            .stdin(Stdio::null())
            .output()
            .context("cannot run handoff run-with-advice")?;
        let result: Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "handoff printed no result: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        let view = if live { "live" } else { "snapshot" };
        let node = result["dag"]["nodes"]
            .as_array()
            .and_then(|nodes| nodes.get(1))
            .with_context(|| format!("the worker asked for no advice: {result}"))?;
        if node["state"] != "succeeded" || node["view"] != view {
            bail!("the adviser did not succeed on a {view} view: {node}");
        }
        let admitted = node["startedAt"]
            .as_str()
            .and_then(unix_ms)
            .with_context(|| format!("the node has no startedAt: {node}"))?;
        let started = self.adviser_started()?;
        let ms = (started as f64 / 1e6 - admitted as f64).max(0.0);
        Ok(Duration::from_secs_f64(ms / 1000.0))
    }

    /// When the adviser's process started (Unix nanoseconds), from its record's name.
    fn adviser_started(&self) -> Result<u128> {
        for entry in std::fs::read_dir(&self.records)? {
            let path = entry?.path();
            let Some(nanos) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("invocation-")?.strip_suffix(".json"))
                .and_then(|stem| stem.split_once('-'))
                .and_then(|(_, nanos)| nanos.parse::<u128>().ok())
            else {
                continue;
            };
            let record: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
            let prompt_has = |v: &Value| v.as_str().is_some_and(|s| s.contains(ADVICE_PROMPT));
            let argv = record["argv"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            if argv.iter().any(prompt_has) || prompt_has(&record["stdin"]) {
                return Ok(nanos);
            }
        }
        bail!("no adviser was recorded in {}", self.records.display())
    }
}

/// Prints, for each repository size, the median start of an adviser on the live worktree and
/// on a snapshot, and the median `handoff fingerprint` of that worktree; `runs` rounds after a
/// warm-up round, interleaved.
pub(super) fn adviser_start(
    handoff: &Path,
    base: &Path,
    sizes: &[usize],
    runs: usize,
) -> Result<()> {
    let agents = Agents::new(base)?;
    println!(
        "\nadviser start (admission to the adviser's process running; an OpenCode adviser of an \
         OpenCode worker):"
    );
    println!(
        "{:>8}  {:>12} {:>12} {:>24}",
        "files", "live view", "snapshot", "fingerprint of worktree"
    );
    for &files in sizes {
        let repo = base.join(format!("repo-{files}"));
        eprintln!("==> adviser start on {files} files");
        super::generate(&repo, files)?;
        agents.start(handoff, &repo, true)?;
        agents.start(handoff, &repo, false)?;
        let fingerprint = || -> Result<Duration> {
            let start = Instant::now();
            let status = Command::new(handoff)
                .arg("fingerprint")
                .arg("--cwd")
                .arg(&repo)
                .stdout(Stdio::null())
                .status()?;
            if !status.success() {
                bail!("handoff fingerprint failed ({status})");
            }
            Ok(start.elapsed())
        };
        let (mut live, mut snapshot, mut fingerprints) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            live.push(agents.start(handoff, &repo, true)?);
            snapshot.push(agents.start(handoff, &repo, false)?);
            fingerprints.push(fingerprint()?);
        }
        let median = |mut v: Vec<Duration>| {
            v.sort();
            v[v.len() / 2].as_secs_f64()
        };
        println!(
            "{:>8}  {:>10.3} s {:>10.3} s {:>22.3} s",
            files,
            median(live),
            median(snapshot),
            median(fingerprints)
        );
    }
    println!(
        "(median of {runs} interleaved runs after one warm-up each; the live view fingerprints \
         the worktree before its adviser starts, the snapshot copies it and fingerprints the copy)"
    );
    Ok(())
}

/// `2025-01-31T12:34:56.789Z` as milliseconds since the Unix epoch.
fn unix_ms(at: &str) -> Option<i64> {
    let num = |range: std::ops::Range<usize>| at.get(range)?.parse::<i64>().ok();
    if at.len() != 24 || !at.ends_with('Z') {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    // Days from the civil date (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_timestamps_convert_to_unix_milliseconds() {
        assert_eq!(unix_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(unix_ms("2000-03-01T00:00:01.250Z"), Some(951_868_801_250));
        assert_eq!(unix_ms("2024-02-29T23:59:59.999Z"), Some(1_709_251_199_999));
        assert_eq!(unix_ms("2024-02-29"), None);
    }
}
