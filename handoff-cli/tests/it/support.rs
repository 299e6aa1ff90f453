//! A private sandbox per test: a scratch repository, fake agents on PATH, private directories
//! for instructions and results, and an isolated HOME (so the preflight cache is per test).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use handoff_testkit::{FakeAgents, ScratchRepo};
use serde_json::Value;

pub const HANDOFF: &str = env!("CARGO_BIN_EXE_handoff");

/// handoff's private work directory, where the binary makes the private directories of a run
/// (agents' run directories, advisers' snapshots, carry scratch, the MCP server's). It is the
/// real user's `~/.local/state/handoff/work`: the home directory comes from the password
/// database, which no environment variable moves (a worker sets those). So tests find their
/// own directories by the paths handoff handed out, never by listing the directory, and leave
/// nothing behind in it (every run removes its own).
pub fn work_dir() -> PathBuf {
    handoff_core::private_work_dir()
        .unwrap()
        .into_std_path_buf()
}

/// The private directories of `prefix` (`handoff-run-`, …) in the work directory that `text`
/// (an argv, an environment, a prompt) names.
pub fn private_dirs_in(text: &str, prefix: &str) -> BTreeSet<PathBuf> {
    let start = format!("{}/{prefix}", work_dir().display());
    text.match_indices(&start)
        .map(|(i, _)| {
            let rest = &text[i + start.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(rest.len());
            PathBuf::from(format!("{start}{}", &rest[..end]))
        })
        .collect()
}

/// The run directories the recorded agent invocations of `sb` were handed (in argv, env or as
/// their working directory).
pub fn recorded_run_dirs(sb: &Sandbox) -> BTreeSet<PathBuf> {
    sb.agents
        .invocations()
        .iter()
        .flat_map(|call| {
            let text = format!("{} {} {}", call["argv"], call["env"], call["cwd"]);
            private_dirs_in(&text, "handoff-run-")
        })
        .collect()
}

pub struct Sandbox {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub repo: ScratchRepo,
    pub agents: FakeAgents,
    pub private: PathBuf,
    pub tmp: PathBuf,
    counter: std::cell::Cell<u32>,
}

fn private_dir(p: &Path) {
    std::fs::create_dir_all(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
}

impl Drop for Sandbox {
    /// An OpenCode run's session is imported after its result, by a detached importer that
    /// uses this sandbox's files: it is let finish before they go.
    fn drop(&mut self) {
        if let Ok(base) = handoff_core::private_dir_base(None) {
            let limit = std::time::Duration::from_secs(20);
            handoff_core::state_import::settle(&base, "opencode", limit);
        }
    }
}

/// What one `handoff` invocation produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub json: Value,
}

impl Run {
    pub fn status(&self) -> &str {
        self.json["status"].as_str().unwrap_or("<none>")
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let tmp = tempfile::Builder::new()
            .prefix("handoff-it-")
            .tempdir()
            .unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        private_dir(&root);
        let agents = FakeAgents::install(&root).with_sandbox_tools();
        let private = root.join("private");
        private_dir(&private);
        private_dir(&root.join("home"));
        let tmpdir = root.join("tmp");
        private_dir(&tmpdir);
        Sandbox {
            _tmp: tmp,
            root,
            repo: ScratchRepo::new(),
            agents,
            private,
            tmp: tmpdir,
            counter: std::cell::Cell::new(0),
        }
    }

    pub fn cwd(&self) -> String {
        self.repo.path().to_string_lossy().into_owned()
    }

    fn next(&self) -> u32 {
        let n = self.counter.get() + 1;
        self.counter.set(n);
        n
    }

    /// Writes an instruction file in the private directory and returns its path.
    pub fn instructions(&self, text: &str) -> String {
        let p = self
            .private
            .join(format!("instructions-{}.txt", self.next()));
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }

    /// A fresh result path in the private directory (not created).
    pub fn result_path(&self) -> String {
        self.private
            .join(format!("result-{}.json", self.next()))
            .to_string_lossy()
            .into_owned()
    }

    /// `handoff` with a scrubbed environment: PATH = fake agents + system dirs, private HOME,
    /// TMPDIR inside the sandbox.
    pub fn command(&self) -> Command {
        let mut c = Command::new(HANDOFF);
        c.env_clear()
            .env("PATH", self.agents.path_env())
            .env("HOME", self.root.join("home"))
            .env("TMPDIR", &self.tmp)
            .env("LANG", "C.UTF-8");
        c
    }

    pub fn exec(&self, cmd: &mut Command) -> Run {
        let Output {
            status,
            stdout,
            stderr,
        } = cmd.output().unwrap();
        let stdout = String::from_utf8(stdout).unwrap();
        let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        Run {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            json,
        }
    }

    /// `handoff <args…>`.
    pub fn run(&self, args: &[&str]) -> Run {
        self.exec(self.command().args(args))
    }

    /// `handoff run --caller-harness <caller> --harness <target> --mode <mode> --cwd <repo>
    /// --instructions <new file> --result <new path> <extra…>`; checks that stdout is exactly
    /// one line and equals the result file when one was written.
    pub fn delegate(&self, caller: &str, target: &str, mode: &str, extra: &[&str]) -> Run {
        let ins = self.instructions("Make the change described here, then report.");
        let result = self.result_path();
        let mut args = vec![
            "run",
            "--caller-harness",
            caller,
            "--harness",
            target,
            "--mode",
            mode,
            "--cwd",
        ];
        let cwd = self.cwd();
        args.push(&cwd);
        args.extend(["--instructions", &ins, "--result", &result]);
        args.extend(extra);
        let run = self.run(&args);
        assert_eq!(
            run.stdout.lines().count(),
            1,
            "stdout must be one line: {}",
            run.stdout
        );
        if let Ok(file) = std::fs::read_to_string(&result) {
            assert_eq!(file, run.stdout, "result file and stdout differ");
        }
        run
    }

    /// Writes the user configuration handoff reads (`~/.config/handoff/config.toml`, 0600) and
    /// returns its path.
    pub fn write_config(&self, text: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.root.join("home/.config/handoff");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// `handoff <args…>` with `stdin` on its standard input.
    pub fn run_stdin(&self, args: &[&str], stdin: &[u8]) -> Run {
        use std::io::Write;
        let mut cmd = self.command();
        cmd.args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            json: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Records every agent invocation from now on.
    pub fn record(&self) -> PathBuf {
        self.agents.record_dir()
    }

    /// Invocations recorded so far that were runs, not probes (`--version`, help, probes).
    pub fn runs(&self) -> Vec<Value> {
        self.agents
            .invocations()
            .into_iter()
            .filter(|i| {
                i["stdin"]
                    .as_str()
                    .is_some_and(|s| s.contains("delegated coding agent"))
            })
            .collect()
    }
}

/// The state letter of `/proc/<pid>/stat`, or `None` when the process does not exist.
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// The processes alive now whose parent is `pid`, from every process's `/proc/<pid>/stat`
/// (kernels without `CONFIG_PROC_CHILDREN` have no `task/<tid>/children`).
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let child = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid = after.split_whitespace().nth(1)?.parse::<u32>().ok()?;
            (ppid == pid).then_some(child)
        })
        .collect()
}

/// Gone, or a zombie no one reaped yet (it no longer runs).
pub fn is_gone(pid: i32) -> bool {
    matches!(proc_state(pid), None | Some('Z' | 'X'))
}

/// A TCP service on the host's loopback that answers every connection with one HTTP reply
/// and counts them.
pub fn loopback_service() -> (u16, std::sync::Arc<std::sync::atomic::AtomicU32>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = std::sync::Arc::clone(&hits);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    (port, hits)
}

/// A sandbox whose `PATH` finds the system's real `bwrap` (not the stub fake Claude uses): for
/// runs under handoff's own sandbox.
pub fn confined() -> Sandbox {
    let sb = Sandbox::new();
    sb.agents.uninstall("bwrap");
    assert!(
        ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"]
            .iter()
            .any(|p| Path::new(p).exists()),
        "these tests need bubblewrap (Debian: apt-get install bubblewrap)"
    );
    sb
}

/// `p` as one single-quoted shell word.
pub fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// What the agent (and the commands of its shell) wrote to stderr.
pub fn provider_stderr(run: &Run) -> &str {
    run.json["diagnostics"]["providerStderr"]
        .as_str()
        .unwrap_or_default()
}

/// `handoff run-with-advice` with `worker` asking `adviser` (the fake's advice switch): the
/// one nested call's exit code and result.
pub fn advice_from(worker: &str, adviser: &str) -> (Run, i64, Value) {
    let sb = Sandbox::new();
    sb.record();
    sb.agents.set(handoff_testkit::keys::ADVICE, adviser);
    let ins = sb.instructions("Look at the repository; ask for advice if useful.");
    let cwd = sb.cwd();
    let run = sb.run(&[
        "run-with-advice",
        "--caller-harness",
        "claude",
        "--harness",
        worker,
        "--mode",
        "review",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ]);
    let record = sb
        .agents
        .invocations()
        .into_iter()
        .find(|r| r.get("nested").is_some())
        .unwrap_or_else(|| panic!("no worker asked for advice: {run:?}"));
    let call = record["nested"][0].clone();
    let result =
        serde_json::from_str(call["stdout"].as_str().unwrap_or("").trim()).unwrap_or(Value::Null);
    (run, call["exitCode"].as_i64().unwrap_or(-1), result)
}

/// A program that stands in for `handoff` while it starts, slowly: it creates `started`, waits
/// a second without catching any signal, then becomes `handoff` with its arguments — with
/// `env`, when given, as its whole environment. It is perl, which leaves the signal mask as it
/// found it (a shell would clear it). Returns the program and `started`.
pub fn slow_handoff(
    sb: &Sandbox,
    name: &str,
    env: Option<&[(String, String)]>,
) -> (PathBuf, PathBuf) {
    let perl = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
    let started = sb.root.join(format!("{name}-started"));
    let program = sb.root.join(name);
    let env = env.map_or_else(String::new, |vars| {
        let pairs: Vec<String> = vars
            .iter()
            .map(|(k, v)| format!("{} => {}", perl(k), perl(v)))
            .collect();
        format!("%ENV = ({});\n", pairs.join(", "))
    });
    let script = format!(
        "#!/usr/bin/perl\n{env}open(my $f, '>', {}) or die;\nclose($f);\n\
         select(undef, undef, undef, 1);\nexec({}, @ARGV) or die;\n",
        perl(&started.to_string_lossy()),
        perl(env!("CARGO_BIN_EXE_handoff")),
    );
    std::fs::write(&program, script).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    (program, started)
}

/// Waits until `path` exists (at most a minute).
pub fn wait_for_file(path: &Path) {
    let start = std::time::Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
