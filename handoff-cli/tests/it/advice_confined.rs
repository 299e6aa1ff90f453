//! A nested adviser that no lowering of its grants makes as isolated as its worker, held by
//! handoff's own sandbox instead: an OpenCode worker (under handoff's sandbox, reading only its
//! worktree) asks Claude Code, whose Read tool reads any path when its own configuration holds
//! it, or Codex, whose sandbox reads the whole disk. The supervisor has handoff's sandbox hold
//! it (Claude Code without its shell, Codex with its own sandbox still inside) and records it;
//! their credentials come from the environment only, and without one the adviser is refused
//! before it starts.

use crate::advice::{assert_dag_consistent, dag_nodes, root_args};
use crate::support::{Run, Sandbox, confined};

/// A review on OpenCode under handoff's sandbox, whose worker asks `adviser` for advice, with
/// `env` in handoff's environment.
fn opencode_asks(adviser: &str, env: &[(&str, &str)]) -> (Sandbox, Run) {
    let sb = confined();
    sb.agents.set(handoff_testkit::keys::ADVICE, adviser);
    let args = root_args(&sb, "run-with-advice", "opencode", Some("review"), &[]);
    let mut command = sb.command();
    command.args(&args);
    for (k, v) in env {
        command.env(k, v);
    }
    let run = sb.exec(&mut command);
    assert_eq!(run.stdout.lines().count(), 1, "one line on stdout: {run:?}");
    (sb, run)
}

/// The summaries of the advice the worker got, as its result's evidence gives them.
fn advice(run: &Run) -> Vec<String> {
    run.json["output"]["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "advice")
        .filter_map(|e| e["summary"].as_str().map(str::to_owned))
        .collect()
}

// Both the worker and the adviser run under bubblewrap here, where the fake agent cannot keep
// its recordings: what they did is read from the root's result (its DAG, and the advice the
// worker quotes in its evidence).

#[test]
fn claude_advises_an_opencode_worker_under_handoffs_sandbox_without_its_shell() {
    let (_sb, run) = opencode_asks("claude", &[("ANTHROPIC_API_KEY", "sk-ant-test-key")]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.status(), "succeeded");
    assert_eq!(
        advice(&run),
        ["claude: exit 0 succeeded claude finished advice"],
        "{}",
        run.stdout
    );
    let nodes = dag_nodes(&run);
    assert_eq!(nodes.len(), 2, "{nodes:#?}");
    let node = &nodes[1];
    assert_eq!(node["targetHarness"], "claude");
    assert_eq!(node["state"], "succeeded");
    assert_eq!(
        node["attenuated"]["withheld"],
        serde_json::json!(["bash"]),
        "{node:#}"
    );
    assert_eq!(node["attenuated"]["handoffSandbox"], true, "{node:#}");
    let because = node["attenuated"]["because"].as_array().unwrap();
    assert!(
        because
            .iter()
            .any(|b| b["dimension"] == "filesystemRead" && b["asked"] == "anywhere"),
        "{node:#}"
    );
    // As isolated as the worker on every dimension.
    assert_eq!(node["isolation"], nodes[0]["isolation"], "{nodes:#?}");
    assert_eq!(node["isolation"]["enforcement"], "handoff");
    assert_eq!(node["isolation"]["filesystemRead"], "worktree");
    assert_dag_consistent(&run.json["dag"]);
}

#[test]
fn without_a_credential_in_the_environment_claude_is_refused_before_it_starts() {
    let (_sb, run) = opencode_asks("claude", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let advice = advice(&run);
    assert_eq!(advice.len(), 1, "{}", run.stdout);
    assert!(
        advice[0].starts_with("claude: exit 5 rejected"),
        "{}",
        advice[0]
    );
    // Admitted under handoff's sandbox, then refused as its run was planned: nothing of it
    // started, and its node says `rejected`.
    let nodes = dag_nodes(&run);
    assert_eq!(nodes.len(), 2, "{nodes:#?}");
    assert_eq!(nodes[1]["targetHarness"], "claude");
    assert_eq!(nodes[1]["state"], "rejected", "{nodes:#?}");
    assert_eq!(nodes[1]["attenuated"]["handoffSandbox"], true);
}

/// Codex's sandbox reads the whole disk too; held by handoff's, with its own still holding its
/// commands inside, it keeps its shell: nothing is withheld.
#[test]
fn codex_advises_an_opencode_worker_under_handoffs_sandbox_with_its_shell() {
    let (_sb, run) = opencode_asks("codex", &[("OPENAI_API_KEY", "sk-test-key")]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        advice(&run),
        ["codex: exit 0 succeeded codex finished advice"],
        "{}",
        run.stdout
    );
    let nodes = dag_nodes(&run);
    assert_eq!(nodes.len(), 2, "{nodes:#?}");
    let node = &nodes[1];
    assert_eq!(
        node["attenuated"]["withheld"],
        serde_json::json!([]),
        "{node:#}"
    );
    assert_eq!(node["attenuated"]["handoffSandbox"], true, "{node:#}");
    assert_eq!(node["isolation"], nodes[0]["isolation"], "{nodes:#?}");
    assert_dag_consistent(&run.json["dag"]);
}

#[test]
fn without_a_key_in_the_environment_codex_is_refused_before_it_starts() {
    let (_sb, run) = opencode_asks("codex", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let advice = advice(&run);
    assert!(
        advice.len() == 1 && advice[0].starts_with("codex: exit 5 rejected"),
        "{advice:?}"
    );
    assert_eq!(dag_nodes(&run)[1]["state"], "rejected");
}
