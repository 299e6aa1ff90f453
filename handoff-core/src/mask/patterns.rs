//! Secrets recognised by their structure: private key blocks, URL passwords, webhook URLs, the
//! token formats of well-known services, and credential-named values.
//!
//! Each finder returns the spans to mask in a text; the regexes are compiled once, and each
//! pass is skipped at the cost of one substring search when the text has none of its anchors.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::{Captures, Regex, RegexSet};

use super::names::{is_credential_name, words};
use super::{Edit, REDACTED};

/// What a token of a known service is replaced with.
pub const REDACTED_TOKEN: &str = "[REDACTED_TOKEN]";
/// What a private key block is replaced with.
pub const REDACTED_PRIVATE_KEY: &str = "[REDACTED_PRIVATE_KEY]";

/// Every span any pattern finds in `text` (overlapping spans are merged when applied).
pub(super) fn all(text: &str) -> Vec<Edit> {
    let mut edits = private_keys(text);
    edits.extend(urls(text));
    edits.extend(tokens(text));
    edits.extend(assignments(text));
    edits
}

fn compile(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

// ---------------------------------------------------------------------------------------------
// Private key blocks

/// A PEM (or PGP) private key, from its BEGIN line to its END line (lines broken by real or
/// JSON-escaped newlines). A block cut before its END line is masked up to its last base64
/// line.
static PRIVATE_KEY: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(concat!(
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        r"(?:(?:[^-]|-[^-])*-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        r"|(?:(?:\r?\n|\\n)(?:\r?\n|\\n)?",
        r"(?:[A-Za-z0-9+/=]{16,}|(?:Proc-Type|DEK-Info|Comment|Version):[^\r\n\\]*))*)",
    ))
});

pub(super) fn private_keys(text: &str) -> Vec<Edit> {
    if !text.contains("PRIVATE KEY") {
        return Vec::new();
    }
    let Some(re) = PRIVATE_KEY.as_ref() else {
        return Vec::new();
    };
    re.find_iter(text)
        .map(|m| Edit::new(m.start(), m.end(), REDACTED_PRIVATE_KEY))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// URLs

/// `scheme://userinfo@`: the user information runs to the last `@` of the authority.
static USERINFO: LazyLock<Option<Regex>> =
    LazyLock::new(|| compile(r#"(?i)(?-u:\b)[a-z][a-z0-9+.-]*://([^\s/?#"'<>\[\]\\`]+)@"#));

/// Webhook URLs whose path is the credential; the part kept is the first group.
static WEBHOOKS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?i)(https?://hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/-]+",
        r"(?i)(https?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/)[A-Za-z0-9_-]+",
    ]
    .into_iter()
    .filter_map(compile)
    .collect()
});

/// URL passwords (`https://user:pass@host` loses `user:pass`, a user name that looks like a
/// token is masked too) and webhook URLs (`https://hooks.slack.com/services/[REDACTED]`).
pub(super) fn urls(text: &str) -> Vec<Edit> {
    if !text.contains("://") {
        return Vec::new();
    }
    let mut edits = Vec::new();
    if text.contains('@')
        && let Some(re) = USERINFO.as_ref()
    {
        for caps in re.captures_iter(text) {
            let Some(info) = caps.get(1) else { continue };
            let masked = match info.as_str().split_once(':') {
                Some((_, password)) => !placeholder(password),
                None => info.len() >= 16 && looks_random(info.as_str()),
            };
            if masked {
                edits.push(Edit::new(info.start(), info.end(), REDACTED));
            }
        }
    }
    if text.contains("hooks.slack.com") || text.contains("/api/webhooks/") {
        for re in WEBHOOKS.iter() {
            for caps in re.captures_iter(text) {
                if let (Some(all), Some(kept)) = (caps.get(0), caps.get(1)) {
                    edits.push(Edit::new(kept.end(), all.end(), REDACTED));
                }
            }
        }
    }
    edits
}

// ---------------------------------------------------------------------------------------------
// Token formats

/// One token format.
struct Family {
    /// Prefix and body; the body may be shorter than a real token, the length is checked after
    /// joining a token wrapped onto the next lines.
    pattern: &'static str,
    /// The characters of the body.
    body: fn(&u8) -> bool,
    /// Shortest token accepted, prefix included.
    min: usize,
    /// Longest token accepted, prefix included.
    max: usize,
    /// The length of every token of a fixed-length format, prefix included.
    fixed: Option<usize>,
    /// Whether a token cut at the end of a line continues on the next.
    wraps: bool,
    /// Whether the body must look generated (see [`looks_generated`]) — for prefixes short
    /// enough to begin ordinary words.
    generated: bool,
}

fn alnum(b: &u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn alnum_underscore(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || *b == b'_'
}
fn alnum_dash(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || *b == b'-'
}
fn alnum_underscore_dash(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-'
}
fn upper_digit(b: &u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}
fn lower_hex(b: &u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(b)
}
fn base64_char(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

const ANY: usize = usize::MAX;

/// The token formats, in the order they win when two overlap.
const FAMILIES: &[Family] = &[
    // GitHub: classic, OAuth, user-to-server, server-to-server and refresh tokens (40
    // characters), then fine-grained personal access tokens.
    Family {
        pattern: r"(?-u:\b)gh[pousr]_[A-Za-z0-9]+",
        body: alnum,
        min: 16,
        max: ANY,
        fixed: Some(40),
        wraps: true,
        generated: false,
    },
    Family {
        pattern: r"(?-u:\b)github_pat_[A-Za-z0-9_]+",
        body: alnum_underscore,
        min: 23,
        max: ANY,
        fixed: None,
        wraps: true,
        generated: false,
    },
    // GitLab personal, deploy, runner, pipeline-trigger and other tokens.
    Family {
        pattern: r"(?-u:\b)gl(?:pat|dt|rt|ptt|cbt|oas|soat|ffct|imt)-[A-Za-z0-9_-]+",
        body: alnum_underscore_dash,
        min: 25,
        max: ANY,
        fixed: None,
        wraps: true,
        generated: true,
    },
    // npm access tokens: `npm_` and 36 characters (`npm_config_…` variables are not).
    Family {
        pattern: r"(?-u:\b)npm_[A-Za-z0-9]+",
        body: alnum,
        min: 40,
        max: ANY,
        fixed: Some(40),
        wraps: true,
        generated: false,
    },
    // Slack bot, user, app, refresh and configuration tokens.
    Family {
        pattern: r"(?-u:\b)(?:xox[abposre](?:\.xox[abposre])?|xapp)-[A-Za-z0-9-]+",
        body: alnum_dash,
        min: 15,
        max: ANY,
        fixed: None,
        wraps: true,
        generated: true,
    },
    // Stripe secret and restricted keys, live and test; webhook signing secrets.
    Family {
        pattern: r"(?-u:\b)(?:sk|rk)_(?:live|test)_[0-9A-Za-z]+",
        body: alnum,
        min: 18,
        max: ANY,
        fixed: None,
        wraps: true,
        generated: false,
    },
    Family {
        pattern: r"(?-u:\b)whsec_[A-Za-z0-9+/=]+",
        body: base64_char,
        min: 30,
        max: ANY,
        fixed: None,
        wraps: true,
        generated: false,
    },
    // Anthropic (`sk-ant-…`), OpenAI (`sk-…`, `sk-proj-…`), OpenRouter (`sk-or-…`) and the
    // other `sk-`/`rk-`/`pk-` keys; xAI keys.
    Family {
        pattern: r"(?-u:\b)(?:sk|rk|pk)-[A-Za-z0-9_-]+",
        body: alnum_underscore_dash,
        min: 15,
        max: ANY,
        fixed: None,
        wraps: true,
        generated: true,
    },
    Family {
        pattern: r"(?-u:\b)xai-[A-Za-z0-9_-]+",
        body: alnum_underscore_dash,
        min: 16,
        max: ANY,
        fixed: None,
        wraps: true,
        generated: true,
    },
    // Google API keys: `AIza` and 35 characters.
    Family {
        pattern: r"(?-u:\b)AIza[0-9A-Za-z_-]+",
        body: alnum_underscore_dash,
        min: 39,
        max: ANY,
        fixed: Some(39),
        wraps: true,
        generated: false,
    },
    // AWS access key ids, long-term and temporary: exactly 20 characters.
    Family {
        pattern: r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]+",
        body: upper_digit,
        min: 20,
        max: 20,
        fixed: Some(20),
        wraps: true,
        generated: false,
    },
    // Hugging Face tokens.
    Family {
        pattern: r"(?-u:\b)hf_[A-Za-z0-9]+",
        body: alnum,
        min: 37,
        max: ANY,
        fixed: None,
        wraps: true,
        generated: true,
    },
    // handoff's own capability tokens (`hcap_` and 64 hex digits).
    Family {
        pattern: r"(?-u:\b)hcap_[0-9a-f]+",
        body: lower_hex,
        min: 37,
        max: ANY,
        fixed: Some(69),
        wraps: true,
        generated: false,
    },
    // JSON Web Tokens: header and payload are base64url JSON objects.
    Family {
        pattern: r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        body: alnum_underscore_dash,
        min: 0,
        max: ANY,
        fixed: None,
        wraps: false,
        generated: false,
    },
];

static FAMILY_SET: LazyLock<Option<(RegexSet, Vec<Regex>)>> = LazyLock::new(|| {
    let set = RegexSet::new(FAMILIES.iter().map(|f| f.pattern)).ok()?;
    let each = FAMILIES
        .iter()
        .map(|f| Regex::new(f.pattern).ok())
        .collect::<Option<Vec<_>>>()?;
    Some((set, each))
});

/// `Bearer <token>` anywhere (an `Authorization` header, a curl line, a log).
static BEARER: LazyLock<Option<Regex>> =
    LazyLock::new(|| compile(r"(?i)(?-u:\b)bearer[ \t]+([A-Za-z0-9._~+/=-]{8,})"));

/// Tokens of the formats in [`FAMILIES`] and `Bearer` tokens.
pub(super) fn tokens(text: &str) -> Vec<Edit> {
    let mut edits = Vec::new();
    if let Some((set, each)) = FAMILY_SET.as_ref() {
        for i in set.matches(text).iter() {
            let family = &FAMILIES[i];
            for m in each[i].find_iter(text) {
                if let Some(end) = token_end(text, family, m.start(), m.end()) {
                    edits.push(Edit::new(m.start(), end, REDACTED_TOKEN));
                }
            }
        }
    }
    if let Some(re) = BEARER.as_ref() {
        for caps in re.captures_iter(text) {
            if let Some(token) = caps.get(1)
                && looks_random(token.as_str())
            {
                edits.push(Edit::new(token.start(), token.end(), REDACTED));
            }
        }
    }
    edits
}

/// Where the token matched at `start..end` ends (after the lines it is wrapped onto), if it is
/// one of `family`.
fn token_end(text: &str, family: &Family, start: usize, end: usize) -> Option<usize> {
    let (end, len) = if family.wraps {
        joined(text, family, end, end - start)
    } else {
        (end, end - start)
    };
    let bytes = text.as_bytes();
    let whole = len >= family.min
        && len <= family.max
        && !bytes.get(end).is_some_and(u8::is_ascii_alphanumeric);
    let body = text[start..end]
        .split_once(['-', '_'])
        .map_or("", |(_, body)| body);
    (whole && (!family.generated || looks_generated(body))).then_some(end)
}

/// A token cut at the end of a line (a wrapped note, a quoted reply) continues on the next
/// line, after its indentation and `>` quote marks. A fixed-length token takes exactly the
/// characters it lacks; another token takes the next line's leading run when the line before
/// was long (24 characters or more) and the run looks generated. Returns the end and the
/// token's length without the line breaks.
fn joined(text: &str, family: &Family, end: usize, len: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    let mut accepted = (end, len);
    let (mut end, mut len) = (end, len);
    for _ in 0..8 {
        if family.fixed.is_some_and(|f| len >= f) {
            break;
        }
        let Some(line) = next_line(bytes, end) else {
            break;
        };
        let run_end = line
            + bytes[line..]
                .iter()
                .take_while(|b| (family.body)(b))
                .count();
        let run = run_end - line;
        if run == 0 {
            break;
        }
        let ends_line = run_end == bytes.len() || next_line(bytes, run_end).is_some();
        match family.fixed {
            Some(fixed) => {
                let missing = fixed - len;
                if run == missing {
                    accepted = (run_end, fixed);
                    break;
                }
                if run > missing || !ends_line {
                    break;
                }
                (end, len) = (run_end, len + run);
            }
            None => {
                if len < 24 || !looks_random(&text[line..run_end]) {
                    break;
                }
                (end, len) = (run_end, len + run);
                accepted = (end, len);
                if !ends_line {
                    break;
                }
            }
        }
    }
    accepted
}

/// If a line break (`\n`, `\r\n`, or `\n` escaped in JSON) is at `at`, where the next line's
/// text starts, after its indentation and `>` quote marks.
fn next_line(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = match (bytes.get(at), bytes.get(at + 1)) {
        (Some(b'\n'), _) => at + 1,
        (Some(b'\r'), Some(b'\n')) => at + 2,
        (Some(b'\\'), Some(b'n')) => at + 2,
        _ => return None,
    };
    while matches!(bytes.get(i), Some(b' ' | b'\t' | b'>')) {
        i += 1;
    }
    Some(i)
}

// ---------------------------------------------------------------------------------------------
// Credential-named values

/// Words whose presence (any case) lets a text hold a credential-named value.
static NAME_ANCHORS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build([
            "token",
            "secret",
            "passw",
            "passphrase",
            "pwd",
            "credential",
            "auth",
            "cookie",
            "key",
        ])
        .ok()
});

/// A name and its value: `"name": value` (JSON, also escaped inside a JSON string),
/// `'name': value`, `--name value` / `--name=value`, `NAME=value`, `NAME: value`,
/// `name = value`. The value is a double-quoted string (JSON escapes allowed), a JSON-escaped
/// string, a single-quoted string or a bare word.
static ASSIGNMENT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(
        r#"(?mx)
        (?:
            "(?P<jn>[A-Za-z_][A-Za-z0-9_.-]*)"[\ \t]*:[\ \t]*
          | \\"(?P<en>[A-Za-z_][A-Za-z0-9_.-]*)\\"[\ \t]*:[\ \t]*
          | '(?P<sn>[A-Za-z_][A-Za-z0-9_.-]*)'[\ \t]*:[\ \t]*
          | (?:^|[\ \t])--(?P<fn>[A-Za-z][A-Za-z0-9_-]*)(?P<fsep>=|[\ \t]+)
          | (?-u:\b)(?P<n>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sp1>[\ \t]*)(?P<sep>[:=])(?P<sp2>[\ \t]*)
        )
        (?P<v>
            "(?:[^"\\\r\n]|\\.)*"
          | \\"(?:[^"\\\r\n]|\\[^"\r\n])*\\"
          | '[^'\r\n]*'
          | [^\s"'`,;&<>()\[\]{}|\\]*
        )"#,
    )
});

/// Authorization schemes kept in front of the credential they introduce.
const SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "token",
    "digest",
    "negotiate",
    "ntlm",
    "bot",
    "oauth",
    "apikey",
    "aws4-hmac-sha256",
];

/// Values of credential-named keys, headers, variables and flags (see [`super::names`]):
/// `DATABASE_PASSWORD=[REDACTED]`, `"api_key": "[REDACTED]"`, `Authorization: Basic
/// [REDACTED]`, `token = "[REDACTED]"`. A quoted value and a bare `NAME=value` (no space around
/// `=`) are masked whatever they hold, except references and placeholders (`$TOKEN`,
/// `${TOKEN}`, `<token>`, `***`, `null`); a bare value after `:` or a spaced `=` (YAML, code)
/// is masked only when it looks generated (a digit, a symbol, mixed case, 32 characters or
/// more) and not like code (a type, a path of identifiers, a call), so `token: String` and
/// `let token = self.token.clone();` stay.
pub(super) fn assignments(text: &str) -> Vec<Edit> {
    let (Some(anchors), Some(re)) = (NAME_ANCHORS.as_ref(), ASSIGNMENT.as_ref()) else {
        return Vec::new();
    };
    if !anchors.is_match(text) {
        return Vec::new();
    }
    re.captures_iter(text)
        .filter_map(|caps| assignment(text, &caps))
        .collect()
}

/// How a value is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Quoted,
    /// `NAME=value`, `--name=value`: shell, env files, query strings.
    Tight,
    /// `name: value`, `name = value`, `--name value`: YAML, code, prose.
    Loose,
}

fn assignment(text: &str, caps: &Captures) -> Option<Edit> {
    let bytes = text.as_bytes();
    let (name, shape, colon) = if let Some(n) = caps.name("jn").or(caps.name("en")) {
        (n.as_str(), Shape::Loose, true)
    } else if let Some(n) = caps.name("sn") {
        (n.as_str(), Shape::Loose, true)
    } else if let Some(n) = caps.name("fn") {
        let tight = caps.name("fsep").is_some_and(|s| s.as_str() == "=");
        let shape = if tight { Shape::Tight } else { Shape::Loose };
        (n.as_str(), shape, false)
    } else {
        let n = caps.name("n")?;
        let colon = caps.name("sep").is_some_and(|s| s.as_str() == ":");
        let spaced = caps.name("sp1").is_some_and(|s| !s.is_empty())
            || caps.name("sp2").is_some_and(|s| !s.is_empty());
        let shape = if colon || spaced {
            Shape::Loose
        } else {
            Shape::Tight
        };
        (n.as_str(), shape, colon)
    };
    if !is_credential_name(name) {
        return None;
    }
    let v = caps.name("v")?;
    let raw = v.as_str();
    let (mut start, mut end, shape) = if raw.len() >= 4 && raw.starts_with("\\\"") {
        (v.start() + 2, v.end() - 2, Shape::Quoted)
    } else if raw.len() >= 2 && (raw.starts_with('"') || raw.starts_with('\'')) {
        (v.start() + 1, v.end() - 1, Shape::Quoted)
    } else {
        (v.start(), v.end(), shape)
    };
    let head = words(name).pop().unwrap_or_default();
    // A header line or an authorization scheme says the value is a credential.
    let mut certain = false;
    if shape != Shape::Quoted {
        if colon && matches!(head.as_str(), "authorization" | "cookie" | "cookies") {
            // A header's value runs to the end of its line (or of the quoted command line).
            end = start
                + bytes[start..]
                    .iter()
                    .take_while(|b| !matches!(b, b'\r' | b'\n' | b'"' | b'\'' | b'\\' | b'`'))
                    .count();
            while end > start && bytes[end - 1].is_ascii_whitespace() {
                end -= 1;
            }
            certain = true;
        } else if SCHEMES.contains(&raw.to_ascii_lowercase().as_str()) {
            // `token: Bearer abc`: the credential is the next word.
            let gap = bytes[end..]
                .iter()
                .take_while(|b| matches!(b, b' ' | b'\t'))
                .count();
            let word = bytes[end + gap..]
                .iter()
                .take_while(|b| bare_value_char(**b))
                .count();
            if gap > 0 && word > 0 {
                end += gap + word;
            }
        }
    }
    // Keep an authorization scheme in front of its credential.
    let value = &text[start..end];
    if let Some((scheme, _)) = value.split_once([' ', '\t'])
        && SCHEMES.contains(&scheme.to_ascii_lowercase().as_str())
    {
        let rest = &value[scheme.len()..];
        start += scheme.len() + (rest.len() - rest.trim_start().len());
        certain = true;
    }
    let value = &text[start..end];
    if placeholder(value) || SCHEMES.contains(&value.to_ascii_lowercase().as_str()) {
        return None;
    }
    let next = bytes.get(end).copied();
    let masked = match shape {
        Shape::Quoted => true,
        _ if certain => true,
        Shape::Tight => !code(name, value, next, false),
        Shape::Loose => {
            !(code(name, value, next, true) || (colon && typed(value)))
                && (looks_random(value) || (colon && name.contains('-')))
        }
    };
    masked.then(|| Edit::new(start, end, REDACTED))
}

fn bare_value_char(b: u8) -> bool {
    !b.is_ascii_whitespace() && !b"\"'`,;&<>()[]{}|\\".contains(&b)
}

/// Words that are never a credential's value.
const KEYWORDS: &[&str] = &[
    "true",
    "false",
    "null",
    "none",
    "nil",
    "undefined",
    "yes",
    "no",
    "on",
    "off",
    "required",
    "optional",
];

/// Type names that follow `name:` in code.
const TYPES: &[&str] = &[
    "str", "string", "number", "bool", "boolean", "any", "unknown", "object", "never", "void",
    "bigint", "symbol", "char", "int", "float", "double", "bytes", "u8", "u16", "u32", "u64",
    "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64", "impl", "dyn",
    "mut",
];

/// Whether `value` stands for a secret rather than being one: empty, already masked, a
/// reference to one (`$TOKEN`, `${TOKEN}`, `$(cmd)`, `%TOKEN%`, `{{ token }}`), a placeholder
/// (`<token>`, three or more of `*`, `x`, `.`: `***`, `xxxx`, `...`) or a keyword (`null`,
/// `true`, `none`).
pub(super) fn placeholder(value: &str) -> bool {
    let v = value.trim();
    if v.is_empty() || v.starts_with("[REDACTED") || v.starts_with("{{") {
        return true;
    }
    let b = v.as_bytes();
    if b[0] == b'$'
        && b.get(1)
            .is_none_or(|c| matches!(c, b'{' | b'(' | b'_') || c.is_ascii_alphabetic())
    {
        return true;
    }
    if b[0] == b'%' && b.len() > 2 && b[b.len() - 1] == b'%' && b[1].is_ascii_alphabetic() {
        return true;
    }
    if matches!(b[0], b'<' | b'!') {
        return true;
    }
    if v.chars().count() >= 3
        && v.chars()
            .all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '…' | '-' | '_' | '#' | '•'))
    {
        return true;
    }
    KEYWORDS.contains(&v.to_ascii_lowercase().as_str())
}

/// Whether a bare `value` (followed by `next`) is code rather than a secret: it starts like an
/// expression, is a call or a path of identifiers (`self.token`, `process.env.TOKEN`,
/// `env::var`), repeats the name (`token: token`), or — in a `loose` form — is a
/// `key=value` specification (`--secret id=npmrc`).
fn code(name: &str, value: &str, next: Option<u8>, loose: bool) -> bool {
    let b = value.as_bytes();
    if b.is_empty() || matches!(b[0], b'&' | b'*' | b'=' | b':' | b'(' | b'[' | b'{') {
        return true;
    }
    if matches!(next, Some(b'(' | b'<' | b'[')) {
        return true;
    }
    if value.contains("::") || value.contains("->") || value.contains("=>") {
        return true;
    }
    // `token = token`, `this.apiKey = apiKey`.
    let (named, given) = (words(name), words(value));
    if !given.is_empty() && named.ends_with(&given) {
        return true;
    }
    // `--secret id=npmrc,src=…`: a specification of where the secret is.
    if loose
        && let Some((key, rest)) = value.split_once('=')
        && !key.is_empty()
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
        && !rest.is_empty()
        && !rest.starts_with('=')
    {
        return true;
    }
    // `self.token`, `process.env.TOKEN!`.
    let path = value.trim_end_matches(['!', '?']);
    let identifier = |s: &str| {
        s.bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
            && s.bytes().all(|c| c.is_ascii_alphabetic() || c == b'_')
    };
    path.contains('.') && path.split('.').all(identifier)
}

/// Whether a bare value after `name:` is a type: `String`, `u64`, `SecretString`, `Token`
/// (capitalised words of letters only).
fn typed(value: &str) -> bool {
    let b = value.as_bytes();
    let camel_case = b.first().is_some_and(u8::is_ascii_uppercase)
        && b.iter().all(u8::is_ascii_alphabetic)
        && b.get(1).is_some_and(u8::is_ascii_lowercase);
    camel_case || TYPES.contains(&value)
}

/// Whether `value` looks generated rather than written: a digit, an ASCII symbol other than
/// `_`, `-` and `.`, an inner capital next to lower case, or 32 characters or more.
pub(super) fn looks_random(value: &str) -> bool {
    let b = value.as_bytes();
    b.iter().any(u8::is_ascii_digit)
        || b.iter()
            .any(|c| c.is_ascii() && !(c.is_ascii_alphabetic() || matches!(c, b'_' | b'-' | b'.')))
        || (b.iter().skip(1).any(u8::is_ascii_uppercase) && b.iter().any(u8::is_ascii_lowercase))
        || b.len() >= 32
}

/// Whether a token body after a short prefix (`sk-`, `xoxb-`) looks generated: it looks random,
/// or it is one unbroken run (`sk-abcdefghijklmnop`) rather than words joined by dashes
/// (`sk-learn-tutorial`).
fn looks_generated(body: &str) -> bool {
    looks_random(body) || !body.contains(['-', '_'])
}

/// Whether every pattern compiled (they are compiled lazily, and a failure would silently
/// disable its pass), or the name of the first that did not.
pub(super) fn compiled() -> Result<(), &'static str> {
    let each = [
        (PRIVATE_KEY.is_some(), "private key"),
        (USERINFO.is_some(), "userinfo"),
        (WEBHOOKS.len() == 2, "webhooks"),
        (FAMILY_SET.is_some(), "token families"),
        (BEARER.is_some(), "bearer"),
        (NAME_ANCHORS.is_some(), "name anchors"),
        (ASSIGNMENT.is_some(), "assignment"),
    ];
    match each.iter().find(|(ok, _)| !ok) {
        Some((_, name)) => Err(name),
        None => Ok(()),
    }
}
