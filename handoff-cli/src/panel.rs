//! `handoff advice|run --harness a,b:model …`: a panel. The command line is parsed here; the
//! panel runs in the library ([`handoff_core::Engine::panel`]).

use std::io::Write;

use handoff_core::{
    LoadedConfig, PanelOptions, PanelOutcome, PanelResult, PanelSpecError, RunInput, now_iso,
    parse_members,
};

/// Whether the command asks a panel: `--harness` lists several agents, or `--quorum` is given.
pub(crate) fn wanted(input: &RunInput, quorum: Option<&str>) -> bool {
    quorum.is_some() || input.harness.as_deref().is_some_and(|h| h.contains(','))
}

/// A whole number for `flag`, or its refusal.
fn number(flag: &'static str, value: Option<String>) -> Result<Option<usize>, PanelSpecError> {
    value
        .map(|v| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| PanelSpecError::NotANumber { flag, value: v })
        })
        .transpose()
}

/// Runs the panel and prints its one line; returns its exit code.
pub(crate) async fn main(
    mut input: RunInput,
    quorum: Option<String>,
    config: Result<LoadedConfig, String>,
    quiet: bool,
) -> u8 {
    let cancel = crate::cancel_on_signals();
    let config = match config {
        Ok(c) => c,
        Err(message) => return print(&refused(message)),
    };
    // On a terminal: a line per member while they work, then the merged findings.
    let live = crate::live::wanted(quiet).then(|| {
        crate::live::Live::start_panel(format!(
            "panel {}",
            input.mode.as_deref().unwrap_or("advice")
        ))
    });
    let (live, hook) = live.map_or((None, None), |(l, h)| (Some(l), Some(h)));
    let engine = crate::engine_with(Some(config), hook);
    // `--max-concurrency` bounds the panel's members, not each member's run.
    let concurrency = input.max_concurrency.take();
    let spec = parse_members(input.harness.as_deref().unwrap_or(""), engine.registry()).and_then(
        |members| {
            let options = PanelOptions {
                quorum: number("--quorum", quorum)?,
                max_concurrency: number("--max-concurrency", concurrency)?,
            };
            Ok((members, options))
        },
    );
    let outcome = match spec {
        Ok((members, options)) => engine.panel(members, input, options, cancel).await,
        Err(e) => refused(e.to_string()),
    };
    if let Some(live) = live {
        live.finish().await;
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "{}",
            handoff_core::summary::panel_summary(&outcome.result)
        );
    }
    print(&outcome)
}

fn refused(message: String) -> PanelOutcome {
    PanelOutcome::new(PanelResult::refused(message, &now_iso()))
}

fn print(outcome: &PanelOutcome) -> u8 {
    crate::emit(&outcome.line, outcome.result.message.as_deref(), "");
    outcome.exit_code
}
