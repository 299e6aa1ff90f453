//! What a task trusts: the configuration that makes programs run, as it was at the task's first
//! event.
//!
//! An agent can leave behind a git hook, a repository setting that runs a program, a hook
//! manager's configuration or an agent's own configuration, and the next commit, the next agent
//! or the next person runs it, outside every sandbox. handoff keeps a [`ConfigState`] with each
//! task, taken at its first event (the first delegated run's "before", the first checkpoint or
//! continuation); later, what changed since then ([`ConfigState::changed_since`]) is not trusted:
//! a checkpoint commits without hooks, handoff's own git calls ignore the repository's
//! program settings, and a receiver is not started on changed agent configuration unless a
//! person says so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The state of the configuration that runs programs in one worktree. Each map is entry → state
/// (a digest, or a setting's value), equal iff nothing about the entry changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigState {
    /// Git hooks and hook managers: every hook in the effective hooks directory
    /// (`.git/hooks/<name>`, or the `core.hooksPath` directory's files), the effective
    /// `core.hooksPath` itself, `.husky/`, `.pre-commit-config.yaml`, `lefthook.yml` and the like.
    pub hooks: BTreeMap<String, String>,
    /// Repository-level git configuration files (`.git/config`, `config.worktree` and the files
    /// they include) → the digest of their settings that run a program.
    pub git_programs: BTreeMap<String, String>,
    /// Agents' configuration at the worktree's root (`.claude/`, `.codex/`, `AGENTS.md`,
    /// `opencode.json`, `.mcp.json`, …), ignored files included.
    pub agent_config: BTreeMap<String, String>,
}

/// What changed between a task's [`ConfigState`] at its first event and now: the entries
/// added, removed or changed, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigChanges {
    /// Hooks and hook-manager configuration.
    pub hooks: Vec<String>,
    /// Repository-level git configuration whose program settings changed.
    pub git_programs: Vec<String>,
    /// Agents' configuration.
    pub agent_config: Vec<String>,
}

impl ConfigState {
    /// What changed from `start` (the state at the task's first event) to `self`.
    pub fn changed_since(&self, start: &ConfigState) -> ConfigChanges {
        ConfigChanges {
            hooks: differing(&start.hooks, &self.hooks),
            git_programs: differing(&start.git_programs, &self.git_programs),
            agent_config: differing(&start.agent_config, &self.agent_config),
        }
    }
}

impl ConfigChanges {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty() && self.git_programs.is_empty() && self.agent_config.is_empty()
    }
}

/// The keys whose values differ between `a` and `b` (present in one only, or unequal), sorted.
fn differing(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut keys: Vec<String> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .chain(b.keys().filter(|k| !a.contains_key(*k)).cloned())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn changes_are_added_removed_and_changed_entries() {
        let start = ConfigState {
            hooks: map(&[(".git/hooks/pre-commit", "a"), ("core.hooksPath", "")]),
            git_programs: map(&[(".git/config", "p1")]),
            agent_config: map(&[("AGENTS.md", "x")]),
        };
        let now = ConfigState {
            hooks: map(&[("core.hooksPath", ""), (".git/hooks/post-commit", "b")]),
            git_programs: map(&[(".git/config", "p1")]),
            agent_config: map(&[("AGENTS.md", "y"), (".mcp.json", "z")]),
        };
        let c = now.changed_since(&start);
        assert_eq!(c.hooks, [".git/hooks/post-commit", ".git/hooks/pre-commit"]);
        assert!(c.git_programs.is_empty());
        assert_eq!(c.agent_config, [".mcp.json", "AGENTS.md"]);
        assert!(!c.is_empty());
        assert!(now.changed_since(&now).is_empty());
    }

    #[test]
    fn the_state_round_trips_as_json() {
        let s = ConfigState {
            hooks: map(&[("core.hooksPath", ".husky/_")]),
            ..ConfigState::default()
        };
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"gitPrograms\""), "{json}");
        assert_eq!(serde_json::from_str::<ConfigState>(&json).unwrap(), s);
    }
}
