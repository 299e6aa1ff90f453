//! A continuation receiver's turn in its Claude Code session file: picking (or forking) the
//! session, writing the prompt to it, and appending the answer.

use std::process::ExitCode;

use crate::fake::Ctx;
use crate::fake::args;
use crate::fake::claude_store;
use crate::fake::json::J;
use crate::fake::receiver;
use crate::fake::util;
use crate::fixtures::CLAUDE_VERSION as VERSION;

use super::fail;

/// A receiver's turn, opened in its session file.
pub(super) struct OpenTurn {
    /// The session in use.
    pub(super) id: String,
    /// The last assistant text of the session it resumed, before this turn.
    pub(super) previous: Option<String>,
    /// The session file and what its lines record; `None` without a store.
    file: Option<(std::path::PathBuf, claude_store::Envelope)>,
    /// The `uuid` of the prompt's `user` line.
    parent: String,
    prompt_id: String,
}

impl OpenTurn {
    /// Appends the turn's answer to the session file.
    pub(super) fn close(&self, prompt: &str, events: &[J]) {
        let Some((path, envelope)) = &self.file else {
            return;
        };
        let lines = envelope.answer_lines(&self.parent, &self.prompt_id, prompt, events);
        if let Err(e) = claude_store::append(path, &lines) {
            util::err_line(&format!(
                "fake-agent: cannot write session {}: {e}",
                path.display()
            ));
        }
    }
}

/// Picks the receiver's session — a new one (`--session-id` or a fresh UUID), the resumed one
/// (`--resume <id>`), or a fork of it (`--resume <id> --fork-session [--session-id <new>]`) — and
/// writes the turn's prompt to it, after `FAKE_AGENT_RECEIVER_DELAY_MS`.
/// `FAKE_AGENT_RECEIVER_FRESH=1` ignores `--resume`.
pub(super) fn open_turn(
    ctx: &Ctx,
    parsed: &args::Parsed,
    cwd: &std::path::Path,
    prompt: &str,
    permission_mode: &str,
) -> Result<OpenTurn, ExitCode> {
    let config = claude_store::config_dir();
    let chosen = parsed.value("session-id").map(str::to_owned);
    let resume = parsed
        .value("resume")
        .filter(|_| !receiver::fresh(&ctx.settings));
    let not_found = |id: &str| fail(&format!("No conversation found with session ID: {id}"));
    let in_use = |id: &str| {
        config
            .as_deref()
            .is_some_and(|c| claude_store::exists(c, id))
    };
    // (session id, its file, the file to fork from)
    let (id, path, source) = match resume {
        Some(src) => {
            let Some(src_path) = config
                .as_deref()
                .and_then(|c| claude_store::find(c, cwd, src))
            else {
                return Err(not_found(src));
            };
            if parsed.has("fork-session") {
                let new = chosen.unwrap_or_else(util::uuid);
                if in_use(&new) {
                    return Err(fail(&format!("Error: Session ID {new} is already in use.")));
                }
                let dest = config
                    .as_deref()
                    .map(|c| claude_store::project_dir(c, cwd).join(format!("{new}.jsonl")));
                (new, dest, Some((src.to_owned(), src_path)))
            } else {
                (src.to_owned(), Some(src_path), None)
            }
        }
        None => {
            let id = chosen.unwrap_or_else(util::uuid);
            if in_use(&id) {
                return Err(fail(&format!("Error: Session ID {id} is already in use.")));
            }
            let path = config
                .as_deref()
                .map(|c| claude_store::project_dir(c, cwd).join(format!("{id}.jsonl")));
            (id, path, None)
        }
    };
    let previous = match (&source, &path) {
        (Some((_, src_path)), _) => {
            claude_store::last_assistant_text(&claude_store::read_lines(src_path))
        }
        (None, Some(p)) => claude_store::last_assistant_text(&claude_store::read_lines(p)),
        (None, None) => None,
    };

    receiver::pause(&ctx.settings);
    let prompt_id = util::uuid();
    let Some(path) = path else {
        util::err_line(
            "fake-agent: no session store for claude (HOME and CLAUDE_CONFIG_DIR unset)",
        );
        return Ok(OpenTurn {
            id,
            previous,
            file: None,
            parent: util::uuid(),
            prompt_id,
        });
    };
    if let Some((src, src_path)) = &source
        && let Err(e) = claude_store::fork(src_path, src, &path, &id)
    {
        return Err(fail(&format!(
            "fake-agent: cannot fork session {src} into {}: {e}",
            path.display()
        )));
    }
    let parent = claude_store::last_uuid(&claude_store::read_lines(&path));
    let envelope = claude_store::Envelope {
        session_id: id.clone(),
        cwd: receiver::canonical(cwd).to_string_lossy().into_owned(),
        version: ctx.version(VERSION),
        git_branch: receiver::git_branch(cwd),
        permission_mode: permission_mode.to_owned(),
    };
    let (lines, user) = envelope.prompt_lines(parent.as_deref(), &prompt_id, prompt);
    if let Err(e) = claude_store::append(&path, &lines) {
        return Err(fail(&format!(
            "fake-agent: cannot write session {}: {e}",
            path.display()
        )));
    }
    Ok(OpenTurn {
        id,
        previous,
        file: Some((path, envelope)),
        parent: user,
        prompt_id,
    })
}
