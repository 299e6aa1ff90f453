//! Project tasks, run as `cargo xtask <task>`:
//!
//! - `ci`: format check, clippy with `-D warnings`, every hermetic test, the examples.
//! - `demo`: a build handoff then a review handoff on the bundled fake agent, in a scratch repo.
//! - `schema [--check]`: regenerate (or check) `schemas/*.json` from the contract types.
//! - `plugin [--check]`: regenerate (or check) the Claude Code and Codex plugin under `plugin/`.
//! - `e2e-real`: the real Claude Code, Codex and OpenCode CLIs against the scripted model server,
//!   and `continue --on` over a real OpenSSH server.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod plugin;
mod real;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use handoff_testkit::{FakeAgents, ScratchRepo};

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
    exe.parent()
        .map(Path::to_path_buf)
        .context("the xtask binary has no parent directory")
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

fn demo() -> Result<()> {
    let handoff = build_binaries()?;
    let sb = Sandbox::new()?;
    let repo = ScratchRepo::new();
    let cwd = repo.path().to_string_lossy().into_owned();
    println!("scratch repository: {cwd}");
    println!("fake agents:        {}", sb.agents.bin_dir.display());

    let steps = [
        (
            "run",
            "build",
            "claude",
            "codex",
            "Add a greeting file for new contributors, then summarize what you changed.",
        ),
        (
            "run",
            "review",
            "codex",
            "claude",
            "Review the greeting file that was just added. Do not change anything.",
        ),
        (
            "run-with-advice",
            "review",
            "codex",
            "claude",
            "Review the greeting file again; ask Codex for a second opinion first.",
        ),
    ];
    for (i, (verb, mode, caller, target, text)) in steps.iter().enumerate() {
        if *verb == "run-with-advice" {
            // The fake worker asks for advice through the command its prompt names, of an
            // adviser at least as isolated as itself (Codex's read-only sandbox).
            sb.agents.set(handoff_testkit::keys::ADVICE, "codex");
        }
        let instructions = sb.root.join(format!("private/instructions-{i}.txt"));
        std::fs::write(&instructions, text)?;
        let result = sb.root.join(format!("private/result-{i}.json"));
        println!(
            "\n$ handoff {verb} --caller-harness {caller} --harness {target} --mode {mode} --cwd {cwd} --instructions {} --result {}",
            instructions.display(),
            result.display()
        );
        let out = sb
            .command(&handoff)
            .args([
                *verb,
                "--caller-harness",
                caller,
                "--harness",
                target,
                "--mode",
                mode,
            ])
            .arg("--cwd")
            .arg(&cwd)
            .arg("--instructions")
            .arg(&instructions)
            .arg("--result")
            .arg(&result)
            .output()
            .context("cannot run handoff")?;
        let code = out.status.code().unwrap_or(-1);
        let value: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "handoff printed no result: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        println!("{}", serde_json::to_string_pretty(&value)?);
        println!(
            "--> {mode} on {target}: status {}, exit {code}, changed files {}",
            value["status"], value["git"]["changedFiles"]
        );
        let nested: Vec<&serde_json::Value> = value["dag"]["nodes"]
            .as_array()
            .map(|n| n.iter().skip(1).collect())
            .unwrap_or_default();
        for n in &nested {
            println!(
                "    nested {} → {}: {}",
                n["callerHarness"], n["targetHarness"], n["state"]
            );
        }
        if *verb == "run-with-advice" && !nested.iter().any(|n| n["state"] == "succeeded") {
            bail!("the worker's nested advice did not succeed");
        }
        if code != 0 {
            bail!("the {mode} handoff did not succeed (exit {code})");
        }
        if std::fs::read(&result)? != out.stdout {
            bail!("the result file differs from stdout");
        }
    }
    println!(
        "\nall three handoffs succeeded (the last one with nested advice); the result files and \
         stdout agree."
    );
    continue_demo(&handoff, &sb, &repo, &cwd)
}

/// The task itself moves from Claude Code to Codex: checkpoint, note, receiver, timeline.
fn continue_demo(handoff: &Path, sb: &Sandbox, repo: &ScratchRepo, cwd: &str) -> Result<()> {
    for (k, v) in [
        ("user.name", "handoff demo"),
        ("user.email", "demo@example.invalid"),
    ] {
        repo.git(&["config", k, v]);
    }
    let sections = [
        ("Goal", "Welcome new contributors with a greeting file."),
        (
            "Current state",
            "The greeting file exists and was reviewed twice.",
        ),
        (
            "Done and verified",
            "Greeting added; two reviews found nothing blocking.",
        ),
        ("In progress", "None"),
        ("Next steps", "1. Link the greeting from README.md."),
        (
            "Decisions and constraints",
            "Keep the greeting to one short paragraph.",
        ),
        ("Open questions", "None"),
        ("How to verify", "- `git log --oneline -3`"),
        ("Git state", "Filled in by handoff."),
    ];
    let mut note = String::from("# Handoff note\n");
    for (title, body) in sections {
        note.push_str(&format!("\n## {title}\n\n{body}\n"));
    }
    let note_path = sb.root.join("private/handoff-note.md");
    std::fs::write(&note_path, note)?;
    // The delegated runs above keep no sessions: the first handoff starts Codex from the note
    // and a recap alone.
    let first = continue_step(
        handoff,
        sb,
        cwd,
        &note_path,
        &[
            "--from",
            "claude",
            "--to",
            "codex",
            "--fallback",
            "fresh-agent",
            "--message",
            "Link the greeting from the README",
        ],
    )?;
    println!(
        "--> the task is with codex now (continuity {}); resume its session with: {}",
        first["continuity"]["result"],
        first["receiver"]["resume"]["shell"].as_str().unwrap_or("?")
    );
    // Back to Claude Code: Codex's session is carried into Claude Code's store and resumed.
    let second = continue_step(
        handoff,
        sb,
        cwd,
        &note_path,
        &["--to", "claude", "--message", "Check the README link"],
    )?;
    println!(
        "--> {} messages of codex's session carried ({}) into claude session {}; continuity {}",
        second["carry"]["messages"],
        second["carry"]["mode"],
        second["carry"]["sessionId"],
        second["continuity"]["result"]
    );
    if second["continuity"]["result"] != "continued" {
        bail!("the carried conversation was not continued");
    }
    println!("\n$ handoff log --cwd {cwd}");
    let log = sb
        .command(handoff)
        .args(["log", "--cwd", cwd])
        .output()
        .context("cannot run handoff log")?;
    print!("{}", String::from_utf8_lossy(&log.stdout));
    if !log.status.success() {
        bail!(
            "handoff log failed: {}",
            String::from_utf8_lossy(&log.stderr)
        );
    }
    Ok(())
}

/// One `handoff continue` of the demo: prints the command and its result.
fn continue_step(
    handoff: &Path,
    sb: &Sandbox,
    cwd: &str,
    note: &Path,
    args: &[&str],
) -> Result<serde_json::Value> {
    println!(
        "\n$ handoff continue --cwd {} --note-file {} {}",
        shlex::try_quote(cwd)?,
        shlex::try_quote(&note.to_string_lossy())?,
        shlex::try_join(args.iter().copied())?
    );
    let out = sb
        .command(handoff)
        .args(["continue", "--cwd", cwd])
        .arg("--note-file")
        .arg(note)
        .args(args)
        .output()
        .context("cannot run handoff continue")?;
    let code = out.status.code().unwrap_or(-1);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "handoff continue printed no result: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    println!("{}", serde_json::to_string_pretty(&value)?);
    if code != 0 {
        bail!(
            "the continuation did not succeed (exit {code}): {}",
            value["reason"]
        );
    }
    Ok(value)
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
        ["demo"] => demo(),
        ["examples"] => examples(),
        ["schema"] => schema(false),
        ["schema", "--check"] => schema(true),
        ["plugin"] => plugin::plugin(&workspace_root(), false),
        ["plugin", "--check"] => plugin::plugin(&workspace_root(), true),
        ["e2e-real"] => real::e2e_real(&workspace_root(), cargo),
        ["bench", ..] => bench::bench(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask <ci | demo | examples | e2e-real | bench | schema [--check] | plugin [--check]>"
            );
            std::process::exit(2);
        }
    }
}
