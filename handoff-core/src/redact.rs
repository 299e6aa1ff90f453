//! Masking secrets in text that leaves the engine (diagnostics, answers), and telling which
//! variables hold them.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

/// Largest diagnostic text kept, in bytes.
pub const DIAGNOSTIC_LIMIT: usize = 8192;
const TRUNCATION_MARK: &str = "…[truncated]";
/// Longest worker-supplied text quoted back in an error message.
const QUOTE_LIMIT: usize = 128;

// Each pattern masks one family of credentials. The replacement keeps the key name (for
// `key=value` forms) so the reader still sees *what* was masked.
static PATTERNS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r"(?i)\bBearer\s+[A-Za-z0-9._~+/=-]{8,}", "Bearer [REDACTED]"),
        (
            r"(?i)\b(api[_-]?key|access[_-]?token|auth[_-]?token|password|passwd|secret|client[_-]?secret)(\s*[:=]\s*)[^\s,;]+",
            "$1$2[REDACTED]",
        ),
        (r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{12,}", "[REDACTED_TOKEN]"),
        (r"\bxai-[A-Za-z0-9_-]{12,}", "[REDACTED_TOKEN]"),
        (r"\bgh[pousr]_[A-Za-z0-9]{12,}", "[REDACTED_TOKEN]"),
        (r"\bgithub_pat_[A-Za-z0-9_]{12,}", "[REDACTED_TOKEN]"),
        (r"\bAKIA[0-9A-Z]{16}\b", "[REDACTED_TOKEN]"),
        (
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            "[REDACTED_TOKEN]",
        ),
    ]
    .into_iter()
    .filter_map(|(p, r)| Regex::new(p).ok().map(|re| (re, r)))
    .collect()
});

/// Masks secrets: first the exact `known` values (MCP secrets, API keys handed to the agent),
/// then every credential pattern. Returns the text and how many secrets were masked.
pub fn redact(text: &str, known: &[String]) -> (String, u64) {
    let (mut out, mut count) = redact_known(text, known);
    for (re, replacement) in PATTERNS.iter() {
        let n = re.find_iter(&out).count() as u64;
        if n > 0 {
            out = re.replace_all(&out, *replacement).into_owned();
            count += n;
        }
    }
    (out, count)
}

/// Masks only the exact `known` values (at least 4 bytes long); used where credential patterns
/// could hit legitimate content, such as an agent's answer about code.
pub fn redact_known(text: &str, known: &[String]) -> (String, u64) {
    let mut out = text.to_owned();
    let mut count = 0u64;
    for secret in known.iter().filter(|s| s.len() >= 4) {
        let n = out.matches(secret.as_str()).count() as u64;
        if n > 0 {
            out = out.replace(secret.as_str(), "[REDACTED]");
            count += n;
        }
    }
    (out, count)
}

/// Whether a variable or key name looks like it holds a credential (KEY, TOKEN, SECRET,
/// PASSWORD or AUTH in it, any case).
pub fn credential_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH"]
        .iter()
        .any(|w| n.contains(w))
}

/// Values of the passed-through variables that look like credentials (names containing KEY,
/// TOKEN, SECRET or PASSWORD): masked wherever they appear in results.
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
        fn redaction_never_leaves_a_known_secret(prefix in ".{0,40}", secret in "[A-Za-z0-9]{6,20}", suffix in ".{0,40}") {
            let text = format!("{prefix}{secret}{suffix}");
            let (t, _) = redact(&text, std::slice::from_ref(&secret));
            prop_assert!(!t.contains(&secret));
        }

        #[test]
        fn truncation_never_panics(s in "\\PC{0,9000}") {
            let _ = truncate_tail(&s);
        }
    }
}
