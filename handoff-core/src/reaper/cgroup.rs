//! A cgroup v2 per run, where this user may make one: the agent starts in it, and
//! `cgroup.kill` ends everything in it at once, however fast it forks.
//!
//! The reaper makes `handoff-run-<pid>` under its own cgroup (found through `/proc/self/cgroup`
//! and the cgroup2 mount in `/proc/self/mountinfo`) and starts the agent in it with `clone3`
//! (`CLONE_INTO_CGROUP`), so that no process migrates: a move waits for an RCU grace period,
//! 10–25 ms of every run. Where `clone3` is refused, it moves itself in, starts the agent
//! (which inherits the cgroup) and moves itself back out, so that the kill spares it. Where the hierarchy is
//! not cgroup v2, has no `cgroup.kill` (Linux < 5.14) or is not delegated to this user, nothing
//! is made and the reaper's own killing is all there is.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The run's cgroup.
#[derive(Debug)]
pub(super) struct RunCgroup {
    dir: PathBuf,
}

/// Where the calling process's cgroup v2 directory is, when it has one.
fn own_dir() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // `<id> <parent> <dev> <root> <mount point> <options> [optional…] - <fstype> <source> …`
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = left.split_whitespace().collect();
        (fields.get(3) == Some(&"/")).then(|| fields.get(4).map(|m| unescape(m)))?
    })?;
    let dir = Path::new(&mount).join(rel.trim_start_matches('/'));
    dir.join("cgroup.procs").exists().then_some(dir)
}

/// A mount point as `/proc/self/mountinfo` escapes it (`\040` for a space, and so on).
fn unescape(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &s[i + 1..(i + 4).min(s.len())];
            if let Ok(v) = u8::from_str_radix(oct, 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Removes the empty cgroups of reapers that are gone (a reaper killed before it removed its
/// own); a cgroup that still holds processes stays (the kernel refuses).
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("handoff-run-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

fn write_to(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(text.as_bytes())
}

impl RunCgroup {
    /// Makes the run's cgroup; `None` (and nothing left behind) where that is not possible.
    pub(super) fn make() -> Option<RunCgroup> {
        let parent = own_dir()?;
        sweep(&parent);
        let dir = parent.join(format!("handoff-run-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let run = RunCgroup { dir };
        // The root cgroup has no `cgroup.kill`; its children do, from Linux 5.14.
        run.dir.join("cgroup.kill").exists().then_some(run)
    }

    /// The cgroup's directory, open: where `clone3` starts a process
    /// ([`crate::platform::spawn_in_cgroup`]).
    pub(super) fn open(&self) -> Option<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(&self.dir)
            .ok()
    }

    /// Moves the calling process into the cgroup, where a process cannot be started in it
    /// directly; `false` when it cannot.
    pub(super) fn join(&self) -> bool {
        write_to(
            &self.dir.join("cgroup.procs"),
            &std::process::id().to_string(),
        )
        .is_ok()
    }

    /// Moves the calling process back to the cgroup it came from, once the agent has started
    /// in this one. `false` when it cannot: the cgroup must then not be killed (the reaper is
    /// in it) and is given up.
    pub(super) fn leave(&self) -> bool {
        let Some(parent) = self.dir.parent() else {
            return false;
        };
        write_to(
            &parent.join("cgroup.procs"),
            &std::process::id().to_string(),
        )
        .is_ok()
    }

    /// Kills every process in the cgroup.
    pub(super) fn kill(&self) {
        let _ = write_to(&self.dir.join("cgroup.kill"), "1");
    }

    /// Whether a process is still in the cgroup.
    pub(super) fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .map(|e| e.lines().any(|l| l == "populated 1"))
            .unwrap_or(false)
    }

    /// The cgroup's directory.
    pub(super) fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // Empty by now, or the kernel refuses (EBUSY) and the directory stays for the next
        // run's operator to see.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// When a reaper that handoff started is gone without a word (killed, or it gave up): kills
/// and removes the cgroup it made for its agent, if it made one. The reaper was handoff's
/// child, so its cgroup was made under handoff's own.
pub(crate) fn kill_left_by(reaper_pid: u32) -> bool {
    let Some(parent) = own_dir() else {
        return false;
    };
    let dir = parent.join(format!("handoff-run-{reaper_pid}"));
    if !dir.join("cgroup.kill").exists() {
        return false;
    }
    let run = RunCgroup { dir };
    run.kill();
    // The kill is asynchronous: wait (briefly) for the cgroup to empty, so it can be removed.
    for _ in 0..100 {
        if !run.populated() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> std::ffi::CString {
        std::ffi::CString::new(s).unwrap()
    }

    fn wait(pid: u32) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
        match nix::sys::wait::waitpid(pid, None).unwrap() {
            nix::sys::wait::WaitStatus::Exited(_, code) => Some(code),
            _ => None,
        }
    }

    /// Where this user may make a run's cgroup (Linux ≥ 5.14 with a delegated cgroup v2), a
    /// program started in it is there from its first instruction, reads the prompt given on
    /// its standard input, and one that cannot be run is reported, not started.
    #[test]
    fn a_program_is_born_in_the_runs_cgroup() {
        use std::io::Write;
        use std::os::fd::AsFd;
        // Without a cgroup v2 with `cgroup.kill` this user may make, there is nothing to check.
        let Some(run) = RunCgroup::make() else {
            return;
        };
        let dir = run.open().unwrap();
        let env = [c("PATH=/usr/bin:/bin")];
        // The child compares its own cgroup with the run's, and reads its prompt.
        let script = format!(
            "read line; [ \"$line\" = hello ] || exit 3; \
             grep -qx '0::.*/{}' /proc/self/cgroup || exit 4",
            run.path().file_name().unwrap().to_str().unwrap()
        );
        let argv = [c("/bin/sh"), c("-c"), c(&script)];
        let (r, w) = std::io::pipe().unwrap();
        let born = crate::platform::spawn_in_cgroup(&argv[0], &argv, &env, r.as_fd(), dir.as_fd());
        drop(r);
        let crate::platform::CgroupSpawn::Started(pid) = born else {
            // A kernel or filter that refuses clone3 into a cgroup: the reaper moves itself.
            assert!(
                matches!(born, crate::platform::CgroupSpawn::Unsupported),
                "{born:?}"
            );
            return;
        };
        { w }.write_all(b"hello\n").unwrap();
        assert_eq!(wait(pid), Some(0));

        let missing = [c("/nonexistent/agent")];
        let null = std::fs::File::open("/dev/null").unwrap();
        match crate::platform::spawn_in_cgroup(
            &missing[0],
            &missing,
            &env,
            null.as_fd(),
            dir.as_fd(),
        ) {
            crate::platform::CgroupSpawn::Failed(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert!(!run.populated());
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape("/sys/fs/cgroup"), "/sys/fs/cgroup");
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/x\\"), "/x\\");
    }
}
