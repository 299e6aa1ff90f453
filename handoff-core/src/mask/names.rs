//! Which names hold a credential.
//!
//! A name is split into words (at `_`, `-`, `.`, spaces and camelCase boundaries, any case) and
//! it names a credential when its *last* word (its head noun) is one of [`CREDENTIAL_WORDS`]:
//! `DATABASE_PASSWORD`, `AWS_SECRET_ACCESS_KEY`, `apiKey`, `X-Auth-Token`,
//! `experimental_bearer_token`. A word elsewhere in the name does not count, so `token_count`,
//! `password_file`, `SSH_AUTH_SOCK` and `AWS_ACCESS_KEY_ID` are not credentials, and words
//! are compared whole, so `AUTHOR`, `MONKEY` and `keyboard` are not either.
//!
//! Choices:
//! - trailing words that only qualify the secret are skipped: digits (`TOKEN_2`, `key1`) and
//!   [`QUALIFIERS`] (`SECRET_KEY_BASE`, `token_value`, `password_b64`);
//! - `KEY` alone is not a credential (`key = "ctrl+c"`, `{"key": "src/main.rs"}`), nor is a key
//!   qualified by a word of [`KEY_NOT_SECRET`] (`sort_key`, `primary_key`, `public_key`,
//!   `cache_key`, `config_key`): those name a lookup key or public material. Every other
//!   `…_KEY` (`api_key`, `private_key`, `ssh_key`, `license_key`) is a credential;
//! - `*_KEY_ID` (`AWS_ACCESS_KEY_ID`) identifies a key without granting anything, so its value
//!   is not masked by name (the AWS access key pattern still masks `AKIA…` ids);
//! - `TOKEN` qualified by a word of [`TOKEN_NOT_SECRET`] names a position or a piece of text,
//!   not a credential: `next_token`, `page_token`, `eos_token`, `cancellation_token`;
//! - plural `TOKENS` counts them (`max_tokens`, `input_tokens`) and is not a credential, while
//!   `SECRETS`, `PASSWORDS`, `CREDENTIALS`, `COOKIES` and qualified `KEYS` are;
//! - `PWD` is a credential only as the last word of a longer name (`MYSQL_PWD`): `PWD` and
//!   `OLDPWD` are directories.

/// Head words that make a name a credential's. Glued compounds (`apikey`, `pgpassword`) are
/// listed whole: a word merely *ending* in `token` (`jsonwebtoken`) is not one.
pub const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "secret",
    "secrets",
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "cookie",
    "cookies",
    "key",
    "keys",
    "pwd",
    "apikey",
    "apitoken",
    "apisecret",
    "authtoken",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "bearertoken",
    "sessiontoken",
    "securitytoken",
    "secretkey",
    "privatekey",
    "accesskey",
    "clientsecret",
    "pgpassword",
    "dbpassword",
];

/// Trailing words skipped before the head word is read: they qualify the secret.
pub const QUALIFIERS: &[&str] = &[
    "value",
    "b64",
    "base64",
    "raw",
    "base",
    "str",
    "string",
    "hex",
    "encoded",
    "plain",
    "plaintext",
];

/// Words before `KEY`/`KEYS` that make it a lookup key or public material, not a secret.
pub const KEY_NOT_SECRET: &[&str] = &[
    "sort",
    "primary",
    "foreign",
    "partition",
    "cluster",
    "clustering",
    "range",
    "hash",
    "shard",
    "routing",
    "unique",
    "composite",
    "compound",
    "natural",
    "surrogate",
    "candidate",
    "lookup",
    "index",
    "group",
    "dedup",
    "dedupe",
    "idempotency",
    "cache",
    "cursor",
    "lock",
    "public",
    "pub",
    "map",
    "dict",
    "object",
    "bucket",
    "s3",
    "redis",
    "config",
    "setting",
    "settings",
    "env",
    "field",
    "column",
    "table",
    "property",
    "prop",
    "attr",
    "attribute",
    "label",
    "metadata",
    "meta",
    "header",
    "query",
    "param",
    "locale",
    "lang",
    "i18n",
    "translation",
    "message",
    "menu",
    "shortcut",
    "hot",
    "list",
    "item",
    "node",
    "entry",
    "record",
    "row",
    "state",
    "parent",
    "child",
    "react",
];

/// Words before `TOKEN` that make it a position or a piece of text, not a credential.
pub const TOKEN_NOT_SECRET: &[&str] = &[
    "page",
    "next",
    "continuation",
    "pagination",
    "sync",
    "cancellation",
    "cancel",
    "stop",
    "start",
    "end",
    "eos",
    "bos",
    "pad",
    "unk",
    "mask",
    "sep",
    "cls",
    "special",
    "max",
    "min",
    "first",
    "last",
    "input",
    "output",
    "lexer",
    "parser",
    "syntax",
    "current",
    "prev",
    "previous",
    "peek",
    "sentinel",
    "delimiter",
    "count",
    "progress",
    "resume",
    "change",
];

/// Whether the value of `name` (an environment variable, a config key, a JSON key, a header, a
/// command-line flag without its dashes) is a credential. See the module documentation for
/// the rules and their exceptions.
pub fn is_credential_name(name: &str) -> bool {
    let mut words = words(name);
    // Trailing digits and qualifiers do not change what the name holds.
    while let Some(last) = words.last() {
        let bare = last.trim_end_matches(|c: char| c.is_ascii_digit());
        if bare.is_empty() || (words.len() > 1 && QUALIFIERS.contains(&bare)) {
            words.pop();
        } else {
            break;
        }
    }
    let Some(last) = words.last() else {
        return false;
    };
    let head = last.trim_end_matches(|c: char| c.is_ascii_digit());
    if !CREDENTIAL_WORDS.contains(&head) {
        return false;
    }
    let before = words.len().checked_sub(2).map(|i| words[i].as_str());
    match head {
        "key" | "keys" => before.is_some_and(|b| !KEY_NOT_SECRET.contains(&b)),
        "token" => before.is_none_or(|b| !TOKEN_NOT_SECRET.contains(&b)),
        "pwd" => before.is_some(),
        _ => true,
    }
}

/// Whether an environment variable or configuration key handed to handoff holds something to
/// keep secret: a credential ([`is_credential_name`]), header lines (`ANTHROPIC_CUSTOM_HEADERS`,
/// `OTEL_EXPORTER_OTLP_HEADERS`, whose lines carry API keys) or a key id that goes with a
/// secret (`AWS_ACCESS_KEY_ID`). Broader than [`is_credential_name`]: handoff's own settings
/// are masked whole, where text is masked only where it surely holds a secret.
pub fn is_secret_variable(name: &str) -> bool {
    if is_credential_name(name) {
        return true;
    }
    let words = words(name);
    match words.as_slice() {
        [.., last] if last == "headers" => true,
        [.., key, id] => key == "key" && id == "id",
        _ => false,
    }
}

/// Whether a Codex configuration key (dotted, as in `-c key=value` or a `config.toml` path)
/// holds a secret: `experimental_bearer_token` and any other key whose last part is a
/// credential name, everything under `http_headers` or `env_http_headers` (a provider's or an
/// MCP server's), and everything under `mcp_servers.<name>.env`.
pub fn codex_secret_key(key: &str) -> bool {
    let parts = dotted_parts(key);
    if parts
        .iter()
        .any(|p| p == "http_headers" || p == "env_http_headers")
    {
        return true;
    }
    if parts
        .windows(3)
        .any(|w| w[0] == "mcp_servers" && w[2] == "env")
    {
        return true;
    }
    parts.last().is_some_and(|p| is_credential_name(p))
}

/// The parts of a dotted TOML key, quoted parts (`mcp_servers."my.server".env`) kept whole.
fn dotted_parts(key: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote = None;
    for c in key.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => quote = Some(c),
            (None, '.') => parts.push(std::mem::take(&mut current)),
            (None, c) if c.is_whitespace() => {}
            (None, c) => current.push(c),
        }
    }
    parts.push(current);
    parts
}

/// The lower-case words of a name: split at every character that is not an ASCII letter or
/// digit, and at camelCase boundaries (`apiKey` → api, key; `AWSSecretAccessKey` → aws,
/// secret, access, key; `S3Key` → s3, key).
pub(super) fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c.is_ascii_uppercase() && !current.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower)
            {
                out.push(std::mem::take(&mut current));
            }
        }
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
