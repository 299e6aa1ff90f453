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
//!   headers, variables and flags (see [`is_credential_name`]).
//!
//! It leaves everything else byte for byte: commit ids, hashes, run ids, paths, URLs without
//! credentials, and code that merely *names* keys and tokens (`let sort_key = …`,
//! `fn token_count()`, `token: String`).

mod encode;
mod known;
mod names;
mod patterns;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use serde_json::Value;

pub use known::MIN_FREE_LEN;
pub(crate) use names::is_secret_variable;
pub use names::{codex_secret_key, is_credential_name};
pub use patterns::{REDACTED_PRIVATE_KEY, REDACTED_TOKEN};

/// What a known secret or a credential-named value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Masks secrets in text and JSON. Build one per set of known secrets and reuse it: building
/// compiles the known secrets into one automaton; the patterns are compiled once per process.
#[derive(Clone, Debug, Default)]
pub struct Masker {
    known: known::Known,
}

/// A masked text and how many secrets were masked in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Masked<'a> {
    /// The text, borrowed when nothing was masked.
    pub text: Cow<'a, str>,
    /// How many secrets were masked.
    pub count: u64,
}

impl Masker {
    /// A masker for `known` secrets (empty and blank values are ignored).
    pub fn new<I, S>(known: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            known: known::Known::new(known),
        }
    }

    /// Masks known secrets and every secret recognised by structure.
    pub fn mask<'a>(&self, text: &'a str) -> Masked<'a> {
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
        Masked { text, count }
    }

    /// Masks only the known secrets, for text where patterns could hit legitimate content (an
    /// agent's answer about code that handles credentials).
    pub fn mask_known<'a>(&self, text: &'a str) -> Masked<'a> {
        let mut count = 0;
        let text = self.known_pass(Cow::Borrowed(text), &mut count);
        Masked { text, count }
    }

    fn known_pass<'a>(&self, text: Cow<'a, str>, count: &mut u64) -> Cow<'a, str> {
        let edits = self.known.long_edits(&text);
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
                if let Cow::Owned(new) = masked.text {
                    *s = new;
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
