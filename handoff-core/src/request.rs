//! The `Request` contract: everything a run was asked to do, with provenance for every choice.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::{AgentId, Mode, Operation};

/// Schema version of [`Request`].
pub const REQUEST_SCHEMA: &str = "handoff.request.v1";

/// Sentinel for a model or effort left to the agent CLI's own default.
pub const PROVIDER_DEFAULT: &str = "provider-default";

/// A fully resolved delegation request. Built from flags (or a library call) and validated
/// against the target's capabilities before any process starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    /// Always [`REQUEST_SCHEMA`].
    pub schema_version: String,
    /// `advice` or `handoff`.
    pub operation: Operation,
    /// Who asked.
    pub caller: Caller,
    /// Which agent does the work.
    pub target: Target,
    /// The handoff mode; null for advice.
    pub mode: Option<Mode>,
    /// Absolute, normalized working directory inside a git worktree.
    #[schemars(length(min = 1, max = 4096))]
    pub cwd: String,
    /// The task text.
    #[schemars(length(min = 1, max = 2_000_000))]
    pub instructions: String,
    /// Model, effort and turn limit.
    pub selection: Selection,
    /// Bash, web search, MCP and write permissions.
    pub grants: Grants,
    /// Whether the target may ask for nested advice.
    pub delegation: Delegation,
    /// Position of this run in its advice DAG.
    pub lineage: Lineage,
    /// Limits of the run and of its DAG.
    pub budgets: Budgets,
    /// Whether a writing run may add or change git hooks and git settings that run a program
    /// (`--allow-git-config`); otherwise such a change blocks it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_git_config: bool,
    /// Whether the evidence covers ignored files too (`--ignored`): each is hashed before and
    /// after the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_ignored: bool,
    /// `sha256:<hex>` of what is being asked, independent of lineage and budgets.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub intent_hash: String,
}

/// The caller of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Caller {
    /// The caller's agent.
    pub harness: AgentId,
    /// How the caller's identity is known.
    pub provenance: CallerProvenance,
}

/// How the caller's identity is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CallerProvenance {
    /// Stated by the root command line (metadata, not authentication).
    RootAsserted,
    /// Derived by the supervisor from the parent node.
    SupervisorDerived,
}

/// The target of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// The target's agent.
    pub harness: AgentId,
}

/// Model, effort and turn limit: what was asked, what was used, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selection {
    /// As given on the command line.
    pub requested: SelectionRequested,
    /// As passed to the agent.
    pub resolved: SelectionResolved,
    /// Where each resolved value came from.
    pub provenance: SelectionProvenance,
}

/// Selection as requested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectionRequested {
    /// `--model`.
    #[schemars(length(min = 1, max = 256))]
    pub model: Option<String>,
    /// `--effort`.
    #[schemars(length(min = 1, max = 64))]
    pub effort: Option<String>,
    /// `--max-turns`.
    #[schemars(range(min = 1, max = 100))]
    pub max_turns: Option<u32>,
}

/// Selection as resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectionResolved {
    /// The model, or `provider-default`.
    #[schemars(length(min = 1, max = 256))]
    pub model: String,
    /// The effort, or `provider-default`.
    #[schemars(length(min = 1, max = 64))]
    pub effort: String,
    /// The turn limit, or null when the agent has none.
    #[schemars(range(min = 1, max = 100))]
    pub max_turns: Option<u32>,
}

/// Where a selection value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SelectionSource {
    /// A flag.
    Explicit,
    /// The user's configuration file (`[agents.<id>]`).
    Config,
    /// handoff's default for this operation.
    OperationDefault,
    /// Left to the agent CLI.
    ProviderDefault,
}

/// Provenance of each selection value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectionProvenance {
    /// Of the model.
    pub model: SelectionSource,
    /// Of the effort.
    pub effort: SelectionSource,
    /// Of the turn limit.
    pub max_turns: SelectionSource,
}

/// Permissions of the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grants {
    /// As requested.
    pub requested: GrantsRequested,
    /// As enforced.
    pub resolved: GrantsResolved,
    /// Where each came from.
    pub provenance: GrantsProvenance,
    /// The private MCP servers.
    pub mcp: McpGrant,
}

/// Grants as requested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantsRequested {
    /// Shell access.
    pub bash: bool,
    /// Web search and fetch.
    pub web_search: bool,
    /// Private MCP servers.
    pub mcp: bool,
}

/// Grants as enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantsResolved {
    /// Shell access.
    pub bash: bool,
    /// Web search and fetch.
    pub web_search: bool,
    /// Private MCP servers.
    pub mcp: bool,
    /// Writing the worktree (build and phase only).
    pub write: bool,
}

/// A grant a nested request can ask for (and the supervisor may withhold).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum GrantKind {
    /// Shell access.
    Bash,
    /// Web search and fetch.
    WebSearch,
    /// Private MCP servers.
    Mcp,
}

impl fmt::Display for GrantKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GrantKind::Bash => "bash",
            GrantKind::WebSearch => "web search",
            GrantKind::Mcp => "MCP",
        })
    }
}

/// Where a grant came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GrantSource {
    /// A flag.
    Explicit,
    /// handoff's default for this operation.
    OperationDefault,
    /// Limited by the parent node.
    ParentAttenuated,
    /// Withheld by the supervisor: with it, the nested adviser would have been less isolated
    /// than the node that asked for it (`dag.nodes[].attenuated` says why).
    IsolationAttenuated,
    /// Implied by the mode.
    ModeDerived,
}

/// Provenance of each grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantsProvenance {
    /// Of bash.
    pub bash: GrantSource,
    /// Of web search.
    pub web_search: GrantSource,
    /// Of MCP.
    pub mcp: GrantSource,
    /// Of write.
    pub write: GrantSource,
}

/// The MCP servers granted, by digest and name (never secrets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpGrant {
    /// `sha256:<hex>` of the descriptor file's bytes.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub digest: Option<String>,
    /// Server names, in descriptor order.
    #[schemars(length(max = 32))]
    pub servers: Vec<String>,
}

/// Whether the target may ask for nested advice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delegation {
    /// `none` or `advice-only`.
    pub mode: DelegationMode,
    /// Where it came from.
    pub provenance: DelegationSource,
}

/// Nested capability of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DelegationMode {
    /// The target cannot call handoff.
    None,
    /// The target may ask for read-only advice.
    AdviceOnly,
}

/// Where the delegation mode came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DelegationSource {
    /// From the root verb.
    VerbDerived,
    /// Limited by the parent.
    ParentAttenuated,
}

/// Most dependencies one node may declare (the bound of [`Lineage::dependencies`]).
pub const MAX_DEPENDENCIES: usize = 64;

/// Position of a run in its DAG.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lineage {
    /// The root run.
    #[schemars(length(min = 1, max = 128))]
    pub root_run_id: String,
    /// This run.
    #[schemars(length(min = 1, max = 128))]
    pub run_id: String,
    /// The parent run, null at the root.
    #[schemars(length(min = 1, max = 128))]
    pub parent_run_id: Option<String>,
    /// 0 at the root.
    #[schemars(range(max = 32))]
    pub depth: u32,
    /// Typed links to earlier nodes.
    #[schemars(length(max = 64))]
    pub dependencies: Vec<Dependency>,
}

/// A typed link to an earlier node of the DAG.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dependency {
    /// The earlier node.
    #[schemars(length(min = 1, max = 128))]
    pub run_id: String,
    /// The kind of link.
    #[serde(rename = "type")]
    pub kind: DependencyKind,
}

/// The kind of a dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DependencyKind {
    /// Needs the other node's success.
    Requires,
    /// Advises the other node.
    Advises,
    /// Verifies the other node.
    Verifies,
}

/// Limits and what is left of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budgets {
    /// The limits.
    pub limits: BudgetLimits,
    /// Nodes left.
    pub remaining: BudgetRemaining,
}

/// The seven budget limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetLimits {
    /// Deepest nesting.
    #[schemars(range(max = 32))]
    pub max_depth: u32,
    /// Most nodes in the DAG.
    #[schemars(range(min = 1, max = 256))]
    pub max_nodes: u32,
    /// Most advice nodes.
    #[schemars(range(max = 256))]
    pub max_advice_nodes: u32,
    /// Most handoff nodes.
    #[schemars(range(max = 256))]
    pub max_handoff_nodes: u32,
    /// Most nodes running at once.
    #[schemars(range(min = 1, max = 32))]
    pub max_concurrency: u32,
    /// Wall-clock limit of the whole DAG, in ms.
    #[schemars(range(min = 100, max = 86_400_000))]
    pub root_timeout_ms: u64,
    /// Wall-clock limit of one node, in ms.
    #[schemars(range(min = 100, max = 3_600_000))]
    pub timeout_ms: u64,
}

impl Default for BudgetLimits {
    fn default() -> Self {
        BudgetLimits {
            max_depth: 3,
            max_nodes: 16,
            max_advice_nodes: 12,
            max_handoff_nodes: 4,
            max_concurrency: 4,
            root_timeout_ms: 1_800_000,
            timeout_ms: 600_000,
        }
    }
}

/// Nodes left in each budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetRemaining {
    /// Any node.
    #[schemars(range(max = 256))]
    pub nodes: u32,
    /// Advice nodes.
    #[schemars(range(max = 256))]
    pub advice_nodes: u32,
    /// Handoff nodes.
    #[schemars(range(max = 256))]
    pub handoff_nodes: u32,
}

impl Request {
    /// Whether the target may write the worktree.
    pub fn writes(&self) -> bool {
        self.grants.resolved.write
    }

    /// The name used for the run in prompts and messages: the mode, or `advice`.
    pub fn task_name(&self) -> &'static str {
        match self.mode {
            Some(m) => m.as_str(),
            None => "advice",
        }
    }
}
