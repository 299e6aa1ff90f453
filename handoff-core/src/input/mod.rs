//! From raw inputs (flags, or a library call) to a validated [`Request`]. Validation is total:
//! every rule is checked here, against the target's static capabilities, before anything runs.
//! A refusal is an [`InputRejection`]: the input at fault and the message.
//!
//! The request is built here; its selection (model, effort, turns), its grants (and MCP
//! servers) and its place in the DAG (budgets, dependencies) each have their own file, and
//! `hash` defines the intent and request hashes.

mod grants;
mod hash;
mod lineage;
mod rejection;
mod selection;

pub use self::hash::{intent_hash, request_hash};
use self::lineage::parse_dependencies;
pub use self::rejection::InputRejection;
use crate::config::Config;
use crate::mcp::McpDescriptor;
use crate::names::{AgentId, Mode, Operation};
use crate::paths;
use crate::provider::Registry;
use crate::request::*;

/// The root verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `handoff run`: a bounded task; the worker cannot call handoff.
    Run,
    /// `handoff run-with-advice`: a bounded task whose worker may ask for read-only advice.
    RunWithAdvice,
    /// `handoff advice`: a read-only opinion.
    Advice,
}

impl Verb {
    /// The verb as typed.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Run => "run",
            Verb::RunWithAdvice => "run-with-advice",
            Verb::Advice => "advice",
        }
    }

    /// The operation the verb performs.
    pub fn operation(self) -> Operation {
        match self {
            Verb::Run | Verb::RunWithAdvice => Operation::Handoff,
            Verb::Advice => Operation::Advice,
        }
    }
}

/// Where the instructions come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instructions {
    /// An absolute path to a private file.
    File(String),
    /// Bytes already read from stdin (`--instructions -`).
    Stdin(Vec<u8>),
}

/// Raw inputs of one run, as strings exactly as given. Every field is validated by
/// [`RunInput::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInput {
    /// The verb.
    pub verb: Verb,
    /// `--caller-harness`.
    pub caller_harness: Option<String>,
    /// `--harness`.
    pub harness: Option<String>,
    /// `--mode`.
    pub mode: Option<String>,
    /// `--cwd`.
    pub cwd: Option<String>,
    /// `--instructions`.
    pub instructions: Option<Instructions>,
    /// `--result`.
    pub result: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--effort`.
    pub effort: Option<String>,
    /// `--max-turns`.
    pub max_turns: Option<String>,
    /// `--bash`.
    pub bash: Option<String>,
    /// `--web-search`.
    pub web_search: Option<String>,
    /// `--mcp-config`.
    pub mcp_config: Option<String>,
    /// `--max-depth`.
    pub max_depth: Option<String>,
    /// `--max-nodes`.
    pub max_nodes: Option<String>,
    /// `--max-advice-nodes`.
    pub max_advice_nodes: Option<String>,
    /// `--max-handoff-nodes`.
    pub max_handoff_nodes: Option<String>,
    /// `--max-concurrency`.
    pub max_concurrency: Option<String>,
    /// `--root-timeout-ms`.
    pub root_timeout_ms: Option<String>,
    /// `--timeout-ms`.
    pub timeout_ms: Option<String>,
    /// `--dependency` (repeatable).
    pub dependencies: Vec<String>,
    /// Whether handoff runs inside a worker (`HANDOFF_SUPERVISOR_CONTEXT` is set).
    pub nested: bool,
    /// `--wait`: wait for another root run on the same worktree to finish instead of refusing.
    pub wait: bool,
    /// `--allow-git-config`: a build or phase run may add or change git hooks and git settings
    /// that run a program.
    pub allow_git_config: bool,
    /// `--ignored`: the evidence covers ignored files too.
    pub ignored: bool,
    /// The MCP descriptor's bytes, when they come with a nested request rather than from a
    /// `--mcp-config` file.
    pub mcp_inline: Option<Vec<u8>>,
    /// `--failover`: the agents the run moves on to when its agent cannot answer (see
    /// [`crate::parse_failover`]); `None`: the configuration's `[failover] agents`.
    pub failover: Option<String>,
}

impl RunInput {
    /// An input with only the verb set.
    pub fn new(verb: Verb) -> RunInput {
        RunInput {
            verb,
            caller_harness: None,
            harness: None,
            mode: None,
            cwd: None,
            instructions: None,
            result: None,
            model: None,
            effort: None,
            max_turns: None,
            bash: None,
            web_search: None,
            mcp_config: None,
            max_depth: None,
            max_nodes: None,
            max_advice_nodes: None,
            max_handoff_nodes: None,
            max_concurrency: None,
            root_timeout_ms: None,
            timeout_ms: None,
            dependencies: Vec::new(),
            nested: false,
            wait: false,
            allow_git_config: false,
            ignored: false,
            mcp_inline: None,
            failover: None,
        }
    }
}

/// What the supervisor knows of the node that asks for nested advice: the ceiling of the new
/// node's grants and the DAG's limits. The caller is derived from it, never asserted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NestedParent<'a> {
    /// The parent node's target: the nested request's caller.
    pub caller: &'a AgentId,
    /// The parent node's depth.
    pub depth: u32,
    /// The root's budget limits.
    pub limits: BudgetLimits,
    /// The parent's grants.
    pub grants: &'a GrantsResolved,
    /// The parent's MCP servers (a nested request may use any subset, unchanged).
    pub mcp: Option<&'a McpDescriptor>,
}

/// A validated request plus the inputs that are not part of the contract.
#[derive(Debug, Clone)]
pub struct Validated {
    /// The request.
    pub request: Request,
    /// The parsed MCP descriptor, if `--mcp-config` was given.
    pub mcp: Option<McpDescriptor>,
}

pub(super) fn parse_int<T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy>(
    flag: &'static str,
    value: &Option<String>,
    min: T,
    max: T,
    default: T,
) -> Result<T, InputRejection> {
    let Some(v) = value else { return Ok(default) };
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(InputRejection::new(
            flag,
            format!("{flag} must be a whole number, got {v:?}"),
        ));
    }
    let out_of_range = || {
        InputRejection::new(
            flag,
            format!("{flag} must be between {min} and {max}, got {v}"),
        )
    };
    let n: T = v.parse().map_err(|_| out_of_range())?;
    if n < min || n > max {
        return Err(out_of_range());
    }
    Ok(n)
}

pub(super) fn parse_bool(
    flag: &'static str,
    value: &Option<String>,
) -> Result<Option<bool>, InputRejection> {
    match value.as_deref() {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(v) => Err(InputRejection::new(
            flag,
            format!("{flag} must be 'true' or 'false', got {v:?}"),
        )),
    }
}

/// Parses an agent id that must be registered; `flag` names the input it came from.
pub fn registered(
    registry: &Registry,
    flag: &'static str,
    value: &str,
) -> Result<AgentId, InputRejection> {
    AgentId::parse(value)
        .filter(|id| registry.get(id).is_some())
        .ok_or_else(|| {
            let known: Vec<String> = registry.ids().iter().map(|i| i.to_string()).collect();
            InputRejection::new(
                flag,
                format!(
                    "{flag} {value:?} is not a known agent; expected one of: {}",
                    known.join(", ")
                ),
            )
        })
}

// Here rather than in `config`, which knows no agent's capabilities.
impl Config {
    /// Checks every agent section against the registered agents' capabilities: the agent must
    /// exist, and its effort and turn defaults must be values that agent accepts.
    pub fn check_against(&self, registry: &Registry) -> Result<(), String> {
        for (id, a) in &self.agents {
            let spec = AgentId::parse(id)
                .and_then(|i| registry.get(&i).map(|p| p.spec().clone()))
                .ok_or_else(|| {
                    let known: Vec<String> = registry.ids().iter().map(|i| i.to_string()).collect();
                    format!(
                        "[agents.{id}]: unknown agent; expected one of: {}",
                        known.join(", ")
                    )
                })?;
            if let Some(e) = &a.effort
                && !spec.effort.contains(&e.as_str())
            {
                return Err(if spec.effort.is_empty() {
                    format!("agents.{id}.effort: {id} has no effort control")
                } else {
                    format!(
                        "agents.{id}.effort: {e:?} is not one of: {}",
                        spec.effort.join(", ")
                    )
                });
            }
            if a.max_turns.is_some() && spec.max_turns.is_none() {
                return Err(format!(
                    "agents.{id}.max_turns: {id} has no turn limit control"
                ));
            }
        }
        self.failover.check_limit()?;
        if !self.failover.agents.is_empty() {
            crate::parse_failover(&self.failover.agents.join(","), &registry.ids(), self)
                .map_err(|e| format!("failover.agents: {}", e.replacen("--failover ", "", 1)))?;
        }
        for (name, host) in &self.hosts {
            crate::check_host(name, host)?;
        }
        Ok(())
    }
}

impl RunInput {
    /// Validates every input and builds the request, with no user configuration.
    pub fn validate(&self, registry: &Registry) -> Result<Validated, InputRejection> {
        self.validate_with(registry, &Config::default())
    }

    /// Validates every input and builds the request; `config` supplies per-agent defaults
    /// (flags win over it). The first problem found is returned with the input at fault and a
    /// one-line message; nothing has been started.
    pub fn validate_with(
        &self,
        registry: &Registry,
        config: &Config,
    ) -> Result<Validated, InputRejection> {
        if self.nested {
            return Err(InputRejection::new(
                "verb",
                format!(
                    "inside a worker, handoff only accepts 'advice' through its supervisor; '{}' \
                     was refused",
                    self.verb.as_str()
                ),
            ));
        }
        self.build(registry, config, None)
    }

    /// The first flag a nested request may not carry, as a refusal: the supervisor derives the
    /// caller and the root owns the budgets and the worktree lease.
    pub fn nested_flag_refusal(&self) -> Option<InputRejection> {
        [
            ("--caller-harness", self.caller_harness.is_some()),
            ("--max-depth", self.max_depth.is_some()),
            ("--max-nodes", self.max_nodes.is_some()),
            ("--max-advice-nodes", self.max_advice_nodes.is_some()),
            ("--max-handoff-nodes", self.max_handoff_nodes.is_some()),
            ("--max-concurrency", self.max_concurrency.is_some()),
            ("--root-timeout-ms", self.root_timeout_ms.is_some()),
            ("--wait", self.wait),
            ("--allow-git-config", self.allow_git_config),
            ("--failover", self.failover.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
        .map(|flag| {
            InputRejection::new(
                flag,
                format!(
                    "{flag} is not accepted inside a worker: the supervisor derives the caller \
                     and the root run owns the budgets"
                ),
            )
        })
    }

    /// [`RunInput::validate_under`], refused with the message alone (what the supervisor's
    /// refusal carries).
    pub(crate) fn validate_nested(
        &self,
        registry: &Registry,
        config: &Config,
        parent: NestedParent<'_>,
    ) -> Result<Validated, String> {
        self.validate_under(registry, config, parent)
            .map_err(|rejection| rejection.reason)
    }

    /// Validates a nested advice request under `parent`: caller, lineage and budgets come from
    /// the supervisor, grants are attenuated from the parent's.
    pub(crate) fn validate_under(
        &self,
        registry: &Registry,
        config: &Config,
        parent: NestedParent<'_>,
    ) -> Result<Validated, InputRejection> {
        if self.verb != Verb::Advice {
            return Err(InputRejection::new(
                "verb",
                format!(
                    "nested handoff permits advice only; '{}' was refused",
                    self.verb.as_str()
                ),
            ));
        }
        if let Some(m) = self.nested_flag_refusal() {
            return Err(m);
        }
        self.build(registry, config, Some(parent))
    }

    fn build(
        &self,
        registry: &Registry,
        config: &Config,
        nested: Option<NestedParent<'_>>,
    ) -> Result<Validated, InputRejection> {
        let op = self.verb.operation();
        let mut missing = Vec::new();
        if self.caller_harness.is_none() && nested.is_none() {
            missing.push("--caller-harness");
        }
        if self.harness.is_none() {
            missing.push("--harness");
        }
        if op == Operation::Handoff && self.mode.is_none() {
            missing.push("--mode");
        }
        if self.cwd.is_none() {
            missing.push("--cwd");
        }
        if self.instructions.is_none() {
            missing.push("--instructions");
        }
        if let Some(first) = missing.first() {
            return Err(InputRejection::new(
                first,
                format!("missing argument(s): {}", missing.join(", ")),
            ));
        }
        let (Some(target), Some(cwd), Some(instructions)) =
            (&self.harness, &self.cwd, &self.instructions)
        else {
            return Err(InputRejection::new("--harness", "missing arguments"));
        };

        let caller = match (nested, &self.caller_harness) {
            (Some(p), _) => p.caller.clone(),
            (None, Some(c)) => registered(registry, "--caller-harness", c)?,
            (None, None) => {
                return Err(InputRejection::new(
                    "--caller-harness",
                    "missing argument(s): --caller-harness",
                ));
            }
        };
        if nested.is_none()
            && op == Operation::Handoff
            && caller != AgentId::CODEX
            && caller != AgentId::CLAUDE
        {
            return Err(InputRejection::new(
                "--caller-harness",
                format!(
                    "root {} requires --caller-harness codex or claude, got {caller}",
                    self.verb.as_str()
                ),
            ));
        }
        let target = registered(registry, "--harness", target)?;
        let spec = registry
            .get(&target)
            .map(|p| p.spec().clone())
            .ok_or_else(|| InputRejection::new("--harness", "unknown target"))?;

        let mode = match (op, &self.mode) {
            (Operation::Advice, Some(_)) => {
                return Err(InputRejection::new(
                    "--mode",
                    "advice does not accept --mode",
                ));
            }
            (Operation::Advice, None) => None,
            (Operation::Handoff, Some(m)) => Some(Mode::parse(m).ok_or_else(|| {
                InputRejection::new(
                    "--mode",
                    format!("--mode must be one of build, phase, review, verify; got {m:?}"),
                )
            })?),
            (Operation::Handoff, None) => {
                return Err(InputRejection::new("--mode", "missing argument(s): --mode"));
            }
        };
        let write = mode.is_some_and(Mode::writes);
        if write && !spec.grants.write {
            return Err(InputRejection::new(
                "--mode",
                format!(
                    "{} cannot write the worktree; use review or verify",
                    spec.id
                ),
            ));
        }

        let cwd = paths::check_cwd(cwd).map_err(InputRejection::at("--cwd"))?;

        let agent_config = config.agent(&spec.id);
        let selection = self.selection(&spec, op, &agent_config)?;
        let (grants, mcp) = self.grants(&spec, write, nested)?;
        let (budgets, dependencies) = match nested {
            None => {
                if !self.dependencies.is_empty() {
                    return Err(InputRejection::new(
                        "--dependency",
                        "--dependency is for nested requests; root requests cannot depend on a \
                         pre-existing supervisor node",
                    ));
                }
                (self.budgets(op)?, Vec::new())
            }
            Some(p) => (
                self.nested_budgets(p)?,
                parse_dependencies(&self.dependencies)?,
            ),
        };

        let bytes = match instructions {
            Instructions::File(p) => {
                paths::read_input_file("--instructions", p, paths::MAX_INSTRUCTIONS_BYTES + 1)
                    .map_err(InputRejection::at("--instructions"))?
            }
            Instructions::Stdin(b) => b.clone(),
        };
        let instructions =
            paths::check_instructions(bytes).map_err(InputRejection::at("--instructions"))?;

        let delegation = match (nested, self.verb) {
            (None, Verb::Run) => Delegation {
                mode: DelegationMode::None,
                provenance: DelegationSource::VerbDerived,
            },
            (None, Verb::RunWithAdvice | Verb::Advice) => Delegation {
                mode: DelegationMode::AdviceOnly,
                provenance: DelegationSource::VerbDerived,
            },
            // An adviser may ask further advisers while the depth budget allows another level.
            (Some(p), _) => Delegation {
                mode: if p.depth + 1 < p.limits.max_depth {
                    DelegationMode::AdviceOnly
                } else {
                    DelegationMode::None
                },
                provenance: DelegationSource::ParentAttenuated,
            },
        };
        let run_id = format!("run-{}", uuid::Uuid::new_v4());
        let mut request = Request {
            schema_version: REQUEST_SCHEMA.into(),
            operation: op,
            caller: Caller {
                harness: caller,
                provenance: if nested.is_some() {
                    CallerProvenance::SupervisorDerived
                } else {
                    CallerProvenance::RootAsserted
                },
            },
            target: Target { harness: target },
            mode,
            cwd: cwd.to_string(),
            instructions,
            selection,
            grants,
            delegation,
            lineage: Lineage {
                root_run_id: run_id.clone(),
                run_id,
                parent_run_id: None,
                depth: nested.map_or(0, |p| p.depth + 1),
                dependencies,
            },
            budgets,
            allow_git_config: self.allow_git_config,
            include_ignored: self.ignored,
            intent_hash: String::new(),
        };
        if request.allow_git_config && !request.writes() {
            return Err(InputRejection::new(
                "--allow-git-config",
                "--allow-git-config applies to build and phase runs: a read-only run may change \
                 nothing",
            ));
        }
        request.intent_hash = intent_hash(&request);
        Ok(Validated { request, mcp })
    }
}

#[cfg(test)]
mod tests;
