//! Every status and exit code, on both adapters.
//!
//! Each scenario runs the real `handoff` binary in its own [`Sandbox`] with the fake agents on
//! PATH. Scenarios that apply to both adapters are written once, as `fn(caller, target)`, and
//! instantiated by [`both_adapters!`] as `<scenario>::target_codex` (caller `claude`) and
//! `<scenario>::target_claude` (caller `codex`).
//!
//! | code | status | covered by |
//! |---:|---|---|
//! | 0 | succeeded | `build_succeeded`, `build_in_subdirectory`, `phase_succeeded`, `review_succeeded`, `verify_succeeded`, `advice_succeeded`, `advice_accepts_any_caller`, `instructions_from_stdin`, `flag_equals_value_syntax`, `mcp_api_key_header_is_accepted_by_claude` |
//! | 2 | failed / blocked | `answer_blocked`, `answer_failed`, `agent_error`, `max_turns`, `nonzero_exit_with_valid_answer`, `claude_max_turns_names_error_max_turns` |
//! | 3 | not_run | `cli_not_installed`, `preflight_help_missing_flag`, `claude_without_sandbox_tools`, `pending_adapters_are_not_run` |
//! | 5 | rejected | `rejections_*`, `mcp_rejection_keeps_receipts`, `result_already_exists_is_untouched`, `result_dir_writable_by_others`, `early_*`, `unparsable_command_line_echoes_what_it_can`, `an_argument_that_is_not_utf8_is_rejected_not_a_panic` |
//! | 7 | failed | `crash_without_answer`, `prose`, `schema_drift`, `invalid_utf8`, `oversized`, `result_file_replaced_during_run`, `result_file_written_during_run` |
//! | 10 | blocked | `build_without_change`, `review_mutation`, `review_mutation_overrides_failure`, `claude_sandbox_not_enforced_is_blocked` |
//!
//! Where the fake has no switch for a situation (a valid answer with a non-zero exit, a mutation
//! together with a failure, a sandbox warning, a tampered result file), [`wrap_agent`] puts a
//! bash wrapper in front of it.
//!
//! Timeouts (8) and cancellation (9) live in `lifecycle.rs`.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Stdio;

use handoff_testkit::fixtures::{CLAUDE_VERSION, CODEX_VERSION};
use handoff_testkit::keys;
use serde_json::{Value, json};

use crate::support::{Run, Sandbox};

// ------------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------------

/// Instantiates `fn scenario(caller, target)` once per supported adapter.
macro_rules! both_adapters {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn target_codex() {
                    super::$name("claude", "codex")
                }

                #[test]
                fn target_claude() {
                    super::$name("codex", "claude")
                }
            }
        )*
    };
}

/// Everything a failed assertion needs to be understood.
fn ctx(run: &Run) -> String {
    format!(
        "exit {}\n--- stdout ---\n{}--- stderr ---\n{}",
        run.code, run.stdout, run.stderr
    )
}

fn message(run: &Run) -> &str {
    run.json["diagnostics"]["message"].as_str().unwrap_or("")
}

/// The DAG status that closes a root with `status` (engine: `DagStatus::closing`).
fn dag_status(status: &str) -> &str {
    match status {
        "rejected" | "not_run" => "failed",
        s => s,
    }
}

/// Code, status and the invariants every result keeps: `exit.driver` equals the code, the root
/// DAG node (when a DAG exists) carries the status, and stderr repeats the message.
fn expect(run: &Run, code: i32, status: &str) {
    assert_eq!(run.code, code, "exit code\n{}", ctx(run));
    assert_eq!(run.status(), status, "status\n{}", ctx(run));
    let j = &run.json;
    assert_eq!(j["schemaVersion"], "handoff.result.v1", "{}", ctx(run));
    assert_eq!(
        j["exit"]["driver"],
        json!(code),
        "exit.driver\n{}",
        ctx(run)
    );
    if !j["dag"].is_null() {
        let dag = &j["dag"];
        assert_eq!(
            dag["nodes"][0]["state"],
            status,
            "dag root state\n{}",
            ctx(run)
        );
        assert_eq!(
            dag["status"],
            dag_status(status),
            "dag status\n{}",
            ctx(run)
        );
        assert_eq!(dag["activeCount"], 0, "{}", ctx(run));
        assert!(!dag["nodes"][0]["finishedAt"].is_null(), "{}", ctx(run));
    }
    if code == 0 {
        assert!(j["diagnostics"]["message"].is_null(), "{}", ctx(run));
    } else {
        let m = message(run);
        assert!(!m.is_empty(), "a failure must say why\n{}", ctx(run));
        assert!(
            run.stderr.contains(&format!("handoff: {m}")),
            "stderr must repeat the message\n{}",
            ctx(run)
        );
    }
}

fn expect_message(run: &Run, needle: &str) {
    assert!(
        message(run).contains(needle),
        "diagnostics.message should contain {needle:?}\n{}",
        ctx(run)
    );
}

fn changed_files(run: &Run) -> Vec<String> {
    run.json["git"]["changedFiles"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn version_of(target: &str) -> String {
    match target {
        "codex" => format!("codex-cli {CODEX_VERSION}"),
        "claude" => format!("{CLAUDE_VERSION} (Claude Code)"),
        other => panic!("no version for {other}"),
    }
}

fn path_str(p: &Path) -> String {
    p.to_str().expect("test paths are UTF-8").to_owned()
}

/// The worktree is exactly as committed (nothing written, nothing staged).
fn assert_worktree_clean(sb: &Sandbox) {
    let status = sb
        .repo
        .git(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(status.is_empty(), "the worktree changed:\n{status}");
}

/// No per-run scratch directory survives a run: neither one its agent (or a probe) was handed
/// in the private work directory nor any in TMPDIR.
fn assert_no_scratch_left(sb: &Sandbox) {
    let handed = crate::support::recorded_run_dirs(sb);
    let left: Vec<_> = handed.iter().filter(|d| d.exists()).collect();
    assert!(left.is_empty(), "run directories left behind: {left:?}");
    let in_tmp: Vec<String> = std::fs::read_dir(&sb.tmp)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("handoff-"))
        .collect();
    assert!(
        in_tmp.is_empty(),
        "private directories in TMPDIR: {in_tmp:?}"
    );
}

/// A sandbox whose fake agents run in `fake_mode`, recording invocations.
fn sandbox_in_mode(fake_mode: &str) -> Sandbox {
    let sb = Sandbox::new();
    sb.agents.set(keys::MODE, fake_mode);
    sb.record();
    sb
}

/// Receipts of a validated request run with default selection and grants.
fn expect_default_receipts(run: &Run, target: &str, mode: Option<&str>) {
    let j = &run.json;
    let writes = matches!(mode, Some("build" | "phase"));
    let advice = mode.is_none();

    let sel = &j["selection"];
    assert_eq!(
        sel["requested"],
        json!({"model": null, "effort": null, "maxTurns": null}),
        "{}",
        ctx(run)
    );
    assert_eq!(sel["resolved"]["model"], "provider-default", "{}", ctx(run));
    assert_eq!(
        sel["provenance"]["model"],
        "provider-default",
        "{}",
        ctx(run)
    );
    let (effort, effort_src) = match (target, advice) {
        ("codex", true) => ("xhigh", "operation-default"),
        ("claude", true) => ("max", "operation-default"),
        _ => ("provider-default", "provider-default"),
    };
    assert_eq!(sel["resolved"]["effort"], effort, "{}", ctx(run));
    assert_eq!(sel["provenance"]["effort"], effort_src, "{}", ctx(run));
    let (turns, turns_src) = match (target, advice) {
        ("claude", true) => (json!(32), "operation-default"),
        ("claude", false) => (json!(12), "operation-default"),
        _ => (Value::Null, "provider-default"),
    };
    assert_eq!(sel["resolved"]["maxTurns"], turns, "{}", ctx(run));
    assert_eq!(sel["provenance"]["maxTurns"], turns_src, "{}", ctx(run));

    let g = &j["grants"];
    assert_eq!(
        g["requested"],
        json!({"bash": true, "webSearch": false, "mcp": false}),
        "{}",
        ctx(run)
    );
    assert_eq!(
        g["resolved"],
        json!({"bash": true, "webSearch": false, "mcp": false, "write": writes}),
        "{}",
        ctx(run)
    );
    assert_eq!(
        g["provenance"],
        json!({
            "bash": "operation-default",
            "webSearch": "operation-default",
            "mcp": "operation-default",
            "write": "mode-derived",
        }),
        "{}",
        ctx(run)
    );
    assert_eq!(
        g["mcp"],
        json!({"digest": null, "servers": []}),
        "{}",
        ctx(run)
    );

    // Root advice may consult further advisers; a plain run may not.
    assert_eq!(
        j["delegation"],
        json!({"mode": if advice { "advice-only" } else { "none" }, "provenance": "verb-derived"}),
        "{}",
        ctx(run)
    );
    let lineage = &j["lineage"];
    assert_eq!(lineage["depth"], 0, "{}", ctx(run));
    assert!(lineage["parentRunId"].is_null(), "{}", ctx(run));
    assert_eq!(lineage["rootRunId"], lineage["runId"], "{}", ctx(run));
    for key in ["requestHash", "intentHash"] {
        assert!(
            j[key].as_str().is_some_and(|h| h.starts_with("sha256:")),
            "{key}\n{}",
            ctx(run)
        );
    }
}

/// The usage numbers the fake CLIs put in their own envelopes.
fn expect_envelope_usage(run: &Run, target: &str) {
    let u = &run.json["usage"];
    assert_eq!(u["source"], "provider-envelope", "{}", ctx(run));
    match target {
        // turn.completed: input 22, cached 4, output 14.
        "codex" => {
            assert_eq!(u["inputTokens"], 22, "{}", ctx(run));
            assert_eq!(u["outputTokens"], 14, "{}", ctx(run));
            assert_eq!(u["totalTokens"], 36, "{}", ctx(run));
            assert_eq!(u["cacheReadTokens"], 4, "{}", ctx(run));
        }
        // result event: input 22 + cache read 5 + cache creation 3, output 14, $0.000276.
        "claude" => {
            assert_eq!(u["inputTokens"], 30, "{}", ctx(run));
            assert_eq!(u["outputTokens"], 14, "{}", ctx(run));
            assert_eq!(u["totalTokens"], 44, "{}", ctx(run));
            assert_eq!(u["costUsd"], 0.000276, "{}", ctx(run));
        }
        other => panic!("no usage for {other}"),
    }
}

/// The single recorded run (probes excluded) and whether it was allowed to write.
fn expect_one_run(sb: &Sandbox, target: &str, writes: bool) {
    let runs = sb.runs();
    assert_eq!(runs.len(), 1, "exactly one agent run: {runs:#?}");
    let argv: Vec<&str> = runs[0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let after = |flag: &str| {
        argv.iter()
            .position(|a| *a == flag)
            .and_then(|i| argv.get(i + 1).copied())
            .unwrap_or_else(|| panic!("{flag} missing from {argv:?}"))
    };
    match target {
        "codex" => {
            let expected = if writes {
                "workspace-write"
            } else {
                "read-only"
            };
            // A worker that may ask for advice runs under a permission profile instead of
            // `--sandbox`; it extends the same sandbox mode.
            let mode = if argv.contains(&"--sandbox") {
                after("--sandbox").to_owned()
            } else {
                let extends = argv
                    .iter()
                    .find_map(|a| a.strip_prefix("permissions.handoff_nested.extends="))
                    .unwrap_or_else(|| panic!("neither --sandbox nor a profile: {argv:?}"));
                match extends.trim_matches('"') {
                    ":workspace" => "workspace-write".to_owned(),
                    other => other.trim_start_matches(':').to_owned(),
                }
            };
            assert_eq!(mode, expected, "{argv:?}");
        }
        "claude" => {
            let tools = after("--tools");
            assert_eq!(tools.split(',').any(|t| t == "Write"), writes, "{argv:?}");
        }
        other => panic!("unknown target {other}"),
    }
}

/// Runs `handoff <argv>` with extra environment variables; checks that stdout is one line and,
/// when a result file was created by this run, that it holds exactly the stdout bytes.
fn invoke(sb: &Sandbox, argv: &[String], env: &[(&str, &str)]) -> Run {
    let result = flag_value(argv, "--result");
    let existed = result.as_deref().is_some_and(|p| Path::new(p).exists());
    let mut cmd = sb.command();
    cmd.args(argv);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = sb.exec(&mut cmd);
    assert_eq!(
        run.stdout.lines().count(),
        1,
        "stdout must be one line\n{}",
        ctx(&run)
    );
    assert!(run.stdout.ends_with('\n'), "{}", ctx(&run));
    if let Some(p) = &result
        && !existed
        && let Ok(file) = std::fs::read_to_string(p)
    {
        assert_eq!(file, run.stdout, "result file and stdout differ");
    }
    run
}

/// `handoff <argv>` with `input` on stdin.
fn invoke_with_stdin(sb: &Sandbox, argv: &[String], input: &[u8]) -> Run {
    let mut cmd = sb.command();
    cmd.args(argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        json,
    }
}

/// The value of `flag` in `argv` (`--flag value` or `--flag=value`).
fn flag_value(argv: &[String], flag: &str) -> Option<String> {
    let eq = format!("{flag}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            argv.get(i + 1).cloned()
        } else {
            a.strip_prefix(&eq).map(str::to_owned)
        }
    })
}

/// One flag edit for [`call`]: `Some(value)` replaces (or appends) the flag, `None` drops it.
type Edit = (&'static str, Option<String>);

fn set(flag: &'static str, value: impl Into<String>) -> Edit {
    (flag, Some(value.into()))
}

fn unset(flag: &'static str) -> Edit {
    (flag, None)
}

/// A complete, valid command line — `<verb> --caller-harness claude --harness codex
/// [--mode build] --cwd <repo> --instructions <new file> --result <new path>` — with `edits`
/// applied in order.
fn call(sb: &Sandbox, verb: &str, edits: &[Edit]) -> Vec<String> {
    let mut flags: Vec<(String, String)> = vec![
        ("--caller-harness".into(), "claude".into()),
        ("--harness".into(), "codex".into()),
    ];
    if verb != "advice" {
        flags.push(("--mode".into(), "build".into()));
    }
    flags.push(("--cwd".into(), sb.cwd()));
    flags.push((
        "--instructions".into(),
        sb.instructions("Add a file named after the mode, then report."),
    ));
    flags.push(("--result".into(), sb.result_path()));
    for (flag, value) in edits {
        let at = flags.iter().position(|(f, _)| f == flag);
        match (at, value) {
            (Some(i), Some(v)) => flags[i].1 = v.clone(),
            (Some(i), None) => {
                flags.remove(i);
            }
            (None, Some(v)) => flags.push(((*flag).to_owned(), v.clone())),
            (None, None) => {}
        }
    }
    let mut argv = vec![verb.to_owned()];
    for (f, v) in flags {
        argv.push(f);
        argv.push(v);
    }
    argv
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// What must happen to `--result` on a rejection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResultFile {
    /// It was reserved up front, so it holds the rejection (equal to stdout).
    Written,
    /// It was never reserved (the path itself was refused, or the command line did not parse).
    NotCreated,
}

/// Runs a command line that must be rejected: exit 5, `rejected`, `needle` in the message, no
/// agent process at all (not even a `--version` probe), the worktree untouched, no result fields
/// invented.
fn expect_rejected(
    sb: &Sandbox,
    name: &str,
    argv: &[String],
    env: &[(&str, &str)],
    needle: &str,
    file: ResultFile,
) -> Run {
    sb.record();
    let run = invoke(sb, argv, env);
    let context = format!("case {name:?}: {argv:?}");
    assert_eq!(run.code, 5, "{context}\n{}", ctx(&run));
    expect(&run, 5, "rejected");
    assert!(
        message(&run).contains(needle),
        "{context}: message should contain {needle:?}\n{}",
        ctx(&run)
    );
    let calls = sb.agents.invocations();
    assert!(
        calls.is_empty(),
        "{context}: a rejected request must start no agent process, got {calls:#?}"
    );
    assert_worktree_clean(sb);
    let j = &run.json;
    assert!(j["target"]["version"].is_null(), "{context}\n{}", ctx(&run));
    assert_eq!(
        j["usage"]["source"],
        "not-observed",
        "{context}\n{}",
        ctx(&run)
    );
    assert!(
        j["output"]["response"].is_null(),
        "{context}\n{}",
        ctx(&run)
    );
    assert_eq!(
        j["exit"]["provider"],
        Value::Null,
        "{context}\n{}",
        ctx(&run)
    );
    if let Some(result) = flag_value(argv, "--result") {
        let exists = Path::new(&result).exists();
        match file {
            ResultFile::Written => {
                assert!(
                    exists,
                    "{context}: the reserved result file must hold the rejection"
                );
            }
            ResultFile::NotCreated => {
                assert!(!exists, "{context}: no result file may be created");
            }
        }
    }
    run
}

const MCP_UNSET_ENV: &str = r#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"docs","transport":"stdio","command":"/usr/bin/env","args":["true"],"env":{"TOKEN":{"fromEnv":"HANDOFF_IT_UNSET_TOKEN"}}}]}"#;
const MCP_API_KEY_HEADER: &str = r#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"search","transport":"http","url":"https://mcp.example.com/rpc","headers":{"X-Api-Key":{"fromEnv":"HANDOFF_IT_MCP_KEY"}}}]}"#;
const MCP_KEY_ENV: (&str, &str) = ("HANDOFF_IT_MCP_KEY", "it-mcp-key-0123456789");

/// Creates a symlink to the parent of `dir` and returns `dir` spelled through it.
fn through_linked_parent(sb: &Sandbox, dir: &Path) -> String {
    let link = sb.root.join("parent-link");
    std::os::unix::fs::symlink(dir.parent().unwrap(), &link).unwrap();
    path_str(&link.join(dir.file_name().unwrap()))
}

/// Writes an MCP descriptor into the private directory and returns its path.
fn mcp_file(sb: &Sandbox, name: &str, text: &str) -> String {
    let p = sb.private.join(name);
    std::fs::write(&p, text).unwrap();
    path_str(&p)
}

/// Replaces `bin/<exe>` with a bash wrapper that runs the fake under the same `argv[0]` (so it
/// keeps its identity and its `fake-agent.env`), then — only when it ran in the repository, i.e.
/// for the delegated run and never for a preflight probe (those run in a scratch directory) —
/// runs the shell snippet `after_run` (`$code` holds the fake's exit code), then exits with
/// `$code`.
fn wrap_agent(sb: &Sandbox, exe: &str, after_run: &str) {
    let fake = handoff_testkit::fake_agent_bin();
    let path = sb.agents.bin(exe);
    std::fs::remove_file(&path).unwrap();
    let repo = sb.cwd();
    let script = format!(
        "#!/bin/bash\n(exec -a \"$0\" '{fake}' \"$@\")\ncode=$?\nif [ \"$(pwd -P)\" = '{repo}' ]; then\n{after_run}\nfi\nexit $code\n",
        fake = fake.display(),
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

// ------------------------------------------------------------------------------------------------
// 0 succeeded
// ------------------------------------------------------------------------------------------------

both_adapters!(
    build_succeeded,
    build_in_subdirectory,
    phase_succeeded,
    review_succeeded,
    verify_succeeded,
    advice_succeeded,
    instructions_from_stdin,
    flag_equals_value_syntax,
);

fn writing_run_succeeds(caller: &str, target: &str, mode: &str) {
    let sb = sandbox_in_mode("success");
    let run = sb.delegate(caller, target, mode, &[]);
    expect(&run, 0, "succeeded");
    let j = &run.json;
    assert_eq!(j["operation"], "handoff", "{}", ctx(&run));
    assert_eq!(
        j["caller"],
        json!({"harness": caller, "provenance": "root-asserted"})
    );
    assert_eq!(j["target"]["harness"], target, "{}", ctx(&run));
    assert_eq!(
        j["target"]["version"],
        version_of(target).as_str(),
        "{}",
        ctx(&run)
    );
    assert_eq!(j["mode"], mode, "{}", ctx(&run));
    assert_eq!(
        j["output"]["response"],
        format!("{target} finished {mode}").as_str(),
        "{}",
        ctx(&run)
    );
    assert_eq!(j["exit"]["provider"], 0, "{}", ctx(&run));
    let file = format!("fake-{mode}.txt");
    assert!(
        sb.repo.path().join(&file).is_file(),
        "{file} was not written"
    );
    assert_eq!(j["git"]["changed"], true, "{}", ctx(&run));
    assert!(changed_files(&run).contains(&file), "{}", ctx(&run));
    expect_envelope_usage(&run, target);
    expect_default_receipts(&run, target, Some(mode));
    expect_one_run(&sb, target, true);
    assert_no_scratch_left(&sb);
}

fn build_succeeded(caller: &str, target: &str) {
    writing_run_succeeds(caller, target, "build");
}

/// `--cwd` may be any directory inside the worktree; git evidence stays repository-relative.
fn build_in_subdirectory(caller: &str, target: &str) {
    let sb = sandbox_in_mode("success");
    sb.repo.write("crates/app/README.md", "app\n");
    sb.repo.commit_all("add app");
    let cwd = path_str(&sb.repo.path().join("crates/app"));
    let argv = call(
        &sb,
        "run",
        &[
            set("--caller-harness", caller),
            set("--harness", target),
            set("--cwd", cwd.clone()),
        ],
    );
    let run = invoke(&sb, &argv, &[]);
    expect(&run, 0, "succeeded");
    assert!(Path::new(&cwd).join("fake-build.txt").is_file());
    assert_eq!(
        changed_files(&run),
        ["crates/app/fake-build.txt"],
        "{}",
        ctx(&run)
    );
}

fn phase_succeeded(caller: &str, target: &str) {
    writing_run_succeeds(caller, target, "phase");
}

fn read_only_run_succeeds(caller: &str, target: &str, mode: &str) {
    let sb = sandbox_in_mode("success");
    let run = sb.delegate(caller, target, mode, &[]);
    expect(&run, 0, "succeeded");
    let j = &run.json;
    assert_eq!(j["mode"], mode, "{}", ctx(&run));
    assert_eq!(
        j["target"]["version"],
        version_of(target).as_str(),
        "{}",
        ctx(&run)
    );
    assert_eq!(
        j["output"]["response"],
        format!("{target} finished {mode}").as_str(),
        "{}",
        ctx(&run)
    );
    assert_eq!(j["git"]["changed"], false, "{}", ctx(&run));
    assert!(changed_files(&run).is_empty(), "{}", ctx(&run));
    assert_worktree_clean(&sb);
    expect_envelope_usage(&run, target);
    expect_default_receipts(&run, target, Some(mode));
    expect_one_run(&sb, target, false);
}

fn review_succeeded(caller: &str, target: &str) {
    read_only_run_succeeds(caller, target, "review");
}

fn verify_succeeded(caller: &str, target: &str) {
    read_only_run_succeeds(caller, target, "verify");
}

fn advice_succeeded(caller: &str, target: &str) {
    let sb = sandbox_in_mode("success");
    let ins = sb.instructions("Is the README accurate?");
    let result = sb.result_path();
    let cwd = sb.cwd();
    let argv = strings(&[
        "advice",
        "--caller-harness",
        caller,
        "--harness",
        target,
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
        "--result",
        &result,
    ]);
    let run = invoke(&sb, &argv, &[]);
    expect(&run, 0, "succeeded");
    let j = &run.json;
    assert_eq!(j["operation"], "advice", "{}", ctx(&run));
    assert!(j["mode"].is_null(), "{}", ctx(&run));
    assert_eq!(j["caller"]["harness"], caller, "{}", ctx(&run));
    assert_eq!(j["target"]["harness"], target, "{}", ctx(&run));
    assert_eq!(
        j["target"]["version"],
        version_of(target).as_str(),
        "{}",
        ctx(&run)
    );
    assert_eq!(
        j["output"]["response"],
        format!("{target} finished advice").as_str(),
        "{}",
        ctx(&run)
    );
    assert!(changed_files(&run).is_empty(), "{}", ctx(&run));
    assert_worktree_clean(&sb);
    assert!(
        Path::new(&result).is_file(),
        "the result file must be written"
    );
    expect_envelope_usage(&run, target);
    expect_default_receipts(&run, target, None);
    assert!(j["dag"]["nodes"][0]["mode"].is_null(), "{}", ctx(&run));
    assert_eq!(j["dag"]["nodes"][0]["operation"], "advice", "{}", ctx(&run));
    expect_one_run(&sb, target, false);
}

/// Root advice accepts any registered agent as the caller (run only codex or claude).
#[test]
fn advice_accepts_any_caller() {
    let sb = sandbox_in_mode("success");
    let argv = call(&sb, "advice", &[set("--caller-harness", "grok")]);
    let run = invoke(&sb, &argv, &[]);
    expect(&run, 0, "succeeded");
    assert_eq!(run.json["caller"]["harness"], "grok", "{}", ctx(&run));
    assert_eq!(run.json["dag"]["nodes"][0]["callerHarness"], "grok");
}

fn instructions_from_stdin(caller: &str, target: &str) {
    let sb = sandbox_in_mode("success");
    let result = sb.result_path();
    let cwd = sb.cwd();
    let argv = strings(&[
        "run",
        "--caller-harness",
        caller,
        "--harness",
        target,
        "--mode",
        "build",
        "--cwd",
        &cwd,
        "--instructions",
        "-",
        "--result",
        &result,
    ]);
    let text = "Instructions arriving on stdin: add the build file.";
    let run = invoke_with_stdin(&sb, &argv, text.as_bytes());
    expect(&run, 0, "succeeded");
    assert_eq!(std::fs::read_to_string(&result).unwrap(), run.stdout);
    assert!(
        changed_files(&run).contains(&"fake-build.txt".to_owned()),
        "{}",
        ctx(&run)
    );
    let runs = sb.runs();
    assert_eq!(runs.len(), 1);
    assert!(
        runs[0]["stdin"].as_str().is_some_and(|s| s.contains(text)),
        "the agent's prompt must carry the stdin instructions: {:#?}",
        runs[0]
    );
}

fn flag_equals_value_syntax(caller: &str, target: &str) {
    let sb = sandbox_in_mode("success");
    let ins = sb.instructions("Add the build file.");
    let result = sb.result_path();
    let argv = vec![
        "run".to_owned(),
        format!("--caller-harness={caller}"),
        format!("--harness={target}"),
        "--mode=build".to_owned(),
        format!("--cwd={}", sb.cwd()),
        format!("--instructions={ins}"),
        format!("--result={result}"),
    ];
    let run = invoke(&sb, &argv, &[]);
    expect(&run, 0, "succeeded");
    assert_eq!(run.json["target"]["harness"], target);
    assert_eq!(run.json["caller"]["harness"], caller);
    assert!(Path::new(&result).is_file());
    expect_one_run(&sb, target, true);
}

// ------------------------------------------------------------------------------------------------
// 10 blocked by policy
// ------------------------------------------------------------------------------------------------

both_adapters!(
    build_without_change,
    review_mutation,
    review_mutation_overrides_failure,
);

fn build_without_change(caller: &str, target: &str) {
    let sb = sandbox_in_mode("no-change");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 10, "blocked");
    expect_message(&run, "build completed without a git-visible change");
    assert_eq!(run.json["git"]["changed"], false, "{}", ctx(&run));
    assert!(changed_files(&run).is_empty(), "{}", ctx(&run));
    // The agent itself answered `completed` with exit 0: only git evidence blocks it.
    assert_eq!(run.json["exit"]["provider"], 0, "{}", ctx(&run));
    assert_worktree_clean(&sb);
}

fn review_mutation(caller: &str, target: &str) {
    let sb = sandbox_in_mode("mutate");
    let run = sb.delegate(caller, target, "review", &[]);
    expect(&run, 10, "blocked");
    expect_message(&run, "the worktree changed during the read-only review");
    expect_message(&run, "fake-mutation.txt");
    assert_eq!(run.json["git"]["changed"], true, "{}", ctx(&run));
    assert!(
        changed_files(&run).contains(&"fake-mutation.txt".to_owned()),
        "{}",
        ctx(&run)
    );
    assert_eq!(run.json["exit"]["provider"], 0, "{}", ctx(&run));
}

/// The fake cannot both mutate and fail, so the fake answers `failed` (which alone would be exit
/// 2) and a wrapper around it plants a file in the worktree: the read-only override wins and
/// keeps the earlier failure in the message.
fn review_mutation_overrides_failure(caller: &str, target: &str) {
    let sb = sandbox_in_mode("failed");
    wrap_agent(
        &sb,
        target,
        &format!("echo planted > '{}/wrapper-mutation.txt'", sb.cwd()),
    );
    let run = sb.delegate(caller, target, "review", &[]);
    expect(&run, 10, "blocked");
    expect_message(
        &run,
        "the worktree changed during the read-only review (wrapper-mutation.txt)",
    );
    expect_message(
        &run,
        &format!("before that: {target} reported that the task failed"),
    );
    assert!(
        changed_files(&run).contains(&"wrapper-mutation.txt".to_owned()),
        "{}",
        ctx(&run)
    );
}

/// Claude says on stderr that its sandbox could not be applied and it went on anyway: the
/// adapter's runtime check turns an otherwise successful build into a policy block (10).
#[test]
fn claude_sandbox_not_enforced_is_blocked() {
    let sb = sandbox_in_mode("success");
    wrap_agent(
        &sb,
        "claude",
        "echo 'Warning: sandbox could not be applied (bwrap: setting up uid map: Permission denied); continuing without sandbox' >&2",
    );
    let run = sb.delegate("codex", "claude", "build", &[]);
    expect(&run, 10, "blocked");
    expect_message(
        &run,
        "Claude Code reported that its sandbox was not enforced",
    );
    expect_message(&run, "continuing without sandbox");
    assert_eq!(run.json["exit"]["provider"], 0, "{}", ctx(&run));
}

// ------------------------------------------------------------------------------------------------
// 2 failed / blocked by the agent
// ------------------------------------------------------------------------------------------------

both_adapters!(
    answer_blocked,
    answer_failed,
    agent_error,
    max_turns,
    nonzero_exit_with_valid_answer,
);

fn answer_blocked(caller: &str, target: &str) {
    // A build that is blocked by the agent stays exit 2 (not 10: the no-change rule only turns
    // a would-be success into a policy block).
    let sb = sandbox_in_mode("blocked");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 2, "blocked");
    expect_message(&run, &format!("{target} reported that it is blocked"));
    assert_eq!(run.json["exit"]["provider"], 0, "{}", ctx(&run));
    assert_eq!(
        run.json["output"]["response"],
        format!("{target} finished build").as_str(),
        "the agent's answer is kept\n{}",
        ctx(&run)
    );
    expect_envelope_usage(&run, target);
    assert_worktree_clean(&sb);
}

fn answer_failed(caller: &str, target: &str) {
    let sb = sandbox_in_mode("failed");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 2, "failed");
    expect_message(&run, &format!("{target} reported that the task failed"));
    assert_eq!(run.json["exit"]["provider"], 0, "{}", ctx(&run));
    assert_worktree_clean(&sb);
}

fn agent_error(caller: &str, target: &str) {
    // The CLI reports its own failed model call (exit 1): 2, not 7 — it is not a contract breach.
    let sb = sandbox_in_mode("agent-error");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 2, "failed");
    expect_message(&run, &format!("{target} reported a failure"));
    let detail = match target {
        "codex" => "unexpected status 500",
        _ => "API Error: 500",
    };
    expect_message(&run, detail);
    assert_eq!(run.json["exit"]["provider"], 1, "{}", ctx(&run));
    assert!(run.json["output"]["response"].is_null(), "{}", ctx(&run));
}

fn max_turns(caller: &str, target: &str) {
    // Claude: an `error_max_turns` result event. Codex has no turn limit: the fake reports a
    // failed model call instead. Either way the agent reported its own failure: 2.
    let sb = sandbox_in_mode("max-turns");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 2, "failed");
    expect_message(&run, &format!("{target} reported a failure"));
    assert_eq!(run.json["exit"]["provider"], 1, "{}", ctx(&run));
}

/// A valid `completed` answer that comes with a non-zero exit is still a failure (2): the fake
/// succeeds (and writes its file), then a wrapper exits 3.
fn nonzero_exit_with_valid_answer(caller: &str, target: &str) {
    let sb = sandbox_in_mode("success");
    wrap_agent(&sb, target, "code=3");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 2, "failed");
    expect_message(&run, &format!("{target} exited with code 3"));
    assert_eq!(run.json["exit"]["provider"], 3, "{}", ctx(&run));
    assert!(
        changed_files(&run).contains(&"fake-build.txt".to_owned()),
        "{}",
        ctx(&run)
    );
}

#[test]
fn claude_max_turns_names_error_max_turns() {
    let sb = sandbox_in_mode("max-turns");
    let run = sb.delegate("codex", "claude", "review", &["--max-turns", "3"]);
    expect(&run, 2, "failed");
    expect_message(&run, "error_max_turns");
    expect_message(&run, "Reached maximum number of turns (3)");
    // The envelope still counts what the turns cost.
    assert_eq!(
        run.json["usage"]["source"],
        "provider-envelope",
        "{}",
        ctx(&run)
    );
    assert_eq!(
        run.json["selection"]["requested"]["maxTurns"],
        3,
        "{}",
        ctx(&run)
    );
    assert_eq!(run.json["selection"]["provenance"]["maxTurns"], "explicit");
}

// ------------------------------------------------------------------------------------------------
// 7 invalid output
// ------------------------------------------------------------------------------------------------

both_adapters!(
    crash_without_answer,
    prose,
    schema_drift,
    invalid_utf8,
    oversized
);

/// The agent crashes (exit 23) without printing anything.
///
/// Engine order, step 9: "its answer breaks the contract → failed 7" is checked *before*
/// "non-zero exit → failed 2". A crash leaves no answer at all (Codex: no
/// `--output-last-message` file and no `agent_message`; Claude: no `result` event), and a
/// missing answer is a contract breach, so the verdict is 7 for both adapters. Exit 2 for a
/// non-zero exit applies when a *valid* answer came with it (same as the reference, §3.2 step 12).
/// The provider's exit code and stderr are still reported.
fn crash_without_answer(caller: &str, target: &str) {
    let sb = sandbox_in_mode("exit");
    sb.agents.set(keys::EXIT, "23");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 7, "failed");
    let cause = match target {
        "codex" => "the agent produced no answer",
        _ => "Claude ended without a result event",
    };
    expect_message(&run, cause);
    assert_eq!(run.json["exit"]["provider"], 23, "{}", ctx(&run));
    assert!(
        run.json["diagnostics"]["providerStderr"]
            .as_str()
            .is_some_and(|s| s.contains("simulated crash")),
        "{}",
        ctx(&run)
    );
}

fn prose(caller: &str, target: &str) {
    let sb = sandbox_in_mode("prose");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 7, "failed");
    expect_message(&run, "exactly one JSON object");
    assert!(run.json["output"]["response"].is_null(), "{}", ctx(&run));
    // The agent did the work; only its answer is bad, and that is what decides.
    assert!(
        changed_files(&run).contains(&"fake-build.txt".to_owned()),
        "{}",
        ctx(&run)
    );
}

fn schema_drift(caller: &str, target: &str) {
    let sb = sandbox_in_mode("schema-drift");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 7, "failed");
    expect_message(&run, "schema drift");
    expect_message(&run, "handoff.provider-output.v0");
    assert!(run.json["output"]["response"].is_null(), "{}", ctx(&run));
}

fn invalid_utf8(caller: &str, target: &str) {
    let sb = sandbox_in_mode("invalid-utf8");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 7, "failed");
    // Codex writes the raw bytes into its answer file; Claude's stream-json line carrying them
    // is no longer JSON at all.
    let cause = match target {
        "codex" => "not valid UTF-8",
        _ => "stdout has a line that is not JSON",
    };
    expect_message(&run, cause);
    assert!(run.json["output"]["response"].is_null(), "{}", ctx(&run));
    // The result itself is valid UTF-8 JSON whatever the agent printed.
    assert!(run.json.is_object(), "{}", ctx(&run));
}

fn oversized(caller: &str, target: &str) {
    let sb = sandbox_in_mode("oversized");
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 7, "failed");
    expect_message(&run, "more than 1 MiB");
    assert!(
        run.stdout.len() < 1024 * 1024,
        "the result must stay bounded"
    );
    assert!(run.json["output"]["response"].is_null(), "{}", ctx(&run));
}

// ------------------------------------------------------------------------------------------------
// 3 not_run
// ------------------------------------------------------------------------------------------------

both_adapters!(cli_not_installed, preflight_help_missing_flag);

fn cli_not_installed(caller: &str, target: &str) {
    let sb = Sandbox::new();
    sb.agents.uninstall(target);
    sb.record();
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 3, "not_run");
    expect_message(&run, &format!("{target} was not found on PATH"));
    assert!(run.json["target"]["version"].is_null(), "{}", ctx(&run));
    assert_eq!(run.json["target"]["harness"], target, "{}", ctx(&run));
    assert!(sb.agents.invocations().is_empty());
    assert_worktree_clean(&sb);
}

fn preflight_help_missing_flag(caller: &str, target: &str) {
    let sb = Sandbox::new();
    sb.agents.set(keys::HELP, "missing");
    sb.record();
    let run = sb.delegate(caller, target, "build", &[]);
    expect(&run, 3, "not_run");
    expect_message(&run, &format!("{target} preflight failed"));
    let flag = match target {
        "codex" => "--strict-config",
        _ => "--json-schema",
    };
    expect_message(&run, &format!("does not list {flag}"));
    // The version probe ran before the help probe failed.
    assert_eq!(
        run.json["target"]["version"],
        version_of(target).as_str(),
        "{}",
        ctx(&run)
    );
    assert!(
        sb.runs().is_empty(),
        "only probes may have run: {:#?}",
        sb.runs()
    );
    assert!(
        !sb.agents.invocations().is_empty(),
        "the preflight probes are recorded"
    );
    assert_worktree_clean(&sb);
}

/// The agents this build knows (validated against their real capabilities) but has no adapter
/// for yet: their preflight fails with "the <id> adapter is not available in this build". The
/// set shrinks as adapters land (Grok, Kiro, OpenCode and Cursor at first), so it is read from
/// `handoff capabilities --json` rather than hard-coded.
fn pending_adapters() -> Vec<String> {
    let sb = Sandbox::new();
    let run = sb.run(&["capabilities", "--json"]);
    assert_eq!(run.code, 0, "{}", ctx(&run));
    run.json["providers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["preflight"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("not available in this build"))
        })
        .filter_map(|p| p["id"].as_str().map(str::to_owned))
        .collect()
}

/// A run on an agent whose adapter is not in this build is `not_run`, and not even its
/// `--version` is run.
#[test]
fn pending_adapters_are_not_run() {
    let pending = pending_adapters();
    assert!(
        !pending.iter().any(|p| p == "codex" || p == "claude"),
        "{pending:?}"
    );
    for target in &pending {
        let sb = Sandbox::new();
        sb.record();
        let run = sb.delegate("claude", target, "review", &[]);
        assert_eq!(run.code, 3, "{target}\n{}", ctx(&run));
        expect(&run, 3, "not_run");
        expect_message(
            &run,
            &format!(
                "{target} preflight failed: the {target} adapter is not available in this build"
            ),
        );
        assert_eq!(
            run.json["target"]["harness"],
            target.as_str(),
            "{}",
            ctx(&run)
        );
        assert!(run.json["target"]["version"].is_null(), "{}", ctx(&run));
        let calls = sb.agents.invocations();
        assert!(
            calls.is_empty(),
            "{target}: nothing may be launched: {calls:#?}"
        );
    }
}

/// Claude's settings demand its bubblewrap sandbox with `failIfUnavailable`; without `bwrap` and
/// `socat` the CLI refuses to start and handoff reports `not_run` with the CLI's own words.
#[test]
fn claude_without_sandbox_tools() {
    let sb = Sandbox::new();
    for tool in ["bwrap", "socat"] {
        std::fs::remove_file(sb.agents.bin_dir.join(tool)).unwrap();
    }
    // The default PATH appends the system directories; if this machine has the real tools
    // there, use a PATH of only the fake agents (handoff itself does not need git on PATH).
    let system_has_tools = ["/usr/local/bin", "/usr/bin", "/bin"].iter().any(|d| {
        ["bwrap", "socat"]
            .iter()
            .any(|t| Path::new(d).join(t).exists())
    });
    sb.record();
    let argv = call(
        &sb,
        "run",
        &[set("--caller-harness", "codex"), set("--harness", "claude")],
    );
    let result = flag_value(&argv, "--result").unwrap();
    let mut cmd = sb.command();
    if system_has_tools {
        cmd.env("PATH", &sb.agents.bin_dir);
    }
    cmd.args(&argv);
    let run = sb.exec(&mut cmd);
    assert_eq!(run.stdout.lines().count(), 1, "{}", ctx(&run));
    assert_eq!(std::fs::read_to_string(&result).unwrap(), run.stdout);
    expect(&run, 3, "not_run");
    expect_message(&run, "claude preflight failed");
    expect_message(&run, "sandbox required but unavailable");
    expect_message(&run, "bubblewrap (bwrap) not installed");
    expect_message(&run, "refusing to start");
    assert!(sb.runs().is_empty(), "no run may start: {:#?}", sb.runs());
    assert_worktree_clean(&sb);
}

// ------------------------------------------------------------------------------------------------
// 5 rejected
// ------------------------------------------------------------------------------------------------

/// One command line that must be rejected before anything starts.
struct Rejection {
    name: &'static str,
    argv: fn(&Sandbox) -> Vec<String>,
    env: &'static [(&'static str, &'static str)],
    needle: &'static str,
    file: ResultFile,
}

fn run_rejections(cases: &[Rejection]) {
    for case in cases {
        let sb = Sandbox::new();
        let argv = (case.argv)(&sb);
        expect_rejected(&sb, case.name, &argv, case.env, case.needle, case.file);
    }
}

/// Missing or unknown flags, harnesses and modes, and the verbs this build refuses.
#[test]
fn rejections_arguments() {
    use ResultFile::*;
    run_rejections(&[
        Rejection {
            name: "only --harness",
            argv: |_| strings(&["run", "--harness", "codex"]),
            env: &[],
            needle: "missing argument(s): --caller-harness, --mode, --cwd, --instructions",
            file: NotCreated,
        },
        Rejection {
            name: "no flags at all",
            argv: |_| strings(&["run"]),
            env: &[],
            needle: "missing argument(s): --caller-harness, --harness, --mode, --cwd, --instructions",
            file: NotCreated,
        },
        Rejection {
            name: "advice without flags (no --mode needed)",
            argv: |_| strings(&["advice"]),
            env: &[],
            needle: "missing argument(s): --caller-harness, --harness, --cwd, --instructions",
            file: NotCreated,
        },
        Rejection {
            name: "missing --cwd with --result",
            argv: |sb| call(sb, "run", &[unset("--cwd")]),
            env: &[],
            needle: "missing argument(s): --cwd",
            file: Written,
        },
        Rejection {
            name: "unknown harness",
            argv: |sb| call(sb, "run", &[set("--harness", "aider")]),
            env: &[],
            needle: "--harness \"aider\" is not a known agent",
            file: Written,
        },
        Rejection {
            name: "bad mode",
            argv: |sb| call(sb, "run", &[set("--mode", "deploy")]),
            env: &[],
            needle: "--mode must be one of build, phase, review, verify",
            file: Written,
        },
        Rejection {
            name: "--mode on advice",
            argv: |sb| call(sb, "advice", &[set("--mode", "review")]),
            env: &[],
            needle: "advice does not accept --mode",
            file: Written,
        },
        Rejection {
            name: "caller grok for run",
            argv: |sb| call(sb, "run", &[set("--caller-harness", "grok")]),
            env: &[],
            needle: "root run requires --caller-harness codex or claude, got grok",
            file: Written,
        },
        Rejection {
            name: "run-with-advice without a handoff node",
            argv: |sb| {
                call(
                    sb,
                    "run-with-advice",
                    &[
                        ("--max-handoff-nodes", Some("0".into())),
                        ("--max-nodes", Some("4".into())),
                    ],
                )
            },
            env: &[],
            needle: "--max-handoff-nodes 0 leaves no node for this handoff",
            file: Written,
        },
        Rejection {
            name: "nested call (HANDOFF_SUPERVISOR_CONTEXT)",
            argv: |sb| call(sb, "run", &[]),
            env: &[("HANDOFF_SUPERVISOR_CONTEXT", "1")],
            needle: "nested handoff permits advice only; 'run' was refused",
            file: Written,
        },
        Rejection {
            name: "--dependency at root",
            argv: |sb| call(sb, "run", &[set("--dependency", "requires:x")]),
            env: &[],
            needle: "--dependency is for nested requests",
            file: Written,
        },
        Rejection {
            name: "duplicate --harness",
            argv: |sb| {
                let mut argv = call(sb, "run", &[]);
                argv.extend(strings(&["--harness", "claude"]));
                argv
            },
            env: &[],
            needle: "cannot be used multiple times",
            file: NotCreated,
        },
        Rejection {
            name: "unknown flag",
            argv: |sb| call(sb, "run", &[set("--frobnicate", "yes")]),
            env: &[],
            needle: "unexpected argument '--frobnicate'",
            file: NotCreated,
        },
    ]);
}

/// Selection and grant controls the target does not have, and malformed values.
#[test]
fn rejections_controls() {
    use ResultFile::*;
    run_rejections(&[
        Rejection {
            name: "codex --web-search true",
            argv: |sb| call(sb, "run", &[set("--web-search", "true")]),
            env: &[],
            needle: "webSearch is unsupported for codex",
            file: Written,
        },
        Rejection {
            name: "codex --max-turns 5",
            argv: |sb| call(sb, "run", &[set("--max-turns", "5")]),
            env: &[],
            needle: "--max-turns is unsupported for codex",
            file: Written,
        },
        Rejection {
            name: "codex --effort max (Codex has no max)",
            argv: |sb| call(sb, "run", &[set("--effort", "max")]),
            env: &[],
            needle: "--effort \"max\" is unsupported for codex",
            file: Written,
        },
        Rejection {
            name: "claude --effort bogus",
            argv: |sb| {
                call(
                    sb,
                    "run",
                    &[
                        set("--caller-harness", "codex"),
                        set("--harness", "claude"),
                        set("--effort", "bogus"),
                    ],
                )
            },
            env: &[],
            needle: "--effort \"bogus\" is unsupported for claude; expected one of: low, medium, high, xhigh, max",
            file: Written,
        },
        Rejection {
            name: "cursor --effort high",
            argv: |sb| {
                call(
                    sb,
                    "run",
                    &[
                        set("--harness", "cursor"),
                        set("--mode", "review"),
                        set("--effort", "high"),
                    ],
                )
            },
            env: &[],
            needle: "--effort is unsupported for cursor",
            file: Written,
        },
        Rejection {
            name: "--bash maybe",
            argv: |sb| call(sb, "run", &[set("--bash", "maybe")]),
            env: &[],
            needle: "--bash must be 'true' or 'false', got \"maybe\"",
            file: Written,
        },
        Rejection {
            name: "claude --max-turns 0",
            argv: |sb| {
                call(
                    sb,
                    "run",
                    &[set("--harness", "claude"), set("--max-turns", "0")],
                )
            },
            env: &[],
            needle: "--max-turns must be between 1 and 100, got 0",
            file: Written,
        },
        Rejection {
            name: "claude --max-turns 101",
            argv: |sb| {
                call(
                    sb,
                    "run",
                    &[set("--harness", "claude"), set("--max-turns", "101")],
                )
            },
            env: &[],
            needle: "--max-turns must be between 1 and 100, got 101",
            file: Written,
        },
        Rejection {
            name: "claude --max-turns abc",
            argv: |sb| {
                call(
                    sb,
                    "run",
                    &[set("--harness", "claude"), set("--max-turns", "abc")],
                )
            },
            env: &[],
            needle: "--max-turns must be a whole number, got \"abc\"",
            file: Written,
        },
        Rejection {
            name: "--timeout-ms above --root-timeout-ms",
            argv: |sb| {
                call(
                    sb,
                    "run",
                    &[
                        set("--timeout-ms", "200000"),
                        set("--root-timeout-ms", "100000"),
                    ],
                )
            },
            env: &[],
            needle: "--timeout-ms must not exceed --root-timeout-ms",
            file: Written,
        },
        Rejection {
            name: "--max-handoff-nodes 0 on run",
            argv: |sb| {
                call(
                    sb,
                    "run",
                    &[
                        set("--max-handoff-nodes", "0"),
                        set("--max-advice-nodes", "16"),
                    ],
                )
            },
            env: &[],
            needle: "--max-handoff-nodes 0 leaves no node for this handoff",
            file: Written,
        },
        Rejection {
            name: "--max-handoff-nodes 0 with default advice nodes",
            argv: |sb| call(sb, "run", &[set("--max-handoff-nodes", "0")]),
            env: &[],
            needle: "--max-advice-nodes plus --max-handoff-nodes must be at least --max-nodes",
            file: Written,
        },
        Rejection {
            name: "--max-advice-nodes 0 on advice",
            argv: |sb| {
                call(
                    sb,
                    "advice",
                    &[
                        set("--max-advice-nodes", "0"),
                        set("--max-handoff-nodes", "16"),
                    ],
                )
            },
            env: &[],
            needle: "--max-advice-nodes 0 leaves no node for this advice request",
            file: Written,
        },
    ]);
}

/// `--cwd` must be an absolute, normalized, symlink-free directory inside a git worktree.
#[test]
fn rejections_cwd() {
    use ResultFile::*;
    run_rejections(&[
        Rejection {
            name: "relative --cwd",
            argv: |sb| call(sb, "run", &[set("--cwd", "repo")]),
            env: &[],
            needle: "--cwd must be an absolute path",
            file: Written,
        },
        Rejection {
            name: "--cwd with ..",
            argv: |sb| {
                let name = sb.repo.path().file_name().unwrap().to_string_lossy();
                let cwd = format!("{}/../{name}", sb.cwd());
                call(sb, "run", &[set("--cwd", cwd)])
            },
            env: &[],
            needle: "--cwd must be normalized",
            file: Written,
        },
        Rejection {
            name: "--cwd through a symlinked ancestor",
            argv: |sb| {
                let cwd = through_linked_parent(sb, sb.repo.path());
                call(sb, "run", &[set("--cwd", cwd)])
            },
            env: &[],
            needle: "goes through a symlink",
            file: Written,
        },
        Rejection {
            // Refused, as it must be; the message is checked (and wrong) in
            // `symlink_as_last_component_is_reported_as_a_symlink`.
            name: "--cwd is itself a symlink",
            argv: |sb| {
                let link = sb.root.join("repo-link");
                std::os::unix::fs::symlink(sb.repo.path(), &link).unwrap();
                call(sb, "run", &[set("--cwd", path_str(&link))])
            },
            env: &[],
            needle: "--cwd",
            file: Written,
        },
        Rejection {
            name: "--cwd that is a file",
            argv: |sb| {
                let cwd = path_str(&sb.repo.path().join("README.md"));
                call(sb, "run", &[set("--cwd", cwd)])
            },
            env: &[],
            needle: "is not a directory",
            file: Written,
        },
        Rejection {
            name: "--cwd not in a git repository",
            argv: |sb| {
                let dir = sb.root.join("not-a-repo");
                std::fs::create_dir(&dir).unwrap();
                call(sb, "run", &[set("--cwd", path_str(&dir))])
            },
            env: &[],
            needle: "is not inside a git worktree",
            file: Written,
        },
    ]);
}

/// `--instructions` must be a private, regular, non-blank UTF-8 file of at most 2,000,000 bytes.
#[test]
fn rejections_instructions() {
    use ResultFile::*;
    fn with_file(sb: &Sandbox, name: &str, bytes: &[u8]) -> Vec<String> {
        let p = sb.private.join(name);
        std::fs::write(&p, bytes).unwrap();
        call(sb, "run", &[set("--instructions", path_str(&p))])
    }
    run_rejections(&[
        Rejection {
            name: "missing instructions file",
            argv: |sb| {
                let p = sb.private.join("does-not-exist.txt");
                call(sb, "run", &[set("--instructions", path_str(&p))])
            },
            env: &[],
            needle: "No such file or directory",
            file: Written,
        },
        Rejection {
            name: "relative instructions path",
            argv: |sb| call(sb, "run", &[set("--instructions", "instructions.txt")]),
            env: &[],
            needle: "--instructions must be an absolute path",
            file: Written,
        },
        Rejection {
            name: "empty instructions",
            argv: |sb| with_file(sb, "empty.txt", b""),
            env: &[],
            needle: "instructions are blank",
            file: Written,
        },
        Rejection {
            name: "blank instructions",
            argv: |sb| with_file(sb, "blank.txt", b"  \n\t \n"),
            env: &[],
            needle: "instructions are blank",
            file: Written,
        },
        Rejection {
            name: "instructions not UTF-8",
            argv: |sb| with_file(sb, "latin1.txt", b"fix the caf\xe9 \xff\xfe"),
            env: &[],
            needle: "instructions are not valid UTF-8",
            file: Written,
        },
        Rejection {
            name: "instructions with a NUL byte",
            argv: |sb| with_file(sb, "nul.txt", b"fix\0it"),
            env: &[],
            needle: "instructions contain a NUL byte",
            file: Written,
        },
        Rejection {
            name: "instructions are a symlink",
            argv: |sb| {
                let real = sb.instructions("Add the build file.");
                let link = sb.private.join("link.txt");
                std::os::unix::fs::symlink(&real, &link).unwrap();
                call(sb, "run", &[set("--instructions", path_str(&link))])
            },
            env: &[],
            needle: "is a symlink",
            file: Written,
        },
        Rejection {
            name: "instructions are a directory",
            argv: |sb| {
                let dir = sb.private.join("dir");
                std::fs::create_dir(&dir).unwrap();
                call(sb, "run", &[set("--instructions", path_str(&dir))])
            },
            env: &[],
            needle: "is not a regular file",
            file: Written,
        },
        Rejection {
            name: "instructions of 2,000,001 bytes",
            argv: |sb| with_file(sb, "huge.txt", &vec![b'a'; 2_000_001]),
            env: &[],
            needle: "larger than 2000000 bytes",
            file: Written,
        },
    ]);

    // The same limit on stdin.
    let sb = Sandbox::new();
    sb.record();
    let argv = call(&sb, "run", &[set("--instructions", "-")]);
    let run = invoke_with_stdin(&sb, &argv, &vec![b'a'; 2_000_001]);
    expect(&run, 5, "rejected");
    expect_message(&run, "larger than 2000000 bytes");
    assert!(sb.agents.invocations().is_empty());
    let result = flag_value(&argv, "--result").unwrap();
    assert_eq!(std::fs::read_to_string(result).unwrap(), run.stdout);
}

/// MCP descriptors are checked against the target, and planned (secrets resolved, headers
/// mapped) before any process starts: planning failures are `rejected`, not `failed` (B6).
#[test]
fn rejections_mcp() {
    use ResultFile::*;
    run_rejections(&[
        Rejection {
            name: "codex: MCP secret variable unset",
            argv: |sb| {
                let mcp = mcp_file(sb, "mcp.json", MCP_UNSET_ENV);
                call(sb, "run", &[set("--mcp-config", mcp)])
            },
            env: &[],
            needle: "MCP environment reference 'HANDOFF_IT_UNSET_TOKEN' is not set",
            file: Written,
        },
        Rejection {
            name: "claude: MCP secret variable unset",
            argv: |sb| {
                let mcp = mcp_file(sb, "mcp.json", MCP_UNSET_ENV);
                call(
                    sb,
                    "run",
                    &[
                        set("--caller-harness", "codex"),
                        set("--harness", "claude"),
                        set("--mcp-config", mcp),
                    ],
                )
            },
            env: &[],
            needle: "MCP environment reference 'HANDOFF_IT_UNSET_TOKEN' is not set",
            file: Written,
        },
        Rejection {
            name: "codex: http MCP server with a non-Authorization header",
            argv: |sb| {
                let mcp = mcp_file(sb, "mcp.json", MCP_API_KEY_HEADER);
                call(sb, "run", &[set("--mcp-config", mcp)])
            },
            env: &[MCP_KEY_ENV],
            needle: "Codex can only send an Authorization header to MCP server 'search'",
            file: Written,
        },
        Rejection {
            name: "grok: no MCP support",
            argv: |sb| {
                let mcp = mcp_file(sb, "mcp.json", MCP_API_KEY_HEADER);
                call(
                    sb,
                    "run",
                    &[
                        set("--harness", "grok"),
                        set("--mode", "review"),
                        set("--mcp-config", mcp),
                    ],
                )
            },
            env: &[MCP_KEY_ENV],
            needle: "--mcp-config is unsupported for grok",
            file: Written,
        },
        Rejection {
            name: "MCP descriptor with a literal secret",
            argv: |sb| {
                let mcp = mcp_file(
                    sb,
                    "mcp.json",
                    r#"{"schemaVersion":"handoff.mcp.v1","servers":[{"name":"a","transport":"stdio","command":"/usr/bin/env","args":[],"env":{"T":"literal"}}]}"#,
                );
                call(sb, "run", &[set("--mcp-config", mcp)])
            },
            env: &[],
            needle: "MCP descriptor is invalid",
            file: Written,
        },
    ]);
}

/// The planned-but-rejected MCP run still reports the receipts it had built: the request was
/// valid, only the plan failed.
#[test]
fn mcp_rejection_keeps_receipts() {
    let sb = Sandbox::new();
    let mcp = mcp_file(&sb, "mcp.json", MCP_UNSET_ENV);
    let argv = call(&sb, "run", &[set("--mcp-config", mcp)]);
    let run = expect_rejected(
        &sb,
        "receipts",
        &argv,
        &[],
        "HANDOFF_IT_UNSET_TOKEN",
        ResultFile::Written,
    );
    let j = &run.json;
    assert_eq!(
        j["grants"]["mcp"]["servers"],
        json!(["docs"]),
        "{}",
        ctx(&run)
    );
    assert_eq!(j["grants"]["resolved"]["mcp"], true, "{}", ctx(&run));
    assert_eq!(j["dag"]["nodes"][0]["state"], "rejected", "{}", ctx(&run));
    assert_eq!(j["git"]["changed"], false, "{}", ctx(&run));
}

/// The same header descriptor is fine for Claude, which can send any header: the Codex
/// rejection above is about Codex, not about the descriptor.
#[test]
fn mcp_api_key_header_is_accepted_by_claude() {
    let sb = sandbox_in_mode("success");
    let mcp = mcp_file(&sb, "mcp.json", MCP_API_KEY_HEADER);
    let argv = call(
        &sb,
        "run",
        &[
            set("--caller-harness", "codex"),
            set("--harness", "claude"),
            set("--mcp-config", mcp),
        ],
    );
    let run = invoke(&sb, &argv, &[MCP_KEY_ENV]);
    expect(&run, 0, "succeeded");
    assert_eq!(run.json["grants"]["mcp"]["servers"], json!(["search"]));
    assert!(
        !run.stdout.contains(MCP_KEY_ENV.1),
        "the MCP secret must not appear in the result"
    );
}

// ------------------------------------------------------------------------------------------------
// 5 rejected: the result location
// ------------------------------------------------------------------------------------------------

#[test]
fn rejections_result_path() {
    use ResultFile::*;
    run_rejections(&[
        Rejection {
            name: "relative --result",
            argv: |sb| call(sb, "run", &[set("--result", "result.json")]),
            env: &[],
            needle: "--result must be an absolute path",
            file: NotCreated,
        },
        Rejection {
            name: "--result in a missing directory",
            argv: |sb| {
                let p = sb.private.join("missing-dir").join("result.json");
                call(sb, "run", &[set("--result", path_str(&p))])
            },
            env: &[],
            needle: "--result directory",
            file: NotCreated,
        },
        Rejection {
            name: "--result through a symlinked ancestor",
            argv: |sb| {
                let private = through_linked_parent(sb, &sb.private);
                call(sb, "run", &[set("--result", format!("{private}/r.json"))])
            },
            env: &[],
            needle: "goes through a symlink",
            file: NotCreated,
        },
        Rejection {
            // Refused, as it must be; the message is checked (and wrong) in
            // `symlink_as_last_component_is_reported_as_a_symlink`.
            name: "--result in a directory that is a symlink",
            argv: |sb| {
                let link = sb.root.join("private-link");
                std::os::unix::fs::symlink(&sb.private, &link).unwrap();
                call(
                    sb,
                    "run",
                    &[set("--result", path_str(&link.join("r.json")))],
                )
            },
            env: &[],
            needle: "--result directory",
            file: NotCreated,
        },
    ]);
}

/// A symlink as the *last* component of `--cwd` (or of the `--result` directory) is refused, but
/// the message says "is not a directory" (it is one, through the link) instead of naming the
/// symlink and the real path to use, as a symlinked ancestor does.
#[test]
fn symlink_as_last_component_is_reported_as_a_symlink() {
    let sb = Sandbox::new();
    let link = sb.root.join("repo-link");
    std::os::unix::fs::symlink(sb.repo.path(), &link).unwrap();
    let argv = call(&sb, "run", &[set("--cwd", path_str(&link))]);
    let run = expect_rejected(&sb, "cwd link", &argv, &[], "--cwd", ResultFile::Written);
    expect_message(&run, "symlink");
    expect_message(&run, &sb.cwd());

    let sb = Sandbox::new();
    let link = sb.root.join("private-link");
    std::os::unix::fs::symlink(&sb.private, &link).unwrap();
    let argv = call(
        &sb,
        "run",
        &[set("--result", path_str(&link.join("r.json")))],
    );
    let run = expect_rejected(
        &sb,
        "result link",
        &argv,
        &[],
        "--result",
        ResultFile::NotCreated,
    );
    expect_message(&run, "symlink");
}

#[test]
fn result_already_exists_is_untouched() {
    let sb = Sandbox::new();
    let result = sb.result_path();
    std::fs::write(&result, "precious\n").unwrap();
    let argv = call(&sb, "run", &[set("--result", result.clone())]);
    let run = expect_rejected(
        &sb,
        "existing --result",
        &argv,
        &[],
        "already exists; handoff never overwrites",
        ResultFile::Written, // it exists (it was there before); its content is checked below
    );
    assert_eq!(std::fs::read_to_string(&result).unwrap(), "precious\n");
    assert_ne!(run.stdout, "precious\n");
}

/// Reference bug B1: a result directory others can write must be refused before anything runs,
/// even for a build (which would otherwise change the worktree first).
fn result_dir_writable_by_others(caller: &str, target: &str) {
    let sb = sandbox_in_mode("success");
    let shared = sb.root.join("shared-results");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let result = path_str(&shared.join("result.json"));
    let argv = call(
        &sb,
        "run",
        &[
            set("--caller-harness", caller),
            set("--harness", target),
            set("--result", result.clone()),
        ],
    );
    let run = expect_rejected(
        &sb,
        "0777 result directory",
        &argv,
        &[],
        "is writable by group or others",
        ResultFile::NotCreated,
    );
    assert!(!sb.repo.path().join("fake-build.txt").exists());
    assert_eq!(run.json["target"]["harness"], target, "{}", ctx(&run));
    assert_eq!(run.json["mode"], "build", "{}", ctx(&run));
    assert!(std::fs::read_dir(&shared).unwrap().next().is_none());
}

both_adapters!(result_dir_writable_by_others);

// ------------------------------------------------------------------------------------------------
// 7: the reserved result file was tampered with during the run
// ------------------------------------------------------------------------------------------------

/// Runs a successful build whose wrapper does `tamper` (a shell snippet; `$RESULT` is the result
/// path) after the agent ran. handoff must not write into what is no longer its file, and stdout
/// carries a consistent `failed`/7 pair.
fn tampered_result(caller: &str, target: &str, tamper: &str, needle: &str) {
    let sb = sandbox_in_mode("success");
    let result = sb.result_path();
    wrap_agent(&sb, target, &format!("RESULT='{result}'\n{tamper}"));
    let argv = call(
        &sb,
        "run",
        &[
            set("--caller-harness", caller),
            set("--harness", target),
            set("--result", result.clone()),
        ],
    );
    let run = sb.exec(sb.command().args(&argv));
    assert_eq!(run.stdout.lines().count(), 1, "{}", ctx(&run));
    expect(&run, 7, "failed");
    expect_message(&run, needle);
    assert_eq!(
        std::fs::read_to_string(&result).unwrap(),
        "intruder\n",
        "handoff must leave the intruder's file alone"
    );
}

fn result_file_replaced_during_run(caller: &str, target: &str) {
    tampered_result(
        caller,
        target,
        "rm -f \"$RESULT\"; echo intruder > \"$RESULT\"",
        "was replaced during the run",
    );
}

fn result_file_written_during_run(caller: &str, target: &str) {
    tampered_result(
        caller,
        target,
        "echo intruder >> \"$RESULT\"",
        "was written by someone else",
    );
}

both_adapters!(
    result_file_replaced_during_run,
    result_file_written_during_run
);

// ------------------------------------------------------------------------------------------------
// B2: early failures echo what was parsed, never invent
// ------------------------------------------------------------------------------------------------

#[test]
fn early_rejection_echoes_only_what_was_parsed() {
    let sb = Sandbox::new();
    let run = expect_rejected(
        &sb,
        "only --harness codex",
        &strings(&["run", "--harness", "codex"]),
        &[],
        "missing argument(s)",
        ResultFile::NotCreated,
    );
    let j = &run.json;
    assert_eq!(j["operation"], "handoff", "{}", ctx(&run));
    assert_eq!(j["target"]["harness"], "codex", "{}", ctx(&run));
    assert!(j["caller"].is_null(), "{}", ctx(&run));
    assert!(j["mode"].is_null(), "{}", ctx(&run));
    for key in [
        "requestHash",
        "intentHash",
        "selection",
        "grants",
        "delegation",
        "lineage",
        "git",
        "dag",
    ] {
        assert!(j[key].is_null(), "{key} must be null\n{}", ctx(&run));
    }
}

#[test]
fn early_rejection_of_unknown_harness_leaves_target_null() {
    let sb = Sandbox::new();
    let argv = call(&sb, "run", &[set("--harness", "aider")]);
    let run = expect_rejected(
        &sb,
        "unknown harness",
        &argv,
        &[],
        "is not a known agent",
        ResultFile::Written,
    );
    let j = &run.json;
    assert!(j["target"]["harness"].is_null(), "{}", ctx(&run));
    assert_eq!(j["caller"]["harness"], "claude", "{}", ctx(&run));
    assert_eq!(j["mode"], "build", "{}", ctx(&run));
}

#[test]
fn early_rejection_of_bad_mode_leaves_mode_null() {
    let sb = Sandbox::new();
    let argv = call(&sb, "run", &[set("--mode", "deploy")]);
    let run = expect_rejected(&sb, "bad mode", &argv, &[], "--mode", ResultFile::Written);
    assert!(run.json["mode"].is_null(), "{}", ctx(&run));
    assert_eq!(run.json["target"]["harness"], "codex", "{}", ctx(&run));
}

#[test]
fn early_rejection_of_advice_echoes_advice() {
    let sb = Sandbox::new();
    let argv = call(&sb, "advice", &[set("--mode", "review")]);
    let run = expect_rejected(
        &sb,
        "advice --mode",
        &argv,
        &[],
        "--mode",
        ResultFile::Written,
    );
    assert_eq!(run.json["operation"], "advice", "{}", ctx(&run));
    assert!(run.json["mode"].is_null(), "{}", ctx(&run));
}

/// When the command line does not even parse, what can still be read is echoed.
#[test]
fn unparsable_command_line_echoes_what_it_can() {
    let sb = Sandbox::new();
    let argv = call(
        &sb,
        "run",
        &[set("--mode", "review"), set("--frobnicate", "1")],
    );
    let run = expect_rejected(
        &sb,
        "unknown flag",
        &argv,
        &[],
        "unexpected argument",
        ResultFile::NotCreated,
    );
    let j = &run.json;
    assert_eq!(j["operation"], "handoff", "{}", ctx(&run));
    assert_eq!(j["caller"]["harness"], "claude", "{}", ctx(&run));
    assert_eq!(j["target"]["harness"], "codex", "{}", ctx(&run));
    assert_eq!(j["mode"], "review", "{}", ctx(&run));

    let sb = Sandbox::new();
    let argv = vec![
        "advice".to_owned(),
        "--caller-harness=grok".to_owned(),
        "--harness=nobody".to_owned(),
        "--bogus".to_owned(),
    ];
    let run = expect_rejected(
        &sb,
        "advice, unknown flag",
        &argv,
        &[],
        "unexpected argument",
        ResultFile::NotCreated,
    );
    let j = &run.json;
    assert_eq!(j["operation"], "advice", "{}", ctx(&run));
    assert_eq!(j["caller"]["harness"], "grok", "{}", ctx(&run));
    assert!(j["target"]["harness"].is_null(), "{}", ctx(&run));
}

// ------------------------------------------------------------------------------------------------
// Version, help, capabilities
// ------------------------------------------------------------------------------------------------

#[test]
fn version_and_help() {
    let sb = Sandbox::new();
    sb.record();

    let run = sb.run(&["--version"]);
    assert_eq!(run.code, 0, "{}", ctx(&run));
    assert_eq!(
        run.stdout.trim(),
        format!("handoff {}", env!("CARGO_PKG_VERSION"))
    );

    for args in [&["--help"][..], &["run", "--help"], &["advice", "--help"]] {
        let run = sb.run(args);
        assert_eq!(run.code, 0, "{args:?}\n{}", ctx(&run));
        for needle in [
            "Exit codes:",
            "0   succeeded",
            "2   the agent failed",
            "3   the agent CLI is unavailable",
            "5   the request was rejected",
            "7   the agent's output",
            "8   the per-node timeout",
            "9   cancelled",
            "10  blocked by policy",
        ] {
            assert!(
                run.stdout.contains(needle),
                "{args:?} must mention {needle:?}\n{}",
                ctx(&run)
            );
        }
    }
    let run = sb.run(&["run", "--help"]);
    for flag in [
        "--caller-harness",
        "--harness",
        "--mode",
        "--cwd",
        "--instructions",
        "--result",
    ] {
        assert!(run.stdout.contains(flag), "run --help must list {flag}");
    }
    assert!(
        sb.agents.invocations().is_empty(),
        "help must not probe any agent"
    );
}

#[test]
fn capabilities_json() {
    let sb = Sandbox::new();
    // Probes are recorded: the scratch directories they ran in are checked below.
    sb.record();
    let run = sb.run(&["capabilities", "--json"]);
    assert_eq!(run.code, 0, "{}", ctx(&run));
    assert_eq!(run.stdout.lines().count(), 1, "{}", ctx(&run));
    let j = &run.json;
    assert_eq!(
        j["schemaVersion"],
        "handoff.capabilities.v1",
        "{}",
        ctx(&run)
    );
    let providers = j["providers"].as_array().unwrap();
    assert_eq!(providers.len(), 10, "{}", ctx(&run));
    let ids: Vec<&str> = providers.iter().filter_map(|p| p["id"].as_str()).collect();
    assert_eq!(
        ids,
        [
            "codex",
            "grok",
            "grok-community",
            "kiro",
            "claude",
            "opencode",
            "cursor",
            "copilot",
            "gemini",
            "qwen"
        ]
    );
    for p in providers {
        let id = p["id"].as_str().unwrap();
        // Full receivers, run against the real CLIs: Claude Code, Codex, OpenCode, Copilot,
        // Gemini, Qwen. Cursor and Kiro receive from the note and a recap, verified against
        // recorded outputs; Cursor's sessions are read as a source. Grok keeps no sessions.
        let (receiver, verified) = match id {
            "claude" | "codex" | "opencode" | "copilot" | "gemini" | "qwen" => {
                ("full", serde_json::json!("real"))
            }
            "cursor" | "kiro" => ("fresh-agent", serde_json::json!("recorded")),
            _ => ("none", serde_json::Value::Null),
        };
        let full = receiver == "full";
        assert_eq!(
            p["continuation"],
            serde_json::json!({
                "receive": receiver != "none",
                "sessions": full || id == "cursor",
                "receiver": receiver,
                "verified": verified,
            }),
            "{id}"
        );
        let pf = &p["preflight"];
        // Every fake CLI is on PATH.
        assert_eq!(pf["installed"], true, "{id}: {pf}");
        if matches!(id, "codex" | "claude") {
            assert_eq!(pf["ok"], true, "{id}: {pf}");
            assert_eq!(pf["version"], version_of(id).as_str(), "{id}: {pf}");
        }
        match pf["ok"].as_bool() {
            Some(true) => {
                assert!(pf["reason"].is_null(), "{id}: {pf}");
                assert!(pf["version"].is_string(), "{id}: {pf}");
            }
            Some(false) => {
                let reason = pf["reason"].as_str().unwrap_or("");
                assert!(!reason.trim().is_empty(), "{id} needs a reason: {pf}");
            }
            None => panic!("{id}: preflight.ok must be a boolean: {pf}"),
        }
    }
    assert_no_scratch_left(&sb);

    // The human form names every agent too.
    let run = sb.run(&["capabilities"]);
    assert_eq!(run.code, 0, "{}", ctx(&run));
    for id in ids {
        assert!(
            run.stdout.contains(id),
            "{id} missing from:\n{}",
            run.stdout
        );
    }
}

#[test]
fn an_argument_that_is_not_utf8_is_rejected_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let sb = Sandbox::new();
    let bad = std::ffi::OsStr::from_bytes(b"/tmp/\xff");
    let ins = sb.instructions("Review.");
    let mut cmd = sb.command();
    cmd.args(["run", "--caller-harness", "claude", "--harness", "codex"])
        .args(["--mode", "review", "--instructions", &ins, "--cwd"])
        .arg(bad);
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.json["status"], "rejected", "{run:?}");
    assert!(
        run.json["diagnostics"]["message"]
            .as_str()
            .unwrap()
            .contains("is not valid UTF-8"),
        "{run:?}"
    );
    // Any other command: one line on stderr, the usage exit code.
    let mut cmd = sb.command();
    cmd.args(["checkpoint", "--cwd"]).arg(bad).arg("a.txt");
    let run = sb.exec(&mut cmd);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("is not valid UTF-8"), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
}
