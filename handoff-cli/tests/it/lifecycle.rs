//! Timeouts, cancellation, secrets, preflight cache.
