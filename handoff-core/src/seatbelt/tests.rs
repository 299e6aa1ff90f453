use super::*;
use crate::provider::{AnswerSource, Invocation, StdinSource};
use crate::sandbox::Bind;
use proptest::prelude::*;

/// One token of an SBPL profile, as its reader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Open,
    Close,
    /// A string (`"…"`) or regex (`#"…"`) literal, unescaped.
    Str(String),
    Atom(String),
}

/// Reads a string literal that starts at `s[0] == '"'`: its value and the length it spans.
/// `\` takes the next character as is; the first unescaped `"` ends it.
fn read_string(s: &str) -> Option<(String, usize)> {
    let mut chars = s.char_indices();
    assert_eq!(chars.next(), Some((0, '"')));
    let mut value = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?.1),
            '"' => return Some((value, i + 1)),
            c => value.push(c),
        }
    }
    None
}

/// The tokens of a profile (comments dropped); panics on an unterminated literal.
fn tokens(profile: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut rest = profile;
    while let Some(c) = rest.chars().next() {
        match c {
            '(' => {
                out.push(Token::Open);
                rest = &rest[1..];
            }
            ')' => {
                out.push(Token::Close);
                rest = &rest[1..];
            }
            ';' => rest = rest.find('\n').map_or("", |i| &rest[i..]),
            c if c.is_whitespace() => rest = &rest[c.len_utf8()..],
            '"' => {
                let (value, len) = read_string(rest).expect("unterminated string");
                out.push(Token::Str(value));
                rest = &rest[len..];
            }
            '#' if rest.starts_with("#\"") => {
                let (value, len) = read_string(&rest[1..]).expect("unterminated regex");
                out.push(Token::Str(value));
                rest = &rest[1 + len..];
            }
            _ => {
                let end = rest
                    .find(|c: char| c == '(' || c == ')' || c.is_whitespace())
                    .unwrap_or(rest.len());
                out.push(Token::Atom(rest[..end].to_owned()));
                rest = &rest[end..];
            }
        }
    }
    out
}

/// An s-expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sexp {
    List(Vec<Sexp>),
    Str(String),
    Atom(String),
}

/// The top-level forms of a profile; panics when its parentheses do not balance.
fn forms(profile: &str) -> Vec<Sexp> {
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    for t in tokens(profile) {
        match t {
            Token::Open => stack.push(Vec::new()),
            Token::Close => {
                let list = stack.pop().unwrap();
                stack
                    .last_mut()
                    .expect("unbalanced )")
                    .push(Sexp::List(list));
            }
            Token::Str(s) => stack.last_mut().unwrap().push(Sexp::Str(s)),
            Token::Atom(a) => stack.last_mut().unwrap().push(Sexp::Atom(a)),
        }
    }
    assert_eq!(stack.len(), 1, "unbalanced (");
    stack.pop().unwrap()
}

/// A rule: `allow`/`deny`, its operations, and its filters.
#[derive(Debug)]
struct Rule {
    action: String,
    ops: Vec<String>,
    filters: Vec<Sexp>,
}

fn rules(profile: &str) -> Vec<Rule> {
    forms(profile)
        .into_iter()
        .filter_map(|f| {
            let Sexp::List(items) = f else { return None };
            let Some(Sexp::Atom(action)) = items.first() else {
                return None;
            };
            if action != "allow" && action != "deny" {
                return None;
            }
            let ops = items[1..]
                .iter()
                .filter_map(|i| match i {
                    Sexp::Atom(a) => Some(a.clone()),
                    _ => None,
                })
                .collect();
            let filters = items[1..]
                .iter()
                .filter(|i| matches!(i, Sexp::List(_)))
                .cloned()
                .collect();
            Some(Rule {
                action: action.clone(),
                ops,
                filters,
            })
        })
        .collect()
}

fn filter(kind: &str, path: &Utf8Path) -> Sexp {
    Sexp::List(vec![Sexp::Atom(kind.into()), Sexp::Str(path.to_string())])
}

/// The index of the last rule with this action, an operation starting with `op` and this
/// filter.
fn last_rule(rules: &[Rule], action: &str, op: &str, f: &Sexp) -> Option<usize> {
    rules.iter().rposition(|r| {
        r.action == action && r.ops.iter().any(|o| o.starts_with(op)) && r.filters.contains(f)
    })
}

struct Fixture {
    _tmp: tempfile::TempDir,
    root: Utf8PathBuf,
    env: BTreeMap<String, String>,
    program: Utf8PathBuf,
}

/// A worktree with `.git` and a hooks directory, a run directory, a home with a cargo token,
/// and an nvm-style Node on `PATH` with the CLI in it.
fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path())
        .unwrap()
        .canonicalize_utf8()
        .unwrap();
    for d in [
        "wt/.git/hooks",
        "wt/scripts/hooks",
        "run",
        "home/.cargo",
        "home/.rustup",
        "nvm/bin",
        "nvm/lib/node_modules/cli/bin",
        "auth",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("home/.cargo/credentials.toml"), "token").unwrap();
    std::fs::write(root.join("nvm/lib/node_modules/cli/bin/cli.js"), "").unwrap();
    std::os::unix::fs::symlink(
        root.join("nvm/lib/node_modules/cli/bin/cli.js"),
        root.join("nvm/bin/cli"),
    )
    .unwrap();
    std::fs::write(root.join("auth/auth.json"), "{}").unwrap();
    let mut env = BTreeMap::new();
    env.insert(
        "PATH".to_owned(),
        format!("{}:/usr/bin:/bin", root.join("nvm/bin")),
    );
    let program = root.join("nvm/bin/cli");
    Fixture {
        _tmp: tmp,
        root,
        env,
        program,
    }
}

fn layout(root: &Utf8Path, writable: bool) -> Layout {
    Layout {
        worktree: root.join("wt"),
        writable,
        protected: vec![root.join("wt/.git"), root.join("wt/scripts/hooks")],
        run_dir: root.join("run"),
        home: Some(root.join("home")),
        read_only: vec![],
        writable_extra: vec![],
        relay: None,
    }
}

fn spec(root: &Utf8Path) -> SandboxSpec {
    SandboxSpec {
        binds: vec![Bind {
            source: root.join("auth/auth.json"),
            dest: root.join("auth/auth.json"),
            writable: false,
            secret: true,
        }],
        state: "the CLI's logins read-only in place".into(),
        offline_shell: false,
        network: None,
        packages: None,
    }
}

/// The profile with the temporary root written `[ROOT]`, and the lines naming the
/// directories above it left out (they differ from machine to machine).
fn stable(profile: &str, root: &Utf8Path) -> String {
    let above: Vec<String> = root
        .ancestors()
        .skip(1)
        .map(|a| format!("(literal \"{a}\")"))
        .collect();
    let mut in_ancestors = false;
    profile
        .lines()
        .filter(|l| {
            if l.starts_with(';') {
                in_ancestors = l.starts_with("; The directories above what follows");
            }
            let l = l.trim();
            !(in_ancestors
                && above
                    .iter()
                    .any(|a| l.strip_suffix(')') == Some(a.as_str()) || l == a))
        })
        .collect::<Vec<_>>()
        .join("\n")
        .replace(root.as_str(), "[ROOT]")
}

#[test]
fn the_profile_of_a_read_only_review() {
    let f = fixture();
    let profile = profile(
        &layout(&f.root, false),
        &spec(&f.root),
        &f.program,
        &f.env,
        &SeatbeltNetwork::ProxyOnly { port: 3128 },
    );
    forms(&profile);
    insta::assert_snapshot!("review", stable(&profile, &f.root));
}

#[test]
fn the_profile_of_a_writable_build() {
    let f = fixture();
    let profile = profile(
        &layout(&f.root, true),
        &spec(&f.root),
        &f.program,
        &f.env,
        &SeatbeltNetwork::Host,
    );
    forms(&profile);
    insta::assert_snapshot!("build", stable(&profile, &f.root));
}

#[test]
fn protected_paths_are_denied_after_the_worktree_is_allowed() {
    let f = fixture();
    for writable in [true, false] {
        let profile = profile(
            &layout(&f.root, writable),
            &spec(&f.root),
            &f.program,
            &f.env,
            &SeatbeltNetwork::Host,
        );
        let rules = rules(&profile);
        let wt = f.root.join("wt");
        let allowed = last_rule(&rules, "allow", "file-read", &filter("subpath", &wt)).unwrap();
        assert_eq!(
            rules[allowed].ops.iter().any(|o| o == "file-write*"),
            writable
        );
        for p in ["wt/.git", "wt/scripts/hooks"] {
            let denied = last_rule(
                &rules,
                "deny",
                "file-write*",
                &filter("subpath", &f.root.join(p)),
            )
            .unwrap();
            assert!(
                denied > allowed,
                "{p} is denied before the worktree is allowed"
            );
            // Nothing after the deny allows a write again.
            assert!(
                rules[denied..]
                    .iter()
                    .all(|r| r.action == "deny" || !r.ops.iter().any(|o| o.starts_with("file-"))),
                "a file rule after the protected paths' deny"
            );
        }
    }
}

#[test]
fn the_directories_above_a_protected_path_are_pinned_in_a_writable_worktree_only() {
    let f = fixture();
    let rules_of = |writable| {
        rules(&profile(
            &layout(&f.root, writable),
            &spec(&f.root),
            &f.program,
            &f.env,
            &SeatbeltNetwork::Host,
        ))
    };
    let writable = rules_of(true);
    let pinned = |rules: &[Rule], dir: &str| {
        rules.iter().any(|r| {
            r.action == "deny"
                && r.ops.iter().any(|o| o == "file-write-create")
                && r.ops.iter().any(|o| o == "file-write-unlink")
                && r.filters.contains(&filter("literal", &f.root.join(dir)))
        })
    };
    // `mv scripts elsewhere && mv planted scripts` would put new hooks in place.
    assert!(pinned(&writable, "wt/scripts"));
    assert!(pinned(&writable, "wt"));
    assert!(!pinned(&writable, "wt/scripts/hooks/x"));
    let read_only = rules_of(false);
    assert!(!pinned(&read_only, "wt/scripts"));
    assert!(!pinned(&read_only, "wt"));
}

#[test]
fn cargo_credentials_are_denied_after_the_toolchain_is_allowed() {
    let f = fixture();
    let rules = rules(&profile(
        &layout(&f.root, true),
        &spec(&f.root),
        &f.program,
        &f.env,
        &SeatbeltNetwork::Host,
    ));
    let cargo = f.root.join("home/.cargo");
    let allowed = last_rule(&rules, "allow", "file-read*", &filter("subpath", &cargo)).unwrap();
    let hidden = last_rule(
        &rules,
        "deny",
        "file-read*",
        &filter("literal", &cargo.join("credentials.toml")),
    )
    .unwrap();
    assert!(hidden > allowed);
    // Also the one that does not exist yet: the user may log in during the run.
    assert!(
        last_rule(
            &rules,
            "deny",
            "file-read*",
            &filter("literal", &cargo.join("credentials"))
        )
        .is_some()
    );
}

#[test]
fn a_path_entry_at_or_above_the_home_directory_opens_nothing() {
    let f = fixture();
    let mut env = f.env.clone();
    env.insert(
        "PATH".into(),
        format!("/:{}:{}:{}", f.root, f.root.join("home"), f.env["PATH"]),
    );
    let rules = rules(&profile(
        &layout(&f.root, false),
        &SandboxSpec::default(),
        &f.program,
        &env,
        &SeatbeltNetwork::Host,
    ));
    for p in [Utf8Path::new("/"), &f.root, &f.root.join("home")] {
        assert!(
            last_rule(&rules, "allow", "file-read*", &filter("subpath", p)).is_none(),
            "{p}"
        );
    }
    assert!(
        last_rule(
            &rules,
            "allow",
            "file-read*",
            &filter("subpath", &f.root.join("nvm/bin"))
        )
        .is_some()
    );
}

#[test]
fn string_literals_escape_quotes_and_backslashes_and_refuse_control_characters() {
    assert_eq!(sbpl_string("/a b/c").unwrap(), r#""/a b/c""#);
    assert_eq!(sbpl_string(r#"/a"b\c"#).unwrap(), r#""/a\"b\\c""#);
    assert_eq!(sbpl_string("/é").unwrap(), "\"/é\"");
    for bad in ["/a\nb", "/a\0b", "/a\tb", "/a\x7fb", "/a\u{85}b"] {
        assert_eq!(sbpl_string(bad), None, "{bad:?}");
    }
    assert_eq!(path_literal(Utf8Path::new("relative/path")), None);
}

#[test]
fn a_path_cannot_close_its_literal_and_add_rules() {
    let f = fixture();
    let evil = f
        .root
        .join(r#"wt") (allow default) (allow file-write* (subpath "x"#);
    std::fs::create_dir_all(&evil).unwrap();
    let mut layout = layout(&f.root, false);
    layout.worktree = evil.clone();
    layout.read_only = vec![f.root.join(r#"x\"#)];
    std::fs::create_dir_all(f.root.join(r#"x\"#)).unwrap();
    let profile = profile(
        &layout,
        &SandboxSpec::default(),
        &f.program,
        &f.env,
        &SeatbeltNetwork::Host,
    );
    let rules = rules(&profile);
    assert!(last_rule(&rules, "allow", "file-read*", &filter("subpath", &evil)).is_some());
    assert!(
        last_rule(
            &rules,
            "allow",
            "file-read*",
            &filter("subpath", &f.root.join(r#"x\"#))
        )
        .is_some()
    );
    assert!(
        !rules
            .iter()
            .any(|r| r.action == "allow" && r.ops == ["default"]),
        "the path added a rule"
    );
    assert!(
        !rules.iter().any(|r| r.action == "allow"
            && r.ops.iter().any(|o| o == "file-write*")
            && r.filters.contains(&filter("subpath", Utf8Path::new("/")))),
        "the path added a rule"
    );
}

#[test]
fn a_protected_path_that_cannot_be_named_leaves_nothing_writable() {
    let f = fixture();
    let mut layout = layout(&f.root, true);
    layout.protected.push(f.root.join("wt/bad\nname"));
    let rules = rules(&profile(
        &layout,
        &SandboxSpec::default(),
        &f.program,
        &f.env,
        &SeatbeltNetwork::Host,
    ));
    let last_write_rule = rules
        .iter()
        .rposition(|r| r.ops.iter().any(|o| o.starts_with("file-write")))
        .unwrap();
    let r = &rules[last_write_rule];
    assert_eq!((r.action.as_str(), r.filters.len()), ("deny", 0));
    assert_eq!(r.ops, ["file-write*"]);
}

proptest! {
    #[test]
    fn a_literal_reads_back_as_its_string_and_ends_at_its_last_quote(s in any::<String>()) {
        match sbpl_string(&s) {
            None => prop_assert!(s.chars().any(char::is_control)),
            Some(lit) => {
                let (value, len) = read_string(&lit).unwrap();
                prop_assert_eq!(&value, &s);
                prop_assert_eq!(len, lit.len());
            }
        }
    }

    #[test]
    fn a_literal_of_quotes_parens_and_backslashes_is_one_token(
        s in proptest::collection::vec(prop_oneof![
            Just("\""), Just("\\"), Just("("), Just(")"), Just(";"), Just("#"), Just("a"), Just("/"),
        ], 0..24)
    ) {
        let s: String = s.concat();
        let lit = sbpl_string(&s).unwrap();
        let profile = format!("(allow file-read* (subpath {lit}))");
        prop_assert_eq!(
            tokens(&profile),
            vec![
                Token::Open,
                Token::Atom("allow".into()),
                Token::Atom("file-read*".into()),
                Token::Open,
                Token::Atom("subpath".into()),
                Token::Str(s),
                Token::Close,
                Token::Close,
            ]
        );
    }
}

#[test]
fn proxy_only_allows_one_loopback_port_and_no_unix_socket() {
    let f = fixture();
    let rules = rules(&profile(
        &layout(&f.root, true),
        &spec(&f.root),
        &f.program,
        &f.env,
        &SeatbeltNetwork::ProxyOnly { port: 8877 },
    ));
    let network: Vec<&Rule> = rules
        .iter()
        .filter(|r| r.ops.iter().any(|o| o.starts_with("network")))
        .collect();
    let proxy = Sexp::List(vec![
        Sexp::Atom("remote".into()),
        Sexp::Atom("tcp".into()),
        Sexp::Str("localhost:8877".into()),
    ]);
    for r in network.iter().filter(|r| r.action == "allow") {
        assert_eq!(r.ops, ["network-outbound"], "{r:?}");
        assert_eq!(r.filters, std::slice::from_ref(&proxy), "{r:?}");
    }
    assert!(network.iter().any(|r| r.action == "allow"));
    let unix = Sexp::List(vec![
        Sexp::Atom("remote".into()),
        Sexp::Atom("unix-socket".into()),
    ]);
    assert!(
        network
            .iter()
            .any(|r| r.action == "deny" && r.filters == [unix.clone()])
    );
    // Sockets of the Internet families only, and no name lookup.
    let sockets: Vec<&Rule> = rules
        .iter()
        .filter(|r| r.ops.iter().any(|o| o == "system-socket"))
        .collect();
    assert_eq!(sockets.len(), 1);
    assert_eq!(sockets[0].filters.len(), 2);
    let profile_text = profile(
        &layout(&f.root, true),
        &spec(&f.root),
        &f.program,
        &f.env,
        &SeatbeltNetwork::ProxyOnly { port: 8877 },
    );
    assert!(!profile_text.contains("mDNSResponder"));
    assert!(!profile_text.contains("DNSConfiguration"));
}

#[test]
fn the_host_network_closes_unix_sockets_but_the_dns_resolver() {
    let f = fixture();
    let rules = rules(&profile(
        &layout(&f.root, true),
        &spec(&f.root),
        &f.program,
        &f.env,
        &SeatbeltNetwork::Host,
    ));
    let at = |action: &str, ops: &[&str], filters: Vec<Sexp>| {
        rules
            .iter()
            .position(|r| r.action == action && r.ops == ops && r.filters == filters)
    };
    let all = at("allow", &["network*"], vec![]).unwrap();
    let unix = |tail: Vec<Sexp>| {
        let mut items = vec![
            Sexp::Atom("remote".into()),
            Sexp::Atom("unix-socket".into()),
        ];
        items.extend(tail);
        vec![Sexp::List(items)]
    };
    let closed = at("deny", &["network-outbound"], unix(vec![])).unwrap();
    let dns = at(
        "allow",
        &["network-outbound"],
        unix(vec![filter("subpath", Utf8Path::new(DNS_SOCKET))]),
    )
    .unwrap();
    assert!(all < closed && closed < dns);
}

#[test]
fn sandbox_exec_is_only_ever_found_on_macos() {
    if !crate::platform::SEATBELT {
        assert_eq!(sandbox_exec_here(), None);
    }
}

fn invocation(f: &Fixture) -> Invocation {
    let mut env = f.env.clone();
    env.insert("TMPDIR".into(), "/tmp".into());
    env.insert("TEMP".into(), "/tmp".into());
    Invocation {
        program: f.program.clone(),
        args: vec!["run".into(), "-p".into(), "--".into()],
        env,
        cwd: f.root.join("wt"),
        stdin: StdinSource::Null,
        dirs: vec![],
        files: vec![],
        answer: AnswerSource::Stdout,
        policy: serde_json::Value::Null,
        secrets: vec![],
        sandbox: None,
    }
}

#[test]
fn wrap_runs_the_command_line_under_sandbox_exec_with_a_private_tmpdir() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let layout = layout(&f.root, true);
    let spec = spec(&f.root);
    let mut inv = invocation(&f);
    let expected = profile(
        &layout,
        &spec,
        &f.program,
        &f.env,
        &SeatbeltNetwork::ProxyOnly { port: 9 },
    );
    let wrapped = wrap(
        Utf8Path::new(SANDBOX_EXEC),
        &layout,
        &spec,
        &SeatbeltNetwork::ProxyOnly { port: 9 },
        &mut inv,
    )
    .unwrap();
    assert_eq!(inv.program, SANDBOX_EXEC);
    let program = f.program.to_string();
    assert_eq!(
        inv.args,
        [
            "-p",
            expected.as_str(),
            "--",
            program.as_str(),
            "run",
            "-p",
            "--"
        ]
    );
    let tmp = f.root.join("run/tmp");
    assert_eq!(inv.env["TMPDIR"], tmp.as_str());
    assert!(!inv.env.contains_key("TEMP"));
    let mode = std::fs::metadata(&tmp).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert_eq!(inv.env["CARGO_HOME"], f.root.join("home/.cargo").as_str());
    assert_eq!(
        inv.env["npm_config_cache"],
        f.root.join("run/npm-cache").as_str()
    );
    assert_eq!(inv.cwd, f.root.join("wt"));

    let r = &wrapped.receipt;
    assert_eq!(r["enforcement"], "handoff");
    assert_eq!(r["tool"], "sandbox-exec");
    assert_eq!(r["worktree"], "read-write");
    assert_eq!(r["protected"][0], f.root.join("wt/.git").as_str());
    assert!(
        r["writable"]
            .as_array()
            .unwrap()
            .contains(&json!(f.root.join("wt")))
    );
    assert!(r["processes"].as_str().unwrap().contains("reaper"));
    assert_eq!(r["secrets"]["hiddenFromCommands"], false);
    assert!(r["network"].as_str().unwrap().contains("localhost:9"));
}

#[test]
fn wrap_refuses_what_a_profile_cannot_express() {
    let f = fixture();
    let layout = layout(&f.root, true);
    // A bind at a place of its own.
    let mut spec = spec(&f.root);
    spec.binds[0].dest = f.root.join("run/data/auth.json");
    let mut inv = invocation(&f);
    let before = inv.clone();
    let err = wrap(
        Utf8Path::new(SANDBOX_EXEC),
        &layout,
        &spec,
        &SeatbeltNetwork::Host,
        &mut inv,
    )
    .unwrap_err();
    assert!(err.contains("in place"), "{err}");
    assert_eq!(inv, before);
    // A path with a control character.
    let mut bad = layout.clone();
    bad.writable_extra.push(f.root.join("a\nb"));
    assert!(
        wrap(
            Utf8Path::new(SANDBOX_EXEC),
            &bad,
            &SandboxSpec::default(),
            &SeatbeltNetwork::Host,
            &mut inv,
        )
        .is_err()
    );
    // A program found by name.
    inv.program = "opencode".into();
    assert!(
        wrap(
            Utf8Path::new(SANDBOX_EXEC),
            &layout,
            &SandboxSpec::default(),
            &SeatbeltNetwork::Host,
            &mut inv,
        )
        .is_err()
    );
    assert_eq!(inv.args, before.args);
}

#[test]
fn paths_are_matched_as_their_real_paths() {
    let f = fixture();
    std::os::unix::fs::symlink(f.root.join("wt"), f.root.join("link")).unwrap();
    assert_eq!(real_path(&f.root.join("link/.git")), f.root.join("wt/.git"));
    assert_eq!(
        real_path(&f.root.join("link/not/yet")),
        f.root.join("wt/not/yet")
    );
    assert_eq!(
        real_path(&f.root.join("wt/../link/./x")),
        f.root.join("wt/x")
    );
    assert_eq!(real_path(Utf8Path::new("rel/x")), Utf8Path::new("rel/x"));
    // A worktree reached through a link is allowed at its real path.
    let mut layout = layout(&f.root, true);
    layout.worktree = f.root.join("link");
    layout.protected = vec![f.root.join("link/.git")];
    let rules = rules(&profile(
        &layout,
        &SandboxSpec::default(),
        &f.program,
        &f.env,
        &SeatbeltNetwork::Host,
    ));
    assert!(
        last_rule(
            &rules,
            "allow",
            "file-write*",
            &filter("subpath", &f.root.join("wt"))
        )
        .is_some()
    );
    assert!(
        !rules
            .iter()
            .any(|r| r.filters.contains(&filter("subpath", &f.root.join("link"))))
    );
    assert!(
        last_rule(
            &rules,
            "deny",
            "file-write*",
            &filter("subpath", &f.root.join("wt/.git"))
        )
        .is_some()
    );
}

/// The profile as `sandbox-exec` reads it: a worktree is written, its `.git` is not, and the
/// directory above a hooks directory cannot be renamed away.
#[test]
fn sandbox_exec_enforces_the_profile() {
    let f = fixture();
    let Some(sandbox_exec) = sandbox_exec_here() else {
        return;
    };
    let layout = layout(&f.root, true);
    let mut inv = invocation(&f);
    inv.program = "/bin/sh".into();
    inv.args = vec![
        "-c".into(),
        "echo ok > wt/file && ! echo x >> wt/.git/config && ! mv wt/scripts wt/moved \
         && ! mkdir wt/.git/hooks/x && ! cat home/.cargo/credentials.toml"
            .into(),
    ];
    wrap(
        &sandbox_exec,
        &layout,
        &SandboxSpec::default(),
        &SeatbeltNetwork::ProxyOnly { port: 9 },
        &mut inv,
    )
    .unwrap();
    let status = std::process::Command::new(inv.program.as_std_path())
        .args(&inv.args)
        .env_clear()
        .envs(&inv.env)
        .current_dir(f.root.as_std_path())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        std::fs::read_to_string(f.root.join("wt/file")).unwrap(),
        "ok\n"
    );
    assert!(f.root.join("wt/scripts/hooks").is_dir());
}
