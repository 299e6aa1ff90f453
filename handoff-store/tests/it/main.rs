//! Integration tests of handoff-store: one binary, one module per concern.
// Test helpers unwrap like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod concurrency;
mod files;
mod fork;
mod jobs;
mod migrations;
mod props;
mod round_trip;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, AgentRef, CheckRun, Checkpoint, DelegatedRun, Mode, NewTask, Operation, Record,
    Status, TaskAgent, Turn,
};
use handoff_store::SqliteStore;
use tempfile::TempDir;

/// A temporary directory and a store path inside it (not yet created).
pub fn temp() -> (TempDir, Utf8PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    (dir, root.join("state/handoff/tasks.sqlite3"))
}

pub fn open(path: &Utf8Path) -> SqliteStore {
    SqliteStore::open(path).unwrap()
}

pub fn agent(provider: &str, model: Option<&str>) -> AgentRef {
    AgentRef {
        provider: AgentId::parse(provider).unwrap(),
        model: model.map(str::to_owned),
    }
}

pub fn new_task(worktree: &str) -> NewTask {
    NewTask {
        project_root: "/p/project".into(),
        worktree: worktree.into(),
        branch: Some("main".into()),
        agent: TaskAgent {
            provider: AgentId::CLAUDE,
            model: Some("opus".into()),
            account: Some("work".into()),
        },
    }
}

/// A 40-hex commit id made from `n`.
pub fn commit(n: u64) -> String {
    format!("{n:040x}")
}

pub fn turn(summary: &str) -> Record {
    Turn {
        author: agent("claude", Some("opus")),
        summary: summary.into(),
    }
    .into()
}

/// One record of each kind.
pub fn records() -> Vec<Record> {
    vec![
        turn("read the issue and planned"),
        Checkpoint {
            commit: commit(1),
            author: agent("claude", None),
            message: "wip: parser".into(),
            committed: vec!["src/a.rs".into(), "src/b.rs".into()],
            uncommitted: vec!["notes.txt".into()],
        }
        .into(),
        CheckRun {
            command: "cargo test".into(),
            exit_code: Some(101),
            commit: commit(1),
        }
        .into(),
        CheckRun {
            command: "sleep 100".into(),
            exit_code: None,
            commit: commit(1),
        }
        .into(),
        DelegatedRun {
            run_id: "run-1".into(),
            operation: Operation::Handoff,
            mode: Some(Mode::Review),
            target: AgentId::CODEX,
            status: Status::TimedOut,
            exit_code: 8,
            result_path: Some("/tmp/r.json".into()),
            result_hash: Some(format!("sha256:{}", "0".repeat(64))),
            host: None,
        }
        .into(),
        DelegatedRun {
            run_id: "run-2".into(),
            operation: Operation::Advice,
            mode: None,
            target: AgentId::GROK,
            status: Status::Succeeded,
            exit_code: 0,
            result_path: None,
            result_hash: None,
            host: Some("devbox".into()),
        }
        .into(),
        Checkpoint {
            commit: "a".repeat(64),
            author: agent("codex", Some("gpt-5")),
            message: "empty".into(),
            committed: vec![],
            uncommitted: vec![],
        }
        .into(),
        turn("ünïcode ✓ and 'quotes' and \"more\"\nand a second line"),
    ]
}

/// A raw connection to the file, for what the store's API cannot do.
pub fn raw(path: &Utf8Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}
