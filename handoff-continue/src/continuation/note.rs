//! Phase 5: the note, rendered against the receiver's worktree with the git state read from
//! the repository, written outside the repository with a bounded recap of the conversation;
//! and the receiver's first prompt.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, AgentRef, ContinueNote, ContinueResult, NoteOrigin, ReceiverRole, now_iso, redact,
    render_note,
};
use sha2::{Digest, Sha256};

use super::checkpoint::{Moved, predicted};
use super::prepare::Conversation;
use super::validate::Plan;
use crate::carry;
use crate::error::{Failed, OrFail, OrReject, Phase, Rejection};
use crate::private::write_private_file;

/// The note as written.
pub(super) struct Written {
    /// The rendered note, secrets masked.
    pub rendered: String,
    pub path: Utf8PathBuf,
    /// `sha256:<hex>` of the rendered note.
    pub digest: String,
    /// The recap of the conversation, when there is a source.
    pub recap_text: Option<String>,
}

/// The note's file name: when and for whom.
pub(super) fn file_name(target: &AgentId) -> String {
    format!("{}-{target}.md", now_iso().replace([':', '.'], ""))
}

/// Fills in where the note will be and what the checkpoint will hold.
pub(super) fn predict(result: &mut ContinueResult, plan: &Plan, name: &str) {
    let path = plan
        .note_dir
        .join(
            plan.task
                .as_ref()
                .map_or_else(|| "new-task".to_owned(), |t| t.id.to_string()),
        )
        .join(name);
    result.note = Some(ContinueNote { path, digest: None });
    result.checkpoint = Some(predicted(plan));
}

/// In a dry run: the recap as it would be, written nowhere.
pub(super) fn predict_recap(
    result: &mut ContinueResult,
    conv: &Conversation,
    known: &[String],
) -> Result<(), Rejection> {
    let mut report = conv.carry_report.clone();
    if let (Some(src), Some(note)) = (&conv.source, &result.note) {
        let (recap, _, masked) =
            carry::write_recap(&note.path, &src.transcript, known, true).rejected("recap")?;
        report.recap = Some(recap);
        report.secrets_masked += masked;
    }
    result.carry = Some(report);
    Ok(())
}

/// Renders and writes the note and the recap.
pub(super) fn write(
    moved: &Moved,
    name: &str,
    conv: &mut Conversation,
    known: &[String],
    result: &mut ContinueResult,
) -> Result<Written, Failed> {
    let git_state = handoff_git::repo_state(&moved.work_root).failed(Phase::Note)?;
    let origin = NoteOrigin {
        created_at: Some(now_iso()),
        source_provider: Some(moved.from.provider.clone()),
        source_model: moved.from.model.clone(),
        generated: moved.generated_note,
    };
    let (rendered, note_secrets) = redact(&render_note(&moved.note, &git_state, &origin), known);
    conv.carry_report.secrets_masked += note_secrets;
    let path = moved.note_dir.join(moved.work_task.id.as_str()).join(name);
    write_private_file(&path, &rendered).failed(Phase::Note)?;
    let digest = format!("sha256:{:x}", Sha256::digest(rendered.as_bytes()));
    result.note = Some(ContinueNote {
        path: path.clone(),
        digest: Some(digest.clone()),
    });
    let recap_text = match &conv.source {
        Some(src) => {
            let (recap, text, masked) =
                carry::write_recap(&path, &src.transcript, known, false).failed(Phase::Note)?;
            conv.carry_report.recap = Some(recap);
            conv.carry_report.secrets_masked += masked;
            Some(text)
        }
        None => None,
    };
    Ok(Written {
        rendered,
        path,
        digest,
        recap_text,
    })
}

/// The receiver's first prompt: who hands over and how, the note, the message.
pub(super) fn receiver_prompt(
    note: &str,
    note_path: &Utf8Path,
    source: &AgentRef,
    role: ReceiverRole,
    message: Option<&str>,
    context: Option<&str>,
) -> String {
    let from = match &source.model {
        Some(m) => format!("{} ({m})", source.provider),
        None => source.provider.to_string(),
    };
    let role_line = match role {
        ReceiverRole::Implement => {
            "You take this task over and carry it on in this worktree: you may edit files and run commands."
        }
        ReceiverRole::Review => {
            "You take this task over as its reviewer: read and run read-only commands, change nothing in the worktree, and report what you find."
        }
    };
    let mut p = format!(
        "{from} handed this task over to you. {role_line}\n\
         The handoff note below is also at {note_path}. Follow its receiver instructions.\n\n\
         {note}"
    );
    if let Some(c) = context {
        p.push_str("\n\n");
        p.push_str(c);
        p.push('\n');
    }
    if let Some(m) = message {
        p.push_str("\n\n## Message from the user\n\n");
        p.push_str(m);
        p.push('\n');
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_names_the_source_the_note_and_the_message() {
        let source = AgentRef {
            provider: AgentId::CLAUDE,
            model: Some("opus".into()),
        };
        let p = receiver_prompt(
            "NOTE",
            Utf8Path::new("/s/n.md"),
            &source,
            ReceiverRole::Review,
            Some("look at the parser"),
            None,
        );
        assert!(
            p.starts_with("claude (opus) handed this task over to you."),
            "{p}"
        );
        assert!(p.contains("change nothing") && p.contains("/s/n.md") && p.contains("\n\nNOTE"));
        assert!(
            p.ends_with("## Message from the user\n\nlook at the parser\n"),
            "{p}"
        );
    }
}
