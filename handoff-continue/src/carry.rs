//! The conversation part of `handoff continue`: finding the source session, carrying it into
//! the receiver's store, the recap sent with the note, and the continuity check.
//!
//! The source session is only ever read. Same CLI and same directory: the CLI's own fork
//! (`native-fork`); same CLI elsewhere: a lossless copy under a new id, re-rooted
//! (`native-copy`); another CLI: written into its store from the neutral transcript, secrets
//! masked (`converted`). After the receiver's turn, its own store says whether it resumed the
//! carried session and wrote a turn after it; where there is none to read, its answer to the
//! probe question is compared with the note.

use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, CarriedSession, CarryMode, CarrySource, CarryTarget, ContinueCarry, ContinueRecap,
    Continuity, ContinuityChecks, ContinuityProbe, ContinuityResult, Engine, HandoffRow,
    PROBE_QUESTION, Part, PreparedReceiver, ResumeFrom, Resumption, SessionQuery, SessionRef,
    SourceSnapshot, TimelineEvent, Transcript, TranscriptError, compare_probe, recap, redact,
    resumed_after, same_message,
};

/// The recap sent with the note is at most this big.
pub const RECAP_LIMIT: usize = 24 * 1024;
/// Carried turns listed in the timeline, newest last.
const LISTED_TURNS: usize = 100;
/// Longest summary of a carried turn in the timeline.
const TURN_SUMMARY_CHARS: usize = 160;

/// The variable the calling agent's CLI sets to its current session, for the CLIs that do.
fn session_variable(provider: &AgentId) -> Option<&'static str> {
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

/// How the conversation will reach the receiver.
pub struct Planned {
    /// How.
    pub mode: CarryMode,
    /// What the receiver's first turn resumes.
    pub resume: ResumeFrom,
    /// The plan's files and bytes (a dry run of the write), or the source's size for a fork.
    pub files: Vec<Utf8PathBuf>,
    /// Bytes.
    pub bytes: u64,
    /// Secrets masked in a converted transcript.
    pub secrets: u64,
    /// What a converted carry writes: the source's messages, secrets masked.
    pub converted: Option<Transcript>,
}

impl Planned {
    /// The messages the receiver gets: masked when converted, else the source's as they are.
    pub fn messages<'a>(&'a self, source: &'a Source) -> &'a Transcript {
        self.converted.as_ref().unwrap_or(&source.transcript)
    }
}

/// Decides how `source` reaches `target` in `cwd` and plans it without writing.
pub async fn plan(
    source: &Source,
    receiver: &PreparedReceiver,
    cwd: &Utf8Path,
    known: &[String],
) -> Result<Planned, String> {
    let adapter = receiver.provider();
    let target = &receiver.request.target;
    let same_dir = source
        .session
        .cwd
        .as_deref()
        .is_some_and(|c| same_directory(c, cwd));
    let carry_target = CarryTarget {
        session_id: receiver.request.session_id.clone(),
        cwd: cwd.to_owned(),
        model: receiver.request.model.clone(),
        dry_run: true,
    };
    let store = receiver.store_env();
    if source.session.provider == *target {
        // The CLI forks only what its own store holds: a session given as a file is copied.
        if adapter.receiver().is_some_and(|r| r.native_fork()) && same_dir && source.found != "file"
        {
            return Ok(Planned {
                mode: CarryMode::NativeFork,
                resume: ResumeFrom {
                    session_id: source.session.session_id.clone(),
                    fork: true,
                },
                files: Vec::new(),
                bytes: source.snapshot.as_ref().map_or(0, |s| s.bytes),
                secrets: 0,
                converted: None,
            });
        }
        let planned = adapter
            .session_store()
            .map_err(|e| e.to_string())?
            .copy_session(&store, &source.session, &carry_target)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(planned_from(CarryMode::NativeCopy, planned, 0, None));
    }
    let (transcript, secrets) = masked(&source.transcript, known);
    let planned = adapter
        .session_store()
        .map_err(|e| e.to_string())?
        .write_session(&store, &transcript, &carry_target)
        .await
        .map_err(|e| e.to_string())?;
    Ok(planned_from(
        CarryMode::Converted,
        planned,
        secrets,
        Some(transcript),
    ))
}

fn planned_from(
    mode: CarryMode,
    planned: CarriedSession,
    secrets: u64,
    converted: Option<Transcript>,
) -> Planned {
    Planned {
        mode,
        resume: ResumeFrom {
            session_id: planned.session_id,
            fork: false,
        },
        files: planned.files,
        bytes: planned.bytes,
        secrets,
        converted,
    }
}

fn same_directory(a: &Utf8Path, b: &Utf8Path) -> bool {
    let canon = |p: &Utf8Path| p.canonicalize_utf8().unwrap_or_else(|_| p.to_owned());
    canon(a) == canon(b)
}

/// A carry made: what the receiver resumes, and the carried session as read back.
pub struct Carried {
    /// What the receiver's first turn resumes.
    pub resume: ResumeFrom,
    /// The session the receiver works in: for a fork, the id it is asked to fork into.
    pub session_id: String,
    /// Files written.
    pub files: Vec<Utf8PathBuf>,
    /// Bytes written.
    pub bytes: u64,
    /// The carried messages, as the receiver's reader sees them; the continuity check compares
    /// the receiver's session with them.
    pub baseline: Transcript,
    /// What reading it back warned about.
    pub warnings: Vec<String>,
}

/// Writes the carry `planned` into the receiver's store and reads it back.
pub async fn perform(
    planned: &Planned,
    source: &Source,
    receiver: &PreparedReceiver,
    cwd: &Utf8Path,
) -> Result<Carried, String> {
    let adapter = receiver.provider();
    let store = receiver.store_env();
    let carry_target = CarryTarget {
        session_id: receiver.request.session_id.clone(),
        cwd: cwd.to_owned(),
        model: receiver.request.model.clone(),
        dry_run: false,
    };
    let written = match planned.mode {
        CarryMode::NativeFork => {
            return Ok(Carried {
                resume: ResumeFrom {
                    session_id: source.session.session_id.clone(),
                    fork: true,
                },
                session_id: receiver.request.session_id.clone(),
                files: Vec::new(),
                bytes: 0,
                baseline: source.transcript.clone(),
                warnings: source.transcript.warnings.clone(),
            });
        }
        CarryMode::NativeCopy => adapter
            .session_store()
            .map_err(|e| e.to_string())?
            .copy_session(&store, &source.session, &carry_target)
            .await
            .map_err(|e| e.to_string())?,
        CarryMode::Converted => adapter
            .session_store()
            .map_err(|e| e.to_string())?
            .write_session(&store, planned.messages(source), &carry_target)
            .await
            .map_err(|e| e.to_string())?,
    };
    let baseline = read_session(receiver, &written.session_id)
        .await
        .map_err(|e| {
            format!(
                "the carried session {} cannot be read back: {e}",
                written.session_id
            )
        })?
        .ok_or_else(|| {
            format!(
                "the carried session {} is not in {}'s store after writing it",
                written.session_id, receiver.request.target
            )
        })?;
    let warnings = baseline.warnings.clone();
    Ok(Carried {
        resume: ResumeFrom {
            session_id: written.session_id.clone(),
            fork: false,
        },
        session_id: written.session_id,
        files: written.files,
        bytes: written.bytes,
        baseline,
        warnings,
    })
}

/// Reads session `id` from the receiver's store.
pub async fn read_session(
    receiver: &PreparedReceiver,
    id: &str,
) -> Result<Option<Transcript>, TranscriptError> {
    let adapter = receiver.provider();
    let sessions = adapter.session_store()?;
    let store = receiver.store_env();
    match sessions
        .find_session(&store, &SessionQuery::Id(id.to_owned()))
        .await?
    {
        Some(session) => sessions.read_transcript(&session.path).map(Some),
        None => Ok(None),
    }
}

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

/// The recap file next to the note, and its report.
pub fn write_recap(
    note_path: &Utf8Path,
    transcript: &Transcript,
    known: &[String],
    dry_run: bool,
) -> Result<(ContinueRecap, String, u64), String> {
    let r = recap(transcript, RECAP_LIMIT, known);
    let path = recap_path(note_path);
    let report = ContinueRecap {
        path: path.clone(),
        bytes: r.text.len() as u64,
        whole: r.whole,
        extracted: r.extracted,
        omitted: r.omitted,
    };
    if !dry_run {
        crate::private::write_private_file(&path, &r.text)?;
    }
    Ok((report, r.text, r.redactions))
}

/// `<note>.recap.md` for `<note>.md`.
pub fn recap_path(note_path: &Utf8Path) -> Utf8PathBuf {
    let stem = note_path.file_stem().unwrap_or("note");
    note_path.with_file_name(format!("{stem}.recap.md"))
}

/// The carried turns as listed in the timeline: role, provider, model, time and first line.
pub fn listed_turns(transcript: &Transcript) -> serde_json::Value {
    let skip = transcript.messages.len().saturating_sub(LISTED_TURNS);
    let turns: Vec<serde_json::Value> = transcript.messages[skip..]
        .iter()
        .map(|m| {
            let first_line = |t: &str| {
                t.lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
                    .to_owned()
            };
            let text = m
                .parts
                .iter()
                .find_map(|p| match p {
                    Part::Text { text } if !text.trim().is_empty() => Some(first_line(text)),
                    _ => None,
                })
                .or_else(|| {
                    m.parts.iter().find_map(|p| match p {
                        Part::ToolCall { name, .. } => Some(format!("[tool call {name}]")),
                        Part::ToolResult {
                            output, is_error, ..
                        } => Some(format!(
                            "[tool {}] {}",
                            if *is_error { "error" } else { "result" },
                            first_line(output)
                        )),
                        Part::Reasoning { text } => Some(format!("[reasoning] {}", first_line(text))),
                        Part::Text { .. } => None,
                    })
                })
                .unwrap_or_default();
            let first: String = text.chars().take(TURN_SUMMARY_CHARS).collect();
            serde_json::json!({
                "role": match m.role { handoff_core::Role::User => "user", handoff_core::Role::Assistant => "assistant" },
                "provider": m.provider,
                "model": m.model,
                "at": m.at,
                "summary": first,
            })
        })
        .collect();
    serde_json::json!({ "omitted": skip, "turns": turns })
}

/// The carry's report.
pub fn report(
    source: Option<&Source>,
    carried: bool,
    mode: Option<CarryMode>,
    reason: Option<String>,
) -> ContinueCarry {
    ContinueCarry {
        carried,
        mode,
        source: source.map(Source::report),
        session_id: None,
        fork: mode == Some(CarryMode::NativeFork),
        files: Vec::new(),
        bytes: 0,
        messages: source.map_or(0, |s| s.transcript.messages.len() as u64),
        warnings: source
            .map(|s| s.transcript.warnings.clone())
            .unwrap_or_default(),
        reason,
        replaced: None,
        recap: None,
        secrets_masked: 0,
    }
}

/// Whether the source still holds what was carried: its bytes unchanged (it may have grown),
/// and, read again, the carried messages first.
pub async fn original_appended(
    engine: &Engine,
    source: &Source,
    account: Option<&str>,
    scratch: &Utf8Path,
) -> bool {
    if let Some(snapshot) = &source.snapshot
        && !snapshot.still_prefix().unwrap_or(false)
    {
        return false;
    }
    let Some(adapter) = engine.provider(&source.session.provider) else {
        return false;
    };
    let Ok(sessions) = adapter.session_store() else {
        return false;
    };
    let store = engine.user_store(&source.session.provider, scratch, account);
    let path = if source.snapshot.is_some() {
        source.session.path.clone()
    } else {
        match sessions
            .find_session(&store, &SessionQuery::Id(source.session.session_id.clone()))
            .await
        {
            Ok(Some(s)) => s.path,
            _ => return false,
        }
    };
    match sessions.read_transcript(&path) {
        Ok(now) => {
            now.messages.len() >= source.transcript.messages.len()
                && source
                    .transcript
                    .messages
                    .iter()
                    .zip(&now.messages)
                    .all(|(a, b)| same_message(a, b))
        }
        Err(_) => false,
    }
}

/// What the receiver's store says after its turn.
pub enum StoreVerdict {
    /// Read: how the session compares with the carried one.
    Read(Resumption),
    /// The session the receiver was to resume is not in its store.
    Missing,
    /// The store can't be read.
    Unreadable(String),
}

/// Reads the receiver's session and compares it with the carried baseline.
pub async fn store_verdict(receiver: &PreparedReceiver, carried: &Carried) -> StoreVerdict {
    match read_session(receiver, &carried.session_id).await {
        Ok(Some(now)) => StoreVerdict::Read(resumed_after(&carried.baseline, &now)),
        Ok(None) => StoreVerdict::Missing,
        Err(e) => StoreVerdict::Unreadable(e.to_string()),
    }
}

/// The note's Current state and Next steps: what a probe answer is compared with.
pub fn probe_reference(note: &handoff_core::Note) -> String {
    [
        handoff_core::Section::CurrentState,
        handoff_core::Section::NextSteps,
    ]
    .into_iter()
    .filter_map(|s| note.body(s))
    .collect::<Vec<_>>()
    .join("\n")
}

/// Asks the receiver the probe question in its session and compares the answer.
pub async fn probe(
    engine: &Engine,
    receiver: &PreparedReceiver,
    session_id: &str,
    reference: &str,
    timeout: Duration,
    cancel: tokio::sync::watch::Receiver<bool>,
    account: Option<&str>,
) -> Result<ContinuityProbe, String> {
    let mut request = receiver.request.clone();
    request.role = handoff_core::ReceiverRole::Review;
    request.resume = Some(ResumeFrom {
        session_id: session_id.to_owned(),
        fork: false,
    });
    let prepared = engine
        .prepare_receiver(&request, PROBE_QUESTION, account)
        .await?;
    let run = engine.start_receiver(&prepared, timeout, cancel).await;
    if let Some(failure) = run.failure() {
        return Err(failure);
    }
    let answer = run.report.last_message.clone();
    let comparison = compare_probe(answer.as_deref().unwrap_or(""), reference);
    Ok(ContinuityProbe {
        question: PROBE_QUESTION.to_owned(),
        answer,
        comparison,
    })
}

/// A continuity verdict.
pub fn continuity(
    result: ContinuityResult,
    reason: impl Into<String>,
    next: Option<String>,
    checks: ContinuityChecks,
) -> Continuity {
    Continuity {
        result,
        reason: reason.into(),
        next,
        last_message: None,
        probe: None,
        checks,
    }
}

/// The continuity details kept in the timeline.
pub fn timeline_details(c: &Continuity) -> serde_json::Value {
    serde_json::to_value(c).unwrap_or_default()
}

/// The handoff row's carried-turn listing, for `handoff log`.
pub fn carried_turns(h: &HandoffRow) -> Vec<String> {
    let Some(carry) = h.context.details.as_ref().and_then(|d| d.get("carry")) else {
        return Vec::new();
    };
    let Some(turns) = carry
        .get("turns")
        .and_then(|t| t.get("turns"))
        .and_then(|t| t.as_array())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(n) = carry
        .get("turns")
        .and_then(|t| t.get("omitted"))
        .and_then(serde_json::Value::as_u64)
        .filter(|n| *n > 0)
    {
        out.push(format!("({n} earlier carried turns not listed)"));
    }
    for t in turns {
        let s = |k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or("");
        let who = match t.get("model").and_then(|v| v.as_str()) {
            Some(m) => format!("{}/{m}", s("provider")),
            None => s("provider").to_owned(),
        };
        let at = if s("at").is_empty() {
            String::new()
        } else {
            format!(" {}", s("at"))
        };
        out.push(format!(
            "carried {} by {who}{at}: {}",
            s("role"),
            s("summary")
        ));
    }
    out
}
