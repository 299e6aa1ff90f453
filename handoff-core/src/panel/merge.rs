//! Merging the findings of a panel's members (the rule is on [`merge_findings`]).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::output::{Finding, Severity};

/// The category of a finding that names none.
pub const GENERAL_CATEGORY: &str = "general";

/// Title words that say nothing about what a finding is about; left out of the comparison.
const STOP_WORDS: &[&str] = &[
    "about", "after", "all", "also", "and", "any", "are", "been", "before", "being", "but", "can",
    "could", "does", "doesn", "for", "from", "has", "have", "here", "how", "into", "its", "may",
    "might", "more", "most", "must", "not", "only", "other", "should", "some", "such", "than",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "too",
    "use", "very", "was", "were", "what", "when", "where", "which", "while", "who", "why", "will",
    "with", "without", "would", "you", "your",
];

/// Shortest title word, in characters, that counts.
const MIN_TOKEN_CHARS: usize = 3;

/// An inclusive range of 1-based lines.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LineRange {
    /// First line.
    #[schemars(range(min = 1))]
    pub start: u64,
    /// Last line (at least `start`).
    #[schemars(range(min = 1))]
    pub end: u64,
}

impl LineRange {
    fn overlaps(self, other: LineRange) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// How one member put a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Wording {
    /// The member's id (`codex`, `claude:opus`).
    pub member: String,
    /// The severity that member gave it.
    pub severity: Severity,
    /// Its title, as written.
    pub title: String,
    /// Its longer explanation, when it gave one.
    pub body: Option<String>,
}

/// A finding of the panel: one member's finding, or several members' findings merged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PanelFinding {
    /// The normalised repository-relative path, when the finding is about a file.
    pub path: Option<String>,
    /// The union of the members' line ranges, when they gave lines.
    pub lines: Option<LineRange>,
    /// The normalised category (`general` when none was given).
    pub category: String,
    /// The highest severity any member gave it.
    pub severity: Severity,
    /// The title of the wording with that severity (the first such wording, in `wordings`
    /// order).
    pub title: String,
    /// The members that raised it, sorted.
    #[schemars(length(min = 1))]
    pub agreed_by: Vec<String>,
    /// Every member's wording, sorted by member, then severity (highest first), title, body.
    #[schemars(length(min = 1))]
    pub wordings: Vec<Wording>,
}

/// One member's finding, normalised for comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Raised {
    member: String,
    path: Option<String>,
    lines: Option<LineRange>,
    category: String,
    severity: Severity,
    title: String,
    body: Option<String>,
    tokens: BTreeSet<String>,
}

impl Raised {
    fn new(member: &str, f: &Finding) -> Raised {
        // Without a title, the summary is the title and there is no body.
        let (title, body) = match &f.title {
            Some(title) => (title.as_str(), Some(f.summary.as_str())),
            None => (f.summary.as_str(), None),
        };
        Raised::normalised(
            member,
            f.file.as_deref(),
            f.line.map(|start| LineRange {
                start,
                end: f.end_line.unwrap_or(start).max(start),
            }),
            f.category.as_deref(),
            f.severity,
            title,
            body,
        )
    }

    /// A finding from its parts, normalised.
    pub(super) fn normalised(
        member: &str,
        path: Option<&str>,
        lines: Option<LineRange>,
        category: Option<&str>,
        severity: Severity,
        title: &str,
        body: Option<&str>,
    ) -> Raised {
        Raised {
            member: member.to_owned(),
            path: path.map(normalise_path),
            lines,
            category: normalise_category(category),
            severity,
            title: title.to_owned(),
            body: body.map(str::to_owned),
            tokens: title_tokens(title),
        }
    }

    /// The canonical order of raised findings: every field, so that equal keys mean equal
    /// findings.
    fn canonical(&self, other: &Raised) -> Ordering {
        (&self.member, &self.path, self.lines, &self.category)
            .cmp(&(&other.member, &other.path, other.lines, &other.category))
            .then_with(|| rank(other.severity).cmp(&rank(self.severity)))
            .then_with(|| (&self.title, &self.body).cmp(&(&other.title, &other.body)))
    }

    /// The findings only ever merge within the same bucket.
    fn bucket(&self) -> (Option<&str>, &str, bool) {
        (
            self.path.as_deref(),
            self.category.as_str(),
            self.lines.is_some(),
        )
    }
}

/// The rank of a severity: higher is worse.
pub(crate) fn rank(s: Severity) -> u8 {
    match s {
        Severity::Blocker => 4,
        Severity::High => 3,
        Severity::Medium => 2,
        Severity::Low => 1,
        Severity::Nit => 0,
    }
}

/// A path with `.` and empty segments dropped: `./src//a.rs` → `src/a.rs`.
pub fn normalise_path(path: &str) -> String {
    path.split('/')
        .filter(|seg| !seg.is_empty() && *seg != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// A category trimmed and lowercased; absent or blank is [`GENERAL_CATEGORY`].
pub fn normalise_category(category: Option<&str>) -> String {
    match category.map(str::trim) {
        Some(c) if !c.is_empty() => c.to_lowercase(),
        _ => GENERAL_CATEGORY.to_owned(),
    }
}

/// The words of a title that count: maximal runs of alphanumeric characters, lowercased, at
/// least three characters long, stop words left out.
pub fn title_tokens(title: &str) -> BTreeSet<String> {
    title
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= MIN_TOKEN_CHARS && !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

/// Whether two titles say the same thing: the Jaccard index of their words is at least 1/2.
/// Titles without any word that counts are the same only when equal up to case and spacing.
pub fn titles_agree(a: &str, b: &str) -> bool {
    tokens_agree(&title_tokens(a), &title_tokens(b), a, b)
}

fn tokens_agree(ta: &BTreeSet<String>, tb: &BTreeSet<String>, a: &str, b: &str) -> bool {
    if ta.is_empty() && tb.is_empty() {
        let squash = |s: &str| {
            s.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase()
        };
        return squash(a) == squash(b);
    }
    let shared = ta.intersection(tb).count();
    let union = ta.len() + tb.len() - shared;
    2 * shared >= union
}

fn agree(a: &Raised, b: &Raised) -> bool {
    a.member != b.member
        && a.path == b.path
        && a.category == b.category
        && match (a.lines, b.lines) {
            (Some(x), Some(y)) => x.overlaps(y),
            (None, None) => true,
            _ => false,
        }
        && tokens_agree(&a.tokens, &b.tokens, &a.title, &b.title)
}

/// Disjoint sets over `0..n`; the smaller index becomes the root, so the sets' shape depends
/// only on which pairs are joined.
struct Sets(Vec<usize>);

impl Sets {
    fn root(&mut self, mut i: usize) -> usize {
        while self.0[i] != i {
            self.0[i] = self.0[self.0[i]];
            i = self.0[i];
        }
        i
    }

    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.0[hi] = lo;
    }
}

/// Merges the findings raised by a panel's members, given as `(member id, finding)` pairs.
///
/// Each finding of each member is first normalised:
/// - path: `.` and empty segments dropped (`./src//a.rs` → `src/a.rs`); no path stays none;
/// - lines: the range it names (a single line `n` is `n..=n`), or none;
/// - category: trimmed and lowercased, `general` when none is given;
/// - title words: the maximal runs of alphanumeric characters of the title, lowercased, of at
///   least three characters, minus a fixed list of stop words (`the`, `and`, `should`, …).
///
/// Two findings raised by *different* members agree when all of these hold:
/// 1. the same normalised path (or both none);
/// 2. their line ranges overlap, or neither has lines;
/// 3. the same normalised category;
/// 4. the Jaccard index of their title words (shared words over all words) is at least 1/2;
///    two titles with no word that counts agree only when equal up to case and spacing.
///
/// Findings are grouped by the transitive closure of "agree" (union-find over the findings
/// sorted in a canonical order), so a group may hold two findings of the same member when both
/// agree with a third member's. Each group becomes one [`PanelFinding`]:
/// - `agreedBy`: the members that raised it, sorted;
/// - `severity`: the highest any member gave;
/// - `title`: the wording with that severity (the first in `wordings` order);
/// - `wordings`: every member's title and body, sorted by member, then severity (highest
///   first), title, body;
/// - `lines`: from the smallest start to the largest end of the group's ranges.
///
/// The panel's findings are sorted by path (none first), lines, category, severity (highest
/// first), title, members and wordings. The result depends only on which findings each member
/// raised, never on the order of the members or of their findings.
///
/// A provider-output finding gives its file, `line` to `endLine` (one line when it has no
/// `endLine`), `category`, `severity`, and `title` with `summary` as its body; a finding without
/// a title has its summary as title and no body (null).
pub fn merge_findings<'a>(
    raised: impl IntoIterator<Item = (&'a str, &'a Finding)>,
) -> Vec<PanelFinding> {
    merge_raised(
        raised
            .into_iter()
            .map(|(member, f)| Raised::new(member, f))
            .collect(),
    )
}

pub(super) fn merge_raised(mut all: Vec<Raised>) -> Vec<PanelFinding> {
    all.sort_by(Raised::canonical);

    let mut buckets: BTreeMap<_, Vec<usize>> = BTreeMap::new();
    for (i, r) in all.iter().enumerate() {
        buckets.entry(r.bucket()).or_default().push(i);
    }
    let mut sets = Sets((0..all.len()).collect());
    for indices in buckets.values() {
        for (k, &i) in indices.iter().enumerate() {
            for &j in &indices[k + 1..] {
                if agree(&all[i], &all[j]) {
                    sets.join(i, j);
                }
            }
        }
    }

    let mut groups: BTreeMap<usize, Vec<&Raised>> = BTreeMap::new();
    for (i, r) in all.iter().enumerate() {
        groups.entry(sets.root(i)).or_default().push(r);
    }
    let mut merged: Vec<PanelFinding> = groups.into_values().map(merge_group).collect();
    merged.sort_by(canonical_finding);
    merged
}

fn merge_group(group: Vec<&Raised>) -> PanelFinding {
    // A group shares its path, category and whether it has lines: only such findings merge.
    let first = group[0];
    let lines = group
        .iter()
        .filter_map(|r| r.lines)
        .reduce(|a, b| LineRange {
            start: a.start.min(b.start),
            end: a.end.max(b.end),
        });
    let mut wordings: Vec<Wording> = group
        .iter()
        .map(|r| Wording {
            member: r.member.clone(),
            severity: r.severity,
            title: r.title.clone(),
            body: r.body.clone(),
        })
        .collect();
    wordings.sort_by(canonical_wording);
    let severity = wordings
        .iter()
        .map(|w| w.severity)
        .max_by_key(|s| rank(*s))
        .unwrap_or(first.severity);
    let title = wordings
        .iter()
        .find(|w| w.severity == severity)
        .map_or_else(|| first.title.clone(), |w| w.title.clone());
    let agreed_by: Vec<String> = wordings
        .iter()
        .map(|w| w.member.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    PanelFinding {
        path: first.path.clone(),
        lines,
        category: first.category.clone(),
        severity,
        title,
        agreed_by,
        wordings,
    }
}

fn canonical_wording(a: &Wording, b: &Wording) -> Ordering {
    a.member
        .cmp(&b.member)
        .then_with(|| rank(b.severity).cmp(&rank(a.severity)))
        .then_with(|| (&a.title, &a.body).cmp(&(&b.title, &b.body)))
}

/// The order of a panel's findings: by path (findings about no file first), lines, category,
/// severity (highest first), title, then members and wordings.
fn canonical_finding(a: &PanelFinding, b: &PanelFinding) -> Ordering {
    (&a.path, a.lines, &a.category)
        .cmp(&(&b.path, b.lines, &b.category))
        .then_with(|| rank(b.severity).cmp(&rank(a.severity)))
        .then_with(|| (&a.title, &a.agreed_by).cmp(&(&b.title, &b.agreed_by)))
        .then_with(|| {
            a.wordings
                .iter()
                .zip(&b.wordings)
                .map(|(x, y)| canonical_wording(x, y))
                .find(|o| o.is_ne())
                .unwrap_or_else(|| a.wordings.len().cmp(&b.wordings.len()))
        })
}
