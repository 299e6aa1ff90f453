//! Exact secrets handoff knows (configured values, passed-through credentials, account tokens,
//! MCP secrets) and every form they travel in.

use aho_corasick::{AhoCorasick, MatchKind};

use super::encode::forms;
use super::view::{Leave, View};
use super::{Edit, REDACTED};

/// Known secrets at least this long are masked wherever they appear; shorter ones only as a
/// whole value (`NAME=value`, `"name": "value"`, a whole JSON string), where masking cannot
/// cut into ordinary words.
pub const MIN_FREE_LEN: usize = 8;

/// The automata over the known secrets.
#[derive(Clone, Debug, Default)]
pub(super) struct Known {
    /// Every form of every long secret, matched leftmost-longest in one pass.
    long: Option<AhoCorasick>,
    /// The same forms without what a [`View`] of [`Leave::Breaks`] leaves out, for secrets
    /// broken up by line breaks, quotes or escape sequences.
    broken: Option<AhoCorasick>,
    /// The short secrets and their JSON-escaped forms.
    short: Option<AhoCorasick>,
    /// The short secrets, sorted, for whole-value comparison.
    short_values: Vec<String>,
}

impl Known {
    /// The automata over `known`, or why they cannot be built.
    pub(super) fn new<I, S>(known: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut long = Vec::new();
        let mut short_values = Vec::new();
        for secret in known {
            let secret = secret.as_ref();
            if secret.trim().is_empty() {
                continue;
            }
            if secret.len() >= MIN_FREE_LEN {
                long.extend(forms(secret));
            } else {
                short_values.push(secret.to_owned());
            }
        }
        long.sort();
        long.dedup();
        // Broken up, a form must still be long enough not to cut ordinary words.
        let mut broken: Vec<String> = long
            .iter()
            .flat_map(|f| broken_forms(f))
            .chain(long.iter().cloned())
            .filter(|f| f.len() >= MIN_FREE_LEN)
            .collect();
        broken.sort();
        broken.dedup();
        short_values.sort();
        short_values.dedup();
        let mut short: Vec<String> = short_values.clone();
        short.extend(short_values.iter().map(|s| super::encode::json_escaped(s)));
        short.sort();
        short.dedup();
        Ok(Self {
            long: automaton(&long, MatchKind::Standard)?,
            broken: automaton(&broken, MatchKind::Standard)?,
            short: automaton(&short, MatchKind::LeftmostLongest)?,
            short_values,
        })
    }

    /// Every occurrence of a long secret in any of its forms.
    pub(super) fn long_edits(&self, text: &str) -> Vec<Edit> {
        let Some(ac) = &self.long else {
            return Vec::new();
        };
        // Every occurrence, overlapping ones too: a secret that starts inside another is
        // masked with it (the edits are merged), not left with its tail showing.
        ac.find_overlapping_iter(text)
            .map(|m| Edit::new(m.start(), m.end(), REDACTED))
            .collect()
    }

    /// Every occurrence of a long secret broken up by line breaks (base64 wrapped at 76
    /// columns), quotes and backslashes (shell-quoted pieces) or escape sequences, as spans of
    /// `text`.
    pub(super) fn broken_edits(&self, text: &str) -> Vec<Edit> {
        let Some(ac) = &self.broken else {
            return Vec::new();
        };
        // A backslash is read both ways, as the forms are (see `broken_forms`).
        let quoting = if text.contains('\\') {
            View::of(text, Leave::Quoting)
        } else {
            None
        };
        [View::of(text, Leave::Breaks), quoting]
            .into_iter()
            .flatten()
            .flat_map(|view| {
                let edits = ac
                    .find_overlapping_iter(&view.text)
                    .map(|m| Edit::new(m.start(), m.end(), REDACTED))
                    .collect();
                view.edits_in_text(edits, text)
            })
            .collect()
    }

    /// Every occurrence of a short secret that is a whole value: after `=` or `:` (a quote
    /// allowed around it), or the whole text, and ending where the value ends.
    pub(super) fn short_edits(&self, text: &str) -> Vec<Edit> {
        let Some(ac) = &self.short else {
            return Vec::new();
        };
        ac.find_iter(text)
            .filter(|m| value_position(text, m.start(), m.end()))
            .map(|m| Edit::new(m.start(), m.end(), REDACTED))
            .collect()
    }

    /// Whether `value` is exactly one of the short secrets.
    pub(super) fn is_short_secret(&self, value: &str) -> bool {
        self.short_values
            .binary_search_by(|s| s.as_str().cmp(value))
            .is_ok()
    }
}

/// The automaton over `patterns` (`None` when there are none), or why it cannot be built.
/// `form` as the views of [`Leave::Breaks`] and, when it holds a backslash, of
/// [`Leave::Quoting`] show it.
fn broken_forms(form: &str) -> impl Iterator<Item = String> {
    let view = |leave| View::of(form, leave).map(|v| v.text);
    let quoting = if form.contains('\\') {
        view(Leave::Quoting)
    } else {
        None
    };
    [view(Leave::Breaks), quoting].into_iter().flatten()
}

fn automaton(patterns: &[String], kind: MatchKind) -> Result<Option<AhoCorasick>, String> {
    if patterns.is_empty() {
        return Ok(None);
    }
    #[cfg(test)]
    if patterns.iter().any(|p| p == FAIL_TO_BUILD) {
        return Err("refused for the test".into());
    }
    AhoCorasick::builder()
        .match_kind(kind)
        .build(patterns)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// A known secret that makes building fail, for the tests of what fails closed.
#[cfg(test)]
pub(crate) const FAIL_TO_BUILD: &str = "the automaton cannot be built 5c1d";

/// Whether `text[start..end]` is a whole value: the whole text, or preceded by `=` or `:` (then
/// spaces, then an optional quote) and followed by the end of the value (end of text,
/// whitespace, a quote or a separator).
fn value_position(text: &str, start: usize, end: usize) -> bool {
    if start == 0 && end == text.len() {
        return true;
    }
    let before = &text.as_bytes()[..start];
    let mut i = before.len();
    let quote = i > 0 && matches!(before[i - 1], b'"' | b'\'');
    if quote {
        i -= 1;
        // `\"value\"` inside a JSON string.
        if i > 0 && before[i - 1] == b'\\' {
            i -= 1;
        }
    }
    while i > 0 && matches!(before[i - 1], b' ' | b'\t') {
        i -= 1;
    }
    if i == 0 || !matches!(before[i - 1], b'=' | b':') {
        return false;
    }
    match text.as_bytes().get(end) {
        None => true,
        Some(b) => {
            b.is_ascii_whitespace()
                || matches!(
                    b,
                    b'"' | b'\'' | b',' | b';' | b'&' | b')' | b'}' | b']' | b'\\'
                )
        }
    }
}
