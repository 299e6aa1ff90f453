//! Continuation receivers: what every receiving CLI shares (ids, the reply, the test switches)
//! and the session store of the CLIs whose real one is a database (OpenCode, Cursor, Kiro).
//!
//! Claude Code and Codex keep their sessions in their real stores and formats
//! ([`super::claude_store`], [`super::codex_store`]). OpenCode's, Cursor's and Kiro's real
//! stores are SQLite databases, so the fake keeps their sessions as
//! `<store>/<session-id>.json` = `{"cwd", "prompts": [...], "lastMessage"}` (the store: see
//! [`store`]), written atomically after each turn.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use super::settings::{self, Settings};
use super::util;

/// The question handoff asks a receiver whose store it can't read.
pub(crate) const PROBE_QUESTION: &str =
    "What were you last working on? Answer in one or two sentences.";

/// The probe's answer when neither the switch nor the session has one.
pub(crate) const PROBE_UNKNOWN: &str = "I don't know.";

/// The receiver's last message after a turn in `session`.
pub(crate) fn last_message(exe: &str, session: &str) -> String {
    format!("Continued the task as {exe} (session {session}).")
}

/// A Codex thread id: a UUID v7 (time-ordered, as Codex makes them).
pub(crate) fn codex_thread_id() -> String {
    let millis = util::now_millis();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{:08x}-{:04x}-7{}-{}-{}",
        (millis >> 16) & 0xffff_ffff,
        millis & 0xffff,
        &random[..3],
        format_args!("a{}", &random[3..6]),
        &random[6..18]
    )
}

/// An OpenCode session id: `ses_` and 26 characters.
pub(crate) fn opencode_session_id() -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("ses_{:012x}{}", util::now_millis(), &random[..14])
}

/// Whether `id` can name a session file: one path component, never a way out of the store.
pub(crate) fn safe_id(id: &str) -> bool {
    !id.is_empty() && !id.contains(['/', '\\', '\0']) && !id.starts_with('.')
}

/// `FAKE_AGENT_RECEIVER_DELAY_MS`: sleeps that long (before anything reaches the store).
pub(crate) fn pause(settings: &Settings) {
    let ms = settings
        .get(settings::RECEIVER_DELAY_MS)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// `FAKE_AGENT_RECEIVER_FRESH=1`: ignore the session to resume and start a new one.
pub(crate) fn fresh(settings: &Settings) -> bool {
    settings
        .get(settings::RECEIVER_FRESH)
        .is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
}

/// What a receiver says after its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The last message.
    pub(crate) text: String,
    /// The prompt was the probe question: the receiver answers, it does no work.
    pub(crate) probe: bool,
}

/// The reply to `prompt` in `session`: the answer to the probe question (the
/// `FAKE_AGENT_PROBE_ANSWER` switch, else `previous` — the last assistant text of the session
/// before this turn — else `I don't know.`), otherwise [`last_message`].
pub(crate) fn reply(
    settings: &Settings,
    exe: &str,
    session: &str,
    prompt: &str,
    previous: Option<String>,
) -> Reply {
    if prompt.contains(PROBE_QUESTION) {
        let text = settings
            .get(settings::PROBE_ANSWER)
            .or(previous)
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| PROBE_UNKNOWN.to_owned());
        return Reply { text, probe: true };
    }
    Reply {
        text: last_message(exe, session),
        probe: false,
    }
}

/// The branch checked out in the repository holding `dir` (`HEAD` when detached or unknown), as
/// the CLIs record it.
pub(crate) fn git_branch(dir: &Path) -> String {
    for d in dir.ancestors() {
        let dot_git = d.join(".git");
        let git_dir = if dot_git.is_dir() {
            dot_git
        } else if dot_git.is_file() {
            // A linked worktree: `gitdir: <path>`.
            let Some(target) = std::fs::read_to_string(&dot_git)
                .ok()
                .and_then(|t| t.trim().strip_prefix("gitdir:").map(|p| d.join(p.trim())))
            else {
                break;
            };
            target
        } else {
            continue;
        };
        return std::fs::read_to_string(git_dir.join("HEAD"))
            .ok()
            .and_then(|h| h.trim().strip_prefix("ref: refs/heads/").map(str::to_owned))
            .unwrap_or_else(|| "HEAD".to_owned());
    }
    "HEAD".to_owned()
}

/// `path` with symlinks resolved, when it exists.
pub(crate) fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// The fake store of `cli`'s sessions, for the CLIs whose real store is a database:
/// `$HOME/.fake-agent/sessions/<cli>` for Cursor; for Kiro and OpenCode, in the data directory
/// where each keeps its own (`${XDG_DATA_HOME:-~/.local/share}/kiro-cli`, `…/opencode`), the
/// one place handoff's sandbox lets it write them.
fn store(cli: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    let data = || {
        std::env::var_os("XDG_DATA_HOME")
            .filter(|d| Path::new(d).is_absolute())
            .map_or_else(|| PathBuf::from(&home).join(".local/share"), PathBuf::from)
    };
    match cli {
        "kiro" => return Some(data().join("kiro-cli").join("fake-agent-sessions")),
        "opencode" => return Some(data().join("opencode").join("fake-agent-sessions")),
        _ => {}
    }
    Some(
        PathBuf::from(home)
            .join(".fake-agent")
            .join("sessions")
            .join(cli),
    )
}

fn store_file(cli: &str, session: &str) -> Option<PathBuf> {
    safe_id(session).then_some(())?;
    Some(store(cli)?.join(format!("{session}.json")))
}

fn store_record(cli: &str, session: &str) -> Option<Value> {
    let bytes = std::fs::read(store_file(cli, session)?).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The last message of `cli`'s session `session`.
pub(crate) fn store_last(cli: &str, session: &str) -> Option<String> {
    store_record(cli, session)?
        .get("lastMessage")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Records a turn of `cli`'s session `session` run in `cwd`: the prompt is appended, the last
/// message replaced (`None` after a failed turn keeps no message). A session forked from
/// `parent` starts with the parent's prompts.
pub(crate) fn store_save(
    cli: &str,
    session: &str,
    parent: Option<&str>,
    cwd: &Path,
    prompt: &str,
    last: Option<&str>,
) {
    let Some(path) = store_file(cli, session) else {
        util::err_line(&format!(
            "fake-agent: no session store for {cli} (HOME unset or bad session id {session:?})"
        ));
        return;
    };
    let prompts_of = |id: &str| {
        store_record(cli, id)
            .and_then(|v| v.get("prompts").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    let mut prompts = match store_record(cli, session) {
        Some(_) => prompts_of(session),
        None => parent.map(prompts_of).unwrap_or_default(),
    };
    prompts.push(json!(prompt));
    let record = json!({
        "cwd": canonical(cwd),
        "prompts": prompts,
        "lastMessage": last,
    });
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| util::write_atomic(&path, record.to_string().as_bytes()));
    if let Err(e) = written {
        util::err_line(&format!(
            "fake-agent: cannot persist session {}: {e}",
            path.display()
        ));
    }
}

/// Resuming `cli`'s session `session` interactively: prints `resumed <id>: <lastMessage>` when
/// the session exists and was started in the current directory, else `error` on stderr (exit
/// 1).
pub(crate) fn store_resume(cli: &str, session: &str, error: &str) -> ExitCode {
    let cwd = canonical(&std::env::current_dir().unwrap_or_default());
    let record = store_record(cli, session).filter(|r| {
        r.get("cwd")
            .and_then(Value::as_str)
            .is_some_and(|c| canonical(Path::new(c)) == cwd)
    });
    match record {
        Some(r) => {
            let last = r.get("lastMessage").and_then(Value::as_str).unwrap_or("");
            util::out_line(&format!("resumed {session}: {last}"));
            ExitCode::SUCCESS
        }
        None => {
            util::err_line(error);
            ExitCode::from(1)
        }
    }
}

/// The last message of OpenCode session `session`.
pub(crate) fn opencode_last(session: &str) -> Option<String> {
    store_last("opencode", session)
}

/// Records a turn of OpenCode session `session` ([`store_save`]).
pub(crate) fn opencode_save(
    session: &str,
    parent: Option<&str>,
    cwd: &Path,
    prompt: &str,
    last: Option<&str>,
) {
    store_save("opencode", session, parent, cwd, prompt, last);
}

/// `opencode export <id>`: the session as an export document (`info` and one user message per
/// prompt), or `Error: Session not found: <id>` (exit 1).
pub(crate) fn opencode_export(session: &str) -> ExitCode {
    let Some(record) = store_record("opencode", session) else {
        util::err_line(&format!("Error: Session not found: {session}"));
        return ExitCode::from(1);
    };
    let messages: Vec<Value> = record
        .get("prompts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            json!({
                "info": {"id": util::short_id("msg_"), "sessionID": session, "role": "user"},
                "parts": [{"type": "text", "text": p}],
            })
        })
        .collect();
    let doc = json!({
        "info": {"id": session, "directory": record.get("cwd"), "title": "fake"},
        "messages": messages,
        "fakeRecord": record,
    });
    util::out_line(&doc.to_string());
    ExitCode::SUCCESS
}

/// `opencode import <file>`: writes the exported session into the store, as it was (its id
/// kept, over a session of the same id), then prints `Imported session: <id>`.
pub(crate) fn opencode_import(settings: &Settings, file: &str) -> ExitCode {
    if let Some(gate) = settings.get(settings::IMPORT_WAIT_FILE) {
        while !Path::new(&gate).exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if settings.get(settings::IMPORT_FAIL).as_deref() == Some("1") {
        util::err_line("Error: fake import failure");
        return ExitCode::from(1);
    }
    let doc = std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
    let id = doc
        .as_ref()
        .and_then(|d| d.pointer("/info/id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (Some(doc), Some(id)) = (doc, id) else {
        util::err_line(&format!("Error: cannot import {file}"));
        return ExitCode::from(1);
    };
    let Some(path) = store_file("opencode", &id) else {
        util::err_line(&format!("Error: bad session id {id:?}"));
        return ExitCode::from(1);
    };
    let record = doc.get("fakeRecord").cloned().unwrap_or_else(|| json!({}));
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| util::write_atomic(&path, record.to_string().as_bytes()));
    match written {
        Ok(()) => {
            util::out_line(&format!("Imported session: {id}"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            util::err_line(&format!("Error: {e}"));
            ExitCode::from(1)
        }
    }
}

/// `opencode session delete <id>`.
pub(crate) fn opencode_delete(session: &str) -> ExitCode {
    if let Some(path) = store_file("opencode", session) {
        let _ = std::fs::remove_file(path);
    }
    ExitCode::SUCCESS
}

/// `opencode --session <id>` ([`store_resume`]).
pub(crate) fn opencode_resume(session: &str) -> ExitCode {
    store_resume(
        "opencode",
        session,
        &format!("Error: Session not found: {session}"),
    )
}

/// Whether `prompt` is a continuation's: the first turn of a receiver (handoff's continuation
/// prompt) or the probe question. The CLIs whose receiver invocation looks like a delegated
/// run (Cursor, Kiro) are told apart by it.
pub(crate) fn is_turn(prompt: &str) -> bool {
    prompt.contains("handed this task over to you") || prompt.contains(PROBE_QUESTION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_look_like_the_real_ones() {
        let t = codex_thread_id();
        assert_eq!(t.len(), 36, "{t}");
        assert_eq!(t.as_bytes()[14], b'7', "{t}");
        assert!(uuid::Uuid::parse_str(&t).is_ok(), "{t}");
        let s = opencode_session_id();
        assert!(s.starts_with("ses_") && s.len() == 30, "{s}");
    }

    #[test]
    fn session_ids_stay_in_the_store() {
        for bad in ["../x", "", ".hidden", "a/b", "a\\b"] {
            assert!(!safe_id(bad), "{bad}");
            assert!(store_file("opencode", bad).is_none(), "{bad}");
        }
        assert!(safe_id("6f1c2f7e-3b8a-4c1d-9e2f-0a1b2c3d4e5f"));
    }

    #[test]
    fn the_probe_is_answered_from_the_switch_the_session_or_not_at_all() {
        let none = Settings::default();
        let probe = format!("Quick check.\n{PROBE_QUESTION}\n");
        assert_eq!(
            reply(
                &none,
                "claude",
                "s",
                &probe,
                Some("Fixed the parser.".into())
            ),
            Reply {
                text: "Fixed the parser.".into(),
                probe: true
            }
        );
        assert_eq!(
            reply(&none, "claude", "s", &probe, None).text,
            PROBE_UNKNOWN
        );
        let set = Settings::with(&[(settings::PROBE_ANSWER, "Writing the lexer.")]);
        assert_eq!(
            reply(&set, "claude", "s", &probe, Some("other".into())).text,
            "Writing the lexer."
        );
        let work = reply(&set, "codex", "t", "Finish the parser.", None);
        assert_eq!(work.text, last_message("codex", "t"));
        assert!(!work.probe);
    }

    #[test]
    fn fresh_and_delay_switches() {
        assert!(!fresh(&Settings::default()));
        assert!(fresh(&Settings::with(&[(settings::RECEIVER_FRESH, "1")])));
        assert!(!fresh(&Settings::with(&[(settings::RECEIVER_FRESH, "0")])));
        let start = std::time::Instant::now();
        pause(&Settings::with(&[(settings::RECEIVER_DELAY_MS, "30")]));
        assert!(start.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn branch_of_a_repository() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(git_branch(tmp.path()), "HEAD");
        std::fs::create_dir_all(tmp.path().join(".git")).unwrap();
        std::fs::write(tmp.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(tmp.path().join("sub")).unwrap();
        assert_eq!(git_branch(&tmp.path().join("sub")), "main");
        std::fs::write(tmp.path().join(".git/HEAD"), "0123abcd\n").unwrap();
        assert_eq!(git_branch(tmp.path()), "HEAD");
    }
}
