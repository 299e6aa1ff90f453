//! From raw inputs (flags, or a library call) to a validated [`Request`]. Validation is total:
//! every rule is checked here, against the target's static capabilities, before anything runs.

use sha2::{Digest, Sha256};

use crate::config::{AgentConfig, Config};
use crate::mcp::McpDescriptor;
use crate::names::{AgentId, Mode, Operation, check_model};
use crate::paths;
use crate::provider::{ProviderSpec, Registry};
use crate::redact::quote;
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
    /// The MCP descriptor's bytes, when they come with a nested request rather than from a
    /// `--mcp-config` file.
    pub mcp_inline: Option<Vec<u8>>,
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
            mcp_inline: None,
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

fn parse_int<T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy>(
    flag: &str,
    value: &Option<String>,
    min: T,
    max: T,
    default: T,
) -> Result<T, String> {
    let Some(v) = value else { return Ok(default) };
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{flag} must be a whole number, got {v:?}"));
    }
    let n: T = v
        .parse()
        .map_err(|_| format!("{flag} must be between {min} and {max}, got {v}"))?;
    if n < min || n > max {
        return Err(format!("{flag} must be between {min} and {max}, got {v}"));
    }
    Ok(n)
}

fn parse_bool(flag: &str, value: &Option<String>) -> Result<Option<bool>, String> {
    match value.as_deref() {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(v) => Err(format!("{flag} must be 'true' or 'false', got {v:?}")),
    }
}

fn sha256_tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Parses an agent id that must be registered.
pub fn registered(registry: &Registry, flag: &str, value: &str) -> Result<AgentId, String> {
    AgentId::parse(value)
        .filter(|id| registry.get(id).is_some())
        .ok_or_else(|| {
            let known: Vec<String> = registry.ids().iter().map(|i| i.to_string()).collect();
            format!(
                "{flag} {value:?} is not a known agent; expected one of: {}",
                known.join(", ")
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
        Ok(())
    }
}

impl RunInput {
    /// Validates every input and builds the request, with no user configuration.
    pub fn validate(&self, registry: &Registry) -> Result<Validated, String> {
        self.validate_with(registry, &Config::default())
    }

    /// Validates every input and builds the request; `config` supplies per-agent defaults
    /// (flags win over it). The first problem found is returned as a one-line message; nothing
    /// has been started.
    pub fn validate_with(&self, registry: &Registry, config: &Config) -> Result<Validated, String> {
        if self.nested {
            return Err(format!(
                "inside a worker, handoff only accepts 'advice' through its supervisor; '{}' was \
                 refused",
                self.verb.as_str()
            ));
        }
        self.build(registry, config, None)
    }

    /// The first flag a nested request may not carry, as a refusal: the supervisor derives the
    /// caller and the root owns the budgets and the worktree lease.
    pub fn nested_flag_refusal(&self) -> Option<String> {
        [
            ("--caller-harness", self.caller_harness.is_some()),
            ("--max-depth", self.max_depth.is_some()),
            ("--max-nodes", self.max_nodes.is_some()),
            ("--max-advice-nodes", self.max_advice_nodes.is_some()),
            ("--max-handoff-nodes", self.max_handoff_nodes.is_some()),
            ("--max-concurrency", self.max_concurrency.is_some()),
            ("--root-timeout-ms", self.root_timeout_ms.is_some()),
            ("--wait", self.wait),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
        .map(|flag| {
            format!(
                "{flag} is not accepted inside a worker: the supervisor derives the caller and \
                 the root run owns the budgets"
            )
        })
    }

    /// Validates a nested advice request under `parent`: caller, lineage and budgets come from
    /// the supervisor, grants are attenuated from the parent's.
    pub(crate) fn validate_nested(
        &self,
        registry: &Registry,
        config: &Config,
        parent: NestedParent<'_>,
    ) -> Result<Validated, String> {
        if self.verb != Verb::Advice {
            return Err(format!(
                "nested handoff permits advice only; '{}' was refused",
                self.verb.as_str()
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
    ) -> Result<Validated, String> {
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
        if !missing.is_empty() {
            return Err(format!("missing argument(s): {}", missing.join(", ")));
        }
        let (Some(target), Some(cwd), Some(instructions)) =
            (&self.harness, &self.cwd, &self.instructions)
        else {
            return Err("missing arguments".into());
        };

        let caller = match (nested, &self.caller_harness) {
            (Some(p), _) => p.caller.clone(),
            (None, Some(c)) => registered(registry, "--caller-harness", c)?,
            (None, None) => return Err("missing argument(s): --caller-harness".into()),
        };
        if nested.is_none()
            && op == Operation::Handoff
            && caller != AgentId::CODEX
            && caller != AgentId::CLAUDE
        {
            return Err(format!(
                "root {} requires --caller-harness codex or claude, got {caller}",
                self.verb.as_str()
            ));
        }
        let target = registered(registry, "--harness", target)?;
        let spec = registry
            .get(&target)
            .map(|p| p.spec().clone())
            .ok_or("unknown target")?;

        let mode = match (op, &self.mode) {
            (Operation::Advice, Some(_)) => return Err("advice does not accept --mode".into()),
            (Operation::Advice, None) => None,
            (Operation::Handoff, Some(m)) => Some(Mode::parse(m).ok_or_else(|| {
                format!("--mode must be one of build, phase, review, verify; got {m:?}")
            })?),
            (Operation::Handoff, None) => return Err("missing argument(s): --mode".into()),
        };
        let write = mode.is_some_and(Mode::writes);
        if write && !spec.grants.write {
            return Err(format!(
                "{} cannot write the worktree; use review or verify",
                spec.id
            ));
        }

        let cwd = paths::check_cwd(cwd)?;

        let agent_config = config.agent(&spec.id);
        let selection = self.selection(&spec, op, &agent_config)?;
        let (grants, mcp) = self.grants(&spec, write, nested)?;
        let (budgets, dependencies) = match nested {
            None => {
                if !self.dependencies.is_empty() {
                    return Err(
                        "--dependency is for nested requests; root requests cannot depend on a \
                         pre-existing supervisor node"
                            .into(),
                    );
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
                paths::read_input_file("--instructions", p, paths::MAX_INSTRUCTIONS_BYTES + 1)?
            }
            Instructions::Stdin(b) => b.clone(),
        };
        let instructions = paths::check_instructions(bytes)?;

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
            intent_hash: String::new(),
        };
        request.intent_hash = intent_hash(&request);
        Ok(Validated { request, mcp })
    }

    fn selection(
        &self,
        spec: &ProviderSpec,
        op: Operation,
        config: &AgentConfig,
    ) -> Result<Selection, String> {
        let id = &spec.id;
        if let Some(m) = &self.model {
            check_model(m)?;
        }
        let check_effort = |e: &str, origin: &str| {
            if spec.effort.is_empty() {
                return Err(format!("{origin} is unsupported for {id}"));
            }
            if !spec.effort.contains(&e) {
                return Err(format!(
                    "{origin} {e:?} is unsupported for {id}; expected one of: {}",
                    spec.effort.join(", ")
                ));
            }
            Ok(())
        };
        if let Some(e) = &self.effort {
            check_effort(e, "--effort")?;
        }
        if let Some(e) = &config.effort {
            check_effort(e, &format!("config agents.{id}.effort"))?;
        }
        if spec.max_turns.is_none() && config.max_turns.is_some() {
            return Err(format!(
                "config agents.{id}.max_turns: turn limits are unsupported for {id}"
            ));
        }
        let max_turns = match &self.max_turns {
            Some(_) if spec.max_turns.is_none() => {
                return Err(format!("--max-turns is unsupported for {id}"));
            }
            Some(_) => Some(parse_int("--max-turns", &self.max_turns, 1u32, 100, 1)?),
            None => None,
        };
        let (model, model_src) = match (&self.model, &config.model) {
            (Some(m), _) => (m.clone(), SelectionSource::Explicit),
            (None, Some(m)) => (m.clone(), SelectionSource::Config),
            (None, None) => (
                PROVIDER_DEFAULT.to_owned(),
                SelectionSource::ProviderDefault,
            ),
        };
        let (effort, effort_src) = match (&self.effort, &config.effort, op, spec.advice_effort) {
            (Some(e), _, _, _) => (e.clone(), SelectionSource::Explicit),
            (None, Some(e), _, _) => (e.clone(), SelectionSource::Config),
            (None, None, Operation::Advice, Some(d)) => {
                (d.to_owned(), SelectionSource::OperationDefault)
            }
            (None, None, _, _) => (
                PROVIDER_DEFAULT.to_owned(),
                SelectionSource::ProviderDefault,
            ),
        };
        let (turns, turns_src) = match (max_turns, config.max_turns, spec.max_turns) {
            (Some(n), _, _) => (Some(n), SelectionSource::Explicit),
            (None, Some(n), Some(_)) => (Some(n), SelectionSource::Config),
            (None, _, Some(d)) => (
                Some(if op == Operation::Advice {
                    d.advice
                } else {
                    d.handoff
                }),
                SelectionSource::OperationDefault,
            ),
            (None, _, None) => (None, SelectionSource::ProviderDefault),
        };
        Ok(Selection {
            requested: SelectionRequested {
                model: self.model.clone(),
                effort: self.effort.clone(),
                max_turns,
            },
            resolved: SelectionResolved {
                model,
                effort,
                max_turns: turns,
            },
            provenance: SelectionProvenance {
                model: model_src,
                effort: effort_src,
                max_turns: turns_src,
            },
        })
    }

    fn grants(
        &self,
        spec: &ProviderSpec,
        write: bool,
        nested: Option<NestedParent<'_>>,
    ) -> Result<(Grants, Option<McpDescriptor>), String> {
        let bash = parse_bool("--bash", &self.bash)?;
        let web = parse_bool("--web-search", &self.web_search)?;
        // A nested request inherits its parent's bash grant unless it asks for less.
        let bash_default = nested.is_none_or(|p| p.grants.bash);
        let bash_resolved = bash.unwrap_or(bash_default);
        let web_resolved = web.unwrap_or(false);
        if let Some(p) = nested {
            if bash_resolved && !p.grants.bash {
                return Err(format!(
                    "nested request cannot expand the parent's grants: bash is not held by the \
                     parent ({} runs with bash=false)",
                    p.caller
                ));
            }
            if web_resolved && !p.grants.web_search {
                return Err(
                    "nested request cannot expand the parent's grants: web search is not held \
                     by the parent"
                        .into(),
                );
            }
        }
        if !bash_resolved && !spec.grants.bash_disable {
            return Err(format!("bash=false is unsupported for {}", spec.id));
        }
        if bash_resolved && !spec.grants.bash {
            return Err(format!(
                "{} has no bash control; pass --bash false",
                spec.id
            ));
        }
        if web_resolved && !spec.grants.web_search {
            return Err(format!("webSearch is unsupported for {}", spec.id));
        }
        let bytes = match (&self.mcp_config, &self.mcp_inline) {
            (Some(_), Some(_)) => {
                return Err("give the MCP descriptor once (file or inline), not both".into());
            }
            (Some(_), None) | (None, Some(_)) if !spec.grants.mcp => {
                return Err(format!("--mcp-config is unsupported for {}", spec.id));
            }
            (Some(p), None) => Some(paths::read_input_file(
                "--mcp-config",
                p,
                crate::mcp::MAX_MCP_BYTES,
            )?),
            (None, Some(b)) => {
                if b.len() > crate::mcp::MAX_MCP_BYTES {
                    return Err(format!(
                        "the MCP descriptor exceeds {} bytes",
                        crate::mcp::MAX_MCP_BYTES
                    ));
                }
                Some(b.clone())
            }
            (None, None) => None,
        };
        let mcp = match bytes {
            Some(bytes) => {
                let d = McpDescriptor::parse(&bytes)?;
                Some((sha256_tagged(&bytes), d))
            }
            None => None,
        };
        let has_mcp = mcp.as_ref().is_some_and(|(_, d)| !d.servers.is_empty());
        if let (Some(p), Some((_, d))) = (nested, &mcp) {
            check_mcp_subset(d, p.mcp)?;
        }
        let src = |given: bool| match (given, nested) {
            (true, _) => GrantSource::Explicit,
            (false, Some(_)) => GrantSource::ParentAttenuated,
            (false, None) => GrantSource::OperationDefault,
        };
        let grants = Grants {
            requested: GrantsRequested {
                bash: bash_resolved,
                web_search: web_resolved,
                mcp: has_mcp,
            },
            resolved: GrantsResolved {
                bash: bash_resolved,
                web_search: web_resolved,
                mcp: has_mcp,
                write,
            },
            provenance: GrantsProvenance {
                bash: src(bash.is_some()),
                web_search: src(web.is_some()),
                mcp: src(self.mcp_config.is_some() || self.mcp_inline.is_some()),
                write: GrantSource::ModeDerived,
            },
            mcp: McpGrant {
                digest: mcp.as_ref().filter(|_| has_mcp).map(|(d, _)| d.clone()),
                servers: mcp.as_ref().map(|(_, d)| d.names()).unwrap_or_default(),
            },
        };
        Ok((
            grants,
            mcp.map(|(_, d)| d).filter(|d| !d.servers.is_empty()),
        ))
    }

    /// A nested node's budgets: the root's limits, with a shorter per-node timeout if asked.
    /// The remaining counts are filled in by the DAG when the node is admitted.
    fn nested_budgets(&self, parent: NestedParent<'_>) -> Result<Budgets, String> {
        let mut limits = parent.limits;
        if self.timeout_ms.is_some() {
            limits.timeout_ms = parse_int(
                "--timeout-ms",
                &self.timeout_ms,
                100,
                parent.limits.timeout_ms,
                parent.limits.timeout_ms,
            )?;
        }
        Ok(Budgets {
            limits,
            remaining: BudgetRemaining {
                nodes: 0,
                advice_nodes: 0,
                handoff_nodes: 0,
            },
        })
    }

    fn budgets(&self, op: Operation) -> Result<Budgets, String> {
        let d = BudgetLimits::default();
        let limits = BudgetLimits {
            max_depth: parse_int("--max-depth", &self.max_depth, 0, 32, d.max_depth)?,
            max_nodes: parse_int("--max-nodes", &self.max_nodes, 1, 256, d.max_nodes)?,
            max_advice_nodes: parse_int(
                "--max-advice-nodes",
                &self.max_advice_nodes,
                0,
                256,
                d.max_advice_nodes,
            )?,
            max_handoff_nodes: parse_int(
                "--max-handoff-nodes",
                &self.max_handoff_nodes,
                0,
                256,
                d.max_handoff_nodes,
            )?,
            max_concurrency: parse_int(
                "--max-concurrency",
                &self.max_concurrency,
                1,
                32,
                d.max_concurrency,
            )?,
            root_timeout_ms: parse_int(
                "--root-timeout-ms",
                &self.root_timeout_ms,
                100,
                86_400_000,
                d.root_timeout_ms,
            )?,
            timeout_ms: parse_int(
                "--timeout-ms",
                &self.timeout_ms,
                100,
                3_600_000,
                d.timeout_ms,
            )?,
        };
        if limits.max_advice_nodes + limits.max_handoff_nodes < limits.max_nodes {
            return Err(
                "--max-advice-nodes plus --max-handoff-nodes must be at least --max-nodes".into(),
            );
        }
        if limits.timeout_ms > limits.root_timeout_ms {
            return Err("--timeout-ms must not exceed --root-timeout-ms".into());
        }
        let (advice, handoff) = match op {
            Operation::Advice => (1, 0),
            Operation::Handoff => (0, 1),
        };
        if limits.max_advice_nodes < advice {
            return Err("--max-advice-nodes 0 leaves no node for this advice request".into());
        }
        if limits.max_handoff_nodes < handoff {
            return Err("--max-handoff-nodes 0 leaves no node for this handoff".into());
        }
        Ok(Budgets {
            limits,
            remaining: BudgetRemaining {
                nodes: limits.max_nodes - 1,
                advice_nodes: limits.max_advice_nodes - advice,
                handoff_nodes: limits.max_handoff_nodes - handoff,
            },
        })
    }
}

/// Parses `--dependency` values (`requires:<id>`, `advises:<id>`, `verifies:<id>`).
fn parse_dependencies(values: &[String]) -> Result<Vec<Dependency>, String> {
    if values.len() > MAX_DEPENDENCIES {
        return Err(format!(
            "at most {} --dependency values are accepted",
            MAX_DEPENDENCIES
        ));
    }
    values
        .iter()
        .map(|v| {
            let (kind, id) = v.split_once(':').ok_or_else(|| {
                format!("--dependency must be requires:<runId>, advises:<runId> or verifies:<runId>; got {:?}", quote(v))
            })?;
            let kind = match kind {
                "requires" => DependencyKind::Requires,
                "advises" => DependencyKind::Advises,
                "verifies" => DependencyKind::Verifies,
                _ => {
                    return Err(format!(
                        "--dependency type must be requires, advises or verifies; got {:?}",
                        quote(kind)
                    ));
                }
            };
            if id.is_empty() || id.len() > 128 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return Err(format!(
                    "--dependency run id must be 1-128 letters, digits, '-' or '_'; got {:?}",
                    quote(id)
                ));
            }
            Ok(Dependency {
                run_id: id.to_owned(),
                kind,
            })
        })
        .collect()
}

/// A nested request's MCP servers must be a subset of the parent's, each exactly as the parent
/// has it (same command, arguments, URL and secret references).
fn check_mcp_subset(d: &McpDescriptor, parent: Option<&McpDescriptor>) -> Result<(), String> {
    if d.servers.is_empty() {
        return Ok(());
    }
    let Some(parent) = parent else {
        return Err(
            "nested request cannot expand the parent's grants: the parent has no MCP servers"
                .into(),
        );
    };
    for s in &d.servers {
        match parent.servers.iter().find(|p| p.name() == s.name()) {
            None => {
                return Err(format!(
                    "nested request cannot expand the parent's grants: MCP server {:?} is not \
                     one of the parent's",
                    quote(s.name())
                ));
            }
            Some(p) if p != s => {
                return Err(format!(
                    "nested request cannot expand the parent's grants: MCP server {:?} differs \
                     from the parent's definition",
                    quote(s.name())
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// The intent hash: what is asked, of whom, with which controls — independent of lineage,
/// budgets and caller. Canonical JSON (sorted keys, no whitespace) under `handoff.intent.v1`.
pub fn intent_hash(r: &Request) -> String {
    let v = serde_json::json!({
        "schemaVersion": "handoff.intent.v1",
        "operation": r.operation,
        "targetHarness": r.target.harness,
        "mode": r.mode,
        "cwd": r.cwd,
        "instructions": r.instructions,
        "selection": r.selection.resolved,
        "grants": {
            "resolved": r.grants.resolved,
            "mcpDigest": r.grants.mcp.digest,
            "mcpServers": r.grants.mcp.servers,
        },
        "delegation": r.delegation.mode,
    });
    // serde_json's map is ordered by key, so this serialization is canonical.
    sha256_tagged(v.to_string().as_bytes())
}

/// `sha256:<hex>` of a request's serialized bytes (`JSON + "\n"`).
pub fn request_hash(r: &Request) -> String {
    let mut bytes = serde_json::to_vec(r).unwrap_or_default();
    bytes.push(b'\n');
    sha256_tagged(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{
        AnswerSource, Invocation, InvocationError, Observation, Preflight, ProbeEnv, Provider,
        RawOutput, RunDir, StdinSource,
    };
    use crate::result::GrantCapabilities;
    use proptest::prelude::*;
    use std::sync::Arc;

    struct Stub(ProviderSpec);

    #[async_trait::async_trait]
    impl Provider for Stub {
        fn spec(&self) -> &ProviderSpec {
            &self.0
        }
        fn invocation(&self, r: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
            Ok(Invocation {
                program: run.executable.clone(),
                args: vec![],
                env: Default::default(),
                cwd: r.cwd.clone().into(),
                stdin: StdinSource::Null,
                dirs: vec![],
                files: vec![],
                answer: AnswerSource::Stdout,
                policy: serde_json::Value::Null,
                secrets: vec![],
            })
        }
        fn parse(&self, _: &RawOutput) -> Result<Observation, crate::output::OutputError> {
            Err(crate::output::OutputError::Missing)
        }
        async fn preflight(&self, _: &camino::Utf8Path, _: &ProbeEnv) -> Preflight {
            Preflight {
                version: None,
                failure: None,
            }
        }
    }

    fn registry() -> Registry {
        let spec = |id: AgentId, effort: &'static [&'static str], turns: bool| ProviderSpec {
            id,
            executable: "x",
            extra_dirs: &[],
            effort,
            advice_effort: Some("high"),
            max_turns: turns.then_some(crate::provider::TurnDefaults {
                handoff: 12,
                advice: 32,
            }),
            grants: GrantCapabilities {
                bash: true,
                bash_disable: true,
                web_search: false,
                mcp: false,
                write: true,
                nested_source: true,
            },
            native_filesystem_isolation: true,
            native_bash_sandbox: true,
            env_passthrough: &[],
        };
        let mut r = Registry::new();
        r.register(Arc::new(Stub(spec(
            AgentId::CODEX,
            &["low", "high"],
            false,
        ))));
        r.register(Arc::new(Stub(spec(
            AgentId::CLAUDE,
            &["low", "high"],
            true,
        ))));
        r
    }

    fn input(dir: &str) -> RunInput {
        let mut i = RunInput::new(Verb::Run);
        i.caller_harness = Some("claude".into());
        i.harness = Some("codex".into());
        i.mode = Some("build".into());
        i.cwd = Some(dir.into());
        i.instructions = Some(Instructions::Stdin(b"do it".to_vec()));
        i
    }

    fn tmp() -> (tempfile::TempDir, String) {
        let t = tempfile::tempdir().unwrap();
        let p = std::fs::canonicalize(t.path())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        (t, p)
    }

    #[test]
    fn defaults_and_provenance() {
        let (_t, dir) = tmp();
        let v = input(&dir).validate(&registry()).unwrap();
        let r = v.request;
        assert_eq!(r.selection.resolved.effort, PROVIDER_DEFAULT);
        assert_eq!(
            r.selection.provenance.max_turns,
            SelectionSource::ProviderDefault
        );
        assert!(r.grants.resolved.write && r.grants.resolved.bash && !r.grants.resolved.web_search);
        assert_eq!(r.budgets.remaining.handoff_nodes, 3);
        assert_eq!(r.budgets.remaining.nodes, 15);

        let mut a = input(&dir);
        a.verb = Verb::Advice;
        a.mode = None;
        a.harness = Some("claude".into());
        let r = a.validate(&registry()).unwrap().request;
        assert_eq!(r.selection.resolved.effort, "high");
        assert_eq!(
            r.selection.provenance.effort,
            SelectionSource::OperationDefault
        );
        assert_eq!(r.selection.resolved.max_turns, Some(32));
        assert!(!r.grants.resolved.write);
    }

    #[test]
    fn precedence_is_flag_then_config_then_operation_default_then_provider_default() {
        let (_t, dir) = tmp();
        let config =
            Config::parse("[agents.claude]\nmodel = \"cfg\"\neffort = \"low\"\nmax_turns = 7\n")
                .unwrap();
        let mut a = input(&dir);
        a.verb = Verb::Advice;
        a.mode = None;
        a.harness = Some("claude".into());
        let r = a.validate_with(&registry(), &config).unwrap().request;
        assert_eq!(r.selection.resolved.model, "cfg");
        assert_eq!(r.selection.resolved.effort, "low");
        assert_eq!(r.selection.resolved.max_turns, Some(7));
        assert_eq!(r.selection.provenance.effort, SelectionSource::Config);
        a.effort = Some("high".into());
        a.max_turns = Some("3".into());
        let r = a.validate_with(&registry(), &config).unwrap().request;
        assert_eq!(r.selection.resolved.effort, "high");
        assert_eq!(r.selection.provenance.effort, SelectionSource::Explicit);
        assert_eq!(r.selection.resolved.max_turns, Some(3));
        assert_eq!(r.selection.provenance.model, SelectionSource::Config);
        let r = a
            .validate_with(&registry(), &Config::default())
            .unwrap()
            .request;
        assert_eq!(
            r.selection.provenance.model,
            SelectionSource::ProviderDefault
        );
        a.effort = None;
        let r = a
            .validate_with(&registry(), &Config::default())
            .unwrap()
            .request;
        assert_eq!(
            r.selection.provenance.effort,
            SelectionSource::OperationDefault
        );
        // A config value the agent cannot take is refused like a flag would be.
        let bad = Config::parse("[agents.codex]\nmax_turns = 4\n").unwrap();
        assert!(
            input(&dir)
                .validate_with(&registry(), &bad)
                .unwrap_err()
                .contains("max_turns")
        );
    }

    #[test]
    fn intent_hash_ignores_lineage_and_budgets_but_not_the_model() {
        let (_t, dir) = tmp();
        let a = input(&dir).validate(&registry()).unwrap().request;
        let mut b = input(&dir);
        b.max_concurrency = Some("8".into());
        let b = b.validate(&registry()).unwrap().request;
        assert_ne!(a.lineage.run_id, b.lineage.run_id);
        assert_eq!(a.intent_hash, b.intent_hash);
        let mut c = input(&dir);
        c.model = Some("gpt-x".into());
        assert_ne!(
            c.validate(&registry()).unwrap().request.intent_hash,
            a.intent_hash
        );
    }

    #[test]
    fn root_verbs_derive_their_delegation() {
        let (_t, dir) = tmp();
        let reg = registry();
        let mut i = input(&dir);
        assert_eq!(
            i.validate(&reg).unwrap().request.delegation.mode,
            DelegationMode::None
        );
        i.verb = Verb::RunWithAdvice;
        let r = i.validate(&reg).unwrap().request;
        assert_eq!(r.delegation.mode, DelegationMode::AdviceOnly);
        assert_eq!(r.delegation.provenance, DelegationSource::VerbDerived);
    }

    #[test]
    fn nested_requests_are_attenuated_and_derived() {
        let (_t, dir) = tmp();
        let reg = registry();
        let parent_grants = GrantsResolved {
            bash: false,
            web_search: false,
            mcp: false,
            write: true,
        };
        let caller = AgentId::parse("codex").unwrap();
        let parent = |depth| NestedParent {
            caller: &caller,
            depth,
            limits: BudgetLimits::default(),
            grants: &parent_grants,
            mcp: None,
        };
        let mut i = input(&dir);
        i.verb = Verb::Advice;
        i.mode = None;
        i.caller_harness = None;
        // bash defaults to the parent's grant; asking for more is refused.
        let r = i
            .validate_nested(&reg, &Config::default(), parent(0))
            .unwrap()
            .request;
        assert!(!r.grants.resolved.bash);
        assert_eq!(r.grants.provenance.bash, GrantSource::ParentAttenuated);
        assert_eq!(r.caller.harness, caller);
        assert_eq!(r.caller.provenance, CallerProvenance::SupervisorDerived);
        assert_eq!(r.lineage.depth, 1);
        assert_eq!(r.delegation.mode, DelegationMode::AdviceOnly);
        assert_eq!(
            i.validate_nested(&reg, &Config::default(), parent(2))
                .unwrap()
                .request
                .delegation
                .mode,
            DelegationMode::None,
            "the last level allowed by maxDepth cannot ask further"
        );
        let refuse = |f: &dyn Fn(&mut RunInput)| {
            let mut j = i.clone();
            f(&mut j);
            j.validate_nested(&reg, &Config::default(), parent(0))
                .unwrap_err()
        };
        assert!(refuse(&|j| j.bash = Some("true".into())).contains("bash is not held"));
        assert!(
            refuse(&|j| j.caller_harness = Some("codex".into())).contains("derives the caller")
        );
        assert!(refuse(&|j| j.max_nodes = Some("3".into())).contains("owns the budgets"));
        assert!(refuse(&|j| j.verb = Verb::Run).contains("advice only"));
        assert!(refuse(&|j| j.timeout_ms = Some("700000".into())).contains("between"));
        assert!(refuse(&|j| j.dependencies = vec!["needs:x".into()]).contains("type"));
        assert!(refuse(&|j| j.dependencies = vec!["requires".into()]).contains("requires:<runId>"));
        assert!(
            refuse(&|j| j.mcp_inline = Some(br#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"a","transport":"stdio","command":"/bin/x","args":[],"env":{}}]}"#.to_vec()))
                .contains("unsupported for codex")
        );
        let mut j = i.clone();
        j.dependencies = vec!["advises:run-1".into(), "requires:run-2".into()];
        j.timeout_ms = Some("1000".into());
        let r = j
            .validate_nested(&reg, &Config::default(), parent(0))
            .unwrap()
            .request;
        assert_eq!(r.lineage.dependencies.len(), 2);
        assert_eq!(r.lineage.dependencies[0].kind, DependencyKind::Advises);
        assert_eq!(r.budgets.limits.timeout_ms, 1000);
    }

    #[test]
    fn refusals() {
        let (_t, dir) = tmp();
        let reg = registry();
        let refuse = |f: &dyn Fn(&mut RunInput)| {
            let mut i = input(&dir);
            f(&mut i);
            i.validate(&reg).unwrap_err()
        };
        assert!(refuse(&|i| i.max_turns = Some("5".into())).contains("unsupported for codex"));
        assert!(refuse(&|i| i.effort = Some("max".into())).contains("expected one of"));
        assert!(refuse(&|i| i.web_search = Some("true".into())).contains("webSearch"));
        assert!(refuse(&|i| i.bash = Some("yes".into())).contains("'true' or 'false'"));
        assert!(refuse(&|i| i.caller_harness = Some("grok".into())).contains("not a known agent"));
        assert!(refuse(&|i| i.timeout_ms = Some("2000000".into())).contains("--root-timeout-ms"));
        assert!(
            refuse(&|i| {
                i.max_handoff_nodes = Some("0".into());
                i.max_nodes = Some("4".into());
            })
            .contains("no node")
        );
        assert!(refuse(&|i| i.max_nodes = Some("300".into())).contains("between"));
        assert!(refuse(&|i| i.dependencies = vec!["requires:x".into()]).contains("nested"));
        assert!(refuse(&|i| i.nested = true).contains("only accepts 'advice'"));
        assert!(
            refuse(&|i| i.instructions = Some(Instructions::Stdin(b" \n".to_vec())))
                .contains("blank")
        );
        let missing = refuse(&|i| {
            i.harness = None;
            i.cwd = None;
        });
        assert_eq!(missing, "missing argument(s): --harness, --cwd");
    }

    proptest! {
        #[test]
        fn model_names_never_panic_and_dash_is_refused(s in "\\PC{0,300}") {
            let r = check_model(&s);
            if s.starts_with('-') { prop_assert!(r.is_err()); }
            if s.is_empty() || s.len() > 256 { prop_assert!(r.is_err()); }
        }

        #[test]
        fn integers_are_strict(s in "[ +-]?[0-9a-z]{0,6}") {
            let v = parse_int("--max-turns", &Some(s.clone()), 1u32, 100, 1);
            if let Ok(n) = v {
                prop_assert!((1..=100).contains(&n));
                prop_assert!(s.bytes().all(|b| b.is_ascii_digit()));
            }
        }
    }
}
