//! The per-entry states of a fingerprint, stored in a few runs rather than one allocation per
//! path.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// The per-entry states of a [`Fingerprint`]: entry keys, unique and sorted bytewise, each with
/// a state string.
///
/// Stored as a few runs of consecutive entries, each one text buffer and a list of offsets, so
/// that a fingerprint of a repository with 100,000 files costs a few hundred allocations rather
/// than 200,000, and a run made elsewhere (a scan's rows) is taken over without a copy
/// ([`append_run`](Self::append_run)). Looks up like a sorted map: [`get`](Self::get),
/// `entries["path"]`, [`iter`](Self::iter) in key order. Two tables are equal when their entries
/// are, however they are split into runs.
#[derive(Debug, Clone, Default)]
pub struct Entries {
    /// The runs, in key order; [`push`](Self::push) adds to the last.
    runs: Vec<EntryRun>,
    /// The position of each run's first entry.
    starts: Vec<usize>,
    len: usize,
}

/// Consecutive entries of an [`Entries`] in one buffer.
#[derive(Debug, Clone, Default)]
struct EntryRun {
    text: String,
    /// Per entry, where its key ends and where its state ends in `text`; an entry starts where
    /// the previous one ends.
    ends: Vec<(usize, usize)>,
}

impl EntryRun {
    fn at(&self, i: usize) -> (&str, &str) {
        let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
        let (key_end, end) = self.ends[i];
        (&self.text[start..key_end], &self.text[key_end..end])
    }

    /// Whether `ends` cut `text` into entries, on character boundaries, with keys in strictly
    /// increasing order.
    fn well_formed(&self) -> bool {
        let mut start = 0;
        let mut last: Option<&str> = None;
        for &(key_end, end) in &self.ends {
            if !(start <= key_end
                && key_end <= end
                && end <= self.text.len()
                && self.text.is_char_boundary(key_end)
                && self.text.is_char_boundary(end))
            {
                return false;
            }
            let key = &self.text[start..key_end];
            if last.is_some_and(|l| l >= key) {
                return false;
            }
            last = Some(key);
            start = end;
        }
        true
    }
}

impl PartialEq for Entries {
    fn eq(&self, other: &Entries) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Entries {}

impl Entries {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table with room for `entries` entries of `text` bytes in all.
    pub fn with_capacity(entries: usize, text: usize) -> Self {
        let mut table = Entries::new();
        table.reserve(entries, text);
        table
    }

    /// Makes room for `entries` more entries of `text` more bytes in all.
    pub fn reserve(&mut self, entries: usize, text: usize) {
        let run = self.open_run();
        run.text.reserve(text);
        run.ends.reserve(entries);
    }

    /// The last run, made if there is none.
    fn open_run(&mut self) -> &mut EntryRun {
        if self.runs.is_empty() {
            self.runs.push(EntryRun::default());
            self.starts.push(self.len);
        }
        let last = self.runs.len() - 1;
        &mut self.runs[last]
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key of the last entry.
    pub fn last_key(&self) -> Option<&str> {
        self.len().checked_sub(1).map(|i| self.at(i).0)
    }

    /// Adds an entry after the last one. A key equal to the last key extends that entry's state
    /// with `|` and `state` (two paths that share a key). Returns `false`, adding nothing, if
    /// `key` sorts before the last key.
    pub fn push(&mut self, key: &str, state: &str) -> bool {
        match self.last_key().map(|last| key.cmp(last)) {
            Some(Ordering::Less) => false,
            Some(Ordering::Equal) => {
                let run = self.open_run();
                run.text.push('|');
                run.text.push_str(state);
                let end = run.text.len();
                if let Some(last) = run.ends.last_mut() {
                    last.1 = end;
                }
                true
            }
            _ => {
                let run = self.open_run();
                run.text.push_str(key);
                let key_end = run.text.len();
                run.text.push_str(state);
                run.ends.push((key_end, run.text.len()));
                self.len += 1;
                true
            }
        }
    }

    /// Takes over a run of entries made elsewhere, without copying it: `text` holds each
    /// entry's key then its state, and `ends` says, per entry, where its key and its state end
    /// in `text` (an entry starts where the previous one ends). The keys must be strictly
    /// increasing and sort after the last key; otherwise nothing is added and `text` and `ends`
    /// are handed back (for [`push`](Self::push), which joins equal keys).
    pub fn append_run(
        &mut self,
        text: String,
        ends: Vec<(usize, usize)>,
    ) -> Result<(), (String, Vec<(usize, usize)>)> {
        let run = EntryRun { text, ends };
        let first = (!run.ends.is_empty()).then(|| run.ends[0].0);
        let after_last = match (first, self.last_key()) {
            (Some(key_end), Some(last)) => run.text.get(..key_end).is_some_and(|k| k > last),
            _ => true,
        };
        if !after_last || !run.well_formed() {
            return Err((run.text, run.ends));
        }
        if run.ends.is_empty() {
            return Ok(());
        }
        // An empty run left at the end (reserved, never filled) gives way.
        if self.runs.last().is_some_and(|r| r.ends.is_empty()) {
            self.runs.pop();
            self.starts.pop();
        }
        self.starts.push(self.len);
        self.len += run.ends.len();
        self.runs.push(run);
        Ok(())
    }

    /// The state of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).map(|i| self.at(i).1)
    }

    /// Whether there is an entry for `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// The entry at position `i` in key order.
    pub fn get_index(&self, i: usize) -> Option<(&str, &str)> {
        (i < self.len()).then(|| self.at(i))
    }

    /// The entries, in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        (0..self.len()).map(|i| self.at(i))
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.iter().map(|(key, _)| key)
    }

    /// The entry at position `i` (which must be in range).
    fn at(&self, i: usize) -> (&str, &str) {
        let run = self.starts.partition_point(|&start| start <= i) - 1;
        self.runs[run].at(i - self.starts[run])
    }

    fn position(&self, key: &str) -> Option<usize> {
        let mut lo = 0;
        let mut hi = self.len();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.at(mid).0.cmp(key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(mid),
            }
        }
        None
    }
}

impl std::ops::Index<&str> for Entries {
    type Output = str;

    /// The state of `key`; panics if there is none, like a map.
    fn index(&self, key: &str) -> &str {
        match self.get(key) {
            Some(state) => state,
            None => panic!("no entry for {key:?}"),
        }
    }
}

impl<K: Into<String>, V: AsRef<str>> FromIterator<(K, V)> for Entries {
    /// Sorts the entries by key; equal keys are joined as [`push`](Self::push) does.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut all: Vec<(String, V)> = iter.into_iter().map(|(k, v)| (k.into(), v)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let text = all
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().len() + 1)
            .sum();
        let mut entries = Entries::with_capacity(all.len(), text);
        for (key, state) in &all {
            entries.push(key, state.as_ref());
        }
        entries
    }
}

impl Serialize for Entries {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, String>::deserialize(deserializer)?;
        Ok(map.into_iter().collect())
    }
}
