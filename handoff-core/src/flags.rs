//! Flags on what a run changed that configures programs: git hooks, repository settings that run
//! a program, attribute files that name drivers, hook managers, and the agents' own
//! configuration. Such a change outlives the run: the next `git commit`, the next agent or the
//! next person runs it. [`flag`] names each one in [`crate::GitEvidence::flags`]; a writing run
//! that adds or changes a hook or a program-running git setting is blocked unless the request
//! allows it ([`crate::Request::allow_git_config`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What kind of configuration a changed path is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FlagKind {
    /// A git hook (in `.git/hooks`, a submodule's, or the `core.hooksPath` directory outside
    /// the repository): git runs it.
    GitHook,
    /// A git configuration file whose settings that run a program changed (`core.fsmonitor`,
    /// `core.hooksPath`, filter, diff and merge drivers, `gpg.program`, `core.sshCommand`,
    /// `url.*.insteadOf`, credential helpers, includes, `!` aliases, …).
    GitProgramConfig,
    /// A `.gitattributes` file: it can put files under filter, diff and merge drivers.
    GitAttributes,
    /// A hook manager's configuration (`.husky/`, `.pre-commit-config.yaml`, `lefthook.yml`).
    HookManager,
    /// An agent's configuration (`.claude/`, `.codex/`, `AGENTS.md`, `opencode.json`,
    /// `.mcp.json`, `.vscode/tasks.json`, …): the next agent in this worktree loads it; and a
    /// build tool's that runs programs the next agent's commands start (`.cargo/config.toml`).
    AgentConfig,
    /// A path the agent CLI's own sandbox only ever leaves empty (a mount point on its deny
    /// list, such as `.git/config.worktree` or `.git/glab-cli/`) that has content after the
    /// run: something wrote where the sandbox denies writing.
    SandboxMountPoint,
}

impl FlagKind {
    /// Whether a writing run that makes this change is blocked unless allowed.
    pub fn blocks(self) -> bool {
        matches!(
            self,
            FlagKind::GitHook | FlagKind::GitProgramConfig | FlagKind::SandboxMountPoint
        )
    }

    fn note(self) -> &'static str {
        match self {
            FlagKind::GitHook => "a git hook: git runs it at the next commit, checkout or push",
            FlagKind::GitProgramConfig => {
                "git settings that run a program changed (hooks path, fsmonitor, drivers, \
                 helpers, includes or the like)"
            }
            FlagKind::GitAttributes => {
                "attributes can put files under filter, diff and merge drivers"
            }
            FlagKind::HookManager => "a hook manager's configuration: it decides which hooks run",
            FlagKind::AgentConfig => "an agent's configuration: the next agent here loads it",
            FlagKind::SandboxMountPoint => {
                "the agent's own sandbox leaves this path empty, but it has content: something \
                 wrote where the sandbox denies writing"
            }
        }
    }

    /// The flag of `path` as this kind.
    pub fn on(self, path: &str) -> Flag {
        Flag {
            path: path.to_owned(),
            kind: self,
            note: self.note().to_owned(),
        }
    }
}

/// One changed path that configures programs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Flag {
    /// The changed entry (as in `changedFiles`).
    pub path: String,
    /// What it is.
    pub kind: FlagKind,
    /// Why it matters.
    pub note: String,
}

/// The marker a git configuration file's state carries before the digest of its settings that
/// run a program (see `handoff-git`).
pub const PROGRAMS_MARKER: &str = " programs ";

/// Directories of agents' configuration (worktree paths ending in `/`).
pub const AGENT_DIRS: &[&str] = &[
    ".claude/",
    ".codex/",
    ".cursor/",
    ".kiro/",
    ".grok/",
    ".opencode/",
    // GitHub Copilot's repository settings, hooks (which run shell commands) and instructions.
    ".github/copilot/",
    ".github/hooks/",
    ".github/instructions/",
    // Gemini CLI's workspace settings, policies, commands and extensions.
    ".gemini/",
    // Qwen Code's project settings (hooks, MCP servers), agents, commands and skills.
    ".qwen/",
];

/// File names of agents' configuration, wherever they are (but under `node_modules/`).
pub const AGENT_FILES: &[&str] = &[
    "AGENTS.md",
    "CLAUDE.md",
    "CLAUDE.local.md",
    "opencode.json",
    "opencode.jsonc",
    "copilot-instructions.md",
    "GEMINI.md",
    "QWEN.md",
    ".mcp.json",
    ".cursorrules",
];

/// Hook managers' configuration files at the worktree's root (and `.husky/`).
pub const HOOK_MANAGER_FILES: &[&str] = &[
    ".pre-commit-config.yaml",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
];

/// The flag of one changed entry, given its states before and after (`None` where it did not
/// exist) and the `core.hooksPath` directories inside the worktree (worktree paths ending in
/// `/`).
pub fn flag(
    path: &str,
    before: Option<&str>,
    after: Option<&str>,
    hooks_dirs: &[&str],
) -> Option<Flag> {
    let kind = if hooks_dirs.iter().any(|d| path.starts_with(d)) {
        FlagKind::GitHook
    } else {
        kind_of(path, before, after)?
    };
    Some(kind.on(path))
}

fn kind_of(path: &str, before: Option<&str>, after: Option<&str>) -> Option<FlagKind> {
    let name = path.rsplit('/').next().unwrap_or(path);
    if let Some(git) = path.strip_prefix(".git/") {
        let in_hooks = git.starts_with("hooks/")
            || (git.starts_with("modules/") && git.contains("/hooks/"))
            || (git.starts_with("worktrees/") && git.contains("/hooks/"));
        if in_hooks {
            return (!name.ends_with(".sample")).then_some(FlagKind::GitHook);
        }
        let config = matches!(name, "config" | "config.worktree")
            && (git == name || git.starts_with("modules/") || git.starts_with("worktrees/"));
        if config {
            let programs = |s: Option<&str>| {
                s.and_then(|s| s.split_once(PROGRAMS_MARKER))
                    .map(|(_, d)| d.to_owned())
            };
            return (programs(before) != programs(after)).then_some(FlagKind::GitProgramConfig);
        }
        return None;
    }
    // Hooks of a `core.hooksPath` outside the repository are keyed by their absolute path.
    if path.starts_with('/') {
        return Some(FlagKind::GitHook);
    }
    if name == ".gitattributes" {
        return Some(FlagKind::GitAttributes);
    }
    if path.starts_with(".husky/") || HOOK_MANAGER_FILES.contains(&path) {
        return Some(FlagKind::HookManager);
    }
    if AGENT_DIRS.iter().any(|d| path.starts_with(d))
        || AGENT_FILES.contains(&name) && !path.contains("node_modules/")
        || path == ".vscode/tasks.json"
        || is_cargo_config(path)
    {
        return Some(FlagKind::AgentConfig);
    }
    None
}

/// Cargo's configuration, in any directory (cargo reads it from every directory above where it
/// runs): its `build.rustc-wrapper`, runners and aliases run programs at the next build.
fn is_cargo_config(path: &str) -> bool {
    let dir = path
        .strip_suffix("/config.toml")
        .or_else(|| path.strip_suffix("/config"));
    dir.is_some_and(|dir| dir == ".cargo" || dir.ends_with("/.cargo"))
        && !path.contains("node_modules/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(path: &str) -> Option<FlagKind> {
        flag(path, Some("file 100644 a"), Some("file 100644 b"), &[]).map(|f| f.kind)
    }

    #[test]
    fn hooks_block_and_samples_do_not_count() {
        for p in [
            ".git/hooks/pre-commit",
            ".git/modules/libs/dep/hooks/post-checkout",
            "/home/u/.githooks/pre-push",
        ] {
            assert_eq!(kind(p), Some(FlagKind::GitHook), "{p}");
            assert!(FlagKind::GitHook.blocks());
        }
        assert_eq!(kind(".git/hooks/pre-commit.sample"), None);
        // Under a `core.hooksPath` inside the worktree, whatever the directory is called.
        assert_eq!(
            flag(
                "scripts/hooks/pre-commit",
                None,
                Some("file 100755 a"),
                &["scripts/hooks/"]
            )
            .map(|f| f.kind),
            Some(FlagKind::GitHook)
        );
        assert_eq!(
            flag(
                "scripts/hookset.sh",
                None,
                Some("file 100755 a"),
                &["scripts/hooks/"]
            ),
            None
        );
    }

    #[test]
    fn a_config_file_counts_only_when_its_program_settings_changed() {
        let before = "file 100644 a programs 111";
        assert_eq!(
            flag(
                ".git/config",
                Some(before),
                Some("file 100644 b programs 111"),
                &[]
            ),
            None,
            "a new branch or remote URL is an ordinary setting"
        );
        let f = flag(
            ".git/config",
            Some(before),
            Some("file 100644 b programs 222"),
            &[],
        )
        .unwrap();
        assert_eq!(f.kind, FlagKind::GitProgramConfig);
        assert!(f.kind.blocks());
        assert_eq!(
            flag(
                ".git/modules/dep/config",
                None,
                Some("file 100644 b programs 1"),
                &[]
            )
            .map(|f| f.kind),
            Some(FlagKind::GitProgramConfig)
        );
        assert_eq!(kind(".git/refs/heads/main"), None);
    }

    #[test]
    fn attributes_hook_managers_and_agent_configuration_are_flagged_without_blocking() {
        for (p, k) in [
            (".gitattributes", FlagKind::GitAttributes),
            ("src/.gitattributes", FlagKind::GitAttributes),
            (".husky/pre-commit", FlagKind::HookManager),
            (".pre-commit-config.yaml", FlagKind::HookManager),
            (".claude/settings.local.json", FlagKind::AgentConfig),
            (".codex/config.toml", FlagKind::AgentConfig),
            ("AGENTS.md", FlagKind::AgentConfig),
            ("sub/CLAUDE.md", FlagKind::AgentConfig),
            ("opencode.jsonc", FlagKind::AgentConfig),
            (".mcp.json", FlagKind::AgentConfig),
            (".vscode/tasks.json", FlagKind::AgentConfig),
            (".cargo/config.toml", FlagKind::AgentConfig),
            ("crates/a/.cargo/config", FlagKind::AgentConfig),
            (".github/hooks/session.json", FlagKind::AgentConfig),
            (".github/copilot/settings.json", FlagKind::AgentConfig),
            (
                ".github/instructions/rust.instructions.md",
                FlagKind::AgentConfig,
            ),
            (".github/copilot-instructions.md", FlagKind::AgentConfig),
            (".gemini/settings.json", FlagKind::AgentConfig),
            ("docs/GEMINI.md", FlagKind::AgentConfig),
            (".qwen/settings.json", FlagKind::AgentConfig),
            ("QWEN.md", FlagKind::AgentConfig),
        ] {
            assert_eq!(kind(p), Some(k), "{p}");
            assert!(!k.blocks());
        }
        for p in [
            "src/lib.rs",
            "README.md",
            ".github/workflows/ci.yml",
            "node_modules/x/AGENTS.md",
            "src/config.toml",
            "my.cargo/config.toml",
        ] {
            assert_eq!(kind(p), None, "{p}");
        }
    }
}
