//! A parallel map over a slice on scoped threads.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use handoff_core::WorkspaceError;

/// Items are handed to threads in batches of this size.
const BATCH: usize = 16;

/// The number of threads to use when none is configured.
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `f` applied to every item on up to `threads` threads, results in item order; the first error
/// stops the work. `f` gets a scratch buffer that is reused within a thread.
pub(crate) fn map<T, R, F>(items: &[T], threads: usize, f: F) -> Result<Vec<R>, WorkspaceError>
where
    T: Sync,
    R: Send,
    F: Fn(&T, &mut Vec<u8>) -> Result<R, WorkspaceError> + Sync,
{
    let threads = threads.clamp(1, items.len().div_ceil(BATCH).max(1));
    if threads == 1 {
        let mut buf = Vec::new();
        return items.iter().map(|item| f(item, &mut buf)).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let work = || -> Result<Vec<(usize, R)>, WorkspaceError> {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let start = next.fetch_add(BATCH, Ordering::Relaxed);
            if start >= items.len() || failed.load(Ordering::Relaxed) {
                return Ok(out);
            }
            for (offset, item) in items[start..].iter().take(BATCH).enumerate() {
                match f(item, &mut buf) {
                    Ok(result) => out.push((start + offset, result)),
                    Err(err) => {
                        failed.store(true, Ordering::Relaxed);
                        return Err(err);
                    }
                }
            }
        }
    };
    let parts = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(WorkspaceError::Git {
                        message: "a fingerprint thread panicked".to_owned(),
                    })
                })
            })
            .collect::<Vec<_>>()
    });
    let mut all = Vec::with_capacity(items.len());
    for part in parts {
        all.extend(part?);
    }
    all.sort_unstable_by_key(|(index, _)| *index);
    Ok(all.into_iter().map(|(_, result)| result).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_item_order() {
        let items: Vec<usize> = (0..1000).collect();
        let out = map(&items, 4, |i, _| Ok(i * 2)).unwrap();
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
    }

    #[test]
    fn the_first_error_is_returned() {
        let items: Vec<usize> = (0..1000).collect();
        let err = map(&items, 4, |i, _| {
            if *i == 500 {
                Err(WorkspaceError::Git {
                    message: "boom".into(),
                })
            } else {
                Ok(*i)
            }
        })
        .unwrap_err();
        assert!(err.to_string().contains("boom"));
    }
}
