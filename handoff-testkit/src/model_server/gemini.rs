//! The Gemini API (`POST …/models/<model>:generateContent`, `…:streamGenerateContent?alt=sse`,
//! `…:countTokens`), as Gemini CLI speaks it.
//!
//! The model is named by the path, not the body; tools arrive as
//! `tools[].functionDeclarations[]`, tool results as `functionResponse` parts of a user turn.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::script::{Call, OfferedTool};
use super::wire::{Ctx, Sse, Turn, json_response, output_tokens};

/// The method of a Gemini API path (`generateContent`, `streamGenerateContent`,
/// `countTokens`), when the path's last segment is `<model>:<method>`.
pub(crate) fn method(path: &str) -> Option<&str> {
    let last = path.trim_end_matches('/').rsplit('/').next()?;
    last.split_once(':').map(|(_, m)| m)
}

/// The model a Gemini API path names (`…/models/<model>:<method>`).
pub(crate) fn model(path: &str) -> Option<&str> {
    let last = path.trim_end_matches('/').rsplit('/').next()?;
    last.split_once(':')
        .map(|(m, _)| m)
        .filter(|m| !m.is_empty())
}

/// Whether the path asks for a stream (`:streamGenerateContent`).
pub(crate) fn is_stream(path: &str) -> bool {
    method(path) == Some("streamGenerateContent")
}

/// The declarations of `tools[].functionDeclarations[]`.
fn declarations(body: &Value) -> impl Iterator<Item = &Value> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
}

/// The names of the offered functions, in order.
pub(crate) fn tool_names(body: &Value) -> Vec<String> {
    declarations(body)
        .filter_map(|d| d.get("name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// The offered functions (by `name`).
pub(crate) fn offered_tools(body: &Value) -> Vec<OfferedTool> {
    tool_names(body)
        .into_iter()
        .map(|name| OfferedTool {
            name,
            freeform: false,
        })
        .collect()
}

/// The parts of every `contents[]` turn of this role.
fn parts<'a>(body: &'a Value, role: &'static str) -> impl Iterator<Item = &'a Value> {
    body.get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |c| c.get("role").and_then(Value::as_str).unwrap_or("user") == role)
        .filter_map(|c| c.get("parts").and_then(Value::as_array))
        .flatten()
}

/// `functionResponse` parts in user turns.
pub(crate) fn tool_results(body: &Value) -> usize {
    parts(body, "user")
        .filter(|p| p.get("functionResponse").is_some())
        .count()
}

/// The name of the last `functionCall` part in model turns.
pub(crate) fn last_call(body: &Value) -> Option<String> {
    parts(body, "model")
        .filter_map(|p| p.pointer("/functionCall/name").and_then(Value::as_str))
        .last()
        .map(str::to_owned)
}

/// The prompt text: the `systemInstruction` text parts (or string), then the text parts of
/// every user turn, one part a line. Function responses are left out.
pub(crate) fn prompt_text(body: &Value) -> String {
    let mut texts: Vec<&str> = Vec::new();
    match body.get("systemInstruction") {
        Some(Value::String(s)) => texts.push(s),
        Some(system) => texts.extend(
            system
                .get("parts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").and_then(Value::as_str)),
        ),
        None => {}
    }
    texts.extend(parts(body, "user").filter_map(|p| p.get("text").and_then(Value::as_str)));
    texts.join("\n")
}

/// The output the client sent back for the call `call_id`: the `response.output` of its
/// `functionResponse` when that is a string, else the JSON text of `response`.
pub(crate) fn tool_output(body: &Value, call_id: &str) -> Option<String> {
    let response = parts(body, "user")
        .filter_map(|p| p.get("functionResponse"))
        .find(|r| r.get("id").and_then(Value::as_str) == Some(call_id))?
        .get("response")?;
    Some(match response.get("output") {
        Some(Value::String(s)) => s.clone(),
        _ => response.to_string(),
    })
}

fn call_part(call: &Call) -> Value {
    json!({"functionCall": {
        "id": call.call_id,
        "name": call.name,
        "args": call.input.to_value(),
    }})
}

/// A `GenerateContentResponse`: SSE `data:` chunks for `:streamGenerateContent` (a text in two
/// chunks, the usage and `finishReason` on the last), else one JSON object.
pub(crate) fn render(turn: &Turn<'_>, ctx: &Ctx) -> Response {
    let out = output_tokens(turn);
    let usage = json!({
        "promptTokenCount": ctx.input_tokens,
        "candidatesTokenCount": out,
        "totalTokenCount": ctx.input_tokens + out,
    });
    let chunk = |parts: Vec<Value>, last: bool| {
        let mut candidate = json!({
            "content": {"role": "model", "parts": parts},
            "index": 0,
        });
        let mut response = json!({
            "candidates": [],
            "modelVersion": ctx.model,
            "responseId": ctx.id,
        });
        if last {
            candidate["finishReason"] = json!("STOP");
            response["usageMetadata"] = usage.clone();
        }
        response["candidates"] = json!([candidate]);
        response
    };
    let chunks: Vec<Value> = match turn {
        Turn::Text(text) if ctx.stream && text.len() > 1 => {
            let mut mid = text.len() / 2;
            while !text.is_char_boundary(mid) {
                mid -= 1;
            }
            let (head, tail) = text.split_at(mid);
            vec![
                chunk(vec![json!({ "text": head })], false),
                chunk(vec![json!({ "text": tail })], true),
            ]
        }
        Turn::Text(text) => vec![chunk(vec![json!({ "text": text })], true)],
        Turn::Call(call) => vec![chunk(vec![call_part(call)], true)],
    };
    if !ctx.stream {
        return json_response(StatusCode::OK, &chunks[chunks.len() - 1]);
    }
    let mut sse = Sse::default();
    for c in &chunks {
        sse.data(&c.to_string());
    }
    sse.into_response()
}

/// `POST …:countTokens`.
pub(crate) fn count_tokens(tokens: u64) -> Response {
    json_response(StatusCode::OK, &json!({"totalTokens": tokens}))
}

/// The `google.rpc.Status` name of an HTTP status, as the Gemini API words it.
pub(crate) fn status_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "NOT_IMPLEMENTED",
        503 | 529 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        s if (400..500).contains(&s) => "FAILED_PRECONDITION",
        _ => "INTERNAL",
    }
}

/// A Gemini API error body: `{"error":{"code","message","status"}}` (and `details`, when any).
pub(crate) fn error_body(status: StatusCode, message: &str, details: Option<Value>) -> Value {
    let mut error = json!({
        "code": status.as_u16(),
        "message": message,
        "status": status_name(status),
    });
    if let Some(details) = details {
        error["details"] = details;
    }
    json!({ "error": error })
}

/// A scripted Gemini API error.
pub(crate) fn error(status: StatusCode) -> Response {
    json_response(
        status,
        &error_body(
            status,
            &format!("scripted error: HTTP {}", status.as_u16()),
            None,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_model_and_method() {
        let p = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";
        assert_eq!(model(p), Some("gemini-2.5-flash"));
        assert_eq!(method(p), Some("streamGenerateContent"));
        assert!(is_stream(p));
        let p = "/v1beta/models/gemini-2.5-flash:generateContent";
        assert!(!is_stream(p));
        assert_eq!(method("/v1/chat/completions"), None);
        assert_eq!(model("/v1beta/models/:countTokens"), None);
    }
}
