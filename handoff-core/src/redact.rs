//! Masking secrets in text that leaves the engine (diagnostics, answers), and telling which
//! variables hold them.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::mask::{Masker, is_secret_variable};

/// Largest diagnostic text kept, in bytes.
pub const DIAGNOSTIC_LIMIT: usize = 8192;
const TRUNCATION_MARK: &str = "…[truncated]";
/// Longest worker-supplied text quoted back in an error message.
const QUOTE_LIMIT: usize = 128;

/// Masks secrets: the exact `known` values (MCP secrets, API keys handed to the agent) in every
/// form they travel in, then every secret recognised by structure (see [`Masker::mask`]).
/// Returns the text and how many secrets were masked.
pub fn redact(text: &str, known: &[String]) -> (String, u64) {
    let masked = masker(known).mask(text);
    (masked.text.into_owned(), masked.count)
}

/// Masks only the exact `known` values (see [`Masker::mask_known`]); used where credential
/// patterns could hit legitimate content, such as an agent's answer about code.
pub fn redact_known(text: &str, known: &[String]) -> (String, u64) {
    let masked = masker(known).mask_known(text);
    (masked.text.into_owned(), masked.count)
}

/// A masker for `known`: callers mask many strings with the same secrets (every message of a
/// transcript), so the last one built on this thread is reused.
pub(crate) fn masker(known: &[String]) -> Masker {
    thread_local! {
        static LAST: RefCell<Option<(Vec<String>, Masker)>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((k, m)) if k.as_slice() == known => m.clone(),
        _ => {
            let m = Masker::new(known);
            *last = Some((known.to_vec(), m.clone()));
            m
        }
    })
}

/// Whether a variable or configuration key holds something to keep secret: a credential name
/// (its last word TOKEN, SECRET, PASSWORD, CREDENTIALS, AUTH, a non-lookup KEY…), header lines
/// (`*_HEADERS`) or a key id (`*_KEY_ID`).
pub fn credential_name(name: &str) -> bool {
    is_secret_variable(name)
}

/// Values of the passed-through variables that look like credentials (see
/// [`credential_name`]): masked wherever they appear in results.
pub fn credential_values(env: &BTreeMap<String, String>) -> Vec<String> {
    env.iter()
        .filter(|(k, v)| v.len() >= 8 && credential_name(k))
        .map(|(_, v)| v.clone())
        .collect()
}

/// A worker-supplied string bounded for an error message (Display quotes it with `{:?}`, so
/// control characters cannot break the one-line message).
pub(crate) fn quote(s: &str) -> String {
    if s.len() <= QUOTE_LIMIT {
        return s.to_owned();
    }
    let mut end = QUOTE_LIMIT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Cuts `text` to [`DIAGNOSTIC_LIMIT`] bytes on a char boundary, keeping the *end* (the tail of
/// a log is where the error is). Returns the text and whether it was cut.
pub fn truncate_tail(text: &str) -> (String, bool) {
    if text.len() <= DIAGNOSTIC_LIMIT {
        return (text.to_owned(), false);
    }
    let mut start = text.len() - DIAGNOSTIC_LIMIT;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    (format!("{TRUNCATION_MARK}{}", &text[start..]), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn masks_known_values_and_patterns() {
        let (t, n) = redact(
            "key sk-abcdefghijklmnop and Authorization: Bearer abc.def.ghi12345 and password=hunter2 and my-mcp-secret",
            &["my-mcp-secret".into()],
        );
        assert!(!t.contains("sk-abcdefghijklmnop"), "{t}");
        assert!(!t.contains("abc.def.ghi12345"), "{t}");
        assert!(!t.contains("hunter2"), "{t}");
        assert!(!t.contains("my-mcp-secret"), "{t}");
        assert!(t.contains("password=[REDACTED]"), "{t}");
        assert_eq!(n, 4);
    }

    #[test]
    fn tail_truncation_keeps_the_end() {
        let long = format!("{}END", "x".repeat(10_000));
        let (t, cut) = truncate_tail(&long);
        assert!(cut);
        assert!(t.ends_with("END"));
        assert!(t.len() <= DIAGNOSTIC_LIMIT + TRUNCATION_MARK.len());
    }

    proptest! {
        #[test]
        fn redaction_never_leaves_a_known_secret(prefix in ".{0,40}", secret in "[A-Za-z0-9]{8,20}", suffix in ".{0,40}") {
            let text = format!("{prefix}{secret}{suffix}");
            let (t, _) = redact(&text, std::slice::from_ref(&secret));
            prop_assert!(!t.contains(&secret));
        }

        // Shorter secrets would cut ordinary words: they are masked as a whole value only.
        #[test]
        fn a_short_known_secret_is_masked_as_a_value(name in "[A-Z]{1,8}_[A-Z]{1,8}", secret in "[A-Za-z0-9]{4,7}") {
            let text = format!("{name}={secret}\n");
            let (t, _) = redact(&text, std::slice::from_ref(&secret));
            prop_assert!(!t.contains(&secret), "{t}");
        }

        #[test]
        fn truncation_never_panics(s in "\\PC{0,9000}") {
            let _ = truncate_tail(&s);
        }
    }
}
