//! `--version`, `--help` and the adapters' behavioural probes.

use handoff_testkit::fixtures;

use crate::support::*;

#[test]
fn versions() {
    let w = World::new();
    let cases = [
        ("claude", vec!["--version"], "2.1.197 (Claude Code)\n"),
        ("claude", vec!["-v"], "2.1.197 (Claude Code)\n"),
        ("codex", vec!["--version"], "codex-cli 0.171.0\n"),
        ("grok", vec!["--version"], "grok 99.0.0-fake\n"),
        ("kiro-cli", vec!["--version"], "kiro-cli 99.0.0-fake\n"),
        ("opencode", vec!["--version"], "opencode 99.0.0-fake\n"),
        (
            "cursor-agent",
            vec!["--version"],
            "cursor-agent 99.0.0-fake\n",
        ),
    ];
    for (exe, argv, expected) in cases {
        let out = w.run(exe, &args(&argv), None);
        assert!(out.status.success(), "{exe}: {}", stderr(&out));
        assert_eq!(stdout(&out), expected, "{exe}");
    }
}

#[test]
fn version_override() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_VERSION", "9.9.9");
    assert_eq!(
        stdout(&w.run("claude", &args(&["--version"]), None)),
        "9.9.9 (Claude Code)\n"
    );
    assert_eq!(
        stdout(&w.run("codex", &args(&["--version"]), None)),
        "codex-cli 9.9.9\n"
    );
    assert_eq!(
        stdout(&w.run("grok", &args(&["--version"]), None)),
        "grok 9.9.9\n"
    );
}

#[test]
fn real_help_texts_are_printed_verbatim() {
    let w = World::new();
    let reference = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/reference/cli-help/claude-2.1.197.txt"
    ));
    if let Ok(reference) = reference {
        let after = reference.split_once("$ claude --help\n").unwrap().1;
        assert_eq!(fixtures::CLAUDE_HELP, after);
    }
    assert_eq!(
        stdout(&w.run("claude", &args(&["--help"]), None)),
        fixtures::CLAUDE_HELP
    );
    assert_eq!(
        stdout(&w.run("codex", &args(&["--help"]), None)),
        fixtures::CODEX_HELP
    );
    assert_eq!(
        stdout(&w.run("codex", &args(&["exec", "--help"]), None)),
        fixtures::CODEX_EXEC_HELP
    );
    assert_eq!(
        stdout(&w.run("codex", &args(&["exec", "resume", "--help"]), None)),
        fixtures::CODEX_EXEC_RESUME_HELP
    );
    assert_eq!(
        stdout(&w.run("opencode", &args(&["--help"]), None)),
        fixtures::OPENCODE_HELP
    );
    assert_eq!(
        stdout(&w.run("opencode", &args(&["run", "--help"]), None)),
        fixtures::OPENCODE_RUN_HELP
    );
}

/// (exe, help argv, flags the adapter requires, the flag `HANDOFF_FAKE_HELP=missing` drops)
fn help_requirements() -> Vec<(
    &'static str,
    Vec<&'static str>,
    Vec<&'static str>,
    &'static str,
)> {
    vec![
        (
            "claude",
            vec!["--help"],
            vec![
                "--allowedTools",
                "--disable-slash-commands",
                "--json-schema",
                "--mcp-config",
                "--no-chrome",
                "--no-session-persistence",
                "--output-format",
                "--permission-mode",
                "--safe-mode",
                "--settings",
                "--strict-mcp-config",
                "--tools",
            ],
            "--json-schema",
        ),
        (
            "codex",
            vec!["exec", "--help"],
            vec![
                "--config",
                "--strict-config",
                "--sandbox",
                "--cd",
                "--ephemeral",
                "--ignore-user-config",
                "--ignore-rules",
                "--disable",
                "--output-schema",
                "--output-last-message",
            ],
            "--strict-config",
        ),
        (
            "grok",
            vec!["--help"],
            vec![
                "--allow",
                "--cwd",
                "--deny",
                "--disable-web-search",
                "--json-schema",
                "--max-turns",
                "--no-memory",
                "--no-plan",
                "--no-subagents",
                "--permission-mode",
                "--prompt-file",
                "--sandbox",
                "--tools",
                "--verbatim",
            ],
            "--json-schema",
        ),
        (
            "kiro-cli",
            vec!["chat", "--help"],
            vec![
                "--effort",
                "--model",
                "--no-interactive",
                "--require-mcp-startup",
                "--trust-tools",
                "--wrap",
            ],
            "--trust-tools",
        ),
        ("opencode", vec!["--help"], vec!["--pure"], "--pure"),
        (
            "opencode",
            vec!["run", "--help"],
            vec!["--agent", "--dir", "--format"],
            "--pure",
        ),
        (
            "cursor-agent",
            vec!["--help"],
            vec!["--approve-mcps", "--force", "--output-format", "--print"],
            "--force",
        ),
        (
            "cursor-agent",
            vec!["sandbox", "run", "--help"],
            vec![
                "--allow-paths",
                "--network",
                "--readonly-paths",
                "--sandbox",
            ],
            "--readonly-paths",
        ),
    ]
}

#[test]
fn help_lists_every_flag_the_adapters_probe() {
    let w = World::new();
    for (exe, argv, flags, _) in help_requirements() {
        let out = w.run(exe, &args(&argv), None);
        assert!(out.status.success(), "{exe} {argv:?}");
        let text = stdout(&out);
        for flag in flags {
            assert!(text.contains(flag), "{exe} {argv:?} lacks {flag}");
        }
    }
}

#[test]
fn help_missing_drops_one_required_flag() {
    let w = World::new();
    w.agents.set("HANDOFF_FAKE_HELP", "missing");
    for (exe, argv, flags, dropped) in help_requirements() {
        let out = w.run(exe, &args(&argv), None);
        assert!(out.status.success());
        let text = stdout(&out);
        assert!(
            !text.contains(dropped),
            "{exe} {argv:?} still has {dropped}"
        );
        for flag in flags.iter().filter(|f| **f != dropped) {
            assert!(text.contains(flag), "{exe} {argv:?} lost {flag} too");
        }
    }
    // The rest of the text is intact: only the option's own block is gone.
    let claude = stdout(&w.run("claude", &args(&["--help"]), None));
    assert!(claude.contains("--max-budget-usd <amount>"));
    assert!(!claude.contains("JSON Schema for structured output"));
}

#[test]
fn codex_strict_config_probe_rejects_only_the_sentinel() {
    let w = World::new();
    let mut argv = args(&["exec", "--strict-config", "--ignore-user-config"]);
    for pinned in [
        r#"approval_policy="never""#,
        "project_doc_max_bytes=0",
        "project_doc_fallback_filenames=[]",
        r#"project_root_markers=[".git"]"#,
        "sandbox_workspace_write.network_access=false",
        r#"mcp_servers.docs.command="/bin/true""#,
        r#"model_providers.fake.base_url="http://127.0.0.1:1/v1""#,
    ] {
        argv.push("--config".into());
        argv.push(pinned.into());
    }
    let mut probe = argv.clone();
    probe.extend(args(&[
        "--config",
        "handoff_capability_probe_unknown=true",
        "--ephemeral",
        "-",
    ]));
    // Run outside any git repo: the probe must fail on the sentinel first.
    let out = w.run_in("codex", &probe, Some(""), w.tmp.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "Error: unknown configuration field `handoff_capability_probe_unknown`"
    );
    assert!(out.stdout.is_empty());

    // Without the sentinel the pinned keys pass and the run reaches stdin.
    argv.extend(args(&["--ephemeral", "-"]));
    let out = w.run("codex", &argv, Some(""));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).trim(), "No prompt provided via stdin.");

    // Without --strict-config unknown keys are accepted.
    let out = w.run(
        "codex",
        &args(&["exec", "--json", "-c", "whatever=1", "-"]),
        Some(REVIEW_PROMPT),
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn claude_refuses_without_sandbox_tools() {
    let w = World::new();
    let settings = sandbox_settings(w.repo.path(), false);
    let probe = args(&[
        "--safe-mode",
        "--settings",
        &settings,
        "--strict-mcp-config",
        "--mcp-config",
        r#"{"mcpServers":{}}"#,
        "--disable-slash-commands",
        "--no-session-persistence",
        "--permission-mode",
        "dontAsk",
        "--tools",
        "Read",
        "--allowedTools",
        "Read",
        "--max-turns",
        "1",
        "-p",
        "--output-format",
        "json",
        "--json-schema",
        "handoff-invalid-json",
    ]);
    // PATH holds only the fake bin dir: neither bwrap nor socat.
    let bin_only = w.agents.bin_dir.as_os_str().to_owned();
    let out = w.run_in(
        "claude",
        &probe,
        Some(""),
        w.repo.path(),
        &[("PATH", &bin_only)],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "Error: sandbox required but unavailable: bubblewrap (bwrap) not installed, socat not installed — refusing to start without a working sandbox."
    );

    // Only the missing one is listed.
    std::fs::copy("/bin/sh", w.agents.bin_dir.join("bwrap")).unwrap();
    let out = w.run_in(
        "claude",
        &probe,
        Some(""),
        w.repo.path(),
        &[("PATH", &bin_only)],
    );
    assert_eq!(
        stderr(&out).trim(),
        "Error: sandbox required but unavailable: socat not installed — refusing to start without a working sandbox."
    );

    // A non-executable socat does not count.
    std::fs::write(w.agents.bin_dir.join("socat"), "").unwrap();
    let out = w.run_in(
        "claude",
        &probe,
        Some(""),
        w.repo.path(),
        &[("PATH", &bin_only)],
    );
    assert!(stderr(&out).contains("socat not installed"));
}

#[test]
fn claude_json_schema_probe_with_sandbox_tools() {
    let w = World::with_sandbox_tools();
    let settings = sandbox_settings(w.repo.path(), false);
    let probe = args(&[
        "--safe-mode",
        "--settings",
        &settings,
        "--max-turns",
        "1",
        "-p",
        "--output-format",
        "json",
        "--json-schema",
        "handoff-invalid-json",
    ]);
    let bin_only = w.agents.bin_dir.as_os_str().to_owned();
    let out = w.run_in(
        "claude",
        &probe,
        Some(""),
        w.repo.path(),
        &[("PATH", &bin_only)],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("Error: --json-schema: invalid JSON: "),
        "{err}"
    );
    assert!(!err.to_lowercase().contains("sandbox"));
    assert!(out.stdout.is_empty());
}

#[test]
fn grok_json_schema_probe() {
    let w = World::new();
    for profile in ["workspace", "read-only"] {
        let out = w.run(
            "grok",
            &args(&[
                "--sandbox",
                profile,
                "--prompt-file",
                "/dev/null",
                "--json-schema",
                "handoff-invalid-json",
            ]),
            None,
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains("--json-schema: invalid JSON"));
    }
}

#[test]
fn unknown_options_are_rejected_like_the_real_parsers() {
    let w = World::new();
    let out = w.run("claude", &args(&["-p", "--no-such-flag"]), Some("x"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "error: unknown option '--no-such-flag'"
    );

    let out = w.run("codex", &args(&["exec", "--no-such-flag", "-"]), Some("x"));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: unexpected argument '--no-such-flag' found"));

    let out = w.run(
        "claude",
        &args(&["-p", "--output-format", "xml"]),
        Some("x"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Allowed choices are text, json, stream-json."));
}
