//! OpenAI Chat Completions (`POST …/v1/chat/completions`), as OpenCode (streaming) and the
//! community Grok CLI (non-streaming) speak it.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::script::OfferedTool;
use super::wire::{Ctx, Sse, Turn, json_response, output_tokens};

/// The tools in `tools[]` (by `function.name`).
pub(crate) fn offered_tools(body: &Value) -> Vec<OfferedTool> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| {
            t.pointer("/function/name")
                .or_else(|| t.get("name"))
                .and_then(Value::as_str)
        })
        .map(|name| OfferedTool {
            name: name.to_owned(),
            freeform: false,
        })
        .collect()
}

fn messages(body: &Value) -> impl Iterator<Item = &Value> {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// `role: "tool"` messages.
pub(crate) fn tool_results(body: &Value) -> usize {
    messages(body)
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .count()
}

/// The function name of the last assistant `tool_calls` entry.
pub(crate) fn last_call(body: &Value) -> Option<String> {
    messages(body)
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.pointer("/function/name").and_then(Value::as_str))
        .last()
        .map(str::to_owned)
}

/// The prompt text: the content of every system, developer and user message (a string, or
/// the `text` of its text parts), one part a line. Tool messages are left out.
pub(crate) fn prompt_text(body: &Value) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for m in messages(body).filter(|m| {
        matches!(
            m.get("role").and_then(Value::as_str),
            Some("system" | "developer" | "user")
        )
    }) {
        match m.get("content") {
            Some(Value::String(s)) => parts.push(s),
            Some(Value::Array(content)) => parts.extend(
                content
                    .iter()
                    .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|c| c.get("text").and_then(Value::as_str)),
            ),
            _ => {}
        }
    }
    parts.join("\n")
}

/// A Chat Completions reply: chunks (role, content or `tool_calls`, `finish_reason`, usage
/// when `stream_options.include_usage`, `[DONE]`), or one completion object.
pub(crate) fn render(turn: &Turn<'_>, ctx: &Ctx) -> Response {
    let out = output_tokens(turn);
    let usage = json!({
        "prompt_tokens": ctx.input_tokens,
        "completion_tokens": out,
        "total_tokens": ctx.input_tokens + out,
    });
    let tool_call = |call: &super::script::Call| {
        json!({
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.input.json_text()},
        })
    };
    let finish = match turn {
        Turn::Text(_) => "stop",
        Turn::Call(_) => "tool_calls",
    };
    let id = format!("chatcmpl-{}", ctx.id);
    if !ctx.stream {
        let message = match turn {
            Turn::Text(text) => json!({"role": "assistant", "content": text}),
            Turn::Call(call) => json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [tool_call(call)],
            }),
        };
        return json_response(
            StatusCode::OK,
            &json!({
                "id": id,
                "object": "chat.completion",
                "created": ctx.created,
                "model": ctx.model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }),
        );
    }
    let chunk = |choices: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": choices,
        })
    };
    let mut sse = Sse::default();
    let delta = match turn {
        Turn::Text(text) => json!({"content": text}),
        Turn::Call(call) => {
            let mut c = tool_call(call);
            c["index"] = json!(0);
            json!({"tool_calls": [c]})
        }
    };
    for choice in [
        json!({"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}),
        json!({"index": 0, "delta": delta, "finish_reason": null}),
        json!({"index": 0, "delta": {}, "finish_reason": finish}),
    ] {
        sse.data(&chunk(json!([choice])).to_string());
    }
    if ctx.include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = usage;
        sse.data(&last.to_string());
    }
    sse.data("[DONE]");
    sse.into_response()
}
