//! `handoff continue --on`: the other machine is reached through `$HANDOFF_SSH` =
//! `fake-ssh -F <config>`, the testkit's stand-in for the ssh client (no sshd, no network): a
//! login there gets its own session, HOME (also its working directory), PATH and a scrubbed
//! environment. Run as root (CI), the login is a second account (`handoff-remote`) whose files
//! are its own; otherwise it is this user with its own HOME and PATH. The git remote is a bare
//! repository both sides reach. `cargo xtask e2e-real` runs `continue --on` over a real sshd
//! (`tests/real/remote.rs`).

use std::path::{Path, PathBuf};

use handoff_testkit::FakeAgents;
use handoff_testkit::fake_ssh::FakeSshHost;
use handoff_testkit::ssh::{Login, give, second_account};
use serde_json::Value;
use tempfile::TempDir;

use crate::carry::{files_under, home, log_json, note_file, repo_path, sandbox, seed_claude};
use crate::support::{HANDOFF, Run, Sandbox};

/// The other machine: its own directory, HOME and PATH (handoff and the fake agents named in
/// `clis`), and the account that logs in.
pub(crate) struct Other {
    pub(crate) host: FakeSshHost,
    pub(crate) home: PathBuf,
    path: PathBuf,
    pub(crate) bin: PathBuf,
    pub(crate) agents: FakeAgents,
    pub(crate) user: Option<String>,
    _dir: TempDir,
}

impl Other {
    /// Hands what a test made at `path` to the other machine's account.
    pub(crate) fn own(&self, path: &Path) {
        if let Some(user) = &self.user {
            give(path, user);
        }
    }
}

/// A directory others may enter.
fn shared_dir(prefix: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    (dir, root)
}

pub(crate) fn other_machine(clis: &[&str]) -> Other {
    other_machine_named(clis, handoff_testkit::ssh::ALIAS)
}

/// [`other_machine`] answering to `alias`.
pub(crate) fn other_machine_named(clis: &[&str], alias: &str) -> Other {
    let (dir, root) = shared_dir("handoff-other-");
    let agents = FakeAgents::install(&root);
    for exe in [
        "claude",
        "codex",
        "opencode",
        "grok",
        "kiro-cli",
        "cursor-agent",
    ] {
        if !clis.contains(&exe) {
            agents.uninstall(exe);
        }
    }
    let bin = agents.bin_dir.clone();
    std::os::unix::fs::symlink(HANDOFF, bin.join("handoff")).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    // Its git trusts repositories whoever owns them (the origin belongs to this user).
    std::fs::write(home.join(".gitconfig"), "[safe]\n\tdirectory = *\n").unwrap();
    let user = second_account();
    if let Some(u) = &user {
        give(&root, u);
    }
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let host = FakeSshHost::start_named(
        alias,
        &Login {
            user: user.as_deref(),
            home: &home,
            path: &path,
            env: &[],
        },
    );
    Other {
        host,
        home,
        path: root.join("repo"),
        bin,
        agents,
        user,
        _dir: dir,
    }
}

/// A bare `origin` both machines reach, with the sandbox's `main` pushed.
struct Origin {
    path: PathBuf,
    _dir: TempDir,
}

fn with_origin(sb: &Sandbox) -> Origin {
    let (dir, root) = shared_dir("handoff-origin-");
    let bare = root.join("origin.git");
    let out = std::process::Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&bare)
        .output()
        .unwrap();
    assert!(out.status.success());
    sb.repo
        .git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    sb.repo.git(&["push", "-q", "-u", "origin", "HEAD"]);
    Origin {
        path: bare,
        _dir: dir,
    }
}

fn continue_on(sb: &Sandbox, other: &Other, dest: &str, args: &[&str]) -> Run {
    let note = note_file(sb);
    let cwd = repo_path(sb);
    let ssh = other.host.ssh_command().join(" ");
    let mut cmd = sb.command();
    cmd.env("HANDOFF_SSH", ssh)
        .args([
            "continue",
            "--cwd",
            &cwd,
            "--note-file",
            &note,
            "--on",
            dest,
        ])
        .args(args);
    let run = sb.exec(&mut cmd);
    assert_eq!(run.stdout.lines().count(), 1, "{run:#?}");
    let parsed: handoff_core::ContinueResult = serde_json::from_value(run.json.clone())
        .unwrap_or_else(|e| panic!("not a handoff.continue.v1 result: {e}: {run:#?}"));
    assert_eq!(i32::from(parsed.exit_code), run.code);
    run
}

/// Refused before anything changed: exit 5, one line on stderr saying `why`.
fn refused(run: &Run, why: &str) {
    assert_eq!(run.code, 5, "{run:#?}");
    assert_eq!(run.json["outcome"], "rejected", "{run:#?}");
    assert!(run.stderr.contains(why), "want {why:?} in {}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

fn dest(other: &Other) -> String {
    format!("{}:{}", other.host.alias(), other.path.display())
}

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "safe.directory=*"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_claude_task_continues_on_codex_on_the_other_machine() {
    let sb = sandbox();
    let _origin = with_origin(&sb);
    let source = seed_claude(&sb);
    let before = std::fs::read(&source).unwrap();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n// wip\n");
    let other = other_machine(&["codex"]);
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex", "--push"],
    );
    assert_eq!(run.code, 0, "{run:#?}\n{}", other.host.log_text());
    let r = &run.json;
    assert_eq!(r["outcome"], "started", "{r:#}");
    let remote = &r["remote"];
    assert_eq!(remote["path"], other.path.to_str().unwrap());
    assert_eq!(remote["cloned"], true);
    assert!(remote["taskId"].is_string(), "{remote:#}");
    // The other machine holds the checkpoint, checked out on the branch.
    let commit = r["checkpoint"]["commit"].as_str().unwrap();
    assert_eq!(git_in(&other.path, &["rev-parse", "HEAD"]), commit);
    assert_eq!(
        git_in(&other.path, &["symbolic-ref", "--short", "HEAD"]),
        "main"
    );
    // The conversation was carried into Codex's store there, re-rooted, and resumed.
    assert_eq!(r["carry"]["carried"], true, "{:#}", r["carry"]);
    assert_eq!(r["carry"]["mode"], "converted");
    let id = r["carry"]["sessionId"].as_str().unwrap();
    let rollouts = files_under(&other.home.join(".codex/sessions"));
    assert_eq!(rollouts.len(), 1, "{rollouts:?}");
    assert!(
        rollouts[0]
            .to_string_lossy()
            .ends_with(&format!("{id}.jsonl"))
    );
    if let Some(user) = &other.user {
        // Written there by the other machine's account.
        let uid = nix::unistd::User::from_name(user).unwrap().unwrap().uid;
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&rollouts[0]).unwrap());
        assert_eq!(owner, uid.as_raw());
    }
    let text = std::fs::read_to_string(&rollouts[0]).unwrap();
    assert!(text.contains(other.path.to_str().unwrap()), "re-rooted");
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert_eq!(r["continuity"]["checks"]["originalAppended"], true);
    assert!(
        files_under(&home(&sb).join(".codex")).is_empty(),
        "nothing ran here"
    );
    assert_eq!(std::fs::read(&source).unwrap(), before);
    // The resume command reaches the other machine.
    let shell = r["receiver"]["resume"]["shell"].as_str().unwrap();
    assert!(
        shell.contains(&format!("-t {}", other.host.alias())),
        "{shell}"
    );
    // The local timeline records it.
    let log = log_json(&sb);
    let handoffs: Vec<&Value> = log["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["kind"] == "handoff")
        .collect();
    let details = &handoffs.last().unwrap()["event"]["context"]["details"];
    assert_eq!(details["remote"]["destination"], other.host.alias());
    assert_eq!(details["continuity"]["result"], "continued");
    assert_eq!(log["task"]["agent"]["provider"], "codex");
}

#[test]
fn a_dry_run_checks_the_other_machine_and_changes_nothing() {
    let sb = sandbox();
    let _origin = with_origin(&sb);
    seed_claude(&sb);
    let other = other_machine(&["codex"]);
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex", "--dry-run"],
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["outcome"], "dry-run");
    let remote = &run.json["remote"];
    assert_eq!(remote["cloned"], true, "it would clone: {remote:#}");
    assert!(remote["receiverCli"].as_str().unwrap().ends_with("/codex"));
    assert!(remote["handoffVersion"].is_string());
    assert_eq!(remote["branchHead"], head.trim());
    assert!(!other.path.exists(), "nothing was cloned");
    assert!(
        !other.home.join(".local").exists(),
        "nothing was written there"
    );
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head);
}

#[test]
fn the_other_machine_is_checked_before_anything_changes() {
    let sb = sandbox();
    let _origin = with_origin(&sb);
    seed_claude(&sb);
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n// wip\n");
    let head = sb.repo.git(&["rev-parse", "HEAD"]);
    let status = sb.repo.git(&["status", "--porcelain"]);

    // Without the receiver's CLI there.
    let other = other_machine(&["claude"]);
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex", "--push"],
    );
    refused(&run, "codex (codex) is not installed on");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(!other.path.exists());

    // The branch is not on the remote at the checkpoint, and --push was not given.
    drop(other);
    let other = other_machine(&["codex"]);
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex"],
    );
    refused(&run, "pass --push");
    assert!(!other.path.exists());

    // A path there that is not a repository.
    std::fs::create_dir_all(&other.path).unwrap();
    std::fs::write(other.path.join("file"), "x").unwrap();
    other.own(&other.path);
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex", "--push"],
    );
    refused(&run, "is not a git repository");
    std::fs::remove_dir_all(&other.path).unwrap();

    // Unreachable.
    let mut other = other;
    other.host.stop();
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex", "--push"],
    );
    refused(&run, "cannot reach");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);

    // Nothing changed here either.
    assert_eq!(sb.repo.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(sb.repo.git(&["status", "--porcelain"]), status);
}

#[test]
fn bad_destinations_are_refused() {
    let sb = sandbox();
    for bad in ["-oProxyCommand=touch_x", "host:relative", "a b"] {
        let note = note_file(&sb);
        let cwd = repo_path(&sb);
        let run = sb.run(&[
            "continue",
            "--cwd",
            &cwd,
            "--note-file",
            &note,
            "--from",
            "claude",
            "--to",
            "codex",
            &format!("--on={bad}"),
        ]);
        assert_eq!(run.code, 5, "{bad}: {run:#?}");
        assert!(
            run.stderr.contains("is not an ssh destination"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn a_failure_there_is_undone_and_named_with_its_stderr() {
    let sb = sandbox();
    let origin = with_origin(&sb);
    seed_claude(&sb);
    let other = other_machine(&["codex"]);
    // A handoff there that fails once started.
    let bin = other.bin.clone();
    std::fs::remove_file(bin.join("handoff")).unwrap();
    std::fs::write(
        bin.join("handoff"),
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'handoff 0.1.0'; exit 0; fi\necho 'boom: the disk is full' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("handoff"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex"],
    );
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.json["outcome"], "not-started");
    assert!(
        run.stderr.contains("boom: the disk is full"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(!other.path.exists(), "the clone is removed");
    assert!(
        files_under(&other.home.join(".local/state/handoff/incoming")).is_empty(),
        "the files sent are removed"
    );
    let log = log_json(&sb);
    assert_eq!(log["task"]["agent"]["provider"], "claude", "the task stays");

    // A clone that was there already gets its branch and checkout back.
    let out = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(&origin.path)
        .arg(&other.path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    other.own(&other.path);
    let old = git_in(&other.path, &["rev-parse", "HEAD"]);
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    1\n}\n// newer\n");
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex", "--push"],
    );
    assert_eq!(run.code, 1, "{run:#?}");
    assert_ne!(
        run.json["checkpoint"]["commit"],
        old.as_str(),
        "a new checkpoint was pushed"
    );
    assert_eq!(
        git_in(&other.path, &["rev-parse", "main"]),
        old,
        "the branch is back"
    );
    assert_eq!(
        git_in(&other.path, &["symbolic-ref", "--short", "HEAD"]),
        "main"
    );
    assert_eq!(git_in(&other.path, &["status", "--porcelain"]), "");
}

#[test]
fn the_receiver_there_survives_the_connection_and_home_paths_expand_there() {
    let sb = sandbox();
    let _origin = with_origin(&sb);
    seed_claude(&sb);
    let other = other_machine(&["codex"]);
    // The receiver takes longer than the connection that started it.
    other.agents.set("FAKE_AGENT_RECEIVER_DELAY_MS", "1500");
    let run = continue_on(
        &sb,
        &other,
        &format!("{}:~/work/repo", other.host.alias()),
        &["--from", "claude", "--to", "codex"],
    );
    other.agents.unset("FAKE_AGENT_RECEIVER_DELAY_MS");
    assert_eq!(run.code, 0, "{run:#?}");
    let there = other.home.join("work/repo");
    assert_eq!(run.json["remote"]["path"], there.to_str().unwrap());
    assert!(there.join(".git").exists());
    assert_eq!(
        run.json["continuity"]["result"], "continued",
        "{:#}",
        run.json["continuity"]
    );
    // The timeline there has the task too.
    let log = other
        .host
        .exec(&format!("handoff log --json --cwd {}", there.display()));
    assert_eq!(log.0, 0, "{log:?}");
    let v: Value = serde_json::from_str(log.1.trim()).unwrap();
    assert_eq!(v["task"]["agent"]["provider"], "codex");
}

/// Replaces `handoff` on the other machine with a script.
fn fake_handoff_there(other: &Other, script: &str) {
    let bin = &other.bin;
    std::fs::remove_file(bin.join("handoff")).unwrap();
    std::fs::write(bin.join("handoff"), script).unwrap();
    std::fs::set_permissions(
        bin.join("handoff"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
}

#[test]
fn what_is_there_already_is_respected() {
    let sb = sandbox();
    let origin = with_origin(&sb);
    seed_claude(&sb);
    let other = other_machine(&["codex"]);
    let clone = |to: &Path| {
        let out = std::process::Command::new("git")
            .args(["clone", "-q"])
            .arg(&origin.path)
            .arg(to)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };

    // A clone there whose branch has a commit this machine lacks.
    clone(&other.path);
    for (k, v) in [("user.name", "t"), ("user.email", "t@example.invalid")] {
        git_in(&other.path, &["config", k, v]);
    }
    std::fs::write(other.path.join("theirs.txt"), "x").unwrap();
    git_in(&other.path, &["add", "theirs.txt"]);
    git_in(&other.path, &["commit", "-q", "-m", "work done there"]);
    let theirs = git_in(&other.path, &["rev-parse", "HEAD"]);
    other.own(&other.path);
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex"],
    );
    refused(&run, "not in this branch's history");
    assert_eq!(
        git_in(&other.path, &["rev-parse", "HEAD"]),
        theirs,
        "left as it was"
    );
    std::fs::remove_dir_all(&other.path).unwrap();

    // Another project's repository at that path.
    std::fs::create_dir_all(&other.path).unwrap();
    git_in(&other.path, &["init", "-q"]);
    for (k, v) in [("user.name", "t"), ("user.email", "t@example.invalid")] {
        git_in(&other.path, &["config", k, v]);
    }
    git_in(
        &other.path,
        &["commit", "-q", "--allow-empty", "-m", "other project"],
    );
    other.own(&other.path);
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex"],
    );
    refused(&run, "another project's repository");
    std::fs::remove_dir_all(&other.path).unwrap();

    // Another version of handoff there.
    fake_handoff_there(&other, "#!/bin/sh\necho 'handoff 9.9.9'\n");
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex"],
    );
    refused(&run, "runs handoff 9.9.9");
    assert!(!other.path.exists());
}

#[test]
fn a_refusal_there_is_undone() {
    let sb = sandbox();
    let _origin = with_origin(&sb);
    seed_claude(&sb);
    let other = other_machine(&["codex"]);
    // The other machine's configuration has no such account: its handoff refuses.
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex", "--account", "nope"],
    );
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.json["outcome"], "not-started");
    assert!(
        run.stderr.contains("unknown account 'nope'"),
        "{}",
        run.stderr
    );
    assert!(!other.path.exists(), "the clone is removed");
    assert!(files_under(&other.home.join(".local/state/handoff/incoming")).is_empty());
    assert!(files_under(&other.home.join(".codex")).is_empty());
}

#[test]
fn the_message_and_secrets_never_travel_on_a_command_line_and_the_session_is_masked_here() {
    let sb = sandbox();
    let _origin = with_origin(&sb);
    let source = seed_claude(&sb);
    // A secret only this machine knows (no pattern would find it), in the session carried.
    let secret = "plainGatewayValue7731qq";
    let mut text = std::fs::read_to_string(&source).unwrap();
    text.push_str(&format!(
        "{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":\"use key {secret}\"}},\"uuid\":\"u-secret\",\"sessionId\":\"x\"}}\n"
    ));
    std::fs::write(&source, text).unwrap();
    let other = other_machine(&["codex"]);
    // Every ssh command line, as `ps` would show it.
    let log = sb.root.join("ssh-argv.log");
    let wrapper = sb.root.join("ssh-wrap");
    let ssh: Vec<String> = other
        .host
        .ssh_command()
        .iter()
        .map(|w| handoff_core::shell_word(w))
        .collect();
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec {} \"$@\"\n",
            log.display(),
            ssh.join(" ")
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let note = note_file(&sb);
    let cwd = repo_path(&sb);
    let message = "Finish the parser; the staging password is hunter2-private";
    let run = sb.exec(
        sb.command()
            .env("HANDOFF_SSH", wrapper.to_str().unwrap())
            .env("GATEWAY_TOKEN", secret)
            .args([
                "continue",
                "--cwd",
                &cwd,
                "--note-file",
                &note,
                "--on",
                &dest(&other),
            ])
            .args(["--from", "claude", "--to", "codex", "--message", message]),
    );
    assert_eq!(run.code, 0, "{run:#?}\n{}", other.host.log_text());
    let argv = std::fs::read_to_string(&log).unwrap();
    assert!(argv.contains("--message-file"), "{argv}");
    assert!(
        !argv.contains("hunter2"),
        "the message was on an ssh command line: {argv}"
    );
    // The session reached the other machine without the secret this machine knows.
    for file in files_under(&other.home.join(".codex")) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(!text.contains(secret), "unmasked in {}", file.display());
    }
    for file in files_under(&other.home.join(".local/state/handoff")) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(secret), "unmasked in {}", file.display());
    }
}

#[test]
fn an_option_like_remote_url_is_refused_before_anything_runs() {
    let sb = sandbox();
    let _origin = with_origin(&sb);
    seed_claude(&sb);
    let other = other_machine(&["codex"]);
    let marker = sb.root.join("upload-pack-ran");
    sb.repo.git(&[
        "config",
        "remote.origin.url",
        &format!("--upload-pack=touch {}", marker.display()),
    ]);
    let run = continue_on(
        &sb,
        &other,
        &dest(&other),
        &["--from", "claude", "--to", "codex", "--dry-run"],
    );
    refused(&run, "starts with '-'");
    assert!(!marker.exists(), "the URL ran as an option");
}
