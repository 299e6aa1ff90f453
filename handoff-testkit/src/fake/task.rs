//! What the fake "model" does during a run, shared by every CLI: the `HANDOFF_FAKE_MODE` switch,
//! the file it writes, and the provider-output answer it gives.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use super::Ctx;
use super::advice::{self, Call};
use super::api_error::ApiFailure;
use super::json::{J, arr, obj};
use super::leftovers;
use super::receiver::Reply;
use super::settings::{self, Settings};
use super::util;

/// The provider-output schema version the fake answers with.
pub(crate) const SCHEMA_VERSION: &str = "handoff.provider-output.v1";
/// The drifted version used by `schema-drift`.
pub(crate) const DRIFTED_SCHEMA_VERSION: &str = "handoff.provider-output.v0";
/// Placeholder replaced by raw invalid UTF-8 bytes (or U+FFFD where the channel is JSON).
pub(crate) const INVALID_UTF8_MARKER: &str = "@@handoff-fake-invalid-utf8@@";
/// The invalid bytes `invalid-utf8` emits.
const INVALID_BYTES: &[u8] = b"\xff\xfe\xfd";
/// Size of the `oversized` padding: comfortably above 1.1 MiB.
const OVERSIZED_BYTES: usize = 1_200_000;
/// The prose answer of `prose`.
pub(crate) const PROSE: &str = "Sure! Here is what I did: I looked at the repository and took care of the task. Let me know if you need anything else.";
/// Error message of `agent-error`.
pub(crate) const API_ERROR: &str = "API Error: 500 internal error";

/// `HANDOFF_FAKE_MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behaviour {
    Success,
    NoChange,
    Mutate,
    Blocked,
    Failed,
    Hang,
    Grandchild,
    Exit,
    Prose,
    Oversized,
    InvalidUtf8,
    StderrSecret,
    AgentError,
    MaxTurns,
    SchemaDrift,
}

impl Behaviour {
    /// Reads `HANDOFF_FAKE_MODE` (default `success`).
    pub(crate) fn from_settings(settings: &Settings) -> Result<Behaviour, String> {
        let mode = settings
            .get(settings::MODE)
            .unwrap_or_else(|| "success".to_owned());
        Ok(match mode.as_str() {
            "success" => Behaviour::Success,
            "no-change" => Behaviour::NoChange,
            "mutate" => Behaviour::Mutate,
            "blocked" => Behaviour::Blocked,
            "failed" => Behaviour::Failed,
            "hang" => Behaviour::Hang,
            "grandchild" => Behaviour::Grandchild,
            "exit" => Behaviour::Exit,
            "prose" => Behaviour::Prose,
            "oversized" => Behaviour::Oversized,
            "invalid-utf8" => Behaviour::InvalidUtf8,
            "stderr-secret" => Behaviour::StderrSecret,
            "agent-error" => Behaviour::AgentError,
            "max-turns" => Behaviour::MaxTurns,
            "schema-drift" => Behaviour::SchemaDrift,
            other => return Err(other.to_owned()),
        })
    }

    /// Modes in which the agent does the work (writes its file when the run is writable).
    fn does_the_work(self) -> bool {
        matches!(
            self,
            Behaviour::Success
                | Behaviour::StderrSecret
                | Behaviour::Prose
                | Behaviour::Oversized
                | Behaviour::InvalidUtf8
                | Behaviour::SchemaDrift
        )
    }
}

/// The run as the CLI understood it.
#[derive(Debug)]
pub(crate) struct Task {
    /// The CLI name used in the answer (`"<exe> finished <mode>"`).
    pub(crate) exe: &'static str,
    /// The handoff mode named in the prompt (`build`, `review`, …, or `advice`).
    pub(crate) mode: String,
    /// The target directory.
    pub(crate) target: PathBuf,
    /// Whether the CLI was allowed to write.
    pub(crate) writable: bool,
}

impl Task {
    /// An `Operation: advice` run: it never writes files.
    pub(crate) fn is_advice(&self) -> bool {
        self.mode == "advice"
    }
}

/// A file the fake agent wrote.
#[derive(Debug, Clone)]
pub(crate) struct Wrote {
    /// Path relative to the target directory.
    pub(crate) rel: String,
    /// Absolute path.
    pub(crate) abs: PathBuf,
    /// What was written.
    pub(crate) content: String,
}

/// What the model ends up saying.
#[derive(Debug)]
pub(crate) enum Answer {
    /// A provider-output object, and its text.
    Json { value: J, text: String },
    /// Prose instead of JSON.
    Prose(String),
    /// The CLI reports its own failure.
    AgentError(String),
    /// The CLI reports the model API's failure (`HANDOFF_FAKE_API_ERROR`), in its own words.
    Api(ApiFailure),
    /// The CLI ran out of turns.
    MaxTurns,
}

/// The result of the fake model's work.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) wrote: Option<Wrote>,
    pub(crate) answer: Answer,
}

impl Outcome {
    /// The answer text the model produced (JSON or prose); `None` for CLI-level failures.
    pub(crate) fn text(&self) -> Option<&str> {
        match &self.answer {
            Answer::Json { text, .. } => Some(text),
            Answer::Prose(p) => Some(p),
            Answer::AgentError(_) | Answer::Api(_) | Answer::MaxTurns => None,
        }
    }
}

/// Extracts the handoff mode from the prompt: a `Mode: <mode>` line, `advice` for an
/// `Operation: advice` prompt (whichever line comes first), the reference's `in mode '<mode>'`,
/// else `run`.
pub(crate) fn mode_from_prompt(prompt: &str) -> String {
    for line in prompt.lines() {
        let line = line.trim();
        if let Some(rest) = strip_prefix_ci(line, "mode:") {
            let mode = rest.trim();
            if !mode.is_empty() {
                return sanitize(mode);
            }
        }
        if let Some(rest) = strip_prefix_ci(line, "operation:")
            && rest.trim().eq_ignore_ascii_case("advice")
        {
            return "advice".to_owned();
        }
    }
    if let Some(i) = prompt.find("in mode '") {
        let rest = &prompt[i + "in mode '".len()..];
        if let Some(end) = rest.find('\'') {
            return sanitize(&rest[..end]);
        }
    }
    "run".to_owned()
}

fn strip_prefix_ci<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    let head = line.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &line[prefix.len()..])
}

fn sanitize(mode: &str) -> String {
    let cleaned: String = mode
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "run".to_owned()
    } else {
        cleaned
    }
}

/// Reads the behaviour switch or reports a bad value (exit 2); a bad
/// `HANDOFF_FAKE_API_ERROR` is reported the same way.
pub(crate) fn behaviour(settings: &Settings) -> Result<Behaviour, ExitCode> {
    let behaviour = Behaviour::from_settings(settings).map_err(|bad| {
        util::err_line(&format!("fake-agent: unknown {}={bad}", settings::MODE));
        ExitCode::from(2)
    })?;
    ApiFailure::from_settings(settings).map_err(|bad| {
        util::err_line(&format!(
            "fake-agent: unknown {}={bad}",
            settings::API_ERROR
        ));
        ExitCode::from(2)
    })?;
    Ok(behaviour)
}

/// `HANDOFF_FAKE_API_ERROR` (checked by [`behaviour`]): the run fails with it, after writing
/// `fake-partial-<exe>.txt` when `HANDOFF_FAKE_API_ERROR_AFTER_WRITE=1` and it may write.
fn api_failure(settings: &Settings, task: &Task) -> Result<Option<Outcome>, ExitCode> {
    let Ok(Some(api)) = ApiFailure::from_settings(settings) else {
        return Ok(None);
    };
    let wrote = if ApiFailure::after_write(settings) && task.writable && !task.is_advice() {
        let rel = format!("fake-partial-{}.txt", task.exe);
        let content = format!(
            "{} made part of the change, then its model API failed ({})\n",
            task.exe,
            api.name()
        );
        Some(write_content(task, &rel, content)?)
    } else {
        None
    };
    Ok(Some(Outcome {
        wrote,
        answer: Answer::Api(api),
    }))
}

/// Does the run: the `HANDOFF_FAKE_LEFTOVERS` paths (see [`leftovers::leave`]), then the context
/// file, nested advice and the wait file (see [`advice::before_answer`]), then side effects
/// (`hang`, `grandchild`, `exit`, stderr noise, file writes), then builds the answer. `Err` carries the exit code of a run that ends here.
pub(crate) fn perform(
    ctx: &mut Ctx,
    behaviour: Behaviour,
    task: &Task,
    prompt: &str,
) -> Result<Outcome, ExitCode> {
    leftovers::leave(&ctx.settings)?;
    let nested = advice::before_answer(ctx, task.exe, prompt);
    if task.is_advice() {
        advice::delay(&ctx.settings);
    }
    side_effects(&ctx.settings, behaviour, task.exe, ctx.plain_sh)?;
    if let Some(outcome) = api_failure(&ctx.settings, task)? {
        return Ok(outcome);
    }

    // An advisor never writes, whatever the switches say: nested advice runs in the worktree of
    // the worker that asked, whose changes must stay its own.
    let wrote = if task.is_advice() {
        None
    } else if behaviour == Behaviour::Mutate {
        Some(write_file(task, "fake-mutation.txt")?)
    } else if behaviour.does_the_work() && task.writable {
        Some(write_file(task, &format!("fake-{}.txt", task.mode))?)
    } else {
        None
    };

    let answer = match behaviour {
        Behaviour::Prose => Answer::Prose(PROSE.to_owned()),
        Behaviour::AgentError => Answer::AgentError(API_ERROR.to_owned()),
        Behaviour::MaxTurns => Answer::MaxTurns,
        _ => {
            let findings = findings(&ctx.settings);
            let mut value = answer_value(behaviour, task, wrote.as_ref(), &nested, findings);
            if let Some(verdict) = ctx.settings.get(settings::VERDICT) {
                value.push("verdict", verdict);
            }
            let text = value.render();
            Answer::Json { value, text }
        }
    };
    Ok(Outcome { wrote, answer })
}

/// A continuation receiver's turn: the same preliminaries and side effects as a run, then the
/// receiver's own work. It writes `fake-receiver-<exe>.txt` (overwriting it) when the work is
/// done and it may write, or whatever it may do under `mutate`; it answers in prose (the
/// reply's text), or fails like the CLI under `agent-error` / `max-turns` or
/// `HANDOFF_FAKE_API_ERROR`. A reply to the probe question only answers: no file is written.
pub(crate) fn perform_receiver(
    ctx: &mut Ctx,
    behaviour: Behaviour,
    task: &Task,
    prompt: &str,
    session: &str,
    reply: &Reply,
) -> Result<Outcome, ExitCode> {
    leftovers::leave(&ctx.settings)?;
    let _nested = advice::before_answer(ctx, task.exe, prompt);
    side_effects(&ctx.settings, behaviour, task.exe, ctx.plain_sh)?;
    if !reply.probe
        && let Some(outcome) = api_failure(&ctx.settings, task)?
    {
        return Ok(outcome);
    }
    let works = behaviour.does_the_work() && task.writable;
    let wrote = if !reply.probe && (works || behaviour == Behaviour::Mutate) {
        let rel = format!("fake-receiver-{}.txt", task.exe);
        let content = format!("{} continued the task in session {session}\n", task.exe);
        Some(write_content(task, &rel, content)?)
    } else {
        None
    };
    let answer = match behaviour {
        Behaviour::AgentError | Behaviour::MaxTurns => Answer::AgentError(API_ERROR.to_owned()),
        _ => Answer::Prose(reply.text.clone()),
    };
    Ok(Outcome { wrote, answer })
}

/// `hang`, `grandchild`, `exit` and `stderr-secret`: what happens before any answer.
fn side_effects(
    settings: &Settings,
    behaviour: Behaviour,
    exe: &str,
    plain_sh: bool,
) -> Result<(), ExitCode> {
    escape(settings, plain_sh)?;
    match behaviour {
        Behaviour::Hang => {
            write_pid_file(settings.get(settings::READY_FILE), std::process::id());
            util::sleep_forever();
        }
        Behaviour::Grandchild => {
            let child = spawn_grandchild()?;
            write_pid_file(settings.get(settings::GRANDCHILD_PID_FILE), child);
            write_pid_file(settings.get(settings::READY_FILE), std::process::id());
            util::sleep_forever();
        }
        Behaviour::Exit => {
            let code = settings
                .get(settings::EXIT)
                .and_then(|c| c.trim().parse::<u8>().ok())
                .unwrap_or(23);
            util::err_line(&format!(
                "{exe}: fatal: simulated crash ({}=exit), exiting with status {code}",
                settings::MODE
            ));
            return Err(ExitCode::from(code));
        }
        Behaviour::StderrSecret => {
            util::err_line("debug: using api_key=sk-fakesecret0123456789abcdef");
            util::err_line("debug: request header Authorization: Bearer tok-fakesecret0123456789");
        }
        _ => {}
    }
    Ok(())
}

/// The findings `HANDOFF_FAKE_FINDINGS` names (none when unset or not a JSON array).
fn findings(settings: &Settings) -> J {
    match settings
        .get(settings::FINDINGS)
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    {
        Some(list @ serde_json::Value::Array(_)) => J::Value(list),
        _ => arr![],
    }
}

/// The provider-output object.
fn answer_value(
    behaviour: Behaviour,
    task: &Task,
    wrote: Option<&Wrote>,
    nested: &[Call],
    findings: J,
) -> J {
    let status = match behaviour {
        Behaviour::Blocked => "blocked",
        Behaviour::Failed => "failed",
        _ => "completed",
    };
    let schema_version = if behaviour == Behaviour::SchemaDrift {
        DRIFTED_SCHEMA_VERSION
    } else {
        SCHEMA_VERSION
    };
    let mut response = format!("{} finished {}", task.exe, task.mode);
    match behaviour {
        Behaviour::InvalidUtf8 => {
            response.push(' ');
            response.push_str(INVALID_UTF8_MARKER);
        }
        Behaviour::Oversized => {
            response.push(' ');
            response.push_str(&"x".repeat(OVERSIZED_BYTES));
        }
        _ => {}
    }
    let evidence: Vec<J> = nested
        .iter()
        .map(Call::evidence)
        .chain(wrote.map(|w| {
            obj! {
                "kind" => "file",
                "path" => &w.rel,
                "summary" => "wrote the file",
            }
        }))
        .collect();
    obj! {
        "schemaVersion" => schema_version,
        "status" => status,
        "response" => response,
        "evidence" => evidence,
        "findings" => findings,
        "usage" => obj! { "inputTokens" => 22, "outputTokens" => 14, "totalTokens" => 36 },
    }
}

fn write_file(task: &Task, rel: &str) -> Result<Wrote, ExitCode> {
    let content = format!(
        "written by fake {} (mode {}) at {} ns\n",
        task.exe,
        task.mode,
        util::now_nanos()
    );
    write_content(task, rel, content)
}

fn write_content(task: &Task, rel: &str, content: String) -> Result<Wrote, ExitCode> {
    let abs = task.target.join(rel);
    std::fs::write(&abs, &content).map_err(|e| {
        util::err_line(&format!(
            "{}: fake-agent: cannot write {}: {e}",
            task.exe,
            abs.display()
        ));
        ExitCode::from(1)
    })?;
    Ok(Wrote {
        rel: rel.to_owned(),
        abs,
        content,
    })
}

fn write_pid_file(path: Option<String>, pid: u32) {
    if let Some(path) = path {
        let path = Path::new(&path);
        if let Err(e) = util::write_atomic(path, pid.to_string().as_bytes()) {
            util::err_line(&format!(
                "fake-agent: cannot write pid file {}: {e}",
                path.display()
            ));
        }
    }
}

/// One connection of [`settings::NET`]: `connected`, the proxy's status line, or the error.
fn net_attempt(attempt: &str) -> String {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let timeout = std::time::Duration::from_secs(5);
    let via_proxy = |var: &str, request: String| -> String {
        let Some(proxy) = std::env::var(var).ok().filter(|v| !v.is_empty()) else {
            return format!("no {var}");
        };
        let addr = proxy.trim_start_matches("http://").trim_end_matches('/');
        let mut s = match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(e) => return format!("proxy unreachable: {e}"),
        };
        let _ = s.set_read_timeout(Some(timeout));
        if let Err(e) = s.write_all(request.as_bytes()) {
            return format!("write failed: {e}");
        }
        let mut reply = Vec::new();
        let mut buf = [0u8; 1024];
        while !reply.windows(2).any(|w| w == b"\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => reply.extend_from_slice(&buf[..n]),
            }
        }
        let text = String::from_utf8_lossy(&reply);
        text.lines().next().unwrap_or("no reply").to_owned()
    };
    if let Some(target) = attempt.strip_prefix("direct:") {
        match target.parse::<std::net::SocketAddr>() {
            Ok(addr) => match TcpStream::connect_timeout(&addr, timeout) {
                Ok(_) => "connected".into(),
                Err(e) => format!("failed: {e}"),
            },
            Err(e) => format!("bad address: {e}"),
        }
    } else if let Some(target) = attempt.strip_prefix("http:") {
        // A plain request straight to the address, as a CLI that ignores proxies makes it.
        let addr = match target.parse::<std::net::SocketAddr>() {
            Ok(a) => a,
            Err(e) => return format!("bad address: {e}"),
        };
        let mut s = match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => s,
            Err(e) => return format!("failed: {e}"),
        };
        let _ = s.set_read_timeout(Some(timeout));
        let _ = s.write_all(format!("GET / HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes());
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        let text = String::from_utf8_lossy(&reply);
        text.lines().next().unwrap_or("no reply").to_owned()
    } else if let Some(url) = attempt.strip_prefix("get:") {
        let host = url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or("");
        via_proxy(
            "HTTP_PROXY",
            format!("GET {url} HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        )
    } else if let Some(target) = attempt.strip_prefix("connect:") {
        via_proxy(
            "HTTPS_PROXY",
            format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"),
        )
    } else {
        "unknown attempt".into()
    }
}

/// The escapes asked for: a shell command (with `$SHELL`, or `/bin/sh` for a CLI that ignores
/// it), a `setsid` orphan, SIGKILL of the parent.
fn escape(settings: &Settings, plain_sh: bool) -> Result<(), ExitCode> {
    for attempt in settings
        .get(settings::NET)
        .unwrap_or_default()
        .split_whitespace()
    {
        let outcome = net_attempt(attempt);
        util::err_line(&format!("fake-agent: net {attempt} -> {outcome}"));
    }
    if let Some(script) = settings.get(settings::SHELL) {
        let shell = match std::env::var_os("SHELL") {
            Some(s) if !plain_sh => s,
            _ => "/bin/sh".into(),
        };
        let status = std::process::Command::new(shell)
            .args(["-c", script.as_str()])
            .stdin(Stdio::null())
            .stdout(std::io::stderr())
            .status();
        util::err_line(&format!("fake-agent: shell command ended: {status:?}"));
    }
    if let Some(file) = settings.get(settings::ESCAPEE_PID_FILE) {
        // The subshell exits at once: the sleep is orphaned, in its own session and group.
        let status = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "(setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > \"$1\")",
                "sh",
                file.as_str(),
            ])
            .stdin(Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            util::err_line("fake-agent: cannot start the setsid escapee");
            return Err(ExitCode::from(1));
        }
    }
    let signal = match settings.get(settings::KILL_PARENT).as_deref() {
        Some("1") => Some("-KILL"),
        Some("STOP") => Some("-STOP"),
        _ => None,
    };
    if let Some(signal) = signal {
        let parent = std::os::unix::process::parent_id();
        let _ = std::process::Command::new("kill")
            .args([signal, &parent.to_string()])
            .status();
    }
    Ok(())
}

/// `sleep 1000` in our process group, left running on purpose.
fn spawn_grandchild() -> Result<u32, ExitCode> {
    let sleep = util::which("sleep".as_ref())
        .or_else(|| {
            ["/bin/sleep", "/usr/bin/sleep"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| PathBuf::from("sleep"));
    std::process::Command::new(sleep)
        .arg("1000")
        .stdin(Stdio::null())
        .spawn()
        .map(|child| child.id())
        .map_err(|e| {
            util::err_line(&format!("fake-agent: cannot spawn grandchild: {e}"));
            ExitCode::from(1)
        })
}

/// Final bytes for a raw byte channel (stdout, a file): the invalid-UTF-8 marker becomes raw
/// invalid bytes.
pub(crate) fn raw_bytes(text: &str) -> Vec<u8> {
    replace_marker(text, INVALID_BYTES)
}

/// Final text for a channel that must stay valid UTF-8 (the marker becomes U+FFFD).
pub(crate) fn lossy_text(text: &str) -> String {
    text.replace(INVALID_UTF8_MARKER, "\u{fffd}")
}

fn replace_marker(text: &str, with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(INVALID_UTF8_MARKER) {
        out.extend_from_slice(&rest.as_bytes()[..i]);
        out.extend_from_slice(with);
        rest = &rest[i + INVALID_UTF8_MARKER.len()..];
    }
    out.extend_from_slice(rest.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_lines() {
        assert_eq!(
            mode_from_prompt("Operation: handoff\nMode: build\n"),
            "build"
        );
        assert_eq!(mode_from_prompt("Operation: advice\nstuff"), "advice");
        assert_eq!(
            mode_from_prompt("execute the handoff in mode 'review' now"),
            "review"
        );
        assert_eq!(mode_from_prompt("hello"), "run");
        assert_eq!(mode_from_prompt("Mode: a/b"), "a-b");
    }

    #[test]
    fn marker_becomes_invalid_bytes() {
        let bytes = raw_bytes(&format!("a{INVALID_UTF8_MARKER}b"));
        assert_eq!(bytes, b"a\xff\xfe\xfdb");
        assert!(std::str::from_utf8(&bytes).is_err());
    }
}
