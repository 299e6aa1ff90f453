//! Claude Code 2.1.197 (`claude`).

use std::ffi::OsStr;
use std::process::ExitCode;

use serde_json::Value;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::claude_store;
use super::json::{J, arr, obj};
use super::receiver;
use super::task::{self, Answer, Outcome, Task};
use super::util;

use crate::fixtures::{CLAUDE_HELP as HELP, CLAUDE_VERSION as VERSION};

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

/// A receiver's turn, opened in its session file.
struct OpenTurn {
    /// The session in use.
    id: String,
    /// The last assistant text of the session it resumed, before this turn.
    previous: Option<String>,
    /// The session file and what its lines record; `None` without a store.
    file: Option<(std::path::PathBuf, claude_store::Envelope)>,
    /// The `uuid` of the prompt's `user` line.
    parent: String,
    prompt_id: String,
}

impl OpenTurn {
    /// Appends the turn's answer to the session file.
    fn close(&self, prompt: &str, events: &[J]) {
        let Some((path, envelope)) = &self.file else {
            return;
        };
        let lines = envelope.answer_lines(&self.parent, &self.prompt_id, prompt, events);
        if let Err(e) = claude_store::append(path, &lines) {
            util::err_line(&format!(
                "fake-agent: cannot write session {}: {e}",
                path.display()
            ));
        }
    }
}

/// Picks the receiver's session — a new one (`--session-id` or a fresh UUID), the resumed one
/// (`--resume <id>`), or a fork of it (`--resume <id> --fork-session [--session-id <new>]`) — and
/// writes the turn's prompt to it, after `FAKE_AGENT_RECEIVER_DELAY_MS`.
/// `FAKE_AGENT_RECEIVER_FRESH=1` ignores `--resume`.
fn open_turn(
    ctx: &Ctx,
    parsed: &args::Parsed,
    cwd: &std::path::Path,
    prompt: &str,
    permission_mode: &str,
) -> Result<OpenTurn, ExitCode> {
    let config = claude_store::config_dir();
    let chosen = parsed.value("session-id").map(str::to_owned);
    let resume = parsed
        .value("resume")
        .filter(|_| !receiver::fresh(&ctx.settings));
    let not_found = |id: &str| fail(&format!("No conversation found with session ID: {id}"));
    let in_use = |id: &str| {
        config
            .as_deref()
            .is_some_and(|c| claude_store::exists(c, id))
    };
    // (session id, its file, the file to fork from)
    let (id, path, source) = match resume {
        Some(src) => {
            let Some(src_path) = config
                .as_deref()
                .and_then(|c| claude_store::find(c, cwd, src))
            else {
                return Err(not_found(src));
            };
            if parsed.has("fork-session") {
                let new = chosen.unwrap_or_else(util::uuid);
                if in_use(&new) {
                    return Err(fail(&format!("Error: Session ID {new} is already in use.")));
                }
                let dest = config
                    .as_deref()
                    .map(|c| claude_store::project_dir(c, cwd).join(format!("{new}.jsonl")));
                (new, dest, Some((src.to_owned(), src_path)))
            } else {
                (src.to_owned(), Some(src_path), None)
            }
        }
        None => {
            let id = chosen.unwrap_or_else(util::uuid);
            if in_use(&id) {
                return Err(fail(&format!("Error: Session ID {id} is already in use.")));
            }
            let path = config
                .as_deref()
                .map(|c| claude_store::project_dir(c, cwd).join(format!("{id}.jsonl")));
            (id, path, None)
        }
    };
    let previous = match (&source, &path) {
        (Some((_, src_path)), _) => {
            claude_store::last_assistant_text(&claude_store::read_lines(src_path))
        }
        (None, Some(p)) => claude_store::last_assistant_text(&claude_store::read_lines(p)),
        (None, None) => None,
    };

    receiver::pause(&ctx.settings);
    let prompt_id = util::uuid();
    let Some(path) = path else {
        util::err_line(
            "fake-agent: no session store for claude (HOME and CLAUDE_CONFIG_DIR unset)",
        );
        return Ok(OpenTurn {
            id,
            previous,
            file: None,
            parent: util::uuid(),
            prompt_id,
        });
    };
    if let Some((src, src_path)) = &source
        && let Err(e) = claude_store::fork(src_path, src, &path, &id)
    {
        return Err(fail(&format!(
            "fake-agent: cannot fork session {src} into {}: {e}",
            path.display()
        )));
    }
    let parent = claude_store::last_uuid(&claude_store::read_lines(&path));
    let envelope = claude_store::Envelope {
        session_id: id.clone(),
        cwd: receiver::canonical(cwd).to_string_lossy().into_owned(),
        version: ctx.version(VERSION),
        git_branch: receiver::git_branch(cwd),
        permission_mode: permission_mode.to_owned(),
    };
    let (lines, user) = envelope.prompt_lines(parent.as_deref(), &prompt_id, prompt);
    if let Err(e) = claude_store::append(&path, &lines) {
        return Err(fail(&format!(
            "fake-agent: cannot write session {}: {e}",
            path.display()
        )));
    }
    Ok(OpenTurn {
        id,
        previous,
        file: Some((path, envelope)),
        parent: user,
        prompt_id,
    })
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

struct Session {
    id: String,
    model: String,
    cwd: String,
    version: String,
    permission_mode: String,
    tools: Vec<String>,
    mcp_servers: Vec<String>,
    structured: bool,
    max_turns: u32,
}

impl Session {
    /// The stream-json events; the last one is the result object. Also the exit code.
    fn events(&self, outcome: &Outcome) -> (Vec<J>, ExitCode) {
        let mut events = vec![self.init()];
        if let Some(w) = &outcome.wrote {
            let id = util::short_id("toolu_");
            events.push(self.assistant(vec![obj! {
                "type" => "tool_use",
                "id" => &id,
                "name" => "Write",
                "input" => obj! {
                    "file_path" => w.abs.to_string_lossy().into_owned(),
                    "content" => &w.content,
                },
            }]));
            let abs = w.abs.to_string_lossy().into_owned();
            let mut user = self.tool_result(
                &id,
                &format!(
                    "File created successfully at: {abs} (file state is current in your context — no need to Read it back)"
                ),
            );
            user.push(
                "tool_use_result",
                obj! {
                    "type" => "create",
                    "filePath" => abs,
                    "content" => &w.content,
                    "structuredPatch" => arr![],
                    "originalFile" => J::Null,
                    "userModified" => false,
                },
            );
            events.push(user);
        }
        let turns_before = if outcome.wrote.is_some() { 1 } else { 0 };
        match &outcome.answer {
            Answer::Json { value, text } => {
                if self.structured {
                    let id = util::short_id("toolu_");
                    events.push(self.assistant(vec![obj! {
                        "type" => "tool_use",
                        "id" => &id,
                        "name" => "StructuredOutput",
                        "input" => value.clone(),
                    }]));
                    events.push(self.tool_result(&id, "Structured output provided successfully"));
                    events.push(self.result_success(2, text, Some(value.clone())));
                } else {
                    events.push(self.assistant(vec![obj! { "type" => "text", "text" => text }]));
                    events.push(self.result_success(1 + turns_before, text, None));
                }
                (events, ExitCode::SUCCESS)
            }
            Answer::Prose(prose) => {
                events.push(self.assistant(vec![obj! { "type" => "text", "text" => prose }]));
                events.push(self.result_success(1 + turns_before, prose, None));
                (events, ExitCode::SUCCESS)
            }
            Answer::AgentError(message) => {
                let mut assistant = self.synthetic(message);
                assistant.push("error", "unknown");
                events.push(assistant);
                events.push(self.result_api_error(message, Some(500), None, "completed"));
                (events, ExitCode::from(1))
            }
            Answer::Api(api) => {
                let failure = api.claude(&self.model);
                let status = failure.status.map_or(J::Null, |s| J::from(u32::from(s)));
                let mut assistant = self.synthetic(&failure.text);
                assistant.push("error", failure.class);
                assistant.push("is_api_error_message", true);
                if let Some(kind) = failure.kind {
                    assistant.push("api_error_status", status);
                    assistant.push("api_error_type", kind);
                }
                events.push(assistant);
                events.push(self.result_api_error(
                    &failure.text,
                    failure.status,
                    failure.kind,
                    failure.terminal,
                ));
                (events, ExitCode::from(1))
            }
            Answer::MaxTurns => {
                let id = util::short_id("toolu_");
                events.push(self.assistant(vec![obj! {
                    "type" => "tool_use",
                    "id" => &id,
                    "name" => "Read",
                    "input" => obj! { "file_path" => format!("{}/README.md", self.cwd) },
                }]));
                events.push(self.tool_result(&id, "1\t# scratch"));
                events.push(self.result_max_turns());
                (events, ExitCode::from(1))
            }
        }
    }

    fn init(&self) -> J {
        let mut tools: Vec<J> = self.tools.iter().map(J::from).collect();
        if self.structured {
            tools.push(J::from("StructuredOutput"));
        }
        let servers: Vec<J> = self
            .mcp_servers
            .iter()
            .map(|n| obj! { "name" => n, "status" => "connected" })
            .collect();
        let api_key_source = if std::env::var_os("ANTHROPIC_API_KEY").is_some() {
            "ANTHROPIC_API_KEY"
        } else {
            "none"
        };
        obj! {
            "type" => "system",
            "subtype" => "init",
            "cwd" => &self.cwd,
            "session_id" => &self.id,
            "tools" => tools,
            "mcp_servers" => servers,
            "model" => &self.model,
            "permissionMode" => &self.permission_mode,
            "slash_commands" => arr![],
            "apiKeySource" => api_key_source,
            "claude_code_version" => &self.version,
            "output_style" => "default",
            "agents" => arr!["claude", "Explore", "general-purpose", "Plan", "statusline-setup"],
            "skills" => arr![],
            "plugins" => arr![],
            "analytics_disabled" => true,
            "product_feedback_disabled" => true,
            "uuid" => util::uuid(),
            "fast_mode_state" => "off",
        }
    }

    fn assistant(&self, content: Vec<J>) -> J {
        obj! {
            "type" => "assistant",
            "message" => obj! {
                "id" => util::short_id("msg_"),
                "type" => "message",
                "role" => "assistant",
                "model" => &self.model,
                "content" => content,
                "stop_reason" => J::Null,
                "stop_sequence" => J::Null,
                "usage" => obj! {
                    "input_tokens" => 11,
                    "output_tokens" => 1,
                    "cache_creation_input_tokens" => 0,
                    "cache_read_input_tokens" => 0,
                },
                "context_management" => J::Null,
            },
            "parent_tool_use_id" => J::Null,
            "session_id" => &self.id,
            "uuid" => util::uuid(),
        }
    }

    /// The assistant message Claude Code makes up for a failed API call (model `<synthetic>`).
    fn synthetic(&self, text: &str) -> J {
        let mut assistant = self.assistant(vec![obj! { "type" => "text", "text" => text }]);
        if let J::Obj(fields) = &mut assistant
            && let Some((_, J::Obj(msg))) = fields.iter_mut().find(|(k, _)| k == "message")
            && let Some((_, model)) = msg.iter_mut().find(|(k, _)| k == "model")
        {
            *model = J::from("<synthetic>");
        }
        assistant
    }

    fn tool_result(&self, tool_use_id: &str, content: &str) -> J {
        obj! {
            "type" => "user",
            "message" => obj! {
                "role" => "user",
                "content" => arr![obj! {
                    "tool_use_id" => tool_use_id,
                    "type" => "tool_result",
                    "content" => content,
                }],
            },
            "parent_tool_use_id" => J::Null,
            "session_id" => &self.id,
            "uuid" => util::uuid(),
            "timestamp" => util::iso_now(),
        }
    }

    fn usage(&self, zero: bool) -> (J, J) {
        let (input, output, creation, read, cost) = if zero {
            (0, 0, 0, 0, 0.0)
        } else {
            (22, 14, 3, 5, 0.000276)
        };
        let usage = obj! {
            "input_tokens" => input,
            "cache_creation_input_tokens" => creation,
            "cache_read_input_tokens" => read,
            "output_tokens" => output,
            "server_tool_use" => obj! { "web_search_requests" => 0, "web_fetch_requests" => 0 },
            "service_tier" => "standard",
            "cache_creation" => obj! {
                "ephemeral_1h_input_tokens" => 0,
                "ephemeral_5m_input_tokens" => creation,
            },
            "inference_geo" => "",
            "iterations" => arr![],
            "speed" => "standard",
        };
        let model_usage = if zero {
            obj! {}
        } else {
            J::Obj(vec![(
                self.model.clone(),
                obj! {
                    "inputTokens" => input,
                    "outputTokens" => output,
                    "cacheReadInputTokens" => read,
                    "cacheCreationInputTokens" => creation,
                    "webSearchRequests" => 0,
                    "costUSD" => cost,
                    "contextWindow" => 200_000,
                    "maxOutputTokens" => 32_000,
                },
            )])
        };
        (usage, model_usage)
    }

    fn result_success(&self, num_turns: u32, result: &str, structured: Option<J>) -> J {
        let (usage, model_usage) = self.usage(false);
        let mut r = obj! {
            "type" => "result",
            "subtype" => "success",
            "is_error" => false,
            "api_error_status" => J::Null,
            "duration_ms" => 225,
            "duration_api_ms" => 59,
            "ttft_ms" => 170,
            "ttft_stream_ms" => 161,
            "time_to_request_ms" => 147,
            "num_turns" => num_turns,
            "result" => result,
            "stop_reason" => "end_turn",
            "session_id" => &self.id,
            "total_cost_usd" => 0.000276,
            "usage" => usage,
            "modelUsage" => model_usage,
            "permission_denials" => arr![],
        };
        if let Some(s) = structured {
            r.push("structured_output", s);
        }
        r.push("terminal_reason", "completed");
        r.push("fast_mode_state", "off");
        r.push("uuid", util::uuid());
        r
    }

    /// The result of a turn a failed API call ended: `api_error_status` (null without one),
    /// `api_error_type` when given, and `terminal_reason`.
    fn result_api_error(
        &self,
        message: &str,
        status: Option<u16>,
        kind: Option<&str>,
        terminal: &str,
    ) -> J {
        let (usage, model_usage) = self.usage(true);
        let mut r = obj! {
            "type" => "result",
            "subtype" => "success",
            "is_error" => true,
            "api_error_status" => status.map_or(J::Null, |s| J::from(u32::from(s))),
        };
        if let Some(kind) = kind {
            r.push("api_error_type", kind);
        }
        let rest = obj! {
            "duration_ms" => 145,
            "duration_api_ms" => 0,
            "num_turns" => 1,
            "result" => message,
            "stop_reason" => "stop_sequence",
            "session_id" => &self.id,
            "total_cost_usd" => 0,
            "usage" => usage,
            "modelUsage" => model_usage,
            "permission_denials" => arr![],
            "terminal_reason" => terminal,
            "fast_mode_state" => "off",
            "uuid" => util::uuid(),
        };
        if let (J::Obj(fields), J::Obj(more)) = (&mut r, rest) {
            fields.extend(more);
        }
        r
    }

    fn result_max_turns(&self) -> J {
        let (usage, model_usage) = self.usage(false);
        obj! {
            "type" => "result",
            "subtype" => "error_max_turns",
            "is_error" => true,
            "api_error_status" => J::Null,
            "duration_ms" => 225,
            "duration_api_ms" => 59,
            "num_turns" => self.max_turns + 1,
            "stop_reason" => "tool_use",
            "session_id" => &self.id,
            "total_cost_usd" => 0.000276,
            "usage" => usage,
            "modelUsage" => model_usage,
            "permission_denials" => arr![],
            "terminal_reason" => "max_turns",
            "errors" => arr![format!("Reached maximum number of turns ({})", self.max_turns)],
            "fast_mode_state" => "off",
            "uuid" => util::uuid(),
        }
    }
}
