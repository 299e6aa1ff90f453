//! What this machine asks a host's `handoff __host` and what it answers: one JSON object each
//! way, the request on its standard input, the reply as one line on its standard output.

use serde::{Deserialize, Serialize};

/// The protocol's version. A host that speaks another is refused before anything runs there.
pub const PROTOCOL: u32 = 1;

/// Most bytes of a request (the instructions travel in it).
pub const MAX_REQUEST: usize = 4 << 20;

/// One request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HostRequest {
    /// The project's repository there, made when missing; answers its absolute path.
    Repo {
        /// Where the host keeps repositories and runs (`~/…` or absolute).
        dir: String,
        /// The project's key: `<name>-<first commit, 12 digits>`.
        project: String,
    },
    /// Starts a run on a commit pushed to `refs/handoff/runs/<run>`: its own clone of the
    /// project's repository, checked out there, and a background `handoff <verb>` on it.
    Start(Box<StartRun>),
    /// Waits for a run's job to end; for a writing run that succeeded, its change as one
    /// commit on `refs/heads/handoff/<run>` of the project's repository.
    Finish {
        /// As [`HostRequest::Repo`].
        dir: String,
        /// As [`HostRequest::Repo`].
        project: String,
        /// The run.
        run: String,
        /// Its job.
        job: String,
        /// Whether to collect the change (a `build` or `phase` run).
        collect: bool,
    },
    /// Stops a run's job as SIGTERM stops a run.
    Cancel {
        /// The job.
        job: String,
    },
    /// Removes what a run left there: its job stopped if it still runs, its clone, its refs.
    Cleanup {
        /// As [`HostRequest::Repo`].
        dir: String,
        /// As [`HostRequest::Repo`].
        project: String,
        /// The run.
        run: String,
        /// Its job, when it was started.
        job: Option<String>,
    },
}

/// A run to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRun {
    /// As [`HostRequest::Repo`].
    pub dir: String,
    /// As [`HostRequest::Repo`].
    pub project: String,
    /// The run's id (12 hex digits).
    pub run: String,
    /// The commit to start from (pushed to `refs/handoff/runs/<run>`).
    pub commit: String,
    /// `run`, `advice` or `run-with-advice`.
    pub verb: String,
    /// The command line after the verb, without `--cwd` and `--instructions`.
    pub args: Vec<String>,
    /// The instructions, masked here.
    pub instructions: String,
    /// How many runs may go to this host at once.
    pub max_runs: u32,
}

/// The reply to any request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostReply {
    /// Whether the request was done.
    pub ok: bool,
    /// Why not, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Start: the host already runs as many runs as it may.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
    /// The protocol the host speaks (every reply says it).
    #[serde(default)]
    pub protocol: u32,
    /// Repo: the repository's absolute path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Start: the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Start: the worktree the run works in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// Finish: the job's exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<u8>,
    /// Finish: the job's result line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Finish: the commit holding a writing run's change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Finish: why a writing run's change could not be collected, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncollected: Option<String>,
}

impl HostReply {
    /// A successful reply.
    pub fn ok() -> HostReply {
        HostReply {
            ok: true,
            protocol: PROTOCOL,
            ..HostReply::default()
        }
    }

    /// A refusal.
    pub fn error(message: impl Into<String>) -> HostReply {
        HostReply {
            ok: false,
            protocol: PROTOCOL,
            error: Some(message.into()),
            ..HostReply::default()
        }
    }
}

/// Whether `s` is a run id: 12 lowercase hex digits.
pub fn is_run_id(s: &str) -> bool {
    s.len() == 12
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `s` is a project key: `<name>-<12 hex digits>`, the name 1–64 letters, digits, `.`,
/// `_` or `-`, not starting with `.` or `-`.
pub fn is_project(s: &str) -> bool {
    let Some((name, root)) = s.rsplit_once('-') else {
        return false;
    };
    is_run_id(root)
        && (1..=64).contains(&name.len())
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Whether `s` is a full object id.
pub fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_unknown_fields_are_refused() {
        let r = HostRequest::Finish {
            dir: "~/h".into(),
            project: "repo-0123456789ab".into(),
            run: "0123456789ab".into(),
            job: "job-x".into(),
            collect: true,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.starts_with(r#"{"op":"finish""#), "{text}");
        assert_eq!(serde_json::from_str::<HostRequest>(&text).unwrap(), r);
        assert!(serde_json::from_str::<HostRequest>(r#"{"op":"cancel","job":"j","x":1}"#).is_err());
        assert!(serde_json::from_str::<HostRequest>(r#"{"op":"rm"}"#).is_err());
    }

    #[test]
    fn names_are_checked() {
        assert!(is_run_id("0123456789ab"));
        assert!(!is_run_id("0123456789AB"));
        assert!(is_project("my.repo-0123456789ab"));
        assert!(is_project("a-b-0123456789ab"));
        for bad in [
            "-0123456789ab",
            "../x-0123456789ab",
            ".x-0123456789ab",
            "x/y-0123456789ab",
            "x",
        ] {
            assert!(!is_project(bad), "{bad}");
        }
    }
}
