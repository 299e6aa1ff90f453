//! The bounded recap sent with the note, what the result and the timeline say of a carry.

use super::*;

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
