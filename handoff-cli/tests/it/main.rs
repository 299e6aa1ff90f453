//! End-to-end tests through the `handoff` binary, with the fake agent standing in for each CLI.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod advice;
mod advice_confined;
mod attribute;
mod carry;
mod causes;
mod checkpoint;
mod concealment;
mod config;
mod containment;
mod continuation;
mod copilot;
mod copilot_carry;
mod docs;
mod doctor;
mod evidence;
mod failover;
mod gemini;
mod gitstate;
mod grok_community;
mod hosts;
mod jobs;
mod leaks;
mod leftovers;
mod library;
mod lifecycle;
mod limit_hook;
mod live;
mod masking;
mod mcp;
mod note;
mod own_sandbox;
mod panel;
mod planting;
mod qwen;
mod remote;
mod saved_fingerprint;
mod state_import;
mod statuses;
mod support;
mod surface;
mod terminal;
mod trust;
