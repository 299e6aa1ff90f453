//! `HANDOFF_FAKE_API_ERROR`: a run that fails the way each real CLI fails when its model API
//! answers with an error (or cannot be reached), in that CLI's own words and output format.
//!
//! The texts were recorded from the real CLIs against the model server of
//! [`crate::model_server`] (Claude Code 2.1.332, Codex 0.171, OpenCode); those of Grok, Kiro,
//! Cursor and the community Grok CLI follow each one's usual error form. The OpenAI bodies are
//! those of `ApiError::openai_body` (kept in step by hand).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::json::{J, obj};
use super::settings::{self, Settings};

/// The wait the API asks for on a rate or usage limit (`retry-after`, "try again in 1200s"), as
/// the model server's `RETRY_AFTER_SECONDS`.
pub(crate) const RETRY_AFTER_SECONDS: u64 = 1200;

/// Where the model API "was" (the URL the CLIs quote).
const OPENAI_BASE: &str = "http://127.0.0.1:1/v1";

/// The API failure a run reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiFailure {
    /// 429: a rate limit.
    RateLimited,
    /// 429: a subscription's usage limit.
    UsageLimit,
    /// 401: a key the service does not accept.
    Auth,
    /// 402: no credit left.
    Billing,
    /// 404: the model does not exist.
    ModelNotFound,
    /// 500: the service failed.
    ServerError,
    /// 529: the service is overloaded.
    Overloaded,
    /// 400: the prompt is longer than the context window.
    ContextLength,
    /// The API could not be reached at all.
    Network,
}

/// How Claude Code reports an API failure: the fields of its assistant event and result.
#[derive(Debug)]
pub(crate) struct ClaudeFailure {
    /// `api_error_status` (none for a connection error).
    pub(crate) status: Option<u16>,
    /// `api_error_type`: the API error body's `error.type` (none for a connection error).
    pub(crate) kind: Option<&'static str>,
    /// The assistant event's `error` class.
    pub(crate) class: &'static str,
    /// The result's `terminal_reason`.
    pub(crate) terminal: &'static str,
    /// The message text (the result's `result`).
    pub(crate) text: String,
}

impl ApiFailure {
    /// Every value, in the order of the documentation.
    pub(crate) const ALL: [ApiFailure; 9] = [
        ApiFailure::RateLimited,
        ApiFailure::UsageLimit,
        ApiFailure::Auth,
        ApiFailure::Billing,
        ApiFailure::ModelNotFound,
        ApiFailure::ServerError,
        ApiFailure::Overloaded,
        ApiFailure::ContextLength,
        ApiFailure::Network,
    ];

    /// The value's name (`rate_limited`, …), as `ApiError::name` spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ApiFailure::RateLimited => "rate_limited",
            ApiFailure::UsageLimit => "usage_limit",
            ApiFailure::Auth => "auth",
            ApiFailure::Billing => "billing",
            ApiFailure::ModelNotFound => "model_not_found",
            ApiFailure::ServerError => "server_error",
            ApiFailure::Overloaded => "overloaded",
            ApiFailure::ContextLength => "context_length",
            ApiFailure::Network => "network",
        }
    }

    /// Reads `HANDOFF_FAKE_API_ERROR`: `Ok(None)` when unset, `Err(value)` when unknown.
    pub(crate) fn from_settings(settings: &Settings) -> Result<Option<ApiFailure>, String> {
        let Some(value) = settings.get(settings::API_ERROR) else {
            return Ok(None);
        };
        ApiFailure::ALL
            .into_iter()
            .find(|a| a.name() == value.trim())
            .map(Some)
            .ok_or(value)
    }

    /// `HANDOFF_FAKE_API_ERROR_AFTER_WRITE=1`.
    pub(crate) fn after_write(settings: &Settings) -> bool {
        settings.get(settings::API_ERROR_AFTER_WRITE).as_deref() == Some("1")
    }

    /// The HTTP status (none for a connection error).
    pub(crate) fn status(self) -> Option<u16> {
        Some(match self {
            ApiFailure::RateLimited | ApiFailure::UsageLimit => 429,
            ApiFailure::Auth => 401,
            ApiFailure::Billing => 402,
            ApiFailure::ModelNotFound => 404,
            ApiFailure::ServerError => 500,
            ApiFailure::Overloaded => 529,
            ApiFailure::ContextLength => 400,
            ApiFailure::Network => return None,
        })
    }

    /// The `retry-after` header the API sends with it.
    pub(crate) fn retry_after(self) -> Option<u64> {
        matches!(self, ApiFailure::RateLimited | ApiFailure::UsageLimit)
            .then_some(RETRY_AFTER_SECONDS)
    }

    /// Claude Code 2.1.332 (`-p --output-format stream-json`).
    pub(crate) fn claude(self, model: &str) -> ClaudeFailure {
        let f = |status, kind, class, terminal, text: &str| ClaudeFailure {
            status: Some(status),
            kind: Some(kind),
            class,
            terminal,
            text: text.to_owned(),
        };
        match self {
            ApiFailure::RateLimited | ApiFailure::UsageLimit => f(
                429,
                "rate_limit_error",
                "rate_limit",
                "api_error",
                "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.",
            ),
            ApiFailure::Auth => f(
                401,
                "authentication_error",
                "authentication_failed",
                "api_error",
                "Invalid API key · Fix external API key",
            ),
            ApiFailure::Billing => f(
                402,
                "billing_error",
                "billing_error",
                "api_error",
                "Credit balance is too low",
            ),
            ApiFailure::ModelNotFound => f(
                404,
                "not_found_error",
                "model_not_found",
                "api_error",
                &format!(
                    "There's an issue with the selected model ({model}). It may not exist or you may not have access to it. Run --model to pick a different model."
                ),
            ),
            ApiFailure::ServerError => f(
                500,
                "api_error",
                "server_error",
                "api_error",
                "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment.",
            ),
            ApiFailure::Overloaded => f(
                529,
                "overloaded_error",
                "server_error",
                "api_error",
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.",
            ),
            ApiFailure::ContextLength => f(
                400,
                "invalid_request_error",
                "invalid_request",
                "prompt_too_long",
                "Prompt is too long · the request is ~250000 tokens (limit 200000)",
            ),
            ApiFailure::Network => ClaudeFailure {
                status: None,
                kind: None,
                class: "unknown",
                terminal: "api_error",
                text: "API Error: Connection error.".to_owned(),
            },
        }
    }

    /// Codex 0.171 (`exec`): the message of its `error` and `turn.failed` events (`ERROR: …`
    /// on stderr without `--json`).
    pub(crate) fn codex(self, model: &str) -> String {
        let url = format!("{OPENAI_BASE}/responses");
        match self {
            ApiFailure::RateLimited => {
                "exceeded retry limit, last status: 429 Too Many Requests".to_owned()
            }
            ApiFailure::UsageLimit => format!(
                "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at {}.",
                clock_in(RETRY_AFTER_SECONDS)
            ),
            ApiFailure::Auth => format!(
                "unexpected status 401 Unauthorized: Incorrect API key provided: sk-e2e-***., url: {url}"
            ),
            ApiFailure::Billing => format!(
                "unexpected status 402 Payment Required: You exceeded your current quota, please check your plan and billing details., url: {url}"
            ),
            ApiFailure::ModelNotFound => {
                format!("The model `{model}` does not exist or you do not have access to it.")
            }
            ApiFailure::ServerError => {
                "We’re currently experiencing high demand, which may cause temporary errors."
                    .to_owned()
            }
            ApiFailure::Overloaded => format!(
                "unexpected status 529 <unknown status code>: The engine is currently overloaded, please try again later., url: {url}"
            ),
            ApiFailure::ContextLength => "Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying.".to_owned(),
            ApiFailure::Network => format!(
                "stream disconnected before completion: error sending request for url ({url})"
            ),
        }
    }

    /// The OpenAI error body (Responses and Chat Completions), as the model server sends it;
    /// none for a connection error.
    pub(crate) fn openai_body(self, model: &str) -> Option<Value> {
        let (kind, code, message) = match self {
            ApiFailure::RateLimited => (
                "tokens",
                Some("rate_limit_exceeded"),
                format!(
                    "Rate limit reached for {model} in organization org-e2e on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in {RETRY_AFTER_SECONDS}s."
                ),
            ),
            ApiFailure::UsageLimit => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                return Some(json!({"error": {
                    "resets_at": now + RETRY_AFTER_SECONDS,
                    "type": "usage_limit_reached",
                    "code": "rate_limit_exceeded",
                    "message": "You've hit your usage limit. Try again later.",
                    "plan_type": "plus",
                    "resets_in_seconds": RETRY_AFTER_SECONDS,
                }}));
            }
            ApiFailure::Auth => (
                "invalid_request_error",
                Some("invalid_api_key"),
                "Incorrect API key provided: sk-e2e-***. You can find your API key at https://platform.openai.com/account/api-keys.".to_owned(),
            ),
            ApiFailure::Billing => (
                "insufficient_quota",
                Some("insufficient_quota"),
                "You exceeded your current quota, please check your plan and billing details."
                    .to_owned(),
            ),
            ApiFailure::ModelNotFound => (
                "invalid_request_error",
                Some("model_not_found"),
                format!("The model `{model}` does not exist or you do not have access to it."),
            ),
            ApiFailure::ServerError => (
                "server_error",
                None,
                "The server had an error while processing your request. Sorry about that!"
                    .to_owned(),
            ),
            ApiFailure::Overloaded => (
                "server_error",
                Some("overloaded"),
                "The engine is currently overloaded, please try again later.".to_owned(),
            ),
            ApiFailure::ContextLength => (
                "invalid_request_error",
                Some("context_length_exceeded"),
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 250000 tokens. Please reduce the length of the messages.".to_owned(),
            ),
            ApiFailure::Network => return None,
        };
        Some(json!({"error": {"message": message, "type": kind, "param": null, "code": code}}))
    }

    /// The OpenAI body's `error.message` (a connection error: Node's `fetch` failure as the
    /// SDKs word it).
    pub(crate) fn openai_message(self, model: &str) -> String {
        self.openai_body(model)
            .and_then(|b| {
                b.pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "Connection error.".to_owned())
    }

    /// The OpenAI body's `error.code`.
    pub(crate) fn openai_code(self, model: &str) -> Option<String> {
        self.openai_body(model).and_then(|b| {
            b.pointer("/error/code")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
    }

    /// OpenCode (`run --format json`): the `error` of its `error` event, as the AI SDK reports
    /// the failed call (`APIError` with the response's status, headers and body), or a
    /// connection failure (`UnknownError`).
    pub(crate) fn opencode(self, model: &str) -> J {
        let (Some(status), Some(body)) = (self.status(), self.openai_body(model)) else {
            return obj! {
                "name" => "UnknownError",
                "data" => obj! { "message" => self.opencode_message(model) },
            };
        };
        let mut headers = obj! { "content-type" => "application/json" };
        if let Some(seconds) = self.retry_after() {
            headers.push("retry-after", seconds.to_string());
        }
        obj! {
            "name" => "APIError",
            "data" => obj! {
                "message" => self.opencode_message(model),
                "statusCode" => u32::from(status),
                "isRetryable" => status == 429 || status >= 500,
                "responseHeaders" => headers,
                "responseBody" => body.to_string(),
                "metadata" => obj! { "url" => format!("{OPENAI_BASE}/chat/completions") },
            },
        }
    }

    /// The message of OpenCode's error (`Error: <message>` on stderr without `--format json`).
    pub(crate) fn opencode_message(self, model: &str) -> String {
        match self.status() {
            Some(_) => self.openai_message(model),
            None => "Unable to connect. Is the computer able to access the url?".to_owned(),
        }
    }

    /// The error line of a CLI that words the failure itself (Kiro, Cursor), after its
    /// `Error: ` prefix: the status, its reason phrase, and the detail.
    pub(crate) fn status_text(self, model: &str) -> String {
        match self {
            ApiFailure::RateLimited => format!(
                "429 Too Many Requests: Rate limit reached for requests. Please try again in {RETRY_AFTER_SECONDS}s."
            ),
            ApiFailure::UsageLimit => format!(
                "429 Too Many Requests: You have reached the usage limit of your plan. Please try again in {RETRY_AFTER_SECONDS}s."
            ),
            ApiFailure::Auth => "401 Unauthorized: invalid api key".to_owned(),
            ApiFailure::Billing => {
                "402 Payment Required: insufficient credits on this account".to_owned()
            }
            ApiFailure::ModelNotFound => format!("404 Not Found: model '{model}' not found"),
            ApiFailure::ServerError => "500 Internal Server Error: internal error".to_owned(),
            ApiFailure::Overloaded => {
                "529 Overloaded: the service is temporarily overloaded".to_owned()
            }
            ApiFailure::ContextLength => "400 Bad Request: the prompt is too long for the model's context window (250000 tokens > 200000)".to_owned(),
            ApiFailure::Network => "Connection error: error sending request: tcp connect error: Connection refused (os error 111)".to_owned(),
        }
    }

    /// How the OpenAI Node SDK words the failure (`<status> <body message>`, or `Connection
    /// error.`), as CLIs built on it (the community Grok CLI) pass it on.
    pub(crate) fn openai_sdk_message(self, model: &str) -> String {
        match self.status() {
            Some(status) => format!("{status} {}", self.openai_message(model)),
            None => self.openai_message(model),
        }
    }
}

/// The local clock time `seconds` from now as Codex prints it: `3:56 PM` (12-hour clock, hour
/// without a leading zero).
pub(crate) fn clock_in(seconds: u64) -> String {
    let at = SystemTime::now() + Duration::from_secs(seconds);
    let secs = at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let (hour, minute) = local_clock(secs).unwrap_or((
        i32::try_from((secs / 3600) % 24).unwrap_or(0),
        i32::try_from((secs / 60) % 60).unwrap_or(0),
    ));
    let h12 = if hour % 12 == 0 { 12 } else { hour % 12 };
    let half = if hour >= 12 { "PM" } else { "AM" };
    format!("{h12}:{minute:02} {half}")
}

/// Hour and minute of the local time at `secs` since the epoch.
#[allow(unsafe_code)]
fn local_clock(secs: i64) -> Option<(i32, i32)> {
    use nix::libc;
    let t: libc::time_t = secs;
    // SAFETY: `tm` is plain data that `localtime_r` fills; both pointers are valid for the call.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        (!libc::localtime_r(&t, &mut tm).is_null()).then_some((tm.tm_hour, tm.tm_min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_values_are_reported() {
        for a in ApiFailure::ALL {
            let s = Settings::with(&[(settings::API_ERROR, a.name())]);
            assert_eq!(ApiFailure::from_settings(&s), Ok(Some(a)));
        }
        let s = Settings::with(&[(settings::API_ERROR, "nope")]);
        assert_eq!(ApiFailure::from_settings(&s), Err("nope".to_owned()));
        assert_eq!(ApiFailure::from_settings(&Settings::with(&[])), Ok(None));
    }

    #[test]
    fn clock_times_look_like_codex_s() {
        let t = clock_in(1200);
        let (hm, half) = t.split_once(' ').unwrap_or_default();
        assert!(half == "AM" || half == "PM", "{t}");
        let (h, m) = hm.split_once(':').unwrap_or_default();
        assert!(!h.starts_with('0') && (1..=12).contains(&h.parse::<u32>().unwrap_or(0)));
        assert_eq!(m.len(), 2, "{t}");
    }

    #[test]
    fn opencode_bodies_are_strings_with_retry_after_on_limits() {
        let e: Value =
            serde_json::from_str(&ApiFailure::RateLimited.opencode("m").render()).unwrap();
        assert_eq!(e["data"]["statusCode"], 429);
        assert_eq!(e["data"]["responseHeaders"]["retry-after"], "1200");
        let body: Value =
            serde_json::from_str(e["data"]["responseBody"].as_str().unwrap_or_default())
                .unwrap_or_default();
        assert_eq!(body["error"]["code"], "rate_limit_exceeded");
        let net: Value = serde_json::from_str(&ApiFailure::Network.opencode("m").render()).unwrap();
        assert_eq!(net["name"], "UnknownError");
    }
}
