//! The live status line on a terminal: agent, what it runs, elapsed time, turns and its last
//! event, redrawn on stderr while it runs and cleared when it ends; then a short human summary.
//! Off a terminal, or with `--quiet`, nothing is drawn and stderr carries only diagnostics.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use handoff_core::{HandoffResult, ProgressHook, ProgressUpdate, Severity, Status};
use tokio::sync::watch;

/// How often the line is redrawn when nothing happens (the elapsed time moves).
const TICK: Duration = Duration::from_millis(500);
/// The line's width when the terminal does not tell (or tells something too narrow to use).
const FALLBACK_WIDTH: usize = 80;
/// The narrowest terminal width taken as real.
const MIN_WIDTH: usize = 20;

/// Whether to draw: stderr is a terminal and the user did not ask for quiet.
pub fn wanted(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

#[derive(Debug, Default)]
struct State {
    agent: Option<String>,
    label: Option<String>,
    turns: u32,
    last: Option<String>,
    nested: Vec<String>,
}

/// A status line being drawn.
pub struct Live {
    state: Arc<Mutex<State>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Live {
    /// Starts drawing `title` (e.g. `codex build`) and returns the hook that feeds the line.
    pub fn start(title: String) -> (Live, ProgressHook) {
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, mut stopped) = watch::channel(false);
        let (changed_tx, mut changed) = watch::channel(());
        let started = Instant::now();
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            loop {
                draw(&title, started, &shared);
                tokio::select! {
                    () = tokio::time::sleep(TICK) => {}
                    _ = changed.changed() => {}
                    _ = stopped.changed() => break,
                }
                if *stopped.borrow() {
                    break;
                }
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        });
        let sink_state = Arc::clone(&state);
        let hook = ProgressHook(Arc::new(move |u: ProgressUpdate| {
            let mut s = sink_state.lock().unwrap_or_else(PoisonError::into_inner);
            if u.root {
                s.agent = Some(u.agent.to_string());
                s.label = Some(u.label.clone());
                if u.event == handoff_core::ProgressEvent::Turn {
                    s.turns += 1;
                } else {
                    s.last = Some(u.event.to_string());
                }
            } else {
                let who = format!("{} {}", u.agent, u.label);
                if !s.nested.contains(&who) {
                    s.nested.push(who.clone());
                }
                s.last = Some(format!("{who} → {}", u.event));
            }
            drop(s);
            let _ = changed_tx.send(());
        }));
        (Live { state, stop, task }, hook)
    }

    /// Clears the line.
    pub async fn finish(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        drop(self.state);
    }
}

fn draw(title: &str, started: Instant, state: &Mutex<State>) {
    let s = state.lock().unwrap_or_else(PoisonError::into_inner);
    let mut line = format!("handoff: {title} · {}s", started.elapsed().as_secs());
    if s.turns > 0 {
        line.push_str(&format!(" · turn {}", s.turns));
    }
    if !s.nested.is_empty() {
        line.push_str(&format!(" · {} adviser(s)", s.nested.len()));
    }
    if let Some(last) = &s.last {
        line.push_str(" · ");
        line.push_str(last);
    }
    drop(s);
    let columns = rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|size| size.ws_col);
    let line: String = line.chars().take(line_width(columns) - 1).collect();
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K{line}");
    let _ = err.flush();
}

/// How wide the line may be on a terminal of `columns` (as stderr's terminal reports them).
fn line_width(columns: Option<u16>) -> usize {
    columns
        .map(usize::from)
        .filter(|w| *w >= MIN_WIDTH)
        .unwrap_or(FALLBACK_WIDTH)
}

/// The human summary of a finished run: status, what ran, changed files, findings by severity,
/// usage and cost, duration.
pub fn summary(r: &HandoffResult) -> String {
    let mut parts = vec![
        r.status.as_str().to_owned(),
        format!(
            "{} {}",
            r.target.harness.as_ref().map_or("?", |h| h.as_str()),
            r.mode.map_or("advice", |m| m.as_str())
        ),
    ];
    if let Some(git) = &r.git {
        let files = &git.changed_files;
        parts.push(match files.len() {
            0 => "no changed files".to_owned(),
            n => {
                let shown: Vec<&str> = files.iter().take(3).map(String::as_str).collect();
                let more = if n > 3 {
                    format!(", +{}", n - 3)
                } else {
                    String::new()
                };
                format!("{n} changed file(s): {}{more}", shown.join(", "))
            }
        });
    }
    let findings = &r.output.findings;
    if !findings.is_empty() {
        let mut counts = Vec::new();
        for (sev, name) in [
            (Severity::Blocker, "blocker"),
            (Severity::High, "high"),
            (Severity::Medium, "medium"),
            (Severity::Low, "low"),
            (Severity::Nit, "nit"),
        ] {
            let n = findings.iter().filter(|f| f.severity == sev).count();
            if n > 0 {
                counts.push(format!("{n} {name}"));
            }
        }
        parts.push(format!("findings: {}", counts.join(", ")));
    }
    if let Some(total) = r.usage.total_tokens {
        parts.push(format!("{total} tokens"));
    }
    if let Some(cost) = r.usage.cost_usd {
        parts.push(format!("${cost:.4}"));
    }
    parts.push(format!("{:.1} s", r.timing.duration_ms as f64 / 1000.0));
    let mut line = parts.join(" · ");
    if r.status != Status::Succeeded
        && let Some(m) = &r.diagnostics.message
    {
        line.push_str(&format!("\n  {m}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_width_is_the_terminals_unless_it_is_unknown_or_too_narrow() {
        for (columns, width) in [
            (Some(200), 200),
            (Some(20), 20),
            (Some(19), FALLBACK_WIDTH),
            (Some(0), FALLBACK_WIDTH),
            (None, FALLBACK_WIDTH),
        ] {
            assert_eq!(line_width(columns), width, "{columns:?}");
        }
    }
}
