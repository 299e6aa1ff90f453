//! `handoff continue` on scratch repositories: the fake agents stand in for the receivers, the
//! task store lives in the sandbox's HOME.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::note::SECTIONS;
use crate::support::{Run, Sandbox};

pub fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    for (k, v) in [
        ("user.name", "handoff test"),
        ("user.email", "test@example.invalid"),
        ("commit.gpgsign", "false"),
    ] {
        sb.repo.git(&["config", k, v]);
    }
    // Files the receivers overwrite, tracked so their work is part of the next checkpoint.
    sb.repo.write("fake-receiver-claude.txt", "\n");
    sb.repo.write("fake-receiver-codex.txt", "\n");
    sb.repo.write("fake-receiver-opencode.txt", "\n");
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n");
    sb.repo.commit_all("receiver files");
    sb
}

/// A complete note, written in the sandbox's private directory (outside the repository).
pub fn note_file(sb: &Sandbox, name: &str, sections: &[&str]) -> String {
    let mut text = String::from("# Handoff note\n");
    for section in sections {
        let body = match *section {
            "How to verify" => "- `cargo test`".to_owned(),
            "Next steps" => "1. Finish `src/lib.rs`.".to_owned(),
            s => format!("About {s}."),
        };
        text.push_str(&format!("\n## {section}\n\n{body}\n"));
    }
    let path = sb.private.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

pub fn continue_(sb: &Sandbox, args: &[&str]) -> Run {
    let note = note_file(sb, "note.md", &SECTIONS);
    let cwd = sb.cwd();
    let mut all = vec![
        "continue",
        "--cwd",
        cwd.as_str(),
        "--note-file",
        note.as_str(),
        "--fallback",
        "fresh-agent",
    ];
    all.extend(args);
    let run = sb.run(&all);
    // Every outcome prints one line of the documented shape.
    assert_eq!(run.stdout.lines().count(), 1, "{run:#?}");
    let parsed: handoff_core::ContinueResult = serde_json::from_value(run.json.clone())
        .unwrap_or_else(|e| panic!("not a handoff.continue.v1 result: {e}: {run:#?}"));
    assert_eq!(i32::from(parsed.exit_code), run.code);
    run
}

fn head(sb: &Sandbox) -> String {
    sb.repo.git(&["rev-parse", "HEAD"]).trim().to_owned()
}

fn log_json(sb: &Sandbox) -> Value {
    let cwd = sb.cwd();
    let run = sb.run(&["log", "--cwd", cwd.as_str(), "--json"]);
    assert_eq!(run.code, 0, "{run:#?}");
    run.json
}

fn kinds(log: &Value) -> Vec<String> {
    log["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"]["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs the printed resume command (through `sh`, as a person would paste it) with the
/// sandbox's PATH and HOME.
fn resume(sb: &Sandbox, result: &Value) -> std::process::Output {
    let shell = result["receiver"]["resume"]["shell"].as_str().unwrap();
    Command::new("/bin/sh")
        .arg("-c")
        .arg(shell)
        .env_clear()
        .env("PATH", sb.agents.path_env())
        .env("HOME", sb.root.join("home"))
        .output()
        .unwrap()
}

/// Every file of the worktree (outside `.git`) with its bytes, plus the index, HEAD and status.
fn worktree_state(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_owned();
            if rel == Path::new(".git") {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                walk(&p, root, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    for f in ["index", "HEAD"] {
        out.insert(
            PathBuf::from(format!(".git/{f}")),
            std::fs::read(dir.join(".git").join(f)).unwrap_or_default(),
        );
    }
    let status = Command::new("git")
        .args([
            "--no-optional-locks",
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
        ])
        .current_dir(dir)
        .output()
        .unwrap()
        .stdout;
    out.insert(PathBuf::from("<status>"), status);
    out
}

/// Whether any agent was started with a receiver's first prompt.
fn receiver_ran(sb: &Sandbox) -> bool {
    sb.agents.invocations().iter().any(|i| {
        i["stdin"]
            .as_str()
            .is_some_and(|s| s.contains("handed this task over to you"))
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_task_goes_from_claude_to_codex_and_back() {
    let sb = sandbox();
    sb.record();
    // Claude's work so far: a tracked change and an untracked file.
    sb.repo.write(
        "src/lib.rs",
        "pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    2\n}\n",
    );
    sb.repo.write("scratch.txt", "not for the commit\n");
    let start = head(&sb);

    let run = continue_(
        &sb,
        &[
            "--from",
            "claude",
            "--from-model",
            "opus",
            "--to",
            "codex",
            "--message",
            "finish two()",
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["schemaVersion"], "handoff.continue.v1");
    assert_eq!(r["outcome"], "started", "{r:#}");
    assert_eq!(r["route"], "same-thread");
    assert_eq!(r["source"]["provider"], "claude");
    assert_eq!(r["target"]["provider"], "codex");
    assert_eq!(strings(&r["checkpoint"]["committed"]), ["src/lib.rs"]);
    assert_eq!(strings(&r["checkpoint"]["uncommitted"]), ["scratch.txt"]);
    let first = r["checkpoint"]["commit"].as_str().unwrap().to_owned();
    assert_ne!(first, start);
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD~1"]).trim(), start);
    assert_eq!(
        r["message"],
        serde_json::json!({"text": "finish two()", "sent": true})
    );
    // The note is outside the repository, rendered, and what the receiver was given.
    let note = PathBuf::from(r["note"]["path"].as_str().unwrap());
    assert!(!note.starts_with(sb.repo.path()), "{note:?}");
    let note_text = std::fs::read_to_string(&note).unwrap();
    assert!(
        note_text.contains(&first),
        "the note records the checkpoint as head"
    );
    assert!(note_text.contains("Receiver instructions"));
    // The receiver: a persisted session whose printed resume command works.
    let session = r["receiver"]["sessionId"].as_str().unwrap().to_owned();
    let argv = strings(&r["receiver"]["argv"]);
    assert!(!argv.iter().any(|a| a == "--ephemeral"), "{argv:?}");
    let out = resume(&sb, r);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(&format!("resumed {session}")),
        "{out:?}"
    );
    let receiver_file =
        std::fs::read_to_string(sb.repo.path().join("fake-receiver-codex.txt")).unwrap();
    assert!(receiver_file.contains("codex"), "{receiver_file}");
    let codex_run = sb
        .agents
        .invocations()
        .into_iter()
        .rev()
        .find(|i| i["exe"] == "codex" && i["stdin"].is_string())
        .unwrap();
    let stdin = codex_run["stdin"].as_str().unwrap();
    assert!(
        stdin.contains("claude (opus) handed this task over to you"),
        "{stdin}"
    );
    assert!(stdin.contains("finish two()") && stdin.contains("## Next steps"));

    // Back to Claude: no --from, the task says who has it.
    let run = continue_(&sb, &["--to", "claude", "--role", "implement"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r2 = &run.json;
    assert_eq!(r2["source"]["provider"], "codex");
    assert_eq!(r2["taskId"], r["taskId"]);
    assert_eq!(
        strings(&r2["checkpoint"]["committed"]),
        ["fake-receiver-codex.txt"]
    );
    let out = resume(&sb, r2);
    assert!(out.status.success(), "{out:?}");

    // The timeline: checkpoint, handoff, turn — twice; the task is Claude's again.
    let log = log_json(&sb);
    assert_eq!(
        kinds(&log),
        [
            "checkpoint",
            "handoff",
            "turn",
            "checkpoint",
            "handoff",
            "turn"
        ],
        "{log:#}"
    );
    assert_eq!(log["task"]["agent"]["provider"], "claude");
    let handoffs: Vec<&Value> = log["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["kind"] == "handoff")
        .collect();
    assert_eq!(handoffs[0]["event"]["source"]["provider"], "claude");
    assert_eq!(handoffs[0]["event"]["target"]["provider"], "codex");
    assert_eq!(handoffs[0]["event"]["outcome"]["state"], "started");
    assert_eq!(
        handoffs[0]["event"]["context"]["details"]["checkpoint"],
        first
    );
    assert_eq!(handoffs[1]["event"]["source"]["provider"], "codex");
    let text = sb.run(&["log", "--cwd", sb.cwd().as_str()]);
    assert!(text.stdout.contains("claude"), "{text:#?}");

    // Attribution: Claude before the first handoff, Codex between them, Claude since.
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n");
    let attr = sb.run(&["attribute", "--cwd", sb.cwd().as_str(), "--json"]);
    assert_eq!(attr.code, 0, "{attr:#?}");
    let segments = attr.json["segments"].as_array().unwrap();
    let owners: Vec<&str> = segments
        .iter()
        .map(|s| s["provider"].as_str().unwrap())
        .collect();
    assert_eq!(owners, ["claude", "codex", "claude"], "{:#}", attr.json);
    let files = |i: usize| -> Vec<(String, u64, u64)> {
        segments[i]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["path"].as_str().unwrap().to_owned(),
                    f["added"].as_u64().unwrap(),
                    f["removed"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(files(0), [("src/lib.rs".to_owned(), 4, 0)]);
    assert_eq!(files(1), [("fake-receiver-codex.txt".to_owned(), 1, 1)]);
    let tail = files(2);
    assert!(tail.contains(&("src/lib.rs".to_owned(), 0, 4)), "{tail:?}");
    assert_eq!(segments[1]["from"], first.as_str());
}

#[test]
fn a_failing_receiver_leaves_the_task_with_its_provider() {
    let sb = sandbox();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    11\n}\n");
    sb.agents.set("HANDOFF_FAKE_MODE", "agent-error");
    let run = continue_(
        &sb,
        &["--from", "claude", "--to", "codex", "--message", "go on"],
    );
    assert_eq!(run.code, 1, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["outcome"], "not-started");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .starts_with("the receiver did not start"),
        "{r:#}"
    );
    assert_eq!(
        r["message"],
        serde_json::json!({"text": "go on", "sent": false})
    );
    assert_eq!(run.stderr.lines().count(), 1, "{run:#?}");
    let log = log_json(&sb);
    assert_eq!(log["task"]["agent"]["provider"], "claude");
    let handoff = log["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"]["kind"] == "handoff")
        .unwrap()
        .clone();
    assert_eq!(handoff["event"]["outcome"]["state"], "not-started");
    assert!(
        handoff["event"]["outcome"]["reason"]
            .as_str()
            .unwrap()
            .len()
            > 5
    );
}

#[test]
fn a_dry_run_plans_everything_and_changes_nothing() {
    let sb = sandbox();
    sb.record();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    111\n}\n");
    let before = worktree_state(sb.repo.path());
    let run = continue_(&sb, &["--from", "claude", "--to", "codex", "--dry-run"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["outcome"], "dry-run");
    assert_eq!(strings(&r["checkpoint"]["committed"]), ["src/lib.rs"]);
    assert!(r["checkpoint"]["commit"].is_null());
    assert_eq!(r["receiver"]["argv"][1], "exec", "{r:#}");
    assert!(r["handoffId"].is_null());
    assert_eq!(worktree_state(sb.repo.path()), before);
    assert!(
        !sb.agents.invocations().is_empty(),
        "the preflight probes were recorded"
    );
    assert!(!receiver_ran(&sb), "no receiver ran");
}

#[test]
fn a_destination_phrase_names_the_receiver_and_the_dry_run_shows_how_it_was_read() {
    let sb = sandbox();
    sb.record();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    3\n}\n");
    let before = worktree_state(sb.repo.path());
    let run = continue_(
        &sb,
        &[
            "Codex gpt-5 HIGH on this machine",
            "--from",
            "claude",
            "--dry-run",
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["outcome"], "dry-run");
    let d = &r["destination"];
    assert_eq!(d["phrase"], "Codex gpt-5 HIGH on this machine");
    assert_eq!(d["agent"], "codex");
    assert_eq!(d["model"], "gpt-5");
    assert_eq!(d["effort"], "high");
    assert_eq!(d["thisMachine"], true);
    assert!(d["on"].is_null());
    assert_eq!(r["target"]["provider"], "codex");
    assert_eq!(r["target"]["model"], "gpt-5");
    assert_eq!(r["target"]["effort"], "high");
    let argv = strings(&r["receiver"]["argv"]);
    assert!(argv.iter().any(|a| a == "gpt-5"), "{argv:?}");
    assert!(r["remote"].is_null());
    assert_eq!(worktree_state(sb.repo.path()), before);
    assert!(!receiver_ran(&sb));

    // Flags that say the same are taken; the flag's value is what runs.
    let run = continue_(
        &sb,
        &[
            "claude-code sonnet",
            "--to",
            "claude",
            "--model",
            "sonnet",
            "--from",
            "codex",
            "--dry-run",
        ],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["target"]["provider"], "claude");
    assert_eq!(run.json["destination"]["agent"], "claude");

    // Without a phrase, the result has no reading.
    let run = continue_(&sb, &["--from", "claude", "--to", "codex", "--dry-run"]);
    assert!(run.json["destination"].is_null(), "{run:#?}");
}

#[test]
fn a_destination_phrase_starts_the_receiver_it_names() {
    let sb = sandbox();
    sb.record();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    4\n}\n");
    let run = continue_(&sb, &["opencode", "--from", "claude"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["target"]["provider"], "opencode");
    assert_eq!(run.json["destination"]["agent"], "opencode");
    assert!(receiver_ran(&sb));
    assert_eq!(log_json(&sb)["task"]["agent"]["provider"], "opencode");
}

#[test]
fn a_destination_phrase_that_does_not_read_or_contradicts_a_flag_changes_nothing() {
    let sb = sandbox();
    sb.record();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    5\n}\n");
    let before = worktree_state(sb.repo.path());
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["codex hgih"], "'hgih' is close to the effort 'high'"),
        (
            vec!["codx"],
            "'codx' is not an agent (did you mean 'codex'?)",
        ),
        (vec!["codex gpt-5 on"], "'on' needs a machine"),
        (
            vec!["codex", "--to", "claude"],
            "the destination phrase says 'codex' but --to says 'claude'",
        ),
        (vec!["codex high", "--effort", "low"], "--effort says 'low'"),
        (vec!["codex here", "--on", "devbox"], "--on says 'devbox'"),
        (vec!["aider 2.5"], "'aider' is not an agent"),
    ];
    for (args, named) in cases {
        let mut all = args.clone();
        all.extend(["--from", "claude"]);
        let run = continue_(&sb, &all);
        assert_eq!(run.code, 5, "{args:?}: {run:#?}");
        assert_eq!(run.json["outcome"], "rejected", "{args:?}");
        let reason = run.json["reason"].as_str().unwrap();
        assert!(reason.contains(named), "{args:?}: {reason}");
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {run:#?}");
    }
    assert_eq!(worktree_state(sb.repo.path()), before);
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head);
    assert!(!receiver_ran(&sb));

    // Neither a phrase nor --to: a usage error that says how to name the receiver.
    let run = sb.run(&["continue", "--cwd", &sb.cwd(), "--note-file", "/dev/null"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("--to"), "{run:#?}");
}

#[test]
fn rejected_inputs_change_nothing() {
    let sb = sandbox();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    2\n}\n");
    let cwd = sb.cwd();
    let good = note_file(&sb, "good.md", &SECTIONS);
    let partial = note_file(&sb, "partial.md", &SECTIONS[..7]);
    let unreadable = sb.private.join("missing.md").to_string_lossy().into_owned();
    // A message file that would block a reader forever, and one that is a link.
    let fifo = sb.private.join("message.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let fifo = fifo.to_string_lossy().into_owned();
    let linked = sb.private.join("message.link");
    std::os::unix::fs::symlink(&good, &linked).unwrap();
    let linked = linked.to_string_lossy().into_owned();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "--to",
                "codex",
                "--from",
                "claude",
                "--note-file",
                &good,
                "--message-file",
                &fifo,
            ],
            "message.fifo is not a regular file",
        ),
        (
            vec![
                "--to",
                "codex",
                "--from",
                "claude",
                "--note-file",
                &good,
                "--message-file",
                &linked,
            ],
            "message.link is a symlink",
        ),
        (
            vec!["--to", "nope", "--from", "claude", "--note-file", &good],
            "--to \"nope\" is not a known agent",
        ),
        (
            vec!["--to", "codex", "--note-file", &good],
            "pass --from <provider>",
        ),
        (
            vec!["--to", "codex", "--from", "claude", "--note-file", &partial],
            "missing sections: How to verify, Git state",
        ),
        (
            vec![
                "--to",
                "codex",
                "--from",
                "claude",
                "--note-file",
                &unreadable,
            ],
            "missing.md",
        ),
        (
            vec![
                "--to",
                "codex",
                "--from",
                "claude",
                "--note-file",
                &good,
                "--push",
            ],
            "has no remote to push to",
        ),
        (
            vec!["--to", "grok", "--from", "claude", "--note-file", &good],
            "grok cannot receive a continuation: the grok CLI keeps no sessions",
        ),
        (
            vec![
                "--to",
                "codex",
                "--from",
                "claude",
                "--note-file",
                &good,
                "--effort",
                "extreme",
            ],
            "effort 'extreme'",
        ),
        (
            vec![
                "--to",
                "codex",
                "--from",
                "claude",
                "--note-file",
                &good,
                "--account",
                "work",
            ],
            "unknown account 'work'",
        ),
    ];
    let before = worktree_state(sb.repo.path());
    for (args, want) in cases {
        let mut all = vec!["continue", "--cwd", cwd.as_str()];
        all.extend(&args);
        let run = sb.run(&all);
        assert_eq!(run.code, 5, "{args:?}: {run:#?}");
        assert_eq!(run.json["outcome"], "rejected", "{args:?}");
        assert!(
            run.stderr.contains(want),
            "{args:?}: want {want:?} in {}",
            run.stderr
        );
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {run:#?}");
        assert_eq!(worktree_state(sb.repo.path()), before, "{args:?}");
    }
    // A receiver that is not installed.
    sb.agents.uninstall("codex");
    let run = continue_(&sb, &["--to", "codex", "--from", "claude"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stderr.contains("codex is not installed"), "{run:#?}");
    // A detached HEAD.
    sb.repo.git(&["checkout", "-q", "--detach"]);
    let before = worktree_state(sb.repo.path());
    let run = continue_(&sb, &["--to", "claude", "--from", "claude"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stderr.contains("HEAD is detached"), "{run:#?}");
    assert_eq!(worktree_state(sb.repo.path()), before);
    // Nothing was recorded either.
    let log = sb.run(&["log", "--cwd", cwd.as_str()]);
    assert_eq!(log.code, 5, "{log:#?}");
}

/// A sandbox for a `agent` receiver, recording the fake agents' runs. Kiro needs handoff's
/// own sandbox (the real bwrap) and a data directory, as a machine it is logged in on has.
fn receiving(agent: &str) -> Sandbox {
    let sb = sandbox();
    sb.record();
    if agent == "kiro" {
        sb.agents.uninstall("bwrap");
        std::fs::create_dir_all(sb.root.join("home/.local/share/kiro-cli")).unwrap();
    }
    sb
}

#[test]
fn kiro_receives_only_under_handoffs_own_sandbox() {
    // The sandbox's `bwrap` here is a stand-in that cannot sandbox anything.
    let sb = sandbox();
    sb.record();
    let before = worktree_state(sb.repo.path());
    let run = continue_(&sb, &["kiro", "--from", "claude"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(
        run.stderr
            .contains("kiro receives a continuation only under handoff's own sandbox"),
        "{run:#?}"
    );
    assert_eq!(worktree_state(sb.repo.path()), before);
    assert!(!receiver_ran(&sb));
}

/// Cursor and Kiro take a task over from the note and a recap (their stores can't be
/// written), keep the conversation their CLI resumes, and print the command that resumes it.
#[test]
fn cursor_and_kiro_receive_a_task_from_the_note_and_a_recap() {
    for (agent, exe) in [("cursor", "cursor-agent"), ("kiro", "kiro-cli")] {
        let sb = receiving(agent);
        sb.repo
            .write("src/lib.rs", "pub fn one() -> u32 {\n    8\n}\n");
        let note = note_file(&sb, "note.md", &SECTIONS);
        let cwd = sb.cwd();
        // Without --fallback fresh-agent: refused, nothing changed, the flag named.
        let head_before = head(&sb);
        let before = worktree_state(sb.repo.path());
        let run = sb.run(&[
            "continue",
            agent,
            "--from",
            "claude",
            "--cwd",
            &cwd,
            "--note-file",
            &note,
        ]);
        assert_eq!(run.code, 5, "{agent}: {run:#?}");
        let reason = run.json["reason"].as_str().unwrap();
        assert!(
            reason.contains("--fallback fresh-agent"),
            "{agent}: {reason}"
        );
        assert!(reason.contains(agent), "{agent}: {reason}");
        assert_eq!(worktree_state(sb.repo.path()), before, "{agent}");
        assert_eq!(head(&sb), head_before, "{agent}");
        assert!(!receiver_ran(&sb), "{agent}");

        // With it: started, continuity fresh-agent, the receiver's work in the worktree.
        let run = continue_(
            &sb,
            &[agent, "--from", "claude", "--message", "finish one()"],
        );
        assert_eq!(run.code, 0, "{agent}: {run:#?}");
        let r = &run.json;
        assert_eq!(r["outcome"], "started", "{agent}: {r:#}");
        assert_eq!(r["target"]["provider"], agent);
        assert_eq!(r["continuity"]["result"], "fresh-agent", "{agent}: {r:#}");
        assert_eq!(r["carry"]["carried"], false, "{agent}: {r:#}");
        // (Kiro's run is not recorded: its sandbox leaves the record directory read-only. The
        // file it wrote in the worktree shows it ran.)
        if agent == "cursor" {
            assert!(receiver_ran(&sb));
        }
        let written =
            std::fs::read_to_string(sb.repo.path().join(format!("fake-receiver-{exe}.txt")))
                .unwrap();
        assert!(written.contains(exe), "{written}");
        assert_eq!(log_json(&sb)["task"]["agent"]["provider"], agent);

        // The printed command resumes the receiver's own conversation, through `sh`.
        let shell = r["receiver"]["resume"]["shell"].as_str().unwrap();
        match agent {
            "cursor" => {
                let chat = r["receiver"]["sessionId"].as_str().unwrap();
                assert_eq!(
                    strings(&r["receiver"]["resume"]["argv"]),
                    ["cursor-agent".to_owned(), format!("--resume={chat}")]
                );
                assert!(shell.contains(chat), "{shell}");
            }
            _ => {
                assert!(r["receiver"]["sessionId"].is_null(), "{r:#}");
                assert!(shell.ends_with("kiro-cli chat --resume"), "{shell}");
            }
        }
        let out = resume(&sb, r);
        assert!(out.status.success(), "{agent}: {out:?}");
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            printed.contains(&format!("Continued the task as {exe}")),
            "{agent}: {printed}"
        );
    }
}

/// A Kiro receiver whose model runs a hostile shell: it may write the worktree (`implement`)
/// and keep its conversation, nothing else: not Kiro's configuration (which the next Kiro run
/// would load), not the user's files, not a git hook (which the next checkpoint would run).
#[test]
fn a_hostile_kiro_receiver_writes_only_the_worktree_and_its_conversations() {
    use crate::support::q;
    let sb = receiving("kiro");
    let home = sb.root.join("home");
    std::fs::create_dir_all(home.join(".kiro/settings")).unwrap();
    std::fs::create_dir_all(home.join(".kiro/sessions")).unwrap();
    let bashrc = home.join(".bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let wt = sb.repo.path().to_path_buf();
    let script = format!(
        "echo pwned >> {bashrc}; echo '{{}}' > {settings}; \
         printf '#!/bin/sh\\necho hook\\n' > {hook}; echo x > {outside}; \
         echo inside > {inside}; echo kept > {session}",
        bashrc = q(&bashrc),
        settings = q(&home.join(".kiro/settings/mcp.json")),
        hook = q(&wt.join(".git/hooks/pre-commit")),
        outside = q(&sb.root.join("outside.txt")),
        inside = q(&wt.join("inside.txt")),
        session = q(&home.join(".kiro/sessions/planted.json")),
    );
    sb.agents.set(handoff_testkit::keys::SHELL, &script);
    let run = continue_(&sb, &["kiro", "--from", "claude"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(
        run.json["receiver"]["policy"]["sandbox"]["enforcement"], "handoff",
        "{:#}",
        run.json
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert!(
        !home.join(".kiro/settings/mcp.json").exists(),
        "Kiro's configuration was planted"
    );
    assert!(
        !wt.join(".git/hooks/pre-commit").exists(),
        "a hook was planted"
    );
    assert!(
        !sb.root.join("outside.txt").exists(),
        "a file outside was written"
    );
    // Its conversations are writable: that is where Kiro keeps them.
    assert!(home.join(".kiro/sessions/planted.json").exists());
}

#[test]
fn a_cursor_receiver_is_probed_in_its_own_chat_and_a_kiro_one_cannot_be() {
    for agent in ["cursor", "kiro"] {
        let sb = receiving(agent);
        sb.repo
            .write("src/lib.rs", "pub fn one() -> u32 {\n    9\n}\n");
        sb.agents.set(
            "FAKE_AGENT_PROBE_ANSWER",
            "Finishing src/lib.rs, as the note says.",
        );
        let run = continue_(&sb, &[agent, "--from", "claude", "--probe"]);
        assert_eq!(run.code, 0, "{agent}: {run:#?}");
        let c = &run.json["continuity"];
        // No carried conversation: fresh-agent whatever the probe says.
        assert_eq!(c["result"], "fresh-agent", "{agent}: {c:#}");
        if agent == "cursor" {
            assert!(
                c["probe"]["answer"]
                    .as_str()
                    .is_some_and(|a| a.contains("Finishing src/lib.rs")),
                "{c:#}"
            );
        } else {
            assert!(c["probe"].is_null(), "{c:#}");
        }
    }
}

#[test]
fn cursor_and_kiro_review_receivers_leave_the_worktree_as_it_was() {
    for agent in ["cursor", "kiro"] {
        let sb = receiving(agent);
        let run = continue_(&sb, &[agent, "--from", "claude", "--role", "review"]);
        assert_eq!(run.code, 0, "{agent}: {run:#?}");
        assert_eq!(run.json["receiver"]["worktreeUnchanged"], true, "{agent}");
        let argv = strings(&run.json["receiver"]["argv"]);
        match agent {
            "cursor" => {
                assert!(!argv.iter().any(|a| a == "--force"), "{argv:?}");
                assert!(argv.iter().any(|a| a == "--readonly-paths"), "{argv:?}");
            }
            _ => assert!(
                argv.iter()
                    .any(|a| a == "--trust-tools=fs_read,execute_bash"),
                "{argv:?}"
            ),
        }
        // A review receiver that writes anyway: Cursor's is reported (exit 10), Kiro's is
        // stopped by handoff's sandbox, which keeps the worktree read-only.
        let sb = receiving(agent);
        sb.agents.set("HANDOFF_FAKE_MODE", "mutate");
        let before = worktree_state(sb.repo.path());
        let run = continue_(&sb, &[agent, "--from", "claude", "--role", "review"]);
        match agent {
            "cursor" => {
                assert_eq!(run.code, 10, "{run:#?}");
                assert_eq!(run.json["outcome"], "review-changed");
            }
            _ => {
                assert_ne!(run.code, 0, "{run:#?}");
                assert_eq!(worktree_state(sb.repo.path()), before);
            }
        }
    }
}

#[test]
fn a_new_thread_leaves_the_original_worktree_untouched() {
    let sb = sandbox();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    3\n}\n");
    sb.repo.write("untracked.txt", "u\n");
    sb.repo.git(&["add", "-N", "untracked.txt"]);
    sb.repo.git(&["reset", "-q", "untracked.txt"]);
    let before = worktree_state(sb.repo.path());
    let branch_before = sb.repo.git(&["rev-parse", "main"]);
    let run = continue_(&sb, &["--from", "claude", "--to", "codex", "--new-thread"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["route"], "new-thread");
    assert_eq!(worktree_state(sb.repo.path()), before);
    assert_eq!(sb.repo.git(&["rev-parse", "main"]), branch_before);
    let wt = PathBuf::from(r["worktree"]["path"].as_str().unwrap());
    assert!(r["worktree"]["created"].as_bool().unwrap());
    assert_ne!(wt, sb.repo.path());
    assert_eq!(
        std::fs::read_to_string(wt.join("src/lib.rs")).unwrap(),
        "pub fn one() -> u32 {\n    3\n}\n"
    );
    assert!(
        std::fs::read_to_string(wt.join("fake-receiver-codex.txt"))
            .unwrap()
            .contains("codex")
    );
    assert_ne!(r["taskId"], r["parentTaskId"]);
    assert!(r["parentTaskId"].is_string());
    let out = resume(&sb, r);
    assert!(out.status.success(), "{out:?}");
    let _ = std::fs::remove_dir_all(&wt);
}

#[test]
fn a_review_receiver_must_not_change_the_worktree() {
    let sb = sandbox();
    let run = continue_(
        &sb,
        &["--from", "claude", "--to", "codex", "--role", "review"],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["receiver"]["worktreeUnchanged"], true);
    assert!(run.json["checkpoint"]["created"] == false);

    sb.agents.set("HANDOFF_FAKE_MODE", "mutate");
    let run = continue_(&sb, &["--to", "claude", "--role", "review"]);
    assert_eq!(run.code, 10, "{run:#?}");
    assert_eq!(run.json["outcome"], "review-changed");
    assert_eq!(run.json["receiver"]["worktreeUnchanged"], false);
    assert!(
        !run.json["receiver"]["changed"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn push_sends_the_checkpoint_to_the_branch_on_the_remote() {
    let sb = sandbox();
    let remote = sb.root.join("remote.git");
    let status = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&remote)
        .status()
        .unwrap();
    assert!(status.success());
    sb.repo
        .git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    4\n}\n");
    let run = continue_(
        &sb,
        &["--from", "claude", "--to", "codex", "--push", "--note-only"],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["outcome"], "note-written");
    assert_eq!(run.json["push"]["pushed"], true);
    let pushed = Command::new("git")
        .args(["rev-parse", "refs/heads/main"])
        .current_dir(&remote)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&pushed.stdout).trim(),
        run.json["checkpoint"]["commit"].as_str().unwrap()
    );
    assert!(run.json["receiver"].is_null());
}

#[test]
fn an_agent_working_in_the_worktree_holds_the_handoff() {
    let sb = sandbox();
    sb.agents.set("HANDOFF_FAKE_MODE", "hang");
    let ready = sb.root.join("ready");
    sb.agents.set("HANDOFF_FAKE_READY_FILE", &ready);
    let mut agent = Command::new(sb.agents.bin("claude"))
        .args(["-p", "work"])
        .current_dir(sb.repo.path().join("src"))
        .env("HOME", sb.root.join("home"))
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    sb.agents.set("HANDOFF_FAKE_MODE", "success");
    let run = continue_(&sb, &["--from", "claude", "--to", "codex", "--dry-run"]);
    let _ = agent.kill();
    let _ = agent.wait();
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(
        run.stderr
            .contains(&format!("claude (pid {}) is working in", agent.id())),
        "{run:#?}"
    );
    let run = continue_(&sb, &["--from", "claude", "--to", "codex", "--dry-run"]);
    assert_eq!(run.code, 0, "{run:#?}");
}

#[test]
fn concurrent_handoffs_share_one_store() {
    let sb = sandbox();
    let repos: Vec<handoff_testkit::ScratchRepo> = (0..6)
        .map(|i| {
            let r = handoff_testkit::ScratchRepo::new();
            r.git(&["config", "user.name", "t"]);
            r.git(&["config", "user.email", "t@example.invalid"]);
            r.write("f.txt", &format!("{i}\n"));
            r
        })
        .collect();
    let note = note_file(&sb, "shared.md", &SECTIONS);
    let children: Vec<std::process::Child> = repos
        .iter()
        .map(|r| {
            let mut c = sb.command();
            c.args([
                "continue",
                "--note-only",
                "--from",
                "claude",
                "--to",
                "codex",
            ])
            .arg("--cwd")
            .arg(r.path())
            .args(["--note-file", &note])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let store = handoff_store::SqliteStore::open(
        sb.root
            .join("home/.local/state/handoff/tasks.sqlite3")
            .to_str()
            .unwrap(),
    )
    .unwrap();
    assert!(store.integrity_problems().unwrap().is_empty());
    use handoff_core::TaskStore as _;
    let tasks = store.tasks(None).unwrap();
    assert_eq!(tasks.len(), 6);
    for t in tasks {
        let kinds: Vec<&str> = store
            .timeline(&t.id)
            .unwrap()
            .iter()
            .map(|e| e.event.kind())
            .collect();
        assert_eq!(kinds, ["checkpoint", "handoff"]);
    }
}

#[test]
fn delegated_runs_are_recorded_in_the_worktrees_task() {
    let sb = sandbox();
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.code, 0, "{run:#?}");
    let run_id = run.json["lineage"]["runId"].as_str().unwrap().to_owned();
    // A rejected run is not recorded.
    let rejected = sb.delegate("claude", "codex", "build", &["--effort", "nope"]);
    assert_eq!(rejected.code, 5, "{rejected:#?}");
    let log = log_json(&sb);
    assert_eq!(log["task"]["agent"]["provider"], "claude");
    assert_eq!(kinds(&log), ["delegated-run"]);
    let entry = &log["timeline"][0]["event"];
    assert_eq!(entry["runId"], run_id);
    assert_eq!(entry["target"], "codex");
    assert_eq!(entry["status"], "succeeded");
    assert!(entry["resultHash"].as_str().unwrap().starts_with("sha256:"));
    // A later handoff lands on the same task.
    let run = continue_(&sb, &["--to", "codex", "--note-only"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(
        kinds(&log_json(&sb)),
        ["delegated-run", "checkpoint", "handoff"]
    );
}

#[test]
fn a_running_delegation_holds_the_worktree_until_it_ends() {
    let sb = sandbox();
    sb.agents.set("HANDOFF_FAKE_MODE", "hang");
    let ready = sb.root.join("ready");
    sb.agents.set("HANDOFF_FAKE_READY_FILE", &ready);
    let ins = sb.instructions("Make the change.");
    let cwd = sb.cwd();
    let mut delegation = sb
        .command()
        .args([
            "run",
            "--caller-harness",
            "claude",
            "--harness",
            "codex",
            "--mode",
            "build",
        ])
        .args(["--cwd", &cwd, "--instructions", &ins])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    sb.agents.set("HANDOFF_FAKE_MODE", "success");
    let run = continue_(&sb, &["--from", "claude", "--to", "codex", "--dry-run"]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(
        run.stderr.contains(&format!("(pid {}, ", delegation.id()))
            && run.stderr.contains("`run` since"),
        "{run:#?}"
    );

    // With --wait it goes ahead once the run is over.
    let note = note_file(&sb, "wait.md", &SECTIONS);
    let waiting = sb
        .command()
        .args([
            "continue",
            "--cwd",
            &cwd,
            "--note-file",
            &note,
            "--from",
            "claude",
        ])
        .args([
            "--to",
            "codex",
            "--dry-run",
            "--wait",
            "--fallback",
            "fresh-agent",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(delegation.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(delegation.wait().unwrap().code(), Some(9));
    let out = waiting.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["outcome"], "dry-run");
}

#[test]
fn a_locked_store_is_refused_before_anything_changes() {
    let sb = sandbox();
    sb.record();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    5\n}\n");
    // Create the store, then hold its write lock from another connection.
    let cwd = sb.cwd();
    let _ = sb.run(&["log", "--cwd", cwd.as_str()]);
    let db = sb.root.join("home/.local/state/handoff/tasks.sqlite3");
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let before = worktree_state(sb.repo.path());
    let run = continue_(&sb, &["--from", "claude", "--to", "codex"]);
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stderr.contains("is locked"), "{run:#?}");
    assert_eq!(worktree_state(sb.repo.path()), before);
    assert!(!receiver_ran(&sb), "no receiver ran");
}

#[test]
fn an_account_and_the_configuration_reach_the_receiver_and_its_resume_command() {
    let sb = sandbox();
    sb.record();
    let codex_home = sb.root.join("codex-work");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = sb.root.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.codex]\nenv = {{ OPENAI_BASE_URL = \"http://127.0.0.1:9/v1\", OPENAI_API_KEY = \"sk-secret-123456\" }}\n\n\
             [agents.codex.accounts.work]\nenv = {{ CODEX_HOME = \"{}\" }}\n",
            codex_home.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let note = note_file(&sb, "note.md", &SECTIONS);
    let cwd = sb.cwd();
    let run = sb.exec(sb.command().env("HANDOFF_CONFIG", &config).args([
        "continue",
        "--cwd",
        &cwd,
        "--note-file",
        &note,
        "--from",
        "claude",
        "--to",
        "codex",
        "--account",
        "work",
        "--fallback",
        "fresh-agent",
    ]));
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["target"]["account"], "work");
    assert_eq!(
        r["route"], "same-thread",
        "another provider's account needs no new thread"
    );
    let env = &r["receiver"]["resume"]["env"];
    assert_eq!(env["CODEX_HOME"], codex_home.to_str().unwrap());
    assert_eq!(env["OPENAI_BASE_URL"], "http://127.0.0.1:9/v1");
    assert!(env.get("OPENAI_API_KEY").is_none(), "{env}");
    assert!(
        !run.stdout.contains("sk-secret-123456"),
        "the key never reaches the output"
    );
    let receiver = sb
        .agents
        .invocations()
        .into_iter()
        .rev()
        .find(|i| i["exe"] == "codex" && i["stdin"].is_string())
        .unwrap();
    assert_eq!(receiver["env"]["CODEX_HOME"], codex_home.to_str().unwrap());
    assert_eq!(receiver["env"]["OPENAI_API_KEY"], "sk-secret-123456");
    let log = log_json(&sb);
    assert_eq!(log["task"]["agent"]["account"], "work");
}

#[test]
fn another_account_of_the_same_provider_is_a_new_thread() {
    let sb = sandbox();
    let config = sb.root.join("config.toml");
    std::fs::write(
        &config,
        "[agents.claude.accounts.work]\nenv = { CLAUDE_CONFIG_DIR = \"/nonexistent/claude-work\" }\n",
    )
    .unwrap();
    let note = note_file(&sb, "note.md", &SECTIONS);
    let cwd = sb.cwd();
    let before = worktree_state(sb.repo.path());
    let run = sb.exec(sb.command().env("HANDOFF_CONFIG", &config).args([
        "continue",
        "--cwd",
        &cwd,
        "--note-file",
        &note,
        "--from",
        "claude",
        "--to",
        "claude",
        "--account",
        "work",
        "--dry-run",
        "--fallback",
        "fresh-agent",
    ]));
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["route"], "new-thread");
    assert_eq!(run.json["outcome"], "dry-run");
    assert_eq!(worktree_state(sb.repo.path()), before);
}

/// With `--note-file -`, a request refused for another input is refused at once: standard
/// input is read only where the note is checked, after the flags.
#[test]
fn a_refusal_does_not_wait_for_the_note_on_stdin() {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let sb = sandbox();
    let cwd = sb.cwd();
    let mut child = sb
        .command()
        .args([
            "continue",
            "--cwd",
            &cwd,
            "--to",
            "nope",
            "--from",
            "claude",
            "--note-file",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Standard input stays open (the writer is kept) while handoff decides.
    let _writer = child.stdin.take();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "handoff waited for stdin");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert_eq!(status.code(), Some(5));
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["outcome"], "rejected");
    assert!(
        result["reason"]
            .as_str()
            .unwrap()
            .contains("\"nope\" is not a known agent"),
        "{result:#}"
    );
}
