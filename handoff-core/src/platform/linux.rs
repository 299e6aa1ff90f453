//! Linux: a child subreaper, `/proc`, pidfds, inotify, bubblewrap, glibc.

use std::io;
use std::os::fd::RawFd;

use nix::sys::signal::Signal;
use nix::sys::socket::MsgFlags;

/// handoff's tests run here.
pub const PROVEN: bool = true;
/// What is missing or unproven here: nothing.
pub const CAVEATS: &[&str] = &[];

/// Processes and their start times can be read (`/proc/<pid>/stat`).
pub const PROC_FS: bool = true;
/// A process can adopt its orphaned descendants: agents run under the reaper.
pub const SUBREAPER: bool = true;
/// handoff's own sandbox (bubblewrap) can run here, once `bwrap` is proven to.
pub const BUBBLEWRAP: bool = true;
/// `sandbox-exec` and its Seatbelt profiles exist here.
pub const SEATBELT: bool = false;

/// Makes this process adopt its orphaned descendants (`PR_SET_CHILD_SUBREAPER`).
pub fn adopt_orphans() -> io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(io::Error::from)
}

/// Closes this process to tracing and its memory to other processes of the user
/// (`PR_SET_DUMPABLE` 0). Best effort.
pub fn deny_tracing() {
    let _ = nix::sys::prctl::set_dumpable(false);
}

/// Has the kernel send `signal` to this process when the thread that started it ends
/// (`PR_SET_PDEATHSIG`). Async-signal-safe: callable between `fork` and `exec`.
pub fn signal_on_parent_death(signal: Signal) -> io::Result<()> {
    nix::sys::prctl::set_pdeathsig(signal).map_err(io::Error::from)
}

/// `recvmsg` flags that make the descriptors received close-on-exec as they arrive.
pub const RECV_CLOEXEC: MsgFlags = MsgFlags::MSG_CMSG_CLOEXEC;

/// Makes received descriptors close-on-exec where [`RECV_CLOEXEC`] could not (nothing to do
/// here).
pub fn close_received_on_exec(_fds: &[RawFd]) {}

/// Sends `signal` (SIGTERM, then SIGCONT so that a stopped process acts on it; or SIGKILL) to
/// `pid` through a pidfd, once `still_same` confirms, with the descriptor pinning the process,
/// that it is the one that was scanned: a process that ended and whose id was reused is never
/// hit. `true` when that was done or the process is gone; `false` when the kernel has no
/// pidfds (the caller signals by id).
pub fn signal_pinned(pid: u32, still_same: impl FnOnce() -> bool, signal: Signal) -> bool {
    use std::os::fd::AsFd;

    use rustix::process::{Pid, PidfdFlags, Signal as Sig, pidfd_open, pidfd_send_signal};
    let Some(id) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return true;
    };
    let sig = match signal {
        Signal::SIGTERM => Sig::TERM,
        Signal::SIGKILL => Sig::KILL,
        _ => return false,
    };
    match pidfd_open(id, PidfdFlags::empty()) {
        Ok(fd) => {
            if still_same() {
                let _ = pidfd_send_signal(fd.as_fd(), sig);
                if signal == Signal::SIGTERM {
                    let _ = pidfd_send_signal(fd.as_fd(), Sig::CONT);
                }
            }
            true
        }
        // A kernel without pidfds.
        Err(rustix::io::Errno::NOSYS) => false,
        // Gone since the scan (its id may already name another process): nothing to do.
        Err(_) => true,
    }
}

/// Fixes glibc's mmap threshold and its number of arenas.
pub fn tune_allocator(mmap_threshold: usize, arenas: usize) {
    #[cfg(target_env = "gnu")]
    {
        let threshold = libc::c_int::try_from(mmap_threshold).unwrap_or(libc::c_int::MAX);
        let arenas = libc::c_int::try_from(arenas).unwrap_or(1);
        // SAFETY: `mallopt` only sets an allocator parameter; it takes no pointer and is safe
        // to call at any time from any thread.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, threshold);
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = (mmap_threshold, arenas);
}

/// Gives the memory glibc holds free back to the system.
pub fn trim_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: `malloc_trim` only releases free memory of the allocator's own; it takes no
    // pointer and is safe to call at any time from any thread.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The device of `stat`.
pub fn device(stat: &nix::sys::stat::FileStat) -> u64 {
    stat.st_dev
}

/// The mode (type and permissions) of `stat`.
pub fn mode(stat: &nix::sys::stat::FileStat) -> u32 {
    stat.st_mode
}

/// Filesystems whose stat data handoff does not trust, by `statfs` magic number: network and
/// user-space filesystems, where another machine or process decides what `stat` says, and FAT
/// and exFAT, which keep neither inode numbers nor status-change times.
const UNTRUSTED: &[(libc::c_long, &str)] = &[
    (0x6573_5546, "a FUSE filesystem"),
    (0x6969, "NFS"),
    (0x517b, "SMB"),
    (0xfe53_4d42, "SMB2"),
    (0xff53_4d42, "CIFS"),
    (0x0102_1997, "9p"),
    (0x4d44, "FAT"),
    (0x2011_bab0, "exFAT"),
    (0x5346_414f, "AFS"),
    (0x00c3_6400, "Ceph"),
    (0x0bd0_0bd0, "Lustre"),
];

/// Why the stat data of the filesystem `fs` describes cannot be trusted, if it cannot.
pub fn untrusted_filesystem(fs: &nix::sys::statfs::Statfs) -> Option<&'static str> {
    let kind = fs.filesystem_type().0;
    UNTRUSTED
        .iter()
        .find(|(magic, _)| *magic == kind)
        .map(|(_, name)| *name)
}

/// Directory watches for the supervisor's mailbox: inotify.
pub mod watch {
    use std::ffi::OsString;
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, RawFd};

    use camino::Utf8Path;
    use nix::errno::Errno;
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    use tokio::io::unix::AsyncFd;

    /// A watched directory.
    pub type Wd = nix::sys::inotify::WatchDescriptor;

    /// What happened in a watched directory.
    #[derive(Debug)]
    pub struct Event {
        /// Which directory.
        pub wd: Wd,
        /// The entry, when the event is about one.
        pub name: Option<OsString>,
        /// The entry was created (not renamed in, not closed after writing).
        pub created: bool,
        /// Events were lost: look at every entry again.
        pub overflow: bool,
        /// The directory itself is gone.
        pub gone: bool,
    }

    struct Fd(Inotify);

    impl AsRawFd for Fd {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }

    /// Watches directories for entries created, renamed in or closed after writing (inotify;
    /// nothing polls).
    pub struct Watcher {
        fd: AsyncFd<Fd>,
    }

    impl Watcher {
        /// A watcher with no directory yet. Needs a Tokio runtime.
        pub fn new() -> io::Result<Watcher> {
            let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
            // `AsyncFd::new` is deprecated for taking any `AsRawFd`, whose descriptor might close
            // under it; `register`, its replacement, is `unsafe`. Here the descriptor is the
            // inotify instance's own `OwnedFd`, held by the `AsyncFd` until it is dropped.
            #[allow(deprecated)]
            let fd = AsyncFd::new(Fd(inotify))?;
            Ok(Watcher { fd })
        }

        /// Starts watching `dir` (never through a link).
        pub fn watch(&self, dir: &Utf8Path) -> io::Result<Wd> {
            let mask = AddWatchFlags::IN_CREATE
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_DELETE_SELF
                | AddWatchFlags::IN_ONLYDIR
                | AddWatchFlags::IN_DONT_FOLLOW;
            Ok(self.fd.get_ref().0.add_watch(dir.as_std_path(), mask)?)
        }

        /// Stops watching.
        pub fn unwatch(&self, wd: Wd) {
            let _ = self.fd.get_ref().0.rm_watch(wd);
        }

        /// The next events, waiting for them.
        pub async fn next(&self) -> io::Result<Vec<Event>> {
            loop {
                let mut ready = self.fd.readable().await?;
                match ready.get_inner().0.read_events() {
                    Ok(events) => {
                        return Ok(events
                            .into_iter()
                            .map(|e| Event {
                                wd: e.wd,
                                created: e.mask.contains(AddWatchFlags::IN_CREATE),
                                overflow: e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW),
                                gone: e.mask.intersects(
                                    AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_IGNORED,
                                ),
                                name: e.name.filter(|n| !n.is_empty()),
                            })
                            .collect());
                    }
                    Err(Errno::EAGAIN) => ready.clear_ready(),
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
}

/// How [`spawn_in_cgroup`] ended.
#[derive(Debug)]
pub enum CgroupSpawn {
    /// The program runs, in the cgroup since its first instruction: its pid.
    Started(u32),
    /// `clone3` into a cgroup is refused here (a kernel before 5.7, a seccomp filter):
    /// nothing was started.
    Unsupported,
    /// The child was made but the program could not be run (the child is reaped).
    Failed(io::Error),
}

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Starts `program` with `argv` (its `argv[0]` first) and the environment `envp` (`K=V`),
/// standard input from `stdin`, in the cgroup whose directory `cgroup` is open on, from its
/// first instruction (`clone3` with `CLONE_INTO_CGROUP`). No process migrates between
/// cgroups, so nothing waits on the kernel's migration lock: a move costs an RCU grace
/// period, 10–25 ms. The program starts as `std::process::Command` starts one: an empty
/// signal mask, SIGPIPE at its default, the caller's working directory, stdout and stderr.
pub fn spawn_in_cgroup(
    program: &std::ffi::CStr,
    argv: &[std::ffi::CString],
    envp: &[std::ffi::CString],
    stdin: std::os::fd::BorrowedFd<'_>,
    cgroup: std::os::fd::BorrowedFd<'_>,
) -> CgroupSpawn {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let pointers = |list: &[std::ffi::CString]| -> Vec<*const libc::c_char> {
        list.iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let (argv, envp) = (pointers(argv), pointers(envp));
    // The child's exec error, if any, comes back on a close-on-exec pipe: nothing on it means
    // the exec happened.
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    #[allow(unsafe_code)]
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return CgroupSpawn::Failed(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just made both descriptors, owned by nothing else.
    #[allow(unsafe_code)]
    let (report_r, report_w) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut args = CloneArgs {
        // The caller waits until the child has exec'd or exited, as vfork does, but the child
        // has its own copy of the memory.
        flags: libc::CLONE_VFORK as u64 | CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    let (stdin, report) = (stdin.as_raw_fd(), report_w.as_raw_fd());
    // SAFETY: clone3 with a valid, fully initialized `clone_args` of the size given. In the
    // child (a copy of this process, one thread) only async-signal-safe calls are made
    // before it execs or exits: dup2, sigprocmask, signal, execve, write, _exit.
    #[allow(unsafe_code)]
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid == 0 {
        #[allow(unsafe_code)]
        unsafe {
            if libc::dup2(stdin, 0) >= 0 {
                let mut empty: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut empty);
                libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
            }
            let errno = *libc::__errno_location();
            libc::write(report, (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    drop(report_w);
    if pid < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM | libc::EOPNOTSUPP) => {
                CgroupSpawn::Unsupported
            }
            _ => CgroupSpawn::Failed(e),
        };
    }
    let pid = pid as i32;
    let mut buf = [0u8; 4];
    let read = loop {
        // SAFETY: reads at most 4 bytes into `buf`.
        #[allow(unsafe_code)]
        let n = unsafe { libc::read(report_r.as_raw_fd(), buf.as_mut_ptr().cast(), 4) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        break n;
    };
    if read == 0 {
        return CgroupSpawn::Started(pid as u32);
    }
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    CgroupSpawn::Failed(if read == 4 {
        io::Error::from_raw_os_error(i32::from_ne_bytes(buf))
    } else {
        io::Error::other("the child ended before it could run the program")
    })
}
