//! Views of a text with some characters left out, for secrets that travel broken up: base64
//! wrapped onto lines of 76 columns, shell-quoted pieces (`'ab'\''cd'`, `printf %q`'s
//! backslashes, `"ab"'cd'`), terminal escape sequences inside a value. A match in the view is
//! mapped back to the span of the text it came from, which is masked whole (what was left out
//! inside it included).

use super::Edit;

/// What a view leaves out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Leave {
    /// Terminal escape sequences only (for the structural patterns, which read quotes and line
    /// breaks themselves).
    Escapes,
    /// Terminal escape sequences, line breaks (real and JSON-escaped), quotes and backslashes
    /// (for the known secrets).
    Breaks,
    /// As [`Leave::Breaks`], but the character after a backslash stands for itself (`\n` is an
    /// `n`): how a secret holding a backslash reads once quoting doubled it.
    Quoting,
}

/// A text with some characters left out, and for each byte kept, where it was in the text.
#[derive(Debug)]
pub(super) struct View {
    pub text: String,
    from: Vec<usize>,
}

impl View {
    /// The view of `text`, or `None` when it would leave nothing out.
    pub fn of(text: &str, leave: Leave) -> Option<View> {
        let left_out: &[char] = match leave {
            Leave::Escapes => &['\u{1b}', '\u{9b}'],
            Leave::Breaks | Leave::Quoting => &['\u{1b}', '\u{9b}', '\n', '\r', '\'', '"', '\\'],
        };
        if !text.contains(left_out) {
            return None;
        }
        let mut view = View {
            text: String::with_capacity(text.len()),
            from: Vec::with_capacity(text.len()),
        };
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '\u{1b}' | '\u{9b}' => {
                    skip_escape(c, &mut chars);
                    continue;
                }
                '\n' | '\r' | '\'' | '"' if leave != Leave::Escapes => continue,
                '\\' if leave == Leave::Quoting => continue,
                '\\' if leave == Leave::Breaks => {
                    // `\n` and `\r` as a JSON string or `echo -e` writes a line break; `\\` an
                    // escaped backslash, after which the next character stands for itself.
                    if let Some((_, 'n' | 'r' | '\\')) = chars.peek() {
                        chars.next();
                    }
                    continue;
                }
                _ => {}
            }
            view.text.push(c);
            view.from.extend(at..at + c.len_utf8());
        }
        Some(view)
    }

    /// `edits` (in the view's offsets) as edits of the text.
    pub fn edits_in_text(&self, edits: Vec<Edit>, text: &str) -> Vec<Edit> {
        edits
            .into_iter()
            .filter(|e| e.start < e.end && e.end <= self.from.len())
            .map(|e| {
                let start = self.from[e.start];
                let last = self.from[e.end - 1];
                let end = last + char_len(text, last);
                Edit::new(start, end, e.with)
            })
            .collect()
    }
}

fn char_len(text: &str, at: usize) -> usize {
    text[at..].chars().next().map_or(1, char::len_utf8)
}

/// Skips the rest of an escape sequence that began with `first`: a CSI (`ESC [` or the one-byte
/// CSI) up to its final byte, an OSC, DCS, PM, APC or SOS string up to BEL or `ESC \`, or one
/// more character.
fn skip_escape(first: char, chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) {
    let kind = if first == '\u{9b}' {
        '['
    } else {
        match chars.next() {
            Some((_, c)) => c,
            None => return,
        }
    };
    match kind {
        '[' => {
            // Parameters and intermediates (0x20..=0x3f), then one final byte (0x40..=0x7e).
            for (_, c) in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) || !('\u{20}'..='\u{7e}').contains(&c) {
                    return;
                }
            }
        }
        ']' | 'P' | '^' | '_' | 'X' => {
            while let Some((_, c)) = chars.next() {
                if c == '\u{7}' || c == '\u{9c}' {
                    return;
                }
                if c == '\u{1b}' {
                    if let Some((_, '\\')) = chars.peek() {
                        chars.next();
                    }
                    return;
                }
            }
        }
        _ => {}
    }
}
