//! Grok (`grok`), shaped after the xAI CLI that `delegation.md` §4.2 describes: `--prompt-file`,
//! `--sandbox`, `--json-schema`, one JSON envelope on stdout.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, opt};
use super::json::{J, obj};
use super::task::{self, Answer, Task};
use super::util;

use crate::fixtures::{GROK_HELP as HELP, OTHER_VERSION as VERSION};

const OPTS: &[Opt] = &[
    opt("prompt-file", &["--prompt-file"], Kind::Value),
    opt("prompt", &["-p", "--prompt"], Kind::Value),
    opt("cwd", &["--cwd"], Kind::Value),
    opt("sandbox", &["--sandbox"], Kind::Value),
    opt("permission-mode", &["--permission-mode"], Kind::Value),
    opt("tools", &["--tools"], Kind::Value),
    opt("allow", &["--allow"], Kind::Value),
    opt("deny", &["--deny"], Kind::Value),
    opt("no-plan", &["--no-plan"], Kind::Flag),
    opt("no-subagents", &["--no-subagents"], Kind::Flag),
    opt("no-memory", &["--no-memory"], Kind::Flag),
    opt("max-turns", &["--max-turns"], Kind::Value),
    opt("json-schema", &["--json-schema"], Kind::Value),
    opt("verbatim", &["--verbatim"], Kind::Flag),
    opt("disable-web-search", &["--disable-web-search"], Kind::Flag),
    opt("model", &["-m", "--model"], Kind::Value),
    opt("effort", &["--effort"], Kind::Value),
    opt("version", &["-V", "--version"], Kind::Flag),
    opt("help", &["-h", "--help"], Kind::Flag),
];

fn fail(message: &str) -> ExitCode {
    util::err_line(message);
    ExitCode::from(1)
}

/// Runs `grok ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let parsed = match args::parse(&ctx.args, OPTS, false) {
        Ok(p) => p,
        Err(ParseError::Unknown(a)) => return fail(&format!("error: unknown option '{a}'")),
        Err(ParseError::MissingValue(n)) => {
            return fail(&format!("error: option '{n}' argument missing"));
        }
    };
    if parsed.has("version") {
        util::out_line(&format!("grok {}", ctx.version(VERSION)));
        return ExitCode::SUCCESS;
    }
    if parsed.has("help") {
        return ctx.print_help(HELP, "--json-schema");
    }
    let sandbox = parsed.value("sandbox").unwrap_or("workspace").to_owned();
    if !matches!(sandbox.as_str(), "workspace" | "read-only" | "off") {
        return fail(&format!(
            "error: option '--sandbox <profile>' argument '{sandbox}' is invalid. Allowed choices are workspace, read-only, off."
        ));
    }
    let structured = match parsed.value("json-schema") {
        Some(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(_) => true,
            Err(e) => return fail(&format!("Error: --json-schema: invalid JSON: {e}")),
        },
        None => false,
    };
    let prompt = if let Some(file) = parsed.value("prompt-file") {
        match std::fs::read(file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => return fail(&format!("Error: cannot read --prompt-file {file}: {e}")),
        }
    } else if let Some(p) = parsed.value("prompt") {
        p.to_owned()
    } else if !parsed.positional.is_empty() {
        parsed.positional.join(" ")
    } else {
        String::from_utf8_lossy(&ctx.read_stdin()).into_owned()
    };
    if prompt.trim().is_empty() {
        return fail("Error: no prompt given (use --prompt-file, --prompt or stdin)");
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let target = parsed.value("cwd").map_or(cwd.clone(), |d| cwd.join(d));
    let tools: Vec<&str> = parsed
        .value("tools")
        .map(|t| t.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: sandbox != "read-only" && (tools.is_empty() || tools.contains(&"Edit")),
        target: PathBuf::from(&target),
    };
    let outcome = match task::perform(ctx, behaviour, &task, &prompt) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let (text, structured_output) = match &outcome.answer {
        Answer::Json { value, text } => (text.clone(), structured.then(|| value.clone())),
        Answer::Prose(p) => (p.clone(), None),
        Answer::AgentError(_) | Answer::MaxTurns => {
            return fail("Error: xAI API error (500): internal error");
        }
        Answer::Api(api) => {
            let model = parsed.value("model").unwrap_or("grok-code-fast-1");
            let envelope = obj! {
                "text" => "",
                "stopReason" => "error",
                "sessionId" => util::uuid(),
                "requestId" => util::uuid(),
                "error" => obj! {
                    "message" => api.openai_message(model),
                    "status" => api.status().map_or(J::Null, |s| J::from(u32::from(s))),
                    "code" => api.openai_code(model).map_or(J::Null, J::from),
                },
            };
            util::out_line(&envelope.render());
            return ExitCode::from(1);
        }
    };
    let mut envelope = obj! {
        "text" => &text,
        "stopReason" => "end_turn",
        "sessionId" => util::uuid(),
        "requestId" => util::uuid(),
        "thought" => "",
        "num_turns" => 2,
        "usage" => obj! {
            "input_tokens" => 18,
            "cache_read_input_tokens" => 4,
            "output_tokens" => 14,
            "total_tokens" => 36,
        },
        "total_cost_usd" => 0.000276,
        "total_cost_usd_ticks" => 2760,
        "modelUsage" => J::Obj(vec![(
            parsed.value("model").unwrap_or("grok-code-fast-1").to_owned(),
            obj! { "inputTokens" => 22, "outputTokens" => 14 },
        )]),
    };
    if let Some(s) = structured_output {
        envelope.push("structuredOutput", s);
    }
    let mut stdout = envelope.render();
    stdout.push('\n');
    util::out(&task::raw_bytes(&stdout));
    ExitCode::SUCCESS
}
