//! Live progress: what an agent is doing while it runs, read from its streaming output.
//!
//! Adapters turn each line of their CLI's event stream into [`ProgressEvent`]s
//! ([`crate::Provider::progress`]); the engine hands them, tagged with the run, to a
//! [`ProgressSink`] the embedder installs ([`crate::EngineOptions::progress`]). The `handoff`
//! binary draws a status line from them on a terminal. Progress never changes a result.

use std::fmt;
use std::sync::Arc;

use crate::names::AgentId;

/// Longest detail kept for an event, in characters.
pub const MAX_DETAIL_CHARS: usize = 120;

/// Longest detail an event holds before it is masked, in characters: far more than what is
/// shown, so that the cut to [`MAX_DETAIL_CHARS`] never splits a secret the masker would have
/// recognised whole.
const MAX_RAW_DETAIL_CHARS: usize = 4096;

/// One thing an agent did, as its event stream tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressEvent {
    /// A model turn began (a new assistant message or step).
    Turn,
    /// A tool was called: its name and, when short, what it was called on (a command, a path,
    /// a pattern).
    Tool {
        /// The tool's name as the CLI reports it.
        name: String,
        /// What it was called on.
        detail: Option<String>,
    },
    /// A file was written or edited.
    FileEdited {
        /// The path as the CLI reports it.
        path: String,
    },
}

impl ProgressEvent {
    /// A tool event with `detail`'s first line; [`ProgressEvent::masked`] masks it and cuts
    /// it to [`MAX_DETAIL_CHARS`].
    pub fn tool(name: impl Into<String>, detail: Option<&str>) -> ProgressEvent {
        ProgressEvent::Tool {
            name: name.into(),
            detail: detail.map(first_line).filter(|d| !d.is_empty()),
        }
    }

    /// A file event with the path's first line; [`ProgressEvent::masked`] masks it and cuts it
    /// to [`MAX_DETAIL_CHARS`].
    pub fn file(path: &str) -> ProgressEvent {
        ProgressEvent::FileEdited {
            path: first_line(path),
        }
    }
}

impl fmt::Display for ProgressEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgressEvent::Turn => f.write_str("thinking"),
            ProgressEvent::Tool { name, detail: None } => f.write_str(name),
            ProgressEvent::Tool {
                name,
                detail: Some(d),
            } => write!(f, "{name}: {d}"),
            ProgressEvent::FileEdited { path } => write!(f, "edited {path}"),
        }
    }
}

impl ProgressEvent {
    /// The event with its detail or path masked, then made printable and cut to
    /// [`MAX_DETAIL_CHARS`] (in that order: a cut first could leave part of a secret the
    /// masker no longer recognises).
    pub fn masked(self, masker: &crate::Masker) -> ProgressEvent {
        let mask = |s: String| shown(&masker.mask(&s).text);
        match self {
            ProgressEvent::Tool { name, detail } => ProgressEvent::Tool {
                name,
                detail: detail.map(mask),
            },
            ProgressEvent::FileEdited { path } => ProgressEvent::FileEdited { path: mask(path) },
            other => other,
        }
    }
}

/// `text`'s first non-blank line, trimmed, at most [`MAX_RAW_DETAIL_CHARS`] characters.
fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .chars()
        .take(MAX_RAW_DETAIL_CHARS)
        .collect()
}

/// `text` as shown: printable, and cut to [`MAX_DETAIL_CHARS`] characters (with `…`).
fn shown(text: &str) -> String {
    // The agent wrote it: shown on a terminal, it must not be able to steer it.
    let line = crate::printable(text, false);
    if line.chars().count() > MAX_DETAIL_CHARS {
        let mut cut: String = line.chars().take(MAX_DETAIL_CHARS - 1).collect();
        cut.push('…');
        cut
    } else {
        line.into_owned()
    }
}

/// A progress event of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressUpdate {
    /// The run's id.
    pub run_id: String,
    /// Whether the run is the root (not a nested adviser).
    pub root: bool,
    /// The agent running it.
    pub agent: AgentId,
    /// What it runs: the mode, `advice`, or `receiver`.
    pub label: String,
    /// What happened.
    pub event: ProgressEvent,
}

/// Receives progress updates. Called from the engine's tasks: keep it quick.
pub type ProgressSink = Arc<dyn Fn(ProgressUpdate) + Send + Sync>;

/// A [`ProgressSink`] as an engine option.
#[derive(Clone)]
pub struct ProgressHook(pub ProgressSink);

impl fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressHook")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_masked() {
        let masker = crate::Masker::new(["plainGatewayValue7731qq"]);
        let e = ProgressEvent::tool(
            "Bash",
            Some("curl -H 'Authorization: Bearer abcdefghijklmnop' -d plainGatewayValue7731qq"),
        )
        .masked(&masker);
        let shown = e.to_string();
        assert!(!shown.contains("abcdefghijklmnop"), "{shown}");
        assert!(!shown.contains("plainGatewayValue7731qq"), "{shown}");
        assert!(shown.starts_with("Bash: curl"), "{shown}");

        // A secret that runs past the cut is masked first, never cut into a prefix the masker
        // would not recognise.
        let late = format!("echo {} plainGatewayValue7731qq", "x".repeat(100));
        let shown = ProgressEvent::tool("Bash", Some(&late))
            .masked(&masker)
            .to_string();
        assert!(!shown.contains("plainGate"), "{shown}");
    }

    #[test]
    fn details_are_one_short_line() {
        let long = "x".repeat(500);
        let masker = crate::Masker::default();
        let ProgressEvent::Tool { detail, .. } =
            ProgressEvent::tool("Bash", Some(&long)).masked(&masker)
        else {
            panic!()
        };
        let detail = detail.unwrap();
        assert_eq!(detail.chars().count(), MAX_DETAIL_CHARS);
        assert!(detail.ends_with('…'));
        assert_eq!(
            ProgressEvent::tool("Bash", Some("\n  cargo test\nmore")).to_string(),
            "Bash: cargo test"
        );
        assert_eq!(ProgressEvent::tool("Read", Some("  ")).to_string(), "Read");
        assert_eq!(
            ProgressEvent::file("src/a.rs").to_string(),
            "edited src/a.rs"
        );
    }
}
