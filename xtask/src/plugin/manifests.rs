//! The manifests: each host's plugin manifest and local marketplace.

use serde_json::{Value, json};

use super::{MARKETPLACE, PLUGIN, VERSION};

const LICENSE: &str = env!("CARGO_PKG_LICENSE");
const AUTHOR: &str = "handoff contributors";
const DESCRIPTION: &str = "Delegate bounded coding tasks to Codex, Claude Code, Grok, Kiro, \
OpenCode, Cursor, GitHub Copilot CLI, Gemini CLI or Qwen Code, ask them for read-only advice, and hand a whole task over to another agent, \
through the handoff CLI and its verified JSON results.";

pub(super) fn manifests() -> Vec<(&'static str, Value)> {
    let keywords = json!([
        "delegation",
        "agents",
        "codex",
        "claude-code",
        "grok",
        "kiro",
        "opencode",
        "cursor",
        "copilot",
        "gemini",
        "qwen",
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
                "mcpServers": "./.mcp.json",
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
                "mcpServers": "./.codex-mcp.json",
                "interface": {
                    "displayName": "handoff",
                    "shortDescription": "Delegate, get advice, and hand tasks over between agent CLIs",
                    "longDescription": "Skills that drive the handoff CLI: hand a bounded build, \
            review or verification to Codex, Claude Code, Grok, Kiro, OpenCode, Cursor, GitHub Copilot CLI, Gemini CLI or Qwen Code and read back one \
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
