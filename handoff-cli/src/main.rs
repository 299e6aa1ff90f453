//! The `handoff` command: delegate a bounded coding task, or ask for read-only advice, on another
//! agent CLI, and get back one normalized result JSON with a documented exit code.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

mod args;
mod attribute;
mod checkpoint;
mod continuation;
mod docs;
mod doctor;
mod fingerprint;
mod hook;
mod jobs;
mod live;
mod log;
mod mcp;
mod nested;
mod note;
mod panel;
mod remote;
mod run_input;

use args::{Cli, Command, ConfigCommand};
use clap::Parser;
use handoff_core::{
    Config, Engine, EngineOptions, LoadedConfig, MAX_INSTRUCTIONS_BYTES, RunInput, Verb,
};
use tokio::sync::watch;

/// The user configuration, loaded once per process. An unusable file is an error every verb
/// reports (as a rejection for runs).
pub(crate) fn load_config() -> Result<LoadedConfig, String> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let loaded = Config::load(&env).map_err(|e| format!("configuration error: {e}"))?;
    checked(loaded)
}

fn checked(loaded: LoadedConfig) -> Result<LoadedConfig, String> {
    if let Err(e) = loaded
        .config
        .check_against(&handoff_adapters::default_registry())
    {
        let file = loaded.path.as_ref().map_or("", |p| p.as_str());
        return Err(format!("configuration error: {file}: {e}"));
    }
    for w in &loaded.warnings {
        let _ = writeln!(std::io::stderr(), "handoff: warning: {w}");
    }
    Ok(loaded)
}

fn engine(config: Option<LoadedConfig>) -> Engine {
    engine_with(config, None)
}

pub(crate) fn engine_with(
    config: Option<LoadedConfig>,
    progress: Option<handoff_core::ProgressHook>,
) -> Engine {
    let mut options = EngineOptions::from_process();
    options.progress = progress;
    // Root runs are recorded in the worktree's task; the store opens only when one is.
    options.task_store = Some(task_store());
    options.handoff_exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| camino::Utf8PathBuf::from_path_buf(p).ok());
    options.import_in_background = true;
    if let Some(c) = config {
        options.config = c.config;
        options.config_path = c.path;
    }
    Engine::new(
        handoff_adapters::default_registry(),
        Arc::new(handoff_git::GitWorkspace::new()),
        options,
    )
}

fn verb_of(command: &Command) -> Option<Verb> {
    match command {
        Command::Run(_) => Some(Verb::Run),
        Command::RunWithAdvice(_) => Some(Verb::RunWithAdvice),
        Command::Advice(_) => Some(Verb::Advice),
        Command::Capabilities(_)
        | Command::Config(_)
        | Command::Fingerprint(_)
        | Command::Note(_)
        | Command::Checkpoint(_)
        | Command::Log(_)
        | Command::Continue(_)
        | Command::Completions { .. }
        | Command::Man
        | Command::Doctor(_)
        | Command::Mcp
        | Command::Jobs(_)
        | Command::Wait(_)
        | Command::Result(_)
        | Command::Cancel(_)
        | Command::Hook(_)
        | Command::Attribute(_) => None,
    }
}

fn read_stdin() -> Result<Vec<u8>, String> {
    LIFELINE.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_INSTRUCTIONS_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read instructions from stdin: {e}"))?;
    Ok(buf)
}

/// Opens the default task store, reading its location from the environment.
pub(crate) fn open_store() -> Result<handoff_store::SqliteStore, String> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    handoff_store::SqliteStore::open_default(&env).map_err(|e| e.to_string())
}

/// The secrets handoff knows from its environment and configuration, to mask in what a command
/// prints.
pub(crate) fn known_secrets() -> Vec<String> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let config = load_config().map(|c| c.config).unwrap_or_default();
    handoff_core::known_secrets(&env, &config)
}

/// The default task store, opened when first needed (a refused request leaves none behind).
pub(crate) fn task_store() -> handoff_core::SharedTaskStore {
    handoff_core::SharedTaskStore::lazy(|| {
        open_store().map(|s| Arc::new(s) as Arc<dyn handoff_core::TaskStore>)
    })
}

/// The variable that arms the lifeline: `HANDOFF_LIFELINE=stdin:<pid>` says standard input is a
/// pipe from process `<pid>`, this one's parent (the MCP server for its jobs), never written
/// to: when it reaches its end, that process is gone and the work is cancelled as by SIGTERM.
/// A process whose parent is not `<pid>` (anything the job starts that inherits the variable)
/// ignores it.
const LIFELINE_ENV: &str = "HANDOFF_LIFELINE";

/// Whether standard input is still the lifeline (reading instructions or a note from it
/// disarms it).
static LIFELINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A receiver that turns `true` on the first SIGINT or SIGTERM, or when the lifeline ends. From
/// then on those signals no longer kill the process: whoever holds the receiver stops its work
/// and exits.
pub(crate) fn cancel_on_signals() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    let tx = Arc::new(tx);
    if LIFELINE.swap(false, std::sync::atomic::Ordering::SeqCst) {
        let tx = Arc::clone(&tx);
        // A plain thread, not a runtime task: a read that never ends must not hold up exit.
        let _ = std::thread::Builder::new()
            .name("lifeline".into())
            .spawn(move || {
                let mut buf = [0u8; 512];
                let mut stdin = std::io::stdin();
                while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
                let _ = tx.send(true);
            });
    }
    use tokio::signal::unix::{SignalKind, signal};
    // Caught from here on; a job's supervisor starts a run with both blocked, so that one sent
    // before now waits for this instead of killing the run without a result.
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return rx;
    };
    handoff_core::unblock_stop_signals();
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        let _ = tx.send(true);
        // Keep the sender alive so the receivers see the cancellation.
        std::future::pending::<()>().await;
    });
    rx
}

pub(crate) fn emit(line: &str, message: Option<&str>, stderr_tail: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
    let mut err = std::io::stderr().lock();
    // Both may carry what the agent wrote: nothing in them may steer the terminal.
    if let Some(m) = message {
        let _ = writeln!(err, "handoff: {}", handoff_core::printable(m, true));
    }
    if !stderr_tail.trim().is_empty() {
        let _ = writeln!(
            err,
            "{}",
            handoff_core::printable(stderr_tail.trim_end(), true)
        );
    }
}

/// A run here, or on the host `on` names (`--on`): its result printed, its exit code.
pub(crate) async fn run_delegation(input: RunInput, quiet: bool, on: Option<&str>) -> u8 {
    let rx = cancel_on_signals();
    let config = match load_config() {
        Ok(c) => c,
        Err(message) => return rejected_early(input, message).await,
    };
    let live = live::wanted(quiet).then(|| {
        live::Live::start(format!(
            "{} {}{}",
            input.harness.as_deref().unwrap_or("?"),
            input.mode.as_deref().unwrap_or("advice"),
            on.map(|h| format!(" on {h}")).unwrap_or_default()
        ))
    });
    let (live, hook) = live.map_or((None, None), |(l, h)| (Some(l), Some(h)));
    let outcome = match on {
        // The host reports no progress: the status line only counts the time.
        Some(on) => remote::run_on(input, on, config, rx).await,
        None => engine_with(Some(config), hook).run(input, rx).await,
    };
    if let Some(live) = live {
        live.finish().await;
    }
    if let Some(warning) = &outcome.record_warning {
        let _ = writeln!(std::io::stderr(), "handoff: warning: {warning}");
    }
    let r = &outcome.result;
    // On a terminal, a human summary; otherwise only what went wrong.
    let message = if live::wanted(quiet) {
        Some(handoff_core::summary::run_summary(r))
    } else {
        r.diagnostics.message.clone()
    };
    emit(
        &outcome.line,
        message.as_deref(),
        &r.diagnostics.provider_stderr,
    );
    outcome.exit_code
}

pub(crate) async fn rejected_early(input: RunInput, message: String) -> u8 {
    // Reuse the engine's rendering so an early rejection has the same shape as any result.
    let mut input = input;
    input.result = None;
    input.instructions = None;
    let outcome = engine(None).reject(input, message).await;
    emit(
        &outcome.line,
        outcome.result.diagnostics.message.as_deref(),
        "",
    );
    outcome.exit_code
}

fn config_command(cmd: ConfigCommand) -> u8 {
    let mut out = std::io::stdout().lock();
    match cmd {
        ConfigCommand::Show { json } => match load_config() {
            Ok(loaded) => {
                let masked = loaded.config.masked();
                if json {
                    let v = serde_json::json!({
                        "file": loaded.path.as_ref().map(|p| p.to_string()),
                        "config": masked,
                    });
                    let _ = writeln!(out, "{v}");
                } else {
                    let _ = writeln!(
                        out,
                        "# {}",
                        loaded
                            .path
                            .as_ref()
                            .map_or("no configuration file: defaults".to_owned(), |p| p
                                .to_string())
                    );
                    let _ = write!(out, "{}", toml::to_string(&masked).unwrap_or_default());
                }
                0
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "handoff: {e}");
                handoff_core::exit::USAGE
            }
        },
        ConfigCommand::Check { file } => {
            let result = match file {
                Some(f) => Config::load_file(camino::Utf8Path::new(&f))
                    .map_err(|e| format!("configuration error: {e}"))
                    .and_then(checked),
                None => load_config(),
            };
            match result {
                Ok(loaded) => {
                    let _ = writeln!(
                        out,
                        "{}: ok",
                        loaded
                            .path
                            .map_or("no configuration file".to_owned(), |p| p.to_string())
                    );
                    0
                }
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "handoff: {e}");
                    handoff_core::exit::USAGE
                }
            }
        }
    }
}

async fn capabilities(json: bool) -> u8 {
    let config = match load_config() {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "handoff: {e}");
            return handoff_core::exit::USAGE;
        }
    };
    let caps = engine(Some(config)).capabilities().await;
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(out, "{}", serde_json::to_string(&caps).unwrap_or_default());
    } else {
        let _ = writeln!(out, "handoff {}", caps.driver_version);
        for line in handoff_core::summary::agent_lines(&caps) {
            let _ = writeln!(out, "{line}");
        }
    }
    0
}

/// The worktrees this command works on (its `--cwd`, and where it runs) are where an agent
/// writes: no program handoff starts, itself or through a library, comes from inside them.
fn guard_programs() {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(cwd) = handoff_core::flag_value(&args, "--cwd") {
        handoff_core::guard_worktrees_of(camino::Utf8Path::new(&cwd));
    }
    if let Ok(here) = std::env::current_dir()
        && let Ok(here) = camino::Utf8PathBuf::from_path_buf(here)
    {
        handoff_core::guard_worktrees_of(&here);
    }
    // SAFETY: first thing in `main`, before the runtime or any other thread starts.
    #[allow(unsafe_code)]
    unsafe {
        handoff_core::sanitize_process_path();
    }
}

/// Runs one of handoff's own helper processes (`__import`, `__host`, `__job`) to its exit code
/// on a runtime of one thread.
fn on_one_thread(work: impl std::future::Future<Output = u8>) -> ExitCode {
    let code = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_or(handoff_core::exit::USAGE, |rt| rt.block_on(work));
    ExitCode::from(code)
}

fn main() -> ExitCode {
    // `handoff __import`: carries a finished sandboxed run's state into the user's store. Its
    // lock comes as descriptor 3, taken before anything else opens one.
    if let [_, verb] = &std::env::args_os().collect::<Vec<_>>()[..]
        && verb == handoff_core::state_import::IMPORT_VERB
    {
        let lock = handoff_core::state_import::take_lock();
        let registry = handoff_adapters::default_registry();
        return on_one_thread(handoff_core::state_import::serve(&registry, lock));
    }
    // A `StopFailure` hook must be gone before Claude Code is: nothing comes before it.
    if hook::hand_over_at_start() {
        return ExitCode::SUCCESS;
    }
    handoff_core::allocator::return_large_blocks();
    // `handoff __reap …`: this process is the reaper of an agent (never returns then).
    handoff_core::reaper::main_if_reaper();
    guard_programs();
    // `handoff __host`: this machine is another's host; one request, one reply.
    if let [_, verb] = &std::env::args_os().collect::<Vec<_>>()[..]
        && verb == remote::HOST_VERB
    {
        return on_one_thread(remote::serve());
    }
    // `handoff __job <id> <dir>`: the supervisor of a background job.
    if let [_, verb, id, dir] = &std::env::args_os().collect::<Vec<_>>()[..]
        && verb == handoff_core::JOB_VERB
    {
        let (Some(id), Some(dir)) = (id.to_str(), dir.to_str()) else {
            return ExitCode::from(handoff_core::exit::USAGE);
        };
        return on_one_thread(jobs::supervise(id, dir));
    }
    // Arguments are text: one that is not UTF-8 is refused like any malformed argument (with
    // a `rejected` result for a run), never a panic.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let not_text = raw.iter().position(|a| a.to_str().is_none());
    let args: Vec<String> = raw
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "handoff: cannot start: {e}");
            return ExitCode::from(handoff_core::exit::USAGE);
        }
    };
    if let Some(n) = not_text {
        let message = format!("argument {n} is not valid UTF-8: {:?}", args[n]);
        return match run_input::salvage(&args) {
            Some(input) => ExitCode::from(runtime.block_on(rejected_early(input, message))),
            None => {
                let _ = writeln!(std::io::stderr(), "handoff: {message}");
                ExitCode::from(handoff_core::exit::USAGE)
            }
        };
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let first = e
                .to_string()
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ")
                .to_owned();
            return match run_input::salvage(&args) {
                Some(input) => ExitCode::from(runtime.block_on(rejected_early(input, first))),
                None => {
                    let _ = e.print();
                    ExitCode::from(handoff_core::exit::USAGE)
                }
            };
        }
    };
    let parent = nix::unistd::getppid().as_raw().to_string();
    if std::env::var(LIFELINE_ENV).is_ok_and(|v| v.strip_prefix("stdin:") == Some(parent.as_str()))
    {
        // `--note-file -` reads standard input itself: no lifeline then.
        let note_on_stdin = jobs::note_from_stdin(&args);
        LIFELINE.store(!note_on_stdin, std::sync::atomic::Ordering::SeqCst);
    }
    let code = runtime.block_on(async {
        match (verb_of(&cli.command), cli.command) {
            (_, Command::Capabilities(c)) => match &c.on {
                Some(on) => remote::capabilities_on(on, c.json).await,
                None => capabilities(c.json).await,
            },
            (_, Command::Config(c)) => config_command(c),
            (_, Command::Fingerprint(f)) => fingerprint::main(f).await,
            (_, Command::Note(n)) => note::main(n),
            (_, Command::Checkpoint(c)) => checkpoint::main(c),
            (_, Command::Log(l)) => log::main(l),
            (_, Command::Completions { shell }) => docs::completions::<Cli>(shell),
            (_, Command::Man) => docs::man::<Cli>(),
            (_, Command::Doctor(d)) => doctor::main(d, load_config()).await,
            (_, Command::Mcp) => mcp::main().await,
            (_, Command::Jobs(j)) => jobs::list(j),
            (_, Command::Wait(j)) => jobs::wait(j).await,
            (_, Command::Result(j)) => jobs::result(j),
            (_, Command::Cancel(j)) => jobs::cancel(j),
            (_, Command::Hook(h)) => hook::main(h),
            (_, Command::Continue(c)) if c.detach => {
                let stdin = jobs::note_from_stdin(&args).then(read_stdin).transpose();
                match stdin {
                    Ok(stdin) => jobs::detach("continue", jobs::after_verb(&args), stdin, false),
                    Err(message) => {
                        let _ = writeln!(std::io::stderr(), "handoff: {message}");
                        handoff_core::exit::USAGE
                    }
                }
            }
            (_, Command::Continue(c)) => {
                let receiver =
                    c.to.as_deref()
                        .or(c.destination.as_deref())
                        .unwrap_or_default();
                let live = live::wanted(c.quiet).then(|| {
                    live::Live::start(format!("{receiver} {} (receiver)", c.role.as_str()))
                });
                let (live, hook) = live.map_or((None, None), |(l, h)| (Some(l), Some(h)));
                let engine = load_config().map(|cfg| engine_with(Some(cfg), hook));
                continuation::main(c, engine, live).await
            }
            (_, Command::Attribute(a)) => attribute::main(a).await,
            (Some(verb), Command::Run(a) | Command::RunWithAdvice(a) | Command::Advice(a)) => {
                let context = std::env::var(handoff_core::CONTEXT_ENV)
                    .ok()
                    .filter(|v| !v.is_empty());
                let quiet = a.quiet;
                let quorum = a.quorum.clone();
                let (detach, json, on) = (a.detach, a.json, a.on.clone());
                match run_input::input_of(verb, a) {
                    Ok(input) if on.is_some() && !detach => match context {
                        Some(_) => {
                            rejected_early(input, "--on is not accepted inside a worker".into())
                                .await
                        }
                        None if panel::wanted(&input, quorum.as_deref()) => {
                            rejected_early(input, "--on takes one agent, not a panel".into()).await
                        }
                        None => run_delegation(input, quiet, on.as_deref()).await,
                    },
                    Ok(input) if detach => match context {
                        Some(_) => jobs::refuse_inside_worker(),
                        None => jobs::detached(verb, input, &args, quorum.as_deref(), json).await,
                    },
                    Ok(input) => match context {
                        Some(ctx) => nested::main(input, &ctx).await,
                        None if panel::wanted(&input, quorum.as_deref()) => {
                            let _ = handoff_core::adopt_orphans();
                            panel::main(input, quorum, load_config(), quiet).await
                        }
                        None => {
                            // Workers that detach (double fork, setsid) stay descendants of
                            // this root, so the lease's ancestry check still finds it.
                            let _ = handoff_core::adopt_orphans();
                            run_delegation(input, quiet, None).await
                        }
                    },
                    Err(failed) => {
                        let (input, message) = *failed;
                        rejected_early(input, message).await
                    }
                }
            }
            (None, _) => handoff_core::exit::USAGE,
        }
    });
    ExitCode::from(code)
}
