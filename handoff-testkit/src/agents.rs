//! A directory of fake agent CLIs for one test.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::fake::settings::{ENV_FILE_NAME, RECORD_DIR, parse_env_file};
use crate::fake::util::write_atomic;
use crate::{EXECUTABLES, fake_agent_bin};

/// The system directories [`FakeAgents::path_env`] appends after the fake `bin/`.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Fake agent CLIs installed in `<dir>/bin`: one symlink per executable name to
/// [`fake_agent_bin`], and the `fake-agent.env` file they read their switches from.
///
/// ```no_run
/// let tmp = tempfile::tempdir().unwrap();
/// let agents = handoff_testkit::FakeAgents::install(tmp.path()).with_sandbox_tools();
/// agents.set("HANDOFF_FAKE_MODE", "no-change");
/// let records = agents.record_dir();
/// // … run handoff with PATH=agents.path_env() …
/// for call in agents.invocations() {
///     println!("{} {:?}", call["exe"], call["argv"]);
/// }
/// # let _ = records;
/// ```
#[derive(Debug, Clone)]
pub struct FakeAgents {
    /// `<dir>/bin`: holds the CLIs and `fake-agent.env`.
    pub bin_dir: PathBuf,
    root: PathBuf,
}

impl FakeAgents {
    /// Creates `<dir>/bin` with `claude`, `codex`, `grok`, `kiro-cli`, `opencode` and
    /// `cursor-agent` symlinked to the fake binary (replacing what is there).
    ///
    /// # Panics
    ///
    /// On I/O errors.
    pub fn install(dir: &Path) -> FakeAgents {
        FakeAgents::install_with(dir, false)
    }

    /// Like [`FakeAgents::install`], but each CLI is a hard link to the fake binary (a copy when
    /// hard-linking fails), so it keeps its name even if the caller resolves symlinks
    /// (`canonicalize`) before spawning it.
    ///
    /// # Panics
    ///
    /// On I/O errors.
    pub fn install_copies(dir: &Path) -> FakeAgents {
        FakeAgents::install_with(dir, true)
    }

    fn install_with(dir: &Path, copies: bool) -> FakeAgents {
        let bin_dir = dir.join("bin");
        std::fs::create_dir_all(&bin_dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", bin_dir.display()));
        let target = fake_agent_bin();
        for name in EXECUTABLES {
            let link = bin_dir.join(name);
            let _ = std::fs::remove_file(&link);
            let made = if copies {
                std::fs::hard_link(&target, &link)
                    .or_else(|_| std::fs::copy(&target, &link).map(|_| ()))
                    .and_then(|()| {
                        std::fs::set_permissions(&link, std::fs::Permissions::from_mode(0o755))
                    })
            } else {
                std::os::unix::fs::symlink(&target, &link)
            };
            made.unwrap_or_else(|e| {
                panic!(
                    "cannot install {} -> {}: {e}",
                    link.display(),
                    target.display()
                )
            });
        }
        FakeAgents {
            bin_dir,
            root: dir.to_path_buf(),
        }
    }

    /// Adds executable `bwrap` and `socat` stubs (`#!/bin/sh\nexit 0`) so fake Claude finds the
    /// sandbox dependencies its `--settings` demand.
    ///
    /// # Panics
    ///
    /// On I/O errors.
    #[must_use]
    pub fn with_sandbox_tools(self) -> FakeAgents {
        for name in ["bwrap", "socat"] {
            let path = self.bin_dir.join(name);
            std::fs::write(&path, "#!/bin/sh\nexit 0\n")
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", path.display()));
        }
        self
    }

    /// The path of one installed CLI, e.g. `agents.bin("claude")`.
    pub fn bin(&self, exe: &str) -> PathBuf {
        self.bin_dir.join(exe)
    }

    /// Removes one CLI (to test "executable not found").
    ///
    /// # Panics
    ///
    /// On I/O errors other than "not found".
    pub fn uninstall(&self, exe: &str) {
        match std::fs::remove_file(self.bin(exe)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("cannot remove {exe}: {e}"),
        }
    }

    /// `<bin_dir>/fake-agent.env`.
    pub fn env_file(&self) -> PathBuf {
        self.bin_dir.join(ENV_FILE_NAME)
    }

    /// Sets `key=value` in `fake-agent.env` (replacing an earlier line for `key`).
    ///
    /// # Panics
    ///
    /// On I/O errors, or when `key` or `value` contains a newline.
    pub fn set(&self, key: &str, value: impl AsRef<OsStr>) {
        let value = value.as_ref().to_string_lossy().into_owned();
        assert!(
            !key.contains(['\n', '=']) && !value.contains('\n'),
            "fake-agent.env cannot hold {key:?}={value:?}"
        );
        self.edit_env_file(key, Some(&value));
    }

    /// Removes `key` from `fake-agent.env`.
    ///
    /// # Panics
    ///
    /// On I/O errors.
    pub fn unset(&self, key: &str) {
        self.edit_env_file(key, None);
    }

    /// The current contents of `fake-agent.env`, parsed.
    pub fn settings(&self) -> std::collections::BTreeMap<String, String> {
        std::fs::read_to_string(self.env_file())
            .map(|t| parse_env_file(&t))
            .unwrap_or_default()
    }

    fn edit_env_file(&self, key: &str, value: Option<&str>) {
        let path = self.env_file();
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let mut lines: Vec<String> = old
            .lines()
            .filter(|line| {
                line.split_once('=')
                    .is_none_or(|(k, _)| k.trim() != key || line.trim_start().starts_with('#'))
            })
            .map(str::to_owned)
            .collect();
        if let Some(value) = value {
            lines.push(format!("{key}={value}"));
        }
        let mut text = lines.join("\n");
        text.push('\n');
        write_atomic(&path, text.as_bytes())
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// Creates `<dir>/records`, points `HANDOFF_FAKE_RECORD_DIR` at it in `fake-agent.env`, and
    /// returns it.
    ///
    /// # Panics
    ///
    /// On I/O errors.
    pub fn record_dir(&self) -> PathBuf {
        let dir = self.records_path();
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        self.set(RECORD_DIR, &dir);
        dir
    }

    fn records_path(&self) -> PathBuf {
        self.root.join("records")
    }

    /// Every recorded invocation, oldest first: objects with `exe`, `argv` (arguments after
    /// `argv[0]`), `env`, `cwd`, `stdin` (text, or `null` when stdin was not read) and `pid`;
    /// plus `nestedCommand` and `nested` in runs with `HANDOFF_FAKE_ADVICE` set (see the crate
    /// docs).
    ///
    /// # Panics
    ///
    /// When a record cannot be read or parsed.
    pub fn invocations(&self) -> Vec<Value> {
        let dir = self.records_path();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut records: Vec<((u128, u32), Value)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let key = record_sort_key(&name)?;
                Some((key, e.path()))
            })
            .map(|(key, path)| {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                let value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()));
                (key, value)
            })
            .collect();
        records.sort_by_key(|(key, _)| *key);
        records.into_iter().map(|(_, v)| v).collect()
    }

    /// `PATH` for a hermetic run: `bin_dir` followed by `/usr/local/bin:/usr/bin:/bin`.
    pub fn path_env(&self) -> OsString {
        let mut path = self.bin_dir.clone().into_os_string();
        path.push(":");
        path.push(SYSTEM_PATH);
        path
    }
}

/// `invocation-<pid>-<nanos>.json` → (nanos, pid).
fn record_sort_key(name: &str) -> Option<(u128, u32)> {
    let stem = name.strip_prefix("invocation-")?.strip_suffix(".json")?;
    let (pid, nanos) = stem.split_once('-')?;
    Some((nanos.parse().ok()?, pid.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_key() {
        assert_eq!(record_sort_key("invocation-12-345.json"), Some((345, 12)));
        assert_eq!(record_sort_key(".invocation-12-345.json.1.2.tmp"), None);
    }
}
