//! `Step::Fail`: every API error on every wire, as the real services send it — status,
//! `retry-after` and the error body the CLIs read.

use handoff_testkit::model_server::{ApiError, ModelServer, RETRY_AFTER_SECONDS, Script, Step};
use serde_json::{Value, json};

/// The HTTP status, `retry-after` header and JSON body of a POST.
async fn post(url: &str, body: &Value) -> (u16, Option<String>, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .header("x-api-key", "sk-ant-fake")
        .header("authorization", "Bearer sk-fake")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = resp.text().await.unwrap();
    (status, retry, serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn every_api_error_on_every_wire() {
    let server = ModelServer::start(Script::default()).await;
    let message = json!({"model": "fake-model", "max_tokens": 16, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let responses = json!({"model": "fake-model", "stream": true, "input": "hi"});
    let chat = json!({"model": "fake-model", "stream": true,
        "messages": [{"role": "user", "content": "hi"}]});
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let gemini_url = format!(
        "{}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        server.url()
    );
    for error in ApiError::ALL {
        server.set_script(Script::new([Step::Fail(error)]));
        let limited = matches!(error, ApiError::RateLimited | ApiError::UsageLimit);
        let want_retry = limited.then(|| RETRY_AFTER_SECONDS.to_string());

        let (status, retry, body) = post(&format!("{}/v1/messages", server.url()), &message).await;
        assert_eq!((status, &retry), (error.status(), &want_retry), "{error:?}");
        assert_eq!(body["type"], "error");
        let kind = body["error"]["type"].as_str().unwrap();
        let want = match error {
            ApiError::RateLimited | ApiError::UsageLimit => "rate_limit_error",
            ApiError::Auth => "authentication_error",
            ApiError::Billing => "billing_error",
            ApiError::ModelNotFound => "not_found_error",
            ApiError::ServerError => "api_error",
            ApiError::Overloaded => "overloaded_error",
            ApiError::ContextLength => "invalid_request_error",
        };
        assert_eq!(kind, want, "{error:?}");

        for (path, body) in [("responses", &responses), ("chat/completions", &chat)] {
            let (status, retry, body) = post(&format!("{}/{path}", server.v1_url()), body).await;
            assert_eq!(
                (status, &retry),
                (error.status(), &want_retry),
                "{error:?} {path}"
            );
            let e = &body["error"];
            assert!(
                e["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{body}"
            );
            let code = e["code"].as_str();
            let want = match error {
                ApiError::RateLimited | ApiError::UsageLimit => Some("rate_limit_exceeded"),
                ApiError::Auth => Some("invalid_api_key"),
                ApiError::Billing => Some("insufficient_quota"),
                ApiError::ModelNotFound => Some("model_not_found"),
                ApiError::ServerError => None,
                ApiError::Overloaded => Some("overloaded"),
                ApiError::ContextLength => Some("context_length_exceeded"),
            };
            assert_eq!(code, want, "{error:?} {path}: {body}");
            if error == ApiError::UsageLimit {
                assert_eq!(e["type"], "usage_limit_reached");
                assert!(e["resets_at"].as_u64().is_some(), "{body}");
            }
        }

        // The Gemini API: `google.rpc.Status` bodies; a 429 carries `RetryInfo` (and a daily
        // `QuotaFailure` for a usage limit), which Gemini CLI reads instead of `retry-after`.
        let (status, retry, body) = post(&gemini_url, &gemini).await;
        assert_eq!((status, &retry), (error.status(), &want_retry), "{error:?}");
        let e = &body["error"];
        assert_eq!(e["code"], error.status(), "{body}");
        let want = match error {
            ApiError::RateLimited | ApiError::UsageLimit => "RESOURCE_EXHAUSTED",
            ApiError::Auth => "UNAUTHENTICATED",
            ApiError::Billing => "FAILED_PRECONDITION",
            ApiError::ModelNotFound => "NOT_FOUND",
            ApiError::ServerError => "INTERNAL",
            ApiError::Overloaded => "UNAVAILABLE",
            ApiError::ContextLength => "INVALID_ARGUMENT",
        };
        assert_eq!(e["status"], want, "{error:?}");
        let types: Vec<&str> = e["details"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["@type"].as_str())
            .collect();
        let want: &[&str] = match error {
            ApiError::RateLimited => &["type.googleapis.com/google.rpc.RetryInfo"],
            ApiError::UsageLimit => &[
                "type.googleapis.com/google.rpc.QuotaFailure",
                "type.googleapis.com/google.rpc.RetryInfo",
            ],
            ApiError::Auth => &["type.googleapis.com/google.rpc.ErrorInfo"],
            _ => &[],
        };
        assert_eq!(types, want, "{error:?}");
        if error == ApiError::ModelNotFound {
            assert!(
                e["message"]
                    .as_str()
                    .unwrap()
                    .contains("models/gemini-2.5-flash ")
            );
        }
    }
}
