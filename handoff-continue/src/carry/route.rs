//! How the conversation reaches the receiver (fork, copy or conversion), planned and then performed.

use super::*;

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

pub(super) fn planned_from(
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

pub(super) fn same_directory(a: &Utf8Path, b: &Utf8Path) -> bool {
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
