//! What runs left on hosts when they could not be cleaned up at once (the host stopped
//! answering, the connection dropped): kept here, one file per run under
//! `<state>/pending/` (`<state>`: `hosts/` next to the task store), cleaned up at the next contact with that host and listed by
//! `handoff doctor`.

use std::os::unix::fs::DirBuilderExt as _;

use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use crate::protocol::is_run_id;

/// A run left on a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Leftover {
    /// The host's name, or its destination.
    pub host: String,
    /// The ssh destination.
    pub ssh: String,
    /// The host's directory.
    pub dir: String,
    /// The project key.
    pub project: String,
    /// The run.
    pub run: String,
    /// Its job there, when it was started.
    pub job: Option<String>,
    /// The local process that runs it, while it runs: a run whose process is alive is not
    /// left over, whatever its record says.
    #[serde(default)]
    pub owner: Option<handoff_core::ProcessRef>,
}

impl Leftover {
    /// Whether the run is left over: no local process runs it any more.
    pub fn abandoned(&self) -> bool {
        !self.owner.is_some_and(|o| o.is_alive())
    }
}

fn dir(state: &Utf8Path) -> Utf8PathBuf {
    state.join("pending")
}

/// Keeps `leftover` until [`forget`].
pub fn remember(state: &Utf8Path, leftover: &Leftover) -> Result<(), String> {
    let d = dir(state);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&d)
        .map_err(|e| format!("cannot create {d}: {e}"))?;
    let text = serde_json::to_string(leftover).unwrap_or_default();
    std::fs::write(d.join(format!("{}.json", leftover.run)), text)
        .map_err(|e| format!("cannot write {d}: {e}"))
}

/// Drops the record of `run`.
pub fn forget(state: &Utf8Path, run: &str) {
    if is_run_id(run) {
        let _ = std::fs::remove_file(dir(state).join(format!("{run}.json")));
    }
}

/// Every run left on a host, oldest first by name.
pub fn leftovers(state: &Utf8Path) -> Vec<Leftover> {
    let Ok(entries) = std::fs::read_dir(dir(state)) else {
        return Vec::new();
    };
    let mut all: Vec<Leftover> = entries
        .flatten()
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|b| serde_json::from_slice::<Leftover>(&b).ok())
        .filter(|l| is_run_id(&l.run))
        .collect();
    all.sort_by(|a, b| a.run.cmp(&b.run));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_are_kept_until_forgotten() {
        let tmp = tempfile::tempdir().unwrap();
        let state = Utf8Path::from_path(tmp.path()).unwrap();
        assert!(leftovers(state).is_empty());
        let l = Leftover {
            host: "devbox".into(),
            ssh: "me@devbox".into(),
            dir: "~/handoff".into(),
            project: "r-0123456789ab".into(),
            run: "0123456789ab".into(),
            job: None,
            owner: Some(handoff_core::ProcessRef::current()),
        };
        remember(state, &l).unwrap();
        assert_eq!(leftovers(state), vec![l.clone()]);
        assert!(!l.abandoned(), "this process runs it");
        let gone = Leftover {
            owner: None,
            ..l.clone()
        };
        assert!(gone.abandoned());
        forget(state, "../../x");
        assert_eq!(leftovers(state).len(), 1);
        forget(state, &l.run);
        assert!(leftovers(state).is_empty());
    }
}
