//! Masking secrets in text that leaves the engine (diagnostics, answers), and telling which
//! variables hold them.

use std::collections::BTreeMap;
use std::sync::Mutex;

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
/// transcript), and a run builds one for the same secrets several times (to check that it can
/// before its agent starts, to render its result, to mask the record it keeps), so the maskers
/// built last are kept for every thread of the process. One that cannot be built masks
/// everything ([`Masker::new`]).
pub(crate) fn masker(known: &[String]) -> Masker {
    try_masker(known).unwrap_or_else(|_| Masker::new(known))
}

/// [`masker`], or why it cannot be built ([`Masker::try_new`]); a failure is not kept.
pub(crate) fn try_masker(known: &[String]) -> Result<Masker, crate::MaskerError> {
    /// How many maskers are kept.
    const KEPT: usize = 4;
    /// A masker with its secrets as given and as a set (sorted, without repeats): the order
    /// and repeats of a list do not change what a masker masks.
    struct Kept {
        as_given: Vec<String>,
        as_set: Vec<String>,
        masker: Masker,
    }
    static LAST: Mutex<Vec<Kept>> = Mutex::new(Vec::new());
    let kept = |found: &dyn Fn(&Kept) -> bool| {
        let last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        last.iter().find(|k| found(k)).map(|k| k.masker.clone())
    };
    if let Some(m) = kept(&|k| k.as_given.as_slice() == known) {
        return Ok(m);
    }
    let mut as_set = known.to_vec();
    as_set.sort();
    as_set.dedup();
    if let Some(m) = kept(&|k| k.as_set == as_set) {
        return Ok(m);
    }
    let m = Masker::try_new(known)?;
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if last.len() == KEPT {
        last.remove(0);
    }
    last.push(Kept {
        as_given: known.to_vec(),
        as_set,
        masker: m.clone(),
    });
    Ok(m)
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
    fn a_kept_masker_serves_the_same_secrets_in_any_order_and_a_failure_is_not_kept() {
        let secret = "kept-masker-secret-0123456789".to_owned();
        let other = "kept-masker-other-9876543210".to_owned();
        let text = format!("a {secret} and {other}");
        let first = try_masker(&[secret.clone(), other.clone()]).unwrap();
        let again = try_masker(&[other.clone(), secret.clone(), other.clone()]).unwrap();
        assert_eq!(first.mask(&text).text, again.mask(&text).text);
        assert_eq!(again.mask(&text).count, 2);
        let broken = vec![crate::mask::FAIL_TO_BUILD.to_owned()];
        assert!(try_masker(&broken).is_err());
        assert!(
            try_masker(&broken).is_err(),
            "a failure was kept as a masker"
        );
        // The masker that stands in for one that cannot be built masks everything.
        assert!(!masker(&broken).mask("plain words").text.contains("plain"));
    }

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
