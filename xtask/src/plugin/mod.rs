//! `cargo xtask plugin [--check]`: the plugin bundle under `plugin/` that Claude Code and Codex
//! install, generated from the one template in this module.
//!
//! `plugin/` is at the same time the plugin root (`.claude-plugin/plugin.json`,
//! `.codex-plugin/plugin.json`, `skills/`, `commands/`) and a local marketplace listing it for
//! each host (`.claude-plugin/marketplace.json`, `.agents/plugins/marketplace.json`, both with the
//! plugin's source `./`). Every file in it is rendered here: the per-agent controls come from the
//! adapters' static specs and the exit codes from the core's verdicts, so the prose cannot drift
//! from the binary it drives. `--check` fails listing every file that differs, is missing or is
//! not generated, and every rule of [`validate`] the files break.
//!
//! The template is [`manifests`], [`skills`] and [`commands`], whose bodies are the [`prose`];
//! [`files`] writes it and finds drift, [`rules`] checks what is on disk, and [`yaml`] is the
//! YAML we emit and read back.

mod commands;
mod files;
mod hooks;
mod jobs;
mod launcher;
mod manifests;
mod prose;
mod rules;
mod skills;
mod yaml;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Result, bail};
use handoff_core::ProviderSpec;
use serde_json::Value;

use files::{drift, write};
use rules::validate;

/// The plugin's name (`/handoff:<skill>` in Claude Code, `$handoff:<skill>` in Codex).
pub const PLUGIN: &str = "handoff";
/// The name of the local marketplace both hosts add from `plugin/`.
pub const MARKETPLACE: &str = "handoff-local";
/// The plugin's version: the workspace's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The command that rewrites `plugin/`.
pub const REGENERATE: &str = "cargo xtask plugin";

/// The skill that hands the task itself over (`handoff continue`).
pub const CONTINUE_SKILL: &str = "handoff-continue";
/// The skill that asks several agents at once (`--harness a,b`: a panel).
pub const PANEL_SKILL: &str = "ask-panel";

/// One agent handoff can delegate to.
struct Target {
    spec: &'static ProviderSpec,
    name: &'static str,
}

impl Target {
    fn id(&self) -> &'static str {
        self.spec.id.as_str()
    }
}

fn targets() -> Vec<Target> {
    vec![
        Target {
            spec: &handoff_adapters::CODEX_SPEC,
            name: "Codex",
        },
        Target {
            spec: &handoff_adapters::CLAUDE_SPEC,
            name: "Claude Code",
        },
        Target {
            spec: &handoff_adapters::GROK_SPEC,
            name: "Grok",
        },
        Target {
            spec: &handoff_adapters::KIRO_SPEC,
            name: "Kiro",
        },
        Target {
            spec: &handoff_adapters::OPENCODE_SPEC,
            name: "OpenCode",
        },
        Target {
            spec: &handoff_adapters::CURSOR_SPEC,
            name: "Cursor",
        },
        Target {
            spec: &handoff_adapters::COPILOT_SPEC,
            name: "GitHub Copilot CLI",
        },
        Target {
            spec: &handoff_adapters::GEMINI_SPEC,
            name: "Gemini CLI",
        },
        Target {
            spec: &handoff_adapters::QWEN_SPEC,
            name: "Qwen Code",
        },
    ]
}

/// Who runs a skill or command: shared skills work in both hosts, commands only in Claude Code.
#[derive(Clone, Copy, PartialEq)]
enum Host {
    Either,
    ClaudeCode,
}

/// What the delegated agent is asked to do.
#[derive(Clone, Copy, PartialEq)]
enum Verb {
    Advice,
    Run,
    RunWithAdvice,
}

impl Verb {
    fn command(self) -> &'static str {
        match self {
            Verb::Advice => "advice",
            Verb::Run => "run",
            Verb::RunWithAdvice => "run-with-advice",
        }
    }
}

/// A generated file, its path relative to `plugin/`.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub path: String,
    pub text: String,
}

/// Every file of `plugin/`, in path order.
pub fn render() -> Vec<File> {
    let mut files = BTreeMap::new();
    let mut add = |path: String, text: String| {
        files.insert(path.clone(), File { path, text });
    };
    for skill in skills::skills() {
        add(
            format!("skills/{}/SKILL.md", skill.name),
            skills::skill_md(&skill.name, &skill.description, &skill.body),
        );
        add(
            format!("skills/{}/agents/openai.yaml", skill.name),
            skills::openai_yaml(&skill),
        );
    }
    for command in commands::commands().into_iter().chain(jobs::job_commands()) {
        add(format!("commands/{}.md", command.name), command.text);
    }
    for (path, value) in manifests::manifests() {
        add(path.to_owned(), pretty(&value));
    }
    add("hooks/hooks.json".to_owned(), pretty(&hooks::hooks_json()));
    add(launcher::PATH.to_owned(), launcher::script());
    add(".mcp.json".to_owned(), pretty(&launcher::mcp_json()));
    add(
        launcher::CODEX_MCP.to_owned(),
        pretty(&launcher::codex_mcp_json()),
    );
    add("README.md".to_owned(), README.to_owned());
    files.into_values().collect()
}

/// The plugin's own README: what a person sees in a plugin directory before installing it
/// (Claude Code's `plugin validate` asks for one of at least 40 words).
const README: &str = "\
# handoff plugin for Claude Code and Codex

Generated by `cargo xtask plugin`; do not edit by hand.

This plugin lets the agent you are talking to hand part of the work to another coding agent
through the `handoff` binary: delegate a build or a review to Codex, Claude Code, Grok, Kiro,
OpenCode, Cursor, GitHub Copilot CLI, Gemini CLI or Qwen Code, ask one or several of them for read-only advice, or continue the whole task
on another agent. Each skill and command runs `handoff` with exact flags and reads back its one
result JSON, whose git evidence says what the other agent changed.

Everything starts `handoff` through `bin/handoff`, which finds the binary on `PATH` (never in
the repository you are working in), in `~/.cargo/bin`, the npm global prefix or Homebrew's
prefix; the plugin's MCP server (`.mcp.json`) is `handoff mcp` started the same way. Install
the binary with `npm install -g handoff-cli`, `brew install handoff-cli/tap/handoff-cli` or
`cargo install handoff-cli`, and log in to the agent CLIs you want to delegate to as usual.
`handoff doctor` checks both.
";

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// `cargo xtask plugin [--check]`.
pub fn plugin(root: &Path, check: bool) -> Result<()> {
    let dir = root.join("plugin");
    if !check {
        write(&dir)?;
    }
    let drifted = drift(&dir, &render());
    let problems = validate(&dir);
    if !drifted.is_empty() || !problems.is_empty() {
        let mut msg = String::new();
        for d in &drifted {
            let _ = writeln!(msg, "  {d}");
        }
        for p in &problems {
            let _ = writeln!(msg, "  {p}");
        }
        if drifted.is_empty() {
            bail!("plugin/ breaks the hosts' rules:\n{msg}");
        }
        bail!("plugin/ is out of date; run `{REGENERATE}`:\n{msg}");
    }
    if check {
        eprintln!("plugin/ is up to date");
    } else {
        eprintln!("wrote {}", dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked_in() -> std::path::PathBuf {
        crate::workspace_root().join("plugin")
    }

    #[test]
    fn the_checked_in_plugin_is_what_the_template_renders() {
        let drift = drift(&checked_in(), &render());
        assert!(
            drift.is_empty(),
            "plugin/ is out of date; run `{REGENERATE}`:\n{}",
            drift
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    #[test]
    fn the_checked_in_plugin_keeps_the_hosts_rules() {
        let problems = validate(&checked_in());
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn the_plugin_version_is_the_workspace_version() {
        let cargo = std::fs::read_to_string(crate::workspace_root().join("Cargo.toml")).unwrap();
        let package = cargo.split("[workspace.package]").nth(1).unwrap();
        let line = package
            .lines()
            .find(|l| l.trim_start().starts_with("version"))
            .unwrap();
        assert_eq!(line.split('"').nth(1), Some(VERSION));
    }

    #[test]
    fn the_surface_has_every_skill_and_command() {
        let files = render();
        let skills = files
            .iter()
            .filter(|f| f.path.ends_with("/SKILL.md"))
            .count();
        let yamls = files
            .iter()
            .filter(|f| f.path.ends_with("/openai.yaml"))
            .count();
        let commands = files
            .iter()
            .filter(|f| f.path.starts_with("commands/"))
            .count();
        assert_eq!((skills, yamls, commands), (23, 23, 39));
    }
}
