//! `handoff continue` carrying a real CLI's conversation into another real CLI: the first
//! receiver's session (made by the real CLI) is the source of the next continuation, whose
//! receiver resumes it; the scripted model server's log shows the earlier turns in the resumed
//! request, and the continuity verdict comes from the receiver's own store.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use handoff_testkit::model_server::{Script, Step};
use serde_json::Value;

use super::Rig;

/// What the first agent's turn says: found again in the second agent's request.
pub(super) const FIRST_ANSWER: &str = "first-agent-marker-3c1e: the parser's first pass is done";
/// Only the first agent's prompt holds this: found again in the second agent's request.
pub(super) const FIRST_PROMPT: &str = "first-prompt-marker-51d9: start with the tokenizer";
/// What the second agent answers.
pub(super) const SECOND_ANSWER: &str = "second-agent-marker-8b77: continuing with the second pass";
/// Only the note's Current state and Next steps use these words.
const CURRENT: &str = "The tokenizer splits quoted fields; escaped quotes still break it.";
const NEXT: &str = "1. Fix escaped quotes in the tokenizer, then run the parser tests.";

const TURN_BUDGET: Duration = Duration::from_secs(240);

pub(super) fn rig() -> Rig {
    let rig = Rig::new("claude", Script::new([]));
    for (k, v) in [
        ("user.name", "handoff e2e"),
        ("user.email", "e2e@example.invalid"),
        ("commit.gpgsign", "false"),
    ] {
        rig.repo.git(&["config", k, v]);
    }
    rig.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n");
    rig.repo.commit_all("start");
    rig
}

fn note_file(rig: &Rig) -> PathBuf {
    let mut text = String::from("# Handoff note\n");
    for section in handoff_core::Section::ALL.map(handoff_core::Section::title) {
        let body = match section {
            "Current state" => CURRENT.to_owned(),
            "Next steps" => NEXT.to_owned(),
            "How to verify" => "- `cargo test`".to_owned(),
            s => format!("About {s}."),
        };
        text.push_str(&format!("\n## {section}\n\n{body}\n"));
    }
    let path = rig.root.join("private/note.md");
    std::fs::write(&path, text).unwrap();
    path
}

/// `handoff continue --cwd <repo> --note-file <note> <args…>`.
pub(super) fn continue_(rig: &Rig, args: &[&str]) -> (i32, Value) {
    let note = note_file(rig);
    let started = Instant::now();
    let out = rig
        .command()
        .arg("continue")
        .arg("--cwd")
        .arg(rig.repo.path())
        .arg("--note-file")
        .arg(&note)
        .args(["--timeout", &TURN_BUDGET.as_secs().to_string()])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let code = out.status.code().unwrap_or(-1);
    let json: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON line ({e}): {stdout}"));
    eprintln!(
        "[continue {args:?}] exit {code} in {:.1}s — {}",
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    (code, json)
}

/// The first handoff: `from` → `to` with nothing to carry (the receiver starts from the note);
/// its session, made by the real CLI, is what the next handoff carries.
pub(super) fn first_session(rig: &Rig, from: &str, to: &str) -> String {
    rig.server
        .set_script(Script::new([Step::text(FIRST_ANSWER)]));
    let (code, r) = continue_(
        rig,
        &[
            "--from",
            from,
            "--to",
            to,
            "--fallback",
            "fresh-agent",
            "--message",
            FIRST_PROMPT,
        ],
    );
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["continuity"]["result"], "fresh-agent", "{r:#}");
    r["receiver"]["sessionId"].as_str().unwrap().to_owned()
}

pub(super) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
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

/// The file of session `id` in the rig's stores of Claude Code, Codex, Copilot and Qwen, when
/// it has one (OpenCode keeps its sessions in a database).
fn find_session_file(rig: &Rig, id: &str) -> Option<PathBuf> {
    let mut all = files_under(&rig.root.join("home/.claude/projects"));
    all.extend(files_under(&rig.root.join("codex-home/sessions")));
    all.extend(files_under(&rig.root.join("home/.qwen/projects")));
    let copilot = rig
        .root
        .join("home/.copilot/session-state")
        .join(id)
        .join("events.jsonl");
    all.into_iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(&format!("{id}.jsonl")))
        })
        .or_else(|| copilot.is_file().then_some(copilot))
}

/// The file of session `id` in the rig's stores.
fn session_file(rig: &Rig, id: &str) -> PathBuf {
    find_session_file(rig, id).unwrap_or_else(|| panic!("no session file for {id}"))
}

/// The session file of a source `from` whose store handoff only reads here (Copilot's
/// `session-state/<id>/events.jsonl`, Gemini's `tmp/<slug>/chats/…-<id8>.jsonl`), to check it
/// is left as it was.
fn read_only_source(rig: &Rig, from: &str, id: &str) -> Option<PathBuf> {
    match from {
        "copilot" => Some(
            rig.root
                .join("home/.copilot/session-state")
                .join(id)
                .join("events.jsonl"),
        ),
        "gemini" => files_under(&rig.root.join("home/.gemini/tmp"))
            .into_iter()
            .find(|f| {
                f.to_string_lossy()
                    .ends_with(&format!("-{}.jsonl", &id[..8]))
            }),
        _ => find_session_file(rig, id),
    }
}

/// A conversation carried between two real CLIs (OpenCode and Copilot, Gemini or Qwen): the first
/// receiver's session (made by its real CLI from the note, in the user's store) is carried to
/// the other, which resumes it with the earlier turns in its request; the source is left as it
/// was.
pub(super) fn carried_between(from: &'static str, to: &'static str) {
    let rig = rig();
    let source = first_session(&rig, "claude", from);
    let source_file = read_only_source(&rig, from, &source);
    let before = source_file.as_ref().map(|f| std::fs::read(f).unwrap());
    rig.server.clear_log();
    rig.server
        .set_script(Script::new([Step::text(SECOND_ANSWER)]));
    let (code, r) = continue_(&rig, &["--to", to]);
    assert_eq!(code, 0, "{from}→{to}: {r:#}");
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["source"]["provider"], from);
    assert_eq!(carry["source"]["sessionId"], source.as_str());
    let carried = carry["sessionId"].as_str().unwrap();
    assert_eq!(r["receiver"]["sessionId"], carried, "{r:#}");
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{from}→{to}: {:#}",
        r["continuity"]
    );
    assert_eq!(r["receiver"]["lastMessage"], SECOND_ANSWER);
    let request = last_request(&rig);
    assert!(request.contains(FIRST_ANSWER), "{from}→{to}: {request}");
    assert!(request.contains(FIRST_PROMPT), "{from}→{to}: {request}");
    if let (Some(file), Some(before)) = (source_file, before) {
        assert_eq!(std::fs::read(file).unwrap(), before, "the source changed");
    }
}

/// The last model call's body, as text.
pub(super) fn last_request(rig: &Rig) -> String {
    rig.server
        .model_calls()
        .last()
        .map(|r| r.body.to_string())
        .unwrap_or_default()
}

fn carried_and_resumed(from: &'static str, to: &'static str) {
    let rig = rig();
    // A session made by the real `from` CLI.
    let source = first_session(
        &rig,
        if from == "claude" { "codex" } else { "claude" },
        from,
    );
    let source_file = session_file(&rig, &source);
    let before = std::fs::read(&source_file).unwrap();

    rig.server.clear_log();
    rig.server
        .set_script(Script::new([Step::text(SECOND_ANSWER)]));
    let (code, r) = continue_(&rig, &["--to", to]);
    assert_eq!(code, 0, "{from}→{to}: {r:#}");
    let carry = &r["carry"];
    assert_eq!(carry["carried"], true, "{carry:#}");
    assert_eq!(carry["mode"], "converted");
    assert_eq!(carry["source"]["provider"], from);
    assert_eq!(carry["source"]["sessionId"], source.as_str());
    assert_eq!(carry["source"]["found"], "timeline");
    let carried = carry["sessionId"].as_str().unwrap();
    assert_eq!(r["receiver"]["sessionId"], carried, "{r:#}");
    let c = &r["continuity"];
    assert_eq!(c["result"], "continued", "{from}→{to}: {c:#}");
    assert_eq!(c["checks"]["originalAppended"], true);
    assert_eq!(r["receiver"]["lastMessage"], SECOND_ANSWER);
    // The resumed request holds the earlier user turn and the earlier answer.
    let request = last_request(&rig);
    assert!(
        request.contains(FIRST_ANSWER),
        "{from}→{to}: the earlier answer is not in the resumed request"
    );
    assert!(
        request.contains(FIRST_PROMPT),
        "{from}→{to}: the earlier prompt is not in the resumed request"
    );
    assert_eq!(
        std::fs::read(&source_file).unwrap(),
        before,
        "the source session is untouched"
    );
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn carry_claude_to_codex_is_resumed_with_the_earlier_turns() {
    carried_and_resumed("claude", "codex");
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn carry_codex_to_claude_is_resumed_with_the_earlier_turns() {
    carried_and_resumed("codex", "claude");
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn carry_claude_to_claude_is_a_native_fork() {
    let rig = rig();
    let source = first_session(&rig, "codex", "claude");
    let source_file = session_file(&rig, &source);
    let before = std::fs::read(&source_file).unwrap();
    rig.server.clear_log();
    rig.server
        .set_script(Script::new([Step::text(SECOND_ANSWER)]));
    let (code, r) = continue_(&rig, &["--to", "claude"]);
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["carry"]["mode"], "native-fork", "{:#}", r["carry"]);
    let fork = r["carry"]["sessionId"].as_str().unwrap();
    assert_ne!(fork, source);
    assert_eq!(r["receiver"]["sessionId"], fork);
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert!(last_request(&rig).contains(FIRST_ANSWER));
    assert_eq!(std::fs::read(&source_file).unwrap(), before);
    assert!(session_file(&rig, fork).is_file());
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn carry_probe_answers_are_compared_with_the_note() {
    for (answer, matched) in [
        (
            "I was fixing escaped quotes in the tokenizer so the parser tests pass.",
            true,
        ),
        ("I was planting tomatoes in the garden.", false),
    ] {
        let rig = rig();
        first_session(&rig, "claude", "codex");
        // The probe's conversation holds the question; the first turn's does not.
        rig.server.set_script(Script::route(
            [(handoff_core::PROBE_QUESTION, Script::text(answer))],
            Script::new([Step::text(SECOND_ANSWER)]),
        ));
        let (code, r) = continue_(&rig, &["--to", "claude", "--probe"]);
        assert_eq!(code, 0, "{r:#}");
        let c = &r["continuity"];
        assert_eq!(c["result"], "continued", "{c:#}");
        assert_eq!(c["probe"]["answer"], answer, "{c:#}");
        assert_eq!(c["probe"]["comparison"]["matched"], matched, "{c:#}");
    }
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn carry_a_source_edited_mid_carry_is_not_continued() {
    let rig = rig();
    let source = first_session(&rig, "codex", "claude");
    let source_file = session_file(&rig, &source);
    let codex_sessions = rig.root.join("codex-home/sessions");
    let already = files_under(&codex_sessions);
    rig.server
        .set_script(Script::new([Step::text(SECOND_ANSWER)]));
    let editor = std::thread::spawn(move || {
        let deadline = Instant::now() + TURN_BUDGET;
        while Instant::now() < deadline {
            if files_under(&codex_sessions).len() > already.len() {
                let text = std::fs::read_to_string(&source_file).unwrap();
                std::fs::write(&source_file, text.replace(FIRST_ANSWER, "rewritten")).unwrap();
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    });
    let (code, r) = continue_(&rig, &["--to", "codex"]);
    assert!(editor.join().unwrap(), "the carried session appeared");
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["outcome"], "not-continued");
    assert_eq!(
        r["continuity"]["checks"]["originalAppended"], false,
        "{r:#}"
    );
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn carry_claude_to_opencode_is_imported_and_resumed() {
    carried_and_resumed("claude", "opencode");
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn carry_opencode_to_opencode_is_a_copy_with_fresh_ids() {
    let rig = rig();
    let source = first_session(&rig, "claude", "opencode");
    rig.server.clear_log();
    rig.server
        .set_script(Script::new([Step::text(SECOND_ANSWER)]));
    let (code, r) = continue_(&rig, &["--to", "opencode"]);
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["carry"]["mode"], "native-copy", "{:#}", r["carry"]);
    let copy = r["carry"]["sessionId"].as_str().unwrap();
    assert_ne!(copy, source);
    assert_eq!(r["receiver"]["sessionId"], copy);
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    let request = last_request(&rig);
    assert!(request.contains(FIRST_ANSWER) && request.contains(FIRST_PROMPT));
}
