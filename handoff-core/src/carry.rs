//! Carrying a conversation to a continuation's receiver, and checking that it continued.
//!
//! The source session is found in the sending CLI's store and read
//! ([`crate::Sessions::find_session`], [`crate::Sessions::read_transcript`]); the receiver gets a
//! new session in its own store: a native copy when it is the same CLI
//! ([`crate::Sessions::copy_session`], or the CLI's own fork), else one written from the neutral
//! transcript ([`crate::Sessions::write_session`]). The source is never written to. After the
//! receiver's first turn, its store says whether it resumed the carried session
//! ([`resumed_after`]); where there is no store to read, its answer to [`PROBE_QUESTION`] is
//! compared with the note ([`compare_probe`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use camino::{Utf8Path, Utf8PathBuf};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::names::AgentId;
use crate::transcript::{Message, Part, Transcript};

/// The question asked of a receiver whose store can't be read.
pub const PROBE_QUESTION: &str = "What were you last working on? Answer in one or two sentences.";

/// Where a CLI keeps its sessions: the environment it runs with (`HOME`, `XDG_*`,
/// `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, an account's variables), its executable for CLIs whose
/// store is reached through the CLI itself, and a private scratch directory for exports.
#[derive(Debug, Clone, Default)]
pub struct StoreEnv {
    /// The variables, as the CLI would see them.
    pub vars: BTreeMap<String, String>,
    /// The CLI's executable, when known.
    pub executable: Option<Utf8PathBuf>,
    /// A private directory (0700) that readers may export into; never the CLI's store.
    pub scratch: Option<Utf8PathBuf>,
}

impl StoreEnv {
    /// A variable's value, when set and not empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// `$HOME`, when set.
    pub fn home(&self) -> Option<Utf8PathBuf> {
        self.var("HOME").map(Utf8PathBuf::from)
    }
}

/// Which session to find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionQuery {
    /// The session with this id.
    Id(String),
    /// The most recently written session that ran in this directory.
    Latest {
        /// The directory (absolute, symlinks resolved).
        cwd: Utf8PathBuf,
    },
}

/// A session found in a CLI's store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionRef {
    /// The CLI.
    pub provider: AgentId,
    /// Its id.
    pub session_id: String,
    /// The file [`crate::Sessions::read_transcript`] reads (for CLIs with a database: an export
    /// in the scratch directory).
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// The directory it ran in, when recorded.
    #[schemars(with = "Option<String>")]
    pub cwd: Option<Utf8PathBuf>,
}

/// Where a carried session goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarryTarget {
    /// The new session's id: a fresh lowercase hyphenated UUID (CLIs that make their own ids
    /// report theirs).
    pub session_id: String,
    /// The directory the receiver resumes it from; every recorded cwd is re-rooted here.
    pub cwd: Utf8PathBuf,
    /// The receiver's model, when chosen (recorded where the CLI keeps one per session).
    pub model: Option<String>,
    /// Plan only: say which files would be written and how big, write nothing.
    pub dry_run: bool,
}

/// A session written (or, in a dry run, planned) into a receiver's store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarriedSession {
    /// The id the receiver resumes.
    pub session_id: String,
    /// The files written (or that would be).
    pub files: Vec<Utf8PathBuf>,
    /// Their size in bytes.
    pub bytes: u64,
}

/// How a receiver's first turn picks up a carried session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeFrom {
    /// The session to resume.
    pub session_id: String,
    /// Fork it with the CLI's own switch (`--fork-session`, `--fork`) into
    /// [`crate::ReceiverRequest::session_id`] where the CLI accepts a chosen id, leaving the
    /// resumed one untouched; `false` resumes it in place (a carried copy handoff wrote).
    pub fork: bool,
}

/// A source session's bytes as they were read: the receiver may append to a session, never
/// change what it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceSnapshot {
    /// The file.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// Its length when read.
    pub bytes: u64,
    /// `sha256:<hex>` of those bytes.
    pub digest: String,
}

impl SourceSnapshot {
    /// Takes a snapshot of `path` as it is now.
    pub fn take(path: &Utf8Path) -> std::io::Result<SourceSnapshot> {
        let mut file = std::fs::File::open(path)?;
        let mut hasher = Sha256::new();
        let bytes = std::io::copy(&mut file, &mut hasher)?;
        Ok(SourceSnapshot {
            path: path.to_owned(),
            bytes,
            digest: format!("sha256:{:x}", hasher.finalize()),
        })
    }

    /// Whether the file still starts with exactly the bytes it held (it may have grown).
    pub fn still_prefix(&self) -> std::io::Result<bool> {
        let file = std::fs::File::open(&self.path)?;
        let mut hasher = Sha256::new();
        let read = std::io::copy(&mut file.take(self.bytes), &mut hasher)?;
        Ok(read == self.bytes && format!("sha256:{:x}", hasher.finalize()) == self.digest)
    }
}

/// Two messages say the same thing: same role and parts (times, ids and models may differ
/// between a CLI's copy and its source).
pub fn same_message(a: &Message, b: &Message) -> bool {
    a.role == b.role && a.parts == b.parts
}

/// What a receiver's store shows after its turn, against the carried session as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resumption {
    /// The carried messages are all there, unchanged, followed by a new prompt and an answer.
    Continued,
    /// The carried messages are there but nothing was written after them.
    NothingAfter,
    /// The session no longer starts with the carried messages (a different or rewritten one).
    Diverged,
}

/// Compares the receiver's session `now` with `carried`, the same session read back right
/// after it was carried.
pub fn resumed_after(carried: &Transcript, now: &Transcript) -> Resumption {
    let n = carried.messages.len();
    if now.messages.len() < n
        || !carried
            .messages
            .iter()
            .zip(&now.messages)
            .all(|(a, b)| same_message(a, b))
    {
        return Resumption::Diverged;
    }
    let after = &now.messages[n..];
    let asked = after
        .iter()
        .any(|m| m.role == crate::transcript::Role::User);
    let answered = after
        .iter()
        .any(|m| m.role == crate::transcript::Role::Assistant && has_text(m));
    if asked && answered {
        Resumption::Continued
    } else {
        Resumption::NothingAfter
    }
}

fn has_text(m: &Message) -> bool {
    m.parts.iter().any(|p| match p {
        Part::Text { text } => !text.trim().is_empty(),
        Part::ToolCall { .. } => true,
        _ => false,
    })
}

/// How a probe answer compares with the note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProbeComparison {
    /// Whether the answer is about what the note says is current and next.
    pub matched: bool,
    /// Share of the answer's content words found in the note's Current state and Next steps,
    /// 0 to 1.
    pub score: f64,
    /// The shared content words, up to 12.
    pub shared: Vec<String>,
}

/// The least share of content words for a match.
pub const PROBE_MATCH_SCORE: f64 = 0.3;

/// Compares the receiver's `answer` to the probe with the note's `reference` text (its
/// Current state and Next steps): deterministic, by shared content words (lowercased, four
/// letters or more, common words left out). A match needs [`PROBE_MATCH_SCORE`] of the
/// answer's words and at least two of them.
pub fn compare_probe(answer: &str, reference: &str) -> ProbeComparison {
    let said = content_words(answer);
    let known = content_words(reference);
    if said.is_empty() {
        return ProbeComparison {
            matched: false,
            score: 0.0,
            shared: Vec::new(),
        };
    }
    let shared: Vec<String> = said.intersection(&known).cloned().collect();
    let score = shared.len() as f64 / said.len() as f64;
    let score = (score * 1000.0).round() / 1000.0;
    ProbeComparison {
        matched: shared.len() >= 2 && score >= PROBE_MATCH_SCORE,
        score,
        shared: shared.into_iter().take(12).collect(),
    }
}

const STOP_WORDS: &[&str] = &[
    "about",
    "after",
    "again",
    "also",
    "been",
    "before",
    "being",
    "both",
    "could",
    "does",
    "doing",
    "done",
    "each",
    "from",
    "have",
    "having",
    "here",
    "into",
    "just",
    "last",
    "made",
    "make",
    "more",
    "most",
    "next",
    "only",
    "other",
    "over",
    "same",
    "should",
    "some",
    "still",
    "such",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "under",
    "until",
    "very",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "will",
    "with",
    "work",
    "working",
    "would",
    "your",
    "currently",
    "sentence",
    "sentences",
    "answer",
];

fn content_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 4 && !STOP_WORDS.contains(&w.as_str()))
        .map(|w| w.trim_end_matches('s').to_owned())
        .filter(|w| w.chars().count() >= 4)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Role, TRANSCRIPT_SCHEMA, TranscriptSource};
    use proptest::prelude::*;

    fn msg(role: Role, text: &str) -> Message {
        Message {
            role,
            provider: AgentId::parse("claude").unwrap(),
            model: None,
            at: None,
            source_id: None,
            parts: vec![Part::Text { text: text.into() }],
        }
    }

    fn transcript(messages: Vec<Message>) -> Transcript {
        Transcript {
            schema_version: TRANSCRIPT_SCHEMA.into(),
            source: TranscriptSource {
                provider: AgentId::parse("claude").unwrap(),
                session_id: "s".into(),
                path: "/s.jsonl".into(),
                cwd: None,
            },
            messages,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn a_resumed_session_holds_the_carried_messages_then_a_new_turn() {
        let carried = transcript(vec![
            msg(Role::User, "fix it"),
            msg(Role::Assistant, "done"),
        ]);
        let mut now = carried.clone();
        assert_eq!(resumed_after(&carried, &now), Resumption::NothingAfter);
        now.messages.push(msg(Role::User, "continue"));
        assert_eq!(resumed_after(&carried, &now), Resumption::NothingAfter);
        now.messages
            .push(msg(Role::Assistant, "continuing with step 2"));
        assert_eq!(resumed_after(&carried, &now), Resumption::Continued);
        now.messages[1] = msg(Role::Assistant, "rewritten");
        assert_eq!(resumed_after(&carried, &now), Resumption::Diverged);
        assert_eq!(
            resumed_after(&carried, &transcript(vec![msg(Role::User, "fix it")])),
            Resumption::Diverged
        );
    }

    #[test]
    fn probe_answers_are_compared_by_content_words() {
        let note = "The parser handles quoted fields; escaped quotes still fail. \
                    Next: fix escaped quotes in csv_split, then run cargo test.";
        let yes = compare_probe(
            "I was fixing escaped quotes in the csv_split parser so cargo test passes.",
            note,
        );
        assert!(yes.matched, "{yes:?}");
        let no = compare_probe("I was writing a poem about the weather in Paris.", note);
        assert!(!no.matched, "{no:?}");
        assert!(!compare_probe("", note).matched);
        assert!(
            !compare_probe("quotes", note).matched,
            "one word is not enough"
        );
    }

    #[test]
    fn snapshots_see_rewrites_but_allow_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(dir.path().join("s.jsonl")).unwrap();
        std::fs::write(&path, b"line one\nline two\n").unwrap();
        let snap = SourceSnapshot::take(&path).unwrap();
        assert_eq!(snap.bytes, 18);
        assert!(snap.still_prefix().unwrap());
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"line three\n").unwrap();
        assert!(snap.still_prefix().unwrap(), "growing is allowed");
        std::fs::write(&path, b"line ONE\nline two\nline three\n").unwrap();
        assert!(!snap.still_prefix().unwrap(), "an edit is seen");
        std::fs::write(&path, b"line").unwrap();
        assert!(!snap.still_prefix().unwrap(), "a truncation is seen");
    }

    proptest! {
        #[test]
        fn probe_comparison_is_total_and_bounded(a in ".{0,300}", b in ".{0,300}") {
            let c = compare_probe(&a, &b);
            prop_assert!((0.0..=1.0).contains(&c.score));
            prop_assert!(c.shared.len() <= 12);
            // An answer always matches a reference that repeats it, when it has enough words.
            let same = compare_probe(&a, &a);
            if content_words(&a).len() >= 2 {
                prop_assert!(same.matched);
            }
        }
    }
}
