//! `SshHost`: a throwaway sshd on 127.0.0.1 with its own HOME and PATH for logins.
//!
//! They need OpenSSH (`/usr/sbin/sshd`, `ssh`, `ssh-keygen`), so the hermetic suite skips them:
//! `cargo xtask e2e-real` installs openssh-server and openssh-client when missing and runs them
//! (`cargo test -p handoff-testkit --test it -- --ignored ssh::`).

use std::fs;
use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handoff_testkit::ssh::{ALIAS, SshHost};

/// The pids whose command line (arguments joined by spaces, as sshd's process title shows
/// them) contains `needle`.
fn pids_mentioning(needle: &Path) -> Vec<u32> {
    let needle = needle.to_str().unwrap();
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                String::from_utf8_lossy(&cmdline)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .collect()
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .next();
        state != Some("Z") && state != Some("X")
    })
}

/// The host's server configuration, next to its client configuration.
fn sshd_config_of(host: &SshHost) -> PathBuf {
    host.config_file().parent().unwrap().join("sshd_config")
}

fn remote_command(host: &SshHost, script: &str) -> Command {
    let argv = host.ssh_command();
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .arg(host.alias())
        .arg(script)
        .stdin(Stdio::null());
    command
}

#[test]
#[ignore = "real OpenSSH: run with cargo xtask e2e-real"]
fn ssh_logins_see_the_remote_home_and_path() {
    let remote_home = tempfile::tempdir().unwrap();
    let home = remote_home.path().canonicalize().unwrap();
    let path = "/opt/handoff-remote/bin:/usr/bin:/bin";
    let host = SshHost::start(&home, path);

    let (code, stdout, stderr) = host.exec("echo $HOME; echo $PATH");
    assert_eq!(code, 0, "stderr: {stderr}");
    assert_eq!(stdout, format!("{}\n{path}\n", home.display()));
    assert_ne!(
        Some(home.as_os_str()),
        std::env::var_os("HOME").as_deref(),
        "the remote HOME differs from ours"
    );

    // A second login, through the command prefix a program would use.
    let output = remote_command(&host, "echo second; echo oops >&2; exit 7")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "second\n");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "oops\n");
}

#[test]
#[ignore = "real OpenSSH: run with cargo xtask e2e-real"]
fn ssh_config_names_the_alias_and_port_and_keeps_keys_private() {
    let remote_home = tempfile::tempdir().unwrap();
    let host = SshHost::start(remote_home.path(), "/usr/bin:/bin");
    assert_eq!(host.alias(), ALIAS);
    let config = fs::read_to_string(host.config_file()).unwrap();
    assert!(config.starts_with(&format!("Host {ALIAS}\n")), "{config}");
    assert!(
        config.contains(&format!("Port {}\n", host.port())),
        "{config}"
    );
    assert!(config.contains("StrictHostKeyChecking yes"), "{config}");
    assert!(config.contains("BatchMode yes"), "{config}");
    assert_eq!(
        host.ssh_command()[1..],
        ["-F".to_owned(), host.config_file().display().to_string()]
    );

    let dir = host.config_file().parent().unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dir), 0o700);
    assert_eq!(mode(&dir.join("id_ed25519")), 0o600);
    assert_eq!(mode(&dir.join("ssh_host_ed25519_key")), 0o600);
}

#[test]
#[ignore = "real OpenSSH: run with cargo xtask e2e-real"]
fn ssh_stop_makes_the_host_unreachable() {
    let remote_home = tempfile::tempdir().unwrap();
    let mut host = SshHost::start(remote_home.path(), "/usr/bin:/bin");
    assert_eq!(host.exec("true").0, 0);
    host.stop();
    assert!(host.config_file().is_file(), "stop keeps the config");
    let (code, stdout, stderr) = host.exec("echo reached");
    assert_eq!(code, 255, "stdout: {stdout} stderr: {stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains(&format!("connect to host 127.0.0.1 port {}: ", host.port())),
        "a connection error: {stderr}"
    );
    host.stop(); // again: nothing to do
}

#[test]
#[ignore = "real OpenSSH: run with cargo xtask e2e-real"]
fn ssh_drop_leaves_no_sshd_no_login_and_no_files() {
    let remote_home = tempfile::tempdir().unwrap();
    let host = SshHost::start(remote_home.path(), "/usr/bin:/bin");
    let sshd_config = sshd_config_of(&host);
    let dir = host.config_file().parent().unwrap().to_owned();
    assert!(
        !pids_mentioning(&sshd_config).is_empty(),
        "sshd runs with -f {}",
        sshd_config.display()
    );

    // A login still open when the host goes away.
    let mut session = remote_command(&host, "echo $$; exec sleep 60")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(session.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let remote_pid: u32 = line.trim().parse().unwrap();
    assert!(alive(remote_pid));

    let started = Instant::now();
    drop(host);
    assert_eq!(pids_mentioning(&sshd_config), Vec::<u32>::new());
    assert!(!dir.exists(), "{} is removed", dir.display());
    // SIGKILL is delivered asynchronously.
    while alive(remote_pid) && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(remote_pid),
        "the remote command {remote_pid} is killed"
    );
    let status = session.wait().unwrap();
    assert_eq!(status.code(), Some(255), "the open login failed with sshd");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
#[ignore = "real OpenSSH: run with cargo xtask e2e-real"]
fn ssh_logins_as_the_second_account_run_as_it() {
    let Some(user) = handoff_testkit::ssh::second_account() else {
        // Only root can make the account; the other tests cover this user's logins.
        assert!(!nix::unistd::Uid::effective().is_root());
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(dir.path()).unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    handoff_testkit::ssh::give(&home, &user);
    let host = handoff_testkit::ssh::SshHost::start_login(&handoff_testkit::ssh::Login {
        user: Some(&user),
        home: &home,
        path: "/usr/bin:/bin",
        env: &[("HANDOFF_TEST_MARK", "set")],
    });
    let (code, out, err) =
        host.exec("id -un; echo $HOME; echo $HANDOFF_TEST_MARK; touch \"$HOME/made\"");
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, [user.as_str(), home.to_str().unwrap(), "set"]);
    let uid = nix::unistd::User::from_name(&user).unwrap().unwrap().uid;
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(home.join("made")).unwrap());
    assert_eq!(
        owner,
        uid.as_raw(),
        "files there belong to the second account"
    );
}
