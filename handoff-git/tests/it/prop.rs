//! Properties: random writes and deletes, and random mutations of every kind, are detected iff
//! something actually changed, and exactly where.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use handoff_core::{Fingerprint, Workspace};
use handoff_git::GitWorkspace;

use crate::support::{TestRepo, changed};

/// The paths the property plays with; no name is both a file and a directory.
const NAMES: [&str; 6] = ["a", "b.txt", "dir/c", "dir/d", "dir/sub/e", "f"];

#[derive(Debug, Clone)]
enum Op {
    Write(usize, Vec<u8>),
    Delete(usize),
}

fn content() -> impl Strategy<Value = Vec<u8>> {
    // Few distinct contents, so that rewriting a file with what it already holds is common.
    prop_oneof![
        Just(b"one\n".to_vec()),
        Just(b"two\n".to_vec()),
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NAMES.len(), content()).prop_map(|(i, c)| Op::Write(i, c)),
        1 => (0..NAMES.len()).prop_map(Op::Delete),
    ]
}

/// Initial files: `(content, committed)` for a subset of the names.
fn initial() -> impl Strategy<Value = BTreeMap<usize, (Vec<u8>, bool)>> {
    proptest::collection::btree_map(0..NAMES.len(), (content(), any::<bool>()), 0..NAMES.len())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn writes_and_deletes_are_detected_iff_content_changed(
        files in initial(),
        ops in proptest::collection::vec(op(), 0..8),
    ) {
        let repo = TestRepo::init();
        let mut model: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        for (&i, (bytes, committed)) in &files {
            repo.write(NAMES[i], bytes);
            model.insert(NAMES[i], bytes.clone());
            if *committed {
                repo.git(&["add", NAMES[i]]);
            }
        }
        repo.commit("initial");
        let before = repo.fingerprint();

        let initial_model = model.clone();
        for op in &ops {
            match op {
                Op::Write(i, bytes) => {
                    repo.write(NAMES[*i], bytes);
                    model.insert(NAMES[*i], bytes.clone());
                }
                Op::Delete(i) => {
                    if model.remove(NAMES[*i]).is_some() {
                        repo.remove(NAMES[*i]);
                    }
                }
            }
        }
        let after = repo.fingerprint();

        let expected: BTreeSet<&str> = NAMES
            .iter()
            .copied()
            .filter(|name| initial_model.get(name) != model.get(name))
            .collect();
        let actual = changed(&before, &after);
        let actual: BTreeSet<&str> = actual.iter().map(String::as_str).collect();
        prop_assert_eq!(&actual, &expected);
        prop_assert_eq!(before.digest == after.digest, expected.is_empty());
    }
}

/// A path in the worktree or the index: a file (content, executable) or a symlink (target).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(Vec<u8>, bool),
    Link(&'static str),
}

/// Symlink targets (dangling ones included).
const TARGETS: [&str; 3] = ["a", "dir/c", "nowhere"];

#[derive(Debug, Clone)]
enum Mutation {
    Write(usize, Vec<u8>),
    Delete(usize),
    Rename(usize, usize),
    Chmod(usize),
    Symlink(usize, usize),
    Stage(usize),
    Commit,
    Branch(usize),
    Hook(usize, Vec<u8>),
    // No-ops.
    Rewrite(usize),
    Touch(usize),
    Status,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let name = 0..NAMES.len();
    prop_oneof![
        3 => (name.clone(), content()).prop_map(|(i, c)| Mutation::Write(i, c)),
        1 => name.clone().prop_map(Mutation::Delete),
        1 => (name.clone(), name.clone()).prop_map(|(i, j)| Mutation::Rename(i, j)),
        1 => name.clone().prop_map(Mutation::Chmod),
        1 => (name.clone(), 0..TARGETS.len()).prop_map(|(i, t)| Mutation::Symlink(i, t)),
        2 => name.clone().prop_map(Mutation::Stage),
        1 => Just(Mutation::Commit),
        1 => (0..2usize).prop_map(Mutation::Branch),
        1 => (0..2usize, content()).prop_map(|(k, c)| Mutation::Hook(k, c)),
        1 => name.clone().prop_map(Mutation::Rewrite),
        1 => name.clone().prop_map(Mutation::Touch),
        1 => Just(Mutation::Status),
    ]
}

/// What the fingerprint should see, as a model.
#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    worktree: BTreeMap<&'static str, Node>,
    index: BTreeMap<&'static str, Node>,
    /// Branch → a number per commit (each commit is new).
    refs: BTreeMap<String, u32>,
    hooks: BTreeMap<String, Vec<u8>>,
}

impl Model {
    /// The entry keys whose state differs between `self` and `other`.
    fn changed(&self, other: &Model) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for name in NAMES {
            let pair = |m: &Model| (m.index.get(name).cloned(), m.worktree.get(name).cloned());
            if pair(self) != pair(other) {
                out.insert(name.to_owned());
            }
        }
        let refs: BTreeSet<&String> = self.refs.keys().chain(other.refs.keys()).collect();
        for name in refs {
            if self.refs.get(name) != other.refs.get(name) {
                out.insert(format!(".git/{name}"));
            }
        }
        let hooks: BTreeSet<&String> = self.hooks.keys().chain(other.hooks.keys()).collect();
        for name in hooks {
            if self.hooks.get(name) != other.hooks.get(name) {
                out.insert(format!(".git/hooks/{name}"));
            }
        }
        out
    }
}

#[cfg(unix)]
fn set_exec(path: &std::path::Path, exec: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if exec { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Applies `m` to the repository and the model.
#[cfg(unix)]
fn apply(repo: &TestRepo, model: &mut Model, commits: &mut u32, m: &Mutation) {
    let remove = |name: &str| {
        let _ = std::fs::remove_file(repo.path(name));
    };
    match m {
        Mutation::Write(i, bytes) => {
            let name = NAMES[*i];
            let exec = match model.worktree.get(name) {
                Some(Node::File(_, exec)) => *exec,
                Some(Node::Link(_)) => {
                    remove(name);
                    false
                }
                None => false,
            };
            repo.write(name, bytes);
            model.worktree.insert(name, Node::File(bytes.clone(), exec));
        }
        Mutation::Delete(i) => {
            if model.worktree.remove(NAMES[*i]).is_some() {
                remove(NAMES[*i]);
            }
        }
        Mutation::Rename(i, j) => {
            let (from, to) = (NAMES[*i], NAMES[*j]);
            if i != j && model.worktree.contains_key(from) && !model.worktree.contains_key(to) {
                if let Some(parent) = repo.path(to).parent() {
                    std::fs::create_dir_all(parent).unwrap();
                }
                std::fs::rename(repo.path(from), repo.path(to)).unwrap();
                let node = model.worktree.remove(from).unwrap();
                model.worktree.insert(to, node);
            }
        }
        Mutation::Chmod(i) => {
            if let Some(Node::File(_, exec)) = model.worktree.get_mut(NAMES[*i]) {
                *exec = !*exec;
                set_exec(&repo.path(NAMES[*i]), *exec);
            }
        }
        Mutation::Symlink(i, t) => {
            let name = NAMES[*i];
            remove(name);
            let path = repo.path(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(TARGETS[*t], &path).unwrap();
            model.worktree.insert(name, Node::Link(TARGETS[*t]));
        }
        Mutation::Stage(i) => {
            let name = NAMES[*i];
            if model.worktree.contains_key(name) || model.index.contains_key(name) {
                repo.git(&["add", "-A", "--", name]);
                match model.worktree.get(name) {
                    Some(node) => model.index.insert(name, node.clone()),
                    None => model.index.remove(name),
                };
            }
        }
        Mutation::Commit => {
            repo.commit("mutation");
            *commits += 1;
            model.refs.insert("refs/heads/main".into(), *commits);
        }
        Mutation::Branch(k) => {
            if let Some(&at) = model.refs.get("refs/heads/main") {
                let branch = format!("b{k}");
                repo.git(&["branch", "-f", &branch]);
                model.refs.insert(format!("refs/heads/{branch}"), at);
            }
        }
        Mutation::Hook(k, bytes) => {
            let name = format!("h{k}");
            repo.write(&format!(".git/hooks/{name}"), bytes);
            model.hooks.insert(name, bytes.clone());
        }
        Mutation::Rewrite(i) => {
            if let Some(Node::File(bytes, _)) = model.worktree.get(NAMES[*i]) {
                repo.write(NAMES[*i], bytes);
            }
        }
        Mutation::Touch(i) => {
            if let Some(Node::File(..)) = model.worktree.get(NAMES[*i]) {
                let file = std::fs::File::options()
                    .write(true)
                    .open(repo.path(NAMES[*i]))
                    .unwrap();
                file.set_modified(std::time::SystemTime::now()).unwrap();
            }
        }
        Mutation::Status => {
            repo.git(&["status", "--porcelain"]);
        }
    }
}

/// `git status --porcelain=v2 -uall` as `(path, staged, unstaged, untracked, deleted)`.
fn git_status(repo: &TestRepo) -> BTreeSet<(String, bool, bool, bool, bool)> {
    repo.git(&[
        "-c",
        "status.renames=false",
        "status",
        "--porcelain=v2",
        "-uall",
    ])
    .lines()
    .filter_map(|line| {
        if let Some(path) = line.strip_prefix("? ") {
            return Some((path.to_owned(), false, false, true, false));
        }
        let rest = line.strip_prefix("1 ")?;
        let xy: Vec<char> = rest.chars().take(2).collect();
        let path = rest.splitn(8, ' ').nth(7)?.to_owned();
        Some((path, xy[0] != '.', xy[1] != '.', false, xy[1] == 'D'))
    })
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random trees and random mutations: the digest changes iff the model says something
    /// changed, `changedFiles` is exactly what changed, a fingerprint that hashes everything
    /// agrees with the one that trusts the stat cache, and the status view is git's.
    #[cfg(unix)]
    #[test]
    fn mutations_are_detected_iff_they_happen(
        files in initial(),
        mutations in proptest::collection::vec(mutation(), 1..10),
    ) {
        let repo = TestRepo::init();
        let mut model = Model::default();
        let mut commits = 0;
        for (&i, (bytes, committed)) in &files {
            repo.write(NAMES[i], bytes);
            let node = Node::File(bytes.clone(), false);
            model.worktree.insert(NAMES[i], node.clone());
            if *committed {
                repo.git(&["add", NAMES[i]]);
                model.index.insert(NAMES[i], node);
            }
        }
        if !files.is_empty() {
            repo.commit("initial");
            commits += 1;
            model.refs.insert("refs/heads/main".into(), commits);
        }
        let before = repo.fingerprint();
        let start = model.clone();
        for m in &mutations {
            apply(&repo, &mut model, &mut commits, m);
        }
        let after = repo.fingerprint();

        let expected = start.changed(&model);
        let actual: BTreeSet<String> = changed(&before, &after).into_iter().collect();
        prop_assert_eq!(&actual, &expected, "mutations: {:?}", mutations);
        prop_assert_eq!(before.digest == after.digest, expected.is_empty());

        // Every file read, or judged against handoff's record of "before": the same evidence.
        let hashed = repo.fingerprint_with(GitWorkspace::new().with_stat_cache(false));
        prop_assert_eq!(hashed.verified_by.as_deref(), Some("hashed: asked to"));
        prop_assert_eq!(&Fingerprint { verified_by: after.verified_by.clone(), ..hashed }, &after);
        let since = GitWorkspace::new().fingerprint_since(repo.root(), &before).unwrap();
        prop_assert_eq!(since.verified_by.as_deref(), Some("record"));
        prop_assert_eq!(&Fingerprint { verified_by: after.verified_by.clone(), ..since }, &after);

        let ours: BTreeSet<(String, bool, bool, bool, bool)> = after
            .changes
            .iter()
            .map(|c| (c.path.clone(), c.staged, c.unstaged, c.untracked, c.deleted))
            .collect();
        prop_assert_eq!(ours, git_status(&repo));
    }
}
