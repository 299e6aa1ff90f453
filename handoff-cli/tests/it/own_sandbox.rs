//! handoff's own sandbox (bubblewrap) around agents whose CLI has none: OpenCode here.
//!
//! Each test is something a prompt-injected model tries from its shell (the fake agent's
//! `HANDOFF_FAKE_SHELL`): writing the user's files, planting a git hook, reading a secret,
//! leaving a `setsid` process behind. Before the sandbox, an OpenCode run with bash did each.
//! The tests need a working `bwrap` (`cargo xtask ci` installs Debian's bubblewrap).

use handoff_testkit::keys::{MODE, SHELL};
use serde_json::Value;

use crate::support::{Run, Sandbox, confined, loopback_service, provider_stderr, q};

fn sandbox_receipt(run: &Run) -> &Value {
    &run.json["policy"]["sandbox"]
}

fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            found.push(cmd);
        }
    }
    found
}

#[test]
fn an_opencode_build_writes_the_worktree_and_nothing_else() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    let bashrc = sb.root.join("home/.bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let outside = sb.root.join("outside.txt");
    let git_config = std::fs::read(wt.join(".git/config")).unwrap();
    let script = format!(
        "echo pwned >> {bashrc}; echo x > {outside}; \
         printf '#!/bin/sh\\necho hook\\n' > {hook}; echo '[core]' >> {config}; \
         echo inside > {inside}; (setsid sleep 4243 </dev/null >/dev/null 2>&1 &); \
         grep -c : /proc/net/dev > {interfaces}",
        bashrc = q(&bashrc),
        outside = q(&outside),
        hook = q(&wt.join(".git/hooks/pre-commit")),
        config = q(&wt.join(".git/config")),
        inside = q(&wt.join("inside.txt")),
        interfaces = q(&wt.join("interfaces.txt")),
    );
    sb.agents.set(SHELL, &script);
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);

    let receipt = sandbox_receipt(&run);
    eprintln!("{receipt:#}");
    assert_eq!(receipt["enforcement"], "handoff", "{receipt}");
    assert_eq!(receipt["worktree"], "read-write");
    // The worktree was written; nothing else was.
    assert_eq!(
        std::fs::read_to_string(wt.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert!(!outside.exists(), "a file outside the worktree was created");
    assert!(
        !wt.join(".git/hooks/pre-commit").exists(),
        "a hook was planted"
    );
    assert_eq!(std::fs::read(wt.join(".git/config")).unwrap(), git_config);
    let changed: Vec<&str> = run.json["git"]["changedFiles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(changed.contains(&"inside.txt"), "{changed:?}");
    assert!(
        !changed.iter().any(|p| p.starts_with(".git")),
        "{changed:?}"
    );
    // The shell's commands had no network: loopback was their only interface.
    assert_eq!(
        std::fs::read_to_string(wt.join("interfaces.txt")).unwrap(),
        "1\n"
    );
    // The setsid orphan died with the sandbox's PID namespace.
    assert_eq!(processes_mentioning("sleep 4243"), Vec::<String>::new());
    assert_eq!(run.json["processes"]["treeGone"], true);
}

#[test]
fn a_review_cannot_write_the_worktree_or_read_the_users_files() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    let secret = sb.root.join("home/.ssh/id_secret");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "SECRET-KEY-MATERIAL\n").unwrap();
    let seen = sb.root.join("seen.txt");
    // OpenCode's login, which the CLI reads and its model's commands must not.
    let auth = sb.root.join("home/.local/share/opencode/auth.json");
    std::fs::create_dir_all(auth.parent().unwrap()).unwrap();
    std::fs::write(&auth, "{\"e2e\":{\"key\":\"LOGIN-TOKEN-VALUE\"}}").unwrap();
    // What the shell can read goes to its stderr, which handoff keeps.
    let script = format!(
        "echo x > {inside}; cat {secret} >&2; ls {home} >&2; touch {seen}; \
         (echo evil > \"$SHELL\") 2>/dev/null && echo WRAPPER-WRITTEN >&2; \
         mv \"$(dirname \"$SHELL\")\" \"$(dirname \"$SHELL\").moved\" 2>/dev/null \
           && echo WRAPPER-MOVED >&2; \
         head -c 9 \"$SHELL\" >&2; echo >&2; \
         a=\"$XDG_DATA_HOME/opencode/auth.json\"; \
         if [ -e \"$a\" ] && [ ! -s \"$a\" ]; then echo AUTH-MASKED >&2; fi; cat \"$a\" >&2",
        inside = q(&wt.join("inside.txt")),
        secret = q(&secret),
        home = q(&sb.root.join("home")),
        seen = q(&seen),
    );
    sb.agents.set(SHELL, &script);
    sb.agents.set(MODE, "no-change");
    let run = sb.delegate("claude", "opencode", "review", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    assert_eq!(sandbox_receipt(&run)["worktree"], "read-only");
    assert!(!wt.join("inside.txt").exists());
    assert!(!seen.exists());
    assert_eq!(run.json["git"]["changed"], false);
    let stderr = provider_stderr(&run);
    assert!(!stderr.contains("SECRET-KEY-MATERIAL"), "{stderr}");
    assert!(stderr.contains("No such file or directory"), "{stderr}");
    // The login is mounted for the CLI, and empty for its commands.
    assert!(stderr.contains("AUTH-MASKED"), "{stderr}");
    // The shell wrapper (the one thing between a command and the network) can be neither
    // rewritten nor moved away by a command.
    assert!(stderr.contains("#!/bin/sh"), "{stderr}");
    assert!(!stderr.contains("WRAPPER-WRITTEN"), "{stderr}");
    assert!(!stderr.contains("WRAPPER-MOVED"), "{stderr}");
    assert!(!stderr.contains("LOGIN-TOKEN-VALUE"), "{stderr}");
}

#[test]
fn without_a_working_bubblewrap_the_run_is_unconfined_and_says_so() {
    // The default test sandbox has a `bwrap` stub that runs nothing: the escape the sandbox
    // stops succeeds, and the receipt says the agent ran unconfined.
    let sb = Sandbox::new();
    let outside = sb.root.join("outside.txt");
    sb.agents.set(SHELL, format!("echo x > {}", q(&outside)));
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}", run.stderr);
    let receipt = sandbox_receipt(&run);
    assert_eq!(receipt["enforcement"], "none", "{receipt}");
    assert!(receipt["unavailable"].as_str().is_some());
    assert!(
        outside.exists(),
        "unconfined, the shell writes outside the worktree"
    );
}

#[test]
fn a_claude_worker_gets_advice_from_opencode_under_handoffs_sandbox_and_nothing_lands() {
    let sb = confined();
    sb.record();
    let wt = sb.repo.path().to_path_buf();
    let bashrc = sb.root.join("home/.bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let outside = sb.root.join("outside.txt");
    // Only the adviser (whose supervisor context names OpenCode as the asker) attacks.
    let script = format!(
        "case \"$HANDOFF_SUPERVISOR_CONTEXT\" in *'\"callerHarness\":\"opencode\"'*) \
         echo pwned >> {bashrc}; echo x > {outside}; echo x > {planted};; esac",
        bashrc = q(&bashrc),
        outside = q(&outside),
        planted = q(&wt.join("planted.txt")),
    );
    sb.agents.set(SHELL, &script);
    sb.agents.set(handoff_testkit::keys::ADVICE, "opencode");
    let ins = sb.instructions("Review; ask OpenCode for advice.");
    let cwd = sb.cwd();
    let run = sb.run(&[
        "run-with-advice",
        "--caller-harness",
        "codex",
        "--harness",
        "claude",
        "--mode",
        "review",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let nodes = run.json["dag"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{}", run.json["dag"]);
    let adviser = &nodes[1];
    assert_eq!(adviser["targetHarness"], "opencode");
    assert_eq!(adviser["state"], "succeeded", "{adviser}");
    assert_eq!(adviser["isolation"]["enforcement"], "handoff", "{adviser}");
    assert_eq!(
        adviser["isolation"]["process"], "pid-namespace",
        "{adviser}"
    );
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert!(!outside.exists());
    assert!(!wt.join("planted.txt").exists());
    assert_eq!(run.json["git"]["changed"], false);
    // The adviser's shell did run and was refused: its errors reached the worker in the
    // adviser's result.
    let worker = sb
        .agents
        .invocations()
        .into_iter()
        .find(|r| r.get("nested").is_some())
        .expect("the worker's record");
    let stdout = worker["nested"][0]["stdout"].as_str().unwrap_or_default();
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    let stderr = result["diagnostics"]["providerStderr"]
        .as_str()
        .unwrap_or_default();
    assert!(stderr.contains("shell command ended"), "{stderr}");
    assert!(
        stderr.contains("No such file or directory") || stderr.contains("Read-only file system"),
        "{stderr}"
    );
}

#[test]
fn a_kiro_build_writes_the_worktree_and_its_own_data_and_nothing_else() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    let home = sb.root.join("home");
    let bashrc = home.join(".bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let settings = home.join(".kiro/settings/cli.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{}").unwrap();
    let data = home.join(".local/share/kiro-cli");
    std::fs::create_dir_all(&data).unwrap();
    let script = format!(
        "echo pwned >> {bashrc}; echo '{{\"mcpServers\":{{}}}}' > {settings}; \
         echo kept > {data}/conversation.txt; echo inside > {inside}; \
         grep -c : /proc/net/dev > {interfaces}",
        bashrc = q(&bashrc),
        settings = q(&settings),
        data = q(&data),
        inside = q(&wt.join("inside.txt")),
        interfaces = q(&wt.join("interfaces.txt")),
    );
    sb.agents.set(SHELL, &script);
    let run = sb.delegate("claude", "kiro", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    assert_eq!(sandbox_receipt(&run)["enforcement"], "handoff");
    assert_eq!(
        std::fs::read_to_string(wt.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{}");
    assert_eq!(
        std::fs::read_to_string(data.join("conversation.txt")).unwrap(),
        "kept\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("interfaces.txt")).unwrap(),
        "1\n"
    );
}

#[test]
fn an_opencode_receiver_runs_under_handoffs_sandbox_and_keeps_its_session_in_the_users_store() {
    let sb = confined();
    for (k, v) in [
        ("user.name", "handoff test"),
        ("user.email", "test@example.invalid"),
        ("commit.gpgsign", "false"),
    ] {
        sb.repo.git(&["config", k, v]);
    }
    sb.repo.write("fake-receiver-opencode.txt", "\n");
    sb.repo.commit_all("receiver files");
    let wt = sb.repo.path().to_path_buf();
    let bashrc = sb.root.join("home/.bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let script = format!(
        "echo pwned >> {bashrc}; printf '#!/bin/sh\\n' > {hook}",
        bashrc = q(&bashrc),
        hook = q(&wt.join(".git/hooks/post-checkout")),
    );
    sb.agents.set(SHELL, &script);
    let note = sb.private.join("note.md");
    std::fs::write(
        &note,
        crate::note::SECTIONS
            .iter()
            .map(|s| format!("## {s}\n\nAbout {s}.\n\n"))
            .collect::<String>(),
    )
    .unwrap();
    let cwd = sb.cwd();
    let run = sb.run(&[
        "continue",
        "--cwd",
        &cwd,
        "--note-file",
        note.to_str().unwrap(),
        "--fallback",
        "fresh-agent",
        "--from",
        "claude",
        "--to",
        "opencode",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let receiver = &run.json["receiver"];
    assert_eq!(
        receiver["policy"]["sandbox"]["enforcement"], "handoff",
        "{receiver:#}"
    );
    assert_eq!(receiver["policy"]["sandbox"]["worktree"], "read-write");
    // It runs the user's own OpenCode configuration: any public host through the proxy, but
    // none of the host's loopback services, LAN or abstract sockets.
    let proxy = &receiver["policy"]["sandbox"]["proxy"];
    assert!(
        proxy["publicHosts"]
            .as_str()
            .is_some_and(|p| p.contains("your own OpenCode configuration")),
        "{receiver:#}"
    );
    // The receiver did its work in the worktree; its shell reached neither the user's files
    // nor the git hooks.
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    assert!(!wt.join(".git/hooks/post-checkout").exists());
    assert!(
        std::fs::read_to_string(wt.join("fake-receiver-opencode.txt"))
            .unwrap()
            .contains("continued the task"),
        "{receiver:#}"
    );
    // The session is in the user's store, where the resume command finds it.
    let session = receiver["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{receiver:#}"));
    assert!(!session.is_empty());
    let store = sb.root.join("home/.local/share/opencode");
    assert!(store.is_dir(), "no OpenCode store at {}", store.display());
}

#[test]
fn a_build_cannot_swap_out_a_hooks_directory_deep_in_the_worktree() {
    // `core.hooksPath` at `scripts/hooks`: the directory is read-only, but renaming `scripts`
    // away and making a new `scripts/hooks` would plant a hook the user's next commit runs.
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    std::fs::create_dir_all(wt.join("scripts/hooks")).unwrap();
    std::fs::write(wt.join("scripts/hooks/README"), "hooks\n").unwrap();
    sb.repo.git(&["config", "core.hooksPath", "scripts/hooks"]);
    let script = "mv scripts scripts.old; mkdir -p scripts/hooks; \
                  printf '#!/bin/sh\\necho pwned\\n' > scripts/hooks/pre-commit; \
                  echo inside > inside.txt";
    sb.agents.set(SHELL, script);
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    assert_eq!(sandbox_receipt(&run)["enforcement"], "handoff");
    assert_eq!(
        std::fs::read_to_string(wt.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert!(
        !wt.join("scripts/hooks/pre-commit").exists(),
        "a hook was planted"
    );
    assert!(!wt.join("scripts.old").exists());
}

/// `.git/hooks` a symbolic link into the worktree (as hook managers make it): the directory it
/// leads to is as read-only as `.git` itself, whichever way a command writes it.
#[test]
fn a_build_cannot_plant_a_hook_through_a_symlinked_hooks_directory() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    std::fs::create_dir_all(wt.join("scripts/hooks")).unwrap();
    std::fs::write(wt.join("scripts/hooks/README"), "hooks\n").unwrap();
    let hooks = wt.join(".git/hooks");
    std::fs::remove_dir_all(&hooks).ok();
    std::os::unix::fs::symlink(wt.join("scripts/hooks"), &hooks).unwrap();
    let script = "printf '#!/bin/sh\\necho pwned\\n' > scripts/hooks/pre-commit 2>/dev/null \
                  && echo PLANTED-DIRECT >&2; \
                  printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-push 2>/dev/null \
                  && echo PLANTED-LINK >&2; \
                  echo inside > inside.txt";
    sb.agents.set(SHELL, script);
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let stderr = provider_stderr(&run);
    assert!(!stderr.contains("PLANTED"), "{stderr}");
    assert!(!wt.join("scripts/hooks/pre-commit").exists());
    assert!(!wt.join("scripts/hooks/pre-push").exists());
    assert_eq!(
        std::fs::read_to_string(wt.join("inside.txt")).unwrap(),
        "inside\n"
    );
}

/// When handoff runs as root, bubblewrap keeps root's capabilities for the CLI; the commands of
/// its model get none: they can neither unmount the read-only `.git`, nor make a device node,
/// nor map root in a user namespace of their own. (As another user the commands never had
/// any; the test then shows the same.)
#[test]
fn a_command_cannot_unmount_the_git_cover_or_make_devices() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    let git = wt.join(".git");
    let script = format!(
        "umount {git} 2>/dev/null && echo UNMOUNTED >&2; \
         unshare -Urm sh -c 'umount {git}' 2>/dev/null && echo UNSHARED >&2; \
         echo x > {hook} 2>/dev/null && echo HOOK-PLANTED >&2; \
         mknod /tmp/disk b 253 0 2>/dev/null && echo MKNOD >&2; \
         grep CapEff /proc/self/status >&2",
        git = q(&git),
        hook = q(&git.join("hooks/pre-commit")),
    );
    sb.agents.set(SHELL, &script);
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let stderr = provider_stderr(&run);
    assert!(stderr.contains("CapEff:\t0000000000000000"), "{stderr}");
    for escaped in ["UNMOUNTED", "UNSHARED", "HOOK-PLANTED", "MKNOD"] {
        assert!(!stderr.contains(escaped), "{escaped}: {stderr}");
    }
    assert!(!git.join("hooks/pre-commit").exists());
}

/// A `core.hooksPath` inside the worktree that does not exist yet (husky's `.husky/_` before
/// `npm install`) is protected all the same: a build cannot make it and fill it with hooks.
/// What handoff made to mount it is removed afterwards.
#[test]
fn a_build_cannot_make_a_missing_hooks_directory() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    sb.repo.git(&["config", "core.hooksPath", ".husky/_"]);
    let hooks = wt.join(".husky/_");
    let script = format!(
        "mkdir -p {hooks} 2>/dev/null; printf '#!/bin/sh\\necho hook\\n' > {hook} 2>/dev/null \
         && echo HOOK-PLANTED >&2",
        hooks = q(&hooks),
        hook = q(&hooks.join("pre-commit")),
    );
    sb.agents.set(SHELL, &script);
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let stderr = provider_stderr(&run);
    assert!(!stderr.contains("HOOK-PLANTED"), "{stderr}");
    assert!(!hooks.join("pre-commit").exists(), "a hook was planted");
    assert!(
        !wt.join(".husky").exists(),
        "handoff left the directories it made"
    );
}

#[test]
fn the_cli_reaches_only_its_model_endpoint_through_handoffs_proxy() {
    let sb = confined();
    let (model_port, model_hits) = loopback_service();
    let (other_port, other_hits) = loopback_service();
    let config = sb.root.join("home/.config/handoff/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[agents.opencode]\nprovider = {{ gw = {{ npm = \"@ai-sdk/openai-compatible\", \
             options = {{ baseURL = \"http://127.0.0.1:{model_port}/v1\" }} }} }}\n"
        ),
    )
    .unwrap();
    // The CLI process itself (its HTTP client, an MCP server it starts) tries the host's
    // loopback directly, the model endpoint and another service through the proxy, and a
    // TLS tunnel to a host it was not configured for; its shell looks for the proxy.
    sb.agents.set(
        handoff_testkit::keys::NET,
        format!(
            "direct:127.0.0.1:{other_port} get:http://127.0.0.1:{model_port}/v1/models \
             get:http://127.0.0.1:{other_port}/ connect:evil.example:443 \
             connect:169.254.169.254:80"
        ),
    );
    sb.agents
        .set(SHELL, "ls -A \"$(dirname \"$SHELL\")/../net\" | wc -l >&2");
    let run = sb.delegate(
        "claude",
        "opencode",
        "review",
        &["--model", "gw/m", "--web-search", "false"],
    );
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    let stderr = provider_stderr(&run);
    // The shell's commands see no proxy socket at all.
    assert!(stderr.lines().any(|l| l == "0"), "{stderr}");
    let outcome = |attempt: &str| -> String {
        let prefix = format!("fake-agent: net {attempt} -> ");
        stderr
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no outcome for {attempt}:\n{stderr}"))
            .to_owned()
    };
    assert!(
        outcome(&format!("direct:127.0.0.1:{other_port}")).starts_with("failed"),
        "{stderr}"
    );
    assert_eq!(
        outcome(&format!("get:http://127.0.0.1:{model_port}/v1/models")),
        "HTTP/1.1 200 OK"
    );
    assert!(
        outcome(&format!("get:http://127.0.0.1:{other_port}/")).starts_with("HTTP/1.1 403"),
        "{stderr}"
    );
    assert!(
        outcome("connect:evil.example:443").starts_with("HTTP/1.1 403"),
        "{stderr}"
    );
    assert!(
        outcome("connect:169.254.169.254:80").starts_with("HTTP/1.1 403"),
        "{stderr}"
    );
    assert_eq!(model_hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(other_hits.load(std::sync::atomic::Ordering::SeqCst), 0);

    let receipt = sandbox_receipt(&run);
    let proxy = &receipt["proxy"];
    let endpoints: Vec<&str> = proxy["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["endpoint"].as_str())
        .collect();
    assert!(
        endpoints.contains(&format!("127.0.0.1:{model_port}").as_str()),
        "{receipt:#}"
    );
    assert_eq!(proxy["publicHosts"], Value::Null, "{receipt:#}");
    let traffic = &proxy["traffic"];
    assert_eq!(
        traffic["reached"][format!("127.0.0.1:{model_port}")],
        1,
        "{traffic}"
    );
    assert_eq!(
        traffic["refused"][format!("127.0.0.1:{other_port}")],
        1,
        "{traffic}"
    );
    assert_eq!(traffic["refused"]["evil.example:443"], 1, "{traffic}");
    assert_eq!(traffic["refused"]["169.254.169.254:80"], 1, "{traffic}");
}

#[test]
fn a_panel_member_runs_under_the_sandbox_on_the_panels_worktree() {
    let sb = confined();
    let wt = sb.repo.path().to_path_buf();
    // OpenCode's model tries to write the worktree from its shell; the sandbox keeps the
    // panel's worktree read-only for it, so the panel's one "after" finds nothing changed.
    sb.agents.set(
        &format!("{SHELL}@opencode"),
        format!("echo x > {} 2>/dev/null; true", q(&wt.join("inside.txt"))),
    );
    let ins = sb.instructions("Is the retry loop safe?");
    let cwd = sb.cwd();
    let run = sb.run(&[
        "advice",
        "--caller-harness",
        "claude",
        "--harness",
        "codex,opencode",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json["schemaVersion"], "handoff.panel.v1");
    let opencode = &run.json["members"][1];
    assert_eq!(opencode["target"]["harness"], "opencode");
    let receipt = &opencode["policy"]["sandbox"];
    assert_eq!(receipt["enforcement"], "handoff", "{receipt}");
    assert_eq!(receipt["worktree"], "read-only", "{receipt}");
    assert!(!wt.join("inside.txt").exists());
    assert_eq!(opencode["git"]["changed"], false);
}
