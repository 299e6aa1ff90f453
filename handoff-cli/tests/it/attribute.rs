//! `handoff attribute` on scratch repositories: timelines made with `handoff checkpoint` and
//! handoff rows written through the store, with the store in the sandbox.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use camino::Utf8PathBuf;
use handoff_core::{
    AgentId, AgentRef, Checkpoint, HandoffContext, HandoffOutcome, NewHandoff, NewTask, Record,
    Route, TaskAgent, TaskId, TaskStore,
};
use handoff_store::SqliteStore;
use serde_json::Value;

use crate::support::{Run, Sandbox};

fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    sb.repo.git(&["config", "user.name", "handoff test"]);
    sb.repo
        .git(&["config", "user.email", "test@example.invalid"]);
    sb.repo.git(&["config", "commit.gpgsign", "false"]);
    sb
}

fn state(sb: &Sandbox) -> PathBuf {
    sb.root.join("state")
}

/// `handoff <args>` with the store under `state`.
fn handoff_in(sb: &Sandbox, state: &Path, args: &[&str]) -> Run {
    let mut cmd = sb.command();
    cmd.env("XDG_STATE_HOME", state).args(args);
    sb.exec(&mut cmd)
}

fn handoff(sb: &Sandbox, args: &[&str]) -> Run {
    handoff_in(sb, &state(sb), args)
}

/// `handoff attribute --cwd <repo> <extra…>`.
fn attribute(sb: &Sandbox, extra: &[&str]) -> Run {
    let cwd = sb.cwd();
    let mut args = vec!["attribute", "--cwd", cwd.as_str()];
    args.extend(extra);
    handoff(sb, &args)
}

/// Commits `paths` as `agent` with `handoff checkpoint`; returns the task id and the commit.
fn checkpoint(sb: &Sandbox, agent: &str, paths: &[&str]) -> (String, String) {
    let cwd = sb.cwd();
    let mut args = vec![
        "checkpoint",
        "--cwd",
        cwd.as_str(),
        "--agent",
        agent,
        "--json",
    ];
    args.extend(paths);
    let run = handoff(sb, &args);
    assert_eq!(run.code, 0, "{run:?}");
    (
        run.json["taskId"].as_str().unwrap().to_owned(),
        run.json["commit"].as_str().unwrap().to_owned(),
    )
}

fn store(sb: &Sandbox) -> SqliteStore {
    let path = state(sb).join("handoff").join("tasks.sqlite3");
    SqliteStore::open(Utf8PathBuf::from_path_buf(path).unwrap()).unwrap()
}

fn agent(provider: &str) -> AgentRef {
    AgentRef {
        provider: AgentId::parse(provider).unwrap(),
        model: None,
    }
}

/// Records a handoff of the task from `source` to `target` at `checkpoint` with `outcome`; a
/// started one also makes `target` the task's agent, as `handoff continue` does.
fn hand_over(
    sb: &Sandbox,
    task: &str,
    (source, target): (&str, &str),
    checkpoint: &str,
    note: Option<&Path>,
    outcome: HandoffOutcome,
) {
    let store = store(sb);
    let task = TaskId::parse(task).unwrap();
    let details = serde_json::Map::from_iter([("checkpoint".to_owned(), checkpoint.into())]);
    let row = store
        .record_handoff(
            &task,
            &NewHandoff {
                source: agent(source),
                target: agent(target),
                context: HandoffContext {
                    note_path: note.map(|p| Utf8PathBuf::from_path_buf(p.to_owned()).unwrap()),
                    details: Some(details),
                    ..HandoffContext::default()
                },
                route: Route::SameThread,
            },
        )
        .unwrap();
    let started = outcome == HandoffOutcome::Started;
    store.finish_handoff(&row.id, &outcome).unwrap();
    if started {
        store
            .set_agent(
                &task,
                &TaskAgent {
                    provider: AgentId::parse(target).unwrap(),
                    model: None,
                    account: None,
                },
            )
            .unwrap();
    }
}

/// Writes a handoff note outside the repository.
fn note(sb: &Sandbox, name: &str, text: &str) -> PathBuf {
    let dir = sb.root.join("notes");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn chmod_x(sb: &Sandbox, rel: &str) {
    let path = sb.repo.path().join(rel);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn head(sb: &Sandbox) -> String {
    sb.repo.git(&["rev-parse", "HEAD"]).trim().to_owned()
}

/// `(path, added, removed, binary, flags)` of a file of a segment.
type FileRow = (String, Option<u64>, Option<u64>, bool, Vec<String>);

fn files(segment: &Value) -> Vec<FileRow> {
    segment["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["added"].as_u64(),
                f["removed"].as_u64(),
                f["binary"].as_bool().unwrap(),
                f["flags"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

fn file(path: &str, lines: Option<(u64, u64)>, flags: &[&str]) -> FileRow {
    (
        path.to_owned(),
        lines.map(|l| l.0),
        lines.map(|l| l.1),
        lines.is_none(),
        flags.iter().map(|s| (*s).to_owned()).collect(),
    )
}

/// claude → codex → claude: two committed segments and the uncommitted tail, every flag kind.
fn three_segments(sb: &Sandbox) -> (String, String, String, String) {
    let base = head(sb);
    sb.repo
        .write("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    sb.repo.write("Cargo.lock", "# lock\nversion = 3\n");
    sb.repo.write(".github/workflows/ci.yml", "on: push\n");
    let (task, c1) = checkpoint(
        sb,
        "claude",
        &["src/lib.rs", "Cargo.lock", ".github/workflows/ci.yml"],
    );
    let scope = note(
        sb,
        "to-codex.md",
        "# Handoff\n\n## Goal\nFinish the parser in `src/` and document it in docs/guide.md.\n\n\
         ## Git state\n- `elsewhere/ignored.rs`\n",
    );
    // A handoff that did not start moves nothing.
    hand_over(
        sb,
        &task,
        ("claude", "grok"),
        &c1,
        None,
        HandoffOutcome::NotStarted {
            reason: "grok is not installed".into(),
        },
    );
    hand_over(
        sb,
        &task,
        ("claude", "codex"),
        &c1,
        Some(&scope),
        HandoffOutcome::Started,
    );

    sb.repo
        .write("src/lib.rs", "fn a() {}\nfn b() -> u8 { 1 }\nfn c() {}\n");
    sb.repo.write("docs/guide.md", "# Guide\nUse it.\n");
    sb.repo.write("scripts/run.sh", "#!/bin/sh\nexit 0\n");
    chmod_x(sb, "scripts/run.sh");
    sb.repo.write(
        "gen/schema.rs",
        "// @generated by the build\npub struct S;\n",
    );
    sb.repo.write("dist/app.min.js", "x\n");
    sb.repo.write("notes.txt", "x\n");
    sb.repo.write("logo.png", "\u{0}\u{1}PNG\u{0}");
    let (_, c2) = checkpoint(
        sb,
        "codex",
        &[
            "src/lib.rs",
            "docs/guide.md",
            "scripts/run.sh",
            "gen/schema.rs",
            "dist/app.min.js",
            "notes.txt",
            "logo.png",
        ],
    );
    // The note of the second handoff is gone by the time anyone looks: scope unknown.
    let gone = note(sb, "to-claude.md", "## Goal\n`README.md`\n");
    hand_over(
        sb,
        &task,
        ("codex", "claude"),
        &c2,
        Some(&gone),
        HandoffOutcome::Started,
    );
    std::fs::remove_file(&gone).unwrap();

    sb.repo.write("README.md", "# scratch\nmore\n");
    sb.repo.write("new.txt", "n\n");
    sb.repo.write("AGENTS.md", "Be nice.\n");
    sb.repo.write("target/out.txt", "ignored\n");
    chmod_x(sb, "src/lib.rs");
    sb.repo.git(&["add", "new.txt"]);
    (task, base, c1, c2)
}

#[test]
fn segments_follow_started_handoffs_with_lines_and_flags() {
    let sb = sandbox();
    let (task, base, c1, c2) = three_segments(&sb);
    let status = sb.repo.git(&["status", "--porcelain"]);
    let index = sb.repo.git(&["ls-files", "-s"]);

    let run = attribute(&sb, &["--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let r = &run.json;
    assert_eq!(r["schemaVersion"], "handoff.attribution.v1");
    assert_eq!(r["taskId"], task.as_str());
    assert_eq!(r["owner"]["provider"], "claude");
    assert_eq!(r["base"]["commit"], base.as_str());
    assert_eq!(r["base"]["rule"], "parent-of-first-checkpoint");
    assert_eq!(r["base"]["firstCheckpoint"], c1.as_str());
    assert_eq!(r["checks"], Value::Null);

    let segments = r["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 3, "{r:#}");
    let ranges: Vec<(&str, &str, &str)> = segments
        .iter()
        .map(|s| {
            (
                s["provider"].as_str().unwrap(),
                s["from"].as_str().unwrap(),
                s["to"].as_str().unwrap_or("worktree"),
            )
        })
        .collect();
    assert_eq!(
        ranges,
        [
            ("claude", base.as_str(), c1.as_str()),
            ("codex", c1.as_str(), c2.as_str()),
            ("claude", c2.as_str(), "worktree"),
        ]
    );
    assert_eq!(segments[0]["handoffId"], Value::Null);
    assert!(
        segments[1]["handoffId"]
            .as_str()
            .unwrap()
            .starts_with("handoff-")
    );

    assert_eq!(
        files(&segments[0]),
        [
            file(".github/workflows/ci.yml", Some((1, 0)), &["configuration"]),
            file("Cargo.lock", Some((2, 0)), &["lockfile"]),
            file("src/lib.rs", Some((3, 0)), &[]),
        ]
    );
    assert_eq!(segments[0]["scope"]["known"], false);
    assert_eq!(
        segments[0]["totals"],
        serde_json::json!({"files": 3, "added": 6, "removed": 0, "binary": 0})
    );

    assert_eq!(
        files(&segments[1]),
        [
            file(
                "dist/app.min.js",
                Some((1, 0)),
                &["generated", "outside-scope"]
            ),
            file("docs/guide.md", Some((2, 0)), &[]),
            file(
                "gen/schema.rs",
                Some((2, 0)),
                &["generated", "outside-scope"]
            ),
            file("logo.png", None, &["outside-scope"]),
            file("notes.txt", Some((1, 0)), &["outside-scope"]),
            file(
                "scripts/run.sh",
                Some((2, 0)),
                &["permissions", "outside-scope"]
            ),
            file("src/lib.rs", Some((1, 1)), &[]),
        ]
    );
    let scope = &segments[1]["scope"];
    assert_eq!(scope["known"], true);
    assert_eq!(
        scope["paths"],
        serde_json::json!(["docs/guide.md", "src"]),
        "the Git state section is not scope"
    );
    assert!(scope["note"].as_str().unwrap().ends_with("to-codex.md"));
    let run_sh = &segments[1]["files"][5];
    assert_eq!(run_sh["newMode"], "100755");
    assert_eq!(run_sh["status"], "added");

    // The tail: committed, staged, unstaged and untracked alike; ignored files are not work.
    assert_eq!(
        files(&segments[2]),
        [
            file("AGENTS.md", Some((1, 0)), &["configuration"]),
            file("README.md", Some((1, 0)), &[]),
            file("new.txt", Some((1, 0)), &[]),
            file("src/lib.rs", Some((0, 0)), &["permissions"]),
        ]
    );
    assert_eq!(segments[2]["scope"]["known"], false);
    assert!(
        segments[2]["scope"]["reason"]
            .as_str()
            .unwrap()
            .contains("unreadable"),
        "{r:#}"
    );

    let providers = r["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 2);
    assert_eq!(
        providers[0],
        serde_json::json!({
            "provider": "claude", "segments": [0, 2], "files": 6, "added": 9, "removed": 0,
            "binary": 0, "flags": {"configuration": 2, "lockfile": 1, "permissions": 1},
        })
    );
    assert_eq!(
        providers[1],
        serde_json::json!({
            "provider": "codex", "segments": [1], "files": 7, "added": 9, "removed": 1,
            "binary": 1, "flags": {"generated": 2, "outside-scope": 5, "permissions": 1},
        })
    );

    // Read-only: the user's index and worktree are as they were.
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), status);
    assert_eq!(sb.repo.git(&["ls-files", "-s"]), index);

    let human = attribute(&sb, &[]);
    assert_eq!(human.code, 0, "{human:?}");
    let text = &human.stdout;
    for expected in [
        format!(
            "base {}: the parent of the first checkpoint {}\n",
            &base[..12],
            &c1[..12]
        ),
        format!(
            "segment 1 by codex: {}..{} (scope: 2 path(s) named by ",
            &c1[..12],
            &c2[..12]
        ),
        format!(
            "segment 2 by claude: {}..worktree (scope unknown: ",
            &c2[..12]
        ),
        "  binary       logo.png (added)  [outside-scope]\n".to_owned(),
        "  +1 -1        src/lib.rs (modified)\n".to_owned(),
        "  7 file(s), +9 -1, 1 binary\n".to_owned(),
        "  claude (segment 0, 2): 6 file(s), +9 -0; flagged: 2 configuration, 1 lockfile, 1 \
         permissions\n"
            .to_owned(),
    ] {
        assert!(text.contains(&expected), "{expected:?} not in:\n{text}");
    }
}

#[test]
fn a_root_commit_checkpoint_is_its_own_base() {
    let sb = sandbox();
    let root = head(&sb);
    let repo = Utf8PathBuf::from_path_buf(sb.repo.path().to_owned()).unwrap();
    std::fs::create_dir_all(state(&sb)).unwrap();
    let task = {
        let store = store(&sb);
        let task = store
            .create_task(&NewTask {
                project_root: repo.clone(),
                worktree: repo,
                branch: Some("main".into()),
                agent: TaskAgent {
                    provider: AgentId::parse("opencode").unwrap(),
                    model: Some("big".into()),
                    account: None,
                },
            })
            .unwrap();
        store
            .append(
                &task.id,
                &Record::Checkpoint(Checkpoint {
                    commit: root.clone(),
                    author: agent("opencode"),
                    message: "initial commit".into(),
                    committed: vec!["README.md".into(), ".gitignore".into()],
                    uncommitted: Vec::new(),
                }),
            )
            .unwrap();
        task.id
    };
    sb.repo.write("later.txt", "1\n2\n");

    let run = handoff(&sb, &["attribute", "--task", task.as_str(), "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["base"]["commit"], root.as_str());
    assert_eq!(run.json["base"]["rule"], "root-checkpoint");
    let segments = run.json["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 1);
    assert_eq!(segments[0]["provider"], "opencode");
    assert_eq!(segments[0]["model"], "big");
    assert_eq!(segments[0]["to"], Value::Null);
    assert_eq!(files(&segments[0]), [file("later.txt", Some((2, 0)), &[])]);

    let human = handoff(&sb, &["attribute", "--task", task.as_str()]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human.stdout.contains(&format!(
            "base {}: the first checkpoint itself (a root commit)",
            &root[..12]
        )),
        "{human:?}"
    );
}

#[test]
fn verify_runs_the_note_commands_and_records_each_check() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    let (task, c1) = checkpoint(&sb, "claude", &["a.txt"]);
    let verify = note(
        &sb,
        "verify.md",
        "## Goal\nKeep `a.txt`.\n\n## How to verify\n\
         - `test -f a.txt` succeeds\n\
         ```sh\n# fails on purpose\nexit 3\n```\n",
    );
    hand_over(
        &sb,
        &task,
        ("claude", "codex"),
        &c1,
        Some(&verify),
        HandoffOutcome::Started,
    );
    let status = sb.repo.git(&["status", "--porcelain"]);

    let run = attribute(&sb, &["--verify", "--json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let checks = run.json["checks"].as_array().unwrap();
    let summary: Vec<(&str, Option<i64>, bool, &str)> = checks
        .iter()
        .map(|c| {
            (
                c["command"].as_str().unwrap(),
                c["exitCode"].as_i64(),
                c["passed"].as_bool().unwrap(),
                c["commit"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("test -f a.txt", Some(0), true, c1.as_str()),
            ("exit 3", Some(3), false, c1.as_str()),
        ]
    );

    let cwd = sb.cwd();
    let log = handoff(&sb, &["log", "--cwd", &cwd, "--json"]);
    assert_eq!(log.code, 0, "{log:?}");
    let recorded: Vec<(&str, Option<i64>, &str)> = log.json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["event"])
        .filter(|e| e["kind"] == "check")
        .map(|e| {
            (
                e["command"].as_str().unwrap(),
                e["exitCode"].as_i64(),
                e["commit"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            ("test -f a.txt", Some(0), c1.as_str()),
            ("exit 3", Some(3), c1.as_str())
        ]
    );
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), status);

    // Human output: one line per check, the failure's output shown on stderr.
    let passing = note(&sb, "verify.md", "## How to verify\n1. `echo fine`\n");
    assert!(passing.exists());
    let human = attribute(&sb, &["--verify"]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human.stdout.contains(&format!(
            "check `echo fine` on {}: passed (exit 0, ",
            &c1[..12]
        )),
        "{human:?}"
    );
}

#[test]
fn verify_without_a_note_or_commands_is_refused() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    let (task, c1) = checkpoint(&sb, "claude", &["a.txt"]);
    let run = attribute(&sb, &["--verify"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(
        run.stderr,
        "handoff: --verify: no started handoff in this task, so no note to take commands from\n"
    );
    assert_eq!(run.stdout, "");

    let empty = note(
        &sb,
        "empty.md",
        "## How to verify\nRun the tests and look at them.\n",
    );
    hand_over(
        &sb,
        &task,
        ("claude", "kiro"),
        &c1,
        Some(&empty),
        HandoffOutcome::Started,
    );
    let run = attribute(&sb, &["--verify", "--json"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert!(
        run.stderr
            .contains("lists no commands under \"How to verify\""),
        "{run:?}"
    );
    assert_eq!(run.stdout, "");
    let cwd = sb.cwd();
    let log = handoff(&sb, &["log", "--cwd", &cwd, "--json"]);
    assert!(
        log.json["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["event"]["kind"] != "check")
    );
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let sb = sandbox();
    sb.repo.write("a.txt", "a\n");
    checkpoint(&sb, "claude", &["a.txt"]);
    sb.repo.write("b.txt", "b\n");
    let gone = {
        let store = store(&sb);
        let path = Utf8PathBuf::from_path_buf(sb.root.join("removed-worktree")).unwrap();
        store
            .create_task(&NewTask {
                project_root: path.clone(),
                worktree: path,
                branch: Some("gone".into()),
                agent: TaskAgent {
                    provider: AgentId::parse("codex").unwrap(),
                    model: None,
                    account: None,
                },
            })
            .unwrap()
            .id
    };
    let db = state(&sb).join("handoff").join("tasks.sqlite3");
    let bytes = std::fs::read(&db).unwrap();
    let status = sb.repo.git(&["status", "--porcelain"]);
    let other = handoff_testkit::ScratchRepo::new();
    let other_cwd = other.path().to_str().unwrap();

    let unknown = "task-00000000-0000-0000-0000-000000000000";
    let cases: [(Vec<&str>, &str); 5] = [
        (
            vec!["attribute", "--task", unknown],
            "no task 'task-00000000-0000-0000-0000-000000000000' in the task store",
        ),
        (
            vec!["attribute", "--task", "nope", "--json"],
            "--task: invalid task id 'nope'",
        ),
        (
            vec!["attribute", "--task", gone.as_str(), "--verify"],
            "is gone",
        ),
        (
            vec!["attribute", "--cwd", other_cwd],
            "no task recorded for the worktree",
        ),
        (vec!["attribute", "--cwd", "relative/dir"], "--cwd"),
    ];
    for (args, message) in cases {
        let run = handoff(&sb, &args);
        assert_eq!(run.code, 5, "{args:?}: {run:?}");
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {run:?}");
        assert!(run.stderr.contains(message), "{args:?}: {run:?}");
        assert_eq!(run.stdout, "", "{args:?}");
    }

    // The store's directory is a file: the store cannot be opened.
    let bad = sb.root.join("bad-state");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("handoff"), "not a directory\n").unwrap();
    let cwd = sb.cwd();
    let run = handoff_in(&sb, &bad, &["attribute", "--cwd", &cwd]);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert!(run.stderr.contains("task store"), "{run:?}");

    assert_eq!(std::fs::read(&db).unwrap(), bytes);
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), status);
    assert_eq!(other.git(&["status", "--porcelain"]), "");
}

#[test]
fn a_new_thread_moves_only_the_task_it_created() {
    let sb = sandbox();
    let base = head(&sb);
    sb.repo.write("a.txt", "a\n");
    let (task, c1) = checkpoint(&sb, "claude", &["a.txt"]);
    let fork_dir = sb.root.join("fork");
    let fork_path = fork_dir.to_str().unwrap();
    sb.repo
        .git(&["worktree", "add", "-q", "-b", "fork", fork_path, &c1]);
    // As `handoff continue --new-thread` does: fork, then record the handoff on the new task.
    let fork = {
        let store = store(&sb);
        let fork = store
            .fork_task(
                &TaskId::parse(&task).unwrap(),
                &handoff_core::Fork {
                    worktree: Utf8PathBuf::from_path_buf(fork_dir.clone()).unwrap(),
                    branch: Some("fork".into()),
                    agent: None,
                },
            )
            .unwrap();
        let details = serde_json::Map::from_iter([("checkpoint".to_owned(), c1.clone().into())]);
        let row = store
            .record_handoff(
                &fork.id,
                &NewHandoff {
                    source: agent("claude"),
                    target: agent("codex"),
                    context: HandoffContext {
                        details: Some(details),
                        ..HandoffContext::default()
                    },
                    route: Route::NewThread,
                },
            )
            .unwrap();
        store
            .finish_handoff(&row.id, &HandoffOutcome::Started)
            .unwrap();
        fork.id
    };
    std::fs::write(fork_dir.join("b.txt"), "b\n").unwrap();
    sb.repo.write("c.txt", "c\n");

    // The original stays with claude: one segment, its own worktree.
    let run = attribute(&sb, &["--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let segments = run.json["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 1, "{:#}", run.json);
    assert_eq!(segments[0]["provider"], "claude");
    assert_eq!(
        files(&segments[0]),
        [
            file("a.txt", Some((1, 0)), &[]),
            file("c.txt", Some((1, 0)), &[])
        ]
    );

    // The fork: claude's work up to the checkpoint, then codex's in the new worktree.
    let run = handoff(&sb, &["attribute", "--cwd", fork_path, "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json["taskId"], fork.as_str());
    assert_eq!(run.json["parent"], task.as_str());
    let segments = run.json["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 2, "{:#}", run.json);
    assert_eq!(segments[0]["provider"], "claude");
    assert_eq!(segments[0]["from"], base.as_str());
    assert_eq!(files(&segments[0]), [file("a.txt", Some((1, 0)), &[])]);
    assert_eq!(segments[1]["provider"], "codex");
    assert_eq!(segments[1]["from"], c1.as_str());
    assert_eq!(files(&segments[1]), [file("b.txt", Some((1, 0)), &[])]);
}
