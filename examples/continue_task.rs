//! Continues a task on another agent through the library alone: makes a scratch repository
//! with some of Claude Code's work in it, writes a handoff note, and hands the task to Codex
//! with `handoff_continue::continue_task` (checkpoint, note, receiver, continuity, timeline).
//! Prints the same `handoff.continue.v1` JSON line `handoff continue` prints. Run with the agent
//! CLIs (or the bundled fake agents) on PATH:
//!
//! ```sh
//! cargo run -p handoff-examples --example continue-task
//! ```
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;

use anyhow::Result;
use handoff_continue::{ContinueRequest, Fallback, NoteInput};
use handoff_examples::continue_task::continue_with;
use handoff_examples::git;

const NOTE: &str = "# Handoff note

## Goal

Add a `two()` function next to `one()` in `src/lib.rs`.

## Current state

`one()` exists; `two()` is started.

## Done and verified

None.

## In progress

`two()` in `src/lib.rs`.

## Next steps

1. Finish `two()` in `src/lib.rs`.

## Decisions and constraints

Keep both functions in `src/lib.rs`.

## Open questions

None.

## How to verify

- `cargo test`

## Git state

Filled in by handoff.
";

#[tokio::main]
async fn main() -> Result<()> {
    let scratch = std::env::temp_dir().join(format!("handoff-continue-{}", std::process::id()));
    let repo = scratch.join("repo");
    std::fs::create_dir_all(repo.join("src"))?;
    let repo = repo.canonicalize()?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    for (key, value) in [
        ("user.name", "example"),
        ("user.email", "example@example.invalid"),
        ("commit.gpgsign", "false"),
    ] {
        git(&repo, &["config", key, value])?;
    }
    std::fs::write(repo.join("src/lib.rs"), "pub fn one() -> u32 {\n    1\n}\n")?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "initial"])?;
    // Claude Code's work so far, not yet committed.
    std::fs::write(
        repo.join("src/lib.rs"),
        "pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    todo!()\n}\n",
    )?;

    let mut request = ContinueRequest::new(
        "codex",
        repo.to_string_lossy(),
        NoteInput::Bytes {
            label: "note".into(),
            bytes: NOTE.as_bytes().to_vec(),
        },
    );
    request.from = Some("claude".into());
    request.message = Some("finish two()".into());
    // No Claude Code session to carry here: start Codex from the note and a recap.
    request.fallback = Some(Fallback::FreshAgent);

    let env: BTreeMap<String, String> = std::env::vars().collect();
    let result = continue_with(env, &request).await?;
    println!("{}", serde_json::to_string(&result)?);
    std::fs::remove_dir_all(&scratch).ok();
    std::process::exit(i32::from(result.exit_code));
}
