//! Project tasks, run as `cargo xtask <task>`:
//!
//! - `ci`: format check, clippy with `-D warnings`, every hermetic test, the examples.
//! - `demo [--json]`: builds, reviews, nested advice and a continuation on the bundled fake
//!   agents, in a scratch repo, shown step by step (`--json`: each step's full JSON too).
//! - `schema [--check]`: regenerate (or check) `schemas/*.json` from the contract types.
//! - `plugin [--check]`: regenerate (or check) the Claude Code and Codex plugin under `plugin/`.
//! - `dist [--debug | --from-archives DIR]`: the npm packages (the `handoff-cli` launcher and
//!   this platform's binary package) as tarballs in `target/dist/npm/`, from a release build
//!   (`--debug`: the dev build, into `target/dist/npm-debug/`); or every platform's package
//!   from the release archives `dist` built (what the release workflow publishes).
//! - `npm-e2e`: those packages (from the dev build, made the way the release makes them)
//!   published to a local registry and installed with `npm install -g` in a new prefix with no
//!   Rust toolchain on `PATH`, then driven.
//! - `workflows`: actionlint over `.github/workflows/`.
//! - `check-macos`: the workspace type-checked for macOS (part of `ci`).
//! - `e2e-real [--latest]`: the real Claude Code, Codex, OpenCode, Copilot, Qwen and community
//!   Grok CLIs against the scripted model server, and `continue --on` over a real OpenSSH
//!   server; pinned, or
//!   (`--latest`) each CLI's npm `latest` release when it differs from the pin.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod compat;
mod demo;
mod dist;
mod macos;
mod npm_prefix;
mod package;
mod plugin;
mod real;
mod workflows;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use handoff_testkit::FakeAgents;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

fn run(step: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("==> {step}");
    let status = cmd.status().with_context(|| format!("cannot run {step}"))?;
    if !status.success() {
        bail!("{step} failed ({status})");
    }
    Ok(())
}

/// Where cargo puts the binaries of this (dev) build: next to the xtask binary itself.
fn bin_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let mut dir = exe
        .parent()
        .map(Path::to_path_buf)
        .context("the xtask binary has no parent directory")?;
    // A test binary of this crate is one level down, in `deps/`.
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    Ok(dir)
}

fn build_binaries() -> Result<PathBuf> {
    run(
        "build handoff and the fake agent",
        cargo().args([
            "build",
            "--quiet",
            "-p",
            "handoff-cli",
            "-p",
            "handoff-testkit",
            "--bins",
        ]),
    )?;
    let handoff = bin_dir()?.join("handoff");
    if !handoff.is_file() {
        bail!("{} was not built", handoff.display());
    }
    Ok(handoff)
}

fn private_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// A prepared environment for running `handoff` against the fake agents.
struct Sandbox {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    agents: FakeAgents,
}

impl Sandbox {
    fn new() -> Result<Sandbox> {
        let tmp = tempfile::Builder::new().prefix("handoff-demo-").tempdir()?;
        let root = std::fs::canonicalize(tmp.path())?;
        private_dir(&root)?;
        let agents = FakeAgents::install(&root).with_sandbox_tools();
        private_dir(&root.join("private"))?;
        private_dir(&root.join("home"))?;
        Ok(Sandbox {
            _tmp: tmp,
            root,
            agents,
        })
    }

    fn path_env(&self) -> std::ffi::OsString {
        let mut p = self.agents.bin_dir.clone().into_os_string();
        p.push(":");
        p.push(std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()));
        p
    }

    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env("PATH", self.path_env())
            .env("HOME", self.root.join("home"))
            .env("XDG_CACHE_HOME", self.root.join("home/.cache"))
            .env_remove("HANDOFF_SUPERVISOR_CONTEXT");
        c
    }
}

fn examples() -> Result<()> {
    build_binaries()?;
    let sb = Sandbox::new()?;
    for example in ["embed-default", "custom-provider", "continue-task", "panel"] {
        if example == "panel" {
            panel_findings(&sb);
        }
        run(
            &format!("example {example}"),
            sb.command(Path::new(
                &std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            ))
            .current_dir(workspace_root())
            .args([
                "run",
                "--quiet",
                "-p",
                "handoff-examples",
                "--example",
                example,
            ]),
        )?;
    }
    Ok(())
}

/// What the fake Codex and Claude Code answer the panel example with: one finding both raise
/// (merged, agreed by both) and one only Claude Code raises.
fn panel_findings(sb: &Sandbox) {
    let both = serde_json::json!({"file": "src/lib.rs", "line": 2, "severity": "high",
        "summary": "words[0] panics on an empty slice"});
    sb.agents.set(
        &format!("{}@codex", handoff_testkit::keys::FINDINGS),
        serde_json::json!([both]).to_string(),
    );
    sb.agents.set(
        &format!("{}@claude", handoff_testkit::keys::FINDINGS),
        serde_json::json!([
            {"file": "src/lib.rs", "line": 2, "severity": "medium",
             "summary": "Indexing words[0] panics when the slice is empty"},
            {"file": "src/lib.rs", "line": 1, "severity": "low",
             "summary": "first should return Option<String>"},
        ])
        .to_string(),
    );
}

fn schema(check: bool) -> Result<()> {
    let dir = workspace_root().join("schemas");
    if check {
        let drift = handoff_schema::check(&dir);
        if !drift.is_empty() {
            bail!(
                "schemas/ is out of date ({}); run `{}`",
                drift.join(", "),
                handoff_schema::REGENERATE
            );
        }
        eprintln!("schemas/ is up to date");
    } else {
        handoff_schema::write(&dir)?;
        eprintln!("wrote {}", dir.display());
    }
    Ok(())
}

fn ci() -> Result<()> {
    // handoff's own sandbox is tested with the system's bubblewrap.
    real::install_sandbox_tools()?;
    run(
        "cargo fmt --check",
        cargo().args(["fmt", "--all", "--", "--check"]),
    )?;
    run(
        "cargo clippy",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    schema(true)?;
    plugin::plugin(&workspace_root(), true)?;
    run(
        "cargo test",
        cargo().args(["test", "--workspace", "--no-fail-fast"]),
    )?;
    examples()?;
    macos::check_macos(&workspace_root())?;
    package::package(&workspace_root())?;
    eprintln!("==> ci passed");
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["ci"] => ci(),
        ["demo", ..] => demo::demo(&args[1..]),
        ["examples"] => examples(),
        ["package"] => package::package(&workspace_root()),
        ["schema"] => schema(false),
        ["schema", "--check"] => schema(true),
        ["plugin"] => plugin::plugin(&workspace_root(), false),
        ["plugin", "--check"] => plugin::plugin(&workspace_root(), true),
        ["dist", ..] => dist::dist(&args[1..]),
        ["npm-e2e"] => dist::e2e::npm_e2e(),
        ["workflows"] => workflows::workflows(&workspace_root()),
        ["check-macos"] => macos::check_macos(&workspace_root()),
        ["e2e-real"] => real::e2e_real(&workspace_root(), cargo, real::Lane::Pinned),
        ["e2e-real", "--latest"] => real::e2e_real(&workspace_root(), cargo, real::Lane::Latest),
        ["bench", ..] => bench::bench(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci | demo [--json] | examples | package | dist [--debug | --from-archives DIR] | npm-e2e | workflows | check-macos | e2e-real [--latest] | bench | schema [--check] | plugin [--check]>"
            );
            std::process::exit(2);
        }
    }
}
