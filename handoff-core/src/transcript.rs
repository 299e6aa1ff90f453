//! The neutral transcript: a conversation read from one agent CLI's session store, in a form any
//! other agent can be given, and the bounded recap made from it.
//!
//! Messages keep their role, the provider and model that wrote them, their time and source id.
//! Tool calls and results are kept as bounded, tagged text — not replayed structurally — and only
//! reasoning a CLI showed the user (summaries) is kept; hidden reasoning never transfers. Readers
//! live in the adapters ([`crate::Sessions::read_transcript`]); they never write to the source.

use camino::Utf8PathBuf;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::AgentId;
use crate::redact::redact;

/// The schema version of a serialized [`Transcript`].
pub const TRANSCRIPT_SCHEMA: &str = "handoff.transcript.v1";

/// Longest tool input or output kept in a transcript, in bytes (cut on a character boundary).
pub const MAX_TOOL_TEXT_BYTES: usize = 4 * 1024;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The person (or the program driving the agent).
    User,
    /// The agent.
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Part {
    /// Text as written.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call, its input as bounded text.
    ToolCall {
        /// The tool's name.
        name: String,
        /// The call's id in the source, to pair it with its result.
        id: Option<String>,
        /// The input, as the CLI recorded it, cut to [`MAX_TOOL_TEXT_BYTES`].
        input: String,
    },
    /// A tool's result, as bounded text.
    ToolResult {
        /// The id of the call it answers.
        id: Option<String>,
        /// The output, cut to [`MAX_TOOL_TEXT_BYTES`].
        output: String,
        /// Whether the tool reported an error.
        is_error: bool,
    },
    /// A reasoning summary the CLI showed the user. Hidden reasoning is never read.
    Reasoning {
        /// The summary.
        text: String,
    },
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The provider whose session it comes from.
    pub provider: AgentId,
    /// The model that wrote it (assistant messages), when recorded.
    pub model: Option<String>,
    /// When, ISO-8601, when recorded.
    pub at: Option<String>,
    /// Its id in the source session, when it has one.
    pub source_id: Option<String>,
    /// Its parts, in order.
    pub parts: Vec<Part>,
}

/// Where a transcript was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscriptSource {
    /// The CLI that wrote the session.
    pub provider: AgentId,
    /// The session's id.
    pub session_id: String,
    /// The file (or database) it was read from.
    #[schemars(with = "String")]
    pub path: Utf8PathBuf,
    /// The working directory the session ran in, when recorded.
    #[schemars(with = "Option<String>")]
    pub cwd: Option<Utf8PathBuf>,
}

/// A conversation in neutral form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Transcript {
    /// `handoff.transcript.v1`.
    pub schema_version: String,
    /// Where it was read from.
    pub source: TranscriptSource,
    /// The messages, oldest first (the active branch only).
    pub messages: Vec<Message>,
    /// What the reader skipped or could not read (a truncated last line, unknown records).
    pub warnings: Vec<String>,
}

/// Why a transcript could not be read at all. A partly readable one is read, with warnings.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// This CLI's sessions can't be read.
    #[error("{0}")]
    Unsupported(String),
    /// The session file could not be opened or read.
    #[error("cannot read the session '{path}': {message}")]
    Io {
        /// The file.
        path: Utf8PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Nothing in it could be read as this CLI's session.
    #[error("'{path}' is not a readable session: {message}")]
    Malformed {
        /// The file.
        path: Utf8PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// `text` cut to at most `max` bytes on a character boundary, with a note of how much was cut.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes]", &text[..end], text.len() - end)
}

/// A recap of a transcript: bounded text for a receiver, with what it left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recap {
    /// The text (Markdown), at most the limit it was made with.
    pub text: String,
    /// Messages given whole.
    pub whole: u64,
    /// Older messages given by extraction (their first line, tool names).
    pub extracted: u64,
    /// Oldest messages left out for room.
    pub omitted: u64,
    /// Secrets masked in the text.
    pub redactions: u64,
}

fn render_whole(m: &Message) -> String {
    let who = match (m.role, &m.model) {
        (Role::User, _) => "user".to_owned(),
        (Role::Assistant, Some(model)) => format!("{} ({model})", m.provider),
        (Role::Assistant, None) => m.provider.to_string(),
    };
    let mut out = format!("### {who}\n");
    for p in &m.parts {
        match p {
            Part::Text { text } => {
                out.push_str(text.trim_end());
                out.push('\n');
            }
            Part::ToolCall { name, input, .. } => {
                out.push_str(&format!("[tool call {name}] {}\n", one_line(input, 300)));
            }
            Part::ToolResult {
                output, is_error, ..
            } => {
                let tag = if *is_error {
                    "tool error"
                } else {
                    "tool result"
                };
                out.push_str(&format!("[{tag}] {}\n", one_line(output, 300)));
            }
            Part::Reasoning { text } => {
                out.push_str(&format!("[reasoning summary] {}\n", one_line(text, 300)));
            }
        }
    }
    out
}

fn render_extract(m: &Message) -> String {
    let who = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let text = m
        .parts
        .iter()
        .find_map(|p| match p {
            Part::Text { text } => Some(one_line(text, 160)),
            _ => None,
        })
        .unwrap_or_default();
    let tools: Vec<&str> = m
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let mut line = format!("- {who}: {text}");
    if !tools.is_empty() {
        line.push_str(&format!(" [tools: {}]", tools.join(", ")));
    }
    line.push('\n');
    line
}

fn one_line(text: &str, max_chars: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max_chars {
        joined
    } else {
        let mut cut: String = joined.chars().take(max_chars - 1).collect();
        cut.push('…');
        cut
    }
}

/// A recap of `transcript` in at most `limit` bytes: the newest messages whole (as many as fit
/// in three quarters of the limit), older ones by extraction (newest first, as room allows),
/// the oldest left out. Made by extraction only, never by a model. Secrets (`known` values and
/// the usual key and token shapes) are masked and counted.
pub fn recap(transcript: &Transcript, limit: usize, known: &[String]) -> Recap {
    let header = format!(
        "## Conversation so far ({} session {})\n\n",
        transcript.source.provider, transcript.source.session_id
    );
    let budget = limit.saturating_sub(header.len());
    let rendered: Vec<(String, String)> = transcript
        .messages
        .iter()
        .map(|m| (render_whole(m), render_extract(m)))
        .collect();
    let n = rendered.len();
    // Newest messages whole, within three quarters of the budget.
    let mut whole_from = n;
    let mut used = 0;
    while whole_from > 0 {
        let len = rendered[whole_from - 1].0.len() + 1;
        if used + len > budget * 3 / 4 {
            break;
        }
        used += len;
        whole_from -= 1;
    }
    // Older ones extracted, newest first, while they fit.
    let omitted_marker = 64;
    let mut extract_from = whole_from;
    while extract_from > 0 {
        let len = rendered[extract_from - 1].1.len();
        if used + len + omitted_marker > budget {
            break;
        }
        used += len;
        extract_from -= 1;
    }
    let mut text = header;
    if extract_from > 0 {
        text.push_str(&format!("({extract_from} earlier message(s) left out)\n"));
    }
    for (_, extract) in &rendered[extract_from..whole_from] {
        text.push_str(extract);
    }
    if extract_from < whole_from && whole_from < n {
        text.push('\n');
    }
    for (whole, _) in &rendered[whole_from..] {
        text.push_str(whole);
        text.push('\n');
    }
    let (text, redactions) = redact(&text, known);
    // A mask can be longer than a short secret: cut to the limit to be sure.
    let text = if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_owned()
    } else {
        text
    };
    Recap {
        text,
        whole: (n - whole_from) as u64,
        extracted: (whole_from - extract_from) as u64,
        omitted: extract_from as u64,
        redactions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message(role: Role, text: &str) -> Message {
        Message {
            role,
            provider: AgentId::CLAUDE,
            model: (role == Role::Assistant).then(|| "opus".to_owned()),
            at: None,
            source_id: None,
            parts: vec![Part::Text {
                text: text.to_owned(),
            }],
        }
    }

    fn transcript(messages: Vec<Message>) -> Transcript {
        Transcript {
            schema_version: TRANSCRIPT_SCHEMA.into(),
            source: TranscriptSource {
                provider: AgentId::CLAUDE,
                session_id: "s-1".into(),
                path: "/s.jsonl".into(),
                cwd: None,
            },
            messages,
            warnings: vec![],
        }
    }

    #[test]
    fn bounded_cuts_on_a_character_boundary() {
        assert_eq!(bounded("abc", 5), "abc");
        let cut = bounded("ééé", 3);
        assert!(
            cut.starts_with('é') && cut.ends_with("[4 more bytes]"),
            "{cut}"
        );
    }

    #[test]
    fn newest_whole_older_extracted_oldest_left_out() {
        let mut messages = Vec::new();
        for i in 0..200 {
            messages.push(message(
                Role::User,
                &format!("question {i}\nwith detail {}", "x".repeat(200)),
            ));
            messages.push(message(
                Role::Assistant,
                &format!("answer {i} {}", "y".repeat(300)),
            ));
        }
        let r = recap(&transcript(messages), 8 * 1024, &[]);
        assert!(r.text.len() <= 8 * 1024);
        assert!(r.whole > 0 && r.extracted > 0 && r.omitted > 0, "{r:?}");
        assert_eq!(r.whole + r.extracted + r.omitted, 400);
        assert!(r.text.contains("answer 199"), "the newest turn is whole");
        assert!(r.text.contains("earlier message(s) left out"));
        assert!(r.text.contains("### claude (opus)"));
    }

    #[test]
    fn secrets_are_masked_and_counted() {
        let t = transcript(vec![message(
            Role::User,
            "use ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 and pw hunter2hunter2",
        )]);
        let r = recap(&t, 4096, &["hunter2hunter2".to_owned()]);
        assert!(!r.text.contains("sk-ant-api03-abcdef"), "{}", r.text);
        assert!(!r.text.contains("hunter2hunter2"));
        assert!(r.redactions >= 2, "{r:?}");
    }

    #[test]
    fn a_ten_megabyte_transcript_stays_within_its_limit() {
        let big = "z".repeat(100 * 1024);
        let messages = (0..100)
            .map(|i| {
                message(
                    if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    &big,
                )
            })
            .collect();
        let r = recap(&transcript(messages), 64 * 1024, &[]);
        assert!(r.text.len() <= 64 * 1024);
        assert_eq!(r.whole + r.extracted + r.omitted, 100);
    }

    proptest! {
        #[test]
        fn recaps_never_exceed_their_limit(
            texts in proptest::collection::vec(".{0,400}", 0..60),
            limit in 256usize..16_384,
        ) {
            let messages = texts
                .iter()
                .enumerate()
                .map(|(i, t)| message(if i % 2 == 0 { Role::User } else { Role::Assistant }, t))
                .collect();
            let r = recap(&transcript(messages), limit, &[]);
            prop_assert!(r.text.len() <= limit);
            prop_assert_eq!(r.whole + r.extracted + r.omitted, texts.len() as u64);
        }

        #[test]
        fn transcripts_round_trip_through_json(
            texts in proptest::collection::vec(".{0,80}", 0..10),
        ) {
            let messages = texts.iter().map(|t| message(Role::User, t)).collect();
            let t = transcript(messages);
            let json = serde_json::to_string(&t).unwrap();
            let back: Transcript = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(back, t);
        }
    }
}
