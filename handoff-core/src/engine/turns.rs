//! A turn limit handoff enforces itself, for a CLI with none of its own
//! ([`Provider::turns_counted_by_handoff`]): the lines of its stream are counted as they arrive,
//! and the run is stopped (as a cancellation the engine then reads as the turn limit) when a
//! turn past the limit starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{mpsc, watch};

use crate::progress::ProgressEvent;
use crate::provider::Provider;

/// Whether the limit stopped the run, and not a cancellation from outside.
#[derive(Debug, Clone, Default)]
pub(super) struct Reached {
    limit: Arc<AtomicBool>,
    outside: Arc<AtomicBool>,
}

impl Reached {
    /// The run was stopped because a turn past the limit started (and nothing else asked).
    pub(super) fn reached(&self) -> bool {
        self.limit.load(Ordering::SeqCst) && !self.outside.load(Ordering::SeqCst)
    }
}

/// The stream tap and the cancellation a run with a counted turn limit is supervised with.
pub(super) struct TurnWatch {
    /// Where the supervisor sends each stdout line.
    pub tap: mpsc::UnboundedSender<Vec<u8>>,
    /// Set by a cancellation from outside or by the limit.
    pub cancel: watch::Receiver<bool>,
    /// Which of the two it was.
    pub reached: Reached,
}

/// How many turns `lines` start, by `provider`'s reading of them.
pub(super) fn turns_in(provider: &dyn Provider, line: &[u8]) -> usize {
    provider
        .progress(line)
        .iter()
        .filter(|e| matches!(e, ProgressEvent::Turn))
        .count()
}

impl TurnWatch {
    /// Counts the turns of the run's stream (each line also goes on to `next`, the progress
    /// tap, when there is one) and sets the returned cancellation when turn `limit + 1`
    /// starts, or when `outer` is set.
    pub(super) fn start(
        provider: &Arc<dyn Provider>,
        limit: u32,
        next: Option<mpsc::UnboundedSender<Vec<u8>>>,
        mut outer: watch::Receiver<bool>,
    ) -> TurnWatch {
        let (cancel_tx, cancel) = watch::channel(*outer.borrow());
        let cancel_tx = Arc::new(cancel_tx);
        let reached = Reached::default();
        if *outer.borrow() {
            reached.outside.store(true, Ordering::SeqCst);
        }
        {
            let cancel_tx = Arc::clone(&cancel_tx);
            let outside = Arc::clone(&reached.outside);
            tokio::spawn(async move {
                while outer.changed().await.is_ok() {
                    if *outer.borrow() {
                        outside.store(true, Ordering::SeqCst);
                        let _ = cancel_tx.send(true);
                        break;
                    }
                }
            });
        }
        let (tap, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let provider = Arc::clone(provider);
        let hit = Arc::clone(&reached.limit);
        tokio::spawn(async move {
            let mut turns: u64 = 0;
            while let Some(line) = rx.recv().await {
                turns = turns.saturating_add(turns_in(provider.as_ref(), &line) as u64);
                if turns > u64::from(limit) && !hit.swap(true, Ordering::SeqCst) {
                    let _ = cancel_tx.send(true);
                }
                if let Some(next) = &next {
                    let _ = next.send(line);
                }
            }
        });
        TurnWatch {
            tap,
            cancel,
            reached,
        }
    }
}

/// The message of a run stopped at its turn limit, as other agents report theirs.
pub(super) fn message(limit: u32) -> String {
    format!(
        "max_turns: Reached maximum number of turns ({limit}); handoff stopped the agent as \
         its next turn started"
    )
}
