//! A real Claude Code session whose next turn meets a 429: its `StopFailure` hook (registered
//! in its settings, as the README shows) runs `handoff hook claude-stop-failure`, and the task
//! continues on real Codex in the background with the Claude conversation carried.

use std::time::{Duration, Instant};

use handoff_testkit::model_server::{ApiError, ModelServer, Script, Step};
use serde_json::{Value, json};

use super::continuation::{run_cli, user_env};
use super::{HANDOFF, Rig, clis};

const FIRST_PROMPT: &str = "Add a --verbose flag to the CLI (limit-hook-marker-5150).";
const FIRST_ANSWER: &str = "Planned the --verbose flag (first-answer-marker-7007).";

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn a_claude_code_turn_on_its_limit_continues_on_codex_by_itself() {
    let only = clis();
    if !(only.contains(&"claude") && only.contains(&"codex")) {
        return;
    }
    // Codex answers on the rig's server; Claude Code talks to a server of its own.
    let rig = Rig::new(
        "claude",
        Script::text("Continued on codex (receiver-marker-9009)."),
    );
    let claude_server = ModelServer::start_blocking(Script::text(FIRST_ANSWER));
    let config = rig.root.join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[failover]\nreceiver = \"codex\"\non_limit = \"continue\"\n");
    std::fs::write(&config, text).unwrap();
    for (k, v) in [
        ("user.name", "handoff test"),
        ("user.email", "test@example.invalid"),
        ("commit.gpgsign", "false"),
    ] {
        rig.repo.git(&["config", k, v]);
    }
    // The hook, in Claude Code's user settings.
    let settings = rig.root.join("home/.claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let hook = json!({"hooks": {"StopFailure": [{"matcher": "", "hooks": [
        {"type": "command", "command": format!("{HANDOFF} hook claude-stop-failure")}
    ]}]}});
    std::fs::write(&settings, hook.to_string()).unwrap();

    let mut env = user_env(&rig);
    for (k, v) in env.iter_mut() {
        if *k == "ANTHROPIC_BASE_URL" {
            *v = claude_server.url();
        }
    }
    let claude = super::real_bin().join("claude").display().to_string();
    let session = uuid::Uuid::new_v4().to_string();
    let first = run_cli(
        &rig,
        rig.repo.path(),
        &env,
        &[
            claude.clone(),
            "-p".into(),
            "--session-id".into(),
            session.clone(),
            "--output-format".into(),
            "json".into(),
            FIRST_PROMPT.into(),
        ],
    );
    assert_eq!(
        first.code, 0,
        "first turn: {}\n{}",
        first.stdout, first.stderr
    );
    rig.repo.write("flag.txt", "half of the --verbose flag\n");
    // The next turn resumes the session from its transcript: wait until it holds the first
    // answer (a resume of a session not yet on disk fails before any request, hook-less).
    let projects = rig.root.join("home/.claude/projects");
    let written = Instant::now();
    while !transcript_holds(&projects, &session, "first-answer-marker-7007") {
        assert!(
            written.elapsed() < Duration::from_secs(20),
            "the first turn's transcript never held its answer"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    claude_server.set_script(Script::new([Step::Fail(ApiError::RateLimited)]));
    let second = run_cli(
        &rig,
        rig.repo.path(),
        &env,
        &[
            claude,
            "-p".into(),
            "--resume".into(),
            session.clone(),
            "--output-format".into(),
            "json".into(),
            "Now write the tests.".into(),
        ],
    );
    assert_ne!(second.code, 0, "the limited turn: {}", second.stdout);
    assert!(
        second.stdout.contains("429"),
        "the turn did not end on its limit: {}\n{}",
        second.stdout,
        second.stderr
    );

    // The hook started a job; it continues the task on Codex.
    let deadline = Instant::now() + Duration::from_secs(30);
    let job = loop {
        let out = rig.command().args(["jobs", "--json"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(job) = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .next()
        {
            break job;
        }
        assert!(
            Instant::now() < deadline,
            "no job was started by the hook: {}\n{}\nits log: {}",
            second.stdout,
            second.stderr,
            std::fs::read_to_string(rig.root.join("home/.local/state/handoff/hook.log"))
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(job["verb"], "continue", "{job}");
    let id = job["id"].as_str().unwrap();
    let waited = rig.command().args(["wait", id]).output().unwrap();
    let result: Value = serde_json::from_slice(&waited.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&waited.stdout)
        )
    });
    assert_eq!(waited.status.code(), Some(0), "{result:#}");
    assert_eq!(result["target"]["provider"], "codex", "{result:#}");
    assert_eq!(result["carry"]["carried"], true, "{result:#}");
    // Codex's model received the earlier words of the Claude conversation.
    let sent: String = rig
        .server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    for marker in ["limit-hook-marker-5150", "first-answer-marker-7007"] {
        assert!(sent.contains(marker), "codex's model never saw {marker}");
    }
    // The half-done work is still there, accounted for by the checkpoint; the timeline names
    // the trigger and the cause.
    let checkpoint = result["checkpoint"].to_string();
    assert!(checkpoint.contains("flag.txt"), "{result:#}");
    assert!(rig.repo.path().join("flag.txt").exists());
    let log = rig
        .command()
        .args(["log", "--cwd", &rig.repo.path().to_string_lossy(), "--json"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("\"trigger\":\"limit\""), "{log}");
    assert!(log.contains("\"cause\":\"rate_limited\""), "{log}");
}

/// Whether session `session`'s transcript under `projects` (any project folder) holds `text`.
fn transcript_holds(projects: &std::path::Path, session: &str, text: &str) -> bool {
    std::fs::read_dir(projects)
        .into_iter()
        .flatten()
        .flatten()
        .map(|dir| dir.path().join(format!("{session}.jsonl")))
        .any(|file| std::fs::read_to_string(file).is_ok_and(|t| t.contains(text)))
}
