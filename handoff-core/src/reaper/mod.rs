//! Processes die with the run: every agent runs under a reaper, a second handoff process
//! (`handoff __reap …`, the binary re-executing itself) that stands between handoff and the
//! agent.
//!
//! The reaper makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every process the
//! agent's tree orphans — a double fork, a `setsid` daemon — is re-parented to it rather than
//! to init. It starts the agent, feeds it the prompt, and exits only once it has no child
//! left: when the agent ends, what it left behind is sent SIGTERM and, 1.5 s later, SIGKILL,
//! again and again until nothing is left. Signals go through pidfds, so a process whose id was
//! reused after the scan is never hit.
//!
//! It talks to handoff over one Unix socket pair, which is its stdin:
//! - handoff → reaper: one byte carrying, as `SCM_RIGHTS`, the descriptors to hold (the
//!   worktree lease's lock, so that the lease outlives handoff until the tree is gone), then
//!   the prompt (its length is on the command line). Then nothing: the socket is a lifeline,
//!   and its end means handoff is gone — the reaper kills the tree at once. A parent-death
//!   signal is the backup, honoured only when `getppid()` has changed (it also fires when the
//!   thread that forked exits).
//! - reaper → handoff: one JSON line ([`Report`]) once the tree is gone: the agent's exit
//!   status and how many processes it left behind.
//!
//! handoff stops a run by sending SIGTERM to the process group; the reaper passes it on to
//! every descendant (in any group or session), and SIGKILLs them after the grace period.
//! handoff waits for the reaper, so the after-fingerprint is taken only once the agent's tree
//! is gone; SIGKILL of the group is handoff's last resort.
//!
//! What still escapes: a process started outside the tree on the agent's behalf — by
//! `systemd-run --user` over a reachable session bus, `at`, a container engine's socket, an
//! already running `tmux` server — and the tree of an agent that kills its own reaper (the
//! same user may); handoff then reports the containment as lost. An agent under handoff's own
//! sandbox or in a PID namespace is contained by the namespace instead.

pub(crate) mod cgroup;
mod child;
pub(crate) mod tree;

use std::ffi::{OsStr, OsString};

use serde::{Deserialize, Serialize};

/// The first argument that turns the handoff binary into a reaper.
pub const REAPER_ARG: &str = "__reap";

/// What the reaper reports once the agent's tree is gone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    /// The agent's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The name of the signal that ended the agent, when one did.
    pub signal: Option<String>,
    /// Its number.
    pub signal_number: Option<i32>,
    /// Why the agent could not be started.
    pub spawn_error: Option<String>,
    /// How many descendants were still running when the agent ended (then killed).
    pub leftover: u32,
    /// The reaper lost handoff (its channel closed) and killed the tree.
    pub lost_handoff: bool,
    /// The tree outran the reaper's killing (it kept making processes) and the reaper gave
    /// up: processes of the tree may still run.
    #[serde(default)]
    pub escaped: bool,
    /// The cgroup v2 the agent ran in, killed with `cgroup.kill`; `None` where none could be
    /// made.
    #[serde(default)]
    pub cgroup: Option<String>,
}

/// The reaper's command line after [`REAPER_ARG`]:
/// `--parent <pid> --stdin <bytes|none> -- <program> <args…>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Args {
    /// handoff's process id (the reaper's expected parent).
    pub parent: u32,
    /// The prompt's length, when the agent reads a prompt on stdin.
    pub stdin: Option<usize>,
    /// The agent's program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl Args {
    /// The arguments after the program name, [`REAPER_ARG`] first.
    pub(crate) fn to_argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![
            REAPER_ARG.into(),
            "--parent".into(),
            self.parent.to_string().into(),
            "--stdin".into(),
            self.stdin
                .map_or_else(|| "none".to_owned(), |n| n.to_string())
                .into(),
            "--".into(),
            self.program.clone(),
        ];
        argv.extend(self.args.iter().cloned());
        argv
    }

    /// Parses what follows [`REAPER_ARG`].
    pub(crate) fn parse(mut it: impl Iterator<Item = OsString>) -> Result<Args, String> {
        let mut next_str = |what: &str| -> Result<String, String> {
            it.next()
                .and_then(|s| s.into_string().ok())
                .ok_or_else(|| format!("expected {what}"))
        };
        let mut parent = None;
        let mut stdin = None;
        loop {
            match next_str("an option or `--`")?.as_str() {
                "--parent" => {
                    let v = next_str("a process id after --parent")?;
                    parent = Some(v.parse().map_err(|_| format!("bad --parent {v:?}"))?);
                }
                "--stdin" => {
                    let v = next_str("a length after --stdin")?;
                    stdin = Some(if v == "none" {
                        None
                    } else {
                        Some(v.parse().map_err(|_| format!("bad --stdin {v:?}"))?)
                    });
                }
                "--" => break,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let program = it.next().ok_or("expected the agent's program after `--`")?;
        Ok(Args {
            parent: parent.ok_or("--parent is required")?,
            stdin: stdin.ok_or("--stdin is required")?,
            program,
            args: it.collect(),
        })
    }
}

/// Becomes the reaper when this process was started as one (`<exe> __reap …`): runs it and
/// exits with the agent's status; likewise for the network relay of handoff's sandbox
/// (`<exe> __net-relay …`, [`crate::sandbox::relay`]). Returns at once otherwise. A binary
/// named as `EngineOptions::handoff_exe` calls this first thing in `main`.
pub fn main_if_reaper() {
    let mut args = std::env::args_os();
    let _program = args.next();
    let Some(first) = args.next() else {
        return;
    };
    crate::sandbox::relay::main_if_relay(&first, &mut args);
    if first != OsStr::new(REAPER_ARG) {
        return;
    }
    let code = match Args::parse(args) {
        Ok(args) => child::run(&args),
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "handoff {REAPER_ARG}: {e}");
            125
        }
    };
    std::process::exit(code);
}

/// Whether agents can run under the reaper here: it adopts orphans and reads `/proc`.
pub const AVAILABLE: bool = crate::platform::SUBREAPER && crate::platform::PROC_FS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_round_trips() {
        let args = Args {
            parent: 4242,
            stdin: Some(17),
            program: "/usr/bin/agent".into(),
            args: vec!["--flag".into(), "--".into(), "a b".into()],
        };
        let argv = args.to_argv();
        assert_eq!(argv[0], REAPER_ARG);
        assert_eq!(Args::parse(argv.into_iter().skip(1)).unwrap(), args);
        let none = Args {
            stdin: None,
            args: vec![],
            ..args
        };
        assert_eq!(
            Args::parse(none.to_argv().into_iter().skip(1)).unwrap(),
            none
        );
    }

    #[test]
    fn a_bad_command_line_is_refused() {
        let parse = |v: &[&str]| Args::parse(v.iter().map(OsString::from));
        assert!(parse(&["--parent", "1", "--stdin", "none", "--"]).is_err());
        assert!(parse(&["--stdin", "none", "--", "x"]).is_err());
        assert!(parse(&["--parent", "x", "--stdin", "none", "--", "x"]).is_err());
        assert!(parse(&["--parent", "1", "--stdin", "-3", "--", "x"]).is_err());
        assert!(parse(&["--parent", "1", "--bogus"]).is_err());
        assert_eq!(
            parse(&["--parent", "1", "--stdin", "none", "--", "x", "--parent"])
                .unwrap()
                .args,
            vec![OsString::from("--parent")]
        );
    }
}
