//! Why validation refused a run's inputs: the input at fault and the message.
//!
//! The message is what a person reads (`diagnostics.message`, stderr); the field is for a
//! program. Nothing converts into a rejection from a bare `String`, so every refusal names its
//! input:
//!
//! ```compile_fail,E0277
//! use handoff_core::InputRejection;
//!
//! fn check_mode() -> Result<(), InputRejection> {
//!     let refused: Result<(), String> = Err("--mode must be one of build, phase".into());
//!     refused?; // no `From<String> for InputRejection`: name the input
//!     Ok(())
//! }
//! ```

use std::ops::Deref;

/// A run's inputs refused by validation, before anything ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct InputRejection {
    /// The input at fault, as typed: a flag (`--caller-harness`, `--harness`, `--mode`,
    /// `--cwd`, `--instructions`, `--model`, `--effort`, `--max-turns`, `--bash`,
    /// `--web-search`, `--mcp-config`, `--max-depth`, `--max-nodes`, `--max-advice-nodes`,
    /// `--max-handoff-nodes`, `--max-concurrency`, `--root-timeout-ms`, `--timeout-ms`,
    /// `--dependency`, `--wait`), `verb` for the verb itself, or `config` for a value of the
    /// user's configuration.
    pub field: &'static str,
    /// The whole message, one line for a person.
    pub reason: String,
}

impl InputRejection {
    /// A rejection of `field`.
    pub fn new(field: &'static str, reason: impl Into<String>) -> InputRejection {
        InputRejection {
            field,
            reason: reason.into(),
        }
    }

    /// Turns a message about `field` into its rejection: `check(x).map_err(at("--cwd"))`.
    pub(crate) fn at(field: &'static str) -> impl Fn(String) -> InputRejection {
        move |reason| InputRejection { field, reason }
    }
}

/// A rejection reads as its message, like the text it replaced.
impl Deref for InputRejection {
    type Target = str;

    fn deref(&self) -> &str {
        &self.reason
    }
}
