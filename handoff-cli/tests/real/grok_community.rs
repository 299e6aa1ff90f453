//! The real community Grok CLI (`@vibe-kit/grok-cli` 0.0.34) as `grok-community`, under
//! handoff's own sandbox, against the scripted model server (non-streaming Chat Completions):
//! a build creates a file with its `create_file` tool, a review's write through its shell does
//! not land, and a command's writes to `~/.bashrc` and outside the repository have no effect.
//! The CLI itself writes default project settings (`.grok/settings.json`) into a writable
//! worktree that has none; a build's changes show them.

use std::path::Path;

use handoff_testkit::model_server::{Reply, Script, Step, provider_output};

use super::Rig;

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn grok_community_build_creates_a_file_with_its_own_tool() {
    let rig = Rig::new("grok-community", Script::text("unused"));
    let target = rig.file("hello.txt");
    rig.server.set_script(Script::new([
        Step::write_file(&target, "hello from the community grok cli\n"),
        Step::Answer(provider_output("wrote hello.txt")),
    ]));
    let run = rig.run("build", &[]);
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(run.json["policy"]["sandbox"]["enforcement"], "handoff");
    // The CLI ran in a network namespace of its own: its model server on the host's loopback
    // was reached only through the relay's stand-in address and handoff's proxy.
    let model = rig
        .server
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let traffic = &run.json["policy"]["sandbox"]["proxy"]["traffic"];
    assert!(
        traffic["reached"][&model].as_u64() >= Some(1),
        "{traffic} ({model})"
    );
    // Besides the file, the CLI writes its default project settings into a worktree without
    // any (a build's worktree is writable): they show among the changes.
    assert_eq!(
        run.changed(),
        vec![".grok/settings.json".to_string(), "hello.txt".to_string()]
    );
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(rig.repo.path().join(".grok/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings, serde_json::json!({"model": "grok-code-fast-1"}));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from the community grok cli\n"
    );
    let calls: Vec<String> = rig
        .server
        .requests()
        .into_iter()
        .filter_map(|r| match r.reply {
            Reply::ToolCall { tool, .. } => Some(tool),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["create_file"]);
    assert_eq!(run.json["output"]["response"], "wrote hello.txt");
    // Nothing was saved into the user's settings.
    assert!(!rig.root.join("home/.grok").exists());
    rig.assert_no_process_left();
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn grok_community_review_cannot_write_the_worktree() {
    let rig = Rig::new("grok-community", Script::text("unused"));
    let evil = rig.file("evil.txt");
    rig.server.set_script(Script::new([
        Step::shell(format!("printf planted > {evil}")),
        Step::Answer(provider_output("reviewed")),
    ]));
    let run = rig.run("review", &[]);
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["policy"]["sandbox"]["worktree"], "read-only");
    assert!(!Path::new(&evil).exists(), "the review wrote the worktree");
    assert!(run.changed().is_empty(), "{:?}", run.changed());
    let call_id = rig
        .server
        .requests()
        .into_iter()
        .find_map(|r| match r.reply {
            Reply::ToolCall { call_id, .. } => Some(call_id),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no shell call: {}", run.json));
    let output = rig.server.tool_output(&call_id).unwrap_or_default();
    assert!(output.contains("Read-only file system"), "{output}");
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn grok_community_commands_reach_only_the_worktree() {
    let rig = Rig::new("grok-community", Script::text("unused"));
    let bashrc = rig.root.join("home/.bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let outside = rig.root.join("outside.txt");
    let repo = rig.repo.path().to_path_buf();
    let hook = repo.join(".git/hooks/pre-commit");
    let edited = rig.file("edited.txt");
    rig.server.set_script(Script::new([
        Step::shell(format!(
            "echo pwned >> {bashrc}; echo pwned >> ~/.bashrc; echo x > {outside}; \
             echo 'echo hook' > {hook}; printf 'edited by the agent\\n' > {edited}",
            bashrc = bashrc.display(),
            outside = outside.display(),
            hook = hook.display(),
        )),
        Step::Answer(provider_output("edited the worktree")),
    ]));
    let run = rig.run("build", &[]);
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded");
    assert_eq!(
        std::fs::read_to_string(&edited).unwrap(),
        "edited by the agent\n"
    );
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert!(
        !outside.exists(),
        "a file outside the repository was created"
    );
    assert!(!hook.exists(), "a git hook was planted");
    assert_eq!(
        run.changed(),
        vec![".grok/settings.json".to_string(), "edited.txt".to_string()]
    );
    rig.assert_no_process_left();
}
