//! Nested advice end to end: a root run with advice, its worker (the fake agent) calling
//! `handoff advice` through the command its prompt names, the supervisor admitting each request
//! into the budgeted DAG and running the adviser on the worker's worktree, read-only (live), or
//! on a snapshot of it when the adviser could write.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use handoff_testkit::keys::{
    ADVICE, ADVICE_ARGS, ADVICE_DELAY_MS, ADVICE_FROM, ADVICE_QUESTION, ADVICE_STRIP, CONTEXT_FILE,
    MODE, READY_FILE, SHELL, WAIT_FILE,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::{Run, Sandbox};

const AGENTS: [&str; 8] = [
    "codex", "grok", "kiro", "claude", "opencode", "cursor", "gemini", "qwen",
];

fn caller_for(target: &str) -> &'static str {
    if target == "codex" { "claude" } else { "codex" }
}

/// `handoff <verb> --caller-harness … --harness <target> [--mode <mode>] --cwd <repo>
/// --instructions <file> <extra…>`.
pub(crate) fn root_args(
    sb: &Sandbox,
    verb: &str,
    target: &str,
    mode: Option<&str>,
    extra: &[&str],
) -> Vec<String> {
    let ins = sb.instructions("Look at the repository and do the task; ask for advice if useful.");
    let mut args: Vec<String> = vec![
        verb.into(),
        "--caller-harness".into(),
        caller_for(target).into(),
        "--harness".into(),
        target.into(),
    ];
    if let Some(m) = mode {
        args.extend(["--mode".into(), m.into()]);
    }
    args.extend(["--cwd".into(), sb.cwd(), "--instructions".into(), ins]);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

/// A sandbox whose root worker will ask each of `targets` (comma-separated) for advice.
fn advising(targets: impl AsRef<std::ffi::OsStr>) -> Sandbox {
    let sb = Sandbox::new();
    sb.record();
    sb.agents.set(ADVICE, targets);
    sb
}

/// Starts `handoff <args>` in the background, stdout and stderr piped.
fn spawn(sb: &Sandbox, args: &[String]) -> std::process::Child {
    sb.command()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn root(sb: &Sandbox, verb: &str, target: &str, mode: Option<&str>, extra: &[&str]) -> Run {
    let args = root_args(sb, verb, target, mode, extra);
    let run = sb.exec(sb.command().args(&args));
    assert_eq!(run.stdout.lines().count(), 1, "one line on stdout: {run:?}");
    run
}

/// The prompt of an invocation: on stdin, or as an argument (grok, kiro, cursor).
fn prompt_of(record: &Value) -> Option<String> {
    let marker = "delegated coding agent";
    record["stdin"]
        .as_str()
        .filter(|s| s.contains(marker))
        .map(str::to_owned)
        .or_else(|| {
            record["argv"]
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .find(|a| a.contains(marker))
                .map(str::to_owned)
        })
}

/// Agent runs (not probes), with their prompts.
fn agent_runs(sb: &Sandbox) -> Vec<(Value, String)> {
    sb.agents
        .invocations()
        .into_iter()
        .filter_map(|r| prompt_of(&r).map(|p| (r, p)))
        .collect()
}

/// The invocation record of the root's worker: the one run that acted on the advice switches
/// (advisers started by the supervisor don't, see `HANDOFF_FAKE_ADVICE_FROM`).
fn worker(sb: &Sandbox) -> Value {
    let mut runs: Vec<Value> = sb
        .agents
        .invocations()
        .into_iter()
        .filter(|r| r.get("nested").is_some())
        .collect();
    assert!(!runs.is_empty(), "no worker asked for advice");
    // The root's worker starts first (advisers asking further come later).
    let mut w = runs.remove(0);
    if let Some(p) = prompt_of(&w) {
        w["prompt"] = Value::String(p);
    }
    w
}

/// The nested calls the worker made: (target, exit code, parsed result).
fn nested(record: &Value) -> Vec<(String, i64, Value)> {
    record["nested"]
        .as_array()
        .unwrap_or_else(|| panic!("no nested calls recorded: {record:#}"))
        .iter()
        .map(|c| {
            let stdout = c["stdout"].as_str().unwrap_or("");
            let json: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
            (
                c["target"].as_str().unwrap().to_owned(),
                c["exitCode"].as_i64().unwrap_or(-1),
                json,
            )
        })
        .collect()
}

fn sha256_tagged(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

pub(crate) fn dag_nodes(run: &Run) -> Vec<Value> {
    run.json["dag"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Checks the counters of a final DAG against its nodes.
pub(crate) fn assert_dag_consistent(dag: &Value) {
    let nodes = dag["nodes"].as_array().unwrap();
    let advice = nodes.iter().filter(|n| n["operation"] == "advice").count() as u64;
    let handoff = nodes.len() as u64 - advice;
    let l = &dag["limits"];
    let r = &dag["remaining"];
    assert_eq!(
        r["nodes"].as_u64().unwrap(),
        l["maxNodes"].as_u64().unwrap() - nodes.len() as u64
    );
    assert_eq!(
        r["adviceNodes"].as_u64().unwrap(),
        l["maxAdviceNodes"].as_u64().unwrap() - advice
    );
    assert_eq!(
        r["handoffNodes"].as_u64().unwrap(),
        l["maxHandoffNodes"].as_u64().unwrap() - handoff
    );
    assert_eq!(dag["activeCount"], 0);
    assert!(nodes.iter().all(|n| n["state"] != "running"), "{dag:#}");
}

// ---------------------------------------------------------------------------------------------
// The 7×7 matrix and one root consulting all seven targets
// ---------------------------------------------------------------------------------------------

/// What the supervisor does with an adviser (asking with the worker's grants: a shell, no web
/// search) for a review worker, here, where handoff's own sandbox cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    /// No less isolated than the worker on any dimension: it runs with the grants it asked for.
    AsIs,
    /// Weaker with its shell, no weaker without: it runs without the shell.
    WithoutShell,
    /// Weaker even without a shell, or a CLI that cannot run without one: refused, naming
    /// each dimension with both levels.
    Refused(&'static str),
}

/// The worker × adviser table (the README's isolation table, without handoff's sandbox).
fn cell(worker: &str, adviser: &str) -> Cell {
    use Cell::*;
    // Cursor's shell cannot be withheld, and its sandbox is not known to close the network,
    // sockets or temporary directories.
    const CURSOR_FOR_SEALED: &str = "filesystem write temp (caller: none), network any (caller: \
                                     none), unix sockets all (caller: none)";
    match (worker, adviser) {
        // Unconfined with a shell (Gemini and Qwen here, without handoff's sandbox): every
        // adviser is at least as isolated.
        ("kiro" | "opencode" | "gemini" | "qwen", _) => AsIs,
        // Claude Code's sandboxed Bash writes only the run's own temporary directory, and
        // Codex in review writes nothing: both are as sealed as any worker.
        (_, "codex" | "claude") => AsIs,
        // Writes temporary directories and reaches the network: only Kiro's and OpenCode's
        // unconfined shells (which write anywhere) are weaker.
        ("cursor", "grok" | "cursor") => AsIs,
        ("cursor", "kiro" | "opencode" | "gemini" | "qwen") => WithoutShell,
        // Grok reaches the network: only writes make an adviser weaker.
        ("grok", "grok") => AsIs,
        ("grok", "kiro" | "opencode" | "gemini" | "qwen") => WithoutShell,
        ("grok", "cursor") => Refused("filesystem write temp (caller: none)"),
        // Write nothing, no network: every shell that reaches the network or writes goes.
        ("codex" | "claude", "grok" | "kiro" | "opencode" | "gemini" | "qwen") => WithoutShell,
        ("codex" | "claude", "cursor") => Refused(CURSOR_FOR_SEALED),
        other => panic!("no expectation for {other:?}"),
    }
}

/// Every agent as a worker asks every agent for advice (eight calls per root, 64 in all), and
/// each cell of the worker × adviser table is what [`cell`] says. An admitted adviser runs on
/// the live worktree when it cannot write it (else on a snapshot), is recorded in the DAG with
/// the worker as derived caller and its view, and its reply is the result the DAG hashed; one
/// admitted without its shell says so in its grants (`isolation-attenuated`) and its node
/// (`attenuated`: the shell withheld, and the dimensions that made it weaker); a refused one
/// exits 5 naming the dimensions, and nothing of it runs.
#[test]
fn every_worker_asks_every_target() {
    for worker_agent in AGENTS {
        let sb = advising(AGENTS.join(","));
        let run = root(&sb, "run-with-advice", worker_agent, Some("review"), &[]);
        assert_eq!(run.code, 0, "{worker_agent}: {run:?}");
        assert_eq!(run.status(), "succeeded");
        let root_id = run.json["lineage"]["runId"].as_str().unwrap().to_owned();
        assert_eq!(run.json["delegation"]["mode"], "advice-only");

        let w = worker(&sb);
        assert!(
            w["env"]["HANDOFF_SUPERVISOR_CONTEXT"].is_string(),
            "the worker gets a context"
        );
        let command = w["nestedCommand"].as_str().unwrap();
        assert!(
            command.contains(crate::support::HANDOFF)
                && command.contains(" advice --harness AGENT --cwd "),
            "the prompt names the binary and the command: {command}"
        );
        let calls = nested(&w);
        assert_eq!(calls.len(), AGENTS.len());
        let nodes = dag_nodes(&run);
        let admitted = AGENTS
            .iter()
            .filter(|a| !matches!(cell(worker_agent, a), Cell::Refused(_)))
            .count();
        assert_eq!(nodes.len(), 1 + admitted, "{:#}", run.json["dag"]);
        for (target, code, result) in &calls {
            let expected = cell(worker_agent, target);
            if let Cell::Refused(levels) = expected {
                assert_eq!(*code, 5, "{worker_agent}→{target}: {result:#}");
                assert_eq!(result["status"], "rejected");
                let m = result["diagnostics"]["message"].as_str().unwrap();
                assert!(
                    m.ends_with(&format!(
                        "adviser {target} is less isolated than its caller {worker_agent}: \
                         {levels}"
                    )),
                    "{worker_agent}→{target}: {m}"
                );
                assert!(
                    !nodes
                        .iter()
                        .any(|n| n["targetHarness"] == target.as_str()
                            && n["parentRunId"].is_string()),
                    "{worker_agent}→{target} has no node"
                );
                continue;
            }
            assert_eq!(*code, 0, "{worker_agent}→{target}: {result:#}");
            assert_eq!(result["status"], "succeeded");
            assert_eq!(result["target"]["harness"], target.as_str());
            assert_eq!(result["caller"]["harness"], worker_agent);
            assert_eq!(result["caller"]["provenance"], "supervisor-derived");
            assert_eq!(result["lineage"]["parentRunId"], root_id.as_str());
            assert_eq!(result["lineage"]["depth"], 1);
            assert_eq!(result["grants"]["resolved"]["write"], false);
            assert_eq!(result["git"]["changed"], false);
            let shell = expected == Cell::AsIs;
            assert_eq!(result["grants"]["resolved"]["bash"], shell, "{result:#}");
            assert_eq!(
                result["grants"]["provenance"]["bash"],
                if shell {
                    "parent-attenuated"
                } else {
                    "isolation-attenuated"
                },
                "{worker_agent}→{target}"
            );
            // Only Kiro, OpenCode, and (unconfined) Gemini and Qwen with a shell could write the
            // worktree they run in.
            let live =
                !(shell && matches!(target.as_str(), "kiro" | "opencode" | "gemini" | "qwen"));
            let view = if live { "live" } else { "snapshot" };
            assert_eq!(result["view"], view, "{worker_agent}→{target}: {result:#}");
            let snap = &result["snapshot"];
            if live {
                assert!(snap.is_null(), "{result:#}");
                assert_eq!(result["git"]["before"]["root"], sb.cwd().as_str());
            } else {
                assert_eq!(snap["sourceRoot"], sb.cwd().as_str());
                assert_eq!(result["git"]["before"]["root"], snap["root"]);
            }
            assert!(
                result["output"]["response"]
                    .as_str()
                    .unwrap()
                    .contains("finished advice")
            );
            let id = result["lineage"]["runId"].as_str().unwrap();
            let node = nodes.iter().find(|n| n["runId"] == id).unwrap();
            assert_eq!(node["state"], "succeeded");
            assert_eq!(node["isolation"]["process"], "reaper", "{node:#}");
            assert_eq!(node["callerHarness"], worker_agent);
            assert_eq!(node["parentRunId"], root_id.as_str());
            assert_eq!(node["requestHash"], result["requestHash"]);
            assert_eq!(node["view"], view);
            if shell {
                assert!(node.get("attenuated").is_none(), "{node:#}");
            } else {
                let a = &node["attenuated"];
                assert_eq!(a["withheld"], serde_json::json!(["bash"]), "{node:#}");
                let because = a["because"].as_array().unwrap();
                assert!(!because.is_empty(), "{node:#}");
                for b in because {
                    // Each reason is a dimension the worker holds tighter than the shell did.
                    let d = b["dimension"].as_str().unwrap();
                    assert_eq!(b["caller"], nodes[0]["isolation"][d], "{node:#}");
                    assert_ne!(b["asked"], b["caller"], "{node:#}");
                }
            }
            let raw = w["nested"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["target"] == target.as_str())
                .and_then(|c| c["stdout"].as_str())
                .unwrap();
            assert_eq!(node["resultHash"], sha256_tagged(raw.as_bytes()).as_str());
            if live {
                assert!(std::path::Path::new(&sb.cwd()).is_dir());
            } else {
                // The snapshot is gone once the adviser finished.
                assert!(!std::path::Path::new(snap["root"].as_str().unwrap()).exists());
            }
        }
        assert_eq!(run.json["dag"]["status"], "succeeded");
        assert!(nodes[0].get("view").is_none(), "the root has no view");
        assert_dag_consistent(&run.json["dag"]);
        // The worker's evidence carries each adviser's answer.
        let evidence = run.json["output"]["evidence"].as_array().unwrap();
        assert_eq!(
            evidence.iter().filter(|e| e["kind"] == "advice").count(),
            AGENTS.len()
        );
    }
}

/// Root `advice` also gets a supervisor: the adviser may consult further advisers.
#[test]
fn root_advice_may_consult() {
    let sb = advising("claude,codex");
    let run = root(&sb, "advice", "opencode", None, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let calls = nested(&worker(&sb));
    assert!(
        calls
            .iter()
            .all(|(_, c, r)| *c == 0 && r["status"] == "succeeded")
    );
    assert_eq!(dag_nodes(&run).len(), 3);
}

/// A plain `run` worker gets neither the variable nor any prompt text about advice.
#[test]
fn plain_run_workers_get_no_capability() {
    let sb = advising("codex");
    let run = root(&sb, "run", "claude", Some("review"), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let w = worker(&sb);
    assert!(w["env"].get("HANDOFF_SUPERVISOR_CONTEXT").is_none());
    assert!(w["nestedCommand"].is_null());
    let prompt = w["prompt"].as_str().unwrap();
    assert!(!prompt.contains("handoff advice") && !prompt.contains("--harness AGENT"));
    assert!(prompt.contains("No nested handoff capability"));
    assert_eq!(dag_nodes(&run).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Budgets
// ---------------------------------------------------------------------------------------------

/// Runs a with-advice root whose (unconfined) worker asks `targets` with `extra` root flags;
/// returns the root's result and the nested calls.
fn budgeted(targets: &str, extra: &[&str]) -> (Run, Vec<(String, i64, Value)>) {
    // OpenCode with a shell is unconfined: no adviser is less isolated, budgets alone decide.
    let (_, run, calls) = consult("opencode", targets, None, extra);
    assert_eq!(run.code, 0, "{run:?}");
    (run, calls)
}

/// A with-advice review on `worker`, whose worker asks each of `targets` (with `advice_args` on
/// every nested call); the root's extra flags are `extra`. Returns the sandbox, the root's
/// result and the nested calls; the DAG's counters are checked.
fn consult(
    worker_agent: &str,
    targets: &str,
    advice_args: Option<&str>,
    extra: &[&str],
) -> (Sandbox, Run, Vec<(String, i64, Value)>) {
    let sb = advising(targets);
    if let Some(a) = advice_args {
        sb.agents.set(ADVICE_ARGS, a);
    }
    let run = root(&sb, "run-with-advice", worker_agent, Some("review"), extra);
    let calls = nested(&worker(&sb));
    assert_dag_consistent(&run.json["dag"]);
    (sb, run, calls)
}

fn refused_with(call: &(String, i64, Value), words: &str) {
    let (target, code, result) = call;
    assert_eq!(*code, 5, "{target}: {result:#}");
    assert_eq!(result["status"], "rejected");
    let m = result["diagnostics"]["message"].as_str().unwrap_or("");
    assert!(
        m.contains(words),
        "{target}: {m:?} should mention {words:?}"
    );
}

#[test]
fn each_budget_is_enforced() {
    // Advice nodes.
    let (run, calls) = budgeted(
        "codex,grok,kiro",
        &["--max-advice-nodes", "2", "--max-nodes", "4"],
    );
    assert_eq!(calls[0].1, 0);
    assert_eq!(calls[1].1, 0);
    refused_with(&calls[2], "advice-node budget exhausted (2 advice nodes)");
    assert_eq!(dag_nodes(&run).len(), 3);
    // Nodes.
    let (run, calls) = budgeted("codex,grok", &["--max-nodes", "2"]);
    assert_eq!(calls[0].1, 0);
    refused_with(&calls[1], "node budget exhausted (2 nodes)");
    assert_eq!(dag_nodes(&run).len(), 2);
    // Depth.
    let (run, calls) = budgeted("codex", &["--max-depth", "0"]);
    refused_with(&calls[0], "depth 1 exceeds the depth budget (0)");
    assert_eq!(dag_nodes(&run).len(), 1);
    // Concurrency: the root counts as running.
    let (_, calls) = budgeted("codex", &["--max-concurrency", "1"]);
    refused_with(&calls[0], "concurrency budget exhausted (1 nodes running");
    // Handoff nodes: a with-advice root is itself a handoff node.
    let sb = Sandbox::new();
    let run = root(
        &sb,
        "run-with-advice",
        "codex",
        Some("review"),
        &["--max-handoff-nodes", "0", "--max-nodes", "4"],
    );
    assert_eq!(run.code, 5, "{run:?}");
    assert!(
        run.stderr.contains("--max-handoff-nodes 0 leaves no node"),
        "{}",
        run.stderr
    );
}

/// A refused request spends no token use and adds no node: a later valid one still succeeds.
#[test]
fn a_refusal_spends_nothing() {
    let (_sb, run, calls) = consult(
        "claude",
        "kiro,codex",
        Some("--max-turns 3"),
        &["--max-nodes", "2"],
    );
    refused_with(&calls[0], "--max-turns is unsupported for kiro");
    assert_eq!(
        calls[1].1, 5,
        "codex has no turn limit either: {:#}",
        calls[1].2
    );
    assert_eq!(dag_nodes(&run).len(), 1);
    // Without the bad flag the single remaining node is still available.
    let (_sb, run, calls) = consult(
        "claude",
        "claude",
        Some("--max-turns 3"),
        &["--max-nodes", "2"],
    );
    assert_eq!(calls[0].1, 0, "{:#}", calls[0].2);
    assert_eq!(calls[0].2["selection"]["resolved"]["maxTurns"], 3);
    assert_eq!(dag_nodes(&run).len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Lineage rules
// ---------------------------------------------------------------------------------------------

/// An adviser that asks its parent's question again (same target, same question, same place)
/// is refused by the loop guard.
#[test]
fn the_loop_guard_refuses_a_repeated_intent() {
    let sb = advising("codex");
    sb.agents.set(ADVICE_FROM, "any");
    sb.agents.set(ADVICE_QUESTION, "Is this safe?");
    let run = root(
        &sb,
        "run-with-advice",
        "codex",
        Some("review"),
        &["--max-depth", "5"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let calls = nested(&worker(&sb));
    let (_, code, first) = &calls[0];
    assert_eq!(*code, 0, "{first:#}");
    // The depth-1 adviser's own nested call was refused; its evidence says so.
    let evidence = first["output"]["evidence"].as_array().unwrap();
    let summary = evidence
        .iter()
        .find(|e| e["kind"] == "advice")
        .and_then(|e| e["summary"].as_str())
        .unwrap();
    assert!(summary.starts_with("codex: exit 5 rejected"), "{summary}");
    assert_eq!(dag_nodes(&run).len(), 2);
}

/// Dependencies must name existing, finished nodes; a `requires` one must have succeeded.
#[test]
fn dependencies_are_validated() {
    let (_, run, calls) = consult(
        "claude",
        "codex",
        Some("--dependency advises:run-00000000-0000-4000-8000-000000000000"),
        &[],
    );
    refused_with(&calls[0], "is not a node of this DAG");
    assert_eq!(dag_nodes(&run).len(), 1);
    // Malformed dependencies are refused before admission.
    let (_, _, calls) = consult("claude", "codex", Some("--dependency needs:run-1"), &[]);
    refused_with(
        &calls[0],
        "--dependency type must be requires, advises or verifies",
    );
}

// ---------------------------------------------------------------------------------------------
// Grants
// ---------------------------------------------------------------------------------------------

#[test]
fn grant_and_mcp_escalation_is_refused() {
    // bash: the worker runs without it.
    let (_, _, calls) = consult(
        "codex",
        "codex,claude",
        Some("--bash true"),
        &["--bash", "false"],
    );
    refused_with(&calls[0], "bash is not held by the parent");
    refused_with(&calls[1], "bash is not held by the parent");
    // Without --bash the adviser inherits bash=false.
    let (_, run, calls) = consult("codex", "claude", None, &["--bash", "false"]);
    assert_eq!(calls[0].1, 0, "{:#}", calls[0].2);
    assert_eq!(calls[0].2["grants"]["resolved"]["bash"], false);
    assert_eq!(
        calls[0].2["grants"]["provenance"]["bash"],
        "parent-attenuated"
    );
    assert_eq!(dag_nodes(&run).len(), 2);
    // web search: the worker has none.
    let (_, _, calls) = consult("codex", "claude", Some("--web-search true"), &[]);
    refused_with(&calls[0], "web search is not held by the parent");

    // MCP: a subset of the parent's servers, each unchanged.
    let sb = Sandbox::new();
    sb.record();
    let descriptor =
        |servers: &str| format!(r#"{{"schemaVersion":"handoff.mcp.v1","servers":[{servers}]}}"#);
    let docs = r#"{"name":"docs","transport":"stdio","command":"/bin/cat","args":[],"env":{}}"#;
    let tickets =
        r#"{"name":"tickets","transport":"stdio","command":"/bin/cat","args":["-n"],"env":{}}"#;
    let parent = sb.private.join("mcp-parent.json");
    std::fs::write(&parent, descriptor(&format!("{docs},{tickets}"))).unwrap();
    let subset = sb.private.join("mcp-subset.json");
    std::fs::write(&subset, descriptor(tickets)).unwrap();
    let other = sb.private.join("mcp-other.json");
    std::fs::write(
        &other,
        descriptor(
            r#"{"name":"mail","transport":"stdio","command":"/bin/cat","args":[],"env":{}}"#,
        ),
    )
    .unwrap();
    let changed = sb.private.join("mcp-changed.json");
    std::fs::write(
        &changed,
        descriptor(r#"{"name":"docs","transport":"stdio","command":"/bin/sh","args":[],"env":{}}"#),
    )
    .unwrap();
    for (file, expect) in [
        (&subset, None),
        (
            &other,
            Some("MCP server \"mail\" is not one of the parent's"),
        ),
        (
            &changed,
            Some("MCP server \"docs\" differs from the parent's definition"),
        ),
    ] {
        let sb2 = advising("codex");
        sb2.agents
            .set(ADVICE_ARGS, format!("--mcp-config {}", file.display()));
        let parent_arg = parent.to_string_lossy().into_owned();
        let run = root(
            &sb2,
            "run-with-advice",
            "codex",
            Some("review"),
            &["--mcp-config", &parent_arg],
        );
        assert_eq!(run.code, 0, "{run:?}");
        let calls = nested(&worker(&sb2));
        match expect {
            None => {
                assert_eq!(calls[0].1, 0, "{:#}", calls[0].2);
                assert_eq!(
                    calls[0].2["grants"]["mcp"]["servers"],
                    serde_json::json!(["tickets"])
                );
            }
            Some(words) => refused_with(&calls[0], words),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Isolation
// ---------------------------------------------------------------------------------------------

/// The agent runs (with a prompt) whose executable is `exe`.
fn runs_of(sb: &Sandbox, exe: &str) -> usize {
    agent_runs(sb)
        .iter()
        .filter(|(r, _)| {
            r["exe"]
                .as_str()
                .is_some_and(|e| std::path::Path::new(e).ends_with(exe))
        })
        .count()
}

/// A review worker in Codex's sandbox (writes nothing, no network) asks two advisers with a
/// shell. Cursor cannot run without its shell, and with it writes temporary directories and
/// reaches the network: refused — exit 5, naming each weaker dimension with both levels, no
/// process of its started, no budget spent (one advice node is all the root allows) — and
/// Codex is admitted as asked; every node records its isolation.
#[test]
fn a_weaker_adviser_is_refused_before_anything_starts() {
    let (sb, run, calls) = consult(
        "codex",
        "cursor,codex",
        None,
        &["--max-advice-nodes", "1", "--max-nodes", "2"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    refused_with(
        &calls[0],
        "adviser cursor is less isolated than its caller codex: filesystem write temp (caller: \
         none), network any (caller: none), unix sockets all (caller: none)",
    );
    assert_eq!(calls[1].1, 0, "{:#}", calls[1].2);
    assert_eq!(runs_of(&sb, "cursor-agent"), 0, "Cursor never started");
    assert_eq!(runs_of(&sb, "codex"), 2, "the worker and its Codex adviser");
    let codex_worker = serde_json::json!({
        "enforcement": "native",
        "filesystemWrite": "none",
        "filesystemRead": "anywhere",
        "network": "none",
        "unixSockets": "none",
        "process": "reaper",
    });
    let nodes = dag_nodes(&run);
    assert_eq!(nodes.len(), 2, "{nodes:#?}");
    assert_eq!(nodes[0]["isolation"], codex_worker);
    assert_eq!(nodes[1]["targetHarness"], "codex");
    assert_eq!(nodes[1]["isolation"], codex_worker);
    assert!(nodes[1].get("attenuated").is_none(), "{:#}", nodes[1]);
}

/// The same Codex worker asks OpenCode (unconfined here: its shell writes anywhere and reaches
/// any host) and Claude Code (its sandboxed shell writes only the run's own temporary
/// directory). Claude Code runs as asked, with its shell. OpenCode runs without its shell —
/// the least that makes it as isolated as the worker — its result says the grant was withheld
/// for isolation, and its node records what was withheld and why, both levels of each
/// dimension; its agent is started without a shell.
#[test]
fn a_weaker_adviser_runs_without_what_makes_it_weaker() {
    let (sb, run, calls) = consult("codex", "opencode,claude", None, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let (_, code, opencode) = &calls[0];
    assert_eq!(*code, 0, "{opencode:#}");
    assert_eq!(opencode["status"], "succeeded");
    assert_eq!(opencode["grants"]["resolved"]["bash"], false);
    assert_eq!(
        opencode["grants"]["provenance"]["bash"],
        "isolation-attenuated"
    );
    let (_, code, claude) = &calls[1];
    assert_eq!(*code, 0, "{claude:#}");
    assert_eq!(claude["grants"]["resolved"]["bash"], true);
    assert_eq!(claude["grants"]["provenance"]["bash"], "parent-attenuated");
    let nodes = dag_nodes(&run);
    assert_eq!(nodes.len(), 3, "{nodes:#?}");
    let node = |agent: &str| {
        nodes
            .iter()
            .find(|n| n["targetHarness"] == agent && n["parentRunId"].is_string())
            .unwrap()
            .clone()
    };
    let opencode = node("opencode");
    assert_eq!(
        opencode["attenuated"],
        serde_json::json!({
            "withheld": ["bash"],
            "because": [
                {"dimension": "filesystemWrite", "caller": "none", "asked": "anywhere"},
                {"dimension": "network", "caller": "none", "asked": "any"},
                {"dimension": "unixSockets", "caller": "none", "asked": "all"},
            ],
        })
    );
    assert_eq!(opencode["isolation"]["filesystemWrite"], "none");
    assert_eq!(opencode["isolation"]["network"], "none");
    // Without a shell OpenCode cannot write the worktree: it works on it live.
    assert_eq!(opencode["view"], "live");
    let claude = node("claude");
    assert!(claude.get("attenuated").is_none(), "{claude:#}");
    assert_eq!(claude["isolation"]["filesystemWrite"], "none");
    // OpenCode's permissions, as its agent got them, deny the shell.
    let adviser = agent_runs(&sb)
        .into_iter()
        .find(|(r, p)| {
            p.contains(ADVICE_PROMPT)
                && r["exe"]
                    .as_str()
                    .is_some_and(|e| std::path::Path::new(e).ends_with("opencode"))
        })
        .map(|(r, _)| r)
        .unwrap();
    let config = adviser["env"]["OPENCODE_CONFIG_CONTENT"].as_str().unwrap();
    assert!(config.contains(r#""bash":"deny""#), "{config}");
}

/// Hostile advisers of a Codex review worker try to write their temporary directory, the
/// asking worktree and `~/.bashrc`, and nothing of it is left that a later run or the user
/// sees. OpenCode runs under handoff's own sandbox (as isolated as the worker, with its shell):
/// its writes land nowhere. Claude Code's sandbox is its CLI's own, which the fake does not
/// reproduce, so only its temporary directory is tried: it is the run's own, made for it and
/// removed with the run, never the user's `$TMPDIR`.
#[test]
fn a_hostile_adviser_leaves_nothing_behind() {
    let sb = crate::support::confined();
    sb.record();
    sb.agents.set(ADVICE, "opencode,claude");
    let home = sb.root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bashrc = home.join(".bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let planted = sb.repo.path().join("planted.txt");
    let trail = sb.root.join("claude-temp.txt");
    let q = crate::support::q;
    sb.agents.set(
        &format!("{SHELL}@opencode"),
        format!(
            "echo x > \"$TMPDIR/left-behind\"; echo pwned >> {}; echo x > {}",
            q(&bashrc),
            q(&planted)
        ),
    );
    sb.agents.set(
        &format!("{SHELL}@claude"),
        format!(
            "echo x > \"$CLAUDE_CODE_TMPDIR/left-behind\"; echo x > \"$TMPDIR/also\"; \
             printf '%s\\n%s\\n' \"$CLAUDE_CODE_TMPDIR\" \"$TMPDIR\" > {}",
            q(&trail)
        ),
    );
    let run = root(&sb, "run-with-advice", "codex", Some("review"), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let calls = nested(&worker(&sb));
    for (target, code, result) in &calls {
        assert_eq!(*code, 0, "{target}: {result:#}");
        assert_eq!(result["grants"]["resolved"]["bash"], true, "{target}");
        assert_eq!(result["git"]["changed"], false, "{target}: {result:#}");
    }
    let nodes = dag_nodes(&run);
    assert_eq!(nodes.len(), 3, "{nodes:#?}");
    assert!(nodes.iter().all(|n| n.get("attenuated").is_none()));
    // OpenCode's writes landed nowhere.
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert!(!planted.exists(), "the asking worktree was written");
    // Claude Code's temporary directory was the run's own, inside its run directory, and is
    // gone with it; the user's temporary directory holds nothing of either adviser.
    let written = std::fs::read_to_string(&trail).unwrap();
    let dirs: Vec<&str> = written.lines().collect();
    assert_eq!(dirs.len(), 2, "{written}");
    assert_eq!(dirs[0], dirs[1], "{written}");
    let temp = std::path::Path::new(dirs[0]);
    assert!(temp.ends_with("tmp"), "{written}");
    let run_dir = temp.parent().unwrap();
    assert!(run_dir.starts_with(crate::support::work_dir()), "{written}");
    assert!(!run_dir.exists(), "{} outlived the run", run_dir.display());
    let left: Vec<_> = walkdir(&sb.tmp)
        .into_iter()
        .chain(walkdir(std::path::Path::new("/tmp")))
        .filter(|p| p.ends_with("left-behind") || p.ends_with("also"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Every path under `dir` (one level of directories deep is enough for what is looked for).
fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(
                std::fs::read_dir(&p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
        }
        out.push(p);
    }
    out
}

/// Without a shell the same advisers are as isolated as the Codex worker, and admitted: OpenCode
/// then keeps to the worktree by its permissions alone (enforcement `none`).
#[test]
fn an_adviser_without_a_shell_can_be_admitted() {
    let (_sb, run, calls) = consult("codex", "opencode,claude", Some("--bash false"), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    for (target, code, result) in &calls {
        assert_eq!(*code, 0, "{target}: {result:#}");
        assert_eq!(result["grants"]["resolved"]["bash"], false);
    }
    let nodes = dag_nodes(&run);
    assert_eq!(nodes.len(), 3, "{nodes:#?}");
    let opencode = nodes
        .iter()
        .find(|n| n["targetHarness"] == "opencode")
        .unwrap();
    assert_eq!(
        opencode["isolation"],
        serde_json::json!({
            "enforcement": "none",
            "filesystemWrite": "none",
            "filesystemRead": "worktree",
            "network": "none",
            "unixSockets": "none",
            "process": "reaper",
        })
    );
    let claude = nodes
        .iter()
        .find(|n| n["targetHarness"] == "claude")
        .unwrap();
    assert_eq!(claude["isolation"]["filesystemWrite"], "none");
    assert_eq!(claude["isolation"]["unixSockets"], "none");
}

// ---------------------------------------------------------------------------------------------
// The adviser's view: the live worktree or a snapshot
// ---------------------------------------------------------------------------------------------

/// The prompt line every adviser's prompt has (see `handoff_core::prompt`).
const ADVICE_PROMPT: &str = "Operation: advice\n";

/// Starts a with-advice `mode` root on `worker_agent` whose worker asks each of `targets`, every
/// adviser taking `delay_ms` before it answers.
fn slow_advice(
    worker_agent: &str,
    mode: &str,
    targets: &str,
    delay_ms: u64,
) -> (Sandbox, std::process::Child) {
    let sb = advising(targets);
    sb.agents.set(ADVICE_DELAY_MS, delay_ms.to_string());
    let args = root_args(&sb, "run-with-advice", worker_agent, Some(mode), &[]);
    let child = spawn(&sb, &args);
    (sb, child)
}

/// The record of the `n`th adviser (1-based, by start) once it has read its prompt.
fn wait_for_adviser(sb: &Sandbox, n: usize) -> Value {
    let start = Instant::now();
    loop {
        let mut advisers: Vec<Value> = agent_runs(sb)
            .into_iter()
            .filter(|(_, prompt)| prompt.contains(ADVICE_PROMPT))
            .map(|(record, _)| record)
            .collect();
        if advisers.len() >= n {
            return advisers.swap_remove(n - 1);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "adviser {n} never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The directory the root handoff process `pid` keeps advisers' snapshots in (it holds it open
/// for the run's life), and the names in it now.
fn snapshot_dir_of(pid: u32) -> (std::path::PathBuf, Vec<String>) {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .find(|target| target.to_string_lossy().contains("/handoff-snapshots-"))
        .unwrap_or_else(|| panic!("handoff {pid} holds no snapshot directory"));
    let names = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    (dir, names)
}

/// The root's result once its process has ended.
fn finished(child: std::process::Child) -> Run {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// An adviser that cannot write the worktree (Codex, read-only) works in the worker's own
/// worktree: no snapshot is made, its working directory is the worker's, and its result and
/// node say `view: live`. An adviser that could write (OpenCode with a shell) still gets a
/// snapshot in the private work directory, removed afterwards.
#[test]
fn a_read_only_adviser_works_on_the_live_worktree() {
    let (sb, child) = slow_advice("opencode", "review", "codex,opencode", 1000);
    let pid = child.id();

    let live = wait_for_adviser(&sb, 1);
    assert_eq!(live["exe"], "codex");
    assert_eq!(live["cwd"], sb.cwd().as_str(), "{live:#}");
    let (snapshots, names) = snapshot_dir_of(pid);
    assert!(names.is_empty(), "no snapshot for a live view: {names:?}");

    let copied = wait_for_adviser(&sb, 2);
    assert_eq!(copied["exe"], "opencode");
    let (_, names) = snapshot_dir_of(pid);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("snap-"), "{names:?}");
    let cwd = copied["cwd"].as_str().unwrap();
    assert_eq!(
        std::path::Path::new(cwd),
        snapshots.join(&names[0]),
        "{copied:#}"
    );
    // The snapshot is in the private work directory, out of the temporary directories a
    // sandboxed build worker may write (its own TMPDIR here).
    assert!(cwd.starts_with(crate::support::work_dir().to_str().unwrap()));
    assert!(!cwd.contains(&*sb.tmp.to_string_lossy()));

    let run = finished(child);
    assert_eq!(run.code, 0, "{run:?}");
    let calls = nested(&worker(&sb));
    let nodes = dag_nodes(&run);
    for ((target, code, result), view) in calls.iter().zip(["live", "snapshot"]) {
        assert_eq!(*code, 0, "{target}: {result:#}");
        assert_eq!(result["status"], "succeeded");
        assert_eq!(result["view"], view, "{result:#}");
        assert_eq!(result["git"]["changed"], false);
        let id = result["lineage"]["runId"].as_str().unwrap();
        let node = nodes.iter().find(|n| n["runId"] == id).unwrap();
        assert_eq!(node["view"], view, "{node:#}");
    }
    let (live, copied) = (&calls[0].2, &calls[1].2);
    assert!(live.get("snapshot").is_none(), "{live:#}");
    assert_eq!(live["git"]["before"]["root"], sb.cwd().as_str());
    assert_eq!(copied["snapshot"]["sourceRoot"], sb.cwd().as_str());
    assert_eq!(copied["snapshot"]["root"], cwd);
    assert!(
        !std::path::Path::new(cwd).exists(),
        "the snapshot is removed"
    );
}

/// A building worker with uncommitted work asks for advice: the read-only advisers (Claude Code
/// sandboxed, Codex) see that work in place, change nothing, and succeed; the worker's own
/// change, made after the advice, is still verified.
#[test]
fn a_writing_parent_does_not_make_its_adviser_guilty() {
    let sb = Sandbox::new();
    sb.record();
    std::fs::write(sb.repo.path().join("draft.txt"), "work in progress\n").unwrap();
    sb.agents.set(ADVICE, "claude,codex");
    let run = root(&sb, "run-with-advice", "codex", Some("build"), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let changed: Vec<&str> = run.json["git"]["changedFiles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(changed.contains(&"fake-build.txt"), "{changed:?}");
    for (_, code, result) in nested(&worker(&sb)) {
        assert_eq!(code, 0, "{result:#}");
        assert_eq!(result["view"], "live");
        assert_eq!(result["git"]["changed"], false);
        let before = &result["git"]["before"];
        assert_eq!(
            before["changeCounts"]["untracked"], 1,
            "the worker's draft, as it is: {before:#}"
        );
    }
    let line = format!("Working directory: {}\n", sb.cwd());
    let advisers: Vec<String> = agent_runs(&sb)
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| p.contains(ADVICE_PROMPT))
        .collect();
    assert_eq!(advisers.len(), 2);
    for prompt in advisers {
        assert!(prompt.contains(&line), "{prompt}");
        assert!(!prompt.contains("/handoff-snapshots-"), "{prompt}");
    }
}

/// The worktree changes while a live adviser works on it (a process the worker left running
/// writes a file): the advice fails closed, `blocked`, and its result says it ran live.
#[test]
fn a_change_during_live_advice_fails_the_advice() {
    let (sb, child) = slow_advice("codex", "build", "codex", 1500);
    let adviser = wait_for_adviser(&sb, 1);
    assert_eq!(adviser["cwd"], sb.cwd().as_str());
    std::fs::write(sb.repo.path().join("background.txt"), "written meanwhile\n").unwrap();
    let run = finished(child);
    let calls = nested(&worker(&sb));
    let (_, code, result) = &calls[0];
    assert_eq!(*code, 10, "{result:#}");
    assert_eq!(result["status"], "blocked");
    assert_eq!(result["view"], "live");
    assert_eq!(result["git"]["changed"], true);
    assert_eq!(
        result["git"]["changedFiles"],
        serde_json::json!(["background.txt"])
    );
    let message = result["diagnostics"]["message"].as_str().unwrap();
    assert!(
        message.contains("the worktree changed while read-only advice worked on it live"),
        "{message}"
    );
    let id = result["lineage"]["runId"].as_str().unwrap();
    let node = dag_nodes(&run)
        .into_iter()
        .find(|n| n["runId"] == id)
        .unwrap();
    assert_eq!(node["state"], "blocked");
    assert_eq!(node["view"], "live");
}

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

fn wait_for_file(path: &std::path::Path, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A with-advice root on `worker` whose worker waits (alive, context in hand) until the returned
/// `go` file exists: the sandbox, the root process, the worker's context and `go`.
fn paused_root(worker: &str) -> (Sandbox, std::process::Child, String, std::path::PathBuf) {
    let sb = Sandbox::new();
    sb.record();
    let ctx_file = sb.root.join("context.json");
    let go = sb.root.join("go");
    sb.agents.set(CONTEXT_FILE, &ctx_file);
    sb.agents.set(WAIT_FILE, &go);
    let args = root_args(&sb, "run-with-advice", worker, Some("review"), &[]);
    let child = spawn(&sb, &args);
    let context = wait_for_file(&ctx_file, Duration::from_secs(60));
    (sb, child, context, go)
}

fn nested_request(sb: &Sandbox, token: &str, nonce: &str) -> handoff_core::NestedRequest {
    handoff_core::NestedRequest {
        schema_version: handoff_core::NESTED_REQUEST_SCHEMA.into(),
        token: token.into(),
        nonce: nonce.into(),
        operation: handoff_core::Operation::Advice,
        target_harness: Some("codex".into()),
        cwd: Some(sb.cwd()),
        instructions: Some("Any risk here?".into()),
        model: None,
        effort: None,
        max_turns: None,
        bash: None,
        web_search: None,
        timeout_ms: None,
        mcp: None,
        dependencies: vec![],
    }
}

/// Waits until `path` is gone (the supervisor took the entry).
fn wait_gone(path: &std::path::Path, limit: Duration) {
    let start = Instant::now();
    while std::fs::symlink_metadata(path).is_ok() {
        assert!(
            start.elapsed() < limit,
            "{} was never taken",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Posts `body` as `in/<name>` the way a client does (scratch name, then rename).
fn post(inbox: &std::path::Path, name: &str, body: &[u8]) {
    let scratch = inbox.join(format!(".{}.tmp", name.replace('.', "_")));
    std::fs::write(&scratch, body).unwrap();
    std::fs::rename(&scratch, inbox.join(name)).unwrap();
}

/// A forged token and a replayed nonce are refused and recorded in the root result; a valid
/// request with a fresh nonce runs. So is everything a worker may plant in its mailbox's `in/`
/// instead of a request — a symbolic link to a file outside, a FIFO, a directory, a file too
/// large, garbage, a name with `..` — and the supervisor keeps serving afterwards. The mailbox
/// is private: 0700 directories of the user's in the supervisor's private directory.
#[test]
fn forged_and_replayed_tokens_are_refused_and_recorded() {
    use std::os::unix::fs::MetadataExt;
    let (sb, child, context_text, go) = paused_root("codex");
    let context = handoff_core::SupervisorContext::parse(&context_text).unwrap();
    let mailbox = std::path::PathBuf::from(&context.mailbox);
    let (inbox, outbox) = (mailbox.join("in"), mailbox.join("out"));
    let uid = nix::unistd::geteuid().as_raw();
    for dir in [&mailbox, &inbox, &outbox] {
        let meta = std::fs::symlink_metadata(dir).unwrap();
        assert!(meta.is_dir(), "{}", dir.display());
        assert_eq!(meta.mode() & 0o777, 0o700, "{}", dir.display());
        assert_eq!(meta.uid(), uid);
    }
    let holder = mailbox.parent().unwrap();
    assert!(
        holder
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("handoff-mailboxes-"),
        "{}",
        mailbox.display()
    );
    assert_eq!(std::fs::metadata(holder).unwrap().mode() & 0o777, 0o700);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let request = |token: &str, nonce: &str| nested_request(&sb, token, nonce);
    let forged = format!("hcap_{}", "ab".repeat(32));
    let ask = |r| {
        rt.block_on(handoff_core::ask_supervisor(&context, &r))
            .unwrap()
    };
    let f = ask(request(&forged, "n-1"));
    assert!(!f.accepted);
    assert_eq!(f.exit_code, 5);
    assert!(f.result.contains("not valid for this run"), "{}", f.result);
    let ok = ask(request(&context.token, "n-2"));
    assert!(ok.accepted, "{}", ok.result);
    assert_eq!(ok.exit_code, 0, "{}", ok.result);

    // What a worker may plant instead of a request. Each is taken out of in/ and refused,
    // with an answer when its name gives a nonce; nothing is read through the link.
    let secret = sb.root.join("secret");
    std::fs::write(&secret, "SECRET-CONTENT").unwrap();
    std::os::unix::fs::symlink(&secret, inbox.join("link.json")).unwrap();
    nix::unistd::mkfifo(
        &inbox.join("fifo.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    std::fs::create_dir(inbox.join("dir.json")).unwrap();
    post(
        &inbox,
        "big.json",
        &vec![b' '; handoff_core::MAX_REQUEST_BYTES + 1],
    );
    post(&inbox, "garbage.json", b"\x00not a request");
    // Its nonce is not its name.
    post(
        &inbox,
        "misnamed.json",
        &serde_json::to_vec(&request(&context.token, "other")).unwrap(),
    );
    post(&inbox, "a..b.json", b"{}");
    for (nonce, words) in [
        ("link", "symbolic link"),
        ("fifo", "a FIFO"),
        ("dir", "a directory"),
        ("big", "exceeds"),
        ("garbage", "not valid"),
        ("misnamed", "not the name it was posted under"),
    ] {
        let answer = wait_for_file(
            &outbox.join(format!("{nonce}.json")),
            Duration::from_secs(60),
        );
        assert!(!answer.contains("SECRET-CONTENT"));
        let reply: handoff_core::NestedReply = serde_json::from_str(answer.trim()).unwrap();
        assert!(!reply.accepted, "{nonce}: {}", reply.result);
        assert_eq!(reply.exit_code, 5, "{nonce}: {}", reply.result);
        assert!(reply.result.contains(words), "{nonce}: {}", reply.result);
    }
    wait_gone(&inbox.join("a..b.json"), Duration::from_secs(60));
    assert!(!outbox.join("a..b.json").exists());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "SECRET-CONTENT");
    // A replay of an answered request: taken, refused, recorded (its answer would go where the
    // first one's is, which is never replaced).
    post(
        &inbox,
        "n-2.json",
        &serde_json::to_vec(&request(&context.token, "n-2")).unwrap(),
    );
    wait_gone(&inbox.join("n-2.json"), Duration::from_secs(60));
    // The supervisor keeps serving.
    let again = ask(request(&context.token, "n-3"));
    assert!(again.accepted, "{}", again.result);
    assert_eq!(again.exit_code, 0, "{}", again.result);
    let left: Vec<_> = std::fs::read_dir(&inbox).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");

    // A request never finished (a scratch file held open) does not hold up the root's end.
    let mut silent = std::fs::File::create(inbox.join(".slow.tmp")).unwrap();
    silent.write_all(b"{").unwrap();
    let released = Instant::now();
    std::fs::write(&go, "go").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(released.elapsed() < Duration::from_secs(20));
    drop(silent);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "succeeded", "{json:#}");
    let refusals = json["policy"]["supervisor"]["tokenRefusals"]
        .as_array()
        .unwrap();
    let kinds: Vec<&str> = refusals
        .iter()
        .filter_map(|r| r["rejection"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "forged",
            "malformed",
            "malformed",
            "malformed",
            "malformed",
            "malformed",
            "malformed",
            "malformed",
            "replayed"
        ],
        "{refusals:#?}"
    );
    assert_eq!(json["dag"]["nodes"].as_array().unwrap().len(), 3);
    // The token never reaches the result.
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&context.token));
    // Once the root is over, its token is worthless and the mailbox is gone.
    assert!(!mailbox.exists());
    assert!(
        rt.block_on(handoff_core::ask_supervisor(
            &context,
            &request(&context.token, "n-4")
        ))
        .is_err()
    );
}

// ---------------------------------------------------------------------------------------------
// Escaping, cancellation, deadline, lease
// ---------------------------------------------------------------------------------------------

/// A worker that strips its context and calls handoff as a new root is refused through
/// process ancestry.
#[test]
fn a_worker_cannot_start_a_root_run() {
    let sb = advising("claude");
    sb.agents.set(ADVICE_STRIP, "1");
    let run = root(&sb, "run-with-advice", "codex", Some("review"), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let calls = nested(&worker(&sb));
    let (_, code, result) = &calls[0];
    assert_eq!(*code, 5, "{result:#}");
    // The stripped call had to be a full root command; the fake only filled in its harness,
    // so it was refused (missing caller) or by ancestry — either way nothing ran.
    assert_eq!(dag_nodes(&run).len(), 1);
    // A complete root command from inside the worker is refused by ancestry.
    let sb = advising("claude");
    sb.agents.set(ADVICE_STRIP, "1");
    sb.agents.set(ADVICE_ARGS, "--caller-harness codex");
    let run = root(&sb, "run-with-advice", "codex", Some("review"), &[]);
    let calls = nested(&worker(&sb));
    refused_with(&calls[0], "a worker cannot start a root run");
    assert_eq!(dag_nodes(&run).len(), 1);
}

/// The nested command interrupted while its adviser runs withdraws its request
/// (`in/<nonce>.cancel`): the adviser is stopped and its node ends `cancelled`, while the root
/// goes on.
#[test]
fn an_interrupted_nested_command_cancels_its_adviser() {
    let sb = Sandbox::new();
    sb.record();
    let ctx_file = sb.root.join("context.json");
    let go = sb.root.join("go");
    let ready = sb.root.join("ready");
    sb.agents.set(CONTEXT_FILE, &ctx_file);
    sb.agents.set(WAIT_FILE, &go);
    sb.agents.set(MODE, "hang");
    sb.agents.set(READY_FILE, &ready);
    let args = root_args(&sb, "run-with-advice", "codex", Some("review"), &[]);
    let root_run = spawn(&sb, &args);
    let context = wait_for_file(&ctx_file, Duration::from_secs(60));
    let mut asking = sb
        .command()
        .env(handoff_core::CONTEXT_ENV, context.trim())
        .args(["advice", "--harness", "codex", "--cwd", &sb.cwd()])
        .args(["--instructions", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    asking
        .stdin
        .take()
        .unwrap()
        .write_all(b"Is this safe?")
        .unwrap();
    // The adviser (codex, hanging) is running.
    let adviser_pid: i32 = wait_for_file(&ready, Duration::from_secs(60))
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(asking.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let asked = asking.wait_with_output().unwrap();
    let line: Value = serde_json::from_slice(&asked.stdout).unwrap();
    let message = line["diagnostics"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("interrupted by SIGTERM") && message.contains("withdrawn"),
        "{line:#}"
    );
    let gone = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z"))
            .unwrap_or(true)
    };
    let start = Instant::now();
    while !gone(adviser_pid) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the adviser was not stopped"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The root's worker goes on (and hangs): stop the root and read its DAG.
    std::fs::write(&go, "go").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(root_run.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = root_run.wait_with_output().unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = json["dag"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{nodes:#?}");
    assert_eq!(nodes[1]["state"], "cancelled", "{nodes:#?}");
}

/// SIGTERM to the root while an adviser runs: every unfinished node ends `cancelled`, nothing
/// is left running.
#[test]
fn cancellation_closes_the_dag() {
    let sb = advising("claude");
    sb.agents.set(MODE, "hang");
    let ready = sb.root.join("ready");
    sb.agents.set(READY_FILE, &ready);
    sb.agents.set(ADVICE_FROM, "root");
    let args = root_args(&sb, "run-with-advice", "claude", Some("review"), &[]);
    let child = spawn(&sb, &args);
    // The adviser (claude) hangs too: wait until it wrote its pid.
    let adviser_pid: i32 = wait_for_file(&ready, Duration::from_secs(60))
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(9));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "cancelled");
    assert_eq!(json["dag"]["status"], "cancelled");
    let nodes = json["dag"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{nodes:#?}");
    assert!(
        nodes.iter().all(|n| n["state"] == "cancelled"),
        "{nodes:#?}"
    );
    assert!(
        std::fs::read_to_string(format!("/proc/{adviser_pid}/stat"))
            .map(|s| s.contains(") Z"))
            .unwrap_or(true),
        "the adviser was stopped"
    );
}

/// The root deadline bounds a nested node: it gets what is left of the root's time, not its
/// full per-node timeout.
#[test]
fn the_root_deadline_stops_a_nested_node() {
    let sb = advising("claude");
    sb.agents.set(MODE, "hang");
    let started = Instant::now();
    let run = root(
        &sb,
        "run-with-advice",
        "claude",
        Some("review"),
        &["--root-timeout-ms", "4000", "--timeout-ms", "4000"],
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(run.code, 8, "{run:?}");
    let nodes = dag_nodes(&run);
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[1]["state"], "timed_out", "{nodes:#?}");
    let calls = nested(&worker(&sb));
    let (_, code, result) = &calls[0];
    assert_eq!(*code, 8, "{result:#}");
    let m = result["diagnostics"]["message"].as_str().unwrap();
    let budget: u64 = m
        .split("time budget of ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{m}"));
    assert!(budget < 4000, "the node got {budget} ms of a 4000 ms root");
}

/// One root run per worktree: a second is refused naming the holder, or waits with --wait.
#[test]
fn one_root_run_per_worktree() {
    let sb = Sandbox::new();
    sb.record();
    sb.agents.set(MODE, "hang");
    let ready = sb.root.join("ready");
    sb.agents.set(READY_FILE, &ready);
    let args = root_args(&sb, "run", "codex", Some("review"), &[]);
    let first = spawn(&sb, &args);
    wait_for_file(&ready, Duration::from_secs(60));
    sb.agents.set(MODE, "success");
    let second = root(&sb, "advice", "claude", None, &[]);
    assert_eq!(second.code, 5, "{second:?}");
    let m = second.json["diagnostics"]["message"].as_str().unwrap();
    assert!(
        m.contains(&format!("pid {}", first.id())) && m.contains("--wait"),
        "{m}"
    );
    // With --wait the second starts once the first is gone.
    let args = root_args(&sb, "advice", "claude", None, &["--wait"]);
    let mut waiting = spawn(&sb, &args);
    std::thread::sleep(Duration::from_millis(300));
    assert!(waiting.try_wait().unwrap().is_none(), "it waits");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let first_out = first.wait_with_output().unwrap();
    assert_eq!(first_out.status.code(), Some(9));
    let mut stdout = String::new();
    use std::io::Read as _;
    waiting
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = waiting.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{stdout}");
    let _ = std::io::stderr().flush();
}

/// Inside a worker only `advice` is accepted, without caller or budget flags; stdin
/// instructions and stdout-only results work.
#[test]
fn the_nested_verb_and_flags() {
    let (sb, child, context, go) = paused_root("claude");
    let nested_cmd = |extra: &[&str], stdin: &str| {
        let mut c = sb.command();
        c.env("HANDOFF_SUPERVISOR_CONTEXT", &context)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (
            out.status.code().unwrap_or(-1),
            json,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let cwd = sb.cwd();
    let base = [
        "advice",
        "--harness",
        "codex",
        "--cwd",
        cwd.as_str(),
        "--instructions",
        "-",
    ];
    for (extra, words) in [
        (
            &["--caller-harness", "claude"][..],
            "--caller-harness is not accepted inside a worker",
        ),
        (
            &["--max-nodes", "3"][..],
            "--max-nodes is not accepted inside a worker",
        ),
        (
            &["--root-timeout-ms", "1000"][..],
            "--root-timeout-ms is not accepted inside a worker",
        ),
    ] {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        let (code, json, stderr) = nested_cmd(&a, "question?");
        assert_eq!(code, 5, "{stderr}");
        assert!(
            json["diagnostics"]["message"]
                .as_str()
                .unwrap()
                .contains(words),
            "{json:#}"
        );
    }
    let (code, json, _) = nested_cmd(
        &[
            "run",
            "--caller-harness",
            "claude",
            "--harness",
            "codex",
            "--mode",
            "review",
            "--cwd",
            &cwd,
            "--instructions",
            "-",
        ],
        "q",
    );
    assert_eq!(code, 5);
    assert!(
        json["diagnostics"]["message"]
            .as_str()
            .unwrap()
            .contains("advice only")
    );
    // Outside the worktree of the asking run.
    let (code, json, _) = nested_cmd(
        &[
            "advice",
            "--harness",
            "codex",
            "--cwd",
            "/tmp",
            "--instructions",
            "-",
        ],
        "q",
    );
    assert_eq!(code, 5, "{json:#}");
    // The real thing: stdin instructions, result on stdout only.
    let (code, json, stderr) = nested_cmd(&base, "What should I check first?");
    assert_eq!(code, 0, "{stderr} {json:#}");
    assert_eq!(json["caller"]["harness"], "claude");
    std::fs::write(&go, "go").unwrap();
    let out = child.wait_with_output().unwrap();
    let root_json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(root_json["dag"]["nodes"].as_array().unwrap().len(), 2);
    let _ = Command::new("true").status();
}

/// `capabilities --json` tells which root verbs give their worker the nested capability.
#[test]
fn capabilities_name_the_root_forms() {
    let sb = Sandbox::new();
    let run = sb.run(&["capabilities", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.json["rootForms"],
        serde_json::json!({
            "advice": {"delegation": "advice-only"},
            "run": {"delegation": "none"},
            "run-with-advice": {"delegation": "advice-only"},
        })
    );
    assert_eq!(run.json["nestedOperations"], serde_json::json!(["advice"]));
}

/// `capabilities --json` reports who enforces each agent's isolation and its levels per mode
/// and grants.
#[test]
fn capabilities_report_each_agents_isolation() {
    let sb = Sandbox::new();
    let run = sb.run(&["capabilities", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let providers = run.json["providers"].as_array().unwrap();
    let isolation = |id: &str| {
        providers
            .iter()
            .find(|p| p["id"] == id)
            .map(|p| p["isolation"].clone())
            .unwrap()
    };
    for (id, enforcement) in [
        ("codex", "native"),
        ("claude", "native"),
        ("grok", "native"),
        ("cursor", "native"),
        ("opencode", "none"),
        ("kiro", "none"),
    ] {
        let i = isolation(id);
        assert_eq!(i["enforcement"], enforcement, "{id}: {i:#}");
        let cases = i["cases"].as_array().unwrap();
        let modes: Vec<&str> = cases
            .iter()
            .flat_map(|c| c["modes"].as_array().unwrap())
            .filter_map(Value::as_str)
            .collect();
        for mode in ["build", "phase", "review", "verify", "advice"] {
            assert!(modes.contains(&mode), "{id} ranks {mode}: {i:#}");
        }
    }
    // Codex's read-only worker with a shell that may ask for advice (ranked as one that may
    // not: the mailbox opens no socket).
    let codex = isolation("codex");
    let case = codex["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["modes"]
                .as_array()
                .unwrap()
                .contains(&Value::from("review"))
                && c["bash"] == true
                && c["nested"] != false
        })
        .unwrap_or_else(|| panic!("{codex:#}"));
    assert_eq!(
        case["isolation"],
        serde_json::json!({
            "enforcement": "native",
            "filesystemWrite": "none",
            "filesystemRead": "anywhere",
            "network": "none",
            "unixSockets": "none",
            "process": "reaper",
        })
    );
}
