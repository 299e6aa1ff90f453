//! Everything that differs between the operating systems handoff builds on, behind one set of
//! names: Linux (proven: every test here runs on it) and macOS (type-checked only). No other
//! module mentions an operating system; a test keeps it so.
//!
//! | | Linux | macOS |
//! |---|---|---|
//! | orphans of an agent's tree | adopted by the reaper (`PR_SET_CHILD_SUBREAPER`) | escape to launchd: runs fall back to process groups |
//! | processes, their start times | `/proc/<pid>/stat` | not read: leases and jobs trust pids alone |
//! | signalling a scanned process | through a pidfd, never a reused pid | `kill` |
//! | the mailbox's directory watch | inotify | kqueue (`EVFILT_VNODE`), the directory read again on each change |
//! | handoff's own sandbox | bubblewrap | none: agents that need it are not run |
//! | the Seatbelt profile | none | `sandbox-exec`, unproven, off unless asked for |
//! | the allocator | glibc tuned and trimmed | untouched |

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::*;

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
compile_error!("handoff builds on Linux and macOS only");

/// The operating system, as `capabilities` and messages name it.
pub const NAME: &str = if cfg!(target_os = "linux") {
    "Linux"
} else {
    "macOS"
};

#[cfg(test)]
mod tests;
