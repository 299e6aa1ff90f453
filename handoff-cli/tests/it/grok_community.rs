//! The community Grok CLI (`--harness grok-community`, the fake `grok` with
//! `HANDOFF_FAKE_GROK=community`) through the `handoff` binary: it runs only under handoff's
//! own sandbox, its shell (`/bin/sh`, whatever `$SHELL` says) writes the worktree in a build
//! and nothing in a review, nothing lands in the user's home, and every control it cannot
//! honour is refused before it starts. The agent `grok` finding this CLI names
//! `grok-community`; `grok-community` finding xAI's CLI names `grok`.

use handoff_testkit::keys::{GROK, MODE, SHELL};
use serde_json::Value;

use crate::support::{Run, Sandbox, provider_stderr, q};

/// A sandbox whose `PATH` finds the system's real `bwrap`, with the community `grok`.
fn confined() -> Sandbox {
    let sb = crate::support::confined();
    sb.agents.set(GROK, "community");
    sb
}

fn message(run: &Run) -> &str {
    run.json["diagnostics"]["message"]
        .as_str()
        .unwrap_or_default()
}

fn changed(run: &Run) -> Vec<String> {
    serde_json::from_value(run.json["git"]["changedFiles"].clone()).unwrap_or_default()
}

/// The recorded runs of the CLI itself (probes left out).
fn agent_runs(sb: &Sandbox) -> Vec<Value> {
    sb.agents
        .invocations()
        .into_iter()
        .filter(|i| {
            i["argv"]
                .as_array()
                .is_some_and(|a| a.iter().any(|w| w == "-p"))
        })
        .collect()
}

#[test]
fn a_build_edits_the_worktree_under_handoffs_sandbox_and_nothing_else() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    let home = sb.root.join("home");
    let bashrc = home.join(".bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let outside = sb.root.join("outside.txt");
    let script = format!(
        "echo pwned >> {bashrc}; echo x > {outside}; echo inside > {inside}; \
         mkdir -p \"$HOME/.grok\" && echo '{{}}' > \"$HOME/.grok/user-settings.json\"; \
         printf '#!/bin/sh\\n' > {hook}; echo \"shell=$0\" >&2; \
         echo \"home=$HOME\" >&2; echo \"pwd=$(pwd)\" >&2",
        bashrc = q(&bashrc),
        outside = q(&outside),
        inside = q(&wt.join("inside.txt")),
        hook = q(&wt.join(".git/hooks/pre-commit")),
    );
    sb.agents.set(SHELL, &script);
    let run = sb.delegate("claude", "grok-community", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.code, 0);
    let receipt = &run.json["policy"]["sandbox"];
    assert_eq!(receipt["enforcement"], "handoff", "{receipt}");
    assert_eq!(receipt["worktree"], "read-write");
    assert_eq!(run.json["output"]["response"], "grok finished build");
    // The worktree was written, by its file tool and its shell; nothing else was.
    let mut files = changed(&run);
    files.sort();
    assert_eq!(files, ["fake-build.txt", "inside.txt"]);
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert!(!outside.exists(), "a file outside the worktree was created");
    assert!(
        !wt.join(".git/hooks/pre-commit").exists(),
        "a hook was planted"
    );
    assert!(
        !home.join(".grok").exists(),
        "the user's ~/.grok was touched"
    );
    // Its shell is /bin/sh, whatever $SHELL says: commands keep the CLI's network.
    assert!(
        provider_stderr(&run).contains("shell=/bin/sh"),
        "{}",
        provider_stderr(&run)
    );
    // HOME is private to the run; the CLI's shell works in the worktree.
    let stderr = provider_stderr(&run);
    let home_line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("home="))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(home_line.ends_with("/grok-home"), "{home_line}");
    assert!(
        !home_line.starts_with(home.to_str().unwrap()),
        "{home_line}"
    );
    assert!(stderr.contains(&format!("pwd={}", sb.cwd())), "{stderr}");
}

#[test]
fn a_review_cannot_write_the_worktree() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    let secret = sb.root.join("home/.ssh/id_secret");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "SECRET-KEY-MATERIAL\n").unwrap();
    sb.agents.set(
        SHELL,
        format!(
            "echo x > {inside}; cat {secret} >&2",
            inside = q(&wt.join("inside.txt")),
            secret = q(&secret),
        ),
    );
    sb.agents.set(MODE, "mutate");
    let run = sb.delegate("claude", "grok-community", "review", &[]);
    // Its file tool's write failed too (the fake CLI then gives up): nothing landed.
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert_eq!(run.json["policy"]["sandbox"]["worktree"], "read-only");
    assert!(!wt.join("inside.txt").exists());
    assert!(!wt.join("fake-mutation.txt").exists());
    assert_eq!(run.json["git"]["changed"], false, "{}", run.json["git"]);
    let stderr = provider_stderr(&run);
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(!stderr.contains("SECRET-KEY-MATERIAL"), "{stderr}");
}

#[test]
fn a_review_that_only_reads_succeeds() {
    let sb = confined();
    sb.agents.set(MODE, "no-change");
    let run = sb.delegate("claude", "grok-community", "verify", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json["policy"]["sandbox"]["worktree"], "read-only");
}

#[test]
fn an_api_error_exiting_zero_is_the_agents_failure() {
    let sb = confined();
    sb.agents.set(MODE, "agent-error");
    let run = sb.delegate("claude", "grok-community", "build", &[]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_eq!(run.status(), "failed", "{}", run.stdout);
    assert!(
        message(&run).contains("Sorry, I encountered an error"),
        "{}",
        run.stdout
    );
}

#[test]
fn without_a_working_bubblewrap_it_is_refused_before_it_starts() {
    // The default test sandbox has a `bwrap` stub that runs nothing.
    let sb = Sandbox::new();
    sb.agents.set(GROK, "community");
    sb.record();
    let outside = sb.root.join("outside.txt");
    sb.agents.set(SHELL, format!("echo x > {}", q(&outside)));
    let run = sb.delegate("claude", "grok-community", "build", &[]);
    assert_eq!(run.code, 5, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.status(), "rejected");
    let m = message(&run);
    assert!(
        m.contains("no sandbox of its own") && m.contains("bubblewrap"),
        "{m}"
    );
    assert!(agent_runs(&sb).is_empty(), "the CLI was started");
    assert!(!outside.exists());
}

#[test]
fn controls_it_cannot_honour_are_refused_before_it_starts() {
    let sb = confined();
    // A build that started would leave this in the worktree (the record directory is out of
    // the sandbox's reach, so the fake's own record would not tell).
    sb.agents.set(SHELL, "echo started > started.txt");
    for (extra, expected) in [
        (&["--effort", "high"][..], "unsupported for grok-community"),
        (
            &["--web-search", "true"],
            "webSearch is unsupported for grok-community",
        ),
        (
            &["--bash", "false"],
            "bash=false is unsupported for grok-community",
        ),
    ] {
        let run = sb.delegate("claude", "grok-community", "build", extra);
        assert_eq!(run.code, 5, "{extra:?}: {}", run.stdout);
        assert_eq!(run.status(), "rejected");
        assert!(run.stdout.contains(expected), "{extra:?}: {}", run.stdout);
    }
    assert!(
        !sb.repo.path().join("started.txt").exists(),
        "the CLI was started"
    );
}

#[test]
fn each_grok_agent_names_the_other_when_it_finds_the_other_cli() {
    // `grok` finding the community CLI.
    let sb = confined();
    let run = sb.delegate("claude", "grok", "review", &[]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.status(), "not_run");
    let m = message(&run);
    assert!(m.contains("community vibe-kit Grok CLI"), "{m}");
    assert!(m.contains("grok-community"), "{m}");

    // `grok-community` finding xAI's CLI.
    let sb = confined();
    sb.agents.set(GROK, "xai");
    let run = sb.delegate("claude", "grok-community", "review", &[]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let m = message(&run);
    assert!(m.contains("xAI's grok CLI"), "{m}");
    assert!(m.contains("the agent `grok`"), "{m}");
}

#[test]
fn the_cli_and_its_commands_reach_only_the_model_endpoint_at_an_address_of_its_own() {
    let sb = confined();
    let (model_port, model_hits) = crate::support::loopback_service();
    let (other_port, other_hits) = crate::support::loopback_service();
    let config = sb.root.join("home/.config/handoff/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[agents.grok-community]\nenv = {{ GROK_BASE_URL = \"http://127.0.0.1:{model_port}/v1\" }}\n"
        ),
    )
    .unwrap();
    // The CLI (whose HTTP client ignores proxy variables) calls its model endpoint and another
    // service on the host's loopback; its shell resolves a name the sandbox did not give.
    sb.agents.set(
        handoff_testkit::keys::NET,
        format!("http:127.0.0.1:{model_port} http:127.0.0.1:{other_port}"),
    );
    sb.agents.set(
        SHELL,
        "getent hosts api.x.ai >&2 || echo 'no name' >&2; grep -c : /proc/net/dev >&2",
    );
    let run = sb.delegate("claude", "grok-community", "review", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let stderr = provider_stderr(&run);
    let outcome = |attempt: &str| -> String {
        let prefix = format!("fake-agent: net {attempt} -> ");
        stderr
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no outcome for {attempt}:\n{stderr}"))
            .to_owned()
    };
    assert_eq!(
        outcome(&format!("http:127.0.0.1:{model_port}")),
        "HTTP/1.1 200 OK"
    );
    assert!(
        outcome(&format!("http:127.0.0.1:{other_port}")).starts_with("failed"),
        "{stderr}"
    );
    assert_eq!(model_hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(other_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    // Its commands share the namespace: loopback only, and no name but the endpoint's.
    assert!(stderr.lines().any(|l| l == "no name"), "{stderr}");
    assert!(stderr.lines().any(|l| l == "1"), "{stderr}");

    let proxy = &run.json["policy"]["sandbox"]["proxy"];
    assert_eq!(
        proxy["traffic"]["reached"][format!("127.0.0.1:{model_port}")],
        1,
        "{proxy:#}"
    );
    assert_eq!(
        proxy["reachedBy"]["addresses"][0]["address"],
        format!("127.0.0.1:{model_port}"),
        "{proxy:#}"
    );
}

#[test]
fn the_default_endpoint_gets_a_name_in_the_sandboxs_hosts_file() {
    let sb = confined();
    sb.agents.set(SHELL, "getent hosts api.x.ai >&2");
    let run = sb.delegate("claude", "grok-community", "review", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let stderr = provider_stderr(&run);
    assert!(
        stderr
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["127.0.0.2", "api.x.ai"]),
        "{stderr}"
    );
    let proxy = &run.json["policy"]["sandbox"]["proxy"];
    assert_eq!(
        proxy["endpoints"][0]["endpoint"], "api.x.ai:443",
        "{proxy:#}"
    );
}
