//! Claude Code's commands: one per agent, mode (build or review) and verb.

use super::prose::delegation_body;
use super::yaml::quoted;
use super::{Host, Verb, targets};

pub(super) struct Command {
    pub(super) name: String,
    pub(super) text: String,
}

pub(super) fn commands() -> Vec<Command> {
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
