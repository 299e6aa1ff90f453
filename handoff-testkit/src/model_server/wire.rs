//! Pieces shared by the three wire protocols.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::script::Call;

/// What a protocol renders: a final text or a tool call.
pub(crate) enum Turn<'a> {
    Text(&'a str),
    Call(&'a Call),
}

/// Per-request facts the renderers need.
pub(crate) struct Ctx {
    /// The `model` the request named (echoed back).
    pub model: String,
    /// `"stream": true`.
    pub stream: bool,
    /// Chat `stream_options.include_usage`.
    pub include_usage: bool,
    /// Estimated from the request size.
    pub input_tokens: u64,
    /// A fresh id suffix for message / response / completion ids.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
}

impl Ctx {
    pub fn new(body: &Value, body_len: usize, id: String) -> Ctx {
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Ctx {
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("fake-model")
                .to_owned(),
            stream: body.get("stream").and_then(Value::as_bool) == Some(true),
            include_usage: body
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                == Some(true),
            input_tokens: tokens_for_len(body_len),
            id,
            created,
        }
    }
}

/// About four bytes a token, at least one.
pub(crate) fn tokens_for_len(len: usize) -> u64 {
    u64::try_from(len.div_ceil(4)).unwrap_or(u64::MAX).max(1)
}

/// Output tokens of a turn.
pub(crate) fn output_tokens(turn: &Turn<'_>) -> u64 {
    match turn {
        Turn::Text(t) => tokens_for_len(t.len()),
        Turn::Call(c) => tokens_for_len(c.name.len() + c.input.json_text().len()),
    }
}

/// A JSON response.
pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

/// Accumulates a `text/event-stream` body.
#[derive(Default)]
pub(crate) struct Sse {
    body: String,
}

impl Sse {
    /// An `event: <name>` + `data: <json>` event.
    pub fn event(&mut self, name: &str, data: &Value) {
        self.body.push_str("event: ");
        self.body.push_str(name);
        self.body.push('\n');
        self.data_line(&data.to_string());
    }

    /// A `data: <text>` event without a name.
    pub fn data(&mut self, data: &str) {
        self.data_line(data);
    }

    fn data_line(&mut self, data: &str) {
        // serde_json never emits raw newlines, but stay correct for any text.
        for line in data.split('\n') {
            self.body.push_str("data: ");
            self.body.push_str(line);
            self.body.push('\n');
        }
        self.body.push('\n');
    }

    pub fn into_response(self) -> Response {
        (
            StatusCode::OK,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/event-stream"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            self.body,
        )
            .into_response()
    }
}

/// An HTTP status from a number (500 when out of range).
pub(crate) fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// An OpenAI-shaped error body.
pub(crate) fn openai_error(status: StatusCode) -> Response {
    let kind = if status.is_client_error() {
        "invalid_request_error"
    } else {
        "server_error"
    };
    json_response(
        status,
        &serde_json::json!({
            "error": {
                "message": format!("scripted error: HTTP {}", status.as_u16()),
                "type": kind,
                "param": null,
                "code": null,
            }
        }),
    )
}
