//! The agent CLIs working in a worktree, found by their working directory in `/proc`.

use std::fs;

use camino::{Utf8Path, Utf8PathBuf};

use super::process::ancestors;

/// An agent CLI process whose working directory is inside a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkingAgent {
    /// Its process id.
    pub pid: u32,
    /// The executable name it was recognised by.
    pub name: String,
    /// Its working directory.
    pub cwd: Utf8PathBuf,
}

/// Interpreters an agent CLI may run under (`node /usr/bin/claude …`): for these the script's
/// name is looked at too.
const INTERPRETERS: [&str; 5] = ["node", "bun", "deno", "python3", "python"];

/// The agent processes whose working directory is `worktree` or inside it, recognised by the
/// basename of their program (or, under an interpreter, of its script) being one of `names`.
/// This process and its ancestors are left out: the agent that runs handoff is not "another
/// agent working in the worktree". Processes that can't be read are skipped. Empty outside
/// Linux.
pub fn agents_working_in(worktree: &Utf8Path, names: &[&str]) -> Vec<WorkingAgent> {
    if !crate::platform::PROC_FS {
        return Vec::new();
    }
    let mut skip: Vec<u32> = ancestors()
        .map(|a| a.into_iter().map(|(pid, _)| pid).collect())
        .unwrap_or_default();
    skip.push(std::process::id());
    let worktree = worktree
        .canonicalize_utf8()
        .unwrap_or_else(|_| worktree.to_owned());
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if skip.contains(&pid) {
            continue;
        }
        let Ok(cwd) = fs::read_link(format!("/proc/{pid}/cwd")) else {
            continue;
        };
        let Ok(cwd) = Utf8PathBuf::from_path_buf(cwd) else {
            continue;
        };
        if !cwd.starts_with(&worktree) {
            continue;
        }
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if let Some(name) = agent_name(&cmdline, names) {
            found.push(WorkingAgent {
                pid,
                name: name.to_owned(),
                cwd,
            });
        }
    }
    found.sort_by_key(|a| a.pid);
    found
}

/// The agent name a NUL-separated command line runs, if any.
pub(super) fn agent_name<'a>(cmdline: &[u8], names: &[&'a str]) -> Option<&'a str> {
    let mut args = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned());
    let base = |a: &str| a.rsplit('/').next().unwrap_or(a).to_owned();
    let program = base(&args.next()?);
    let pick = |b: &str| names.iter().copied().find(|n| *n == b);
    if let Some(n) = pick(&program) {
        return Some(n);
    }
    if INTERPRETERS.contains(&program.as_str()) {
        let script = args.find(|a| !a.starts_with('-'))?;
        return pick(&base(&script));
    }
    None
}
