//! Checking a note: every section present once and written in, a well-formed front matter,
//! and the `handoff note check --json` report.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::markdown::{Markdown, MarkdownKind};
use super::{NOTE_CHECK_SCHEMA, Note, NoteReadError, NoteSection, Section};

/// Words that stand for "not written yet".
const PLACEHOLDERS: [&str; 5] = ["todo", "tbd", "...", "…", "fill in"];

/// Whether a section's body says nothing: only whitespace, comments, placeholders, empty code
/// blocks or the template's guidance.
fn is_empty_body(section: Section, body: &str) -> bool {
    let visible = visible_text(body);
    let guidance = normalize(section.guidance());
    let whole = normalize(&visible);
    if whole.is_empty() || whole == guidance {
        return true;
    }
    visible.lines().all(|line| {
        let line = strip_list_marker(line.trim());
        let line = normalize(line);
        line.is_empty() || line == guidance || PLACEHOLDERS.contains(&line.as_str())
    })
}

/// The text of `body` a reader sees, line by line: HTML comments left out, and code blocks
/// without their fences.
fn visible_text(body: &str) -> String {
    let markdown = Markdown::read(body);
    let mut out = String::new();
    for piece in markdown.pieces() {
        match &piece.kind {
            MarkdownKind::Text | MarkdownKind::Code(_) => out.push_str(markdown.text(piece)),
            MarkdownKind::Html => out.push_str(&without_comments(markdown.text(piece))),
            MarkdownKind::CodeBlock { text, .. } => {
                out.push('\n');
                out.push_str(text);
                out.push('\n');
            }
            MarkdownKind::Heading { .. } | MarkdownKind::ListItem { .. } => {}
        }
    }
    out
}

/// HTML without its comments; an unterminated one runs to the end.
fn without_comments(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find("<!--") {
        out.push_str(&rest[..open]);
        // From the `--` of `<!--`: `<!-->` and `<!--->` are whole comments.
        match rest[open + 2..].find("-->") {
            Some(close) => rest = &rest[open + 2 + close + 3..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// Lowercased, whitespace collapsed.
fn normalize(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// `- x`, `* x`, `+ x`, `1. x`, `1) x` → `x`.
fn strip_list_marker(line: &str) -> &str {
    if let Some(rest) = line
        .strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .or_else(|| line.strip_prefix("+ "))
    {
        return rest.trim_start();
    }
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0
        && let Some(rest) = line[digits..]
            .strip_prefix(". ")
            .or_else(|| line[digits..].strip_prefix(") "))
    {
        return rest.trim_start();
    }
    line
}

/// What is wrong with a note: every list in [`Section::ALL`] order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteErrors {
    /// Sections with no heading.
    pub missing: Vec<Section>,
    /// Sections with nothing written in them.
    pub empty: Vec<Section>,
    /// Sections with more than one heading.
    pub duplicate: Vec<Section>,
    /// Why the front matter is not valid, if it is not.
    pub front_matter: Option<String>,
}

impl NoteErrors {
    /// Whether nothing is wrong.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty()
            && self.empty.is_empty()
            && self.duplicate.is_empty()
            && self.front_matter.is_none()
    }
}

impl fmt::Display for NoteErrors {
    /// `missing sections: Goal, How to verify; empty sections: Open questions`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(sections: &[Section]) -> String {
            sections
                .iter()
                .map(|s| s.title())
                .collect::<Vec<_>>()
                .join(", ")
        }
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!("missing sections: {}", list(&self.missing)));
        }
        if !self.empty.is_empty() {
            parts.push(format!("empty sections: {}", list(&self.empty)));
        }
        if !self.duplicate.is_empty() {
            parts.push(format!("duplicate sections: {}", list(&self.duplicate)));
        }
        if let Some(fm) = &self.front_matter {
            parts.push(format!("front matter: {fm}"));
        }
        f.write_str(&parts.join("; "))
    }
}

impl std::error::Error for NoteErrors {}

/// Checks a note: every section present once and written in ("None" counts; "Git state" may be
/// empty, [`render`] fills it), and a front matter, if any, that follows the format.
pub fn check(note: &Note) -> Result<(), NoteErrors> {
    let mut errors = NoteErrors::default();
    for section in Section::ALL {
        let found: Vec<&NoteSection> = note
            .sections
            .iter()
            .filter(|s| s.section == section)
            .collect();
        if found.is_empty() {
            errors.missing.push(section);
            continue;
        }
        if found.len() > 1 {
            errors.duplicate.push(section);
        }
        if section != Section::GitState && found.iter().all(|s| is_empty_body(section, &s.body)) {
            errors.empty.push(section);
        }
    }
    errors.front_matter = note.front_matter_error.as_ref().map(|e| e.to_string());
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// What `handoff note check --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteCheck {
    /// Always [`NOTE_CHECK_SCHEMA`].
    pub schema_version: String,
    /// The file checked, as given.
    pub file: String,
    /// Whether the note passed.
    pub ok: bool,
    /// Sections with no heading.
    pub missing: Vec<Section>,
    /// Sections with nothing written in them.
    pub empty: Vec<Section>,
    /// Sections with more than one heading.
    pub duplicate: Vec<Section>,
    /// Why the front matter is not valid, if it is not.
    pub front_matter: Option<String>,
    /// Why the file could not be read, if it could not.
    pub error: Option<String>,
}

impl NoteCheck {
    /// The report for `file`: its check result, or why it could not be read.
    pub fn new(file: &str, outcome: Result<Result<(), NoteErrors>, &NoteReadError>) -> NoteCheck {
        let (errors, error) = match outcome {
            Ok(Ok(())) => (NoteErrors::default(), None),
            Ok(Err(errors)) => (errors, None),
            Err(err) => (NoteErrors::default(), Some(err.to_string())),
        };
        NoteCheck {
            schema_version: NOTE_CHECK_SCHEMA.to_owned(),
            file: file.to_owned(),
            ok: errors.is_empty() && error.is_none(),
            missing: errors.missing,
            empty: errors.empty,
            duplicate: errors.duplicate,
            front_matter: errors.front_matter,
            error,
        }
    }
}
