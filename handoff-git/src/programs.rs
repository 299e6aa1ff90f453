//! The programs a repository's own configuration makes git run, and how handoff keeps its own
//! git calls from running them.
//!
//! An agent that can write `.git/config` (or a file it includes) can name a program for git to
//! run: an fsmonitor, a filter or diff driver, a credential helper, an ssh command, a gpg
//! program. [`RepoPrograms`] reads those settings from the repository-level files only (the
//! common directory's `config`, the worktree's `config.worktree`, and every file they include,
//! whatever the include's condition), and [`RepoPrograms::neutralised`] turns them into `-c`
//! overrides that give each setting the value of the user's global or system configuration, or
//! a harmless default; settings that cannot be overridden that way (a filter the global
//! configuration does not define, `core.worktree`, URL rewrites, credential helpers) make the
//! commands that would use them refuse, naming them. [`config_state`] is the state of
//! everything that runs programs in a worktree, kept with a task at its first event.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gix::bstr::{BString, ByteSlice};
use handoff_core::flags::{AGENT_DIRS, AGENT_FILES, HOOK_MANAGER_FILES};
use handoff_core::{ConfigState, WorkspaceError};

use crate::gitfs::{canonical, file_state, walk};
use crate::repo::discover;

/// Whether a setting (`section`, `key`, lower case) makes git run a program, or changes which
/// programs or repositories it uses.
pub(crate) fn runs_a_program(section: &str, key: &str, value: &[u8]) -> bool {
    match section {
        "core" => matches!(
            key,
            "alternaterefscommand"
                | "fsmonitor"
                | "hookspath"
                | "sshcommand"
                | "editor"
                | "pager"
                | "askpass"
                | "gitproxy"
                | "worktree"
                | "attributesfile"
        ),
        "sequence" => key == "editor",
        "filter" => matches!(key, "clean" | "smudge" | "process"),
        "diff" => matches!(key, "command" | "textconv" | "external"),
        "merge" => key == "driver",
        "gpg" => matches!(key, "program" | "defaultkeycommand"),
        // git-lfs, run as a filter, runs its extensions and transfer agents.
        "lfs" => {
            matches!(
                key,
                "clean" | "smudge" | "path" | "args" | "standalonetransferagent"
            )
        }
        "credential" => key == "helper",
        // A repository on this machine (a path or `file:`) is reached by running its hooks.
        "remote" => match key {
            "receivepack" | "uploadpack" | "vcs" => true,
            "url" | "pushurl" => local_url(value),
            "pushdefault" => remote_name_is_a_place(value),
            _ => false,
        },
        "branch" => matches!(key, "remote" | "pushremote") && remote_name_is_a_place(value),
        "url" => matches!(key, "insteadof" | "pushinsteadof"),
        "protocol" => key == "allow",
        "include" | "includeif" => key == "path",
        "alias" => value.trim_start().starts_with(b"!"),
        "pager" | "browser" | "man" | "difftool" | "mergetool" => true,
        "submodule" => key == "update" && value.trim_start().starts_with(b"!"),
        "uploadpack" => key == "packobjectshook",
        "receive" => key == "procreceiverefs",
        "trailer" => matches!(key, "cmd" | "command"),
        _ => false,
    }
}

/// Whether a remote URL names a repository on this machine (a path or `file:`), which git
/// reaches by running its hooks and programs here. git's rule: `file:` in any case; any other
/// `scheme://` is remote; otherwise a colon before the first slash makes `host:path` (ssh),
/// and anything else (`/a/x:y/r.git`, `./r`, `r`) is a path.
fn local_url(value: &[u8]) -> bool {
    let value = value.trim();
    if value.len() >= 5 && value[..5].eq_ignore_ascii_case(b"file:") {
        return true;
    }
    if value.find(b"://").is_some() {
        return false;
    }
    match value.iter().position(|&b| b == b':') {
        None => true,
        Some(colon) => value[..colon].contains(&b'/'),
    }
}

/// Whether a remote named by `branch.<b>.remote`, `branch.<b>.pushRemote` or
/// `remote.pushDefault` is a URL or path in place of a remote's name: git pushes to it as it
/// is, so a path reaches a repository (and its hooks) on this machine.
fn remote_name_is_a_place(value: &[u8]) -> bool {
    let value = value.trim();
    value == b"." || value.contains(&b'/') || value.contains(&b':')
}

/// One setting that runs a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Setting {
    /// Section name, lower case.
    pub section: String,
    /// Subsection, as written.
    pub sub: Option<String>,
    /// Key, lower case.
    pub key: String,
    /// The value, as git reads it.
    pub value: BString,
}

impl Setting {
    /// `section[.sub].key`, as `git -c` takes it.
    pub fn name(&self) -> String {
        match &self.sub {
            Some(sub) => format!("{}.{sub}.{}", self.section, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

/// The settings of a git configuration file that run a program, in file order; `None` when git
/// could not parse it.
pub(crate) fn program_settings(bytes: &[u8]) -> Option<Vec<Setting>> {
    let file = gix::config::File::from_bytes_no_includes(
        bytes,
        gix::config::file::Metadata::api(),
        gix::config::file::init::Options::default(),
    )
    .ok()?;
    let mut out = Vec::new();
    for section in file.sections() {
        let header = section.header();
        let name = header.name().to_str_lossy().to_ascii_lowercase();
        let sub = header
            .subsection_name()
            .map(|s| s.to_str_lossy().into_owned());
        for key in section.body().value_names() {
            let key = key.to_ascii_lowercase();
            for value in section.body().values(&key) {
                if runs_a_program(&name, &key, &value) {
                    out.push(Setting {
                        section: name.clone(),
                        sub: sub.clone(),
                        key: key.clone(),
                        value,
                    });
                }
            }
        }
    }
    Some(out)
}

/// `sha256` of the settings of a git configuration file that run a program, one
/// `section.subsection.key=value` line each, sorted: equal iff none of them changed. A file
/// git cannot parse counts as changed whenever its bytes do.
pub(crate) fn programs_digest(bytes: &[u8]) -> String {
    match program_settings(bytes) {
        Some(settings) => digest(&settings),
        None => {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(
                [b"unparsable:".as_slice(), bytes].concat(),
            ))
        }
    }
}

/// A repository-level configuration file and its settings that run a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigFile {
    /// Where it is.
    pub path: PathBuf,
    /// How a person would name it: `.git/config`, or its absolute path.
    pub label: String,
    /// [`programs_digest`] of its bytes, `missing`, or `unreadable`.
    pub digest: String,
    /// Its program settings.
    pub settings: Vec<Setting>,
}

/// The repository-level configuration of one worktree, with the files it includes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoPrograms {
    pub(crate) files: Vec<ConfigFile>,
    /// `core.hooksPath` as git itself resolves it (the last value of any scope), when set.
    pub(crate) hooks_path: Option<String>,
}

/// What handoff's git calls pass to leave the repository's programs out, and what they refuse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Neutralised {
    /// `-c key=value` pairs, after every other setting.
    pub overrides: Vec<(String, String)>,
    /// Settings that change what a staging or checkout command reads or writes (a filter, the
    /// worktree): such commands refuse while they are there.
    pub content: Vec<String>,
    /// Settings that change where or how a remote is reached (URL rewrites, credential
    /// helpers, a remote helper, a proxy): commands that reach a remote refuse while they are
    /// there.
    pub remote: Vec<String>,
}

impl RepoPrograms {
    /// The repository-level configuration of the repository containing `cwd`, as git itself
    /// reads it (`git config --list --show-origin --show-scope --includes`: git's own names for
    /// every setting, every include git follows): the repository's and the worktree's files and
    /// what they include, and each submodule's.
    pub fn of(cwd: &camino::Utf8Path) -> Result<RepoPrograms, WorkspaceError> {
        let repo = discover(cwd)?;
        Self::read(&repo)
    }

    pub(crate) fn read(repo: &gix::Repository) -> Result<RepoPrograms, WorkspaceError> {
        let common = canonical(repo.common_dir());
        let dir = repo
            .workdir()
            .map(Path::to_owned)
            .unwrap_or_else(|| repo.git_dir().to_owned());
        let mut out = RepoPrograms::default();
        let listed = list(&dir, &["--list", "--includes"])?;
        out.hooks_path = listed
            .iter()
            .rev()
            .find(|e| e.name.eq_ignore_ascii_case("core.hookspath"))
            .map(|e| e.value.to_str_lossy().into_owned());
        out.add_listing(&common, &dir, &listed, &["local", "worktree"]);
        let modules =
            crate::gitfs::module_dirs(&common.join("modules"), "modules").map_err(|source| {
                WorkspaceError::Io {
                    path: camino::Utf8PathBuf::from(common.join("modules").display().to_string()),
                    source,
                }
            })?;
        for (_, module) in modules {
            let file = module.join("config");
            if !file.is_file() {
                continue;
            }
            let file_arg = file.display().to_string();
            let listed = list(&dir, &["--file", &file_arg, "--list", "--includes"])?;
            out.add_listing(&common, &dir, &listed, &["command"]);
        }
        out.add_include_targets(&common);
        Ok(out)
    }

    /// Adds each file an `include.path` or `includeIf.<condition>.path` here names that git did
    /// not read (its condition not met here), with the digest of its program settings: an
    /// agent that edits it changes the state, though the include only applies in another
    /// worktree or to another command.
    fn add_include_targets(&mut self, common: &Path) {
        let targets: Vec<PathBuf> = self
            .files
            .iter()
            .flat_map(|file| {
                file.settings
                    .iter()
                    .filter(|s| matches!(s.section.as_str(), "include" | "includeif"))
                    .filter_map(|s| include_target(&file.path, &s.value))
            })
            .collect();
        for path in targets {
            let path = canonical(&path);
            if self.files.iter().any(|f| f.path == path) {
                continue;
            }
            let digest = match std::fs::read(&path) {
                Ok(bytes) => programs_digest(&bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => "missing".to_owned(),
                Err(_) => "unreadable".to_owned(),
            };
            self.files.push(ConfigFile {
                label: file_label(common, &path),
                path,
                digest,
                settings: Vec::new(),
            });
        }
    }

    /// Adds the entries of one listing whose scope is one of `scopes`, file by file.
    fn add_listing(&mut self, common: &Path, dir: &Path, listed: &[Listed], scopes: &[&str]) {
        for entry in listed.iter().filter(|e| scopes.contains(&e.scope.as_str())) {
            let path = dir.join(&entry.origin);
            let path = canonical(&path);
            let at = match self.files.iter().position(|f| f.path == path) {
                Some(at) => at,
                None => {
                    self.files.push(ConfigFile {
                        path: path.clone(),
                        label: file_label(common, &path),
                        digest: String::new(),
                        settings: Vec::new(),
                    });
                    self.files.len() - 1
                }
            };
            let Some(setting) = entry.setting() else {
                continue;
            };
            if runs_a_program(&setting.section, &setting.key, &setting.value) {
                self.files[at].settings.push(setting);
            }
        }
        for file in &mut self.files {
            file.digest = digest(&file.settings);
        }
    }

    /// Each file's digest by its label: the `git_programs` part of a [`ConfigState`].
    pub fn digests(&self) -> BTreeMap<String, String> {
        self.files
            .iter()
            .map(|f| (f.label.clone(), f.digest.clone()))
            .collect()
    }

    /// The overrides and refusals that leave every setting here out of a git command, given the
    /// user's global and system configuration.
    pub fn neutralised(&self, globals: &gix::config::File) -> Neutralised {
        let mut out = Neutralised::default();
        for file in &self.files {
            for s in &file.settings {
                neutralise(s, &file.label, globals, &mut out);
            }
        }
        out.overrides.dedup();
        out.content.dedup();
        out.remote.dedup();
        out
    }
}

/// The overrides and refusals for one repository-level setting.
fn neutralise(s: &Setting, file: &str, globals: &gix::config::File, out: &mut Neutralised) {
    let name = s.name();
    let global = || {
        globals
            .string_by(
                &s.section,
                s.sub.as_deref().map(gix::bstr::BStr::new),
                &s.key,
            )
            .map(|v| v.to_str_lossy().into_owned())
    };
    let named = format!("{name} in {file}");
    if name.contains(['=', '\n']) {
        // Not expressible as `-c key=value`: whatever it is, nothing that needs it runs.
        out.content.push(named.clone());
        out.remote.push(named);
        return;
    }
    let mut set = |value: String| out.overrides.push((name.clone(), value));
    match (s.section.as_str(), s.key.as_str()) {
        // Forced off for every command, or decided by whether hooks run.
        ("core", "fsmonitor" | "pager" | "hookspath") => {}
        ("core", "worktree") => out.content.push(named),
        ("core", "gitproxy") => out.remote.push(named),
        ("core", "sshcommand") => set(global().unwrap_or_else(|| "ssh".into())),
        ("core", "editor") | ("sequence", "editor") => set("false".into()),
        ("core", "askpass") => set(global().unwrap_or_default()),
        ("core", "attributesfile") => set(global().unwrap_or_else(|| "/dev/null".into())),
        ("filter", _) => match global() {
            Some(value) => set(value),
            None => {
                set(String::new());
                if let Some(driver) = &s.sub {
                    out.overrides
                        .push((format!("filter.{driver}.required"), "false".into()));
                }
                out.content.push(named);
            }
        },
        // `diff.external` cannot be emptied; handoff passes `--no-ext-diff` instead.
        ("diff", "external") => {}
        ("diff", _) | ("merge", _) => set(global().unwrap_or_default()),
        ("gpg", "program") => set(global().unwrap_or_else(|| {
            match s.sub.as_deref() {
                Some("x509") => "gpgsm",
                Some("ssh") => "ssh-keygen",
                _ => "gpg",
            }
            .into()
        })),
        ("remote", "receivepack") => set(global().unwrap_or_else(|| "git-receive-pack".into())),
        ("remote", "uploadpack") => set(global().unwrap_or_else(|| "git-upload-pack".into())),
        ("remote", "vcs" | "url" | "pushurl" | "pushdefault")
        | ("branch", _)
        | ("url", _)
        | ("credential", _) => out.remote.push(named),
        // An include whose condition git did not meet here may hold anything for another
        // worktree or command: nothing that stages, checks out or reaches a remote runs.
        ("includeif", _) => {
            out.content.push(named.clone());
            out.remote.push(named);
        }
        ("gpg", "defaultkeycommand") | ("core", "alternaterefscommand") | ("trailer", _) => {
            set(global().unwrap_or_default())
        }
        // git-lfs reads its own settings; none can be replaced from here.
        ("lfs", _) => {
            out.content.push(named.clone());
            out.remote.push(named);
        }
        ("protocol", "allow") => match s.sub.as_deref() {
            Some(protocol) => set(global().unwrap_or_else(|| {
                match protocol {
                    "http" | "https" | "git" | "ssh" => "always",
                    "ext" => "never",
                    _ => "user",
                }
                .into()
            })),
            None => out.remote.push(named),
        },
        ("pager", _) => set("false".into()),
        // Followed when read; the files they include are neutralised setting by setting.
        ("include", _) => {}
        // Never run by handoff: aliases cannot shadow git's own commands, and handoff opens no
        // browser, manual, diff or merge tool, updates no submodule and serves no fetch or push.
        _ => {}
    }
}

/// One entry of `git config --list -z --show-scope --show-origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    scope: String,
    /// The file, as git names it (relative to where git ran, or absolute).
    origin: PathBuf,
    /// `section[.subsection].key`, as git names it.
    name: String,
    value: BString,
}

impl Listed {
    /// The setting, with git's name split (the subsection may hold dots).
    fn setting(&self) -> Option<Setting> {
        let (section, rest) = self.name.split_once('.')?;
        let (sub, key) = match rest.rsplit_once('.') {
            Some((sub, key)) => (Some(sub.to_owned()), key),
            None => (None, rest),
        };
        Some(Setting {
            section: section.to_ascii_lowercase(),
            sub,
            key: key.to_ascii_lowercase(),
            value: self.value.clone(),
        })
    }
}

/// `git config <args> -z --show-scope --show-origin` in `dir`, without any of the
/// repository's programs (git runs none to list its configuration), parsed.
fn list(dir: &Path, args: &[&str]) -> Result<Vec<Listed>, WorkspaceError> {
    let mut c = crate::command::plain_command(dir);
    c.arg("config")
        .args(args)
        .args(["-z", "--show-scope", "--show-origin"]);
    let out = c.output().map_err(|source| WorkspaceError::Io {
        path: camino::Utf8PathBuf::from(dir.display().to_string()),
        source,
    })?;
    if !out.status.success() {
        return Err(WorkspaceError::Git {
            message: format!(
                "git cannot read the repository's configuration: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(parse_listing(&out.stdout))
}

/// Parses `scope NUL origin NUL name [LF value] NUL`, repeated.
pub(crate) fn parse_listing(bytes: &[u8]) -> Vec<Listed> {
    let mut fields = bytes.split(|&b| b == 0);
    let mut out = Vec::new();
    while let (Some(scope), Some(origin), Some(item)) =
        (fields.next(), fields.next(), fields.next())
    {
        if scope.is_empty() {
            break;
        }
        let (name, value) = match item.iter().position(|&b| b == b'\n') {
            Some(at) => (&item[..at], &item[at + 1..]),
            None => (item, &b""[..]),
        };
        let origin = origin.strip_prefix(b"file:").unwrap_or(origin);
        out.push(Listed {
            scope: String::from_utf8_lossy(scope).into_owned(),
            origin: PathBuf::from(String::from_utf8_lossy(origin).into_owned()),
            name: String::from_utf8_lossy(name).into_owned(),
            value: BString::from(value),
        });
    }
    out
}

/// The digest of a file's program settings: `sha256` of one `name=value` line each, sorted.
fn digest(settings: &[Setting]) -> String {
    use sha2::Digest;
    let mut lines: Vec<Vec<u8>> = settings
        .iter()
        .map(|s| {
            let mut line = s.name().into_bytes();
            line.push(b'=');
            line.extend_from_slice(&s.value);
            line
        })
        .collect();
    lines.sort();
    lines.dedup();
    let mut hasher = sha2::Sha256::new();
    for line in &lines {
        hasher.update(line);
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

/// The state of everything that runs programs in the worktree containing `cwd`: hooks and hook
/// managers, the repository-level program settings, and the agents' configuration at the
/// worktree's root (ignored files included; `node_modules` directories left out).
pub fn config_state(cwd: &camino::Utf8Path) -> Result<ConfigState, WorkspaceError> {
    let repo = discover(cwd)?;
    let root = repo
        .workdir()
        .map(Path::to_owned)
        .ok_or_else(|| WorkspaceError::NotAWorktree {
            path: cwd.to_owned(),
        })?;
    let kind = repo.object_hash();
    let common = repo.common_dir().to_owned();
    let programs = RepoPrograms::read(&repo)?;
    let mut state = ConfigState {
        git_programs: programs.digests(),
        ..ConfigState::default()
    };
    let io = |path: &Path| {
        let path = camino::Utf8PathBuf::from(path.to_string_lossy().into_owned());
        move |source| WorkspaceError::Io { path, source }
    };

    // The effective hooks directory, and the setting that names it, as git resolves it (the
    // same listing the runner neutralises from, so the two cannot disagree on an include).
    let configured = programs.hooks_path.as_deref().filter(|p| !p.is_empty());
    state
        .hooks
        .insert("core.hooksPath".into(), configured.unwrap_or("").to_owned());
    // Resolved, so that a hooks directory linked elsewhere (`.git/hooks -> ../.githooks`) is
    // read where its hooks are.
    let hooks_dir = match configured {
        Some(path) => canonical(&root.join(expand_home(path))),
        None => canonical(&common.join("hooks")),
    };
    let hooks_label = label(&hooks_dir, &root, &common);
    files(kind, &hooks_dir, &hooks_label, &mut state.hooks, &|name| {
        !name.ends_with(".sample")
    })
    .map_err(io(&hooks_dir))?;

    let everything = |_: &str| true;
    files(
        kind,
        &root.join(".husky"),
        ".husky",
        &mut state.hooks,
        &everything,
    )
    .map_err(io(&root))?;
    for name in HOOK_MANAGER_FILES {
        files(kind, &root.join(name), name, &mut state.hooks, &everything).map_err(io(&root))?;
    }
    for dir in AGENT_DIRS {
        let dir = dir.trim_end_matches('/');
        files(
            kind,
            &root.join(dir),
            dir,
            &mut state.agent_config,
            &everything,
        )
        .map_err(io(&root))?;
    }
    for name in AGENT_FILES
        .iter()
        .chain(&[".vscode/tasks.json", ".github/copilot-instructions.md"])
    {
        files(
            kind,
            &root.join(name),
            name,
            &mut state.agent_config,
            &everything,
        )
        .map_err(io(&root))?;
    }
    Ok(state)
}

/// `path` with a leading `~/` taken from `$HOME`, as git reads a path setting.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// How `dir` is named in a [`ConfigState`]: `.git/…` under the common directory, a worktree path
/// inside the worktree, else its absolute path.
/// How a person would name a configuration file: `.git/<path>` inside the common directory,
/// else its absolute path.
fn file_label(common: &Path, path: &Path) -> String {
    match path.strip_prefix(common) {
        Ok(rela) => format!(".git/{}", rela.display()),
        Err(_) => path.display().to_string(),
    }
}

/// The file an include's `path` value names, as git resolves it: `~/` from `$HOME`, a relative
/// path from the including file's directory.
fn include_target(including: &Path, value: &[u8]) -> Option<PathBuf> {
    let value = value.to_str().ok()?.trim();
    if let Some(rest) = value.strip_prefix("~/") {
        return Some(PathBuf::from(std::env::var_os("HOME")?).join(rest));
    }
    let path = Path::new(value);
    if path.is_absolute() {
        Some(path.to_owned())
    } else {
        Some(including.parent()?.join(path))
    }
}

fn label(dir: &Path, root: &Path, common: &Path) -> String {
    let common = canonical(common);
    let root = canonical(root);
    if let Ok(rela) = dir.strip_prefix(&common) {
        return format!(".git/{}", rela.display())
            .trim_end_matches('/')
            .to_owned();
    }
    match dir.strip_prefix(&root) {
        Ok(rela) => rela.display().to_string(),
        Err(_) => dir.display().to_string(),
    }
}

/// Adds the state of the file at `path`, or of every file below it, keyed `label/<name>`,
/// where `keep` accepts the file's name. `node_modules` directories are not descended into.
fn files(
    kind: gix::hash::Kind,
    path: &Path,
    label: &str,
    into: &mut BTreeMap<String, String>,
    keep: &dyn Fn(&str) -> bool,
) -> std::io::Result<()> {
    let mut found = Vec::new();
    walk(path, BString::default(), &mut |p, rela, meta| {
        let rela = rela.to_str_lossy();
        if rela.split('/').any(|c| c == "node_modules") {
            return Ok(());
        }
        let name = rela.rsplit('/').next().unwrap_or("");
        if !keep(if rela.is_empty() { label } else { name }) {
            return Ok(());
        }
        if let Some(mut state) = file_state(kind, p, meta)? {
            // A symbolic link (a hook linked to a script in the worktree, say) is what it
            // points at too: changing the script changes what runs.
            if meta.file_type().is_symlink() {
                let target = std::fs::metadata(p)
                    .ok()
                    .map(|m| file_state(kind, p, &m))
                    .transpose()?
                    .flatten();
                state.push_str(&format!(" -> {}", target.as_deref().unwrap_or("missing")));
            }
            let key = if rela.is_empty() {
                label.to_owned()
            } else {
                format!("{label}/{rela}")
            };
            found.push((key, state));
        }
        Ok(())
    })?;
    into.extend(found);
    Ok(())
}

#[cfg(test)]
mod tests;
