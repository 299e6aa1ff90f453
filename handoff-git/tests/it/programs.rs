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

#[test]
fn a_hooks_directory_linked_into_the_worktree_is_read_where_its_hooks_are() {
    let (repo, marker) = repo();
    plant_hook(&repo, ".githooks", "pre-commit", &marker);
    std::fs::remove_dir_all(repo.path(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../.githooks", repo.path(".git/hooks")).unwrap();
    let start = config_state(repo.root()).unwrap();
    assert!(
        start.hooks.contains_key(".githooks/pre-commit"),
        "{:?}",
        start.hooks
    );
    std::fs::write(repo.path(".githooks/pre-commit"), "#!/bin/sh\necho other\n").unwrap();
    let changes = config_state(repo.root()).unwrap().changed_since(&start);
    assert_eq!(changes.hooks, [".githooks/pre-commit"]);
}

#[test]
fn old_style_section_names_are_named_as_git_names_them() {
    // `[filter.EVIL]` is `filter.evil.*` to git; an override of `filter.EVIL.*` would miss it.
    let (repo, marker) = repo();
    let mut config = std::fs::read_to_string(repo.path(".git/config")).unwrap();
    config.push_str(&format!(
        "[filter.EVIL]\n\tclean = \"sh -c 'echo ran >> {}; cat'\"\n",
        marker.display()
    ));
    std::fs::write(repo.path(".git/config"), config).unwrap();
    std::fs::write(repo.path(".git/info/attributes"), "* filter=evil\n").unwrap();
    repo.write("a.txt", "changed\n");
    // Plain git runs it (hashing the file as `add` would, every time: whether `status` reads
    // the file depends on how its stat data compares with the index's).
    repo.git(&["hash-object", "a.txt"]);
    assert_ne!(ran(&marker), "", "the attack does not work");
    std::fs::remove_file(&marker).unwrap();
    let git = Git::new(repo.root());
    // Reads that compare with the worktree run no filter.
    git.run(&["diff", "--name-only", "HEAD"]).unwrap();
    git.run(&["status", "--short"]).unwrap();
    let err = git.run(&["add", "a.txt"]).unwrap_err();
    assert!(err.message.contains("filter.evil.clean"), "{}", err.message);
    assert_eq!(ran(&marker), "");
}

#[test]
fn a_filter_in_a_submodules_configuration_is_left_out_too() {
    let (repo, marker) = repo();
    let sub = crate::support::TestRepo::with_commit();
    repo.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        sub.root().as_str(),
        "sub",
    ]);
    repo.commit("submodule");
    let module = repo.path(".git/modules/sub");
    assert!(module.join("config").is_file());
    let mut config = std::fs::read_to_string(module.join("config")).unwrap();
    config.push_str(&format!(
        "[filter \"evil\"]\n\tclean = \"sh -c 'echo ran >> {}; cat'\"\n",
        marker.display()
    ));
    std::fs::write(module.join("config"), config).unwrap();
    std::fs::create_dir_all(module.join("info")).unwrap();
    std::fs::write(module.join("info/attributes"), "* filter=evil\n").unwrap();
    std::fs::write(repo.path("sub/new.txt"), "x\n").unwrap();
    std::fs::write(repo.path("sub/a.txt"), "touched\n").unwrap();
    repo.git(&["status", "--short"]);
    assert_ne!(ran(&marker), "", "the attack does not work");
    std::fs::remove_file(&marker).unwrap();
    let git = Git::new(repo.root());
    git.run(&["diff", "--name-only", "HEAD"]).unwrap();
    git.run(&["status", "--short"]).unwrap();
    assert_eq!(ran(&marker), "", "the submodule's filter ran");
    let programs = RepoPrograms::of(repo.root()).unwrap();
    assert!(
        programs.digests().contains_key(".git/modules/sub/config"),
        "{:?}",
        programs.digests()
    );
}

#[test]
fn a_local_repository_as_remote_refuses_pushes() {
    // Pushing to a repository on this machine runs its hooks, here, as the user.
    let (repo, marker) = repo();
    let bare = repo.path(".git/evil.git");
    crate::support::git_in(
        repo.root().as_std_path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    plant_hook(&repo, ".git/evil.git/hooks", "pre-receive", &marker);
    repo.git(&["remote", "add", "origin", ".git/evil.git"]);
    let err = Git::new(repo.root())
        .run(&["push", "-q", "origin", "main"])
        .unwrap_err();
    assert!(
        err.message.contains("remote.origin.url in .git/config"),
        "{}",
        err.message
    );
    assert_eq!(ran(&marker), "");
}

#[test]
fn an_include_git_resolves_from_a_users_home_is_read() {
    // `~user/` is resolved by git; the listing is git's, so handoff sees what git sees.
    let (repo, marker) = repo();
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .expect("the user running the tests has a passwd entry");
    let dir = tempfile::tempdir_in(&user.dir).expect("the user's home directory is writable");
    let rela = dir.path().strip_prefix(&user.dir).unwrap();
    std::fs::write(
        dir.path().join("x.cfg"),
        format!(
            "[filter \"evil\"]\n\tclean = \"sh -c 'echo ran >> {}; cat'\"\n",
            marker.display()
        ),
    )
    .unwrap();
    repo.git(&[
        "config",
        "include.path",
        &format!("~{}/{}/x.cfg", user.name, rela.display()),
    ]);
    repo.write(".gitattributes", "*.txt filter=evil\n");
    let err = Git::new(repo.root()).run(&["add", "a.txt"]).unwrap_err();
    assert!(err.message.contains("filter.evil.clean"), "{}", err.message);
    assert_eq!(ran(&marker), "");
}

#[test]
fn a_hooks_path_set_through_a_conditional_include_is_the_one_git_uses() {
    // The state must name the hooks directory git will run, whatever form the setting takes.
    let (repo, marker) = repo();
    repo.git(&["remote", "add", "origin", "https://example.com/r.git"]);
    std::fs::write(
        repo.path(".git/extra.cfg"),
        "[core]\n\thooksPath = planted-hooks\n",
    )
    .unwrap();
    repo.git(&[
        "config",
        "includeIf.hasconfig:remote.*.url:https://example.com/**.path",
        "extra.cfg",
    ]);
    plant_hook(&repo, "planted-hooks", "pre-commit", &marker);
    let state = config_state(repo.root()).unwrap();
    assert_eq!(
        state.hooks.get("core.hooksPath").map(String::as_str),
        Some("planted-hooks")
    );
    assert!(
        state.hooks.contains_key("planted-hooks/pre-commit"),
        "{:?}",
        state.hooks
    );
    // And git agrees.
    assert_eq!(
        repo.git(&["config", "core.hooksPath"]).trim(),
        "planted-hooks"
    );
}

/// A bare repository inside `.git` at `rela` whose `pre-receive` hook writes the marker.
fn hooked_bare(repo: &TestRepo, rela: &str, marker: &std::path::Path) {
    let bare = repo.path(rela);
    std::fs::create_dir_all(&bare).unwrap();
    crate::support::git_in(
        repo.root().as_std_path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    plant_hook(repo, &format!("{rela}/hooks"), "pre-receive", marker);
}

#[test]
fn a_local_path_with_a_colon_is_still_local() {
    // git takes `/a/x:y/r.git` for a path (a slash before the colon), not for `host:path`.
    let (repo, marker) = repo();
    hooked_bare(&repo, ".git/x:y/evil.git", &marker);
    let url = repo.path(".git/x:y/evil.git");
    repo.git(&["remote", "add", "origin", url.to_str().unwrap()]);
    let err = Git::new(repo.root())
        .run(&["push", "-q", "origin", "main"])
        .unwrap_err();
    assert!(err.message.contains("remote.origin.url"), "{}", err.message);
    assert_eq!(ran(&marker), "");
}

#[test]
fn a_branch_whose_remote_is_a_path_refuses_pushes() {
    // `branch.<b>.remote` (or `pushRemote`, or `remote.pushDefault`) may name a repository by
    // its path instead of a remote's name: git pushes there, and its hooks run here.
    for key in [
        "branch.main.remote",
        "branch.main.pushRemote",
        "remote.pushDefault",
    ] {
        let (repo, marker) = repo();
        hooked_bare(&repo, ".git/evil.git", &marker);
        let path = repo.path(".git/evil.git");
        repo.git(&["config", key, path.to_str().unwrap()]);
        let err = Git::new(repo.root()).run(&["push", "-q"]).expect_err(key);
        assert!(
            err.message.to_lowercase().contains(&key.to_lowercase()),
            "{key}: {}",
            err.message
        );
        assert_eq!(ran(&marker), "", "{key}");
        let state = config_state(repo.root()).unwrap();
        assert!(
            state.git_programs.contains_key(".git/config"),
            "{:?}",
            state.git_programs
        );
    }
}

#[test]
fn a_conditional_include_git_does_not_follow_here_refuses_and_is_in_the_state() {
    // The include applies only in a linked worktree, so `git config --list` here does not read
    // it; a worktree handoff adds would run its filter.
    let (repo, marker) = repo();
    std::fs::write(
        repo.path(".git/evil.cfg"),
        format!(
            "[filter \"evil\"]\n\tsmudge = sh -c 'echo smudge >> {}; cat'\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::write(repo.path(".git/info/attributes"), "* filter=evil\n").unwrap();
    repo.git(&[
        "config",
        "includeIf.gitdir:**/worktrees/**.path",
        "evil.cfg",
    ]);
    let before = config_state(repo.root()).unwrap();
    let wt = repo.path(".git/../../thread-wt");
    let err = Git::new(repo.root())
        .run(&[
            "worktree",
            "add",
            "-q",
            "-b",
            "thread",
            wt.to_str().unwrap(),
            "HEAD",
        ])
        .unwrap_err();
    assert!(err.message.contains("includeif."), "{}", err.message);
    assert_eq!(ran(&marker), "");
    // An edit of the included file, which git does not read here, changes the state.
    std::fs::write(
        repo.path(".git/evil.cfg"),
        "[filter \"evil\"]\n\tsmudge = other\n",
    )
    .unwrap();
    let after = config_state(repo.root()).unwrap();
    assert_ne!(before.git_programs, after.git_programs);
    assert!(
        after.git_programs.contains_key(".git/evil.cfg"),
        "{:?}",
        after.git_programs
    );
}
