//! Why a run did not succeed, as data: [`FailureCause`] and the classification adapters use to
//! read it from a CLI's output (its structured error fields first, its words last).

use std::sync::LazyLock;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a run did not succeed (`diagnostics.cause`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FailureCause {
    /// The provider's rate or usage limit (HTTP 429, a subscription's usage limit).
    RateLimited,
    /// The credentials were refused (HTTP 401/403, a key or login the service does not accept).
    Auth,
    /// No credit or quota left (HTTP 402, `insufficient_quota`, `billing_error`).
    Billing,
    /// The model does not exist or is not available to this account (HTTP 404).
    ModelNotFound,
    /// The provider failed or is overloaded (HTTP 5xx, 529 `overloaded_error`).
    ServerError,
    /// The provider could not be reached (connection refused or reset, DNS, TLS).
    Network,
    /// The conversation is longer than the model's context window.
    ContextLength,
    /// The agent outlived its time budget.
    Timeout,
    /// The agent's CLI is not installed (not on `PATH`).
    NotInstalled,
    /// The agent's CLI failed its preflight, or refused to start where it was run (e.g. its
    /// sandbox cannot start on this machine).
    Preflight,
    /// The machine the run went to (`--on`) stopped answering while it ran.
    HostLost,
    /// Anything else: a refused request, a policy block, a cancel, the agent's own answer, an
    /// output that breaks the contract, an error it did not explain.
    Other,
}

impl FailureCause {
    /// Every cause, in the order of the documentation.
    pub const ALL: [FailureCause; 12] = [
        FailureCause::RateLimited,
        FailureCause::Auth,
        FailureCause::Billing,
        FailureCause::ModelNotFound,
        FailureCause::ServerError,
        FailureCause::Network,
        FailureCause::ContextLength,
        FailureCause::Timeout,
        FailureCause::NotInstalled,
        FailureCause::Preflight,
        FailureCause::HostLost,
        FailureCause::Other,
    ];

    /// The name as serialized (`rate_limited`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCause::RateLimited => "rate_limited",
            FailureCause::Auth => "auth",
            FailureCause::Billing => "billing",
            FailureCause::ModelNotFound => "model_not_found",
            FailureCause::ServerError => "server_error",
            FailureCause::Network => "network",
            FailureCause::ContextLength => "context_length",
            FailureCause::Timeout => "timeout",
            FailureCause::NotInstalled => "not_installed",
            FailureCause::Preflight => "preflight",
            FailureCause::HostLost => "host_lost",
            FailureCause::Other => "other",
        }
    }

    /// Whether another agent may carry the same request on when an attempt ends for this
    /// cause: the provider is limited, failing, unpaid, or the CLI cannot run here. Never for
    /// the agent's own answer, a timeout, or a refused request.
    pub fn fails_over(self) -> bool {
        matches!(
            self,
            FailureCause::RateLimited
                | FailureCause::ServerError
                | FailureCause::Billing
                | FailureCause::NotInstalled
                | FailureCause::Preflight
                | FailureCause::HostLost
        )
    }

    /// The cause an HTTP status of a model API names, when it names one.
    pub fn from_http_status(status: u16) -> Option<FailureCause> {
        Some(match status {
            429 => FailureCause::RateLimited,
            401 | 403 => FailureCause::Auth,
            402 => FailureCause::Billing,
            404 => FailureCause::ModelNotFound,
            413 => FailureCause::ContextLength,
            408 | 500..=599 => FailureCause::ServerError,
            _ => return None,
        })
    }

    /// The cause an error identifier names (an API error body's `type` or `code`, a CLI's
    /// error class: `rate_limit_error`, `insufficient_quota`, `authentication_failed`, …),
    /// when it names one. Generic classes (`invalid_request_error`) name none.
    pub fn from_error_code(code: &str) -> Option<FailureCause> {
        let code = code.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        let code = code.as_str();
        Some(match code {
            "insufficient_quota"
            | "billing_error"
            | "billing"
            | "payment_required"
            | "credit_balance_too_low"
            | "quota_exceeded" => FailureCause::Billing,
            "rate_limit_error"
            | "rate_limit_exceeded"
            | "rate_limit"
            | "rate_limited"
            | "usage_limit_reached"
            | "usage_limit_exceeded"
            | "usage_limit"
            | "too_many_requests"
            | "throttled"
            | "throttling_exception" => FailureCause::RateLimited,
            "authentication_error"
            | "authentication_failed"
            | "invalid_api_key"
            | "permission_error"
            | "unauthorized"
            | "forbidden"
            | "oauth_org_not_allowed"
            | "invalid_x_api_key"
            | "auth" => FailureCause::Auth,
            "not_found_error" | "model_not_found" | "model_not_available" => {
                FailureCause::ModelNotFound
            }
            "api_error"
            | "server_error"
            | "internal_server_error"
            | "internal_error"
            | "overloaded_error"
            | "overloaded"
            | "service_unavailable"
            | "bad_gateway" => FailureCause::ServerError,
            "context_length_exceeded"
            | "context_window_exceeded"
            | "prompt_too_long"
            | "request_too_large"
            | "string_above_max_length" => FailureCause::ContextLength,
            _ => return None,
        })
    }

    /// The cause a CLI's error text names, as a last resort: `Other` when it names none.
    pub fn from_text(text: &str) -> FailureCause {
        for (re, cause) in TEXT_RULES.iter() {
            if re.is_match(text) {
                return *cause;
            }
        }
        FailureCause::Other
    }
}

impl std::fmt::Display for FailureCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text patterns, most specific first: a quota or credit message is billing even when it
/// came with a 429; a context overflow is not a rate limit even when it says "limit".
static TEXT_RULES: LazyLock<Vec<(Regex, FailureCause)>> = LazyLock::new(|| {
    let rules: [(&str, FailureCause); 9] = [
        (
            r"(?i)context.{0,20}(length|window)|prompt is too long|too many tokens|maximum context|reduce the length",
            FailureCause::ContextLength,
        ),
        (
            r"(?i)insufficient.quota|credit balance|exceeded your current quota|billing|payment required|out of credits|\b402\b",
            FailureCause::Billing,
        ),
        (
            r"(?i)rate.limit|usage limit|too many requests|\b429\b|quota.{0,20}(reached|exhausted)|limit reached",
            FailureCause::RateLimited,
        ),
        (
            r"(?i)overloaded|\b529\b|internal server error|server error|service unavailable|bad gateway|high demand|\b50[0-4]\b",
            FailureCause::ServerError,
        ),
        (
            r"(?i)model.{0,40}(not found|does not exist|not available|is not supported)|unknown model|not_found_error|\b404\b",
            FailureCause::ModelNotFound,
        ),
        (
            r"(?i)invalid.{0,10}(api.?key|x-api-key|token|credentials)|authenticat|unauthori[sz]ed|\b401\b|\b403\b|please (run )?/?login|not logged in|log in again",
            FailureCause::Auth,
        ),
        (
            r"(?i)connection (refused|reset|error|closed)|econnrefused|econnreset|enotfound|etimedout|error sending request|dns|network (error|is unreachable)|stream disconnected|fetch failed|unable to connect|socket hang up",
            FailureCause::Network,
        ),
        (r"(?i)timed? ?out\b", FailureCause::Network),
        (r"(?i)\bnot installed\b", FailureCause::NotInstalled),
    ];
    rules
        .into_iter()
        .filter_map(|(re, cause)| Regex::new(re).ok().map(|re| (re, cause)))
        .collect()
});

/// Why an agent's own run failed, as its adapter read it from the CLI's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureReason {
    /// The cause.
    pub cause: FailureCause,
    /// How long the provider asked to wait before trying again, when it said.
    pub retry_after_seconds: Option<u64>,
}

impl FailureReason {
    /// A reason without a retry time.
    pub fn new(cause: FailureCause) -> FailureReason {
        FailureReason {
            cause,
            retry_after_seconds: None,
        }
    }

    /// Classifies from what a CLI reported, most reliable first: an error identifier
    /// (`codes`, the first that names a cause), the HTTP status, then the text. The retry time
    /// is `retry_after` when given, else the one the text states ("try again in 20s").
    pub fn classify<'a>(
        codes: impl IntoIterator<Item = &'a str>,
        status: Option<u16>,
        text: &str,
        retry_after: Option<u64>,
    ) -> FailureReason {
        let cause = codes
            .into_iter()
            .find_map(FailureCause::from_error_code)
            .or_else(|| status.and_then(FailureCause::from_http_status))
            .unwrap_or_else(|| FailureCause::from_text(text));
        FailureReason {
            cause,
            retry_after_seconds: retry_after.or_else(|| retry_after_in_text(text)),
        }
    }

    /// Classifies from text alone (CLIs that report nothing structured): an HTTP status the
    /// text quotes (`unexpected status 401`, `last status: 429`) before its words; the retry
    /// time it states, in seconds or as a local clock time (`try again at 3:56 PM`).
    pub fn from_text(text: &str) -> FailureReason {
        let retry = retry_at_in_text(text, std::time::SystemTime::now());
        FailureReason::classify([], status_in_text(text), text, retry)
    }
}

static STATUS_IN_TEXT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(?:status(?: code)?|error):?\s*\(?([1-5]\d\d)\b").ok());

/// The HTTP status a CLI's error text quotes (`unexpected status 401 Unauthorized`,
/// `last status: 429 Too Many Requests`, `Grok API error: 529 …`, `API Error: 500 …`), when it
/// quotes one.
pub fn status_in_text(text: &str) -> Option<u16> {
    STATUS_IN_TEXT
        .as_ref()?
        .captures(text)?
        .get(1)?
        .as_str()
        .parse()
        .ok()
}

static RETRY_AT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:try again|resets?|available again)\s+at\s+(?:([A-Z][a-z]{2})[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4}),?\s+)?(\d{1,2}):(\d{2})\s*([AP]\.?M\.?)",
    )
    .ok()
});

/// The wait until the local clock time a text names (`or try again at 3:56 PM.`, `try again
/// at Dec 29th, 2026 10:15 PM`), from `now`, in whole seconds; a time of day without a date
/// that has passed today means tomorrow.
pub fn retry_at_in_text(text: &str, now: std::time::SystemTime) -> Option<u64> {
    let caps = RETRY_AT.as_ref()?.captures(text)?;
    let num = |i: usize| caps.get(i).and_then(|m| m.as_str().parse::<i32>().ok());
    let (hour12, minute) = (num(4)?, num(5)?);
    if !(1..=12).contains(&hour12) || minute > 59 {
        return None;
    }
    let pm = caps.get(6)?.as_str().to_ascii_lowercase().starts_with('p');
    let hour = hour12 % 12 + if pm { 12 } else { 0 };
    let now_secs = i64::try_from(now.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs()).ok()?;
    let mut tm = local_tm(now_secs)?;
    if let (Some(month), Some(day), Some(year)) = (caps.get(1), num(2), num(3)) {
        const MONTHS: [&str; 12] = [
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ];
        let m = month.as_str().to_ascii_lowercase();
        tm.tm_mon = i32::try_from(MONTHS.iter().position(|x| *x == m)?).ok()?;
        tm.tm_mday = day;
        tm.tm_year = year - 1900;
    }
    tm.tm_hour = hour;
    tm.tm_min = minute;
    tm.tm_sec = 0;
    tm.tm_isdst = -1;
    let mut at = make_time(&mut tm)?;
    if caps.get(1).is_none() && at <= now_secs {
        at += 86_400;
    }
    u64::try_from(at - now_secs).ok().filter(|s| *s > 0)
}

#[allow(unsafe_code)]
fn local_tm(secs: i64) -> Option<libc::tm> {
    let t: libc::time_t = secs;
    // SAFETY: `tm` is plain data that `localtime_r` fills; both pointers are valid for the call.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        (!libc::localtime_r(&t, &mut tm).is_null()).then_some(tm)
    }
}

#[allow(unsafe_code)]
fn make_time(tm: &mut libc::tm) -> Option<i64> {
    // SAFETY: `tm` is a valid, initialised `struct tm` that `mktime` may normalise.
    let t = unsafe { libc::mktime(tm) };
    (t != -1).then_some(t)
}

static RETRY_IN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:try again|retry|resets?|available again)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*[a-z]+[\s,]*(?:and\s+)?)+)",
    )
    .ok()
});

/// Milliseconds in one of `unit` (`ms`, `s`, `sec`, `seconds`, `m`, `min`, `hours`, `d`, …).
fn unit_millis(unit: &str) -> Option<f64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "ms" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000.0,
        "d" | "day" | "days" => 86_400_000.0,
        _ => return None,
    })
}

/// The wait a text states, in whole seconds rounded up: "Please try again in 20s.",
/// "try again in 1m30s", "resets in 2 hours 5 minutes", "retry after 6ms" (1).
pub fn retry_after_in_text(text: &str) -> Option<u64> {
    let caps = RETRY_IN.as_ref()?.captures(text)?;
    let span = caps.get(1)?.as_str();
    let mut millis: f64 = 0.0;
    let mut rest = span;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        rest = rest.strip_prefix("and ").unwrap_or(rest);
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            break;
        }
        let n: f64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let letters = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        // "1m30s": a unit ends where the next number starts.
        let Some(scale) = unit_millis(&rest[..letters]) else {
            break;
        };
        millis += n * scale;
        rest = &rest[letters..];
    }
    (millis > 0.0 && millis.is_finite()).then(|| (millis / 1000.0).ceil().max(1.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn identifiers_win_over_the_status() {
        let r = FailureReason::classify(["insufficient_quota"], Some(429), "", None);
        assert_eq!(r.cause, FailureCause::Billing);
        let r = FailureReason::classify(["invalid_request_error"], Some(429), "", None);
        assert_eq!(r.cause, FailureCause::RateLimited);
        let r = FailureReason::classify([], None, "prompt is too long: 250000 tokens", None);
        assert_eq!(r.cause, FailureCause::ContextLength);
    }

    #[test]
    fn texts_of_the_real_clis() {
        for (text, cause) in [
            (
                "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.",
                FailureCause::RateLimited,
            ),
            (
                "You’ve hit your usage limit. Try again later.",
                FailureCause::RateLimited,
            ),
            ("Invalid API key · Please run /login", FailureCause::Auth),
            (
                "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}",
                FailureCause::ServerError,
            ),
            ("API Error: Connection error.", FailureCause::Network),
            (
                "stream disconnected before completion: error sending request for url",
                FailureCause::Network,
            ),
            ("something odd happened", FailureCause::Other),
        ] {
            assert_eq!(FailureCause::from_text(text), cause, "{text}");
        }
    }

    #[test]
    fn retry_times_in_text() {
        for (text, secs) in [
            ("Please try again in 20s.", Some(20)),
            ("Please try again in 1m30s.", Some(90)),
            ("try again in 6ms", Some(1)),
            ("Your limit resets in 2 hours 5 minutes", Some(7500)),
            ("retry after 1.5 seconds", Some(2)),
            ("Try again later.", None),
            ("try again in a while", None),
        ] {
            assert_eq!(retry_after_in_text(text), secs, "{text}");
        }
    }

    #[test]
    fn statuses_and_clock_times_in_text() {
        assert_eq!(
            status_in_text(
                "unexpected status 529 <unknown status code>: overloaded, please try again later"
            ),
            Some(529)
        );
        assert_eq!(
            FailureReason::from_text(
                "unexpected status 529 <unknown status code>: please try again later"
            )
            .cause,
            FailureCause::ServerError
        );
        assert_eq!(
            status_in_text("exceeded retry limit, last status: 429 Too Many Requests"),
            Some(429)
        );
        assert_eq!(status_in_text("no status here"), None);
        assert_eq!(
            FailureReason::from_text("Sorry, I encountered an error: Grok API error: 529 The engine is currently overloaded, please try again later.").cause,
            FailureCause::ServerError
        );
        let now = std::time::SystemTime::now();
        let secs = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let later = local_tm(secs + 1800).unwrap();
        let (h, m) = (later.tm_hour, later.tm_min);
        let text = format!(
            "or try again at {}:{m:02} {}.",
            if h % 12 == 0 { 12 } else { h % 12 },
            if h >= 12 { "PM" } else { "AM" }
        );
        let wait = retry_at_in_text(&text, now).unwrap();
        assert!((1741..=1800).contains(&wait), "{text}: {wait}");
        assert_eq!(retry_at_in_text("try again at 13:99 PM", now), None);
        assert_eq!(retry_at_in_text("try again later", now), None);
    }

    #[test]
    fn which_causes_fail_over() {
        let over: Vec<_> = FailureCause::ALL
            .into_iter()
            .filter(|c| c.fails_over())
            .map(FailureCause::as_str)
            .collect();
        assert_eq!(
            over,
            [
                "rate_limited",
                "billing",
                "server_error",
                "not_installed",
                "preflight",
                "host_lost"
            ]
        );
        for c in FailureCause::ALL {
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::Value::String(c.as_str().into())
            );
        }
    }

    proptest! {
        #[test]
        fn classification_never_panics(codes in proptest::collection::vec(".{0,30}", 0..3),
                                       status in proptest::option::of(0u16..1000),
                                       text in ".{0,300}") {
            let r = FailureReason::classify(codes.iter().map(String::as_str), status, &text, None);
            prop_assert!(FailureCause::ALL.contains(&r.cause));
        }

        #[test]
        fn stated_seconds_are_read_back(n in 1u64..1_000_000) {
            let text = format!("Please try again in {n}s.");
            prop_assert_eq!(retry_after_in_text(&text), Some(n));
        }
    }
}
