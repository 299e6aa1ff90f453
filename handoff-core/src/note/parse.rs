//! Reading a note: its front matter, preamble and sections as written, and the bytes of a
//! note file.

use std::io::Read;
use std::path::Path;

use super::markdown::Markdown;
use super::{
    FrontMatter, FrontMatterError, MAX_NOTE_BYTES, RECEIVER_INSTRUCTIONS, Section, heading_name,
};

/// One section of a note as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSection {
    /// Which section.
    pub section: Section,
    /// 1-based line number of its heading.
    pub line: usize,
    /// Its text, without the heading and without leading and trailing blank lines.
    pub body: String,
}

/// A note as parsed by [`parse`]: nothing in it is trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Note {
    /// The front matter, when the note starts with a valid one.
    pub front_matter: Option<FrontMatter>,
    /// Why the note's front matter is not valid, when it has one that is not.
    pub front_matter_error: Option<FrontMatterError>,
    /// Text before the first section (usually the title), blank lines trimmed.
    pub preamble: String,
    /// The sections, in the order they appear (a repeated section appears again).
    pub sections: Vec<NoteSection>,
}

impl Note {
    /// The body of `section`, its occurrences joined by a blank line; `None` when it is missing.
    pub fn body(&self, section: Section) -> Option<String> {
        let bodies: Vec<&str> = self
            .sections
            .iter()
            .filter(|s| s.section == section)
            .map(|s| s.body.as_str())
            .filter(|b| !b.is_empty())
            .collect();
        self.sections
            .iter()
            .any(|s| s.section == section)
            .then(|| bodies.join("\n\n"))
    }
}

/// Lines without leading and trailing blank ones, joined with `\n`.
pub(super) fn trim_blank_lines(lines: &[&str]) -> String {
    let start = lines.iter().position(|l| !l.trim().is_empty());
    let end = lines.iter().rposition(|l| !l.trim().is_empty());
    match (start, end) {
        (Some(start), Some(end)) => lines[start..=end].join("\n"),
        _ => String::new(),
    }
}

/// Parses a note. Never fails: what is wrong with it is for [`check`] to say.
///
/// [`check`]: super::check
pub fn parse(text: &str) -> Note {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut note = Note::default();
    let mut start = 0;
    if lines.first() == Some(&"---") {
        match lines[1..].iter().position(|l| *l == "---") {
            Some(end) => {
                match FrontMatter::parse(&lines[1..1 + end], 2) {
                    Ok(fm) => note.front_matter = Some(fm),
                    Err(err) => note.front_matter_error = Some(err),
                }
                start = end + 2;
            }
            None => {
                note.front_matter_error = Some(FrontMatterError::Unclosed);
                start = 1;
            }
        }
    }
    let offset: usize = text.split_inclusive('\n').take(start).map(str::len).sum();
    let markdown = &text[offset..];

    /// A part of the note after the preamble: a section (with its heading's line), or
    /// handoff's own receiver instructions (dropped).
    enum Part {
        Section(Section, usize),
        Receiver,
    }
    // (part, where its heading starts, where its body starts)
    let mut parts: Vec<(Part, usize, usize)> = Vec::new();
    for section in Markdown::read(markdown).sections() {
        let heading = section.heading_range.start;
        let part = if heading_name(&section.heading).eq_ignore_ascii_case(RECEIVER_INSTRUCTIONS) {
            Part::Receiver
        } else if let Some(s) = Section::from_heading(&section.heading) {
            let line = text[..offset + heading].matches('\n').count() + 1;
            Part::Section(s, line)
        } else {
            // Any other `##` heading is part of the body it is in.
            continue;
        };
        parts.push((part, heading, section.body.start));
    }
    let preamble_end = parts
        .first()
        .map_or(markdown.len(), |(_, heading, _)| *heading);
    note.preamble = lines_of(&markdown[..preamble_end]);
    for (i, (part, _, body_start)) in parts.iter().enumerate() {
        let body_end = parts
            .get(i + 1)
            .map_or(markdown.len(), |(_, next, _)| *next);
        if let Part::Section(section, line) = part {
            note.sections.push(NoteSection {
                section: *section,
                line: *line,
                body: lines_of(&markdown[(*body_start).min(body_end)..body_end]),
            });
        }
    }
    note
}

/// `text` without carriage returns before line ends, and without leading and trailing blank
/// lines.
fn lines_of(text: &str) -> String {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    trim_blank_lines(&lines)
}

/// Why a note file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum NoteReadError {
    /// The file cannot be opened or read.
    #[error("cannot read it: {source}")]
    Io {
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A directory, device, FIFO or socket.
    #[error("not a regular file")]
    NotAFile,
    /// Larger than [`MAX_NOTE_BYTES`].
    #[error("larger than {MAX_NOTE_BYTES} bytes")]
    TooLarge,
    /// Not UTF-8.
    #[error("not valid UTF-8 (at byte {offset})")]
    NotUtf8 {
        /// Where the first invalid byte is.
        offset: usize,
    },
}

/// Checks a note's bytes: at most [`MAX_NOTE_BYTES`], valid UTF-8.
pub fn decode_note(bytes: &[u8]) -> Result<&str, NoteReadError> {
    if bytes.len() > MAX_NOTE_BYTES {
        return Err(NoteReadError::TooLarge);
    }
    std::str::from_utf8(bytes).map_err(|e| NoteReadError::NotUtf8 {
        offset: e.valid_up_to(),
    })
}

/// Reads a note file: a regular file (symlinks followed), at most [`MAX_NOTE_BYTES`], UTF-8.
pub fn read_note(path: &Path) -> Result<String, NoteReadError> {
    let io = |source| NoteReadError::Io { source };
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(NoteReadError::NotAFile);
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_NOTE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    decode_note(&bytes)?;
    String::from_utf8(bytes).map_err(|e| NoteReadError::NotUtf8 {
        offset: e.utf8_error().valid_up_to(),
    })
}
