//! `diagnostics.cause` and `diagnostics.retryAfterSeconds` through the binary: every agent
//! failing with every model API error of `HANDOFF_FAKE_API_ERROR` (in its CLI's own output
//! format), and the causes handoff finds itself (timeout, a missing CLI, a policy block).
//!
//! Each agent's table runs every error in one sandbox and reports all the cases that went wrong
//! at once, so one misread does not hide the others.

use handoff_testkit::keys::{API_ERROR, API_ERROR_AFTER_WRITE, GROK, MODE};
use serde_json::Value;

use crate::support::{Run, Sandbox};

/// `HANDOFF_FAKE_API_ERROR` values and the cause each must be read as.
const ERRORS: [(&str, &str); 9] = [
    ("rate_limited", "rate_limited"),
    ("usage_limit", "rate_limited"),
    ("auth", "auth"),
    ("billing", "billing"),
    ("model_not_found", "model_not_found"),
    ("server_error", "server_error"),
    ("overloaded", "server_error"),
    ("context_length", "context_length"),
    ("network", "network"),
];

/// The wait (`min..=max` seconds) `diagnostics.retryAfterSeconds` must hold for `agent` failing
/// with `error`; `None`: null.
fn expected_retry(agent: &str, error: &str) -> Option<(u64, u64)> {
    match (agent, error) {
        // Claude Code passes no retry-after on.
        ("claude", _) => None,
        // "… or try again at 3:56 PM.": the clock time 1200 s ahead, to the minute.
        ("codex", "usage_limit") => Some((1140, 1200)),
        // The `retry-after: 1200` response header (rate limit) / `resets_in_seconds` (usage).
        ("opencode", "rate_limited" | "usage_limit") => Some((1200, 1200)),
        // "Please try again in 1200s." in the error text; xAI's and the SDK's usage-limit text
        // ("Try again later.") state no time.
        ("grok" | "grok-community", "rate_limited") => Some((1200, 1200)),
        ("kiro" | "cursor", "rate_limited" | "usage_limit") => Some((1200, 1200)),
        _ => None,
    }
}

fn caller_for(target: &str) -> &'static str {
    if target == "codex" { "claude" } else { "codex" }
}

fn ctx(run: &Run) -> String {
    format!(
        "exit {}\n--- stdout ---\n{}--- stderr ---\n{}",
        run.code, run.stdout, run.stderr
    )
}

fn diagnostics(run: &Run) -> &Value {
    &run.json["diagnostics"]
}

/// `handoff advice --caller-harness … --harness <target> --cwd <repo> --instructions <file>
/// <extra…>`.
fn advise(sb: &Sandbox, target: &str, extra: &[&str]) -> Run {
    let ins = sb.instructions("Is the README accurate?");
    let cwd = sb.cwd();
    let mut args = vec![
        "advice",
        "--caller-harness",
        caller_for(target),
        "--harness",
        target,
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ];
    args.extend(extra);
    sb.run(&args)
}

/// What one case got wrong, or `None`.
fn check_api_error(agent: &str, error: &str, cause: &str, run: &Run) -> Option<String> {
    let d = diagnostics(run);
    let retry = d["retryAfterSeconds"].as_u64();
    let retry_ok = match (expected_retry(agent, error), retry) {
        (None, None) => d["retryAfterSeconds"].is_null(),
        (Some((lo, hi)), Some(got)) => (lo..=hi).contains(&got),
        _ => false,
    };
    let wrong = run.code != 2 || run.status() != "failed" || d["cause"] != cause || !retry_ok;
    wrong.then(|| {
        format!(
            "{agent} {error}: got exit {} status {} cause {} retryAfterSeconds {}; expected exit 2 \
             status failed cause {cause} retryAfterSeconds {:?}\n  message: {}",
            run.code,
            run.status(),
            d["cause"],
            d["retryAfterSeconds"],
            expected_retry(agent, error),
            d["message"],
        )
    })
}

/// Every error of [`ERRORS`] on `agent` (`--harness agent`), in `sb`.
fn api_errors(sb: &Sandbox, agent: &str) {
    let mut wrong = Vec::new();
    for (error, cause) in ERRORS {
        sb.agents.set(API_ERROR, error);
        let run = advise(sb, agent, &[]);
        assert_eq!(
            run.stdout.lines().count(),
            1,
            "{agent} {error}: one line on stdout\n{}",
            ctx(&run)
        );
        wrong.extend(check_api_error(agent, error, cause, &run));
    }
    assert!(
        wrong.is_empty(),
        "{} of {} API errors misread:\n{}",
        wrong.len(),
        ERRORS.len(),
        wrong.join("\n")
    );
}

macro_rules! api_error_tables {
    ($($name:ident => $agent:literal),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                api_errors(&Sandbox::new(), $agent);
            }
        )*
    };
}

api_error_tables!(
    api_errors_claude => "claude",
    api_errors_codex => "codex",
    api_errors_opencode => "opencode",
    api_errors_grok => "grok",
    api_errors_kiro => "kiro",
    api_errors_cursor => "cursor",
);

/// The community Grok CLI runs only under handoff's own sandbox (the real `bwrap`); it reports
/// an API error as its last assistant message and exits 0, in the OpenAI SDK's words.
///
/// Known misread, left failing on purpose until the parser is fixed: `overloaded` (`Grok API
/// error: 529 The engine is currently overloaded, please try again later.`) comes out
/// `rate_limited`, the text rule for "try again later" winning over the 529 the text names.
#[test]
fn api_errors_grok_community() {
    let sb = crate::support::confined();
    sb.agents.set(GROK, "community");
    api_errors(&sb, "grok-community");
}

/// A failure with a partial change: the file the agent wrote before its limit stays in the
/// worktree, and the cause is still the limit.
#[test]
fn a_partial_change_before_the_limit_keeps_its_cause() {
    for target in ["codex", "claude"] {
        let sb = Sandbox::new();
        sb.agents.set(API_ERROR, "rate_limited");
        sb.agents.set(API_ERROR_AFTER_WRITE, "1");
        let run = sb.delegate(caller_for(target), target, "build", &[]);
        assert_eq!(run.code, 2, "{target}\n{}", ctx(&run));
        assert_eq!(run.status(), "failed", "{target}\n{}", ctx(&run));
        assert_eq!(diagnostics(&run)["cause"], "rate_limited", "{}", ctx(&run));
        let exe_file = format!("fake-partial-{target}.txt");
        assert!(
            run.json["git"]["changedFiles"]
                .as_array()
                .is_some_and(|files| files.iter().any(|f| f == exe_file.as_str())),
            "{target}: changedFiles names {exe_file}\n{}",
            ctx(&run)
        );
    }
}

/// An advice run never writes the partial file, whatever `HANDOFF_FAKE_API_ERROR_AFTER_WRITE`
/// says.
#[test]
fn advice_never_writes_the_partial_file() {
    let sb = Sandbox::new();
    sb.agents.set(API_ERROR, "billing");
    sb.agents.set(API_ERROR_AFTER_WRITE, "1");
    let run = advise(&sb, "codex", &[]);
    assert_eq!(run.code, 2, "{}", ctx(&run));
    assert_eq!(diagnostics(&run)["cause"], "billing", "{}", ctx(&run));
    assert!(!sb.repo.path().join("fake-partial-codex.txt").exists());
}

/// The per-CLI key: only `codex` fails; `claude` answers.
#[test]
fn the_switch_can_target_one_cli() {
    let sb = Sandbox::new();
    sb.agents.set(&format!("{API_ERROR}@codex"), "auth");
    let codex = advise(&sb, "codex", &[]);
    assert_eq!(diagnostics(&codex)["cause"], "auth", "{}", ctx(&codex));
    let claude = advise(&sb, "claude", &[]);
    assert_eq!(claude.code, 0, "{}", ctx(&claude));
}

#[test]
fn a_success_has_no_cause() {
    let sb = Sandbox::new();
    for target in ["codex", "claude"] {
        let run = advise(&sb, target, &[]);
        assert_eq!(run.code, 0, "{target}\n{}", ctx(&run));
        assert_eq!(run.status(), "succeeded", "{}", ctx(&run));
        let d = diagnostics(&run);
        assert!(d["cause"].is_null(), "{target}: {d}");
        assert!(d["retryAfterSeconds"].is_null(), "{target}: {d}");
    }
}

#[test]
fn a_timeout_is_timeout() {
    let sb = Sandbox::new();
    sb.agents.set(MODE, "hang");
    let run = advise(&sb, "codex", &["--timeout-ms", "1500"]);
    assert_eq!(run.code, 8, "{}", ctx(&run));
    assert_eq!(run.status(), "timed_out", "{}", ctx(&run));
    assert_eq!(diagnostics(&run)["cause"], "timeout", "{}", ctx(&run));
    assert!(diagnostics(&run)["retryAfterSeconds"].is_null());
}

#[test]
fn a_missing_cli_is_not_installed() {
    let sb = Sandbox::new();
    sb.agents.uninstall("codex");
    let run = advise(&sb, "codex", &[]);
    assert_eq!(run.code, 3, "{}", ctx(&run));
    assert_eq!(run.status(), "not_run", "{}", ctx(&run));
    assert_eq!(diagnostics(&run)["cause"], "not_installed", "{}", ctx(&run));
}

/// A read-only review that changed the worktree is blocked by policy (10): `other`.
#[test]
fn a_review_that_changes_the_worktree_is_other() {
    let sb = Sandbox::new();
    sb.agents.set(MODE, "mutate");
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.code, 10, "{}", ctx(&run));
    assert_eq!(run.status(), "blocked", "{}", ctx(&run));
    assert_eq!(diagnostics(&run)["cause"], "other", "{}", ctx(&run));
}
