//! `cargo xtask plugin [--check]`: the plugin bundle under `plugin/` that Claude Code and Codex
//! install, generated from the one template in this file.
//!
//! `plugin/` is at the same time the plugin root (`.claude-plugin/plugin.json`,
//! `.codex-plugin/plugin.json`, `skills/`, `commands/`) and a local marketplace listing it for
//! each host (`.claude-plugin/marketplace.json`, `.agents/plugins/marketplace.json`, both with the
//! plugin's source `./`). Every file in it is rendered here: the per-agent controls come from the
//! adapters' static specs and the exit codes from the core's verdicts, so the prose cannot drift
//! from the binary it drives. `--check` fails listing every file that differs, is missing or is
//! not generated, and every rule of [`validate`] the files break.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Result, bail};
use handoff_core::{ProviderSpec, Verdict};
use serde_json::{Value, json};

/// The plugin's name (`/handoff:<skill>` in Claude Code, `$handoff:<skill>` in Codex).
pub const PLUGIN: &str = "handoff";
/// The name of the local marketplace both hosts add from `plugin/`.
pub const MARKETPLACE: &str = "handoff-local";
/// The plugin's version: the workspace's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The command that rewrites `plugin/`.
pub const REGENERATE: &str = "cargo xtask plugin";

const LICENSE: &str = env!("CARGO_PKG_LICENSE");
const AUTHOR: &str = "handoff contributors";
const DESCRIPTION: &str = "Delegate bounded coding tasks to Codex, Claude Code, Grok, Kiro, \
OpenCode or Cursor, ask them for read-only advice, and hand a whole task over to another agent, \
through the handoff CLI and its verified JSON results.";

/// The skill that hands the task itself over (`handoff continue`).
pub const CONTINUE_SKILL: &str = "handoff-continue";

/// Hosts' limits on a skill (the Agent Skills rules both Claude Code and Codex apply).
const MAX_NAME: usize = 64;
const MAX_DESCRIPTION: usize = 1024;
/// Codex's limits on `agents/openai.yaml` and the plugin manifest.
const SHORT_DESCRIPTION: std::ops::RangeInclusive<usize> = 25..=64;
const MAX_DEFAULT_PROMPTS: usize = 3;
const MAX_DEFAULT_PROMPT: usize = 128;
/// Keys Codex accepts in a SKILL.md front matter.
const SKILL_KEYS: &[&str] = &[
    "name",
    "description",
    "license",
    "allowed-tools",
    "metadata",
];
/// Keys a Claude Code command's front matter may have.
const COMMAND_KEYS: &[&str] = &[
    "description",
    "argument-hint",
    "allowed-tools",
    "disable-model-invocation",
    "model",
];
/// Manifest keys the bundle must never use: it ships prose only, no code to run.
const FORBIDDEN_MANIFEST_KEYS: &[&str] = &[
    "bin",
    "executables",
    "path",
    "mcpServers",
    "hooks",
    "apps",
    "lspServers",
];

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
    for skill in skills() {
        add(
            format!("skills/{}/SKILL.md", skill.name),
            skill_md(&skill.name, &skill.description, &skill.body),
        );
        add(
            format!("skills/{}/agents/openai.yaml", skill.name),
            openai_yaml(&skill),
        );
    }
    for command in commands() {
        add(format!("commands/{}.md", command.name), command.text);
    }
    for (path, value) in manifests() {
        add(path.to_owned(), pretty(&value));
    }
    files.into_values().collect()
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

// ---------------------------------------------------------------------------------------------
// Manifests

fn manifests() -> Vec<(&'static str, Value)> {
    let keywords = json!([
        "delegation",
        "agents",
        "codex",
        "claude-code",
        "grok",
        "kiro",
        "opencode",
        "cursor",
        "handoff"
    ]);
    vec![
        (
            ".claude-plugin/plugin.json",
            json!({
                "name": PLUGIN,
                "version": VERSION,
                "description": DESCRIPTION,
                "author": { "name": AUTHOR },
                "license": LICENSE,
                "keywords": keywords,
                "skills": "./skills",
                "commands": "./commands",
            }),
        ),
        (
            ".claude-plugin/marketplace.json",
            json!({
                "name": MARKETPLACE,
                "description": "The handoff plugin, from a local checkout.",
                "owner": { "name": AUTHOR },
                "plugins": [{
                    "name": PLUGIN,
                    "source": "./",
                    "description": DESCRIPTION,
                    "version": VERSION,
                    "author": { "name": AUTHOR },
                    "license": LICENSE,
                    "category": "development",
                }],
            }),
        ),
        (
            ".codex-plugin/plugin.json",
            json!({
                "name": PLUGIN,
                "version": VERSION,
                "description": DESCRIPTION,
                "author": { "name": AUTHOR },
                "license": LICENSE,
                "keywords": keywords,
                "skills": "./skills/",
                "interface": {
                    "displayName": "handoff",
                    "shortDescription": "Delegate, get advice, and hand tasks over between agent CLIs",
                    "longDescription": "Skills that drive the handoff CLI: hand a bounded build, \
            review or verification to Codex, Claude Code, Grok, Kiro, OpenCode or Cursor and read back one \
            verified JSON result with git evidence; ask another agent for read-only advice; or hand the whole \
            task to another agent with a checkpoint and a nine-section note, in a session the person can resume.",
                    "developerName": AUTHOR,
                    "category": "Coding",
                    "capabilities": ["Interactive", "Write"],
                    "defaultPrompt": [
                        "Ask Claude Code for a second opinion on this change",
                        "Have Claude Code review the current branch",
                        "Hand this task off to Claude Code and save where we are",
                    ],
                },
            }),
        ),
        (
            ".agents/plugins/marketplace.json",
            json!({
                "name": MARKETPLACE,
                "interface": { "displayName": "handoff (local checkout)" },
                "plugins": [{
                    "name": PLUGIN,
                    "source": { "source": "local", "path": "./" },
                    "policy": { "installation": "AVAILABLE", "authentication": "ON_INSTALL" },
                    "category": "Coding",
                }],
            }),
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Skills

struct Skill {
    name: String,
    description: String,
    display_name: String,
    short_description: String,
    default_prompt: String,
    body: String,
}

fn skills() -> Vec<Skill> {
    let mut out = vec![
        Skill {
            name: "get-advice".into(),
            description: "Ask another agent CLI (Codex, Claude Code, Grok, Kiro, OpenCode or \
Cursor) for a read-only second opinion through the handoff command, and read back one verified \
JSON result. Use when the person asks for advice, a second opinion, or another model's view of \
code, a design, a plan or a bug."
                .into(),
            display_name: "Get advice".into(),
            short_description: "Ask another agent for a read-only opinion".into(),
            default_prompt: format!(
                "Use ${PLUGIN}:get-advice to ask another agent about this change"
            ),
            body: delegation_body(Host::Either, Verb::Advice, None, None),
        },
        Skill {
            name: "handoff-run".into(),
            description: "Hand a bounded coding task (build, phase, review or verify) to another \
agent CLI through the handoff command and read back one verified JSON result with git evidence of \
what it changed. Use when the person asks to delegate, hand off or farm out a task to Codex, \
Claude Code, Grok, Kiro, OpenCode or Cursor, naming the agent or leaving the choice to you."
                .into(),
            display_name: "Delegate a task".into(),
            short_description: "Delegate a bounded task to another agent CLI".into(),
            default_prompt: format!("Use ${PLUGIN}:handoff-run to delegate this task"),
            body: delegation_body(Host::Either, Verb::Run, None, None),
        },
        Skill {
            name: "handoff-run-with-advice".into(),
            description: "Hand a bounded coding task to another agent CLI through handoff, with \
that worker allowed to ask further agents for read-only advice under a budgeted supervisor. Use \
when the person wants a task delegated and a second opinion gathered along the way, or asks for a \
delegation with advice."
                .into(),
            display_name: "Delegate with advice".into(),
            short_description: "Delegate a task; the worker may ask for advice".into(),
            default_prompt: format!(
                "Use ${PLUGIN}:handoff-run-with-advice to delegate this task with advice"
            ),
            body: delegation_body(Host::Either, Verb::RunWithAdvice, None, None),
        },
    ];
    for t in targets() {
        let id = t.id();
        out.push(Skill {
            name: format!("handoff-{id}"),
            description: format!(
                "Delegate a bounded coding task to {name} through the handoff command: a build or \
phase that must change the worktree, or a review or verification that must not; read back one \
verified JSON result with git evidence. Use when the person asks {name} to build, fix, implement, \
review or verify something.",
                name = t.name
            ),
            display_name: format!("Delegate to {}", t.name),
            short_description: format!("Delegate a bounded task to {}", t.name),
            default_prompt: format!("Use ${PLUGIN}:handoff-{id} to hand this task to {}", t.name),
            body: delegation_body(Host::Either, Verb::Run, Some(&t), None),
        });
        out.push(Skill {
            name: format!("handoff-{id}-with-advice"),
            description: format!(
                "Delegate a bounded coding task to {name} through handoff, with {name} allowed to \
ask other agents for read-only advice under a budgeted supervisor; read back one verified JSON \
result that lists every adviser. Use when the person wants {name} to do the work and consult \
other agents while doing it.",
                name = t.name
            ),
            display_name: format!("Delegate to {} with advice", t.name),
            short_description: format!("{} does the task and may ask for advice", t.name),
            default_prompt: format!(
                "Use ${PLUGIN}:handoff-{id}-with-advice to hand this task to {}",
                t.name
            ),
            body: delegation_body(Host::Either, Verb::RunWithAdvice, Some(&t), None),
        });
    }
    out.push(Skill {
        name: CONTINUE_SKILL.into(),
        description: "Hand the whole task over to another agent (Claude Code, Codex or OpenCode) \
and step back: checkpoint the work, write and check a nine-section handoff note, start the \
receiver in a session the person can resume, and report how to resume it. Use when the person \
says 'hand this off', 'continue on Codex', 'give this to Claude', 'save where we are' or 'write a \
handoff note'."
            .into(),
        display_name: "Hand the task over".into(),
        short_description: "Hand the whole task to another agent to resume".into(),
        default_prompt: format!("Use ${PLUGIN}:{CONTINUE_SKILL} to hand this task to Codex"),
        body: continue_body(),
    });
    out
}

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {}\n---\n\n{body}",
        quoted(description)
    )
}

fn openai_yaml(skill: &Skill) -> String {
    format!(
        "interface:\n  display_name: {}\n  short_description: {}\n  default_prompt: {}\n",
        quoted(&skill.display_name),
        quoted(&skill.short_description),
        quoted(&skill.default_prompt)
    )
}

/// A YAML double-quoted scalar (JSON's string syntax is a subset of it).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Claude Code commands

struct Command {
    name: String,
    text: String,
}

fn commands() -> Vec<Command> {
    let mut out = Vec::new();
    for t in targets() {
        for mode in ["build", "review"] {
            for verb in [Verb::Run, Verb::RunWithAdvice] {
                let suffix = if verb == Verb::RunWithAdvice {
                    "-with-advice"
                } else {
                    ""
                };
                let name = format!("{}-{mode}{suffix}", t.id());
                let what = if mode == "build" {
                    format!("Have {} build a change", t.name)
                } else {
                    format!("Have {} review the work, read-only", t.name)
                };
                let advice = if verb == Verb::RunWithAdvice {
                    ", asking other agents for advice as it goes"
                } else {
                    ""
                };
                let description =
                    format!("{what}{advice} (handoff {}, mode {mode})", verb.command());
                let hint = if mode == "build" {
                    "what to build"
                } else {
                    "what to review"
                };
                let mut front = format!(
                    "---\ndescription: {}\nargument-hint: {}\nallowed-tools: {}\n",
                    quoted(&description),
                    quoted(hint),
                    r#"["Bash", "Read", "Write", "Grep", "Glob"]"#
                );
                if mode == "build" {
                    // A build changes the person's worktree: only they start it.
                    front.push_str("disable-model-invocation: true\n");
                }
                front.push_str("---\n\n");
                let body = delegation_body(Host::ClaudeCode, verb, Some(&t), Some(mode));
                out.push(Command {
                    name,
                    text: front + &body,
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Prose

fn caller_line(host: Host) -> &'static str {
    match host {
        Host::Either => {
            "`--caller-harness` is you: `claude` when you are Claude Code, `codex` when you are \
Codex."
        }
        Host::ClaudeCode => "`--caller-harness claude`: you are Claude Code.",
    }
}

fn caller_value(host: Host) -> &'static str {
    match host {
        Host::Either => "<claude|codex>",
        Host::ClaudeCode => "claude",
    }
}

const FIND_BINARY: &str = r#"## 1. Find handoff

Run this once and note the absolute path it prints:

```sh
h="$(command -v handoff 2>/dev/null || true)"; case "$h" in /*) ;; *) h="$HOME/.cargo/bin/handoff" ;; esac
if [ -x "$h" ]; then echo "$h"; else echo "handoff is not installed"; fi
```

If it prints `handoff is not installed`, stop and tell the person in one line: handoff is not
on PATH or in `~/.cargo/bin`; install it with `cargo install --path handoff-cli` from its
repository. Do not look for another way to reach the agent.

Call handoff by that absolute path in every command below (shell variables do not survive
between tool calls, so write the path out). Never run an agent CLI yourself (`codex`, `claude`,
`grok`, `kiro-cli`, `opencode`, `cursor-agent`), not even to check that it is installed:
`'<handoff>' capabilities` does that without a model call.
"#;

const PRIVATE_DIR: &str = r#"## 2. Write the instructions to a private file

Make a private directory outside the repository and note the path it prints:

```sh
mktemp -d "${TMPDIR:-/tmp}/handoff.XXXXXXXX"
```

`mktemp -d` makes it readable by you only. If that path is inside the repository, make one
under `$HOME` instead. Never write the instructions, the result or any note inside the
repository. Use a new directory for each run: handoff never overwrites a result file.

Write `<dir>/instructions.md` with your file tool (or a quoted heredoc, `cat > … <<'EOF'`).
The other agent sees the repository but not this conversation, so make the file
self-contained: the goal, the files and functions involved, constraints and non-goals, what
"done" means and the commands that prove it. Never put secrets in it.
"#;

fn delegation_body(host: Host, verb: Verb, target: Option<&Target>, mode: Option<&str>) -> String {
    let mut s = String::new();
    let who = target.map_or("another agent CLI".to_owned(), |t| t.name.to_owned());
    let title = match (verb, mode) {
        (Verb::Advice, _) => "# Ask another agent for advice".to_owned(),
        (_, Some("build")) => format!("# Have {who} build it"),
        (_, Some(_)) => format!("# Have {who} review it"),
        (Verb::Run, None) => format!("# Delegate a task to {who}"),
        (Verb::RunWithAdvice, None) => format!("# Delegate a task to {who}, with advice"),
    };
    let _ = writeln!(s, "{title}\n");
    if host == Host::ClaudeCode {
        let _ = writeln!(
            s,
            "The task: $ARGUMENTS\n\nIf no task was given, ask the person what to {} and stop \
until they answer.\n",
            if mode == Some("build") {
                "build"
            } else {
                "review"
            }
        );
    }
    let intro = match verb {
        Verb::Advice => format!(
            "`handoff advice` asks {who} for a read-only answer: it must not change the worktree, \
and the adviser may itself ask further advisers. handoff starts it with exact controls, checks \
the worktree before and after, and prints one JSON result (`handoff.result.v1`)."
        ),
        Verb::Run => format!(
            "`handoff run` hands one bounded task to {who}, which cannot call handoff itself. \
handoff starts it with exact controls, fingerprints the git worktree before and after, and prints \
one JSON result (`handoff.result.v1`)."
        ),
        Verb::RunWithAdvice => format!(
            "`handoff run-with-advice` hands one bounded task to {who}, which may ask other agents \
for read-only advice through a supervisor handoff starts for the run (budgeted: depth, nodes, \
time). handoff fingerprints the git worktree before and after and prints one JSON result \
(`handoff.result.v1`) whose `dag` lists every adviser that was asked."
        ),
    };
    let _ = writeln!(s, "{intro}\n");
    s.push_str(FIND_BINARY);
    s.push('\n');
    s.push_str(PRIVATE_DIR);
    s.push('\n');
    s.push_str(&run_section(host, verb, target, mode));
    s.push('\n');
    s.push_str(&read_section(verb));
    s
}

fn run_section(host: Host, verb: Verb, target: Option<&Target>, mode: Option<&str>) -> String {
    let mut s =
        String::from("## 3. Run handoff\n\nFrom the repository, in one shell command:\n\n```sh\n");
    let harness = target.map_or("<agent>", Target::id);
    let _ = write!(
        s,
        "'<handoff>' {} --caller-harness {} --harness {harness}",
        verb.command(),
        caller_value(host)
    );
    if verb != Verb::Advice {
        let _ = write!(s, " --mode {}", mode.unwrap_or("<mode>"));
    }
    s.push_str(
        " \\\n  --cwd \"$(pwd -P)\" --instructions '<dir>/instructions.md' --result \
'<dir>/result.json'; echo \"exit=$?\"\n```\n\n",
    );
    let _ = writeln!(s, "- {}", caller_line(host));
    if target.is_none() {
        s.push_str(
            "- `--harness` is the agent that does the work: `codex`, `claude`, `grok`, `kiro`, \
`opencode` or `cursor`. Use the one the person named; if they left it to you, pick one that is \
not you and that `'<handoff>' capabilities` reports as ok.\n",
        );
    }
    if verb != Verb::Advice && mode.is_none() {
        s.push_str(
            "- `--mode` from what the person asked: `build` (implement or fix; must change the \
worktree), `phase` (one phase of a larger plan; must change it), `review` (read and report; must \
not change it) or `verify` (run the checks and report; must not change it). Ask if unclear.\n",
        );
    }
    if let Some(m) = mode {
        let rule = if m == "build" {
            "a build must leave a git-visible change"
        } else {
            "a review must leave the worktree exactly as it was"
        };
        let _ = writeln!(s, "- `--mode {m}`: {rule}.");
    }
    s.push_str(
        "- `--cwd \"$(pwd -P)\"` exactly: an absolute path without symlinks inside the git \
worktree.\n",
    );
    match target {
        Some(t) => {
            let _ = writeln!(
                s,
                "- Add only the controls the person asked for. {} accepts: {}.",
                t.name,
                controls(t.spec).join("; ")
            );
        }
        None => s.push_str(
            "- Add only the controls the person asked for (`--model`, `--effort`, \
`--max-turns`, `--bash`, `--web-search`, `--mcp-config`, `--timeout-ms`); \
`'<handoff>' capabilities` lists what each agent accepts, and anything it does not is refused \
before the agent starts.\n",
        ),
    }
    if verb == Verb::RunWithAdvice {
        s.push_str(
            "- The advice budgets have defaults; change them only when asked: `--max-depth`, \
`--max-nodes`, `--max-advice-nodes`, `--max-concurrency`, `--root-timeout-ms`.\n",
        );
    }
    s.push_str(
        "- A run can take minutes (`--timeout-ms`, default 600000). Give the shell call the \
longest timeout your tool allows, or run it in the background and wait for it; if your tool's \
limit is shorter, pass a `--timeout-ms` below it.\n",
    );
    s.push_str(
        "- If another run holds the worktree, handoff refuses (exit 5) and names it; add `--wait` \
only if the person wants to queue behind it.\n",
    );
    s
}

fn read_section(verb: Verb) -> String {
    let mut s = String::from(
        "## 4. Read the result\n\nThe JSON is on stdout and in `<dir>/result.json`. Only exit 0 \
with `\"status\": \"succeeded\"` is success; anything else is not, whatever the output says, and \
an empty or failed answer never means \"no findings\".\n\n",
    );
    s.push_str(&exit_table());
    s.push('\n');
    s.push_str(
        "Tell the person the status and exit code, then what matters from the result: \
`output.response`, `output.findings` and `output.evidence`; `git.changedFiles`; and on failure \
`diagnostics.message` quoted exactly, with the fix it points to (3: install or log in to that \
CLI; 5: correct the request; 8: narrow the task or raise `--timeout-ms`; 10: look at \
`git.changedFiles`).\n",
    );
    match verb {
        Verb::Advice => s.push_str(
            "\nAdvice is an opinion: weigh it against the code before you act on it, and say \
which agent gave it.\n",
        ),
        Verb::Run | Verb::RunWithAdvice => s.push_str(
            "\nA build's changes are left uncommitted in the worktree: read the diff (`git diff`, \
`git status`) before you call the work done, and run the checks that prove it. A review's \
findings are claims to verify, not facts.\n",
        ),
    }
    if verb == Verb::RunWithAdvice {
        s.push_str(
            "\nThe result's `dag.nodes` lists every node after the root: say which agents were \
consulted and in what state they ended.\n",
        );
    }
    s
}

/// The documented exit codes, from the core's verdicts.
fn exit_table() -> String {
    let rows: [(Verdict, &str); 9] = [
        (
            Verdict::SUCCEEDED,
            "the agent finished and every check passed",
        ),
        (
            Verdict::AGENT_FAILED,
            "the agent failed (API error, turn limit, non-zero exit)",
        ),
        (
            Verdict::AGENT_BLOCKED,
            "the agent answered that it is blocked",
        ),
        (
            Verdict::NOT_RUN,
            "the CLI is not installed, failed its preflight or refused to start",
        ),
        (
            Verdict::REJECTED,
            "the request was refused before anything ran",
        ),
        (
            Verdict::INVALID_OUTPUT,
            "the agent's output (or the result file) is not what the contract says",
        ),
        (
            Verdict::TIMED_OUT,
            "`--timeout-ms` expired; the agent's processes were killed",
        ),
        (Verdict::CANCELLED, "handoff was interrupted"),
        (
            Verdict::POLICY_BLOCKED,
            "policy: a build changed nothing, or a read-only run changed the worktree",
        ),
    ];
    let mut s = String::from("| exit | status | meaning |\n|---:|---|---|\n");
    for (v, meaning) in rows {
        let _ = writeln!(
            s,
            "| {} | `{}` | {meaning} |",
            v.code(),
            v.status().as_str()
        );
    }
    s
}

/// What an agent accepts beyond `--model`, from its adapter's static spec.
fn controls(spec: &ProviderSpec) -> Vec<String> {
    let mut out = vec!["`--model` (the exact name its CLI takes)".to_owned()];
    if spec.effort.is_empty() {
        out.push("no `--effort`".into());
    } else {
        out.push(format!(
            "`--effort` {}",
            spec.effort
                .iter()
                .map(|e| format!("`{e}`"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    match spec.max_turns {
        Some(d) => out.push(format!(
            "`--max-turns` 1-100 (default {} for a task, {} for advice)",
            d.handoff, d.advice
        )),
        None => out.push("no `--max-turns`".into()),
    }
    out.push(if spec.grants.bash_disable {
        "`--bash false` to withhold the shell".into()
    } else {
        "no `--bash false`".into()
    });
    out.push(if spec.grants.web_search {
        "`--web-search true`".into()
    } else {
        "no web search".into()
    });
    out.push(if spec.grants.mcp {
        "`--mcp-config` (a `handoff.mcp.v1` descriptor)".into()
    } else {
        "no MCP".into()
    });
    out.push("`--timeout-ms`".into());
    out
}

fn continue_body() -> String {
    let mut s = String::from(
        "# Hand the task over to another agent\n\n`handoff continue` hands over the task itself, \
not a piece of it: it checkpoints the work in a commit, writes your handoff note (outside the \
repository, with the Git state read from the repository), carries this conversation into the \
receiving agent's own session store (your session is only read), starts the receiver headless in \
the same worktree on that session, checks in its store that it really continued, and records the \
handoff in the task's timeline. The person can then resume the receiver's session in that agent's own \
interface. Receivers: `claude`, `codex`, `opencode`.\n\n",
    );
    s.push_str(FIND_BINARY);
    s.push_str(
        r#"
## 2. Write the handoff note

Make a private directory outside the repository and note the path it prints:

```sh
mktemp -d "${TMPDIR:-/tmp}/handoff.XXXXXXXX"
```

If that path is inside the repository, make one under `$HOME` instead. Then write the template
there and fill it in:

```sh
'<handoff>' note template > '<dir>/note.md'
```

Fill in all nine sections for a reader with none of your context; write "None" where one does
not apply. Check what you claim: run the commands you list under "Done and verified" and quote
what they printed. Leave "Git state" as it is and add no front matter: handoff fills both in from
the repository. Never put secrets in the note.

Then check it until it passes (exit 0); the JSON names each missing or empty section:

```sh
'<handoff>' note check '<dir>/note.md' --json; echo "exit=$?"
```

## 3. Dry run

```sh
'<handoff>' continue --cwd "$(pwd -P)" --from <claude|codex> --to <receiver> \
  --note-file '<dir>/note.md' --message '<what the receiver should do first>' --dry-run; echo "exit=$?"
```

- `--from` is you (`claude` when you are Claude Code, `codex` when you are Codex); `--to` is
  the agent the person named. Add `--model`, `--effort` or `--account` only if they named one,
  `--role review` if the receiver should only review, `--new-thread` if the work should go on in
  a new linked worktree and branch, and `--push` only if the person asked you to push.
  `--on <ssh host>[:<path>]` continues on another machine the person named (it needs `--push`
  unless the branch is already on its remote at HEAD; the other machine needs `handoff` and the
  receiver's CLI).
- Your own session is found by itself (your session variable, else the newest session that ran
  in this worktree). If the dry run says it can't be carried (`reason`), pass `--session <id>` if
  you know your session id; add `--fallback fresh-agent` only if the person accepts that the
  receiver starts from the note and a recap alone.
- If the person only wants to save where things are, without starting anyone, use
  `--note-only` instead of a receiver run: it checkpoints and writes the note.
- Read the JSON: `outcome` must be `dry-run`. `carry` says whether the conversation will be
  carried (`carried`, `mode`, `messages`, `bytes`). Show the person what would be committed
  (`checkpoint.committed`) and what stays uncommitted (`checkpoint.uncommitted`: untracked files
  are left alone). If something there does not belong to the task, or looks like a secret,
  stop and ask. Exit 5 means refused with nothing changed: fix what `reason` says and try again.

## 4. Hand over

Run the same command without `--dry-run`. The receiver's first turn can take a long time
(`--timeout`, default 1800 seconds): give the shell call the longest timeout your tool allows or
run it in the background and wait for it; if your tool's limit is shorter, pass a smaller
`--timeout`.

## 5. Read the result

One JSON line (`handoff.continue.v1`) on stdout, whatever happened:

| exit | outcome | what it means |
|---:|---|---|
| 0 | `started` | the receiver started and finished its first turn: the task is the receiver's now |
| 0 | `note-written` | `--note-only`: checkpoint and note written, no receiver started |
| 1 | `not-started` | the receiver did not start or its first turn failed; the task stays with you and the message was not delivered |
| 1 | `not-continued` | the receiver ran but did not continue the carried conversation (`continuity.reason`); the task stays with you |
| 5 | `rejected` | refused before anything changed |
| 9 | `cancelled` | handoff was interrupted; `'<handoff>' log --cwd "$(pwd -P)"` shows what was recorded |
| 10 | `review-changed` | a `--role review` receiver changed the worktree; its changes (`receiver.changed`) are left for the person |

On `started`, tell the person:

- that the task is with the receiver now, and its last message (`receiver.lastMessage`);
- `continuity.result`: `continued` (its store shows it resumed this conversation),
  `inconclusive` (it could not be told; quote `continuity.next`) or `fresh-agent`;
- how to resume the receiver: `receiver.resume.shell`, quoted exactly as printed;
- where the note is (`note.path`), the checkpoint commit (`checkpoint.commit`), and any files
  left uncommitted.

Then stop: make no more changes on this branch and start nothing else in this worktree; the
receiver owns it now. End your turn.

On `not-continued`, quote `continuity.reason` and `continuity.next`: the task is still yours.
On `not-started`, quote `reason`, say that the task is still yours and that the checkpoint and
note are kept, and offer to retry or to hand over to another receiver. On `rejected`, quote
`reason` and fix it. `'<handoff>' log --cwd "$(pwd -P)"` shows the task's timeline.
"#,
    );
    s
}

// ---------------------------------------------------------------------------------------------
// Writing and checking

/// Rewrites `dir` to the template: writes every file, removes every file it does not generate.
pub fn write(dir: &Path) -> Result<()> {
    let files = render();
    for stale in drift(dir, &files)
        .into_iter()
        .filter(|d| d.kind == DriftKind::NotGenerated)
    {
        std::fs::remove_file(dir.join(&stale.path))?;
    }
    for f in &files {
        let path = dir.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if std::fs::read_to_string(&path).ok().as_deref() != Some(f.text.as_str()) {
            std::fs::write(&path, &f.text)?;
        }
    }
    remove_empty_dirs(dir)?;
    Ok(())
}

fn remove_empty_dirs(dir: &Path) -> Result<bool> {
    let mut empty = true;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() && remove_empty_dirs(&path)? {
            std::fs::remove_dir(&path)?;
        } else {
            empty = false;
        }
    }
    Ok(empty)
}

#[derive(Debug, PartialEq)]
pub enum DriftKind {
    Missing,
    Changed,
    NotGenerated,
}

#[derive(Debug)]
pub struct Drift {
    pub path: String,
    pub kind: DriftKind,
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            DriftKind::Missing => "missing",
            DriftKind::Changed => "differs from the template",
            DriftKind::NotGenerated => "not generated by the template",
        };
        write!(f, "plugin/{} {what}", self.path)
    }
}

/// The files of `dir` that differ from `files`.
pub fn drift(dir: &Path, files: &[File]) -> Vec<Drift> {
    let mut out = Vec::new();
    for f in files {
        match std::fs::read_to_string(dir.join(&f.path)) {
            Err(_) => out.push(Drift {
                path: f.path.clone(),
                kind: DriftKind::Missing,
            }),
            Ok(text) if text != f.text => out.push(Drift {
                path: f.path.clone(),
                kind: DriftKind::Changed,
            }),
            Ok(_) => {}
        }
    }
    for path in list_files(dir) {
        if !files.iter().any(|f| f.path == path) {
            out.push(Drift {
                path,
                kind: DriftKind::NotGenerated,
            });
        }
    }
    out
}

/// Every file under `dir`, as `/`-separated paths relative to it, sorted.
pub fn list_files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
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

// ---------------------------------------------------------------------------------------------
// Validation

/// Every rule of the hosts (and of ours) that the bundle in `dir` breaks, one line each.
pub fn validate(dir: &Path) -> Vec<String> {
    let mut p = Problems::default();
    let files = list_files(dir);
    let skill_dirs: Vec<String> = files
        .iter()
        .filter_map(|f| f.strip_prefix("skills/"))
        .filter_map(|f| f.split('/').next())
        .map(str::to_owned)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for name in &skill_dirs {
        validate_skill(dir, name, &mut p);
    }
    let command_files: Vec<&String> = files
        .iter()
        .filter(|f| f.starts_with("commands/"))
        .collect();
    for f in &command_files {
        validate_command(dir, f, &mut p);
    }
    for f in files.iter().filter(|f| f.starts_with(".codex-plugin/")) {
        if f != ".codex-plugin/plugin.json" {
            p.add(f, "only plugin.json may be in .codex-plugin/");
        }
    }
    validate_manifests(dir, &skill_dirs, &mut p);
    validate_surface(&skill_dirs, &command_files, &mut p);
    p.0
}

#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, path: &str, problem: impl std::fmt::Display) {
        self.0.push(format!("plugin/{path}: {problem}"));
    }
}

/// The exact set of skills and commands the bundle must have.
fn validate_surface(skill_dirs: &[String], command_files: &[&String], p: &mut Problems) {
    let mut skills = vec![
        "get-advice".to_owned(),
        "handoff-run".to_owned(),
        "handoff-run-with-advice".to_owned(),
        CONTINUE_SKILL.to_owned(),
    ];
    let mut commands = Vec::new();
    for t in targets() {
        skills.push(format!("handoff-{}", t.id()));
        skills.push(format!("handoff-{}-with-advice", t.id()));
        for m in ["build", "review"] {
            commands.push(format!("commands/{}-{m}.md", t.id()));
            commands.push(format!("commands/{}-{m}-with-advice.md", t.id()));
        }
    }
    for s in &skills {
        if !skill_dirs.contains(s) {
            p.add(&format!("skills/{s}"), "missing skill");
        }
    }
    for s in skill_dirs {
        if !skills.contains(s) {
            p.add(&format!("skills/{s}"), "unexpected skill");
        }
    }
    for c in &commands {
        if !command_files.contains(&c) {
            p.add(c, "missing command");
        }
    }
    for c in command_files {
        if !commands.contains(c) {
            p.add(c, "unexpected command");
        }
    }
}

fn read(dir: &Path, path: &str, p: &mut Problems) -> Option<String> {
    match std::fs::read_to_string(dir.join(path)) {
        Ok(t) => Some(t),
        Err(e) => {
            p.add(path, format!("cannot be read: {e}"));
            None
        }
    }
}

fn validate_skill(dir: &Path, name: &str, p: &mut Problems) {
    let path = format!("skills/{name}/SKILL.md");
    let Some(text) = read(dir, &path, p) else {
        return;
    };
    let (front, body) = match front_matter(&text) {
        Ok(x) => x,
        Err(e) => return p.add(&path, e),
    };
    check_keys(&front, SKILL_KEYS, &path, p);
    match front.get("name").and_then(Value::as_str) {
        None => p.add(&path, "front matter has no `name`"),
        Some(n) => {
            if n != name {
                p.add(&path, format!("name `{n}` is not its folder's, `{name}`"));
            }
            if !is_hyphen_case(n) {
                p.add(
                    &path,
                    "name must be lowercase letters, digits and single inner hyphens",
                );
            }
            if n.chars().count() > MAX_NAME {
                p.add(&path, format!("name is longer than {MAX_NAME} characters"));
            }
        }
    }
    check_description(&front, &path, p);
    check_body(body, &path, p);
    if name == CONTINUE_SKILL {
        for needle in [
            "note template",
            "note check",
            "--dry-run",
            "receiver.resume.shell",
            "not-started",
        ] {
            if !body.contains(needle) {
                p.add(&path, format!("does not mention `{needle}`"));
            }
        }
    }

    let yaml_path = format!("skills/{name}/agents/openai.yaml");
    let Some(yaml) = read(dir, &yaml_path, p) else {
        return;
    };
    let doc = match parse_yaml(&yaml) {
        Ok(v) => v,
        Err(e) => {
            return p.add(
                &yaml_path,
                format!("not valid YAML of the form we emit: {e}"),
            );
        }
    };
    check_keys(
        &doc,
        &["interface", "policy", "dependencies"],
        &yaml_path,
        p,
    );
    let interface = &doc["interface"];
    check_keys(
        interface,
        &[
            "display_name",
            "short_description",
            "default_prompt",
            "icon_small",
            "icon_large",
            "brand_color",
        ],
        &yaml_path,
        p,
    );
    if non_empty(&interface["display_name"]).is_none() {
        p.add(&yaml_path, "interface.display_name must be set");
    }
    match non_empty(&interface["short_description"]) {
        None => p.add(&yaml_path, "interface.short_description must be set"),
        Some(d) if !SHORT_DESCRIPTION.contains(&d.chars().count()) => p.add(
            &yaml_path,
            format!(
                "interface.short_description must be {}-{} characters (is {})",
                SHORT_DESCRIPTION.start(),
                SHORT_DESCRIPTION.end(),
                d.chars().count()
            ),
        ),
        Some(_) => {}
    }
    match non_empty(&interface["default_prompt"]) {
        None => p.add(&yaml_path, "interface.default_prompt must be set"),
        Some(d) if !d.contains(&format!("${PLUGIN}:{name}")) => p.add(
            &yaml_path,
            format!("interface.default_prompt must name the skill as `${PLUGIN}:{name}`"),
        ),
        Some(_) => {}
    }
}

fn validate_command(dir: &Path, path: &str, p: &mut Problems) {
    let Some(text) = read(dir, path, p) else {
        return;
    };
    let (front, body) = match front_matter(&text) {
        Ok(x) => x,
        Err(e) => return p.add(path, e),
    };
    check_keys(&front, COMMAND_KEYS, path, p);
    check_description(&front, path, p);
    if non_empty(&front["argument-hint"]).is_none() {
        p.add(path, "front matter has no `argument-hint`");
    }
    match &front["allowed-tools"] {
        Value::Array(tools) if tools.iter().all(|t| non_empty(t).is_some()) => {}
        _ => p.add(path, "`allowed-tools` must be a list of tool names"),
    }
    let build = path.contains("-build");
    match (&front["disable-model-invocation"], build) {
        (Value::Bool(true), true) | (Value::Null, false) => {}
        (_, true) => p.add(
            path,
            "a build command must set `disable-model-invocation: true`",
        ),
        (_, false) => p.add(path, "only build commands disable model invocation"),
    }
    if !body.contains("$ARGUMENTS") {
        p.add(path, "the body never uses `$ARGUMENTS`");
    }
    if !body.contains("--caller-harness claude") {
        p.add(
            path,
            "a Claude Code command must pass `--caller-harness claude`",
        );
    }
    check_body(body, path, p);
}

fn check_keys(map: &Value, allowed: &[&str], path: &str, p: &mut Problems) {
    match map.as_object() {
        None => p.add(path, "expected a mapping"),
        Some(m) => {
            for k in m.keys() {
                if !allowed.contains(&k.as_str()) {
                    p.add(path, format!("unexpected key `{k}`"));
                }
            }
        }
    }
}

fn check_description(front: &Value, path: &str, p: &mut Problems) {
    match non_empty(&front["description"]) {
        None => p.add(path, "front matter has no `description`"),
        Some(d) => {
            let n = d.chars().count();
            if n > MAX_DESCRIPTION {
                p.add(
                    path,
                    format!("description is {n} characters; the hosts allow {MAX_DESCRIPTION}"),
                );
            }
            if d.contains('<') || d.contains('>') {
                p.add(path, "description must not contain `<` or `>`");
            }
        }
    }
}

/// What every skill and command body must say, and must never do.
fn check_body(body: &str, path: &str, p: &mut Problems) {
    for needle in [
        "command -v handoff",
        "~/.cargo/bin",
        "mktemp -d",
        "--cwd \"$(pwd -P)\"",
    ] {
        if !body.contains(needle) {
            p.add(path, format!("does not say `{needle}`"));
        }
    }
    if body.contains("$(pwd)") {
        p.add(
            path,
            "uses `$(pwd)`; a symlinked path is refused, use `$(pwd -P)`",
        );
    }
    if !path.ends_with(&format!("{CONTINUE_SKILL}/SKILL.md")) {
        if !body.contains("Only exit 0") || !body.contains("`succeeded`") {
            p.add(
                path,
                "does not say that only exit 0 with `succeeded` is success",
            );
        }
        for v in [
            Verdict::SUCCEEDED,
            Verdict::AGENT_FAILED,
            Verdict::NOT_RUN,
            Verdict::REJECTED,
            Verdict::INVALID_OUTPUT,
            Verdict::TIMED_OUT,
            Verdict::CANCELLED,
            Verdict::POLICY_BLOCKED,
        ] {
            if !body.contains(&format!("| {} | `{}` |", v.code(), v.status().as_str())) {
                p.add(path, format!("does not document exit {}", v.code()));
            }
        }
    }
    // An agent CLI is only ever started by handoff.
    for direct in [
        "codex exec",
        "claude -p",
        "claude --print",
        "opencode run",
        "cursor-agent -p",
        "kiro-cli chat",
        "grok -p",
    ] {
        if body.contains(direct) {
            p.add(path, format!("calls an agent CLI directly (`{direct}`)"));
        }
    }
}

fn is_hyphen_case(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

fn non_empty(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.trim().is_empty())
}

fn validate_manifests(dir: &Path, skill_dirs: &[String], p: &mut Problems) {
    let json = |path: &str, p: &mut Problems| -> Option<Value> {
        let text = read(dir, path, p)?;
        match serde_json::from_str::<Value>(&text) {
            Ok(v) if v.is_object() => Some(v),
            Ok(_) => {
                p.add(path, "must be a JSON object");
                None
            }
            Err(e) => {
                p.add(path, format!("invalid JSON: {e}"));
                None
            }
        }
    };
    let common = |path: &str, v: &Value, p: &mut Problems| {
        if v["name"] != PLUGIN {
            p.add(path, format!("name must be `{PLUGIN}`"));
        }
        if v["version"] != VERSION {
            p.add(
                path,
                format!("version must be the workspace version, {VERSION}"),
            );
        }
        if non_empty(&v["description"]).is_none() {
            p.add(path, "description must be set");
        }
        if non_empty(&v["author"]["name"]).is_none() {
            p.add(path, "author.name must be set");
        }
        for k in FORBIDDEN_MANIFEST_KEYS {
            if v.get(*k).is_some() {
                p.add(
                    path,
                    format!("must not declare `{k}`: the plugin ships no code"),
                );
            }
        }
    };
    let relative_dir = |path: &str, v: &Value, key: &str, p: &mut Problems| match v[key].as_str() {
        None => p.add(path, format!("`{key}` must be set")),
        Some(rel) => {
            if !rel.starts_with("./") || rel.contains("..") {
                p.add(
                    path,
                    format!("`{key}` must be a `./` path inside the plugin"),
                );
            } else if !dir.join(rel).is_dir() {
                p.add(path, format!("`{key}` names no directory ({rel})"));
            }
        }
    };

    let claude = ".claude-plugin/plugin.json";
    if let Some(v) = json(claude, p) {
        common(claude, &v, p);
        relative_dir(claude, &v, "skills", p);
        relative_dir(claude, &v, "commands", p);
    }

    let codex = ".codex-plugin/plugin.json";
    if let Some(v) = json(codex, p) {
        common(codex, &v, p);
        relative_dir(codex, &v, "skills", p);
        let i = &v["interface"];
        for k in [
            "displayName",
            "shortDescription",
            "longDescription",
            "developerName",
            "category",
        ] {
            if non_empty(&i[k]).is_none() {
                p.add(codex, format!("interface.{k} must be set"));
            }
        }
        match i["capabilities"].as_array() {
            Some(c) if !c.is_empty() && c.iter().all(|x| non_empty(x).is_some()) => {}
            _ => p.add(codex, "interface.capabilities must be a non-empty list"),
        }
        match i["defaultPrompt"].as_array() {
            Some(d) if !d.is_empty() && d.len() <= MAX_DEFAULT_PROMPTS => {
                for (n, prompt) in d.iter().enumerate() {
                    match non_empty(prompt) {
                        Some(s) if s.chars().count() <= MAX_DEFAULT_PROMPT => {}
                        _ => p.add(
                            codex,
                            format!(
                                "interface.defaultPrompt[{n}] must be 1-{MAX_DEFAULT_PROMPT} characters"
                            ),
                        ),
                    }
                }
            }
            _ => p.add(
                codex,
                format!("interface.defaultPrompt must list 1-{MAX_DEFAULT_PROMPTS} prompts"),
            ),
        }
    }

    let claude_market = ".claude-plugin/marketplace.json";
    if let Some(v) = json(claude_market, p) {
        if v["name"] != MARKETPLACE {
            p.add(claude_market, format!("name must be `{MARKETPLACE}`"));
        }
        if non_empty(&v["owner"]["name"]).is_none() {
            p.add(claude_market, "owner.name must be set");
        }
        match plugin_entry(&v) {
            None => p.add(claude_market, format!("lists no plugin `{PLUGIN}`")),
            Some(e) => {
                if e["source"] != "./" {
                    p.add(claude_market, "the plugin's source must be `./`");
                }
                if e["version"] != VERSION {
                    p.add(
                        claude_market,
                        format!("the plugin's version must be {VERSION}"),
                    );
                }
            }
        }
    }

    let codex_market = ".agents/plugins/marketplace.json";
    if let Some(v) = json(codex_market, p) {
        if v["name"] != MARKETPLACE {
            p.add(codex_market, format!("name must be `{MARKETPLACE}`"));
        }
        if non_empty(&v["interface"]["displayName"]).is_none() {
            p.add(codex_market, "interface.displayName must be set");
        }
        match plugin_entry(&v) {
            None => p.add(codex_market, format!("lists no plugin `{PLUGIN}`")),
            Some(e) => {
                if e["source"] != json!({ "source": "local", "path": "./" }) {
                    p.add(
                        codex_market,
                        "the plugin's source must be {\"source\": \"local\", \"path\": \"./\"}",
                    );
                }
                if !["AVAILABLE", "INSTALLED_BY_DEFAULT"]
                    .contains(&e["policy"]["installation"].as_str().unwrap_or(""))
                {
                    p.add(codex_market, "policy.installation must let it be installed");
                }
                if !["ON_INSTALL", "ON_USE"]
                    .contains(&e["policy"]["authentication"].as_str().unwrap_or(""))
                {
                    p.add(
                        codex_market,
                        "policy.authentication must be ON_INSTALL or ON_USE",
                    );
                }
                if non_empty(&e["category"]).is_none() {
                    p.add(codex_market, "the plugin's category must be set");
                }
            }
        }
    }
    if skill_dirs.is_empty() {
        p.add("skills", "has no skills");
    }
}

fn plugin_entry(market: &Value) -> Option<&Value> {
    market["plugins"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == PLUGIN)
}

// ---------------------------------------------------------------------------------------------
// The YAML we emit: block mappings (two-space indentation) whose values are plain words or JSON
// scalars and lists (JSON's syntax is a subset of YAML's flow syntax). Anything else is refused,
// so what this accepts is valid YAML and means what it says.

/// Splits `---` front matter from the body and parses it.
fn front_matter(text: &str) -> Result<(Value, &str), String> {
    let rest = text
        .strip_prefix("---\n")
        .ok_or("does not start with `---` front matter")?;
    let end = rest
        .find("\n---\n")
        .ok_or("front matter is not closed by `---`")?;
    let front = parse_yaml(&rest[..=end]).map_err(|e| format!("front matter: {e}"))?;
    Ok((front, &rest[end + 5..]))
}

fn parse_yaml(text: &str) -> Result<Value, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let (value, used) = parse_block(&lines, 0, 0)?;
    if used != lines.len() {
        return Err(format!(
            "line {}: unexpected indentation",
            lines[used].0 + 1
        ));
    }
    Ok(value)
}

fn parse_block(
    lines: &[(usize, &str)],
    start: usize,
    indent: usize,
) -> Result<(Value, usize), String> {
    let mut map = serde_json::Map::new();
    let mut i = start;
    while i < lines.len() {
        let (n, line) = lines[i];
        let here = line.len() - line.trim_start_matches(' ').len();
        if here < indent {
            break;
        }
        if here > indent || line.contains('\t') {
            return Err(format!("line {}: unexpected indentation", n + 1));
        }
        let (key, value) = line[here..]
            .split_once(':')
            .ok_or(format!("line {}: expected `key: value`", n + 1))?;
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("line {}: bad key `{key}`", n + 1));
        }
        if map.contains_key(key) {
            return Err(format!("line {}: duplicate key `{key}`", n + 1));
        }
        let value = value.trim_start();
        if value.is_empty() {
            let (child, next) = parse_block(lines, i + 1, indent + 2)?;
            if next == i + 1 {
                return Err(format!("line {}: `{key}` has no value", n + 1));
            }
            map.insert(key.to_owned(), child);
            i = next;
        } else {
            map.insert(
                key.to_owned(),
                scalar(value).map_err(|e| format!("line {}: {e}", n + 1))?,
            );
            i += 1;
        }
    }
    Ok((Value::Object(map), i))
}

fn scalar(value: &str) -> Result<Value, String> {
    if value.starts_with(['"', '[']) {
        return serde_json::from_str(value).map_err(|e| format!("not a JSON scalar or list: {e}"));
    }
    match value {
        "true" => return Ok(Value::Bool(true)),
        "false" => return Ok(Value::Bool(false)),
        _ => {}
    }
    // A plain scalar: a word that YAML cannot read as anything but this string.
    let plain = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && value.starts_with(|c: char| c.is_ascii_alphabetic())
        && !matches!(value, "null" | "yes" | "no" | "on" | "off" | "y" | "n");
    if plain {
        Ok(Value::String(value.to_owned()))
    } else {
        Err(format!("`{value}` must be quoted"))
    }
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
        assert_eq!((skills, yamls, commands), (16, 16, 24));
    }

    /// Renders the bundle into a scratch directory, lets `edit` break it, and validates.
    fn problems_after(edit: impl FnOnce(&Path)) -> Vec<String> {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path()).unwrap();
        assert_eq!(validate(tmp.path()), Vec::<String>::new());
        edit(tmp.path());
        validate(tmp.path())
    }

    fn replace(path: &Path, from: &str, to: &str) {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.contains(from), "{} has no {from:?}", path.display());
        std::fs::write(path, text.replacen(from, to, 1)).unwrap();
    }

    fn assert_flags(problems: &[String], needle: &str) {
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "expected a problem mentioning {needle:?}, got {problems:#?}"
        );
    }

    #[test]
    fn a_skill_whose_name_is_not_its_folders_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join("skills/handoff-codex/SKILL.md"),
                "name: handoff-codex",
                "name: handoff-codex2",
            )
        });
        assert_flags(&p, "is not its folder's");
    }

    #[test]
    fn a_description_over_the_hosts_limit_is_refused() {
        let long = "x".repeat(MAX_DESCRIPTION + 1);
        let p = problems_after(|d| {
            let path = d.join("skills/get-advice/SKILL.md");
            let text = std::fs::read_to_string(&path).unwrap();
            let line = text
                .lines()
                .find(|l| l.starts_with("description:"))
                .unwrap();
            std::fs::write(
                &path,
                text.replace(line, &format!("description: \"{long}\"")),
            )
            .unwrap();
        });
        assert_flags(&p, "the hosts allow 1024");
    }

    #[test]
    fn front_matter_that_is_not_our_yaml_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join("commands/codex-review.md"),
                "argument-hint: ",
                "argument-hint: : ",
            )
        });
        assert_flags(&p, "front matter");
        let p = problems_after(|d| {
            replace(
                &d.join("skills/get-advice/agents/openai.yaml"),
                "  short_description: ",
                "    short_description: ",
            )
        });
        assert_flags(&p, "not valid YAML");
    }

    #[test]
    fn a_short_description_outside_codex_limits_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join("skills/handoff-kiro/agents/openai.yaml"),
                "\"Delegate a bounded task to Kiro\"",
                "\"Kiro\"",
            )
        });
        assert_flags(&p, "short_description must be 25-64");
    }

    #[test]
    fn a_manifest_with_another_version_or_broken_json_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join(".codex-plugin/plugin.json"),
                &format!("\"version\": \"{VERSION}\""),
                "\"version\": \"9.9.9\"",
            )
        });
        assert_flags(&p, "version must be the workspace version");
        let p = problems_after(|d| {
            std::fs::write(d.join(".claude-plugin/marketplace.json"), "{\"name\":").unwrap()
        });
        assert_flags(&p, "invalid JSON");
    }

    #[test]
    fn a_build_command_the_model_may_start_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join("commands/grok-build.md"),
                "disable-model-invocation: true\n",
                "",
            )
        });
        assert_flags(&p, "disable-model-invocation");
    }

    #[test]
    fn a_body_that_calls_an_agent_or_uses_a_symlinked_cwd_is_refused() {
        let p = problems_after(|d| {
            let path = d.join("skills/handoff-run/SKILL.md");
            let mut text = std::fs::read_to_string(&path).unwrap();
            text.push_str("\nOr just run `codex exec` in `$(pwd)`.\n");
            std::fs::write(&path, text).unwrap();
        });
        assert_flags(&p, "calls an agent CLI directly");
        assert_flags(&p, "uses `$(pwd)`");
    }

    #[test]
    fn drift_lists_changed_missing_and_foreign_files() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path()).unwrap();
        std::fs::remove_file(tmp.path().join("commands/cursor-review.md")).unwrap();
        replace(&tmp.path().join("skills/get-advice/SKILL.md"), "# ", "#  ");
        std::fs::write(tmp.path().join("skills/notes.md"), "mine").unwrap();
        let d: Vec<String> = drift(tmp.path(), &render())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            d,
            [
                "plugin/commands/cursor-review.md missing",
                "plugin/skills/get-advice/SKILL.md differs from the template",
                "plugin/skills/notes.md not generated by the template",
            ]
        );
        write(tmp.path()).unwrap();
        assert!(drift(tmp.path(), &render()).is_empty());
    }

    #[test]
    fn the_yaml_subset_reads_what_we_write_and_refuses_the_rest() {
        let v =
            parse_yaml("a:\n  b: \"x: y\"\n  c: [\"Bash\", \"Read\"]\nd: true\ne: word\n").unwrap();
        assert_eq!(
            v,
            json!({"a": {"b": "x: y", "c": ["Bash", "Read"]}, "d": true, "e": "word"})
        );
        for bad in [
            "a: x: y\n",
            "a: no\n",
            "a: 'q'\n",
            "a: 1\n",
            "a:\n",
            "a: x\na: y\n",
            "- a\n",
        ] {
            assert!(parse_yaml(bad).is_err(), "{bad:?}");
        }
    }
}
