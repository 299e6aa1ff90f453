//! The git directory's part of a fingerprint: hooks, config, `info/*`, refs, stash, worktrees —
//! and the read-only commands that must not count as a change.

use crate::support::{TestRepo, changed};

#[test]
fn planting_a_hook_is_a_change() {
    let repo = TestRepo::with_commit();
    let before = repo.fingerprint();
    repo.write(".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    let after = repo.fingerprint();
    assert_eq!(changed(&before, &after), [".git/hooks/pre-commit"]);
    assert!(after.entries[".git/hooks/pre-commit"].starts_with("file 100644 "));

    // Making it executable is a change too.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            repo.path(".git/hooks/pre-commit"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let executable = repo.fingerprint();
        assert_eq!(changed(&after, &executable), [".git/hooks/pre-commit"]);
        assert!(executable.entries[".git/hooks/pre-commit"].starts_with("file 100755 "));
    }
}

#[test]
fn changing_the_config_is_a_change() {
    let repo = TestRepo::with_commit();
    let before = repo.fingerprint();
    repo.git(&["config", "core.hooksPath", "/nonexistent/hooks"]);
    let after = repo.fingerprint();
    assert_eq!(changed(&before, &after), [".git/config"]);
}

#[test]
fn hooks_of_a_hooks_path_outside_the_repository_are_fingerprinted() {
    let repo = TestRepo::with_commit();
    let hooks = tempfile::tempdir().unwrap();
    let hooks_dir = hooks.path().canonicalize().unwrap();
    repo.git(&["config", "core.hooksPath", hooks_dir.to_str().unwrap()]);
    let before = repo.fingerprint();
    std::fs::write(hooks_dir.join("pre-commit"), "#!/bin/sh\n").unwrap();
    let after = repo.fingerprint();
    let key = format!("{}/pre-commit", hooks_dir.display());
    assert_eq!(changed(&before, &after), [key]);
}

#[test]
fn hooks_of_an_ignored_hooks_path_inside_the_worktree_are_fingerprinted() {
    let repo = TestRepo::with_commit();
    repo.git(&["config", "core.hooksPath", "target/hooks"]); // target/ is ignored
    let before = repo.fingerprint();
    repo.write("target/hooks/pre-commit", "#!/bin/sh\n");
    let after = repo.fingerprint();
    assert_eq!(changed(&before, &after), ["target/hooks/pre-commit"]);
    assert!(after.entries["target/hooks/pre-commit"].starts_with("hook file 100644 "));
}

#[test]
fn editing_info_files_is_a_change() {
    let repo = TestRepo::with_commit();
    let before = repo.fingerprint();
    repo.write(".git/info/exclude", "# nothing new is ignored\n");
    repo.write(".git/info/attributes", "*.txt text\n");
    let after = repo.fingerprint();
    assert_eq!(
        changed(&before, &after),
        [".git/info/attributes", ".git/info/exclude"]
    );
}

#[test]
fn new_branches_and_tags_are_changes() {
    let repo = TestRepo::with_commit();
    let before = repo.fingerprint();
    repo.git(&["branch", "feature"]);
    let branched = repo.fingerprint();
    assert_eq!(changed(&before, &branched), [".git/refs/heads/feature"]);
    repo.git(&["tag", "v1"]);
    repo.git(&["tag", "-a", "-m", "annotated", "v2"]);
    let tagged = repo.fingerprint();
    assert_eq!(
        changed(&branched, &tagged),
        [".git/refs/tags/v1", ".git/refs/tags/v2"]
    );
}

#[test]
fn stashing_is_a_change() {
    let repo = TestRepo::with_commit();
    repo.write("a.txt", "work in progress\n");
    let before = repo.fingerprint();
    repo.git(&["stash", "-q"]);
    let after = repo.fingerprint();
    // The worktree is back to HEAD, the stash ref appeared, and the reset left ORIG_HEAD.
    assert_eq!(
        changed(&before, &after),
        [".git/ORIG_HEAD", ".git/refs/stash", "a.txt"]
    );
}

#[test]
fn packing_refs_is_not_a_change_and_deleting_a_packed_ref_is() {
    let repo = TestRepo::with_commit();
    repo.git(&["branch", "feature"]);
    repo.git(&["tag", "v1"]);
    let loose = repo.fingerprint();
    repo.git(&["pack-refs", "--all"]);
    assert!(!repo.path(".git/refs/heads/feature").exists());
    let packed = repo.fingerprint();
    assert!(changed(&loose, &packed).is_empty());
    assert_eq!(loose.digest, packed.digest);
    repo.git(&["branch", "-D", "feature"]);
    let deleted = repo.fingerprint();
    assert_eq!(changed(&packed, &deleted), [".git/refs/heads/feature"]);
}

#[test]
fn a_loose_ref_shadows_its_packed_value() {
    let repo = TestRepo::with_commit();
    repo.git(&["branch", "feature"]);
    repo.git(&["pack-refs", "--all"]);
    let before = repo.fingerprint();
    repo.commit("second");
    // Moves `feature` with a loose ref while the packed one keeps the old value.
    repo.git(&["branch", "-f", "feature", "main"]);
    let after = repo.fingerprint();
    assert_eq!(
        changed(&before, &after),
        [".git/refs/heads/feature", ".git/refs/heads/main"]
    );
    assert_eq!(
        after.entries[".git/refs/heads/feature"],
        after.entries[".git/refs/heads/main"]
    );
}

#[test]
fn read_only_commands_are_not_a_change() {
    let repo = TestRepo::with_commit();
    repo.write("a.txt", "modified\n");
    repo.write("new.txt", "untracked\n");
    repo.git(&["branch", "feature"]);
    repo.git(&["stash", "-q"]);
    repo.write("a.txt", "modified again\n");
    // A stale stat cache gives `git status` a reason to rewrite the index.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    repo.write("src/lib.rs", "pub fn f() {}\n");
    let before = repo.fingerprint();
    for args in [
        &["status"][..],
        &["status", "--porcelain=v2", "-uall"],
        &["diff"],
        &["diff", "--cached"],
        &["log", "--oneline", "--all"],
        &["show", "--stat", "HEAD"],
        &["branch", "--list"],
        &["stash", "list"],
        &["rev-parse", "HEAD"],
        &["ls-files"],
        &["update-index", "--refresh"],
    ] {
        let _ = std::process::Command::new("git")
            .args(args)
            .current_dir(repo.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
    }
    let after = repo.fingerprint();
    assert!(changed(&before, &after).is_empty());
    assert_eq!(before.digest, after.digest);
}

#[test]
fn pseudo_refs_left_by_mutating_commands_are_changes() {
    let repo = TestRepo::with_commit();
    repo.commit("second");
    let before = repo.fingerprint();
    repo.git(&["reset", "-q", "--soft", "HEAD~1"]);
    let after = repo.fingerprint();
    let files = changed(&before, &after);
    assert!(files.contains(&".git/ORIG_HEAD".to_owned()), "{files:?}");
    assert!(
        files.contains(&".git/refs/heads/main".to_owned()),
        "{files:?}"
    );
}

#[test]
fn fingerprints_of_an_unchanged_repository_compare_equal_with_and_without_the_stat_cache() {
    let repo = TestRepo::with_commit();
    repo.write("a.txt", "modified\n");
    repo.write("new/file.txt", "untracked\n");
    repo.git(&["branch", "feature"]);
    let cached = repo.fingerprint();
    let hashed = repo.fingerprint_with(handoff_git::GitWorkspace::new().with_stat_cache(false));
    assert_eq!(hashed.verified_by.as_deref(), Some("hashed: asked to"));
    assert_eq!(
        cached,
        handoff_core::Fingerprint {
            verified_by: cached.verified_by.clone(),
            ..hashed
        }
    );
}

#[test]
fn state_files_that_change_what_git_does_or_shows_are_changes() {
    // Each is something git reads later: a shallow boundary hides history, an alternate
    // borrows objects, a todo list runs `exec` lines, a bisection runs a command, a message
    // becomes the next commit's; old-style remotes and the description show up in commands.
    for (path, content) in [
        (".git/shallow", "0000000000000000000000000000000000000000\n"),
        (".git/objects/info/alternates", "/tmp/elsewhere/objects\n"),
        (
            ".git/rebase-merge/git-rebase-todo",
            "exec sh -c 'touch /tmp/x'\n",
        ),
        (".git/sequencer/todo", "exec true\n"),
        (".git/BISECT_RUN", "sh evil.sh\n"),
        (".git/MERGE_MSG", "a message\n"),
        (".git/SQUASH_MSG", "a message\n"),
        (".git/remotes/origin", "URL: https://example.invalid/x\n"),
        (".git/description", "another description\n"),
    ] {
        let repo = TestRepo::with_commit();
        let before = repo.fingerprint();
        repo.write(path, content);
        let after = repo.fingerprint();
        assert_eq!(changed(&before, &after), [path], "{path}");
    }
}

#[test]
fn a_submodules_config_and_hooks_are_evidence_but_not_its_objects() {
    let repo = TestRepo::with_commit();
    // A submodule's git directory as `git submodule add` leaves it (its name may hold slashes).
    let module = "modules/libs/dep";
    repo.write(&format!(".git/{module}/HEAD"), "ref: refs/heads/main\n");
    repo.write(&format!(".git/{module}/config"), "[core]\n\tbare = false\n");
    repo.write(&format!(".git/{module}/objects/ab/cdef"), "x");
    let before = repo.fingerprint();
    assert!(
        before
            .entries
            .contains_key(&format!(".git/{module}/config")),
        "{:?}",
        crate::support::worktree_keys(&before)
    );
    repo.write(
        &format!(".git/{module}/config"),
        "[core]\n\tfsmonitor = sh evil.sh\n",
    );
    repo.write(&format!(".git/{module}/hooks/post-checkout"), "#!/bin/sh\n");
    repo.write(&format!(".git/{module}/objects/ab/cdef"), "y");
    let after = repo.fingerprint();
    assert_eq!(
        changed(&before, &after),
        [
            format!(".git/{module}/config"),
            format!(".git/{module}/hooks/post-checkout"),
        ]
    );
}

#[test]
fn git_settings_that_run_a_program_are_flagged_and_ordinary_ones_are_not() {
    use handoff_core::flags::FlagKind;
    let repo = TestRepo::with_commit();
    let before = repo.fingerprint();
    // An ordinary setting: a change, not a flag.
    repo.git(&["config", "branch.main.remote", "origin"]);
    let ordinary = repo.fingerprint();
    let e = before.compare(&ordinary);
    assert_eq!(e.changed_files, [".git/config"]);
    assert!(e.flags.is_empty(), "{:?}", e.flags);
    // Settings that run a program, however they are spelled.
    for (key, value) in [
        ("core.fsmonitor", "sh evil.sh"),
        ("core.hooksPath", "/tmp/hooks"),
        ("filter.lfs.clean", "sh evil.sh"),
        ("alias.st", "!sh evil.sh"),
        ("url.https://evil.example/.insteadOf", "https://github.com/"),
        ("includeIf.gitdir:/.path", "/tmp/evil.cfg"),
    ] {
        let repo = TestRepo::with_commit();
        let before = repo.fingerprint();
        repo.git(&["config", key, value]);
        let e = before.compare(&repo.fingerprint());
        assert_eq!(
            e.flags
                .iter()
                .map(|f| (f.path.as_str(), f.kind))
                .collect::<Vec<_>>(),
            [(".git/config", FlagKind::GitProgramConfig)],
            "{key}"
        );
    }
    // An alias without `!` runs git itself.
    let repo = TestRepo::with_commit();
    let before = repo.fingerprint();
    repo.git(&["config", "alias.st", "status"]);
    assert!(before.compare(&repo.fingerprint()).flags.is_empty());
}

#[test]
fn a_planted_hook_is_flagged_and_a_sample_is_not() {
    use handoff_core::flags::FlagKind;
    let repo = TestRepo::with_commit();
    let before = repo.fingerprint();
    repo.write(".git/hooks/pre-commit", "#!/bin/sh\n");
    repo.write(".git/hooks/pre-push.sample", "#!/bin/sh\n# edited\n");
    let e = before.compare(&repo.fingerprint());
    assert_eq!(
        e.flags
            .iter()
            .map(|f| (f.path.as_str(), f.kind))
            .collect::<Vec<_>>(),
        [(".git/hooks/pre-commit", FlagKind::GitHook)]
    );
}
