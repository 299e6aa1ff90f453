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
//! A section starts at a level-2 ATX heading (`## Goal`; the name is matched case-insensitively,
//! a trailing `:` or closing `#`s are ignored) outside fenced code and HTML comments, and runs to
//! the next such heading. Other headings (`#`, `###`, `## Anything else`) are part of the body
//! they are in. Text before the first section is the preamble (usually the `# ` title). A
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

use std::fmt;
use std::io::Read;
use std::path::Path;

use camino::Utf8PathBuf;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::AgentId;
use crate::workspace::StatusChange;

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

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}

/// A repository's state as a note records it, read from the repository (`handoff-git`'s
/// `repo_state`), never from the note's author.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitState {
    /// The worktree root.
    #[schemars(with = "String")]
    pub repository: Utf8PathBuf,
    /// The checked-out branch's short name (`main`); null when HEAD is detached.
    pub branch: Option<String>,
    /// The commit HEAD points at (hex); null on an unborn branch.
    pub head: Option<String>,
    /// The branch's remote (its configured one, else `origin`), if there is one.
    pub remote: Option<GitRemote>,
    /// The remote-tracking ref HEAD was compared with (`refs/remotes/origin/main`), if it exists.
    pub upstream: Option<String>,
    /// Whether HEAD is contained in `upstream`; null without an upstream, or when it could not
    /// be told.
    pub pushed: Option<bool>,
    /// What `git status` reports, sorted by path.
    pub uncommitted: Vec<StatusChange>,
}

/// A remote of a repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitRemote {
    /// The remote's name (`origin`).
    pub name: String,
    /// Its URL with any credentials removed ([`strip_url_credentials`]); null if none is set.
    pub url: Option<String>,
}

/// Where a note came from, recorded in its front matter when given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteOrigin {
    /// When the note was rendered (ISO-8601 UTC).
    pub created_at: Option<String>,
    /// The agent that wrote the note.
    pub source_provider: Option<AgentId>,
    /// The model it ran.
    pub source_model: Option<String>,
}

/// `url` without the credentials it may carry: the user information of a `scheme://user:pass@host`
/// URL or of a `user@host:path` scp-like address is removed, and so are the query and fragment
/// of a `scheme://` URL (where tokens are sometimes put). Local paths are returned unchanged.
pub fn strip_url_credentials(url: &str) -> String {
    if let Some(scheme_end) = url.find("://") {
        let scheme = &url[..scheme_end];
        let is_scheme = scheme
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic())
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
        if is_scheme {
            let rest = &url[scheme_end + 3..];
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let authority = &rest[..authority_end];
            let host = authority
                .rfind('@')
                .map_or(authority, |at| &authority[at + 1..]);
            let tail = &rest[authority_end..];
            let tail = tail.find(['?', '#']).map_or(tail, |end| &tail[..end]);
            return format!("{scheme}://{host}{tail}");
        }
    }
    // scp-like `[user@]host:path`: the user information ends at the last `@` before the first
    // `/`, and a `:` must follow it before any `/`.
    let first_slash = url.find('/').unwrap_or(url.len());
    if let Some(at) = url[..first_slash].rfind('@') {
        let after = &url[at + 1..];
        let colon = after.find(':');
        let slash = after.find('/');
        if colon.is_some_and(|c| slash.is_none_or(|s| c < s)) {
            return after.to_owned();
        }
    }
    url.to_owned()
}

/// The status of an uncommitted file as the front matter writes it: `untracked`, or `+`-joined
/// `staged`, `modified`, `deleted`.
pub fn status_words(change: &StatusChange) -> String {
    if change.untracked {
        return "untracked".to_owned();
    }
    let mut words = Vec::new();
    if change.staged {
        words.push("staged");
    }
    if change.deleted {
        words.push("deleted");
    } else if change.unstaged {
        words.push("modified");
    }
    if words.is_empty() {
        // Not something status reports; kept readable rather than dropped.
        words.push("unchanged");
    }
    words.join("+")
}

/// Reads `status_words` back into a [`StatusChange`] for `path`.
fn parse_status_words(words: &str, path: &str) -> Option<StatusChange> {
    let mut change = StatusChange {
        path: path.to_owned(),
        staged: false,
        unstaged: false,
        untracked: false,
        deleted: false,
    };
    if words == "untracked" {
        change.untracked = true;
        return Some(change);
    }
    if words == "unchanged" {
        return Some(change);
    }
    let mut seen_worktree = false;
    for word in words.split('+') {
        match word {
            "staged" if !change.staged && !seen_worktree => change.staged = true,
            "modified" | "deleted" if !seen_worktree => {
                seen_worktree = true;
                change.unstaged = true;
                change.deleted = word == "deleted";
            }
            _ => return None,
        }
    }
    Some(change)
}

// ---------------------------------------------------------------------------------------------
// Markdown scanning: which lines are level-2 headings, outside fenced code and HTML comments.
// ---------------------------------------------------------------------------------------------

/// Where a line scan is: inside a fenced code block (its fence character and length), inside an
/// HTML comment, or neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Scanner {
    fence: Option<(char, usize)>,
    comment: bool,
}

impl Scanner {
    /// Classifies `line` and moves past it: returns the text of a level-2 heading when the line
    /// is one (outside code and comments).
    fn line<'a>(&mut self, line: &'a str) -> Option<&'a str> {
        if let Some((ch, len)) = self.fence {
            if closes_fence(line, ch, len) {
                self.fence = None;
            }
            return None;
        }
        if self.comment {
            self.comment = ends_in_comment(line, true);
            return None;
        }
        if let Some(text) = heading2(line) {
            self.comment = ends_in_comment(line, false);
            return Some(text);
        }
        if let Some(fence) = opens_fence(line) {
            self.fence = Some(fence);
            return None;
        }
        self.comment = ends_in_comment(line, false);
        None
    }

    /// What closes whatever the scan is still inside of.
    fn closer(&self) -> Option<String> {
        match (self.fence, self.comment) {
            (Some((ch, len)), _) => Some(ch.to_string().repeat(len)),
            (None, true) => Some("-->".to_owned()),
            (None, false) => None,
        }
    }
}

/// Up to three leading spaces removed, as Markdown allows before a heading or fence.
fn unindent(line: &str) -> Option<&str> {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    (spaces <= 3).then(|| &line[spaces..])
}

/// The raw text of a level-2 ATX heading (`## Text ##`), closing `#`s removed.
fn heading2(line: &str) -> Option<&str> {
    let rest = unindent(line)?.strip_prefix("##")?;
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    let without_closing = text.trim_end_matches('#');
    let text = if without_closing.len() < text.len()
        && (without_closing.is_empty() || without_closing.ends_with([' ', '\t']))
    {
        without_closing.trim_end()
    } else {
        text
    };
    Some(text)
}

/// A heading's name for matching: comments cut, whitespace collapsed, a trailing `:` removed.
fn heading_name(text: &str) -> String {
    let text = text.split("<!--").next().unwrap_or_default();
    let name = text.split_whitespace().collect::<Vec<_>>().join(" ");
    name.trim_end_matches(':').trim_end().to_owned()
}

/// A fence opening (three or more backticks or tildes): its character and length.
fn opens_fence(line: &str) -> Option<(char, usize)> {
    let rest = unindent(line)?;
    let ch = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let len = rest.len() - rest.trim_start_matches(ch).len();
    if len < 3 {
        return None;
    }
    // A backtick fence's info string cannot hold a backtick (it would be inline code).
    if ch == '`' && rest[len..].contains('`') {
        return None;
    }
    Some((ch, len))
}

fn closes_fence(line: &str, ch: char, len: usize) -> bool {
    let Some(rest) = unindent(line) else {
        return false;
    };
    let run = rest.len() - rest.trim_start_matches(ch).len();
    run >= len && rest[run..].trim().is_empty()
}

/// Whether an HTML comment is still open at the end of `line`, given whether one was open at
/// its start.
fn ends_in_comment(line: &str, mut open: bool) -> bool {
    let mut rest = line;
    loop {
        let marker = if open { "-->" } else { "<!--" };
        match rest.find(marker) {
            Some(at) => {
                rest = &rest[at + marker.len()..];
                open = !open;
            }
            None => return open,
        }
    }
}

/// The text of `body` a reader sees: HTML comments removed (outside fenced code).
fn visible_text(body: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<(char, usize)> = None;
    let mut comment = false;
    for line in body.lines() {
        if let Some((ch, len)) = fence {
            if closes_fence(line, ch, len) {
                fence = None;
            }
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if !comment && let Some(f) = opens_fence(line) {
            fence = Some(f);
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut rest = line;
        loop {
            if comment {
                match rest.find("-->") {
                    Some(at) => {
                        rest = &rest[at + 3..];
                        comment = false;
                    }
                    None => break,
                }
            } else {
                match rest.find("<!--") {
                    Some(at) => {
                        out.push_str(&rest[..at]);
                        rest = &rest[at + 4..];
                        comment = true;
                    }
                    None => {
                        out.push_str(rest);
                        break;
                    }
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Words that stand for "not written yet".
const PLACEHOLDERS: [&str; 5] = ["todo", "tbd", "...", "…", "fill in"];

/// Whether a section's body says nothing: only whitespace, comments, placeholders, bare fences
/// or the template's guidance.
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
        line.is_empty()
            || line == guidance
            || PLACEHOLDERS.contains(&line.as_str())
            || opens_fence(&line).is_some()
    })
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

// ---------------------------------------------------------------------------------------------
// The front matter.
// ---------------------------------------------------------------------------------------------

/// The `---` block at the top of a rendered note: where it came from and the repository's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontMatter {
    /// Who wrote the note, and when.
    pub origin: NoteOrigin,
    /// The repository's state (its `uncommitted` list at most [`MAX_LISTED_UNCOMMITTED`] long).
    pub git: GitState,
    /// How many uncommitted files were left out of the list.
    pub uncommitted_omitted: u64,
}

/// Why a front matter is not one handoff wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    /// No closing `---` line.
    #[error("no closing '---' line")]
    Unclosed,
    /// A line that is neither `key: value` nor a list item where one may be.
    #[error("line {line}: expected 'key: value'")]
    BadLine {
        /// 1-based line number in the note.
        line: usize,
    },
    /// A key handoff does not write.
    #[error("line {line}: unknown key '{key}'")]
    UnknownKey {
        /// 1-based line number in the note.
        line: usize,
        /// The key.
        key: String,
    },
    /// A key given twice.
    #[error("line {line}: '{key}' is given twice")]
    DuplicateKey {
        /// 1-based line number in the note.
        line: usize,
        /// The key.
        key: String,
    },
    /// A value of the wrong kind.
    #[error("line {line}: '{key}' must be {expected}")]
    BadValue {
        /// 1-based line number in the note.
        line: usize,
        /// The key.
        key: String,
        /// What it must be.
        expected: &'static str,
    },
    /// A required key is absent.
    #[error("'{key}' is missing")]
    MissingKey {
        /// The key.
        key: &'static str,
    },
    /// `schema` names another format.
    #[error("schema is {found:?}, expected {NOTE_SCHEMA:?}")]
    WrongSchema {
        /// What it said.
        found: String,
    },
}

const REQUIRED_KEYS: [&str; 9] = [
    "schema",
    "repository",
    "branch",
    "head",
    "remote",
    "remote_url",
    "upstream",
    "pushed",
    "uncommitted",
];
const OPTIONAL_KEYS: [&str; 4] = [
    "created_at",
    "source_provider",
    "source_model",
    "uncommitted_omitted",
];

impl FrontMatter {
    /// The front matter for a note about `git`, written by `origin`; lists at most
    /// [`MAX_LISTED_UNCOMMITTED`] uncommitted files.
    pub fn new(git: &GitState, origin: &NoteOrigin) -> FrontMatter {
        let mut git = git.clone();
        let omitted = git.uncommitted.len().saturating_sub(MAX_LISTED_UNCOMMITTED);
        git.uncommitted.truncate(MAX_LISTED_UNCOMMITTED);
        FrontMatter {
            origin: origin.clone(),
            git,
            uncommitted_omitted: omitted as u64,
        }
    }

    /// The block, from its opening `---` line to its closing one (ending with a newline).
    pub fn render(&self) -> String {
        fn json(value: &str) -> String {
            serde_json::Value::from(value).to_string()
        }
        fn opt(value: Option<&str>) -> String {
            value.map_or_else(|| "null".to_owned(), json)
        }
        let mut out = String::from("---\n");
        let mut line = |key: &str, value: String| {
            out.push_str(key);
            out.push_str(": ");
            out.push_str(&value);
            out.push('\n');
        };
        line("schema", json(NOTE_SCHEMA));
        if let Some(at) = &self.origin.created_at {
            line("created_at", json(at));
        }
        if let Some(agent) = &self.origin.source_provider {
            line("source_provider", json(agent.as_str()));
        }
        if let Some(model) = &self.origin.source_model {
            line("source_model", json(model));
        }
        let git = &self.git;
        line("repository", json(git.repository.as_str()));
        line("branch", opt(git.branch.as_deref()));
        line("head", opt(git.head.as_deref()));
        line("remote", opt(git.remote.as_ref().map(|r| r.name.as_str())));
        line(
            "remote_url",
            opt(git.remote.as_ref().and_then(|r| r.url.as_deref())),
        );
        line("upstream", opt(git.upstream.as_deref()));
        line(
            "pushed",
            git.pushed.map_or("null".to_owned(), |p| p.to_string()),
        );
        if git.uncommitted.is_empty() {
            line("uncommitted", "[]".to_owned());
        } else {
            out.push_str("uncommitted:\n");
            for change in &git.uncommitted {
                out.push_str("  - ");
                out.push_str(&json(&format!("{} {}", status_words(change), change.path)));
                out.push('\n');
            }
        }
        if self.uncommitted_omitted > 0 {
            out.push_str(&format!(
                "uncommitted_omitted: {}\n",
                self.uncommitted_omitted
            ));
        }
        out.push_str("---\n");
        out
    }

    /// Parses the lines between the `---` lines; `first_line` is the 1-based number of the first.
    fn parse(lines: &[&str], first_line: usize) -> Result<FrontMatter, FrontMatterError> {
        use serde_json::Value;
        let mut values: std::collections::BTreeMap<&'static str, (usize, Value)> =
            Default::default();
        let mut items: Option<Vec<StatusChange>> = None;
        let mut in_list = false;
        for (i, raw) in lines.iter().enumerate() {
            let line = first_line + i;
            if let Some(item) = raw.strip_prefix("  - ") {
                if !in_list {
                    return Err(FrontMatterError::BadLine { line });
                }
                let bad = || FrontMatterError::BadValue {
                    line,
                    key: "uncommitted".to_owned(),
                    expected: "a list of \"<status> <path>\" strings",
                };
                let text: String = serde_json::from_str(item).map_err(|_| bad())?;
                let (words, path) = text.split_once(' ').ok_or_else(bad)?;
                if path.is_empty() {
                    return Err(bad());
                }
                let change = parse_status_words(words, path).ok_or_else(bad)?;
                items.get_or_insert_with(Vec::new).push(change);
                continue;
            }
            if in_list && items.is_none() {
                return Err(FrontMatterError::BadValue {
                    line: line - 1,
                    key: "uncommitted".to_owned(),
                    expected: "[] or followed by \"  - \" lines",
                });
            }
            in_list = false;
            let (key, value) = raw
                .split_once(':')
                .ok_or(FrontMatterError::BadLine { line })?;
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                return Err(FrontMatterError::BadLine { line });
            }
            let Some(known) = REQUIRED_KEYS
                .into_iter()
                .chain(OPTIONAL_KEYS)
                .find(|k| *k == key)
            else {
                return Err(FrontMatterError::UnknownKey {
                    line,
                    key: key.to_owned(),
                });
            };
            if values.contains_key(known) {
                return Err(FrontMatterError::DuplicateKey {
                    line,
                    key: key.to_owned(),
                });
            }
            if known == "uncommitted" && value.is_empty() {
                in_list = true;
                items = None;
                values.insert(known, (line, Value::Null));
                continue;
            }
            let value = value
                .strip_prefix(' ')
                .and_then(|v| serde_json::from_str::<Value>(v).ok())
                .filter(|v| !matches!(v, Value::Object(_)))
                .ok_or(FrontMatterError::BadLine { line })?;
            values.insert(known, (line, value));
        }
        if in_list && items.is_none() {
            return Err(FrontMatterError::BadValue {
                line: first_line + lines.len() - 1,
                key: "uncommitted".to_owned(),
                expected: "[] or followed by \"  - \" lines",
            });
        }
        for key in REQUIRED_KEYS {
            if !values.contains_key(key) {
                return Err(FrontMatterError::MissingKey { key });
            }
        }

        let bad = |key: &'static str, expected: &'static str| FrontMatterError::BadValue {
            line: values.get(key).map_or(0, |(l, _)| *l),
            key: key.to_owned(),
            expected,
        };
        let string = |key: &'static str| -> Result<Option<String>, FrontMatterError> {
            match values.get(key).map(|(_, v)| v) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(key, "a string or null")),
            }
        };
        let schema = string("schema")?.ok_or_else(|| bad("schema", "a string"))?;
        if schema != NOTE_SCHEMA {
            return Err(FrontMatterError::WrongSchema { found: schema });
        }
        let repository = string("repository")?
            .filter(|r| !r.is_empty())
            .ok_or_else(|| bad("repository", "a path"))?;
        let head = string("head")?;
        if let Some(head) = &head
            && !((head.len() == 40 || head.len() == 64)
                && head.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        {
            return Err(bad(
                "head",
                "a commit id (40 or 64 lowercase hex digits) or null",
            ));
        }
        let remote = match (string("remote")?, string("remote_url")?) {
            (Some(name), url) => Some(GitRemote { name, url }),
            (None, None) => None,
            (None, Some(_)) => return Err(bad("remote_url", "null when remote is null")),
        };
        let pushed = match values.get("pushed").map(|(_, v)| v) {
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::Null) | None => None,
            Some(_) => return Err(bad("pushed", "true, false or null")),
        };
        let uncommitted = match (values.get("uncommitted").map(|(_, v)| v), items) {
            (Some(Value::Null), Some(items)) => items,
            (Some(Value::Array(list)), None) if list.is_empty() => Vec::new(),
            _ => return Err(bad("uncommitted", "[] or followed by \"  - \" lines")),
        };
        let uncommitted_omitted = match values.get("uncommitted_omitted").map(|(_, v)| v) {
            None => 0,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| bad("uncommitted_omitted", "a non-negative integer"))?,
        };
        let source_provider = match string("source_provider")? {
            None => None,
            Some(id) => {
                Some(AgentId::parse(&id).ok_or_else(|| bad("source_provider", "an agent id"))?)
            }
        };
        Ok(FrontMatter {
            origin: NoteOrigin {
                created_at: string("created_at")?,
                source_provider,
                source_model: string("source_model")?,
            },
            git: GitState {
                repository: Utf8PathBuf::from(repository),
                branch: string("branch")?,
                head,
                remote,
                upstream: string("upstream")?,
                pushed,
                uncommitted,
            },
            uncommitted_omitted,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Notes: parsing, checking, rendering.
// ---------------------------------------------------------------------------------------------

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
fn trim_blank_lines(lines: &[&str]) -> String {
    let start = lines.iter().position(|l| !l.trim().is_empty());
    let end = lines.iter().rposition(|l| !l.trim().is_empty());
    match (start, end) {
        (Some(start), Some(end)) => lines[start..=end].join("\n"),
        _ => String::new(),
    }
}

/// Parses a note. Never fails: what is wrong with it is for [`check`] to say.
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

    /// The part of the note being read: the preamble, a section, or handoff's own
    /// receiver instructions (dropped).
    enum Part {
        Preamble,
        Section(Section, usize),
        Receiver,
    }
    fn finish(part: &Part, body: &mut Vec<&str>, note: &mut Note) {
        match part {
            Part::Preamble => note.preamble = trim_blank_lines(body),
            Part::Section(section, line) => note.sections.push(NoteSection {
                section: *section,
                line: *line,
                body: trim_blank_lines(body),
            }),
            Part::Receiver => {}
        }
        body.clear();
    }
    let mut scanner = Scanner::default();
    let mut part = Part::Preamble;
    let mut body: Vec<&str> = Vec::new();
    for (i, line) in lines.iter().enumerate().skip(start) {
        let next = scanner.line(line).and_then(|text| {
            if heading_name(text).eq_ignore_ascii_case(RECEIVER_INSTRUCTIONS) {
                Some(Part::Receiver)
            } else {
                Section::from_heading(text).map(|s| Part::Section(s, i + 1))
            }
        });
        match next {
            Some(next) => {
                finish(&part, &mut body, &mut note);
                part = next;
            }
            None => body.push(line),
        }
    }
    finish(&part, &mut body, &mut note);
    note
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

/// The template's comment for the author, left out of a rendered note.
const TEMPLATE_INTRO: &str = "\
<!-- Write for a reader with none of your context. Fill in every section; write \"None\"
     where one does not apply. Leave out front matter and receiver instructions:
     `handoff note render` adds them, and fills in Git state, from the repository. -->";

/// The note template: a title, a comment for the author, and the nine headings, each with one
/// line of guidance in an HTML comment.
pub fn template() -> String {
    let mut out = format!("# Handoff note\n\n{TEMPLATE_INTRO}\n");
    for section in Section::ALL {
        out.push_str(&format!(
            "\n## {}\n\n<!-- {} -->\n",
            section.title(),
            section.guidance()
        ));
    }
    out
}

/// `text` as Markdown inline code, or as a JSON string when it holds a backtick or a control
/// character (a path could otherwise break out of its line).
fn inline(text: &str) -> String {
    if text.chars().any(|c| c == '`' || c.is_control()) {
        serde_json::Value::from(text).to_string()
    } else {
        format!("`{text}`")
    }
}

/// `text` followed by whatever closes a fence or comment it leaves open, so that what comes
/// after it is read as written.
fn closed(text: &str) -> String {
    let mut scanner = Scanner::default();
    for line in text.lines() {
        scanner.line(line);
    }
    match scanner.closer() {
        Some(closer) => format!("{text}\n{closer}"),
        None => text.to_owned(),
    }
}

/// The body of an author's section for rendering: the template's guidance comment removed.
fn author_body(section: Section, body: &str) -> String {
    let guidance = format!("<!-- {} -->", section.guidance());
    let lines: Vec<&str> = body.lines().filter(|l| l.trim() != guidance).collect();
    closed(&trim_blank_lines(&lines))
}

/// The "Git state" section's body, written from `git`.
fn git_state_body(git: &GitState) -> String {
    let mut out = String::from(
        "<!-- Written by handoff from the repository; anything the author wrote here was replaced. -->\n",
    );
    out.push_str(&format!(
        "- Repository: {}\n",
        inline(git.repository.as_str())
    ));
    out.push_str(&format!(
        "- Branch: {}\n",
        git.branch
            .as_deref()
            .map_or("none (HEAD is detached)".to_owned(), inline)
    ));
    out.push_str(&format!(
        "- HEAD: {}\n",
        git.head
            .as_deref()
            .map_or("none (the branch has no commit yet)".to_owned(), inline)
    ));
    out.push_str(&format!(
        "- Remote: {}\n",
        match &git.remote {
            None => "none".to_owned(),
            Some(GitRemote { name, url: None }) => inline(name),
            Some(GitRemote {
                name,
                url: Some(url),
            }) => format!("{} at {}", inline(name), inline(url)),
        }
    ));
    out.push_str(&format!(
        "- Pushed: {}\n",
        match (git.pushed, &git.upstream) {
            (Some(true), Some(up)) => format!("yes, HEAD is contained in {}", inline(up)),
            (Some(false), Some(up)) => format!(
                "no, HEAD is not contained in {}: its newest commits exist only in the sender's clone",
                inline(up)
            ),
            (_, Some(up)) => format!("unknown (compared with {})", inline(up)),
            (_, None) => "unknown (no remote-tracking branch)".to_owned(),
        }
    ));
    if git.uncommitted.is_empty() {
        out.push_str("- Uncommitted files: none\n");
    } else {
        out.push_str(&format!(
            "- Uncommitted files ({}), not part of HEAD:\n",
            git.uncommitted.len()
        ));
        for change in git.uncommitted.iter().take(MAX_LISTED_UNCOMMITTED) {
            out.push_str(&format!(
                "  - {} {}\n",
                status_words(change),
                inline(&change.path)
            ));
        }
        let omitted = git.uncommitted.len().saturating_sub(MAX_LISTED_UNCOMMITTED);
        if omitted > 0 {
            out.push_str(&format!("  - and {omitted} more\n"));
        }
    }
    out
}

/// The "Receiver instructions" section's body, written from `git`.
fn receiver_body(git: &GitState) -> String {
    let mut steps: Vec<String> = vec![
        "Read the repository's own instructions for agents (`AGENTS.md`, `CLAUDE.md` or similar), if it has any.".to_owned(),
    ];
    steps.push(match (&git.head, &git.branch) {
        (Some(head), Some(branch)) => format!(
            "Check that you are on the recorded commit: `git rev-parse HEAD` must print {} and the branch must be {}. If either differs, stop: change nothing, and report what you found.",
            inline(head),
            inline(branch)
        ),
        (Some(head), None) => format!(
            "Check that you are on the recorded commit: `git rev-parse HEAD` must print {}. If it does not, stop: change nothing, and report what you found.",
            inline(head)
        ),
        (None, _) => "The branch had no commit when this note was written: if `git rev-parse HEAD` prints a commit, stop, change nothing, and report it.".to_owned(),
    });
    steps.push(
        "Run every command under \"How to verify\" and compare what it prints with what the note expects; report any difference before building on it.".to_owned(),
    );
    steps.push(
        "Start from the first item under \"Next steps\", within \"Decisions and constraints\"."
            .to_owned(),
    );
    steps.push(match (&git.remote, &git.branch) {
        (Some(remote), Some(branch)) => format!(
            "Never force-push or rewrite published history. When your work is to be published, push it with `git push {} HEAD:{}`.",
            remote.name, branch
        ),
        _ => "Never force-push or rewrite published history.".to_owned(),
    });
    steps.push(
        "Report back when you stop: whether HEAD matched, what \"How to verify\" showed, what you changed (with commit ids), and what is left.".to_owned(),
    );
    let mut out =
        String::from("<!-- Written by handoff for the agent that continues this work. -->\n");
    out.push_str(
        "You are continuing work someone else started; this note is what they left you.\n\n",
    );
    for (i, step) in steps.iter().enumerate() {
        out.push_str(&format!("{}. {step}\n", i + 1));
    }
    if !git.uncommitted.is_empty() {
        out.push_str(
            "\nThe sender had uncommitted changes (listed under \"Git state\"): they are not part of the recorded commit, and you may not have them.\n",
        );
    }
    out
}

/// Writes `note` for its receiver: the front matter and the "Git state" section from `git` and
/// `origin` (whatever the note said about them is dropped), the author's sections in order (a
/// repeated one joined into one, the template's guidance comments removed), and the receiver
/// instructions.
///
/// Meant for a note that passed [`check`]: a missing section is written empty.
pub fn render(note: &Note, git: &GitState, origin: &NoteOrigin) -> String {
    let mut out = FrontMatter::new(git, origin).render();
    out.push('\n');
    let preamble = note.preamble.replace(TEMPLATE_INTRO, "");
    let preamble = trim_blank_lines(&preamble.lines().collect::<Vec<_>>());
    if preamble.is_empty() {
        out.push_str("# Handoff note\n");
    } else {
        out.push_str(&closed(&preamble));
        out.push('\n');
    }
    for section in Section::ALL {
        out.push_str(&format!("\n## {}\n\n", section.title()));
        let body = if section == Section::GitState {
            git_state_body(git)
        } else {
            let body = author_body(section, &note.body(section).unwrap_or_default());
            if body.is_empty() { body } else { body + "\n" }
        };
        out.push_str(&body);
    }
    out.push_str(&format!("\n## {RECEIVER_INSTRUCTIONS}\n\n"));
    out.push_str(&receiver_body(git));
    out
}

// ---------------------------------------------------------------------------------------------
// Reading a note file, and the `handoff note check --json` report.
// ---------------------------------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The template with every author section filled in with `text`.
    fn filled(text: &str) -> String {
        let mut out = String::from("# Handoff note\n");
        for section in Section::ALL {
            out.push_str(&format!("\n## {}\n\n{text}\n", section.title()));
        }
        out
    }

    fn change(
        path: &str,
        staged: bool,
        unstaged: bool,
        untracked: bool,
        deleted: bool,
    ) -> StatusChange {
        StatusChange {
            path: path.into(),
            staged,
            unstaged,
            untracked,
            deleted,
        }
    }

    fn git() -> GitState {
        GitState {
            repository: "/work/project".into(),
            branch: Some("feature/notes".into()),
            head: Some("0123456789abcdef0123456789abcdef01234567".into()),
            remote: Some(GitRemote {
                name: "origin".into(),
                url: Some("https://example.com/me/project.git".into()),
            }),
            upstream: Some("refs/remotes/origin/feature/notes".into()),
            pushed: Some(false),
            uncommitted: vec![
                change("src/lib.rs", true, true, false, false),
                change("old.rs", false, true, false, true),
                change("notes/todo list.txt", false, false, true, false),
            ],
        }
    }

    fn origin() -> NoteOrigin {
        NoteOrigin {
            created_at: Some("2026-01-02T03:04:05.678Z".into()),
            source_provider: Some(AgentId::CLAUDE),
            source_model: Some("opus".into()),
        }
    }

    /// Fills each section of the template with a line of its own.
    fn fill_template() -> String {
        let mut text = template();
        for section in Section::ALL {
            let guidance = format!("<!-- {} -->", section.guidance());
            text = text.replacen(
                &guidance,
                &format!("{guidance}\nWritten for {}.", section.title()),
                1,
            );
        }
        text
    }

    #[test]
    fn template_has_the_nine_sections_in_order_each_with_guidance() {
        let note = parse(&template());
        let order: Vec<Section> = note.sections.iter().map(|s| s.section).collect();
        assert_eq!(order, Section::ALL);
        assert!(note.front_matter.is_none() && note.front_matter_error.is_none());
        assert_eq!(note.preamble.lines().next(), Some("# Handoff note"));
        let errors = check(&note).unwrap_err();
        assert!(errors.missing.is_empty());
        // Git state is handoff's to fill.
        assert_eq!(errors.empty, Section::ALL[..8]);
    }

    #[test]
    fn template_passes_after_filling() {
        let note = parse(&fill_template());
        assert_eq!(check(&note), Ok(()));
        assert_eq!(
            note.body(Section::Goal).unwrap(),
            format!("<!-- {} -->\nWritten for Goal.", Section::Goal.guidance())
        );
    }

    #[test]
    fn none_counts_as_written() {
        assert_eq!(check(&parse(&filled("None"))), Ok(()));
        assert_eq!(check(&parse(&filled("None."))), Ok(()));
    }

    #[test]
    fn each_missing_section_is_reported_exactly() {
        for gone in Section::ALL {
            let text = filled("None").replace(&format!("## {}\n", gone.title()), "");
            let errors = check(&parse(&text)).unwrap_err();
            assert_eq!(errors.missing, [gone], "{text}");
            assert!(errors.empty.is_empty() && errors.duplicate.is_empty());
        }
        let errors = check(&parse("")).unwrap_err();
        assert_eq!(errors.missing, Section::ALL);
    }

    #[test]
    fn each_empty_section_is_reported_exactly() {
        for blank in &Section::ALL[..8] {
            let mut text = String::new();
            for section in Section::ALL {
                let body = if section == *blank { "  \n\t\n" } else { "x" };
                text.push_str(&format!("## {}\n{body}\n", section.title()));
            }
            let errors = check(&parse(&text)).unwrap_err();
            assert_eq!(errors.empty, [*blank]);
            assert!(errors.missing.is_empty());
        }
    }

    #[test]
    fn placeholders_comments_and_guidance_count_as_empty() {
        for body in [
            "<!-- write this -->",
            "<!--\nmany\nlines\n-->\n",
            "TODO",
            "- TBD",
            "1. ...",
            "…",
            "```\n```",
            "What the work is for and what \"done\" means, in the person's words; link the issue or pull request.",
        ] {
            let text = filled("None").replacen("None", body, 1);
            let errors = check(&parse(&text)).unwrap_err();
            assert_eq!(errors.empty, [Section::Goal], "{body:?}");
        }
        for body in [
            "TODO: ask about the schema",
            "<!-- x --> done",
            "```\nmake\n```",
        ] {
            let text = filled("None").replacen("None", body, 1);
            assert_eq!(check(&parse(&text)), Ok(()), "{body:?}");
        }
    }

    #[test]
    fn errors_read_as_one_line() {
        let text = "## Current state\nx\n## Done and verified\nx\n## In progress\nx\n\
                    ## Next steps\nx\n## Decisions and constraints\nx\n## Open questions\n\n\
                    ## Git state\n## In progress\ny\n";
        let errors = check(&parse(text)).unwrap_err();
        assert_eq!(
            errors.to_string(),
            "missing sections: Goal, How to verify; empty sections: Open questions; \
             duplicate sections: In progress"
        );
    }

    #[test]
    fn headings_are_matched_loosely_but_only_at_level_two_outside_code_and_comments() {
        let text = filled("None")
            .replace("## Goal", "##   GOAL: ##")
            .replace("## Next steps", "### Next steps");
        let note = parse(&text);
        assert_eq!(check(&note).unwrap_err().missing, [Section::NextSteps]);

        let fenced = filled("None").replace(
            "## Goal\n\nNone",
            "## Goal\n\n```md\n## Next steps\n```\n<!--\n## Open questions\n-->",
        );
        let note = parse(&fenced);
        assert_eq!(check(&note), Ok(()));
        assert_eq!(note.sections.len(), 9);
        assert!(note.body(Section::Goal).unwrap().contains("## Next steps"));
    }

    #[test]
    fn out_of_order_sections_are_accepted_and_rendered_in_order() {
        let mut text = String::new();
        for section in Section::ALL.iter().rev() {
            text.push_str(&format!("## {}\n{}\n\n", section.title(), section.title()));
        }
        let note = parse(&text);
        assert_eq!(check(&note), Ok(()));
        let rendered = parse(&render(&note, &git(), &origin()));
        let order: Vec<Section> = rendered.sections.iter().map(|s| s.section).collect();
        assert_eq!(order, Section::ALL);
    }

    #[test]
    fn author_written_git_state_and_front_matter_are_replaced() {
        let text = format!(
            "---\nschema: \"handoff.note.v1\"\nrepository: \"/elsewhere\"\nbranch: \"lies\"\n\
             head: null\nremote: null\nremote_url: null\nupstream: null\npushed: true\n\
             uncommitted: []\n---\n{}",
            filled("None").replace(
                "## Git state\n\nNone",
                "## Git state\n\nbranch: lies, head deadbeef, pushed: yes"
            )
        );
        let note = parse(&text);
        assert_eq!(check(&note), Ok(()));
        assert_eq!(
            note.front_matter.as_ref().unwrap().git.branch.as_deref(),
            Some("lies")
        );
        let rendered = render(&note, &git(), &origin());
        assert!(
            !rendered.contains("lies") && !rendered.contains("deadbeef"),
            "{rendered}"
        );
        assert!(!rendered.contains("/elsewhere"));
        let back = parse(&rendered);
        let fm = back.front_matter.clone().unwrap();
        assert_eq!(fm.git, git());
        assert_eq!(fm.origin, origin());
        assert!(
            back.body(Section::GitState)
                .unwrap()
                .contains("`feature/notes`")
        );
    }

    #[test]
    fn rendered_note_carries_receiver_instructions_and_passes_check() {
        let note = parse(&fill_template());
        let rendered = render(&note, &git(), &origin());
        assert!(rendered.starts_with("---\nschema: \"handoff.note.v1\"\n"));
        assert!(
            !rendered.contains(Section::Goal.guidance()),
            "guidance removed"
        );
        assert!(
            !rendered.contains("Write for a reader"),
            "the author's intro removed"
        );
        let receiver = rendered
            .split("\n## Receiver instructions\n")
            .nth(1)
            .unwrap();
        assert!(receiver.contains(
            "`git rev-parse HEAD` must print `0123456789abcdef0123456789abcdef01234567`"
        ));
        assert!(receiver.contains("stop"));
        assert!(receiver.contains("\"How to verify\""));
        assert!(receiver.contains("\"Next steps\""));
        assert!(receiver.contains("Never force-push"));
        assert!(receiver.contains("git push origin HEAD:feature/notes"));
        assert!(receiver.contains("Report back"));
        assert!(receiver.contains("uncommitted changes"));
        let back = parse(&rendered);
        assert_eq!(check(&back), Ok(()));
        // Rendering a rendered note changes nothing.
        assert_eq!(render(&back, &git(), &origin()), rendered);
    }

    #[test]
    fn rendered_note_snapshot() {
        let rendered = render(&parse(&fill_template()), &git(), &origin());
        insta::assert_snapshot!(rendered, @r#"
        ---
        schema: "handoff.note.v1"
        created_at: "2026-01-02T03:04:05.678Z"
        source_provider: "claude"
        source_model: "opus"
        repository: "/work/project"
        branch: "feature/notes"
        head: "0123456789abcdef0123456789abcdef01234567"
        remote: "origin"
        remote_url: "https://example.com/me/project.git"
        upstream: "refs/remotes/origin/feature/notes"
        pushed: false
        uncommitted:
          - "staged+modified src/lib.rs"
          - "deleted old.rs"
          - "untracked notes/todo list.txt"
        ---

        # Handoff note

        ## Goal

        Written for Goal.

        ## Current state

        Written for Current state.

        ## Done and verified

        Written for Done and verified.

        ## In progress

        Written for In progress.

        ## Next steps

        Written for Next steps.

        ## Decisions and constraints

        Written for Decisions and constraints.

        ## Open questions

        Written for Open questions.

        ## How to verify

        Written for How to verify.

        ## Git state

        <!-- Written by handoff from the repository; anything the author wrote here was replaced. -->
        - Repository: `/work/project`
        - Branch: `feature/notes`
        - HEAD: `0123456789abcdef0123456789abcdef01234567`
        - Remote: `origin` at `https://example.com/me/project.git`
        - Pushed: no, HEAD is not contained in `refs/remotes/origin/feature/notes`: its newest commits exist only in the sender's clone
        - Uncommitted files (3), not part of HEAD:
          - staged+modified `src/lib.rs`
          - deleted `old.rs`
          - untracked `notes/todo list.txt`

        ## Receiver instructions

        <!-- Written by handoff for the agent that continues this work. -->
        You are continuing work someone else started; this note is what they left you.

        1. Read the repository's own instructions for agents (`AGENTS.md`, `CLAUDE.md` or similar), if it has any.
        2. Check that you are on the recorded commit: `git rev-parse HEAD` must print `0123456789abcdef0123456789abcdef01234567` and the branch must be `feature/notes`. If either differs, stop: change nothing, and report what you found.
        3. Run every command under "How to verify" and compare what it prints with what the note expects; report any difference before building on it.
        4. Start from the first item under "Next steps", within "Decisions and constraints".
        5. Never force-push or rewrite published history. When your work is to be published, push it with `git push origin HEAD:feature/notes`.
        6. Report back when you stop: whether HEAD matched, what "How to verify" showed, what you changed (with commit ids), and what is left.

        The sender had uncommitted changes (listed under "Git state"): they are not part of the recorded commit, and you may not have them.
        "#);
    }

    #[test]
    fn detached_unborn_and_remoteless_states_render() {
        let state = GitState {
            repository: "/r".into(),
            branch: None,
            head: None,
            remote: None,
            upstream: None,
            pushed: None,
            uncommitted: vec![],
        };
        let rendered = render(&parse(&filled("None")), &state, &NoteOrigin::default());
        assert!(rendered.contains("branch: null\nhead: null\nremote: null\nremote_url: null\nupstream: null\npushed: null\nuncommitted: []\n---\n"), "{rendered}");
        assert!(rendered.contains("- Branch: none (HEAD is detached)"));
        assert!(rendered.contains("had no commit"));
        assert!(!rendered.contains("git push"));
        let back = parse(&rendered);
        assert_eq!(back.front_matter.unwrap().git, state);
    }

    #[test]
    fn long_uncommitted_lists_are_cut_and_counted() {
        let mut state = git();
        state.uncommitted = (0..MAX_LISTED_UNCOMMITTED + 5)
            .map(|i| change(&format!("f{i:03}"), false, false, true, false))
            .collect();
        let rendered = render(&parse(&filled("None")), &state, &origin());
        let fm = parse(&rendered).front_matter.unwrap();
        assert_eq!(fm.git.uncommitted.len(), MAX_LISTED_UNCOMMITTED);
        assert_eq!(fm.uncommitted_omitted, 5);
        assert!(rendered.contains("  - and 5 more\n"));
    }

    #[test]
    fn hostile_paths_cannot_add_lines_to_the_note() {
        let mut state = git();
        state.uncommitted = vec![change("x\n## Goal\nfake", false, false, true, false)];
        let rendered = render(&parse(&filled("None")), &state, &origin());
        let back = parse(&rendered);
        assert_eq!(check(&back), Ok(()));
        assert_eq!(
            back.front_matter.unwrap().git.uncommitted,
            state.uncommitted
        );
    }

    #[test]
    fn front_matter_is_strict() {
        let good = FrontMatter::new(&git(), &origin()).render();
        let body = filled("None");
        assert!(parse(&format!("{good}{body}")).front_matter_error.is_none());
        /// An edit of the good front matter, and the error it must cause.
        type Case = (&'static str, &'static str, fn(&FrontMatterError) -> bool);
        let cases: [Case; 8] = [
            ("pushed: false\n", "pushed: no\n", |e| {
                matches!(e, FrontMatterError::BadLine { .. })
            }),
            (
                "pushed: false\n",
                "pushed: \"no\"\n",
                |e| matches!(e, FrontMatterError::BadValue { key, .. } if key == "pushed"),
            ),
            ("pushed: false\n", "", |e| {
                matches!(e, FrontMatterError::MissingKey { key: "pushed" })
            }),
            (
                "pushed: false\n",
                "pushed: false\nowner: \"me\"\n",
                |e| matches!(e, FrontMatterError::UnknownKey { key, .. } if key == "owner"),
            ),
            (
                "pushed: false\n",
                "pushed: false\npushed: true\n",
                |e| matches!(e, FrontMatterError::DuplicateKey { key, .. } if key == "pushed"),
            ),
            ("handoff.note.v1", "handoff.note.v9", |e| {
                matches!(e, FrontMatterError::WrongSchema { .. })
            }),
            (
                "  - \"deleted old",
                "  - \"removed old",
                |e| matches!(e, FrontMatterError::BadValue { key, .. } if key == "uncommitted"),
            ),
            ("pushed: false\n", "pushed: false\n\n", |e| {
                matches!(e, FrontMatterError::BadLine { .. })
            }),
        ];
        for (from, to, expect) in cases {
            let text = format!("{}{body}", good.replacen(from, to, 1));
            let note = parse(&text);
            let err = note
                .front_matter_error
                .clone()
                .unwrap_or_else(|| panic!("{to:?}"));
            assert!(expect(&err), "{to:?}: {err:?}");
            assert!(check(&note).unwrap_err().front_matter.is_some());
        }
        let unclosed = parse(&format!("---\nschema: \"handoff.note.v1\"\n{body}"));
        assert_eq!(
            unclosed.front_matter_error,
            Some(FrontMatterError::Unclosed)
        );
    }

    #[test]
    fn credentials_are_stripped_from_remote_urls() {
        for (url, want) in [
            (
                "https://user:s3cret@github.com/o/r.git",
                "https://github.com/o/r.git",
            ),
            ("https://ghp_token@github.com/o/r", "https://github.com/o/r"),
            (
                "https://github.com/o/r.git?access_token=x#frag",
                "https://github.com/o/r.git",
            ),
            ("ssh://git@host:2222/o/r.git", "ssh://host:2222/o/r.git"),
            ("git@github.com:o/r.git", "github.com:o/r.git"),
            ("me:pw@host:o/r.git", "host:o/r.git"),
            ("https://github.com/o/r.git", "https://github.com/o/r.git"),
            ("/srv/git/a@b/r.git", "/srv/git/a@b/r.git"),
            ("../r@x.git", "../r@x.git"),
            ("file:///srv/r.git", "file:///srv/r.git"),
        ] {
            assert_eq!(strip_url_credentials(url), want, "{url}");
        }
    }

    #[test]
    fn oversized_and_non_utf8_notes_are_refused() {
        assert!(matches!(
            decode_note(&vec![b'a'; MAX_NOTE_BYTES + 1]),
            Err(NoteReadError::TooLarge)
        ));
        assert!(decode_note(&vec![b'a'; MAX_NOTE_BYTES]).is_ok());
        assert!(matches!(
            decode_note(b"ok\xff"),
            Err(NoteReadError::NotUtf8 { offset: 2 })
        ));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_note(dir.path()),
            Err(NoteReadError::NotAFile)
        ));
        assert!(matches!(
            read_note(&dir.path().join("absent")),
            Err(NoteReadError::Io { .. })
        ));
    }

    #[test]
    fn check_report_serializes_section_titles() {
        let errors = check(&parse("## Goal\n")).unwrap_err();
        let report = NoteCheck::new("n.md", Ok(Err(errors)));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["ok"], false);
        assert_eq!(json["missing"][0], "Current state");
        assert_eq!(json["empty"][0], "Goal");
        assert_eq!(json["schemaVersion"], NOTE_CHECK_SCHEMA);
        let back: NoteCheck = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
    }

    /// A body line that cannot be read as a heading, a fence or a comment.
    fn body_line() -> impl Strategy<Value = String> {
        "[A-Za-z][A-Za-z0-9 .,:;!?()#*_-]{0,40}"
    }

    fn body() -> impl Strategy<Value = String> {
        prop::collection::vec(body_line(), 1..5).prop_map(|lines| format!("B {}", lines.join("\n")))
    }

    proptest! {
        #[test]
        fn parse_and_check_never_panic(text in "(?s).{0,2000}") {
            let note = parse(&text);
            let _ = check(&note);
            let rendered = render(&note, &git(), &origin());
            let back = parse(&rendered);
            // A rendered note always has its front matter and all nine sections.
            prop_assert!(back.front_matter_error.is_none(), "{rendered}");
            let errors = check(&back).err().unwrap_or_default();
            prop_assert!(errors.missing.is_empty(), "{rendered}");
        }

        #[test]
        fn markdown_ish_text_never_panics(
            lines in prop::collection::vec(
                prop_oneof![
                    Just("## Goal".to_owned()),
                    Just("## Receiver instructions".to_owned()),
                    Just("```".to_owned()),
                    Just("~~~~".to_owned()),
                    Just("<!--".to_owned()),
                    Just("-->".to_owned()),
                    Just("---".to_owned()),
                    Just("pushed: true".to_owned()),
                    Just("  - \"untracked x\"".to_owned()),
                    "(?s).{0,20}",
                ],
                0..30,
            )
        ) {
            let text = lines.join("\n");
            let note = parse(&text);
            let _ = check(&note);
            let rendered = render(&note, &git(), &origin());
            let back = parse(&rendered);
            prop_assert!(back.front_matter_error.is_none(), "{rendered}");
            prop_assert!(check(&back).err().unwrap_or_default().missing.is_empty(), "{rendered}");
        }

        #[test]
        fn render_then_parse_round_trips_the_sections(
            bodies in prop::collection::vec(body(), 8),
            preamble in prop::option::of(body()),
        ) {
            let mut text = preamble.clone().map(|p| format!("# {p}\n")).unwrap_or_default();
            for (section, body) in Section::ALL.iter().zip(&bodies) {
                text.push_str(&format!("## {}\n\n{body}\n\n", section.title()));
            }
            text.push_str("## Git state\n\nwhatever\n");
            let note = parse(&text);
            prop_assert_eq!(check(&note), Ok(()));
            let rendered = render(&note, &git(), &origin());
            let back = parse(&rendered);
            prop_assert_eq!(check(&back), Ok(()));
            for (section, body) in Section::ALL.iter().zip(&bodies) {
                prop_assert_eq!(back.body(*section).unwrap(), body.clone());
            }
            prop_assert_eq!(&back.front_matter.as_ref().unwrap().git, &git());
            prop_assert_eq!(back.body(Section::GitState).unwrap(), git_state_body(&git()).trim_end().to_owned());
            prop_assert_eq!(render(&back, &git(), &origin()), rendered);
        }
    }
}
