//! Qwen Code 0.24.4 (`qwen`), shaped after its recorded output: the prompt on stdin (array
//! flags such as `--core-tools` take every following word, a trailing prompt included),
//! `-o stream-json` events (a `system`/`init` event, `assistant` and `user` messages, a closing
//! `result` event with the answer, session and token counts), a fatal turn limit as a line on
//! stderr and exit code 53, and the session kept in
//! `$QWEN_HOME/projects/<cwd slug>/chats/<id>.jsonl` (else under `~/.qwen`).
//!
//! Its settings come from the system settings file `QWEN_CODE_SYSTEM_SETTINGS_PATH` names:
//! unless it turns `memory.enableManagedAutoMemory` off, the fake reports the managed
//! auto-memory extraction call on stderr, as a reminder that the real CLI makes one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::json::{J, arr, obj};
use super::receiver;
use super::task::{self, Answer, Task};
use super::util;

use crate::fixtures::{QWEN_HELP as HELP, QWEN_VERSION as VERSION};

const OPTS: &[Opt] = &[
    opt("prompt", &["-p", "--prompt"], Kind::Value),
    opt("output-format", &["-o", "--output-format"], Kind::Value),
    opt("approval-mode", &["--approval-mode"], Kind::Value),
    opt("yolo", &["-y", "--yolo"], Kind::Flag),
    opt("model", &["-m", "--model"], Kind::Value),
    opt("max-session-turns", &["--max-session-turns"], Kind::Value),
    opt("core-tools", &["--core-tools"], Kind::Variadic),
    opt("exclude-tools", &["--exclude-tools"], Kind::Variadic),
    opt(
        "allowed-mcp-server-names",
        &["--allowed-mcp-server-names"],
        Kind::Variadic,
    ),
    opt("mcp-config", &["--mcp-config"], Kind::Value),
    opt("chat-recording", &["--chat-recording"], Kind::Flag),
    opt("resume", &["-r", "--resume"], Kind::Value),
    opt("session-id", &["--session-id"], Kind::Value),
    opt("version", &["-v", "--version"], Kind::Flag),
    opt("help", &["-h", "--help"], Kind::Flag),
];

const APPROVAL_MODES: [&str; 5] = ["plan", "default", "auto-edit", "auto", "yolo"];

/// The tools a headless run offers when no allowlist narrows them.
const DEFAULT_TOOLS: [&str; 8] = [
    "agent",
    "skill",
    "tool_search",
    "read_file",
    "glob",
    "grep_search",
    "run_shell_command",
    "web_fetch",
];

fn fail(message: &str) -> ExitCode {
    util::err_line(message);
    ExitCode::from(1)
}

/// The events of one run, as Qwen prints them.
struct Events {
    lines: Vec<String>,
    session: String,
    model: String,
}

impl Events {
    fn push(&mut self, mut e: J) {
        e.push("uuid", util::uuid());
        e.push("session_id", self.session.as_str());
        self.lines.push(e.render());
    }

    fn assistant(&mut self, content: J, stop: Option<&str>) {
        let id = util::uuid();
        let message = obj! {
            "id" => id.as_str(),
            "type" => "message",
            "role" => "assistant",
            "model" => self.model.as_str(),
            "content" => content,
            "stop_reason" => stop.map_or(J::Null, J::from),
            "usage" => usage(1),
        };
        self.push(
            obj! { "type" => "assistant", "parent_tool_use_id" => J::Null, "message" => message },
        );
    }

    fn tool_use(&mut self, call: &str, name: &str, input: J) {
        self.assistant(
            arr![obj! { "type" => "tool_use", "id" => call, "name" => name, "input" => input }],
            Some("tool_use"),
        );
    }

    fn tool_result(&mut self, call: &str, content: &str) {
        let message = obj! {
            "role" => "user",
            "content" => arr![obj! {
                "type" => "tool_result", "tool_use_id" => call, "is_error" => false, "content" => content,
            }],
        };
        self.push(obj! { "type" => "user", "parent_tool_use_id" => J::Null, "message" => message });
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

/// `calls` model calls of 100 input and 7 output tokens.
fn usage(calls: u64) -> J {
    obj! {
        "input_tokens" => 100 * calls,
        "output_tokens" => 7 * calls,
        "cache_read_input_tokens" => 0,
        "total_tokens" => 107 * calls,
    }
}

/// The system settings file, if `QWEN_CODE_SYSTEM_SETTINGS_PATH` names one that reads.
fn system_settings() -> serde_json::Value {
    std::env::var_os("QWEN_CODE_SYSTEM_SETTINGS_PATH")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// Runs `qwen ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let parsed = match args::parse(&ctx.args, OPTS, true) {
        Ok(p) => p,
        Err(ParseError::Unknown(a)) => return fail(&format!("Unknown argument: {a}")),
        Err(ParseError::MissingValue(n)) => {
            return fail(&format!("Not enough arguments following: {n}"));
        }
    };
    if parsed.has("version") {
        util::out_line(&ctx.version(VERSION));
        return ExitCode::SUCCESS;
    }
    if parsed.has("help") {
        return ctx.print_help(HELP, "--max-session-turns");
    }
    if let Some(mode) = parsed.value("approval-mode")
        && !APPROVAL_MODES.contains(&mode)
    {
        return fail(&format!(
            "Invalid values:\n  Argument: approval-mode, Given: \"{mode}\", Choices: \"plan\", \"default\", \"auto-edit\", \"auto\", \"yolo\""
        ));
    }
    let max_turns = match parsed.value("max-session-turns").map(str::parse::<usize>) {
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => return fail("--max-session-turns must be an integer"),
        None => None,
    };
    let mcp_names = list(&parsed, "allowed-mcp-server-names");
    let mut mcp_tools = Vec::new();
    if let Some(config) = parsed.value("mcp-config") {
        let text = std::fs::read_to_string(config).unwrap_or_else(|_| config.to_owned());
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            return fail("Error: --mcp-config is neither a JSON file nor inline JSON");
        };
        for name in v["mcpServers"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(n, _)| n)
        {
            if mcp_names.is_empty() || mcp_names.contains(name) {
                mcp_tools.push(format!("mcp__{name}__echo"));
            }
        }
    }
    // The prompt: stdin, then `-p`, then the positional words array flags left.
    let mut prompt = String::from_utf8_lossy(&ctx.read_stdin()).into_owned();
    if let Some(p) = parsed.value("prompt") {
        prompt.push_str(p);
    }
    prompt.push_str(&parsed.positional.join(" "));
    if prompt.trim().is_empty() {
        return fail(
            "No input provided via stdin. Input can be provided by piping data into qwen or using the positional prompt.",
        );
    }
    let settings = system_settings();
    if settings.pointer("/memory/enableManagedAutoMemory") != Some(&serde_json::Value::Bool(false))
    {
        util::err_line("fake-agent: qwen would make its managed-auto-memory extraction call");
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let chats = qwen_home().join("projects").join(slug(&cwd)).join("chats");
    let session = match parsed.value("resume").or(parsed.value("session-id")) {
        Some(id) if parsed.has("resume") && !chats.join(format!("{id}.jsonl")).is_file() => {
            return fail(&format!(
                "No saved session found with ID {id}. Run `qwen --resume` without an ID to choose from existing sessions."
            ));
        }
        Some(id) => id.to_owned(),
        None => util::uuid(),
    };
    let core = list(&parsed, "core-tools");
    let excluded = list(&parsed, "exclude-tools");
    let yolo = parsed.has("yolo") || parsed.value("approval-mode") == Some("yolo");
    let mut tools: Vec<String> = if core.is_empty() {
        DEFAULT_TOOLS.iter().map(|t| (*t).to_owned()).collect()
    } else {
        core.clone()
    };
    // An allowlist does not narrow the tools Qwen adds beside it.
    for extra in ["agent", "skill", "tool_search", "tool_call"] {
        if !tools.iter().any(|t| t == extra) {
            tools.push(extra.to_owned());
        }
    }
    tools.retain(|t| !excluded.contains(t));
    tools.extend(mcp_tools);
    let offered = |tool: &str| tools.iter().any(|t| t == tool);
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: yolo && offered("write_file"),
        target: cwd.clone(),
    };
    let model = parsed
        .value("model")
        .map(str::to_owned)
        .or_else(|| std::env::var("OPENAI_MODEL").ok())
        .unwrap_or_else(|| "qwen3-coder-plus".to_owned());
    let mut ev = Events {
        lines: Vec::new(),
        session: session.clone(),
        model: model.clone(),
    };
    ev.push(obj! {
        "type" => "system",
        "subtype" => "init",
        "cwd" => cwd.display().to_string(),
        "tools" => J::Arr(tools.iter().map(|t| J::from(t.as_str())).collect()),
        "mcp_servers" => J::Arr(mcp_names.iter().map(|n| obj! { "name" => n.as_str(), "status" => "connected" }).collect()),
        "model" => model.as_str(),
        "permission_mode" => parsed.value("approval-mode").unwrap_or("default"),
        "qwen_code_version" => VERSION,
        "effort" => settings.pointer("/model/generationConfig/reasoning/effort").and_then(|e| e.as_str()).unwrap_or("default"),
    });
    let outcome = if receiver::is_turn(&prompt) {
        let previous = last_assistant(&chats.join(format!("{session}.jsonl")));
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
    if let Some(w) = &outcome.wrote {
        let call = util::short_id("call_");
        let file = w.abs.display().to_string();
        ev.tool_use(
            &call,
            "write_file",
            obj! { "file_path" => file.as_str(), "content" => w.content.as_str() },
        );
        ev.tool_result(
            &call,
            &format!("Successfully created and wrote to new file: {file}."),
        );
        calls += 1;
    }
    let (text, error) = match &outcome.answer {
        Answer::Json { text, .. } => (text.clone(), None),
        Answer::Prose(p) => (p.clone(), None),
        Answer::AgentError(message) => (String::new(), Some(format!("[API Error: {message}]"))),
        Answer::Api(api) => {
            let said = match api.status() {
                Some(s) => format!("[API Error: {s} {}]", api.openai_message(&model)),
                None => format!(
                    "[API Error: Connection error. ({})]",
                    api.openai_message(&model)
                ),
            };
            (String::new(), Some(said))
        }
        Answer::MaxTurns => return turn_limit(&mut ev, max_turns.unwrap_or(100)),
    };
    let shown = error.clone().unwrap_or_else(|| text.clone());
    ev.assistant(
        arr![obj! { "type" => "text", "text" => shown.as_str() }],
        None,
    );
    let mut result = obj! {
        "type" => "result",
        "subtype" => if error.is_some() { "error_during_execution" } else { "success" },
        "is_error" => error.is_some(),
        "duration_ms" => 860,
        "duration_api_ms" => 468,
        "num_turns" => calls,
    };
    let code = match &error {
        Some(message) => {
            result.push(
                "usage",
                obj! { "input_tokens" => 0, "output_tokens" => 0, "cache_read_input_tokens" => 0 },
            );
            result.push("permission_denials", arr![]);
            result.push("error", obj! { "message" => message.as_str() });
            1
        }
        None => {
            result.push("result", text.as_str());
            result.push("usage", usage(calls));
            result.push("permission_denials", arr![]);
            0
        }
    };
    ev.push(result);
    save_session(&chats, &session, &cwd, &model, &prompt, &shown);
    ev.flush();
    ExitCode::from(code)
}

/// The values of an array flag, each split at commas.
fn list(parsed: &args::Parsed, key: &str) -> Vec<String> {
    parsed
        .values(key)
        .iter()
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A model that keeps reading a file: `limit` turns, then Qwen's fatal turn limit.
fn turn_limit(ev: &mut Events, limit: usize) -> ExitCode {
    for _ in 0..limit {
        let call = util::short_id("call_");
        ev.tool_use(&call, "read_file", obj! { "file_path" => "README.md" });
        ev.tool_result(&call, "Unchanged: README.md");
    }
    ev.flush();
    util::err_line(
        "Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.",
    );
    ExitCode::from(53)
}

/// `$QWEN_HOME`, else `~/.qwen`.
fn qwen_home() -> PathBuf {
    std::env::var_os("QWEN_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".qwen")))
        .unwrap_or_else(|| PathBuf::from(".qwen"))
}

/// A directory's project folder name: every character but ASCII letters and digits as `-`.
fn slug(cwd: &Path) -> String {
    cwd.display()
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The last assistant text of a session file so far.
fn last_assistant(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "assistant")
        .filter_map(|v| {
            v["message"]["parts"]
                .as_array()?
                .iter()
                .rev()
                .find_map(|p| p["text"].as_str())
                .map(str::to_owned)
        })
        .find(|t| !t.trim().is_empty())
}

/// Appends the turn (the prompt, the answer) to `chats/<id>.jsonl`, chained by `parentUuid`.
fn save_session(chats: &Path, id: &str, cwd: &Path, model: &str, prompt: &str, answer: &str) {
    let file = chats.join(format!("{id}.jsonl"));
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    let mut parent = text
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v["uuid"].as_str().map(str::to_owned));
    for (kind, role, said) in [("user", "user", prompt), ("assistant", "model", answer)] {
        let uuid = util::uuid();
        let mut rec = obj! {
            "uuid" => uuid.as_str(),
            "parentUuid" => parent.as_deref().map_or(J::Null, J::from),
            "sessionId" => id,
            "timestamp" => util::iso_now(),
            "type" => kind,
            "cwd" => cwd.display().to_string(),
            "version" => VERSION,
            "message" => obj! { "role" => role, "parts" => arr![obj! { "text" => said }] },
        };
        if kind == "assistant" {
            rec.push("model", model);
        }
        text.push_str(&rec.render());
        text.push('\n');
        parent = Some(uuid);
    }
    if std::fs::create_dir_all(chats).is_ok() {
        let _ = util::write_atomic(&file, text.as_bytes());
    }
}
