//! Nested advice (`HANDOFF_FAKE_ADVICE`), the context file and the wait file, against a shell
//! script standing in for handoff.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handoff_testkit::keys;
use serde_json::Value;

use crate::support::*;

const CONTEXT: &str = "HANDOFF_SUPERVISOR_CONTEXT";
const CONTEXT_VALUE: &str = "/run/handoff/sup.sock#token-123";

/// The stand-in for handoff, in a directory with a space in its name. It answers one
/// `handoff.result.v1` line saying whether the context variable was there and what came on
/// stdin; asked for `grok` it fails (exit 3, no JSON). Every call touches `<dir>/ran`.
fn fake_handoff(w: &World) -> PathBuf {
    let dir = w.scratch("stand in");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("handoff");
    std::fs::write(
        &script,
        r#"#!/bin/sh
touch "$(dirname "$0")/ran"
question=$(cat)
if [ -n "${HANDOFF_SUPERVISOR_CONTEXT+x}" ]; then context=present; else context=absent; fi
echo "nested stderr for $3" >&2
if [ "$3" = grok ]; then echo "no harness" >&2; exit 3; fi
printf 'progress line\n'
printf '{"schemaVersion":"handoff.result.v1","status":"completed","exit":{"driver":0},"output":{"response":"context %s; asked: %s"},"lineage":{"runId":"run-%s"},"argv":"%s"}\n' "$context" "$question" "$3" "$*"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The line handoff puts in a supervised worker's prompt.
fn advice_line(handoff: &Path, cwd: &Path) -> String {
    format!(
        "    '{}' advice --harness AGENT --cwd '{}' --instructions -",
        handoff.display(),
        cwd.display()
    )
}

fn with_line(prompt: &str, line: &str) -> String {
    format!("{prompt}\nTo ask another agent for advice, run (the question on stdin):\n\n{line}\n")
}

fn only_record(w: &World) -> Value {
    let mut calls = w.agents.invocations();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    calls.pop().unwrap()
}

fn context_env() -> [(&'static str, &'static OsStr); 1] {
    [(CONTEXT, OsStr::new(CONTEXT_VALUE))]
}

fn codex_last_answer(w: &World, prompt: &str, env: &[(&str, &OsStr)]) -> (Value, Value) {
    let schema = w.scratch("schema.json");
    std::fs::write(&schema, SCHEMA).unwrap();
    let last = w.scratch("last.json");
    let argv = codex_run_args("workspace-write", w.repo.path(), &schema, &last);
    let out = w.run_in("codex", &argv, Some(prompt), w.tmp.path(), env);
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_str(&std::fs::read_to_string(&last).unwrap()).unwrap();
    assert_answer(&answer);
    (answer, only_record(w))
}

#[test]
fn codex_asks_each_target_and_reports_it() {
    let w = World::new();
    let handoff = fake_handoff(&w);
    let line = advice_line(&handoff, w.repo.path());
    let context_file = w.scratch("context.txt");
    w.agents.record_dir();
    w.agents.set(keys::ADVICE, " codex, grok ,");
    w.agents.set(keys::ADVICE_ARGS, "--bash true");
    w.agents.set(keys::CONTEXT_FILE, &context_file);

    let (answer, record) = codex_last_answer(&w, &with_line(BUILD_PROMPT, &line), &context_env());

    assert_eq!(
        std::fs::read_to_string(&context_file).unwrap(),
        CONTEXT_VALUE
    );
    assert_eq!(record["nestedCommand"], line.trim());
    let nested = record["nested"].as_array().unwrap();
    assert_eq!(nested.len(), 2, "{record:#}");
    let quoted_handoff = format!("'{}'", handoff.display());
    let quoted_repo = format!("'{}'", w.repo.path().display());
    for (call, target, code) in [(&nested[0], "codex", 0), (&nested[1], "grok", 3)] {
        let mut keys: Vec<&str> = call
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "command",
                "durationMs",
                "exitCode",
                "stderrTail",
                "stdout",
                "target"
            ]
        );
        assert_eq!(call["target"], target);
        assert_eq!(
            call["command"],
            format!(
                "{quoted_handoff} advice --harness {target} --cwd {quoted_repo} --bash true --instructions -"
            )
        );
        assert_eq!(call["exitCode"], code);
        assert!(call["durationMs"].is_u64());
        assert!(
            call["stderrTail"]
                .as_str()
                .unwrap()
                .starts_with(&format!("nested stderr for {target}\n")),
            "{call:#}"
        );
    }
    let question = "What is the riskiest part of this change? (asked by codex) [to codex]";
    let stdout = nested[0]["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("progress line\n"), "{stdout}");
    let result: Value = serde_json::from_str(stdout.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        result["output"]["response"],
        format!("context present; asked: {question}")
    );
    // The quoted paths reached the stand-in as single words.
    assert_eq!(
        result["argv"],
        format!(
            "advice --harness codex --cwd {} --bash true --instructions -",
            w.repo.path().display()
        )
    );
    assert_eq!(nested[1]["stdout"], "");

    let evidence = answer["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 3, "{answer:#}");
    assert_eq!(
        evidence[0],
        serde_json::json!({
            "kind": "advice",
            "summary": format!("codex: exit 0 completed context present; asked: {question}"),
        })
    );
    assert_eq!(
        evidence[1],
        serde_json::json!({"kind": "advice", "summary": "grok: exit 3 unparsed"})
    );
    assert_eq!(evidence[2]["kind"], "file");
    // The worker still did its work.
    assert!(w.repo.path().join("fake-build.txt").is_file());
}

#[test]
fn claude_strip_removes_the_context_and_advice_never_writes() {
    let w = World::with_sandbox_tools();
    let handoff = fake_handoff(&w);
    let line = advice_line(&handoff, w.repo.path());
    w.agents.record_dir();
    w.agents.set(keys::MODE, "mutate");
    w.agents.set(keys::ADVICE, "claude");
    w.agents.set(keys::ADVICE_STRIP, "1");
    w.agents.set(keys::ADVICE_QUESTION, "Is it safe?");

    let settings = sandbox_settings(w.repo.path(), true);
    let out = w.run_in(
        "claude",
        &claude_run_args(WRITE_TOOLS, &settings, SCHEMA),
        Some(&with_line(ADVICE_PROMPT, &line)),
        w.repo.path(),
        &context_env(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let result = json_lines(&out).pop().unwrap();
    let answer = assert_answer(&result["structured_output"]);
    assert_eq!(
        answer["evidence"],
        serde_json::json!([{
            "kind": "advice",
            "summary": "claude: exit 0 completed context absent; asked: Is it safe? [to claude]",
        }])
    );

    let record = only_record(&w);
    // The fake itself had the variable; only the nested call lost it.
    assert_eq!(record["env"][CONTEXT], CONTEXT_VALUE);
    let nested = record["nested"].as_array().unwrap();
    assert_eq!(nested.len(), 1);
    assert_eq!(nested[0]["exitCode"], 0);
    assert!(
        nested[0]["stdout"]
            .as_str()
            .unwrap()
            .contains("context absent; asked: Is it safe? [to claude]")
    );
    // An advice run writes nothing, not even in `mutate` mode with write tools.
    assert_eq!(files_in(w.repo.path()), [".gitignore", "README.md"]);
}

#[test]
fn without_the_line_nothing_runs() {
    let w = World::new();
    let handoff = fake_handoff(&w);
    w.agents.record_dir();
    w.agents.set(keys::ADVICE, "codex,claude");

    let (answer, record) = codex_last_answer(&w, BUILD_PROMPT, &context_env());
    assert_eq!(record["nestedCommand"], Value::Null);
    assert_eq!(record["nested"], serde_json::json!([]));
    let evidence = answer["evidence"].as_array().unwrap();
    assert_eq!(evidence.len(), 1);
    assert_eq!(evidence[0]["kind"], "file");
    assert!(!handoff.with_file_name("ran").exists());

    // A line with the harness already filled in is not the template either.
    let filled = format!(
        "    '{}' advice --harness codex --cwd '/x' --instructions -",
        handoff.display()
    );
    std::fs::remove_dir_all(w.agents.record_dir()).unwrap();
    let (_, record) = codex_last_answer(&w, &with_line(BUILD_PROMPT, &filled), &[]);
    assert_eq!(record["nestedCommand"], Value::Null);
    assert!(!handoff.with_file_name("ran").exists());
}

#[test]
fn records_are_untouched_without_the_switch() {
    let w = World::new();
    let handoff = fake_handoff(&w);
    w.agents.record_dir();
    let line = advice_line(&handoff, w.repo.path());
    let (_, record) = codex_last_answer(&w, &with_line(BUILD_PROMPT, &line), &[]);
    assert!(record.get("nested").is_none());
    assert!(record.get("nestedCommand").is_none());
    assert!(!handoff.with_file_name("ran").exists());
}

#[test]
fn every_cli_asks() {
    let w = World::with_sandbox_tools();
    let handoff = fake_handoff(&w);
    let prompt = with_line(ADVICE_PROMPT, &advice_line(&handoff, w.repo.path()));
    w.agents.set(keys::ADVICE, "opencode");
    let repo = w.repo.path().to_str().unwrap().to_owned();
    let settings = sandbox_settings(w.repo.path(), false);
    let runs: [(&str, Vec<String>); 6] = [
        ("claude", claude_run_args(READ_TOOLS, &settings, SCHEMA)),
        ("codex", args(&["exec", "--ephemeral", "--json", "-"])),
        ("grok", args(&["--cwd", &repo, "--sandbox", "read-only"])),
        (
            "kiro-cli",
            args(&["chat", "--no-interactive", "--trust-tools=fs_read"]),
        ),
        (
            "opencode",
            args(&["--pure", "run", "--dir", &repo, "--format", "json"]),
        ),
        ("cursor-agent", args(&["-p", "--output-format", "json"])),
    ];
    for (exe, argv) in runs {
        let records = w.agents.record_dir();
        // OpenCode runs delegated when its configuration roots are private.
        let config_dir = w.scratch("opencode-config");
        let mut env = context_env().to_vec();
        if exe == "opencode" {
            env.push(("OPENCODE_CONFIG_DIR", config_dir.as_os_str()));
        }
        let out = w.run_in(exe, &argv, Some(&prompt), w.repo.path(), &env);
        assert!(out.status.success(), "{exe}: {}", stderr(&out));
        let record = only_record(&w);
        let nested = record["nested"].as_array().unwrap();
        assert_eq!(nested.len(), 1, "{exe}: {record:#}");
        assert_eq!(nested[0]["exitCode"], 0, "{exe}: {record:#}");
        let expected = format!(
            "context present; asked: What is the riskiest part of this change? (asked by {exe}) [to opencode]"
        );
        assert!(
            nested[0]["stdout"].as_str().unwrap().contains(&expected),
            "{exe}: {record:#}"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .contains("opencode: exit 0 completed context present"),
            "{exe}: {}",
            stdout(&out)
        );
        assert_eq!(
            files_in(w.repo.path()),
            [".gitignore", "README.md"],
            "{exe}"
        );
        std::fs::remove_dir_all(records).unwrap();
    }
}

#[test]
fn wait_file_holds_the_answer_after_the_record_shows_the_call() {
    let w = World::new();
    let handoff = fake_handoff(&w);
    let context_file = w.scratch("context.txt");
    let wait_file = w.scratch("go");
    w.agents.record_dir();
    w.agents.set(keys::ADVICE, "codex");
    w.agents.set(keys::CONTEXT_FILE, &context_file);
    w.agents.set(keys::WAIT_FILE, &wait_file);
    let prompt = with_line(BUILD_PROMPT, &advice_line(&handoff, w.repo.path()));

    let mut child = Command::new(w.agents.bin("codex"))
        .args([
            "exec",
            "--ephemeral",
            "--json",
            "--sandbox",
            "workspace-write",
            "-",
        ])
        .current_dir(w.repo.path())
        .env_clear()
        .env("PATH", w.agents.path_env())
        .env("HOME", w.tmp.path())
        .env(CONTEXT, CONTEXT_VALUE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(prompt.as_bytes())
            .unwrap();
    }
    assert_eq!(wait_for_file(&context_file), CONTEXT_VALUE);
    // The nested call is on record while the worker waits.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let calls = w.agents.invocations();
        if calls
            .first()
            .and_then(|r| r["nested"].as_array())
            .is_some_and(|n| n.len() == 1)
        {
            break;
        }
        assert!(Instant::now() < deadline, "no nested call recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        child.try_wait().unwrap().is_none(),
        "answered before the wait file"
    );
    assert!(!w.repo.path().join("fake-build.txt").exists());

    std::fs::write(&wait_file, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("codex: exit 0 completed context present"));
    assert!(w.repo.path().join("fake-build.txt").is_file());
}
