//! The signals that stop a run — SIGTERM, SIGINT, SIGHUP — held from a process's exec until
//! it catches them.
//!
//! handoff may stop a process the moment it has its id: `handoff cancel` signals a job's
//! supervisor as soon as the store names it, and a cancelled run signals its agent's reaper
//! right after starting it. A process that has not installed its handlers yet would die of the
//! default action, leaving no result (a lost job) or no report (a reaper that cannot vouch
//! for the agent's tree). So such a process starts with these signals blocked
//! ([`block_in_child`], in `pre_exec`), and unblocks them once they are caught
//! ([`unblock_stop_signals`]): one sent early waits, pending, and is then handled like any other.
//! Programs started with `std::process::Command` begin with an empty mask whatever their
//! parent blocks; only these pre-exec hooks hand the block on.

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

fn set() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set.add(Signal::SIGHUP);
    set
}

/// Blocks the stop signals in the calling process; meant for a `pre_exec` hook, between fork
/// and exec (`sigprocmask` is async-signal-safe), so that the new program starts with them
/// held.
pub(crate) fn block_in_child() -> std::io::Result<()> {
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set()), None)
        .map_err(std::io::Error::from)
}

/// Unblocks the stop signals in the calling thread, once their handlers are installed: any
/// that arrived meanwhile is delivered now. Threads started earlier keep them blocked, so the
/// signal goes to a thread that handles it.
pub fn unblock_stop_signals() {
    let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set()), None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_signal_sent_before_the_program_catches_it_waits_instead_of_killing_it() {
        // `sleep` never catches SIGTERM: held from its exec, the signal stays pending and the
        // program ends on its own.
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("0.3");
        // SAFETY: only the async-signal-safe block runs between fork and exec.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(block_in_child);
        }
        let mut child = cmd.spawn().unwrap();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            nix::sys::signal::kill(pid, signal).unwrap();
        }
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), None, "{status:?}");
        assert_eq!(status.code(), Some(0), "{status:?}");

        // Without the hook the same signal kills it: the check above can fail.
        let mut plain = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(plain.id()).unwrap());
        nix::sys::signal::kill(pid, Signal::SIGTERM).unwrap();
        assert_eq!(plain.wait().unwrap().signal(), Some(Signal::SIGTERM as i32));
    }
}
