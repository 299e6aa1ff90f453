//! Secrets broken up on their way out: wrapped base64, shell quoting, terminal escape sequences
//! inside; values recognised in one place masked everywhere; a masker that cannot be built.

use base64::Engine as _;
use base64::engine::general_purpose;
use proptest::prelude::*;

use super::known::FAIL_TO_BUILD;
use super::{Masker, REDACTED};

/// `text` wrapped onto lines of `width` columns ending in `eol`, as `base64` (76), PEM (64) and
/// MIME (76, CRLF) write it.
fn wrapped(text: &str, width: usize, eol: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(width)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(eol)
}

/// `text` without terminal escape sequences, quotes, backslashes and line breaks: what a
/// terminal shows or a shell makes of it, run together.
fn run_together(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                if chars.next_if_eq(&'[').is_some() {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else if chars.next_if_eq(&']').is_some() {
                    for c in chars.by_ref() {
                        if c == '\u{7}' {
                            break;
                        }
                    }
                }
            }
            '\'' | '"' | '\\' | '\n' | '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// What `printf %q` makes of `s` in bash (a backslash before every shell-special character).
fn printf_q(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if !(c.is_ascii_alphanumeric() || "-_./,:@%+=".contains(c)) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `s` single-quoted, each `'` in it written as `'\''`.
fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn base64_wrapped_at_76_columns_is_masked() {
    let secret = "sk-ant-api03-Wr4pp3dS3cretV4lue-0123456789";
    let config = format!("{{\"provider\":\"anthropic\",\"apiKey\":\"{secret}\",\"retries\":3}}");
    let encoded = general_purpose::STANDARD.encode(config.repeat(3));
    let text = format!("config:\n{}\n", wrapped(&encoded, 76, "\n"));
    let masked = Masker::new([secret]).mask(&text).text.into_owned();
    let joined: String = masked.split_whitespace().collect();
    let decoded = general_purpose::STANDARD.decode(joined.as_bytes());
    assert!(
        decoded.is_err() || !String::from_utf8_lossy(&decoded.unwrap()).contains(secret),
        "{masked}"
    );
    assert!(masked.contains(REDACTED), "{masked}");
    // What is not the secret stays: the first line of the encoding starts before it.
    assert!(masked.starts_with(&format!("config:\n{}", &encoded[..20])));
}

#[test]
fn shell_quoted_forms_are_masked() {
    let secret = "p4ss'w0rd$Value!2024";
    let masker = Masker::new([secret]);
    let (a, b) = secret.split_at(9);
    let forms = [
        single_quoted(secret),
        printf_q(secret),
        format!("'{a}'\"{b}\""),
        format!("\"{a}\"'{b}'"),
        format!("{}{}", printf_q(a), single_quoted(b)),
    ];
    for form in forms {
        let text = format!("export DB_URL={form}; run");
        let masked = masker.mask_known(&text).text.into_owned();
        assert!(
            !run_together(&masked).contains(secret),
            "{form} -> {masked}"
        );
        assert!(masked.starts_with("export DB_URL="), "{masked}");
        assert!(masked.ends_with("; run"), "{masked}");
    }
}

#[test]
fn a_backslash_in_a_secret_is_masked_however_it_is_quoted() {
    // A literal `\n` inside the secret: `printf %q` doubles the backslash, a single-quoted
    // form keeps it, a JSON string doubles it too.
    for secret in [r"a0(aaaA\n", r"ab\ncdefgh", r"ab\\cd\efgh"] {
        let masker = Masker::new([secret]);
        let json = serde_json::to_string(secret).unwrap();
        for form in [printf_q(secret), single_quoted(secret), json] {
            let text = format!("x={form} y");
            let masked = masker.mask_known(&text).text.into_owned();
            assert!(
                !run_together(&masked).contains(&run_together(secret)),
                "{text:?} -> {masked:?}"
            );
            assert!(
                masked.starts_with("x=") && masked.ends_with(" y"),
                "{masked:?}"
            );
        }
    }
}

#[test]
fn escape_sequences_inside_a_secret_are_masked() {
    let known = "known-Secret-Value-7731qq";
    let masker = Masker::new([known]);
    for inside in [
        "\u{1b}[31m",
        "\u{1b}[0m",
        "\u{1b}[1;4m",
        "\u{1b}]8;;https://x\u{7}",
    ] {
        let text = format!("key: known-Sec{inside}ret-Value-7731qq done");
        let masked = masker.mask(&text).text.into_owned();
        assert_eq!(masked, format!("key: {REDACTED} done"), "{inside:?}");
    }
    // A token recognised by its format, coloured in the middle.
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ");
    let text = format!("token {}\u{1b}[33m{} end", &token[..10], &token[10..]);
    let masked = Masker::default().mask(&text).text.into_owned();
    assert!(!run_together(&masked).contains(&token), "{masked:?}");
    assert!(masked.ends_with(" end"), "{masked:?}");
}

#[test]
fn escape_sequences_elsewhere_stay() {
    let masker = Masker::new(["known-Secret-Value-7731qq"]);
    let text = "\u{1b}[32mok\u{1b}[0m 3 passed\n'quoted' \"text\" \\path\n";
    let masked = masker.mask(text);
    assert_eq!(masked.text, text);
    assert_eq!(masked.count, 0);
}

#[test]
fn a_value_recognised_in_one_place_is_known_everywhere() {
    let note = "Set DATABASE_PASSWORD=Tr0ub4dor-and-3 before the migration.";
    let recognised = Masker::recognised(note);
    assert_eq!(recognised, ["Tr0ub4dor-and-3"]);
    let masker = Masker::new(&recognised);
    let message = "log in with Tr0ub4dor-and-3 as admin";
    assert_eq!(
        masker.mask(message).text,
        format!("log in with {REDACTED} as admin")
    );
    // A token wrapped onto the next line is known joined too.
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ");
    let wrapped_note = format!("token:\n  {}\n  {}\n", &token[..20], &token[20..]);
    let recognised = Masker::recognised(&wrapped_note);
    assert!(recognised.contains(&token), "{recognised:?}");
    // Nothing recognised in ordinary text.
    assert!(Masker::recognised("fn token_count(key: &str) -> usize { 0 }").is_empty());
    assert!(Masker::recognised("password=[REDACTED]").is_empty());
}

#[test]
fn a_masker_that_cannot_be_built_refuses_and_never_fails_open() {
    let err = Masker::try_new(["fine-secret-value", FAIL_TO_BUILD]).unwrap_err();
    assert!(
        err.to_string().starts_with("secrets cannot be masked"),
        "{err}"
    );
    let masker = Masker::new(["fine-secret-value", FAIL_TO_BUILD]);
    let masked = masker.mask("fine-secret-value and everything else");
    assert_eq!((masked.text.as_ref(), masked.count), (REDACTED, 1));
    assert_eq!(masker.mask_known("anything").text, REDACTED);
    let mut v = serde_json::json!({"a": "text", "b": ["more"], "n": 1});
    assert_eq!(masker.mask_json(&mut v), 2);
    assert_eq!(
        v,
        serde_json::json!({"a": REDACTED, "b": [REDACTED], "n": 1})
    );
    assert_eq!(masker.mask("").count, 0);
    assert!(Masker::try_new(["fine-secret-value"]).is_ok());
}

#[test]
fn known_secrets_do_not_reach_across_ordinary_text() {
    // Lines, quotes and escapes between ordinary words never make a known secret.
    let masker = Masker::new(["abcdefgh", "release-2024"]);
    let text = "abcd\nefgh 'abcd'\"efgh\" release-\n2024-notes\nrelease\n-2024\n";
    let masked = masker.mask(text).text.into_owned();
    // Broken up only by what the views leave out, they are masked; with a space, not.
    assert!(!run_together(&masked).contains("abcdefgh"), "{masked}");
    let spaced = "abcd efgh release 2024";
    assert_eq!(masker.mask(spaced).text, spaced);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn no_known_secret_survives_wrapped_base64(
        secret in "[!-~]{8,40}",
        before in proptest::collection::vec(any::<u8>(), 0..90),
        after in proptest::collection::vec(any::<u8>(), 0..90),
        width in prop::sample::select(vec![60usize, 64, 72, 76]),
        eol in prop::sample::select(vec!["\n", "\r\n", "\\n"]),
        url_safe in any::<bool>(),
    ) {
        let blob = [before.as_slice(), secret.as_bytes(), after.as_slice()].concat();
        let encoded = if url_safe {
            general_purpose::URL_SAFE.encode(&blob)
        } else {
            general_purpose::STANDARD.encode(&blob)
        };
        let text = format!("begin\n{}\nend", wrapped(&encoded, width, eol));
        let masked = Masker::new([secret.as_str()]).mask(&text).text.into_owned();
        let joined = masked.replace("\\n", "").replace(['\n', '\r'], "");
        prop_assert!(!super::tests::decodes_to(&joined, secret.as_bytes()), "{}", masked);
        prop_assert!(masked.starts_with("begin") && masked.ends_with("end"));
    }

    #[test]
    fn no_known_secret_survives_shell_quoting_or_escapes(
        secret in "[!-~]{8,32}",
        cut in 1usize..7,
        form in 0usize..5,
        escape in prop::sample::select(vec!["\u{1b}[0m", "\u{1b}[38;5;208m", "\u{1b}]0;t\u{7}", ""]),
    ) {
        let (a, b) = secret.split_at(cut.min(secret.len() - 1));
        let quoted = match form {
            0 => single_quoted(&secret),
            1 => printf_q(&secret),
            2 => format!("{}{}", single_quoted(a), single_quoted(b)),
            3 => format!("\"{}\"{}", a.replace(['"', '\\'], ""), single_quoted(b)),
            _ => format!("{a}{escape}{b}"),
        };
        prop_assume!(form != 3 || !a.contains(['"', '\\']));
        prop_assume!(run_together(&secret).len() >= super::MIN_FREE_LEN);
        let text = format!("x={quoted} y");
        let masked = Masker::new([secret.as_str()]).mask_known(&text).text.into_owned();
        let shown = run_together(&masked);
        prop_assert!(!shown.contains(&run_together(&secret)), "{:?} -> {:?}", text, masked);
    }

    #[test]
    fn recognised_values_are_masked_wherever_they_appear(
        name in prop::sample::select(vec!["DATABASE_PASSWORD", "API_TOKEN", "client_secret"]),
        value in "[A-Za-z0-9]{10,24}",
        words in "[a-z ]{0,30}",
    ) {
        prop_assume!(super::patterns::looks_random(&value));
        let note = format!("{name}={value}\n");
        let recognised = Masker::recognised(&note);
        prop_assert!(recognised.contains(&value), "{:?}", recognised);
        let message = format!("{words} {value} {words}");
        let masked = Masker::new(&recognised).mask(&message).text.into_owned();
        prop_assert!(!masked.contains(&value), "{}", masked);
    }
}
