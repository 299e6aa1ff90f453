//! The one Markdown reader of handoff notes, on pulldown-cmark's CommonMark events (no
//! extensions: a note reads the way any CommonMark renderer shows it).
//!
//! Everything that asks where a note's code blocks, comments, sections or list items are asks
//! this reader, so two readers cannot disagree on where a code block ends: [`parse`] and
//! [`check`] cut sections at its headings, and attribution takes a note's paths and
//! verification commands from its pieces.
//!
//! [`parse`]: super::parse
//! [`check`]: super::check

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// A Markdown text as the reader sees it: its pieces in document order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Markdown<'a> {
    source: &'a str,
    pieces: Vec<MarkdownPiece>,
}

/// One piece of a Markdown text and where its source is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownPiece {
    /// What it is.
    pub kind: MarkdownKind,
    /// Its source, in bytes of the text read.
    pub range: Range<usize>,
}

/// What a [`MarkdownPiece`] is.
///
/// Code blocks, code spans and HTML own their source; the text between them is [`Text`]
/// pieces, so those cover everything else once. A heading or list item is a mark at the place
/// it starts: its source is read through the pieces that follow it.
///
/// [`Text`]: MarkdownKind::Text
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkdownKind {
    /// An ATX heading (`## Title`; setext headings are text).
    Heading {
        /// 1 for `#`, 2 for `##`, …
        level: u8,
        /// Its text as a reader sees it: code spans included, HTML (comments) left out.
        text: String,
        /// Not inside a list item or block quote.
        top_level: bool,
    },
    /// A fenced or indented code block.
    CodeBlock {
        /// A fenced block's info string (`sh`, `rust ignore`), empty when it has none; `None`
        /// for an indented block.
        info: Option<String>,
        /// Its content, without the fences; an unterminated fence runs to the end of the
        /// text (or of the list item or quote it is in).
        text: String,
    },
    /// A bullet or numbered list item, at any depth.
    ListItem {
        /// The code span the item's first paragraph starts with, when that paragraph has no
        /// other one and the span is not blank (`` - `cargo test` passes `` → `cargo test`).
        code: Option<String>,
    },
    /// An inline code span: its content.
    Code(String),
    /// Raw HTML, a block or inline; HTML comments are HTML.
    Html,
    /// Markdown source between the other pieces (emphasis, links, list markers and all, as
    /// written: `__init__.py` stays one word).
    Text,
}

/// A top-level `##` heading and the body that follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownSection {
    /// The heading's text, as [`MarkdownKind::Heading`] has it.
    pub heading: String,
    /// The heading's source.
    pub heading_range: Range<usize>,
    /// From the line after the heading to the next top-level `##` heading, or the end.
    pub body: Range<usize>,
}

/// What a list item's first paragraph has shown so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lead {
    /// Nothing yet.
    Fresh,
    /// It started with a code span (the item's piece holds it), and nothing has spoiled it.
    Code,
    /// The paragraph is over, or it started with something else.
    Done,
}

/// An open list item: the index of its piece, and how its first paragraph goes.
struct OpenItem {
    piece: usize,
    lead: Lead,
    in_paragraph: bool,
}

impl<'a> Markdown<'a> {
    /// Reads `source`.
    pub fn read(source: &'a str) -> Markdown<'a> {
        Reader::new(source).read()
    }

    /// The pieces, in document order.
    pub fn pieces(&self) -> &[MarkdownPiece] {
        &self.pieces
    }

    /// The source of `piece`.
    pub fn text(&self, piece: &MarkdownPiece) -> &'a str {
        self.source.get(piece.range.clone()).unwrap_or_default()
    }

    /// The top-level `##` headings with their bodies: headings inside code blocks, HTML, list
    /// items and block quotes are not headings of the text.
    pub fn sections(&self) -> Vec<MarkdownSection> {
        let mut sections: Vec<MarkdownSection> = Vec::new();
        for piece in &self.pieces {
            let MarkdownKind::Heading {
                level: 2,
                text,
                top_level: true,
            } = &piece.kind
            else {
                continue;
            };
            if let Some(last) = sections.last_mut() {
                last.body.end = piece.range.start.max(last.body.start);
            }
            let start = line_end(self.source, piece.range.end);
            sections.push(MarkdownSection {
                heading: text.clone(),
                heading_range: piece.range.clone(),
                body: start..self.source.len(),
            });
        }
        sections
    }

    /// What to write on a line after the text so that a heading written after that, past a
    /// blank line, is read as one: the closing fence of a code block the text leaves open, or
    /// the end of an HTML block (`-->` for a comment). `None` when nothing is left open.
    pub fn closer(&self) -> Option<String> {
        let source = self.source;
        // Whatever would swallow a heading written after the text is open at its end.
        let probe = format!("{source}\n\n## end\n");
        let probed = Markdown::read(&probe);
        let swallowed = !probed.pieces.iter().any(|p| {
            p.range.start > source.len()
                && matches!(
                    p.kind,
                    MarkdownKind::Heading {
                        level: 2,
                        top_level: true,
                        ..
                    }
                )
        });
        if !swallowed {
            return None;
        }
        let open = probed.pieces.iter().rev().find(|p| {
            p.range.start < source.len()
                && p.range.end > source.len()
                && matches!(p.kind, MarkdownKind::CodeBlock { .. } | MarkdownKind::Html)
        })?;
        let start = probed.text(open).trim_start_matches([' ', '\t']);
        match open.kind {
            MarkdownKind::CodeBlock { info: Some(_), .. } => {
                let fence = start.chars().next().filter(|c| matches!(c, '`' | '~'))?;
                let len = start.len() - start.trim_start_matches(fence).len();
                Some(fence.to_string().repeat(len))
            }
            MarkdownKind::Html => html_block_closer(start),
            _ => None,
        }
    }
}

/// The end of the line that holds byte `end - 1` (after its `\n`), or the end of `source`.
fn line_end(source: &str, end: usize) -> usize {
    let from = end.saturating_sub(1).min(source.len());
    source.as_bytes()[from..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(source.len(), |at| from + at + 1)
}

/// What ends an HTML block that starts with `start` and ends at a given marker (CommonMark's
/// HTML blocks 1–5; the others end at a blank line).
fn html_block_closer(start: &str) -> Option<String> {
    let lower = start
        .chars()
        .take(12)
        .collect::<String>()
        .to_ascii_lowercase();
    for tag in ["pre", "script", "style", "textarea"] {
        if lower
            .strip_prefix('<')
            .and_then(|rest| rest.strip_prefix(tag))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '>', '\n', '\r']))
        {
            return Some(format!("</{tag}>"));
        }
    }
    let closer = if lower.starts_with("<!--") {
        "-->"
    } else if lower.starts_with("<?") {
        "?>"
    } else if lower.starts_with("<![cdata[") {
        "]]>"
    } else if lower.starts_with("<!") {
        ">"
    } else {
        return None;
    };
    Some(closer.to_owned())
}

/// Whether `source` starts an ATX heading: up to three spaces, one to six `#`, then a space, a
/// tab or the end of the line.
fn is_atx(source: &str) -> bool {
    let rest = source.trim_start_matches(' ');
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    (1..=6).contains(&hashes)
        && source.len() - rest.len() <= 3
        && rest[hashes..]
            .chars()
            .next()
            .is_none_or(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
}

/// The state of one pass over the events.
struct Reader<'a> {
    source: &'a str,
    pieces: Vec<MarkdownPiece>,
    /// Where the source not yet in a piece starts.
    cursor: usize,
    /// How many list items and quotes are open.
    containers: usize,
    /// The heading being read: its piece.
    heading: Option<usize>,
    /// The code block being read: its piece.
    code_block: Option<usize>,
    /// Whether an HTML block is being read.
    html_block: bool,
    items: Vec<OpenItem>,
}

impl<'a> Reader<'a> {
    fn new(source: &'a str) -> Reader<'a> {
        Reader {
            source,
            pieces: Vec::new(),
            cursor: 0,
            containers: 0,
            heading: None,
            code_block: None,
            html_block: false,
            items: Vec::new(),
        }
    }

    fn read(mut self) -> Markdown<'a> {
        let source = self.source;
        for (event, range) in Parser::new_ext(source, Options::empty()).into_offset_iter() {
            self.event(event, range);
        }
        self.text_until(source.len());
        Markdown {
            source,
            pieces: self.pieces,
        }
    }

    /// Closes the text before `at` into a [`MarkdownKind::Text`] piece.
    fn text_until(&mut self, at: usize) {
        if at > self.cursor {
            self.pieces.push(MarkdownPiece {
                kind: MarkdownKind::Text,
                range: self.cursor..at,
            });
            self.cursor = at;
        }
    }

    /// Adds a piece that owns its source.
    fn owned(&mut self, kind: MarkdownKind, range: Range<usize>) -> usize {
        self.text_until(range.start);
        self.pieces.push(MarkdownPiece {
            kind,
            range: range.clone(),
        });
        self.cursor = self.cursor.max(range.end);
        self.pieces.len() - 1
    }

    /// Adds a mark: a piece whose source the following pieces cover.
    fn mark(&mut self, kind: MarkdownKind, range: Range<usize>) -> usize {
        self.text_until(range.start);
        self.pieces.push(MarkdownPiece { kind, range });
        self.pieces.len() - 1
    }

    /// A block starts or ends inside the innermost open item: its first paragraph is over.
    fn block_in_item(&mut self) {
        if let Some(item) = self.items.last_mut()
            && !item.in_paragraph
        {
            item.lead = Lead::Done;
        }
    }

    /// An inline element of the innermost item's first paragraph: `code` when it is a code span.
    fn inline_in_item(&mut self, code: Option<&str>) {
        let Some(item) = self.items.last_mut() else {
            return;
        };
        let MarkdownKind::ListItem { code: held } = &mut self.pieces[item.piece].kind else {
            return;
        };
        match (item.lead, code) {
            (Lead::Fresh, Some(code)) if !code.trim().is_empty() => {
                item.lead = Lead::Code;
                *held = Some(code.trim().to_owned());
            }
            (Lead::Fresh, _) => item.lead = Lead::Done,
            (Lead::Code, Some(_)) => {
                item.lead = Lead::Done;
                *held = None;
            }
            (Lead::Code, None) | (Lead::Done, _) => {}
        }
    }

    fn event(&mut self, event: Event<'a>, range: Range<usize>) {
        let in_code = self.code_block.is_some();
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                self.block_in_item();
                if is_atx(&self.source[range.start..]) {
                    let kind = MarkdownKind::Heading {
                        level: level as u8,
                        text: String::new(),
                        top_level: self.containers == 0,
                    };
                    self.heading = Some(self.mark(kind, range));
                }
            }
            Event::End(TagEnd::Heading(_)) => self.heading = None,
            Event::Start(Tag::CodeBlock(kind)) => {
                self.block_in_item();
                let info = match kind {
                    CodeBlockKind::Fenced(info) => Some(info.trim().to_owned()),
                    CodeBlockKind::Indented => None,
                };
                let kind = MarkdownKind::CodeBlock {
                    info,
                    text: String::new(),
                };
                self.code_block = Some(self.owned(kind, range));
            }
            Event::End(TagEnd::CodeBlock) => self.code_block = None,
            Event::Start(Tag::HtmlBlock) => {
                self.block_in_item();
                self.owned(MarkdownKind::Html, range);
                self.html_block = true;
            }
            Event::End(TagEnd::HtmlBlock) => self.html_block = false,
            Event::Start(Tag::Item) => {
                self.block_in_item();
                self.containers += 1;
                let piece = self.mark(MarkdownKind::ListItem { code: None }, range);
                self.items.push(OpenItem {
                    piece,
                    lead: Lead::Fresh,
                    in_paragraph: false,
                });
            }
            Event::End(TagEnd::Item) => {
                self.containers = self.containers.saturating_sub(1);
                self.items.pop();
            }
            Event::Start(Tag::BlockQuote(_) | Tag::FootnoteDefinition(_)) => {
                self.block_in_item();
                self.containers += 1;
            }
            Event::End(TagEnd::BlockQuote(_) | TagEnd::FootnoteDefinition) => {
                self.containers = self.containers.saturating_sub(1);
            }
            Event::Start(Tag::Paragraph) => {
                if let Some(item) = self.items.last_mut() {
                    item.in_paragraph = true;
                }
            }
            Event::End(TagEnd::Paragraph) => {
                if let Some(item) = self.items.last_mut() {
                    item.in_paragraph = false;
                }
                self.block_in_item();
            }
            Event::Start(Tag::List(_) | Tag::Table(_)) | Event::Rule => self.block_in_item(),
            Event::Text(text) if in_code => {
                if let Some(MarkdownKind::CodeBlock { text: content, .. }) =
                    self.code_block.map(|i| &mut self.pieces[i].kind)
                {
                    content.push_str(&text);
                }
            }
            Event::Html(_) if self.html_block => {}
            Event::Code(code) => {
                self.inline_in_item(Some(&code));
                self.heading_text(&code);
                self.owned(MarkdownKind::Code(code.into_string()), range);
            }
            Event::Html(_) | Event::InlineHtml(_) => {
                self.inline_in_item(None);
                self.owned(MarkdownKind::Html, range);
            }
            Event::Text(text) => {
                self.inline_in_item(None);
                self.heading_text(&text);
            }
            Event::Start(_) | Event::SoftBreak | Event::HardBreak => {
                if !in_code {
                    self.inline_in_item(None);
                }
            }
            Event::End(_)
            | Event::FootnoteReference(_)
            | Event::TaskListMarker(_)
            | Event::InlineMath(_)
            | Event::DisplayMath(_) => {}
        }
    }

    /// Adds `text` to the heading being read, if any.
    fn heading_text(&mut self, text: &str) {
        if let Some(MarkdownKind::Heading { text: heading, .. }) =
            self.heading.map(|i| &mut self.pieces[i].kind)
        {
            heading.push_str(text);
        }
    }
}
