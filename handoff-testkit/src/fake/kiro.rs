//! Kiro CLI (`kiro-cli chat`): ANSI-decorated text whose answer follows a `> ` marker.

use std::process::ExitCode;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::receiver;
use super::task::{self, Answer, Task};
use super::util;

use crate::fixtures::{KIRO_CHAT_HELP as CHAT_HELP, KIRO_HELP as HELP, OTHER_VERSION as VERSION};

const TOP_OPTS: &[Opt] = &[
    opt("verbose", &["-v", "--verbose"], Kind::Flag),
    opt("help", &["-h", "--help"], Kind::Flag),
    opt("version", &["-V", "--version"], Kind::Flag),
];

const CHAT_OPTS: &[Opt] = &[
    opt("resume", &["--resume"], Kind::Flag),
    opt("agent", &["--agent"], Kind::Value),
    opt("model", &["--model"], Kind::Value),
    opt("effort", &["--effort"], Kind::Value),
    opt("trust-all-tools", &["-a", "--trust-all-tools"], Kind::Flag),
    opt("trust-tools", &["--trust-tools"], Kind::Value),
    opt("no-interactive", &["--no-interactive"], Kind::Flag),
    opt(
        "require-mcp-startup",
        &["--require-mcp-startup"],
        Kind::Flag,
    ),
    opt("wrap", &["-w", "--wrap"], Kind::Value),
    opt("verbose", &["-v", "--verbose"], Kind::Flag),
    opt("help", &["-h", "--help"], Kind::Flag),
];

fn clap_error(err: ParseError) -> ExitCode {
    let message = match err {
        ParseError::Unknown(arg) => format!(
            "error: unexpected argument '{arg}' found\n\nUsage: kiro-cli chat [OPTIONS] [INPUT]\n\nFor more information, try '--help'."
        ),
        ParseError::MissingValue(name) => format!(
            "error: a value is required for '{name}' but none was supplied\n\nFor more information, try '--help'."
        ),
    };
    util::err_line(&message);
    ExitCode::from(2)
}

fn fail(message: &str) -> ExitCode {
    util::err_line(message);
    ExitCode::from(1)
}

/// Runs `kiro-cli ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let top = match args::parse(&ctx.args, TOP_OPTS, true) {
        Ok(p) => p,
        Err(e) => return clap_error(e),
    };
    let Some(command) = top.rest.first() else {
        if top.has("version") {
            util::out_line(&format!("kiro-cli {}", ctx.version(VERSION)));
            return ExitCode::SUCCESS;
        }
        if top.has("help") {
            return ctx.print_help(HELP, "--trust-tools");
        }
        return fail(
            "fake-agent: interactive kiro-cli sessions are not imitated; use `kiro-cli chat --no-interactive`",
        );
    };
    if command != "chat" {
        return fail(&format!(
            "fake-agent: `kiro-cli {command}` is not imitated by the fake"
        ));
    }
    let parsed = match args::parse(&top.rest[1..], CHAT_OPTS, false) {
        Ok(p) => p,
        Err(e) => return clap_error(e),
    };
    if parsed.has("help") {
        return ctx.print_help(CHAT_HELP, "--trust-tools");
    }
    let conversation = conversation_id(&std::env::current_dir().unwrap_or_default());
    if !parsed.has("no-interactive") {
        // `kiro-cli chat --resume`, the command a continuation prints: the directory's
        // conversation as it was left (no terminal interface beyond that).
        if parsed.has("resume") {
            return receiver::store_resume(
                "kiro",
                &conversation,
                "error: no saved conversation in this directory",
            );
        }
        return fail("error: kiro-cli chat needs a terminal; pass --no-interactive");
    }
    let prompt = if parsed.positional.is_empty() {
        String::from_utf8_lossy(&ctx.read_stdin()).into_owned()
    } else {
        parsed.positional.join(" ")
    };
    if prompt.trim().is_empty() {
        return fail("error: no input provided");
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let trusted: Vec<&str> = parsed
        .value("trust-tools")
        .map(|t| t.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: parsed.has("trust-all-tools") || trusted.contains(&"fs_write"),
        target: std::env::current_dir().unwrap_or_default(),
    };
    // A continuation's turn is saved as the directory's conversation, as Kiro saves every
    // chat; `--resume` goes on with it.
    let receiving = receiver::is_turn(&prompt);
    let outcome = if receiving {
        let previous = parsed
            .has("resume")
            .then(|| receiver::store_last("kiro", &conversation))
            .flatten();
        receiver::pause(&ctx.settings);
        let reply = receiver::reply(&ctx.settings, task.exe, &conversation, &prompt, previous);
        let outcome =
            match task::perform_receiver(ctx, behaviour, &task, &prompt, &conversation, &reply) {
                Ok(o) => o,
                Err(code) => return code,
            };
        let target = task.target.clone();
        receiver::store_save(
            "kiro",
            &conversation,
            None,
            &target,
            &prompt,
            outcome.text(),
        );
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
            return fail("\u{1b}[31mError:\u{1b}[0m Service error: 500 internal error");
        }
        Answer::Api(api) => {
            let model = parsed.value("model").unwrap_or("auto");
            return fail(&format!(
                "\u{1b}[31mError:\u{1b}[0m {}",
                api.status_text(model)
            ));
        }
    };
    let mut stdout = String::new();
    if let Some(w) = &outcome.wrote {
        stdout.push_str(&format!(
            "\u{1b}[38;5;141m🛠️  Using tool: fs_write\u{1b}[0m (trusted)\n ⋮ \n ● Path: {}\n\n ● Completed in 0.1s\n\n",
            w.abs.display()
        ));
    }
    if receiving {
        stdout.push_str(&format!("\u{1b}[32m> \u{1b}[0m{text}\n\u{1b}[0m"));
    } else {
        stdout.push_str(&format!(
            "\u{1b}[32m> \u{1b}[0mI have finished the requested work. Here is the result.\n\n{text}\n\u{1b}[0m"
        ));
    }
    util::out(&task::raw_bytes(&stdout));
    ExitCode::SUCCESS
}

/// The id the fake files a directory's conversation under (Kiro keys conversations by the
/// directory they started in): a hash of its canonical path.
fn conversation_id(dir: &std::path::Path) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    receiver::canonical(dir).hash(&mut hasher);
    format!("dir-{:016x}", hasher.finish())
}
