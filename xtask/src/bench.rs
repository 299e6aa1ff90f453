//! `cargo xtask bench`: the cost of `handoff fingerprint` and of a whole run next to `git status`.
//!
//! Generates repositories of 10,000 and 100,000 files (deterministic content, nested three levels
//! deep, committed), and prints, for a clean tree and with 1% of the files modified, the median
//! wall time of:
//!
//! - `handoff fingerprint --cwd DIR` (stat cache trusted, like git),
//! - `git status --porcelain=v2 -uall`, pinned to its unaided cost (`core.untrackedCache=false`,
//!   `core.fsmonitor=false`, no system or global configuration),
//! - a full-content hash of every file (`handoff fingerprint --full-hash`: the same walk, every
//!   tracked file read and hashed in parallel, which is what a fingerprint without the stat cache
//!   costs),
//!
//! each after one warm-up run, interleaved run by run, plus each one's peak RSS (through
//! `/usr/bin/time`, when it is there), and whether the fingerprint is within its target (no
//! slower than `git status`). Then the run path (see [`run`]): a whole `handoff advice` with the
//! fake agent, the preflight cached and the task store's record trusted, next to the same `git
//! status`, in wall time and in peak memory over the whole process tree (see [`tree`]), each
//! against its target. Then the panel (see [`panel`]): `handoff advice --harness
//! codex,claude,opencode` next to a standalone `handoff advice` on each of the three, on the
//! same repositories, clean and with 1% of the files modified, in wall time (the panel no
//! slower than 1.2 times the slowest of them) and, for information, in peak memory over the
//! process tree. Then how long a nested adviser takes to start on each repository (see
//! [`adviser`]): on the live worktree and on a snapshot. Then what the reaper adds to starting an
//! agent: `/bin/true` directly and under `handoff __reap`. Then what handoff's own sandbox adds
//! to a run. Then a run's own overhead on a 1-file repository (see [`overhead`]). Then, for
//! each real agent CLI installed, a review through handoff next to the CLI alone (see
//! [`real`]).
//!
//! Options: `--sizes 10000,100000`, `--runs N` (default 5), `--dir DIR` (where to generate the
//! repositories; default a temporary directory, removed afterwards), `--handoff PATH` (a built
//! `handoff` binary; default: `cargo build --release -p handoff-cli`), `--only SECTION`
//! (`fingerprint`, `run`, `panel`, `adviser`, `reaper`, `sandbox`, `overhead` or `real`: that
//! section alone).

mod adviser;
mod overhead;
mod panel;
mod real;
mod run;
mod tree;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// One measured command.
struct Tool {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
}

/// Median wall time and peak RSS (KiB) of one tool in one state.
struct Measure {
    median: Duration,
    peak_rss_kib: Option<u64>,
}

fn usage() -> String {
    format!(
        "usage: cargo xtask bench [--sizes 10000,100000] [--runs N] [--dir DIR] \
         [--handoff PATH] [--only {}]",
        SECTIONS.join("|")
    )
}

/// Entry point: `cargo xtask bench [--sizes A,B] [--runs N] [--dir DIR] [--handoff PATH]`.
pub fn bench(args: &[String]) -> Result<()> {
    let mut sizes = vec![10_000usize, 100_000];
    let mut runs = 5usize;
    let mut dir: Option<PathBuf> = None;
    let mut handoff: Option<PathBuf> = None;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--sizes" => {
                sizes = value()?
                    .split(',')
                    .map(|s| s.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .context("--sizes takes numbers separated by commas")?;
            }
            "--runs" => runs = value()?.parse().context("--runs takes a number")?,
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--handoff" => {
                // The runs start in the benchmark's repositories: a relative path would not
                // name the binary there.
                let path = PathBuf::from(value()?);
                handoff = Some(
                    std::path::absolute(&path)
                        .with_context(|| format!("cannot resolve {}", path.display()))?,
                );
            }
            "--only" => {
                let section = value()?;
                if !SECTIONS.contains(&section.as_str()) {
                    bail!("--only takes one of {}", SECTIONS.join(", "));
                }
                only = Some(section.clone());
            }
            "--help" | "-h" => {
                println!("{}", usage());
                return Ok(());
            }
            other => bail!("unknown argument {other:?}; {}", usage()),
        }
    }
    let section = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let runs = runs.max(1);
    let handoff = match handoff {
        Some(path) => path,
        None => build_handoff()?,
    };
    let time_v = Path::new("/usr/bin/time").is_file();
    if !time_v {
        eprintln!("note: /usr/bin/time not found; peak RSS is not measured");
    }
    let tmp;
    let base = match dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)?;
            dir
        }
        None => {
            tmp = tempfile::Builder::new()
                .prefix("handoff-bench-")
                .tempdir()?;
            tmp.path().to_owned()
        }
    };

    if section("fingerprint") {
        fingerprints(&handoff, &base, &sizes, runs, time_v)?;
    }
    if section("run") {
        run::advice_runs(&handoff, &base, &sizes, runs, time_v)?;
    }
    if section("panel") {
        panel::panel_runs(&handoff, &base, &sizes, runs, time_v)?;
    }
    if section("adviser") {
        adviser::adviser_start(&handoff, &base, &sizes, runs)?;
    }
    if section("reaper") {
        reaper_cost(&handoff, runs * 10)?;
    }
    if section("sandbox") {
        sandbox_cost(&handoff, runs * 4)?;
    }
    if section("overhead") {
        overhead::overhead(&handoff, &base, runs * 4)?;
    }
    if section("real") {
        real::real_runs(&handoff, runs)?;
    }
    Ok(())
}

/// The sections `--only` can name, in the order they run.
const SECTIONS: [&str; 8] = [
    "fingerprint",
    "run",
    "panel",
    "adviser",
    "reaper",
    "sandbox",
    "overhead",
    "real",
];

/// `handoff fingerprint` may take this many times one `git status`.
const FINGERPRINT_TARGET: f64 = 1.0;

/// `handoff fingerprint`, `git status` and a full hash, clean and with 1% of the files modified.
fn fingerprints(
    handoff: &Path,
    base: &Path,
    sizes: &[usize],
    runs: usize,
    time_v: bool,
) -> Result<()> {
    println!(
        "{:>8}  {:<11} {:>12} {:>12} {:>12} {:>14}   peak RSS MiB (handoff / git / full)",
        "files",
        "state",
        "handoff",
        "git status",
        "full hash",
        format!("vs git (≤{FINGERPRINT_TARGET}x)")
    );
    for &files in sizes {
        let repo = base.join(format!("repo-{files}"));
        eprintln!("==> generating {files} files in {}", repo.display());
        generate(&repo, files)?;
        let tools = [
            Tool {
                name: "handoff fingerprint",
                program: handoff.to_owned(),
                args: vec!["fingerprint".into(), "--cwd".into(), path_arg(&repo)?],
            },
            Tool {
                name: "git status",
                program: PathBuf::from("git"),
                args: run::GIT_STATUS.iter().map(|&a| a.to_owned()).collect(),
            },
            Tool {
                name: "full hash",
                program: handoff.to_owned(),
                args: vec![
                    "fingerprint".into(),
                    "--full-hash".into(),
                    "--cwd".into(),
                    path_arg(&repo)?,
                ],
            },
        ];
        for state in ["clean", "1% modified"] {
            if state != "clean" {
                modify(&repo, files)?;
            }
            let measures = measure_all(&tools, &repo, runs, time_v)?;
            let mib = |m: &Measure| {
                m.peak_rss_kib
                    .map_or_else(|| "-".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0))
            };
            let ratio =
                measures[0].median.as_secs_f64() / measures[1].median.as_secs_f64().max(1e-9);
            println!(
                "{:>8}  {:<11} {:>10.3} s {:>10.3} s {:>10.3} s {:>14}   {} / {} / {}",
                files,
                state,
                measures[0].median.as_secs_f64(),
                measures[1].median.as_secs_f64(),
                measures[2].median.as_secs_f64(),
                format!("{ratio:.2}x {}", run::verdict(ratio, FINGERPRINT_TARGET)),
                mib(&measures[0]),
                mib(&measures[1]),
                mib(&measures[2]),
            );
        }
    }
    println!(
        "(median of {runs} interleaved runs after one warm-up each; `vs git` is handoff / git status)"
    );
    Ok(())
}

/// What handoff's own sandbox costs a run: `handoff run` of a fake OpenCode review (no model,
/// no change) with a working `bwrap` on `PATH` and with a stub that makes the sandbox
/// unavailable, `runs` times each, interleaved. The difference is everything the sandbox adds:
/// proving `bwrap` once per process, the git paths to protect, the namespaces, the shell
/// wrapper and the attempt to import the run's session.
fn sandbox_cost(handoff: &Path, runs: usize) -> Result<()> {
    use handoff_testkit::FakeAgents;
    use handoff_testkit::keys::MODE;

    if !["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"]
        .iter()
        .any(|p| Path::new(p).exists())
    {
        println!("sandbox: bwrap is not installed; not measured");
        return Ok(());
    }
    let tmp = tempfile::Builder::new()
        .prefix("handoff-bench-sandbox-")
        .tempdir()?;
    let root = tmp.path();
    let confined = FakeAgents::install(&root.join("confined"));
    let unconfined = FakeAgents::install(&root.join("unconfined")).with_sandbox_tools();
    for agents in [&confined, &unconfined] {
        agents.set(MODE, "no-change");
    }
    let repo = handoff_testkit::ScratchRepo::new();
    let home = root.join("home");
    std::fs::create_dir_all(&home)?;
    let instructions = root.join("instructions.txt");
    std::fs::write(&instructions, "Review the change.")?;
    let once = |agents: &FakeAgents| -> Result<(Duration, String)> {
        let start = Instant::now();
        let out = Command::new(handoff)
            .env_clear()
            .env("PATH", agents.path_env())
            .env("HOME", &home)
            .env("LANG", "C.UTF-8")
            .args(["run", "--caller-harness", "claude", "--harness", "opencode"])
            .args(["--mode", "review", "--cwd"])
            .arg(repo.path())
            .arg("--instructions")
            .arg(&instructions)
            .stdin(Stdio::null())
            .output()?;
        let elapsed = start.elapsed();
        let json: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        if json["status"] != "succeeded" {
            bail!(
                "the fake OpenCode review did not succeed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let enforcement = json["policy"]["sandbox"]["enforcement"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        Ok((elapsed, enforcement))
    };
    let (_, with) = once(&confined)?;
    let (_, without) = once(&unconfined)?;
    if with != "handoff" || without != "none" {
        bail!("expected the sandbox with bwrap and none with the stub, got {with} / {without}");
    }
    let mut inside = Vec::with_capacity(runs);
    let mut outside = Vec::with_capacity(runs);
    for _ in 0..runs {
        inside.push(once(&confined)?.0);
        outside.push(once(&unconfined)?.0);
    }
    inside.sort();
    outside.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (i, o) = (inside[runs / 2], outside[runs / 2]);
    println!(
        "sandbox: a fake OpenCode review takes {:.1} ms unconfined, {:.1} ms under handoff's \
         sandbox: +{:.1} ms per run (median of {runs}; target ≤ 50 ms)",
        ms(o),
        ms(i),
        ms(i) - ms(o)
    );
    Ok(())
}

/// What running an agent under the reaper costs: `/bin/true` started directly and under
/// `handoff __reap` (told over its channel to hold nothing and read no prompt), `runs` times
/// each, interleaved.
fn reaper_cost(handoff: &Path, runs: usize) -> Result<()> {
    use std::io::Write;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;

    let truth = Path::new("/bin/true");
    let once = |reaped: bool| -> Result<Duration> {
        let start = Instant::now();
        let status = if reaped {
            let (mut ours, theirs) = UnixStream::pair()?;
            let mut child = Command::new(handoff)
                .args(["__reap", "--parent", &std::process::id().to_string()])
                .args(["--stdin", "none", "--"])
                .arg(truth)
                .stdin(Stdio::from(OwnedFd::from(theirs)))
                .spawn()?;
            ours.write_all(b"h")?;
            child.wait()?
        } else {
            Command::new(truth).status()?
        };
        if !status.success() {
            bail!("/bin/true failed ({status})");
        }
        Ok(start.elapsed())
    };
    let mut direct = Vec::with_capacity(runs);
    let mut reaped = Vec::with_capacity(runs);
    once(false)?;
    once(true)?;
    for _ in 0..runs {
        direct.push(once(false)?);
        reaped.push(once(true)?);
    }
    direct.sort();
    reaped.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (d, r) = (direct[runs / 2], reaped[runs / 2]);
    println!(
        "agent start: /bin/true {:.2} ms directly, {:.2} ms under the reaper: +{:.2} ms per run \
         (median of {runs})",
        ms(d),
        ms(r),
        ms(r) - ms(d)
    );
    Ok(())
}

/// Builds `handoff` in release mode and returns the binary's path.
fn build_handoff() -> Result<PathBuf> {
    eprintln!("==> cargo build --release -p handoff-cli");
    let out = crate::cargo()
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "handoff-cli",
            "--message-format=json",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo build")?;
    if !out.status.success() {
        bail!(
            "cargo build --release -p handoff-cli failed ({})",
            out.status
        );
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact"
            && msg["target"]["name"] == "handoff"
            && let Some(exe) = msg["executable"].as_str()
        {
            return Ok(PathBuf::from(exe));
        }
    }
    bail!("cargo did not report the handoff binary")
}

fn path_arg(path: &Path) -> Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("{} is not valid UTF-8", path.display()))
}

/// The repository-relative path of file `i`: three levels of directories, ten wide each.
fn file_path(i: usize) -> String {
    format!(
        "d{}/e{}/f{}/file{i}.txt",
        (i / 1000) % 10,
        (i / 100) % 10,
        (i / 10) % 10
    )
}

/// Deterministic content of file `i`: 200 to 4,199 bytes of text.
fn content(i: usize) -> Vec<u8> {
    let size = 200 + (i * 7919) % 4000;
    let line = format!("line of file {i} ").repeat(4) + "\n";
    line.as_bytes().iter().copied().cycle().take(size).collect()
}

/// Creates `repo` with `files` files, committed (kept if it is already there).
fn generate(repo: &Path, files: usize) -> Result<()> {
    let marker = repo.join(".git/bench-generated");
    if marker.is_file() {
        // Undo the modifications of an earlier run.
        git(repo, &["checkout", "-q", "--", "."])?;
        return Ok(());
    }
    if repo.exists() {
        std::fs::remove_dir_all(repo)?;
    }
    std::fs::create_dir_all(repo)?;
    git(repo, &["init", "-q", "-b", "main"])?;
    // No automatic `git gc` in the background: its `update-server-info` would write
    // `.git/info/refs` while a measured read-only run watches the repository (and block it).
    // The objects are packed once, in the foreground, below.
    git(repo, &["config", "gc.auto", "0"])?;
    for i in 0..files {
        let path = repo.join(file_path(i));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content(i))?;
    }
    // Past the second the files were written in, so that no index entry is racily clean.
    std::thread::sleep(Duration::from_millis(1100));
    git(repo, &["add", "-A"])?;
    git(
        repo,
        &[
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "-m",
            "bench",
        ],
    )?;
    git(repo, &["gc", "--quiet"])?;
    std::fs::write(marker, "")?;
    Ok(())
}

/// Modifies every hundredth file (1%).
fn modify(repo: &Path, files: usize) -> Result<()> {
    for i in (0..files).step_by(100) {
        let path = repo.join(file_path(i));
        let mut bytes = std::fs::read(&path)?;
        bytes.extend_from_slice(b"modified by the benchmark\n");
        std::fs::write(&path, bytes)?;
    }
    Ok(())
}

fn git(repo: &Path, args: &[&str]) -> Result<()> {
    let status = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("cannot run git {args:?}"))?;
    if !status.success() {
        bail!("git {args:?} failed ({status})");
    }
    Ok(())
}

/// One warm-up run of each tool, then `runs` rounds of one run each.
fn measure_all(tools: &[Tool], repo: &Path, runs: usize, time_v: bool) -> Result<Vec<Measure>> {
    for tool in tools {
        run_once(tool, repo, time_v)?;
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); tools.len()];
    let mut rss: Vec<Option<u64>> = vec![None; tools.len()];
    for _ in 0..runs {
        for (n, tool) in tools.iter().enumerate() {
            let (elapsed, peak) = run_once(tool, repo, time_v)?;
            times[n].push(elapsed);
            rss[n] = rss[n].max(peak);
        }
    }
    Ok(times
        .into_iter()
        .zip(rss)
        .map(|(mut t, peak_rss_kib)| {
            t.sort();
            Measure {
                median: t[t.len() / 2],
                peak_rss_kib,
            }
        })
        .collect())
}

/// Runs `tool` in `repo`: wall time, and peak RSS in KiB where `/usr/bin/time` reports it.
fn run_once(tool: &Tool, repo: &Path, time_v: bool) -> Result<(Duration, Option<u64>)> {
    let mut command = if time_v {
        let mut c = Command::new("/usr/bin/time");
        c.args(["-f", "%M"]).arg(&tool.program);
        c
    } else {
        Command::new(&tool.program)
    };
    command
        .args(&tool.args)
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let out = command
        .output()
        .with_context(|| format!("cannot run {}", tool.name))?;
    let elapsed = start.elapsed();
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            tool.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let peak = time_v
        .then(|| {
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .and_then(|l| l.trim().parse::<u64>().ok())
        })
        .flatten();
    Ok((elapsed, peak))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_content_are_deterministic() {
        assert_eq!(file_path(0), "d0/e0/f0/file0.txt");
        assert_eq!(file_path(12345), "d2/e3/f4/file12345.txt");
        assert_eq!(content(7), content(7));
        assert_eq!(content(0).len(), 200);
        assert!(content(1).len() > 200);
    }
}
