//! Text an agent may have written, made safe to show on a terminal.
//!
//! An agent controls its stderr, its answer, the names of the files it creates and the
//! commands it runs; handoff shows parts of each on the user's terminal (the status line, the
//! summary, the agent's stderr when a run fails). A control character there is an instruction to
//! the terminal — an escape sequence may set the clipboard (OSC 52), rewrite the title, hide or
//! erase what was printed; a carriage return overwrites the line it is on — and a bidirectional
//! override reorders what the user reads. [`printable`] shows each of them as an escape instead.

use std::borrow::Cow;

/// Whether `c` is shown escaped: a control character (C0, DEL, C1) or a bidirectional
/// embedding, override or isolate.
fn unsafe_char(c: char, lines: bool) -> bool {
    match c {
        '\n' | '\t' => !lines,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' => true,
        c => c.is_control(),
    }
}

/// `text` with every control character and bidirectional control shown as an escape (`\x1b`,
/// `\u{202e}`); with `lines`, newlines and tabs are kept (a block such as an agent's stderr),
/// otherwise they are escaped too (one line: a path, a title, a status-line detail).
pub fn printable(text: &str, lines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| unsafe_char(c, lines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !unsafe_char(c, lines) {
            out.push(c);
        } else if u32::from(c) < 0x100 {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::printable;
    use proptest::prelude::*;

    #[test]
    fn escapes_what_a_terminal_would_obey() {
        assert_eq!(
            printable("a\u{1b}]52;c;ZXZpbA==\u{7}b", true),
            "a\\x1b]52;c;ZXZpbA==\\x07b"
        );
        assert_eq!(printable("x\ry", true), "x\\x0dy");
        assert_eq!(printable("\u{9b}2J", false), "\\x9b2J");
        assert_eq!(
            printable("abc\u{202e}txt.exe", false),
            "abc\\u{202e}txt.exe"
        );
        assert_eq!(printable("one\ntwo\tthree", true), "one\ntwo\tthree");
        assert_eq!(printable("one\ntwo", false), "one\\x0atwo");
        assert!(matches!(
            printable("plain · ünïcode → ok", false),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    /// A bidirectional embedding, override or isolate.
    fn bidi(c: char) -> bool {
        matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }

    proptest! {
        #[test]
        fn nothing_a_terminal_obeys_survives(text in any::<String>(), lines in any::<bool>()) {
            let shown = printable(&text, lines);
            let kept = |c: char| lines && (c == '\n' || c == '\t');
            let obeyed = shown.chars().filter(|&c| (c.is_control() && !kept(c)) || bidi(c)).count();
            prop_assert_eq!(obeyed, 0);
        }
    }
}
