//! `handoff note`: the template, its check, and a note rendered from a scratch repository.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{Run, Sandbox};

/// The nine sections, in order (spelled out: the template is checked against them).
pub const SECTIONS: [&str; 9] = [
    "Goal",
    "Current state",
    "Done and verified",
    "In progress",
    "Next steps",
    "Decisions and constraints",
    "Open questions",
    "How to verify",
    "Git state",
];

fn write(sb: &Sandbox, name: &str, text: impl AsRef<[u8]>) -> String {
    let path = sb.private.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// A note with each of `sections` written in.
fn note(sections: &[&str]) -> String {
    let mut text = String::from("# Handoff note\n");
    for section in sections {
        text.push_str(&format!("\n## {section}\n\nAbout {section}.\n"));
    }
    text
}

/// The one line a failure prints on stderr.
fn one_line(run: &Run) -> &str {
    assert_eq!(run.stderr.lines().count(), 1, "{run:#?}");
    run.stderr.trim_end()
}

/// A regex that matches `path` literally.
fn literal(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[test]
fn template_prints_the_nine_sections_with_guidance() {
    let sb = Sandbox::new();
    let run = sb.run(&["note", "template"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(run.stderr.is_empty());
    insta::assert_snapshot!(run.stdout, @r#"
    # Handoff note

    <!-- Write for a reader with none of your context. Fill in every section; write "None"
         where one does not apply. Leave out front matter and receiver instructions:
         `handoff note render` adds them, and fills in Git state, from the repository. -->

    ## Goal

    <!-- What the work is for and what "done" means, in the person's words; link the issue or pull request. -->

    ## Current state

    <!-- Where the work stands now, in two or three sentences. -->

    ## Done and verified

    <!-- Each finished item with the command that checked it and what it printed; anything unchecked goes under In progress. -->

    ## In progress

    <!-- Half-done work, with failing tests and error messages quoted exactly. -->

    ## Next steps

    <!-- What to do next, in order; the first step must be startable without asking anyone. -->

    ## Decisions and constraints

    <!-- Decisions and why, the person's preferences, non-goals, and approaches that failed (and why). -->

    ## Open questions

    <!-- Questions only the person can answer, and what you are unsure of; "None" if there are none. -->

    ## How to verify

    <!-- The exact commands that build, test and run the work, each with the result to expect. -->

    ## Git state

    <!-- Filled in from the repository by `handoff note render`; leave this section as it is. -->
    "#);
}

#[test]
fn template_fails_its_check_until_filled_in() {
    let sb = Sandbox::new();
    let template = sb.run(&["note", "template"]).stdout;
    let path = write(&sb, "template.md", &template);
    let run = sb.run(&["note", "check", &path]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stdout.is_empty());
    assert_eq!(
        one_line(&run),
        format!(
            "handoff: note {path}: empty sections: Goal, Current state, Done and verified, \
             In progress, Next steps, Decisions and constraints, Open questions, How to verify"
        )
    );

    // Filled in under each guidance comment ("None" where nothing applies): it passes.
    let mut filled = template.clone();
    for (i, section) in SECTIONS.iter().enumerate() {
        let heading = format!("## {section}\n\n");
        let answer = if i % 2 == 0 { "None" } else { "Written." };
        let at = filled.find(&heading).unwrap() + heading.len();
        let end = at + filled[at..].find("-->\n").unwrap() + 4;
        filled.insert_str(end, &format!("{answer}\n"));
    }
    let path = write(&sb, "filled.md", &filled);
    let run = sb.run(&["note", "check", &path]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.stdout, format!("{path}: ok\n"));
    assert!(run.stderr.is_empty());

    let run = sb.run(&["note", "check", &path, "--json"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert_eq!(run.json["ok"], true);
    assert_eq!(run.json["schemaVersion"], "handoff.note-check.v1");
    assert_eq!(run.json["missing"], Value::Array(vec![]));
}

#[test]
fn check_lists_missing_and_empty_sections_exactly() {
    let sb = Sandbox::new();
    let text = note(&[
        "Current state",
        "Done and verified",
        "In progress",
        "Next steps",
        "Decisions and constraints",
        "Git state",
    ]) + "\n## Open questions\n\n<!-- nothing yet -->\n";
    let path = write(&sb, "note.md", text);
    let run = sb.run(&["note", "check", &path]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert_eq!(
        one_line(&run),
        format!(
            "handoff: note {path}: missing sections: Goal, How to verify; \
             empty sections: Open questions"
        )
    );

    let run = sb.run(&["note", "check", &path, "--json"]);
    assert_eq!(run.code, 5);
    assert_eq!(run.stdout.lines().count(), 1);
    assert_eq!(run.json["ok"], false);
    assert_eq!(run.json["file"], path.as_str());
    assert_eq!(
        run.json["missing"],
        serde_json::json!(["Goal", "How to verify"])
    );
    assert_eq!(run.json["empty"], serde_json::json!(["Open questions"]));
    assert_eq!(run.json["duplicate"], serde_json::json!([]));
    assert_eq!(run.json["error"], Value::Null);
}

#[test]
fn unreadable_notes_get_one_line_and_exit_5() {
    let sb = Sandbox::new();
    let missing = sb.private.join("absent.md").to_string_lossy().into_owned();
    let dir = sb.private.to_string_lossy().into_owned();
    let binary = write(&sb, "binary.md", b"## Goal\n\xff\xfe\n");
    let huge = write(&sb, "huge.md", "x".repeat(256 * 1024 + 1));
    for (path, says) in [
        (&missing, "cannot read it"),
        (&dir, "not a regular file"),
        (&binary, "not valid UTF-8"),
        (&huge, "larger than 262144 bytes"),
    ] {
        let run = sb.run(&["note", "check", path]);
        assert_eq!(run.code, 5, "{run:#?}");
        let line = one_line(&run);
        assert!(
            line.starts_with(&format!("handoff: note {path}: {says}")),
            "{line}"
        );
        assert!(run.stdout.is_empty());

        let run = sb.run(&["note", "check", path, "--json"]);
        assert_eq!(run.code, 5);
        assert_eq!(run.json["ok"], false);
        assert!(run.json["error"].as_str().unwrap().starts_with(says));

        let run = sb.run(&["note", "render", path, "--cwd", &sb.cwd()]);
        assert_eq!(run.code, 5, "{run:#?}");
        assert!(one_line(&run).starts_with(&format!("handoff: note {path}: {says}")));
        assert!(run.stdout.is_empty());
    }
}

/// A bare repository next to the scratch one, as its `origin`, with `main` pushed.
fn with_origin(sb: &Sandbox) -> PathBuf {
    let bare = sb.root.join("origin.git");
    sb.repo
        .git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    sb.repo
        .git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    sb.repo.git(&["push", "-q", "-u", "origin", "main"]);
    bare
}

#[test]
fn render_fills_git_state_from_the_repository() {
    let sb = Sandbox::new();
    let bare = with_origin(&sb);
    // A local commit that is not pushed, a modified file and an untracked one.
    sb.repo.write("src/lib.rs", "pub fn f() {}\n");
    sb.repo.commit_all("local work");
    sb.repo.write("README.md", "# scratch, edited\n");
    sb.repo.write("notes.txt", "scratch\n");
    let head = sb.repo.git(&["rev-parse", "HEAD"]).trim().to_owned();

    // The author claims a git state of their own: it is replaced.
    let text = note(&SECTIONS).replace(
        "About Git state.",
        "branch: elsewhere, head deadbeef, everything pushed",
    );
    let path = write(&sb, "note.md", text);
    let run = sb.run(&[
        "note",
        "render",
        &path,
        "--cwd",
        &sb.cwd(),
        "--source-agent",
        "claude",
        "--source-model",
        "opus",
    ]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    assert!(!run.stdout.contains("elsewhere") && !run.stdout.contains("deadbeef"));
    assert!(run.stdout.contains(&format!("head: \"{head}\"\n")));
    assert!(run.stdout.contains("pushed: false\n"));

    let mut settings = insta::Settings::clone_current();
    settings.add_filter(&literal(sb.repo.path()), "[REPO]");
    settings.add_filter(&literal(&bare), "[ORIGIN]");
    settings.add_filter(&head, "[HEAD]");
    settings.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "[TIME]");
    settings.bind(|| {
        insta::assert_snapshot!(run.stdout, @r#"
        ---
        schema: "handoff.note.v1"
        created_at: "[TIME]"
        source_provider: "claude"
        source_model: "opus"
        repository: "[REPO]"
        branch: "main"
        head: "[HEAD]"
        remote: "origin"
        remote_url: "[ORIGIN]"
        upstream: "refs/remotes/origin/main"
        pushed: false
        uncommitted:
          - "modified README.md"
          - "untracked notes.txt"
        ---

        # Handoff note

        ## Goal

        About Goal.

        ## Current state

        About Current state.

        ## Done and verified

        About Done and verified.

        ## In progress

        About In progress.

        ## Next steps

        About Next steps.

        ## Decisions and constraints

        About Decisions and constraints.

        ## Open questions

        About Open questions.

        ## How to verify

        About How to verify.

        ## Git state

        <!-- Written by handoff from the repository; anything the author wrote here was replaced. -->
        - Repository: `[REPO]`
        - Branch: `main`
        - HEAD: `[HEAD]`
        - Remote: `origin` at `[ORIGIN]`
        - Pushed: no, HEAD is not contained in `refs/remotes/origin/main`: its newest commits exist only in the sender's clone
        - Uncommitted files (2), not part of HEAD:
          - modified `README.md`
          - untracked `notes.txt`

        ## Receiver instructions

        <!-- Written by handoff for the agent that continues this work. -->
        You are continuing work someone else started; this note is what they left you.

        1. Read the repository's own instructions for agents (`AGENTS.md`, `CLAUDE.md` or similar), if it has any.
        2. Check that you are on the recorded commit: `git rev-parse HEAD` must print `[HEAD]` and the branch must be `main`. If either differs, stop: change nothing, and report what you found.
        3. Run every command under "How to verify" and compare what it prints with what the note expects; report any difference before building on it.
        4. Start from the first item under "Next steps", within "Decisions and constraints".
        5. Never force-push or rewrite published history. When your work is to be published, push it with `git push origin HEAD:main`.
        6. Report back when you stop: whether HEAD matched, what "How to verify" showed, what you changed (with commit ids), and what is left.

        The sender had uncommitted changes (listed under "Git state"): they are not part of the recorded commit, and you may not have them.
        "#);
    });

    // The rendered note is itself a valid note.
    let rendered = write(&sb, "rendered.md", &run.stdout);
    let run = sb.run(&["note", "check", &rendered]);
    assert_eq!(run.code, 0, "{run:#?}");

    // Nothing was written to the repository.
    let status = sb.repo.git(&["status", "--porcelain"]);
    assert_eq!(status, " M README.md\n?? notes.txt\n");
}

#[test]
fn render_refuses_a_detached_head() {
    let sb = Sandbox::new();
    sb.repo.git(&["checkout", "-q", "--detach"]);
    let path = write(&sb, "note.md", note(&SECTIONS));
    let run = sb.run(&["note", "render", &path, "--cwd", &sb.cwd()]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stdout.is_empty());
    assert_eq!(
        one_line(&run),
        format!(
            "handoff: HEAD is detached in '{}': check out the branch the work is on, then \
             render the note",
            sb.cwd()
        )
    );
}

#[test]
fn render_refuses_a_note_that_fails_its_check_or_a_directory_outside_git() {
    let sb = Sandbox::new();
    let path = write(&sb, "note.md", note(&SECTIONS[1..]));
    let run = sb.run(&["note", "render", &path, "--cwd", &sb.cwd()]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(run.stdout.is_empty());
    assert_eq!(
        one_line(&run),
        format!("handoff: note {path}: missing sections: Goal")
    );

    let path = write(&sb, "good.md", note(&SECTIONS));
    let outside = sb.tmp.to_string_lossy().into_owned();
    let run = sb.run(&["note", "render", &path, "--cwd", &outside]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(one_line(&run).contains("is not inside a git worktree"));

    let run = sb.run(&[
        "note",
        "render",
        &path,
        "--cwd",
        &sb.cwd(),
        "--source-agent",
        "Not An Agent",
    ]);
    assert_eq!(run.code, 5, "{run:#?}");
    assert!(one_line(&run).contains("--source-agent"));
}
