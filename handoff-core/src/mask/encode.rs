//! The forms a known secret travels in besides its own bytes: JSON-escaped, percent-encoded,
//! hex and base64 (inside a larger encoded blob too).

pub(super) const STANDARD: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub(super) const URL_SAFE: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Every form of `secret` worth looking for, the secret itself first, without duplicates.
pub(super) fn forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let mut out = vec![secret.to_owned()];
    let json = json_escaped(secret);
    // PHP's `json_encode` escapes `/`; Go's encoder escapes `<`, `>` and `&`; Python's (with
    // `ensure_ascii`) every non-ASCII character; some encoders every character.
    out.push(json.replace('/', "\\/"));
    out.push(unicode_escaped(&json, |c| matches!(c, '<' | '>' | '&')));
    out.push(unicode_escaped(&json, |c| !c.is_ascii()));
    out.push(unicode_escaped(secret, |_| true));
    out.push(json);
    // Every byte, letters and digits too, as `%XX`.
    out.push(every_byte_percent_encoded(bytes, false));
    out.push(every_byte_percent_encoded(bytes, true));
    for keep in PERCENT_KEPT {
        out.push(percent_encoded(bytes, keep, false));
        out.push(percent_encoded(bytes, keep, true));
    }
    out.push(percent_encoded(bytes, PERCENT_KEPT[0], false).replace("%20", "+"));
    out.push(hex::encode(bytes));
    out.push(hex::encode_upper(bytes));
    for alphabet in [STANDARD, URL_SAFE] {
        let whole = base64(bytes, alphabet);
        out.push(whole.trim_end_matches('=').to_owned());
        out.push(whole);
        for offset in 0..3 {
            out.push(base64_inner(bytes, offset, alphabet));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|f| !f.is_empty() && seen.insert(f.clone()));
    out
}

/// `secret` as it reads inside a JSON string.
pub(super) fn json_escaped(secret: &str) -> String {
    let quoted = serde_json::Value::from(secret).to_string();
    quoted[1..quoted.len() - 1].to_owned()
}

/// The punctuation percent-encoders leave alone besides letters and digits: RFC 3986's
/// unreserved set (form encoders, most libraries), nothing (encoders of every non-alphanumeric
/// byte), the unreserved set and `/` (Python's `quote`), and JavaScript's `encodeURIComponent`.
const PERCENT_KEPT: [&[u8]; 4] = [b"-._~", b"", b"-._~/", b"-_.!~*'()"];

/// `text` with each character `escape` picks as JSON's `\uXXXX` (lowercase hex, UTF-16).
fn unicode_escaped(text: &str, escape: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if escape(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every byte as `%XX`.
fn every_byte_percent_encoded(bytes: &[u8], lower: bool) -> String {
    bytes
        .iter()
        .map(|b| {
            if lower {
                format!("%{b:02x}")
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Every byte but letters, digits and `keep` as `%XX`.
fn percent_encoded(bytes: &[u8], keep: &[u8], lower: bool) -> String {
    let digits: &[u8; 16] = if lower {
        b"0123456789abcdef"
    } else {
        b"0123456789ABCDEF"
    };
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(digits[usize::from(b >> 4)]));
            out.push(char::from(digits[usize::from(b & 15)]));
        }
    }
    out
}

/// Base64 of `bytes`, padded with `=`.
pub(super) fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(alphabet[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The characters of a base64 stream that depend on `bytes` alone when `bytes` starts at
/// `offset` (0, 1 or 2) bytes into a 3-byte group: whatever comes before and after the secret
/// in the encoded blob, these characters appear in it.
fn base64_inner(bytes: &[u8], offset: usize, alphabet: &[u8; 64]) -> String {
    let mut framed = vec![0; offset];
    framed.extend_from_slice(bytes);
    framed.extend_from_slice(&[0, 0]);
    let encoded = base64(&framed, alphabet);
    // Character j carries bits 6j..6j+6 of the stream; the secret holds bits 8*offset up to
    // 8*(offset+len).
    let first = (8 * offset).div_ceil(6);
    let end = 8 * (offset + bytes.len()) / 6;
    encoded.get(first..end).unwrap_or_default().to_owned()
}
