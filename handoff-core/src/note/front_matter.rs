//! The front matter: the `---` block of `key: value` lines at the top of a rendered note,
//! written from the repository's state and read back strictly.

use camino::Utf8PathBuf;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::git_state::parse_status_words;
use super::{GitRemote, GitState, MAX_LISTED_UNCOMMITTED, NOTE_SCHEMA, NoteOrigin, status_words};
use crate::names::AgentId;
use crate::workspace::StatusChange;

/// The `---` block at the top of a rendered note: where it came from and the repository's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FrontMatter {
    /// Who wrote the note, and when.
    pub origin: NoteOrigin,
    /// The repository's state (its `uncommitted` list at most [`MAX_LISTED_UNCOMMITTED`] long).
    pub git: GitState,
    /// How many uncommitted files were left out of the list.
    pub uncommitted_omitted: u64,
}

/// Why a front matter is not one handoff wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    /// No closing `---` line.
    #[error("no closing '---' line")]
    Unclosed,
    /// A line that is neither `key: value` nor a list item where one may be.
    #[error("line {line}: expected 'key: value'")]
    BadLine {
        /// 1-based line number in the note.
        line: usize,
    },
    /// A key handoff does not write.
    #[error("line {line}: unknown key '{key}'")]
    UnknownKey {
        /// 1-based line number in the note.
        line: usize,
        /// The key.
        key: String,
    },
    /// A key given twice.
    #[error("line {line}: '{key}' is given twice")]
    DuplicateKey {
        /// 1-based line number in the note.
        line: usize,
        /// The key.
        key: String,
    },
    /// A value of the wrong kind.
    #[error("line {line}: '{key}' must be {expected}")]
    BadValue {
        /// 1-based line number in the note.
        line: usize,
        /// The key.
        key: String,
        /// What it must be.
        expected: &'static str,
    },
    /// A required key is absent.
    #[error("'{key}' is missing")]
    MissingKey {
        /// The key.
        key: &'static str,
    },
    /// `schema` names another format.
    #[error("schema is {found:?}, expected {NOTE_SCHEMA:?}")]
    WrongSchema {
        /// What it said.
        found: String,
    },
}

const REQUIRED_KEYS: [&str; 9] = [
    "schema",
    "repository",
    "branch",
    "head",
    "remote",
    "remote_url",
    "upstream",
    "pushed",
    "uncommitted",
];
const OPTIONAL_KEYS: [&str; 5] = [
    "generated",
    "created_at",
    "source_provider",
    "source_model",
    "uncommitted_omitted",
];

impl FrontMatter {
    /// The front matter for a note about `git`, written by `origin`; lists at most
    /// [`MAX_LISTED_UNCOMMITTED`] uncommitted files.
    pub fn new(git: &GitState, origin: &NoteOrigin) -> FrontMatter {
        let mut git = git.clone();
        let omitted = git.uncommitted.len().saturating_sub(MAX_LISTED_UNCOMMITTED);
        git.uncommitted.truncate(MAX_LISTED_UNCOMMITTED);
        FrontMatter {
            origin: origin.clone(),
            git,
            uncommitted_omitted: omitted as u64,
        }
    }

    /// The block, from its opening `---` line to its closing one (ending with a newline).
    pub fn render(&self) -> String {
        fn json(value: &str) -> String {
            serde_json::Value::from(value).to_string()
        }
        fn opt(value: Option<&str>) -> String {
            value.map_or_else(|| "null".to_owned(), json)
        }
        let mut out = String::from("---\n");
        let mut line = |key: &str, value: String| {
            out.push_str(key);
            out.push_str(": ");
            out.push_str(&value);
            out.push('\n');
        };
        line("schema", json(NOTE_SCHEMA));
        if let Some(at) = &self.origin.created_at {
            line("created_at", json(at));
        }
        if let Some(agent) = &self.origin.source_provider {
            line("source_provider", json(agent.as_str()));
        }
        if let Some(model) = &self.origin.source_model {
            line("source_model", json(model));
        }
        if self.origin.generated {
            line("generated", "true".to_owned());
        }
        let git = &self.git;
        line("repository", json(git.repository.as_str()));
        line("branch", opt(git.branch.as_deref()));
        line("head", opt(git.head.as_deref()));
        line("remote", opt(git.remote.as_ref().map(|r| r.name.as_str())));
        line(
            "remote_url",
            opt(git.remote.as_ref().and_then(|r| r.url.as_deref())),
        );
        line("upstream", opt(git.upstream.as_deref()));
        line(
            "pushed",
            git.pushed.map_or("null".to_owned(), |p| p.to_string()),
        );
        if git.uncommitted.is_empty() {
            line("uncommitted", "[]".to_owned());
        } else {
            out.push_str("uncommitted:\n");
            for change in &git.uncommitted {
                out.push_str("  - ");
                out.push_str(&json(&format!("{} {}", status_words(change), change.path)));
                out.push('\n');
            }
        }
        if self.uncommitted_omitted > 0 {
            out.push_str(&format!(
                "uncommitted_omitted: {}\n",
                self.uncommitted_omitted
            ));
        }
        out.push_str("---\n");
        out
    }

    /// Parses the lines between the `---` lines; `first_line` is the 1-based number of the first.
    pub(super) fn parse(
        lines: &[&str],
        first_line: usize,
    ) -> Result<FrontMatter, FrontMatterError> {
        use serde_json::Value;
        let mut values: std::collections::BTreeMap<&'static str, (usize, Value)> =
            Default::default();
        let mut items: Option<Vec<StatusChange>> = None;
        let mut in_list = false;
        for (i, raw) in lines.iter().enumerate() {
            let line = first_line + i;
            if let Some(item) = raw.strip_prefix("  - ") {
                if !in_list {
                    return Err(FrontMatterError::BadLine { line });
                }
                let bad = || FrontMatterError::BadValue {
                    line,
                    key: "uncommitted".to_owned(),
                    expected: "a list of \"<status> <path>\" strings",
                };
                let text: String = serde_json::from_str(item).map_err(|_| bad())?;
                let (words, path) = text.split_once(' ').ok_or_else(bad)?;
                if path.is_empty() {
                    return Err(bad());
                }
                let change = parse_status_words(words, path).ok_or_else(bad)?;
                items.get_or_insert_with(Vec::new).push(change);
                continue;
            }
            if in_list && items.is_none() {
                return Err(FrontMatterError::BadValue {
                    line: line - 1,
                    key: "uncommitted".to_owned(),
                    expected: "[] or followed by \"  - \" lines",
                });
            }
            in_list = false;
            let (key, value) = raw
                .split_once(':')
                .ok_or(FrontMatterError::BadLine { line })?;
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                return Err(FrontMatterError::BadLine { line });
            }
            let Some(known) = REQUIRED_KEYS
                .into_iter()
                .chain(OPTIONAL_KEYS)
                .find(|k| *k == key)
            else {
                return Err(FrontMatterError::UnknownKey {
                    line,
                    key: key.to_owned(),
                });
            };
            if values.contains_key(known) {
                return Err(FrontMatterError::DuplicateKey {
                    line,
                    key: key.to_owned(),
                });
            }
            if known == "uncommitted" && value.is_empty() {
                in_list = true;
                items = None;
                values.insert(known, (line, Value::Null));
                continue;
            }
            let value = value
                .strip_prefix(' ')
                .and_then(|v| serde_json::from_str::<Value>(v).ok())
                .filter(|v| !matches!(v, Value::Object(_)))
                .ok_or(FrontMatterError::BadLine { line })?;
            values.insert(known, (line, value));
        }
        if in_list && items.is_none() {
            return Err(FrontMatterError::BadValue {
                line: first_line + lines.len() - 1,
                key: "uncommitted".to_owned(),
                expected: "[] or followed by \"  - \" lines",
            });
        }
        for key in REQUIRED_KEYS {
            if !values.contains_key(key) {
                return Err(FrontMatterError::MissingKey { key });
            }
        }

        let bad = |key: &'static str, expected: &'static str| FrontMatterError::BadValue {
            line: values.get(key).map_or(0, |(l, _)| *l),
            key: key.to_owned(),
            expected,
        };
        let string = |key: &'static str| -> Result<Option<String>, FrontMatterError> {
            match values.get(key).map(|(_, v)| v) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(key, "a string or null")),
            }
        };
        let schema = string("schema")?.ok_or_else(|| bad("schema", "a string"))?;
        if schema != NOTE_SCHEMA {
            return Err(FrontMatterError::WrongSchema { found: schema });
        }
        let repository = string("repository")?
            .filter(|r| !r.is_empty())
            .ok_or_else(|| bad("repository", "a path"))?;
        let head = string("head")?;
        if let Some(head) = &head
            && !((head.len() == 40 || head.len() == 64)
                && head.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        {
            return Err(bad(
                "head",
                "a commit id (40 or 64 lowercase hex digits) or null",
            ));
        }
        let remote = match (string("remote")?, string("remote_url")?) {
            (Some(name), url) => Some(GitRemote { name, url }),
            (None, None) => None,
            (None, Some(_)) => return Err(bad("remote_url", "null when remote is null")),
        };
        let pushed = match values.get("pushed").map(|(_, v)| v) {
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::Null) | None => None,
            Some(_) => return Err(bad("pushed", "true, false or null")),
        };
        let uncommitted = match (values.get("uncommitted").map(|(_, v)| v), items) {
            (Some(Value::Null), Some(items)) => items,
            (Some(Value::Array(list)), None) if list.is_empty() => Vec::new(),
            _ => return Err(bad("uncommitted", "[] or followed by \"  - \" lines")),
        };
        let uncommitted_omitted = match values.get("uncommitted_omitted").map(|(_, v)| v) {
            None => 0,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| bad("uncommitted_omitted", "a non-negative integer"))?,
        };
        let source_provider = match string("source_provider")? {
            None => None,
            Some(id) => {
                Some(AgentId::parse(&id).ok_or_else(|| bad("source_provider", "an agent id"))?)
            }
        };
        Ok(FrontMatter {
            origin: NoteOrigin {
                created_at: string("created_at")?,
                source_provider,
                source_model: string("source_model")?,
                generated: match values.get("generated").map(|(_, v)| v) {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(bad("generated", "true or false")),
                },
            },
            git: GitState {
                repository: Utf8PathBuf::from(repository),
                branch: string("branch")?,
                head,
                remote,
                upstream: string("upstream")?,
                pushed,
                uncommitted,
            },
            uncommitted_omitted,
        })
    }
}
