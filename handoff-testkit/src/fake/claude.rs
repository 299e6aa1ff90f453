//! Claude Code 2.1.197 (`claude`).

mod events;
mod turn;

use std::ffi::OsStr;
use std::process::ExitCode;

use serde_json::Value;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::claude_store;
use super::receiver;
use super::task::{self, Answer, Outcome, Task};
use super::util;

use crate::fixtures::{CLAUDE_HELP as HELP, CLAUDE_VERSION as VERSION};

use events::Session;
use turn::open_turn;

const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

const OPTS: &[Opt] = &[
    opt("add-dir", &["--add-dir"], Kind::Variadic),
    opt("agent", &["--agent"], Kind::Value),
    opt("agents", &["--agents"], Kind::Value),
    opt(
        "allow-dangerously-skip-permissions",
        &["--allow-dangerously-skip-permissions"],
        Kind::Flag,
    ),
    opt(
        "allowedTools",
        &["--allowedTools", "--allowed-tools"],
        Kind::Variadic,
    ),
    opt(
        "append-system-prompt",
        &["--append-system-prompt"],
        Kind::Value,
    ),
    opt(
        "append-system-prompt-file",
        &["--append-system-prompt-file"],
        Kind::Value,
    ),
    opt("ax-screen-reader", &["--ax-screen-reader"], Kind::Flag),
    opt("background", &["--bg", "--background"], Kind::Flag),
    opt("bare", &["--bare"], Kind::Flag),
    opt("betas", &["--betas"], Kind::Variadic),
    opt("brief", &["--brief"], Kind::Flag),
    opt("chrome", &["--chrome"], Kind::Flag),
    opt("continue", &["-c", "--continue"], Kind::Flag),
    opt(
        "dangerously-skip-permissions",
        &["--dangerously-skip-permissions"],
        Kind::Flag,
    ),
    opt("debug", &["-d", "--debug"], Kind::OptValue),
    opt("debug-file", &["--debug-file"], Kind::Value),
    opt(
        "disable-slash-commands",
        &["--disable-slash-commands"],
        Kind::Flag,
    ),
    opt(
        "disallowedTools",
        &["--disallowedTools", "--disallowed-tools"],
        Kind::Variadic,
    ),
    opt("effort", &["--effort"], Kind::Value),
    opt(
        "exclude-dynamic-system-prompt-sections",
        &["--exclude-dynamic-system-prompt-sections"],
        Kind::Flag,
    ),
    opt("fallback-model", &["--fallback-model"], Kind::Value),
    opt("file", &["--file"], Kind::Variadic),
    opt("fork-session", &["--fork-session"], Kind::Flag),
    opt("from-pr", &["--from-pr"], Kind::OptValue),
    opt("help", &["-h", "--help"], Kind::Flag),
    opt("ide", &["--ide"], Kind::Flag),
    opt(
        "include-hook-events",
        &["--include-hook-events"],
        Kind::Flag,
    ),
    opt(
        "include-partial-messages",
        &["--include-partial-messages"],
        Kind::Flag,
    ),
    opt("input-format", &["--input-format"], Kind::Value),
    opt("json-schema", &["--json-schema"], Kind::Value),
    opt("max-budget-usd", &["--max-budget-usd"], Kind::Value),
    // Accepted but missing from `--help` in 2.1.197.
    opt("max-turns", &["--max-turns"], Kind::Value),
    opt(
        "max-thinking-tokens",
        &["--max-thinking-tokens"],
        Kind::Value,
    ),
    opt("mcp-config", &["--mcp-config"], Kind::Variadic),
    opt("model", &["--model"], Kind::Value),
    opt("name", &["-n", "--name"], Kind::Value),
    opt("no-chrome", &["--no-chrome"], Kind::Flag),
    opt(
        "no-session-persistence",
        &["--no-session-persistence"],
        Kind::Flag,
    ),
    opt("output-format", &["--output-format"], Kind::Value),
    opt("permission-mode", &["--permission-mode"], Kind::Value),
    opt(
        "permission-prompt-tool",
        &["--permission-prompt-tool"],
        Kind::Value,
    ),
    opt("plugin-dir", &["--plugin-dir"], Kind::Value),
    opt("plugin-url", &["--plugin-url"], Kind::Value),
    opt("print", &["-p", "--print"], Kind::Flag),
    opt(
        "prompt-suggestions",
        &["--prompt-suggestions"],
        Kind::OptValue,
    ),
    opt("remote-control", &["--remote-control"], Kind::OptValue),
    opt(
        "remote-control-session-name-prefix",
        &["--remote-control-session-name-prefix"],
        Kind::Value,
    ),
    opt(
        "replay-user-messages",
        &["--replay-user-messages"],
        Kind::Flag,
    ),
    opt("resume", &["-r", "--resume"], Kind::OptValue),
    opt("safe-mode", &["--safe-mode"], Kind::Flag),
    opt("session-id", &["--session-id"], Kind::Value),
    opt("setting-sources", &["--setting-sources"], Kind::Value),
    opt("settings", &["--settings"], Kind::Value),
    opt("strict-mcp-config", &["--strict-mcp-config"], Kind::Flag),
    opt("system-prompt", &["--system-prompt"], Kind::Value),
    opt("system-prompt-file", &["--system-prompt-file"], Kind::Value),
    opt("tmux", &["--tmux"], Kind::Flag),
    opt("tools", &["--tools"], Kind::Variadic),
    opt("verbose", &["--verbose"], Kind::Flag),
    opt("version", &["-v", "--version"], Kind::Flag),
    opt("worktree", &["-w", "--worktree"], Kind::OptValue),
];

const COMMANDS: &[&str] = &[
    "agents",
    "auth",
    "auto-mode",
    "doctor",
    "gateway",
    "install",
    "mcp",
    "plugin",
    "plugins",
    "project",
    "setup-token",
    "ultrareview",
    "update",
    "upgrade",
];

/// Choice-validated options: (key, spelled as in the error, allowed values).
const CHOICES: &[(&str, &str, &[&str])] = &[
    (
        "output-format",
        "--output-format <format>",
        &["text", "json", "stream-json"],
    ),
    (
        "input-format",
        "--input-format <format>",
        &["text", "stream-json"],
    ),
    (
        "permission-mode",
        "--permission-mode <mode>",
        &[
            "acceptEdits",
            "auto",
            "bypassPermissions",
            "default",
            "dontAsk",
            "plan",
        ],
    ),
];

fn fail(message: &str) -> ExitCode {
    util::err_line(message);
    ExitCode::from(1)
}

/// Runs `claude ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let parsed = match args::parse(&ctx.args, OPTS, false) {
        Ok(p) => p,
        Err(ParseError::Unknown(arg)) => return fail(&format!("error: unknown option '{arg}'")),
        Err(ParseError::MissingValue(name)) => {
            return fail(&format!("error: option '{name}' argument missing"));
        }
    };
    if parsed.has("version") {
        util::out_line(&format!("{} (Claude Code)", ctx.version(VERSION)));
        return ExitCode::SUCCESS;
    }
    if parsed.has("help") {
        return ctx.print_help(HELP, "--json-schema");
    }
    if let Some(cmd) = parsed.positional.first()
        && COMMANDS.contains(&cmd.as_str())
    {
        return fail(&format!(
            "fake-agent: `claude {cmd}` is not imitated by the fake"
        ));
    }
    for (key, spelled, allowed) in CHOICES {
        if let Some(v) = parsed.value(key)
            && !allowed.contains(&v)
        {
            return fail(&format!(
                "error: option '{spelled}' argument '{v}' is invalid. Allowed choices are {}.",
                allowed.join(", ")
            ));
        }
    }

    // The sandbox check runs before anything else touches the request.
    if let Some(raw) = parsed.value("settings") {
        let settings = match load_json_arg(raw) {
            Ok(v) => v,
            Err(e) => {
                return fail(&format!(
                    "Error: Invalid settings provided to --settings: {e}"
                ));
            }
        };
        if let Some(code) = sandbox_check(&settings) {
            return code;
        }
    }
    let schema = match parsed.value("json-schema") {
        Some(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(v) => Some(v),
            Err(e) => return fail(&format!("Error: --json-schema: invalid JSON: {e}")),
        },
        None => None,
    };
    let mut mcp_servers = Vec::new();
    for raw in parsed.values("mcp-config") {
        match load_json_arg(raw) {
            Ok(v) => mcp_servers.extend(
                v.get("mcpServers")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default(),
            ),
            Err(e) => return fail(&format!("Error: Invalid MCP configuration: {e}")),
        }
    }
    let permission_mode = parsed.value("permission-mode").unwrap_or("default");
    if (parsed.has("dangerously-skip-permissions") || permission_mode == "bypassPermissions")
        && nix::unistd::geteuid().is_root()
        && std::env::var_os("IS_SANDBOX").is_none()
    {
        return fail(
            "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons",
        );
    }
    if !parsed.has("print") {
        // `claude --resume <id>`: the session must exist and belong to this directory.
        if let Some(id) = parsed.value("resume") {
            return resume_interactive(id);
        }
        return fail("fake-agent: interactive claude sessions are not imitated; pass -p/--print");
    }
    let format = parsed.value("output-format").unwrap_or("text");
    if format == "stream-json" && !parsed.has("verbose") {
        return fail("Error: When using --print, --output-format=stream-json requires --verbose");
    }

    // The session switches are checked before the prompt is read.
    if let Some(id) = parsed.value("session-id")
        && uuid::Uuid::parse_str(id).is_err()
    {
        return fail("Error: Invalid session ID. Must be a valid UUID.");
    }
    if parsed.has("resume") && parsed.value("resume").is_none() {
        return fail(
            "fake-agent: `--resume` without a session id (the session picker) is not imitated",
        );
    }
    if parsed.has("session-id")
        && (parsed.has("resume") || parsed.has("continue"))
        && !parsed.has("fork-session")
    {
        return fail(
            "Error: --session-id can only be used with --continue or --resume if --fork-session is also specified.",
        );
    }

    let prompt = if parsed.positional.is_empty() {
        String::from_utf8_lossy(&ctx.read_stdin()).into_owned()
    } else {
        parsed.positional.join(" ")
    };
    if prompt.trim().is_empty() {
        return fail(
            "Error: Input must be provided either through stdin or as a prompt argument when using --print",
        );
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };

    let tools = split_tools(parsed.values("tools"));
    let cwd = std::env::current_dir().unwrap_or_default();
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: tools.iter().any(|t| t == "Write"),
        target: cwd.clone(),
    };
    // A run that persists its session and has no result contract is a continuation receiver.
    let receiving = !parsed.has("no-session-persistence") && !parsed.has("json-schema");
    let (id, outcome, open) = if receiving {
        let opened = match open_turn(ctx, &parsed, &cwd, &prompt, permission_mode) {
            Ok(o) => o,
            Err(code) => return code,
        };
        let reply = receiver::reply(
            &ctx.settings,
            task.exe,
            &opened.id,
            &prompt,
            opened.previous.clone(),
        );
        let outcome =
            match task::perform_receiver(ctx, behaviour, &task, &prompt, &opened.id, &reply) {
                Ok(o) => o,
                Err(code) => return code,
            };
        (opened.id.clone(), outcome, Some(opened))
    } else {
        let id = parsed
            .value("session-id")
            .map_or_else(util::uuid, str::to_owned);
        match task::perform(ctx, behaviour, &task, &prompt) {
            Ok(o) => (id, o, None),
            Err(code) => return code,
        }
    };
    let session = Session {
        id,
        model: parsed.value("model").unwrap_or(DEFAULT_MODEL).to_owned(),
        cwd: cwd.to_string_lossy().into_owned(),
        version: ctx.version(VERSION),
        permission_mode: permission_mode.to_owned(),
        tools,
        mcp_servers,
        structured: schema.is_some(),
        max_turns: parsed
            .value("max-turns")
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(1),
    };
    let (events, code) = session.events(&outcome);
    if let Some(open) = &open {
        open.close(&prompt, &events);
    }
    let mut stdout = String::new();
    match format {
        "stream-json" => {
            for event in &events {
                stdout.push_str(&event.render());
                stdout.push('\n');
            }
        }
        "json" => {
            if let Some(result) = events.last() {
                stdout.push_str(&result.render());
                stdout.push('\n');
            }
        }
        _ => {
            stdout.push_str(&text_result(&outcome, session.max_turns, &session.model));
            stdout.push('\n');
        }
    }
    util::out(&task::raw_bytes(&stdout));
    code
}

/// `claude --resume <id>` (interactive): prints `resumed <id>: <last assistant text>` when the
/// session can be resumed from the current directory, else Claude's error (exit 1).
fn resume_interactive(id: &str) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_default();
    let found = claude_store::config_dir().and_then(|c| claude_store::find(&c, &cwd, id));
    match found {
        Some(path) => {
            let last = claude_store::last_assistant_text(&claude_store::read_lines(&path));
            util::out_line(&format!("resumed {id}: {}", last.unwrap_or_default()));
            ExitCode::SUCCESS
        }
        None => fail(&format!("No conversation found with session ID: {id}")),
    }
}

/// `--settings` / `--mcp-config` take inline JSON or a path to a JSON file.
fn load_json_arg(raw: &str) -> Result<Value, String> {
    if raw.trim_start().starts_with('{') {
        return serde_json::from_str(raw).map_err(|e| e.to_string());
    }
    let text = std::fs::read_to_string(raw).map_err(|e| format!("{raw}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{raw}: {e}"))
}

/// `sandbox.enabled` + `sandbox.failIfUnavailable` need `bwrap` and `socat` on `PATH`.
fn sandbox_check(settings: &Value) -> Option<ExitCode> {
    let sandbox = settings.get("sandbox")?;
    let on = |k: &str| sandbox.get(k).and_then(Value::as_bool) == Some(true);
    if !(on("enabled") && on("failIfUnavailable")) {
        return None;
    }
    let mut missing = Vec::new();
    if util::which(OsStr::new("bwrap")).is_none() {
        missing.push("bubblewrap (bwrap) not installed");
    }
    if util::which(OsStr::new("socat")).is_none() {
        missing.push("socat not installed");
    }
    if missing.is_empty() {
        return None;
    }
    Some(fail(&format!(
        "Error: sandbox required but unavailable: {} — refusing to start without a working sandbox.",
        missing.join(", ")
    )))
}

/// `--tools "Read,Write"` / `--tools Read Write` → the names.
fn split_tools(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split([',', ' ']))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

fn text_result(outcome: &Outcome, max_turns: u32, model: &str) -> String {
    match &outcome.answer {
        Answer::Json { text, .. } => text.clone(),
        Answer::Prose(p) => p.clone(),
        Answer::AgentError(e) => e.clone(),
        Answer::Api(api) => api.claude(model).text,
        Answer::MaxTurns => format!("Error: Reached max turns ({max_turns})"),
    }
}
