//! Directories a handoff process left behind when it could not clean up (SIGKILL, a crash).
//!
//! Every private directory a run makes under the temporary directory is named after the
//! process that made it: `handoff-run-<pid>-…` and `handoff-snapshots-<pid>-…`. When a root
//! run starts, those of this user whose process no longer exists are removed: they may hold an
//! agent's MCP configuration or a snapshot of a worktree. A directory whose process still runs
//! — or whose pid was reused by another process — is left alone.

use std::os::unix::fs::MetadataExt;

use camino::Utf8Path;

/// The prefixes of the directories runs make, each followed by `<pid>-`.
pub(crate) const PREFIXES: [&str; 2] = ["handoff-run-", "handoff-snapshots-"];

/// The prefix of a directory this process makes: `<kind><pid>-`.
pub(crate) fn prefix_of(kind: &str) -> String {
    format!("{kind}{}-", std::process::id())
}

/// Removes the directories under `base` that dead handoff processes of this user left; returns
/// how many were removed.
pub(crate) fn sweep(base: &Utf8Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let uid = nix::unistd::getuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        // Only this user's directories, never through a symlink.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != uid || alive(pid) {
            continue;
        }
        if std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid in a run directory's name.
fn owner_pid(name: &str) -> Option<i32> {
    let rest = PREFIXES.iter().find_map(|p| name.strip_prefix(p))?;
    let (pid, random) = rest.split_once('-')?;
    if random.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|p: &i32| *p > 0)
}

/// Whether process `pid` exists (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_their_process() {
        assert_eq!(owner_pid("handoff-run-123-abc"), Some(123));
        assert_eq!(owner_pid("handoff-snapshots-9-x"), Some(9));
        for other in [
            "handoff-run-abc",
            "handoff-run-12",
            "handoff-run-12-",
            "handoff-run--x",
            "handoff-run-0-x",
            "handoff-mcp-12-x",
            "other-run-12-x",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }

    #[test]
    fn only_the_directories_of_dead_processes_go() {
        let base = tempfile::tempdir().unwrap();
        let base = Utf8Path::from_path(base.path()).unwrap().to_owned();
        // A process that has exited and been reaped: its pid names no process (pids are not
        // reused this quickly).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = base.join(format!("handoff-run-{dead}-stale"));
        std::fs::create_dir_all(stale.join("inside")).unwrap();
        let stale_snap = base.join(format!("handoff-snapshots-{dead}-old"));
        std::fs::create_dir(&stale_snap).unwrap();
        let mine = base.join(format!("{}live", prefix_of("handoff-run-")));
        std::fs::create_dir(&mine).unwrap();
        let unrelated = base.join("handoff-mcp-1-x");
        std::fs::create_dir(&unrelated).unwrap();
        let file = base.join(format!("handoff-run-{dead}-file"));
        std::fs::write(&file, "").unwrap();

        assert_eq!(sweep(&base), 2);
        assert!(!stale.exists() && !stale_snap.exists());
        assert!(mine.exists() && unrelated.exists() && file.exists());
    }
}
