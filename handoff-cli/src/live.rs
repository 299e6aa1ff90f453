//! The live status line on a terminal: agent, what it runs, elapsed time, turns and its last
//! event, redrawn on stderr while it runs and cleared when it ends; then a short human summary.
//! Off a terminal, or with `--quiet`, nothing is drawn and stderr carries only diagnostics.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use handoff_core::{ProgressHook, ProgressUpdate, printable};
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
    /// A panel's members, in the order their first event came: one line each.
    members: Vec<Member>,
    /// Whether this is a panel (a line per member under the title).
    panel: bool,
    /// How many lines the last draw took.
    drawn: usize,
}

/// A panel member's line.
#[derive(Debug, Default)]
struct Member {
    run_id: String,
    agent: String,
    turns: u32,
    last: Option<String>,
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
        Live::begin(title, State::default())
    }

    /// Starts drawing a panel: `title`, then one line per member as its events come.
    pub fn start_panel(title: String) -> (Live, ProgressHook) {
        Live::begin(
            title,
            State {
                panel: true,
                ..State::default()
            },
        )
    }

    fn begin(title: String, state: State) -> (Live, ProgressHook) {
        let state = Arc::new(Mutex::new(state));
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
            let drawn = shared.lock().unwrap_or_else(PoisonError::into_inner).drawn;
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{}", clear(drawn));
            let _ = err.flush();
        });
        let sink_state = Arc::clone(&state);
        let hook = ProgressHook(Arc::new(move |u: ProgressUpdate| {
            let mut s = sink_state.lock().unwrap_or_else(PoisonError::into_inner);
            if s.panel && u.root {
                let at = match s.members.iter().position(|m| m.run_id == u.run_id) {
                    Some(at) => at,
                    None => {
                        s.members.push(Member {
                            run_id: u.run_id.clone(),
                            agent: u.agent.to_string(),
                            ..Member::default()
                        });
                        s.members.len() - 1
                    }
                };
                let m = &mut s.members[at];
                if u.event == handoff_core::ProgressEvent::Turn {
                    m.turns += 1;
                } else {
                    m.last = Some(u.event.to_string());
                }
            } else if u.root {
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

/// What erases the `drawn` lines of the last draw, leaving the cursor where they began.
fn clear(drawn: usize) -> String {
    let mut out = String::from("\r\x1b[2K");
    for _ in 1..drawn {
        out.push_str("\x1b[1A\r\x1b[2K");
    }
    out
}

/// A panel's lines: the title with the time and how many members have spoken, then one line
/// per member, each cut to `width`.
fn panel_lines(title: &str, elapsed: Duration, members: &[Member], width: usize) -> Vec<String> {
    let mut lines = vec![format!(
        "handoff: {title} · {}s · {} member(s) working",
        elapsed.as_secs(),
        members.len()
    )];
    for m in members {
        let mut line = format!("  {}", m.agent);
        if m.turns > 0 {
            line.push_str(&format!(" · turn {}", m.turns));
        }
        if let Some(last) = &m.last {
            line.push_str(" · ");
            line.push_str(last);
        }
        lines.push(line);
    }
    lines
        .into_iter()
        .map(|l| l.chars().take(width.saturating_sub(1)).collect())
        .collect()
}

fn draw(title: &str, started: Instant, state: &Mutex<State>) {
    let columns = rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|size| size.ws_col);
    let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
    if s.panel {
        let lines = panel_lines(title, started.elapsed(), &s.members, line_width(columns));
        let erase = clear(s.drawn);
        s.drawn = lines.len();
        drop(s);
        let mut err = std::io::stderr().lock();
        let shown: Vec<_> = lines.iter().map(|l| printable(l, false)).collect();
        let _ = write!(err, "{erase}{}", shown.join("\n"));
        let _ = err.flush();
        return;
    }
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
    s.drawn = 1;
    drop(s);
    let line: String = printable(&line, false)
        .chars()
        .take(line_width(columns) - 1)
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_draws_a_line_per_member_within_the_width() {
        let members = vec![
            Member {
                run_id: "r1".into(),
                agent: "codex".into(),
                turns: 2,
                last: Some("Bash: cargo test".into()),
            },
            Member {
                run_id: "r2".into(),
                agent: "claude".into(),
                turns: 0,
                last: None,
            },
        ];
        let lines = panel_lines("panel advice", Duration::from_secs(7), &members, 30);
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].starts_with("handoff: panel advice · 7s"),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("  codex · turn 2 · Bash"), "{lines:?}");
        assert_eq!(lines[2], "  claude");
        assert!(lines.iter().all(|l| l.chars().count() < 30), "{lines:?}");
        assert_eq!(clear(3), "\r\x1b[2K\x1b[1A\r\x1b[2K\x1b[1A\r\x1b[2K");
    }

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
