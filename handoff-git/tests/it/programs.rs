//! handoff's own git calls leave the repository's programs out unless trusted: an agent that
//! wrote `.git/config` or a hook does not get them run outside its sandbox.

use std::os::unix::fs::PermissionsExt;

use handoff_git::{Git, RepoPrograms, Trust, config_state};

use crate::support::TestRepo;

/// A repository with an identity of its own, and a marker path for a planted program to touch.
fn repo() -> (TestRepo, std::path::PathBuf) {
    let repo = TestRepo::with_commit();
    repo.git(&["config", "user.name", "t"]);
    repo.git(&["config", "user.email", "t@t"]);
    repo.git(&["config", "commit.gpgsign", "false"]);
    let marker = repo.path(".git/ran-marker");
    let _ = std::fs::remove_file(&marker);
    (repo, marker)
}

fn plant_hook(repo: &TestRepo, dir: &str, name: &str, marker: &std::path::Path) {
    let path = repo.path(&format!("{dir}/{name}"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        format!("#!/bin/sh\necho {name} >> '{}'\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn ran(marker: &std::path::Path) -> String {
    std::fs::read_to_string(marker).unwrap_or_default()
}

#[test]
fn hooks_run_only_when_trusted() {
    let (repo, marker) = repo();
    plant_hook(&repo, ".git/hooks", "pre-commit", &marker);
    plant_hook(&repo, ".git/hooks", "post-commit", &marker);
    let git = Git::new(repo.root());
    git.run(&["commit", "-q", "--allow-empty", "-m", "one"])
        .unwrap();
    assert_eq!(ran(&marker), "", "an untrusted runner ran a hook");

    let trusted = git.trusting(Trust {
        repo_programs: false,
        hooks: true,
    });
    trusted
        .run(&["commit", "-q", "--allow-empty", "-m", "two"])
        .unwrap();
    assert_eq!(ran(&marker), "pre-commit\npost-commit\n");
}

#[test]
fn a_hooks_path_inside_the_worktree_is_off_too() {
    let (repo, marker) = repo();
    repo.git(&["config", "core.hooksPath", "scripts/hooks"]);
    plant_hook(&repo, "scripts/hooks", "post-commit", &marker);
    Git::new(repo.root())
        .run(&["commit", "-q", "--allow-empty", "-m", "x"])
        .unwrap();
    assert_eq!(ran(&marker), "");
}

#[test]
fn a_repository_filter_refuses_staging_and_runs_when_trusted() {
    let (repo, marker) = repo();
    repo.write(".gitattributes", "*.txt filter=evil\n");
    repo.git(&["add", ".gitattributes"]);
    repo.commit("attrs");
    repo.git(&[
        "config",
        "filter.evil.clean",
        &format!("sh -c 'echo clean >> {}; cat'", marker.display()),
    ]);
    repo.write("a.txt", "changed\n");
    let git = Git::new(repo.root());
    let err = git.run(&["add", "a.txt"]).unwrap_err();
    assert!(
        err.message.contains("filter.evil.clean in .git/config"),
        "{}",
        err.message
    );
    assert!(
        err.message.starts_with("git add refused"),
        "{}",
        err.message
    );
    // Reading is not refused, and runs no filter either.
    git.run(&["diff", "--name-only"]).unwrap();
    git.run(&["status", "--short"]).unwrap();
    assert_eq!(ran(&marker), "", "a read ran the filter");

    git.trusting(Trust {
        repo_programs: true,
        hooks: false,
    })
    .run(&["add", "a.txt"])
    .unwrap();
    assert_eq!(ran(&marker), "clean\n");
}

#[test]
fn diff_programs_and_textconv_never_run() {
    let (repo, marker) = repo();
    repo.write(".gitattributes", "*.txt diff=evil\n");
    repo.git(&["add", ".gitattributes"]);
    repo.commit("attrs");
    let program = format!("sh -c 'echo ran >> {}'", marker.display());
    repo.git(&["config", "diff.evil.textconv", &program]);
    repo.git(&["config", "diff.evil.command", &program]);
    repo.git(&["config", "diff.external", &program]);
    repo.write("a.txt", "changed\n");
    let git = Git::new(repo.root());
    let out = git.text(&["diff"]).unwrap();
    assert!(out.contains("+changed"), "{out}");
    git.text(&["log", "-p", "-1"]).unwrap();
    git.text(&["show", "HEAD"]).unwrap();
    assert_eq!(ran(&marker), "");
}

#[test]
fn ssh_commands_credential_helpers_and_url_rewrites_are_left_out() {
    let (repo, marker) = repo();
    let program = format!("sh -c 'echo ran >> {}'", marker.display());
    repo.git(&["config", "core.sshCommand", &program]);
    repo.git(&["config", "url.ext::sh -c x.insteadOf", "https://"]);
    repo.git(&["config", "credential.helper", &format!("!{program}")]);
    repo.git(&["remote", "add", "origin", "ssh://127.0.0.1:1/nowhere.git"]);
    let git = Git::new(repo.root());
    let err = git.run(&["push", "-q", "origin", "main"]).unwrap_err();
    assert!(
        err.message.contains("credential.helper in .git/config"),
        "{}",
        err.message
    );
    assert!(err.message.contains("insteadof"), "{}", err.message);
    assert_eq!(ran(&marker), "");
    // The overrides name the user's default ssh, whatever the repository says.
    let args: Vec<String> = git
        .command(&["status"])
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(args.contains(&"core.sshcommand=ssh".to_owned()), "{args:?}");
}

#[test]
fn an_included_file_is_read_and_its_programs_left_out() {
    let (repo, marker) = repo();
    let extra = repo.path("extra.cfg");
    std::fs::write(
        &extra,
        format!(
            "[filter \"evil\"]\n\tclean = sh -c 'echo ran >> {}; cat'\n",
            marker.display()
        ),
    )
    .unwrap();
    repo.git(&["config", "include.path", &extra.display().to_string()]);
    let programs = RepoPrograms::of(repo.root()).unwrap();
    let digests = programs.digests();
    assert!(digests.contains_key(".git/config"), "{digests:?}");
    assert!(
        digests.keys().any(|k| k.ends_with("/extra.cfg")),
        "{digests:?}"
    );
    repo.write(".gitattributes", "*.txt filter=evil\n");
    let err = Git::new(repo.root())
        .run(&["add", ".gitattributes", "a.txt"])
        .unwrap_err();
    assert!(
        err.message.contains("filter.evil.clean in /"),
        "{}",
        err.message
    );
    assert_eq!(ran(&marker), "");
}

#[test]
fn the_config_state_moves_with_hooks_program_settings_and_agent_configuration() {
    let (repo, marker) = repo();
    let start = config_state(repo.root()).unwrap();
    assert_eq!(
        start.hooks.get("core.hooksPath").map(String::as_str),
        Some("")
    );
    assert!(start.git_programs.contains_key(".git/config"));

    // Ordinary settings and files change nothing.
    repo.git(&["config", "branch.main.remote", "origin"]);
    repo.write("src/lib.rs", "pub fn g() {}\n");
    repo.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
    assert!(
        config_state(repo.root())
            .unwrap()
            .changed_since(&start)
            .is_empty()
    );

    plant_hook(&repo, ".git/hooks", "pre-push", &marker);
    repo.git(&["config", "core.fsmonitor", "evil"]);
    // Ignored agent configuration counts too.
    repo.write(
        ".gitignore",
        "*.log\ntarget/\n.claude/settings.local.json\n",
    );
    repo.write(".claude/settings.local.json", "{}");
    repo.write("AGENTS.md", "do things\n");
    let changes = config_state(repo.root()).unwrap().changed_since(&start);
    assert_eq!(changes.hooks, [".git/hooks/pre-push"]);
    assert_eq!(changes.git_programs, [".git/config"]);
    assert_eq!(
        changes.agent_config,
        [".claude/settings.local.json", "AGENTS.md"]
    );

    // A hooks path moves the hooks with it.
    repo.git(&["config", "--unset", "core.fsmonitor"]);
    repo.git(&["config", "core.hooksPath", ".husky/_"]);
    plant_hook(&repo, ".husky/_", "pre-commit", &marker);
    let state = config_state(repo.root()).unwrap();
    assert_eq!(
        state.hooks.get("core.hooksPath").map(String::as_str),
        Some(".husky/_")
    );
    assert!(
        state.hooks.contains_key(".husky/_/pre-commit"),
        "{:?}",
        state.hooks
    );
}

#[test]
fn a_hook_linked_to_a_script_changes_with_the_script() {
    let (repo, marker) = repo();
    plant_hook(&repo, "scripts", "check.sh", &marker);
    std::os::unix::fs::symlink(
        repo.path("scripts/check.sh"),
        repo.path(".git/hooks/pre-commit"),
    )
    .unwrap();
    let start = config_state(repo.root()).unwrap();
    // The link stays; the script it runs is rewritten.
    std::fs::write(repo.path("scripts/check.sh"), "#!/bin/sh\necho other\n").unwrap();
    let changes = config_state(repo.root()).unwrap().changed_since(&start);
    assert_eq!(changes.hooks, [".git/hooks/pre-commit"]);
}
