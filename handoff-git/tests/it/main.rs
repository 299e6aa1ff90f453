//! Integration tests for `handoff-git`: temporary repositories built with the `git` CLI,
//! fingerprinted with `GitWorkspace`.

// Test helpers (outside `#[test]` functions) panic on setup failures by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod detection;
mod discovery;
mod forgery;
mod gc_cost;
mod gitdir;
mod ignored;
mod nested;
mod programs;
mod prop;
mod prop_hiding;
mod read_only;
mod snapshot;
mod status_view;
mod support;
mod worktrees;
