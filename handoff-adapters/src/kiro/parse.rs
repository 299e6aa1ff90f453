//! Reading Kiro's chat transcript: the model's final message after the last `> ` marker, which
//! may open with a sentence of narrative before the JSON answer.

use handoff_core::{Observation, OutputError, RawOutput};

use crate::common::{failure_from_text, reported_error, strip_ansi};

/// The final answer block: everything after the `> ` that starts the last line beginning with
/// `> ` (at the start of the text or right after a `\n`). `None` without such a line.
///
/// A line of a JSON object can't start with `> ` (a JSON string holds no raw newline), so the
/// JSON answer is never cut by this rule; a quoted `> ` line inside the model's narrative only
/// moves the block start further down, still before the JSON.
pub fn answer_block(text: &[u8]) -> Option<&[u8]> {
    let mut found = None;
    if text.starts_with(b"> ") {
        found = Some(2);
    }
    for (i, w) in text.windows(3).enumerate() {
        if w == b"\n> " {
            found = Some(i + 3);
        }
    }
    found.map(|start| &text[start..])
}

/// Where the JSON object ending at `end` (exclusive, `text[end - 1] == b'}'`) begins: a
/// backward scan that counts braces outside strings. A `"` toggles "inside a string" unless an
/// odd number of backslashes precedes it; for any valid JSON text this tracks strings exactly,
/// and it is linear in the length of the text.
fn object_start(text: &[u8], end: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = end;
    while i > 0 {
        i -= 1;
        match text[i] {
            b'"' => {
                let backslashes = text[..i].iter().rev().take_while(|b| **b == b'\\').count();
                if backslashes % 2 == 0 {
                    in_string = !in_string;
                }
            }
            _ if in_string => {}
            b'}' => depth += 1,
            b'{' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Reads Kiro's answer out of its (ANSI-stripped) transcript. The rule, exactly:
///
/// 1. The answer block is the text after the last line-start `> ` marker ([`answer_block`]).
/// 2. Trailing whitespace is ignored; the block must then end with `}`: anything after the
///    object (a closing code fence, a second paragraph, a tool note) is refused.
/// 3. The object is the balanced `{…}` ending at that `}` ([`object_start`]); its bytes are
///    the payload, checked against the provider-output contract by the engine (so schema drift,
///    invalid UTF-8 and malformed JSON get their own precise errors).
/// 4. Whatever precedes the object in the block is narrative and is ignored, but it must not
///    contain another answer: a `"schemaVersion"` key before the object means two candidate
///    answers, and that is refused rather than guessed.
///
/// The reference instead scanned the whole text forward for `{"schemaVersion":…` openings and
/// brace-matched each one (quadratic in the worst case, and ambiguous about which of several
/// candidates wins); this rule looks only at the final block and its end.
pub fn extract_answer(text: &[u8]) -> Result<&[u8], OutputError> {
    let block = answer_block(text).ok_or_else(|| OutputError::Envelope {
        reason: "Kiro printed no `> ` answer marker".into(),
    })?;
    let end = block
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    if end == 0 {
        return Err(OutputError::Missing);
    }
    if block[end - 1] != b'}' {
        return Err(OutputError::NotOneObject);
    }
    let start = object_start(block, end).ok_or(OutputError::NotOneObject)?;
    let preamble = &block[..start];
    if preamble
        .windows(b"\"schemaVersion\"".len())
        .any(|w| w == b"\"schemaVersion\"")
    {
        return Err(OutputError::Envelope {
            reason: "Kiro's answer block holds more than one answer object".into(),
        });
    }
    Ok(&block[start..end])
}

/// Reads Kiro's transcript.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let text = strip_ansi(&raw.stdout);
    match extract_answer(&text) {
        Ok(payload) => Ok(Observation::Answer {
            payload: payload.to_vec(),
            // Kiro reports no usage: the model's self-report is recorded by the engine.
            usage: None,
        }),
        Err(e) => {
            // No answer object, but Kiro said why: the agent's own failure.
            match reported_error(&raw.stderr).or_else(|| reported_error(&raw.stdout)) {
                Some(message) => Ok(failure_from_text(message, None)),
                None => Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_ends_the_block() {
        let text = b"tool note\n> Done.\n\n{\"schemaVersion\":\"x\",\"r\":\"a } \\\" {\"}\n";
        assert_eq!(
            extract_answer(text).ok(),
            Some(&b"{\"schemaVersion\":\"x\",\"r\":\"a } \\\" {\"}"[..])
        );
        assert!(matches!(
            extract_answer(b"> {\"a\":1}\n```\n"),
            Err(OutputError::NotOneObject)
        ));
        assert!(matches!(
            extract_answer(b"{\"a\":1}"),
            Err(OutputError::Envelope { .. })
        ));
        assert!(matches!(
            extract_answer(b"> \"a\"}"),
            Err(OutputError::NotOneObject)
        ));
    }
}
