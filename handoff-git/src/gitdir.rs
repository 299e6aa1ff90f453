//! The part of a repository's state that lives in its git directory rather than in the worktree:
//! HEAD, refs (loose and packed), hooks, config, `info/*`, pseudo-refs and linked worktrees — and
//! the refs that other linked worktrees have checked out, which are left out.
//!
//! Entry keys are `.git/` followed by the path inside the git directory: the common directory for
//! shared state (`.git/config`, `.git/hooks/pre-commit`, `.git/refs/heads/main`), this worktree's
//! own git directory for per-worktree state (`.git/HEAD`, `.git/ORIG_HEAD`, `.git/refs/bisect/…`).
//! A ref is keyed by its name whether it is loose or packed, so `git pack-refs` changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice, ByteVec};
use handoff_core::WorkspaceError;

use crate::gitfs::{canonical, file_state, module_dirs, subdirectories, walk};
use crate::hash;
use crate::paths::entry_key;
use crate::programs::programs_digest;
use crate::repo::git_error;

/// The entry that records what `.git/HEAD` says: the branch it names, or the commit it holds when
/// detached. (A commit moves the branch, `.git/refs/heads/<branch>`, not HEAD.)
pub const HEAD_ENTRY: &str = ".git/HEAD";

/// Pseudo-refs of a worktree that mutating commands leave behind.
const PSEUDO_REFS: [&str; 8] = [
    "ORIG_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "BISECT_HEAD",
    "FETCH_HEAD",
    "AUTO_MERGE",
];

/// A worktree's state files that change what git does next or shows: an operation in progress
/// (its todo list may hold `exec` lines), the message a commit will take, a bisection (its
/// `BISECT_RUN` is a command). Not `COMMIT_EDITMSG` or `TAG_EDITMSG`: every commit or tag
/// rewrites them and git reads neither back.
const STATE_FILES: [&str; 14] = [
    "rebase-merge",
    "rebase-apply",
    "sequencer",
    "MERGE_MSG",
    "MERGE_MODE",
    "MERGE_RR",
    "SQUASH_MSG",
    "BISECT_LOG",
    "BISECT_START",
    "BISECT_TERMS",
    "BISECT_NAMES",
    "BISECT_EXPECTED_REV",
    "BISECT_ANCESTORS_OK",
    "BISECT_RUN",
];

/// The repository's files that change what git does or shows: a shallow boundary (hides
/// history), object stores borrowed from elsewhere, old-style remotes, the description, and the
/// conflict resolutions `git rerere` records and replays at a later merge without asking.
const COMMON_FILES: [&str; 7] = [
    "shallow",
    "objects/info/alternates",
    "objects/info/http-alternates",
    "remotes",
    "branches",
    "description",
    "rr-cache",
];

/// Files under a hashed directory that git's housekeeping regenerates from the repository
/// itself and that change nothing git does: `git gc`, `gc --auto`, `maintenance run` and
/// `update-server-info` rewrite them, so they are no one's change. (`objects/info/packs`,
/// commit-graphs, the multi-pack-index, `.bitmap`/`.rev` files, `gc.log` and `gc.pid` are in
/// no hashed directory.)
const DERIVED_FILES: [&str; 1] = ["info/refs"];

/// The files of a git directory (a submodule's, under `modules/`) that run programs or change
/// what git does there.
const MODULE_FILES: [&str; 6] = [
    "config",
    "config.worktree",
    "info",
    "hooks",
    "shallow",
    "objects/info/alternates",
];

/// Ref namespaces that belong to one worktree rather than to the repository.
const PER_WORKTREE_REFS: [&str; 3] = ["refs/bisect/", "refs/worktree/", "refs/rewritten/"];

/// What the git directory contributes to a fingerprint.
#[derive(Debug, Default)]
pub(crate) struct GitDirState {
    /// Entries keyed `.git/…`, or by absolute path for hooks of a `core.hooksPath` outside the
    /// repository.
    pub(crate) entries: Vec<(String, String)>,
    /// Hooks of a `core.hooksPath` inside the worktree, keyed by worktree path: they count only
    /// where the worktree part of the fingerprint does not cover them (ignored files).
    pub(crate) worktree_hooks: Vec<(String, String)>,
    /// The `core.hooksPath` directory when it lies inside the worktree, as a worktree path
    /// ending in `/`.
    pub(crate) hooks_dir: Option<String>,
    /// Refs checked out in other linked worktrees, left out; sorted.
    pub(crate) excluded_refs: Vec<String>,
}

/// Reads the git-directory state of `repo`, whose worktree is at `root`.
pub(crate) fn scan(repo: &gix::Repository, root: &Path) -> Result<GitDirState, WorkspaceError> {
    let kind = repo.object_hash();
    let git_dir = repo.git_dir();
    let common = repo.common_dir();
    let linked = canonical(git_dir) != canonical(common);
    let own_id: Option<String> = linked
        .then(|| {
            git_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .flatten();
    let mut out = GitDirState::default();
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| WorkspaceError::Io {
            path: camino::Utf8PathBuf::from(path.to_string_lossy().into_owned()),
            source,
        }
    };

    // HEAD, and which branches the other worktrees have checked out.
    let head_path = git_dir.join("HEAD");
    let head = std::fs::read(&head_path).map_err(io(&head_path))?;
    out.entries
        .push((HEAD_ENTRY.to_owned(), head_state(kind, &head)?));
    let mut excluded = BTreeSet::new();
    if linked && !repo.config_snapshot().boolean("core.bare").unwrap_or(false) {
        excluded.extend(checked_out(common));
    }
    let worktrees = common.join("worktrees");
    for (id, dir) in subdirectories(&worktrees).map_err(io(&worktrees))? {
        let gitdir = std::fs::read(dir.join("gitdir")).unwrap_or_default();
        out.entries.push((
            format!(".git/worktrees/{id}"),
            format!("worktree {}", gitdir.trim().as_bstr()),
        ));
        if own_id.as_deref() != Some(id.as_str()) {
            excluded.extend(checked_out(&dir));
        }
    }
    if let Some(own) = symbolic_target(&head) {
        excluded.remove(&own);
    }

    // Refs: loose ones win over packed ones of the same name.
    let mut refs: BTreeMap<BString, String> = BTreeMap::new();
    let mut loose = |dir: &Path, only_per_worktree: bool| -> Result<(), WorkspaceError> {
        walk(&dir.join("refs"), "refs".into(), &mut |path, name, meta| {
            let skip = name.ends_with(b".lock")
                || !meta.is_file()
                || (linked && is_per_worktree(name) != only_per_worktree);
            if !skip {
                let content = std::fs::read(path)?;
                refs.insert(name.to_owned(), loose_ref_state(kind, &content)?);
            }
            Ok(())
        })
        .map_err(io(&dir.join("refs")))
    };
    loose(common, false)?;
    if linked {
        loose(git_dir, true)?;
    }
    let packed_path = common.join("packed-refs");
    match std::fs::read(&packed_path) {
        Ok(packed) => {
            for line in packed.lines() {
                if line.starts_with(b"#") || line.starts_with(b"^") {
                    continue;
                }
                let Some((id, name)) = line.split_once_str(" ") else {
                    continue;
                };
                let name = name.trim_end();
                if linked && is_per_worktree(name.as_bstr()) {
                    continue;
                }
                refs.entry(name.into())
                    .or_insert_with(|| format!("ref {}", id.as_bstr()));
            }
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(io(&packed_path)(err)),
    }
    for (name, state) in refs {
        let name = entry_key(name.as_bstr());
        if !excluded.contains(&name) {
            out.entries.push((format!(".git/{name}"), state));
        }
    }
    out.excluded_refs = excluded.into_iter().collect();

    // Files: pseudo-refs, config, info/*, hooks.
    let mut files = |dir: &Path, rela: &str, key: &str| -> Result<(), WorkspaceError> {
        let path = resolved_hooks(dir, rela);
        walk(&path, rela.into(), &mut |path, rela, meta| {
            if DERIVED_FILES.iter().any(|d| rela == d.as_bytes()) {
                return Ok(());
            }
            if let Some(mut state) = file_state(kind, path, meta)? {
                let name = rela.rsplit_str("/").next().unwrap_or(rela);
                if meta.is_file() && (name == b"config" || name == b"config.worktree") {
                    state.push_str(handoff_core::flags::PROGRAMS_MARKER);
                    state.push_str(&programs_digest(&std::fs::read(path)?));
                }
                out.entries
                    .push((format!("{key}/{}", entry_key(rela)), state));
            }
            Ok(())
        })
        .map_err(io(&path))
    };
    for name in PSEUDO_REFS.iter().chain(&STATE_FILES) {
        files(git_dir, name, ".git")?;
    }
    for name in COMMON_FILES {
        files(common, name, ".git")?;
    }
    // Submodules' git directories: their configuration and hooks, never their objects.
    for (rela, dir) in module_dirs(&common.join("modules"), "modules").map_err(io(common))? {
        for name in MODULE_FILES {
            files(&dir, name, &format!(".git/{rela}"))?;
        }
    }
    files(common, "config", ".git")?;
    files(common, "config.worktree", ".git")?;
    files(common, "info", ".git")?;
    files(common, "hooks", ".git")?;
    if let Some(id) = &own_id {
        let key = format!(".git/worktrees/{id}");
        files(git_dir, "config.worktree", &key)?;
        files(git_dir, "info", &key)?;
    }
    hooks_path(repo, root, common, &mut out)?;
    Ok(out)
}

/// The worktree's `.git` (file or directory), the git directory, the common directory and the
/// `core.hooksPath` directory of `repo`, each once, as absolute paths with symbolic links
/// resolved (see `Workspace::protected_paths`): those that exist, and the hooks directory even
/// when it does not (last).
pub(crate) fn protected_paths(
    repo: &gix::Repository,
) -> Result<Vec<camino::Utf8PathBuf>, WorkspaceError> {
    let mut found: Vec<PathBuf> = Vec::new();
    if let Some(root) = repo.workdir() {
        found.push(root.join(".git"));
    }
    found.push(repo.git_dir().to_owned());
    found.push(repo.common_dir().to_owned());
    // A hooks directory that is a symbolic link is protected where it leads.
    let hooks = repo.common_dir().join("hooks");
    if std::fs::symlink_metadata(&hooks).is_ok_and(|m| m.file_type().is_symlink()) {
        found.push(canonical(&hooks));
    }
    let configured = repo
        .config_snapshot()
        .trusted_path("core.hooksPath")
        .map_err(|err| git_error("cannot read core.hooksPath", err))?;
    // The hooks directory is protected even before it exists (husky's `.husky/_` before
    // `npm install`): a run could otherwise make it and fill it with hooks. Its path is the
    // nearest existing ancestor, resolved, with the rest appended.
    let mut missing_hooks: Option<PathBuf> = None;
    if let Some(configured) = configured {
        let base = repo.workdir().unwrap_or_else(|| repo.git_dir());
        let path = std::path::absolute(base.join(configured)).unwrap_or_default();
        if std::fs::symlink_metadata(&path).is_ok() {
            found.push(path);
        } else {
            let mut existing = path.as_path();
            let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
            while std::fs::symlink_metadata(existing).is_err() {
                match (existing.parent(), existing.file_name()) {
                    (Some(parent), Some(name)) => {
                        rest.push(name);
                        existing = parent;
                    }
                    _ => break,
                }
            }
            let mut resolved = canonical(existing);
            resolved.extend(rest.iter().rev());
            missing_hooks = Some(resolved);
        }
    }
    let mut out: Vec<camino::Utf8PathBuf> = Vec::new();
    for path in found {
        let path = std::path::absolute(&path).unwrap_or(path);
        // A `.git` file is protected as itself, not as the directory it names.
        let path = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) if path.is_file() => canonical(parent).join(name),
            _ => canonical(&path),
        };
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        let path = camino::Utf8PathBuf::from_path_buf(path).map_err(|p| WorkspaceError::Git {
            message: format!("the git path '{}' is not UTF-8", p.display()),
        })?;
        if !out.contains(&path) {
            out.push(path);
        }
    }
    if let Some(path) = missing_hooks.and_then(|p| camino::Utf8PathBuf::from_path_buf(p).ok()) {
        out.push(path);
    }
    Ok(out)
}

/// The worktree's own git directory and the common one of `repo` (once when they are the
/// same), absolute with links resolved, keyed as fingerprints key their paths.
pub(crate) fn git_dirs(
    repo: &gix::Repository,
) -> Result<Vec<handoff_core::GitDir>, WorkspaceError> {
    let utf8 = |p: PathBuf| {
        camino::Utf8PathBuf::from_path_buf(p).map_err(|p| WorkspaceError::Git {
            message: format!("the git path '{}' is not UTF-8", p.display()),
        })
    };
    let common = canonical(repo.common_dir());
    let own = canonical(repo.git_dir());
    let mut out = vec![handoff_core::GitDir {
        path: utf8(common.clone())?,
        key: ".git".into(),
    }];
    if own != common {
        let id = own
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.insert(
            0,
            handoff_core::GitDir {
                path: utf8(own)?,
                key: format!(".git/worktrees/{id}"),
            },
        );
    }
    Ok(out)
}

/// The hooks of `core.hooksPath`, when it names a directory other than `<common>/hooks`.
fn hooks_path(
    repo: &gix::Repository,
    root: &Path,
    common: &Path,
    out: &mut GitDirState,
) -> Result<(), WorkspaceError> {
    let configured = repo
        .config_snapshot()
        .trusted_path("core.hooksPath")
        .map_err(|err| git_error("cannot read core.hooksPath", err))?;
    let Some(configured) = configured else {
        return Ok(());
    };
    let dir = canonical(&root.join(configured));
    if dir == canonical(&common.join("hooks")) {
        return Ok(());
    }
    let kind = repo.object_hash();
    let root = canonical(root);
    let inside = dir.strip_prefix(&root).ok().map(Path::to_owned);
    if let Some(inside) = &inside {
        let key = entry_key(gix::path::os_str_into_bstr(inside.as_os_str()).unwrap_or_default());
        out.hooks_dir = Some(format!("{key}/"));
    }
    let mut found = Vec::new();
    walk(&dir, BString::default(), &mut |path, rela, meta| {
        if let Some(state) = file_state(kind, path, meta)? {
            found.push((rela.to_owned(), state));
        }
        Ok(())
    })
    .map_err(|source| WorkspaceError::Io {
        path: camino::Utf8PathBuf::from(dir.to_string_lossy().into_owned()),
        source,
    })?;
    for (rela, state) in found {
        let rela = rela.trim_start_with(|c| c == '/');
        match &inside {
            Some(inside) => {
                let mut key = BString::from(
                    gix::path::os_str_into_bstr(inside.as_os_str()).unwrap_or_default(),
                );
                if !key.is_empty() {
                    key.push_byte(b'/');
                }
                key.push_str(rela);
                out.worktree_hooks
                    .push((entry_key(key.as_bstr()), format!("hook {state}")));
            }
            None => {
                let mut key =
                    BString::from(gix::path::os_str_into_bstr(dir.as_os_str()).unwrap_or_default());
                key.push_byte(b'/');
                key.push_str(rela);
                out.entries.push((entry_key(key.as_bstr()), state));
            }
        }
    }
    Ok(())
}

/// What `.git/HEAD` holds: `ref <name>` or `detached <id>`.
fn head_state(kind: gix::hash::Kind, content: &[u8]) -> Result<String, WorkspaceError> {
    if let Some(target) = symbolic_target(content) {
        return Ok(format!("ref {target}"));
    }
    let text = content.trim();
    if gix::ObjectId::from_hex(text).is_ok() {
        return Ok(format!("detached {}", text.as_bstr()));
    }
    let id = hash::blob_id(kind, content).map_err(|err| WorkspaceError::Git {
        message: format!("cannot hash HEAD: {err}"),
    })?;
    Ok(format!("invalid {id}"))
}

/// The state of a loose ref: `ref <id>`, `symref <name>`, or `invalid <blob id>` for anything
/// else.
fn loose_ref_state(kind: gix::hash::Kind, content: &[u8]) -> io::Result<String> {
    if let Some(target) = symbolic_target(content) {
        return Ok(format!("symref {target}"));
    }
    let text = content.trim();
    if gix::ObjectId::from_hex(text).is_ok() {
        Ok(format!("ref {}", text.as_bstr()))
    } else {
        Ok(format!("invalid {}", hash::blob_id(kind, content)?))
    }
}

/// The target of a symbolic ref's content (`ref: refs/heads/main`).
fn symbolic_target(content: &[u8]) -> Option<String> {
    let target = content.trim().strip_prefix(b"ref:")?.trim();
    Some(entry_key(target.as_bstr()))
}

/// The branches the worktree with git directory `dir` has checked out: what its HEAD names, and
/// the branch a rebase in progress will move.
fn checked_out(dir: &Path) -> Vec<String> {
    let mut refs = Vec::new();
    if let Ok(head) = std::fs::read(dir.join("HEAD"))
        && let Some(target) = symbolic_target(&head)
    {
        refs.push(target);
    }
    for rebase in ["rebase-merge/head-name", "rebase-apply/head-name"] {
        if let Ok(name) = std::fs::read(dir.join(rebase)) {
            let name = name.trim();
            if name.starts_with(b"refs/") {
                refs.push(entry_key(name.as_bstr()));
            }
        }
    }
    refs
}

fn is_per_worktree(name: &BStr) -> bool {
    PER_WORKTREE_REFS
        .iter()
        .any(|prefix| name.starts_with(prefix.as_bytes()))
}

/// Calls `visit` with the path, the name relative to the walk (`rela` joined with the names
/// below it) and the metadata of `path` and of everything below it; a missing `path` is
/// nothing. Symbolic links are not followed.
/// `dir/rela`, or, for a hooks directory that is a symbolic link to a directory (hook managers
/// make one into the worktree), the directory it leads to: git runs the hooks there, so their
/// files are read there, under `.git/hooks/…` keys.
fn resolved_hooks(dir: &Path, rela: &str) -> PathBuf {
    let path = dir.join(rela);
    if rela == "hooks"
        && std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink())
        && path.is_dir()
    {
        return canonical(&path);
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_states() {
        let k = gix::hash::Kind::Sha1;
        assert_eq!(
            head_state(k, b"ref: refs/heads/main\n").unwrap(),
            "ref refs/heads/main"
        );
        let id = "0123456789012345678901234567890123456789";
        assert_eq!(
            head_state(k, format!("{id}\n").as_bytes()).unwrap(),
            format!("detached {id}")
        );
        assert!(head_state(k, b"garbage").unwrap().starts_with("invalid "));
    }

    #[test]
    fn loose_ref_states() {
        let k = gix::hash::Kind::Sha1;
        let id = "0123456789012345678901234567890123456789";
        assert_eq!(
            loose_ref_state(k, format!("{id}\n").as_bytes()).unwrap(),
            format!("ref {id}")
        );
        assert_eq!(
            loose_ref_state(k, b"ref: refs/heads/x\n").unwrap(),
            "symref refs/heads/x"
        );
        assert!(
            loose_ref_state(k, b"not an id")
                .unwrap()
                .starts_with("invalid ")
        );
    }

    #[test]
    fn per_worktree_namespaces() {
        assert!(is_per_worktree(BStr::new("refs/bisect/bad")));
        assert!(is_per_worktree(BStr::new("refs/worktree/x")));
        assert!(!is_per_worktree(BStr::new("refs/heads/bisect")));
    }
}
