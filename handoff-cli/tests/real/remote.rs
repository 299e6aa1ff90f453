//! `handoff continue --on` with the real CLIs: a Claude Code session made here is carried to
//! Codex on "the other machine" — a throwaway sshd on 127.0.0.1 whose sessions have their own
//! HOME — and resumed there against the scripted model server.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use handoff_testkit::model_server::{Script, Step};
use handoff_testkit::ssh::{Login, SshHost, give, second_account};

use super::carry::{
    FIRST_ANSWER, FIRST_PROMPT, SECOND_ANSWER, files_under, first_session, last_request, rig,
};
use super::{HANDOFF, real_bin};

#[test]
#[ignore = "real CLI: run with cargo xtask e2e-real"]
fn remote_claude_to_codex_over_ssh_resumes_the_carried_session_there() {
    let rig = rig();
    // The origin and the other machine live outside the rig's private directory: run as root,
    // the other machine is a second account.
    let shared = |prefix: &str| {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        (dir, path)
    };
    let (_origin_dir, origin) = shared("handoff-real-origin-");
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

    // The other machine: its own HOME (with the same gateway configuration), handoff and the
    // real CLIs on its PATH.
    let (_other_dir, other) = shared("handoff-real-other-");
    let home = other.join("home");
    let bin = other.join("bin");
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
        give(&other, u);
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
    let repo_there: PathBuf = other.join("repo");

    rig.server.clear_log();
    rig.server
        .set_script(Script::new([Step::text(SECOND_ANSWER)]));
    let dest = format!("{}:{}", host.alias(), repo_there.display());
    let ssh = host.ssh_command().join(" ");
    let out = rig
        .command()
        .env("HANDOFF_SSH", &ssh)
        .arg("continue")
        .arg("--cwd")
        .arg(rig.repo.path())
        .arg("--note-file")
        .arg(rig.root.join("private/note.md"))
        .args(["--to", "codex", "--on", &dest, "--push"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{r:#}\n{}", host.log_text());
    assert_eq!(r["remote"]["cloned"], true, "{r:#}");
    assert_eq!(r["carry"]["mode"], "converted", "{:#}", r["carry"]);
    assert_eq!(r["carry"]["source"]["sessionId"], source.as_str());
    assert_eq!(
        r["continuity"]["result"], "continued",
        "{:#}",
        r["continuity"]
    );
    assert_eq!(r["receiver"]["lastMessage"], SECOND_ANSWER);
    // Codex ran there, on the carried session, with the earlier turns in its request.
    let rollouts = files_under(&home.join(".codex/sessions"));
    assert_eq!(rollouts.len(), 1, "{rollouts:?}");
    let request = last_request(&rig);
    assert!(request.contains(FIRST_ANSWER) && request.contains(FIRST_PROMPT));
    assert!(
        files_under(&rig.root.join("codex-home/sessions")).is_empty(),
        "Codex did not run here"
    );
}
