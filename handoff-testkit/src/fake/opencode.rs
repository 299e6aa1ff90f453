//! OpenCode 1.18.33 (`opencode`): `run --format json` NDJSON events, `debug config`, and
//! `export`, `import` and `session delete` on the fake's session store. Like the real one,
//! every command reads the project's configuration from the directory it runs in up to the
//! repository's root, and writes to it, unless `OPENCODE_DISABLE_PROJECT_CONFIG` is set.

use std::process::ExitCode;

use serde_json::Value;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::json::{J, obj};
use super::receiver;
use super::task::{self, Answer, Task};
use super::util;

use crate::fixtures::{
    OPENCODE_HELP as HELP, OPENCODE_RUN_HELP as RUN_HELP, OTHER_VERSION as VERSION,
};

const TOP_OPTS: &[Opt] = &[
    opt("help", &["-h", "--help"], Kind::Flag),
    opt("version", &["-v", "--version"], Kind::Flag),
    opt("print-logs", &["--print-logs"], Kind::Flag),
    opt("log-level", &["--log-level"], Kind::Value),
    opt("pure", &["--pure"], Kind::Flag),
    opt("model", &["-m", "--model"], Kind::Value),
    opt("continue", &["-c", "--continue"], Kind::Flag),
    opt("session", &["-s", "--session"], Kind::Value),
    opt("agent", &["--agent"], Kind::Value),
];

const RUN_OPTS: &[Opt] = &[
    opt("help", &["-h", "--help"], Kind::Flag),
    opt("version", &["-v", "--version"], Kind::Flag),
    opt("print-logs", &["--print-logs"], Kind::Flag),
    opt("log-level", &["--log-level"], Kind::Value),
    opt("pure", &["--pure"], Kind::Flag),
    opt("command", &["--command"], Kind::Value),
    opt("continue", &["-c", "--continue"], Kind::Flag),
    opt("session", &["-s", "--session"], Kind::Value),
    opt("fork", &["--fork"], Kind::Flag),
    opt("share", &["--share"], Kind::Flag),
    opt("model", &["-m", "--model"], Kind::Value),
    opt("agent", &["--agent"], Kind::Value),
    opt("format", &["--format"], Kind::Value),
    opt("file", &["-f", "--file"], Kind::Value),
    opt("title", &["--title"], Kind::OptValue),
    opt("attach", &["--attach"], Kind::Value),
    opt("password", &["-p", "--password"], Kind::Value),
    opt("username", &["-u", "--username"], Kind::Value),
    opt("dir", &["--dir"], Kind::Value),
    opt("port", &["--port"], Kind::OptValue),
    opt("variant", &["--variant"], Kind::Value),
    opt("thinking", &["--thinking"], Kind::Flag),
    opt("interactive", &["-i", "--interactive"], Kind::Flag),
    opt("auto", &["--auto"], Kind::Flag),
];

fn fail(message: &str) -> ExitCode {
    util::err_line(message);
    ExitCode::from(1)
}

fn parse_error(err: ParseError) -> ExitCode {
    match err {
        ParseError::Unknown(a) => fail(&format!("Unknown argument: {}", a.trim_start_matches('-'))),
        ParseError::MissingValue(n) => fail(&format!(
            "Not enough arguments following: {}",
            n.trim_start_matches('-')
        )),
    }
}

/// Runs `opencode ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let top = match args::parse(&ctx.args, TOP_OPTS, true) {
        Ok(p) => p,
        Err(e) => return parse_error(e),
    };
    let Some(command) = top.rest.first().cloned() else {
        if top.has("version") {
            util::out_line(&format!("opencode {}", ctx.version(VERSION)));
            return ExitCode::SUCCESS;
        }
        if top.has("help") {
            return ctx.print_help(HELP, "--pure");
        }
        // `opencode --session <id>`: the session must exist and belong to this directory.
        if let Some(id) = top.value("session") {
            return receiver::opencode_resume(id);
        }
        return fail("fake-agent: the opencode TUI is not imitated; use `opencode run`");
    };
    let rest = &top.rest[1..];
    load_project_config();
    match command.as_str() {
        "run" => run_message(ctx, rest),
        "debug" if rest.first().map(String::as_str) == Some("config") => debug_config(),
        "export" if rest.len() == 1 => receiver::opencode_export(&rest[0]),
        "import" if rest.len() == 1 => receiver::opencode_import(&ctx.settings, &rest[0]),
        "session" if rest.len() == 2 && rest[0] == "delete" => receiver::opencode_delete(&rest[1]),
        other => fail(&format!(
            "fake-agent: `opencode {other}` is not imitated by the fake"
        )),
    }
}

/// What OpenCode's start does to a project's configuration: from the working directory up to
/// the repository's root (up to `/` outside one; the fake stops at `$HOME`), an
/// `opencode.json` without `$schema` gets one written into it, and a `.opencode` directory
/// without a `.gitignore` gets one. Skipped when
/// `OPENCODE_DISABLE_PROJECT_CONFIG` is `1` or `true`, as the real one skips the project's
/// configuration (and its plugins) altogether.
fn load_project_config() {
    if matches!(
        std::env::var("OPENCODE_DISABLE_PROJECT_CONFIG").as_deref(),
        Ok("1" | "true")
    ) {
        return;
    }
    let Ok(mut dir) = std::env::current_dir() else {
        return;
    };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    loop {
        let config = dir.join("opencode.json");
        if let Ok(text) = std::fs::read_to_string(&config)
            && let Ok(Value::Object(mut doc)) = serde_json::from_str::<Value>(&text)
            && !doc.contains_key("$schema")
        {
            doc.insert("$schema".into(), "https://opencode.ai/config.json".into());
            let _ = std::fs::write(&config, Value::Object(doc).to_string());
        }
        let own = dir.join(".opencode");
        if own.is_dir() && !own.join(".gitignore").exists() {
            let _ = std::fs::write(own.join(".gitignore"), "node_modules\n");
        }
        // The fake stops at the home directory too, so no test reaches the machine's own.
        if dir.join(".git").exists() || Some(&dir) == home.as_ref() || !dir.pop() {
            return;
        }
    }
}

/// `opencode debug config`: the resolved configuration, here `OPENCODE_CONFIG_CONTENT` as is.
fn debug_config() -> ExitCode {
    let config = std::env::var("OPENCODE_CONFIG_CONTENT")
        .ok()
        .and_then(|c| serde_json::from_str::<Value>(&c).ok())
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let text = serde_json::to_string_pretty(&config).unwrap_or_else(|_| "{}".to_owned());
    util::out_line(&text);
    ExitCode::SUCCESS
}

/// Whether the agent may edit: the `edit` permission of the agent, else the global one, else
/// `OPENCODE_PERMISSION`; default allow (OpenCode's `build` agent edits).
fn edit_allowed(agent: Option<&str>) -> bool {
    let config = std::env::var("OPENCODE_CONFIG_CONTENT")
        .ok()
        .and_then(|c| serde_json::from_str::<Value>(&c).ok());
    let from_env = std::env::var("OPENCODE_PERMISSION")
        .ok()
        .and_then(|c| serde_json::from_str::<Value>(&c).ok());
    let edit_of = |perm: Option<&Value>| {
        perm.and_then(|p| p.get("edit").or_else(|| p.get("*")))
            .and_then(Value::as_str)
            .map(|s| s == "allow")
    };
    let agent_perm = agent.and_then(|a| {
        config
            .as_ref()
            .and_then(|c| c.get("agent"))
            .and_then(|ags| ags.get(a))
            .and_then(|ag| ag.get("permission"))
    });
    edit_of(agent_perm)
        .or_else(|| edit_of(config.as_ref().and_then(|c| c.get("permission"))))
        .or_else(|| edit_of(from_env.as_ref()))
        .unwrap_or(true)
}

fn run_message(ctx: &mut Ctx, args: &[String]) -> ExitCode {
    let parsed = match args::parse(args, RUN_OPTS, false) {
        Ok(p) => p,
        Err(e) => return parse_error(e),
    };
    if parsed.has("help") {
        return ctx.print_help(RUN_HELP, "--pure");
    }
    if let Some(format) = parsed.value("format")
        && !matches!(format, "default" | "json")
    {
        return fail(&format!(
            "Invalid values:\n  Argument: format, Given: \"{format}\", Choices: \"default\", \"json\""
        ));
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let target = parsed.value("dir").map_or(cwd.clone(), |d| cwd.join(d));
    if !target.is_dir() {
        return fail(&format!(
            "Error: directory does not exist: {}",
            target.display()
        ));
    }
    let prompt = if parsed.positional.is_empty() {
        String::from_utf8_lossy(&ctx.read_stdin()).into_owned()
    } else {
        parsed.positional.join(" ")
    };
    if prompt.trim().is_empty() {
        return fail("Error: You must provide a message or a command");
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: edit_allowed(parsed.value("agent")),
        target,
    };
    // A delegated run's configuration roots are private (`OPENCODE_CONFIG_DIR`); a run in the
    // user's own is a continuation receiver.
    let receiving = std::env::var_os("OPENCODE_CONFIG_DIR").is_none();
    // `--session <id>` continues that session (or, with `--fork`, a new one forked from it);
    // `FAKE_AGENT_RECEIVER_FRESH=1` makes a receiver start a new one instead.
    let resumed = parsed
        .value("session")
        .filter(|_| !(receiving && receiver::fresh(&ctx.settings)));
    let forked = resumed.filter(|_| parsed.has("fork"));
    let session = match resumed {
        Some(id) if forked.is_none() => id.to_owned(),
        _ => receiver::opencode_session_id(),
    };
    let outcome = if receiving {
        let previous = resumed.and_then(receiver::opencode_last);
        receiver::pause(&ctx.settings);
        let reply = receiver::reply(&ctx.settings, task.exe, &session, &prompt, previous);
        let outcome = match task::perform_receiver(ctx, behaviour, &task, &prompt, &session, &reply)
        {
            Ok(o) => o,
            Err(code) => return code,
        };
        receiver::opencode_save(&session, forked, &task.target, &prompt, outcome.text());
        outcome
    } else {
        let outcome = match task::perform(ctx, behaviour, &task, &prompt) {
            Ok(o) => o,
            Err(code) => return code,
        };
        // A delegated run keeps its session too: in the run's own data directory under
        // handoff's sandbox, whence handoff imports it into the user's.
        receiver::opencode_save(&session, None, &task.target, &prompt, outcome.text());
        outcome
    };
    let json = parsed.value("format") == Some("json");
    let text = match &outcome.answer {
        Answer::Json { text, .. } => text.clone(),
        Answer::Prose(p) => p.clone(),
        Answer::AgentError(_) | Answer::MaxTurns => {
            let message = "AI_APICallError: Internal Server Error";
            let error = obj! {
                "name" => "APIError",
                "data" => obj! {
                    "message" => message,
                    "statusCode" => 500,
                    "isRetryable" => false,
                },
            };
            return report_error(json, &session, error, message);
        }
        Answer::Api(api) => {
            // The real OpenCode retries 429 and 5xx itself, without end: the fake reports them
            // at once.
            let model = parsed
                .value("model")
                .map_or("fake-model", |m| m.rsplit('/').next().unwrap_or(m));
            let message = api.opencode_message(model);
            return report_error(json, &session, api.opencode(model), &message);
        }
    };
    if !json {
        let mut bytes = task::raw_bytes(&text);
        bytes.push(b'\n');
        util::out(&bytes);
        return ExitCode::SUCCESS;
    }

    let ids = Ids::new(&session);
    let mut lines: Vec<J> = Vec::new();
    if let Some(w) = &outcome.wrote {
        let message = util::short_id("msg_");
        lines.push(ids.step_start(&message));
        let path = w.abs.to_string_lossy().into_owned();
        lines.push(obj! {
            "type" => "tool_use",
            "timestamp" => util::now_millis(),
            "sessionID" => &session,
            "part" => obj! {
                "type" => "tool",
                "tool" => "write",
                "callID" => util::short_id("call_"),
                "state" => obj! {
                    "status" => "completed",
                    "input" => obj! { "filePath" => &path, "content" => &w.content },
                    "output" => "Wrote file successfully.",
                    "metadata" => obj! {
                        "diagnostics" => obj! {},
                        "filepath" => &path,
                        "exists" => false,
                        "truncated" => false,
                    },
                    "title" => &w.rel,
                    "time" => obj! { "start" => util::now_millis(), "end" => util::now_millis() },
                },
                "id" => util::short_id("prt_"),
                "sessionID" => &session,
                "messageID" => &message,
            },
        });
        lines.push(ids.step_finish(&message, "tool-calls", 11, 7));
        let message = util::short_id("msg_");
        lines.push(ids.step_start(&message));
        lines.push(ids.text(&message, &text));
        lines.push(ids.step_finish(&message, "stop", 11, 7));
    } else {
        let message = util::short_id("msg_");
        lines.push(ids.step_start(&message));
        lines.push(ids.text(&message, &text));
        lines.push(ids.step_finish(&message, "stop", 22, 14));
    }
    let mut stdout = String::new();
    for line in &lines {
        stdout.push_str(&line.render());
        stdout.push('\n');
    }
    util::out(&task::raw_bytes(&stdout));
    ExitCode::SUCCESS
}

/// A failed turn: an `error` event carrying `error` (`--format json`), else `Error: <message>`
/// on stderr; exit 1.
fn report_error(json: bool, session: &str, error: J, message: &str) -> ExitCode {
    if json {
        let event = obj! {
            "type" => "error",
            "timestamp" => util::now_millis(),
            "sessionID" => session,
            "error" => error,
        };
        util::out_line(&event.render());
    } else {
        util::err_line(&format!("Error: {message}"));
    }
    ExitCode::from(1)
}

struct Ids {
    session: String,
    snapshot: String,
}

impl Ids {
    fn new(session: &str) -> Ids {
        let a = util::short_id("");
        let b = util::short_id("");
        Ids {
            session: session.to_owned(),
            snapshot: format!("{a}{b}"),
        }
    }

    fn step_start(&self, message: &str) -> J {
        obj! {
            "type" => "step_start",
            "timestamp" => util::now_millis(),
            "sessionID" => &self.session,
            "part" => obj! {
                "id" => util::short_id("prt_"),
                "messageID" => message,
                "sessionID" => &self.session,
                "snapshot" => &self.snapshot,
                "type" => "step-start",
            },
        }
    }

    fn text(&self, message: &str, text: &str) -> J {
        obj! {
            "type" => "text",
            "timestamp" => util::now_millis(),
            "sessionID" => &self.session,
            "part" => obj! {
                "id" => util::short_id("prt_"),
                "messageID" => message,
                "sessionID" => &self.session,
                "type" => "text",
                "text" => text,
                "time" => obj! { "start" => util::now_millis(), "end" => util::now_millis() },
            },
        }
    }

    fn step_finish(&self, message: &str, reason: &str, input: u32, output: u32) -> J {
        obj! {
            "type" => "step_finish",
            "timestamp" => util::now_millis(),
            "sessionID" => &self.session,
            "part" => obj! {
                "id" => util::short_id("prt_"),
                "reason" => reason,
                "snapshot" => &self.snapshot,
                "messageID" => message,
                "sessionID" => &self.session,
                "type" => "step-finish",
                "tokens" => obj! {
                    "total" => input + output,
                    "input" => input,
                    "output" => output,
                    "reasoning" => 0,
                    "cache" => obj! { "write" => 0, "read" => 0 },
                },
                "cost" => 0,
            },
        }
    }
}
