//! Scope: the paths a handoff note names.

use super::*;

// Scope: the paths a handoff note names.
// ---------------------------------------------------------------------------------------------

pub(super) fn scope(handoff: Option<&HandoffRow>, root: &Utf8Path, index: usize) -> Scope {
    let unknown = |note: Option<Utf8PathBuf>, reason: String| Scope {
        note,
        paths: Vec::new(),
        unknown: Some(reason),
    };
    let Some(handoff) = handoff else {
        let reason = if index == 0 {
            "the first owner received no handoff note"
        } else {
            "no handoff note"
        };
        return unknown(None, reason.to_owned());
    };
    let Some(path) = handoff.context.note_path.clone() else {
        return unknown(None, format!("handoff {} recorded no note", handoff.id));
    };
    let text = match read_note(path.as_std_path()) {
        Ok(text) => text,
        Err(e) => return unknown(Some(path), format!("the note is unreadable: {e}")),
    };
    let paths = note_paths(&text, root);
    if paths.is_empty() {
        return unknown(Some(path), "the note names no paths".to_owned());
    }
    Scope {
        note: Some(path),
        paths,
        unknown: None,
    }
}

/// The repository paths a note names, in backticks, in code blocks or as bare path-like words,
/// outside its "Git state" section (which lists the repository, not the work) and its HTML
/// comments.
pub(super) fn note_paths(text: &str, root: &Utf8Path) -> Vec<String> {
    let note = parse_note(text);
    let mut texts = vec![note.preamble.as_str()];
    texts.extend(
        note.sections
            .iter()
            .filter(|s| s.section != Section::GitState)
            .map(|s| s.body.as_str()),
    );
    let mut paths = BTreeSet::new();
    for text in texts {
        let markdown = Markdown::read(text);
        for piece in markdown.pieces() {
            let words = match &piece.kind {
                MarkdownKind::Text => markdown.text(piece),
                MarkdownKind::Code(code) => code.as_str(),
                MarkdownKind::CodeBlock { text, .. } => text.as_str(),
                MarkdownKind::Html
                | MarkdownKind::Heading { .. }
                | MarkdownKind::ListItem { .. } => {
                    continue;
                }
            };
            for word in words.split(|c: char| c.is_whitespace() || "`()[]<>\"',;|{}".contains(c)) {
                if let Some(path) = path_like(word, root) {
                    paths.insert(path);
                }
            }
        }
    }
    paths.into_iter().collect()
}

/// A word as a repository-relative path, when it looks like one.
pub(super) fn path_like(word: &str, root: &Utf8Path) -> Option<String> {
    const NAMES: [&str; 9] = [
        "Makefile",
        "Dockerfile",
        "Justfile",
        "justfile",
        "Rakefile",
        "Gemfile",
        "Procfile",
        "LICENSE",
        "Jenkinsfile",
    ];
    let word = word
        .trim_start_matches('*')
        .trim_end_matches(|c: char| ".:!?*".contains(c));
    // `src/lib.rs:42` names the file.
    let word = match word.split_once(':') {
        Some((path, line)) if line.split(':').all(|n| n.parse::<u32>().is_ok()) => path,
        _ => word,
    };
    if word.is_empty()
        || word.contains("://")
        || word.starts_with('-')
        || !word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "./_-+*?".contains(c))
    {
        return None;
    }
    let word = if let Some(abs) = word.strip_prefix('/') {
        let rel = Utf8Path::new("/").join(abs);
        rel.strip_prefix(root).ok()?.as_str().to_owned()
    } else {
        word.trim_start_matches("./").to_owned()
    };
    let looks = if word.contains('/') {
        true
    } else {
        match word.rsplit_once('.') {
            Some((stem, ext)) => {
                !ext.is_empty()
                    && ext.len() <= 10
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
                    && !matches!(word.as_str(), "e.g" | "i.e" | "etc")
                    && (!stem.is_empty() || word.starts_with('.'))
            }
            None => NAMES.contains(&word.as_str()),
        }
    };
    if !looks {
        return None;
    }
    // A glob names the directories before its first wildcard.
    let mut parts = Vec::new();
    for part in word.split('/') {
        if part.contains(['*', '?']) {
            break;
        }
        if part == ".." {
            return None;
        }
        if !part.is_empty() && part != "." {
            parts.push(part);
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Whether `path` is one of `scope`, under one of its directories, or (for a scope entry
/// without a `/`) has a component of that name.
pub(super) fn in_scope(path: &str, scope: &[String]) -> bool {
    scope.iter().any(|s| {
        path == s
            || path
                .strip_prefix(s.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
            || (!s.contains('/') && path.split('/').any(|part| part == s))
    })
}

// ---------------------------------------------------------------------------------------------
