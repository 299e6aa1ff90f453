//! `advice` asked from inside a worker: the request goes to the root's supervisor (named in
//! `HANDOFF_SUPERVISOR_CONTEXT`), which runs the adviser; its result comes back here. Every
//! local failure is a `rejected` result, also written to the result file when one can be
//! reserved.

use super::verdict::Ended;
use super::{Engine, RunOutcome};
use crate::input::{InputRejection, Instructions, RunInput, Verb};
use crate::mcp::MAX_MCP_BYTES;
use crate::names::Operation;
use crate::paths::{MAX_INSTRUCTIONS_BYTES, ResultFile, read_input_file};
use crate::supervisor::{NESTED_REQUEST_SCHEMA, NestedRequest, SupervisorContext, ask_supervisor};

/// What a worker's `advice` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerAdvice {
    /// The adviser's result (one `handoff.result.v1` line with its newline), or the rejection.
    pub line: String,
    /// The exit code.
    pub exit_code: u8,
    /// One line for a person: why it was rejected, or the adviser's status.
    pub message: Option<String>,
    /// Why the result file could not be written, when it could not.
    pub result_file_error: Option<String>,
}

impl Engine {
    /// Sends `input` (an `advice` request) to the supervisor of the root run whose context is
    /// `context` (the value of `HANDOFF_SUPERVISOR_CONTEXT`) and returns the adviser's result.
    pub async fn advise_worker(&self, mut input: RunInput, context: &str) -> WorkerAdvice {
        if input.verb != Verb::Advice {
            let rejection = InputRejection::new(
                "verb",
                format!(
                    "nested handoff permits advice only; '{}' was refused",
                    input.verb.as_str()
                ),
            );
            return self
                .reject_nested(input, Ended::InputRejected(rejection))
                .await;
        }
        let context = match SupervisorContext::parse(context) {
            Ok(c) => c,
            Err(m) => return self.reject_nested(input, Ended::Rejected(m)).await,
        };
        if let Some(rejection) = input.nested_flag_refusal() {
            input.caller_harness = Some(context.caller_harness.to_string());
            return self
                .reject_nested(input, Ended::InputRejected(rejection))
                .await;
        }
        input.caller_harness = Some(context.caller_harness.to_string());
        let reserved = match input.result.as_deref().map(ResultFile::reserve) {
            Some(Err(m)) => return self.reject_nested(input, Ended::Rejected(m)).await,
            Some(Ok(f)) => Some(f),
            None => None,
        };
        let instructions = match &input.instructions {
            None => None,
            Some(Instructions::Stdin(b)) => match String::from_utf8(b.clone()) {
                Ok(t) => Some(t),
                Err(_) => {
                    let m = "the instructions are not UTF-8".to_owned();
                    return self.reject_nested(input, Ended::Rejected(m)).await;
                }
            },
            Some(Instructions::File(p)) => {
                match read_input_file("--instructions", p, MAX_INSTRUCTIONS_BYTES + 1).and_then(
                    |b| String::from_utf8(b).map_err(|_| "the instructions are not UTF-8".into()),
                ) {
                    Ok(t) => Some(t),
                    Err(m) => return self.reject_nested(input, Ended::Rejected(m)).await,
                }
            }
        };
        let mcp = match &input.mcp_config {
            None => None,
            Some(p) => match read_input_file("--mcp-config", p, MAX_MCP_BYTES).and_then(|b| {
                String::from_utf8(b).map_err(|_| "the MCP descriptor is not UTF-8".into())
            }) {
                Ok(t) => Some(t),
                Err(m) => return self.reject_nested(input, Ended::Rejected(m)).await,
            },
        };
        let request = NestedRequest {
            schema_version: NESTED_REQUEST_SCHEMA.into(),
            token: context.token.clone(),
            nonce: uuid::Uuid::new_v4().to_string(),
            operation: Operation::Advice,
            target_harness: input.harness.clone(),
            cwd: input.cwd.clone(),
            instructions,
            model: input.model.clone(),
            effort: input.effort.clone(),
            max_turns: input.max_turns.clone(),
            bash: input.bash.clone(),
            web_search: input.web_search.clone(),
            timeout_ms: input.timeout_ms.clone(),
            mcp,
            dependencies: input.dependencies.clone(),
        };
        let reply = match ask_supervisor(&context, &request).await {
            Ok(r) => r,
            Err(m) => return self.reject_nested(input, Ended::Rejected(m)).await,
        };
        let line = format!("{}\n", reply.result);
        let result_file_error = reserved.and_then(|file| file.write(line.as_bytes()).err());
        let message = serde_json::from_str::<serde_json::Value>(&reply.result)
            .ok()
            .and_then(|v| {
                v.pointer("/diagnostics/message")
                    .and_then(|m| m.as_str())
                    .map(str::to_owned)
                    .or_else(|| {
                        Some(format!(
                            "{} (nested advice from {}, {})",
                            v.get("status")?.as_str()?,
                            v.pointer("/target/harness")?.as_str()?,
                            reply.run_id.as_deref().unwrap_or("not admitted")
                        ))
                    })
            });
        WorkerAdvice {
            line,
            exit_code: reply.exit_code,
            message,
            result_file_error,
        }
    }

    /// A `rejected` result, written to the result file too when that one can be reserved.
    async fn reject_nested(&self, mut input: RunInput, ended: Ended) -> WorkerAdvice {
        input.nested = false;
        let result = input.result.take();
        input.instructions = None;
        let RunOutcome {
            result: rendered,
            line,
            exit_code,
            ..
        } = self.rejected(input, ended).await;
        if let Some(Ok(file)) = result.as_deref().map(ResultFile::reserve) {
            let _ = file.write(line.as_bytes());
        }
        WorkerAdvice {
            line,
            exit_code,
            message: rendered.diagnostics.message,
            result_file_error: None,
        }
    }
}
