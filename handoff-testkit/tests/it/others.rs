//! Grok, Kiro, OpenCode and Cursor: envelopes good enough for their adapters.

use serde_json::Value;

use crate::support::*;

#[test]
fn grok_envelope_with_structured_output() {
    let w = World::new();
    let prompt = w.scratch("request.txt");
    std::fs::write(&prompt, BUILD_PROMPT).unwrap();
    let out = w.run(
        "grok",
        &args(&[
            "--prompt-file",
            prompt.to_str().unwrap(),
            "--cwd",
            w.repo.path().to_str().unwrap(),
            "--sandbox",
            "workspace",
            "--permission-mode",
            "auto",
            "--no-plan",
            "--no-subagents",
            "--no-memory",
            "--max-turns",
            "12",
            "--json-schema",
            SCHEMA,
            "--verbatim",
            "--disable-web-search",
            "--tools",
            "Read,Grep,Edit",
            "--deny",
            "Bash(*)",
            "--deny",
            "MCPTool(*)",
            "--deny",
            "WebFetch(*)",
        ]),
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let envelope: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_answer(&envelope["structuredOutput"]);
    let usage = &envelope["usage"];
    let input = usage["input_tokens"].as_u64().unwrap()
        + usage["cache_read_input_tokens"].as_u64().unwrap();
    assert_eq!(
        input + usage["output_tokens"].as_u64().unwrap(),
        usage["total_tokens"].as_u64().unwrap()
    );
    assert!(w.repo.path().join("fake-build.txt").is_file());
}

#[test]
fn kiro_ansi_text_with_marker() {
    let w = World::new();
    let out = w.run(
        "kiro-cli",
        &args(&[
            "chat",
            "--no-interactive",
            "--wrap",
            "never",
            "--trust-tools=fs_read",
        ]),
        Some(REVIEW_PROMPT),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains('\u{1b}'));
    let stripped: String = strip_ansi(&text);
    let after = stripped
        .rsplit_once("\n> ")
        .map_or_else(|| stripped.strip_prefix("> ").unwrap(), |(_, a)| a);
    let json_start = after.find('{').unwrap();
    let answer: Value = serde_json::from_str(after[json_start..].trim()).unwrap();
    assert_answer(&answer);
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn opencode_ndjson_events() {
    let w = World::new();
    let config = serde_json::json!({
        "permission": {"*": "deny", "edit": "allow"},
        "agent": {"handoff_strict_writer_v03": {"mode": "primary", "permission": {"*": "deny", "edit": "allow"}}},
    })
    .to_string();
    let config_os = std::ffi::OsString::from(&config);
    let out = w.run_in(
        "opencode",
        &args(&[
            "--pure",
            "run",
            "--agent",
            "handoff_strict_writer_v03",
            "--dir",
            w.repo.path().to_str().unwrap(),
            "--format",
            "json",
        ]),
        Some(BUILD_PROMPT),
        w.tmp.path(),
        &[
            ("OPENCODE_CONFIG_CONTENT", &config_os),
            (
                "OPENCODE_CONFIG_DIR",
                w.scratch("opencode-config").as_os_str(),
            ),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let events = json_lines(&out);
    let session = events[0]["sessionID"].as_str().unwrap();
    assert!(events.iter().all(|e| e["sessionID"] == session));
    let text = events.iter().rev().find(|e| e["type"] == "text").unwrap();
    let answer: Value = serde_json::from_str(text["part"]["text"].as_str().unwrap()).unwrap();
    assert_answer(&answer);
    assert_eq!(events.last().unwrap()["part"]["reason"], "stop");
    assert!(w.repo.path().join("fake-build.txt").is_file());

    let out = w.run_in(
        "opencode",
        &args(&["--pure", "debug", "config"]),
        None,
        w.repo.path(),
        &[("OPENCODE_CONFIG_CONTENT", &config_os)],
    );
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(printed, serde_json::from_str::<Value>(&config).unwrap());
}

#[test]
fn cursor_result_envelope_and_sandbox_probe() {
    let w = World::new();
    let out = w.run(
        "cursor-agent",
        &args(&["-p", "--output-format", "json"]),
        Some(REVIEW_PROMPT),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let envelope: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(envelope["type"], "result");
    assert_eq!(envelope["subtype"], "success");
    assert_eq!(envelope["is_error"], false);
    let answer: Value = serde_json::from_str(envelope["result"].as_str().unwrap()).unwrap();
    assert_answer(&answer);

    let probe_on = std::ffi::OsString::from("1");
    for (flag, expect) in [("--allow-paths", true), ("--readonly-paths", false)] {
        let target = w
            .repo
            .path()
            .join(format!(".handoff-cursor-target-probe-{expect}"));
        let cwd = w.repo.path().to_str().unwrap();
        let out = w.run_in(
            "cursor-agent",
            &args(&[
                "sandbox",
                "run",
                "--sandbox",
                flag,
                cwd,
                "/bin/true",
                cwd,
                target.to_str().unwrap(),
            ]),
            None,
            w.tmp.path(),
            &[("HANDOFF_CURSOR_SANDBOX_PROBE", &probe_on)],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(target.exists(), expect, "{flag}");
    }
}
