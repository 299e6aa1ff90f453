//! Failover: the agents a request moves on to when its agent cannot answer for a reason
//! another agent does not share (a usage limit, a failing provider, no credit, a CLI that
//! cannot run here): `--failover codex,claude@work:opus` or `[failover] agents = […]`.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::FailureCause;
use crate::config::Config;
use crate::names::{AgentId, Status, check_model};
use crate::result::Usage;

/// Most entries a failover chain may hold.
pub const MAX_FAILOVER_ENTRIES: usize = 8;

/// One entry of a failover chain: an agent, optionally one of its configured accounts
/// (`[agents.<id>.accounts.<name>]`), optionally a model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FailoverEntry {
    /// The agent.
    pub harness: AgentId,
    /// The account (`claude@work`), when the entry names one.
    pub account: Option<String>,
    /// The model (`codex:gpt-5.5`), when the entry names one; otherwise the agent's default.
    pub model: Option<String>,
}

impl fmt::Display for FailoverEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.harness)?;
        if let Some(a) = &self.account {
            write!(f, "@{a}")?;
        }
        if let Some(m) = &self.model {
            write!(f, ":{m}")?;
        }
        Ok(())
    }
}

/// Parses a failover chain: comma-separated entries `agent[@account][:model]` (the panel's
/// member grammar, plus an account before the model). The model is everything after the
/// first `:`, so it may hold `:` and `@`. Refused: an empty entry, an unknown agent, an account
/// the configuration does not define for that agent, a model `--model` would refuse, the same
/// entry twice, more than [`MAX_FAILOVER_ENTRIES`] entries. `none` (alone) is an empty chain:
/// it turns the configured default off.
pub fn parse_failover(
    text: &str,
    known: &[AgentId],
    config: &Config,
) -> Result<Vec<FailoverEntry>, String> {
    let text = text.trim();
    if text == "none" {
        return Ok(Vec::new());
    }
    if text.is_empty() {
        return Err("--failover names no entry (use 'none' to turn the default off)".into());
    }
    let entries: Vec<&str> = text.split(',').map(str::trim).collect();
    if entries.len() > MAX_FAILOVER_ENTRIES {
        return Err(format!(
            "--failover names {} entries; at most {MAX_FAILOVER_ENTRIES} may follow",
            entries.len()
        ));
    }
    let mut chain: Vec<FailoverEntry> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        if entry.is_empty() {
            return Err(format!("--failover entry {} is empty", i + 1));
        }
        let (head, model) = match entry.split_once(':') {
            Some((h, m)) => (h, Some(m)),
            None => (*entry, None),
        };
        let (agent, account) = match head.split_once('@') {
            Some((a, acc)) => (a, Some(acc)),
            None => (head, None),
        };
        let harness = AgentId::parse(agent)
            .filter(|id| known.contains(id))
            .ok_or_else(|| {
                format!(
                    "--failover {entry:?}: {agent:?} is not a known agent; expected one of: {}",
                    known
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        if let Some(m) = model {
            if m.is_empty() {
                return Err(format!("--failover {entry:?} names no model after its ':'"));
            }
            check_model(m).map_err(|reason| {
                format!(
                    "--failover {entry:?}: {}",
                    reason.replacen("--model", "the model", 1)
                )
            })?;
        }
        if let Some(acc) = account {
            let defined = config.agent(&harness);
            if !defined.accounts.contains_key(acc) {
                let names: Vec<&str> = defined.accounts.keys().map(String::as_str).collect();
                return Err(if names.is_empty() {
                    format!(
                        "--failover {entry:?}: unknown account '{acc}' for {harness}: the configuration defines none ([agents.{harness}.accounts.<name>] env = {{ … }})"
                    )
                } else {
                    format!(
                        "--failover {entry:?}: unknown account '{acc}' for {harness}; configured: {}",
                        names.join(", ")
                    )
                });
            }
        }
        let parsed = FailoverEntry {
            harness,
            account: account.map(str::to_owned),
            model: model.map(str::to_owned),
        };
        if chain.contains(&parsed) {
            return Err(format!("--failover names {parsed} twice"));
        }
        chain.push(parsed);
    }
    Ok(chain)
}

/// The `[failover]` table of the configuration: the chain runs use when they name none, and
/// what happens when the agent a person drives stops on its limit (Claude Code's
/// `StopFailure` hook, `handoff hook claude-stop-failure`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailoverConfig {
    /// Entries as `--failover` takes them, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// Who takes the task over, as `handoff continue` takes a destination
    /// (`"codex gpt-5 high"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<String>,
    /// `continue` (move the task to the receiver) or `notify` (the default: move nothing, say
    /// what would).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_limit: Option<OnLimit>,
    /// The errors that count, as Claude Code names them in its hook (default `["rate_limit"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
    /// Most moves on a limit per task per hour (default 1), so that a receiver limited too does
    /// not bounce the task back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hops: Option<u32>,
}

/// What a limit does to the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnLimit {
    /// Hand the task over to the receiver, in the background.
    Continue,
    /// Move nothing; tell the person what would.
    Notify,
}

/// The error names Claude Code's `StopFailure` hook uses (its matcher values).
pub const CLAUDE_STOP_ERRORS: [&str; 9] = [
    "rate_limit",
    "authentication_failed",
    "oauth_org_not_allowed",
    "billing_error",
    "invalid_request",
    "model_not_found",
    "server_error",
    "max_output_tokens",
    "unknown",
];

impl FailoverConfig {
    /// [`FailoverConfig::on_limit`], `notify` when unset.
    pub fn on_limit(&self) -> OnLimit {
        self.on_limit.unwrap_or(OnLimit::Notify)
    }

    /// [`FailoverConfig::errors`], `["rate_limit"]` when unset.
    pub fn limit_errors(&self) -> Vec<String> {
        self.errors
            .clone()
            .unwrap_or_else(|| vec!["rate_limit".to_owned()])
    }

    /// [`FailoverConfig::max_hops`], 1 when unset.
    pub fn max_hops(&self) -> u32 {
        self.max_hops.unwrap_or(1)
    }

    /// What is wrong with the limit settings, one line: an error name Claude Code does not
    /// use, `continue` without a receiver, more than 10 hops an hour.
    pub fn check_limit(&self) -> Result<(), String> {
        for e in self.errors.iter().flatten() {
            if !CLAUDE_STOP_ERRORS.contains(&e.as_str()) {
                return Err(format!(
                    "failover.errors: {e:?} is not an error Claude Code reports; expected some of: {}",
                    CLAUDE_STOP_ERRORS.join(", ")
                ));
            }
        }
        if self.on_limit() == OnLimit::Continue && self.receiver.is_none() {
            return Err(
                "failover.on_limit = \"continue\" needs failover.receiver (e.g. \"codex gpt-5 high\")"
                    .into(),
            );
        }
        if self.max_hops() > 10 {
            return Err(format!(
                "failover.max_hops: {} is more than 10 an hour",
                self.max_hops()
            ));
        }
        Ok(())
    }
}

/// One attempt of a run that had a failover chain (`attempts[]` of the result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attempt {
    /// The agent that ran.
    pub harness: AgentId,
    /// The account it ran as, when the entry named one.
    pub account: Option<String>,
    /// The model the entry named, if any.
    pub model: Option<String>,
    /// How the attempt ended (the last attempt's is the result's).
    pub status: Status,
    /// Why it did not succeed; null when it did.
    pub cause: Option<FailureCause>,
    /// The wait its provider asked for, when it said.
    pub retry_after_seconds: Option<u64>,
    /// Wall-clock milliseconds of the attempt.
    pub duration_ms: u64,
    /// Its tokens and cost.
    pub usage: Usage,
    /// What went wrong, one line (masked); null when it succeeded.
    pub message: Option<String>,
    /// The machine it ran on (`[hosts]` name or ssh destination) when not this one (`--on`);
    /// absent when it ran here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Attempt {
    /// The attempt of chain entry `entry` whose run ended with `result`: its end, its time,
    /// the host it ran on.
    pub fn ended(entry: &FailoverEntry, result: &crate::HandoffResult) -> Attempt {
        Attempt {
            harness: entry.harness.clone(),
            account: entry.account.clone(),
            model: entry.model.clone(),
            status: result.status,
            cause: result.diagnostics.cause,
            retry_after_seconds: result.diagnostics.retry_after_seconds,
            duration_ms: result.timing.duration_ms,
            usage: result.usage.clone(),
            message: result.diagnostics.message.clone(),
            host: result
                .host
                .as_ref()
                .map(|h| h.name.clone().unwrap_or_else(|| h.ssh.clone())),
        }
    }
}

/// The instructions an attempt after a failed one gets: the original ones and a note of the
/// previous attempt and what it changed in the worktree, so the next agent carries the work
/// on rather than starting over blind.
pub fn continued_instructions(
    original: &str,
    previous: &FailoverEntry,
    cause: FailureCause,
    changed: &[String],
) -> String {
    const SHOWN: usize = 50;
    let mut note = format!(
        "\n\n---\nNote from handoff: a previous attempt at this task by {previous} stopped ({cause}) before it finished."
    );
    if changed.is_empty() {
        note.push_str(" It left the worktree unchanged.");
    } else {
        note.push_str(
            " It had already changed these paths; check them and carry the work on from there:\n",
        );
        for path in changed.iter().take(SHOWN) {
            note.push_str("- ");
            note.push_str(path);
            note.push('\n');
        }
        if changed.len() > SHOWN {
            note.push_str(&format!("- and {} more\n", changed.len() - SHOWN));
        }
    }
    format!("{original}{note}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<AgentId> {
        ["claude", "codex", "opencode"]
            .iter()
            .filter_map(|a| AgentId::parse(a))
            .collect()
    }

    fn config() -> Config {
        toml::from_str(
            r#"
[agents.claude.accounts.work]
env = { CLAUDE_CONFIG_DIR = "/home/u/.claude-work" }
"#,
        )
        .unwrap()
    }

    #[test]
    fn entries_name_agent_account_and_model() {
        let chain = parse_failover(
            "codex, claude@work:opus, opencode:openrouter/x:y@2",
            &known(),
            &config(),
        )
        .unwrap();
        let shown: Vec<String> = chain.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["codex", "claude@work:opus", "opencode:openrouter/x:y@2"]
        );
        assert_eq!(chain[1].account.as_deref(), Some("work"));
        assert_eq!(chain[2].model.as_deref(), Some("openrouter/x:y@2"));
        assert!(
            parse_failover("none", &known(), &config())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn bad_chains_are_refused_with_one_line() {
        for (text, needle) in [
            ("", "names no entry"),
            ("codex,,claude", "entry 2 is empty"),
            ("aider", "not a known agent"),
            (
                "codex@work",
                "unknown account 'work' for codex: the configuration defines none",
            ),
            ("claude@home", "configured: work"),
            ("codex:", "names no model"),
            ("codex,codex", "names codex twice"),
            (
                "codex,claude,opencode,codex:a,codex:b,codex:c,codex:d,codex:e,codex:f",
                "at most 8",
            ),
        ] {
            let err = parse_failover(text, &known(), &config()).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn the_next_attempt_hears_what_the_last_one_changed() {
        let prev = FailoverEntry {
            harness: AgentId::parse("claude").unwrap(),
            account: None,
            model: None,
        };
        let text = continued_instructions(
            "Fix it.",
            &prev,
            FailureCause::RateLimited,
            &["src/a.rs".into()],
        );
        assert!(text.starts_with("Fix it.\n\n---\nNote from handoff: a previous attempt at this task by claude stopped (rate_limited)"));
        assert!(text.ends_with("- src/a.rs\n"));
        let none = continued_instructions("Fix it.", &prev, FailureCause::ServerError, &[]);
        assert!(none.ends_with("It left the worktree unchanged."));
    }
}
