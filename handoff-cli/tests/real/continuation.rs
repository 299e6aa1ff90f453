//! `handoff continue` with the real CLIs as receivers: the checkpoint, the note and the message
//! reach the model, the receiver works in a session its CLI keeps, and that session can be
//! resumed headless afterwards with the same environment.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handoff_testkit::model_server::{Reply, Script, Step};
use serde_json::{Value, json};

use super::{MODEL_KEY, Rig, assert_no_process_mentions, clis};

/// Text only the note carries, to find it in what the model was sent.
const NOTE_MARKER: &str = "note-marker-7f3a: the parser keeps its two-pass design";
/// The `--message`, found the same way.
const MESSAGE: &str = "message-marker-91c2: finish two() and leave receiver.txt";
/// The receiver's last words in its first turn.
const FIRST_ANSWER: &str = "receiver: wrote receiver.txt, two() is next";
/// What the resumed session is asked, and what it answers.
const RESUME_PROMPT: &str = "resume-marker-5d20: what did you do?";
const RESUME_ANSWER: &str = "resumed: I wrote receiver.txt";

/// How long one receiver turn or one resumed turn may take.
const TURN_BUDGET: Duration = Duration::from_secs(240);

/// A rig whose repository has a committed `src/lib.rs` and Git's identity for checkpoints.
fn rig(cli: &'static str) -> Rig {
    let rig = Rig::new(cli, Script::new([]));
    for (k, v) in [
        ("user.name", "handoff e2e"),
        ("user.email", "e2e@example.invalid"),
        ("commit.gpgsign", "false"),
    ] {
        rig.repo.git(&["config", k, v]);
    }
    rig.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n");
    rig.repo.commit_all("the source agent's start");
    rig
}

/// A complete note (all nine sections), outside the repository.
fn note_file(rig: &Rig) -> PathBuf {
    let mut text = String::from("# Handoff note\n");
    for section in handoff_core::Section::ALL.map(handoff_core::Section::title) {
        let body = match section {
            "Goal" => format!("Add `two()` to `src/lib.rs`. {NOTE_MARKER}."),
            "Next steps" => "1. Write `receiver.txt`, then `two()`.".to_owned(),
            "How to verify" => "- `cargo test`".to_owned(),
            s => format!("About {s}."),
        };
        text.push_str(&format!("\n## {section}\n\n{body}\n"));
    }
    let path = rig.root.join("private/note.md");
    std::fs::write(&path, text).unwrap();
    path
}

fn head(rig: &Rig) -> String {
    rig.repo.git(&["rev-parse", "HEAD"]).trim().to_owned()
}

/// `handoff continue --cwd <repo> --to <cli> --note-file <note> <extra…>`: exit code and the
/// `handoff.continue.v1` line.
fn continue_to(rig: &Rig, extra: &[&str]) -> (i32, Value) {
    let note = note_file(rig);
    let started = Instant::now();
    let out = rig
        .command()
        .arg("continue")
        .arg("--cwd")
        .arg(rig.repo.path())
        .args(["--to", rig.cli, "--note-file"])
        .arg(&note)
        .args(["--timeout", &TURN_BUDGET.as_secs().to_string()])
        .args(["--fallback", "fresh-agent"])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let code = out.status.code().unwrap_or(-1);
    assert_eq!(stdout.lines().count(), 1, "{}: {stdout}", rig.cli);
    let json: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{}: not one JSON line ({e}): {stdout}", rig.cli));
    eprintln!(
        "[{} continue {extra:?}] exit {code} in {:.1}s — {}",
        rig.cli,
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    (code, json)
}

fn handoff_log(rig: &Rig) -> Value {
    let out = rig
        .command()
        .args(["log", "--json", "--cwd"])
        .arg(rig.repo.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: handoff log: {out:?}", rig.cli);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A real CLI run the way the user would run it: the rig's environment (PATH, HOME,
/// CODEX_HOME, XDG dirs) plus `env`, in `cwd`, stopped after [`TURN_BUDGET`].
pub(crate) struct Cli {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn run_cli(rig: &Rig, cwd: &Path, env: &[(&str, String)], argv: &[String]) -> Cli {
    use std::os::unix::process::CommandExt;
    let base = rig.command();
    let mut cmd = Command::new(&argv[0]);
    cmd.env_clear();
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out_path = rig.root.join("private/cli.stdout");
    let err_path = rig.root.join("private/cli.stderr");
    let mut child = cmd
        .args(&argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TURN_BUDGET {
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("{}: {argv:?} took longer than {TURN_BUDGET:?}", rig.cli);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let cli = Cli {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    };
    eprintln!(
        "[{} {:?}] exit {} in {:.1}s",
        rig.cli,
        &argv[1..],
        cli.code,
        started.elapsed().as_secs_f64()
    );
    cli
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The variables and model flags a user of the scripted server has in their own setup (the
/// same values the rig's configuration gives handoff).
pub(crate) fn user_env(rig: &Rig) -> Vec<(&'static str, String)> {
    match rig.cli {
        "claude" => vec![
            ("ANTHROPIC_BASE_URL", rig.server.url()),
            ("ANTHROPIC_API_KEY", MODEL_KEY.to_owned()),
            ("CLAUDE_CODE_MAX_RETRIES", "0".to_owned()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
            ("DISABLE_TELEMETRY", "1".to_owned()),
            ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ],
        "codex" => vec![("E2E_MODEL_KEY", MODEL_KEY.to_owned())],
        _ => {
            let provider = json!({
                "provider": {
                    "e2e": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "E2E",
                        "options": { "baseURL": rig.server.v1_url(), "apiKey": MODEL_KEY },
                        "models": { "fake-model": { "name": "Fake Model", "tool_call": true } },
                    }
                }
            });
            vec![
                ("OPENCODE_DISABLE_MODELS_FETCH", "1".to_owned()),
                ("OPENCODE_DISABLE_AUTOUPDATE", "1".to_owned()),
                ("OPENCODE_CONFIG_CONTENT", provider.to_string()),
            ]
        }
    }
}

/// The path of the session's file in the CLI's own store (`None` for OpenCode, whose store is
/// a database).
fn stored_session(rig: &Rig, id: &str) -> Option<PathBuf> {
    let home = rig.root.join("home");
    let (dir, name) = match rig.cli {
        "claude" => (home.join(".claude/projects"), format!("{id}.jsonl")),
        "codex" => (rig.root.join("codex-home/sessions"), format!("{id}.jsonl")),
        _ => return None,
    };
    let found: Vec<PathBuf> = files_under(&dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(&name))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{}: no single session file for {id} under {}: {:?}",
        rig.cli,
        dir.display(),
        files_under(&dir)
    );
    found.into_iter().next()
}

/// The session ids `opencode session list --format json` lists with the rig's environment.
fn opencode_sessions(rig: &Rig) -> Vec<String> {
    let argv = ["opencode", "session", "list", "--format", "json"].map(str::to_owned);
    let out = run_cli(rig, rig.repo.path(), &user_env(rig), &argv);
    assert_eq!(out.code, 0, "opencode session list: {}", out.stderr);
    let list: Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("opencode session list is not JSON ({e}): {}", out.stdout));
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect()
}

/// `implement` on `cli`: the receiver writes a file and answers; then its session is resumed
/// headless and answers again.
fn implement_then_resume(cli: &'static str) {
    if !clis().contains(&cli) {
        return;
    }
    let started = Instant::now();
    let rig = rig(cli);
    let start = head(&rig);
    // The source agent's uncommitted work: a tracked change the checkpoint commits.
    rig.repo.write(
        "src/lib.rs",
        "pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    todo!()\n}\n",
    );
    let written = rig.file("receiver.txt");
    rig.server.set_script(Script::new([
        Step::write_file(&written, "written by the receiver\n"),
        Step::text(FIRST_ANSWER),
    ]));

    let (code, r) = continue_to(&rig, &["--from", rig.caller(), "--message", MESSAGE]);
    assert_eq!(code, 0, "{cli}: {r:#}");
    assert_eq!(r["outcome"], "started", "{cli}: {r:#}");
    assert_eq!(r["target"]["provider"], cli);
    assert_eq!(r["source"]["provider"], rig.caller());
    assert_eq!(r["message"], json!({"text": MESSAGE, "sent": true}));

    // The receiver kept its session, and its CLI stored it under that id.
    let receiver = &r["receiver"];
    let session = receiver["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!session.is_empty(), "{cli}: no session id: {r:#}");
    assert_eq!(receiver["exitCode"], 0, "{cli}: {receiver:#}");
    match cli {
        "opencode" => {
            let listed = opencode_sessions(&rig);
            assert!(
                listed.contains(&session),
                "opencode: {session} not in {listed:?}"
            );
        }
        "claude" => {
            // Claude Code takes the id handoff chose and files it under the worktree's slug.
            let argv = strings(&receiver["argv"]);
            let at = argv.iter().position(|a| a == "--session-id").unwrap();
            assert_eq!(argv[at + 1], session, "{argv:?}");
            let file = stored_session(&rig, &session).unwrap();
            let slug: String = rig
                .repo
                .path()
                .to_string_lossy()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            assert_eq!(
                file.parent().and_then(Path::file_name),
                Some(std::ffi::OsStr::new(&slug)),
                "{}",
                file.display()
            );
        }
        _ => {
            stored_session(&rig, &session);
        }
    }
    assert_eq!(receiver["lastMessage"], FIRST_ANSWER, "{cli}: {receiver:#}");

    // The receiver worked with its own tool in the worktree.
    assert!(
        std::fs::read_to_string(&written)
            .unwrap_or_default()
            .contains("written by the receiver"),
        "{cli}: receiver.txt missing; tools called: {:?}",
        rig.server.tool_calls()
    );

    // The model's first turn carried the handoff: the note (by its text and its path) and
    // the message.
    let first = rig
        .server
        .model_calls()
        .into_iter()
        .find(|c| !c.offered_tools().is_empty())
        .unwrap_or_else(|| panic!("{cli}: no model turn in the log"));
    let sent = first.body.to_string();
    let note_path = r["note"]["path"].as_str().unwrap();
    for needle in [
        NOTE_MARKER,
        MESSAGE,
        note_path,
        "handed this task over to you",
    ] {
        assert!(
            sent.contains(needle),
            "{cli}: the first turn lacks {needle:?}"
        );
    }
    let note_text = std::fs::read_to_string(note_path).unwrap();
    assert!(note_text.contains(NOTE_MARKER), "{note_text}");
    assert!(!Path::new(note_path).starts_with(rig.repo.path()));

    // The checkpoint is HEAD, with the source's change; the receiver's file is on top of it.
    let checkpoint = r["checkpoint"]["commit"].as_str().unwrap().to_owned();
    assert_eq!(r["checkpoint"]["created"], true);
    assert_eq!(strings(&r["checkpoint"]["committed"]), ["src/lib.rs"]);
    assert_eq!(head(&rig), checkpoint);
    assert_eq!(
        rig.repo.git(&["rev-parse", "HEAD~1"]).trim(),
        start,
        "{cli}: the checkpoint is not the one commit on top of the start"
    );
    let status = rig
        .repo
        .git(&["status", "--porcelain=v1", "--untracked-files=all"]);
    assert_eq!(status.trim(), "?? receiver.txt", "{cli}");

    // The timeline: the handoff started and the task is the receiver's.
    let log = handoff_log(&rig);
    assert_eq!(log["task"]["agent"]["provider"], cli, "{log:#}");
    let handoff = log["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"]["kind"] == "handoff")
        .unwrap_or_else(|| panic!("{cli}: no handoff in {log:#}"));
    assert_eq!(handoff["event"]["outcome"]["state"], "started", "{log:#}");
    assert_eq!(handoff["event"]["target"]["provider"], cli);
    assert_eq!(handoff["event"]["source"]["provider"], rig.caller());
    assert_eq!(
        handoff["event"]["context"]["details"]["checkpoint"],
        checkpoint
    );

    // The printed resume command opens that session in the worktree.
    let resume = &receiver["resume"];
    assert_eq!(
        resume["cwd"].as_str(),
        rig.repo.path().to_str(),
        "{resume:#}"
    );
    let argv = strings(&resume["argv"]);
    assert_eq!(argv.first().map(String::as_str), Some(cli), "{resume:#}");
    assert_eq!(argv.last(), Some(&session), "{resume:#}");
    let receiver_done = started.elapsed();

    // A headless turn of the same session, with the same environment.
    rig.server.clear_log();
    rig.server.set_script(Script::text(RESUME_ANSWER));
    resume_headless(&rig, &r, &session);
    let resumed = rig
        .server
        .model_calls()
        .into_iter()
        .find(|c| c.body.to_string().contains(RESUME_PROMPT))
        .unwrap_or_else(|| panic!("{cli}: the resumed prompt never reached the model"));
    // The resumed conversation carries the first turn.
    let history = resumed.body.to_string();
    for needle in [NOTE_MARKER, FIRST_ANSWER] {
        assert!(
            history.contains(needle),
            "{cli}: the resumed turn lacks the first turn's {needle:?}"
        );
    }
    let repo = rig.repo.path().to_string_lossy().into_owned();
    assert_no_process_mentions(&[&repo]);
    eprintln!(
        "[{cli}] continue in {:.1}s, resume in {:.1}s",
        receiver_done.as_secs_f64(),
        (started.elapsed() - receiver_done).as_secs_f64()
    );
}

/// Runs the CLI's headless resume of `session` and checks it answered in that session.
fn resume_headless(rig: &Rig, r: &Value, session: &str) {
    let cli = rig.cli;
    let cwd = PathBuf::from(r["receiver"]["resume"]["cwd"].as_str().unwrap());
    let mut argv: Vec<String> = vec![cli.to_owned()];
    match cli {
        "claude" => argv.extend(
            [
                "-p",
                "--resume",
                session,
                "--output-format",
                "json",
                RESUME_PROMPT,
            ]
            .map(str::to_owned),
        ),
        "codex" => {
            argv.extend(["exec", "resume", "--json"].map(str::to_owned));
            // The receiver's provider pins: what a user has in ~/.codex/config.toml.
            let used = strings(&r["receiver"]["argv"]);
            for pair in used.windows(2) {
                if (pair[0] == "--config" && pair[1].starts_with("model_provider"))
                    || pair[0] == "--model"
                {
                    argv.extend(pair.iter().cloned());
                }
            }
            argv.extend([session, RESUME_PROMPT].map(str::to_owned));
        }
        _ => argv.extend(
            [
                "run",
                "--session",
                session,
                "--model",
                "e2e/fake-model",
                "--format",
                "json",
                RESUME_PROMPT,
            ]
            .map(str::to_owned),
        ),
    }
    let out = run_cli(rig, &cwd, &user_env(rig), &argv);
    assert_eq!(out.code, 0, "{cli} resume: {}\n{}", out.stdout, out.stderr);
    match cli {
        "claude" => {
            let result: Value = serde_json::from_str(out.stdout.trim())
                .unwrap_or_else(|e| panic!("claude resume: not JSON ({e}): {}", out.stdout));
            assert_eq!(result["result"], RESUME_ANSWER, "{result:#}");
            assert_eq!(result["session_id"], session, "{result:#}");
        }
        "codex" => {
            let events = json_lines(&out.stdout);
            let thread = events
                .iter()
                .find(|e| e["type"] == "thread.started")
                .unwrap_or_else(|| panic!("codex resume: no thread.started: {}", out.stdout));
            assert_eq!(thread["thread_id"], session, "{thread}");
            let said = events
                .iter()
                .filter_map(|e| e.pointer("/item/text").and_then(Value::as_str))
                .any(|t| t == RESUME_ANSWER);
            assert!(said, "codex resume: {}", out.stdout);
        }
        _ => {
            let events = json_lines(&out.stdout);
            let ids: Vec<&str> = events
                .iter()
                .filter_map(|e| e["sessionID"].as_str())
                .collect();
            assert!(!ids.is_empty(), "opencode resume: {}", out.stdout);
            assert!(ids.iter().all(|i| *i == session), "{ids:?} vs {session}");
            let said = events
                .iter()
                .filter_map(|e| e.pointer("/part/text").and_then(Value::as_str))
                .any(|t| t == RESUME_ANSWER);
            assert!(said, "opencode resume: {}", out.stdout);
        }
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn claude_receives_the_task_and_its_session_resumes() {
    implement_then_resume("claude");
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_receives_the_task_and_its_session_resumes() {
    implement_then_resume("codex");
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_receives_the_task_and_its_session_resumes() {
    implement_then_resume("opencode");
}

/// A review receiver's attempt to write is refused by Codex's read-only sandbox; the worktree
/// is left exactly as the checkpoint left it and the handoff starts.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_review_receiver_leaves_the_worktree_unchanged() {
    if !clis().contains(&"codex") {
        return;
    }
    let started = Instant::now();
    let rig = rig("codex");
    let evil = rig.file("review-wrote-this.txt");
    rig.server.set_script(Script::new([
        Step::write_file(&evil, "a reviewer must not write\n"),
        Step::text("review: looks fine"),
    ]));
    let before = (
        head(&rig),
        rig.repo
            .git(&["status", "--porcelain=v1", "--untracked-files=all"]),
    );
    let (code, r) = continue_to(
        &rig,
        &["--from", "claude", "--role", "review", "--message", MESSAGE],
    );
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["outcome"], "started", "{r:#}");
    assert_eq!(r["target"]["role"], "review", "{r:#}");
    assert_eq!(r["receiver"]["worktreeUnchanged"], true, "{r:#}");
    assert_eq!(r["receiver"]["lastMessage"], "review: looks fine");
    assert!(
        !Path::new(&evil).exists(),
        "the review receiver wrote a file"
    );
    let after = (
        head(&rig),
        rig.repo
            .git(&["status", "--porcelain=v1", "--untracked-files=all"]),
    );
    assert_eq!(before, after);
    // Nothing to commit: the checkpoint is the start.
    assert_eq!(r["checkpoint"]["created"], false);
    assert_eq!(r["checkpoint"]["commit"], before.0.as_str());
    let argv = strings(&r["receiver"]["argv"]);
    let at = argv.iter().position(|a| a == "--sandbox").unwrap();
    assert_eq!(argv[at + 1], "read-only", "{argv:?}");
    // The model did try, and Codex sent the refusal back as the call's output.
    let (tool, call_id) = rig
        .server
        .requests()
        .into_iter()
        .find_map(|r| match r.reply {
            Reply::ToolCall { tool, call_id, .. } => Some((tool, call_id)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("codex made no tool call: {r:#}"));
    let output = rig.server.tool_output(&call_id).unwrap_or_default();
    assert!(
        output.contains("Read-only file system") || output.contains("rejected"),
        "the sandbox did not refuse {tool}: {output}"
    );
    eprintln!(
        "[codex] review receiver in {:.1}s; {tool} answered: {output}",
        started.elapsed().as_secs_f64()
    );
}
