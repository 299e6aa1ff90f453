//! Property: what a run does to hide its work — ignore rules written during it (a directory
//! that ignores itself, a line in `info/exclude`), a loose object rewritten or deleted under
//! the refs — is found by the fingerprint taken after it, exactly where; git's housekeeping
//! (packing the same objects) is found nowhere.

use std::collections::BTreeSet;

use proptest::prelude::*;

use handoff_core::Workspace;
use handoff_git::GitWorkspace;

use crate::support::{TestRepo, changed};

/// Directories a run may make ignore themselves, and the file it writes in each.
const DIRS: [&str; 3] = ["stash", "dir/cache", ".vscode"];

#[derive(Debug, Clone)]
enum Hide {
    /// `<dir>/.gitignore` of `*`, and a file next to it.
    SelfIgnoring(usize),
    /// A line in `.git/info/exclude` for a new file, and the file.
    Exclude(usize),
    /// The loose object of a committed file made to hold other content.
    RewriteObject(usize),
    /// The loose object of a committed file deleted.
    DeleteObject(usize),
    /// `git repack -a -d` (or `git gc`): the same objects, packed.
    Repack(bool),
    /// A plain new file.
    Write(usize),
}

/// Committed files, whose objects the mutations rewrite.
const COMMITTED: [&str; 3] = ["a.txt", "dir/b.txt", "c.txt"];

fn hide() -> impl Strategy<Value = Hide> {
    prop_oneof![
        (0..DIRS.len()).prop_map(Hide::SelfIgnoring),
        (0..3usize).prop_map(Hide::Exclude),
        (0..COMMITTED.len()).prop_map(Hide::RewriteObject),
        (0..COMMITTED.len()).prop_map(Hide::DeleteObject),
        any::<bool>().prop_map(Hide::Repack),
        (0..3usize).prop_map(Hide::Write),
    ]
}

fn loose_object(repo: &TestRepo, path: &str) -> Option<String> {
    let id = repo.git(&["rev-parse", &format!("HEAD:{path}")]);
    let id = id.trim();
    let key = format!(".git/objects/{}/{}", &id[..2], &id[2..]);
    repo.path(&key).exists().then_some(key)
}

/// Whether `git fsck` finds the object store sound.
fn sound(repo: &TestRepo) -> bool {
    std::process::Command::new("git")
        .args(["fsck", "--no-dangling", "--no-progress"])
        .current_dir(repo.root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Applies `m`; returns the keys it changes.
fn apply(repo: &TestRepo, m: &Hide) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    match m {
        Hide::SelfIgnoring(k) => {
            let dir = DIRS[*k];
            repo.write(&format!("{dir}/.gitignore"), "*\n");
            repo.write(&format!("{dir}/hidden"), "hidden\n");
            out.insert(format!("{dir}/.gitignore"));
            out.insert(format!("{dir}/hidden"));
        }
        Hide::Exclude(k) => {
            let name = format!("excluded{k}.txt");
            let exclude = repo.path(".git/info/exclude");
            let mut rules = std::fs::read(&exclude).unwrap_or_default();
            rules.extend_from_slice(format!("{name}\n").as_bytes());
            repo.write(".git/info/exclude", rules);
            repo.write(&name, "hidden\n");
            out.insert(".git/info/exclude".to_owned());
            out.insert(name);
        }
        Hide::RewriteObject(i) => {
            if let Some(key) = loose_object(repo, COMMITTED[*i]) {
                let other = repo.path("other.tmp");
                std::fs::write(&other, format!("evil {i}\n")).unwrap();
                let new = repo.git(&["hash-object", "-w", "other.tmp"]);
                std::fs::remove_file(&other).unwrap();
                let new = new.trim();
                let bytes =
                    std::fs::read(repo.path(&format!(".git/objects/{}/{}", &new[..2], &new[2..])))
                        .unwrap();
                let path = repo.path(&key);
                let mut perms = std::fs::metadata(&path).unwrap().permissions();
                #[allow(clippy::permissions_set_readonly_false)]
                perms.set_readonly(false);
                std::fs::set_permissions(&path, perms).unwrap();
                std::fs::write(&path, bytes).unwrap();
                out.insert(key);
            }
        }
        Hide::DeleteObject(i) => {
            if let Some(key) = loose_object(repo, COMMITTED[*i]) {
                std::fs::remove_file(repo.path(&key)).unwrap();
                out.insert(key);
            }
        }
        Hide::Repack(gc) => {
            // Only a sound store is repacked: git refuses a corrupt or incomplete one.
            if sound(repo) {
                if *gc {
                    repo.git(&["gc", "--quiet"]);
                } else {
                    repo.git(&["repack", "-a", "-d", "-q"]);
                }
            }
        }
        Hide::Write(k) => {
            let name = format!("new{k}.txt");
            repo.write(&name, "new\n");
            out.insert(name);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn hiding_is_found_and_housekeeping_is_not(
        packed in any::<bool>(),
        mutations in proptest::collection::vec(hide(), 1..6),
    ) {
        let repo = TestRepo::init();
        repo.git(&["config", "gc.auto", "0"]);
        for (i, path) in COMMITTED.iter().enumerate() {
            repo.write(path, format!("content {i}\n"));
        }
        repo.git(&["add", "-A"]);
        repo.commit("initial");
        if packed {
            repo.git(&["gc", "--quiet"]);
        }
        let before = repo.fingerprint();
        let mut expected = BTreeSet::new();
        for m in &mutations {
            expected.extend(apply(&repo, m));
        }
        let after = GitWorkspace::new()
            .fingerprint_since(repo.root(), &before)
            .unwrap();
        let actual: BTreeSet<String> = changed(&before, &after).into_iter().collect();
        prop_assert_eq!(&actual, &expected, "mutations: {:?}", mutations);
        prop_assert_eq!(before.digest == after.digest, expected.is_empty());
    }
}
