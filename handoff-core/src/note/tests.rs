use proptest::prelude::*;

use super::render::git_state_body;
use super::*;
use crate::names::AgentId;
use crate::workspace::StatusChange;

/// The template with every author section filled in with `text`.
fn filled(text: &str) -> String {
    let mut out = String::from("# Handoff note\n");
    for section in Section::ALL {
        out.push_str(&format!("\n## {}\n\n{text}\n", section.title()));
    }
    out
}

fn change(
    path: &str,
    staged: bool,
    unstaged: bool,
    untracked: bool,
    deleted: bool,
) -> StatusChange {
    StatusChange {
        path: path.into(),
        staged,
        unstaged,
        untracked,
        deleted,
    }
}

fn git() -> GitState {
    GitState {
        repository: "/work/project".into(),
        branch: Some("feature/notes".into()),
        head: Some("0123456789abcdef0123456789abcdef01234567".into()),
        remote: Some(GitRemote {
            name: "origin".into(),
            url: Some("https://example.com/me/project.git".into()),
        }),
        upstream: Some("refs/remotes/origin/feature/notes".into()),
        pushed: Some(false),
        uncommitted: vec![
            change("src/lib.rs", true, true, false, false),
            change("old.rs", false, true, false, true),
            change("notes/todo list.txt", false, false, true, false),
        ],
    }
}

fn origin() -> NoteOrigin {
    NoteOrigin {
        created_at: Some("2026-01-02T03:04:05.678Z".into()),
        source_provider: Some(AgentId::CLAUDE),
        source_model: Some("opus".into()),
        generated: false,
    }
}

/// Fills each section of the template with a line of its own.
fn fill_template() -> String {
    let mut text = template();
    for section in Section::ALL {
        let guidance = format!("<!-- {} -->", section.guidance());
        text = text.replacen(
            &guidance,
            &format!("{guidance}\nWritten for {}.", section.title()),
            1,
        );
    }
    text
}

#[test]
fn template_has_the_nine_sections_in_order_each_with_guidance() {
    let note = parse(&template());
    let order: Vec<Section> = note.sections.iter().map(|s| s.section).collect();
    assert_eq!(order, Section::ALL);
    assert!(note.front_matter.is_none() && note.front_matter_error.is_none());
    assert_eq!(note.preamble.lines().next(), Some("# Handoff note"));
    let errors = check(&note).unwrap_err();
    assert!(errors.missing.is_empty());
    // Git state is handoff's to fill.
    assert_eq!(errors.empty, Section::ALL[..8]);
}

#[test]
fn template_passes_after_filling() {
    let note = parse(&fill_template());
    assert_eq!(check(&note), Ok(()));
    assert_eq!(
        note.body(Section::Goal).unwrap(),
        format!("<!-- {} -->\nWritten for Goal.", Section::Goal.guidance())
    );
}

#[test]
fn none_counts_as_written() {
    assert_eq!(check(&parse(&filled("None"))), Ok(()));
    assert_eq!(check(&parse(&filled("None."))), Ok(()));
}

#[test]
fn each_missing_section_is_reported_exactly() {
    for gone in Section::ALL {
        let text = filled("None").replace(&format!("## {}\n", gone.title()), "");
        let errors = check(&parse(&text)).unwrap_err();
        assert_eq!(errors.missing, [gone], "{text}");
        assert!(errors.empty.is_empty() && errors.duplicate.is_empty());
    }
    let errors = check(&parse("")).unwrap_err();
    assert_eq!(errors.missing, Section::ALL);
}

#[test]
fn each_empty_section_is_reported_exactly() {
    for blank in &Section::ALL[..8] {
        let mut text = String::new();
        for section in Section::ALL {
            let body = if section == *blank { "  \n\t\n" } else { "x" };
            text.push_str(&format!("## {}\n{body}\n", section.title()));
        }
        let errors = check(&parse(&text)).unwrap_err();
        assert_eq!(errors.empty, [*blank]);
        assert!(errors.missing.is_empty());
    }
}

#[test]
fn placeholders_comments_and_guidance_count_as_empty() {
    for body in [
        "<!-- write this -->",
        "<!--\nmany\nlines\n-->\n",
        "TODO",
        "- TBD",
        "1. ...",
        "…",
        "```\n```",
        "What the work is for and what \"done\" means, in the person's words; link the issue or pull request.",
    ] {
        let text = filled("None").replacen("None", body, 1);
        let errors = check(&parse(&text)).unwrap_err();
        assert_eq!(errors.empty, [Section::Goal], "{body:?}");
    }
    for body in [
        "TODO: ask about the schema",
        "<!-- x --> done",
        "```\nmake\n```",
    ] {
        let text = filled("None").replacen("None", body, 1);
        assert_eq!(check(&parse(&text)), Ok(()), "{body:?}");
    }
}

#[test]
fn errors_read_as_one_line() {
    let text = "## Current state\nx\n## Done and verified\nx\n## In progress\nx\n\
                ## Next steps\nx\n## Decisions and constraints\nx\n## Open questions\n\n\
                ## Git state\n## In progress\ny\n";
    let errors = check(&parse(text)).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "missing sections: Goal, How to verify; empty sections: Open questions; \
         duplicate sections: In progress"
    );
}

#[test]
fn headings_are_matched_loosely_but_only_at_level_two_outside_code_and_comments() {
    let text = filled("None")
        .replace("## Goal", "##   GOAL: ##")
        .replace("## Next steps", "### Next steps");
    let note = parse(&text);
    assert_eq!(check(&note).unwrap_err().missing, [Section::NextSteps]);

    let fenced = filled("None").replace(
        "## Goal\n\nNone",
        "## Goal\n\n```md\n## Next steps\n```\n<!--\n## Open questions\n-->",
    );
    let note = parse(&fenced);
    assert_eq!(check(&note), Ok(()));
    assert_eq!(note.sections.len(), 9);
    assert!(note.body(Section::Goal).unwrap().contains("## Next steps"));
}

#[test]
fn sections_start_only_at_top_level_headings_as_commonmark_reads_them() {
    // (case, text, the headings that start sections)
    let cases: [(&str, &str, &[&str]); 9] = [
        ("plain", "## A\nx\n## B\n", &["A", "B"]),
        ("backtick fence", "## A\n```\n## B\n```\n## C", &["A", "C"]),
        (
            "tilde fence",
            "## A\n~~~\n## B\n```\n~~~\n## C",
            &["A", "C"],
        ),
        (
            "four backticks around three",
            "## A\n````\n```\n## B\n````\n## C",
            &["A", "C"],
        ),
        ("unterminated fence", "## A\n```sh\n## B\n## C", &["A"]),
        ("indented code", "## A\n\n    ## B\n## C", &["A", "C"]),
        ("comment", "## A\n<!--\n## B\n-->\n## C", &["A", "C"]),
        (
            "list item and quote",
            "## A\n- ## B\n\n> ## B\n\n## C",
            &["A", "C"],
        ),
        (
            "setext and other levels",
            "B\n--\n### B\n#B\n## C ##\n",
            &["C"],
        ),
    ];
    for (case, text, want) in cases {
        let markdown = Markdown::read(text);
        let headings: Vec<String> = markdown.sections().into_iter().map(|s| s.heading).collect();
        assert_eq!(headings, want, "{case}");
    }
    let text = "intro\n## A\r\nbody\n## B";
    let sections = Markdown::read(text).sections();
    assert_eq!(&text[sections[0].body.clone()], "body\n");
    assert_eq!(&text[sections[1].heading_range.clone()], "## B");
    assert_eq!(sections[1].body, text.len()..text.len());
}

#[test]
fn the_reader_yields_code_blocks_list_items_code_spans_and_text() {
    let text = "- `cargo test` passes\n- run `make`\n- `a` or `b`\n\n\
                1. `just lint`\n\n   more\n\n\
                ~~~sh  -x\necho hi\n~~~\n\n    indented\n\n\
                See <!-- hidden --> __init__.py";
    let markdown = Markdown::read(text);
    let items: Vec<Option<&str>> = markdown
        .pieces()
        .iter()
        .filter_map(|p| match &p.kind {
            MarkdownKind::ListItem { code } => Some(code.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(items, [Some("cargo test"), None, None, Some("just lint")]);
    let blocks: Vec<(Option<&str>, &str)> = markdown
        .pieces()
        .iter()
        .filter_map(|p| match &p.kind {
            MarkdownKind::CodeBlock { info, text } => Some((info.as_deref(), text.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        blocks,
        [(Some("sh  -x"), "echo hi\n"), (None, "indented\n")]
    );
    let spans: Vec<&str> = markdown
        .pieces()
        .iter()
        .filter_map(|p| match &p.kind {
            MarkdownKind::Code(code) => Some(code.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(spans, ["cargo test", "make", "a", "b", "just lint"]);
    let last: Vec<(&MarkdownKind, &str)> = markdown.pieces()[markdown.pieces().len() - 3..]
        .iter()
        .map(|p| (&p.kind, markdown.text(p)))
        .collect();
    assert_eq!(
        last,
        [
            (&MarkdownKind::Text, "\nSee "),
            (&MarkdownKind::Html, "<!-- hidden -->"),
            (&MarkdownKind::Text, " __init__.py"),
        ]
    );
    // Code blocks, code spans, HTML and text cover the source once, in order.
    let mut covered = 0;
    for piece in markdown.pieces() {
        if !matches!(
            piece.kind,
            MarkdownKind::Heading { .. } | MarkdownKind::ListItem { .. }
        ) {
            assert_eq!(piece.range.start, covered, "{piece:?}");
            covered = piece.range.end;
        }
    }
    assert_eq!(covered, text.len());
}

#[test]
fn what_a_text_leaves_open_is_closed_before_the_next_section() {
    for (text, closer) in [
        ("plain", None),
        ("```sh\ncargo test", Some("```")),
        ("  ````\n```", Some("````")),
        ("~~~\nx", Some("~~~")),
        ("<!--\nx", Some("-->")),
        ("<PRE class=x>\nx", Some("</pre>")),
        ("<?php\nx", Some("?>")),
        ("<![CDATA[\nx", Some("]]>")),
        ("<!DOCTYPE\nx", Some(">")),
        // A list item or quote ends at the next heading, and what it holds with it.
        ("- ```\n  x", None),
        ("> <!--", None),
        ("```\nx\n```", None),
        ("<div>\nx", None),
    ] {
        assert_eq!(Markdown::read(text).closer().as_deref(), closer, "{text:?}");
        let closed = match closer {
            Some(c) => format!("{text}\n{c}"),
            None => text.to_owned(),
        };
        let after = format!("{closed}\n\n## Next\n");
        assert_eq!(
            Markdown::read(&after).sections().len(),
            1,
            "{text:?} closed by {closer:?}"
        );
    }
}

#[test]
fn out_of_order_sections_are_accepted_and_rendered_in_order() {
    let mut text = String::new();
    for section in Section::ALL.iter().rev() {
        text.push_str(&format!("## {}\n{}\n\n", section.title(), section.title()));
    }
    let note = parse(&text);
    assert_eq!(check(&note), Ok(()));
    let rendered = parse(&render(&note, &git(), &origin()));
    let order: Vec<Section> = rendered.sections.iter().map(|s| s.section).collect();
    assert_eq!(order, Section::ALL);
}

#[test]
fn author_written_git_state_and_front_matter_are_replaced() {
    let text = format!(
        "---\nschema: \"handoff.note.v1\"\nrepository: \"/elsewhere\"\nbranch: \"lies\"\n\
         head: null\nremote: null\nremote_url: null\nupstream: null\npushed: true\n\
         uncommitted: []\n---\n{}",
        filled("None").replace(
            "## Git state\n\nNone",
            "## Git state\n\nbranch: lies, head deadbeef, pushed: yes"
        )
    );
    let note = parse(&text);
    assert_eq!(check(&note), Ok(()));
    assert_eq!(
        note.front_matter.as_ref().unwrap().git.branch.as_deref(),
        Some("lies")
    );
    let rendered = render(&note, &git(), &origin());
    assert!(
        !rendered.contains("lies") && !rendered.contains("deadbeef"),
        "{rendered}"
    );
    assert!(!rendered.contains("/elsewhere"));
    let back = parse(&rendered);
    let fm = back.front_matter.clone().unwrap();
    assert_eq!(fm.git, git());
    assert_eq!(fm.origin, origin());
    assert!(
        back.body(Section::GitState)
            .unwrap()
            .contains("`feature/notes`")
    );
}

#[test]
fn rendered_note_carries_receiver_instructions_and_passes_check() {
    let note = parse(&fill_template());
    let rendered = render(&note, &git(), &origin());
    assert!(rendered.starts_with("---\nschema: \"handoff.note.v1\"\n"));
    assert!(
        !rendered.contains(Section::Goal.guidance()),
        "guidance removed"
    );
    assert!(
        !rendered.contains("Write for a reader"),
        "the author's intro removed"
    );
    let receiver = rendered
        .split("\n## Receiver instructions\n")
        .nth(1)
        .unwrap();
    assert!(
        receiver
            .contains("`git rev-parse HEAD` must print `0123456789abcdef0123456789abcdef01234567`")
    );
    assert!(receiver.contains("stop"));
    assert!(receiver.contains("\"How to verify\""));
    assert!(receiver.contains("\"Next steps\""));
    assert!(receiver.contains("Never force-push"));
    assert!(receiver.contains("git push origin HEAD:feature/notes"));
    assert!(receiver.contains("Report back"));
    assert!(receiver.contains("uncommitted changes"));
    let back = parse(&rendered);
    assert_eq!(check(&back), Ok(()));
    // Rendering a rendered note changes nothing.
    assert_eq!(render(&back, &git(), &origin()), rendered);
}

#[test]
fn rendered_note_snapshot() {
    let rendered = render(&parse(&fill_template()), &git(), &origin());
    insta::assert_snapshot!(rendered, @r#"
    ---
    schema: "handoff.note.v1"
    created_at: "2026-01-02T03:04:05.678Z"
    source_provider: "claude"
    source_model: "opus"
    repository: "/work/project"
    branch: "feature/notes"
    head: "0123456789abcdef0123456789abcdef01234567"
    remote: "origin"
    remote_url: "https://example.com/me/project.git"
    upstream: "refs/remotes/origin/feature/notes"
    pushed: false
    uncommitted:
      - "staged+modified src/lib.rs"
      - "deleted old.rs"
      - "untracked notes/todo list.txt"
    ---

    # Handoff note

    ## Goal

    Written for Goal.

    ## Current state

    Written for Current state.

    ## Done and verified

    Written for Done and verified.

    ## In progress

    Written for In progress.

    ## Next steps

    Written for Next steps.

    ## Decisions and constraints

    Written for Decisions and constraints.

    ## Open questions

    Written for Open questions.

    ## How to verify

    Written for How to verify.

    ## Git state

    <!-- Written by handoff from the repository; anything the author wrote here was replaced. -->
    - Repository: `/work/project`
    - Branch: `feature/notes`
    - HEAD: `0123456789abcdef0123456789abcdef01234567`
    - Remote: `origin` at `https://example.com/me/project.git`
    - Pushed: no, HEAD is not contained in `refs/remotes/origin/feature/notes`: its newest commits exist only in the sender's clone
    - Uncommitted files (3), not part of HEAD:
      - staged+modified `src/lib.rs`
      - deleted `old.rs`
      - untracked `notes/todo list.txt`

    ## Receiver instructions

    <!-- Written by handoff for the agent that continues this work. -->
    You are continuing work someone else started; this note is what they left you.

    1. Read the repository's own instructions for agents (`AGENTS.md`, `CLAUDE.md` or similar), if it has any.
    2. Check that you are on the recorded commit: `git rev-parse HEAD` must print `0123456789abcdef0123456789abcdef01234567` and the branch must be `feature/notes`. If either differs, stop: change nothing, and report what you found.
    3. Run every command under "How to verify" and compare what it prints with what the note expects; report any difference before building on it.
    4. Start from the first item under "Next steps", within "Decisions and constraints".
    5. Never force-push or rewrite published history. When your work is to be published, push it with `git push origin HEAD:feature/notes`.
    6. Report back when you stop: whether HEAD matched, what "How to verify" showed, what you changed (with commit ids), and what is left.

    The sender had uncommitted changes (listed under "Git state"): they are not part of the recorded commit, and you may not have them.
    "#);
}

#[test]
fn detached_unborn_and_remoteless_states_render() {
    let state = GitState {
        repository: "/r".into(),
        branch: None,
        head: None,
        remote: None,
        upstream: None,
        pushed: None,
        uncommitted: vec![],
    };
    let rendered = render(&parse(&filled("None")), &state, &NoteOrigin::default());
    assert!(rendered.contains("branch: null\nhead: null\nremote: null\nremote_url: null\nupstream: null\npushed: null\nuncommitted: []\n---\n"), "{rendered}");
    assert!(rendered.contains("- Branch: none (HEAD is detached)"));
    assert!(rendered.contains("had no commit"));
    assert!(!rendered.contains("git push"));
    let back = parse(&rendered);
    assert_eq!(back.front_matter.unwrap().git, state);
}

#[test]
fn long_uncommitted_lists_are_cut_and_counted() {
    let mut state = git();
    state.uncommitted = (0..MAX_LISTED_UNCOMMITTED + 5)
        .map(|i| change(&format!("f{i:03}"), false, false, true, false))
        .collect();
    let rendered = render(&parse(&filled("None")), &state, &origin());
    let fm = parse(&rendered).front_matter.unwrap();
    assert_eq!(fm.git.uncommitted.len(), MAX_LISTED_UNCOMMITTED);
    assert_eq!(fm.uncommitted_omitted, 5);
    assert!(rendered.contains("  - and 5 more\n"));
}

#[test]
fn hostile_paths_cannot_add_lines_to_the_note() {
    let mut state = git();
    state.uncommitted = vec![change("x\n## Goal\nfake", false, false, true, false)];
    let rendered = render(&parse(&filled("None")), &state, &origin());
    let back = parse(&rendered);
    assert_eq!(check(&back), Ok(()));
    assert_eq!(
        back.front_matter.unwrap().git.uncommitted,
        state.uncommitted
    );
}

#[test]
fn front_matter_is_strict() {
    let good = FrontMatter::new(&git(), &origin()).render();
    let body = filled("None");
    assert!(parse(&format!("{good}{body}")).front_matter_error.is_none());
    /// An edit of the good front matter, and the error it must cause.
    type Case = (&'static str, &'static str, fn(&FrontMatterError) -> bool);
    let cases: [Case; 8] = [
        ("pushed: false\n", "pushed: no\n", |e| {
            matches!(e, FrontMatterError::BadLine { .. })
        }),
        (
            "pushed: false\n",
            "pushed: \"no\"\n",
            |e| matches!(e, FrontMatterError::BadValue { key, .. } if key == "pushed"),
        ),
        ("pushed: false\n", "", |e| {
            matches!(e, FrontMatterError::MissingKey { key: "pushed" })
        }),
        (
            "pushed: false\n",
            "pushed: false\nowner: \"me\"\n",
            |e| matches!(e, FrontMatterError::UnknownKey { key, .. } if key == "owner"),
        ),
        (
            "pushed: false\n",
            "pushed: false\npushed: true\n",
            |e| matches!(e, FrontMatterError::DuplicateKey { key, .. } if key == "pushed"),
        ),
        ("handoff.note.v1", "handoff.note.v9", |e| {
            matches!(e, FrontMatterError::WrongSchema { .. })
        }),
        (
            "  - \"deleted old",
            "  - \"removed old",
            |e| matches!(e, FrontMatterError::BadValue { key, .. } if key == "uncommitted"),
        ),
        ("pushed: false\n", "pushed: false\n\n", |e| {
            matches!(e, FrontMatterError::BadLine { .. })
        }),
    ];
    for (from, to, expect) in cases {
        let text = format!("{}{body}", good.replacen(from, to, 1));
        let note = parse(&text);
        let err = note
            .front_matter_error
            .clone()
            .unwrap_or_else(|| panic!("{to:?}"));
        assert!(expect(&err), "{to:?}: {err:?}");
        assert!(check(&note).unwrap_err().front_matter.is_some());
    }
    let unclosed = parse(&format!("---\nschema: \"handoff.note.v1\"\n{body}"));
    assert_eq!(
        unclosed.front_matter_error,
        Some(FrontMatterError::Unclosed)
    );
}

#[test]
fn credentials_are_stripped_from_remote_urls() {
    for (url, want) in [
        (
            "https://user:s3cret@github.com/o/r.git",
            "https://github.com/o/r.git",
        ),
        ("https://ghp_token@github.com/o/r", "https://github.com/o/r"),
        (
            "https://github.com/o/r.git?access_token=x#frag",
            "https://github.com/o/r.git",
        ),
        ("ssh://git@host:2222/o/r.git", "ssh://host:2222/o/r.git"),
        ("git@github.com:o/r.git", "github.com:o/r.git"),
        ("me:pw@host:o/r.git", "host:o/r.git"),
        ("https://github.com/o/r.git", "https://github.com/o/r.git"),
        ("/srv/git/a@b/r.git", "/srv/git/a@b/r.git"),
        ("../r@x.git", "../r@x.git"),
        ("file:///srv/r.git", "file:///srv/r.git"),
    ] {
        assert_eq!(strip_url_credentials(url), want, "{url}");
    }
}

#[test]
fn oversized_and_non_utf8_notes_are_refused() {
    assert!(matches!(
        decode_note(&vec![b'a'; MAX_NOTE_BYTES + 1]),
        Err(NoteReadError::TooLarge)
    ));
    assert!(decode_note(&vec![b'a'; MAX_NOTE_BYTES]).is_ok());
    assert!(matches!(
        decode_note(b"ok\xff"),
        Err(NoteReadError::NotUtf8 { offset: 2 })
    ));
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        read_note(dir.path()),
        Err(NoteReadError::NotAFile)
    ));
    assert!(matches!(
        read_note(&dir.path().join("absent")),
        Err(NoteReadError::Io { .. })
    ));
}

#[test]
fn check_report_serializes_section_titles() {
    let errors = check(&parse("## Goal\n")).unwrap_err();
    let report = NoteCheck::new("n.md", Ok(Err(errors)));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["missing"][0], "Current state");
    assert_eq!(json["empty"][0], "Goal");
    assert_eq!(json["schemaVersion"], NOTE_CHECK_SCHEMA);
    let back: NoteCheck = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}

/// A body line that cannot be read as a heading, a fence or a comment.
fn body_line() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9 .,:;!?()#*_-]{0,40}"
}

fn body() -> impl Strategy<Value = String> {
    prop::collection::vec(body_line(), 1..5).prop_map(|lines| format!("B {}", lines.join("\n")))
}

proptest! {
    #[test]
    fn parse_and_check_never_panic(text in "(?s).{0,2000}") {
        let note = parse(&text);
        let _ = check(&note);
        let rendered = render(&note, &git(), &origin());
        let back = parse(&rendered);
        // A rendered note always has its front matter and all nine sections.
        prop_assert!(back.front_matter_error.is_none(), "{rendered}");
        let errors = check(&back).err().unwrap_or_default();
        prop_assert!(errors.missing.is_empty(), "{rendered}");
    }

    #[test]
    fn markdown_ish_text_never_panics(
        lines in prop::collection::vec(
            prop_oneof![
                Just("## Goal".to_owned()),
                Just("## Receiver instructions".to_owned()),
                Just("```".to_owned()),
                Just("~~~~".to_owned()),
                Just("````md".to_owned()),
                Just("- ```".to_owned()),
                Just("> <!--".to_owned()),
                Just("<pre>".to_owned()),
                Just("<?php".to_owned()),
                Just("<!--".to_owned()),
                Just("-->".to_owned()),
                Just("---".to_owned()),
                Just("pushed: true".to_owned()),
                Just("  - \"untracked x\"".to_owned()),
                "(?s).{0,20}",
            ],
            0..30,
        )
    ) {
        let text = lines.join("\n");
        let note = parse(&text);
        let _ = check(&note);
        let rendered = render(&note, &git(), &origin());
        let back = parse(&rendered);
        prop_assert!(back.front_matter_error.is_none(), "{rendered}");
        prop_assert!(check(&back).err().unwrap_or_default().missing.is_empty(), "{rendered}");
    }

    #[test]
    fn render_then_parse_round_trips_the_sections(
        bodies in prop::collection::vec(body(), 8),
        preamble in prop::option::of(body()),
    ) {
        let mut text = preamble.clone().map(|p| format!("# {p}\n")).unwrap_or_default();
        for (section, body) in Section::ALL.iter().zip(&bodies) {
            text.push_str(&format!("## {}\n\n{body}\n\n", section.title()));
        }
        text.push_str("## Git state\n\nwhatever\n");
        let note = parse(&text);
        prop_assert_eq!(check(&note), Ok(()));
        let rendered = render(&note, &git(), &origin());
        let back = parse(&rendered);
        prop_assert_eq!(check(&back), Ok(()));
        for (section, body) in Section::ALL.iter().zip(&bodies) {
            prop_assert_eq!(back.body(*section).unwrap(), body.clone());
        }
        prop_assert_eq!(&back.front_matter.as_ref().unwrap().git, &git());
        prop_assert_eq!(back.body(Section::GitState).unwrap(), git_state_body(&git()).trim_end().to_owned());
        prop_assert_eq!(render(&back, &git(), &origin()), rendered);
    }
}
