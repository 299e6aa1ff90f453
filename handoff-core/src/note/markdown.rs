//! Markdown scanning: which lines are level-2 headings, outside fenced code and HTML comments,
//! and the text a reader sees.

/// Where a line scan is: inside a fenced code block (its fence character and length), inside an
/// HTML comment, or neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Scanner {
    fence: Option<(char, usize)>,
    comment: bool,
}

impl Scanner {
    /// Classifies `line` and moves past it: returns the text of a level-2 heading when the line
    /// is one (outside code and comments).
    pub(super) fn line<'a>(&mut self, line: &'a str) -> Option<&'a str> {
        if let Some((ch, len)) = self.fence {
            if closes_fence(line, ch, len) {
                self.fence = None;
            }
            return None;
        }
        if self.comment {
            self.comment = ends_in_comment(line, true);
            return None;
        }
        if let Some(text) = heading2(line) {
            self.comment = ends_in_comment(line, false);
            return Some(text);
        }
        if let Some(fence) = opens_fence(line) {
            self.fence = Some(fence);
            return None;
        }
        self.comment = ends_in_comment(line, false);
        None
    }

    /// What closes whatever the scan is still inside of.
    pub(super) fn closer(&self) -> Option<String> {
        match (self.fence, self.comment) {
            (Some((ch, len)), _) => Some(ch.to_string().repeat(len)),
            (None, true) => Some("-->".to_owned()),
            (None, false) => None,
        }
    }
}

/// Up to three leading spaces removed, as Markdown allows before a heading or fence.
fn unindent(line: &str) -> Option<&str> {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    (spaces <= 3).then(|| &line[spaces..])
}

/// The raw text of a level-2 ATX heading (`## Text ##`), closing `#`s removed.
fn heading2(line: &str) -> Option<&str> {
    let rest = unindent(line)?.strip_prefix("##")?;
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    let without_closing = text.trim_end_matches('#');
    let text = if without_closing.len() < text.len()
        && (without_closing.is_empty() || without_closing.ends_with([' ', '\t']))
    {
        without_closing.trim_end()
    } else {
        text
    };
    Some(text)
}

/// A heading's name for matching: comments cut, whitespace collapsed, a trailing `:` removed.
pub(super) fn heading_name(text: &str) -> String {
    let text = text.split("<!--").next().unwrap_or_default();
    let name = text.split_whitespace().collect::<Vec<_>>().join(" ");
    name.trim_end_matches(':').trim_end().to_owned()
}

/// A fence opening (three or more backticks or tildes): its character and length.
pub(super) fn opens_fence(line: &str) -> Option<(char, usize)> {
    let rest = unindent(line)?;
    let ch = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let len = rest.len() - rest.trim_start_matches(ch).len();
    if len < 3 {
        return None;
    }
    // A backtick fence's info string cannot hold a backtick (it would be inline code).
    if ch == '`' && rest[len..].contains('`') {
        return None;
    }
    Some((ch, len))
}

fn closes_fence(line: &str, ch: char, len: usize) -> bool {
    let Some(rest) = unindent(line) else {
        return false;
    };
    let run = rest.len() - rest.trim_start_matches(ch).len();
    run >= len && rest[run..].trim().is_empty()
}

/// Whether an HTML comment is still open at the end of `line`, given whether one was open at
/// its start.
fn ends_in_comment(line: &str, mut open: bool) -> bool {
    let mut rest = line;
    loop {
        let marker = if open { "-->" } else { "<!--" };
        match rest.find(marker) {
            Some(at) => {
                rest = &rest[at + marker.len()..];
                open = !open;
            }
            None => return open,
        }
    }
}

/// The text of `body` a reader sees: HTML comments removed (outside fenced code).
pub(super) fn visible_text(body: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<(char, usize)> = None;
    let mut comment = false;
    for line in body.lines() {
        if let Some((ch, len)) = fence {
            if closes_fence(line, ch, len) {
                fence = None;
            }
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if !comment && let Some(f) = opens_fence(line) {
            fence = Some(f);
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut rest = line;
        loop {
            if comment {
                match rest.find("-->") {
                    Some(at) => {
                        rest = &rest[at + 3..];
                        comment = false;
                    }
                    None => break,
                }
            } else {
                match rest.find("<!--") {
                    Some(at) => {
                        out.push_str(&rest[..at]);
                        rest = &rest[at + 4..];
                        comment = true;
                    }
                    None => {
                        out.push_str(rest);
                        break;
                    }
                }
            }
        }
        out.push('\n');
    }
    out
}
