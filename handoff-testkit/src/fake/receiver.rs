//! Continuation receivers: the fake CLIs' persisted sessions and their resume commands.
//!
//! A session is `$HOME/.fake-agent/sessions/<exe>/<session-id>.json` =
//! `{"cwd", "prompts": [...], "lastMessage"}`, written atomically after each turn. Resuming
//! checks what the real CLIs check: the session exists, and it was started in the current
//! directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};

use super::util;

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

fn store(exe: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(
        PathBuf::from(home)
            .join(".fake-agent")
            .join("sessions")
            .join(exe),
    )
}

fn session_file(exe: &str, session: &str) -> Option<PathBuf> {
    // A session id is one path component, never a way out of the store.
    if session.is_empty() || session.contains(['/', '\0']) || session.starts_with('.') {
        return None;
    }
    Some(store(exe)?.join(format!("{session}.json")))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    canon(a) == canon(b)
}

/// Records a turn of `session` run in `cwd`: the prompt is appended, the last message replaced
/// (`None` after a failed turn keeps no message).
pub(crate) fn save(exe: &str, session: &str, cwd: &Path, prompt: &str, last: Option<&str>) {
    let Some(path) = session_file(exe, session) else {
        util::err_line(&format!(
            "fake-agent: no session store for {exe} (HOME unset or bad session id {session:?})"
        ));
        return;
    };
    let mut prompts: Vec<Value> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("prompts").and_then(Value::as_array).cloned())
        .unwrap_or_default();
    prompts.push(json!(prompt));
    let record = json!({
        "cwd": std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned()),
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

/// The resume command: prints `resumed <id>: <lastMessage>` when the session exists and was
/// started in the current directory, else `not_found` on stderr (exit 1).
pub(crate) fn resume(exe: &str, session: &str, not_found: &str) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_default();
    let record = session_file(exe, session)
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .filter(|r| {
            r.get("cwd")
                .and_then(Value::as_str)
                .is_some_and(|c| same_dir(Path::new(c), &cwd))
        });
    match record {
        Some(r) => {
            let last = r.get("lastMessage").and_then(Value::as_str).unwrap_or("");
            util::out_line(&format!("resumed {session}: {last}"));
            ExitCode::SUCCESS
        }
        None => {
            util::err_line(not_found);
            ExitCode::from(1)
        }
    }
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
        assert!(session_file("claude", "../x").is_none());
        assert!(session_file("claude", "").is_none());
        assert!(session_file("claude", ".hidden").is_none());
    }
}
