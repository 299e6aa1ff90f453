//! Why a run failed, as each real CLI reports it: the model server answers every request with
//! one API error (the CLIs' own retries off, as the rig configures them), and the result names
//! the cause; a rate-limited agent fails over to another one.

use handoff_testkit::model_server::{
    ApiError, ModelServer, RETRY_AFTER_SECONDS, Script, Step, provider_output,
};
use serde_json::Value;

use super::{Rig, clis};

/// The cause each API error is read as.
fn expected(error: ApiError) -> &'static str {
    match error {
        ApiError::RateLimited | ApiError::UsageLimit => "rate_limited",
        ApiError::Auth => "auth",
        ApiError::Billing => "billing",
        ApiError::ModelNotFound => "model_not_found",
        ApiError::ServerError | ApiError::Overloaded => "server_error",
        ApiError::ContextLength => "context_length",
    }
}

/// OpenCode retries a 429 and every 5xx itself, with no limit and no switch to turn that off
/// (1.18.33): through handoff such a run ends at its time budget.
fn retried_by_opencode(error: ApiError) -> bool {
    matches!(
        error,
        ApiError::RateLimited | ApiError::UsageLimit | ApiError::ServerError | ApiError::Overloaded
    )
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn every_api_error_is_read_as_its_cause() {
    let mut wrong = Vec::new();
    for cli in clis() {
        for error in ApiError::ALL {
            if cli == "opencode" && retried_by_opencode(error) && error != ApiError::RateLimited {
                continue;
            }
            let rig = Rig::new(cli, Script::new([Step::Fail(error)]));
            // Only a run OpenCode retries without end needs a short budget: one it reports at
            // once keeps the usual one, so a loaded machine does not turn it into a timeout.
            let budget = if cli == "opencode" && retried_by_opencode(error) {
                "8000"
            } else {
                "120000"
            };
            let run = rig.run("advice", &["--timeout-ms", budget]);
            let d = &run.json["diagnostics"];
            let (code, cause) = if cli == "opencode" && retried_by_opencode(error) {
                (8, "timeout")
            } else {
                (2, expected(error))
            };
            let retry = d["retryAfterSeconds"].as_u64();
            let retry_ok = match (cli, error) {
                // Codex names the clock time the usage limit resets at.
                ("codex", ApiError::UsageLimit) => {
                    retry.is_some_and(|s| s + 90 >= RETRY_AFTER_SECONDS && s <= RETRY_AFTER_SECONDS)
                }
                // Claude Code does not pass the API's retry-after on; Codex's 429 text hides it.
                _ => retry.is_none(),
            };
            if run.code != code || d["cause"] != cause || !retry_ok {
                wrong.push(format!(
                    "{cli} {}: exit {} cause {} retry {:?} (want exit {code}, {cause}): {}",
                    error.name(),
                    run.code,
                    d["cause"],
                    retry,
                    run.message()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `run --harness claude --failover codex`: Claude Code's provider answers 429, Codex's
/// answers; the review succeeds on Codex with both attempts recorded.
#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn a_rate_limited_claude_code_fails_over_to_codex() {
    let only = clis();
    if !(only.contains(&"claude") && only.contains(&"codex")) {
        return;
    }
    let rig = Rig::new(
        "claude",
        Script::answer(provider_output("reviewed on codex")),
    );
    let limited = ModelServer::start_blocking(Script::new([Step::Fail(ApiError::RateLimited)]));
    let config = rig.root.join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        &format!("ANTHROPIC_BASE_URL = \"{}\"", rig.server.url()),
        &format!("ANTHROPIC_BASE_URL = \"{}\"", limited.url()),
    );
    std::fs::write(&config, text).unwrap();
    let run = rig.run("review", &["--failover", "codex"]);
    assert_eq!(run.code, 0, "{}", run.json);
    assert_eq!(run.json["target"]["harness"], "codex");
    assert_eq!(run.json["output"]["response"], "reviewed on codex");
    let attempts: Vec<(Value, Value)> = run.json["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["harness"].clone(), a["cause"].clone()))
        .collect();
    assert_eq!(
        attempts,
        [
            (Value::from("claude"), Value::from("rate_limited")),
            (Value::from("codex"), Value::Null),
        ]
    );
    assert!(
        !limited.requests().is_empty(),
        "Claude Code never asked its provider"
    );
    assert!(run.changed().is_empty(), "{:?}", run.changed());
    rig.assert_no_process_left();
}
