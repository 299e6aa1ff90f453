//! `handoff continue` carrying the conversation: real-format sessions (recorded with the real
//! CLIs) seeded into the sandbox's stores, the fake agents resuming what handoff wrote into
//! theirs, and the continuity verdicts.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::note::SECTIONS;
use crate::support::{Run, Sandbox};

pub(crate) const CLAUDE_SOURCE: &str = "a7859f76-46bd-4069-b44b-0c2f0943b80c";
const CODEX_SOURCE: &str = "01a2308e-9a92-7fa1-9b83-fc8f4a0751d4";

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../handoff-adapters/tests/it/fixtures/sessions")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub(crate) fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    for (k, v) in [
        ("user.name", "handoff test"),
        ("user.email", "test@example.invalid"),
        ("commit.gpgsign", "false"),
    ] {
        sb.repo.git(&["config", k, v]);
    }
    sb.repo.write("fake-receiver-claude.txt", "\n");
    sb.repo.write("fake-receiver-codex.txt", "\n");
    sb.repo.write("fake-receiver-opencode.txt", "\n");
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n");
    sb.repo.commit_all("receiver files");
    sb
}

pub(crate) fn home(sb: &Sandbox) -> PathBuf {
    sb.root.join("home")
}

pub(crate) fn repo_path(sb: &Sandbox) -> String {
    sb.repo.path().to_string_lossy().into_owned()
}

/// Claude Code's project folder name for a directory.
pub(crate) fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The recorded real Claude Code session, re-rooted at the sandbox's repository, in the
/// sandbox's Claude store.
pub(crate) fn seed_claude(sb: &Sandbox) -> PathBuf {
    let text = fixture("claude-two-turns.jsonl").replace("$SCRATCH/repo", &repo_path(sb));
    let dir = home(sb).join(".claude/projects").join(slug(&repo_path(sb)));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{CLAUDE_SOURCE}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

/// The recorded real Codex rollout, re-rooted, in the sandbox's Codex store.
fn seed_codex(sb: &Sandbox) -> PathBuf {
    let text = fixture("codex-rollout.jsonl")
        .replace("$SCRATCH/repo", &repo_path(sb))
        .replace("$CODEX_HOME", &home(sb).join(".codex").to_string_lossy());
    let dir = home(sb).join(".codex/sessions/2026/12/01");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("rollout-2026-12-01T07-43-01-{CODEX_SOURCE}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

pub(crate) fn note_file(sb: &Sandbox) -> String {
    let mut text = String::from("# Handoff note\n");
    for section in SECTIONS {
        let body = match section {
            "How to verify" => "- `cargo test`".to_owned(),
            "Current state" => {
                "The notes file exists; the parser in src/lib.rs is half done.".to_owned()
            }
            "Next steps" => "1. Finish the parser in `src/lib.rs`.".to_owned(),
            s => format!("About {s}."),
        };
        text.push_str(&format!("\n## {section}\n\n{body}\n"));
    }
    let path = sb.private.join("note.md");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// `handoff continue --cwd <repo> --note-file <note> <args…>` with extra environment.
fn continue_env(sb: &Sandbox, env: &[(&str, &str)], args: &[&str]) -> Run {
    let note = note_file(sb);
    let cwd = repo_path(sb);
    let mut cmd: Command = sb.command();
    // The fake agents read their switches from their settings file: the receiver's
    // environment is an allowlist.
    for (k, v) in env {
        if k.starts_with("FAKE_AGENT_") {
            sb.agents.set(k, v);
        } else {
            cmd.env(k, v);
        }
    }
    cmd.args(["continue", "--cwd", &cwd, "--note-file", &note])
        .args(args);
    let run = sb.exec(&mut cmd);
    for (k, _) in env {
        if k.starts_with("FAKE_AGENT_") {
            sb.agents.unset(k);
        }
    }
    assert_eq!(run.stdout.lines().count(), 1, "{run:#?}");
    let parsed: handoff_core::ContinueResult = serde_json::from_value(run.json.clone())
        .unwrap_or_else(|e| panic!("not a handoff.continue.v1 result: {e}: {run:#?}"));
    assert_eq!(i32::from(parsed.exit_code), run.code);
    run
}

fn continue_(sb: &Sandbox, args: &[&str]) -> Run {
    continue_env(sb, &[], args)
}

pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

pub(crate) fn log_json(sb: &Sandbox) -> Value {
    let cwd = repo_path(sb);
    let run = sb.run(&["log", "--cwd", &cwd, "--json"]);
    assert_eq!(run.code, 0, "{run:#?}");
    run.json
}

pub(crate) fn log_text(sb: &Sandbox) -> String {
    let cwd = repo_path(sb);
    let run = sb.run(&["log", "--cwd", &cwd]);
    assert_eq!(run.code, 0, "{run:#?}");
    run.stdout
}

pub(crate) fn handoff_rows(log: &Value) -> Vec<Value> {
    log["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["kind"] == "handoff")
        .map(|e| e["event"].clone())
        .collect()
}

#[test]
fn a_claude_session_is_carried_to_codex_which_continues_it() {
    let sb = sandbox();
    let source = seed_claude(&sb);
    let before = std::fs::read(&source).unwrap();
    let run = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["outcome"], "started");
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["mode"], "converted");
    assert_eq!(carry["source"]["provider"], "claude");
    assert_eq!(carry["source"]["sessionId"], CLAUDE_SOURCE);
    assert_eq!(carry["source"]["found"], "latest");
    let carried_id = carry["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(carried_id, CLAUDE_SOURCE);
    let files: Vec<String> = serde_json::from_value(carry["files"].clone()).unwrap();
    assert_eq!(files.len(), 1, "{carry:#}");
    assert!(
        files[0].starts_with(
            &home(&sb)
                .join(".codex/sessions")
                .to_string_lossy()
                .into_owned()
        ) && files[0].ends_with(&format!("{carried_id}.jsonl")),
        "{files:?}"
    );
    assert!(carry["bytes"].as_u64().unwrap() > 0);
    assert!(carry["messages"].as_u64().unwrap() >= 4, "{carry:#}");
    let recap = &carry["recap"];
    let recap_path = PathBuf::from(recap["path"].as_str().unwrap());
    assert!(recap_path.is_file() && recap["bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        r["receiver"]["sessionId"], carried_id,
        "the receiver resumed the carried session"
    );
    let c = &r["continuity"];
    assert_eq!(c["result"], "continued", "{c:#}");
    assert_eq!(c["checks"]["originalAppended"], true);
    assert_eq!(c["checks"]["sessionResumed"], true);
    assert_eq!(c["checks"]["turnAfterCarried"], true);
    assert!(c["lastMessage"].is_string());
    // The source is byte-identical; the carried copy grew by the receiver's turn.
    assert_eq!(std::fs::read(&source).unwrap(), before);
    let carried = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        carried.contains("Create notes.txt with one line."),
        "the first user turn is carried"
    );
    // The prompt tells the receiver its session holds the conversation.
    let argv = r["receiver"]["argv"].as_array().unwrap();
    assert!(
        argv.iter().any(|a| a == "resume") && argv.iter().any(|a| *a == carried_id),
        "{argv:?}"
    );
    // The timeline shows the carried turns with who wrote them, and the verdict.
    let log = log_json(&sb);
    let rows = handoff_rows(&log);
    let details = &rows.last().unwrap()["context"]["details"];
    assert_eq!(details["continuity"]["result"], "continued");
    assert_eq!(details["receiverSession"], carried_id);
    let turns = details["carry"]["turns"]["turns"].as_array().unwrap();
    assert!(turns.iter().any(|t| t["role"] == "assistant"
        && t["provider"] == "claude"
        && t["model"].as_str().is_some_and(|m| !m.is_empty())));
    assert_eq!(
        rows.last().unwrap()["context"]["transcriptMessages"],
        carry["messages"]
    );
    let text = log_text(&sb);
    assert!(text.contains("continuity: continued"), "{text}");
    assert!(text.contains("carried user by claude"), "{text}");
    assert!(text.contains("carried assistant by claude/"), "{text}");
    assert!(text.contains("transcript ("), "{text}");
}

#[test]
fn a_codex_session_is_carried_to_claude_which_continues_it() {
    let sb = sandbox();
    let source = seed_codex(&sb);
    let before = std::fs::read(&source).unwrap();
    let run = continue_env(
        &sb,
        &[("CODEX_THREAD_ID", CODEX_SOURCE)],
        &["--from", "codex", "--to", "claude"],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["carry"]["mode"], "converted", "{:#}", r["carry"]);
    assert_eq!(r["carry"]["source"]["found"], "environment");
    let id = r["carry"]["sessionId"].as_str().unwrap().to_owned();
    let written = home(&sb)
        .join(".claude/projects")
        .join(slug(&repo_path(&sb)))
        .join(format!("{id}.jsonl"));
    assert!(written.is_file(), "{}", written.display());
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert_eq!(std::fs::read(&source).unwrap(), before);
    let argv = r["receiver"]["argv"].as_array().unwrap();
    let at = argv.iter().position(|a| a == "--resume").expect("resumes");
    assert_eq!(argv[at + 1], id.as_str());
}

#[test]
fn claude_to_claude_in_the_same_worktree_is_a_native_fork() {
    let sb = sandbox();
    let source = seed_claude(&sb);
    let before = std::fs::read(&source).unwrap();
    let run = continue_(&sb, &["--from", "claude", "--to", "claude"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["carry"]["mode"], "native-fork", "{:#}", r["carry"]);
    assert_eq!(r["carry"]["fork"], true);
    let id = r["carry"]["sessionId"].as_str().unwrap();
    let argv = r["receiver"]["argv"].as_array().unwrap();
    let at = argv.iter().position(|a| a == "--resume").expect("resumes");
    assert_eq!(argv[at + 1], CLAUDE_SOURCE);
    assert!(argv.iter().any(|a| a == "--fork-session"), "{argv:?}");
    let sid = argv.iter().position(|a| a == "--session-id").unwrap();
    assert_eq!(argv[sid + 1], id);
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert_eq!(
        std::fs::read(&source).unwrap(),
        before,
        "the source is not touched"
    );
}

#[test]
fn a_dry_run_predicts_the_carry_and_writes_nothing() {
    let sb = sandbox();
    seed_claude(&sb);
    let codex_store = home(&sb).join(".codex");
    let run = continue_(&sb, &["--from", "claude", "--to", "codex", "--dry-run"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let carry = &run.json["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["fork"], false);
    assert!(carry["sessionId"].is_string());
    assert_eq!(carry["files"].as_array().unwrap().len(), 1);
    assert!(carry["bytes"].as_u64().unwrap() > 0);
    assert!(carry["reason"].is_null());
    assert!(run.json["continuity"].is_null());
    assert!(
        files_under(&codex_store.join("sessions")).is_empty(),
        "nothing is written in a dry run"
    );
    assert!(!PathBuf::from(carry["recap"]["path"].as_str().unwrap()).exists());

    // Without a session to carry, the dry run says why.
    let sb = sandbox();
    let run = continue_(&sb, &["--from", "claude", "--to", "codex", "--dry-run"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(
        run.stderr.contains("cannot carry the conversation"),
        "{}",
        run.stderr
    );
    let run = continue_(
        &sb,
        &[
            "--from",
            "claude",
            "--to",
            "codex",
            "--dry-run",
            "--fallback",
            "fresh-agent",
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["carry"]["carried"], false);
    assert!(
        run.json["carry"]["reason"]
            .as_str()
            .unwrap()
            .contains("no claude session"),
        "{:#}",
        run.json["carry"]
    );
}

#[test]
fn without_a_session_the_handoff_is_refused_unless_a_fresh_agent_is_asked_for() {
    let sb = sandbox();
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    let run = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert_eq!(run.json["outcome"], "rejected");
    assert!(
        run.stderr.contains("--fallback fresh-agent"),
        "{}",
        run.stderr
    );
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head);

    let run = continue_(
        &sb,
        &[
            "--from",
            "claude",
            "--to",
            "codex",
            "--fallback",
            "fresh-agent",
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["continuity"]["result"], "fresh-agent");
    assert_eq!(run.json["carry"]["carried"], false);
    assert!(run.json["carry"]["recap"].is_null(), "nothing to recap");

    // A named session that does not exist is an error, whatever the fallback.
    let run = continue_(
        &sb,
        &[
            "--to",
            "claude",
            "--session",
            "0b7b5e0e-0000-4000-8000-000000000000",
            "--fallback",
            "fresh-agent",
        ],
    );
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stderr.contains("--session"), "{}", run.stderr);
}

#[test]
fn a_receiver_that_starts_a_new_session_did_not_continue() {
    let sb = sandbox();
    seed_claude(&sb);
    let run = continue_env(
        &sb,
        &[("FAKE_AGENT_RECEIVER_FRESH", "1")],
        &["--from", "claude", "--to", "codex"],
    );
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.json["outcome"], "not-continued");
    let c = &run.json["continuity"];
    assert_eq!(c["result"], "not-continued", "{c:#}");
    assert_eq!(c["checks"]["sessionResumed"], false);
    assert!(
        c["next"].as_str().unwrap().contains("stays with claude"),
        "{c:#}"
    );
    let log = log_json(&sb);
    assert_eq!(log["task"]["agent"]["provider"], "claude", "the task stays");
}

#[test]
fn a_receiver_still_starting_after_the_ready_timeout_is_inconclusive() {
    let sb = sandbox();
    seed_claude(&sb);
    let run = continue_env(
        &sb,
        &[("FAKE_AGENT_RECEIVER_DELAY_MS", "20000")],
        &["--from", "claude", "--to", "codex", "--ready-timeout", "1"],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let c = &run.json["continuity"];
    assert_eq!(c["result"], "inconclusive", "{c:#}");
    assert!(c["reason"].as_str().unwrap().contains("after 1 s"), "{c:#}");
    assert!(
        c["next"].as_str().unwrap().contains("--ready-timeout"),
        "{c:#}"
    );
    assert_eq!(
        log_json(&sb)["task"]["agent"]["provider"],
        "claude",
        "a receiver stopped before it resumed anything has not taken the task"
    );
}

/// Carries the seeded Claude session to Codex; once the carried copy exists (the receiver
/// still starting), `change` is applied to the source session. Fails when it never ran.
fn carry_while_the_source_changes(
    sb: &Sandbox,
    source: &Path,
    change: impl FnOnce(&Path) + Send + 'static,
) -> Run {
    let codex_sessions = home(sb).join(".codex/sessions");
    let source = source.to_owned();
    let watcher = std::thread::spawn(move || {
        for _ in 0..400 {
            if !files_under(&codex_sessions).is_empty() {
                change(&source);
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        false
    });
    let run = continue_env(
        sb,
        &[("FAKE_AGENT_RECEIVER_DELAY_MS", "1500")],
        &["--from", "claude", "--to", "codex"],
    );
    assert!(watcher.join().unwrap(), "the carried copy appeared");
    run
}

#[test]
fn a_source_edited_while_it_is_carried_fails_original_appended() {
    let sb = sandbox();
    let source = seed_claude(&sb);
    let run = carry_while_the_source_changes(&sb, &source, |source| {
        // Rewrite what the source already held.
        let text = std::fs::read_to_string(source).unwrap();
        std::fs::write(source, text.replace("Create notes.txt", "Delete notes.txt")).unwrap();
    });
    assert_eq!(run.code, 1, "{run:#?}");
    let c = &run.json["continuity"];
    assert_eq!(c["result"], "not-continued", "{c:#}");
    assert_eq!(c["checks"]["originalAppended"], false);
    assert!(
        c["reason"]
            .as_str()
            .unwrap()
            .contains("changed while it was carried")
    );
    let text = log_text(&sb);
    assert!(text.contains("continuity: not-continued"), "{text}");
}

#[test]
fn a_source_that_only_grew_still_counts_as_continued() {
    let sb = sandbox();
    let source = seed_claude(&sb);
    let run = carry_while_the_source_changes(&sb, &source, |source| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(source)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"type\":\"last-prompt\",\"lastPrompt\":\"x\"}\n")
            .unwrap();
    });
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["continuity"]["checks"]["originalAppended"], true);
    assert_eq!(run.json["continuity"]["result"], "continued");
}

#[test]
fn the_probe_answer_is_compared_with_the_note() {
    for (answer, matched) in [
        (
            "I was finishing the parser in src/lib.rs; the notes file exists already.",
            true,
        ),
        ("I was writing a poem about the weather in Paris.", false),
    ] {
        let sb = sandbox();
        seed_claude(&sb);
        let run = continue_env(
            &sb,
            &[("FAKE_AGENT_PROBE_ANSWER", answer)],
            &["--from", "claude", "--to", "codex", "--probe"],
        );
        assert_eq!(run.code, 0, "{run:#?}");
        let c = &run.json["continuity"];
        assert_eq!(c["result"], "continued", "the store decides: {c:#}");
        let probe = &c["probe"];
        assert_eq!(
            probe["question"],
            "What were you last working on? Answer in one or two sentences."
        );
        assert_eq!(probe["answer"], answer);
        assert_eq!(probe["comparison"]["matched"], matched, "{probe:#}");
        let text = log_text(&sb);
        let want = if matched {
            "probe matched"
        } else {
            "probe did not match"
        };
        assert!(text.contains(want), "{text}");
    }
}

#[test]
fn secrets_are_masked_in_what_is_carried() {
    let sb = sandbox();
    let source = seed_claude(&sb);
    let secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";
    let text = std::fs::read_to_string(&source).unwrap().replace(
        "Create notes.txt with one line.",
        &format!("Use the key {secret} to create notes.txt."),
    );
    std::fs::write(&source, text).unwrap();
    let run = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let carry = &run.json["carry"];
    assert!(
        carry["secretsMasked"].as_u64().unwrap() >= 2,
        "transcript and recap: {carry:#}"
    );
    for f in carry["files"].as_array().unwrap() {
        let written = std::fs::read_to_string(f.as_str().unwrap()).unwrap();
        assert!(
            !written.contains(secret),
            "the carried session holds no secret"
        );
    }
    let recap = std::fs::read_to_string(carry["recap"]["path"].as_str().unwrap()).unwrap();
    assert!(!recap.contains(secret));
    assert!(!run.stdout.contains(secret));
}

#[test]
fn a_corrupted_source_is_refused_and_a_truncated_one_is_carried_with_a_warning() {
    let sb = sandbox();
    let source = seed_claude(&sb);
    std::fs::write(&source, "not json at all\n\u{0}\u{1}garbage\n").unwrap();
    let before = std::fs::read(&source).unwrap();
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    // Not even recognised as a session of this worktree.
    let run = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stderr.contains("no claude session"), "{}", run.stderr);
    // Named, it is found and refused as unreadable.
    let run = continue_(
        &sb,
        &[
            "--from",
            "claude",
            "--to",
            "codex",
            "--session",
            CLAUDE_SOURCE,
        ],
    );
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(
        run.stderr.contains("not a readable session"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read(&source).unwrap(), before);
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head);

    let sb = sandbox();
    let source = seed_claude(&sb);
    let text = std::fs::read_to_string(&source).unwrap();
    let cut = &text[..text.len() - 40];
    std::fs::write(&source, cut).unwrap();
    let run = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let warnings = run.json["carry"]["warnings"].as_array().unwrap();
    assert!(!warnings.is_empty(), "{:#}", run.json["carry"]);
    assert_eq!(std::fs::read_to_string(&source).unwrap(), cut);
}

#[test]
fn an_earlier_carried_copy_is_replaced_only_when_the_new_one_holds_all_of_it() {
    let sb = sandbox();
    seed_claude(&sb);
    // First attempt: the receiver starts elsewhere; the carried copy stays as written.
    let first = continue_env(
        &sb,
        &[("FAKE_AGENT_RECEIVER_FRESH", "1")],
        &["--from", "claude", "--to", "codex"],
    );
    assert_eq!(first.code, 1, "{first:#?}");
    let first_id = first.json["carry"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let first_file = PathBuf::from(first.json["carry"]["files"][0].as_str().unwrap());
    assert!(first_file.is_file());
    // Second: it holds everything the first copy did, so the first is replaced.
    let second = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(second.code, 0, "{second:#?}");
    assert_eq!(second.json["carry"]["replaced"], first_id.as_str());
    assert!(!first_file.exists());

    // A copy the receiver worked in holds turns the source doesn't: it is kept.
    let sb = sandbox();
    seed_claude(&sb);
    let first = continue_env(
        &sb,
        &[("FAKE_AGENT_RECEIVER_FRESH", "1")],
        &["--from", "claude", "--to", "codex"],
    );
    let first_file = PathBuf::from(first.json["carry"]["files"][0].as_str().unwrap());
    let id = first.json["carry"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    // Someone resumed the copy by hand and worked in it.
    let out = Command::new(sb.agents.bin("codex"))
        .env_clear()
        .env("HOME", home(&sb))
        .env("PATH", sb.agents.path_env())
        .current_dir(sb.repo.path())
        .args(["exec", "resume", &id, "--json", "keep going"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let held = std::fs::read(&first_file).unwrap();
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    let second = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(second.code, 1, "{second:#?}");
    assert_eq!(second.json["outcome"], "not-continued");
    assert!(
        second.json["continuity"]["reason"]
            .as_str()
            .unwrap()
            .contains("holds turns the source doesn't"),
        "{:#}",
        second.json["continuity"]
    );
    assert_eq!(std::fs::read(&first_file).unwrap(), held, "kept as it was");
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head, "nothing changed");
}

#[test]
fn a_chain_carries_each_receivers_session_to_the_next() {
    let sb = sandbox();
    seed_claude(&sb);
    let first = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    assert_eq!(first.code, 0, "{first:#?}");
    let codex_session = first.json["carry"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    // Back to Claude: the source is the session Codex worked in, found through the timeline.
    let second = continue_(&sb, &["--to", "claude"]);
    assert_eq!(second.code, 0, "{second:#?}");
    let carry = &second.json["carry"];
    assert_eq!(carry["source"]["provider"], "codex", "{carry:#}");
    assert_eq!(carry["source"]["sessionId"], codex_session.as_str());
    assert_eq!(carry["source"]["found"], "timeline");
    assert!(
        carry["messages"].as_u64().unwrap() > first.json["carry"]["messages"].as_u64().unwrap(),
        "the Codex turn is carried too"
    );
    assert_eq!(second.json["continuity"]["result"], "continued");
}

#[test]
fn a_new_thread_gets_a_copy_re_rooted_at_its_worktree() {
    let sb = sandbox();
    let source = seed_claude(&sb);
    let before = std::fs::read(&source).unwrap();
    let run = continue_(&sb, &["--from", "claude", "--to", "claude", "--new-thread"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["carry"]["mode"], "native-copy", "{:#}", r["carry"]);
    let worktree = r["worktree"]["path"].as_str().unwrap();
    let id = r["carry"]["sessionId"].as_str().unwrap();
    let copy = home(&sb)
        .join(".claude/projects")
        .join(slug(worktree))
        .join(format!("{id}.jsonl"));
    assert!(copy.is_file(), "{}", copy.display());
    let text = std::fs::read_to_string(&copy).unwrap();
    for line in text.lines().filter(|l| l.contains("\"cwd\"")) {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["cwd"], worktree, "every cwd is re-rooted: {line}");
        assert_eq!(v["sessionId"], id);
    }
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert_eq!(std::fs::read(&source).unwrap(), before);
}

#[test]
fn a_receiver_too_old_to_resume_is_refused_before_anything_is_sent() {
    let sb = sandbox();
    seed_claude(&sb);
    sb.agents.set("HANDOFF_FAKE_VERSION", "1.0.3");
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    let run = continue_(&sb, &["--from", "claude", "--to", "claude"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(
        run.stderr.contains("2.0.0"),
        "names the minimum: {}",
        run.stderr
    );
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head);
    let prompted = sb.agents.invocations().iter().any(|i| {
        i["stdin"]
            .as_str()
            .is_some_and(|s| s.contains("handed this task over to you"))
    });
    assert!(!prompted, "no receiver was given the task");
}

#[test]
fn a_session_given_as_a_file_is_copied_not_forked() {
    let sb = sandbox();
    let stored = seed_claude(&sb);
    // A copy outside Claude Code's store (as another machine receives it).
    let file = sb.private.join(format!("{CLAUDE_SOURCE}.jsonl"));
    std::fs::copy(&stored, &file).unwrap();
    std::fs::remove_file(&stored).unwrap();
    let run = continue_(
        &sb,
        &[
            "--from",
            "claude",
            "--to",
            "claude",
            "--session",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let carry = &run.json["carry"];
    assert_eq!(carry["source"]["found"], "file", "{carry:#}");
    assert_eq!(carry["mode"], "native-copy", "{carry:#}");
    assert_eq!(run.json["continuity"]["result"], "continued");
    // A relative path is refused, even to a file that exists.
    let note = note_file(&sb);
    let cwd = repo_path(&sb);
    let run = sb.exec(
        sb.command()
            .current_dir(&sb.private)
            .args(["continue", "--cwd", &cwd, "--note-file", &note])
            .args(["--to", "codex", "--session"])
            .arg(format!("./{CLAUDE_SOURCE}.jsonl")),
    );
    assert!(sb.private.join(format!("{CLAUDE_SOURCE}.jsonl")).is_file());
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stderr.contains("absolute path"), "{}", run.stderr);
}
