//! Real OpenCode under handoff's own sandbox: its bash tool, driven by a hostile model, tries
//! to write the user's `~/.bashrc`, a file outside the repository and a git hook, and to leave
//! a process behind; only the worktree edit lands. Its session is imported into the user's
//! OpenCode store afterwards, so it can be exported and resumed (and continued) as before.

use std::process::Command;

use handoff_testkit::model_server::{Script, Step, provider_output};
use serde_json::Value;

use super::Rig;

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_build_under_handoffs_sandbox_edits_only_the_worktree_and_keeps_its_session() {
    let rig = Rig::new("opencode", Script::text("unused"));
    let home = rig.root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bashrc = home.join(".bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let outside = rig.root.join("outside.txt");
    let repo = rig.repo.path().to_path_buf();
    let hook = repo.join(".git/hooks/pre-commit");
    let edited = rig.file("edited.txt");
    let net = rig.file("net.txt");
    // A project configuration the agent writes: OpenCode started in the worktree after the run
    // without `OPENCODE_DISABLE_PROJECT_CONFIG` (the import) would rewrite it.
    let project_config = rig.file("opencode.json");
    // A plugin planted in the run's configuration directory (writable in the sandbox) would run
    // outside it if OpenCode were started there again after the run (for the session import).
    let ran = rig.root.join("plugin-ran");
    let plugin = format!(
        "import fs from 'fs'; fs.writeFileSync('{}', 'x'); \
         export const Planted = async () => ({{}});",
        ran.display()
    );
    std::fs::write(rig.root.join("private/plugin.js"), &plugin).unwrap();
    // The scripted model server the CLI itself talks to, on the host's loopback.
    let server = rig.server.url();
    let port = server.rsplit(':').next().unwrap().trim_end_matches('/');
    rig.server.set_script(Script::new([
        Step::shell(format!(
            "echo pwned >> {bashrc}; echo x > {outside}; echo 'echo hook' > {hook}; \
             printf 'edited by the agent\\n' > {edited}; printf '{{}}' > {project_config}; \
             if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo reached; \
             else echo blocked; fi > {net}; grep -c : /proc/net/dev >> {net}; \
             for d in \"$OPENCODE_CONFIG_DIR\" \"$XDG_CONFIG_HOME/opencode\" \"$HOME/.config/opencode\"; do \
               mkdir -p \"$d/plugin\" \"$d/plugins\"; printf '%s' {plugin_q} > \"$d/plugin/planted.js\"; \
               printf '%s' {plugin_q} > \"$d/plugins/planted.js\"; done; \
             mkdir -p \"$(dirname \"$OPENCODE_CONFIG_DIR\")/../session-import\"",
            plugin_q = format!("'{}'", plugin.replace('\'', "'\\''")),
            bashrc = bashrc.display(),
            outside = outside.display(),
            hook = hook.display(),
        )),
        Step::Answer(provider_output("edited the worktree")),
    ]));
    let run = rig.run("build", &[]);
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded", "{}", run.json);
    let receipt = &run.json["policy"]["sandbox"];
    assert_eq!(receipt["enforcement"], "handoff", "{}", run.json);
    assert!(
        !ran.exists(),
        "a plugin the agent planted ran outside the sandbox"
    );

    assert!(std::fs::read_to_string(&edited).is_ok_and(|s| s.contains("edited by the agent")));
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert!(
        !outside.exists(),
        "a file outside the repository was created"
    );
    assert!(!hook.exists(), "a git hook was planted");
    assert_eq!(
        run.changed(),
        vec![
            "edited.txt".to_string(),
            "net.txt".to_string(),
            "opencode.json".to_string()
        ]
    );
    // The model's command could not reach the host's loopback, where its CLI's model is.
    // It ran in a network namespace with loopback as its only interface.
    assert_eq!(std::fs::read_to_string(&net).unwrap(), "blocked\n1\n");
    // The CLI itself ran in a network namespace of its own: it reached its model server on the
    // host's loopback only through handoff's proxy, which counted it.
    let proxy = &receipt["proxy"];
    let model = format!("127.0.0.1:{port}");
    assert!(
        proxy["traffic"]["reached"][&model].as_u64() >= Some(1),
        "{receipt:#}"
    );
    eprintln!("proxy traffic: {}", proxy["traffic"]);

    // The session is imported into the user's store (XDG_DATA_HOME of handoff's environment)
    // after the result, by a detached importer; its record goes once it succeeded.
    let state = &receipt["stateAfterRun"];
    let imported = state["importing"]
        .as_str()
        .unwrap_or_else(|| panic!("no import was started: {receipt}"));
    let record = std::path::PathBuf::from(state["record"].as_str().unwrap());
    let started = std::time::Instant::now();
    while record.exists() {
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        assert!(!text.contains("\"failed\""), "the import failed: {text}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the import never finished: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read_to_string(&project_config).unwrap(),
        "{}",
        "OpenCode rewrote the project's configuration after the run"
    );
    let id = imported
        .split_whitespace()
        .find(|w| w.starts_with("ses_"))
        .unwrap_or_else(|| panic!("{imported}"));
    let out = Command::new(format!("{}/opencode", super::real_bin().display()))
        .args(["--pure", "export", id])
        .current_dir(&repo)
        .env_clear()
        .env("PATH", &rig.path)
        .env("HOME", &home)
        .env("XDG_DATA_HOME", rig.root.join("data"))
        .env("XDG_CACHE_HOME", super::shared_cache())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
    assert_eq!(doc["info"]["id"], id);
    assert_eq!(
        doc["info"]["directory"].as_str(),
        Some(repo.to_str().unwrap()),
        "{}",
        doc["info"]
    );
    assert!(
        doc["messages"].as_array().is_some_and(|m| m.len() >= 2),
        "{}",
        doc["messages"]
    );

    // And it resumes: the user's own `opencode run --session` continues it in the worktree.
    const RESUMED: &str = "resumed after the sandboxed run";
    rig.server.set_script(Script::text(RESUMED));
    let provider = serde_json::json!({
        "provider": {
            "e2e": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "E2E",
                "options": { "baseURL": rig.server.v1_url(), "apiKey": super::MODEL_KEY },
                "models": { "fake-model": { "name": "Fake Model", "tool_call": true } },
            }
        }
    });
    let out = Command::new(format!("{}/opencode", super::real_bin().display()))
        .args([
            "--pure",
            "run",
            "--session",
            id,
            "--model",
            "e2e/fake-model",
        ])
        .args(["--format", "json", "Go on."])
        .current_dir(&repo)
        .env_clear()
        .env("PATH", &rig.path)
        .env("HOME", &home)
        .env("XDG_DATA_HOME", rig.root.join("data"))
        .env("XDG_CACHE_HOME", super::shared_cache())
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_CONFIG_CONTENT", provider.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(RESUMED), "{stdout}");
    assert!(
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .all(|e| e["sessionID"] == id),
        "{stdout}"
    );
}
