//! An earlier carried copy of the same source: replaced only when this carry holds all of it and no process has it open.

use super::*;

/// An earlier carried copy of the same source session for the same receiver CLI, from the
/// timeline: its session id.
pub fn earlier_copy(
    timeline: &[handoff_core::TimelineEntry],
    source: &SourceRefKey<'_>,
    target: &AgentId,
) -> Option<String> {
    timeline.iter().rev().find_map(|e| match &e.event {
        TimelineEvent::Handoff(h) if h.target.provider == *target => {
            let carry = h.context.details.as_ref()?.get("carry")?;
            let from = carry.get("source")?;
            (from.get("provider")?.as_str()? == source.provider.as_str()
                && from.get("sessionId")?.as_str()? == source.session_id)
                .then(|| carry.get("sessionId")?.as_str().map(str::to_owned))
                .flatten()
        }
        _ => None,
    })
}

/// Identifies a source session.
pub struct SourceRefKey<'a> {
    /// Its CLI.
    pub provider: &'a AgentId,
    /// Its id.
    pub session_id: &'a str,
}

/// Whether any process's command line names `session_id` (an agent running it).
/// `Err` when the processes can't be listed: then it is not known to be free.
pub fn session_in_use(session_id: &str) -> Result<Option<u32>, String> {
    let own = std::process::id();
    let entries = std::fs::read_dir("/proc")
        .map_err(|e| format!("cannot list the running processes (/proc: {e})"))?;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == session_id.as_bytes())
        {
            return Ok(Some(pid));
        }
    }
    Ok(None)
}

/// What to do about an earlier carried copy before writing a new one.
pub enum Earlier {
    /// There is none (or it is gone).
    None,
    /// It may be replaced: every message it holds is in the new carry and no agent runs it.
    Replace {
        /// Its id.
        session_id: String,
        /// Its file in the receiver's store.
        path: Utf8PathBuf,
    },
    /// It must stay: why.
    Keep(String),
}

/// Decides about the earlier copy `id` given the messages about to be carried (as the receiver
/// gets them: masked when converted).
pub async fn judge_earlier(receiver: &PreparedReceiver, id: &str, carried: &Transcript) -> Earlier {
    let adapter = receiver.provider();
    let store = receiver.store_env();
    let sessions = match adapter.session_store() {
        Ok(sessions) => sessions,
        Err(e) => {
            return Earlier::Keep(format!("the earlier carried copy {id} cannot be read: {e}"));
        }
    };
    let session = match sessions
        .find_session(&store, &SessionQuery::Id(id.to_owned()))
        .await
    {
        Ok(Some(s)) => s,
        Ok(None) => return Earlier::None,
        Err(e) => {
            return Earlier::Keep(format!("the earlier carried copy {id} cannot be read: {e}"));
        }
    };
    match session_in_use(id) {
        Ok(None) => {}
        Ok(Some(pid)) => {
            return Earlier::Keep(format!(
                "an agent (pid {pid}) is running the earlier carried copy {id}"
            ));
        }
        Err(e) => {
            return Earlier::Keep(format!("the earlier carried copy {id} may be in use: {e}"));
        }
    }
    let earlier = match sessions.read_transcript(&session.path) {
        Ok(t) => t,
        Err(e) => {
            return Earlier::Keep(format!("the earlier carried copy {id} cannot be read: {e}"));
        }
    };
    let contained = earlier.messages.len() <= carried.messages.len()
        && earlier
            .messages
            .iter()
            .zip(&carried.messages)
            .all(|(a, b)| same_message(a, b));
    if !contained {
        return Earlier::Keep(format!(
            "the earlier carried copy {id} holds turns the source doesn't: continue from it (--session {id}) instead"
        ));
    }
    if session.path.starts_with(
        store
            .scratch
            .as_deref()
            .unwrap_or(Utf8Path::new("/nonexistent")),
    ) {
        // Reached through an export: there is no file of ours to replace.
        return Earlier::None;
    }
    Earlier::Replace {
        session_id: id.to_owned(),
        path: session.path,
    }
}
