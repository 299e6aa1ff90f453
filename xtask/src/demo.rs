//! `cargo xtask demo [--json]`: handoff's main job on the bundled fake agents, in a scratch
//! repository, shown step by step as a person sees it: the command, the summary `handoff` prints
//! on a terminal, what the agent said, and where the full JSON is. `--json` prints the full JSON
//! of each step as well.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use handoff_core::summary::{continue_summary, run_summary};
use handoff_core::{ContinueResult, HandoffResult};
use handoff_testkit::ScratchRepo;

use crate::Sandbox;

/// What the demo writes to, and how much; the sandbox and the `handoff` it runs.
struct Show<'a> {
    out: &'a mut dyn Write,
    json: bool,
    step: usize,
    sb: &'a Sandbox,
    handoff: &'a Path,
}

/// What one `handoff` command of the demo printed.
struct Ran {
    code: i32,
    stdout: Vec<u8>,
    value: serde_json::Value,
}

impl Show<'_> {
    fn line(&mut self, text: impl AsRef<str>) -> Result<()> {
        writeln!(self.out, "{}", text.as_ref())?;
        Ok(())
    }

    /// A step's heading and its command.
    fn step(&mut self, title: &str, argv: &[String]) -> Result<()> {
        self.step += 1;
        let step = self.step;
        self.line(format!("\n{step}. {title}"))?;
        let words: Vec<String> = std::iter::once("handoff")
            .chain(argv.iter().map(String::as_str))
            .map(|w| shlex::try_quote(w).map_or_else(|_| w.to_owned(), |q| q.into_owned()))
            .collect();
        self.line(format!("   $ {}", words.join(" ")))
    }

    /// A step that runs `handoff ARGV` and reads the JSON line it prints.
    fn run(&mut self, title: &str, argv: &[String]) -> Result<Ran> {
        self.step(title, argv)?;
        let out = self
            .sb
            .command(self.handoff)
            .args(argv)
            .output()
            .with_context(|| format!("cannot run handoff {}", argv[0]))?;
        let value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "handoff {} printed no result: {}",
                argv[0],
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        Ok(Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            value,
        })
    }

    /// A summary, indented under the step.
    fn summary(&mut self, text: &str) -> Result<()> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_start();
            if i == 0 {
                self.line(format!("   {line}"))?;
            } else {
                self.line(format!("     {line}"))?;
            }
        }
        Ok(())
    }

    /// Where the full JSON is, and the JSON itself with `--json`.
    fn full(&mut self, path: &Path, value: &serde_json::Value) -> Result<()> {
        self.line(format!("   full JSON: {}", path.display()))?;
        if self.json {
            self.line(serde_json::to_string_pretty(value)?)?;
        }
        Ok(())
    }
}

/// Entry point: `cargo xtask demo [--json]`.
pub fn demo(args: &[String]) -> Result<()> {
    let mut json = false;
    for arg in args {
        match arg.as_str() {
            "--json" => json = true,
            "--help" | "-h" => {
                println!("usage: cargo xtask demo [--json]");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}; usage: cargo xtask demo [--json]"),
        }
    }
    let handoff = crate::build_binaries()?;
    let mut stdout = std::io::stdout().lock();
    run(&handoff, json, &mut stdout)
}

/// The whole demo, written to `out`.
pub fn run(handoff: &Path, json: bool, out: &mut dyn Write) -> Result<()> {
    let sb = Sandbox::new()?;
    let repo = ScratchRepo::new();
    let cwd = repo.path().to_string_lossy().into_owned();
    let mut show = Show {
        out,
        json,
        step: 0,
        sb: &sb,
        handoff,
    };
    show.line("handoff demo: the bundled fake agents stand in for Claude Code and Codex")?;
    show.line(format!("   scratch repository: {cwd}"))?;
    show.line(format!(
        "   fake agents:        {}",
        sb.agents.bin_dir.display()
    ))?;
    show.line(format!(
        "   results and notes:  {}",
        sb.root.join("private").display()
    ))?;

    let steps = [
        (
            "Claude Code delegates a build to Codex",
            "run",
            "build",
            "claude",
            "codex",
            "Add a greeting file for new contributors, then summarize what you changed.",
        ),
        (
            "Codex asks Claude Code to review it (a review must leave the worktree unchanged)",
            "run",
            "review",
            "codex",
            "claude",
            "Review the greeting file that was just added. Do not change anything.",
        ),
        (
            "Again, and the reviewer asks Codex for a second opinion through handoff",
            "run-with-advice",
            "review",
            "codex",
            "claude",
            "Review the greeting file again; ask Codex for a second opinion first.",
        ),
    ];
    for (title, verb, mode, caller, target, text) in steps {
        if verb == "run-with-advice" {
            // The fake worker asks for advice through the command its prompt names, of an
            // adviser at least as isolated as itself (Codex's read-only sandbox).
            sb.agents.set(handoff_testkit::keys::ADVICE, "codex");
        }
        let n = show.step + 1;
        let instructions = sb.root.join(format!("private/instructions-{n}.txt"));
        std::fs::write(&instructions, text)?;
        let result_path = sb.root.join(format!("private/result-{n}.json"));
        let argv: Vec<String> = [
            verb,
            "--caller-harness",
            caller,
            "--harness",
            target,
            "--mode",
            mode,
            "--cwd",
            &cwd,
            "--instructions",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([
            instructions.to_string_lossy().into_owned(),
            "--result".to_owned(),
            result_path.to_string_lossy().into_owned(),
        ])
        .collect();
        let Ran {
            code,
            stdout,
            value,
        } = show.run(title, &argv)?;
        let result: HandoffResult = serde_json::from_value(value.clone())
            .context("handoff's result does not read as handoff.result")?;
        show.summary(&run_summary(&result))?;
        if let Some(summary) = &result.output.response {
            show.line(format!("   the agent said: {}", first_line(summary)))?;
        }
        let nested: Vec<&serde_json::Value> = value["dag"]["nodes"]
            .as_array()
            .map(|n| n.iter().skip(1).collect())
            .unwrap_or_default();
        for node in &nested {
            show.line(format!(
                "   nested advice: {} asked {}: {}",
                node["callerHarness"].as_str().unwrap_or("?"),
                node["targetHarness"].as_str().unwrap_or("?"),
                node["state"].as_str().unwrap_or("?")
            ))?;
        }
        show.full(&result_path, &value)?;
        if verb == "run-with-advice" && !nested.iter().any(|n| n["state"] == "succeeded") {
            bail!("the worker's nested advice did not succeed");
        }
        if code != 0 {
            bail!("the {mode} handoff did not succeed (exit {code})");
        }
        if std::fs::read(&result_path)? != stdout {
            bail!("the result file differs from stdout");
        }
    }
    continuation(&repo, &cwd, &mut show)?;
    show.line("\nEvery step succeeded.")
}

/// The task itself moves from Claude Code to Codex and back: checkpoint, note, receiver,
/// carried conversation, timeline.
fn continuation(repo: &ScratchRepo, cwd: &str, show: &mut Show<'_>) -> Result<()> {
    let sb = show.sb;
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
        show,
        cwd,
        &note_path,
        "Claude Code hands the whole task to Codex, from a handoff note",
        &[
            "codex",
            "--from",
            "claude",
            "--fallback",
            "fresh-agent",
            "--message",
            "Link the greeting from the README",
        ],
    )?;
    if first.continuity.is_none() {
        bail!("the first continuation reports no continuity");
    }
    // Back to Claude Code: Codex's session is carried into Claude Code's store and resumed.
    let second = continue_step(
        show,
        cwd,
        &note_path,
        "Codex hands it back to Claude Code, its conversation carried along",
        &["claude", "--message", "Check the README link"],
    )?;
    if second.continuity.as_ref().map(|c| c.result.as_str()) != Some("continued") {
        bail!("the carried conversation was not continued");
    }
    let argv = ["log", "--cwd", cwd].map(str::to_owned);
    show.step("The task's timeline: who had it, what each did", &argv)?;
    let log = sb
        .command(show.handoff)
        .args(&argv)
        .output()
        .context("cannot run handoff log")?;
    if !log.status.success() {
        bail!(
            "handoff log failed: {}",
            String::from_utf8_lossy(&log.stderr)
        );
    }
    for line in String::from_utf8_lossy(&log.stdout).lines() {
        show.line(format!("   {line}"))?;
    }
    Ok(())
}

/// One `handoff continue` of the demo: shows the command and its summary, keeps the JSON.
fn continue_step(
    show: &mut Show<'_>,
    cwd: &str,
    note: &Path,
    title: &str,
    args: &[&str],
) -> Result<ContinueResult> {
    let mut argv: Vec<String> = vec!["continue".to_owned(), args[0].to_owned()];
    argv.extend(["--cwd".to_owned(), cwd.to_owned()]);
    argv.extend([
        "--note-file".to_owned(),
        note.to_string_lossy().into_owned(),
    ]);
    argv.extend(args[1..].iter().map(|a| (*a).to_owned()));
    let Ran {
        code,
        stdout,
        value,
    } = show.run(title, &argv)?;
    let result: ContinueResult = serde_json::from_value(value.clone())
        .context("handoff's result does not read as handoff.continue")?;
    show.summary(&continue_summary(&result))?;
    let path = show
        .sb
        .root
        .join(format!("private/continue-{}.json", show.step));
    std::fs::write(&path, &stdout)?;
    show.full(&path, &value)?;
    if code != 0 {
        bail!(
            "the continuation did not succeed (exit {code}): {}",
            result.reason.unwrap_or_default()
        );
    }
    Ok(result)
}

fn first_line(text: &str) -> String {
    handoff_core::printable(text.lines().next().unwrap_or_default().trim(), false).into_owned()
}

#[cfg(test)]
mod tests {
    /// The demo as a person reads it, with what changes from run to run (temporary paths,
    /// ids, commits, times) filtered out.
    #[test]
    fn the_demo_reads_as_a_person_sees_it() {
        let handoff = crate::build_binaries().unwrap();
        let mut out = Vec::new();
        super::run(&handoff, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        insta::with_settings!({filters => vec![
            (r"/[^ ]*/handoff-scratch-[A-Za-z0-9]+", "[REPO]"),
            (r"/[^ ]*/handoff-demo-[A-Za-z0-9]+", "[DEMO]"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", "[TIME]"),
            (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[UUID]"),
            (r"\b[0-9a-f]{7,40}\b", "[COMMIT]"),
            (r"\d+\.\d s\b", "[SECONDS] s"),
        ]}, {
            insta::assert_snapshot!(text);
        });
    }
}
