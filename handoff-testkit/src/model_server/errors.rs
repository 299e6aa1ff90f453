//! The API errors a [`super::Step::Fail`] answers with, shaped as each wire's real service
//! sends them: status, `retry-after` header and error body.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::gemini;
use super::log::Endpoint;
use super::wire::json_response;

/// Seconds in the `retry-after` header of [`ApiError::RateLimited`] and
/// [`ApiError::UsageLimit`] (and the "try again in" of the OpenAI rate-limit message).
pub const RETRY_AFTER_SECONDS: u64 = 1200;

/// An API failure, the same on every request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiError {
    /// 429: a rate limit (`rate_limit_error`; OpenAI `rate_limit_exceeded`), with
    /// `retry-after`.
    RateLimited,
    /// 429: a subscription's usage limit as the ChatGPT backend words it
    /// (`usage_limit_reached`, `resets_in_seconds`); on the Anthropic wire the same as
    /// [`ApiError::RateLimited`].
    UsageLimit,
    /// 401: a key the service does not accept.
    Auth,
    /// 402: no credit left (`billing_error`; OpenAI `insufficient_quota`).
    Billing,
    /// 404: the requested model does not exist.
    ModelNotFound,
    /// 500: the service failed.
    ServerError,
    /// 529: the service is overloaded.
    Overloaded,
    /// 400: the prompt is longer than the model's context window.
    ContextLength,
}

impl ApiError {
    /// Every error, in a fixed order.
    pub const ALL: [ApiError; 8] = [
        ApiError::RateLimited,
        ApiError::UsageLimit,
        ApiError::Auth,
        ApiError::Billing,
        ApiError::ModelNotFound,
        ApiError::ServerError,
        ApiError::Overloaded,
        ApiError::ContextLength,
    ];

    /// The HTTP status it is answered with.
    pub fn status(self) -> u16 {
        match self {
            ApiError::RateLimited | ApiError::UsageLimit => 429,
            ApiError::Auth => 401,
            ApiError::Billing => 402,
            ApiError::ModelNotFound => 404,
            ApiError::ServerError => 500,
            ApiError::Overloaded => 529,
            ApiError::ContextLength => 400,
        }
    }

    /// Its name as written in a script (`rate_limited`, …).
    pub fn name(self) -> &'static str {
        match self {
            ApiError::RateLimited => "rate_limited",
            ApiError::UsageLimit => "usage_limit",
            ApiError::Auth => "auth",
            ApiError::Billing => "billing",
            ApiError::ModelNotFound => "model_not_found",
            ApiError::ServerError => "server_error",
            ApiError::Overloaded => "overloaded",
            ApiError::ContextLength => "context_length",
        }
    }

    /// The `retry-after` header it is answered with.
    pub(crate) fn retry_after(self) -> Option<u64> {
        matches!(self, ApiError::RateLimited | ApiError::UsageLimit).then_some(RETRY_AFTER_SECONDS)
    }

    /// The Anthropic Messages body: `{"type":"error","error":{"type","message"}}`.
    fn anthropic_body(self, model: &str) -> Value {
        let (kind, message) = match self {
            ApiError::RateLimited | ApiError::UsageLimit => (
                "rate_limit_error",
                "This request would exceed your account's rate limit. Please try again later."
                    .to_owned(),
            ),
            ApiError::Auth => ("authentication_error", "invalid x-api-key".to_owned()),
            ApiError::Billing => (
                "billing_error",
                "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.".to_owned(),
            ),
            ApiError::ModelNotFound => ("not_found_error", format!("model: {model}")),
            ApiError::ServerError => ("api_error", "Internal server error".to_owned()),
            ApiError::Overloaded => ("overloaded_error", "Overloaded".to_owned()),
            ApiError::ContextLength => (
                "invalid_request_error",
                "prompt is too long: 250000 tokens > 200000 maximum".to_owned(),
            ),
        };
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }

    /// The OpenAI body (Responses and Chat Completions):
    /// `{"error":{"message","type","param","code"}}`.
    pub(crate) fn openai_body(self, model: &str) -> Value {
        let (kind, code, message) = match self {
            ApiError::RateLimited => (
                "tokens",
                Some("rate_limit_exceeded"),
                format!(
                    "Rate limit reached for {model} in organization org-e2e on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in {RETRY_AFTER_SECONDS}s."
                ),
            ),
            ApiError::UsageLimit => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                return json!({"error": {
                    "resets_at": now + RETRY_AFTER_SECONDS,
                    "type": "usage_limit_reached",
                    "code": "rate_limit_exceeded",
                    "message": "You've hit your usage limit. Try again later.",
                    "plan_type": "plus",
                    "resets_in_seconds": RETRY_AFTER_SECONDS,
                }});
            }
            ApiError::Auth => (
                "invalid_request_error",
                Some("invalid_api_key"),
                "Incorrect API key provided: sk-e2e-***. You can find your API key at https://platform.openai.com/account/api-keys.".to_owned(),
            ),
            ApiError::Billing => (
                "insufficient_quota",
                Some("insufficient_quota"),
                "You exceeded your current quota, please check your plan and billing details."
                    .to_owned(),
            ),
            ApiError::ModelNotFound => (
                "invalid_request_error",
                Some("model_not_found"),
                format!("The model `{model}` does not exist or you do not have access to it."),
            ),
            ApiError::ServerError => (
                "server_error",
                None,
                "The server had an error while processing your request. Sorry about that!"
                    .to_owned(),
            ),
            ApiError::Overloaded => (
                "server_error",
                Some("overloaded"),
                "The engine is currently overloaded, please try again later.".to_owned(),
            ),
            ApiError::ContextLength => (
                "invalid_request_error",
                Some("context_length_exceeded"),
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 250000 tokens. Please reduce the length of the messages.".to_owned(),
            ),
        };
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
    }

    /// The Gemini API body: `{"error":{"code","message","status","details"}}`, with the
    /// `RetryInfo` and `QuotaFailure` details Gemini CLI reads a 429 by.
    pub(crate) fn gemini_body(self, model: &str) -> Value {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry = json!({
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": format!("{RETRY_AFTER_SECONDS}s"),
        });
        let (message, details) = match self {
            ApiError::RateLimited => (
                "Resource has been exhausted (e.g. check quota).".to_owned(),
                Some(json!([retry])),
            ),
            ApiError::UsageLimit => (
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.".to_owned(),
                Some(json!([
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [{
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                            "quotaDimensions": {"location": "global", "model": model},
                            "quotaValue": "250",
                        }],
                    },
                    retry,
                ])),
            ),
            ApiError::Auth => (
                "API key not valid. Please pass a valid API key.".to_owned(),
                Some(json!([{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }])),
            ),
            ApiError::Billing => (
                "Billing is not enabled for this project. Enable billing and try again.".to_owned(),
                None,
            ),
            ApiError::ModelNotFound => (
                format!("models/{model} is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."),
                None,
            ),
            ApiError::ServerError => (
                "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting".to_owned(),
                None,
            ),
            ApiError::Overloaded => (
                "The model is overloaded. Please try again later.".to_owned(),
                None,
            ),
            ApiError::ContextLength => (
                "The input token count (250000) exceeds the maximum number of tokens allowed (1048576).".to_owned(),
                None,
            ),
        };
        gemini::error_body(status, &message, details)
    }

    /// The response on `endpoint`'s wire for a request that named `model`.
    pub(crate) fn response(self, endpoint: Endpoint, model: &str) -> Response {
        let body = match endpoint {
            Endpoint::Messages => self.anthropic_body(model),
            Endpoint::GenerateContent => self.gemini_body(model),
            _ => self.openai_body(model),
        };
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = json_response(status, &body);
        if let Some(seconds) = self.retry_after() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
