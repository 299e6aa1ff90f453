//! Phase 6: the conversation, written into the receiver's store.

use camino::Utf8Path;

use super::prepare::Conversation;
use crate::carry::{self, Carried};
use crate::error::{Failed, Phase};

/// Carries the planned conversation into the receiver's store (rooted at `work_root`) and
/// removes the earlier copy it replaces. `None` when nothing is carried.
pub(super) async fn perform(
    conv: &mut Conversation,
    work_root: &Utf8Path,
) -> Result<Option<Carried>, Failed> {
    // The receiver as planned (resuming) knows its store.
    let (Some(c), Some(src), Some(p)) = (&conv.planned_carry, &conv.source, &conv.planned) else {
        return Ok(None);
    };
    let done = carry::perform(c, src, p, work_root).await.map_err(|e| {
        Failed::new(
            Phase::Carry,
            format!("the conversation was not carried: {e}"),
        )
    })?;
    conv.request.resume = Some(done.resume.clone());
    let report = &mut conv.carry_report;
    report.session_id = Some(done.session_id.clone());
    report.files = done.files.clone();
    report.bytes = done.bytes;
    report.warnings.extend(done.warnings.iter().cloned());
    report.warnings.dedup();
    if let Some((old, path)) = &conv.replace
        && *old != done.session_id
        && std::fs::remove_file(path).is_ok()
    {
        // A Claude Code session keeps sub-agent transcripts and large tool results in a folder
        // named after it.
        let companion = path.with_extension("");
        if companion.is_dir() && companion.file_name() == Some(old.as_str()) {
            let _ = std::fs::remove_dir_all(&companion);
        }
        report.replaced = Some(old.clone());
    }
    Ok(Some(done))
}
