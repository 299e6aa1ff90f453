//! `handoff doctor`: the installation as handoff sees it.

use crate::support::Sandbox;

#[test]
fn doctor_reports_agents_config_and_store() {
    let sb = Sandbox::new();
    sb.agents.uninstall("grok");
    let run = sb.run(&["doctor", "--json"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["schemaVersion"], "handoff.doctor.v1");
    assert_eq!(r["ok"], true);
    assert_eq!(r["config"]["ok"], true);
    assert!(r["config"]["file"].is_null());
    assert_eq!(r["taskStore"]["created"], false);
    let agent = |id: &str| {
        r["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(agent("codex")["ok"], true, "{r:#}");
    assert_eq!(agent("grok")["installed"], false);
    assert_eq!(agent("grok")["continuation"]["receive"], false);
    assert_eq!(agent("claude")["continuation"]["receive"], true);
    let hosts: Vec<&str> = r["plugin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["claude-code", "codex"]);

    let text = sb.run(&["doctor"]);
    assert_eq!(text.code, 0, "{text:#?}");
    assert!(
        text.stdout
            .contains("grok      not installed (grok not on PATH)"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("task store"));
}

#[test]
fn a_broken_configuration_makes_doctor_fail() {
    let sb = Sandbox::new();
    let config = sb.root.join("config.toml");
    std::fs::write(&config, "[agents.claude]\nmodle = \"x\"\n").unwrap();
    let run = sb.exec(
        sb.command()
            .env("HANDOFF_CONFIG", &config)
            .args(["doctor", "--json"]),
    );
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.json["ok"], false);
    assert!(
        run.json["config"]["error"]
            .as_str()
            .unwrap()
            .contains("modle"),
        "{run:#?}"
    );
}

/// Makes the sandbox's task store (at its default path) with one task, and returns its path.
fn store_with_a_task(sb: &Sandbox) -> std::path::PathBuf {
    let cwd = sb.cwd();
    for (k, v) in [
        ("user.name", "t"),
        ("user.email", "t@t"),
        ("commit.gpgsign", "false"),
    ] {
        sb.repo.git(&["config", k, v]);
    }
    sb.repo.write("a.txt", "a\n");
    let run = sb.run(&["checkpoint", "--cwd", &cwd, "--agent", "claude", "a.txt"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let path = sb.root.join("home/.local/state/handoff/tasks.sqlite3");
    assert!(path.exists());
    path
}

#[test]
fn a_store_that_fails_its_integrity_check_makes_doctor_fail() {
    let sb = Sandbox::new();
    let path = store_with_a_task(&sb);
    assert_eq!(
        sb.run(&["doctor", "--json"]).json["taskStore"]["integrity"],
        "ok"
    );
    // A row whose task does not exist: the kind of damage a plain read never notices.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    conn.execute(
        "INSERT INTO task_config_states (task_id, state, recorded_at) VALUES ('task-gone', '{}', 'x')",
        [],
    )
    .unwrap();
    drop(conn);
    let run = sb.run(&["doctor", "--json"]);
    assert_eq!(run.code, 1, "{run:#?}");
    let store = &run.json["taskStore"];
    assert_eq!(store["ok"], false, "{run:#?}");
    assert!(
        store["error"]
            .as_str()
            .unwrap()
            .contains("integrity check failed"),
        "{run:#?}"
    );
    let text = sb.run(&["doctor"]);
    assert!(
        text.stdout.contains("task store  BROKEN"),
        "{}",
        text.stdout
    );
}

#[test]
fn a_store_others_can_read_makes_doctor_fail() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let path = store_with_a_task(&sb);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = sb.run(&["doctor", "--json"]);
    assert_eq!(run.code, 1, "{run:#?}");
    let error = run.json["taskStore"]["error"].as_str().unwrap();
    assert!(
        error.contains("mode 0644") && error.contains("chmod 600"),
        "{run:#?}"
    );
}

/// Each CLI's version against the range the real-CLI suite passed on: tested, newer (one
/// warning line, never a refusal) or unknown (no range: not run by the real suite).
#[test]
fn capabilities_and_doctor_place_each_cli_against_its_tested_versions() {
    use handoff_testkit::keys::VERSION;
    // The generated ranges, whatever the last green lanes widened them to.
    let tested = handoff_core::tested_ranges(include_str!(
        "../../../handoff-adapters/tested-versions.toml"
    ))
    .unwrap();
    let sb = Sandbox::new();
    sb.agents.set(&format!("{VERSION}@claude"), "99.1.0");
    // The fake Codex reports a version the codex range holds.
    sb.agents
        .set(&format!("{VERSION}@codex"), &tested["codex"].max);
    let caps = sb.run(&["capabilities", "--json"]);
    assert_eq!(caps.code, 0, "{caps:#?}");
    let provider = |id: &str| {
        caps.json["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .unwrap()
            .clone()
    };
    let claude = provider("claude");
    assert_eq!(claude["version"]["status"], "newer", "{claude:#}");
    assert_eq!(claude["version"]["installed"], "99.1.0 (Claude Code)");
    assert_eq!(
        claude["version"]["tested"]["min"],
        tested["claude"].min.as_str()
    );
    let warning = claude["version"]["warning"].as_str().unwrap();
    assert!(
        warning.starts_with("claude 99.1.0 is newer than"),
        "{warning}"
    );
    assert_eq!(provider("codex")["version"]["status"], "tested");
    assert_eq!(provider("kiro")["version"]["status"], "unknown");
    assert!(provider("kiro")["version"]["tested"].is_null());
    // What each CLI's own sandbox leaves, and how that was established.
    assert_eq!(claude["sandboxArtifacts"]["verified"], "real");
    assert_eq!(
        provider("cursor")["sandboxArtifacts"]["verified"],
        "unproven"
    );
    assert!(provider("opencode")["sandboxArtifacts"].is_null());

    // The newer CLI still runs.
    let run = sb.delegate("codex", "claude", "review", &[]);
    assert_eq!(run.code, 0, "{run:?}");

    for args in [&["capabilities"][..], &["doctor"]] {
        let text = sb.run(args);
        assert_eq!(text.code, 0, "{text:#?}");
        let warnings: Vec<&str> = text
            .stdout
            .lines()
            .filter(|l| {
                l.trim_start()
                    .starts_with("warning: claude 99.1.0 is newer")
            })
            .collect();
        assert_eq!(warnings.len(), 1, "{args:?}: {}", text.stdout);
        let codex = format!("(tested {} – {})", tested["codex"].min, tested["codex"].max);
        assert!(text.stdout.contains(&codex), "{}", text.stdout);
    }
}

/// A task store truncated to nothing is not re-created as if new: doctor says so (exit 1),
/// the commands that read history refuse it naming the file (exit 5), and a run goes on,
/// saying it was not recorded, without touching the file.
#[test]
fn an_emptied_task_store_is_reported_and_never_recreated() {
    let sb = Sandbox::new();
    let path = store_with_a_task(&sb);
    std::fs::write(&path, b"").unwrap();
    for side in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{side}", path.display()));
    }
    let doctor = sb.run(&["doctor", "--json"]);
    assert_eq!(doctor.code, 1, "{doctor:?}");
    let error = doctor.json["taskStore"]["error"].as_str().unwrap_or("");
    assert!(error.contains("is empty"), "{}", doctor.json["taskStore"]);
    let log = sb.run(&["log", "--cwd", &sb.cwd()]);
    assert_eq!(log.code, 5, "{log:?}");
    assert!(
        log.stderr.contains("is empty") && log.stderr.contains("tasks.sqlite3"),
        "{log:?}"
    );
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("not recorded"), "{run:?}");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "the store was re-created"
    );
}
