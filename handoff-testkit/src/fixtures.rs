//! The help texts and versions the fake prints, for adapter tests that parse them directly.
//!
//! Claude, Codex and OpenCode texts are the real CLIs' output (see
//! `shared/reference/cli-help/`); Grok, Kiro and Cursor texts are synthetic and list the flags
//! handoff's adapters probe.

/// `claude --version` prints `"{CLAUDE_VERSION} (Claude Code)"`.
pub const CLAUDE_VERSION: &str = "2.1.197";
/// `claude --help` of Claude Code 2.1.197.
pub const CLAUDE_HELP: &str = include_str!("../fixtures/claude-2.1.197-help.txt");

/// `codex --version` prints `"codex-cli {CODEX_VERSION}"`.
pub const CODEX_VERSION: &str = "0.171.0";
/// `codex --help` of Codex 0.171.0.
pub const CODEX_HELP: &str = include_str!("../fixtures/codex-0.171.0-help.txt");
/// `codex exec --help` of Codex 0.171.0.
pub const CODEX_EXEC_HELP: &str = include_str!("../fixtures/codex-0.171.0-exec-help.txt");
/// `codex exec resume --help` of Codex 0.171.0.
pub const CODEX_EXEC_RESUME_HELP: &str =
    include_str!("../fixtures/codex-0.171.0-exec-resume-help.txt");

/// The version number the four other fakes report (`"<name> 99.0.0-fake"`).
pub const OTHER_VERSION: &str = "99.0.0-fake";
/// `grok --help` (synthetic, xAI-style flags).
pub const GROK_HELP: &str = include_str!("../fixtures/grok-help.txt");
/// `grok --help` of the community `@vibe-kit/grok-cli` 0.0.34 (real; its `--version` prints
/// `1.0.1`).
pub const GROK_CLI_HELP: &str = include_str!("../fixtures/grok-cli-0.0.34-help.txt");
/// `kiro-cli --help` (synthetic).
pub const KIRO_HELP: &str = include_str!("../fixtures/kiro-cli-help.txt");
/// `kiro-cli chat --help` (synthetic).
pub const KIRO_CHAT_HELP: &str = include_str!("../fixtures/kiro-cli-chat-help.txt");
/// `opencode --help` of OpenCode 1.18.33.
pub const OPENCODE_HELP: &str = include_str!("../fixtures/opencode-1.18.33-help.txt");
/// `opencode run --help` of OpenCode 1.18.33.
pub const OPENCODE_RUN_HELP: &str = include_str!("../fixtures/opencode-1.18.33-run-help.txt");
/// `copilot --help` of GitHub Copilot CLI 1.0.102.
pub const COPILOT_HELP: &str = include_str!("../fixtures/copilot-1.0.102-help.txt");
/// The version the fake `copilot` reports (`GitHub Copilot CLI 1.0.102.`).
pub const COPILOT_VERSION: &str = "1.0.102";
/// `gemini --help` of Gemini CLI 0.61.0.
pub const GEMINI_HELP: &str = include_str!("../fixtures/gemini-0.61.0-help.txt");
/// The version the fake `gemini` reports.
pub const GEMINI_VERSION: &str = "0.61.0";
/// `qwen --help` of Qwen Code 0.24.4.
pub const QWEN_HELP: &str = include_str!("../fixtures/qwen-0.24.4-help.txt");
/// The version the fake `qwen` reports.
pub const QWEN_VERSION: &str = "0.24.4";
/// `cursor-agent --help` (synthetic).
pub const CURSOR_HELP: &str = include_str!("../fixtures/cursor-agent-help.txt");
/// `cursor-agent sandbox run --help` (synthetic).
pub const CURSOR_SANDBOX_RUN_HELP: &str =
    include_str!("../fixtures/cursor-agent-sandbox-run-help.txt");
