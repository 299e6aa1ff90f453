//! The `HandoffResult` contract (one normalized JSON per run), the DAG snapshot and capabilities.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::{AgentId, Mode, Operation, Status};
use crate::output::{Evidence, Finding, ReviewVerdict};
use crate::request::{
    BudgetLimits, BudgetRemaining, Caller, Delegation, DelegationMode, Dependency, Grants, Lineage,
    Selection,
};
use crate::workspace::GitEvidence;

/// Schema version of [`HandoffResult`].
pub const RESULT_SCHEMA: &str = "handoff.result.v1";
/// Schema version of [`Dag`].
pub const DAG_SCHEMA: &str = "handoff.dag.v1";
/// Schema version of [`Capabilities`].
pub const CAPABILITIES_SCHEMA: &str = "handoff.capabilities.v1";
/// Version of this build of handoff.
pub const DRIVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The one normalized result of a run. Every key is always present; fields that could not be
/// known (because the run stopped early) are null, never invented.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffResult {
    /// Always [`RESULT_SCHEMA`].
    pub schema_version: String,
    /// The handoff version that produced it.
    pub driver_version: String,
    /// `advice` or `handoff`, when known.
    pub operation: Option<Operation>,
    /// The caller, when known.
    pub caller: Option<Caller>,
    /// The target and its CLI version.
    pub target: TargetInfo,
    /// The mode, when known (null for advice).
    pub mode: Option<Mode>,
    /// `sha256:<hex>` of the serialized request, when one was built.
    pub request_hash: Option<String>,
    /// The request's intent hash, when one was built.
    pub intent_hash: Option<String>,
    /// Selection receipt.
    pub selection: Option<Selection>,
    /// Grants receipt.
    pub grants: Option<Grants>,
    /// Delegation receipt.
    pub delegation: Option<Delegation>,
    /// Lineage receipt.
    pub lineage: Option<Lineage>,
    /// The outcome.
    pub status: Status,
    /// Exit codes and signals.
    pub exit: ExitInfo,
    /// The agent's normalized answer.
    pub output: OutputInfo,
    /// Git evidence before and after.
    pub git: Option<GitEvidence>,
    /// When it ran.
    pub timing: Timing,
    /// Tokens and cost.
    pub usage: Usage,
    /// The adapter's policy receipt: how each grant was enforced.
    pub policy: serde_json::Value,
    /// The DAG this run belongs to, when one was created.
    pub dag: Option<Dag>,
    /// How the agent's processes were contained, once it started.
    #[serde(default)]
    pub processes: Option<Processes>,
    /// For a nested adviser: what it worked on, `live` (the asking worker's own worktree, read
    /// only: `git` then fingerprints that worktree, and any change to it during the run, even
    /// one the adviser did not make, fails the advice) or `snapshot` (a read-only copy, below).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<crate::workspace::WorktreeView>,
    /// For a nested adviser on a snapshot: the read-only snapshot it ran on (the asked `cwd`
    /// maps into it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<crate::workspace::Snapshot>,
    /// For a run sent to another machine (`--on`): where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::RunHost>,
    /// Human diagnostics, redacted and bounded.
    pub diagnostics: Diagnostics,
    /// Every attempt, in order, when the run had a failover chain: the last one is the
    /// result's own (`target` is the agent that answered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<crate::Attempt>,
}

/// How an agent's processes were contained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Processes {
    /// `reaper`: a reaper (a child subreaper) ran the agent and the run waited for its whole
    /// process tree to be gone; `process-group`: only the agent's process group was killed.
    pub containment: ContainmentKind,
    /// Whether the agent's whole tree was gone before the after-fingerprint: `true` under a
    /// reaper that reported it, `false` when nothing can vouch for it (the agent stopped,
    /// killed or outran its reaper; the run is then `blocked`), null when unknown (process
    /// group only: a process that left the group may still run).
    pub tree_gone: Option<bool>,
    /// How many descendants were still running when the agent ended (the reaper killed
    /// them); null without a reaper's report.
    pub leftover: Option<u32>,
    /// The cgroup v2 the agent ran in, killed as a whole (`cgroup.kill`) with the rest of its
    /// tree; null where none could be made (cgroup v1, Linux < 5.14, no delegation to this
    /// user) or without a reaper's report.
    #[serde(default)]
    pub cgroup: Option<String>,
}

/// The mechanism that contained an agent's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ContainmentKind {
    /// A reaper of handoff's own (`PR_SET_CHILD_SUBREAPER`).
    Reaper,
    /// The process group only.
    ProcessGroup,
}

impl From<&crate::process::Containment> for Processes {
    fn from(c: &crate::process::Containment) -> Processes {
        use crate::process::Containment as C;
        match c {
            C::ProcessGroup => Processes {
                containment: ContainmentKind::ProcessGroup,
                tree_gone: None,
                leftover: None,
                cgroup: None,
            },
            C::Reaper { leftover, cgroup } => Processes {
                containment: ContainmentKind::Reaper,
                tree_gone: Some(true),
                leftover: Some(*leftover),
                cgroup: cgroup.clone(),
            },
            C::ReaperLost => Processes {
                containment: ContainmentKind::Reaper,
                tree_gone: Some(false),
                leftover: None,
                cgroup: None,
            },
        }
    }
}

/// The target of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetInfo {
    /// The target agent, when known.
    pub harness: Option<AgentId>,
    /// First line of the CLI's `--version`, when preflight ran.
    pub version: Option<String>,
}

/// Exit information.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExitInfo {
    /// handoff's own exit code.
    pub driver: u8,
    /// The agent process's exit code, when it exited normally.
    pub provider: Option<i32>,
    /// The signal that ended the agent process, when one did.
    pub signal: Option<String>,
    /// The per-node timeout expired.
    pub timed_out: bool,
    /// handoff was interrupted.
    pub cancelled: bool,
}

/// The agent's normalized answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputInfo {
    /// The answer's response text (non-blank on success).
    pub response: Option<String>,
    /// Supporting evidence.
    pub evidence: Vec<Evidence>,
    /// Findings.
    pub findings: Vec<Finding>,
    /// The overall judgement the agent stated (`approve`, `changes-requested`, `unsure`);
    /// null when its answer gave none.
    #[serde(default)]
    pub verdict: Option<ReviewVerdict>,
}

/// Timing of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timing {
    /// ISO-8601 UTC with milliseconds.
    pub started_at: String,
    /// ISO-8601 UTC with milliseconds.
    pub finished_at: String,
    /// Wall-clock milliseconds.
    pub duration_ms: u64,
}

/// Where usage numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum UsageSource {
    /// Counted by the agent CLI itself (envelope or events).
    ProviderEnvelope,
    /// Reported by the model inside its answer (can be invented by the model).
    ProviderOutput,
    /// The answer carried no usage.
    NotReported,
    /// No output was parsed.
    NotObserved,
}

/// Tokens and cost of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Usage {
    /// Where the numbers came from.
    pub source: UsageSource,
    /// Input tokens (including cached reads, when reported).
    pub input_tokens: Option<u64>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Input + output.
    pub total_tokens: Option<u64>,
    /// Input tokens served from the prompt cache.
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: Option<u64>,
    /// Cost in US dollars as the CLI reports it.
    pub cost_usd: Option<f64>,
    /// Premium requests as GitHub Copilot counts them: its billing unit, never dollars (zero
    /// for a provider of the user's own). Absent for every other agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premium_requests: Option<f64>,
}

impl Usage {
    /// Nothing observed.
    pub fn not_observed() -> Usage {
        Usage {
            source: UsageSource::NotObserved,
            input_tokens: None,
            output_tokens: None,
            total_tokens: None,
            cache_read_tokens: None,
            cache_write_tokens: None,
            cost_usd: None,
            premium_requests: None,
        }
    }
}

/// Diagnostics: redacted and truncated to 8 KiB each.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Diagnostics {
    /// One line saying what happened, when anything went wrong.
    pub message: Option<String>,
    /// The tail of the agent's stderr.
    pub provider_stderr: String,
    /// The agent's stdout when the answer was read elsewhere (diagnostic use).
    pub provider_stdout: String,
    /// Whether any text was cut.
    pub truncated: bool,
    /// How many secrets were masked.
    pub redaction_count: u64,
    /// Why the run did not succeed; null when it succeeded. The agent's own failures are
    /// classified from its CLI's structured output first, its words last.
    #[serde(default)]
    pub cause: Option<crate::FailureCause>,
    /// How long the provider asked to wait before trying again (seconds), when the CLI or the
    /// API said.
    #[serde(default)]
    pub retry_after_seconds: Option<u64>,
}

/// A snapshot of the advice DAG a run belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Dag {
    /// Always [`DAG_SCHEMA`].
    pub schema_version: String,
    /// The root run.
    pub root_run_id: String,
    /// Bumped on every change.
    pub revision: u64,
    /// State of the whole DAG.
    pub status: DagStatus,
    /// Budget limits.
    pub limits: BudgetLimits,
    /// Budgets left.
    pub remaining: BudgetRemaining,
    /// Nodes running now.
    pub active_count: u32,
    /// The nodes, root first.
    #[schemars(length(min = 1))]
    pub nodes: Vec<DagNode>,
}

/// State of a DAG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DagStatus {
    /// Still running.
    Running,
    /// The root succeeded.
    Succeeded,
    /// The root was blocked.
    Blocked,
    /// The root failed.
    Failed,
    /// The root timed out.
    TimedOut,
    /// The root was cancelled.
    Cancelled,
}

/// One node of the DAG.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DagNode {
    /// This node.
    pub run_id: String,
    /// Its parent.
    pub parent_run_id: Option<String>,
    /// Its depth.
    pub depth: u32,
    /// `advice` or `handoff`.
    pub operation: Operation,
    /// Who asked.
    pub caller_harness: AgentId,
    /// Who answered.
    pub target_harness: AgentId,
    /// The mode.
    pub mode: Option<Mode>,
    /// Its delegation.
    pub delegation: DelegationMode,
    /// Its intent hash.
    pub intent_hash: String,
    /// Its dependencies.
    pub dependencies: Vec<Dependency>,
    /// Its state: `running` or a final status.
    pub state: NodeState,
    /// Hash of the node's request (null for the root: the root result embeds the DAG).
    pub request_hash: Option<String>,
    /// Hash of the node's result (null for the root).
    pub result_hash: Option<String>,
    /// When it started.
    pub started_at: Option<String>,
    /// When it finished.
    pub finished_at: Option<String>,
    /// The isolation it ran under (null when its agent is not registered).
    pub isolation: Option<crate::isolation::Isolation>,
    /// For a nested node: whether its adviser worked on the asking node's live worktree or on a
    /// snapshot of it (absent for the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<crate::workspace::WorktreeView>,
    /// For a nested node whose adviser would have been less isolated than the node that asked
    /// with the grants it asked for: the grants withheld so that it was not, and why (absent
    /// when it ran with the grants it asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attenuated: Option<crate::isolation::Attenuation>,
}

/// State of a DAG node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Running.
    Running,
    /// Finished: succeeded.
    Succeeded,
    /// Finished: blocked.
    Blocked,
    /// Finished: failed.
    Failed,
    /// Finished: timed out.
    TimedOut,
    /// Finished: cancelled.
    Cancelled,
    /// Refused before it ran.
    Rejected,
    /// The agent was unavailable.
    NotRun,
}

impl From<Status> for NodeState {
    fn from(s: Status) -> Self {
        match s {
            Status::Succeeded => NodeState::Succeeded,
            Status::Blocked => NodeState::Blocked,
            Status::Failed => NodeState::Failed,
            Status::TimedOut => NodeState::TimedOut,
            Status::Cancelled => NodeState::Cancelled,
            Status::Rejected => NodeState::Rejected,
            Status::NotRun => NodeState::NotRun,
        }
    }
}

impl DagStatus {
    /// The DAG status that closes a root with this status.
    pub fn closing(status: Status) -> DagStatus {
        match status {
            Status::Succeeded => DagStatus::Succeeded,
            Status::Blocked => DagStatus::Blocked,
            Status::TimedOut => DagStatus::TimedOut,
            Status::Cancelled => DagStatus::Cancelled,
            Status::Failed | Status::Rejected | Status::NotRun => DagStatus::Failed,
        }
    }
}

/// What `handoff capabilities --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capabilities {
    /// Always [`CAPABILITIES_SCHEMA`].
    pub schema_version: String,
    /// The handoff version.
    pub driver_version: String,
    /// `advice`, `handoff`.
    pub operations: Vec<Operation>,
    /// Each root verb and the nested capability its worker gets.
    pub root_forms: RootForms,
    /// What a worker may ask its supervisor for: `advice`.
    pub nested_operations: Vec<Operation>,
    /// The four modes.
    pub modes: Vec<Mode>,
    /// Default budgets.
    pub defaults: BudgetLimits,
    /// handoff's own sandbox on this machine, for agents whose CLI has none.
    pub sandbox: SandboxCapability,
    /// The operating system, and what is proven on it.
    pub platform: PlatformCapability,
    /// One entry per registered agent.
    pub providers: Vec<ProviderCapabilities>,
}

/// Whether handoff's own sandbox can run here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxCapability {
    /// `bubblewrap` (Linux).
    pub tool: String,
    /// Whether it was found on `PATH` and ran a command in namespaces of its own.
    pub available: bool,
    /// Where it is.
    pub path: Option<String>,
}

/// The operating system handoff runs on, and what is proven there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlatformCapability {
    /// `Linux` or `macOS`.
    pub os: String,
    /// Whether handoff's tests run on it (Linux), or it is only type-checked (macOS).
    pub proven: bool,
    /// What is missing or unproven here, one line each (none on Linux).
    pub caveats: Vec<String>,
}

/// The root verbs and the delegation of their workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RootForms {
    /// `handoff advice`.
    pub advice: RootForm,
    /// `handoff run`.
    pub run: RootForm,
    /// `handoff run-with-advice`.
    #[serde(rename = "run-with-advice")]
    pub run_with_advice: RootForm,
}

/// One root verb.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RootForm {
    /// Whether its worker may ask for advice.
    pub delegation: crate::request::DelegationMode,
}

impl Default for RootForms {
    fn default() -> Self {
        use crate::request::DelegationMode::{AdviceOnly, None};
        RootForms {
            advice: RootForm {
                delegation: AdviceOnly,
            },
            run: RootForm { delegation: None },
            run_with_advice: RootForm {
                delegation: AdviceOnly,
            },
        }
    }
}

/// One agent's capabilities and preflight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderCapabilities {
    /// The agent.
    pub id: AgentId,
    /// The executable name looked up on PATH.
    pub executable: String,
    /// Preflight outcome.
    pub preflight: PreflightReport,
    /// The installed CLI's version against the versions handoff was tested on.
    pub version: crate::VersionReport,
    /// What the CLI's own sandbox leaves in repositories, swept after its runs; null for a
    /// CLI without a sandbox of its own.
    pub sandbox_artifacts: Option<ArtifactsCapability>,
    /// Selection controls.
    pub selection: SelectionCapabilities,
    /// Grant controls.
    pub grants: GrantCapabilities,
    /// How it isolates the agent.
    pub isolation: IsolationCapabilities,
    /// What it can do in a continuation (`handoff continue`).
    pub continuation: ContinuationCapabilities,
}

/// What an agent CLI's own sandbox leaves in repositories (its mount points), by version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArtifactsCapability {
    /// `real` (read off the real binary) or `unproven`.
    pub verified: String,
    /// The versions it was read off, or why it is unproven.
    pub detail: String,
    /// Per version range, the paths left (relative to a git directory).
    pub rules: Vec<ArtifactRuleReport>,
}

/// One version range of an [`ArtifactsCapability`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArtifactRuleReport {
    /// The CLI versions (`>= 2.1.198`).
    pub versions: String,
    /// The paths, relative to the worktree's git directory and the common one.
    pub paths: Vec<String>,
}

impl From<&crate::SandboxArtifacts> for ArtifactsCapability {
    fn from(table: &crate::SandboxArtifacts) -> Self {
        let (verified, detail) = match table.checked {
            crate::ArtifactsChecked::Real(on) => ("real", on),
            crate::ArtifactsChecked::Unproven(why) => ("unproven", why),
        };
        ArtifactsCapability {
            verified: verified.into(),
            detail: detail.into(),
            rules: table
                .rules
                .iter()
                .map(|r| ArtifactRuleReport {
                    versions: r.versions.to_string(),
                    paths: r.paths.iter().map(|p| p.path.to_owned()).collect(),
                })
                .collect(),
        }
    }
}

/// Outcome of a preflight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreflightReport {
    /// The executable was found.
    pub installed: bool,
    /// Every probe passed.
    pub ok: bool,
    /// Absolute path of the executable, when found.
    pub path: Option<String>,
    /// First line of `--version`.
    pub version: Option<String>,
    /// Why it is not ok.
    pub reason: Option<String>,
    /// Whether this report came from the on-disk cache.
    pub cached: bool,
}

/// Which selection controls an agent accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectionCapabilities {
    /// `--model`.
    pub model: bool,
    /// Accepted `--effort` values (empty: not supported).
    pub effort: Vec<String>,
    /// `--max-turns`.
    pub max_turns: bool,
}

/// Which grant controls an agent accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantCapabilities {
    /// Can have bash.
    pub bash: bool,
    /// Can run without bash (`--bash false`).
    pub bash_disable: bool,
    /// Can search the web.
    pub web_search: bool,
    /// Can receive private MCP servers.
    pub mcp: bool,
    /// Can write the worktree (build, phase).
    pub write: bool,
    /// Can ask for nested advice.
    pub nested_source: bool,
}

/// What an agent can do in a continuation (`handoff continue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinuationCapabilities {
    /// Can receive a continued task (`--to`): its CLI keeps sessions handoff can resume.
    pub receive: bool,
    /// Its sessions can be read, so its conversation can be carried to a receiver.
    pub sessions: bool,
    /// What it receives: `full` (a carried conversation, resumed in its own store, checked
    /// there), `fresh-agent` (a new conversation its CLI keeps, started from the note and a
    /// recap: `--fallback fresh-agent`), `none`.
    pub receiver: ReceiverLevel,
    /// How the receiver was verified: `real` (against the real CLI, `cargo xtask e2e-real`) or
    /// `recorded` (against its documented flags and recorded outputs, with the fake agent);
    /// null for `none`.
    pub verified: Option<Verified>,
}

/// What an agent receives in a continuation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReceiverLevel {
    /// A carried conversation, resumed in the receiver's own session store.
    Full,
    /// A new conversation its CLI keeps, started from the note and a recap alone.
    FreshAgent,
    /// It cannot take a task over.
    None,
}

/// How an adapter's behaviour was verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verified {
    /// Against the real CLI, in `cargo xtask e2e-real`.
    Real,
    /// Against the CLI's documented flags and recorded outputs, with the fake agent (the CLI
    /// cannot be installed where handoff is tested).
    Recorded,
}

/// How an agent is isolated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IsolationCapabilities {
    /// The CLI confines file access natively.
    pub native_filesystem_isolation: bool,
    /// The CLI sandboxes shell commands natively.
    pub native_bash_sandbox: bool,
    /// `native-and-final-state` or `final-state-detection-only`.
    pub mutation_guarantee: String,
    /// Who holds the levels of its runs: `native` (its own sandbox), `handoff` (handoff's
    /// sandbox) or `none` (only its tool permissions).
    pub enforcement: crate::isolation::Enforcement,
    /// The levels per mode and grants, every shape it accepts (the README's isolation table).
    pub cases: Vec<crate::isolation::IsolationCase>,
}
