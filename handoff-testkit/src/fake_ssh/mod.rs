//! "The other machine" without an SSH server: the `fake-ssh` binary stands in for the `ssh`
//! client and runs the remote command locally, as a login on another machine would.
//!
//! [`FakeSshHost::start`] writes a client configuration naming one host,
//! [`ALIAS`], and what a login there sees: its account, `HOME` and `PATH`.
//! [`FakeSshHost::ssh_command`] is `[<fake-ssh>, "-F", <config>]`, the prefix a program under
//! test puts where it would put `ssh` (handoff: `$HANDOFF_SSH`), followed by ssh's options, the
//! destination and the remote command.
//!
//! ```no_run
//! use handoff_testkit::fake_ssh::FakeSshHost;
//!
//! let remote_home = tempfile::tempdir().unwrap();
//! let host = FakeSshHost::start(remote_home.path(), "/usr/bin:/bin");
//! let (code, stdout, _stderr) = host.exec("echo $HOME");
//! assert_eq!(code, 0);
//! assert_eq!(stdout.trim(), remote_home.path().to_str().unwrap());
//! ```
//!
//! # What `fake-ssh` does
//!
//! It reads ssh's command line: the options OpenSSH's `ssh` takes (`-o BatchMode=yes`,
//! `-oConnectTimeout=15`, `-T`, `-t`, `-p 22`, `-i key`, `-q`, clusters like `-tt`, …) before and
//! after the destination until `--` or the first other word; `-F <config>` names the
//! configuration, `-l <user>`, `-o User=<user>` and `<user>@` name the account, `-n` reads
//! standard input from `/dev/null`, `-t` passes `TERM` on; every other option is accepted and
//! ignored. The destination is `<host>`, `<user>@<host>` or `ssh://[<user>@]<host>[:<port>]`.
//! The remote command is the words after the destination joined with spaces, as ssh sends it.
//!
//! Then, like a login through sshd, it
//!
//! 1. fails with exit 255 and ssh's message when no configuration names the host
//!    (`Could not resolve hostname`), when the host is [stopped](FakeSshHost::stop)
//!    (`Connection refused`), or for another account (`Permission denied (publickey)`);
//! 2. appends a line to the host's log and registers the login, so that
//!    [`FakeSshHost::stop`] can end it;
//! 3. starts a new session (`setsid`): the login is its own process group, which the caller's
//!    signals do not reach and which it leaves behind when it exits, so a process the command
//!    detaches (`setsid nohup … &`) lives on, as it does when an ssh connection closes;
//! 4. run as root for another account, becomes that account (its uid, its primary gid as the
//!    only group);
//! 5. changes to the login's `HOME` (`/` when it cannot, with sshd's message);
//! 6. replaces itself with `/bin/sh -c '<command>'` (a login shell `-sh` without a command)
//!    in an environment of `HOME`, `PATH`, `USER`, `LOGNAME`, `SHELL=/bin/sh`, `LANG` when set
//!    here (Debian's `SendEnv LANG LC_*` / `AcceptEnv LANG LC_*`), `TERM` with `-t`, and the
//!    login's own variables: nothing else of the caller's environment. Standard input, output
//!    and error are the caller's, and the exit code is the command's.
//!
//! # Compared with OpenSSH
//!
//! [`SshHost`](crate::ssh::SshHost) starts a real `sshd`; this needs none, and no network.
//! What differs: the login shell is always `/bin/sh` and the working directory is the login's
//! `HOME` (sshd uses the passwd entry for both); no host keys or client keys are checked; the
//! remote command is not started if the caller is killed first, and killing the caller ends
//! the remote command (`fake-ssh` *is* it, after `exec`); run as root, the account gets no
//! supplementary groups. Without root, only the current user can log in: a
//! [`Login`] naming another account panics in
//! [`FakeSshHost::start_login`], as sshd run by an ordinary user cannot switch accounts either.

mod client;

#[doc(hidden)]
pub use client::main as client_main;

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, Uid, User};
use serde::{Deserialize, Serialize};
use tempfile::TempDir;

use crate::binary::fake_ssh_bin;
use crate::ssh::{ALIAS, Login};

/// What `fake-ssh` reads from `-F <config>`: the one host it reaches.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HostConfig {
    /// The host name it answers to.
    pub alias: String,
    /// The account that logs in.
    pub account: String,
    /// Whether `fake-ssh` becomes `account` (root logging in as another account).
    pub switch_user: bool,
    /// `HOME` of every login.
    pub home: PathBuf,
    /// `PATH` of every login.
    pub path: String,
    /// More variables of every login.
    pub env: Vec<(String, String)>,
    /// `false` once the host is stopped.
    pub reachable: bool,
    /// The connection log.
    pub log: PathBuf,
    /// Where each login leaves `<pid>` holding its start time.
    pub logins: PathBuf,
}

/// A host `fake-ssh` reaches, with its configuration, log and login records in a private temp
/// dir (mode 0700).
///
/// Dropping it ends the logins still running (as [`stop`](FakeSshHost::stop)) and removes the
/// temp dir.
#[derive(Debug)]
pub struct FakeSshHost {
    ssh: PathBuf,
    config_path: PathBuf,
    config: HostConfig,
    stopped: bool,
    _dir: TempDir,
}

impl FakeSshHost {
    /// A host whose logins are the current user's, with `HOME=<remote_home>` and
    /// `PATH=<remote_path>`.
    ///
    /// # Panics
    ///
    /// When `remote_home` is relative, or the temp dir or its files cannot be written.
    pub fn start(remote_home: &Path, remote_path: &str) -> FakeSshHost {
        FakeSshHost::start_login(&Login {
            user: None,
            home: remote_home,
            path: remote_path,
            env: &[],
        })
    }

    /// A host whose logins are `login.user`'s (default: the current user), with `login.home`,
    /// `login.path` and `login.env`.
    ///
    /// # Panics
    ///
    /// As [`FakeSshHost::start`]; also when `login.user` is another account and this process
    /// is not root, or the account does not exist.
    pub fn start_login(login: &Login<'_>) -> FakeSshHost {
        FakeSshHost::start_named(ALIAS, login)
    }

    /// As [`FakeSshHost::start_login`], answering to `alias` instead of [`ALIAS`]: several
    /// hosts reached through one [`FakeSshHosts`] each have their own.
    ///
    /// # Panics
    ///
    /// As [`FakeSshHost::start_login`].
    pub fn start_named(alias: &str, login: &Login<'_>) -> FakeSshHost {
        assert!(
            login.home.is_absolute(),
            "FakeSshHost::start: the remote home must be absolute, got {}",
            login.home.display()
        );
        let me = current_account();
        let (account, switch_user) = match login.user {
            None => (me, false),
            Some(user) if user == me => (me, false),
            Some(user) => {
                assert!(
                    Uid::effective().is_root(),
                    "FakeSshHost: only root can log in as another account ({user})"
                );
                assert!(
                    User::from_name(user).ok().flatten().is_some(),
                    "FakeSshHost: no account {user}"
                );
                (user.to_owned(), true)
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("handoff-fake-ssh-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700))
            .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", dir.path().display()));
        let root = dir
            .path()
            .canonicalize()
            .unwrap_or_else(|e| panic!("cannot canonicalize {}: {e}", dir.path().display()));
        let logins = root.join("logins");
        fs::create_dir(&logins)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", logins.display()));
        let log = root.join("fake-ssh.log");
        fs::write(&log, "").unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let config = HostConfig {
            alias: alias.to_owned(),
            account,
            switch_user,
            home: login.home.to_path_buf(),
            path: login.path.to_owned(),
            env: login
                .env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            reachable: true,
            log,
            logins,
        };
        let host = FakeSshHost {
            ssh: fake_ssh_bin(),
            config_path: root.join("ssh_config.json"),
            config,
            stopped: false,
            _dir: dir,
        };
        host.write_config();
        host
    }

    fn write_config(&self) {
        let text = serde_json::to_string_pretty(&self.config)
            .unwrap_or_else(|e| panic!("cannot serialize the fake-ssh configuration: {e}"));
        // Replaced in one step: a login reading it sees the old or the new one.
        let tmp = self.config_path.with_extension("json.tmp");
        fs::write(&tmp, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", tmp.display()));
        fs::rename(&tmp, &self.config_path)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", self.config_path.display()));
    }

    /// The configuration `fake-ssh -F` reads (JSON).
    pub fn config_file(&self) -> &Path {
        &self.config_path
    }

    /// The host name to give `fake-ssh`: [`ALIAS`] unless [started
    /// named](FakeSshHost::start_named).
    pub fn alias(&self) -> &str {
        &self.config.alias
    }

    /// The account that logs in.
    pub fn account(&self) -> &str {
        &self.config.account
    }

    /// `[<fake-ssh>, "-F", <config_file>]`: the command prefix a program should use in place of
    /// `ssh`, followed by ssh's options, [`alias`](FakeSshHost::alias) and the remote command.
    pub fn ssh_command(&self) -> Vec<String> {
        vec![
            self.ssh.to_string_lossy().into_owned(),
            "-F".to_owned(),
            self.config_path.to_string_lossy().into_owned(),
        ]
    }

    /// Runs `script` on the host (stdin empty) and returns its exit code, stdout and stderr;
    /// 255 when the host cannot be reached, -1 when the command was killed by a signal.
    ///
    /// # Panics
    ///
    /// When `fake-ssh` cannot be started.
    pub fn exec(&self, script: &str) -> (i32, String, String) {
        let output = Command::new(&self.ssh)
            .arg("-F")
            .arg(&self.config_path)
            .arg(self.alias())
            .arg(script)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.ssh.display()));
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// Makes the host unreachable (`fake-ssh` then fails with exit 255, `Connection refused`)
    /// and ends the logins still running: the process group of each (what their commands
    /// started, except what they detached into a session of its own). Calling it again does
    /// nothing.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.config.reachable = false;
        self.write_config();
        self.end_logins();
    }

    /// Makes a [stopped](FakeSshHost::stop) host reachable again, as a machine that came back.
    pub fn resume(&mut self) {
        self.stopped = false;
        self.config.reachable = true;
        self.write_config();
    }

    /// SIGKILL to the process group of every registered login whose process still runs (the
    /// same pid with the same start time).
    fn end_logins(&self) {
        let Ok(entries) = fs::read_dir(&self.config.logins) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let recorded = fs::read_to_string(entry.path()).unwrap_or_default();
            if start_time(pid).is_some_and(|t| t.to_string() == recorded.trim()) {
                // Errors mean it is already gone.
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = fs::remove_file(entry.path());
        }
    }

    /// The connection log so far: one line per login (`login <account> to <host>: <command>`)
    /// or refusal.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.config.log).unwrap_or_default()
    }
}

impl Drop for FakeSshHost {
    fn drop(&mut self) {
        self.end_logins();
    }
}

/// The start time of process `pid` (clock ticks since boot, field 22 of `/proc/<pid>/stat`):
/// with the pid, it names one process even after the pid is reused.
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; `comm` may contain spaces and parentheses. After it, the
    // start time is the 20th field.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

/// The current user's name: its passwd entry, else `$USER`, else the uid.
fn current_account() -> String {
    let uid = Uid::current();
    User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| uid.to_string())
}

/// Several [`FakeSshHost`]s behind one `fake-ssh -F <config>`: the configuration names each
/// host's own (`{"include": [...]}`), and a login goes to the one whose alias it names. Each
/// host keeps its own account, HOME, PATH, log and [`stop`](FakeSshHost::stop).
#[derive(Debug)]
pub struct FakeSshHosts {
    ssh: PathBuf,
    config_path: PathBuf,
    _dir: TempDir,
}

impl FakeSshHosts {
    /// The client configuration reaching every host of `hosts`.
    ///
    /// # Panics
    ///
    /// When the temp dir or its file cannot be written.
    pub fn new(hosts: &[&FakeSshHost]) -> FakeSshHosts {
        let dir = tempfile::Builder::new()
            .prefix("handoff-fake-ssh-hosts-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        let config_path = dir.path().join("ssh_config.json");
        let include: Vec<&Path> = hosts.iter().map(|h| h.config_path.as_path()).collect();
        let text = serde_json::json!({ "include": include }).to_string();
        fs::write(&config_path, text)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", config_path.display()));
        FakeSshHosts {
            ssh: fake_ssh_bin(),
            config_path,
            _dir: dir,
        }
    }

    /// `[<fake-ssh>, "-F", <config>]`, as [`FakeSshHost::ssh_command`].
    pub fn ssh_command(&self) -> Vec<String> {
        vec![
            self.ssh.to_string_lossy().into_owned(),
            "-F".to_owned(),
            self.config_path.to_string_lossy().into_owned(),
        ]
    }
}
