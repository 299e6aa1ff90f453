//! Evidence an agent cannot forge: a review agent that changes a file and covers its tracks in
//! the stat data (same size, mtime set back, the index entry rewritten to match the new file
//! with the old object id). Git sees nothing; handoff's result does.

use std::fs::{File, FileTimes};
use std::path::{Path, PathBuf};
use std::time::Duration;

use handoff_testkit::keys::SHELL;

use crate::support::Sandbox;

/// What the agent does while it waits: the test stands in for its shell, from another thread.
pub(crate) fn forge(repo: &Path, rel: &str, content: &str) {
    let path = repo.join(rel);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        content.len() as u64,
        "the attack keeps the size"
    );
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, content).unwrap();
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_times(FileTimes::new().set_modified(mtime))
        .unwrap();
    let mut index = gix::index::File::at(
        repo.join(".git/index"),
        gix::hash::Kind::Sha1,
        false,
        gix::index::decode::Options::default(),
    )
    .unwrap();
    let meta = gix::index::fs::Metadata::from_path_no_follow(&path).unwrap();
    let i = index.entry_index_by_path(rel.into()).unwrap();
    index.entries_mut()[i].stat = gix::index::entry::Stat::from_fs(&meta).unwrap();
    index.write(gix::index::write::Options::default()).unwrap();
}

fn wait_for(path: &Path) {
    for _ in 0..1500 {
        if path.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn a_review_that_forges_the_index_stat_data_is_caught() {
    let sb = Sandbox::new();
    sb.repo.write("a.rs", "fn a() {}\n");
    sb.repo.commit_all("a.rs");
    // Old enough for handoff's record to vouch for it before the run.
    std::thread::sleep(Duration::from_millis(2100));
    let ready = sb.root.join("ready");
    let go = sb.root.join("go");
    sb.agents.set(
        SHELL,
        format!(
            ": > '{}'; while [ ! -e '{}' ]; do sleep 0.05; done",
            ready.display(),
            go.display()
        ),
    );
    let repo: PathBuf = sb.repo.path().to_path_buf();
    let run = std::thread::scope(|scope| {
        let attacker = scope.spawn(|| {
            wait_for(&ready);
            forge(&repo, "a.rs", "fn b() {}\n");
            std::fs::write(&go, "").unwrap();
        });
        let run = sb.delegate("claude", "codex", "review", &[]);
        attacker.join().unwrap();
        run
    });
    // The attack evades git: the index vouches for the new content.
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(repo.join("a.rs")).unwrap(),
        "fn b() {}\n"
    );
    // handoff read the file: its record of the "before" did not match.
    assert_eq!(run.json["git"]["changed"], true, "{}", run.stdout);
    assert_eq!(run.json["git"]["changedFiles"], serde_json::json!(["a.rs"]));
    assert_eq!(run.json["git"]["after"]["verifiedBy"], "record");
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert_eq!(run.code, 10);
}

#[test]
fn a_run_inside_a_git_directory_is_refused_before_any_agent_starts() {
    let sb = Sandbox::new();
    for dir in [".git", ".git/hooks", ".git/refs/heads"] {
        let cwd = sb.repo.path().join(dir);
        let cwd = cwd.to_str().unwrap();
        let ins = sb.instructions("Write a hook.");
        let run = sb.run(&[
            "run",
            "--caller-harness",
            "claude",
            "--harness",
            "codex",
            "--mode",
            "build",
            "--cwd",
            cwd,
            "--instructions",
            &ins,
        ]);
        assert_eq!(run.code, 5, "{dir}: {}\n{}", run.stdout, run.stderr);
        assert_eq!(run.status(), "rejected");
        assert!(
            run.json["diagnostics"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("inside the git directory")),
            "{}",
            run.stdout
        );
    }
    // Nothing was planted.
    assert!(!sb.repo.path().join(".git/hooks/pre-commit").exists());
}

#[test]
fn a_review_that_leaves_an_exec_line_in_a_rebase_todo_is_blocked() {
    let sb = Sandbox::new();
    let todo = sb.repo.path().join(".git/rebase-merge/git-rebase-todo");
    let shallow = sb.repo.path().join(".git/shallow");
    sb.agents.set(
        SHELL,
        format!(
            "mkdir -p '{dir}' && echo \"exec sh -c 'touch /tmp/pwned'\" > '{todo}'; \
             git rev-parse HEAD > '{shallow}'",
            dir = todo.parent().unwrap().display(),
            todo = todo.display(),
            shallow = shallow.display(),
        ),
    );
    let run = sb.delegate("claude", "codex", "review", &[]);
    // Neither is anything `git status` shows.
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), "");
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert_eq!(
        run.json["git"]["changedFiles"],
        serde_json::json!([".git/rebase-merge/git-rebase-todo", ".git/shallow"])
    );
}

#[test]
fn a_build_that_plants_a_hook_is_blocked_unless_git_configuration_is_allowed() {
    for allow in [false, true] {
        let sb = Sandbox::new();
        let hook = sb.repo.path().join(".git/hooks/pre-commit");
        sb.agents.set(
            SHELL,
            format!(
                "printf '#!/bin/sh\\necho planted\\n' > '{}'; echo x > '{}'",
                hook.display(),
                sb.repo.path().join("work.txt").display()
            ),
        );
        let extra: &[&str] = if allow { &["--allow-git-config"] } else { &[] };
        let run = sb.delegate("claude", "codex", "build", extra);
        let flags = &run.json["git"]["flags"];
        assert_eq!(flags[0]["path"], ".git/hooks/pre-commit", "{}", run.stdout);
        assert_eq!(flags[0]["kind"], "git-hook");
        if allow {
            assert_eq!(run.status(), "succeeded", "{}", run.stdout);
            assert_eq!(run.json["git"]["changed"], true);
        } else {
            assert_eq!(run.status(), "blocked", "{}", run.stdout);
            assert_eq!(run.code, 10);
            let message = run.json["diagnostics"]["message"].as_str().unwrap_or("");
            assert!(message.contains("--allow-git-config"), "{message}");
        }
    }
}

#[test]
fn a_build_may_change_ordinary_git_settings_but_not_ones_that_run_programs() {
    for (setting, blocked) in [
        ("git config branch.main.remote origin", false),
        ("git config core.fsmonitor 'sh evil.sh'", true),
        ("git config filter.x.clean 'sh evil.sh'", true),
    ] {
        let sb = Sandbox::new();
        sb.agents.set(
            SHELL,
            format!(
                "cd '{}' && {setting} && echo x > work.txt",
                sb.repo.path().display()
            ),
        );
        let run = sb.delegate("claude", "codex", "build", &[]);
        let expected = if blocked { "blocked" } else { "succeeded" };
        assert_eq!(run.status(), expected, "{setting}: {}", run.stdout);
        if blocked {
            assert_eq!(run.json["git"]["flags"][0]["kind"], "git-program-config");
        } else {
            assert_eq!(run.json["git"]["flags"], serde_json::Value::Null);
        }
    }
}

#[test]
fn agent_configuration_a_build_writes_is_flagged_without_blocking() {
    let sb = Sandbox::new();
    sb.agents.set(
        SHELL,
        format!(
            "cd '{}' && mkdir -p .claude && echo '{{}}' > .claude/settings.json && echo x > AGENTS.md",
            sb.repo.path().display()
        ),
    );
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}", run.stdout);
    let kinds: Vec<(&str, &str)> = run.json["git"]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            (".claude/settings.json", "agent-config"),
            ("AGENTS.md", "agent-config")
        ]
    );
}

#[test]
fn allow_git_config_is_refused_for_a_read_only_run() {
    let sb = Sandbox::new();
    let ins = sb.instructions("Review.");
    let cwd = sb.cwd();
    let run = sb.run(&[
        "run",
        "--caller-harness",
        "claude",
        "--harness",
        "codex",
        "--mode",
        "review",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
        "--allow-git-config",
    ]);
    assert_eq!(run.code, 5, "{}", run.stdout);
    assert_eq!(run.status(), "rejected");
}

#[test]
fn ignored_files_are_evidence_when_the_run_asks_for_them() {
    for covered in [false, true] {
        let sb = Sandbox::new();
        sb.repo.write(".gitignore", "target/\n.env\n");
        sb.repo.write(".env", "TOKEN=old\n");
        sb.repo.commit_all("ignore .env");
        sb.agents.set(
            SHELL,
            format!(
                "echo TOKEN=new > '{}'",
                sb.repo.path().join(".env").display()
            ),
        );
        let extra: &[&str] = if covered { &["--ignored"] } else { &[] };
        let run = sb.delegate("claude", "codex", "review", extra);
        if covered {
            assert_eq!(run.status(), "blocked", "{}", run.stdout);
            assert_eq!(run.json["git"]["changedFiles"], serde_json::json!([".env"]));
            assert_eq!(run.json["git"]["before"]["includesIgnored"], true);
        } else {
            // Not covered, and the result says so by leaving `includesIgnored` out.
            assert_eq!(run.status(), "succeeded", "{}", run.stdout);
            assert_eq!(
                run.json["git"]["before"]["includesIgnored"],
                serde_json::Value::Null
            );
        }
    }
}

#[test]
fn a_forged_index_left_between_runs_does_not_hide_the_change_from_the_next_run() {
    let sb = Sandbox::new();
    sb.repo.write("a.rs", "fn a() {}\n");
    sb.repo.commit_all("a.rs");
    std::thread::sleep(Duration::from_millis(2100));
    // The first run leaves handoff's record of the worktree in the task store.
    sb.agents.set(
        SHELL,
        format!("echo x > '{}'", sb.repo.path().join("work.txt").display()),
    );
    let first = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(first.status(), "succeeded", "{}", first.stdout);
    // Between runs, something unconfined changes a.rs and covers its tracks in the index.
    forge(sb.repo.path(), "a.rs", "fn b() {}\n");
    assert_eq!(
        sb.repo.git(&["status", "--porcelain", "--", "a.rs"]),
        "",
        "the forgery hides the change from git"
    );
    sb.agents.set(SHELL, "true");
    let second = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(second.status(), "succeeded", "{}", second.stdout);
    let before = &second.json["git"]["before"];
    assert_eq!(before["verifiedBy"], "record", "{before}");
    let changes: Vec<&str> = before["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    assert!(changes.contains(&"a.rs"), "{before}");
}

#[test]
fn a_build_that_plants_a_hook_in_a_hooks_path_inside_the_worktree_is_blocked() {
    // The user's hooks live in the worktree under a name of their own; git runs whatever lands
    // there at the next commit, whatever the directory is called.
    let sb = Sandbox::new();
    sb.repo.write("scripts/hooks/README", "hooks\n");
    sb.repo.commit_all("hooks dir");
    sb.repo.git(&["config", "core.hooksPath", "scripts/hooks"]);
    sb.agents.set(
        SHELL,
        format!(
            "cd '{}' && printf '#!/bin/sh\\necho planted\\n' > scripts/hooks/pre-commit && \
             echo x > work.txt",
            sb.repo.path().display()
        ),
    );
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert_eq!(
        run.json["git"]["flags"][0]["path"],
        "scripts/hooks/pre-commit"
    );
    assert_eq!(run.json["git"]["flags"][0]["kind"], "git-hook");
    assert_eq!(run.json["git"]["before"]["hooksDir"], "scripts/hooks/");
}

/// The parent of process `pid`, from `/proc/<pid>/stat` (the field after the command's `)`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(1)?.parse().ok()
}

/// The unnamed files of handoff's private work directory that process `pid` holds open, as
/// paths under `/proc/<pid>/fd` that reopen them.
fn parked_files_of(pid: u32) -> Vec<PathBuf> {
    let work = crate::support::work_dir();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .map(|fd| fd.path())
        .filter(|fd| {
            std::fs::read_link(fd).is_ok_and(|target| {
                let target = target.to_string_lossy();
                target.starts_with(&*work.to_string_lossy()) && target.ends_with(" (deleted)")
            })
        })
        .collect()
}

/// An agent whose shell writes its pid to `ready`, then waits until `go` exists.
fn held_agent(sb: &Sandbox) -> (PathBuf, PathBuf) {
    let ready = sb.root.join("ready");
    let go = sb.root.join("go");
    sb.agents.set(
        SHELL,
        format!(
            "echo $$ > '{0}.tmp'; mv '{0}.tmp' '{0}'; while [ ! -e '{1}' ]; do sleep 0.05; done",
            ready.display(),
            go.display()
        ),
    );
    (ready, go)
}

/// What the agent does through `/proc`: from its shell (whose pid is in `ready`) up to the
/// process holding handoff's unnamed files, rewrites the first of them that holds `needle`,
/// `patch` changing the bytes at the needle's position. handoff may still be writing them
/// while the agent starts, so it looks for up to 5 s. How many files it rewrote.
fn rewrite_parked(ready: &Path, needle: &[u8], patch: &dyn Fn(&mut [u8], usize)) -> usize {
    let agent: u32 = std::fs::read_to_string(ready)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for _ in 0..250 {
        let mut pid = agent;
        while pid > 1 {
            for fd in parked_files_of(pid) {
                let mut bytes = std::fs::read(&fd).unwrap();
                if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
                    patch(&mut bytes, at);
                    std::fs::write(&fd, &bytes).unwrap();
                    return 1;
                }
            }
            pid = parent_of(pid).unwrap_or(0);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    0
}

/// While the agent runs, the "before"'s per-path states wait in an unnamed file. An agent of
/// the same user can reach it through `/proc/<handoff>/fd`: this one finds it from its own pid,
/// changes `a.rs`, and rewrites the file so that the "before" names `a.rs`'s new content. The
/// comparison notices the file is not what handoff wrote: the worktree changed (the digests
/// differ), which paths did cannot be told, and the review is blocked.
#[test]
fn an_agent_that_rewrites_the_parked_before_states_is_blocked() {
    let sb = Sandbox::new();
    sb.repo.write("a.rs", "fn a() {}\n");
    sb.repo.commit_all("a.rs");
    let old = sb.repo.git(&["rev-parse", "HEAD:a.rs"]).trim().to_owned();
    let (ready, go) = held_agent(&sb);
    let repo: PathBuf = sb.repo.path().to_path_buf();
    let (run, rewritten) = std::thread::scope(|scope| {
        let attacker = scope.spawn(|| {
            wait_for(&ready);
            std::fs::write(repo.join("a.rs"), "fn b() {}\n").unwrap();
            let new = sb.repo.git(&["hash-object", "a.rs"]).trim().to_owned();
            let rewritten = rewrite_parked(&ready, old.as_bytes(), &|bytes, at| {
                bytes[at..at + new.len()].copy_from_slice(new.as_bytes())
            });
            std::fs::write(&go, "").unwrap();
            rewritten
        });
        let run = sb.delegate("claude", "codex", "review", &[]);
        (run, attacker.join().unwrap())
    });
    assert_eq!(rewritten, 1, "the agent reached the parked states");
    // A read-only run changed the worktree: blocked, even though the paths cannot be named.
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert_eq!(run.code, 10);
    let message = run.json["diagnostics"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("kept in a file while it ran, was altered"),
        "{}",
        run.stdout
    );
    // The digests differ, so the worktree changed; which paths did cannot be told.
    assert_eq!(run.json["git"]["changed"], true, "{}", run.stdout);
    assert_eq!(run.json["git"]["changedFiles"], serde_json::json!([]));
    assert!(run.json["git"]["after"]["digest"].is_string());
}

/// handoff's record of the "before" (the stat data that lets the "after" skip reading a file)
/// keeps its full pages in an unnamed file while the agent runs. This agent changes a file,
/// waits until its new stat data is old enough to be recorded, then finds the page that holds
/// the file (through `/proc/<handoff>/fd`) and gives the file its new stat data there, keeping
/// the old content id: the record would then vouch that the changed file still holds the old
/// content. The page no longer reads back as written, so it vouches for nothing: the file is
/// read, and the change is caught.
#[test]
fn an_agent_that_rewrites_a_parked_record_page_is_caught() {
    use std::os::unix::fs::MetadataExt;
    let sb = Sandbox::new();
    // Enough files for the record to fill pages.
    for i in 0..(2 * handoff_core::RECORD_PAGE + 100) {
        sb.repo
            .write(&format!("f/{i:05}.txt"), &format!("v{i:05}\n"));
    }
    sb.repo.commit_all("files");
    // Old enough for the "before" to record them.
    std::thread::sleep(Duration::from_millis(2100));
    // The first path of a block (of 16) is stored whole; this one is on the first page.
    let tracked = sb.repo.git(&["ls-files"]);
    let target = tracked.lines().nth(16).unwrap().to_owned();
    let target = target.as_str();
    assert!(target.starts_with("f/"), "{target}");
    let (ready, go) = held_agent(&sb);
    let repo: PathBuf = sb.repo.path().to_path_buf();
    let (run, rewritten) = std::thread::scope(|scope| {
        let attacker = scope.spawn(|| {
            wait_for(&ready);
            let old = std::fs::read_to_string(repo.join(target)).unwrap();
            std::fs::write(repo.join(target), old.replace('v', "w")).unwrap();
            // Until the new stat data is old enough to be recorded by the "after".
            std::thread::sleep(Duration::from_millis(2200));
            let meta = std::fs::symlink_metadata(repo.join(target)).unwrap();
            let mut stamp = Vec::new();
            for v in [
                meta.ino(),
                meta.size(),
                meta.mtime() as u64,
                meta.ctime() as u64,
            ] {
                stamp.extend_from_slice(&v.to_le_bytes());
            }
            for v in [
                meta.mtime_nsec() as u32,
                meta.ctime_nsec() as u32,
                meta.mode(),
                meta.uid(),
                meta.gid(),
            ] {
                stamp.extend_from_slice(&v.to_le_bytes());
            }
            // How the record stores a block's first path: no shared prefix, its length, it.
            let mut stored = vec![0, 0];
            stored.extend_from_slice(&(target.len() as u16).to_le_bytes());
            stored.extend_from_slice(target.as_bytes());
            let rewritten = rewrite_parked(&ready, &stored, &|bytes, at| {
                let at = at + stored.len();
                bytes[at..at + stamp.len()].copy_from_slice(&stamp);
            });
            std::fs::write(&go, "").unwrap();
            rewritten
        });
        let run = sb.delegate("claude", "codex", "review", &[]);
        (run, attacker.join().unwrap())
    });
    assert_eq!(rewritten, 1, "the agent reached the record's page");
    assert_eq!(run.json["git"]["changed"], true, "{}", run.stdout);
    assert_eq!(run.json["git"]["changedFiles"], serde_json::json!([target]));
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert_eq!(run.code, 10);
}

/// handoff does not write back a record the task store already holds (an unchanged worktree
/// repeats it). An agent that rewrites the store's record while it runs, so that the next
/// run's "before" trusts stat data it chose, must not have that forgery kept: the store is
/// checked to still hold what was read from it, and written over when it does not.
#[test]
fn a_record_forged_in_the_task_store_during_a_run_is_written_over() {
    let sb = Sandbox::new();
    sb.repo.write("a.rs", "fn a() {}\n");
    sb.repo.commit_all("a.rs");
    std::thread::sleep(Duration::from_millis(2100));
    sb.agents.set(SHELL, "true");
    let first = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(first.status(), "succeeded", "{}", first.stdout);
    let store_path = sb.root.join("home/.local/state/handoff/tasks.sqlite3");
    let store_path = camino::Utf8PathBuf::from_path_buf(store_path).unwrap();
    let root = camino::Utf8PathBuf::from(sb.cwd());
    let read = || {
        use handoff_core::TaskStore;
        handoff_store::SqliteStore::open(&store_path)
            .unwrap()
            .stat_record(&root)
            .unwrap()
            .unwrap()
            .1
    };
    let truthful = read();
    let (ready, go) = held_agent(&sb);
    let forged = std::thread::scope(|scope| {
        let attacker = scope.spawn(|| {
            wait_for(&ready);
            // The last path's group id, one bit off: still a record, vouching for other stat
            // data than the file has.
            let mut forged = truthful.clone();
            let at = forged.len() - 20 - 1;
            forged[at] ^= 1;
            use handoff_core::TaskStore;
            handoff_store::SqliteStore::open(&store_path)
                .unwrap()
                .save_stat_record(&root, &forged)
                .unwrap();
            std::fs::write(&go, "").unwrap();
            forged
        });
        let second = sb.delegate("claude", "codex", "review", &[]);
        assert_eq!(second.status(), "succeeded", "{}", second.stdout);
        attacker.join().unwrap()
    });
    assert_ne!(forged, truthful);
    assert_eq!(read(), truthful, "the forged record was kept");
}
