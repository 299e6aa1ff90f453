//! `handoff hook <event>`: what Claude Code's hooks run. `claude-stop-failure` (a turn ended on
//! an API error) moves the task or says what would, as `[failover]` configures;
//! `claude-session-start` tells the person where the task went; `claude-prompt-submit` stops
//! a prompt in a worktree whose task another agent took over on a limit. A hook never fails
//! Claude Code: each exits 0, problems go to stderr. The deciding is the library's
//! (`handoff_continue::limit`).

use std::io::{Read, Write};

use camino::{Utf8Path, Utf8PathBuf};
use clap::{Args, ValueEnum};
use handoff_continue::limit::{
    LimitPlan, NoticeFile, NoticeKind, Notices, StopFailure, plan, worktree_root,
};
use serde_json::json;

/// Largest hook payload read.
const MAX_PAYLOAD: u64 = 1 << 20;

#[derive(Debug, Args)]
pub struct HookArgs {
    /// The hook event.
    #[arg(value_enum)]
    pub event: HookEvent,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum HookEvent {
    /// Claude Code's `StopFailure`: a turn ended on an API error.
    #[value(name = "claude-stop-failure")]
    StopFailure,
    /// Claude Code's `SessionStart`: tells the person where a task went.
    #[value(name = "claude-session-start")]
    SessionStart,
    /// Claude Code's `UserPromptSubmit`: stops a prompt while another agent holds the task.
    #[value(name = "claude-prompt-submit")]
    PromptSubmit,
}

fn warn(message: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "handoff hook: {}",
        handoff_core::printable(message, true)
    );
}

/// Set in the process a `StopFailure` hook hands its work to (see [`hand_over`]).
const WORKER_ENV: &str = "HANDOFF_HOOK_WORKER";
/// The Claude Code process the hook ran under, for that worker.
const SOURCE_ENV: &str = "HANDOFF_HOOK_SOURCE_PID";

fn read_stdin() -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = std::io::stdin().take(MAX_PAYLOAD).read_to_end(&mut bytes);
    bytes
}

/// The payload's `cwd`, as the worktree holding it.
fn payload() -> Option<(serde_json::Value, Utf8PathBuf)> {
    parse(&read_stdin())
}

fn parse(bytes: &[u8]) -> Option<(serde_json::Value, Utf8PathBuf)> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let cwd = value.get("cwd")?.as_str()?.to_owned();
    let root = worktree_root(Utf8Path::new(&cwd))?;
    Some((value, root))
}

fn notices(store: &handoff_store::SqliteStore) -> Notices {
    Notices::new(store.sibling_dir("notices"))
}

pub fn main(args: HookArgs) -> u8 {
    match args.event {
        HookEvent::StopFailure => stop_failure(),
        HookEvent::SessionStart => session_start(),
        HookEvent::PromptSubmit => prompt_submit(),
    }
    handoff_core::exit::OK
}

/// Whether this process is a `StopFailure` hook that must hand itself over: `hook
/// claude-stop-failure`, not yet the worker it hands over to.
fn is_first_stop_failure() -> bool {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    args.len() == 3
        && args[1] == "hook"
        && args[2] == "claude-stop-failure"
        && std::env::var_os(WORKER_ENV).is_none()
}

/// The first thing `main` does. Claude Code does not wait for a `StopFailure` hook once its
/// turn is over (`claude -p` exits and its hooks die with it), so the hook hands its standard
/// input, unread, to a copy of itself in a new session and returns at once: no configuration,
/// no program lookup, no runtime, not even the payload's arrival before that. The copy reads
/// the payload, says on the hook's standard error when it is not one (Claude Code shows that
/// while it still listens), then lets go of it, decides and starts the move. Returns whether
/// this process was such a hook (then it exits 0).
pub fn hand_over_at_start() -> bool {
    if !is_first_stop_failure() {
        return false;
    }
    hand_over();
    true
}

fn hand_over() {
    use std::os::unix::process::CommandExt;
    let Ok(exe) = std::env::current_exe() else {
        return warn("the path of this handoff binary is unknown");
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["hook", "claude-stop-failure"])
        .env(WORKER_ENV, "1")
        .stdin(std::process::Stdio::inherit())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    if let Some(pid) = handoff_continue::limit::claude_ancestor() {
        cmd.env(SOURCE_ENV, pid.to_string());
    }
    // SAFETY: `setsid` is async-signal-safe and touches nothing of the parent's state.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    if let Err(e) = cmd.spawn() {
        warn(&format!("cannot start: {e}"));
    }
}

/// The worker's log, next to the task store: what it decided and what went wrong, once the
/// hook's standard error is let go of. Started over when it passes this size.
const LOG_LIMIT: u64 = 1 << 20;

/// The worker's log (`hook.log` next to the task store), opened for appending (started over
/// past [`LOG_LIMIT`]); `None` when it cannot be, or is not a plain file.
fn open_log() -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let store = handoff_store::default_path(&env).ok()?;
    let dir = store.parent()?;
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .ok()?;
    }
    let path = dir.join("hook.log");
    let restart = std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() > LOG_LIMIT);
    std::fs::OpenOptions::new()
        .create(true)
        .append(!restart)
        .write(true)
        .truncate(restart)
        .mode(0o600)
        // Never through a symlink, never waiting on a FIFO: a log that is not a plain file is
        // not written.
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&path)
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
}

/// Points standard error at the worker's `log`, else at `/dev/null`: the worker lets go of the
/// hook's, so that nothing waits on it while the move is decided and started, and what it says
/// next is kept for whoever wonders why a task did (not) move.
fn let_go_of_stderr(log: Option<std::fs::File>, root: Option<&Utf8Path>) {
    use std::os::fd::AsRawFd;
    let target = log.or_else(|| {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .ok()
    });
    if let Some(file) = target {
        // SAFETY: `dup2` onto descriptor 2 replaces it atomically; `file` stays owned here.
        #[allow(unsafe_code)]
        unsafe {
            nix::libc::dup2(file.as_raw_fd(), 2);
        }
    }
    let place = root.map_or_else(|| "without a worktree".to_owned(), |r| format!("in {r}"));
    warn(&format!("{} StopFailure {place}", handoff_core::now_iso()));
}

fn stop_failure() {
    // The first process handed over in `hand_over_at_start`; this is the worker. Its log
    // says it started before anything can go wrong.
    let mut log = open_log();
    if let Some(f) = log.as_mut() {
        use std::io::Write as _;
        let _ = writeln!(
            f,
            "handoff hook: {} the worker started (pid {})",
            handoff_core::now_iso(),
            std::process::id()
        );
    }
    let bytes = read_stdin();
    let Some((value, root)) = parse(&bytes) else {
        let why = format!(
            "no readable StopFailure payload with a cwd inside a git worktree ({} bytes read)",
            bytes.len()
        );
        warn(&why);
        // Kept in the log too: Claude Code may have stopped listening already.
        let_go_of_stderr(log, None);
        return warn(&why);
    };
    let_go_of_stderr(log, Some(&root));
    let payload = match StopFailure::parse(value.to_string().as_bytes()) {
        Ok(p) => p,
        Err(e) => return warn(&e),
    };
    let config = match crate::load_config() {
        Ok(c) => c.config,
        Err(e) => return warn(&e),
    };
    let store = match crate::open_store() {
        Ok(s) => s,
        Err(e) => return warn(&e),
    };
    let notices = notices(&store);
    let mut kept = notices.load(&root);
    let now = std::time::SystemTime::now();
    let source = std::env::var(SOURCE_ENV).ok().and_then(|p| p.parse().ok());
    match plan(&config.failover, &payload, &root, &kept, now, source) {
        LimitPlan::Ignore => {
            return warn(&format!(
                "{:?} is not one of [failover] errors: nothing to do",
                payload.error()
            ));
        }
        LimitPlan::Notify(notice) => {
            warn(&format!(
                "no move ({:?}): the next session is told",
                notice.kind
            ));
            kept.notice = Some(notice);
        }
        LimitPlan::Continue {
            mut args,
            note,
            mut notice,
        } => {
            args.extend(["--note-file".to_owned(), "-".to_owned()]);
            let exe = std::env::current_exe()
                .ok()
                .and_then(|p| Utf8PathBuf::from_path_buf(p).ok());
            let Some(exe) = exe else {
                return warn("the path of this handoff binary is unknown");
            };
            let dir = store.sibling_dir("jobs");
            let masked = args.clone();
            match handoff_core::detach_job(
                &store,
                &exe,
                &dir,
                "continue",
                args,
                masked,
                Some(note.into_bytes()),
            ) {
                Ok(started) => {
                    warn(&format!("the task moves: job {}", started.job.id));
                    notice.job = Some(started.job.id.to_string());
                }
                Err(e) => {
                    warn(&format!("the task did not move: {e}"));
                    notice.kind = NoticeKind::WouldMove;
                }
            }
            if notice.kind == NoticeKind::Moved {
                kept.hops.push(handoff_core::now_iso());
            }
            kept.notice = Some(notice);
        }
    }
    if let Err(e) = notices.save(&root, &kept) {
        warn(&format!("cannot keep the notice: {e}"));
    }
}

fn session_start() {
    let Some((_, root)) = payload() else { return };
    let Ok(store) = crate::open_store() else {
        return;
    };
    let notices = notices(&store);
    let mut kept: NoticeFile = notices.load(&root);
    let Some(notice) = kept.notice.as_mut().filter(|n| !n.shown) else {
        return;
    };
    let text = notice.text();
    notice.shown = true;
    let _ = notices.save(&root, &kept);
    let out = json!({
        "systemMessage": text,
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text},
    });
    let _ = writeln!(std::io::stdout(), "{out}");
}

fn prompt_submit() {
    let Some((_, root)) = payload() else { return };
    let Ok(store) = crate::open_store() else {
        return;
    };
    let notices = notices(&store);
    let mut kept = notices.load(&root);
    let Some(notice) = kept.notice.clone().filter(|n| n.kind == NoticeKind::Moved) else {
        return;
    };
    let holder = handoff_core::TaskStore::task_for_worktree(&store, &root)
        .ok()
        .flatten()
        .map(|t| t.agent.provider.to_string());
    let job_running = notice
        .job
        .as_deref()
        .and_then(handoff_core::JobId::parse)
        .is_some_and(|id| {
            handoff_core::TaskStore::job(&store, &id)
                .map(|j| j.judged().state == handoff_core::JobState::Running)
                .unwrap_or(false)
        });
    match holder.as_deref() {
        // Taken back (or never moved): the notice is done with.
        Some("claude") if !job_running => {
            kept.notice = None;
            let _ = notices.save(&root, &kept);
        }
        _ => {
            let reason = format!(
                "{} Until then this prompt is stopped, so that two agents do not work on one worktree.",
                notice.text()
            );
            let _ = writeln!(
                std::io::stdout(),
                "{}",
                json!({"decision": "block", "reason": reason})
            );
        }
    }
}
