//! Cursor agent (`cursor-agent`): `-p --output-format json` result envelope and
//! `sandbox run` (which the fake does not enforce; see below).

use std::process::{Command, ExitCode};

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::json::{J, arr, obj};
use super::receiver;
use super::task::{self, Answer, Task};
use super::util;

use crate::fixtures::{
    CURSOR_HELP as HELP, CURSOR_SANDBOX_RUN_HELP as SANDBOX_RUN_HELP, OTHER_VERSION as VERSION,
};

const OPTS: &[Opt] = &[
    opt("version", &["-v", "--version"], Kind::Flag),
    opt("api-key", &["--api-key"], Kind::Value),
    opt("print", &["-p", "--print"], Kind::Flag),
    opt("output-format", &["--output-format"], Kind::Value),
    opt(
        "stream-partial-output",
        &["--stream-partial-output"],
        Kind::Flag,
    ),
    opt("background", &["-b", "--background"], Kind::Flag),
    opt("resume", &["--resume"], Kind::OptValue),
    opt("model", &["--model"], Kind::Value),
    opt("force", &["-f", "--force"], Kind::Flag),
    opt("approve-mcps", &["--approve-mcps"], Kind::Flag),
    opt("help", &["-h", "--help"], Kind::Flag),
];

const SANDBOX_OPTS: &[Opt] = &[
    opt("sandbox", &["--sandbox"], Kind::Flag),
    opt("network", &["--network"], Kind::Flag),
    opt("allow-paths", &["--allow-paths"], Kind::Value),
    opt("readonly-paths", &["--readonly-paths"], Kind::Value),
    opt("help", &["-h", "--help"], Kind::Flag),
];

fn fail(message: &str) -> ExitCode {
    util::err_line(message);
    ExitCode::from(1)
}

fn parse_error(err: ParseError) -> ExitCode {
    match err {
        ParseError::Unknown(a) => fail(&format!("error: unknown option '{a}'")),
        ParseError::MissingValue(n) => fail(&format!("error: option '{n}' argument missing")),
    }
}

/// Runs `cursor-agent ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let args = ctx.args.clone();
    if args.first().map(String::as_str) == Some("sandbox") {
        return sandbox(ctx, &args[1..]);
    }
    let args: &[String] = if args.first().map(String::as_str) == Some("agent") {
        &args[1..]
    } else {
        &args
    };
    let parsed = match args::parse(args, OPTS, false) {
        Ok(p) => p,
        Err(e) => return parse_error(e),
    };
    if parsed.has("version") {
        util::out_line(&format!("cursor-agent {}", ctx.version(VERSION)));
        return ExitCode::SUCCESS;
    }
    if parsed.has("help") {
        return ctx.print_help(HELP, "--force");
    }
    if !parsed.has("print") {
        // `cursor-agent --resume=<chatId>`, the command a continuation prints: the chat as it
        // was left (the fake imitates no terminal interface beyond that).
        if let Some(chat) = parsed.value("resume").filter(|c| !c.is_empty()) {
            return receiver::store_resume(
                "cursor",
                chat,
                &format!("Error: chat {chat} not found in this workspace"),
            );
        }
        return fail("fake-agent: interactive cursor-agent sessions are not imitated; pass -p");
    }
    let format = parsed.value("output-format").unwrap_or("text").to_owned();
    if !matches!(format.as_str(), "text" | "json" | "stream-json") {
        return fail(&format!(
            "error: option '--output-format <format>' argument '{format}' is invalid. Allowed choices are text, json, stream-json."
        ));
    }
    let prompt = if parsed.positional.is_empty() {
        String::from_utf8_lossy(&ctx.read_stdin()).into_owned()
    } else {
        parsed.positional.join(" ")
    };
    if prompt.trim().is_empty() {
        return fail("Error: No prompt provided for print mode");
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: parsed.has("force"),
        target: cwd.clone(),
    };
    // A continuation's turn keeps its chat (`--resume <chatId>` goes on with one, unless
    // `FAKE_AGENT_RECEIVER_FRESH=1`); a delegated run's chat is thrown away with its HOME.
    let receiving = receiver::is_turn(&prompt);
    let resumed = parsed
        .value("resume")
        .filter(|c| receiving && !c.is_empty() && !receiver::fresh(&ctx.settings));
    let session = resumed.map_or_else(util::uuid, str::to_owned);
    let outcome = if receiving {
        let previous = resumed.and_then(|c| receiver::store_last("cursor", c));
        receiver::pause(&ctx.settings);
        let reply = receiver::reply(&ctx.settings, task.exe, &session, &prompt, previous);
        let outcome = match task::perform_receiver(ctx, behaviour, &task, &prompt, &session, &reply)
        {
            Ok(o) => o,
            Err(code) => return code,
        };
        receiver::store_save("cursor", &session, None, &cwd, &prompt, outcome.text());
        outcome
    } else {
        match task::perform(ctx, behaviour, &task, &prompt) {
            Ok(o) => o,
            Err(code) => return code,
        }
    };
    let text = match &outcome.answer {
        Answer::Json { text, .. } => text.clone(),
        Answer::Prose(p) => p.clone(),
        Answer::AgentError(_) | Answer::MaxTurns => {
            return fail("Error: API error (500): internal error");
        }
        Answer::Api(api) => {
            let model = parsed.value("model").unwrap_or("auto");
            return fail(&format!("Error: {}", api.status_text(model)));
        }
    };
    let result = obj! {
        "type" => "result",
        "subtype" => "success",
        "is_error" => false,
        "duration_ms" => 1234,
        "duration_api_ms" => 1234,
        "result" => &text,
        "session_id" => &session,
        "request_id" => util::uuid(),
    };
    let mut stdout = String::new();
    match format.as_str() {
        "json" => stdout.push_str(&result.render()),
        "stream-json" => {
            let model = parsed.value("model").unwrap_or("auto");
            let lines: [J; 3] = [
                obj! {
                    "type" => "system",
                    "subtype" => "init",
                    "apiKeySource" => "login",
                    "cwd" => cwd.to_string_lossy().into_owned(),
                    "session_id" => &session,
                    "model" => model,
                    "permissionMode" => "default",
                },
                obj! {
                    "type" => "assistant",
                    "message" => obj! {
                        "role" => "assistant",
                        "content" => arr![obj! { "type" => "text", "text" => &text }],
                    },
                    "session_id" => &session,
                },
                result,
            ];
            let rendered: Vec<String> = lines.iter().map(J::render).collect();
            stdout.push_str(&rendered.join("\n"));
        }
        _ => stdout.push_str(&text),
    }
    stdout.push('\n');
    util::out(&task::raw_bytes(&stdout));
    ExitCode::SUCCESS
}

/// `cursor-agent sandbox run [--sandbox] [--network] [--allow-paths P|--readonly-paths P] CMD…`.
///
/// The fake cannot sandbox anything. With `HANDOFF_CURSOR_SANDBOX_PROBE=1` (the adapter's
/// behaviour probe) it imitates the sandbox's verdict instead of running the command: it creates
/// the probe file (the last argument) iff `--allow-paths` was given. Otherwise it runs the command
/// unconfined and exits with its status.
fn sandbox(ctx: &Ctx, args: &[String]) -> ExitCode {
    if args.first().map(String::as_str) != Some("run") {
        if args.iter().any(|a| a == "--help" || a == "-h") {
            util::out_line(
                "Usage: cursor-agent sandbox [options] [command]\n\nCommands:\n  run [options] <command...>  Run a command inside the Cursor sandbox",
            );
            return ExitCode::SUCCESS;
        }
        return fail("fake-agent: only `cursor-agent sandbox run` is imitated");
    }
    let parsed = match args::parse(&args[1..], SANDBOX_OPTS, true) {
        Ok(p) => p,
        Err(e) => return parse_error(e),
    };
    if parsed.has("help") {
        return ctx.print_help(SANDBOX_RUN_HELP, "--readonly-paths");
    }
    let Some((program, rest)) = parsed.rest.split_first() else {
        return fail("error: missing required argument 'command'");
    };
    if std::env::var("HANDOFF_CURSOR_SANDBOX_PROBE").as_deref() == Ok("1") {
        if parsed.has("allow-paths")
            && let Some(target) = rest.last()
            && let Err(e) = std::fs::write(target, b"handoff cursor sandbox probe\n")
        {
            return fail(&format!("probe: cannot write {target}: {e}"));
        }
        return ExitCode::SUCCESS;
    }
    match Command::new(program).args(rest).status() {
        Ok(status) => ExitCode::from(
            status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(1),
        ),
        Err(e) => fail(&format!("sandbox: cannot run {program}: {e}")),
    }
}
