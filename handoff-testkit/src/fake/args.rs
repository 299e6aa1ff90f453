//! A small command-line parser shaped like commander.js / clap, enough to reject what the real
//! CLIs reject (unknown options, missing values) and to read what the fake needs.

use std::collections::{BTreeMap, BTreeSet};

/// How an option takes values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No value.
    Flag,
    /// Exactly one value (the next argument, whatever it looks like, or `--opt=value`).
    Value,
    /// An optional value: the next argument unless it starts with `-`.
    OptValue,
    /// One or more values: following arguments until one starts with `-` (commander's `<x...>`).
    Variadic,
}

/// One option: its spellings, how it takes values, and the key it is stored under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opt {
    pub(crate) names: &'static [&'static str],
    pub(crate) kind: Kind,
    pub(crate) key: &'static str,
}

/// Shorthand for an [`Opt`].
pub(crate) const fn opt(key: &'static str, names: &'static [&'static str], kind: Kind) -> Opt {
    Opt { names, kind, key }
}

/// A parse failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// An option nobody declared.
    Unknown(String),
    /// A value-taking option at the end of the arguments.
    MissingValue(String),
}

/// The parsed arguments.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    flags: BTreeSet<&'static str>,
    values: BTreeMap<&'static str, Vec<String>>,
    /// Arguments that are not options, in order.
    pub(crate) positional: Vec<String>,
    /// With `stop_at_positional`, everything from the first positional on.
    pub(crate) rest: Vec<String>,
}

impl Parsed {
    /// Whether the option was given (with or without a value).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.flags.contains(key) || self.values.contains_key(key)
    }

    /// The last value given for `key`.
    pub(crate) fn value(&self, key: &str) -> Option<&str> {
        self.values
            .get(key)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Every value given for `key`, in order.
    pub(crate) fn values(&self, key: &str) -> &[String] {
        self.values.get(key).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// Parses `args` against `opts`. With `stop_at_positional`, parsing ends at the first positional
/// argument and it and everything after it go to [`Parsed::rest`].
pub(crate) fn parse(
    args: &[String],
    opts: &[Opt],
    stop_at_positional: bool,
) -> Result<Parsed, ParseError> {
    let mut parsed = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            if stop_at_positional {
                parsed.rest.extend(args[i..].iter().cloned());
            } else {
                parsed.positional.extend(args[i..].iter().cloned());
            }
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            if stop_at_positional {
                parsed.rest.push(arg.clone());
                parsed.rest.extend(args[i..].iter().cloned());
                break;
            }
            parsed.positional.push(arg.clone());
            continue;
        }
        let (name, inline) = split_inline(arg, opts);
        let Some(spec) = opts.iter().find(|o| o.names.contains(&name)) else {
            return Err(ParseError::Unknown(arg.clone()));
        };
        match spec.kind {
            Kind::Flag => {
                parsed.flags.insert(spec.key);
            }
            Kind::Value => {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        let Some(v) = args.get(i) else {
                            return Err(ParseError::MissingValue(name.to_owned()));
                        };
                        i += 1;
                        v.clone()
                    }
                };
                parsed.values.entry(spec.key).or_default().push(value);
            }
            Kind::OptValue => {
                let value = match inline {
                    Some(v) => Some(v),
                    None => match args.get(i) {
                        Some(v) if !v.starts_with('-') => {
                            i += 1;
                            Some(v.clone())
                        }
                        _ => None,
                    },
                };
                match value {
                    Some(v) => parsed.values.entry(spec.key).or_default().push(v),
                    None => {
                        parsed.flags.insert(spec.key);
                    }
                }
            }
            Kind::Variadic => {
                let mut got = Vec::new();
                if let Some(v) = inline {
                    got.push(v);
                } else {
                    let Some(first) = args.get(i) else {
                        return Err(ParseError::MissingValue(name.to_owned()));
                    };
                    got.push(first.clone());
                    i += 1;
                }
                while let Some(next) = args.get(i) {
                    if next.starts_with('-') && next != "-" {
                        break;
                    }
                    got.push(next.clone());
                    i += 1;
                }
                parsed.values.entry(spec.key).or_default().extend(got);
            }
        }
    }
    Ok(parsed)
}

/// `--name=value` → (`--name`, `value`); `-cVALUE` → (`-c`, `VALUE`) when `-c` takes a value.
fn split_inline<'a>(arg: &'a str, opts: &[Opt]) -> (&'a str, Option<String>) {
    if arg.starts_with("--") {
        if let Some((name, value)) = arg.split_once('=') {
            return (name, Some(value.to_owned()));
        }
        return (arg, None);
    }
    if arg.len() > 2 && arg.is_char_boundary(2) {
        let (name, value) = arg.split_at(2);
        let takes_value = opts
            .iter()
            .any(|o| o.names.contains(&name) && o.kind != Kind::Flag);
        if takes_value {
            let value = value.strip_prefix('=').unwrap_or(value);
            return (name, Some(value.to_owned()));
        }
    }
    (arg, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: &[Opt] = &[
        opt("p", &["-p", "--print"], Kind::Flag),
        opt("tools", &["--tools"], Kind::Variadic),
        opt("config", &["-c", "--config"], Kind::Value),
        opt("resume", &["-r", "--resume"], Kind::OptValue),
    ];

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn parses_kinds() {
        let p = parse(
            &s(&[
                "-p",
                "--tools",
                "Read,Write",
                "Bash",
                "-cA=1",
                "--config=B=2",
                "-r",
                "x",
                "y",
            ]),
            OPTS,
            false,
        )
        .unwrap();
        assert!(p.has("p"));
        assert_eq!(p.values("tools"), &s(&["Read,Write", "Bash"]));
        assert_eq!(p.values("config"), &s(&["A=1", "B=2"]));
        assert_eq!(p.value("resume"), Some("x"));
        assert_eq!(p.positional, s(&["y"]));
    }

    #[test]
    fn rejects_unknown_and_missing() {
        assert_eq!(
            parse(&s(&["--nope"]), OPTS, false).unwrap_err(),
            ParseError::Unknown("--nope".into())
        );
        assert_eq!(
            parse(&s(&["-c"]), OPTS, false).unwrap_err(),
            ParseError::MissingValue("-c".into())
        );
    }

    #[test]
    fn stops_at_positional() {
        let p = parse(&s(&["-p", "cmd", "-p"]), OPTS, true).unwrap();
        assert_eq!(p.rest, s(&["cmd", "-p"]));
    }
}
