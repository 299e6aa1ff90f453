//! A throwaway OpenSSH server on 127.0.0.1, standing in for a second machine.
//!
//! [`SshHost::start`] runs `/usr/sbin/sshd` in the foreground as the current user, on a free
//! loopback port, with its own host key, its own client key and a client configuration that
//! trusts exactly that host key. Commands run over it see the `HOME` and `PATH` given to
//! [`SshHost::start`], so a test can treat the remote side as a separate machine that happens
//! to share this box's file system.
//!
//! ```no_run
//! use handoff_testkit::ssh::SshHost;
//!
//! let remote_home = tempfile::tempdir().unwrap();
//! let host = SshHost::start(remote_home.path(), "/usr/bin:/bin");
//! let (code, stdout, _stderr) = host.exec("echo $HOME");
//! assert_eq!(code, 0);
//! assert_eq!(stdout.trim(), remote_home.path().to_str().unwrap());
//! // A program under test reaches it with `host.ssh_command()` + `host.alias()` + command.
//! ```
//!
//! Requires `/usr/sbin/sshd` (Debian/Ubuntu package `openssh-server`) and `ssh` /
//! `ssh-keygen` (`openssh-client`); [`SshHost::start`] panics with a message naming the missing
//! piece rather than skipping. So only `cargo xtask e2e-real`, which installs them, uses it; the
//! hermetic suite reaches the other machine through [`FakeSshHost`](crate::fake_ssh::FakeSshHost)
//! (no server), which takes the same [`Login`] and answers to the same [`ALIAS`].

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, Uid, User};
use tempfile::TempDir;

/// The server binary.
pub const SSHD: &str = "/usr/sbin/sshd";

/// The `Host` name in [`SshHost::config_file`].
pub const ALIAS: &str = "handoff-test-host";

/// The directory OpenSSH's privilege separation chroots into when sshd runs as root.
const PRIVSEP_DIR: &str = "/run/sshd";

/// How long [`SshHost::start`] waits for the first successful login.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many fresh ports [`SshHost::start`] tries when another process takes the one it picked.
const PORT_ATTEMPTS: usize = 5;

/// A running `sshd -D` on 127.0.0.1 with its keys and configuration in a private temp dir.
///
/// Dropping it kills sshd and every process it started (open logins and their commands
/// included), then removes the temp dir.
#[derive(Debug)]
pub struct SshHost {
    child: Option<Child>,
    port: u16,
    ssh: PathBuf,
    config: PathBuf,
    log: PathBuf,
    // Last, so the files outlive the process that uses them.
    _keys: TempDir,
    _dir: TempDir,
}

/// Who logs in to an [`SshHost`] and what every login sees.
#[derive(Debug, Clone, Copy)]
pub struct Login<'a> {
    /// The account (default: the current user).
    pub user: Option<&'a str>,
    /// `HOME` of every login.
    pub home: &'a Path,
    /// `PATH` of every login.
    pub path: &'a str,
    /// More variables of every login.
    pub env: &'a [(&'a str, &'a str)],
}

/// The account tests log in as on "the other machine": `handoff-remote`, created (a system
/// account without a home, shell `/bin/sh`) when missing. Only root can make it: `None`
/// otherwise.
///
/// # Panics
///
/// When running as root and `useradd` fails.
pub fn second_account() -> Option<String> {
    const NAME: &str = "handoff-remote";
    // Tests of one process make it one at a time; another process's `useradd` holding the
    // passwd lock makes ours fail, so a failure is retried until the account exists.
    static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if !Uid::effective().is_root() {
        return None;
    }
    let exists = || User::from_name(NAME).ok().flatten().is_some();
    let _guard = CREATING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut attempts = 0;
    while !exists() {
        let out = admin_command("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--home-dir",
                "/tmp",
                "--shell",
                "/bin/sh",
                NAME,
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run useradd: {e}"));
        attempts += 1;
        if !out.status.success() && !exists() {
            assert!(
                attempts < 50,
                "useradd {NAME} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            sleep(Duration::from_millis(100));
        }
    }
    Some(NAME.to_owned())
}

/// useradd leaves an account locked (`!`), which sshd refuses even for keys; `usermod -p '*'`
/// only rules out passwords.
fn unlock_for_sshd(user: &str) {
    let mut attempts = 0;
    loop {
        let out = admin_command("usermod")
            .args(["-p", "*", user])
            .output()
            .unwrap_or_else(|e| panic!("cannot run usermod: {e}"));
        if out.status.success() {
            return;
        }
        attempts += 1;
        // Another process may hold the passwd lock.
        assert!(
            attempts < 50,
            "usermod -p '*' {user} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        sleep(Duration::from_millis(100));
    }
}

/// An account administration program (`useradd`, `usermod`): from `PATH`, else `/usr/sbin` or
/// `/sbin`, which an ordinary user's `PATH` may lack.
fn admin_command(name: &str) -> Command {
    let on_path = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .any(|dir| dir.join(name).is_file());
    let program = if on_path {
        PathBuf::from(name)
    } else {
        ["/usr/sbin", "/sbin"]
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|path| path.is_file())
            .unwrap_or_else(|| PathBuf::from(name))
    };
    Command::new(program)
}

/// Gives `path` and everything under it to `user` (tests that hand files to the other
/// machine's account).
///
/// # Panics
///
/// When the account is unknown or a file can't be changed.
pub fn give(path: &Path, user: &str) {
    let account = User::from_name(user)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no account {user}"));
    fn walk(p: &Path, uid: Uid, gid: nix::unistd::Gid) {
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            p,
            Some(uid),
            Some(gid),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap_or_else(|e| panic!("cannot chown {}: {e}", p.display()));
        if p.is_dir() && !p.is_symlink() {
            for e in fs::read_dir(p)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
                .flatten()
            {
                walk(&e.path(), uid, gid);
            }
        }
    }
    walk(path, account.uid, account.gid);
}

impl SshHost {
    /// Starts `/usr/sbin/sshd -D -e -f <config>` on 127.0.0.1 on a free port, as the current
    /// user, and waits until a login succeeds.
    ///
    /// The temp dir (mode 0700) holds a fresh ed25519 host key, a fresh ed25519 client key
    /// (private keys 0600), the server configuration, the client configuration of
    /// [`config_file`](SshHost::config_file), its `known_hosts` and sshd's log. The server
    /// accepts only that client key (`AuthorizedKeysFile` points at its public half), with
    /// `PasswordAuthentication no`, `KbdInteractiveAuthentication no`, `UsePAM no`,
    /// `StrictModes no`, `PidFile none`, `PermitRootLogin prohibit-password`, and sets
    /// `HOME=<remote_home>` and `PATH=<remote_path>` for every login (`SetEnv`). The working
    /// directory of a remote command is still the user's passwd home directory, and the login
    /// shell is the passwd shell (which, for bash, may read `<remote_home>/.bashrc`).
    ///
    /// When the current user is root, the privilege-separation directory `/run/sshd` is
    /// created (mode 0755) if missing.
    ///
    /// # Panics
    ///
    /// When `sshd`, `ssh` or `ssh-keygen` is missing, `/run/sshd` is needed but cannot be
    /// created, `remote_home` is relative, a path or `remote_path` contains `"` or a line
    /// break, sshd exits early (the message carries its log), or no login succeeds within
    /// about 10 seconds.
    pub fn start(remote_home: &Path, remote_path: &str) -> SshHost {
        SshHost::start_login(&Login {
            user: None,
            home: remote_home,
            path: remote_path,
            env: &[],
        })
    }

    /// Like [`SshHost::start`], for `login.user` (another account: only that account may log
    /// in, and its key is readable by it) and with `login.env` set for every login too. Run as
    /// root, the account's password is set to `*` (`usermod -p '*'`): sshd refuses a locked
    /// account even for keys.
    ///
    /// # Panics
    ///
    /// As [`SshHost::start`]; also when `usermod` fails.
    pub fn start_login(login: &Login<'_>) -> SshHost {
        let remote_home = login.home;
        let remote_path = login.path;
        assert!(
            Path::new(SSHD).is_file(),
            "{SSHD} not found: the SSH tests need an OpenSSH server (install openssh-server)"
        );
        let ssh = find_program("ssh");
        let keygen = find_program("ssh-keygen");
        assert!(
            remote_home.is_absolute(),
            "SshHost::start: remote_home must be absolute, got {}",
            remote_home.display()
        );
        let remote_home = remote_home
            .to_str()
            .unwrap_or_else(|| panic!("SshHost::start: {} is not UTF-8", remote_home.display()));
        if Uid::effective().is_root() {
            ensure_privsep_dir();
            if let Some(user) = login.user {
                unlock_for_sshd(user);
            }
        }

        let dir = tempfile::Builder::new()
            .prefix("handoff-sshd-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        set_mode(dir.path(), 0o700);
        let root = dir
            .path()
            .canonicalize()
            .unwrap_or_else(|e| panic!("cannot canonicalize {}: {e}", dir.path().display()));

        let host_key = root.join("ssh_host_ed25519_key");
        let client_key = root.join("id_ed25519");
        generate_key(&keygen, &host_key, "handoff-test-host-key");
        generate_key(&keygen, &client_key, "handoff-test-client-key");
        let host_public = read_public_key(&host_key);

        let user = login.user.map_or_else(current_user, str::to_owned);
        // Another account reads its authorized key itself: it gets a copy it can read.
        let keys_dir = tempfile::Builder::new()
            .prefix("handoff-sshd-keys-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
        set_mode(keys_dir.path(), 0o755);
        let authorized = keys_dir.path().join("authorized_keys");
        fs::copy(root.join("id_ed25519.pub"), &authorized)
            .unwrap_or_else(|e| panic!("cannot copy the client key: {e}"));
        set_mode(&authorized, 0o644);
        let sshd_config = root.join("sshd_config");
        let config = root.join("ssh_config");
        let known_hosts = root.join("known_hosts");
        let log = root.join("sshd.log");
        let env: Vec<String> = login.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let server = ServerConfig {
            host_key: &host_key,
            authorized_keys: &authorized,
            remote_home,
            remote_path,
            env: &env,
            allow_user: login.user,
        };
        let mut penalties = true;

        for attempt in 1..=PORT_ATTEMPTS {
            let port = free_port();
            write_file(&sshd_config, &server.render(port, penalties), 0o600);
            if penalties && !sshd_accepts(&sshd_config) {
                // `PerSourcePenalties` exists from OpenSSH 9.8 on; older servers reject it.
                penalties = false;
                write_file(&sshd_config, &server.render(port, penalties), 0o600);
            }
            write_file(
                &known_hosts,
                &format!("127.0.0.1 {host_public}\n[127.0.0.1]:{port} {host_public}\n"),
                0o600,
            );
            write_file(
                &config,
                &client_config(port, &user, &client_key, &known_hosts),
                0o600,
            );

            let mut child = spawn_sshd(&sshd_config, &log);
            let log_text = || fs::read_to_string(&log).unwrap_or_default();
            match wait_ready(&mut child, &ssh, &config, &log) {
                Ok(()) => {
                    return SshHost {
                        child: Some(child),
                        port,
                        ssh,
                        config,
                        log,
                        _keys: keys_dir,
                        _dir: dir,
                    };
                }
                Err(Early::PortTaken) if attempt < PORT_ATTEMPTS => {
                    // sshd has exited and been reaped; nothing to kill.
                }
                Err(Early::PortTaken) => panic!(
                    "sshd could not bind a free port in {PORT_ATTEMPTS} attempts; last log:\n{}",
                    log_text()
                ),
                Err(Early::Exited(status)) => {
                    panic!("sshd exited early ({status}); its log:\n{}", log_text())
                }
                Err(Early::Timeout(last)) => {
                    kill_tree(&mut child);
                    panic!(
                        "no ssh login to 127.0.0.1:{port} succeeded within {READY_TIMEOUT:?}; \
                         last ssh error: {last}\nsshd log:\n{}",
                        log_text()
                    )
                }
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// The ssh client configuration: `Host` [`alias`](SshHost::alias) → `HostName 127.0.0.1`,
    /// [`port`](SshHost::port), the current user, the client key (`IdentitiesOnly yes`, no
    /// agent), a `UserKnownHostsFile` holding the host key under `127.0.0.1` and
    /// `[127.0.0.1]:<port>`, `StrictHostKeyChecking yes`, `BatchMode yes`, `ConnectTimeout 5`,
    /// and no connection sharing.
    pub fn config_file(&self) -> &Path {
        &self.config
    }

    /// The host name to give ssh together with [`config_file`](SshHost::config_file):
    /// `handoff-test-host`.
    pub fn alias(&self) -> &str {
        ALIAS
    }

    /// The port sshd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `[<ssh>, "-F", <config_file>]`: the command prefix a program should use, followed by
    /// [`alias`](SshHost::alias) and the remote command. `<ssh>` is the absolute path of the
    /// `ssh` found on `PATH` when the host started.
    pub fn ssh_command(&self) -> Vec<String> {
        vec![
            self.ssh.to_string_lossy().into_owned(),
            "-F".to_owned(),
            self.config.to_string_lossy().into_owned(),
        ]
    }

    /// Runs `script` with the login shell on the host (stdin empty) and returns its exit code,
    /// stdout and stderr. The code is ssh's: the script's own, or 255 when ssh itself failed
    /// (for example, the host is [stopped](SshHost::stop)); -1 when ssh was killed by a signal.
    ///
    /// # Panics
    ///
    /// When `ssh` cannot be started.
    pub fn exec(&self, script: &str) -> (i32, String, String) {
        run_ssh(&self.ssh, &self.config, script)
    }

    /// Stops sshd now, so that the host becomes unreachable, keeping the configuration files.
    ///
    /// Kills the listening sshd and every process descending from it (the per-connection sshd
    /// processes and the commands they run), which also ends open logins. Calling it again
    /// does nothing.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_tree(&mut child);
        }
    }

    /// sshd's log (its stderr) so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for SshHost {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls until a login through `config` succeeds, sshd exits, or [`READY_TIMEOUT`] passes.
fn wait_ready(child: &mut Child, ssh: &Path, config: &Path, log: &Path) -> Result<(), Early> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let log = fs::read_to_string(log).unwrap_or_default();
            return Err(
                if log.contains("Address already in use") || log.contains("Cannot bind any") {
                    Early::PortTaken
                } else {
                    Early::Exited(status.to_string())
                },
            );
        }
        let (code, _, stderr) = run_ssh(ssh, config, "true");
        if code == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Early::Timeout(format!("exit {code}: {}", stderr.trim())));
        }
        sleep(Duration::from_millis(50));
    }
}

/// `ssh -F <config> ALIAS <script>` with an empty stdin: (exit code or -1, stdout, stderr).
fn run_ssh(ssh: &Path, config: &Path, script: &str) -> (i32, String, String) {
    let output = Command::new(ssh)
        .arg("-F")
        .arg(config)
        .arg(ALIAS)
        .arg(script)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", ssh.display()));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Kills the listening sshd and every process descending from it: the per-connection sshd
/// processes and the commands they run.
///
/// The tree is frozen first (`SIGSTOP`, until a pass over `/proc` finds no new descendant), so
/// nothing forks away between the scan and the kill, and nothing is orphaned before it is found.
/// `child` must not have been reaped yet, so that its pid still names it.
fn kill_tree(child: &mut Child) {
    let Ok(root) = i32::try_from(child.id()).map(Pid::from_raw) else {
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    let _ = kill(root, Signal::SIGSTOP);
    let mut frozen = vec![root];
    for _ in 0..100 {
        let found: Vec<Pid> = parent_table()
            .into_iter()
            .filter(|(pid, ppid)| frozen.contains(ppid) && !frozen.contains(pid))
            .map(|(pid, _)| pid)
            .collect();
        if found.is_empty() {
            break;
        }
        for pid in found {
            let _ = kill(pid, Signal::SIGSTOP);
            frozen.push(pid);
        }
    }
    for &pid in &frozen {
        // Errors mean it is already gone.
        let _ = kill(pid, Signal::SIGKILL);
    }
    let _ = child.wait();
}

/// Why [`wait_ready`] gave up.
enum Early {
    /// sshd could not bind the port (another process took it after [`free_port`]).
    PortTaken,
    /// sshd exited for another reason.
    Exited(String),
    /// sshd kept running but no login succeeded; the last ssh error.
    Timeout(String),
}

/// The parts of `sshd_config` that do not depend on the port.
struct ServerConfig<'a> {
    host_key: &'a Path,
    authorized_keys: &'a Path,
    remote_home: &'a str,
    remote_path: &'a str,
    env: &'a [String],
    allow_user: Option<&'a str>,
}

impl ServerConfig<'_> {
    fn render(&self, port: u16, penalties: bool) -> String {
        let mut text = format!(
            "ListenAddress 127.0.0.1:{port}\n\
             HostKey {host_key}\n\
             AuthorizedKeysFile {authorized_keys}\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             UsePAM no\n\
             StrictModes no\n\
             PidFile none\n\
             PermitRootLogin prohibit-password\n\
             PermitUserEnvironment no\n\
             UseDNS no\n\
             PrintMotd no\n\
             PrintLastLog no\n\
             X11Forwarding no\n\
             LogLevel INFO\n\
             Subsystem sftp internal-sftp\n\
             SetEnv {home} {path}{env}\n",
            host_key = quote(&self.host_key.to_string_lossy()),
            authorized_keys = quote(&self.authorized_keys.to_string_lossy()),
            home = quote(&format!("HOME={}", self.remote_home)),
            path = quote(&format!("PATH={}", self.remote_path)),
            env = self
                .env
                .iter()
                .map(|e| format!(" {}", quote(e)))
                .collect::<String>(),
        );
        if let Some(user) = self.allow_user {
            text.push_str(&format!("AllowUsers {user}\n"));
        }
        if penalties {
            // Failed logins in a test must not lock 127.0.0.1 out of later ones.
            text.push_str("PerSourcePenalties no\n");
        }
        text
    }
}

/// The ssh client configuration for `Host ALIAS`.
fn client_config(port: u16, user: &str, identity: &Path, known_hosts: &Path) -> String {
    format!(
        "Host {ALIAS}\n\
         \tHostName 127.0.0.1\n\
         \tPort {port}\n\
         \tUser {user}\n\
         \tIdentityFile {identity}\n\
         \tIdentitiesOnly yes\n\
         \tIdentityAgent none\n\
         \tPubkeyAuthentication yes\n\
         \tPasswordAuthentication no\n\
         \tKbdInteractiveAuthentication no\n\
         \tUserKnownHostsFile {known_hosts}\n\
         \tGlobalKnownHostsFile /dev/null\n\
         \tStrictHostKeyChecking yes\n\
         \tUpdateHostKeys no\n\
         \tCheckHostIP no\n\
         \tBatchMode yes\n\
         \tConnectTimeout 5\n\
         \tControlMaster no\n\
         \tControlPath none\n\
         \tLogLevel ERROR\n",
        user = quote(user),
        identity = quote(&identity.to_string_lossy()),
        known_hosts = quote(&known_hosts.to_string_lossy()),
    )
}

/// Double-quotes a configuration argument, for OpenSSH's tokenizer.
fn quote(value: &str) -> String {
    assert!(
        !value.contains(['"', '\n', '\r']),
        "cannot put {value:?} in an OpenSSH configuration file"
    );
    format!("\"{value}\"")
}

/// Creates `/run/sshd` (0755) when missing.
fn ensure_privsep_dir() {
    let dir = Path::new(PRIVSEP_DIR);
    if dir.is_dir() {
        return;
    }
    if let Err(e) = fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
    {
        panic!(
            "sshd running as root needs {PRIVSEP_DIR}, which is missing and cannot be created: {e}"
        );
    }
    set_mode(dir, 0o755);
}

/// `name` on `PATH`, as an absolute path.
fn find_program(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_absolute() && path.is_file())
        .unwrap_or_else(|| {
            panic!("{name} not found on PATH: the SSH tests need an OpenSSH client (install openssh-client)")
        })
}

/// `ssh-keygen -t ed25519` with an empty passphrase.
fn generate_key(keygen: &Path, path: &Path, comment: &str) {
    let output = Command::new(keygen)
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", keygen.display()));
    assert!(
        output.status.success(),
        "ssh-keygen failed for {} ({}): {}",
        path.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    set_mode(path, 0o600);
}

/// `<type> <base64>` of the public half of `private_key`.
fn read_public_key(private_key: &Path) -> String {
    let path = private_key.with_extension("pub");
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let fields: Vec<&str> = text.split_whitespace().take(2).collect();
    assert!(
        fields.len() == 2,
        "unexpected public key in {}: {text}",
        path.display()
    );
    fields.join(" ")
}

/// The current user's name, from the passwd entry of the real uid.
fn current_user() -> String {
    let uid = Uid::current();
    match User::from_uid(uid) {
        Ok(Some(user)) => user.name,
        Ok(None) => panic!("uid {uid} has no passwd entry, so sshd cannot log it in"),
        Err(e) => panic!("cannot look up the passwd entry of uid {uid}: {e}"),
    }
}

/// A port that was free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .unwrap_or_else(|e| panic!("cannot bind 127.0.0.1:0: {e}"));
    listener
        .local_addr()
        .unwrap_or_else(|e| panic!("cannot read the bound address: {e}"))
        .port()
}

/// Whether `sshd -t` accepts the configuration (its errors are reported when sshd starts).
fn sshd_accepts(config: &Path) -> bool {
    Command::new(SSHD)
        .arg("-t")
        .arg("-f")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `sshd -D -e -f <config>` in its own process group, stderr to `log`.
fn spawn_sshd(config: &Path, log: &Path) -> Child {
    let log_file =
        fs::File::create(log).unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
    Command::new(SSHD)
        .arg("-D")
        .arg("-e")
        .arg("-f")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {SSHD}: {e}"))
}

/// Every process's `(pid, parent pid)`, from `/proc/<pid>/stat`.
fn parent_table() -> Vec<(Pid, Pid)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid …`; `comm` may contain spaces and parentheses.
            let after_comm = &stat[stat.rfind(')')? + 1..];
            let ppid = after_comm.split_whitespace().nth(1)?.parse::<i32>().ok()?;
            Some((Pid::from_raw(pid), Pid::from_raw(ppid)))
        })
        .collect()
}

/// Writes `content` to `path` with `mode`.
fn write_file(path: &Path, content: &str, mode: u32) {
    fs::write(path, content).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    set_mode(path, mode);
}

/// `chmod <mode> <path>`.
fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", path.display()));
}
