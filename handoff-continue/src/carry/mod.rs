//! The conversation part of `handoff continue`: finding the source session, carrying it into
//! the receiver's store, the recap sent with the note, and the continuity check.
//!
//! The source session is only ever read. Same CLI and same directory: the CLI's own fork
//! (`native-fork`); same CLI elsewhere: a lossless copy under a new id, re-rooted
//! (`native-copy`); another CLI: written into its store from the neutral transcript, secrets
//! masked (`converted`). After the receiver's turn, its own store says whether it resumed the
//! carried session and wrote a turn after it; where there is none to read, its answer to the
//! probe question is compared with the note.

mod continuity;
mod earlier;
mod recap;
mod route;
mod source;

use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, CarriedSession, CarryMode, CarrySource, CarryTarget, ContinueCarry, ContinueRecap,
    Continuity, ContinuityChecks, ContinuityProbe, ContinuityResult, Engine, HandoffRow,
    PROBE_QUESTION, Part, PreparedReceiver, ResumeFrom, Resumption, SessionQuery, SessionRef,
    SourceSnapshot, TimelineEvent, Transcript, TranscriptError, compare_probe, recap, redact,
    resumed_after, same_message,
};

/// The recap sent with the note is at most this big.
pub const RECAP_LIMIT: usize = 24 * 1024;
/// Carried turns listed in the timeline, newest last.
const LISTED_TURNS: usize = 100;
/// Longest summary of a carried turn in the timeline.
const TURN_SUMMARY_CHARS: usize = 160;

pub use continuity::*;
pub use earlier::*;
pub use recap::*;
pub use route::*;
pub use source::*;
