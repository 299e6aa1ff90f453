//! Snapshots: a new repository holding the worktree's state, for a nested adviser; the source
//! is never written to.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{Snapshot, Workspace, WorkspaceError};
use handoff_git::GitWorkspace;

use crate::support::{TestRepo, changed, git_in};

/// A temporary directory to make snapshots in.
struct Dest {
    _dir: tempfile::TempDir,
    path: Utf8PathBuf,
}

fn dest() -> Dest {
    let dir = tempfile::tempdir().unwrap();
    let parent = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    Dest {
        _dir: dir,
        path: parent.join("snap"),
    }
}

fn snapshot(repo: &TestRepo, dest: &Utf8Path) -> Snapshot {
    GitWorkspace::new().snapshot(repo.root(), dest).unwrap()
}

/// Every file below `dir`: content (a link's target) and modification time.
fn files(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let content = if meta.is_file() {
                std::fs::read(&path).unwrap()
            } else if meta.is_symlink() {
                std::fs::read_link(&path)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                Vec::new()
            };
            out.insert(
                path.display().to_string(),
                (content, meta.modified().unwrap()),
            );
        }
    }
    out
}

/// Asserts that two [`files`] listings are equal, naming the paths that differ.
fn assert_same(
    before: &BTreeMap<String, (Vec<u8>, SystemTime)>,
    after: &BTreeMap<String, (Vec<u8>, SystemTime)>,
) {
    let differ: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|key| before.get(*key) != after.get(*key))
        .collect();
    assert!(differ.is_empty(), "changed: {differ:?}");
}

fn loose_objects(git_dir: &Path) -> usize {
    std::fs::read_dir(git_dir.join("objects"))
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_name().len() == 2)
        .map(|entry| std::fs::read_dir(entry.path()).unwrap().count())
        .sum()
}

fn is_executable(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o100
        != 0
}

fn set_executable(path: &Path, exec: bool) {
    let mode = if exec { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `git ls-tree -r` of the snapshot's HEAD: path → "mode id".
fn tree(dir: &Utf8Path) -> BTreeMap<String, String> {
    git_in(dir.as_std_path(), &["ls-tree", "-r", "HEAD"])
        .lines()
        .map(|line| {
            let (meta, path) = line.split_once('\t').unwrap();
            let mut parts = meta.split(' ');
            let mode = parts.next().unwrap();
            let id = parts.nth(1).unwrap();
            (path.to_owned(), format!("{mode} {id}"))
        })
        .collect()
}

/// Asserts that git and the crate both see the snapshot's worktree as clean.
fn assert_clean(dir: &Utf8Path) {
    assert_eq!(
        git_in(dir.as_std_path(), &["status", "--porcelain", "--ignored"]),
        ""
    );
    let fingerprint = GitWorkspace::new().fingerprint(dir).unwrap();
    assert!(fingerprint.changes.is_empty(), "{:?}", fingerprint.changes);
}

/// A repository with every kind of change: modified, staged, untracked, ignored, deleted,
/// executable, a symbolic link, a mode change, files in subdirectories.
fn busy_repo() -> TestRepo {
    let repo = TestRepo::with_commit();
    repo.write("gone.txt", "to be deleted\n");
    repo.write("run.sh", "#!/bin/sh\necho hi\n");
    set_executable(&repo.path("run.sh"), true);
    std::os::unix::fs::symlink("a.txt", repo.path("link")).unwrap();
    repo.git(&["add", "-A"]);
    repo.commit("more");

    repo.write("a.txt", "alpha, changed\n");
    set_executable(&repo.path("src/lib.rs"), true);
    repo.write("staged.txt", "staged\n");
    repo.git(&["add", "staged.txt"]);
    repo.write("notes/todo.md", "untracked in a new directory\n");
    repo.write("src/new.rs", "untracked in a tracked directory\n");
    repo.write("debug.log", "ignored\n");
    repo.write("target/out.bin", "ignored directory\n");
    repo.write(".git/info/exclude", "secret.txt\n");
    repo.write("secret.txt", "excluded\n");
    repo.remove("gone.txt");
    repo
}

#[test]
fn a_snapshot_holds_the_worktree_as_it_is() {
    let repo = busy_repo();
    let dest = dest();
    let head = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let snap = snapshot(&repo, &dest.path);

    assert_eq!(snap.source_root, repo.root());
    assert_eq!(snap.root, dest.path);
    assert_eq!(snap.base.as_deref(), Some(head.as_str()));
    // .gitignore a.txt link notes/todo.md run.sh src/lib.rs src/new.rs staged.txt
    assert_eq!(snap.files, 8);

    let read = |rela: &str| std::fs::read_to_string(dest.path.join(rela)).unwrap();
    assert_eq!(read("a.txt"), "alpha, changed\n");
    assert_eq!(read("staged.txt"), "staged\n");
    assert_eq!(read("notes/todo.md"), "untracked in a new directory\n");
    assert_eq!(read("src/new.rs"), "untracked in a tracked directory\n");
    assert_eq!(read("src/lib.rs"), "pub fn f() {}\n");
    for absent in [
        "gone.txt",
        "debug.log",
        "target",
        "secret.txt",
        ".git/worktrees",
    ] {
        assert!(!dest.path.join(absent).exists(), "{absent}");
    }
    assert!(is_executable(dest.path.join("run.sh").as_std_path()));
    assert!(is_executable(dest.path.join("src/lib.rs").as_std_path()));
    assert!(!is_executable(dest.path.join("a.txt").as_std_path()));
    assert_eq!(
        std::fs::read_link(dest.path.join("link")).unwrap(),
        Path::new("a.txt")
    );
    let mode = std::fs::metadata(&dest.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);

    // The commit, and its tree, as git sees them.
    let log = git_in(
        dest.path.as_std_path(),
        &["log", "--format=%H %P|%an <%ae>|%s"],
    );
    let first = log.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "{} {head}|handoff <handoff@localhost>|handoff snapshot of {}",
            snap.commit,
            repo.root()
        )
    );
    assert_eq!(log.lines().count(), 3, "{log}");
    let detached = git_in(
        dest.path.as_std_path(),
        &["rev-parse", "--symbolic-full-name", "HEAD"],
    );
    assert_eq!(detached.trim(), "HEAD");
    let tree = tree(&dest.path);
    let modes: Vec<(&str, &str)> = tree
        .iter()
        .map(|(path, state)| (path.as_str(), &state[..6]))
        .collect();
    assert_eq!(
        modes,
        [
            (".gitignore", "100644"),
            ("a.txt", "100644"),
            ("link", "120000"),
            ("notes/todo.md", "100644"),
            ("run.sh", "100755"),
            ("src/lib.rs", "100755"),
            ("src/new.rs", "100644"),
            ("staged.txt", "100644"),
        ]
    );
    let listing = git_in(dest.path.as_std_path(), &["cat-file", "-p", "HEAD^{tree}"]);
    assert!(listing.contains("\tsrc\n"), "{listing}");
    assert_eq!(
        git_in(dest.path.as_std_path(), &["cat-file", "-p", "HEAD:link"]),
        "a.txt"
    );
    // What the source's commit holds is read through the alternates; what is new is the
    // snapshot's own.
    git_in(
        dest.path.as_std_path(),
        &["fsck", "--no-dangling", "--strict"],
    );
    let diff = git_in(
        dest.path.as_std_path(),
        &["diff", "--name-status", "HEAD^", "HEAD"],
    );
    assert_eq!(
        diff,
        "M\ta.txt\nD\tgone.txt\nA\tnotes/todo.md\nM\tsrc/lib.rs\nA\tsrc/new.rs\nA\tstaged.txt\n"
    );

    assert_clean(&dest.path);
}

#[test]
fn the_source_repository_is_not_written_to() {
    let repo = busy_repo();
    let git_before = files(&repo.path(".git"));
    let loose_before = loose_objects(&repo.path(".git"));
    let fingerprint_before = repo.fingerprint();
    let worktree_before = files(repo.root().as_std_path());

    let dest = dest();
    let snap = snapshot(&repo, &dest.path);

    assert_same(&git_before, &files(&repo.path(".git")));
    assert_eq!(loose_objects(&repo.path(".git")), loose_before);
    assert_same(&worktree_before, &files(repo.root().as_std_path()));
    assert!(changed(&fingerprint_before, &repo.fingerprint()).is_empty());
    // The new content went to the snapshot's own object database.
    let source_has = |id: &str| {
        std::process::Command::new("git")
            .args(["cat-file", "-e", id])
            .current_dir(repo.root())
            .status()
            .unwrap()
            .success()
    };
    assert!(!source_has(&snap.commit));
    assert!(loose_objects(&dest.path.join(".git").into_std_path_buf()) > 0);
    let alternates =
        std::fs::read_to_string(dest.path.join(".git/objects/info/alternates")).unwrap();
    assert_eq!(
        alternates,
        format!("{}\n", repo.path(".git/objects").display())
    );

    // Working, committing and tidying up in the snapshot leaves the source alone too.
    std::fs::write(dest.path.join("a.txt"), "the adviser writes\n").unwrap();
    std::fs::write(dest.path.join("adviser.txt"), "new\n").unwrap();
    git_in(dest.path.as_std_path(), &["add", "-A"]);
    git_in(dest.path.as_std_path(), &["commit", "-q", "-m", "adviser"]);
    git_in(dest.path.as_std_path(), &["gc", "-q", "--prune=now"]);
    // Git "freshens" an object it would write but finds in an alternate by touching its file:
    // modification times of the source's objects may move; nothing else does.
    let content = |files: BTreeMap<String, (Vec<u8>, SystemTime)>| -> BTreeMap<String, Vec<u8>> {
        files
            .into_iter()
            .map(|(path, (bytes, _))| (path, bytes))
            .collect()
    };
    assert_eq!(
        content(files(&repo.path(".git"))),
        content(git_before.clone())
    );
    let objects = format!("{}/", repo.path(".git/objects").display());
    let touched = |files: &BTreeMap<String, (Vec<u8>, SystemTime)>| {
        files
            .iter()
            .filter(|(path, _)| !path.starts_with(&objects))
            .map(|(path, state)| (path.clone(), state.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_same(&touched(&git_before), &touched(&files(&repo.path(".git"))));
    assert_same(
        &touched(&worktree_before),
        &touched(&files(repo.root().as_std_path())),
    );
    assert!(changed(&fingerprint_before, &repo.fingerprint()).is_empty());
}

#[test]
fn unchanged_content_is_not_copied_into_the_snapshots_objects() {
    let repo = TestRepo::with_commit();
    for i in 0..50 {
        repo.write(&format!("d{}/f{i}.txt", i % 5), format!("file {i}\n"));
    }
    repo.git(&["add", "-A"]);
    repo.commit("files");
    repo.write("d1/f1.txt", "changed\n");

    let dest = dest();
    let snap = snapshot(&repo, &dest.path);
    assert_eq!(snap.files, 53);
    // The changed blob, the trees above it (`d1` and the root) and the commit.
    assert_eq!(loose_objects(dest.path.join(".git").as_std_path()), 4);
    assert_clean(&dest.path);
}

#[test]
fn an_unborn_branch_makes_a_root_commit() {
    let repo = TestRepo::init();
    repo.write("a.txt", "a\n");
    repo.write("dir/b.txt", "b\n");
    repo.write("dir/staged.txt", "s\n");
    repo.git(&["add", "dir/staged.txt"]);
    let git_before = files(&repo.path(".git"));

    let dest = dest();
    let snap = snapshot(&repo, &dest.path);
    assert_eq!(snap.base, None);
    assert_eq!(snap.files, 3);
    let log = git_in(dest.path.as_std_path(), &["log", "--format=%H|%P"]);
    assert_eq!(log, format!("{}|\n", snap.commit));
    assert_eq!(
        tree(&dest.path).keys().collect::<Vec<_>>(),
        ["a.txt", "dir/b.txt", "dir/staged.txt"]
    );
    assert_clean(&dest.path);
    assert_same(&git_before, &files(&repo.path(".git")));
}

#[test]
fn an_empty_worktree_makes_an_empty_tree() {
    let repo = TestRepo::init();
    let dest = dest();
    let snap = snapshot(&repo, &dest.path);
    assert_eq!(snap.files, 0);
    assert_eq!(
        git_in(dest.path.as_std_path(), &["rev-parse", "HEAD^{tree}"]).trim(),
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    );
    assert_clean(&dest.path);
}

#[test]
fn a_snapshot_can_be_taken_from_a_subdirectory_and_a_linked_worktree() {
    let repo = TestRepo::with_commit();
    let dir = tempfile::tempdir().unwrap();
    let linked = dir.path().canonicalize().unwrap().join("wt");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        linked.to_str().unwrap(),
        "-b",
        "side",
    ]);
    std::fs::write(linked.join("side.txt"), "only in the linked worktree\n").unwrap();
    let git_before = files(&repo.path(".git"));

    let dest = dest();
    let cwd = Utf8PathBuf::from_path_buf(linked.join("src")).unwrap();
    let snap = GitWorkspace::new().snapshot(&cwd, &dest.path).unwrap();
    assert_eq!(snap.source_root.as_std_path(), linked);
    assert_eq!(
        std::fs::read_to_string(dest.path.join("side.txt")).unwrap(),
        "only in the linked worktree\n"
    );
    // The alternates name the common directory's objects.
    let alternates =
        std::fs::read_to_string(dest.path.join(".git/objects/info/alternates")).unwrap();
    assert_eq!(
        alternates,
        format!("{}\n", repo.path(".git/objects").display())
    );
    git_in(dest.path.as_std_path(), &["cat-file", "-p", "HEAD^:a.txt"]);
    assert_clean(&dest.path);
    assert_same(&git_before, &files(&repo.path(".git")));
}

#[test]
fn submodules_stay_gitlinks() {
    let upstream = TestRepo::with_commit();
    let repo = TestRepo::with_commit();
    repo.git(&["submodule", "add", "-q", upstream.root().as_str(), "sub"]);
    repo.commit("add submodule");
    std::fs::write(repo.path("sub/a.txt"), "edited in the submodule\n").unwrap();
    let recorded = repo.git(&["rev-parse", "HEAD:sub"]).trim().to_owned();

    let dest = dest();
    let snap = snapshot(&repo, &dest.path);
    assert_eq!(tree(&dest.path)["sub"], format!("160000 {recorded}"));
    // Checked out as an empty directory, like a submodule that is not initialized.
    assert_eq!(std::fs::read_dir(dest.path.join("sub")).unwrap().count(), 0);
    // .gitignore .gitmodules a.txt src/lib.rs
    assert_eq!(snap.files, 4);
    assert_clean(&dest.path);
}

#[test]
fn skip_worktree_entries_keep_the_index_content() {
    let repo = TestRepo::with_commit();
    let blob = repo
        .git(&["rev-parse", "HEAD:src/lib.rs"])
        .trim()
        .to_owned();
    repo.git(&["update-index", "--skip-worktree", "src/lib.rs"]);
    repo.remove("src/lib.rs");

    let dest = dest();
    let snap = snapshot(&repo, &dest.path);
    assert_eq!(tree(&dest.path)["src/lib.rs"], format!("100644 {blob}"));
    assert!(!dest.path.join("src/lib.rs").exists());
    assert_eq!(snap.files, 2);
    let flagged = git_in(dest.path.as_std_path(), &["ls-files", "-t"]);
    assert!(flagged.contains("S src/lib.rs"), "{flagged}");
    assert_clean(&dest.path);
}

#[test]
fn a_sparse_index_is_expanded() {
    let repo = TestRepo::with_commit();
    repo.write("docs/guide.md", "guide\n");
    repo.write("docs/deep/more.md", "more\n");
    repo.git(&["add", "-A"]);
    repo.commit("docs");
    repo.git(&["sparse-checkout", "set", "--cone", "--sparse-index", "src"]);
    assert!(!repo.path("docs").exists());
    let docs = repo.git(&["rev-parse", "HEAD:docs"]).trim().to_owned();

    let dest = dest();
    snapshot(&repo, &dest.path);
    assert_eq!(
        git_in(dest.path.as_std_path(), &["rev-parse", "HEAD:docs"]).trim(),
        docs
    );
    assert!(!dest.path.join("docs").exists());
    let flagged = git_in(dest.path.as_std_path(), &["ls-files", "-t"]);
    assert!(flagged.contains("S docs/deep/more.md"), "{flagged}");
    assert_clean(&dest.path);
}

#[test]
fn file_content_is_taken_as_bytes_whatever_the_attributes_say() {
    let repo = TestRepo::with_commit();
    repo.write(".gitattributes", "* text=auto\n");
    repo.write("crlf.txt", "one\r\ntwo\r\n");
    let dest = dest();
    snapshot(&repo, &dest.path);
    assert_eq!(
        std::fs::read(dest.path.join("crlf.txt")).unwrap(),
        b"one\r\ntwo\r\n"
    );
    // An index older than every file makes git hash each one again, through the attributes.
    let index = std::fs::File::options()
        .write(true)
        .open(dest.path.join(".git/index"))
        .unwrap();
    index
        .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
        .unwrap();
    assert_clean(&dest.path);
}

#[test]
fn large_files_are_streamed() {
    let repo = TestRepo::with_commit();
    let big: Vec<u8> = (0..9 * 1024 * 1024 + 17).map(|i| (i % 251) as u8).collect();
    repo.write("big.bin", &big);
    let dest = dest();
    snapshot(&repo, &dest.path);
    assert_eq!(std::fs::read(dest.path.join("big.bin")).unwrap(), big);
    let expected = repo.git(&["hash-object", "big.bin"]).trim().to_owned();
    assert_eq!(tree(&dest.path)["big.bin"], format!("100644 {expected}"));
    assert_clean(&dest.path);
}

#[test]
fn a_symlinked_directory_is_not_followed() {
    let repo = TestRepo::with_commit();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("lib.rs"), "outside the worktree\n").unwrap();
    // `src` (tracked, holding `src/lib.rs`) becomes a link to a directory elsewhere.
    std::fs::remove_dir_all(repo.path("src")).unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.path("src")).unwrap();

    let dest = dest();
    snapshot(&repo, &dest.path);
    // The link is untracked content now; what it points to is not read.
    let tree = tree(&dest.path);
    assert_eq!(&tree["src"][..6], "120000");
    assert!(!tree.contains_key("src/lib.rs"));
    assert!(
        dest.path
            .join("src")
            .symlink_metadata()
            .unwrap()
            .is_symlink()
    );
    assert_clean(&dest.path);
}

#[test]
fn the_destination_must_be_new_and_outside_the_repository() {
    let repo = TestRepo::with_commit();
    let workspace = GitWorkspace::new();

    let dest = dest();
    std::fs::create_dir(&dest.path).unwrap();
    let err = workspace.snapshot(repo.root(), &dest.path).unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
        "{err:?}"
    );
    assert_eq!(std::fs::read_dir(&dest.path).unwrap().count(), 0);

    let missing = dest.path.join("no/such/parent");
    let err = workspace.snapshot(repo.root(), &missing).unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{err:?}"
    );

    let git_before = files(&repo.path(".git"));
    for inside in [repo.root().join("snap"), repo.root().join(".git/snap")] {
        let err = workspace.snapshot(repo.root(), &inside).unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::Io { source, .. } if source.kind() == std::io::ErrorKind::InvalidInput),
            "{err:?}"
        );
        assert!(!inside.exists());
    }
    assert_same(&git_before, &files(&repo.path(".git")));

    let not_a_repo = tempfile::tempdir().unwrap();
    let cwd = Utf8PathBuf::from_path_buf(not_a_repo.path().to_owned()).unwrap();
    let err = workspace
        .snapshot(&cwd, &dest.path.join("other"))
        .unwrap_err();
    assert!(
        matches!(err, WorkspaceError::NotAWorktree { .. }),
        "{err:?}"
    );
    assert!(!dest.path.join("other").exists());
}

/// CPU time of this process so far: user and system, in clock ticks (10 ms).
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let field = |i: usize| fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0);
    (field(11), field(12))
}

/// Many files, most unchanged: timed (`cargo test -p handoff-git -- --ignored --nocapture`).
#[test]
#[ignore]
fn ten_thousand_files() {
    let repo = TestRepo::init();
    for i in 0..10_000 {
        repo.write(
            &format!("d{}/e{}/file{i}.txt", i % 10, (i / 10) % 10),
            format!("content of file {i}\n"),
        );
    }
    repo.git(&["add", "-A"]);
    // No `gc --auto` in the background, competing for the disk while the snapshot is timed.
    repo.git(&["-c", "gc.auto=0", "commit", "-q", "-m", "many"]);
    for i in (0..10_000).step_by(100) {
        repo.write(
            &format!("d{}/e{}/file{i}.txt", i % 10, (i / 10) % 10),
            "changed\n",
        );
    }
    for i in 0..1000 {
        repo.write(&format!("new/n{i}.txt"), format!("new {i}\n"));
    }

    let dest = dest();
    let (user, system) = cpu_ticks();
    let start = Instant::now();
    let snap = snapshot(&repo, &dest.path);
    let elapsed = start.elapsed();
    let (user_after, system_after) = cpu_ticks();
    eprintln!(
        "snapshot of {} files: {elapsed:?} ({} ms user, {} ms system)",
        snap.files,
        (user_after - user) * 10,
        (system_after - system) * 10
    );
    assert_eq!(snap.files, 11_000);
    // Bound by creating inodes; generous, to catch only worse than linear behaviour.
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
    assert_clean(&dest.path);
}
