//! The checks every record passes before a store keeps it: absolute paths, bounded names,
//! object ids, timestamps.

use camino::Utf8Path;

use super::{
    AgentRef, Fork, MAX_NAME_BYTES, NewHandoff, NewTask, Record, StoreError, Task, TaskAgent,
};
use crate::timestamp::is_iso;

fn invalid(field: &'static str, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        field,
        reason: reason.into(),
    }
}

fn check_absolute(field: &'static str, path: &Utf8Path) -> Result<(), StoreError> {
    if !path.is_absolute() {
        return Err(invalid(field, format!("'{path}' is not an absolute path")));
    }
    if path.as_str().contains('\0') {
        return Err(invalid(field, "contains a NUL byte"));
    }
    Ok(())
}

/// A name a store keeps (a model, account, branch, target or mode): 1 to [`MAX_NAME_BYTES`]
/// bytes, no control character; `None` passes.
pub fn check_name(field: &'static str, value: Option<&str>) -> Result<(), StoreError> {
    match value {
        Some(v) if v.is_empty() || v.len() > MAX_NAME_BYTES => Err(invalid(
            field,
            format!("must be 1 to {MAX_NAME_BYTES} bytes, not {}", v.len()),
        )),
        Some(v) if v.chars().any(char::is_control) => {
            Err(invalid(field, "contains a control character"))
        }
        _ => Ok(()),
    }
}

fn check_commit(field: &'static str, commit: &str) -> Result<(), StoreError> {
    let hex = commit
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex && matches!(commit.len(), 40 | 64) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("'{commit}' is not a lowercase hex object id"),
        ))
    }
}

/// Checks a timestamp is ISO-8601 UTC with milliseconds, as [`now_iso`](crate::now_iso) writes it
/// (`2025-01-31T12:34:56.789Z`), so that timestamps sort as text, naming a real date and time.
pub fn check_timestamp(field: &'static str, at: &str) -> Result<(), StoreError> {
    if is_iso(at) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("'{at}' is not ISO-8601 UTC with milliseconds"),
        ))
    }
}

impl TaskAgent {
    /// Checks the model and account.
    pub fn validate(&self) -> Result<(), StoreError> {
        check_name("model", self.model.as_deref())?;
        check_name("account", self.account.as_deref())
    }
}

impl AgentRef {
    /// Checks the model.
    pub fn validate(&self) -> Result<(), StoreError> {
        check_name("model", self.model.as_deref())
    }
}

impl NewTask {
    /// Checks paths are absolute and names are well-formed.
    pub fn validate(&self) -> Result<(), StoreError> {
        check_absolute("projectRoot", &self.project_root)?;
        check_absolute("worktree", &self.worktree)?;
        check_name("branch", self.branch.as_deref())?;
        self.agent.validate()
    }
}

impl Fork {
    /// Checks the fork against the task it is made from.
    pub fn validate(&self, original: &Task) -> Result<(), StoreError> {
        check_absolute("worktree", &self.worktree)?;
        check_name("branch", self.branch.as_deref())?;
        if let Some(agent) = &self.agent {
            agent.validate()?;
        }
        if self.worktree == original.worktree {
            return Err(invalid(
                "worktree",
                format!("a new thread needs a new worktree, not '{}'", self.worktree),
            ));
        }
        if self.branch.is_some() && self.branch == original.branch {
            return Err(invalid(
                "branch",
                "a new thread needs a new branch, not the original's",
            ));
        }
        Ok(())
    }
}

impl Record {
    /// Checks the record's fields.
    pub fn validate(&self) -> Result<(), StoreError> {
        match self {
            Record::Turn(t) => t.author.validate(),
            Record::Checkpoint(c) => {
                check_commit("commit", &c.commit)?;
                c.author.validate()
            }
            Record::Check(c) => {
                check_commit("commit", &c.commit)?;
                if c.command.is_empty() {
                    return Err(invalid("command", "is empty"));
                }
                Ok(())
            }
            Record::DelegatedRun(r) => {
                check_name("runId", Some(&r.run_id))?;
                check_name("resultHash", r.result_hash.as_deref())?;
                check_name("host", r.host.as_deref())?;
                if let Some(path) = &r.result_path {
                    check_absolute("resultPath", path)?;
                }
                Ok(())
            }
        }
    }
}

impl NewHandoff {
    /// Checks the agents and the context.
    pub fn validate(&self) -> Result<(), StoreError> {
        self.source.validate()?;
        self.target.validate()?;
        if let Some(path) = &self.context.note_path {
            check_absolute("notePath", path)?;
        }
        check_name("noteDigest", self.context.note_digest.as_deref())?;
        if self
            .context
            .transcript_messages
            .is_some_and(|n| n > i64::MAX as u64)
        {
            return Err(invalid("transcriptMessages", "too large"));
        }
        Ok(())
    }
}
