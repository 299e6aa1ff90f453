//! `handoff continue --on <ssh destination>[:<path>]`: the task continues on another machine,
//! reached with the system `ssh` (batch mode: keys or an agent, never a password prompt) and
//! a git remote both machines reach. No daemon of our own: the remote machine runs its own
//! `handoff continue` on the carried session, detached so that it survives the connection.

use std::process::Stdio;
use std::time::Duration;

use handoff_core::shell_word;
use handoff_git::TRANSPORTS;
use tokio::io::AsyncWriteExt;

pub use handoff_core::{Destination, parse_destination};

/// What `continue --on` names: a host of the configuration (by its ssh destination; the
/// repository's path there is found as for any destination), else an ssh destination.
pub fn destination_of(
    on: &str,
    hosts: &std::collections::BTreeMap<String, handoff_core::HostConfig>,
) -> Result<Destination, String> {
    match hosts.get(on) {
        Some(h) => handoff_core::check_host(on, h).map(|()| Destination {
            host: h.ssh.clone(),
            path: None,
            base: h.dir.clone(),
        }),
        None => parse_destination(on),
    }
}

/// A finished remote command.
#[derive(Debug)]
pub struct Remote {
    /// Its exit code (255: ssh itself failed).
    pub code: i32,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

impl Remote {
    /// `key=value` lines of stdout.
    pub fn value(&self, key: &str) -> Option<String> {
        self.stdout.lines().find_map(|l| {
            l.strip_prefix(key)
                .and_then(|r| r.strip_prefix('='))
                .map(str::to_owned)
        })
    }

    /// The last lines of stderr, on one line.
    pub fn stderr_tail(&self) -> String {
        last_lines(&self.stderr, 3)
    }
}

/// The last `n` non-empty lines of `text`, joined with ` | `.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// The ssh client: `$HANDOFF_SSH` (a command line in POSIX shell words, e.g.
/// `ssh -F ~/.ssh/work_config -o 'ProxyCommand=nc -X 5 -x proxy:1080 %h %p'`) or `ssh`, in
/// batch mode with a connect timeout.
#[derive(Debug, Clone)]
pub struct Ssh {
    argv: Vec<String>,
    /// The destination.
    pub host: String,
}

/// Refuses a git remote URL that git would read as an option (`--upload-pack=…`), or one with a
/// control character.
pub fn check_url(url: &str) -> Result<(), String> {
    if url.starts_with('-') {
        return Err(format!(
            "the git remote URL '{url}' starts with '-': git would read it as an option"
        ));
    }
    if url.is_empty() || url.chars().any(char::is_control) {
        return Err(format!(
            "the git remote URL {url:?} is empty or has a control character"
        ));
    }
    Ok(())
}

impl Ssh {
    /// The client for `host`, from handoff's environment; `$HANDOFF_SSH` that is not valid
    /// shell words (an unclosed quote) is refused.
    pub fn new(
        host: &str,
        env: &std::collections::BTreeMap<String, String>,
    ) -> Result<Ssh, String> {
        let mut argv: Vec<String> = match env.get("HANDOFF_SSH").map(|s| s.trim()) {
            None | Some("") => vec!["ssh".to_owned()],
            Some(line) => shlex::split(line).filter(|v| !v.is_empty()).ok_or_else(|| {
                format!("HANDOFF_SSH {line:?} is not a command line in shell words (a quote is not closed)")
            })?,
        };
        argv.extend(
            [
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=15",
                "-o",
                "ServerAliveInterval=15",
                "-T",
            ]
            .map(str::to_owned),
        );
        Ok(Ssh {
            argv,
            host: host.to_owned(),
        })
    }

    /// The client's command line without the destination, as shell words: what git's
    /// `core.sshCommand` takes to reach the host the same way.
    pub fn command_line(&self) -> String {
        self.argv
            .iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The command a person types to reach the host (`ssh -t <host>`), for printed commands.
    pub fn interactive(&self, remote_shell: &str) -> String {
        let mut words: Vec<String> = self
            .argv
            .iter()
            .filter(|a| *a != "-T")
            .filter(|a| {
                !a.starts_with("BatchMode")
                    && !a.starts_with("ConnectTimeout")
                    && !a.starts_with("ServerAlive")
            })
            .cloned()
            .collect();
        // Drop the `-o` left without its value.
        let mut cleaned = Vec::new();
        let mut i = 0;
        while i < words.len() {
            if words[i] == "-o" && (i + 1 >= words.len() || words[i + 1].starts_with('-')) {
                i += 1;
                continue;
            }
            cleaned.push(std::mem::take(&mut words[i]));
            i += 1;
        }
        cleaned.push("-t".into());
        cleaned.push(self.host.clone());
        cleaned.push(remote_shell.to_owned());
        cleaned
            .iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs `script` with `sh` on the host, `stdin` on its standard input, for at most
    /// `timeout`.
    pub async fn run(
        &self,
        script: &str,
        stdin: &[u8],
        timeout: Duration,
    ) -> Result<Remote, String> {
        let mut cmd = tokio::process::Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .arg(&self.host)
            .arg("--")
            .arg(format!("sh -c {}", shell_word(script)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.argv[0]))?;
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(stdin).await;
            drop(input);
        }
        match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(out)) => Ok(Remote {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
            Ok(Err(e)) => Err(format!("ssh {} failed: {e}", self.host)),
            Err(_) => Err(format!(
                "ssh {} did not finish within {} s",
                self.host,
                timeout.as_secs()
            )),
        }
    }

    /// Like [`Ssh::run`], but an unreachable host or a non-zero exit is an error naming `step`.
    pub async fn step(
        &self,
        step: &str,
        script: &str,
        stdin: &[u8],
        timeout: Duration,
    ) -> Result<Remote, String> {
        let out = self
            .run(script, stdin, timeout)
            .await
            .map_err(|e| format!("{step}: {e}"))?;
        match out.code {
            0 => Ok(out),
            255 => Err(format!(
                "{step}: cannot reach {} over ssh: {}",
                self.host,
                out.stderr_tail()
            )),
            code => Err(format!(
                "{step} failed on {} (exit {code}): {}",
                self.host,
                out.stderr_tail()
            )),
        }
    }
}

/// What the remote machine has, read without changing anything.
#[derive(Debug, Clone, Default)]
pub struct Inspection {
    /// `handoff` on its PATH.
    pub handoff: Option<String>,
    /// `handoff --version` there.
    pub handoff_version: Option<String>,
    /// The receiver's CLI on its PATH.
    pub receiver: Option<String>,
    /// The repository's path there.
    pub path: String,
    /// `absent`, `present` or `not-a-repo`.
    pub repo: String,
    /// Whether the repository there has uncommitted changes.
    pub dirty: bool,
    /// The branch's head on the git remote, as the remote machine sees it.
    pub branch_head: Option<String>,
    /// Why the remote machine could not list the git remote, if it could not.
    pub ls_remote_error: Option<String>,
    /// Whether the repository there lacks this one's first commit (another project).
    pub foreign: bool,
    /// Where the branch points in the repository there, when it has it.
    pub branch_there: Option<String>,
    /// Whether `setsid` is missing there.
    pub no_setsid: bool,
}

/// The script that inspects the remote machine: `key=value` lines. `root` is the repository's
/// first commit: a repository there without it is another project. Without a path in `dest`,
/// the repository is where it is here if that holds it, else `<base>/<name>` (`base` a host's
/// `dir`, default `~/handoff`).
pub fn inspect_script(
    dest: &Destination,
    local_root: &str,
    repo_name: &str,
    receiver_exe: &str,
    url: &str,
    branch: &str,
    root: &str,
) -> String {
    let q = |s: &str| shell_word(s);
    format!(
        r#"set -u
if h=$(command -v handoff 2>/dev/null); then echo "handoff=$h"; echo "handoffVersion=$(handoff --version 2>/dev/null | head -n 1)"; fi
if r=$(command -v {exe} 2>/dev/null); then echo "receiver=$r"; fi
command -v setsid >/dev/null 2>&1 || echo "noSetsid=1"
p={path}
if [ -z "$p" ]; then
  if [ -e {local}/.git ] && git -C {local} cat-file -e {root}^{{commit}} 2>/dev/null; then p={local}; else p={base}/{name}; fi
fi
case "$p" in "~/"*) p="$HOME/${{p#\~/}}";; esac
echo "path=$p"
if [ -e "$p/.git" ]; then
  echo "repo=present"
  git -C "$p" cat-file -e {root}^{{commit}} 2>/dev/null || echo "foreign=1"
  if [ -n "$(git -C "$p" status --porcelain 2>/dev/null | head -n 1)" ]; then echo "dirty=1"; fi
  echo "branchThere=$(git -C "$p" rev-parse -q --verify {refname} 2>/dev/null)"
elif [ -e "$p" ]; then echo "repo=not-a-repo"
else echo "repo=absent"
fi
e=$(mktemp)
if out=$(GIT_TERMINAL_PROMPT=0 git {transports} ls-remote -- {url} {refname} 2>"$e"); then
  echo "branchHead=$(printf '%s\n' "$out" | head -n 1 | cut -f 1)"
else
  echo "lsRemoteError=$(tail -n 1 "$e")"
fi
rm -f "$e"
"#,
        exe = q(receiver_exe),
        path = q(dest.path.as_deref().unwrap_or("")),
        local = q(local_root),
        base = dest
            .base
            .as_deref()
            .map_or_else(|| "\"$HOME/handoff\"".to_owned(), q),
        name = q(repo_name),
        url = q(url),
        refname = q(&format!("refs/heads/{branch}")),
        root = q(root),
        transports = transports(),
    )
}

/// [`TRANSPORTS`] as `-c` words, for the git commands of the scripts run there.
fn transports() -> String {
    TRANSPORTS
        .iter()
        .map(|t| format!("-c {t}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A full object id (40 or 64 lowercase hex digits).
pub fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The first 12 characters of an object id, for messages.
pub fn short(id: &str) -> String {
    id.chars().take(12).collect()
}

/// Reads the inspection script's output.
pub fn read_inspection(out: &Remote) -> Inspection {
    let v = |k: &str| out.value(k).filter(|s| !s.is_empty());
    Inspection {
        handoff: v("handoff"),
        handoff_version: v("handoffVersion"),
        receiver: v("receiver"),
        path: v("path").unwrap_or_default(),
        repo: v("repo").unwrap_or_default(),
        dirty: v("dirty").is_some(),
        foreign: v("foreign").is_some(),
        branch_there: v("branchThere").filter(|h| is_object_id(h)),
        no_setsid: v("noSetsid").is_some(),
        branch_head: v("branchHead").filter(|h| is_object_id(h)),
        ls_remote_error: v("lsRemoteError"),
    }
}

/// The script that puts the repository at `path` on `branch` at `commit`: cloned when absent
/// (`cloned=1`), else fetched and checked out (`previous=<branch or HEAD>`); HEAD verified.
pub fn prepare_script(path: &str, url: &str, branch: &str, commit: &str) -> String {
    let q = |s: &str| shell_word(s);
    format!(
        r#"set -eu
p={path}
export GIT_TERMINAL_PROMPT=0
if [ ! -e "$p/.git" ]; then
  mkdir -p "$(dirname "$p")"
  git {transports} clone -q --no-checkout -- {url} "$p"
  echo "cloned=1"
else
  prev=$(git -C "$p" symbolic-ref -q --short HEAD || git -C "$p" rev-parse HEAD)
  echo "previous=$prev"
  echo "branchWas=$(git -C "$p" rev-parse -q --verify {branchref} || true)"
fi
git -C "$p" {transports} fetch -q -- {url} {refspec}
git -C "$p" checkout -q -B {branch} {commit}
test "$(git -C "$p" rev-parse HEAD)" = {commit}
echo "head=$(git -C "$p" rev-parse HEAD)"
"#,
        path = q(path),
        url = q(url),
        refspec = q(&format!("refs/heads/{branch}")),
        branch = q(branch),
        branchref = q(&format!("refs/heads/{branch}")),
        commit = q(commit),
        transports = transports(),
    )
}

/// What [`prepare_script`] found in a repository that was there already.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Before {
    /// The branch (or commit) checked out.
    pub previous: Option<String>,
    /// Where the branch pointed, when it existed.
    pub branch_was: Option<String>,
}

/// The script that undoes [`prepare_script`]: removes a fresh clone; else puts the branch back
/// where it was (or deletes it when it did not exist) and checks the previous branch or commit
/// out again.
pub fn undo_script(path: &str, branch: &str, cloned: bool, before: &Before) -> String {
    let q = |s: &str| shell_word(s);
    if cloned {
        return format!("rm -rf {}", q(path));
    }
    let Some(prev) = &before.previous else {
        return "true".to_owned();
    };
    let reset = match &before.branch_was {
        Some(was) => format!(
            "git update-ref {} {}",
            q(&format!("refs/heads/{branch}")),
            q(was)
        ),
        None => format!("git update-ref -d {}", q(&format!("refs/heads/{branch}"))),
    };
    format!(
        "cd {} && git checkout -q --detach && {reset} && git checkout -q {}",
        q(path),
        q(prev)
    )
}

/// The private directory on the remote machine for this handoff's files.
pub fn incoming_dir(id: &str) -> String {
    format!("$HOME/.local/state/handoff/incoming/{id}")
}

/// The script that writes stdin to `<incoming>/<name>` (0600 in a 0700 directory) and prints
/// its absolute path, symbolic links resolved (the receiving `handoff` reads it as a private
/// file, which refuses links).
pub fn upload_script(id: &str, name: &str) -> String {
    format!(
        "set -eu\numask 077\nd=\"{}\"\nmkdir -p \"$d\"\ncat > \"$d\"/{name}\necho \"file=$(cd \"$d\" && pwd -P)/{name}\"\n",
        incoming_dir(id),
        name = shell_word(name)
    )
}

/// The script that starts `handoff continue` detached in its own session (it survives the
/// connection), its JSON line going to `<incoming>/result.json`.
pub fn start_script(id: &str, path: &str, args: &[String]) -> String {
    let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    format!(
        "set -eu\nd=\"{dir}\"\ncd {path}\nsetsid nohup handoff continue {args} > \"$d/result.json\" 2> \"$d/stderr.log\" < /dev/null &\necho $! > \"$d/pid\"\necho \"pid=$!\"\n",
        dir = incoming_dir(id),
        path = shell_word(path),
        args = words.join(" "),
    )
}

/// The script that stops the detached run: its whole session, handoff and the receiver.
pub fn stop_script(id: &str) -> String {
    format!(
        "pid=$(cat \"{}/pid\" 2>/dev/null) && kill -TERM -- -\"$pid\" 2>/dev/null; true\n",
        incoming_dir(id)
    )
}

/// The script that succeeds when the repository at `path` is exactly `commit`: HEAD there
/// and nothing changed.
pub fn untouched_script(path: &str, commit: &str) -> String {
    format!(
        "test \"$(git -C {p} rev-parse HEAD)\" = {c} && test -z \"$(git -C {p} status --porcelain)\"\n",
        p = shell_word(path),
        c = shell_word(commit)
    )
}

/// The script that reports on the detached run: `running=1` while it runs, then its result.
pub fn poll_script(id: &str) -> String {
    format!(
        "d=\"{dir}\"\nif kill -0 \"$(cat \"$d/pid\")\" 2>/dev/null; then echo running=1; exit 0; fi\necho running=0\necho \"result=$(cat \"$d/result.json\" 2>/dev/null)\"\necho \"stderr=$(tail -n 3 \"$d/stderr.log\" 2>/dev/null | tr '\\n' ' ')\"\n",
        dir = incoming_dir(id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_host_is_its_ssh_destination() {
        let hosts = std::collections::BTreeMap::from([(
            "devbox".to_owned(),
            handoff_core::HostConfig {
                ssh: "me@10.0.0.7".into(),
                dir: Some("/srv/h".into()),
                max_runs: None,
            },
        )]);
        let d = destination_of("devbox", &hosts).unwrap();
        assert_eq!((d.host.as_str(), d.path), ("me@10.0.0.7", None));
        let d = destination_of("other:/srv/r", &hosts).unwrap();
        assert_eq!(d.path.as_deref(), Some("/srv/r"));
        let bad = std::collections::BTreeMap::from([(
            "devbox".to_owned(),
            handoff_core::HostConfig {
                ssh: "-oProxyCommand=x".into(),
                dir: None,
                max_runs: None,
            },
        )]);
        assert!(destination_of("devbox", &bad).is_err());
    }

    #[test]
    fn inspection_reads_key_values() {
        let out = Remote {
            code: 0,
            stdout: format!(
                "handoff=/usr/bin/handoff\nreceiver=/usr/bin/codex\npath=/h/handoff/r\nrepo=absent\nbranchHead={}\nbranchThere=warning: x\n",
                "a".repeat(40)
            ),
            stderr: String::new(),
        };
        let i = read_inspection(&out);
        assert_eq!(i.receiver.as_deref(), Some("/usr/bin/codex"));
        assert_eq!(i.repo, "absent");
        assert!(!i.dirty);
        assert_eq!(i.branch_head, Some("a".repeat(40)));
        assert_eq!(i.branch_there, None, "only object ids are read");
        assert_eq!(i.handoff_version, None);
    }

    #[test]
    fn the_interactive_command_keeps_the_users_ssh_options() {
        let env = std::collections::BTreeMap::from([(
            "HANDOFF_SSH".to_owned(),
            "ssh -F /c/config".to_owned(),
        )]);
        let ssh = Ssh::new("box", &env).unwrap();
        assert_eq!(
            ssh.interactive("cd /r && codex resume x"),
            "ssh -F /c/config -t box 'cd /r && codex resume x'"
        );
        assert_eq!(last_lines("a\n\nb\nc\nd\n", 2), "c | d");
    }

    #[test]
    fn the_ssh_command_line_is_shell_words() {
        let env =
            |v: &str| std::collections::BTreeMap::from([("HANDOFF_SSH".to_owned(), v.to_owned())]);
        let ssh = Ssh::new(
            "box",
            &env("ssh -o 'ProxyCommand=nc -x proxy:1080 %h %p' -p 2222"),
        )
        .unwrap();
        assert_eq!(
            ssh.argv[..5],
            [
                "ssh",
                "-o",
                "ProxyCommand=nc -x proxy:1080 %h %p",
                "-p",
                "2222"
            ]
        );
        assert!(
            Ssh::new("box", &env("ssh -o 'unclosed"))
                .unwrap_err()
                .contains("quote")
        );
        assert_eq!(Ssh::new("box", &env("  ")).unwrap().argv[0], "ssh");
    }

    #[test]
    fn a_host_names_where_its_repositories_go() {
        let hosts = [(
            "devbox".to_owned(),
            handoff_core::HostConfig {
                ssh: "me@box".into(),
                dir: Some("~/work".into()),
                max_runs: None,
            },
        )]
        .into_iter()
        .collect();
        let dest = destination_of("devbox", &hosts).unwrap();
        assert_eq!(
            (dest.host.as_str(), dest.base.as_deref()),
            ("me@box", Some("~/work"))
        );
        assert_eq!(destination_of("me@other", &hosts).unwrap().base, None);
        let inspect = inspect_script(&dest, "/r", "r", "codex", "git@h:r.git", "main", "abc");
        assert!(inspect.contains("else p='~/work'/r; fi"), "{inspect}");
    }

    #[test]
    fn option_like_urls_are_refused_and_scripts_end_options_before_urls() {
        assert!(check_url("--upload-pack=touch /tmp/x").is_err());
        assert!(check_url("-u").is_err());
        assert!(check_url("a\nb").is_err());
        assert!(check_url("git@host:r.git").is_ok());
        let dest = parse_destination("h").unwrap();
        let inspect = inspect_script(&dest, "/r", "r", "codex", "git@h:r.git", "main", "abc");
        assert!(inspect.contains("ls-remote -- git@h:r.git"), "{inspect}");
        assert!(inspect.contains("-c protocol.allow=never"), "{inspect}");
        assert!(inspect.contains(r#"p="$HOME/handoff"/r"#), "{inspect}");
        let prepare = prepare_script("/p", "git@h:r.git", "main", "abc");
        assert!(
            prepare.contains("clone -q --no-checkout -- git@h:r.git"),
            "{prepare}"
        );
        assert!(prepare.contains("fetch -q -- git@h:r.git"), "{prepare}");
    }
}
