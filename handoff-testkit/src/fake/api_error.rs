//! `HANDOFF_FAKE_API_ERROR`: a run that fails the way each real CLI fails when its model API
//! answers with an error (or cannot be reached), in that CLI's own words and output format.
//!
//! The texts were recorded from the real CLIs against the model server of
//! [`crate::model_server`] (Claude Code 2.1.332, Codex 0.171, OpenCode); those of Grok, Kiro,
//! Cursor and the community Grok CLI follow each one's usual error form. The statuses, names,
//! `retry-after` and OpenAI bodies are the model server's own ([`ApiError`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::json::{J, obj};
use super::settings::{self, Settings};
use crate::model_server::{ApiError, RETRY_AFTER_SECONDS};

/// Where the model API "was" (the URL the CLIs quote).
const OPENAI_BASE: &str = "http://127.0.0.1:1/v1";

/// The API failure a run reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiFailure {
    /// The API answered with this error, as the model server answers it.
    Api(ApiError),
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
    /// Every value, in the order of the documentation: [`ApiError::ALL`], then `Network`.
    pub(crate) const ALL: [ApiFailure; ApiError::ALL.len() + 1] = {
        let mut all = [ApiFailure::Network; ApiError::ALL.len() + 1];
        let mut i = 0;
        while i < ApiError::ALL.len() {
            all[i] = ApiFailure::Api(ApiError::ALL[i]);
            i += 1;
        }
        all
    };

    /// The API error, none for a connection error.
    fn api(self) -> Option<ApiError> {
        match self {
            ApiFailure::Api(error) => Some(error),
            ApiFailure::Network => None,
        }
    }

    /// The value's name (`rate_limited`, …: [`ApiError::name`], or `network`).
    pub(crate) fn name(self) -> &'static str {
        self.api().map_or("network", ApiError::name)
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
        self.api().map(ApiError::status)
    }

    /// The `retry-after` header the API sends with it.
    pub(crate) fn retry_after(self) -> Option<u64> {
        self.api().and_then(ApiError::retry_after)
    }

    /// Claude Code 2.1.332 (`-p --output-format stream-json`).
    pub(crate) fn claude(self, model: &str) -> ClaudeFailure {
        let Some(error) = self.api() else {
            return ClaudeFailure {
                status: None,
                kind: None,
                class: "unknown",
                terminal: "api_error",
                text: "API Error: Connection error.".to_owned(),
            };
        };
        let f = |kind, class, terminal, text: &str| ClaudeFailure {
            status: Some(error.status()),
            kind: Some(kind),
            class,
            terminal,
            text: text.to_owned(),
        };
        match error {
            ApiError::RateLimited | ApiError::UsageLimit => f(
                "rate_limit_error",
                "rate_limit",
                "api_error",
                "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.",
            ),
            ApiError::Auth => f(
                "authentication_error",
                "authentication_failed",
                "api_error",
                "Invalid API key · Fix external API key",
            ),
            ApiError::Billing => f(
                "billing_error",
                "billing_error",
                "api_error",
                "Credit balance is too low",
            ),
            ApiError::ModelNotFound => f(
                "not_found_error",
                "model_not_found",
                "api_error",
                &format!(
                    "There's an issue with the selected model ({model}). It may not exist or you may not have access to it. Run --model to pick a different model."
                ),
            ),
            ApiError::ServerError => f(
                "api_error",
                "server_error",
                "api_error",
                "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment.",
            ),
            ApiError::Overloaded => f(
                "overloaded_error",
                "server_error",
                "api_error",
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.",
            ),
            ApiError::ContextLength => f(
                "invalid_request_error",
                "invalid_request",
                "prompt_too_long",
                "Prompt is too long · the request is ~250000 tokens (limit 200000)",
            ),
        }
    }

    /// Codex 0.171 (`exec`): the message of its `error` and `turn.failed` events (`ERROR: …`
    /// on stderr without `--json`).
    pub(crate) fn codex(self, model: &str) -> String {
        let url = format!("{OPENAI_BASE}/responses");
        let Some(error) = self.api() else {
            return format!(
                "stream disconnected before completion: error sending request for url ({url})"
            );
        };
        match error {
            ApiError::RateLimited => {
                "exceeded retry limit, last status: 429 Too Many Requests".to_owned()
            }
            ApiError::UsageLimit => format!(
                "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at {}.",
                clock_in(RETRY_AFTER_SECONDS)
            ),
            ApiError::Auth => format!(
                "unexpected status 401 Unauthorized: Incorrect API key provided: sk-e2e-***., url: {url}"
            ),
            ApiError::Billing => format!(
                "unexpected status 402 Payment Required: You exceeded your current quota, please check your plan and billing details., url: {url}"
            ),
            ApiError::ModelNotFound => {
                format!("The model `{model}` does not exist or you do not have access to it.")
            }
            ApiError::ServerError => {
                "We’re currently experiencing high demand, which may cause temporary errors."
                    .to_owned()
            }
            ApiError::Overloaded => format!(
                "unexpected status 529 <unknown status code>: The engine is currently overloaded, please try again later., url: {url}"
            ),
            ApiError::ContextLength => "Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying.".to_owned(),
        }
    }

    /// The OpenAI error body (Responses and Chat Completions), as the model server sends it;
    /// none for a connection error.
    pub(crate) fn openai_body(self, model: &str) -> Option<Value> {
        self.api().map(|error| error.openai_body(model))
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
        let Some(error) = self.api() else {
            return "Connection error: error sending request: tcp connect error: Connection refused (os error 111)".to_owned();
        };
        match error {
            ApiError::RateLimited => format!(
                "429 Too Many Requests: Rate limit reached for requests. Please try again in {RETRY_AFTER_SECONDS}s."
            ),
            ApiError::UsageLimit => format!(
                "429 Too Many Requests: You have reached the usage limit of your plan. Please try again in {RETRY_AFTER_SECONDS}s."
            ),
            ApiError::Auth => "401 Unauthorized: invalid api key".to_owned(),
            ApiError::Billing => {
                "402 Payment Required: insufficient credits on this account".to_owned()
            }
            ApiError::ModelNotFound => format!("404 Not Found: model '{model}' not found"),
            ApiError::ServerError => "500 Internal Server Error: internal error".to_owned(),
            ApiError::Overloaded => {
                "529 Overloaded: the service is temporarily overloaded".to_owned()
            }
            ApiError::ContextLength => "400 Bad Request: the prompt is too long for the model's context window (250000 tokens > 200000)".to_owned(),
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
        let e: Value = serde_json::from_str(
            &ApiFailure::Api(ApiError::RateLimited)
                .opencode("m")
                .render(),
        )
        .unwrap();
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
