//! OpenAI Responses (`POST …/v1/responses`), as Codex speaks it.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::script::{CallInput, OfferedTool};
use super::wire::{Ctx, Sse, Turn, json_response, output_tokens};

/// The tools in `tools[]`: by `name`, or by `type` for nameless built-ins (`web_search`);
/// `type: "custom"` tools are freeform.
pub(crate) fn offered_tools(body: &Value) -> Vec<OfferedTool> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let kind = t.get("type").and_then(Value::as_str);
            let name = t.get("name").and_then(Value::as_str).or(kind)?;
            Some(OfferedTool {
                name: name.to_owned(),
                freeform: kind == Some("custom"),
            })
        })
        .collect()
}

/// `*_call_output` input items (`function_call_output`, `custom_tool_call_output`, …).
pub(crate) fn tool_results(body: &Value) -> usize {
    body.get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|item| {
            item.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("_call_output"))
        })
        .count()
}

/// The name of the last `*_call` input item.
pub(crate) fn last_call(body: &Value) -> Option<String> {
    body.get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|item| {
            item.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("_call"))
        })
        .filter_map(|item| item.get("name").and_then(Value::as_str))
        .next_back()
        .map(str::to_owned)
}

/// The prompt text: `instructions`, then the text of every system, developer and user
/// message item (`input` as a plain string counts as a user message), one part a line. Tool
/// outputs are left out.
pub(crate) fn prompt_text(body: &Value) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if let Some(i) = body.get("instructions").and_then(Value::as_str) {
        parts.push(i);
    }
    match body.get("input") {
        Some(Value::String(s)) => parts.push(s),
        Some(Value::Array(items)) => {
            for item in items.iter().filter(|i| {
                i.get("type").and_then(Value::as_str).unwrap_or("message") == "message"
                    && matches!(
                        i.get("role").and_then(Value::as_str),
                        Some("system" | "developer" | "user")
                    )
            }) {
                match item.get("content") {
                    Some(Value::String(s)) => parts.push(s),
                    Some(Value::Array(content)) => parts.extend(
                        content
                            .iter()
                            .filter(|c| {
                                matches!(
                                    c.get("type").and_then(Value::as_str),
                                    Some("input_text" | "text")
                                )
                            })
                            .filter_map(|c| c.get("text").and_then(Value::as_str)),
                    ),
                    _ => {}
                }
            }
        }
        _ => {}
    }
    parts.join("\n")
}

/// A Responses reply: `response.created`, `response.output_item.done` with the whole item,
/// `response.completed` with usage; or the response object when not streaming.
pub(crate) fn render(turn: &Turn<'_>, ctx: &Ctx) -> Response {
    let item = match turn {
        Turn::Text(text) => json!({
            "type": "message",
            "id": format!("msg_{}", ctx.id),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
        Turn::Call(call) => match &call.input {
            CallInput::Freeform(input) => json!({
                "type": "custom_tool_call",
                "id": format!("ctc_{}", ctx.id),
                "status": "completed",
                "call_id": call.call_id,
                "name": call.name,
                "input": input,
            }),
            CallInput::Json(_) => json!({
                "type": "function_call",
                "id": format!("fc_{}", ctx.id),
                "status": "completed",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.input.json_text(),
            }),
        },
    };
    let out = output_tokens(turn);
    let usage = json!({
        "input_tokens": ctx.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": ctx.input_tokens + out,
    });
    let response = |status: &str, output: Value, usage: Value| {
        json!({
            "id": format!("resp_{}", ctx.id),
            "object": "response",
            "created_at": ctx.created,
            "status": status,
            "model": ctx.model,
            "output": output,
            "usage": usage,
            "error": null,
            "incomplete_details": null,
        })
    };
    if !ctx.stream {
        return json_response(StatusCode::OK, &response("completed", json!([item]), usage));
    }
    let mut sse = Sse::default();
    sse.event(
        "response.created",
        &json!({
            "type": "response.created",
            "sequence_number": 0,
            "response": response("in_progress", json!([]), Value::Null),
        }),
    );
    sse.event(
        "response.output_item.done",
        &json!({
            "type": "response.output_item.done",
            "sequence_number": 1,
            "output_index": 0,
            "item": item,
        }),
    );
    sse.event(
        "response.completed",
        &json!({
            "type": "response.completed",
            "sequence_number": 2,
            "response": response("completed", json!([item]), usage),
        }),
    );
    sse.into_response()
}
