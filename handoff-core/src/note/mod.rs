//! Handoff notes: the resumption brief an outgoing agent writes for whoever continues its work.
//!
//! A note is Markdown with nine `## ` sections, in this order: Goal, Current state, Done and
//! verified, In progress, Next steps, Decisions and constraints, Open questions, How to verify,
//! Git state ([`Section::ALL`]). The author writes the first eight; "None" is a valid answer.
//! Everything about the repository — the front matter and the "Git state" section — is written
//! by [`render`] from a [`GitState`] read from the repository, never taken from the author, and
//! [`render`] appends a "Receiver instructions" section that tells the next agent how to start.
//!
//! # Layout of a rendered note
//!
//! ```text
//! ---
//! schema: "handoff.note.v1"
//! created_at: "2026-01-02T03:04:05.678Z"
//! source_provider: "claude"
//! source_model: "opus"
//! repository: "/home/me/project"
//! branch: "main"
//! head: "0123…(40 or 64 hex digits)"
//! remote: "origin"
//! remote_url: "https://example.com/me/project.git"
//! upstream: "refs/remotes/origin/main"
//! pushed: false
//! uncommitted:
//!   - "modified src/lib.rs"
//!   - "untracked notes/todo.txt"
//! ---
//!
//! # Handoff note
//!
//! ## Goal
//! …
//! ## Git state
//! …
//! ## Receiver instructions
//! …
//! ```
//!
//! # The front matter
//!
//! Strict on purpose, so that an agent can read it at a glance and a program can parse it
//! without guessing (every front matter handoff writes is also valid YAML):
//!
//! * the note's first line is `---`, and the block ends at the next line that is exactly `---`;
//! * every line in between is `key: value`, with a known lowercase key, each key at most once,
//!   in any order, no blank lines and no comments;
//! * every value is one JSON literal: a double-quoted JSON string, `true`, `false`, `null`, or a
//!   non-negative integer;
//! * `uncommitted` is either `uncommitted: []` or `uncommitted:` followed by one line per file,
//!   `  - "<status> <path>"`, where `<status>` is `untracked`, or `+`-joined words out of
//!   `staged`, `modified` and `deleted` (`staged+modified`);
//! * keys: `schema` (always `"handoff.note.v1"`), `repository` (the worktree root), `branch`
//!   (null when HEAD is detached), `head` (null on an unborn branch), `remote` and `remote_url`
//!   (credentials removed), `upstream` (the tracking ref), `pushed` (true, false, or null when
//!   there is no upstream) and `uncommitted` are required; `created_at`, `source_provider`,
//!   `source_model` and `uncommitted_omitted` (how many files were left out of the list) are
//!   optional.
//!
//! # Sections
//!
//! The Markdown after the front matter is read as CommonMark, by the one reader of notes
//! ([`Markdown`]). A section starts at a top-level ATX heading of level 2 (`## Goal`; the name is
//! matched case-insensitively, a trailing `:`, closing `#`s and HTML comments are ignored) and
//! runs to the next such heading: a heading inside a code block (an unterminated fence runs to
//! the end of the note), an HTML block (a comment), a list item or a block quote is not one.
//! Other headings (`#`, `###`, setext, `## Anything else`) are part of the body they are in. Text before the first section is the preamble (usually the `# ` title). A
//! `## Receiver instructions` section is handoff's own: it is dropped when a note is parsed and
//! written anew by [`render`].
//!
//! [`check`] reports, exactly and in section order, the sections that are **missing**, those
//! that are **empty** — nothing but whitespace, HTML comments (the template's guidance), the
//! template's guidance as plain text, or a placeholder (`TODO`, `TBD`, `...`, `…`) — and those
//! that appear more than once (**duplicate**: it would be unclear which one the receiver should
//! trust). A section out of order is not a problem: [`render`] writes them in order. "Git state"
//! must be present but may be empty, as [`render`] replaces it. A front matter that does not
//! follow the rules above is reported too.

mod check;
mod front_matter;
mod git_state;
mod markdown;
mod parse;
mod render;

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use self::check::{NoteCheck, NoteErrors, check};
pub use self::front_matter::{FrontMatter, FrontMatterError};
pub use self::git_state::{GitRemote, GitState, NoteOrigin, status_words, strip_url_credentials};
pub use self::markdown::{Markdown, MarkdownKind, MarkdownPiece, MarkdownSection};
pub use self::parse::{Note, NoteReadError, NoteSection, decode_note, parse, read_note};
pub use self::render::{render, template};

/// The `schema` value of a rendered note's front matter.
pub const NOTE_SCHEMA: &str = "handoff.note.v1";

/// Schema version of a [`NoteCheck`] report.
pub const NOTE_CHECK_SCHEMA: &str = "handoff.note-check.v1";

/// The largest note handoff reads, in bytes.
pub const MAX_NOTE_BYTES: usize = 256 * 1024;

/// How many uncommitted files a rendered note lists; the rest are counted.
pub const MAX_LISTED_UNCOMMITTED: usize = 100;

/// The title of the section [`render`] appends for the receiving agent.
pub const RECEIVER_INSTRUCTIONS: &str = "Receiver instructions";

/// One of the nine sections of a handoff note.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum Section {
    /// What the work is for and when it is done.
    #[serde(rename = "Goal")]
    Goal,
    /// Where the work stands.
    #[serde(rename = "Current state")]
    CurrentState,
    /// Finished work, each item with the command that verified it.
    #[serde(rename = "Done and verified")]
    DoneAndVerified,
    /// Half-done work.
    #[serde(rename = "In progress")]
    InProgress,
    /// What to do next, in order.
    #[serde(rename = "Next steps")]
    NextSteps,
    /// Decisions with their reasons, constraints, non-goals, failed approaches.
    #[serde(rename = "Decisions and constraints")]
    DecisionsAndConstraints,
    /// What only the person can answer.
    #[serde(rename = "Open questions")]
    OpenQuestions,
    /// Commands that build, test and run the work, with expected results.
    #[serde(rename = "How to verify")]
    HowToVerify,
    /// The repository, branch, commit, remote and uncommitted files (written by handoff).
    #[serde(rename = "Git state")]
    GitState,
}

impl Section {
    /// The nine sections, in the order a note has them.
    pub const ALL: [Section; 9] = [
        Section::Goal,
        Section::CurrentState,
        Section::DoneAndVerified,
        Section::InProgress,
        Section::NextSteps,
        Section::DecisionsAndConstraints,
        Section::OpenQuestions,
        Section::HowToVerify,
        Section::GitState,
    ];

    /// The heading text (`Current state`).
    pub fn title(self) -> &'static str {
        match self {
            Section::Goal => "Goal",
            Section::CurrentState => "Current state",
            Section::DoneAndVerified => "Done and verified",
            Section::InProgress => "In progress",
            Section::NextSteps => "Next steps",
            Section::DecisionsAndConstraints => "Decisions and constraints",
            Section::OpenQuestions => "Open questions",
            Section::HowToVerify => "How to verify",
            Section::GitState => "Git state",
        }
    }

    /// One line telling the author what belongs in the section.
    pub fn guidance(self) -> &'static str {
        match self {
            Section::Goal => {
                "What the work is for and what \"done\" means, in the person's words; link the issue or pull request."
            }
            Section::CurrentState => "Where the work stands now, in two or three sentences.",
            Section::DoneAndVerified => {
                "Each finished item with the command that checked it and what it printed; anything unchecked goes under In progress."
            }
            Section::InProgress => {
                "Half-done work, with failing tests and error messages quoted exactly."
            }
            Section::NextSteps => {
                "What to do next, in order; the first step must be startable without asking anyone."
            }
            Section::DecisionsAndConstraints => {
                "Decisions and why, the person's preferences, non-goals, and approaches that failed (and why)."
            }
            Section::OpenQuestions => {
                "Questions only the person can answer, and what you are unsure of; \"None\" if there are none."
            }
            Section::HowToVerify => {
                "The exact commands that build, test and run the work, each with the result to expect."
            }
            Section::GitState => {
                "Filled in from the repository by `handoff note render`; leave this section as it is."
            }
        }
    }

    /// The section a heading names, matched case-insensitively with runs of whitespace as one
    /// space and a trailing `:` ignored.
    pub fn from_heading(text: &str) -> Option<Section> {
        let name = heading_name(text);
        Section::ALL
            .into_iter()
            .find(|s| s.title().eq_ignore_ascii_case(&name))
    }
}

/// A heading's name for matching: comments cut, whitespace collapsed, a trailing `:` removed.
fn heading_name(text: &str) -> String {
    let text = text.split("<!--").next().unwrap_or_default();
    let name = text.split_whitespace().collect::<Vec<_>>().join(" ");
    name.trim_end_matches(':').trim_end().to_owned()
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}

#[cfg(test)]
mod tests;
