//! GitHub Copilot CLI 1.0.102 (`copilot`), shaped after its recorded output: the prompt from
//! `-p` or stdin, `--output-format json` JSONL events (`{type, data, id, timestamp, parentId}`)
//! closed by a `result` event naming the session, the token counts only in the
//! `--usage-output-file` file, and the session kept in `$COPILOT_HOME/session-state/<id>/`.
//!
//! Copilot has no turn limit: under `HANDOFF_FAKE_MODE=max-turns` the fake's model keeps
//! calling a tool, turn after turn, until it is stopped (or gives up after 200 turns).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::json::{J, arr, obj};
use super::receiver;
use super::task::{self, Answer, Task};
use super::util;

use crate::fixtures::{COPILOT_HELP as HELP, COPILOT_VERSION as VERSION};

const OPTS: &[Opt] = &[
    opt("prompt", &["-p", "--prompt"], Kind::Value),
    opt("silent", &["-s", "--silent"], Kind::Flag),
    opt("output-format", &["--output-format"], Kind::Value),
    opt("model", &["--model"], Kind::Value),
    opt("effort", &["--reasoning-effort", "--effort"], Kind::Value),
    opt("allow-all-tools", &["--allow-all-tools"], Kind::Flag),
    opt("available-tools", &["--available-tools"], Kind::Variadic),
    opt("excluded-tools", &["--excluded-tools"], Kind::Variadic),
    opt("deny-tool", &["--deny-tool"], Kind::Variadic),
    opt("allow-tool", &["--allow-tool"], Kind::Variadic),
    opt(
        "additional-mcp-config",
        &["--additional-mcp-config"],
        Kind::Value,
    ),
    opt(
        "disable-builtin-mcps",
        &["--disable-builtin-mcps"],
        Kind::Flag,
    ),
    opt("no-ask-user", &["--no-ask-user"], Kind::Flag),
    opt(
        "no-custom-instructions",
        &["--no-custom-instructions"],
        Kind::Flag,
    ),
    opt("no-auto-update", &["--no-auto-update"], Kind::Flag),
    opt("secret-env-vars", &["--secret-env-vars"], Kind::Variadic),
    opt("usage-output-file", &["--usage-output-file"], Kind::Value),
    opt("resume", &["--resume"], Kind::Value),
    opt("session-id", &["--session-id"], Kind::Value),
    opt("version", &["-v", "--version"], Kind::Flag),
    opt("help", &["-h", "--help"], Kind::Flag),
];

const EFFORTS: [&str; 7] = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

fn fail(message: &str) -> ExitCode {
    util::err_line(message);
    ExitCode::from(1)
}

/// The events of one run, as Copilot prints them.
struct Events {
    lines: Vec<String>,
    last: String,
}

impl Events {
    fn new() -> Events {
        Events {
            lines: Vec::new(),
            last: util::uuid(),
        }
    }

    fn push(&mut self, kind: &str, data: J, ephemeral: bool) {
        let id = util::uuid();
        let mut e = obj! { "type" => kind, "data" => data };
        if ephemeral {
            e.push("ephemeral", true);
        }
        e.push("id", id.as_str());
        e.push("timestamp", util::iso_now());
        e.push("parentId", self.last.as_str());
        self.last = id;
        self.lines.push(e.render());
    }

    fn message(&mut self, model: &str, content: &str, tools: J) {
        self.push(
            "assistant.message",
            obj! {
                "messageId" => util::uuid(),
                "model" => model,
                "content" => content,
                "toolRequests" => tools,
            },
            false,
        );
    }

    fn turn(&mut self, n: usize, start: bool) {
        let kind = if start {
            "assistant.turn_start"
        } else {
            "assistant.turn_end"
        };
        self.push(kind, obj! { "turnId" => n.to_string() }, false);
    }

    /// Prints what was gathered so far (a stopped run leaves its events on stdout).
    fn flush(&mut self) {
        let mut out = String::new();
        for l in self.lines.drain(..) {
            out.push_str(&l);
            out.push('\n');
        }
        util::out(&task::raw_bytes(&out));
    }
}

/// Runs `copilot ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let parsed = match args::parse(&ctx.args, OPTS, false) {
        Ok(p) => p,
        Err(ParseError::Unknown(a)) => return fail(&format!("error: unknown option '{a}'")),
        Err(ParseError::MissingValue(n)) => {
            return fail(&format!("error: option '{n}' argument missing"));
        }
    };
    if parsed.has("version") {
        util::out_line(&format!("GitHub Copilot CLI {}.", ctx.version(VERSION)));
        util::out_line("Run 'copilot update' to check for updates.");
        return ExitCode::SUCCESS;
    }
    if parsed.has("help") {
        return ctx.print_help(HELP, "--usage-output-file");
    }
    if let Some(e) = parsed.value("effort")
        && !EFFORTS.contains(&e)
    {
        return fail(&format!(
            "error: option '--reasoning-effort <level>' argument '{e}' is invalid. Allowed choices are {}.",
            EFFORTS.join(", ")
        ));
    }
    if let Some(config) = parsed.value("additional-mcp-config") {
        let text = match config.strip_prefix('@') {
            Some(file) => std::fs::read_to_string(file).unwrap_or_default(),
            None => config.to_owned(),
        };
        if serde_json::from_str::<serde_json::Value>(&text).is_err() {
            return fail("Error: --additional-mcp-config is not valid JSON");
        }
    }
    let prompt = match parsed.value("prompt") {
        Some(p) => p.to_owned(),
        None => String::from_utf8_lossy(&ctx.read_stdin()).into_owned(),
    };
    if prompt.trim().is_empty() {
        return fail("error: no prompt (use -p or pipe one on stdin)");
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let home = copilot_home();
    let session = match parsed.value("resume").or(parsed.value("session-id")) {
        Some(id) if parsed.has("resume") && !home.join("session-state").join(id).is_dir() => {
            return fail(&format!(
                "Error: No session found with ID or name \"{id}\". Run `copilot --resume` to pick one."
            ));
        }
        Some(id) => id.to_owned(),
        None => util::uuid(),
    };
    let tools_of = |key: &str| -> Vec<String> {
        parsed
            .values(key)
            .iter()
            .flat_map(|v| v.split(',').map(|s| s.trim().to_owned()))
            .collect()
    };
    let available = tools_of("available-tools");
    let excluded = tools_of("excluded-tools");
    let denied = tools_of("deny-tool");
    let offered = |tool: &str| {
        (available.is_empty() || available.iter().any(|t| t == tool))
            && !excluded.iter().any(|t| t == tool)
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: parsed.has("allow-all-tools")
            && offered("create")
            && !denied.iter().any(|d| d == "write"),
        target: cwd.clone(),
    };
    let model = parsed
        .value("model")
        .map(str::to_owned)
        .or_else(|| std::env::var("COPILOT_MODEL").ok())
        .unwrap_or_else(|| "claude-sonnet-4.5".to_owned());
    let mut ev = Events::new();
    ev.push(
        "session.mcp_servers_loaded",
        obj! { "servers" => arr![] },
        true,
    );
    ev.push(
        "user.message",
        obj! { "content" => prompt.as_str(), "transformedContent" => prompt.as_str() },
        false,
    );
    if behaviour == task::Behaviour::MaxTurns {
        return endless(&mut ev, &model);
    }
    // A continuation's turn (its prompt is handoff's continuation prompt or the probe
    // question): the receiver's reply, its file, the session kept.
    let outcome = if receiver::is_turn(&prompt) {
        let previous = last_assistant(&home, &session);
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
    let mut turn = 0;
    ev.turn(turn, true);
    if let Some(w) = &outcome.wrote {
        let args = obj! { "path" => w.rel.as_str(), "file_text" => w.content.as_str() };
        let call = util::short_id("call_");
        ev.message(
            &model,
            "",
            arr![obj! { "toolCallId" => call.as_str(), "name" => "create", "arguments" => args.clone() }],
        );
        ev.push(
            "tool.execution_start",
            obj! { "toolCallId" => call.as_str(), "toolName" => "create", "arguments" => args },
            false,
        );
        ev.push(
            "tool.execution_complete",
            obj! {
                "toolCallId" => call.as_str(),
                "success" => true,
                "result" => obj! { "content" => format!("Created file {}", w.abs.display()) },
                "fileEdits" => arr![obj! { "path" => w.abs.display().to_string(), "kind" => "create" }],
            },
            false,
        );
        ev.turn(turn, false);
        turn += 1;
        ev.turn(turn, true);
    }
    let (text, code) = match &outcome.answer {
        Answer::Json { text, .. } => (text.clone(), 0),
        Answer::Prose(p) => (p.clone(), 0),
        Answer::AgentError(message) => {
            ev.turn(turn, false);
            ev.push(
                "session.error",
                obj! { "errorType" => "query", "message" => message.as_str(), "statusCode" => 500 },
                false,
            );
            (String::new(), 1)
        }
        Answer::Api(api) => {
            ev.turn(turn, false);
            let mut data = obj! {
                "errorType" => "query",
                "message" => format!(
                    "{} {}",
                    api.status().map_or("Connection error.".to_owned(), |s| s.to_string()),
                    api.openai_message(&model)
                ),
            };
            if let Some(s) = api.status() {
                data.push("statusCode", u32::from(s));
            }
            ev.push("session.error", data, false);
            (String::new(), 1)
        }
        Answer::MaxTurns => (String::new(), 1),
    };
    if code == 0 {
        ev.message(&model, &text, arr![]);
        ev.turn(turn, false);
    }
    ev.push("assistant.idle", obj! {}, true);
    let lines_before_result = ev.lines.clone();
    let result = obj! {
        "type" => "result",
        "timestamp" => util::iso_now(),
        "sessionId" => session.as_str(),
        "exitCode" => i64::from(code),
        "usage" => obj! {
            "premiumRequests" => 0,
            "totalApiDurationMs" => 41,
            "sessionDurationMs" => 358,
        },
    };
    ev.lines.push(result.render());
    if let Some(file) = parsed.value("usage-output-file") {
        let _ = std::fs::write(file, usage(&model, turn + 1).render());
    }
    save_session(&home, &session, &cwd, &model, &lines_before_result);
    ev.flush();
    ExitCode::from(code)
}

/// A model that never stops calling a tool: a turn every 20 ms, up to 200.
fn endless(ev: &mut Events, model: &str) -> ExitCode {
    for n in 0..200 {
        ev.turn(n, true);
        let call = util::short_id("call_");
        let args = obj! { "path" => "README.md" };
        ev.message(
            model,
            "",
            arr![obj! { "toolCallId" => call.as_str(), "name" => "view", "arguments" => args.clone() }],
        );
        ev.push(
            "tool.execution_start",
            obj! { "toolCallId" => call.as_str(), "toolName" => "view", "arguments" => args },
            false,
        );
        ev.turn(n, false);
        ev.flush();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    fail("fake-agent: the model never stopped calling tools")
}

/// The last assistant text of session `id` so far.
fn last_assistant(home: &Path, id: &str) -> Option<String> {
    let text =
        std::fs::read_to_string(home.join("session-state").join(id).join("events.jsonl")).ok()?;
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "assistant.message")
        .filter_map(|v| v["data"]["content"].as_str().map(str::to_owned))
        .find(|t| !t.trim().is_empty())
}

/// `$COPILOT_HOME`, else `~/.copilot`.
fn copilot_home() -> PathBuf {
    std::env::var_os("COPILOT_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".copilot")))
        .unwrap_or_else(|| PathBuf::from(".copilot"))
}

/// The usage file: `turns` model calls of 120 input (20 of them cached) and 30 output tokens.
fn usage(model: &str, turns: usize) -> J {
    let n = u64::try_from(turns).unwrap_or(1);
    let counts = obj! {
        "inputTokens" => 120 * n,
        "outputTokens" => 30 * n,
        "cacheReadTokens" => 20 * n,
        "cacheWriteTokens" => 0,
    };
    obj! {
        "totalPremiumRequestCost" => 0,
        "totalUserRequests" => 1,
        "totalNanoAiu" => 0,
        "modelMetrics" => J::Obj(vec![(
            model.to_owned(),
            obj! {
                "requests" => obj! { "count" => n, "cost" => 0 },
                "usage" => counts,
                "totalNanoAiu" => 0,
            },
        )]),
        "currentModel" => model,
    }
}

/// Appends the run's events to `session-state/<id>/events.jsonl` (a `session.start` first when
/// the session is new) and writes its `workspace.yaml`.
fn save_session(home: &Path, id: &str, cwd: &Path, model: &str, events: &[String]) {
    let dir = home.join("session-state").join(id);
    let file = dir.join("events.jsonl");
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    if text.is_empty() {
        let start = obj! {
            "type" => "session.start",
            "data" => obj! {
                "sessionId" => id,
                "copilotVersion" => VERSION,
                "selectedModel" => model,
                "context" => obj! { "cwd" => cwd.display().to_string() },
            },
            "id" => util::uuid(),
            "timestamp" => util::iso_now(),
        };
        text.push_str(&start.render());
        text.push('\n');
    }
    for e in events.iter().filter(|e| !e.contains("\"ephemeral\":true")) {
        text.push_str(e);
        text.push('\n');
    }
    let yaml = format!("id: {id}\ncwd: {}\n", cwd.display());
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = util::write_atomic(&file, text.as_bytes());
        let _ = util::write_atomic(&dir.join("workspace.yaml"), yaml.as_bytes());
    }
}
