//! handoff-adapters: one `Provider` per agent CLI.
//!
//! Each adapter maps a `Request` to the CLI's exact argv, environment and private files (a pure
//! function, snapshot-tested), proves the installed CLI supports them without a model call
//! (preflight), and reads the CLI's own output format back into a candidate answer.
//! [`default_registry`] registers all ten agents.
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod claude;
mod codex;
mod common;
mod compat;
mod copilot;
mod cursor;
mod gemini;
mod grok;
mod grok_community;
mod kiro;
mod opencode;
pub mod plugins;
mod probe;
mod qwen;
mod store;

use std::sync::Arc;

pub use claude::{Claude, SHARED_AREAS as CLAUDE_SHARED_AREAS, SPEC as CLAUDE_SPEC};
pub use codex::{Codex, SPEC as CODEX_SPEC, strict_schema as codex_strict_schema};
pub use copilot::{
    Copilot, SPEC as COPILOT_SPEC, UsageReport as CopilotUsage, usage_report as copilot_usage,
};
pub use cursor::{Cursor, SPEC as CURSOR_SPEC};
pub use gemini::{
    DEFAULT_MODEL as GEMINI_DEFAULT_MODEL, Gemini, SPEC as GEMINI_SPEC,
    thinking_budget as gemini_thinking_budget,
};
pub use grok::{
    COMMUNITY_REASON as GROK_COMMUNITY_REASON, Grok, SPEC as GROK_SPEC, is_community_grok,
};
pub use grok_community::{
    GrokCommunity, SPEC as GROK_COMMUNITY_SPEC, XAI_REASON as GROK_XAI_REASON,
    check_help as check_community_grok_help,
};
pub use kiro::{Kiro, SPEC as KIRO_SPEC};
pub use opencode::{OpenCode, SPEC as OPENCODE_SPEC};
pub use probe::{ProbeOutput, mentions};
pub use qwen::{Qwen, SPEC as QWEN_SPEC};

/// A registry with all ten agents: Codex, Grok (xAI's CLI), Grok community (the
/// `@vibe-kit/grok-cli`, under handoff's sandbox), Kiro, Claude Code, OpenCode, Cursor, GitHub
/// Copilot CLI, Gemini CLI and Qwen Code (all under handoff's sandbox).
pub fn default_registry() -> handoff_core::Registry {
    let mut r = handoff_core::Registry::new();
    r.register(Arc::new(Codex))
        .register(Arc::new(Grok))
        .register(Arc::new(GrokCommunity))
        .register(Arc::new(Kiro))
        .register(Arc::new(Claude))
        .register(Arc::new(OpenCode))
        .register(Arc::new(Cursor))
        .register(Arc::new(Copilot))
        .register(Arc::new(Gemini))
        .register(Arc::new(Qwen));
    r
}
