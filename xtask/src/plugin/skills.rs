//! The skills both hosts share: `SKILL.md` and Codex's `agents/openai.yaml` for each.

use super::prose::{continue_body, delegation_body, panel_body};
use super::yaml::quoted;
use super::{CONTINUE_SKILL, Host, PANEL_SKILL, PLUGIN, Verb, targets};

pub(super) struct Skill {
    pub(super) name: String,
    pub(super) description: String,
    display_name: String,
    short_description: String,
    default_prompt: String,
    pub(super) body: String,
}

pub(super) fn skills() -> Vec<Skill> {
    let mut out = vec![
        Skill {
            name: "get-advice".into(),
            description: "Ask another agent CLI (Codex, Claude Code, Grok, Kiro, OpenCode, \
Cursor, GitHub Copilot CLI, Gemini CLI or Qwen Code) for a read-only second opinion through the handoff command, and read back one verified \
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
            name: PANEL_SKILL.into(),
            description: "Ask several agent CLIs (Codex, Claude Code, Grok, Kiro, OpenCode, \
Cursor, GitHub Copilot CLI, Gemini CLI or Qwen Code) the same read-only question or review at once through the handoff command, and read back \
one verified JSON result that merges their findings and shows where they agree and where they do \
not. Use when the person asks to ask Codex and Claude and compare, wants a second and third \
opinion or a panel, or when independent opinions on a design, a bug, a plan or a change would \
help."
                .into(),
            display_name: "Ask a panel".into(),
            short_description: "Ask several agents at once and compare their answers".into(),
            default_prompt: format!(
                "Use ${PLUGIN}:{PANEL_SKILL} to ask Codex and Claude Code about this change and \
compare"
            ),
            body: panel_body(),
        },
        Skill {
            name: "handoff-run".into(),
            description: "Hand a bounded coding task (build, phase, review or verify) to another \
agent CLI through the handoff command and read back one verified JSON result with git evidence of \
what it changed. Use when the person asks to delegate, hand off or farm out a task to Codex, \
Claude Code, Grok, Kiro, OpenCode, Cursor, GitHub Copilot CLI, Gemini CLI or Qwen Code, naming the agent or leaving the choice to you."
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
        description: "Hand the whole task over to another agent (Claude Code, Codex, OpenCode, \
GitHub Copilot CLI, Gemini CLI, Qwen Code, Cursor or Kiro) and step back: checkpoint the work, write and check a nine-section handoff note, start the \
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

pub(super) fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {}\n---\n\n{body}",
        quoted(description)
    )
}

pub(super) fn openai_yaml(skill: &Skill) -> String {
    format!(
        "interface:\n  display_name: {}\n  short_description: {}\n  default_prompt: {}\n",
        quoted(&skill.display_name),
        quoted(&skill.short_description),
        quoted(&skill.default_prompt)
    )
}
