//! Paths that hold a secret. An agent can name a file after one (`touch "leak-$API_KEY.txt"`),
//! so wherever handoff prints or keeps a path it goes through the masking service like any
//! other text. The evidence itself is taken on the real paths; a stat record kept for the next
//! run leaves such a path out, so its file is hashed every time rather than trusted under a
//! name that no longer says which file it was.

use std::collections::BTreeSet;

use super::Masker;
use crate::workspace::{Fingerprint, GitEvidence, StatRecord};

/// What to keep of a stat record whose paths may hold secrets.
#[derive(Debug)]
pub enum KeptRecord {
    /// No path holds a secret: the record as it is.
    AsIs,
    /// The record without the paths that hold one.
    Without(Box<StatRecord>),
    /// Nothing: the record could not be read back whole to be checked.
    Nothing,
}

/// Masks paths one by one, remembering which held a secret.
struct PathMasking<'a> {
    masker: &'a Masker,
    masked: BTreeSet<String>,
}

impl PathMasking<'_> {
    fn path(&mut self, path: &mut String) {
        let masked = self.masker.mask(path);
        if masked.count > 0 {
            let text = masked.text.into_owned();
            self.masked.insert(std::mem::replace(path, text));
        }
    }

    fn fingerprint(&mut self, fp: &mut Fingerprint) {
        for change in &mut fp.changes {
            self.path(&mut change.path);
        }
        for r in &mut fp.excluded_refs {
            self.path(r);
        }
    }
}

impl Masker {
    /// Masks each of `paths` in place; how many held a secret.
    pub fn mask_paths(&self, paths: &mut [String]) -> u64 {
        let mut m = PathMasking {
            masker: self,
            masked: BTreeSet::new(),
        };
        for p in paths.iter_mut() {
            m.path(p);
        }
        m.masked.len() as u64
    }

    /// Masks every path `evidence` names (changed files, flagged files and what their notes
    /// quote, both fingerprints' status lists and left-out refs) and sets its `masked_paths`
    /// to how many distinct paths held a secret.
    pub fn mask_evidence(&self, evidence: &mut GitEvidence) -> u64 {
        let mut m = PathMasking {
            masker: self,
            masked: BTreeSet::new(),
        };
        for p in &mut evidence.changed_files {
            m.path(p);
        }
        for flag in &mut evidence.flags {
            m.path(&mut flag.path);
            if let std::borrow::Cow::Owned(note) = self.mask(&flag.note).text {
                flag.note = note;
            }
        }
        for fp in [&mut evidence.before, &mut evidence.after]
            .into_iter()
            .flatten()
        {
            m.fingerprint(fp);
        }
        evidence.masked_paths = m.masked.len() as u64;
        evidence.masked_paths
    }

    /// What of `record` may be kept where it outlives the run (the task store): every path
    /// that holds a secret left out. The paths are masked together, in one pass, so that a
    /// record of 100,000 paths without a secret costs one scan.
    pub fn record_to_keep(&self, record: &StatRecord) -> KeptRecord {
        let mut joined = String::new();
        let mut count = 0usize;
        let whole = record.for_each(|path, _, _| {
            if count > 0 {
                joined.push('\0');
            }
            joined.push_str(&String::from_utf8_lossy(path));
            count += 1;
        });
        if !whole {
            return KeptRecord::Nothing;
        }
        let masked = self.mask(&joined);
        if masked.count == 0 {
            return KeptRecord::AsIs;
        }
        let pieces: Vec<&str> = masked.text.split('\0').collect();
        let originals: Vec<&str> = joined.split('\0').collect();
        // A span masked across two paths (a key block's markers in two names) leaves fewer
        // pieces: then each path is masked on its own.
        let secret: Vec<bool> = if pieces.len() == count && originals.len() == count {
            pieces.iter().zip(&originals).map(|(a, b)| a != b).collect()
        } else {
            originals.iter().map(|p| self.mask(p).count > 0).collect()
        };
        match record.without(|i, _| secret.get(i).copied().unwrap_or(true)) {
            Some(kept) => KeptRecord::Without(Box::new(kept)),
            None => KeptRecord::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::{ChangeCounts, Stamp, StatusChange};

    const SECRET: &str = "sk-ant-api03-PathLeak0123456789abcdef";

    fn stamp(n: i64) -> Stamp {
        Stamp {
            dev: 7,
            ino: n as u64,
            mode: 0o100644,
            uid: 1000,
            gid: 1000,
            size: n,
            mtime: (n, 0),
            ctime: (n, 0),
        }
    }

    fn record(paths: &[String]) -> StatRecord {
        let mut sorted = paths.to_vec();
        sorted.sort();
        let mut r = StatRecord::new(20);
        for (i, p) in sorted.iter().enumerate() {
            r.push(p.as_bytes(), stamp(i as i64 + 1), &[i as u8; 20]);
        }
        r
    }

    fn paths_of(r: &StatRecord) -> Vec<String> {
        let mut out = Vec::new();
        r.for_each(|p, _, _| out.push(String::from_utf8_lossy(p).into_owned()));
        out
    }

    #[test]
    fn a_record_keeps_every_path_but_those_that_hold_a_secret() {
        let masker = Masker::new([SECRET]);
        let leak = format!("out/leak-{SECRET}.txt");
        let paths: Vec<String> = [
            "README.md",
            "src/lib.rs",
            leak.as_str(),
            "src/token_count.rs",
        ]
        .map(str::to_owned)
        .to_vec();
        let KeptRecord::Without(kept) = masker.record_to_keep(&record(&paths)) else {
            panic!("the secret path was not found");
        };
        assert_eq!(
            paths_of(&kept),
            ["README.md", "src/lib.rs", "src/token_count.rs"]
        );
        // Its stamps and ids are the ones recorded.
        assert_eq!(kept.get(b"src/lib.rs").map(|(s, _)| s), Some(stamp(3)));
        let plain = record(&paths[..2]);
        assert!(matches!(masker.record_to_keep(&plain), KeptRecord::AsIs));
    }

    #[test]
    fn a_secret_split_across_two_paths_is_judged_path_by_path() {
        let masker = Masker::default();
        let paths = [
            "a/-----BEGIN RSA PRIVATE KEY-----".to_owned(),
            "b/-----END RSA PRIVATE KEY-----".to_owned(),
            "c/plain.rs".to_owned(),
        ];
        let kept = masker.record_to_keep(&record(&paths));
        // Masked together, the block spans two names; one by one, only a BEGIN line (a block
        // cut short) is masked, and only its path is left out.
        let KeptRecord::Without(kept) = kept else {
            panic!("{kept:?}")
        };
        assert_eq!(paths_of(&kept), paths[1..]);
    }

    #[test]
    fn evidence_paths_are_masked_and_counted_once_each() {
        let masker = Masker::new([SECRET]);
        let leak = format!("leak-{SECRET}.txt");
        let fp = Fingerprint {
            changes: vec![StatusChange {
                path: leak.clone(),
                staged: false,
                unstaged: false,
                untracked: true,
                deleted: false,
            }],
            change_counts: ChangeCounts::default(),
            ..Fingerprint::record_only("/w".into(), StatRecord::new(20)).summary()
        };
        let mut evidence = GitEvidence {
            before: None,
            after: Some(fp),
            changed: true,
            changed_files: vec![leak.clone(), "src/lib.rs".into()],
            flags: Vec::new(),
            masked_paths: 0,
            applied: None,
            branch: None,
        };
        assert_eq!(masker.mask_evidence(&mut evidence), 1);
        assert_eq!(
            evidence.changed_files,
            ["leak-[REDACTED].txt", "src/lib.rs"]
        );
        assert_eq!(
            evidence.after.as_ref().unwrap().changes[0].path,
            "leak-[REDACTED].txt"
        );
        let json = serde_json::to_string(&evidence).unwrap();
        assert!(!json.contains(SECRET), "{json}");
        assert!(json.contains("\"maskedPaths\":1"), "{json}");
        // Ordinary paths come through byte for byte, and the count stays out of the JSON.
        let mut plain = GitEvidence {
            changed_files: vec!["src/ключ.rs".into(), "a b/'q'.txt".into()],
            masked_paths: 0,
            applied: None,
            branch: None,
            ..evidence.clone()
        };
        plain.after = None;
        assert_eq!(masker.mask_evidence(&mut plain), 0);
        assert_eq!(plain.changed_files, ["src/ключ.rs", "a b/'q'.txt"]);
        assert!(
            !serde_json::to_string(&plain)
                .unwrap()
                .contains("maskedPaths")
        );
    }
}
