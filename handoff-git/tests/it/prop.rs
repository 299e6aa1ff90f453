//! Properties: random writes and deletes, and random mutations of every kind, are detected iff
//! something actually changed, and exactly where — forgeries of the stat data included, which
//! git and a fingerprint that trusts the index miss, and handoff's own record does not.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use handoff_core::{Fingerprint, Workspace};
use handoff_git::GitWorkspace;

use crate::support::{TestRepo, changed, forge_index};

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
    /// A same-size rewrite (each byte xor the mask) with the mtime set back to its old value.
    Forge(usize, u8),
    /// The same with the mtime set further back, and the index entry's stat data rewritten to
    /// the new file's while its object id is kept: git takes the file for the index's content.
    ForgeIndex(usize, u8),
    /// A write of one of the git directory's state files.
    State(usize, usize),
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
        1 => (name.clone(), 1..=u8::MAX).prop_map(|(i, x)| Mutation::Forge(i, x)),
        3 => (name.clone(), 1..=u8::MAX).prop_map(|(i, x)| Mutation::ForgeIndex(i, x)),
        1 => (0..STATE.len(), 0..STATE_CONTENT.len()).prop_map(|(k, c)| Mutation::State(k, c)),
        1 => name.clone().prop_map(Mutation::Rewrite),
        1 => name.clone().prop_map(Mutation::Touch),
        1 => Just(Mutation::Status),
    ]
}

/// The git directory's state files that change what git does or shows.
const STATE: [&str; 7] = [
    "shallow",
    "objects/info/alternates",
    "rebase-merge/git-rebase-todo",
    "sequencer/todo",
    "MERGE_MSG",
    "description",
    "remotes/x",
];
/// What is written to them: an object id, which `shallow` needs and the others take as text,
/// harmless to the git commands that follow.
const STATE_CONTENT: [&str; 2] = [
    "0000000000000000000000000000000000000000\n",
    "1111111111111111111111111111111111111111\n",
];

/// What the fingerprint should see, as a model.
#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    worktree: BTreeMap<&'static str, Node>,
    index: BTreeMap<&'static str, Node>,
    /// Branch → a number per commit (each commit is new).
    refs: BTreeMap<String, u32>,
    hooks: BTreeMap<String, Vec<u8>>,
    /// The state files, by their path under `.git`.
    state: BTreeMap<&'static str, Vec<u8>>,
    /// Files whose index entry's stat data was forged to match them: git, and a fingerprint
    /// that trusts the index, take them for the index's content.
    forged: BTreeSet<&'static str>,
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
        for name in STATE {
            if self.state.get(name) != other.state.get(name) {
                out.insert(format!(".git/{name}"));
            }
        }
        out
    }

    /// The repository as git sees it through its stat cache: each forged file holds what the
    /// index says.
    fn as_git_sees(&self) -> Model {
        let mut seen = self.clone();
        for &name in &self.forged {
            if let (Some(Node::File(bytes, _)), Some(Node::File(_, exec))) =
                (self.index.get(name), self.worktree.get(name))
            {
                seen.worktree.insert(name, Node::File(bytes.clone(), *exec));
            }
        }
        seen
    }
}

/// Sets the mtime of the file at `path`.
#[cfg(unix)]
fn set_mtime(path: &std::path::Path, mtime: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_modified(mtime))
        .unwrap();
}

/// Rewrites the file `name` in place with the same size and other content (each byte xor
/// `mask`), sets its mtime back to its old one, and returns the new content; `None` when it is
/// not a non-empty file.
#[cfg(unix)]
fn forge(repo: &TestRepo, model: &mut Model, name: &'static str, mask: u8) -> Option<Vec<u8>> {
    let Some(Node::File(bytes, exec)) = model.worktree.get(name) else {
        return None;
    };
    if bytes.is_empty() {
        return None;
    }
    let forged: Vec<u8> = bytes.iter().map(|b| b ^ mask).collect();
    let exec = *exec;
    let path = repo.path(name);
    let ctime = |path: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().ctime()
    };
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let old_ctime = ctime(&path);
    std::fs::write(&path, &forged).unwrap();
    set_mtime(&path, mtime);
    // Git compares whole seconds (so does a fingerprint that trusts the index): within the
    // second of a forged entry's ctime, the stat data cannot tell this rewrite from the file
    // the entry was forged for, and the forgery holds.
    if ctime(&path) != old_ctime {
        model.forged.remove(name);
    }
    model
        .worktree
        .insert(name, Node::File(forged.clone(), exec));
    Some(forged)
}

#[cfg(unix)]
fn set_exec(path: &std::path::Path, exec: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if exec { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The mtime a forged file is given: 2020-09-13, long before any index of the test.
const FORGED_MTIME: std::time::Duration = std::time::Duration::from_secs(1_600_000_000);

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
            model.forged.remove(name);
        }
        Mutation::Delete(i) => {
            if model.worktree.remove(NAMES[*i]).is_some() {
                remove(NAMES[*i]);
                model.forged.remove(NAMES[*i]);
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
                model.forged.remove(from);
            }
        }
        Mutation::Chmod(i) => {
            if let Some(Node::File(_, exec)) = model.worktree.get_mut(NAMES[*i]) {
                *exec = !*exec;
                set_exec(&repo.path(NAMES[*i]), *exec);
                model.forged.remove(NAMES[*i]);
            }
        }
        Mutation::Symlink(i, t) => {
            let name = NAMES[*i];
            remove(name);
            let path = repo.path(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(TARGETS[*t], &path).unwrap();
            model.worktree.insert(name, Node::Link(TARGETS[*t]));
            model.forged.remove(name);
        }
        Mutation::Stage(i) => {
            let name = NAMES[*i];
            // `git add` too trusts the forged stat data: it stages nothing.
            if model.forged.contains(name) {
                repo.git(&["add", "-A", "--", name]);
            } else if model.worktree.contains_key(name) || model.index.contains_key(name) {
                repo.git(&["add", "-A", "--", name]);
                match model.worktree.get(name) {
                    Some(node) => model.index.insert(name, node.clone()),
                    None => model.index.remove(name),
                };
            }
        }
        Mutation::Commit => {
            repo.commit("mutation");
            // A commit ends a merge's message.
            model.state.remove("MERGE_MSG");
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
        Mutation::Forge(i, mask) => {
            forge(repo, model, NAMES[*i], *mask);
        }
        Mutation::ForgeIndex(i, mask) => {
            let name = NAMES[*i];
            // Only where git would take the file for the index's: both files, same mode.
            let same_mode = matches!(
                (model.index.get(name), model.worktree.get(name)),
                (Some(Node::File(_, a)), Some(Node::File(_, b))) if a == b
            );
            if same_mode && forge(repo, model, name, *mask).is_some() {
                // Well before the index was written, so that git does not find the entry racily
                // clean and read the file.
                set_mtime(&repo.path(name), std::time::UNIX_EPOCH + FORGED_MTIME);
                forge_index(repo, name);
                model.forged.insert(name);
            }
        }
        Mutation::State(k, c) => {
            let bytes = STATE_CONTENT[*c].as_bytes();
            repo.write(&format!(".git/{}", STATE[*k]), bytes);
            model.state.insert(STATE[*k], bytes.to_vec());
        }
        Mutation::Rewrite(i) => {
            if let Some(Node::File(bytes, _)) = model.worktree.get(NAMES[*i]) {
                repo.write(NAMES[*i], bytes);
                model.forged.remove(NAMES[*i]);
            }
        }
        Mutation::Touch(i) => {
            if let Some(Node::File(..)) = model.worktree.get(NAMES[*i]) {
                set_mtime(&repo.path(NAMES[*i]), std::time::SystemTime::now());
                model.forged.remove(NAMES[*i]);
            }
        }
        Mutation::Status => {
            repo.git(&["status", "--porcelain"]);
        }
    }
}

/// `git status --porcelain=v2 -uall` as `(path, staged, unstaged, untracked, deleted)`, one
/// entry per path as handoff's view has it: git's two lines for a path whose deletion is staged
/// and that is untracked again are one entry with both.
fn git_status(repo: &TestRepo) -> StatusView {
    let mut paths: BTreeMap<String, (bool, bool, bool, bool)> = BTreeMap::new();
    let out = repo.git(&[
        "-c",
        "status.renames=false",
        "status",
        "--porcelain=v2",
        "-uall",
    ]);
    for line in out.lines() {
        let (path, flags) = if let Some(path) = line.strip_prefix("? ") {
            (path.to_owned(), (false, false, true, false))
        } else if let Some(rest) = line.strip_prefix("1 ") {
            let xy: Vec<char> = rest.chars().take(2).collect();
            let path = rest.splitn(8, ' ').nth(7).unwrap().to_owned();
            (path, (xy[0] != '.', xy[1] != '.', false, xy[1] == 'D'))
        } else {
            continue;
        };
        let entry = paths.entry(path).or_default();
        *entry = (
            entry.0 | flags.0,
            entry.1 | flags.1,
            entry.2 | flags.2,
            entry.3 | flags.3,
        );
    }
    paths
        .into_iter()
        .map(|(path, (staged, unstaged, untracked, deleted))| {
            (path, staged, unstaged, untracked, deleted)
        })
        .collect()
}

/// A status view: `(path, staged, unstaged, untracked, deleted)` per changed path.
type StatusView = BTreeSet<(String, bool, bool, bool, bool)>;

fn status_view(fp: &Fingerprint) -> StatusView {
    fp.changes
        .iter()
        .map(|c| (c.path.clone(), c.staged, c.unstaged, c.untracked, c.deleted))
        .collect()
}

/// A repository holding `files` (committed when asked), and its model.
#[cfg(unix)]
fn setup(files: &BTreeMap<usize, (Vec<u8>, bool)>) -> (TestRepo, Model, u32) {
    let repo = TestRepo::init();
    let mut model = Model::default();
    let mut commits = 0;
    for (&i, (bytes, committed)) in files {
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
    for name in STATE {
        if let Ok(bytes) = std::fs::read(repo.path(&format!(".git/{name}"))) {
            model.state.insert(name, bytes);
        }
    }
    (repo, model, commits)
}

/// Checks the fingerprints of `repo` after `mutations` took it from `start` to `model`, against
/// `before`:
/// - since handoff's record (and hashing every file, which must agree), exactly the model's
///   changes, forgeries included;
/// - trusting the index, exactly what git sees through its stat cache, which forgeries fool;
/// - the status views: the one trusting the index is git's; the one since the record differs
///   from git's only where a forged file differs from the index, which git does not report.
#[cfg(unix)]
fn check(
    repo: &TestRepo,
    start: &Model,
    model: &Model,
    before: &Fingerprint,
    mutations: &[Mutation],
) -> Result<(), TestCaseError> {
    let expected = start.changed(model);
    let since = GitWorkspace::new()
        .fingerprint_since(repo.root(), before)
        .unwrap();
    prop_assert_eq!(since.verified_by.as_deref(), Some("record"));
    let actual: BTreeSet<String> = changed(before, &since).into_iter().collect();
    prop_assert_eq!(&actual, &expected, "mutations: {:?}", mutations);
    prop_assert_eq!(before.digest == since.digest, expected.is_empty());
    let hashed = repo.fingerprint_with(GitWorkspace::new().with_stat_cache(false));
    prop_assert_eq!(hashed.verified_by.as_deref(), Some("hashed: asked to"));
    prop_assert_eq!(
        &Fingerprint {
            verified_by: since.verified_by.clone(),
            ..hashed
        },
        &since
    );

    let fooled = start.changed(&model.as_git_sees());
    let after = repo.fingerprint();
    prop_assert_eq!(after.verified_by.as_deref(), Some("index"));
    let seen: BTreeSet<String> = changed(before, &after).into_iter().collect();
    prop_assert_eq!(&seen, &fooled, "mutations: {:?}", mutations);
    if model.forged.is_empty() {
        prop_assert_eq!(
            &Fingerprint {
                verified_by: since.verified_by.clone(),
                ..after.clone()
            },
            &since
        );
    }

    let git = git_status(repo);
    prop_assert_eq!(&status_view(&after), &git);
    let unforged = |view: &StatusView| -> StatusView {
        view.iter()
            .filter(|(path, ..)| !model.forged.contains(path.as_str()))
            .cloned()
            .collect()
    };
    let ours = status_view(&since);
    prop_assert_eq!(unforged(&ours), unforged(&git));
    for &name in &model.forged {
        // Git says the file is as the index has it; handoff reads what it holds.
        prop_assert!(
            !git.iter()
                .any(|(path, _, unstaged, ..)| path == name && *unstaged),
            "git saw through the forged index: {:?}",
            git
        );
        let differs = model.worktree.get(name) != model.index.get(name);
        let reported = ours
            .iter()
            .any(|(path, _, unstaged, ..)| path == name && *unstaged);
        prop_assert_eq!(reported, differs, "{} in {:?}", name, ours);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random trees and random mutations, forgeries included: the digest changes iff the model
    /// says something changed, `changedFiles` is exactly what changed, a fingerprint that hashes
    /// everything agrees with the one since the record, and the status view is git's.
    #[cfg(unix)]
    #[test]
    fn mutations_are_detected_iff_they_happen(
        files in initial(),
        mutations in proptest::collection::vec(mutation(), 1..10),
    ) {
        let (repo, mut model, mut commits) = setup(&files);
        let before = repo.fingerprint();
        let start = model.clone();
        for m in &mutations {
            apply(&repo, &mut model, &mut commits, m);
        }
        check(&repo, &start, &model, &before, &mutations)?;
    }
}

/// Mostly forgeries, among other mutations.
#[cfg(unix)]
fn forgery() -> impl Strategy<Value = Mutation> {
    let name = 0..NAMES.len();
    prop_oneof![
        2 => (name.clone(), 1..=u8::MAX).prop_map(|(i, x)| Mutation::Forge(i, x)),
        3 => (name, 1..=u8::MAX).prop_map(|(i, x)| Mutation::ForgeIndex(i, x)),
        1 => (0..STATE.len(), 0..STATE_CONTENT.len()).prop_map(|(k, c)| Mutation::State(k, c)),
        2 => mutation(),
    ]
}

/// How many repositories one case of the aged property checks: they age together.
const AGED: usize = 5;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2,
        max_shrink_iters: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The same, with files old enough for handoff's record to vouch for them: the record's
    /// fingerprint reads only what it cannot vouch for, and finds every forgery all the same.
    #[cfg(unix)]
    #[test]
    fn forgeries_are_detected_against_the_record(
        scenarios in proptest::collection::vec(
            (initial(), proptest::collection::vec(forgery(), 1..8)),
            AGED,
        ),
    ) {
        let mut repos: Vec<_> = scenarios.iter().map(|(files, _)| setup(files)).collect();
        // Past the record's timestamp granularity: the first fingerprints record every file.
        std::thread::sleep(std::time::Duration::from_millis(2100));
        for ((repo, model, commits), (_, mutations)) in repos.iter_mut().zip(&scenarios) {
            let before = repo.fingerprint();
            let record = before.record.clone().unwrap();
            for (name, node) in &model.index {
                prop_assert!(
                    record.get(name.as_bytes()).is_some(),
                    "{} ({:?}) is not in the record",
                    name,
                    node
                );
            }
            let start = model.clone();
            for m in mutations {
                apply(repo, model, commits, m);
            }
            check(repo, &start, model, &before, mutations)?;
        }
    }
}
