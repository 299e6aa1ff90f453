//! Which programs handoff starts: every one (git, bwrap, socat, ssh, the agent CLIs) is found
//! on `PATH` by one rule, [`crate::locate_on_path`], that skips relative entries and the
//! directories an agent may have written: every worktree of a repository handoff works on
//! ([`guard_worktrees_of`]) and handoff's own private run and work directories (mailboxes
//! included). A developer's `PATH` often names `node_modules/.bin` or `./bin`: a `git` an agent
//! planted there must never run as the user, outside every sandbox.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use camino::{Utf8Path, Utf8PathBuf};

fn guarded() -> &'static Mutex<Vec<Utf8PathBuf>> {
    static GUARDED: OnceLock<Mutex<Vec<Utf8PathBuf>>> = OnceLock::new();
    GUARDED.get_or_init(|| {
        let mut dirs = Vec::new();
        if let Ok(base) = crate::lease::private_dir_base(None) {
            dirs.push(canonical(&base));
        }
        Mutex::new(dirs)
    })
}

fn cache() -> &'static Mutex<BTreeMap<String, Option<Utf8PathBuf>>> {
    static CACHE: OnceLock<Mutex<BTreeMap<String, Option<Utf8PathBuf>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn canonical(p: &Utf8Path) -> Utf8PathBuf {
    p.canonicalize_utf8().unwrap_or_else(|_| p.to_owned())
}

/// Adds `dir` to the directories no program is started from (for this process).
pub fn guard_dir(dir: &Utf8Path) {
    let dir = canonical(dir);
    // Only a real directory below the root: an empty or relative path would guard everything.
    if !dir.is_absolute() || dir.parent().is_none() {
        return;
    }
    if let Ok(mut g) = guarded().lock()
        && !g.contains(&dir)
    {
        g.push(dir);
        if let Ok(mut c) = cache().lock() {
            c.clear();
        }
    }
}

/// Adds every worktree of the repository holding `dir` (the main one and each linked one) to
/// the directories no program is started from.
pub fn guard_worktrees_of(dir: &Utf8Path) {
    for w in worktrees_of(dir) {
        guard_dir(&w);
    }
}

/// Whether `dir` is one of the guarded directories or inside one (compared resolved, so a
/// symbolic link to a worktree is inside it too).
pub fn is_guarded(dir: &Utf8Path) -> bool {
    let dir = canonical(dir);
    guarded()
        .lock()
        .map(|g| g.iter().any(|root| dir.starts_with(root)))
        .unwrap_or(true)
}

/// The program `name`, found on this process's `PATH` by [`crate::locate_on_path`], once per
/// process (and again after the guarded directories changed). `None` when no directory handoff
/// may start it from has it.
pub fn program(name: &str) -> Option<Utf8PathBuf> {
    if let Ok(c) = cache().lock()
        && let Some(found) = c.get(name)
    {
        return found.clone();
    }
    let env: BTreeMap<String, String> = std::env::vars().filter(|(k, _)| k == "PATH").collect();
    let found = crate::locate_on_path(name, &env);
    if let Ok(mut c) = cache().lock() {
        c.insert(name.to_owned(), found.clone());
    }
    found
}

/// [`program`], or a path that cannot run (so a missing program fails as missing rather than
/// falling back to a lookup that would find a planted one).
pub fn program_or_missing(name: &str) -> Utf8PathBuf {
    program(name).unwrap_or_else(|| Utf8PathBuf::from(format!("/nonexistent/{name}")))
}

/// The `PATH` this process started with, before [`sanitize_process_path`]: what agents get.
static ORIGINAL_PATH: OnceLock<Option<String>> = OnceLock::new();

/// The `PATH` this process started with (agents run with it), when it was sanitized.
pub fn original_path() -> Option<String> {
    ORIGINAL_PATH.get().cloned().flatten()
}

/// Removes from this process's own `PATH` every entry a program may not be started from
/// (relative ones, guarded ones), so that a library that starts a program by name (gix asks
/// `git` where its installation's configuration is) cannot start a planted one. The original
/// is kept for agents ([`original_path`]).
///
/// # Safety
/// Call it before any other thread exists (first thing in `main`): it sets an environment
/// variable.
#[allow(unsafe_code)]
pub unsafe fn sanitize_process_path() {
    let Ok(path) = std::env::var("PATH") else {
        return;
    };
    let kept: Vec<&str> = path
        .split(':')
        .filter(|d| d.starts_with('/') && !is_guarded(Utf8Path::new(d)))
        .collect();
    let _ = ORIGINAL_PATH.set(Some(path.clone()));
    // SAFETY: the caller guarantees no other thread reads or writes the environment now.
    unsafe { std::env::set_var("PATH", kept.join(":")) };
}

/// The worktrees of the repository holding `dir`: its main worktree and every linked one,
/// read from the git directories (no git runs).
pub fn worktrees_of(dir: &Utf8Path) -> Vec<Utf8PathBuf> {
    let Some(top) = canonical(dir)
        .ancestors()
        .find(|d| d.join(".git").symlink_metadata().is_ok())
        .map(Utf8Path::to_owned)
    else {
        return Vec::new();
    };
    let mut out = vec![top.clone()];
    let dot_git = top.join(".git");
    // A linked worktree's `.git` is a file naming its git directory, under the common one.
    let git_dir = if dot_git.is_file() {
        std::fs::read_to_string(&dot_git)
            .ok()
            .and_then(|t| t.strip_prefix("gitdir:").map(|p| p.trim().to_owned()))
            .map(|p| {
                if p.starts_with('/') {
                    Utf8PathBuf::from(p)
                } else {
                    top.join(p)
                }
            })
    } else {
        Some(dot_git)
    };
    let Some(git_dir) = git_dir else {
        return out;
    };
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .map(|c| {
            let c = c.trim();
            if c.starts_with('/') {
                Utf8PathBuf::from(c)
            } else {
                git_dir.join(c)
            }
        })
        .unwrap_or(git_dir);
    let common = canonical(&common);
    if common.file_name() == Some(".git")
        && let Some(main) = common.parent()
    {
        out.push(main.to_owned());
    }
    if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
        for e in entries.flatten() {
            let gitdir = e.path().join("gitdir");
            if let Ok(text) = std::fs::read_to_string(gitdir)
                && let Some(wt) = Utf8Path::new(text.trim()).parent()
                && wt.is_absolute()
            {
                out.push(canonical(wt));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_in_a_guarded_worktree_is_never_found() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(tmp.path().canonicalize().unwrap()).unwrap();
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let planted = repo.join("node_modules/.bin");
        std::fs::create_dir_all(&planted).unwrap();
        let system = root.join("system");
        std::fs::create_dir_all(&system).unwrap();
        for dir in [&planted, &system] {
            let p = dir.join("tool-x");
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let env: BTreeMap<String, String> =
            [("PATH".to_owned(), format!("{planted}:{system}"))].into();
        assert_eq!(
            crate::locate_on_path("tool-x", &env),
            Some(planted.join("tool-x"))
        );
        guard_worktrees_of(&repo.join("node_modules"));
        assert!(is_guarded(&planted));
        assert_eq!(
            crate::locate_on_path("tool-x", &env),
            Some(system.join("tool-x"))
        );
        let only_planted: BTreeMap<String, String> =
            [("PATH".to_owned(), planted.to_string())].into();
        assert_eq!(crate::locate_on_path("tool-x", &only_planted), None);
    }

    #[test]
    fn linked_worktrees_are_found_from_either_side() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(tmp.path().canonicalize().unwrap()).unwrap();
        let main = root.join("main");
        let linked = root.join("linked");
        std::fs::create_dir_all(main.join(".git/worktrees/linked")).unwrap();
        std::fs::create_dir_all(&linked).unwrap();
        std::fs::write(
            main.join(".git/worktrees/linked/gitdir"),
            format!("{linked}/.git\n"),
        )
        .unwrap();
        std::fs::write(main.join(".git/worktrees/linked/commondir"), "../..\n").unwrap();
        std::fs::write(
            linked.join(".git"),
            format!("gitdir: {main}/.git/worktrees/linked\n"),
        )
        .unwrap();
        let from_main = worktrees_of(&main);
        let from_linked = worktrees_of(&linked);
        assert_eq!(from_main, vec![linked.clone(), main.clone()]);
        assert_eq!(from_linked, from_main);
    }
}
