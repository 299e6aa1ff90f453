//! The community Grok CLI (`@vibe-kit/grok-cli` 0.0.34), which installs `grok` too: chosen with
//! `HANDOFF_FAKE_GROK=community`. Headless with `-p`, one OpenAI-style chat message per line on
//! stdout, API errors as an assistant message with exit 0. Like the real CLI it has no sandbox:
//! it writes wherever the process can, and runs `HANDOFF_FAKE_SHELL` with `/bin/sh` (Node's
//! `child_process`), not `$SHELL`. `-k/-u` are saved into `~/.grok/user-settings.json`, as the
//! real CLI does.

use std::path::PathBuf;
use std::process::ExitCode;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::json::{J, arr, obj};
use super::task::{self, Answer, Task};
use super::util;

use crate::fixtures::GROK_CLI_HELP as HELP;

/// What `grok --version` prints (the package is 0.0.34; the program says 1.0.1).
pub(crate) const VERSION: &str = "1.0.1";

const OPTS: &[Opt] = &[
    opt("directory", &["-d", "--directory"], Kind::Value),
    opt("api-key", &["-k", "--api-key"], Kind::Value),
    opt("base-url", &["-u", "--base-url"], Kind::Value),
    opt("model", &["-m", "--model"], Kind::Value),
    opt("prompt", &["-p", "--prompt"], Kind::Value),
    opt("max-tool-rounds", &["--max-tool-rounds"], Kind::Value),
    opt("version", &["-V", "--version"], Kind::Flag),
    opt("help", &["-h", "--help"], Kind::Flag),
];

fn fail(message: &str) -> ExitCode {
    util::err_line(message);
    ExitCode::from(1)
}

fn line(message: J) {
    util::out(&task::raw_bytes(&format!("{}\n", message.render())));
}

/// Saves `-k/-u` as the real CLI does: into `$HOME/.grok/user-settings.json`.
fn save_settings(api_key: Option<&str>, base_url: Option<&str>) {
    let Some(home) = std::env::var_os("HOME") else {
        return;
    };
    let dir = PathBuf::from(home).join(".grok");
    let mut settings = obj! {};
    if let Some(k) = api_key {
        settings.push("apiKey", k);
    }
    if let Some(u) = base_url {
        settings.push("baseURL", u);
    }
    let saved = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("user-settings.json"), settings.render()));
    match saved {
        Ok(()) => util::out_line("✅ API key saved to ~/.grok/user-settings.json"),
        Err(e) => util::err_line(&format!("⚠️ Could not save settings to file: {e}")),
    }
}

/// Runs the community `grok ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let parsed = match args::parse(&ctx.args, OPTS, false) {
        Ok(p) => p,
        Err(ParseError::Unknown(a)) => return fail(&format!("error: unknown option '{a}'")),
        Err(ParseError::MissingValue(n)) => {
            return fail(&format!("error: option '{n}' argument missing"));
        }
    };
    if parsed.has("version") {
        util::out_line(&ctx.version(VERSION));
        return ExitCode::SUCCESS;
    }
    if parsed.has("help") {
        return ctx.print_help(HELP, "--max-tool-rounds");
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let target = parsed
        .value("directory")
        .map_or(cwd.clone(), |d| cwd.join(d));
    if let Err(e) = std::env::set_current_dir(&target) {
        return fail(&format!(
            "Error changing directory to {}: {e}",
            target.display()
        ));
    }
    if parsed.has("api-key") || parsed.has("base-url") {
        save_settings(parsed.value("api-key"), parsed.value("base-url"));
    }
    let Some(prompt) = parsed.value("prompt").map(str::to_owned) else {
        return fail("fake-agent: interactive grok sessions are not imitated; use `grok -p`");
    };
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    // Its bash tool: `/bin/sh -c` from the CLI's own process, whatever `$SHELL` says.
    ctx.plain_sh = true;
    let mode = task::mode_from_prompt(&prompt);
    let task = Task {
        exe: ctx.exe.name(),
        writable: matches!(mode.as_str(), "build" | "phase" | "run"),
        mode,
        target,
    };
    line(obj! { "role" => "user", "content" => &prompt });
    let outcome = match task::perform(ctx, behaviour, &task, &prompt) {
        Ok(o) => o,
        Err(code) => return code,
    };
    if let Some(w) = &outcome.wrote {
        let id = util::short_id("call_");
        let arguments = obj! {
            "path" => w.abs.display().to_string(),
            "content" => &w.content,
        }
        .render();
        line(obj! {
            "role" => "assistant",
            "content" => "Using tools to help you...",
            "tool_calls" => arr![obj! {
                "id" => &id,
                "type" => "function",
                "function" => obj! { "name" => "create_file", "arguments" => arguments },
            }],
        });
        line(obj! {
            "role" => "tool",
            "tool_call_id" => &id,
            "content" => format!("Updated {} with 1 addition", w.abs.display()),
        });
    }
    let content = match &outcome.answer {
        Answer::Json { text, .. } => text.clone(),
        Answer::Prose(p) => p.clone(),
        Answer::AgentError(_) => {
            "Sorry, I encountered an error: Grok API error: 500 internal error".to_owned()
        }
        Answer::Api(api) => format!(
            "Sorry, I encountered an error: Grok API error: {}",
            api.openai_sdk_message(parsed.value("model").unwrap_or("grok-code-fast-1"))
        ),
        Answer::MaxTurns => {
            "Maximum tool execution rounds reached. Stopping to prevent infinite loops.".to_owned()
        }
    };
    line(obj! { "role" => "assistant", "content" => content });
    ExitCode::SUCCESS
}
