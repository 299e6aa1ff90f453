//! macOS: type-checked here, never run. No child subreaper, no `/proc`, no pidfds, no
//! bubblewrap; kqueue for the mailbox; `sandbox-exec` for the Seatbelt profile.

use std::io;
use std::os::fd::RawFd;

use nix::sys::signal::Signal;
use nix::sys::socket::MsgFlags;

/// handoff is type-checked for macOS, never run there by its tests.
pub const PROVEN: bool = false;
/// What is missing or unproven here.
pub const CAVEATS: &[&str] = &[
    "unproven: handoff is built for macOS but its tests have not run here",
    "no reaper: an agent's processes are stopped by process group, and one that leaves it escapes",
    "no handoff sandbox (bubblewrap): OpenCode, Kiro and the community Grok CLI are not run",
    "Claude Code and Codex run under their own macOS sandboxes",
    "the Seatbelt profile (sandbox-exec) is unproven and off for runs",
    "the supervisor's mailbox watches with kqueue",
];

/// Processes and their start times cannot be read the way handoff reads them on Linux.
pub const PROC_FS: bool = false;
/// No child subreaper: orphans of an agent's tree go to launchd; agents run in a process
/// group of their own instead of under the reaper.
pub const SUBREAPER: bool = false;
/// No bubblewrap: agents that need handoff's own sandbox are not run.
pub const BUBBLEWRAP: bool = false;
/// `sandbox-exec` and its Seatbelt profiles exist here.
pub const SEATBELT: bool = true;

/// There is no child subreaper on macOS.
pub fn adopt_orphans() -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "macOS has no child subreaper",
    ))
}

/// Nothing here: macOS already keeps other users' processes from tracing this one, and
/// `PT_DENY_ATTACH` would also stop the user's own debugger.
pub fn deny_tracing() {}

/// Nothing here (no parent-death signal on macOS); a job notices its supervisor is gone by the
/// end of its output pipe.
pub fn signal_on_parent_death(_signal: Signal) -> io::Result<()> {
    Ok(())
}

/// No `MSG_CMSG_CLOEXEC` on macOS: [`close_received_on_exec`] sets the flag afterwards.
pub const RECV_CLOEXEC: MsgFlags = MsgFlags::empty();

/// Makes received descriptors close-on-exec.
pub fn close_received_on_exec(fds: &[RawFd]) {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use std::os::fd::BorrowedFd;
    for &fd in fds {
        // SAFETY: the descriptors were just received and are owned by the caller, open for
        // the length of this call.
        #[allow(unsafe_code)]
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    }
}

/// No pidfds: the caller signals by process id.
pub fn signal_pinned(_pid: u32, _still_same: impl FnOnce() -> bool, _signal: Signal) -> bool {
    false
}

/// The system allocator is left as it is.
pub fn tune_allocator(_mmap_threshold: usize, _arenas: usize) {}

/// The system allocator is left as it is.
pub fn trim_allocator() {}

/// The device of `stat` (32 bits here), widened.
pub fn device(stat: &nix::sys::stat::FileStat) -> u64 {
    u64::from(stat.st_dev as u32)
}

/// The mode (type and permissions) of `stat` (16 bits here), widened.
pub fn mode(stat: &nix::sys::stat::FileStat) -> u32 {
    u32::from(stat.st_mode)
}

/// Filesystems whose stat data handoff does not trust, by the name `statfs` gives them: network
/// and user-space filesystems, where another machine or process decides what `stat` says, and
/// FAT and exFAT, which keep neither inode numbers nor status-change times.
const UNTRUSTED: &[(&str, &str)] = &[
    ("macfuse", "a FUSE filesystem"),
    ("osxfuse", "a FUSE filesystem"),
    ("fuse-t", "a FUSE filesystem"),
    ("nfs", "NFS"),
    ("smbfs", "SMB"),
    ("afpfs", "AFP"),
    ("webdav", "WebDAV"),
    ("msdos", "FAT"),
    ("exfat", "exFAT"),
];

/// Why the stat data of the filesystem `fs` describes cannot be trusted, if it cannot.
pub fn untrusted_filesystem(fs: &nix::sys::statfs::Statfs) -> Option<&'static str> {
    let kind = fs.filesystem_type_name();
    UNTRUSTED
        .iter()
        .find(|(name, _)| *name == kind)
        .map(|(_, why)| *why)
}

/// Directory watches for the supervisor's mailbox: kqueue. A watched directory reports that
/// it changed, never which entry: each change reads as "look at every entry again".
pub mod watch {
    use std::collections::HashMap;
    use std::ffi::OsString;
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
    use std::sync::Mutex;

    use camino::Utf8Path;
    use nix::fcntl::{OFlag, open};
    use nix::sys::event::{EvFlags, EventFilter, FilterFlag, KEvent, Kqueue};
    use nix::sys::stat::Mode;
    use tokio::io::unix::AsyncFd;

    /// A watched directory: the number of the descriptor that holds it open.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Wd(RawFd);

    /// What happened in a watched directory.
    #[derive(Debug)]
    pub struct Event {
        /// Which directory.
        pub wd: Wd,
        /// Never known here.
        pub name: Option<OsString>,
        /// Never known here.
        pub created: bool,
        /// The directory changed: look at every entry again.
        pub overflow: bool,
        /// The directory itself is gone.
        pub gone: bool,
    }

    struct Fd(Kqueue);

    impl AsRawFd for Fd {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }

    /// Watches directories for any change (kqueue; nothing polls).
    pub struct Watcher {
        kq: AsyncFd<Fd>,
        dirs: Mutex<HashMap<RawFd, OwnedFd>>,
    }

    fn change(fd: RawFd, flags: EvFlags) -> KEvent {
        let fflags = FilterFlag::NOTE_WRITE
            | FilterFlag::NOTE_DELETE
            | FilterFlag::NOTE_RENAME
            | FilterFlag::NOTE_REVOKE;
        KEvent::new(fd as usize, EventFilter::EVFILT_VNODE, flags, fflags, 0, 0)
    }

    impl Watcher {
        /// A watcher with no directory yet. Needs a Tokio runtime.
        pub fn new() -> io::Result<Watcher> {
            let kq = Kqueue::new()?;
            // As on Linux: the descriptor is the queue's own, held by the `AsyncFd`.
            #[allow(deprecated)]
            let kq = AsyncFd::new(Fd(kq))?;
            Ok(Watcher {
                kq,
                dirs: Mutex::new(HashMap::new()),
            })
        }

        /// Starts watching `dir` (never through a link).
        pub fn watch(&self, dir: &Utf8Path) -> io::Result<Wd> {
            let fd = open(
                dir.as_std_path(),
                OFlag::from_bits_retain(nix::libc::O_EVTONLY)
                    | OFlag::O_DIRECTORY
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            let raw = fd.as_raw_fd();
            let zero = nix::libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            self.kq.get_ref().0.kevent(
                &[change(raw, EvFlags::EV_ADD | EvFlags::EV_CLEAR)],
                &mut [],
                Some(zero),
            )?;
            self.dirs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(raw, fd);
            Ok(Wd(raw))
        }

        /// Stops watching (closing the directory ends its kqueue filter).
        pub fn unwatch(&self, wd: Wd) {
            self.dirs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&wd.0);
        }

        /// The next events, waiting for them.
        pub async fn next(&self) -> io::Result<Vec<Event>> {
            let zero = nix::libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            loop {
                let mut ready = self.kq.readable().await?;
                let mut got = [change(0, EvFlags::empty()); 64];
                let n = ready.get_inner().0.kevent(&[], &mut got, Some(zero))?;
                if n == 0 {
                    ready.clear_ready();
                    continue;
                }
                let gone_flags =
                    FilterFlag::NOTE_DELETE | FilterFlag::NOTE_RENAME | FilterFlag::NOTE_REVOKE;
                return Ok(got[..n]
                    .iter()
                    .map(|e| {
                        let gone = e.fflags().intersects(gone_flags);
                        Event {
                            wd: Wd(e.ident() as RawFd),
                            name: None,
                            created: false,
                            overflow: !gone,
                            gone,
                        }
                    })
                    .collect());
            }
        }
    }
}

/// How [`spawn_in_cgroup`] ended.
#[derive(Debug)]
pub enum CgroupSpawn {
    /// The program runs: its pid.
    Started(u32),
    /// There are no cgroups here: nothing was started.
    Unsupported,
    /// The program could not be run.
    Failed(io::Error),
}

/// There are no cgroups on macOS.
pub fn spawn_in_cgroup(
    _program: &std::ffi::CStr,
    _argv: &[std::ffi::CString],
    _envp: &[std::ffi::CString],
    _stdin: std::os::fd::BorrowedFd<'_>,
    _cgroup: std::os::fd::BorrowedFd<'_>,
) -> CgroupSpawn {
    CgroupSpawn::Unsupported
}
