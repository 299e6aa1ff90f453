//! Embeds the full default engine from the library crates: all ten agents registered, git
//! evidence from gix. Makes a scratch repository, asks Codex to build a small change in it, and
//! prints the result. Run with an agent CLI (or the bundled fake agent) on PATH:
//!
//! ```sh
//! cargo run -p handoff-examples --example embed-default
//! ```
#![allow(clippy::print_stdout)]

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use anyhow::Result;
use handoff_core::{Engine, EngineOptions, Instructions, RunInput, Verb};
use handoff_examples::git;

#[tokio::main]
async fn main() -> Result<()> {
    let scratch = tempfile_dir()?;
    let repo = scratch.join("repo");
    std::fs::create_dir_all(&repo)?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("README.md"), "# scratch\n")?;
    git(&repo, &["add", "README.md"])?;
    git(&repo, &["commit", "-q", "-m", "initial"])?;

    let engine = Engine::new(
        handoff_adapters::default_registry(),
        Arc::new(handoff_git::GitWorkspace::new()),
        EngineOptions::from_process(),
    );
    println!("registered agents: {:?}", engine.registry().ids());

    let mut input = RunInput::new(Verb::Run);
    input.caller_harness = Some("claude".into());
    input.harness = Some("codex".into());
    input.mode = Some("build".into());
    input.cwd = Some(repo.to_string_lossy().into_owned());
    input.instructions = Some(Instructions::Stdin(
        b"Add a CONTRIBUTING.md with one paragraph.".to_vec(),
    ));
    let (_keep, cancel) = tokio::sync::watch::channel(false);
    let outcome = engine.run(input, cancel).await;
    print!("{}", outcome.line);
    println!(
        "status {:?}, exit {}, changed {:?}",
        outcome.result.status,
        outcome.exit_code,
        outcome.result.git.as_ref().map(|g| &g.changed_files)
    );
    std::fs::remove_dir_all(&scratch).ok();
    std::process::exit(i32::from(outcome.exit_code));
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let base = std::env::temp_dir().join(format!("handoff-example-{}", std::process::id()));
    std::fs::create_dir_all(&base)?;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))?;
    Ok(std::fs::canonicalize(base)?)
}
