//! What travels between a worker and its root's supervisor: the context a worker receives in
//! `HANDOFF_SUPERVISOR_CONTEXT`, and the one request / one reply exchanged through the node's
//! mailbox (each one JSON file, see [`super::mailbox`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::{AgentId, Operation};
use crate::redact::quote;

/// The environment variable that carries a worker's [`SupervisorContext`].
pub const CONTEXT_ENV: &str = "HANDOFF_SUPERVISOR_CONTEXT";
/// Schema version of [`SupervisorContext`].
pub const CONTEXT_SCHEMA: &str = "handoff.supervisor-context.v1";
/// Schema version of [`NestedRequest`].
pub const NESTED_REQUEST_SCHEMA: &str = "handoff.supervisor-request.v1";
/// Schema version of [`NestedReply`].
pub const NESTED_REPLY_SCHEMA: &str = "handoff.supervisor-reply.v1";
/// Largest context accepted, in bytes.
pub const MAX_CONTEXT_BYTES: usize = 16_384;
/// Largest request file accepted, in bytes (instructions ≤ 2,000,000 plus the rest).
pub const MAX_REQUEST_BYTES: usize = 2_300_000;
/// Largest reply file accepted, in bytes.
pub const MAX_REPLY_BYTES: usize = 4_000_000;
/// How long a nested client waits past the root deadline before giving up (the supervisor
/// stops every node at the deadline; this covers the reply's way back).
pub const CLIENT_GRACE_MS: u64 = 15_000;

/// What a worker allowed to ask for advice receives: its mailbox to the supervisor and the
/// capability that authorizes it. Bounded to [`MAX_CONTEXT_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SupervisorContext {
    /// Always [`CONTEXT_SCHEMA`].
    pub schema_version: String,
    /// Absolute path of the worker's mailbox (a 0700 directory of the user's): requests go to
    /// its `in/`, answers come in its `out/`.
    #[schemars(length(min = 2, max = 4096))]
    pub mailbox: String,
    /// The capability token (`hcap_` + 64 hex digits). A secret.
    #[schemars(regex(pattern = r"^hcap_[0-9a-f]{64}$"))]
    pub token: String,
    /// The agent the worker is: the caller the supervisor will record.
    pub caller_harness: AgentId,
    /// The root run.
    #[schemars(length(min = 1, max = 128))]
    pub root_run_id: String,
    /// The node the worker runs as (nested nodes become its children).
    #[schemars(length(min = 1, max = 128))]
    pub run_id: String,
    /// What the worker may ask for: `["advice"]`.
    pub allowed_operations: Vec<Operation>,
    /// The root deadline, in milliseconds since the Unix epoch: no nested node outlives it.
    pub deadline_unix_ms: u64,
}

impl SupervisorContext {
    /// Parses and checks a context: size, exact keys, version, absolute mailbox, token shape.
    pub fn parse(text: &str) -> Result<SupervisorContext, String> {
        if text.len() > MAX_CONTEXT_BYTES {
            return Err(format!("{CONTEXT_ENV} exceeds {MAX_CONTEXT_BYTES} bytes"));
        }
        let c: SupervisorContext = serde_json::from_str(text)
            .map_err(|e| format!("{CONTEXT_ENV} is not a valid supervisor context: {e}"))?;
        if c.schema_version != CONTEXT_SCHEMA {
            return Err(format!(
                "{CONTEXT_ENV} has schemaVersion {:?}; this handoff speaks {CONTEXT_SCHEMA}",
                quote(&c.schema_version)
            ));
        }
        if !c.mailbox.starts_with('/') || c.mailbox.len() > 4096 {
            return Err(format!(
                "{CONTEXT_ENV} mailbox must be an absolute path of at most 4096 bytes"
            ));
        }
        if !c.token.starts_with(super::TOKEN_PREFIX) {
            return Err(format!("{CONTEXT_ENV} carries no capability token"));
        }
        if c.allowed_operations != [Operation::Advice] {
            return Err(format!("{CONTEXT_ENV} must allow exactly [\"advice\"]"));
        }
        Ok(c)
    }

    /// The context as the environment variable's value.
    pub fn to_env(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// One nested advice request, as the worker typed it: flag values are passed as given and
/// validated by the supervisor exactly as a root run's flags are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NestedRequest {
    /// Always [`NESTED_REQUEST_SCHEMA`].
    pub schema_version: String,
    /// The capability token from the context.
    pub token: String,
    /// A fresh random value per request (replay protection): 1 to 128 characters of
    /// `[A-Za-z0-9_-]`, the request's name in the mailbox.
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z0-9_-]{1,128}$"))]
    pub nonce: String,
    /// Must be `advice`.
    pub operation: Operation,
    /// `--harness`.
    pub target_harness: Option<String>,
    /// `--cwd`: inside the worker's own worktree.
    pub cwd: Option<String>,
    /// The question (UTF-8, ≤ 2,000,000 bytes).
    pub instructions: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--effort`.
    pub effort: Option<String>,
    /// `--max-turns`.
    pub max_turns: Option<String>,
    /// `--bash` (default: the parent's grant).
    pub bash: Option<String>,
    /// `--web-search`.
    pub web_search: Option<String>,
    /// `--timeout-ms`: at most the root's per-node timeout.
    pub timeout_ms: Option<String>,
    /// The `--mcp-config` descriptor (a subset of the parent's servers), as JSON text.
    pub mcp: Option<String>,
    /// `--dependency` values.
    #[schemars(length(max = 64))]
    pub dependencies: Vec<String>,
}

/// The supervisor's answer: the nested run's result, exactly as a root run would print it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NestedReply {
    /// Always [`NESTED_REPLY_SCHEMA`].
    pub schema_version: String,
    /// Whether the request became a DAG node (false: refused before anything ran).
    pub accepted: bool,
    /// The node's run id, when accepted.
    pub run_id: Option<String>,
    /// The exit code the nested command must exit with.
    pub exit_code: u8,
    /// The result JSON line (`handoff.result.v1`), without the final newline.
    pub result: String,
    /// `sha256:<hex>` of `result` plus a newline: what the DAG records as the node's result.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub result_hash: String,
}

/// `sha256:<hex>` of a result line as printed (`line` already ends with a newline).
pub fn result_hash(line: &str) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(line.as_bytes())))
}
