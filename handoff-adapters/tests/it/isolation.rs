//! Each agent's isolation ranking: the table that ranks every shape of every agent (a
//! snapshot, and the README's copy of it, which must not drift), and rankings that follow the
//! configuration the adapters' plans actually build.

use camino::Utf8PathBuf;
use handoff_adapters::default_registry;
use handoff_core::{
    FilesystemRead, FilesystemWrite, Invocation, Isolation, NestedAccess, RunInput, RunShape,
    UnixSockets, isolation_of, isolation_table, render_isolation_table,
};
use serde_json::Value;

use crate::support::*;

const README_START: &str = "<!-- isolation-table:start -->";
const README_END: &str = "<!-- isolation-table:end -->";

fn table() -> String {
    render_isolation_table(&isolation_table(&default_registry()))
}

#[test]
fn the_isolation_table() {
    insta::assert_snapshot!(table());
}

/// The README's isolation table is the code's, rendered: editing either alone fails here.
#[test]
fn the_readme_shows_the_isolation_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let start = readme
        .find(README_START)
        .expect("README has the start marker")
        + README_START.len();
    let end = readme.find(README_END).expect("README has the end marker");
    let shown = readme[start..end].trim();
    let expected = table();
    assert_eq!(
        shown,
        expected.trim(),
        "README.md's isolation table differs from the code's; put this between the markers:\n{expected}"
    );
}

/// Plans `input` as a worker that may (or may not) ask for nested advice.
fn plan(fx: &Fixture, input: &RunInput, nested: bool) -> (Invocation, Isolation) {
    let validated = validate(input);
    let harness = validated.request.target.harness.to_string();
    let mut run = fx.run_dir(&validated, &harness, parent_env());
    run.nested = nested.then(|| NestedAccess {
        mailbox: fx.root.join("handoff-mailboxes-0/mb-abc"),
        handoff_exe: Utf8PathBuf::from("/usr/local/bin/handoff"),
    });
    let mut request = validated.request.clone();
    request.delegation.mode = if nested {
        handoff_core::DelegationMode::AdviceOnly
    } else {
        handoff_core::DelegationMode::None
    };
    let inv = provider(&harness)
        .invocation(&request, &run)
        .unwrap_or_else(|e| panic!("{harness}: {e}"));
    let iso = isolation_of(&default_registry(), &request).unwrap();
    assert_eq!(
        iso,
        provider(&harness).isolation(&RunShape::of(&request)),
        "{harness}"
    );
    (inv, iso)
}

fn with(fx: &Fixture, harness: &str, mode: Option<&str>, bash: bool) -> RunInput {
    let mut input = fx.input(harness, mode);
    input.bash = Some(bash.to_string());
    input
}

fn claude_settings(inv: &Invocation) -> Value {
    serde_json::from_str(arg_after(&inv.args, "--settings").unwrap()).unwrap()
}

/// No plan of Claude Code's or Codex's opens a Unix socket, nested advice or not (the worker
/// reaches the supervisor through its mailbox), and neither is ranked as reaching one.
#[test]
fn unix_sockets_are_ranked_as_the_plan_opens_them() {
    let fx = Fixture::new();
    for harness in ["claude", "codex"] {
        for mode in [Some("review"), Some("build"), None] {
            for bash in [true, false] {
                for nested in [false, true] {
                    let (inv, iso) = plan(&fx, &with(&fx, harness, mode, bash), nested);
                    let case = format!("{harness} {mode:?} bash={bash} nested={nested}");
                    match harness {
                        "claude" => assert_eq!(
                            claude_settings(&inv)["sandbox"]["network"],
                            serde_json::json!({"allowedDomains": []}),
                            "{case}"
                        ),
                        _ => assert!(
                            !inv.args.iter().any(|a| a.contains("unix_socket")
                                || a.contains("network_proxy")
                                || a.starts_with("permissions.") && a.contains(".network")),
                            "{case}: {:?}",
                            inv.args
                        ),
                    }
                    assert_eq!(iso.unix_sockets, UnixSockets::None, "{case}");
                }
            }
        }
    }
}

/// Writes are ranked from the sandbox mode and the tools the plan allows.
#[test]
fn writes_are_ranked_as_the_plan_allows_them() {
    let fx = Fixture::new();
    for mode in [Some("review"), Some("build"), None] {
        for bash in [true, false] {
            for nested in [false, true] {
                let case = format!("{mode:?} bash={bash} nested={nested}");
                // Codex: the sandbox mode (or the profile it extends) decides.
                let (inv, iso) = plan(&fx, &with(&fx, "codex", mode, bash), nested);
                let read_only = arg_after(&inv.args, "--sandbox") == Some("read-only")
                    || inv
                        .args
                        .iter()
                        .any(|a| a.ends_with(".extends=\":read-only\""));
                assert_eq!(
                    iso.filesystem_write,
                    if read_only {
                        FilesystemWrite::None
                    } else {
                        FilesystemWrite::WorktreeAndTemp
                    },
                    "codex {case}"
                );
                // Claude Code: Write by name writes anywhere; the sandboxed Bash of a
                // read-only run writes only its temporary directory, the run's own (removed
                // with it), and none of the shared areas; neither, nothing.
                let (inv, iso) = plan(&fx, &with(&fx, "claude", mode, bash), nested);
                let tools = arg_after(&inv.args, "--allowedTools").unwrap();
                let tools: Vec<&str> = tools.split(',').collect();
                // The mailbox's in/ (the supervisor's channel) is not counted as a write.
                let sandbox_writes = claude_settings(&inv)["sandbox"]["filesystem"]["allowWrite"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|p| !p.as_str().unwrap().ends_with("/mb-abc/in"))
                    .count();
                let expected = if tools.contains(&"Write") {
                    FilesystemWrite::Anywhere
                } else if tools.contains(&"Bash") {
                    assert_eq!(sandbox_writes, 0, "claude {case}");
                    assert_eq!(
                        inv.env.get("CLAUDE_CODE_TMPDIR").map(String::as_str),
                        Some(fx.run_path.join("tmp").as_str()),
                        "claude {case}"
                    );
                    let denied = &claude_settings(&inv)["sandbox"]["filesystem"]["denyWrite"];
                    for area in ["/tmp/claude", "~/.claude/debug", "~/.npm/_logs"] {
                        assert!(
                            denied
                                .as_array()
                                .unwrap()
                                .contains(&serde_json::json!(area)),
                            "claude {case}: {area}"
                        );
                    }
                    FilesystemWrite::None
                } else {
                    FilesystemWrite::None
                };
                assert_eq!(iso.filesystem_write, expected, "claude {case}");
            }
        }
    }
}

/// OpenCode runs under handoff's sandbox where one can run: its data directory private to the
/// run (logins and downloaded tools mounted read-only), the worktree its only writable user
/// path, its processes in a PID namespace. Elsewhere, without a shell its file tools stay in
/// the worktree (`external_directory` denied); with one, nothing is confined.
#[test]
fn opencode_runs_under_handoffs_sandbox_where_one_can_run() {
    use handoff_core::{Enforcement, Network, ProcessContainment};
    let fx = Fixture::new();
    for sandbox in [true, false] {
        for mode in [Some("review"), Some("build"), None] {
            for bash in [true, false] {
                let case = format!("sandbox {sandbox}, {mode:?}, bash {bash}");
                let input = with(&fx, "opencode", mode, bash);
                let validated = validate(&input);
                let mut run = fx.run_dir(&validated, "opencode", parent_env());
                run.handoff_sandbox = sandbox;
                let inv = provider("opencode")
                    .invocation(&validated.request, &run)
                    .unwrap();
                let mut shape = RunShape::of(&validated.request);
                shape.handoff_sandbox = sandbox;
                let iso = provider("opencode").isolation(&shape);
                let permission: Value =
                    serde_json::from_str(&inv.env["OPENCODE_PERMISSION"]).unwrap();
                assert_eq!(permission["external_directory"], "deny");
                assert_eq!(permission["bash"], if bash { "allow" } else { "deny" });
                let data = Utf8PathBuf::from(&inv.env["XDG_DATA_HOME"]);
                if sandbox {
                    let spec = inv.sandbox.as_ref().expect(&case);
                    assert!(data.starts_with(&fx.run_path), "{case}: {data}");
                    assert!(spec.binds.iter().all(|b| !b.writable), "{case}");
                    // Logins and tools into the data directory; the configuration roots
                    // read-only in place.
                    let config = Utf8PathBuf::from(&inv.env["XDG_CONFIG_HOME"]);
                    assert!(
                        spec.binds
                            .iter()
                            .all(|b| b.dest.starts_with(&data) || b.dest == config),
                        "{case}"
                    );
                    assert!(spec.binds.iter().any(|b| b.dest == config), "{case}");
                    assert_eq!(inv.env["OPENCODE_CONFIG_DIR"], config.as_str(), "{case}");
                    assert!(
                        inv.files
                            .iter()
                            .any(|f| f.path == config.join(".gitignore")),
                        "{case}"
                    );
                    assert!(inv.policy.get("sandbox").is_none(), "{case}");
                    assert_eq!(iso.enforcement, Enforcement::Handoff, "{case}");
                    assert_eq!(iso.filesystem_read, FilesystemRead::Worktree, "{case}");
                    assert_eq!(iso.process, ProcessContainment::PidNamespace, "{case}");
                    let writes = if validated.request.grants.resolved.write {
                        FilesystemWrite::Worktree
                    } else {
                        FilesystemWrite::None
                    };
                    assert_eq!(iso.filesystem_write, writes, "{case}");
                    // Its commands run without network or abstract sockets (the shell
                    // wrapper); the web tools are the only way out, when granted.
                    assert!(spec.offline_shell, "{case}");
                    let web = validated.request.grants.resolved.web_search;
                    let network = if web { Network::Web } else { Network::None };
                    assert_eq!(iso.network, network, "{case}");
                    assert_eq!(iso.unix_sockets, UnixSockets::None, "{case}");
                } else {
                    assert!(inv.sandbox.is_none(), "{case}");
                    assert!(!data.starts_with(&fx.run_path), "{case}: {data}");
                    assert_eq!(inv.policy["sandbox"]["enforcement"], "none", "{case}");
                    if bash {
                        assert_eq!(
                            iso,
                            Isolation {
                                process: handoff_core::process_containment(),
                                ..Isolation::unconfined()
                            },
                            "{case}"
                        );
                    } else {
                        assert_eq!(iso.filesystem_read, FilesystemRead::Worktree, "{case}");
                        assert_eq!(iso.unix_sockets, UnixSockets::None, "{case}");
                    }
                }
            }
        }
    }
}
