//! Integration tests: the `fake-agent` binary driven through `FakeAgents` symlinks.

// Test helpers outside `#[test]` functions panic on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_errors;
mod claude;
mod codex;
mod control;
mod fake_ssh;
mod library;
mod model_errors;
mod model_server;
mod modes;
mod nested;
mod others;
mod probes;
mod receiver;
mod ssh;
mod support;
