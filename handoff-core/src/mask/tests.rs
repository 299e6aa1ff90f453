use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, general_purpose};
use proptest::prelude::*;
use serde_json::json;

use super::names::is_secret_variable;
use super::{
    MIN_FREE_LEN, Masker, REDACTED, REDACTED_PRIVATE_KEY, REDACTED_TOKEN, codex_secret_key, encode,
    is_credential_name, patterns,
};

/// A generated-looking body of `len` characters (no literal tokens in the source).
fn body(len: usize) -> String {
    "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ"
        .chars()
        .cycle()
        .take(len)
        .collect()
}

fn upper_body(len: usize) -> String {
    "IOSFODNN7EXAMPLE2QRZ".chars().cycle().take(len).collect()
}

/// `s` as it reads between the quotes of a JSON string, escaped by serde_json.
fn json_inner(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap();
    quoted[1..quoted.len() - 1].to_owned()
}

fn mask(text: &str) -> String {
    Masker::default().mask(text).text.into_owned()
}

/// Each hit is masked to exactly the expected text; each near miss comes through unchanged.
fn check(hits: &[(String, String)], misses: &[String]) {
    for (input, expected) in hits {
        let masked = Masker::default().mask(input);
        assert_eq!(&masked.text, expected, "masking {input:?}");
        assert!(masked.count > 0, "{input:?} counted");
    }
    for input in misses {
        let masked = Masker::default().mask(input);
        assert_eq!(
            masked.text,
            Cow::Borrowed(input.as_str()),
            "{input:?} left alone"
        );
        assert_eq!(masked.count, 0, "{input:?}");
    }
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn every_pattern_compiles() {
    assert_eq!(patterns::compiled(), Ok(()));
}

// ---------------------------------------------------------------------------------------------
// Names

#[test]
fn credential_names() {
    for name in [
        "token",
        "GITHUB_TOKEN",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "DATABASE_PASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "apiKey",
        "accessToken",
        "clientSecret",
        "AWSSecretAccessKey",
        "X-Api-Key",
        "X-Goog-Api-Key",
        "X-Auth-Token",
        "X-Amz-Security-Token",
        "X-Custom-Auth",
        "Authorization",
        "Proxy-Authorization",
        "Cookie",
        "Set-Cookie",
        "experimental_bearer_token",
        "mcp_servers.docs.env.API_KEY",
        "SECRET_KEY_BASE",
        "token_value",
        "TOKEN_2",
        "api_key2",
        "MYSQL_PWD",
        "PGPASSWORD",
        "apikey",
        "passwd",
        "passphrase",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "credential",
        "secrets",
        "private_key",
        "ssh_key",
        "api_keys",
        "auth",
        "basic_auth",
        "csrf_token",
        "id_token",
    ] {
        assert!(is_credential_name(name), "{name} is a credential");
    }
    for name in [
        "key",
        "keys",
        "sort_key",
        "primaryKey",
        "PRIMARY_KEY",
        "foreign_key",
        "partition_key",
        "cache_key",
        "public_key",
        "ssh_public_key",
        "config_key",
        "key_id",
        "AWS_ACCESS_KEY_ID",
        "key_value",
        "author",
        "AUTHORS",
        "authorName",
        "monkey",
        "keyboard",
        "hotkey",
        "keywords",
        "token_count",
        "tokenCount",
        "max_tokens",
        "input_tokens",
        "tokens",
        "TOKENIZERS_PARALLELISM",
        "next_page_token",
        "nextToken",
        "eos_token",
        "cancellation_token",
        "password_file",
        "password_hash",
        "token_type",
        "SSH_AUTH_SOCK",
        "authentication",
        "oauth",
        "oauth2",
        "jsonwebtoken",
        "PWD",
        "OLDPWD",
        "secret_name",
        "TOKEN_PREFIX",
        "",
        "123",
    ] {
        assert!(!is_credential_name(name), "{name} is not a credential");
    }
}

#[test]
fn secret_variables_reach_wider_than_credential_names() {
    for name in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_CUSTOM_HEADERS",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "AWS_ACCESS_KEY_ID",
    ] {
        assert!(is_secret_variable(name), "{name}");
    }
    for name in ["ANTHROPIC_BASE_URL", "HOME", "SSH_AUTH_SOCK", "AUTHOR_NAME"] {
        assert!(!is_secret_variable(name), "{name}");
    }
}

#[test]
fn codex_secret_keys() {
    for key in [
        "experimental_bearer_token",
        "model_providers.gw.experimental_bearer_token",
        "model_providers.gw.http_headers",
        "model_providers.gw.http_headers.X-Tenant",
        "model_providers.gw.env_http_headers.Authorization",
        "mcp_servers.docs.env",
        "mcp_servers.docs.env.ANYTHING",
        "mcp_servers.\"my.server\".env.X",
        "profiles.p.mcp_servers.docs.env.X",
        "mcp_servers.docs.http_headers.X-Api-Key",
        "shell_environment_policy.set.GITHUB_TOKEN",
    ] {
        assert!(codex_secret_key(key), "{key}");
    }
    for key in [
        "model",
        "model_providers.gw.base_url",
        "model_providers.gw.env_key",
        "mcp_servers.docs.command",
        "mcp_servers.docs.args",
        "mcp_servers.docs.bearer_token_env_var",
        "mcp_servers.env",
        "model_reasoning_effort",
        "tools.web_search",
    ] {
        assert!(!codex_secret_key(key), "{key}");
    }
}

// ---------------------------------------------------------------------------------------------
// Token formats

#[test]
fn github_tokens() {
    let classic = format!("ghp_{}", body(36));
    let pat = format!("github_pat_11{}_{}", upper_body(20), body(59));
    check(
        &[
            (
                format!("token {classic} end"),
                format!("token {REDACTED_TOKEN} end"),
            ),
            (format!("gho_{}", body(36)), REDACTED_TOKEN.to_owned()),
            (format!("ghs_{}", body(36)), REDACTED_TOKEN.to_owned()),
            (format!("({pat})"), format!("({REDACTED_TOKEN})")),
        ],
        &strings(&[
            "ghp_short",
            "GitHub tokens start with ghp_.",
            "github_pat_docs",
            "xghp_a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZa1",
        ]),
    );
}

#[test]
fn gitlab_npm_slack_stripe_tokens() {
    check(
        &[
            (format!("glpat-{}", body(20)), REDACTED_TOKEN.to_owned()),
            (
                format!("//registry.npmjs.org/:_authToken=npm_{}", body(36)),
                format!("//registry.npmjs.org/:_authToken={REDACTED_TOKEN}"),
            ),
            (
                format!("SLACK=xoxb-123456789012-1234567890123-{}", body(24)),
                format!("SLACK={REDACTED_TOKEN}"),
            ),
            (
                format!("xapp-1-A0123-{}", body(30)),
                REDACTED_TOKEN.to_owned(),
            ),
            (
                format!("stripe sk_live_{} ok", body(24)),
                format!("stripe {REDACTED_TOKEN} ok"),
            ),
            (format!("rk_live_{}", body(24)), REDACTED_TOKEN.to_owned()),
            (format!("sk_test_{}", body(24)), REDACTED_TOKEN.to_owned()),
            (format!("whsec_{}", body(32)), REDACTED_TOKEN.to_owned()),
        ],
        &strings(&[
            "glpat-is-a-prefix-of-gitlab-tokens",
            "npm_config_registry=https://registry.npmjs.org/",
            "npm_lifecycle_event npm_package_version",
            "xoxb-docs",
            "task_live_updates",
            "sk_live_",
            "whsec_short",
        ]),
    );
}

#[test]
fn ai_provider_keys() {
    let anthropic = format!("sk-ant-api03-{}-{}AA", body(40), body(40));
    let openai = format!("sk-proj-{}_{}", body(30), body(20));
    check(
        &[
            (
                format!("key {anthropic}."),
                format!("key {REDACTED_TOKEN}."),
            ),
            (format!("\"{openai}\""), format!("\"{REDACTED_TOKEN}\"")),
            ("sk-abcdefghijklmnop".to_owned(), REDACTED_TOKEN.to_owned()),
            (format!("sk-or-v1-{}", body(64)), REDACTED_TOKEN.to_owned()),
            (format!("xai-{}", body(40)), REDACTED_TOKEN.to_owned()),
            (format!("AIza{}", body(35)), REDACTED_TOKEN.to_owned()),
            (format!("hf_{}", body(34)), REDACTED_TOKEN.to_owned()),
        ],
        &strings(&[
            "sk-learn-tutorial",
            "sk-1",
            "task-550e8400-e29b-41d4-a716-446655440000",
            "disk-usage-report risk-assessment-2024",
            "xai-sdk-python",
            "AIzaShort",
            "hf_hub_download",
        ]),
    );
}

#[test]
fn aws_jwt_handoff_tokens() {
    let jwt = format!("eyJ{}.eyJ{}.{}", body(20), body(30), body(43));
    let hcap = format!("hcap_{}", "0123456789abcdef".repeat(4));
    check(
        &[
            (
                "id AKIAIOSFODNN7EXAMPLE,".to_owned(),
                format!("id {REDACTED_TOKEN},"),
            ),
            ("ASIAIOSFODNN7EXAMPLE".to_owned(), REDACTED_TOKEN.to_owned()),
            (format!("jwt={jwt}"), format!("jwt={REDACTED_TOKEN}")),
            (format!("{hcap}\n"), format!("{REDACTED_TOKEN}\n")),
        ],
        &strings(&[
            "AKIAIOSFODNN7EXAMPLEX",
            "AKIAIOSFODNN7EXAMPLEabc",
            "AKIA is the prefix",
            "eyJhbGciOi only",
            "hcap_prefix",
        ]),
    );
}

#[test]
fn bearer_tokens() {
    check(
        &owned(&[
            ("Bearer abc.def.ghi12345", "Bearer [REDACTED]"),
            (
                "curl -H 'authorization: bearer Zm9vYmFyYmF6'",
                "curl -H 'authorization: bearer [REDACTED]'",
            ),
        ]),
        &strings(&[
            "the Bearer authentication scheme",
            "Bearer ${TOKEN}",
            "Bearer <token>",
            "Bearer token-based auth",
        ]),
    );
}

#[test]
fn wrapped_tokens_are_masked_across_lines() {
    let t = format!("ghp_{}", body(36));
    let (a, b) = t.split_at(24);
    let npm = format!("npm_{}", body(36));
    let (n1, rest) = npm.split_at(15);
    let (n2, n3) = rest.split_at(15);
    let sk = format!("sk-ant-api03-{}", body(80));
    let (s1, s2) = sk.split_at(50);
    check(
        &[
            (
                format!("key: {a}\n  {b}\nnext"),
                format!("key: {REDACTED_TOKEN}\nnext"),
            ),
            (format!("> {a}\n> {b} ok"), format!("> {REDACTED_TOKEN} ok")),
            (format!("{n1}\n{n2}\n{n3}."), format!("{REDACTED_TOKEN}.")),
            (
                "AKIAIOSF\r\nODNN7EXAMPLE".to_owned(),
                REDACTED_TOKEN.to_owned(),
            ),
            (
                format!("\"note\": \"{s1}\\n{s2}\""),
                format!("\"note\": \"{REDACTED_TOKEN}\""),
            ),
            (format!("{s1}\n    {s2}\n"), format!("{REDACTED_TOKEN}\n")),
        ],
        &[],
    );
    // A whole token at the end of a line does not take the next line's words.
    assert_eq!(
        mask(&format!("{t}\nNext steps")),
        format!("{REDACTED_TOKEN}\nNext steps")
    );
    assert_eq!(
        mask(&format!("{sk}\nand then")),
        format!("{REDACTED_TOKEN}\nand then")
    );
    assert_eq!(
        mask("AKIAIOSFODNN7EXAMPLE\nABCD"),
        format!("{REDACTED_TOKEN}\nABCD")
    );
    // A cut fixed-length token takes exactly what it lacks, or nothing.
    assert_eq!(
        mask(&format!("{a}\nNext steps")),
        format!("{REDACTED_TOKEN}\nNext steps")
    );
}

// ---------------------------------------------------------------------------------------------
// Private keys and URLs

#[test]
fn private_key_blocks() {
    let lines = format!("{}\n{}\n{}==", body(64), body(64), body(20));
    let block = format!("-----BEGIN RSA PRIVATE KEY-----\n{lines}\n-----END RSA PRIVATE KEY-----");
    let openssh =
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{lines}\n-----END OPENSSH PRIVATE KEY-----");
    let escaped = format!(
        "{{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\n{}\\n-----END PRIVATE KEY-----\\n\"}}",
        body(64)
    );
    let encrypted = format!(
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B\n\n{lines}\n-----END ENCRYPTED PRIVATE KEY-----"
    );
    let pgp = format!(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{lines}\n-----END PGP PRIVATE KEY BLOCK-----"
    );
    let cut = format!("-----BEGIN PRIVATE KEY-----\n{}\n{}", body(64), body(64));
    check(
        &[
            (
                format!("key:\n{block}\ndone"),
                format!("key:\n{REDACTED_PRIVATE_KEY}\ndone"),
            ),
            (openssh, REDACTED_PRIVATE_KEY.to_owned()),
            (
                escaped,
                format!("{{\"private_key\": \"{REDACTED_PRIVATE_KEY}\\n\"}}"),
            ),
            (encrypted, REDACTED_PRIVATE_KEY.to_owned()),
            (pgp, REDACTED_PRIVATE_KEY.to_owned()),
            (
                format!("{cut}\nThen run it."),
                format!("{REDACTED_PRIVATE_KEY}\nThen run it."),
            ),
        ],
        &[
            format!("-----BEGIN PUBLIC KEY-----\n{lines}\n-----END PUBLIC KEY-----"),
            format!("-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----"),
            "the PRIVATE KEY header".to_owned(),
        ],
    );
    // Two blocks are masked apart, the text between them kept.
    assert_eq!(
        mask(&format!("{block}\nbetween\n{block}")),
        format!("{REDACTED_PRIVATE_KEY}\nbetween\n{REDACTED_PRIVATE_KEY}")
    );
}

#[test]
fn url_credentials_and_webhooks() {
    let ghs = format!("ghs_{}", body(36));
    check(
        &[
            (
                "git clone https://user:pass@example.com/repo.git".to_owned(),
                "git clone https://[REDACTED]@example.com/repo.git".to_owned(),
            ),
            (
                "DATABASE_URL=postgres://app:s3cr3t@db:5432/app".to_owned(),
                "DATABASE_URL=postgres://[REDACTED]@db:5432/app".to_owned(),
            ),
            (
                "redis://:p%40ss@cache:6379".to_owned(),
                "redis://[REDACTED]@cache:6379".to_owned(),
            ),
            (
                "https://me:p@ss@host/x".to_owned(),
                "https://[REDACTED]@host/x".to_owned(),
            ),
            (
                format!("https://x-access-token:{ghs}@github.com/o/r"),
                "https://[REDACTED]@github.com/o/r".to_owned(),
            ),
            (
                format!("https://{}@github.com/o/r", "0a1b2c3d4e5f".repeat(3)),
                "https://[REDACTED]@github.com/o/r".to_owned(),
            ),
            (
                "hook https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX now".to_owned(),
                "hook https://hooks.slack.com/services/[REDACTED] now".to_owned(),
            ),
            (
                format!("https://discord.com/api/webhooks/123456/{}", body(60)),
                "https://discord.com/api/webhooks/123456/[REDACTED]".to_owned(),
            ),
        ],
        &strings(&[
            "https://github.com/org/repo/pull/42",
            "ssh://git@github.com/org/repo.git",
            "git@github.com:org/repo.git",
            "https://user@example.com/path",
            "https://example.com/@scope/pkg?ref=main#L10",
            "https://example.com/?email=a@b.com",
            "https://user:${PASS}@host/x",
            "https://hooks.slack.com/",
            "mailto:jane@example.com",
        ]),
    );
}

// ---------------------------------------------------------------------------------------------
// Credential-named values

#[test]
fn credential_named_values() {
    check(
        &owned(&[
            ("DATABASE_PASSWORD=hunter22", "DATABASE_PASSWORD=[REDACTED]"),
            (
                "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "AWS_SECRET_ACCESS_KEY=[REDACTED]",
            ),
            ("export GITHUB_TOKEN=abc", "export GITHUB_TOKEN=[REDACTED]"),
            ("password=hunter2 and more", "password=[REDACTED] and more"),
            (
                "MYSQL_PWD=pw PGPASSWORD=pw2",
                "MYSQL_PWD=[REDACTED] PGPASSWORD=[REDACTED]",
            ),
            ("SECRET_KEY_BASE=abc", "SECRET_KEY_BASE=[REDACTED]"),
            (
                "{\"api_key\": \"abc\", \"x\": 1}",
                "{\"api_key\": \"[REDACTED]\", \"x\": 1}",
            ),
            ("{\"apiKey\":\"a\\\"b\"}", "{\"apiKey\":\"[REDACTED]\"}"),
            (
                "\"{\\\"token\\\": \\\"abc\\\"}\"",
                "\"{\\\"token\\\": \\\"[REDACTED]\\\"}\"",
            ),
            ("{'password': 'pw'}", "{'password': '[REDACTED]'}"),
            ("token = \"abc\"", "token = \"[REDACTED]\""),
            ("client_secret = 'x'", "client_secret = '[REDACTED]'"),
            ("password: hunter2", "password: [REDACTED]"),
            ("  api_key: sk_abc123\n", "  api_key: [REDACTED]\n"),
            (
                "Authorization: Basic dXNlcjpwYXNz",
                "Authorization: Basic [REDACTED]",
            ),
            (
                "Authorization: token abc123",
                "Authorization: token [REDACTED]",
            ),
            (
                "Proxy-Authorization: Digest username=a, response=b",
                "Proxy-Authorization: Digest [REDACTED]",
            ),
            (
                "curl -H 'Authorization: Basic dXNlcjpwYXNz' x",
                "curl -H 'Authorization: Basic [REDACTED]' x",
            ),
            (
                "Cookie: session=abc; theme=dark\nHost: x",
                "Cookie: [REDACTED]\nHost: x",
            ),
            ("X-Api-Key: abcdef", "X-Api-Key: [REDACTED]"),
            ("x-goog-api-key: abcdefgh", "x-goog-api-key: [REDACTED]"),
            (
                "X-Custom-Auth: letmein\nX-Trace: 1",
                "X-Custom-Auth: [REDACTED]\nX-Trace: 1",
            ),
            ("--api-key=abc --model x", "--api-key=[REDACTED] --model x"),
            (
                "run --password s3cret! now",
                "run --password [REDACTED] now",
            ),
            (
                "GET /x?access_token=abc123&page=2",
                "GET /x?access_token=[REDACTED]&page=2",
            ),
            ("token: Bearer abc", "token: Bearer [REDACTED]"),
            ("apiKey: \"x1\"", "apiKey: \"[REDACTED]\""),
            (
                "mcp_servers.docs.env.API_KEY = \"v\"",
                "mcp_servers.docs.env.API_KEY = \"[REDACTED]\"",
            ),
            ("const token = \"abc123\";", "const token = \"[REDACTED]\";"),
            ("TOKEN=dGVzdA==", "TOKEN=[REDACTED]"),
            ("secret: dGVzdA==", "secret: [REDACTED]"),
            (
                "INFO using password=hunter2,user=bob",
                "INFO using password=[REDACTED],user=bob",
            ),
            (
                "< set-cookie: a=b; Path=/; HttpOnly",
                "< set-cookie: [REDACTED]",
            ),
            (
                "{\"oauth_token\": \"t\"}",
                "{\"oauth_token\": \"[REDACTED]\"}",
            ),
        ]),
        &strings(&[
            "AWS_ACCESS_KEY_ID=some-id",
            "sort_key = \"name\"",
            "primary_key = \"id\"",
            "author = \"x\"",
            "AUTHORS=x",
            "token_count = 5",
            "max_tokens: 4096",
            "input_tokens=12",
            "SSH_AUTH_SOCK=/tmp/x",
            "key = \"ctrl+c\"",
            "monkey=banana1",
            "TOKENIZERS_PARALLELISM=false",
            "password_file=/etc/pw",
            "token: String,",
            "token: u64,",
            "api_key: Option<String>,",
            "refresh_token: SecretString,",
            "fn f(token: &str) {}",
            "fn f(token: impl Into<String>) {}",
            "let token = self.token.clone();",
            "token = get_token()",
            "api_key=settings.api_key",
            "this.apiKey = apiKey;",
            "API_KEY=$API_KEY",
            "API_KEY=${API_KEY}",
            "TOKEN=%TOKEN%",
            "token: ${{ secrets.GITHUB_TOKEN }}",
            "\"token\": null",
            "\"password\": \"\"",
            "password=<your password>",
            "password: '***'",
            "token: xxxxxxxx",
            "Token: expired",
            "Password: see the vault",
            "next_page_token=abc123",
            "eos_token = \"</s>\"",
            "token := os.Getenv(\"TOKEN\")",
            "if token == \"\" {}",
            "--token <TOKEN>",
            "--token-file ./t",
            "docker build --secret id=npmrc,src=x .",
            "Authorization: Bearer ${TOKEN}",
            "Password: !Ref DbPassword",
            "token: Token::new()",
            "Authorization: Bearer",
            "{\"params\":{\"_meta\":{\"progressToken\":1}}}",
            "{\"apiKeySource\":\"none\",\"auth_mode\":\"chatgpt\",\"tokens_used\":5}",
            "password: \"{{ vault_password }}\"",
            "PASSWORD: ${DB_PASSWORD:-changeme}",
            "SECRET=$(openssl rand -hex 32)",
            "--api-key <KEY>",
        ]),
    );
}

// ---------------------------------------------------------------------------------------------
// Known secrets

#[test]
fn known_secrets_in_every_form() {
    let secret = "s3cr3t/v@lue+\"quoted\"";
    let masker = Masker::new([secret]);
    let forms = [
        secret.to_owned(),
        json_inner(secret),
        hex::encode(secret),
        hex::encode_upper(secret),
        "s3cr3t%2Fv%40lue%2B%22quoted%22".to_owned(),
        "s3cr3t%2fv%40lue%2b%22quoted%22".to_owned(),
        general_purpose::STANDARD.encode(secret),
        general_purpose::URL_SAFE_NO_PAD.encode(secret),
        // PHP's `json_encode` (`\/`), and every character as `\uXXXX`.
        r#"s3cr3t\/v@lue+\"quoted\""#.to_owned(),
        secret
            .chars()
            .map(|c| format!("\\u{:04x}", u32::from(c)))
            .collect(),
        // Every byte as `%XX`, letters and digits too.
        secret.bytes().map(|b| format!("%{b:02X}")).collect(),
    ];
    for form in forms {
        let text = format!("before {form} after");
        let masked = masker.mask_known(&text);
        assert_eq!(masked.text, format!("before {REDACTED} after"), "{form}");
        assert_eq!(masked.count, 1);
    }
}

#[test]
fn json_unicode_escapes_of_a_known_secret_are_masked() {
    // Go escapes `<`, `>` and `&`; Python's `ensure_ascii` every non-ASCII character.
    let secret = "pa<ss>&wörd-Zx81Lk";
    let masker = Masker::new([secret]);
    for form in [
        r"pa\u003css\u003e\u0026wörd-Zx81Lk",
        r"pa<ss>&w\u00f6rd-Zx81Lk",
    ] {
        let text = format!("{{\"v\":\"{form}\"}}");
        let masked = masker.mask_known(&text);
        assert_eq!(masked.count, 1, "{form}: {}", masked.text);
        assert!(!masked.text.contains("Zx81Lk"), "{form}");
    }
}

#[test]
fn base64_inner_substrings_match_the_reference_encoder() {
    for len in 1..12 {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        assert_eq!(
            encode::base64(&bytes, encode::STANDARD),
            general_purpose::STANDARD.encode(&bytes)
        );
        assert_eq!(
            encode::base64(&bytes, encode::URL_SAFE),
            general_purpose::URL_SAFE.encode(&bytes)
        );
    }
}

#[test]
fn nothing_matched_borrows_the_text() {
    let masker = Masker::new(["a-known-secret-value"]);
    let text = "nothing to see";
    let masked = masker.mask(text);
    assert!(matches!(masked.text, Cow::Borrowed(_)));
    assert_eq!(masked.count, 0);
    assert!(matches!(masker.mask_known(text).text, Cow::Borrowed(_)));
}

#[test]
fn short_known_secrets_are_masked_only_as_values() {
    let masker = Masker::new(["hunt3r", "", "   "]);
    for text in [
        "the hunt3r went home",
        "unhunt3red",
        "hunt3rs",
        "path/hunt3r/x",
        "see hunt3r: later",
    ] {
        assert_eq!(masker.mask(text).text, text, "{text}");
    }
    for (text, expected) in [
        ("PASS=hunt3r", "PASS=[REDACTED]"),
        ("value: hunt3r\n", "value: [REDACTED]\n"),
        ("{\"x\": \"hunt3r\"}", "{\"x\": \"[REDACTED]\"}"),
        ("hunt3r", "[REDACTED]"),
        ("DB_PASSWORD=hunt3r", "DB_PASSWORD=[REDACTED]"),
    ] {
        assert_eq!(masker.mask(text).text, expected, "{text}");
    }
    let mut v = json!({"msg": "hunt3r is here", "x": "hunt3r", "list": ["hunt3r"]});
    assert_eq!(masker.mask_json(&mut v), 2);
    assert_eq!(
        v,
        json!({"msg": "hunt3r is here", "x": REDACTED, "list": [REDACTED]})
    );
}

#[test]
fn mask_json_masks_values_under_credential_names_whole() {
    let anthropic = format!("sk-ant-api03-{}", body(40));
    let mut v = json!({
        "api_key": "x",
        "sort_key": "name",
        "author": "me",
        "max_tokens": 100,
        "nested": {"password": "", "token": "$T", "GITHUB_TOKEN": "abc"},
        "text": format!("use {anthropic} now"),
        "credentials": {"user": "u", "pass": ["p", 3]},
        "headers": {"Authorization": "Bearer abc", "Accept": "text/plain"},
        "auth": null,
        "items": [{"secret": "s"}, "known-secret-1"],
    });
    let masker = Masker::new(["known-secret-1"]);
    assert_eq!(masker.mask_json(&mut v), 8);
    assert_eq!(
        v,
        json!({
            "api_key": REDACTED,
            "sort_key": "name",
            "author": "me",
            "max_tokens": 100,
            "nested": {"password": "", "token": "$T", "GITHUB_TOKEN": REDACTED},
            "text": format!("use {REDACTED_TOKEN} now"),
            "credentials": {"user": REDACTED, "pass": [REDACTED, 3]},
            "headers": {"Authorization": REDACTED, "Accept": "text/plain"},
            "auth": null,
            "items": [{"secret": REDACTED}, REDACTED],
        })
    );
}

// ---------------------------------------------------------------------------------------------
// What must come through untouched

#[test]
fn the_corpus_comes_through_byte_for_byte() {
    let corpus = include_str!("corpus.txt");
    let masker = Masker::new(["a-known-secret-value", "another-known-one", "short"]);
    let masked = masker.mask(corpus);
    if masked.text != corpus {
        for (a, b) in corpus.lines().zip(masked.text.lines()) {
            assert_eq!(a, b, "a line of the corpus was changed");
        }
    }
    assert!(matches!(masked.text, Cow::Borrowed(_)));
    assert_eq!(masked.count, 0);
    // Its JSON lines too, value by value.
    for line in corpus.lines().filter(|l| l.starts_with('{')) {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let before = v.clone();
        assert_eq!(masker.mask_json(&mut v), 0, "{line}");
        assert_eq!(v, before);
    }
}

#[test]
fn masking_is_linear_on_adversarial_text() {
    // Many anchors and near-tokens: each pass stays one scan.
    let text =
        "token=a key: sk- ghp_ AKIA -----BEGIN PRIVATE KEY----- https://a:b@ ".repeat(20_000);
    let started = std::time::Instant::now();
    let masked = Masker::new(["a-known-secret-value"]).mask(&text);
    assert!(masked.count > 0);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

// ---------------------------------------------------------------------------------------------
// Properties

/// Whether any base64 run of `text`, decoded at any alignment, holds `secret`.
pub(super) fn decodes_to(text: &str, secret: &[u8]) -> bool {
    let lenient = GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let engines = [
        GeneralPurpose::new(&base64::alphabet::STANDARD, lenient),
        GeneralPurpose::new(&base64::alphabet::URL_SAFE, lenient),
    ];
    let runs = text.split(|c: char| !(c.is_ascii_alphanumeric() || "+/-_".contains(c)));
    for run in runs {
        for skip in 0..4.min(run.len()) {
            let chunk = &run[skip..];
            // A lone last character carries no whole byte.
            let chunk = &chunk[..chunk.len() - usize::from(chunk.len() % 4 == 1)];
            for engine in &engines {
                if let Ok(bytes) = engine.decode(chunk)
                    && bytes.windows(secret.len()).any(|w| w == secret)
                {
                    return true;
                }
            }
        }
    }
    false
}

/// Decodes `%XX` escapes (an implementation other than the one under test).
fn percent_decoded(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn no_known_secret_survives_in_any_form(
        secret in "\\PC{8,24}",
        prefix in "[ -~]{0,12}",
        suffix in "[ -~]{0,12}",
    ) {
        prop_assume!(secret.len() >= MIN_FREE_LEN);
        let masker = Masker::new([secret.as_str()]);
        let forms = [
            secret.clone(),
            serde_json::to_string(&secret).unwrap(),
            hex::encode(&secret),
            hex::encode_upper(&secret),
        ];
        for form in forms {
            let text = format!("{prefix}{form}{suffix}");
            let masked = masker.mask(&text);
            prop_assert!(!masked.text.contains(&secret), "{}", masked.text);
            prop_assert!(!masked.text.contains(&hex::encode(&secret)));
            prop_assert!(!masked.text.to_ascii_lowercase().contains(&hex::encode(&secret)));
            prop_assert!(!masked.text.contains(&json_inner(&secret)));
        }
        // Percent-encoded (every byte but letters and digits, or all but the unreserved
        // punctuation), checked by decoding.
        for kept in ["", "-._~"] {
            let encoded: String = secret
                .bytes()
                .map(|b| if b.is_ascii_alphanumeric() || kept.as_bytes().contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                })
                .collect();
            let text = format!("{prefix}{encoded}{suffix}");
            let masked = masker.mask(&text);
            prop_assert!(!contains(&percent_decoded(&masked.text), secret.as_bytes()), "{}", masked.text);
        }
    }

    #[test]
    fn no_known_secret_survives_inside_a_base64_blob(
        secret in proptest::collection::vec(any::<u8>(), 8..24),
        before in proptest::collection::vec(any::<u8>(), 0..10),
        after in proptest::collection::vec(any::<u8>(), 0..10),
        url_safe in any::<bool>(),
    ) {
        // The known secret is text; any bytes around it.
        let secret: String = secret.iter().map(|b| char::from(b'!' + b % 94)).collect();
        let blob = [before.as_slice(), secret.as_bytes(), after.as_slice()].concat();
        let encoded = if url_safe {
            general_purpose::URL_SAFE_NO_PAD.encode(&blob)
        } else {
            general_purpose::STANDARD.encode(&blob)
        };
        let text = format!("data: {encoded}\n");
        prop_assert!(decodes_to(&text, secret.as_bytes()), "the oracle finds it unmasked");
        let masked = Masker::new([secret.as_str()]).mask(&text);
        prop_assert!(!decodes_to(&masked.text, secret.as_bytes()), "{}", masked.text);
    }

    #[test]
    fn a_secret_that_begins_another_leaves_nothing_of_either(
        short in "[A-Za-z0-9]{8,16}",
        tail in "[A-Za-z0-9]{1,10}",
        between in "[ a-z]{0,10}",
        order in any::<bool>(),
    ) {
        let long = format!("{short}{tail}");
        let known = if order { [short.clone(), long.clone()] } else { [long.clone(), short.clone()] };
        let masker = Masker::new(&known);
        let text = format!("{long}{between}{short} {long}");
        let masked = masker.mask(&text);
        prop_assert!(!masked.text.contains(&short), "{}", masked.text);
        prop_assert!(masked.count >= 3, "{}", masked.text);
        // Each occurrence of the longer secret goes whole, its tail with it.
        prop_assert!(!masked.text.starts_with(&long), "{}", masked.text);
        prop_assert!(masked.text.starts_with(REDACTED), "{}", masked.text);
    }

    #[test]
    fn masking_never_panics_and_counts_what_it_changes(text in "\\PC{0,300}") {
        let masker = Masker::new(["a-known-secret-value"]);
        let masked = masker.mask(&text);
        prop_assert_eq!(masked.count == 0, masked.text == text);
    }

    #[test]
    fn ordinary_words_survive(words in proptest::collection::vec("[a-z]{1,12}", 1..30)) {
        let text = words.join(" ");
        prop_assert_eq!(mask(&text), text);
    }
}

#[test]
fn a_secret_that_starts_inside_another_is_masked_with_it() {
    let masker = Masker::new(["zzzzzzzz-sk-test-0", "sk-test-0123456789abcdefXYZ"]);
    let masked = masker.mask_known("key zzzzzzzz-sk-test-0123456789abcdefXYZ end");
    assert_eq!(masked.text, format!("key {REDACTED} end"));
    // One shorter secret that is a prefix of a longer one still leaves nothing of the longer.
    let masker = Masker::new(["abcdefgh12", "abcdefgh1234567890"]);
    let masked = masker.mask_known("x abcdefgh1234567890 y abcdefgh12 z");
    assert_eq!(masked.text, format!("x {REDACTED} y {REDACTED} z"));
}
