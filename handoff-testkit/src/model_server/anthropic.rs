//! Anthropic Messages (`POST …/v1/messages`), as Claude Code speaks it.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::script::OfferedTool;
use super::wire::{Ctx, Sse, Turn, json_response, output_tokens};

/// The tools in `tools[]` (by `name`).
pub(crate) fn offered_tools(body: &Value) -> Vec<OfferedTool> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .map(|name| OfferedTool {
            name: name.to_owned(),
            freeform: false,
        })
        .collect()
}

fn blocks<'a>(body: &'a Value, role: &'static str) -> impl Iterator<Item = &'a Value> {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |m| m.get("role").and_then(Value::as_str) == Some(role))
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
}

fn block_type(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

/// `tool_result` blocks in user messages.
pub(crate) fn tool_results(body: &Value) -> usize {
    blocks(body, "user")
        .filter(|b| block_type(b) == Some("tool_result"))
        .count()
}

/// The name of the last `tool_use` block in assistant messages.
pub(crate) fn last_call(body: &Value) -> Option<String> {
    blocks(body, "assistant")
        .filter(|b| block_type(b) == Some("tool_use"))
        .filter_map(|b| b.get("name").and_then(Value::as_str))
        .last()
        .map(str::to_owned)
}

/// The prompt text: the `system` string or text blocks, then the text of every user (and
/// mid-conversation system) message, one part a line. Tool results are left out.
pub(crate) fn prompt_text(body: &Value) -> String {
    let mut parts: Vec<&str> = Vec::new();
    push_text(body.get("system"), &mut parts);
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| {
            matches!(
                m.get("role").and_then(Value::as_str),
                Some("user" | "system")
            )
        })
    {
        push_text(m.get("content"), &mut parts);
    }
    parts.join("\n")
}

/// A string, or the `text` of the `type: "text"` blocks of an array.
fn push_text<'a>(content: Option<&'a Value>, parts: &mut Vec<&'a str>) {
    match content {
        Some(Value::String(s)) => parts.push(s),
        Some(Value::Array(blocks)) => parts.extend(
            blocks
                .iter()
                .filter(|b| block_type(b) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str)),
        ),
        _ => {}
    }
}

/// A Messages reply: SSE when the request streams, else one JSON message.
pub(crate) fn render(turn: &Turn<'_>, ctx: &Ctx) -> Response {
    let (block, stop_reason) = match turn {
        Turn::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Turn::Call(call) => (
            json!({
                "type": "tool_use",
                "id": call.call_id,
                "name": call.name,
                "input": call.input.to_value(),
            }),
            "tool_use",
        ),
    };
    let out = output_tokens(turn);
    let usage = |output: u64| {
        json!({
            "input_tokens": ctx.input_tokens,
            "output_tokens": output,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        })
    };
    let message = |content: Value, stop: Value, output: u64| {
        json!({
            "id": format!("msg_{}", ctx.id),
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": usage(output),
        })
    };
    if !ctx.stream {
        return json_response(
            StatusCode::OK,
            &message(json!([block]), json!(stop_reason), out),
        );
    }
    let mut sse = Sse::default();
    sse.event(
        "message_start",
        &json!({"type": "message_start", "message": message(json!([]), Value::Null, 1)}),
    );
    let (start_block, delta) = match turn {
        Turn::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
        ),
        Turn::Call(call) => (
            json!({"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": call.input.json_text()}),
        ),
    };
    sse.event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0, "content_block": start_block}),
    );
    sse.event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    );
    sse.event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    );
    sse.event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": usage(out),
        }),
    );
    sse.event("message_stop", &json!({"type": "message_stop"}));
    sse.into_response()
}

/// `POST …/v1/messages/count_tokens`.
pub(crate) fn count_tokens(input_tokens: u64) -> Response {
    json_response(StatusCode::OK, &json!({"input_tokens": input_tokens}))
}

/// An Anthropic-shaped error body.
pub(crate) fn error(status: StatusCode) -> Response {
    let kind = match status.as_u16() {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json_response(
        status,
        &json!({
            "type": "error",
            "error": {
                "type": kind,
                "message": format!("scripted error: HTTP {}", status.as_u16()),
            },
        }),
    )
}
