//! The masking service: text and JSON that leave handoff go through a [`Masker`], which hides
//!
//! - the secrets handoff knows (configuration values, passed-through credentials, account
//!   tokens, MCP secrets) in every form they travel in: as they are, JSON-escaped,
//!   percent-encoded, hex (lower and upper case) and base64 (standard and URL-safe, alone or
//!   anywhere inside a larger encoded blob). All forms of all secrets are matched in one
//!   leftmost-longest pass, so a secret that begins another never leaves the longer one's
//!   tail. Secrets shorter than [`MIN_FREE_LEN`] bytes are masked only as a whole value
//!   (`NAME=value`, `"name": "value"`, a whole JSON string): anywhere else they would cut
//!   ordinary words;
//! - the secrets it recognises by structure (see `patterns`): private key blocks, URL
//!   passwords, webhook URLs, the token formats of well-known services (also when a note wraps
//!   them onto the next line), `Bearer` tokens, and the values of credential-named keys,
//!   headers, variables and flags (see [`is_credential_name`]);
//! - the same secrets broken up: known secrets with line breaks (base64 wrapped at 76
//!   columns), shell quoting (`'ab'\''cd'`, `printf %q`, `"ab"'cd'`) or terminal escape
//!   sequences inside, and recognised ones with escape sequences inside.
//!
//! A masker that cannot be built never fails open: [`Masker::try_new`] says why, so that a
//! request is refused before anything starts, and [`Masker::new`] then masks every text whole.
//!
//! It leaves everything else byte for byte: commit ids, hashes, run ids, paths, URLs without
//! credentials, and code that merely *names* keys and tokens (`let sort_key = …`,
//! `fn token_count()`, `token: String`).

#[cfg(test)]
mod broken_tests;
mod encode;
mod known;
mod names;
mod paths;
mod patterns;
#[cfg(test)]
mod tests;
mod view;

use std::borrow::Cow;

use serde_json::Value;

#[cfg(test)]
pub(crate) use known::FAIL_TO_BUILD;
pub use known::MIN_FREE_LEN;
pub(crate) use names::is_secret_variable;
pub use names::{codex_secret_key, is_credential_name};
pub use paths::KeptRecord;
pub use patterns::{REDACTED_PRIVATE_KEY, REDACTED_TOKEN};
use view::{Leave, View};

/// What a known secret or a credential-named value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Masks secrets in text and JSON. Build one per set of known secrets and reuse it: building
/// compiles the known secrets into one automaton; the patterns are compiled once per process.
#[derive(Clone, Debug, Default)]
pub struct Masker {
    known: known::Known,
    /// Set when the masker could not be built: every text is then masked whole.
    closed: bool,
}

/// Why a [`Masker`] cannot be built: masking would fail open, so nothing that needs it starts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("secrets cannot be masked ({0}): refusing to start")]
pub struct MaskerError(String);

/// A masked text and how many secrets were masked in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Masked<'a> {
    /// The text, borrowed when nothing was masked.
    pub text: Cow<'a, str>,
    /// How many secrets were masked.
    pub count: u64,
}

impl Masker {
    /// A masker for `known` secrets (empty and blank values are ignored), or why it cannot be
    /// built. Whoever starts something that a masker guards builds it with this first.
    pub fn try_new<I, S>(known: I) -> Result<Self, MaskerError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        patterns::compiled().map_err(|name| MaskerError(format!("the {name} pattern")))?;
        let known = known::Known::new(known).map_err(MaskerError)?;
        Ok(Self {
            known,
            closed: false,
        })
    }

    /// A masker for `known` secrets; one that cannot be built masks every text whole (see
    /// [`Masker::try_new`]).
    pub fn new<I, S>(known: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::try_new(known).unwrap_or_else(|_| Self {
            known: known::Known::default(),
            closed: true,
        })
    }

    /// Masks known secrets and every secret recognised by structure.
    pub fn mask<'a>(&self, text: &'a str) -> Masked<'a> {
        if self.closed {
            return closed(text);
        }
        let mut count = 0;
        let text = self.known_pass(Cow::Borrowed(text), &mut count);
        let edits = patterns::private_keys(&text);
        let text = apply(text, edits, &mut count);
        let edits = patterns::urls(&text);
        let text = apply(text, edits, &mut count);
        let edits = patterns::tokens(&text);
        let text = apply(text, edits, &mut count);
        let edits = patterns::assignments(&text);
        let text = apply(text, edits, &mut count);
        // What escape sequences inside a secret kept from the patterns.
        let edits = match View::of(&text, Leave::Escapes) {
            Some(view) => view.edits_in_text(patterns::all(&view.text), &text),
            None => Vec::new(),
        };
        let text = apply(text, edits, &mut count);
        Masked { text, count }
    }

    /// The values the structural patterns recognise as secrets in `text` (a URL's password, a
    /// service's token, a credential-named value, a private key block), as they read. A
    /// request adds them to its known secrets, so that a value recognised in one place
    /// (`DATABASE_PASSWORD=…` in a note) is masked where it appears alone too (the message,
    /// an answer).
    pub fn recognised(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut take = |text: &str| {
            for e in patterns::all(text) {
                let value = &text[e.start..e.end];
                if value.contains("[REDACTED") || value.trim().is_empty() {
                    continue;
                }
                out.push(value.to_owned());
                // A token wrapped onto the next line, joined again.
                if value.contains(char::is_whitespace) {
                    out.push(value.split_whitespace().collect());
                }
            }
        };
        take(text);
        if let Some(view) = View::of(text, Leave::Escapes) {
            take(&view.text);
        }
        out.sort();
        out.dedup();
        out
    }

    /// Masks only the known secrets, for text where patterns could hit legitimate content (an
    /// agent's answer about code that handles credentials).
    pub fn mask_known<'a>(&self, text: &'a str) -> Masked<'a> {
        if self.closed {
            return closed(text);
        }
        let mut count = 0;
        let text = self.known_pass(Cow::Borrowed(text), &mut count);
        Masked { text, count }
    }

    fn known_pass<'a>(&self, text: Cow<'a, str>, count: &mut u64) -> Cow<'a, str> {
        let edits = self.known.long_edits(&text);
        let text = apply(text, edits, count);
        let edits = self.known.broken_edits(&text);
        let text = apply(text, edits, count);
        let edits = self.known.short_edits(&text);
        apply(text, edits, count)
    }

    /// Masks every string of `value` in place (object keys are left alone) and returns how many
    /// secrets were masked. A string under a credential-named key (see [`is_credential_name`])
    /// is masked whole, however short, unless it is a placeholder (`""`, `$TOKEN`, `null`); so
    /// is every string inside an object or array under such a key. A string that is exactly a
    /// short known secret is masked whole too.
    pub fn mask_json(&self, value: &mut Value) -> u64 {
        match value {
            Value::String(s) => {
                if self.known.is_short_secret(s) {
                    *s = REDACTED.to_owned();
                    return 1;
                }
                let masked = self.mask(s);
                let count = masked.count;
                if count > 0 {
                    *s = masked.text.into_owned();
                }
                count
            }
            Value::Array(items) => items.iter_mut().map(|v| self.mask_json(v)).sum(),
            Value::Object(map) => map
                .iter_mut()
                .map(|(k, v)| {
                    if is_credential_name(k) {
                        self.mask_whole(v)
                    } else {
                        self.mask_json(v)
                    }
                })
                .sum(),
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        }
    }

    fn mask_whole(&self, value: &mut Value) -> u64 {
        match value {
            Value::String(s) if patterns::placeholder(s) => self.mask_json(value),
            Value::String(s) => {
                *s = REDACTED.to_owned();
                1
            }
            Value::Array(items) => items.iter_mut().map(|v| self.mask_whole(v)).sum(),
            Value::Object(map) => map.values_mut().map(|v| self.mask_whole(v)).sum(),
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        }
    }
}

/// What a masker that could not be built makes of `text`: nothing of it.
fn closed(text: &str) -> Masked<'_> {
    if text.is_empty() {
        return Masked {
            text: Cow::Borrowed(text),
            count: 0,
        };
    }
    Masked {
        text: Cow::Borrowed(REDACTED),
        count: 1,
    }
}

/// One span of a text to replace.
#[derive(Clone, Debug)]
struct Edit {
    start: usize,
    end: usize,
    with: &'static str,
}

impl Edit {
    fn new(start: usize, end: usize, with: &'static str) -> Self {
        Self { start, end, with }
    }
}

/// Applies `edits` to `text`, counting them; overlapping edits are merged into the one starting
/// first (the longer one when both start together), which then covers both.
fn apply<'a>(text: Cow<'a, str>, mut edits: Vec<Edit>, count: &mut u64) -> Cow<'a, str> {
    if edits.is_empty() {
        return text;
    }
    edits.sort_by_key(|e| (e.start, std::cmp::Reverse(e.end)));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for e in edits {
        if e.end <= e.start {
            continue;
        }
        if e.start < at {
            // Overlaps the edit before: that one covers this one's tail too.
            at = at.max(e.end);
            continue;
        }
        out.push_str(&text[at..e.start]);
        out.push_str(e.with);
        at = e.end;
        *count += 1;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}
