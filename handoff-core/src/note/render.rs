//! Writing a note: the template an author fills in, and a rendered note with its front matter,
//! "Git state" and receiver instructions written by handoff.

use super::markdown::Markdown;
use super::parse::trim_blank_lines;
use super::{
    FrontMatter, GitRemote, GitState, MAX_LISTED_UNCOMMITTED, Note, NoteOrigin,
    RECEIVER_INSTRUCTIONS, Section, status_words,
};

/// The template's comment for the author, left out of a rendered note.
const TEMPLATE_INTRO: &str = "\
<!-- Write for a reader with none of your context. Fill in every section; write \"None\"
     where one does not apply. Leave out front matter and receiver instructions:
     `handoff note render` adds them, and fills in Git state, from the repository. -->";

/// The note template: a title, a comment for the author, and the nine headings, each with one
/// line of guidance in an HTML comment.
pub fn template() -> String {
    let mut out = format!("# Handoff note\n\n{TEMPLATE_INTRO}\n");
    for section in Section::ALL {
        out.push_str(&format!(
            "\n## {}\n\n<!-- {} -->\n",
            section.title(),
            section.guidance()
        ));
    }
    out
}

/// `text` as Markdown inline code, or as a JSON string when it holds a backtick or a control
/// character (a path could otherwise break out of its line).
fn inline(text: &str) -> String {
    if text.chars().any(|c| c == '`' || c.is_control()) {
        serde_json::Value::from(text).to_string()
    } else {
        format!("`{text}`")
    }
}

/// `text` followed by whatever closes a fence or comment it leaves open, so that what comes
/// after it is read as written.
fn closed(text: &str) -> String {
    match Markdown::read(text).closer() {
        Some(closer) => format!("{text}\n{closer}"),
        None => text.to_owned(),
    }
}

/// The body of an author's section for rendering: the template's guidance comment removed.
fn author_body(section: Section, body: &str) -> String {
    let guidance = format!("<!-- {} -->", section.guidance());
    let lines: Vec<&str> = body.lines().filter(|l| l.trim() != guidance).collect();
    closed(&trim_blank_lines(&lines))
}

/// The "Git state" section's body, written from `git`.
pub(super) fn git_state_body(git: &GitState) -> String {
    let mut out = String::from(
        "<!-- Written by handoff from the repository; anything the author wrote here was replaced. -->\n",
    );
    out.push_str(&format!(
        "- Repository: {}\n",
        inline(git.repository.as_str())
    ));
    out.push_str(&format!(
        "- Branch: {}\n",
        git.branch
            .as_deref()
            .map_or("none (HEAD is detached)".to_owned(), inline)
    ));
    out.push_str(&format!(
        "- HEAD: {}\n",
        git.head
            .as_deref()
            .map_or("none (the branch has no commit yet)".to_owned(), inline)
    ));
    out.push_str(&format!(
        "- Remote: {}\n",
        match &git.remote {
            None => "none".to_owned(),
            Some(GitRemote { name, url: None }) => inline(name),
            Some(GitRemote {
                name,
                url: Some(url),
            }) => format!("{} at {}", inline(name), inline(url)),
        }
    ));
    out.push_str(&format!(
        "- Pushed: {}\n",
        match (git.pushed, &git.upstream) {
            (Some(true), Some(up)) => format!("yes, HEAD is contained in {}", inline(up)),
            (Some(false), Some(up)) => format!(
                "no, HEAD is not contained in {}: its newest commits exist only in the sender's clone",
                inline(up)
            ),
            (_, Some(up)) => format!("unknown (compared with {})", inline(up)),
            (_, None) => "unknown (no remote-tracking branch)".to_owned(),
        }
    ));
    if git.uncommitted.is_empty() {
        out.push_str("- Uncommitted files: none\n");
    } else {
        out.push_str(&format!(
            "- Uncommitted files ({}), not part of HEAD:\n",
            git.uncommitted.len()
        ));
        for change in git.uncommitted.iter().take(MAX_LISTED_UNCOMMITTED) {
            out.push_str(&format!(
                "  - {} {}\n",
                status_words(change),
                inline(&change.path)
            ));
        }
        let omitted = git.uncommitted.len().saturating_sub(MAX_LISTED_UNCOMMITTED);
        if omitted > 0 {
            out.push_str(&format!("  - and {omitted} more\n"));
        }
    }
    out
}

/// The "Receiver instructions" section's body, written from `git`.
fn receiver_body(git: &GitState) -> String {
    let mut steps: Vec<String> = vec![
        "Read the repository's own instructions for agents (`AGENTS.md`, `CLAUDE.md` or similar), if it has any.".to_owned(),
    ];
    steps.push(match (&git.head, &git.branch) {
        (Some(head), Some(branch)) => format!(
            "Check that you are on the recorded commit: `git rev-parse HEAD` must print {} and the branch must be {}. If either differs, stop: change nothing, and report what you found.",
            inline(head),
            inline(branch)
        ),
        (Some(head), None) => format!(
            "Check that you are on the recorded commit: `git rev-parse HEAD` must print {}. If it does not, stop: change nothing, and report what you found.",
            inline(head)
        ),
        (None, _) => "The branch had no commit when this note was written: if `git rev-parse HEAD` prints a commit, stop, change nothing, and report it.".to_owned(),
    });
    steps.push(
        "Run every command under \"How to verify\" and compare what it prints with what the note expects; report any difference before building on it.".to_owned(),
    );
    steps.push(
        "Start from the first item under \"Next steps\", within \"Decisions and constraints\"."
            .to_owned(),
    );
    steps.push(match (&git.remote, &git.branch) {
        (Some(remote), Some(branch)) => format!(
            "Never force-push or rewrite published history. When your work is to be published, push it with `git push {} HEAD:{}`.",
            remote.name, branch
        ),
        _ => "Never force-push or rewrite published history.".to_owned(),
    });
    steps.push(
        "Report back when you stop: whether HEAD matched, what \"How to verify\" showed, what you changed (with commit ids), and what is left.".to_owned(),
    );
    let mut out =
        String::from("<!-- Written by handoff for the agent that continues this work. -->\n");
    out.push_str(
        "You are continuing work someone else started; this note is what they left you.\n\n",
    );
    for (i, step) in steps.iter().enumerate() {
        out.push_str(&format!("{}. {step}\n", i + 1));
    }
    if !git.uncommitted.is_empty() {
        out.push_str(
            "\nThe sender had uncommitted changes (listed under \"Git state\"): they are not part of the recorded commit, and you may not have them.\n",
        );
    }
    out
}

/// Writes `note` for its receiver: the front matter and the "Git state" section from `git` and
/// `origin` (whatever the note said about them is dropped), the author's sections in order (a
/// repeated one joined into one, the template's guidance comments removed), and the receiver
/// instructions.
///
/// Meant for a note that passed [`check`]: a missing section is written empty.
pub fn render(note: &Note, git: &GitState, origin: &NoteOrigin) -> String {
    let mut out = FrontMatter::new(git, origin).render();
    out.push('\n');
    let preamble = note.preamble.replace(TEMPLATE_INTRO, "");
    let preamble = trim_blank_lines(&preamble.lines().collect::<Vec<_>>());
    if preamble.is_empty() {
        out.push_str("# Handoff note\n");
    } else {
        out.push_str(&closed(&preamble));
        out.push('\n');
    }
    for section in Section::ALL {
        out.push_str(&format!("\n## {}\n\n", section.title()));
        let body = if section == Section::GitState {
            git_state_body(git)
        } else {
            let body = author_body(section, &note.body(section).unwrap_or_default());
            if body.is_empty() { body } else { body + "\n" }
        };
        out.push_str(&body);
    }
    out.push_str(&format!("\n## {RECEIVER_INSTRUCTIONS}\n\n"));
    out.push_str(&receiver_body(git));
    out
}
