//! The one way handoff runs the git CLI in a user's repository.
//!
//! Checkpoints, attribution, continuation (commit, worktree, push, the remote's first commit)
//! and note rendering all go through [`Git`]. It owns what git sees besides its arguments:
//!
//! * **The environment.** Every `GIT_*` variable of the calling process is removed, so a
//!   variable set by whoever started handoff (an agent's shell, a hook) cannot point git at
//!   another repository, index, object store or configuration (`GIT_DIR`, `GIT_INDEX_FILE`,
//!   `GIT_OBJECT_DIRECTORY`, `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`…). Kept are only the
//!   variables in [`KEPT_ENV`]: who commits, and how git reaches a remote. The configuration is
//!   the repository's, the user's (`~/.gitconfig`) and the system's, as for gix (which reads no
//!   `GIT_*` variable either), so the evidence and the commands see the same settings. Reads never take optional locks (`GIT_OPTIONAL_LOCKS=0`), so looking
//!   never refreshes the user's index behind their back.
//! * **Forced settings.** [`FORCED_CONFIG`] is passed as `-c` before every command.
//! * **The repository's programs.** Unless the caller trusts them ([`Trust`]), the programs the
//!   repository-level configuration names are left out ([`crate::RepoPrograms`]): each such
//!   setting gets the user's global value or a harmless default, hooks are turned off
//!   (`core.hooksPath=/dev/null`), `diff`, `log` and `show` run with `--no-ext-diff
//!   --no-textconv`, and a command that would need what cannot be left out (a filter driver
//!   only the repository defines, a URL rewrite, a credential helper) is refused, naming it.
//! * **Standard input** is closed unless a caller asks for a pipe.
//!
//! A failure is an error naming the command, its exit status and the tail of its output.

use std::ffi::OsStr;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, OnceLock};

use camino::{Utf8Path, Utf8PathBuf};

pub use crate::command::KEPT_ENV;
use crate::command::{git_program, scrub};
use crate::programs::{Neutralised, RepoPrograms};

/// Settings passed as `-c key=value` to every git command handoff runs.
pub const FORCED_CONFIG: &[(&str, &str)] = &[
    // Output is parsed, never shown through a pager or coloured.
    ("core.pager", "cat"),
    ("color.ui", "false"),
    // Paths are read byte for byte (with `-z` they are never quoted anyway).
    ("core.quotePath", "false"),
    // A detached checkout (a new-thread worktree at a checkpoint) is expected, not advice.
    ("advice.detachedHead", "false"),
    // What changed is read from the files, never from a program or cache the repository's
    // configuration names: an agent can write `.git/config`, and an fsmonitor it planted would
    // both run outside any sandbox and say what git gets to see.
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
];

/// How many lines of a failed command's output its error keeps.
const ERROR_TAIL_LINES: usize = 5;

/// An error from running git: it could not start, or it exited non-zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct GitError {
    /// The git subcommand and its arguments.
    pub args: Vec<String>,
    /// The exit status, when git ran.
    pub status: Option<i32>,
    /// One line: the command, its status and the tail of its output.
    pub message: String,
}

impl From<GitError> for String {
    fn from(e: GitError) -> String {
        e.message
    }
}

/// Subcommands that read or write file contents through filters, or the worktree itself: they
/// refuse while the repository names a filter or worktree handoff leaves out.
const CONTENT_COMMANDS: &[&str] = &[
    "add",
    "am",
    "apply",
    "checkout",
    "checkout-index",
    "cherry-pick",
    "commit",
    "merge",
    "pull",
    "rebase",
    "reset",
    "restore",
    "revert",
    "stash",
    "switch",
    "update-index",
    "worktree",
];

/// Subcommands that reach a remote: they refuse while the repository rewrites URLs or names a
/// credential helper, remote helper or proxy handoff leaves out.
const REMOTE_COMMANDS: &[&str] = &["clone", "fetch", "ls-remote", "pull", "push", "remote"];

/// The transports a command that reaches a remote may use: https, ssh and file (`ext::`,
/// `fd::`, plain http and remote helpers never), passed as `-c` to each such command handoff
/// runs, here and on the other machine of `continue --on`.
pub const TRANSPORTS: &[&str] = &[
    "protocol.allow=never",
    "protocol.https.allow=always",
    "protocol.ssh.allow=always",
    "protocol.file.allow=always",
];

/// Subcommands that could show a diff through an external diff program or a text conversion.
const DIFF_COMMANDS: &[&str] = &["diff", "log", "show"];

/// What of the repository's own configuration a [`Git`] runner lets git run. Both are off by
/// default: trust starts at a task's first event, and is given by a caller that compared the
/// configuration with the task's state then (see [`handoff_core::ConfigState`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trust {
    /// The programs the repository-level configuration names (filters, drivers, helpers, ssh
    /// and gpg commands…) run as configured.
    pub repo_programs: bool,
    /// Hooks run (the effective hooks directory's).
    pub hooks: bool,
}

/// The git CLI at one worktree root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Git {
    root: Utf8PathBuf,
    index: Option<Utf8PathBuf>,
    trust: Trust,
    /// What leaves the repository's programs out, read once per runner.
    policy: Arc<OnceLock<Neutralised>>,
}

impl Git {
    /// Git run at `root` (a worktree root, or any directory inside one). Every worktree of
    /// that repository is guarded from then on: no program is started from inside one.
    pub fn new(root: impl Into<Utf8PathBuf>) -> Git {
        let root = root.into();
        handoff_core::guard_worktrees_of(&root);
        Git {
            root,
            index: None,
            trust: Trust::default(),
            policy: Arc::default(),
        }
    }

    /// The same runner, trusting what `trust` says of the repository's configuration.
    pub fn trusting(&self, trust: Trust) -> Git {
        Git {
            root: self.root.clone(),
            index: self.index.clone(),
            trust,
            policy: Arc::default(),
        }
    }

    /// What this runner trusts.
    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// The overrides and refusals that leave the repository's programs out (none when they
    /// are trusted).
    pub fn neutralised(&self) -> &Neutralised {
        self.policy.get_or_init(|| {
            if self.trust.repo_programs {
                return Neutralised::default();
            }
            match RepoPrograms::of(&self.root) {
                Ok(programs) => {
                    let globals = gix::config::File::from_globals().unwrap_or_default();
                    programs.neutralised(&globals)
                }
                // Not a repository: git will say so itself. Anything else that keeps the
                // configuration from being read refuses every command that could use it.
                Err(handoff_core::WorkspaceError::NotAWorktree { .. }) => Neutralised::default(),
                Err(e) => {
                    let why = format!("the repository's configuration cannot be read ({e})");
                    Neutralised {
                        overrides: Vec::new(),
                        content: vec![why.clone()],
                        remote: vec![why],
                    }
                }
            }
        })
    }

    /// The directory git runs in.
    pub fn root(&self) -> &Utf8Path {
        &self.root
    }

    /// The same runner, with `GIT_INDEX_FILE` set to `index` (a private index).
    pub fn with_index(&self, index: &Utf8Path) -> Git {
        Git {
            root: self.root.clone(),
            index: Some(index.to_owned()),
            trust: self.trust,
            policy: Arc::clone(&self.policy),
        }
    }

    /// The command, ready to run: environment scrubbed, forced settings first, the
    /// repository's programs left out unless trusted, stdin closed.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut c = git_program();
        scrub(&mut c, std::env::vars_os().map(|(k, _)| k));
        c.arg("--no-pager");
        for (key, value) in FORCED_CONFIG {
            c.arg("-c").arg(format!("{key}={value}"));
        }
        for (key, value) in &self.neutralised().overrides {
            c.arg("-c").arg(format!("{key}={value}"));
        }
        if !self.trust.hooks {
            c.arg("-c").arg("core.hooksPath=/dev/null");
        }
        let sub = subcommand(args);
        let reaches_a_remote = sub.is_some_and(|n| {
            REMOTE_COMMANDS
                .iter()
                .any(|r| OsStr::new(r) == args[n].as_ref())
        });
        if reaches_a_remote {
            for t in TRANSPORTS {
                c.arg("-c").arg(t);
            }
        }
        for (n, arg) in args.iter().enumerate() {
            c.arg(arg);
            if Some(n) == sub && DIFF_COMMANDS.iter().any(|d| OsStr::new(d) == arg.as_ref()) {
                c.args(["--no-ext-diff", "--no-textconv"]);
            }
        }
        c.current_dir(&self.root)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(Stdio::null());
        if let Some(index) = &self.index {
            c.env("GIT_INDEX_FILE", index);
        }
        c
    }

    /// Runs git and returns its output whatever its exit status; an error only when it could
    /// not start, or when the command would need a program of the repository's that this
    /// runner leaves out.
    pub fn output(&self, args: &[&str]) -> Result<Output, GitError> {
        self.refusal(args)?;
        self.command(args).output().map_err(|e| GitError {
            args: owned(args),
            status: None,
            message: format!("cannot run git {}: {e}", args.join(" ")),
        })
    }

    /// Runs git; a non-zero exit is an error naming the command and its output's tail.
    pub fn run(&self, args: &[&str]) -> Result<Output, GitError> {
        let out = self.output(args)?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(GitError {
                args: owned(args),
                status: out.status.code(),
                message: format!(
                    "git {} failed ({}): {}",
                    args.join(" "),
                    out.status,
                    tail(&out)
                ),
            })
        }
    }

    /// Runs git and returns its standard output, trimmed, as text.
    pub fn text(&self, args: &[&str]) -> Result<String, GitError> {
        let out = self.run(args)?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The full id of HEAD.
    pub fn head(&self) -> Result<String, GitError> {
        self.text(&["rev-parse", "--verify", "HEAD"])
    }

    /// The full id of the commit `rev` names, if it names one.
    pub fn commit_id(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{commit}}");
        let id = self
            .text(&[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ])
            .ok()?;
        (!id.is_empty()).then_some(id)
    }

    /// The absolute git directory of this worktree.
    pub fn git_dir(&self) -> Result<Utf8PathBuf, GitError> {
        self.text(&["rev-parse", "--path-format=absolute", "--git-dir"])
            .map(Utf8PathBuf::from)
    }

    /// The project's main worktree: the parent of the common git directory when it is a
    /// `.git` directory, else this worktree.
    pub fn project_root(&self) -> Utf8PathBuf {
        let common = self
            .text(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .ok();
        match common.map(Utf8PathBuf::from) {
            Some(dir) if dir.file_name() == Some(".git") && dir.is_absolute() => dir
                .parent()
                .map_or_else(|| self.root.clone(), Utf8Path::to_owned),
            _ => self.root.clone(),
        }
    }

    /// A private index file in the git directory (named after `purpose`), removed when the
    /// returned guard is dropped.
    pub fn private_index(&self, purpose: &str) -> Result<PrivateIndex, GitError> {
        let dir = self.git_dir()?;
        let path = dir.join(format!(
            "handoff-{purpose}-{}.index",
            uuid::Uuid::new_v4().simple()
        ));
        Ok(PrivateIndex {
            git: self.with_index(&path),
            path,
        })
    }
}

impl Git {
    /// Refuses a command that would need a setting this runner leaves out.
    fn refusal(&self, args: &[&str]) -> Result<(), GitError> {
        let Some(sub) = subcommand(args).map(|n| args[n]) else {
            return Ok(());
        };
        let policy = self.neutralised();
        let (settings, what) = if CONTENT_COMMANDS.contains(&sub) && !policy.content.is_empty() {
            (&policy.content, "files")
        } else if REMOTE_COMMANDS.contains(&sub) && !policy.remote.is_empty() {
            (&policy.remote, "remotes")
        } else {
            return Ok(());
        };
        Err(GitError {
            args: owned(args),
            status: None,
            message: format!(
                "git {sub} refused: the repository's configuration changes how git handles \
                 {what} with settings handoff does not trust (changed since the task began): \
                 {}; remove them, or run git yourself",
                settings.join(", ")
            ),
        })
    }
}

/// The position of the subcommand in `args`: the first argument that is neither an option
/// nor the value of git's `-c <name>=<value>` or `-C <path>` before it.
fn subcommand<S: AsRef<OsStr>>(args: &[S]) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_ref().as_encoded_bytes();
        if a == b"-c" || a == b"-C" {
            i += 2;
        } else if a.starts_with(b"-") {
            i += 1;
        } else {
            return Some(i);
        }
    }
    None
}

/// A temporary index in the git directory and the runner that uses it; both the index and its
/// lock file are removed when this is dropped.
#[derive(Debug)]
pub struct PrivateIndex {
    git: Git,
    path: Utf8PathBuf,
}

impl PrivateIndex {
    /// The runner with `GIT_INDEX_FILE` set to this index.
    pub fn git(&self) -> &Git {
        &self.git
    }

    /// The index file's path.
    pub fn path(&self) -> &Utf8Path {
        &self.path
    }
}

impl Drop for PrivateIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(format!("{}.lock", self.path));
    }
}

/// Splits NUL-separated git output (`-z`) into its non-empty items.
pub fn split_z(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The last non-empty lines of a command's stdout and stderr, joined by ` | `.
pub fn tail(output: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(ERROR_TAIL_LINES)..].join(" | ")
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_subcommand_is_found_past_the_callers_own_settings() {
        assert_eq!(
            subcommand(&["-c", "core.sshCommand=ssh -T", "push", "u"]),
            Some(2)
        );
        assert_eq!(subcommand(&["-C", "/r", "--no-pager", "fetch"]), Some(3));
        assert_eq!(subcommand(&["--literal-pathspecs", "add"]), Some(1));
        assert_eq!(subcommand::<&str>(&["-c"]), None);
        // A push behind a setting of the caller's still gets the transport rules.
        let args = args_of(&Git::new("/r").command(&["-c", "a.b=c", "push", "u", "x"]));
        assert!(args.iter().any(|a| a == "protocol.allow=never"), "{args:?}");
    }

    #[test]
    fn forced_settings_come_before_the_subcommand() {
        let c = Git::new("/r").command(&["status", "--short"]);
        let args = args_of(&c);
        let sub = args.iter().position(|a| a == "status").unwrap_or(0);
        assert!(sub > 0, "{args:?}");
        for (key, value) in FORCED_CONFIG {
            let setting = format!("{key}={value}");
            let at = args
                .iter()
                .position(|a| *a == setting)
                .unwrap_or(usize::MAX);
            assert!(at < sub && args[at - 1] == "-c", "{setting} in {args:?}");
        }
    }

    #[test]
    fn the_callers_git_variables_are_removed_except_the_kept_ones() {
        let mut c = Git::new("/r")
            .with_index(Utf8Path::new("/r/.git/i"))
            .command(&["status"]);
        let caller = [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_PARAMETERS",
            "GIT_EXEC_PATH",
            "GIT_CONFIG_GLOBAL",
            "GIT_AUTHOR_NAME",
            "PATH",
            "HOME",
        ];
        scrub(&mut c, caller.iter().map(std::ffi::OsString::from));
        let env: std::collections::BTreeMap<String, Option<String>> = c
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        for removed in &caller[..10] {
            assert_eq!(env.get(*removed), Some(&None), "{removed}");
        }
        for kept in ["GIT_AUTHOR_NAME", "PATH", "HOME"] {
            assert!(!env.contains_key(kept), "{kept} touched");
        }
        assert_eq!(env.get("GIT_OPTIONAL_LOCKS"), Some(&Some("0".to_owned())));
    }

    #[test]
    fn a_private_index_is_set_for_every_command() {
        let c = Git::new("/r")
            .with_index(Utf8Path::new("/r/.git/i"))
            .command(&["add", "-A"]);
        let index = c
            .get_envs()
            .find(|(k, _)| *k == "GIT_INDEX_FILE")
            .and_then(|(_, v)| v);
        assert_eq!(index, Some(OsStr::new("/r/.git/i")));
    }

    #[test]
    fn nul_separated_output_splits_into_items() {
        assert_eq!(split_z(b"a\0b c\0\0"), ["a", "b c"]);
        assert!(split_z(b"").is_empty());
    }
}
