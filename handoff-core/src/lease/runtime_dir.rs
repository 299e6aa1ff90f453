//! The per-user runtime directory the lease files live in.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};

use camino::{Utf8Path, Utf8PathBuf};

use super::{LeaseError, io_error};

/// The per-user runtime directory, the first of these that is (or can be made) a private
/// directory of the user's:
///
/// 1. `/run/user/<uid>/handoff`, when `/run/user/<uid>` is a directory owned by the user;
/// 2. `/tmp/handoff-<uid>`;
/// 3. `<home>/.local/state/handoff/runtime`, with the home directory from the password
///    database — so that another local user who takes `/tmp/handoff-<uid>` first (a
///    directory of theirs, a symlink) cannot keep handoff from running.
///
/// Each is created 0700 when missing and refused when it is a symlink, not owned by the user,
/// or open to group or others. Nothing here reads the environment (`XDG_RUNTIME_DIR`,
/// `TMPDIR`, `HOME`): a worker must not be able to move it.
pub fn default_runtime_dir() -> Result<Utf8PathBuf, LeaseError> {
    runtime_dir_among(
        nix::unistd::getuid().as_raw(),
        Utf8Path::new("/run/user"),
        Utf8Path::new("/tmp"),
        passwd_home().as_deref(),
    )
}

/// The user's home directory as the password database says (never `$HOME`, which a worker
/// sets), when it is an existing absolute directory; canonical, as paths handed to a `handoff`
/// child (an MCP job's instructions) may have no symlinked ancestor.
pub(crate) fn passwd_home() -> Option<Utf8PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .and_then(|u| Utf8PathBuf::from_path_buf(u.dir).ok())
        .filter(|h| h.is_absolute() && h.is_dir())
        .and_then(|h| h.canonicalize_utf8().ok())
}

/// `<home>/.local/state/handoff/<name>`: the parents made 0700 where missing, the directory
/// itself checked private.
fn private_state_dir(home: &Utf8Path, name: &str) -> Result<Utf8PathBuf, LeaseError> {
    let state = home.join(".local/state/handoff");
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&state)
        .map_err(io_error("cannot create", &state))?;
    let dir = state.join(name);
    ensure_private_dir(&dir)?;
    Ok(dir)
}

/// A private (0700) directory for what agents must not be able to change — a run's directory
/// for its agent, advisers' snapshots of the asking worktree, a continuation's carry scratch,
/// the MCP server's inline instructions: `<home>/.local/state/handoff/work`, with the home
/// directory from the password database. Not under `$TMPDIR` or `/tmp`, which a sandboxed build
/// agent may write (Codex's `workspace-write` can), nor under `/run/user` (memory).
pub fn private_work_dir() -> Result<Utf8PathBuf, LeaseError> {
    let home = passwd_home().ok_or_else(|| LeaseError::UnsafeDir {
        path: Utf8PathBuf::from("~"),
        reason: "the password database names no home directory".to_owned(),
    })?;
    private_state_dir(&home, "work")
}

/// Where handoff's private directories for a run go, first that applies:
///
/// 1. `explicit`, a directory the embedding program chose (`EngineOptions::tmp_dir`; tests
///    give a directory of their own) — it is then the program's job to pick one no agent may
///    write;
/// 2. the private work directory, [`private_work_dir`];
/// 3. `/tmp`, only when the password database names no home directory.
///
/// Never `$TMPDIR` or `$HOME`: the environment does not choose it. A work directory that is
/// there but not private (a symlink, another owner, open to others) is refused, not
/// replaced by `/tmp`.
pub fn private_dir_base(explicit: Option<&Utf8Path>) -> Result<Utf8PathBuf, LeaseError> {
    private_dir_base_among(explicit, passwd_home().as_deref(), Utf8Path::new("/tmp"))
}

/// [`private_dir_base`] with the home directory and the last resort given.
fn private_dir_base_among(
    explicit: Option<&Utf8Path>,
    home: Option<&Utf8Path>,
    tmp: &Utf8Path,
) -> Result<Utf8PathBuf, LeaseError> {
    if let Some(dir) = explicit {
        return Ok(dir.to_owned());
    }
    match home.filter(|h| h.is_absolute() && h.is_dir()) {
        Some(home) => private_state_dir(home, "work"),
        None => Ok(tmp.to_owned()),
    }
}

/// [`default_runtime_dir`] with its three places rooted at `run_user`, `tmp` and `home`.
fn runtime_dir_among(
    uid: u32,
    run_user: &Utf8Path,
    tmp: &Utf8Path,
    home: Option<&Utf8Path>,
) -> Result<Utf8PathBuf, LeaseError> {
    let mine = run_user.join(uid.to_string());
    if fs::symlink_metadata(&mine).is_ok_and(|meta| meta.is_dir() && meta.uid() == uid) {
        let dir = mine.join("handoff");
        ensure_private_dir(&dir)?;
        return Ok(dir);
    }
    let shared = tmp.join(format!("handoff-{uid}"));
    let refused = match ensure_private_dir(&shared) {
        Ok(()) => return Ok(shared),
        Err(e) => e,
    };
    let Some(home) = home.filter(|h| h.is_absolute() && h.is_dir()) else {
        return Err(refused);
    };
    private_state_dir(home, "runtime")
}

/// Creates `path` (not its parents) with mode 0700 when missing, then checks that it is a
/// real directory owned by the current user and closed to group and others.
pub(crate) fn ensure_private_dir(path: &Utf8Path) -> Result<(), LeaseError> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_error("cannot create", path)(e)),
    }
    let meta = fs::symlink_metadata(path).map_err(io_error("cannot inspect", path))?;
    let unsafe_dir = |reason: String| LeaseError::UnsafeDir {
        path: path.to_owned(),
        reason,
    };
    if meta.file_type().is_symlink() {
        return Err(unsafe_dir("it is a symlink".to_owned()));
    }
    if !meta.is_dir() {
        return Err(unsafe_dir("it is not a directory".to_owned()));
    }
    let uid = nix::unistd::getuid().as_raw();
    if meta.uid() != uid {
        return Err(unsafe_dir(format!(
            "it is owned by uid {}, not by you (uid {uid})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(unsafe_dir(format!(
            "its mode {:04o} lets group or others in",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    struct Places {
        _tmp: tempfile::TempDir,
        run_user: Utf8PathBuf,
        tmp: Utf8PathBuf,
        home: Utf8PathBuf,
    }

    fn places() -> Places {
        let t = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(t.path().to_path_buf()).unwrap();
        for d in ["run-user", "tmp", "home"] {
            fs::create_dir(root.join(d)).unwrap();
        }
        Places {
            run_user: root.join("run-user"),
            tmp: root.join("tmp"),
            home: root.join("home"),
            _tmp: t,
        }
    }

    fn uid() -> u32 {
        nix::unistd::getuid().as_raw()
    }

    #[test]
    fn the_users_run_directory_comes_first() {
        let p = places();
        fs::create_dir(p.run_user.join(uid().to_string())).unwrap();
        let dir = runtime_dir_among(uid(), &p.run_user, &p.tmp, Some(&p.home)).unwrap();
        assert_eq!(dir, p.run_user.join(format!("{}/handoff", uid())));
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn without_one_the_shared_temporary_directory_is_used() {
        let p = places();
        let dir = runtime_dir_among(uid(), &p.run_user, &p.tmp, Some(&p.home)).unwrap();
        assert_eq!(dir, p.tmp.join(format!("handoff-{}", uid())));
    }

    /// Another user can create `/tmp/handoff-<uid>` first: a symlink to a place of theirs, or
    /// a directory open to them. handoff then runs from the home directory instead of failing.
    #[test]
    fn a_taken_temporary_directory_falls_back_to_the_home_directory() {
        let p = places();
        let squatted = p.tmp.join(format!("handoff-{}", uid()));
        let theirs = p.tmp.join("theirs");
        fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::symlink(&theirs, &squatted).unwrap();
        let dir = runtime_dir_among(uid(), &p.run_user, &p.tmp, Some(&p.home)).unwrap();
        assert_eq!(dir, p.home.join(".local/state/handoff/runtime"));
        assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);

        fs::remove_file(&squatted).unwrap();
        fs::create_dir(&squatted).unwrap();
        fs::set_permissions(&squatted, fs::Permissions::from_mode(0o777)).unwrap();
        let dir = runtime_dir_among(uid(), &p.run_user, &p.tmp, Some(&p.home)).unwrap();
        assert_eq!(dir, p.home.join(".local/state/handoff/runtime"));
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn a_directory_the_program_chose_comes_first() {
        let p = places();
        let chosen = p.tmp.join("chosen");
        let base = private_dir_base_among(Some(&chosen), Some(&p.home), &p.tmp).unwrap();
        assert_eq!(base, chosen);
        // Nothing was made in the home directory for it.
        assert!(!p.home.join(".local").exists());
    }

    #[test]
    fn by_default_private_directories_go_to_the_private_work_directory() {
        let p = places();
        let base = private_dir_base_among(None, Some(&p.home), &p.tmp).unwrap();
        assert_eq!(base, p.home.join(".local/state/handoff/work"));
        for dir in [p.home.join(".local/state/handoff"), base] {
            let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{dir}");
        }
    }

    #[test]
    fn without_a_home_directory_private_directories_go_to_tmp() {
        let p = places();
        let base = private_dir_base_among(None, None, &p.tmp).unwrap();
        assert_eq!(base, p.tmp);
        let missing = p.home.join("missing");
        let base = private_dir_base_among(None, Some(&missing), &p.tmp).unwrap();
        assert_eq!(base, p.tmp);
    }

    /// A work directory someone else could write is refused rather than traded for `/tmp`.
    #[test]
    fn a_work_directory_open_to_others_is_refused() {
        let p = places();
        let work = p.home.join(".local/state/handoff/work");
        fs::create_dir_all(&work).unwrap();
        fs::set_permissions(&work, fs::Permissions::from_mode(0o777)).unwrap();
        let refused = private_dir_base_among(None, Some(&p.home), &p.tmp).unwrap_err();
        assert!(
            matches!(refused, LeaseError::UnsafeDir { ref path, .. } if *path == work),
            "{refused:?}"
        );
        fs::remove_dir(&work).unwrap();
        std::os::unix::fs::symlink(&p.tmp, &work).unwrap();
        let refused = private_dir_base_among(None, Some(&p.home), &p.tmp).unwrap_err();
        assert!(
            matches!(refused, LeaseError::UnsafeDir { ref reason, .. } if reason.contains("symlink")),
            "{refused:?}"
        );
    }

    #[test]
    fn without_a_home_directory_the_refusal_stands() {
        let p = places();
        let squatted = p.tmp.join(format!("handoff-{}", uid()));
        std::os::unix::fs::symlink(&p.home, &squatted).unwrap();
        let refused = runtime_dir_among(uid(), &p.run_user, &p.tmp, None).unwrap_err();
        assert!(
            matches!(refused, LeaseError::UnsafeDir { ref reason, .. } if reason.contains("symlink")),
            "{refused:?}"
        );
    }
}
