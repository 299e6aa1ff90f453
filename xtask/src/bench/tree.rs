//! The peak memory of a whole process tree: a command and everything it starts (handoff's
//! reaper, the agent, a sandbox), measured from outside.
//!
//! Two figures, both lower bounds of what the tree held resident at its peak:
//!
//! - the sum over the tree of each process's PSS (`/proc/<pid>/smaps_rollup`), sampled every
//!   [`PERIOD`]: pages shared between processes are divided among them, so a page the tree
//!   shares with itself (the binary mapped by handoff and by its reaper, a forked child's pages
//!   before it execs) counts once, and a page shared with processes outside the tree (libc)
//!   counts for its share; a child spawned with `CLONE_VM` (`posix_spawn`) that has not exec'd
//!   yet runs in its parent's address space and counts once. The tree is walked from the
//!   command's pid through `/proc/<pid>/task/<tid>/children` at every sample. A peak shorter
//!   than the period can be missed.
//! - the largest single process's peak RSS, from GNU time's `%M` (`wait4`'s `ru_maxrss`: the
//!   maximum over the process and each of its waited-for descendants, one at a time, never a
//!   sum), exact but blind to processes that run side by side.
//!
//! The tree's peak is reported as the larger of the two. A single process with no children
//! (`git status`) gets its own peak RSS, as `/usr/bin/time` has always reported it.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// How often the tree is sampled.
pub(super) const PERIOD: Duration = Duration::from_millis(2);

/// One run of a command, with its tree's memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct TreeRun {
    /// The largest sampled sum of PSS over the tree, KiB.
    pub(super) pss_kib: u64,
    /// The largest single process's peak RSS (GNU time's `%M`), KiB.
    pub(super) max_rss_kib: u64,
}

impl TreeRun {
    /// The tree's peak: the larger of the two lower bounds, KiB.
    pub(super) fn peak_kib(&self) -> u64 {
        self.pss_kib.max(self.max_rss_kib)
    }
}

/// What to run: a program, its arguments, its whole environment (nothing is inherited) and its
/// working directory.
pub(super) struct Invocation<'a> {
    /// For messages.
    pub(super) name: &'a str,
    pub(super) program: &'a Path,
    pub(super) args: &'a [OsString],
    pub(super) env: &'a [(OsString, OsString)],
    pub(super) dir: &'a Path,
}

impl Invocation<'_> {
    /// The command, stdin closed, stdout into `stdout`.
    pub(super) fn command(&self, stdout: &Path) -> Result<Command> {
        let mut command = Command::new(self.program);
        self.prepare(&mut command, stdout)?;
        Ok(command)
    }

    fn prepare(&self, command: &mut Command, stdout: &Path) -> Result<()> {
        command
            .args(self.args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(stdout)?);
        Ok(())
    }
}

/// Runs `what` under `/usr/bin/time -f %M`, sampling its tree until it exits; its stdout goes
/// to `stdout`. Fails when it fails.
pub(super) fn run(what: &Invocation<'_>, stdout: &Path) -> Result<TreeRun> {
    let mut timed = Command::new("/usr/bin/time");
    timed.args(["-f", "%M"]).arg(what.program);
    what.prepare(&mut timed, stdout)?;
    let stderr = tempfile::NamedTempFile::new()?;
    timed.stderr(stderr.reopen()?);
    let mut child = timed
        .spawn()
        .with_context(|| format!("cannot run {}", what.name))?;
    let time_pid = child.id();
    let mut pss_kib = 0;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        pss_kib = pss_kib.max(sample(time_pid));
        std::thread::sleep(PERIOD);
    };
    let err = std::fs::read_to_string(stderr.path()).unwrap_or_default();
    if !status.success() {
        bail!("{} failed ({status}): {err}", what.name);
    }
    let max_rss_kib = err
        .lines()
        .last()
        .and_then(|l| l.trim().parse::<u64>().ok())
        .with_context(|| {
            format!(
                "/usr/bin/time reported no peak RSS for {}: {err}",
                what.name
            )
        })?;
    Ok(TreeRun {
        pss_kib,
        max_rss_kib,
    })
}

/// The sum of PSS, KiB, over the descendants of `root` alive now (GNU time's own few hundred
/// KiB are not the command's). A child spawned with `CLONE_VM` (`posix_spawn`, `vfork`) runs
/// in its parent's address space until it execs: `/proc` shows it with the parent's mappings
/// (the same address range) and the parent's whole PSS, so it is counted once, with the
/// parent. A forked child before its exec has its own copy-on-write address space, whose
/// shared pages PSS already splits between the two.
fn sample(root: u32) -> u64 {
    let mut sum = 0;
    for (pid, parent) in tree(root) {
        let Some(memory) = Rollup::of(pid) else {
            continue;
        };
        let shares_parent = parent
            .and_then(Rollup::of)
            .is_some_and(|p| p.range == memory.range && memory.pss_kib * 4 >= p.pss_kib * 3);
        if pid != root && !shares_parent {
            sum += memory.pss_kib;
        }
    }
    sum
}

/// `pid` and all its descendants alive now, each with its parent (`None` for `pid`). Read from
/// `/proc/<pid>/task/<tid>/children` where the kernel has it (`CONFIG_PROC_CHILDREN`), else
/// from every process's parent in `/proc/<pid>/stat`.
fn tree(pid: u32) -> Vec<(u32, Option<u32>)> {
    let children_file = Path::new("/proc/self/task")
        .read_dir()
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|t| t.ok())
        .is_some_and(|t| t.path().join("children").exists());
    let parents = if children_file { Vec::new() } else { parents() };
    let mut all = vec![(pid, None)];
    let mut i = 0;
    while i < all.len() {
        let parent = all[i].0;
        if children_file {
            if let Ok(dir) = std::fs::read_dir(format!("/proc/{parent}/task")) {
                for task in dir.flatten() {
                    if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                        all.extend(
                            text.split_whitespace()
                                .filter_map(|p| p.parse::<u32>().ok())
                                .map(|child| (child, Some(parent))),
                        );
                    }
                }
            }
        } else {
            all.extend(
                parents
                    .iter()
                    .filter(|&&(_, p)| p == parent)
                    .map(|&(child, _)| (child, Some(parent))),
            );
        }
        i += 1;
    }
    all
}

/// Every process alive now with its parent, from `/proc/<pid>/stat` (the fourth field, after
/// the parenthesised command name, which may itself hold spaces and parentheses).
fn parents() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid = after.split_whitespace().nth(1)?.parse::<u32>().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// What `/proc/<pid>/smaps_rollup` says of a process.
struct Rollup {
    /// The address range its mappings span (the first field).
    range: String,
    /// Its proportional set size, KiB.
    pss_kib: u64,
}

impl Rollup {
    /// `None` when the process is gone (or a kernel thread).
    fn of(pid: u32) -> Option<Rollup> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
        let range = text.split_whitespace().next()?.to_owned();
        let pss_kib = text
            .lines()
            .find_map(|line| line.strip_prefix("Pss:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())?;
        Some(Rollup { range, pss_kib })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_of_this_process_holds_its_children() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        let me = std::process::id();
        let all = tree(me);
        assert_eq!(all[0], (me, None));
        assert!(all.contains(&(child.id(), Some(me))), "{all:?}");
        assert!(Rollup::of(me).unwrap().pss_kib > 0);
        let parents = parents();
        assert!(parents.contains(&(child.id(), me)), "{parents:?}");
        assert!(sample(me) > 0);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
