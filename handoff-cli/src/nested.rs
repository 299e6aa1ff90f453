//! `handoff advice` inside a worker: the engine asks the root's supervisor; its answer is
//! printed here.

use std::io::Write;

use handoff_core::RunInput;

/// Runs one nested request; returns the exit code.
pub async fn main(input: RunInput, context: &str) -> u8 {
    let advice = crate::engine(None).advise_worker(input, context).await;
    if let Some(e) = &advice.result_file_error {
        let _ = writeln!(std::io::stderr(), "handoff: {e}");
    }
    crate::emit(&advice.line, advice.message.as_deref(), "");
    advice.exit_code
}
