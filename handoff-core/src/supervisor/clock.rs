//! Monotonic time for the supervisor, injectable so that deadlines can be tested.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where a [`DagStore`](super::DagStore) reads the monotonic time.
///
/// [`Clock::system`] is [`Instant::now`]. [`Clock::manual`] starts at a given instant and only
/// moves when [`Clock::advance`] is called; clones share the same time, so a test can keep one
/// clone and move the store's clock from outside.
#[derive(Clone)]
pub struct Clock(Source);

#[derive(Clone)]
enum Source {
    System,
    Manual {
        base: Instant,
        offset_ns: Arc<AtomicU64>,
    },
}

impl Clock {
    /// The system's monotonic clock.
    pub fn system() -> Clock {
        Clock(Source::System)
    }

    /// A clock frozen at `base` until it is advanced.
    pub fn manual(base: Instant) -> Clock {
        Clock(Source::Manual {
            base,
            offset_ns: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The current instant.
    pub fn now(&self) -> Instant {
        match &self.0 {
            Source::System => Instant::now(),
            Source::Manual { base, offset_ns } => {
                let offset = Duration::from_nanos(offset_ns.load(Ordering::SeqCst));
                base.checked_add(offset).unwrap_or(*base)
            }
        }
    }

    /// Moves a manual clock (and every clone of it) forward; does nothing to the system clock.
    pub fn advance(&self, by: Duration) {
        if let Source::Manual { offset_ns, .. } = &self.0 {
            let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
            let _ = offset_ns.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(by))
            });
        }
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Source::System => f.write_str("Clock::system"),
            Source::Manual { offset_ns, .. } => write!(
                f,
                "Clock::manual(+{}ms)",
                offset_ns.load(Ordering::SeqCst) / 1_000_000
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_clones_share_it() {
        let base = Instant::now();
        let clock = Clock::manual(base);
        let other = clock.clone();
        assert_eq!(clock.now(), base);
        other.advance(Duration::from_millis(1500));
        assert_eq!(clock.now(), base + Duration::from_millis(1500));
        assert!(format!("{clock:?}").contains("1500ms"));
    }

    #[test]
    fn the_system_clock_moves_forward() {
        let clock = Clock::system();
        let a = clock.now();
        clock.advance(Duration::from_secs(3600));
        assert!(clock.now() >= a);
        assert!(clock.now() < a + Duration::from_secs(3600));
    }
}
