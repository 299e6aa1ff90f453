//! An OpenCode run under handoff's own sandbox keeps its session in a store of the run's own;
//! handoff imports it into the user's store after the result is out, in a detached importer
//! (`handoff __import`) that holds the run's directory until it is done. The fake's
//! `opencode import` is held (`HANDOFF_FAKE_IMPORT_WAIT_FILE`) or failed
//! (`HANDOFF_FAKE_IMPORT_FAIL`) to see each state.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use handoff_testkit::keys::{IMPORT_FAIL, IMPORT_WAIT_FILE};
use serde_json::Value;

use crate::support::{Run, Sandbox, confined};

/// The receipt's `stateAfterRun`, with the session id and the record's path.
fn importing(run: &Run) -> (String, PathBuf) {
    let state = &run.json["policy"]["sandbox"]["stateAfterRun"];
    let what = state["importing"]
        .as_str()
        .unwrap_or_else(|| panic!("no import under way: {state:#}"));
    let id = what
        .split_whitespace()
        .find(|w| w.starts_with("ses_"))
        .unwrap_or_else(|| panic!("{what}"));
    let record = PathBuf::from(state["record"].as_str().unwrap());
    (id.to_owned(), record)
}

/// The run's entry in `handoff doctor --json`'s `stateImports`, if any.
fn doctor_entry(sb: &Sandbox, record: &Path) -> Option<Value> {
    let doctor = sb.run(&["doctor", "--json"]);
    let run = record.file_stem()?.to_str()?.to_owned();
    doctor.json["stateImports"]
        .as_array()?
        .iter()
        .find(|i| i["runId"] == run.as_str())
        .cloned()
}

/// Waits until doctor lists the import of `record` as failed; checks its message names `why`.
fn failed_with(sb: &Sandbox, record: &Path, why: &str) -> Value {
    wait_until("the import never failed", || {
        doctor_entry(sb, record).is_some_and(|e| e["state"] == "failed")
    });
    let entry = doctor_entry(sb, record).unwrap();
    assert!(
        entry["message"].as_str().is_some_and(|m| m.contains(why)),
        "{entry:#}"
    );
    entry
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The user's OpenCode store as the fake keeps it (`~/.local/share/opencode`).
fn users_session(sb: &Sandbox, id: &str) -> PathBuf {
    sb.root
        .join("home/.local/share/opencode/fake-agent-sessions")
        .join(format!("{id}.json"))
}

#[test]
fn the_session_is_imported_after_the_result_and_a_run_does_not_wait_for_it() {
    let sb = confined();
    let gate = sb.private.join("import-gate");
    sb.agents.set(IMPORT_WAIT_FILE, &gate);
    // The import is held until the gate opens: the run's result comes all the same.
    let run = sb.delegate("claude", "opencode", "review", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let (id, record) = importing(&run);
    let entry = doctor_entry(&sb, &record).expect("doctor lists the import under way");
    assert_eq!(entry["state"], "importing", "{entry:#}");
    assert_eq!(entry["harness"], "opencode");
    // The importer holds the run's directory (its session store) until it is done.
    let run_dir = PathBuf::from(entry["runDir"].as_str().unwrap());
    assert!(run_dir.is_dir(), "{}", run_dir.display());
    assert!(!users_session(&sb, &id).exists());

    std::fs::write(&gate, "").unwrap();
    wait_until("the import never finished", || !record.exists());
    assert!(
        users_session(&sb, &id).is_file(),
        "the session was not imported"
    );
    // The record goes first, while the importer still holds the directory; then the directory.
    wait_until("the importer left the run's directory", || {
        !run_dir.exists()
    });
    assert!(doctor_entry(&sb, &record).is_none());
}

#[test]
fn a_failed_import_is_listed_by_doctor_with_its_reason() {
    let sb = confined();
    sb.agents.set(IMPORT_FAIL, "1");
    let run = sb.delegate("claude", "opencode", "review", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let (id, record) = importing(&run);
    let entry = failed_with(&sb, &record, "opencode import");
    assert!(!users_session(&sb, &id).exists());
    let run_dir = PathBuf::from(entry["runDir"].as_str().unwrap());
    wait_until("the importer left the run's directory", || {
        !run_dir.exists()
    });
    let text = sb.run(&["doctor"]);
    assert!(
        text.stdout.contains(&format!("import of session {id}")) && text.stdout.contains("failed"),
        "{}",
        text.stdout
    );
    std::fs::remove_file(&record).unwrap();
}

#[test]
fn a_symlink_the_agent_leaves_in_its_store_stops_the_import_and_nothing_is_written_through_it() {
    let sb = confined();
    // Where the agent would have OpenCode write outside the sandbox, once it exports.
    let target = sb.root.join("home/.config/autostart");
    std::fs::create_dir_all(&target).unwrap();
    let script = format!(
        "mkdir -p \"$XDG_DATA_HOME/opencode\" && ln -s {} \"$XDG_DATA_HOME/opencode/log\"",
        crate::support::q(&target)
    );
    sb.agents.set(handoff_testkit::keys::SHELL, &script);
    let run = sb.delegate("claude", "opencode", "review", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let (id, record) = importing(&run);
    failed_with(&sb, &record, "not a plain file or directory");
    assert!(!users_session(&sb, &id).exists());
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    std::fs::remove_file(&record).unwrap();
}

#[test]
fn the_import_leaves_the_project_configuration_the_agent_wrote_alone() {
    let sb = confined();
    // OpenCode's start rewrites an `opencode.json` without `$schema` and writes
    // `.opencode/.gitignore` in the project it runs in, unless told not to read the project's
    // configuration: the import, filed in the worktree after the run, must not.
    sb.agents.set(
        handoff_testkit::keys::SHELL,
        "printf '{}' > opencode.json && mkdir -p .opencode/plugin && \
         printf 'export const P = async () => ({})' > .opencode/plugin/p.js",
    );
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let (id, record) = importing(&run);
    wait_until("the import never finished", || !record.exists());
    assert!(users_session(&sb, &id).is_file());
    let repo = sb.repo.path();
    assert_eq!(
        std::fs::read_to_string(repo.join("opencode.json")).unwrap(),
        "{}"
    );
    assert!(!repo.join(".opencode/.gitignore").exists());
}

#[test]
fn a_store_the_agent_swapped_for_a_symlink_is_not_imported() {
    let sb = confined();
    // The store's directory moved aside and its name linked to another directory: OpenCode,
    // exporting outside the sandbox, would write wherever the link points.
    sb.agents.set(
        handoff_testkit::keys::SHELL,
        "mkdir -p \"$XDG_DATA_HOME.elsewhere\" && mv \"$XDG_DATA_HOME\" \"$XDG_DATA_HOME.moved\" \
         && ln -s \"$XDG_DATA_HOME.elsewhere\" \"$XDG_DATA_HOME\"",
    );
    let run = sb.delegate("claude", "opencode", "review", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let (id, record) = importing(&run);
    failed_with(&sb, &record, "where a directory belongs");
    assert!(!users_session(&sb, &id).exists());
    std::fs::remove_file(&record).unwrap();
}
