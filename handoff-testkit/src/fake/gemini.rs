//! Gemini CLI 0.61.0 (`gemini`), shaped after its recorded output: the prompt from `-p` or
//! stdin, `--output-format stream-json` events (`init`, `message`, `tool_use`, `tool_result`,
//! `result`), the settings of `$GEMINI_CLI_HOME/.gemini/settings.json` (else `~/.gemini`), and
//! the session kept as JSONL in `.gemini/tmp/<slug>/chats/`.
//!
//! Its traps are kept: without `--skip-trust` it exits 55 (an untrusted folder); with
//! `GOOGLE_GEMINI_BASE_URL` but no auth type selected in the settings it exits 41 ("Invalid auth
//! method selected."). The settings' `tools.core` is the list of built-in tools, and an
//! `--admin-policy` file's deny rules take tools away; the turn limit is the settings'
//! `model.maxSessionTurns` (exit 53). An API failure is the result event's error quoting the
//! API's body, and the exit code its HTTP status modulo 256.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use super::Ctx;
use super::api_error::ApiFailure;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::json::{J, arr, obj};
use super::receiver;
use super::task::{self, Answer, Task};
use super::util;
use crate::model_server::ApiError;

use crate::fixtures::{GEMINI_HELP as HELP, GEMINI_VERSION as VERSION};

const OPTS: &[Opt] = &[
    opt("prompt", &["-p", "--prompt"], Kind::Value),
    opt("model", &["-m", "--model"], Kind::Value),
    opt("skip-trust", &["--skip-trust"], Kind::Flag),
    opt("approval-mode", &["--approval-mode"], Kind::Value),
    opt("yolo", &["-y", "--yolo"], Kind::Flag),
    opt("policy", &["--policy"], Kind::Value),
    opt("admin-policy", &["--admin-policy"], Kind::Value),
    opt(
        "allowed-mcp-server-names",
        &["--allowed-mcp-server-names"],
        Kind::Value,
    ),
    opt("extensions", &["-e", "--extensions"], Kind::Value),
    opt("output-format", &["-o", "--output-format"], Kind::Value),
    opt("resume", &["-r", "--resume"], Kind::Value),
    opt("session-id", &["--session-id"], Kind::Value),
    opt("version", &["-v", "--version"], Kind::Flag),
    opt("help", &["-h", "--help"], Kind::Flag),
];

/// The built-in tools that write files.
const WRITE_TOOLS: [&str; 2] = ["write_file", "replace"];

fn fail(message: &str, code: u8) -> ExitCode {
    util::err_line(message);
    ExitCode::from(code)
}

/// `$GEMINI_CLI_HOME`, else `$HOME` (Gemini keeps `.gemini/` in it).
fn gemini_home() -> PathBuf {
    std::env::var_os("GEMINI_CLI_HOME")
        .or_else(|| std::env::var_os("HOME"))
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
        .join(".gemini")
}

/// The user settings (`.gemini/settings.json`), `null` when absent.
fn settings(home: &Path) -> Result<Value, String> {
    match std::fs::read_to_string(home.join("settings.json")) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("settings.json: {e}")),
        Err(_) => Ok(Value::Null),
    }
}

/// The tools an `--admin-policy` file denies (its `toolName` lists of `decision = "deny"`
/// rules, read line by line as the fake's own simple TOML).
fn denied_by(policy: Option<&str>) -> Vec<String> {
    let Some(text) = policy.and_then(|p| std::fs::read_to_string(p).ok()) else {
        return Vec::new();
    };
    if !text.contains("decision = \"deny\"") {
        return Vec::new();
    }
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("toolName = "))
        .filter_map(|list| serde_json::from_str::<Vec<String>>(list).ok())
        .flatten()
        .collect()
}

/// The events of one run, as Gemini prints them.
#[derive(Default)]
struct Events {
    lines: Vec<String>,
}

impl Events {
    fn push(&mut self, mut e: J) {
        if let J::Obj(fields) = &mut e {
            fields.insert(1, ("timestamp".to_owned(), J::from(util::iso_now())));
        }
        self.lines.push(e.render());
    }

    fn flush(&mut self) {
        let mut out = String::new();
        for l in self.lines.drain(..) {
            out.push_str(&l);
            out.push('\n');
        }
        util::out(&task::raw_bytes(&out));
    }
}

/// The result event's `stats`: `calls` model calls of 100 input (10 of them cached) and 7
/// output tokens.
fn stats(model: &str, calls: u64, tools: u64) -> J {
    let per = || {
        obj! {
            "total_tokens" => 107 * calls,
            "input_tokens" => 100 * calls,
            "output_tokens" => 7 * calls,
            "cached" => 10 * calls,
            "input" => 90 * calls,
        }
    };
    let mut s = per();
    s.push("duration_ms", 212);
    s.push("tool_calls", tools);
    s.push("models", J::Obj(vec![(model.to_owned(), per())]));
    s
}

/// How Gemini reports an API failure in its result event, and its exit code.
fn api_failure(api: ApiFailure, model: &str) -> (String, u8) {
    let ApiFailure::Api(error) = api else {
        return (
            "[API Error: exception TypeError: fetch failed sending request]".to_owned(),
            1,
        );
    };
    let body = error.gemini_body(model);
    let message = match error {
        ApiError::RateLimited | ApiError::UsageLimit => format!(
            "[API Error: {}\nSuggested retry after {}s.]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method",
            body["error"]["message"].as_str().unwrap_or_default(),
            crate::model_server::RETRY_AFTER_SECONDS
        ),
        _ => format!("[API Error: {body}]"),
    };
    (message, u8::try_from(error.status() % 256).unwrap_or(1))
}

/// Runs `gemini ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let parsed = match args::parse(&ctx.args, OPTS, true) {
        Ok(p) => p,
        Err(ParseError::Unknown(a)) => return fail(&format!("Unknown argument: {a}"), 1),
        Err(ParseError::MissingValue(n)) => {
            return fail(&format!("Not enough arguments following: {n}"), 1);
        }
    };
    if parsed.has("version") {
        util::out_line(&ctx.version(VERSION));
        return ExitCode::SUCCESS;
    }
    if parsed.has("help") {
        return ctx.print_help(HELP, "--admin-policy");
    }
    let home = gemini_home();
    let settings = match settings(&home) {
        Ok(s) => s,
        Err(e) => return fail(&e, 52),
    };
    if !parsed.has("skip-trust") && std::env::var_os("GEMINI_CLI_TRUST_WORKSPACE").is_none() {
        return fail(
            "Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode.",
            55,
        );
    }
    let selected = settings
        .pointer("/security/auth/selectedType")
        .and_then(Value::as_str);
    if std::env::var_os("GOOGLE_GEMINI_BASE_URL").is_some() && selected.is_none() {
        util::err_line(
            "{\"error\":{\"type\":\"Error\",\"message\":\"Invalid auth method selected.\",\"code\":41}}",
        );
        return ExitCode::from(41);
    }
    let mut prompt = String::from_utf8_lossy(&ctx.read_stdin()).into_owned();
    if let Some(p) = parsed.value("prompt") {
        prompt.push_str(p);
    }
    if prompt.trim().is_empty() {
        return fail(
            "No input provided via stdin. Input can be provided by piping data into gemini or using the --prompt option.",
            42,
        );
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let model = parsed
        .value("model")
        .map(str::to_owned)
        .or_else(|| std::env::var("GEMINI_MODEL").ok())
        .unwrap_or_else(|| "auto-gemini-2.5".to_owned());
    let core: Option<Vec<String>> = settings
        .pointer("/tools/core")
        .and_then(|c| serde_json::from_value(c.clone()).ok());
    let denied = denied_by(parsed.value("admin-policy"));
    let mode = parsed
        .value("approval-mode")
        .unwrap_or(if parsed.has("yolo") {
            "yolo"
        } else {
            "default"
        });
    let offered = |tool: &str| {
        core.as_ref().is_none_or(|c| c.iter().any(|t| t == tool))
            && !denied.iter().any(|d| d == tool)
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: matches!(mode, "yolo" | "auto_edit") && WRITE_TOOLS.iter().all(|t| offered(t)),
        target: cwd.clone(),
    };
    let session = match parsed.value("resume").or(parsed.value("session-id")) {
        Some(id) if parsed.has("resume") && find_session(&home, id).is_none() => {
            return fail(
                &format!(
                    "Error resuming session: Invalid session identifier \"{id}\". Use --list-sessions to see available sessions."
                ),
                42,
            );
        }
        Some(id) => id.to_owned(),
        None => util::uuid(),
    };
    let turns = settings
        .pointer("/model/maxSessionTurns")
        .and_then(Value::as_u64)
        .filter(|n| *n > 0);
    let mut ev = Events::default();
    ev.push(obj! { "type" => "init", "session_id" => session.as_str(), "model" => model.as_str() });
    ev.push(obj! { "type" => "message", "role" => "user", "content" => prompt.as_str() });
    if behaviour == task::Behaviour::MaxTurns {
        return endless(&mut ev, &model, turns);
    }
    // A continuation's turn: the receiver's reply, its file, the session kept.
    let outcome = if receiver::is_turn(&prompt) {
        let previous = find_session(&home, &session).and_then(|f| last_answer(&f));
        receiver::pause(&ctx.settings);
        let reply = receiver::reply(&ctx.settings, task.exe, &session, &prompt, previous);
        task::perform_receiver(ctx, behaviour, &task, &prompt, &session, &reply)
    } else {
        task::perform(ctx, behaviour, &task, &prompt)
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut calls = 1;
    let mut tools = 0;
    if let Some(w) = &outcome.wrote {
        let id = util::short_id("write_file__call_");
        ev.push(obj! {
            "type" => "tool_use",
            "tool_name" => "write_file",
            "tool_id" => id.as_str(),
            "parameters" => obj! { "file_path" => w.abs.display().to_string(), "content" => w.content.as_str() },
        });
        ev.push(obj! { "type" => "tool_result", "tool_id" => id.as_str(), "status" => "success" });
        calls += 1;
        tools += 1;
    }
    let (error, code) = match &outcome.answer {
        Answer::Json { text, .. } | Answer::Prose(text) => {
            ev.push(obj! { "type" => "message", "role" => "assistant", "content" => text.as_str(), "delta" => true });
            (None, 0)
        }
        Answer::AgentError(message) => (Some(("unknown", message.clone())), 1),
        Answer::Api(api) => {
            let (message, code) = api_failure(*api, &model);
            calls = 0;
            (Some(("unknown", message)), code)
        }
        Answer::MaxTurns => (
            Some((
                "FatalTurnLimitedError",
                "Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.".to_owned(),
            )),
            53,
        ),
    };
    let mut result = obj! { "type" => "result" };
    match &error {
        None => result.push("status", "success"),
        Some((kind, message)) => {
            result.push("status", "error");
            result.push(
                "error",
                obj! { "type" => *kind, "message" => message.as_str() },
            );
        }
    }
    result.push("stats", stats(&model, calls, tools));
    ev.push(result);
    save_session(&home, &session, &cwd, &prompt, outcome.text());
    ev.flush();
    ExitCode::from(code)
}

/// A model that never stops calling a tool: each call a turn, until the settings' limit (exit
/// 53) or 200 calls.
fn endless(ev: &mut Events, model: &str, limit: Option<u64>) -> ExitCode {
    for n in 0..200u64 {
        if limit.is_some_and(|l| n >= l) {
            ev.push(obj! {
                "type" => "result",
                "status" => "error",
                "error" => obj! {
                    "type" => "FatalTurnLimitedError",
                    "message" => "Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.",
                },
                "stats" => stats(model, n, n),
            });
            ev.flush();
            return ExitCode::from(53);
        }
        let id = util::short_id("read_file__call_");
        ev.push(obj! {
            "type" => "tool_use",
            "tool_name" => "read_file",
            "tool_id" => id.as_str(),
            "parameters" => obj! { "file_path" => "README.md" },
        });
        ev.push(obj! { "type" => "tool_result", "tool_id" => id.as_str(), "status" => "success" });
        ev.flush();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    fail("fake-agent: the model never stopped calling tools", 1)
}

/// The session file of `id` under `.gemini/tmp/*/chats/`.
fn find_session(home: &Path, id: &str) -> Option<PathBuf> {
    let short = id.get(..8)?;
    let projects = std::fs::read_dir(home.join("tmp")).ok()?;
    projects
        .flatten()
        .filter_map(|p| std::fs::read_dir(p.path().join("chats")).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&format!("-{short}.jsonl")))
        })
}

/// The last `gemini` message's text of a session file.
fn last_answer(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "gemini")
        .find_map(|v| v["content"].as_str().map(str::to_owned))
}

/// Appends the run's user and model messages to the session's JSONL (its header first when it
/// is new), and the project to `projects.json`.
fn save_session(home: &Path, id: &str, cwd: &Path, prompt: &str, answer: Option<&str>) {
    let slug = cwd.file_name().map_or_else(
        || "project".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    let file = find_session(home, id).unwrap_or_else(|| {
        let stamp: String = util::iso_now()
            .chars()
            .take(16)
            .map(|c| if c == ':' { '-' } else { c })
            .collect();
        home.join("tmp").join(&slug).join("chats").join(format!(
            "session-{stamp}-{}.jsonl",
            id.get(..8).unwrap_or(id)
        ))
    });
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    let now = util::iso_now();
    if text.is_empty() {
        let header = obj! {
            "sessionId" => id,
            "projectHash" => "0000000000000000000000000000000000000000000000000000000000000000",
            "startTime" => now.as_str(),
            "lastUpdated" => now.as_str(),
            "kind" => "main",
        };
        text.push_str(&header.render());
        text.push('\n');
    }
    let user = obj! {
        "id" => util::uuid(),
        "timestamp" => now.as_str(),
        "type" => "user",
        "content" => arr![obj! { "text" => prompt }],
    };
    text.push_str(&user.render());
    text.push('\n');
    if let Some(answer) = answer {
        let reply = obj! {
            "id" => util::uuid(),
            "timestamp" => now.as_str(),
            "type" => "gemini",
            "content" => answer,
            "thoughts" => arr![],
            "tokens" => obj! { "input" => 100, "output" => 7, "cached" => 10, "thoughts" => 0, "tool" => 0, "total" => 107 },
            "model" => "gemini-fake",
        };
        text.push_str(&reply.render());
        text.push('\n');
    }
    let projects = obj! {
        "projects" => J::Obj(vec![(cwd.display().to_string(), J::from(slug.as_str()))]),
    };
    if let Some(dir) = file.parent()
        && std::fs::create_dir_all(dir).is_ok()
    {
        let _ = util::write_atomic(&file, text.as_bytes());
        let _ = util::write_atomic(&home.join("projects.json"), projects.render().as_bytes());
    }
}
