//! handoff-remote: runs and advice on other machines.
//!
//! A run with `--on NAME` (a `[hosts.NAME]` of the configuration, or an ssh destination with
//! an optional directory) happens wholly on that host: ssh for control, git for the code, and
//! the host's own `handoff` doing the work there, with its fingerprints, sandbox, reaper and
//! result. No control plane of our own: only `handoff __host` answering one request per ssh
//! connection ([`protocol`]).
//!
//! * [`run_on_host`] — this machine's side: the request checked here, the task's commit (and
//!   uncommitted work as a commit on it, no branch moved) pushed to the host's repository of
//!   the project, the run started there as a background job and waited for, a signal here
//!   stopping it there, a writing run's change fetched back, applied here and proven by a
//!   fingerprint here; a host that stops answering ends the run `failed` with cause
//!   `host_lost`.
//! * [`serve`] — the host's side.
//! * [`leftovers`] — what runs left on hosts that could not be removed at once.
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod code;
mod host;
mod link;
mod pending;
pub mod protocol;
mod run;

pub use host::{HostSide, serve};
pub use link::host_capabilities;
pub use pending::{Leftover, leftovers};
pub use run::{RemoteContext, run_on_host};
