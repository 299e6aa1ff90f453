//! Who sits on a panel: `--harness codex,claude:opus,opencode` and `--quorum N`.

use std::fmt;

use crate::names::{AgentId, check_model};
use crate::provider::Registry;

/// Most members a panel may have.
pub const MAX_PANEL_MEMBERS: usize = 8;

/// One member of a panel: an agent and, optionally, the model it runs with. The same agent may
/// sit more than once with different models.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PanelMember {
    /// The agent.
    pub harness: AgentId,
    /// The model, when the entry named one (`codex:gpt-5.5`); otherwise the agent's default.
    pub model: Option<String>,
}

impl PanelMember {
    /// The member's id as it appears in a panel result: `codex`, `claude:opus`. Unique within
    /// a panel, since duplicates are refused.
    pub fn id(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for PanelMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.model {
            Some(m) => write!(f, "{}:{m}", self.harness),
            None => write!(f, "{}", self.harness),
        }
    }
}

/// Why a panel's members or quorum were refused. Every case is a usage error (exit 5), found
/// before any member starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PanelSpecError {
    /// No member at all.
    #[error("--harness names no panel member")]
    Empty,
    /// An empty entry (`codex,,claude`, a trailing comma).
    #[error("--harness entry {position} is empty")]
    EmptyEntry {
        /// 1-based position of the entry.
        position: usize,
    },
    /// An entry with nothing on one side of its `:` (`codex:`, `:opus`).
    #[error("--harness entry {position} ({entry:?}) names no {missing} {side} its ':'")]
    HalfEntry {
        /// 1-based position of the entry.
        position: usize,
        /// The entry as written.
        entry: String,
        /// `agent` or `model`.
        missing: &'static str,
        /// `before` or `after`.
        side: &'static str,
    },
    /// More than [`MAX_PANEL_MEMBERS`].
    #[error("--harness names {count} panel members; at most {MAX_PANEL_MEMBERS} may sit")]
    TooMany {
        /// How many were named.
        count: usize,
    },
    /// An agent that is not registered.
    #[error("--harness {entry:?} is not a known agent; expected one of: {}", known.join(", "))]
    UnknownAgent {
        /// The agent part of the entry.
        entry: String,
        /// The registered agents.
        known: Vec<String>,
    },
    /// A model that `--model` would refuse.
    #[error("--harness {entry:?}: {reason}")]
    BadModel {
        /// The whole entry.
        entry: String,
        /// What is wrong with the model.
        reason: String,
    },
    /// The same agent with the same model (or both without one) twice.
    #[error("--harness names {member} twice")]
    Duplicate {
        /// The repeated member's id.
        member: String,
    },
    /// A verb or mode that may write the worktree: a panel only asks read-only questions.
    #[error(
        "a panel only asks read-only questions (advice, or run --mode review|verify), not {asked}"
    )]
    NotReadOnly {
        /// What was asked, as typed (`run --mode build`, `run-with-advice`).
        asked: String,
    },
    /// `--quorum` or `--max-concurrency` that is not a whole number.
    #[error("{flag} must be a whole number, got {value:?}")]
    NotANumber {
        /// The flag.
        flag: &'static str,
        /// Its value, as given.
        value: String,
    },
    /// A `--max-concurrency` of 0.
    #[error("--max-concurrency must be at least 1 for a panel")]
    Concurrency,
    /// A quorum of 0 or larger than the panel.
    #[error("--quorum {quorum} must be between 1 and the {members} panel members")]
    Quorum {
        /// The asked quorum.
        quorum: usize,
        /// How many members the panel has.
        members: usize,
    },
}

impl PanelSpecError {
    /// The input at fault, as typed: `--harness`, `--mode`, `--quorum` or `--max-concurrency`.
    pub fn field(&self) -> &'static str {
        match self {
            PanelSpecError::Quorum { .. } => "--quorum",
            PanelSpecError::NotReadOnly { .. } => "--mode",
            PanelSpecError::NotANumber { flag, .. } => flag,
            PanelSpecError::Concurrency => "--max-concurrency",
            _ => "--harness",
        }
    }
}

/// Parses a comma-separated member list, each agent checked against the registered agents
/// (like `--harness` of a single run).
pub fn parse_members(text: &str, registry: &Registry) -> Result<Vec<PanelMember>, PanelSpecError> {
    parse_members_among(text, &registry.ids())
}

/// Parses a comma-separated member list against a list of known agents.
///
/// Each entry is `agent` or `agent:model` (split at the first `:`, so a model may contain
/// `:`), surrounding whitespace of an entry ignored. Refused: an empty list, an empty entry or
/// model, more than [`MAX_PANEL_MEMBERS`] entries, an agent not in `known`, a model `--model`
/// would refuse, and the same agent with the same model twice.
pub fn parse_members_among(
    text: &str,
    known: &[AgentId],
) -> Result<Vec<PanelMember>, PanelSpecError> {
    if text.trim().is_empty() {
        return Err(PanelSpecError::Empty);
    }
    let entries: Vec<&str> = text.split(',').map(str::trim).collect();
    if entries.len() > MAX_PANEL_MEMBERS {
        return Err(PanelSpecError::TooMany {
            count: entries.len(),
        });
    }
    let mut members: Vec<PanelMember> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let (agent, model) = match entry.split_once(':') {
            Some((a, m)) => (a, Some(m)),
            None => (*entry, None),
        };
        if entry.is_empty() {
            return Err(PanelSpecError::EmptyEntry { position: i + 1 });
        }
        if agent.is_empty() || model == Some("") {
            let (missing, side) = if agent.is_empty() {
                ("agent", "before")
            } else {
                ("model", "after")
            };
            return Err(PanelSpecError::HalfEntry {
                position: i + 1,
                entry: (*entry).to_owned(),
                missing,
                side,
            });
        }
        let harness = AgentId::parse(agent)
            .filter(|id| known.contains(id))
            .ok_or_else(|| PanelSpecError::UnknownAgent {
                entry: agent.to_owned(),
                known: known.iter().map(ToString::to_string).collect(),
            })?;
        if let Some(m) = model {
            check_model(m).map_err(|reason| PanelSpecError::BadModel {
                entry: (*entry).to_owned(),
                reason: reason.replacen("--model", "the model", 1),
            })?;
        }
        let member = PanelMember {
            harness,
            model: model.map(str::to_owned),
        };
        if members.contains(&member) {
            return Err(PanelSpecError::Duplicate {
                member: member.id(),
            });
        }
        members.push(member);
    }
    Ok(members)
}

/// Renders members back as a `--harness` value; [`parse_members_among`] reads it back as the
/// same members.
pub fn render_members(members: &[PanelMember]) -> String {
    members
        .iter()
        .map(PanelMember::id)
        .collect::<Vec<_>>()
        .join(",")
}

/// Checks `--quorum` against the panel's size: absent means every member, otherwise 1 to the
/// number of members.
pub fn check_quorum(quorum: Option<usize>, members: usize) -> Result<usize, PanelSpecError> {
    match quorum {
        None => Ok(members),
        Some(q) if (1..=members).contains(&q) => Ok(q),
        Some(q) => Err(PanelSpecError::Quorum { quorum: q, members }),
    }
}
