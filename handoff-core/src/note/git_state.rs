//! The repository's state as a note records it: branch, head, remote, upstream and uncommitted
//! files, with the words a note lists them in.

use camino::Utf8PathBuf;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::AgentId;
use crate::workspace::StatusChange;

/// A repository's state as a note records it, read from the repository (`handoff-git`'s
/// `repo_state`), never from the note's author.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitState {
    /// The worktree root.
    #[schemars(with = "String")]
    pub repository: Utf8PathBuf,
    /// The checked-out branch's short name (`main`); null when HEAD is detached.
    pub branch: Option<String>,
    /// The commit HEAD points at (hex); null on an unborn branch.
    pub head: Option<String>,
    /// The branch's remote (its configured one, else `origin`), if there is one.
    pub remote: Option<GitRemote>,
    /// The remote-tracking ref HEAD was compared with (`refs/remotes/origin/main`), if it exists.
    pub upstream: Option<String>,
    /// Whether HEAD is contained in `upstream`; null without an upstream, or when it could not
    /// be told.
    pub pushed: Option<bool>,
    /// What `git status` reports, sorted by path.
    pub uncommitted: Vec<StatusChange>,
}

/// A remote of a repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitRemote {
    /// The remote's name (`origin`).
    pub name: String,
    /// Its URL with any credentials removed ([`strip_url_credentials`]); null if none is set.
    pub url: Option<String>,
}

/// Where a note came from, recorded in its front matter when given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteOrigin {
    /// When the note was rendered (ISO-8601 UTC).
    pub created_at: Option<String>,
    /// The agent that wrote the note.
    pub source_provider: Option<AgentId>,
    /// The model it ran.
    pub source_model: Option<String>,
    /// handoff wrote the note, not the agent (its agent stopped on its limit): a receiver
    /// checks the repository rather than trust it.
    #[serde(default)]
    pub generated: bool,
}

/// `url` without the credentials it may carry: the user information of a `scheme://user:pass@host`
/// URL or of a `user@host:path` scp-like address is removed, and so are the query and fragment
/// of a `scheme://` URL (where tokens are sometimes put). Local paths are returned unchanged.
pub fn strip_url_credentials(url: &str) -> String {
    if let Some(scheme_end) = url.find("://") {
        let scheme = &url[..scheme_end];
        let is_scheme = scheme
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic())
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
        if is_scheme {
            let rest = &url[scheme_end + 3..];
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let authority = &rest[..authority_end];
            let host = authority
                .rfind('@')
                .map_or(authority, |at| &authority[at + 1..]);
            let tail = &rest[authority_end..];
            let tail = tail.find(['?', '#']).map_or(tail, |end| &tail[..end]);
            return format!("{scheme}://{host}{tail}");
        }
    }
    // scp-like `[user@]host:path`: the user information ends at the last `@` before the first
    // `/`, and a `:` must follow it before any `/`.
    let first_slash = url.find('/').unwrap_or(url.len());
    if let Some(at) = url[..first_slash].rfind('@') {
        let after = &url[at + 1..];
        let colon = after.find(':');
        let slash = after.find('/');
        if colon.is_some_and(|c| slash.is_none_or(|s| c < s)) {
            return after.to_owned();
        }
    }
    url.to_owned()
}

/// The status of an uncommitted file as the front matter writes it: `untracked`, or `+`-joined
/// `staged`, `modified`, `deleted`.
pub fn status_words(change: &StatusChange) -> String {
    if change.untracked {
        return "untracked".to_owned();
    }
    let mut words = Vec::new();
    if change.staged {
        words.push("staged");
    }
    if change.deleted {
        words.push("deleted");
    } else if change.unstaged {
        words.push("modified");
    }
    if words.is_empty() {
        // Not something status reports; kept readable rather than dropped.
        words.push("unchanged");
    }
    words.join("+")
}

/// Reads `status_words` back into a [`StatusChange`] for `path`.
pub(super) fn parse_status_words(words: &str, path: &str) -> Option<StatusChange> {
    let mut change = StatusChange {
        path: path.to_owned(),
        staged: false,
        unstaged: false,
        untracked: false,
        deleted: false,
    };
    if words == "untracked" {
        change.untracked = true;
        return Some(change);
    }
    if words == "unchanged" {
        return Some(change);
    }
    let mut seen_worktree = false;
    for word in words.split('+') {
        match word {
            "staged" if !change.staged && !seen_worktree => change.staged = true,
            "modified" | "deleted" if !seen_worktree => {
                seen_worktree = true;
                change.unstaged = true;
                change.deleted = word == "deleted";
            }
            _ => return None,
        }
    }
    Some(change)
}
