//! Cursor's agent transcripts, found by id or as the newest chat that ran in a directory, and
//! read (`transcript.rs`). Nothing is ever written there: a Cursor receiver starts from the note and a recap.
//!
//! Newer Cursor agents write a plain transcript of each chat beside their SQLite chat store:
//! `~/.cursor/projects/<encoded cwd>/agent-transcripts/<id>/<id>.jsonl` (some builds put
//! `<id>.jsonl` directly in `agent-transcripts/`), with subagents' transcripts under a
//! `subagents/` folder, which are not the chat. The encoded cwd is the absolute path without
//! its leading `/`, every `/` a `-`; builds differ on other characters (some turn every
//! character but letters, digits and `-` into `-`), so both forms are looked for.

use async_trait::async_trait;
use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{AgentId, SessionQuery, SessionRef, Sessions, StoreEnv, TranscriptError};

use super::{Cursor, SPEC};

/// Most transcript folders looked at when finding a chat by id or the newest one.
const MAX_SCAN_ENTRIES: usize = 100_000;

/// `~/.cursor/projects`.
fn projects_root(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    store
        .home()
        .map(|h| h.join(".cursor/projects"))
        .ok_or_else(|| {
            TranscriptError::Unsupported(
                "cannot find Cursor's transcripts: HOME is not set".to_owned(),
            )
        })
}

/// The folder names a project at `cwd` may have under `~/.cursor/projects`.
pub(crate) fn encoded_cwds(cwd: &Utf8Path) -> Vec<String> {
    let path = cwd.as_str().trim_start_matches('/');
    let slashes = path.replace('/', "-");
    let strict: String = path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut out = vec![slashes];
    if !out.contains(&strict) {
        out.push(strict);
    }
    out
}

/// The transcripts in one `agent-transcripts` folder: `<id>/<id>.jsonl` and `<id>.jsonl`
/// (never inside `subagents/`), with their modification times.
fn transcripts_in(dir: &Utf8Path, budget: &mut usize) -> Vec<(std::time::SystemTime, Utf8PathBuf)> {
    let mut out = Vec::new();
    for entry in dir.read_dir_utf8().into_iter().flatten().flatten() {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let name = entry.file_name().to_owned();
        if name == "subagents" {
            continue;
        }
        let path = entry.path().to_owned();
        let file = if path.is_dir() {
            path.join(format!("{name}.jsonl"))
        } else if name.ends_with(".jsonl") {
            path
        } else {
            continue;
        };
        if let Ok(meta) = std::fs::metadata(&file)
            && meta.is_file()
        {
            out.push((meta.modified().unwrap_or(std::time::UNIX_EPOCH), file));
        }
    }
    out
}

/// Finds a transcript: by id in any project, or the newest one of the project at `cwd`.
pub(crate) fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    let root = projects_root(store)?;
    let mut budget = MAX_SCAN_ENTRIES;
    match query {
        SessionQuery::Latest { cwd } => {
            let newest = encoded_cwds(cwd)
                .into_iter()
                .flat_map(|e| transcripts_in(&root.join(e).join("agent-transcripts"), &mut budget))
                .max_by(|a, b| a.0.cmp(&b.0));
            Ok(newest.map(|(_, path)| SessionRef {
                provider: AgentId::CURSOR,
                session_id: path.file_stem().unwrap_or_default().to_owned(),
                path,
                cwd: Some(cwd.clone()),
            }))
        }
        SessionQuery::Id(id) => {
            if id.is_empty()
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Ok(None);
            }
            for project in root.read_dir_utf8().into_iter().flatten().flatten() {
                let dir = project.path().join("agent-transcripts");
                for file in [
                    dir.join(id).join(format!("{id}.jsonl")),
                    dir.join(format!("{id}.jsonl")),
                ] {
                    if file.is_file() {
                        return Ok(Some(SessionRef {
                            provider: AgentId::CURSOR,
                            session_id: id.clone(),
                            path: file,
                            cwd: None,
                        }));
                    }
                }
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    break;
                }
            }
            Ok(None)
        }
    }
}

#[async_trait]
impl Sessions for Cursor {
    fn read_transcript(
        &self,
        path: &Utf8Path,
    ) -> Result<handoff_core::Transcript, handoff_core::TranscriptError> {
        super::transcript::read(path)
    }

    async fn find_session(
        &self,
        store: &handoff_core::StoreEnv,
        query: &handoff_core::SessionQuery,
    ) -> Result<Option<handoff_core::SessionRef>, handoff_core::TranscriptError> {
        let (store, query) = (store.clone(), query.clone());
        crate::store::blocking(move || find(&store, &query)).await
    }

    // Cursor's chat store is a database no one else writes: nothing is carried into it.
    async fn write_session(
        &self,
        _store: &handoff_core::StoreEnv,
        _transcript: &handoff_core::Transcript,
        _target: &handoff_core::CarryTarget,
    ) -> Result<handoff_core::CarriedSession, handoff_core::TranscriptError> {
        Err(handoff_core::TranscriptError::Unsupported(format!(
            "handoff cannot write {} sessions",
            SPEC.id
        )))
    }

    async fn copy_session(
        &self,
        _store: &handoff_core::StoreEnv,
        _source: &handoff_core::SessionRef,
        _target: &handoff_core::CarryTarget,
    ) -> Result<handoff_core::CarriedSession, handoff_core::TranscriptError> {
        Err(handoff_core::TranscriptError::Unsupported(format!(
            "handoff cannot copy {} sessions",
            SPEC.id
        )))
    }
}
