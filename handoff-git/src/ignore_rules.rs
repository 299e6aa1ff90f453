//! Which paths git ignores, by rules read once and kept: a fingerprint reads the ignore files
//! (`.gitignore` in each directory it looks into, `info/exclude`, `core.excludesFile`) and
//! records their content; a fingerprint taken after it judges by that record, so that ignore
//! rules written in between (a new directory holding a `.gitignore` of `*`, a line added to
//! `info/exclude`) hide nothing that was written then.
//!
//! The rules are git's, matched by gix's pattern matcher with git's precedence: the
//! `.gitignore` of the deepest directory first, up to the root's, then `info/exclude`, then
//! `core.excludesFile`; within a file the last matching pattern decides; a path below an
//! ignored directory is ignored, whatever a deeper rule says. Patterns match as written,
//! whatever `core.ignoreCase` says, and a `.gitignore` that is a symbolic link is not read
//! (as git reads neither).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::glob::pattern::Case;
use gix::glob::search::pattern::List;
use gix::ignore::search::Ignore;
use handoff_core::WorkspaceError;

use crate::paths::{entry_key, worktree_path};

/// The key of `info/exclude` among the recorded ignore files.
pub(crate) const INFO_EXCLUDE: &str = ".git/info/exclude";
/// The key of the `core.excludesFile` (the user's global ignore file).
pub(crate) const EXCLUDES_FILE: &str = "core.excludesFile";

/// Ignore rules, read from disk as they are needed (and recorded), or taken from a record.
pub(crate) struct IgnoreRules<'a> {
    root: &'a Path,
    /// The record judged by; `None` reads the files on disk.
    recorded: Option<&'a BTreeMap<String, Vec<u8>>>,
    /// Every ignore file that was read or taken, by key, for the next fingerprint.
    seen: BTreeMap<String, Vec<u8>>,
    /// Per directory (`""` for the root, else its path without a trailing `/`): its
    /// `.gitignore`'s patterns, if it has one.
    dirs: HashMap<BString, Option<List<Ignore>>>,
    /// `info/exclude`, then `core.excludesFile`: in the order they are consulted.
    globals: Vec<List<Ignore>>,
    /// Whether a directory is ignored, as decided so far.
    ignored_dirs: HashMap<BString, bool>,
}

impl<'a> IgnoreRules<'a> {
    /// The rules of `repo`, whose worktree is `root`: read from disk, or, with `recorded`,
    /// those of an earlier fingerprint.
    pub(crate) fn new(
        repo: &gix::Repository,
        root: &'a Path,
        recorded: Option<&'a BTreeMap<String, Vec<u8>>>,
    ) -> Result<Self, WorkspaceError> {
        let mut rules = IgnoreRules {
            root,
            recorded,
            seen: BTreeMap::new(),
            dirs: HashMap::new(),
            globals: Vec::new(),
            ignored_dirs: HashMap::new(),
        };
        let info_exclude = repo.common_dir().join("info").join("exclude");
        let excludes_file = excludes_file(repo);
        for (key, path) in [
            (INFO_EXCLUDE, Some(info_exclude)),
            (EXCLUDES_FILE, excludes_file),
        ] {
            let content = match recorded {
                Some(recorded) => recorded.get(key).cloned(),
                None => match path {
                    Some(path) => read_rules(&path)?,
                    None => None,
                },
            };
            if let Some(content) = content {
                rules
                    .globals
                    .push(list(&content, PathBuf::from(key), None)?);
                rules.seen.insert(key.to_owned(), content);
            }
        }
        Ok(rules)
    }

    /// Reads the `.gitignore` of every directory `state` tracks one in, so that the record
    /// holds them whether or not a path there needed them this time.
    pub(crate) fn read_tracked(&mut self, state: &gix::index::State) -> Result<(), WorkspaceError> {
        if self.recorded.is_some() {
            return Ok(());
        }
        for entry in state.entries() {
            let path = entry.path(state);
            let dir = if path == ".gitignore" {
                BStr::new(b"")
            } else if let Some(dir) = path.strip_suffix(b"/.gitignore") {
                dir.as_bstr()
            } else {
                continue;
            };
            self.load(dir)?;
        }
        Ok(())
    }

    /// Whether `path` (a file, a symbolic link or, with `is_dir`, a directory) is ignored.
    pub(crate) fn is_ignored(&mut self, path: &BStr, is_dir: bool) -> Result<bool, WorkspaceError> {
        // Below an ignored directory, everything is ignored: git does not look into it.
        let mut start = 0;
        while let Some(pos) = path[start..].find_byte(b'/') {
            let dir = path[..start + pos].as_bstr();
            let ignored = match self.ignored_dirs.get(dir) {
                Some(&ignored) => ignored,
                None => {
                    let ignored = self.decide(dir, true)?;
                    self.ignored_dirs.insert(dir.to_owned(), ignored);
                    ignored
                }
            };
            if ignored {
                return Ok(true);
            }
            start += pos + 1;
        }
        self.decide(path, is_dir)
    }

    /// The ignore files read or taken, by key.
    pub(crate) fn into_seen(self) -> BTreeMap<String, Vec<u8>> {
        self.seen
    }

    /// What the rules say of `path` itself: the deepest directory's `.gitignore` with a
    /// matching pattern decides, then `info/exclude`, then `core.excludesFile`.
    fn decide(&mut self, path: &BStr, is_dir: bool) -> Result<bool, WorkspaceError> {
        let mut dirs: Vec<&BStr> = Vec::new();
        let mut end = path.len();
        while let Some(pos) = path[..end].rfind_byte(b'/') {
            dirs.push(path[..pos].as_bstr());
            end = pos;
        }
        dirs.push(BStr::new(b""));
        for dir in &dirs {
            self.load(dir)?;
        }
        let basename = path.rfind_byte(b'/').map(|pos| pos + 1);
        let lists = dirs
            .iter()
            .filter_map(|dir| self.dirs.get(*dir).and_then(Option::as_ref))
            .chain(&self.globals);
        for list in lists {
            if let Some(found) = gix::ignore::search::pattern_matching_relative_path(
                list,
                path,
                basename,
                Some(is_dir),
                Case::Sensitive,
            ) {
                return Ok(!found.pattern.is_negative());
            }
        }
        Ok(false)
    }

    /// Reads (or takes from the record) the `.gitignore` of `dir`, once.
    fn load(&mut self, dir: &BStr) -> Result<(), WorkspaceError> {
        if self.dirs.contains_key(dir) {
            return Ok(());
        }
        let mut rela = BString::from(dir);
        if !rela.is_empty() {
            rela.push(b'/');
        }
        rela.extend_from_slice(b".gitignore");
        let key = entry_key(rela.as_bstr());
        let content = match self.recorded {
            Some(recorded) => recorded.get(&key).cloned(),
            None => read_rules(&worktree_path(self.root, rela.as_bstr())?)?,
        };
        let patterns = match content {
            Some(content) => {
                let source = worktree_path(Path::new(""), rela.as_bstr())?;
                let patterns = list(&content, source, Some(Path::new("")))?;
                self.seen.insert(key, content);
                Some(patterns)
            }
            None => None,
        };
        self.dirs.insert(dir.to_owned(), patterns);
        Ok(())
    }
}

fn list(
    content: &[u8],
    source: PathBuf,
    root: Option<&Path>,
) -> Result<List<Ignore>, WorkspaceError> {
    List::from_bytes(content, source, root, Ignore::default()).map_err(|err| WorkspaceError::Git {
        message: format!("cannot read the ignore rules: {err}"),
    })
}

/// The content of the ignore file at `path`; `None` when there is none, or it is not a regular
/// file (a symbolic link is not followed).
fn read_rules(path: &Path) -> Result<Option<Vec<u8>>, WorkspaceError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| WorkspaceError::Io {
        path: camino::Utf8PathBuf::from(path.to_string_lossy().into_owned()),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path);
    let mut file = match file {
        Ok(file) => file,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) || err.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) =>
        {
            return Ok(None);
        }
        Err(err) => return Err(io(err)),
    };
    if !file.metadata().map_err(io)?.is_file() {
        return Ok(None);
    }
    let mut content = Vec::new();
    file.read_to_end(&mut content).map_err(io)?;
    Ok(Some(content))
}

/// Where `core.excludesFile` is: as configured, else git's default
/// (`$XDG_CONFIG_HOME/git/ignore`, or `~/.config/git/ignore`).
fn excludes_file(repo: &gix::Repository) -> Option<PathBuf> {
    if let Ok(Some(path)) = repo.config_snapshot().trusted_path("core.excludesFile") {
        return Some(path);
    }
    match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(xdg) => Some(PathBuf::from(xdg).join("git").join("ignore")),
        None => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config/git/ignore")),
    }
}
