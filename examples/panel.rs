//! Asks a panel: the same read-only question put to Codex and Claude Code at once through
//! `Engine::panel`, on a scratch repository. Prints the `handoff.panel.v1` line, then the merged
//! findings with the members that agree on each, and exits with the panel's code. Run with the
//! agent CLIs (or the bundled fake agents) on PATH, after building the `handoff` binary (advice
//! runs its agents under it):
//!
//! ```sh
//! cargo run -p handoff-examples --example panel
//! ```
//!
//! `cargo xtask examples` runs it on the fake agents, scripted to raise overlapping findings.
#![allow(clippy::print_stdout)]

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use anyhow::{Context, Result};
use camino::Utf8PathBuf;
use handoff_core::{Engine, EngineOptions, Instructions, PanelOptions, RunInput, Verb};
use handoff_examples::git;

/// Who sits on the panel: each entry an agent, optionally `:model`.
const MEMBERS: &str = "codex,claude";

#[tokio::main]
async fn main() -> Result<()> {
    let scratch = scratch_dir()?;
    let repo = scratch.join("repo");
    std::fs::create_dir_all(repo.join("src"))?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    std::fs::write(
        repo.join("src/lib.rs"),
        "pub fn first(words: &[&str]) -> String {\n    words[0].to_owned()\n}\n",
    )?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "initial"])?;

    let mut options = EngineOptions::from_process();
    // Advice runs its agents under the handoff binary (their reaper, and the way to further
    // advisers); a program that is not handoff itself names it.
    options.handoff_exe = Some(handoff_binary()?);
    let engine = Engine::new(
        handoff_adapters::default_registry(),
        Arc::new(handoff_git::GitWorkspace::new()),
        options,
    );
    // The same parser `--harness a,b` goes through: unknown or duplicate members are refused.
    let members = handoff_core::parse_members(MEMBERS, engine.registry())?;

    // What every member shares: the verb, the worktree and the question.
    let mut input = RunInput::new(Verb::Advice);
    input.caller_harness = Some("claude".into());
    input.cwd = Some(repo.to_string_lossy().into_owned());
    input.instructions = Some(Instructions::Stdin(
        b"Review src/lib.rs and report what can go wrong. Do not change anything.".to_vec(),
    ));
    let (_keep, cancel) = tokio::sync::watch::channel(false);
    let outcome = engine
        .panel(members, input, PanelOptions::default(), cancel)
        .await;
    print!("{}", outcome.line);

    let result = &outcome.result;
    println!(
        "panel {}, exit {}, quorum {}, {} member(s)",
        result.status.as_str(),
        outcome.exit_code,
        result.quorum,
        result.members.len()
    );
    for (i, finding) in result.findings.iter().enumerate() {
        let place = match (&finding.path, &finding.lines) {
            (Some(path), Some(l)) if l.start == l.end => format!("{path}:{}", l.start),
            (Some(path), Some(l)) => format!("{path}:{}-{}", l.start, l.end),
            (Some(path), None) => path.clone(),
            (None, _) => "(no file)".to_owned(),
        };
        let alone = result.agreement.single_member_findings.contains(&i);
        println!(
            "  [{}] {place}: {}\n      agreedBy {:?}{}",
            name(serde_json::to_value(finding.severity)),
            finding.title,
            finding.agreed_by,
            if alone { " (one member only)" } else { "" }
        );
    }
    for stance in &result.agreement.verdicts {
        println!(
            "  {} {}: {} ({})",
            stance.member,
            stance.status.as_str(),
            name(serde_json::to_value(stance.verdict)),
            name(serde_json::to_value(stance.verdict_source))
        );
    }
    if !result.agreement.dissenting.is_empty() {
        println!("  dissenting: {:?}", result.agreement.dissenting);
    }
    for failed in &result.agreement.failed {
        println!(
            "  failed: {} ({}, exit {})",
            failed.member,
            failed.status.as_str(),
            failed.exit
        );
    }
    std::fs::remove_dir_all(&scratch).ok();
    std::process::exit(i32::from(outcome.exit_code));
}

/// The `handoff` binary of this build (`target/<profile>/handoff`, beside this example's
/// directory), else the first on PATH.
fn handoff_binary() -> Result<Utf8PathBuf> {
    let beside = std::env::current_exe()?
        .parent()
        .and_then(std::path::Path::parent)
        .map(|dir| dir.join("handoff"));
    let on_path: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("handoff"))
                .collect()
        })
        .unwrap_or_default();
    let found = beside
        .into_iter()
        .chain(on_path)
        .find(|p| p.is_file())
        .context(
            "advice needs the handoff binary: `cargo build -p handoff-cli`, or put it on PATH",
        )?;
    Utf8PathBuf::from_path_buf(std::fs::canonicalize(found)?)
        .map_err(|p| anyhow::anyhow!("{} is not UTF-8", p.display()))
}

/// How a value is spelled in the panel line (`changes-requested`, `high`).
fn name(value: serde_json::Result<serde_json::Value>) -> String {
    match value {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_owned(),
    }
}

fn scratch_dir() -> Result<std::path::PathBuf> {
    let base = std::env::temp_dir().join(format!("handoff-panel-{}", std::process::id()));
    std::fs::create_dir_all(&base)?;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))?;
    Ok(std::fs::canonicalize(base)?)
}
