//! The `fake-ssh` binary: reads ssh's command line and runs the remote command as a login on
//! the host its `-F` configuration names (see [`crate::fake_ssh`]).

use std::ffi::OsString;
use std::fs;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use nix::unistd::{Gid, User, setgid, setsid, setuid};

use super::{HostConfig, start_time};

/// The options of OpenSSH's `ssh` that take a value.
const WITH_VALUE: &str = "BbcDEeFIiJLlmOoPpQRSWw";
/// The options of OpenSSH's `ssh` that take none.
const FLAGS: &str = "46AaCfGgKkMNnqsTtVvXxYy";

const USAGE: &str = "usage: ssh [-46AaCfGgKkMNnqsTtVvXxYy] [-B bind_interface] [-b bind_address]\n           [-c cipher_spec] [-D [bind_address:]port] [-E log_file]\n           [-e escape_char] [-F configfile] [-I pkcs11] [-i identity_file]\n           [-J destination] [-L address] [-l login_name] [-m mac_spec]\n           [-O ctl_cmd] [-o option] [-P tag] [-p port] [-R address]\n           [-S ctl_path] [-W host:port] [-w local_tun[:remote_tun]]\n           destination [command [argument ...]]";

/// What the command line asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Invocation {
    /// `-F`.
    pub config: Option<PathBuf>,
    /// `-l`, `-o User=`, or the destination's `user@`.
    pub user: Option<String>,
    /// `-t`.
    pub tty: bool,
    /// `-n`.
    pub null_stdin: bool,
    /// The host part of the destination.
    pub host: String,
    /// The words after the destination.
    pub command: Vec<String>,
}

impl Invocation {
    fn option(&mut self, letter: char, value: String) {
        match letter {
            'F' => self.config = Some(PathBuf::from(value)),
            'l' => self.user = Some(value),
            'o' => {
                // `Key=value` or `Key value`, the key in any case.
                let (key, val) = value
                    .split_once(['=', ' ', '\t'])
                    .map_or((value.as_str(), ""), |(k, v)| {
                        (k, v.trim_start_matches(['=', ' ', '\t']))
                    });
                if key.eq_ignore_ascii_case("User") && !val.is_empty() {
                    self.user = Some(val.to_owned());
                }
            }
            // Ports, identities, timeouts…: the stand-in has no use for them.
            _ => {}
        }
    }

    fn flag(&mut self, letter: char) {
        match letter {
            't' => self.tty = true,
            'T' => self.tty = false,
            'n' => self.null_stdin = true,
            _ => {}
        }
    }

    /// Takes `[user@]host` or `ssh://[user@]host[:port]`; a user given by an option wins
    /// over the destination's (as in OpenSSH).
    fn destination(&mut self, dest: &str) -> Result<(), String> {
        let unknown =
            || format!("ssh: Could not resolve hostname {dest}: Name or service not known");
        let (rest, url) = match dest.strip_prefix("ssh://") {
            Some(rest) => (rest.trim_end_matches('/'), true),
            None => (dest, false),
        };
        let host = match rest.rsplit_once('@') {
            Some((user, host)) => {
                if user.is_empty() {
                    return Err(unknown());
                }
                if self.user.is_none() {
                    self.user = Some(user.to_owned());
                }
                host
            }
            None => rest,
        };
        let host = if url {
            host.rsplit_once(':').map_or(host, |(h, _port)| h)
        } else {
            host
        };
        if host.is_empty() {
            return Err(unknown());
        }
        self.host = host.to_owned();
        Ok(())
    }
}

/// Reads ssh's arguments: options (also after the destination, until `--` or another word),
/// the destination, the remote command.
pub(crate) fn parse(args: &[String]) -> Result<Invocation, String> {
    let mut inv = Invocation::default();
    let mut destination = None;
    let mut terminated = false;
    let mut i = 0;
    loop {
        while !terminated && i < args.len() {
            let arg = &args[i];
            if arg == "--" {
                terminated = true;
                i += 1;
                break;
            }
            if arg.len() < 2 || !arg.starts_with('-') {
                break;
            }
            for (at, letter) in arg[1..].char_indices() {
                if FLAGS.contains(letter) {
                    inv.flag(letter);
                    continue;
                }
                if !WITH_VALUE.contains(letter) {
                    return Err(format!("unknown option -- {letter}\n{USAGE}"));
                }
                let rest = &arg[1 + at + letter.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i).cloned().ok_or_else(|| {
                        format!("option requires an argument -- {letter}\n{USAGE}")
                    })?
                } else {
                    rest.to_owned()
                };
                inv.option(letter, value);
                break;
            }
            i += 1;
        }
        if destination.is_none() {
            let Some(dest) = args.get(i) else {
                return Err(USAGE.to_owned());
            };
            destination = Some(dest.clone());
            i += 1;
            if !terminated && i < args.len() {
                continue;
            }
        }
        break;
    }
    let dest = destination.unwrap_or_default();
    inv.destination(&dest)?;
    inv.command = args[i..].to_vec();
    Ok(inv)
}

/// `fake-ssh`'s `main`: returns only when the login fails (exit 255, like ssh).
pub fn main() -> ExitCode {
    let args: Result<Vec<String>, OsString> = std::env::args_os()
        .skip(1)
        .map(OsString::into_string)
        .collect();
    let failure = match args {
        Ok(args) => login(&args),
        Err(arg) => format!("ssh: the argument {arg:?} is not UTF-8"),
    };
    eprintln!("{failure}");
    ExitCode::from(255)
}

/// The host configuration `path` names: itself, or (`{"include": [...]}`, several hosts) the
/// included one whose alias is `host`, else the first.
fn read_config(path: &std::path::Path, host: &str) -> Result<HostConfig, String> {
    let read = |p: &std::path::Path| -> Result<serde_json::Value, String> {
        let text = fs::read_to_string(p).map_err(|e| e.to_string())?;
        serde_json::from_str(&text).map_err(|e| e.to_string())
    };
    let value = read(path)?;
    let Some(include) = value.get("include").and_then(serde_json::Value::as_array) else {
        return serde_json::from_value(value).map_err(|e| e.to_string());
    };
    let mut configs = Vec::new();
    for p in include.iter().filter_map(serde_json::Value::as_str) {
        let config: HostConfig =
            serde_json::from_value(read(std::path::Path::new(p))?).map_err(|e| e.to_string())?;
        configs.push(config);
    }
    let first = configs.first().cloned();
    configs
        .into_iter()
        .find(|c| c.alias == host)
        .or(first)
        .ok_or_else(|| "it includes no host".to_owned())
}

/// Runs the login; returns why it failed.
fn login(args: &[String]) -> String {
    let inv = match parse(args) {
        Ok(inv) => inv,
        Err(e) => return e,
    };
    let unknown = || {
        format!(
            "ssh: Could not resolve hostname {}: Name or service not known",
            inv.host
        )
    };
    let Some(config_path) = &inv.config else {
        return unknown();
    };
    let config = match read_config(config_path, &inv.host) {
        Ok(config) => config,
        Err(e) => {
            return format!(
                "{}: cannot read the configuration: {e}",
                config_path.display()
            );
        }
    };
    let command = inv.command.join(" ");
    if inv.host != config.alias {
        log(&config, &format!("refused {}: unknown host", inv.host));
        return unknown();
    }
    if !config.reachable {
        log(&config, &format!("refused {}: stopped", inv.host));
        return format!(
            "ssh: connect to host {} port 22: Connection refused",
            inv.host
        );
    }
    let account = inv.user.clone().unwrap_or_else(|| config.account.clone());
    if account != config.account {
        log(
            &config,
            &format!("refused {account}@{}: not the login's account", inv.host),
        );
        return format!("{account}@{}: Permission denied (publickey).", inv.host);
    }
    log(
        &config,
        &format!("login {account} to {}: {command}", inv.host),
    );
    register(&config.logins);
    // Its own session, as sshd gives each command: what the command detaches outlives it.
    let _ = setsid();
    if config.switch_user
        && let Err(e) = become_account(&config.account)
    {
        return format!("{account}@{}: Permission denied ({e}).", inv.host);
    }
    if let Err(e) = std::env::set_current_dir(&config.home) {
        eprintln!(
            "Could not chdir to home directory {}: {e}",
            config.home.display()
        );
        let _ = std::env::set_current_dir("/");
    }
    let mut shell = Command::new("/bin/sh");
    if inv.command.is_empty() {
        shell.arg0("-sh");
    } else {
        shell.arg("-c").arg(&command);
    }
    shell
        .env_clear()
        .env("HOME", &config.home)
        .env("PATH", &config.path)
        .env("USER", &config.account)
        .env("LOGNAME", &config.account)
        .env("SHELL", "/bin/sh");
    if let Some(lang) = std::env::var_os("LANG") {
        shell.env("LANG", lang);
    }
    if inv.tty
        && let Some(term) = std::env::var_os("TERM")
    {
        shell.env("TERM", term);
    }
    shell.envs(config.env.iter().map(|(k, v)| (k, v)));
    if inv.null_stdin {
        shell.stdin(Stdio::null());
    }
    let e = shell.exec();
    format!("{account}@{}: cannot start /bin/sh: {e}", inv.host)
}

/// Becomes `name`: its primary group as the only group, then its uid.
fn become_account(name: &str) -> Result<(), String> {
    let user = User::from_name(name)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no account {name}"))?;
    let gid: Gid = user.gid;
    let groups = [gid.as_raw()];
    // SAFETY: `setgroups` reads one group id from a live array of one. Called through libc
    // because nix leaves it out on macOS, whose count is an `int` rather than a `size_t`.
    #[allow(unsafe_code)]
    if unsafe { nix::libc::setgroups(1, groups.as_ptr()) } != 0 {
        return Err(format!("setgroups: {}", std::io::Error::last_os_error()));
    }
    setgid(gid).map_err(|e| format!("setgid: {e}"))?;
    setuid(user.uid).map_err(|e| format!("setuid: {e}"))?;
    Ok(())
}

/// Appends one line to the host's log.
fn log(config: &HostConfig, line: &str) {
    if let Ok(mut file) = fs::OpenOptions::new().append(true).open(&config.log) {
        let _ = file.write_all(format!("{line}\n").as_bytes());
    }
}

/// Leaves `<logins>/<pid>` holding this process's start time, for [`super::FakeSshHost::stop`].
fn register(logins: &Path) {
    let pid = std::process::id();
    if let Some(started) = i32::try_from(pid).ok().and_then(start_time) {
        let _ = fs::write(logins.join(pid.to_string()), started.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn handoffs_command_line_is_read_like_ssh_reads_it() {
        let inv = parse(&words(&[
            "-F",
            "/c.json",
            "-o",
            "BatchMode=yes",
            "-oConnectTimeout=15",
            "-o",
            "ServerAliveInterval=15",
            "-T",
            "box",
            "--",
            "sh -c 'echo hi'",
        ]))
        .unwrap();
        assert_eq!(inv.config.as_deref(), Some(Path::new("/c.json")));
        assert_eq!(inv.host, "box");
        assert_eq!(inv.command, ["sh -c 'echo hi'"]);
        assert_eq!(inv.user, None);
        assert!(!inv.tty);
    }

    #[test]
    fn options_after_the_destination_and_destination_forms() {
        let inv = parse(&words(&["box", "-tt", "-p", "22", "-i", "k", "cmd", "-x"])).unwrap();
        assert!(inv.tty);
        assert_eq!(inv.command, ["cmd", "-x"]);
        let inv = parse(&words(&["-l", "me", "you@box", "true"])).unwrap();
        assert_eq!(inv.user.as_deref(), Some("me"));
        assert_eq!(inv.host, "box");
        let inv = parse(&words(&["-o", "User=me", "box"])).unwrap();
        assert_eq!(inv.user.as_deref(), Some("me"));
        assert!(inv.command.is_empty());
        let inv = parse(&words(&["ssh://me@box:2222", "-n", "true"])).unwrap();
        assert_eq!(
            (inv.user.as_deref(), inv.host.as_str()),
            (Some("me"), "box")
        );
        assert!(inv.null_stdin);
        let inv = parse(&words(&["--", "box", "-t"])).unwrap();
        assert!(!inv.tty, "options end at --");
        assert_eq!(inv.command, ["-t"]);
    }

    #[test]
    fn bad_command_lines_are_refused() {
        assert!(parse(&words(&[])).unwrap_err().starts_with("usage: ssh"));
        assert!(
            parse(&words(&["-T"]))
                .unwrap_err()
                .starts_with("usage: ssh")
        );
        assert!(
            parse(&words(&["-Z", "box"]))
                .unwrap_err()
                .contains("unknown option -- Z")
        );
        assert!(
            parse(&words(&["box", "-o"]))
                .unwrap_err()
                .contains("requires an argument -- o")
        );
    }
}
