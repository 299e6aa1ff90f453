//! `handoff advice` inside a worker: the request goes to the root's supervisor (named in
//! `HANDOFF_SUPERVISOR_CONTEXT`), which runs the adviser; its result is printed here.

use std::io::Write;

use handoff_core::{
    Instructions, NESTED_REQUEST_SCHEMA, NestedRequest, Operation, ResultFile, RunInput,
    SupervisorContext, Verb, ask_supervisor,
};

/// Runs one nested request; returns the exit code. Every local failure is a `rejected` result.
pub async fn main(mut input: RunInput, context: &str) -> u8 {
    if input.verb != Verb::Advice {
        let m = format!(
            "nested handoff permits advice only; '{}' was refused",
            input.verb.as_str()
        );
        return reject(input, m).await;
    }
    let context = match SupervisorContext::parse(context) {
        Ok(c) => c,
        Err(m) => return reject(input, m).await,
    };
    if let Some(m) = input.nested_flag_refusal() {
        input.caller_harness = Some(context.caller_harness.to_string());
        return reject(input, m).await;
    }
    input.caller_harness = Some(context.caller_harness.to_string());
    let reserved = match input.result.as_deref().map(ResultFile::reserve) {
        Some(Err(m)) => return reject(input, m).await,
        Some(Ok(f)) => Some(f),
        None => None,
    };
    let instructions = match &input.instructions {
        None => None,
        Some(Instructions::Stdin(b)) => match String::from_utf8(b.clone()) {
            Ok(t) => Some(t),
            Err(_) => return reject(input, "the instructions are not UTF-8".into()).await,
        },
        Some(Instructions::File(p)) => {
            match handoff_core::read_input_file(
                "--instructions",
                p,
                handoff_core::MAX_INSTRUCTIONS_BYTES + 1,
            )
            .and_then(|b| String::from_utf8(b).map_err(|_| "the instructions are not UTF-8".into()))
            {
                Ok(t) => Some(t),
                Err(m) => return reject(input, m).await,
            }
        }
    };
    let mcp = match &input.mcp_config {
        None => None,
        Some(p) => {
            match handoff_core::read_input_file("--mcp-config", p, handoff_core::MAX_MCP_BYTES)
                .and_then(|b| {
                    String::from_utf8(b).map_err(|_| "the MCP descriptor is not UTF-8".into())
                }) {
                Ok(t) => Some(t),
                Err(m) => return reject(input, m).await,
            }
        }
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
        Err(m) => return reject(input, m).await,
    };
    let line = format!("{}\n", reply.result);
    if let Some(file) = reserved
        && let Err(e) = file.write(line.as_bytes())
    {
        let _ = writeln!(std::io::stderr(), "handoff: {e}");
    }
    let summary = serde_json::from_str::<serde_json::Value>(&reply.result)
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
    crate::emit(&line, summary.as_deref(), "");
    reply.exit_code
}

/// A `rejected` result on stdout, and in the `--result` file when that one can be reserved.
async fn reject(mut input: RunInput, message: String) -> u8 {
    input.nested = false;
    let result = input.result.take();
    input.instructions = None;
    let outcome = crate::engine(None).reject(input, message).await;
    if let Some(Ok(file)) = result.as_deref().map(ResultFile::reserve) {
        let _ = file.write(outcome.line.as_bytes());
    }
    crate::emit(
        &outcome.line,
        outcome.result.diagnostics.message.as_deref(),
        "",
    );
    outcome.exit_code
}
