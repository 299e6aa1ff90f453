//! Integration tests of the adapters, through the public API only. `harness` holds what every
//! agent shares, table-driven: plans per mode and grant profile and their snapshots, recorded
//! outputs, garbage input, the testkit's fake CLIs and preflight. The per-agent modules test
//! what is particular to each CLI; the `store_*` and `transcript_*` modules its sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod copilot;
mod cursor;
mod fakes;
mod garbage;
mod gemini;
mod grok;
mod grok_community;
mod harness;
mod invocation;
mod isolation;
mod kiro;
mod nested;
mod opencode;
mod parse;
mod qwen;
mod receiver;
mod schema;
mod store_claude;
mod store_codex;
mod store_copilot;
mod store_gemini;
mod store_opencode;
mod store_qwen;
mod support;
mod transcript_claude;
mod transcript_codex;
mod transcript_cursor;
