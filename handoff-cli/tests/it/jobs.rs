//! Background jobs: `--detach` returns at once with a job id; `jobs`, `wait`, `result` and
//! `cancel` collect it; it outlives the shell that started it, and a job whose supervisor died
//! is reported lost.

use std::path::Path;
use std::time::{Duration, Instant};

use handoff_testkit::keys::WAIT_FILE;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{Run, Sandbox};

/// A sandbox whose fake agents wait for `go` to exist before they answer.
fn waiting() -> (Sandbox, std::path::PathBuf) {
    let sb = Sandbox::new();
    let go = sb.root.join("go");
    sb.agents.set(WAIT_FILE, &go);
    (sb, go)
}

/// The arguments after `run` of a Claude Code → Codex run in `mode` on the sandbox's
/// repository.
fn run_args(sb: &Sandbox, mode: &str) -> Vec<String> {
    let ins = sb.instructions("Make the change described here, then report.");
    [
        "--caller-harness",
        "claude",
        "--harness",
        "codex",
        "--mode",
        mode,
        "--cwd",
        &sb.cwd(),
        "--instructions",
        &ins,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `handoff run --detach --mode <mode> …` on the sandbox's repository; the job id.
fn detach(sb: &Sandbox, mode: &str, extra: &[&str]) -> (Run, String) {
    let rest = run_args(sb, mode);
    let mut args = vec!["run", "--detach"];
    args.extend(rest.iter().map(String::as_str));
    args.extend(extra);
    let run = sb.run(&args);
    let id = run
        .stdout
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .unwrap_or_else(|| panic!("no job id: {run:?}"))
        .to_owned();
    (run, id)
}

fn jobs(sb: &Sandbox) -> Vec<Value> {
    let run = sb.run(&["jobs", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn job(sb: &Sandbox, id: &str) -> Value {
    jobs(sb)
        .into_iter()
        .find(|j| j["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed"))
}

fn release(go: &Path) {
    std::fs::write(go, "go").unwrap();
}

/// Waits (bounded) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_detached_run_returns_at_once_and_is_collected_later() {
    let (sb, go) = waiting();
    let (run, id) = detach(&sb, "build", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
    let listed = job(&sb, &id);
    assert_eq!(listed["state"], "running", "{listed}");
    assert_eq!(listed["verb"], "run");
    assert_eq!(listed["target"], "codex");
    assert_eq!(listed["mode"], "build");

    let early = sb.run(&["result", &id]);
    assert_eq!(early.code, 4, "{early:?}");
    assert!(early.stderr.contains("still running"), "{early:?}");
    assert!(early.stdout.is_empty());

    release(&go);
    let waited = sb.run(&["wait", &id]);
    assert_eq!(waited.code, 0, "{waited:?}");
    assert_eq!(waited.json["status"], "succeeded", "{waited:?}");
    assert_eq!(waited.json["git"]["changedFiles"][0], "fake-build.txt");
    let result = sb.run(&["result", &id]);
    assert_eq!((result.code, &result.stdout), (0, &waited.stdout));
    let listed = job(&sb, &id);
    assert_eq!(
        (listed["state"].clone(), listed["exitCode"].clone()),
        ("finished".into(), 0.into())
    );
    // The job's private files are gone with it.
    let dir = sb.root.join("home/.local/state/handoff/jobs").join(&id);
    assert!(!dir.exists(), "{dir:?}");
}

#[test]
fn json_prints_the_job_and_a_job_reads_its_instructions_from_stdin_now() {
    let sb = Sandbox::new();
    let cwd = sb.cwd();
    let out = sb.run_stdin(
        &[
            "advice",
            "--detach",
            "--json",
            "--caller-harness",
            "codex",
            "--harness",
            "claude",
            "--cwd",
            &cwd,
            "--instructions",
            "-",
        ],
        b"What is the riskiest part of this change?",
    );
    assert_eq!(out.code, 0, "{out:?}");
    let started: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let typed: handoff_core::JobReport = serde_json::from_value(started.clone())
        .unwrap_or_else(|e| panic!("not a handoff.job.v1 object: {e}: {started}"));
    assert_eq!(typed.state, handoff_core::JobState::Running);
    assert_eq!(started["schemaVersion"], "handoff.job.v1");
    assert_eq!(started["verb"], "advice");
    let id = started["id"].as_str().unwrap();
    let waited = sb.run(&["wait", id]);
    assert_eq!(waited.code, 0, "{waited:?}");
    assert_eq!(waited.json["operation"], "advice");
}

#[test]
fn cancel_stops_a_job_like_sigterm_and_it_records_exit_9() {
    let (sb, _go) = waiting();
    let (_, id) = detach(&sb, "build", &[]);
    eventually("the job's supervisor", || {
        !job(&sb, &id)["supervisorPid"].is_null()
    });
    let cancelled = sb.run(&["cancel", &id]);
    assert_eq!(cancelled.code, 0, "{cancelled:?}");
    let waited = sb.run(&["wait", &id]);
    assert_eq!(waited.code, 9, "{waited:?}");
    assert_eq!(waited.json["status"], "cancelled");
    let again = sb.run(&["cancel", &id]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again.stdout.contains("finished already (exit 9)"),
        "{again:?}"
    );
}

/// `cancel` may signal a supervisor the moment the store names it: one still starting (here
/// slowed down, not handoff yet) holds the signal until it catches it, forwards it to its run,
/// and the job records the cancel instead of being lost.
#[test]
fn a_supervisor_signalled_before_it_catches_anything_still_records_the_cancel() {
    let (sb, _go) = waiting();
    let env: Vec<(String, String)> = sb
        .command()
        .get_envs()
        .filter_map(|(k, v)| {
            Some((
                k.to_string_lossy().into_owned(),
                v?.to_string_lossy().into_owned(),
            ))
        })
        .collect();
    let (slow, started) = crate::support::slow_handoff(&sb, "slow-supervisor", Some(&env));
    let store = handoff_store::SqliteStore::open_default(&env.iter().cloned().collect()).unwrap();
    let args = run_args(&sb, "review");
    let job = handoff_core::detach_job(
        &store,
        camino::Utf8Path::from_path(&slow).unwrap(),
        &store.sibling_dir("jobs"),
        "run",
        args.clone(),
        args,
        None,
    )
    .unwrap()
    .job;
    crate::support::wait_for_file(&started);
    let cancel = handoff_core::cancel_job(&store, &job.id).unwrap();
    assert!(
        matches!(cancel, handoff_core::Cancel::Signalled(_)),
        "{cancel:?}"
    );
    let waited = sb.run(&["wait", job.id.as_str()]);
    assert_eq!(waited.code, 9, "{waited:?}");
    assert_eq!(waited.json["status"], "cancelled", "{waited:?}");
}

#[test]
fn a_job_outlives_the_shell_that_started_it() {
    let (sb, go) = waiting();
    let ins = sb.instructions("Make the change described here, then report.");
    let out = sb.root.join("started.txt");
    let script = format!(
        "handoff run --detach --caller-harness claude --harness codex --mode build --cwd '{}' --instructions '{}' > '{}'; sleep 600",
        sb.cwd(),
        ins,
        out.display()
    );
    let cmd = sb.command();
    let handoff_dir = Path::new(env!("CARGO_BIN_EXE_handoff"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!(
        "{}:{}",
        handoff_dir.display(),
        cmd.get_envs()
            .find(|(k, _)| *k == "PATH")
            .and_then(|(_, v)| v)
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let mut shell = std::process::Command::new("sh");
    shell
        .args(["-c", &script])
        .env_clear()
        .envs(
            cmd.get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .env("PATH", path);
    use std::os::unix::process::CommandExt;
    shell.process_group(0);
    let mut shell = shell.spawn().unwrap();
    eventually("the job id", || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("job-"))
    });
    let text = std::fs::read_to_string(&out).unwrap();
    let id = text
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .unwrap()
        .to_owned();
    // The whole process group of the shell, as a closed terminal would.
    let pgid = Pid::from_raw(shell.id() as i32);
    nix::sys::signal::killpg(pgid, Signal::SIGKILL).unwrap();
    let _ = shell.wait();
    assert_eq!(job(&sb, &id)["state"], "running");
    release(&go);
    let waited = sb.run(&["wait", &id]);
    assert_eq!(waited.code, 0, "{waited:?}");
}

#[test]
fn a_job_whose_supervisor_died_is_lost_not_running_forever() {
    let (sb, go) = waiting();
    let (_, id) = detach(&sb, "review", &[]);
    eventually("the job's supervisor", || {
        !job(&sb, &id)["supervisorPid"].is_null()
    });
    let pid = job(&sb, &id)["supervisorPid"].as_i64().unwrap() as i32;
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    eventually("the job to be lost", || job(&sb, &id)["state"] == "lost");
    let result = sb.run(&["result", &id]);
    assert_eq!(result.code, 2, "{result:?}");
    assert!(result.stderr.contains("was lost"), "{result:?}");
    let waited = sb.run(&["wait", &id]);
    assert_eq!(waited.code, 2, "{waited:?}");
    release(&go);
}

#[test]
fn a_second_job_on_the_same_worktree_is_refused_as_a_foreground_run_is() {
    let (sb, go) = waiting();
    sb.record();
    let (_, first) = detach(&sb, "build", &[]);
    eventually("the first job's agent", || {
        sb.agents.invocations().iter().any(|i| {
            i["stdin"]
                .as_str()
                .is_some_and(|s| s.contains("delegated coding agent"))
        }) || job(&sb, &first)["state"] != "running"
    });
    let (_, second) = detach(&sb, "build", &[]);
    let refused = sb.run(&["wait", &second]);
    assert_eq!(refused.code, 5, "{refused:?}");
    assert!(
        refused.json["diagnostics"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("holds")),
        "{}",
        refused.json
    );
    release(&go);
    assert_eq!(sb.run(&["wait", &first]).code, 0);
}

#[test]
fn bad_requests_and_ids_are_refused_in_the_foreground() {
    let sb = Sandbox::new();
    let cwd = sb.cwd();
    let bad = sb.run(&[
        "run",
        "--detach",
        "--caller-harness",
        "claude",
        "--harness",
        "codex",
        "--mode",
        "sideways",
        "--cwd",
        &cwd,
        "--instructions",
        &sb.instructions("x"),
    ]);
    assert_eq!(bad.code, 5, "{bad:?}");
    assert_eq!(bad.json["status"], "rejected");
    assert!(jobs(&sb).is_empty(), "a refused request is no job");
    for verb in ["wait", "result", "cancel"] {
        let run = sb.run(&[verb, "job-nope"]);
        assert_eq!(run.code, 5, "{verb}: {run:?}");
        let unknown = sb.run(&[verb, "job-00000000-0000-4000-8000-000000000000"]);
        assert_eq!(unknown.code, 5, "{verb}: {unknown:?}");
        assert!(unknown.stderr.contains("no job"), "{verb}: {unknown:?}");
    }
    let json_alone = sb.run(&["run", "--json"]);
    assert_eq!(json_alone.code, 5, "{json_alone:?}");
    assert_eq!(sb.run(&["jobs"]).stdout.trim(), "no jobs");
}

#[test]
fn a_continuation_runs_as_a_job_with_its_note_read_from_stdin_at_once() {
    let sb = crate::continuation::sandbox();
    let note = std::fs::read(crate::continuation::note_file(
        &sb,
        "note.md",
        &crate::note::SECTIONS,
    ))
    .unwrap();
    let cwd = sb.cwd();
    let out = sb.run_stdin(
        &[
            "continue",
            "--detach",
            "--to",
            "codex",
            "--from",
            "claude",
            "--cwd",
            &cwd,
            "--note-file",
            "-",
            "--fallback",
            "fresh-agent",
        ],
        &note,
    );
    assert_eq!(out.code, 0, "{out:?}");
    let text = out.stdout;
    let id = text
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .unwrap()
        .to_owned();
    assert_eq!(job(&sb, &id)["verb"], "continue");
    let waited = sb.run(&["wait", &id]);
    assert_eq!(waited.code, 0, "{waited:?}");
    assert_eq!(
        waited.json["schemaVersion"], "handoff.continue.v1",
        "{waited:?}"
    );
    assert_eq!(waited.json["target"]["provider"], "codex");
}

#[test]
fn a_worker_cannot_detach_its_nested_requests() {
    let sb = Sandbox::new();
    let cwd = sb.cwd();
    let mut cmd = sb.command();
    cmd.env(handoff_core::CONTEXT_ENV, "v1.run-x.token");
    cmd.args([
        "advice",
        "--detach",
        "--harness",
        "claude",
        "--cwd",
        &cwd,
        "--instructions",
        &sb.instructions("Q?"),
    ]);
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr.contains("not accepted inside a worker"),
        "{run:?}"
    );
    assert!(jobs(&sb).is_empty());
}
