//! The source conversation: found by flag, file, the caller's session variable, the timeline or the worktree, and read.

use super::*;

/// The variable the calling agent's CLI sets to its current session, for the CLIs that do.
pub(super) fn session_variable(provider: &AgentId) -> Option<&'static str> {
    match provider.as_str() {
        "claude" => Some("CLAUDE_CODE_SESSION_ID"),
        "codex" => Some("CODEX_THREAD_ID"),
        _ => None,
    }
}

/// The source conversation, read.
pub struct Source {
    /// Where it is.
    pub session: SessionRef,
    /// How it was found: `flag` (`--session <id>`), `file` (`--session <path>`, a file
    /// outside the CLI's store), `environment`, `timeline` or `latest`.
    pub found: &'static str,
    /// What it holds.
    pub transcript: Transcript,
    /// Its bytes when read, for a session kept in a file of the CLI's store.
    pub snapshot: Option<SourceSnapshot>,
}

impl Source {
    /// The source as reported.
    pub fn report(&self) -> CarrySource {
        CarrySource {
            provider: self.session.provider.clone(),
            session_id: self.session.session_id.clone(),
            path: self.session.path.clone(),
            found: self.found.to_owned(),
            messages: self.transcript.messages.len() as u64,
        }
    }
}

/// Finds and reads the source session of `provider`: `--session` (an id or a file), the
/// calling agent's session variable, the session the task's last receiver of `provider` ran
/// in, else the newest session that ran in one of `cwds`. `Ok(Err(why))` when there is none;
/// `Err` when one was named but can't be used.
#[allow(clippy::too_many_arguments)]
pub async fn find_source(
    engine: &Engine,
    provider: &AgentId,
    account: Option<&str>,
    flag: Option<&str>,
    last_receiver: Option<&str>,
    cwds: &[Utf8PathBuf],
    scratch: &Utf8Path,
) -> Result<Result<Source, String>, String> {
    let Some(adapter) = engine.provider(provider) else {
        return Ok(Err(format!("unknown provider '{provider}'")));
    };
    let store = engine.user_store(provider, scratch, account);
    // Why not, when handoff can't read this CLI's sessions: said where a session is first read.
    let sessions = adapter.session_store().map_err(|e| e.to_string());
    let read = |session: SessionRef, found: &'static str| -> Result<Source, String> {
        let in_scratch = session.path.starts_with(scratch);
        let snapshot = if in_scratch {
            None
        } else {
            Some(
                SourceSnapshot::take(&session.path)
                    .map_err(|e| format!("cannot read the session '{}': {e}", session.path))?,
            )
        };
        let transcript = sessions
            .clone()?
            .read_transcript(&session.path)
            .map_err(|e| e.to_string())?;
        Ok(Source {
            session,
            found,
            transcript,
            snapshot,
        })
    };
    if let Some(flag) = flag {
        let as_path = Utf8Path::new(flag);
        if flag.contains('/') {
            if !as_path.is_absolute() || !as_path.is_file() {
                return Err(format!(
                    "--session: '{flag}' is not an absolute path to a session file"
                ));
            }
            let snapshot = SourceSnapshot::take(as_path)
                .map_err(|e| format!("--session: cannot read '{flag}': {e}"))?;
            let transcript = sessions
                .clone()
                .map_err(|e| format!("--session: {e}"))?
                .read_transcript(as_path)
                .map_err(|e| format!("--session: {e}"))?;
            let session = SessionRef {
                provider: provider.clone(),
                session_id: transcript.source.session_id.clone(),
                path: as_path.to_owned(),
                cwd: transcript.source.cwd.clone(),
            };
            return Ok(Ok(Source {
                session,
                found: "file",
                transcript,
                snapshot: Some(snapshot),
            }));
        }
        return match sessions
            .clone()
            .map_err(|e| format!("--session: {e}"))?
            .find_session(&store, &SessionQuery::Id(flag.to_owned()))
            .await
        {
            Ok(Some(session)) => read(session, "flag")
                .map(Ok)
                .map_err(|e| format!("--session: {e}")),
            Ok(None) => Err(format!(
                "--session: no {provider} session '{flag}' was found"
            )),
            Err(e) => Err(format!("--session: {e}")),
        };
    }
    let mut ids: Vec<(String, &'static str)> = Vec::new();
    if let Some(var) = session_variable(provider)
        && let Some(id) = store.var(var)
    {
        ids.push((id.to_owned(), "environment"));
    }
    if let Some(id) = last_receiver {
        ids.push((id.to_owned(), "timeline"));
    }
    let store_sessions = match &sessions {
        Ok(store_sessions) => *store_sessions,
        Err(why) => return Ok(Err(why.clone())),
    };
    for (id, found) in ids {
        match store_sessions
            .find_session(&store, &SessionQuery::Id(id))
            .await
        {
            Ok(Some(session)) => return Ok(read(session, found)),
            Ok(None) => {}
            Err(TranscriptError::Unsupported(why)) => return Ok(Err(why)),
            Err(e) => return Ok(Err(e.to_string())),
        }
    }
    for cwd in cwds {
        match store_sessions
            .find_session(&store, &SessionQuery::Latest { cwd: cwd.clone() })
            .await
        {
            Ok(Some(session)) => return Ok(read(session, "latest")),
            Ok(None) => {}
            Err(TranscriptError::Unsupported(why)) => return Ok(Err(why)),
            Err(e) => return Ok(Err(e.to_string())),
        }
    }
    Ok(Err(format!(
        "no {provider} session was found that ran in {}",
        cwds.iter()
            .map(|c| format!("'{c}'"))
            .collect::<Vec<_>>()
            .join(" or ")
    )))
}

/// The session id the task's last started receiver of `provider` ran in, from the timeline.
pub fn last_receiver_session(
    timeline: &[handoff_core::TimelineEntry],
    provider: &AgentId,
) -> Option<String> {
    timeline.iter().rev().find_map(|e| match &e.event {
        TimelineEvent::Handoff(h) if h.target.provider == *provider => h
            .context
            .details
            .as_ref()
            .and_then(|d| d.get("receiverSession"))
            .and_then(|v| v.as_str())
            .map(str::to_owned),
        _ => None,
    })
}

/// The transcript with every secret in its text masked, and how many were.
pub fn masked(transcript: &Transcript, known: &[String]) -> (Transcript, u64) {
    let mut out = transcript.clone();
    let mut count = 0;
    let mut mask = |s: &mut String| {
        let (m, n) = redact(s, known);
        if n > 0 {
            *s = m;
            count += n;
        }
    };
    for message in &mut out.messages {
        for part in &mut message.parts {
            match part {
                Part::Text { text } | Part::Reasoning { text } => mask(text),
                Part::ToolCall { input, .. } => mask(input),
                Part::ToolResult { output, .. } => mask(output),
            }
        }
    }
    (out, count)
}
