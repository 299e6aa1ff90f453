//! `FakeSshHost`: `fake-ssh` runs the remote command as a login on "the other machine", without
//! an ssh server.

use std::fs;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handoff_testkit::fake_ssh::{FakeSshHost, FakeSshHosts};
use handoff_testkit::ssh::{ALIAS, Login, give, second_account};

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .next();
        state != Some("Z") && state != Some("X")
    })
}

fn wait_gone(pid: u32) -> bool {
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

/// `<ssh_command> <args…>`, stdin empty.
fn ssh(host: &FakeSshHost, args: &[&str]) -> Command {
    let argv = host.ssh_command();
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]).args(args).stdin(Stdio::null());
    command
}

fn home() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap();
    (dir, home)
}

#[test]
fn fake_ssh_logins_see_their_home_path_and_nothing_else_of_ours() {
    let (_dir, home) = home();
    let path = "/opt/handoff-remote/bin:/usr/bin:/bin";
    let host = FakeSshHost::start_login(&Login {
        user: None,
        home: &home,
        path,
        env: &[("HANDOFF_TEST_MARK", "set")],
    });
    assert_eq!(host.alias(), ALIAS);
    let out = ssh(&host, &[ALIAS, "env; echo cwd=$(pwd -P)"])
        .env("HANDOFF_TEST_LEAK", "here")
        .env("LANG", "C.UTF-8")
        .env("TERM", "xterm")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| *k != "cwd" && *k != "PWD" && *k != "SHLVL" && *k != "_")
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "HANDOFF_TEST_MARK",
            "HOME",
            "LANG",
            "LOGNAME",
            "PATH",
            "SHELL",
            "USER"
        ],
        "{stdout}"
    );
    assert!(stdout.contains(&format!("HOME={}\n", home.display())));
    assert!(stdout.contains(&format!("PATH={path}\n")));
    assert!(stdout.contains(&format!("USER={}\n", host.account())));
    assert!(stdout.contains(&format!("cwd={}\n", home.display())));
    assert!(host.log_text().contains("login "), "{}", host.log_text());

    // With -t, TERM comes along.
    let out = ssh(&host, &["-t", ALIAS, "echo $TERM"])
        .env("TERM", "xterm")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "xterm\n");
}

#[test]
fn fake_ssh_takes_the_command_line_handoff_gives_ssh_and_passes_io_and_exit_codes() {
    let (_dir, home) = home();
    let host = FakeSshHost::start(&home, "/usr/bin:/bin");
    // `$HANDOFF_SSH -o … -T <host> -- 'sh -c <script>'`, the script's input on stdin.
    let mut child = ssh(
        &host,
        &[
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=15",
            "-o",
            "ServerAliveInterval=15",
            "-T",
            ALIAS,
            "--",
            "sh -c 'cat > \"$HOME/got\"; echo out; echo err >&2; exit 7'",
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"the message\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    assert_eq!(
        fs::read_to_string(home.join("got")).unwrap(),
        "the message\n"
    );

    // Other options ssh takes, the user in the destination, a URL; the words are joined.
    let me = host.account().to_owned();
    for args in [
        vec![
            "-p",
            "22",
            "-i",
            "/nonexistent/key",
            "-q",
            ALIAS,
            "echo",
            "a  b",
        ],
        vec!["-oUser=nobody-else", "-l", &me, ALIAS, "echo", "a  b"],
        vec![&format!("{me}@{ALIAS}"), "echo", "a  b"],
        vec![&format!("ssh://{me}@{ALIAS}:2222"), "-n", "echo", "a  b"],
    ] {
        let out = ssh(&host, &args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b\n", "{args:?}");
    }
}

#[test]
fn fake_ssh_fails_with_255_when_it_cannot_log_in() {
    let (_dir, home) = home();
    let mut host = FakeSshHost::start(&home, "/usr/bin:/bin");
    let marker = home.join("ran");
    let touch = format!("touch {}", marker.display());
    for (args, message) in [
        (
            vec!["elsewhere".to_owned(), touch.clone()],
            "Could not resolve hostname elsewhere",
        ),
        (
            vec![format!("someone-else@{ALIAS}"), touch.clone()],
            "Permission denied (publickey)",
        ),
        (
            vec!["-Z".to_owned(), ALIAS.to_owned(), touch.clone()],
            "unknown option -- Z",
        ),
        (vec!["-T".to_owned()], "usage: ssh"),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ssh(&host, &args).output().unwrap();
        assert_eq!(out.status.code(), Some(255), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
    // Without a configuration, no host is known.
    let out = Command::new(&host.ssh_command()[0])
        .args([ALIAS, &touch])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(255), "{out:?}");

    assert_eq!(host.exec("true").0, 0);
    host.stop();
    let (code, stdout, stderr) = host.exec(&touch);
    assert_eq!(code, 255, "{stdout} {stderr}");
    assert!(stderr.contains("Connection refused"), "{stderr}");
    assert!(!marker.exists(), "nothing ran");
    host.stop(); // again: nothing to do
    assert!(host.log_text().contains("refused"), "{}", host.log_text());
}

#[test]
fn fake_ssh_leaves_detached_processes_running_and_stop_ends_open_logins() {
    let (_dir, home) = home();
    let mut host = FakeSshHost::start(&home, "/usr/bin:/bin");
    // A command that detaches a process returns at once; the process lives on.
    let started = Instant::now();
    let (code, out, err) = host.exec("setsid nohup sleep 60 >/dev/null 2>&1 </dev/null & echo $!");
    assert_eq!(code, 0, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let detached: u32 = out.trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(alive(detached), "the detached process outlives the login");

    // A login still open when the host stops is ended, with what it started.
    let mut session = ssh(&host, &[ALIAS, "sleep 60 & echo $! $$; wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(session.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pids: Vec<u32> = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (child, shell) = (pids[0], pids[1]);
    assert_eq!(shell, session.id(), "fake-ssh became the login shell");
    assert!(alive(child));
    host.stop();
    assert!(wait_gone(child), "the login's child {child} is killed");
    assert!(session.wait().unwrap().code().is_none(), "killed");
    assert!(alive(detached), "a detached process is not the login's");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(detached).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(wait_gone(detached));
}

#[test]
fn fake_ssh_logins_as_the_second_account_run_as_it() {
    let Some(user) = second_account() else {
        // Only root can make the account; the other tests cover this user's logins.
        assert!(!nix::unistd::Uid::effective().is_root());
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = fs::canonicalize(dir.path()).unwrap().join("home");
    fs::create_dir_all(&home).unwrap();
    give(&home, &user);
    let host = FakeSshHost::start_login(&Login {
        user: Some(&user),
        home: &home,
        path: "/usr/bin:/bin",
        env: &[],
    });
    let (code, out, err) = host.exec("id -un; id -G; echo $USER; touch \"$HOME/made\"");
    assert_eq!(code, 0, "{err}");
    let account = nix::unistd::User::from_name(&user).unwrap().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            user.as_str(),
            account.gid.as_raw().to_string().as_str(),
            user.as_str()
        ]
    );
    let owner = std::os::unix::fs::MetadataExt::uid(&fs::metadata(home.join("made")).unwrap());
    assert_eq!(owner, account.uid.as_raw(), "files there belong to it");
    // Nothing of root's is within its reach.
    let (code, _, _) = host.exec("touch /root/handoff-fake-ssh-probe");
    assert_ne!(code, 0);
    assert!(!Path::new("/root/handoff-fake-ssh-probe").exists());
}

#[test]
fn one_configuration_reaches_several_hosts_each_with_its_own_home() {
    let (_a, home_a) = home();
    let (_b, home_b) = home();
    fn login(home: &Path) -> Login<'_> {
        Login {
            user: None,
            home,
            path: "/usr/bin:/bin",
            env: &[],
        }
    }
    let mut a = FakeSshHost::start_named("host-a", &login(&home_a));
    let b = FakeSshHost::start_named("host-b", &login(&home_b));
    let both = FakeSshHosts::new(&[&a, &b]);
    let run = |alias: &str| {
        let argv = both.ssh_command();
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .args([alias, "echo $HOME"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        )
    };
    assert_eq!(run("host-a"), (Some(0), home_a.display().to_string()));
    assert_eq!(run("host-b"), (Some(0), home_b.display().to_string()));
    assert_eq!(run("host-c").0, Some(255));
    // Each host stops on its own.
    a.stop();
    assert_eq!(run("host-a").0, Some(255));
    assert_eq!(run("host-b").0, Some(0));
    assert!(a.log_text().contains("host-a"));
    assert!(!b.log_text().contains("host-a"));
}
