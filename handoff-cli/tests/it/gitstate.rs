//! State under `.git` as an attacker and as git's own housekeeping touch it: a hooks directory
//! that is a symbolic link into the worktree (as hook managers make it), a conflict resolution
//! planted for `git rerere` to replay at the next merge, and the derived files `git gc`,
//! `git maintenance` and `git update-server-info` rewrite, which are no one's change.

use handoff_testkit::keys::SHELL;

use crate::support::{Run, Sandbox};

fn shell(sb: &Sandbox, script: &str) {
    sb.agents.set(
        SHELL,
        format!("cd '{}' && {script}", sb.repo.path().display()),
    );
}

fn flags(run: &Run) -> Vec<(String, String)> {
    run.json["git"]["flags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or_default().to_owned(),
                f["kind"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn changed(run: &Run) -> Vec<String> {
    run.json["git"]["changedFiles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_hook_written_through_a_symlinked_hooks_directory_is_a_planted_hook() {
    let sb = Sandbox::new();
    sb.repo.write("scripts/hooks/README", "hooks\n");
    sb.repo.commit_all("hooks dir");
    let hooks = sb.repo.path().join(".git/hooks");
    std::fs::remove_dir_all(&hooks).ok();
    std::os::unix::fs::symlink(sb.repo.path().join("scripts/hooks"), &hooks).unwrap();
    shell(
        &sb,
        "printf '#!/bin/sh\\necho planted\\n' > .git/hooks/pre-commit && \
         chmod +x .git/hooks/pre-commit && echo x > work.txt",
    );
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert!(
        flags(&run).contains(&(".git/hooks/pre-commit".to_owned(), "git-hook".to_owned())),
        "{:?}",
        flags(&run)
    );
    assert!(
        changed(&run).contains(&"scripts/hooks/pre-commit".to_owned()),
        "{:?}",
        changed(&run)
    );
}

#[test]
fn a_resolution_planted_for_rerere_is_a_change() {
    let sb = Sandbox::new();
    sb.repo.git(&["config", "rerere.enabled", "true"]);
    shell(
        &sb,
        "mkdir -p .git/rr-cache/0123456789abcdef0123456789abcdef01234567 && \
         printf 'fn main() { evil() }\\n' > \
         .git/rr-cache/0123456789abcdef0123456789abcdef01234567/postimage",
    );
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert!(
        changed(&run)
            .iter()
            .any(|f| f.starts_with(".git/rr-cache/")),
        "{:?}",
        changed(&run)
    );
}

#[test]
fn git_housekeeping_during_a_review_is_no_change() {
    for command in [
        "git gc --quiet",
        "git -c gc.auto=1 -c gc.autoPackLimit=1 gc --auto --quiet",
        "git maintenance run --quiet",
        "git update-server-info",
    ] {
        let sb = Sandbox::new();
        for i in 0..3 {
            sb.repo.write(&format!("f{i}.txt"), &format!("{i}\n"));
            sb.repo.commit_all(&format!("commit {i}"));
        }
        shell(&sb, command);
        let run = sb.delegate("claude", "codex", "review", &[]);
        assert_eq!(run.status(), "succeeded", "{command}: {}", run.stdout);
        assert!(changed(&run).is_empty(), "{command}: {:?}", changed(&run));
    }
}

#[test]
fn info_files_that_change_what_git_does_still_count() {
    let sb = Sandbox::new();
    shell(
        &sb,
        "mkdir -p .git/info && printf '*.rs diff=planted\\n' > .git/info/attributes",
    );
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert!(
        changed(&run).contains(&".git/info/attributes".to_owned()),
        "{:?}",
        changed(&run)
    );
}

/// Settings that change how git compares or reads the worktree, set in the repository before
/// the run (by the person or an earlier agent), never loosen the evidence: each change below is
/// invisible to `git status` under its setting, and a review that makes it is blocked.
#[test]
fn settings_that_loosen_gits_comparison_do_not_loosen_the_evidence() {
    struct Case {
        setting: (&'static str, &'static str),
        setup: &'static [(&'static str, &'static str)],
        attack: &'static str,
        changed: &'static str,
    }
    let cases = [
        Case {
            setting: ("core.fileMode", "false"),
            setup: &[("run.sh", "echo hi\n")],
            attack: "chmod +x run.sh",
            changed: "run.sh",
        },
        Case {
            setting: ("core.ignoreCase", "true"),
            setup: &[(".gitignore", "secret.txt\n")],
            attack: "echo planted > SECRET.TXT",
            changed: "SECRET.TXT",
        },
        Case {
            setting: ("core.autocrlf", "true"),
            setup: &[("notes.txt", "one\ntwo\n")],
            attack: "printf 'one\\r\\ntwo\\r\\n' > notes.txt",
            changed: "notes.txt",
        },
        Case {
            setting: ("core.symlinks", "false"),
            setup: &[("target.txt", "t\n"), ("link.txt", "target.txt")],
            attack: "rm link.txt && ln -s target.txt link.txt",
            changed: "link.txt",
        },
    ];
    for case in cases {
        let sb = Sandbox::new();
        for (path, text) in case.setup {
            sb.repo.write(path, text);
        }
        sb.repo.commit_all("setup");
        sb.repo.git(&["config", case.setting.0, case.setting.1]);
        let what = format!("{}={}", case.setting.0, case.setting.1);
        shell(&sb, case.attack);
        let run = sb.delegate("claude", "codex", "review", &[]);
        assert_eq!(run.status(), "blocked", "{what}: {}", run.stdout);
        assert!(
            changed(&run).contains(&case.changed.to_owned()),
            "{what}: {:?}",
            changed(&run)
        );
    }
}
