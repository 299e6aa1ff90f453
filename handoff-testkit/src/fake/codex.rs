//! OpenAI Codex CLI 0.171.0 (`codex`), `codex exec` only.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::Ctx;
use super::args::{self, Kind, Opt, ParseError, Parsed, opt};
use super::codex_store;
use super::json::{J, obj};
use super::receiver;
use super::task::{self, Answer, Outcome, Task};
use super::util;

use crate::fixtures::{
    CODEX_EXEC_HELP as EXEC_HELP, CODEX_EXEC_RESUME_HELP as EXEC_RESUME_HELP, CODEX_HELP as HELP,
    CODEX_VERSION as VERSION,
};

const DEFAULT_MODEL: &str = "fake-model";
/// What a failed model call reports (`agent-error`).
const API_ERROR: &str = "unexpected status 500 Internal Server Error: internal error";

/// Configuration keys `--strict-config` accepts (plus the prefixes below).
const KNOWN_KEYS: &[&str] = &[
    "approval_policy",
    "project_doc_max_bytes",
    "project_doc_fallback_filenames",
    "project_root_markers",
    "sandbox_workspace_write.network_access",
    "web_search",
    "model_reasoning_effort",
    "model_provider",
    "model",
    "default_permissions",
    "sandbox_mode",
];
const KNOWN_PREFIXES: &[&str] = &[
    "model_providers.",
    "mcp_servers.",
    "features.",
    "permissions.",
];

const TOP_OPTS: &[Opt] = &[
    opt("config", &["-c", "--config"], Kind::Value),
    opt("enable", &["--enable"], Kind::Value),
    opt("disable", &["--disable"], Kind::Value),
    opt("strict-config", &["--strict-config"], Kind::Flag),
    opt("model", &["-m", "--model"], Kind::Value),
    opt("profile", &["-p", "--profile"], Kind::Value),
    opt("sandbox", &["-s", "--sandbox"], Kind::Value),
    opt("cd", &["-C", "--cd"], Kind::Value),
    opt("help", &["-h", "--help"], Kind::Flag),
    opt("version", &["-V", "--version"], Kind::Flag),
];

const EXEC_OPTS: &[Opt] = &[
    opt("config", &["-c", "--config"], Kind::Value),
    opt("enable", &["--enable"], Kind::Value),
    opt("disable", &["--disable"], Kind::Value),
    opt("remote", &["--remote"], Kind::Value),
    opt(
        "remote-auth-token-env",
        &["--remote-auth-token-env"],
        Kind::Value,
    ),
    opt("strict-config", &["--strict-config"], Kind::Flag),
    opt("image", &["-i", "--image"], Kind::Value),
    opt("model", &["-m", "--model"], Kind::Value),
    opt("oss", &["--oss"], Kind::Flag),
    opt("local-provider", &["--local-provider"], Kind::Value),
    opt("profile", &["-p", "--profile"], Kind::Value),
    opt("sandbox", &["-s", "--sandbox"], Kind::Value),
    opt("approve-for-me", &["--approve-for-me"], Kind::Flag),
    opt(
        "dangerously-bypass-approvals-and-sandbox",
        &["--dangerously-bypass-approvals-and-sandbox"],
        Kind::Flag,
    ),
    opt(
        "dangerously-bypass-hook-trust",
        &["--dangerously-bypass-hook-trust"],
        Kind::Flag,
    ),
    opt("cd", &["-C", "--cd"], Kind::Value),
    opt("worktree", &["--worktree"], Kind::Flag),
    opt("add-dir", &["--add-dir"], Kind::Value),
    opt("thread-source", &["--thread-source"], Kind::Value),
    opt(
        "cyber-access-program",
        &["--cyber-access-program"],
        Kind::Value,
    ),
    opt(
        "skip-git-repo-check",
        &["--skip-git-repo-check"],
        Kind::Flag,
    ),
    opt("trust", &["--trust"], Kind::Flag),
    opt("ephemeral", &["--ephemeral"], Kind::Flag),
    opt("ignore-user-config", &["--ignore-user-config"], Kind::Flag),
    opt("ignore-rules", &["--ignore-rules"], Kind::Flag),
    opt("output-schema", &["--output-schema"], Kind::Value),
    opt("color", &["--color"], Kind::Value),
    opt("json", &["--json"], Kind::Flag),
    opt(
        "output-last-message",
        &["-o", "--output-last-message"],
        Kind::Value,
    ),
    opt("help", &["-h", "--help"], Kind::Flag),
    opt("version", &["-V", "--version"], Kind::Flag),
];

/// `codex exec resume`: no `--sandbox`, `--cd`, `--profile`, `--color`, `--add-dir` or `--oss`.
const EXEC_RESUME_OPTS: &[Opt] = &[
    opt("config", &["-c", "--config"], Kind::Value),
    opt("last", &["--last"], Kind::Flag),
    opt("all", &["--all"], Kind::Flag),
    opt("enable", &["--enable"], Kind::Value),
    opt("disable", &["--disable"], Kind::Value),
    opt("image", &["-i", "--image"], Kind::Value),
    opt("remote", &["--remote"], Kind::Value),
    opt(
        "remote-auth-token-env",
        &["--remote-auth-token-env"],
        Kind::Value,
    ),
    opt("strict-config", &["--strict-config"], Kind::Flag),
    opt("model", &["-m", "--model"], Kind::Value),
    opt(
        "dangerously-bypass-approvals-and-sandbox",
        &["--dangerously-bypass-approvals-and-sandbox"],
        Kind::Flag,
    ),
    opt(
        "dangerously-bypass-hook-trust",
        &["--dangerously-bypass-hook-trust"],
        Kind::Flag,
    ),
    opt("worktree", &["--worktree"], Kind::Flag),
    opt("thread-source", &["--thread-source"], Kind::Value),
    opt(
        "cyber-access-program",
        &["--cyber-access-program"],
        Kind::Value,
    ),
    opt(
        "skip-git-repo-check",
        &["--skip-git-repo-check"],
        Kind::Flag,
    ),
    opt("trust", &["--trust"], Kind::Flag),
    opt("ephemeral", &["--ephemeral"], Kind::Flag),
    opt("ignore-user-config", &["--ignore-user-config"], Kind::Flag),
    opt("ignore-rules", &["--ignore-rules"], Kind::Flag),
    opt("output-schema", &["--output-schema"], Kind::Value),
    opt("json", &["--json"], Kind::Flag),
    opt(
        "output-last-message",
        &["-o", "--output-last-message"],
        Kind::Value,
    ),
    opt("help", &["-h", "--help"], Kind::Flag),
];

const EXEC_RESUME_USAGE: &str = "Usage: codex exec resume [OPTIONS] [SESSION_ID] [PROMPT]";
const EXEC_USAGE: &str =
    "Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> [ARGS]";
const TOP_USAGE: &str = "Usage: codex [OPTIONS] [PROMPT]\n       codex [OPTIONS] <COMMAND> [ARGS]";

/// A clap-style usage error (exit 2).
fn clap_error(err: ParseError, usage: &str) -> ExitCode {
    let message = match err {
        ParseError::Unknown(arg) => format!(
            "error: unexpected argument '{arg}' found\n\n  tip: to pass '{arg}' as a value, use '-- {arg}'\n\n{usage}\n\nFor more information, try '--help'."
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

/// Runs `codex ARGS…`.
pub(crate) fn run(ctx: &mut Ctx) -> ExitCode {
    let top = match args::parse(&ctx.args, TOP_OPTS, true) {
        Ok(p) => p,
        Err(e) => return clap_error(e, TOP_USAGE),
    };
    let Some(command) = top.rest.first().cloned() else {
        if top.has("version") {
            util::out_line(&format!("codex-cli {}", ctx.version(VERSION)));
            return ExitCode::SUCCESS;
        }
        if top.has("help") {
            return ctx.print_help(HELP, "--strict-config");
        }
        return fail("fake-agent: interactive codex sessions are not imitated; use `codex exec`");
    };
    let sub_args: Vec<String> = top.rest[1..].to_vec();
    match command.as_str() {
        "exec" | "e" => exec(ctx, &top, &sub_args),
        // `codex resume <id>`: the session must exist and belong to this directory.
        "resume" => match sub_args.iter().find(|a| !a.starts_with('-')) {
            Some(id) => resume_interactive(id),
            None => fail(
                "fake-agent: the interactive session picker is not imitated; pass a session id",
            ),
        },
        "help" => match sub_args.first().map(String::as_str) {
            Some("exec" | "e") => ctx.print_help(EXEC_HELP, "--strict-config"),
            _ => ctx.print_help(HELP, "--strict-config"),
        },
        other => fail(&format!(
            "fake-agent: `codex {other}` is not imitated by the fake"
        )),
    }
}

/// `codex resume <id>` (interactive): prints `resumed <id>: <last assistant text>` when the
/// thread's rollout exists (in any directory: Codex threads are not tied to one), else Codex's
/// error (exit 1).
fn resume_interactive(id: &str) -> ExitCode {
    match codex_store::codex_home().and_then(|h| codex_store::find(&h, id)) {
        Some(path) => {
            let last = codex_store::last_assistant_text(&codex_store::read_lines(&path));
            util::out_line(&format!("resumed {id}: {}", last.unwrap_or_default()));
            ExitCode::SUCCESS
        }
        None => fail(&format!(
            "Error: No saved session found with ID {id}. Run `codex resume` without an ID to choose from existing sessions."
        )),
    }
}

fn exec(ctx: &mut Ctx, top: &Parsed, args: &[String]) -> ExitCode {
    // `codex exec resume …`, `codex exec resume --help` and friends.
    let mut args = args.to_vec();
    let mut resuming = false;
    if let Some(i) = args.iter().position(|a| !a.starts_with('-'))
        && matches!(args[i].as_str(), "resume" | "fork" | "review" | "help")
    {
        let first = args[i].clone();
        if first == "resume" && args.iter().any(|a| a == "--help" || a == "-h") {
            return ctx.print_help(EXEC_RESUME_HELP, "--strict-config");
        }
        if first == "help" {
            return ctx.print_help(EXEC_HELP, "--strict-config");
        }
        if first != "resume" {
            return fail(&format!(
                "fake-agent: `codex exec {first}` is not imitated by the fake"
            ));
        }
        args.remove(i);
        resuming = true;
    }
    let (opts, usage) = if resuming {
        (EXEC_RESUME_OPTS, EXEC_RESUME_USAGE)
    } else {
        (EXEC_OPTS, EXEC_USAGE)
    };
    let parsed = match args::parse(&args, opts, false) {
        Ok(p) => p,
        Err(e) => return clap_error(e, usage),
    };
    if parsed.has("help") {
        return ctx.print_help(EXEC_HELP, "--strict-config");
    }
    if parsed.has("version") {
        util::out_line(&format!("codex-cli-exec {}", ctx.version(VERSION)));
        return ExitCode::SUCCESS;
    }
    // `exec resume <SESSION_ID> [PROMPT]`, `exec [PROMPT]`.
    let mut positional = parsed.positional.clone();
    let resume_id = if resuming {
        if parsed.has("last") {
            return fail("fake-agent: `codex exec resume --last` is not imitated by the fake");
        }
        if positional.is_empty() {
            return fail("Error: pass a session id or --last to `codex exec resume`");
        }
        Some(positional.remove(0))
    } else {
        None
    };
    if positional.len() > 1 {
        return clap_error(ParseError::Unknown(positional[1].clone()), usage);
    }
    let sandbox = parsed
        .value("sandbox")
        .or_else(|| top.value("sandbox"))
        .unwrap_or("read-only")
        .to_owned();
    if !matches!(
        sandbox.as_str(),
        "read-only" | "workspace-write" | "danger-full-access"
    ) {
        util::err_line(&format!(
            "error: invalid value '{sandbox}' for '--sandbox <SANDBOX_MODE>'\n  [possible values: read-only, workspace-write, danger-full-access]\n\nFor more information, try '--help'."
        ));
        return ExitCode::from(2);
    }

    // Configuration overrides are checked before anything else is read.
    let overrides: Vec<&String> = top
        .values("config")
        .iter()
        .chain(parsed.values("config"))
        .collect();
    let mut config_model = None;
    let mut config_provider = None;
    let mut config_sandbox = None;
    for raw in &overrides {
        let Some((key, value)) = raw.split_once('=') else {
            return fail(&format!("Error: Invalid override (missing '='): {raw}"));
        };
        let key = key.trim();
        let value = value.trim().trim_matches('"').to_owned();
        match key {
            "model" => config_model = Some(value),
            "model_provider" => config_provider = Some(value),
            "sandbox_mode" => config_sandbox = Some(value),
            _ => {}
        }
        let strict = parsed.has("strict-config") || top.has("strict-config");
        if strict && !known_key(key) {
            return fail(&format!("Error: unknown configuration field `{key}`"));
        }
    }

    // A permission profile selected with `default_permissions` (and no `--sandbox`) decides
    // the filesystem policy: one that extends `:workspace` may write.
    let explicit_sandbox = parsed.value("sandbox").or_else(|| top.value("sandbox"));
    let profile_writes = overrides.iter().any(|o| {
        o.split_once('=').is_some_and(|(k, v)| {
            k.trim().starts_with("permissions.")
                && k.trim().ends_with(".extends")
                && v.trim().trim_matches('"') == ":workspace"
        })
    });
    let sandbox = match (explicit_sandbox, config_sandbox) {
        (None, Some(mode)) => mode,
        (None, None) if profile_writes => "workspace-write".to_owned(),
        _ => sandbox,
    };
    if !matches!(
        sandbox.as_str(),
        "read-only" | "workspace-write" | "danger-full-access"
    ) {
        return fail(&format!(
            "Error: unknown variant `{sandbox}`, expected one of `read-only`, `workspace-write`, `danger-full-access`\nin `sandbox_mode`"
        ));
    }

    let cwd = std::env::current_dir().unwrap_or_default();
    let target = match parsed.value("cd").or_else(|| top.value("cd")) {
        Some(dir) => {
            let dir = cwd.join(dir);
            if !dir.is_dir() {
                return fail(&format!(
                    "Error: failed to use --cd {}: No such file or directory (os error 2)",
                    dir.display()
                ));
            }
            dir
        }
        None => cwd,
    };
    if !parsed.has("skip-git-repo-check") && !inside_git_repo(&target) {
        return fail("Not inside a trusted directory and --skip-git-repo-check was not specified.");
    }
    if let Some(schema) = parsed.value("output-schema") {
        let path = Path::new(schema);
        let checked = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                serde_json::from_str::<serde_json::Value>(&text).map_err(|e| e.to_string())
            });
        if let Err(e) = checked {
            return fail(&format!(
                "Error: failed to load output schema {}: {e}",
                path.display()
            ));
        }
    }

    let prompt = match positional.first() {
        Some(p) if p != "-" => p.clone(),
        _ => String::from_utf8_lossy(&ctx.read_stdin()).into_owned(),
    };
    if prompt.trim().is_empty() {
        return fail("No prompt provided via stdin.");
    }
    let behaviour = match task::behaviour(&ctx.settings) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let task = Task {
        exe: ctx.exe.name(),
        mode: task::mode_from_prompt(&prompt),
        writable: sandbox != "read-only",
        target,
    };
    let model = parsed
        .value("model")
        .or_else(|| top.value("model"))
        .map(str::to_owned)
        .or(config_model)
        .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
    // Without `--ephemeral` the session is persisted: a continuation receiver; so is a resumed
    // thread.
    let (thread_id, outcome) = if resuming || !parsed.has("ephemeral") {
        let store = Store {
            persist: !parsed.has("ephemeral"),
            model: &model,
            sandbox: &sandbox,
            provider: config_provider.as_deref().unwrap_or("openai"),
        };
        match receive(ctx, behaviour, &task, &prompt, resume_id.as_deref(), &store) {
            Ok(r) => r,
            Err(code) => return code,
        }
    } else {
        match task::perform(ctx, behaviour, &task, &prompt) {
            Ok(o) => (receiver::codex_thread_id(), o),
            Err(code) => return code,
        }
    };
    let last_message = parsed.value("output-last-message").map(PathBuf::from);
    if parsed.has("json") {
        emit_json(&outcome, &model, &thread_id, last_message.as_deref())
    } else {
        emit_human(
            &outcome,
            &task,
            &model,
            &sandbox,
            &prompt,
            last_message.as_deref(),
        )
    }
}

/// How a receiver's turn is recorded.
struct Store<'a> {
    persist: bool,
    model: &'a str,
    sandbox: &'a str,
    provider: &'a str,
}

/// A receiver's turn in a new thread, or in thread `resume` (unless
/// `FAKE_AGENT_RECEIVER_FRESH=1`): the prompt is recorded in the rollout (after
/// `FAKE_AGENT_RECEIVER_DELAY_MS`), the work done, then the answer recorded. Returns the thread
/// and the outcome; a thread with no rollout is Codex's error (exit 1).
fn receive(
    ctx: &mut Ctx,
    behaviour: task::Behaviour,
    task: &Task,
    prompt: &str,
    resume: Option<&str>,
    store: &Store<'_>,
) -> Result<(String, Outcome), ExitCode> {
    let home = codex_store::codex_home();
    let resume = resume.filter(|_| !receiver::fresh(&ctx.settings));
    let (thread_id, path, new) = match resume {
        Some(id) => match home.as_deref().and_then(|h| codex_store::find(h, id)) {
            Some(path) => (id.to_owned(), Some(path), false),
            None => {
                return Err(fail(&format!(
                    "Error: thread/resume: thread/resume failed: no rollout found for thread id {id} (code -32600)"
                )));
            }
        },
        None => {
            let id = receiver::codex_thread_id();
            let path = home.as_deref().map(|h| codex_store::new_path(h, &id));
            (id, path, true)
        }
    };
    let previous = match (&path, new) {
        (Some(p), false) => codex_store::last_assistant_text(&codex_store::read_lines(p)),
        _ => None,
    };
    let cwd = receiver::canonical(&task.target)
        .to_string_lossy()
        .into_owned();
    let turn = codex_store::Turn::new(&cwd, store.model, store.sandbox, prompt);
    receiver::pause(&ctx.settings);
    let mut writer = path
        .as_deref()
        .filter(|_| store.persist)
        .map(codex_store::Writer::open);
    let report = |e: std::io::Error| {
        util::err_line(&format!(
            "fake-agent: cannot write the rollout of {thread_id}: {e}"
        ));
    };
    if let Some(w) = writer.as_mut() {
        let meta = codex_store::Meta {
            id: thread_id.clone(),
            cwd: cwd.clone(),
            cli_version: ctx.version(VERSION),
            model_provider: store.provider.to_owned(),
            git_branch: receiver::git_branch(&task.target),
        };
        let started = if new { w.start(&meta) } else { Ok(()) };
        if let Err(e) = started.and_then(|()| w.begin(&turn)) {
            report(e);
        }
    } else if store.persist {
        util::err_line("fake-agent: no session store for codex (HOME and CODEX_HOME unset)");
    }
    let reply = receiver::reply(&ctx.settings, task.exe, &thread_id, prompt, previous);
    let outcome = task::perform_receiver(ctx, behaviour, task, prompt, &thread_id, &reply)?;
    if let Some(w) = writer.as_mut() {
        let command = outcome.wrote.as_ref().map(write_command);
        if let Err(e) = w.finish(&turn, command.as_deref(), outcome.text()) {
            report(e);
        }
    }
    Ok((thread_id, outcome))
}

/// The shell command the fake "ran" to write a file.
fn write_command(w: &task::Wrote) -> String {
    format!(
        "/bin/bash -lc 'printf %s \"{}\" > {}'",
        w.content.trim_end(),
        w.abs.display()
    )
}

fn known_key(key: &str) -> bool {
    KNOWN_KEYS.contains(&key) || KNOWN_PREFIXES.iter().any(|p| key.starts_with(p))
}

fn inside_git_repo(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git").exists())
}

fn write_last_message(path: Option<&Path>, text: &str) {
    if let Some(path) = path
        && let Err(e) = std::fs::write(path, task::raw_bytes(text))
    {
        util::err_line(&format!(
            "Failed to write last message file {}: {e}",
            path.display()
        ));
    }
}

/// What a failed turn reports: the API failure's own message under `HANDOFF_FAKE_API_ERROR`,
/// else a generic failed model call.
fn failure_message(outcome: &Outcome, model: &str) -> String {
    match &outcome.answer {
        Answer::Api(api) => api.codex(model),
        _ => API_ERROR.to_owned(),
    }
}

fn emit_json(
    outcome: &Outcome,
    model: &str,
    thread_id: &str,
    last_message: Option<&Path>,
) -> ExitCode {
    let mut lines: Vec<J> = vec![
        obj! { "type" => "thread.started", "thread_id" => thread_id },
        obj! {
            "type" => "item.completed",
            "item" => obj! {
                "id" => "item_0",
                "type" => "error",
                "message" => format!("Model metadata for `{model}` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."),
            },
        },
        obj! { "type" => "turn.started" },
    ];
    let mut next_item = 1;
    if let Some(w) = &outcome.wrote {
        let command = write_command(w);
        let id = format!("item_{next_item}");
        next_item += 1;
        lines.push(obj! {
            "type" => "item.started",
            "item" => obj! {
                "id" => &id,
                "type" => "command_execution",
                "command" => &command,
                "aggregated_output" => "",
                "exit_code" => J::Null,
                "status" => "in_progress",
            },
        });
        lines.push(obj! {
            "type" => "item.completed",
            "item" => obj! {
                "id" => &id,
                "type" => "command_execution",
                "command" => &command,
                "aggregated_output" => "",
                "exit_code" => 0,
                "status" => "completed",
            },
        });
    }
    let code = match outcome.text() {
        Some(text) => {
            lines.push(obj! {
                "type" => "item.completed",
                "item" => obj! {
                    "id" => format!("item_{next_item}"),
                    "type" => "agent_message",
                    "text" => task::lossy_text(text),
                },
            });
            lines.push(obj! {
                "type" => "turn.completed",
                "usage" => obj! {
                    "input_tokens" => 22,
                    "cached_input_tokens" => 4,
                    "cache_write_input_tokens" => 0,
                    "output_tokens" => 14,
                    "reasoning_output_tokens" => 0,
                },
            });
            write_last_message(last_message, text);
            ExitCode::SUCCESS
        }
        None => {
            let message = failure_message(outcome, model);
            lines.push(obj! { "type" => "error", "message" => &message });
            lines.push(obj! {
                "type" => "turn.failed",
                "error" => obj! { "message" => message },
            });
            ExitCode::from(1)
        }
    };
    let mut stdout = String::new();
    for line in &lines {
        stdout.push_str(&line.render());
        stdout.push('\n');
    }
    util::out(stdout.as_bytes());
    code
}

fn emit_human(
    outcome: &Outcome,
    task: &Task,
    model: &str,
    sandbox: &str,
    prompt: &str,
    last_message: Option<&Path>,
) -> ExitCode {
    util::err_line(&format!(
        "OpenAI Codex v{VERSION} (research preview)\n--------\nworkdir: {}\nmodel: {model}\nprovider: openai\napproval: never\nsandbox: {sandbox}\nreasoning effort: none\nreasoning summaries: auto\n--------\nuser\n{}",
        task.target.display(),
        prompt.trim_end()
    ));
    match outcome.text() {
        Some(text) => {
            util::err_line(&format!(
                "codex\n{}\ntokens used\n36",
                task::lossy_text(text)
            ));
            let mut bytes = task::raw_bytes(text);
            bytes.push(b'\n');
            util::out(&bytes);
            write_last_message(last_message, text);
            ExitCode::SUCCESS
        }
        None => {
            util::err_line(&format!("ERROR: {}", failure_message(outcome, model)));
            ExitCode::from(1)
        }
    }
}
