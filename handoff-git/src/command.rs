//! The `git` program handoff starts and the environment it starts it with: found by handoff's
//! rule for programs, with the caller's `GIT_*` variables removed but for [`KEPT_ENV`].

use std::process::{Command, Stdio};

/// `GIT_*` variables of the caller that git still sees: the commit identity and the transport to
/// remotes. Every other `GIT_*` variable is removed.
pub const KEPT_ENV: &[&str] = &[
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
    "GIT_ASKPASS",
    "GIT_TERMINAL_PROMPT",
    "GIT_SSL_NO_VERIFY",
    "GIT_SSL_CAINFO",
    "GIT_PROXY_COMMAND",
];

/// The `git` program, as [`handoff_core::program`] finds it: never one from a worktree handoff
/// works on (the repository's own worktrees are guarded first).
pub(crate) fn git_program() -> Command {
    Command::new(handoff_core::program_or_missing("git"))
}

/// `git` in `dir` with the caller's `GIT_*` variables removed and nothing else added: for
/// reading the configuration itself, which runs no program.
pub(crate) fn plain_command(dir: &std::path::Path) -> Command {
    let mut c = git_program();
    scrub(&mut c, std::env::vars_os().map(|(k, _)| k));
    c.current_dir(dir)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null());
    c
}

/// Removes from `c`'s environment every `GIT_*` name of `caller` that [`KEPT_ENV`] does not
/// list.
pub(crate) fn scrub(c: &mut Command, caller: impl IntoIterator<Item = std::ffi::OsString>) {
    for key in caller {
        let Some(name) = key.to_str() else {
            // A name that is not UTF-8 is never one git reads, but is not passed on either.
            c.env_remove(&key);
            continue;
        };
        if name.starts_with("GIT_") && !KEPT_ENV.contains(&name) {
            c.env_remove(name);
        }
    }
}
