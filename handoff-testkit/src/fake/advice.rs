//! Nested advice: a fake worker that asks handoff for advice through the command line its prompt
//! names (`HANDOFF_FAKE_ADVICE`), and the two files tests use to talk to the supervisor while the
//! worker is alive (`HANDOFF_FAKE_CONTEXT_FILE`, `HANDOFF_FAKE_WAIT_FILE`).

use std::io::{Read, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Ctx;
use super::json::{J, obj};
use super::settings;
use super::util;

/// The variable handoff sets for workers it supervises.
pub(crate) const SUPERVISOR_CONTEXT: &str = "HANDOFF_SUPERVISOR_CONTEXT";
/// What the prompt line must contain (trimmed) to be the nested-advice command.
const MARKER: &str = " advice --harness AGENT ";
/// The harness placeholder replaced by each target.
const PLACEHOLDER: &str = "--harness AGENT ";
/// How the prompt line must end: the question comes on stdin.
const INSTRUCTIONS_FROM_STDIN: &str = "--instructions -";
/// The shell that runs the line (the prompt quotes paths for `sh`).
const SHELL: &str = "/bin/sh";
/// At most this much of a nested call's stdout is kept; the rest is drained and dropped.
const STDOUT_LIMIT: usize = 4 << 20;
/// The end of a nested call's stderr that is kept.
const STDERR_TAIL: usize = 8 << 10;
/// How much of the nested `output.response` goes into an evidence summary.
const RESPONSE_CHARS: usize = 200;
/// How often `HANDOFF_FAKE_WAIT_FILE` is polled.
const WAIT_POLL: Duration = Duration::from_millis(20);

/// The nested-advice command template in `prompt`: the first line whose trimmed text contains
/// ` advice --harness AGENT ` and ends with `--instructions -`, trimmed.
pub(crate) fn find_command(prompt: &str) -> Option<&str> {
    prompt
        .lines()
        .map(str::trim)
        .find(|line| line.contains(MARKER) && line.ends_with(INSTRUCTIONS_FROM_STDIN))
}

/// `template` (from [`find_command`]) for one target: the `AGENT` placeholder becomes `target`,
/// and `extra` (raw shell words) goes right before `--instructions -`. Everything else, quoting
/// included, is kept byte for byte.
pub(crate) fn command_for(template: &str, target: &str, extra: Option<&str>) -> String {
    let harness = format!("--harness {target} ");
    let mut command = template.replacen(PLACEHOLDER, &harness, 1);
    if let Some(extra) = extra.map(str::trim).filter(|e| !e.is_empty())
        && let Some(head) = command.strip_suffix(INSTRUCTIONS_FROM_STDIN)
    {
        command = format!("{head}{extra} {INSTRUCTIONS_FROM_STDIN}");
    }
    command
}

/// One nested `handoff advice` call and what came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    /// The harness asked (`codex`, `claude`, …), as listed in `HANDOFF_FAKE_ADVICE`.
    pub(crate) target: String,
    /// The shell line run.
    pub(crate) command: String,
    /// The exit code; `None` when killed by a signal or not started.
    pub(crate) exit_code: Option<i32>,
    /// The signal that ended it, if any.
    pub(crate) signal: Option<i32>,
    /// Stdout (at most 4 MiB), lossy UTF-8.
    pub(crate) stdout: String,
    /// The last 8 KiB of stderr, lossy UTF-8 (or why the shell could not start).
    pub(crate) stderr_tail: String,
    /// Wall time of the call.
    pub(crate) duration_ms: u64,
}

impl Call {
    /// The entry in the invocation record's `nested` array.
    fn record(&self) -> Value {
        json!({
            "target": self.target,
            "command": self.command,
            "exitCode": self.exit_code,
            "stdout": self.stdout,
            "stderrTail": self.stderr_tail,
            "durationMs": self.duration_ms,
        })
    }

    /// `<target>: exit <code> <status> <response…>`: the code (or `signal <n>`, or `none` when
    /// the shell did not start), the `status` of the last JSON object line on stdout (or
    /// `unparsed`), and the first 200 characters of its `output.response` when there is one.
    pub(crate) fn summary(&self) -> String {
        let code = match (self.exit_code, self.signal) {
            (Some(code), _) => code.to_string(),
            (None, Some(signal)) => format!("signal {signal}"),
            (None, None) => "none".to_owned(),
        };
        let result = last_json_object(&self.stdout);
        let status = result
            .as_ref()
            .and_then(|v| v.get("status"))
            .and_then(Value::as_str)
            .unwrap_or("unparsed");
        let mut summary = format!("{}: exit {code} {status}", self.target);
        if let Some(response) = result
            .as_ref()
            .and_then(|v| v.pointer("/output/response"))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            summary.push(' ');
            summary.extend(response.chars().take(RESPONSE_CHARS));
        }
        summary
    }

    /// The evidence item the fake's answer carries for this call.
    pub(crate) fn evidence(&self) -> J {
        obj! { "kind" => "advice", "summary" => self.summary() }
    }
}

fn last_json_object(stdout: &str) -> Option<Value> {
    stdout
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .find(Value::is_object)
}

/// Everything the run does before the model answers, in order: writes `HANDOFF_FAKE_CONTEXT_FILE`,
/// asks each `HANDOFF_FAKE_ADVICE` target (rewriting the invocation record after each call),
/// then waits for `HANDOFF_FAKE_WAIT_FILE`. Returns the calls made.
pub(crate) fn before_answer(ctx: &mut Ctx, exe: &str, prompt: &str) -> Vec<Call> {
    if ctx.settings.get(settings::ADVICE_FROM).as_deref() != Some("any") && !is_root_worker() {
        return Vec::new();
    }
    write_context_file(ctx.settings.get(settings::CONTEXT_FILE));
    let calls = ask_all(ctx, exe, prompt);
    if let Some(path) = ctx.settings.get(settings::WAIT_FILE) {
        wait_for(Path::new(&path));
    }
    calls
}

/// Whether this run is the root's worker: its supervisor context (if any) names the root run.
fn is_root_worker() -> bool {
    let Some(context) = std::env::var_os(SUPERVISOR_CONTEXT) else {
        return true;
    };
    let Ok(v) = serde_json::from_slice::<Value>(context.as_encoded_bytes()) else {
        return true;
    };
    v.get("runId") == v.get("rootRunId")
}

/// `HANDOFF_FAKE_ADVICE_DELAY_MS`: an advice run sleeps that long before it answers.
pub(crate) fn delay(settings: &settings::Settings) {
    if let Some(ms) = settings
        .get(settings::ADVICE_DELAY_MS)
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

fn write_context_file(path: Option<String>) {
    let Some(path) = path else { return };
    let context = std::env::var_os(SUPERVISOR_CONTEXT).unwrap_or_default();
    let path = Path::new(&path);
    if let Err(e) = util::write_atomic(path, context.as_encoded_bytes()) {
        util::err_line(&format!(
            "fake-agent: cannot write context file {}: {e}",
            path.display()
        ));
    }
}

fn wait_for(path: &Path) {
    while !path.exists() {
        std::thread::sleep(WAIT_POLL);
    }
}

/// The targets of `HANDOFF_FAKE_ADVICE`: comma-separated, trimmed, empty entries skipped.
fn targets(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The question sent to `target`: `HANDOFF_FAKE_ADVICE_QUESTION` or the default, plus
/// ` [to <target>]` so that questions to different targets differ (handoff refuses an intent
/// already in the ancestry).
fn question(custom: Option<String>, exe: &str, target: &str) -> String {
    let base = custom
        .unwrap_or_else(|| format!("What is the riskiest part of this change? (asked by {exe})"));
    format!("{base} [to {target}]")
}

fn ask_all(ctx: &mut Ctx, exe: &str, prompt: &str) -> Vec<Call> {
    let Some(list) = ctx.settings.get(settings::ADVICE) else {
        return Vec::new();
    };
    let targets = targets(&list);
    let template = find_command(prompt);
    ctx.recorder
        .set("nestedCommand", template.map_or(Value::Null, Value::from));
    ctx.recorder.set("nested", Value::Array(Vec::new()));
    let Some(template) = template else {
        util::err_line(&format!(
            "fake-agent: {} is set but the prompt names no nested advice command; answering without advice",
            settings::ADVICE
        ));
        return Vec::new();
    };
    let extra = ctx.settings.get(settings::ADVICE_ARGS);
    let custom_question = ctx.settings.get(settings::ADVICE_QUESTION);
    let strip = matches!(
        ctx.settings.get(settings::ADVICE_STRIP).as_deref(),
        Some("1" | "true")
    );
    let mut calls: Vec<Call> = Vec::with_capacity(targets.len());
    for target in targets {
        let command = command_for(template, &target, extra.as_deref());
        let question = question(custom_question.clone(), exe, &target);
        calls.push(run(target, command, &question, strip));
        ctx.recorder.set(
            "nested",
            Value::Array(calls.iter().map(Call::record).collect()),
        );
    }
    calls
}

/// Runs `command` with `/bin/sh -c`, `question` on stdin, the fake's environment (minus
/// `HANDOFF_SUPERVISOR_CONTEXT` when `strip`), stdout and stderr captured.
fn run(target: String, command: String, question: &str, strip: bool) -> Call {
    let started = Instant::now();
    let mut cmd = Command::new(SHELL);
    cmd.arg("-c")
        .arg(&command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if strip {
        cmd.env_remove(SUPERVISOR_CONTEXT);
    }
    let mut call = Call {
        target,
        command,
        exit_code: None,
        signal: None,
        stdout: String::new(),
        stderr_tail: String::new(),
        duration_ms: 0,
    };
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            call.stderr_tail = format!("fake-agent: cannot run {SHELL}: {e}");
            call.duration_ms = elapsed_ms(started);
            return call;
        }
    };
    let stdin = child.stdin.take().map(|mut pipe| {
        let question = question.as_bytes().to_vec();
        // The command may exit without reading its stdin: a broken pipe is not our problem.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&question);
        })
    });
    let stderr = child
        .stderr
        .take()
        .map(|pipe| std::thread::spawn(move || read_tail(pipe, STDERR_TAIL)));
    let stdout = child
        .stdout
        .take()
        .map(|pipe| read_head(pipe, STDOUT_LIMIT))
        .unwrap_or_default();
    let status = child.wait();
    if let Some(t) = stdin {
        let _ = t.join();
    }
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    call.duration_ms = elapsed_ms(started);
    call.stdout = String::from_utf8_lossy(&stdout).into_owned();
    call.stderr_tail = String::from_utf8_lossy(&stderr).into_owned();
    match status {
        Ok(status) => {
            call.exit_code = status.code();
            call.signal = status.signal();
        }
        Err(e) => {
            call.stderr_tail
                .push_str(&format!("\nfake-agent: wait failed: {e}"));
        }
    }
    call
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The first `limit` bytes of `pipe`; the rest is read and dropped so the writer never blocks.
fn read_head(mut pipe: impl Read, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 64 << 10];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

/// The last `limit` bytes of `pipe`.
fn read_tail(mut pipe: impl Read, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 64 << 10];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * limit {
                    kept.drain(..kept.len() - limit);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if kept.len() > limit {
        kept.drain(..kept.len() - limit);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "    '/opt/my tools/handoff' advice --harness AGENT --cwd '/work/a b/it'\\''s' --instructions -";

    #[test]
    fn finds_the_first_matching_line_trimmed() {
        let prompt = format!(
            "Operation: handoff\nMode: build\nTo ask for advice, run:\n{LINE}\n\n  'x' advice --harness AGENT --instructions -\n"
        );
        assert_eq!(
            find_command(&prompt),
            Some(
                "'/opt/my tools/handoff' advice --harness AGENT --cwd '/work/a b/it'\\''s' --instructions -"
            )
        );
    }

    #[test]
    fn absent_without_a_complete_line() {
        assert_eq!(find_command("Operation: handoff\nMode: build\n"), None);
        assert_eq!(find_command(""), None);
        // The placeholder must be there …
        assert_eq!(
            find_command("  'h' advice --harness codex --cwd '/x' --instructions -"),
            None
        );
        // … and the question must come on stdin.
        assert_eq!(
            find_command("  'h' advice --harness AGENT --cwd '/x' --instructions -x"),
            None
        );
        assert_eq!(
            find_command("  'h' advice --harness AGENT --cwd '/x' --instructions - and more"),
            None
        );
    }

    #[test]
    fn substitutes_the_placeholder_only() {
        let template =
            "'/p/AGENT dir/handoff' advice --harness AGENT --cwd '/w/AGENT' --instructions -";
        assert_eq!(
            command_for(template, "claude", None),
            "'/p/AGENT dir/handoff' advice --harness claude --cwd '/w/AGENT' --instructions -"
        );
        assert_eq!(
            command_for(template, "kiro", Some("   ")),
            "'/p/AGENT dir/handoff' advice --harness kiro --cwd '/w/AGENT' --instructions -"
        );
    }

    #[test]
    fn inserts_extra_args_before_instructions() {
        let template = find_command(LINE).unwrap();
        assert_eq!(
            command_for(
                template,
                "codex",
                Some("--bash true --dependency advises:run-x")
            ),
            "'/opt/my tools/handoff' advice --harness codex --cwd '/work/a b/it'\\''s' --bash true --dependency advises:run-x --instructions -"
        );
    }

    #[test]
    fn quoted_paths_survive_the_shell() {
        // The command, run by `sh`, sees the quoted paths as single words.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake handoff");
        std::fs::write(
            &script,
            "#!/bin/sh\nfor a in \"$@\"; do printf '<%s>' \"$a\"; done\nprintf '\\n'\ncat\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let line = format!(
            "    '{}' advice --harness AGENT --cwd '/w/a b' --instructions -",
            script.display()
        );
        let template = find_command(&line).unwrap();
        let call = run(
            "grok".to_owned(),
            command_for(template, "grok", Some("--bash 'x y'")),
            "why?",
            false,
        );
        assert_eq!(call.exit_code, Some(0), "{call:?}");
        assert_eq!(
            call.stdout,
            "<advice><--harness><grok><--cwd></w/a b><--bash><x y><--instructions><->\nwhy?"
        );
        assert_eq!(call.summary(), "grok: exit 0 unparsed");
    }

    #[test]
    fn summary_reads_the_result_line() {
        let mut call = Call {
            target: "codex".to_owned(),
            command: "h".to_owned(),
            exit_code: Some(10),
            signal: None,
            stdout: format!(
                "noise\n{}\n",
                json!({"status": "blocked", "output": {"response": "r".repeat(300)}})
            ),
            stderr_tail: String::new(),
            duration_ms: 1,
        };
        assert_eq!(
            call.summary(),
            format!("codex: exit 10 blocked {}", "r".repeat(200))
        );
        call.stdout = "{\"status\":\"completed\"}".to_owned();
        call.exit_code = None;
        call.signal = Some(9);
        assert_eq!(call.summary(), "codex: exit signal 9 completed");
    }

    #[test]
    fn questions_differ_per_target() {
        assert_eq!(
            question(None, "codex", "claude"),
            "What is the riskiest part of this change? (asked by codex) [to claude]"
        );
        assert_eq!(question(Some("Q".into()), "codex", "grok"), "Q [to grok]");
    }

    #[test]
    fn bounded_reads() {
        assert_eq!(read_head(&b"abcdef"[..], 4), b"abcd");
        assert_eq!(read_tail(&b"abcdef"[..], 4), b"cdef");
        assert_eq!(read_tail(&b"ab"[..], 4), b"ab");
    }
}
