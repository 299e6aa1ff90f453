//! `handoff continue --on` with the real CLIs over a real OpenSSH: a Claude Code session made
//! here is carried to Codex on "the other machine" — a throwaway sshd on 127.0.0.1 whose logins
//! have their own HOME (run as root: a second account) — and resumed there against the scripted
//! model server. The hermetic suite covers the rest of `continue --on` through the testkit's
//! ssh stand-in (`tests/it/remote.rs`); these check the same paths against sshd itself: its
//! login environment, its working directory (the passwd home, not `$HOME`), and a receiver
//! detached from a connection sshd closes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use handoff_testkit::model_server::{Script, Step};
use handoff_testkit::ssh::{Login, SshHost, give, second_account};
use serde_json::Value;
use tempfile::TempDir;

use super::carry::{
    FIRST_ANSWER, FIRST_PROMPT, SECOND_ANSWER, files_under, first_session, last_request, rig,
};
use super::{HANDOFF, Rig, real_bin};

/// A directory others may enter (run as root, the other machine is a second account).
fn shared(prefix: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    (dir, path)
}

/// The other machine, behind a real sshd: its own HOME (with the rig's gateway configuration),
/// handoff and the real CLIs on its PATH.
struct Other {
    host: SshHost,
    home: PathBuf,
    root: PathBuf,
    _origin: TempDir,
    _dir: TempDir,
}

/// A rig whose repository has a bare `origin` both machines reach, a Claude Code session made
/// by the real CLI here (its id returned), and the other machine.
fn rig_and_other() -> (Rig, String, Other) {
    let rig = rig();
    let (origin_dir, origin) = shared("handoff-real-origin-");
    let bare = origin.join("origin.git");
    let out = std::process::Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&bare)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    rig.repo.git(&["branch", "-M", "main"]);
    rig.repo
        .git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    rig.repo.git(&["push", "-q", "-u", "origin", "main"]);
    // A session made here by the real Claude Code.
    let source = first_session(&rig, "codex", "claude");

    let mut other = host_for(&rig);
    other._origin = origin_dir;
    (rig, source, other)
}

/// `handoff continue --to codex --on <dest> <args…>` through the real ssh client, with the
/// model answering [`SECOND_ANSWER`]; the exit code is checked to be 0.
fn continue_on(rig: &Rig, other: &Other, dest: &str, args: &[&str]) -> Value {
    rig.server.clear_log();
    rig.server
        .set_script(Script::new([Step::text(SECOND_ANSWER)]));
    let ssh = other.host.ssh_command().join(" ");
    let out = rig
        .command()
        .env("HANDOFF_SSH", &ssh)
        .arg("continue")
        .arg("--cwd")
        .arg(rig.repo.path())
        .arg("--note-file")
        .arg(rig.root.join("private/note.md"))
        .args(["--to", "codex", "--on", dest])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{r:#}\n{}",
        other.host.log_text()
    );
    r
}

/// Codex ran there, on the carried session, with the earlier turns in its request; not here.
fn resumed_there(rig: &Rig, r: &Value, source: &str, home: &Path) {
    assert_eq!(r["carry"]["mode"], "converted", "{:#}", r["carry"]);
    assert_eq!(r["carry"]["source"]["sessionId"], source);
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert_eq!(r["receiver"]["lastMessage"], SECOND_ANSWER);
    let rollouts = files_under(&home.join(".codex/sessions"));
    assert_eq!(rollouts.len(), 1, "{rollouts:?}");
    let request = last_request(rig);
    assert!(request.contains(FIRST_ANSWER) && request.contains(FIRST_PROMPT));
    assert!(
        files_under(&rig.root.join("codex-home/sessions")).is_empty(),
        "Codex did not run here"
    );
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn remote_claude_to_codex_over_ssh_resumes_the_carried_session_there() {
    let (rig, source, other) = rig_and_other();
    let repo_there = other.root.join("repo");
    let dest = format!("{}:{}", other.host.alias(), repo_there.display());
    let r = continue_on(&rig, &other, &dest, &["--push"]);
    assert_eq!(r["remote"]["cloned"], true, "{r:#}");
    assert_eq!(r["remote"]["path"], repo_there.to_str().unwrap());
    resumed_there(&rig, &r, &source, &other.home);
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn remote_the_receiver_survives_the_ssh_connection_and_home_paths_expand_there() {
    let (rig, source, other) = rig_and_other();
    // `~/` is the login's HOME, which sshd sets (`SetEnv`) apart from its working directory.
    let dest = format!("{}:~/work/repo", other.host.alias());
    let r = continue_on(&rig, &other, &dest, &["--push"]);
    let there = other.home.join("work/repo");
    assert_eq!(r["remote"]["path"], there.to_str().unwrap(), "{r:#}");
    assert!(there.join(".git").exists());
    // The connection that started the receiver closed as soon as it was detached; Codex (a
    // Node CLI making a model call) ran on past it, and later connections saw its result.
    resumed_there(&rig, &r, &source, &other.home);
    let (code, stdout, stderr) = other
        .host
        .exec(&format!("handoff log --json --cwd {}", there.display()));
    assert_eq!(code, 0, "{stderr}");
    let log: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(log["task"]["agent"]["provider"], "codex");
}

/// The other machine as a host for `--on`: a real sshd, handoff and the real CLIs on its PATH,
/// the rig's configuration (the scripted model server) in its HOME.
fn host_for(rig: &Rig) -> Other {
    let (dir, root) = shared("handoff-real-other-");
    let home = root.join("home");
    let bin = root.join("bin");
    let config = home.join(".config/handoff");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(rig.root.join("config.toml"), config.join("config.toml")).unwrap();
    std::fs::set_permissions(
        config.join("config.toml"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::os::unix::fs::symlink(HANDOFF, bin.join("handoff")).unwrap();
    std::fs::write(home.join(".gitconfig"), "[safe]\n\tdirectory = *\n").unwrap();
    let user = second_account();
    if let Some(u) = &user {
        give(&root, u);
    }
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        bin.display(),
        real_bin().display()
    );
    let host = SshHost::start_login(&Login {
        user: user.as_deref(),
        home: &home,
        path: &path,
        env: &[],
    });
    // Replaced by the caller that needs an origin.
    let (origin, _) = shared("handoff-real-origin-");
    Other {
        host,
        home,
        root,
        _origin: origin,
        _dir: dir,
    }
}

/// `handoff run --harness codex --mode <mode> --on <alias>:~/handoff` through the real ssh
/// client.
fn run_on(rig: &Rig, other: &Other, mode: &str) -> (Option<i32>, Value) {
    let ins = rig.root.join("private/instructions.txt");
    std::fs::write(&ins, "Do what the scripted model says, then answer.").unwrap();
    let out = rig
        .command()
        .env("HANDOFF_SSH", other.host.ssh_command().join(" "))
        .args([
            "run",
            "--caller-harness",
            "claude",
            "--harness",
            "codex",
            "--mode",
            mode,
        ])
        .arg("--cwd")
        .arg(rig.repo.path())
        .arg("--instructions")
        .arg(&ins)
        .arg("--on")
        .arg(format!("{}:~/handoff", other.host.alias()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), r)
}

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn remote_a_review_and_a_build_run_on_real_codex_on_a_host_over_sshd() {
    let rig = rig();
    let other = host_for(&rig);
    rig.server.set_script(Script::answer(
        handoff_testkit::model_server::provider_output("reviewed there"),
    ));
    let (code, r) = run_on(&rig, &other, "review");
    assert_eq!(code, Some(0), "{r:#}\n{}", other.host.log_text());
    assert_eq!(r["output"]["response"], "reviewed there");
    assert_eq!(r["host"]["ssh"], other.host.alias());
    let root = r["git"]["before"]["root"].as_str().unwrap();
    assert!(root.starts_with(other.home.to_str().unwrap()), "{root}");
    assert!(
        files_under(&rig.root.join("codex-home/sessions")).is_empty(),
        "Codex did not run here"
    );

    rig.server.set_script(Script::new([
        Step::shell("printf 'built there\\n' > remote-build.txt"),
        Step::provider_answer("built there"),
    ]));
    let (code, r) = run_on(&rig, &other, "build");
    assert_eq!(code, Some(0), "{r:#}\n{}", other.host.log_text());
    assert_eq!(
        r["git"]["changedFiles"],
        serde_json::json!(["remote-build.txt"])
    );
    assert_eq!(r["git"]["applied"], true, "{:#}", r["git"]);
    assert_eq!(
        std::fs::read_to_string(rig.repo.path().join("remote-build.txt")).unwrap(),
        "built there\n"
    );
    let runs = other.home.join("handoff/runs");
    assert_eq!(std::fs::read_dir(&runs).map(|d| d.count()).unwrap_or(0), 0);
}
