//! Integration tests of the Codex and Claude Code adapters, through the public API only:
//! invocation snapshots and invariants, parsers on recorded real outputs, garbage-input
//! robustness, and the Codex strict-schema transform.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cursor;
mod garbage;
mod grok;
mod invocation;
mod kiro;
mod nested;
mod opencode;
mod parse;
mod receiver;
mod schema;
mod store_claude;
mod store_codex;
mod store_opencode;
mod support;
mod transcript_claude;
mod transcript_codex;
mod transcript_cursor;
