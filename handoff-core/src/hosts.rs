//! Other machines a run or a continuation can go to: `[hosts.NAME]` in the configuration, and
//! what `--on` names (a host of the configuration, or an ssh destination with an optional
//! directory).
//!
//! ```toml
//! [hosts.devbox]
//! ssh = "me@devbox.example.com"   # as ssh takes it: an alias, user@host, ssh://user@host:port
//! dir = "~/handoff"               # where its repositories and worktrees live (default ~/handoff)
//! max_runs = 2                    # runs there at once (default 1)
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The directory on a host when neither the configuration nor `--on` names one.
pub const DEFAULT_HOST_DIR: &str = "~/handoff";

/// Most runs at once a host may be given.
pub const MAX_HOST_RUNS: u32 = 64;

/// One `[hosts.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// The ssh destination: an alias of `~/.ssh/config`, `user@host` or `ssh://user@host:port`.
    pub ssh: String,
    /// Where its repositories and worktrees live (absolute, or `~/…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// How many runs may go there at once (1–64, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<u32>,
}

/// Where a task or a run goes, as `--on` or a host's `ssh` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// What `ssh` connects to: an alias from `~/.ssh/config`, `user@host`, or
    /// `ssh://user@host:port`.
    pub host: String,
    /// The path there, when given (absolute, or `~/…`).
    pub path: Option<String>,
    /// Where a repository goes there when no path is given (a host's `dir`); `~/handoff` when
    /// not set.
    pub base: Option<String>,
}

/// Parses an ssh destination: `host`, `user@host`, `host:/path`, `host:~/path`,
/// `ssh://user@host:port`, `ssh://user@host:port/path`.
pub fn parse_destination(s: &str) -> Result<Destination, String> {
    let bad = |why: &str| format!("--on: '{s}' is not an ssh destination: {why}");
    if s.is_empty() {
        return Err(bad("it is empty"));
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it contains a space or a control character"));
    }
    let (host, path) = if let Some(rest) = s.strip_prefix("ssh://") {
        match rest.find('/') {
            Some(i) => {
                let p = &rest[i..];
                // `ssh://host/~/x` names `~/x`.
                let p = p
                    .strip_prefix('/')
                    .filter(|p| p.starts_with("~/"))
                    .unwrap_or(p);
                (format!("ssh://{}", &rest[..i]), Some(p.to_owned()))
            }
            None => (s.to_owned(), None),
        }
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p.to_owned())),
            None => (s.to_owned(), None),
        }
    };
    let bare = host.strip_prefix("ssh://").unwrap_or(&host);
    if bare.is_empty() || bare.starts_with('-') || bare.starts_with('@') || bare.ends_with('@') {
        return Err(bad("no host"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-@%+[]:".contains(c);
    if !bare.chars().all(allowed) || (!host.starts_with("ssh://") && bare.contains(':')) {
        return Err(bad("the host has characters ssh does not accept"));
    }
    let path = match path {
        None => None,
        Some(p) if p.is_empty() => return Err(bad("the path after ':' is empty")),
        Some(p) if p.starts_with('/') || p.starts_with("~/") => Some(p),
        Some(p) => {
            return Err(bad(&format!(
                "the path '{p}' must be absolute or start with ~/"
            )));
        }
    };
    if path
        .as_deref()
        .is_some_and(|p| p.split('/').any(|part| part == ".."))
    {
        return Err(bad("the path must not contain '..'"));
    }
    Ok(Destination {
        host,
        path,
        base: None,
    })
}

/// Whether `name` can name a host: 1–64 ASCII letters, digits, `.`, `_` or `-`, starting with a
/// letter or digit.
pub fn valid_host_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A host `--on` named, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The name in `[hosts]`, when it came from there.
    pub name: Option<String>,
    /// The ssh destination.
    pub ssh: String,
    /// Where its repositories and worktrees live.
    pub dir: String,
    /// How many runs may go there at once.
    pub max_runs: u32,
}

impl Host {
    /// How the host is named in messages and results: its name, else its destination.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.ssh)
    }
}

/// Checks one `[hosts.NAME]` table.
pub fn check_host(name: &str, host: &HostConfig) -> Result<(), String> {
    if !valid_host_name(name) {
        return Err(format!(
            "[hosts.{name}]: a host name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        ));
    }
    let d = parse_destination(&host.ssh).map_err(|e| format!("[hosts.{name}] ssh: {e}"))?;
    if d.path.is_some() {
        return Err(format!(
            "[hosts.{name}] ssh: name the directory with dir = \"…\", not after ':'"
        ));
    }
    if let Some(dir) = &host.dir {
        check_dir(dir).map_err(|e| format!("[hosts.{name}] dir: {e}"))?;
    }
    if let Some(n) = host.max_runs
        && !(1..=MAX_HOST_RUNS).contains(&n)
    {
        return Err(format!(
            "[hosts.{name}] max_runs: {n} is not between 1 and {MAX_HOST_RUNS}"
        ));
    }
    Ok(())
}

/// A host directory: absolute or `~/…`, no `..`, no control character.
fn check_dir(dir: &str) -> Result<(), String> {
    if !(dir.starts_with('/') || dir.starts_with("~/")) {
        return Err(format!("'{dir}' must be absolute or start with ~/"));
    }
    if dir.chars().any(char::is_control) || dir.split('/').any(|p| p == "..") {
        return Err(format!("'{dir}' has a control character or '..'"));
    }
    Ok(())
}

/// Where a run went (`--on`): the result's `host`. Its evidence (`git`, `processes`) is
/// that machine's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunHost {
    /// The host's name in `[hosts]`, when it came from there.
    pub name: Option<String>,
    /// The ssh destination.
    pub ssh: String,
    /// The commit the run started from there: this worktree's HEAD, or a checkpoint of its
    /// uncommitted work on top of it (no branch moved).
    pub commit: Option<String>,
    /// The worktree the run had there (removed once the run is collected).
    pub worktree: Option<String>,
    /// The background job that ran it there (`handoff.job.v1` id).
    pub job: Option<String>,
}

/// What `--on` names: a host of the configuration (a name there wins over an ssh alias of the
/// same name), else an ssh destination, `user@host:dir` naming the directory.
pub fn resolve_host(
    on: &str,
    hosts: &std::collections::BTreeMap<String, HostConfig>,
) -> Result<Host, String> {
    if let Some(h) = hosts.get(on) {
        check_host(on, h)?;
        return Ok(Host {
            name: Some(on.to_owned()),
            ssh: h.ssh.clone(),
            dir: h.dir.clone().unwrap_or_else(|| DEFAULT_HOST_DIR.to_owned()),
            max_runs: h.max_runs.unwrap_or(1),
        });
    }
    let d = parse_destination(on)?;
    Ok(Host {
        name: None,
        ssh: d.host,
        dir: d.path.unwrap_or_else(|| DEFAULT_HOST_DIR.to_owned()),
        max_runs: 1,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn destinations_parse() {
        let d = |s: &str| parse_destination(s);
        assert_eq!(
            d("box").unwrap(),
            Destination {
                host: "box".into(),
                path: None,
                base: None,
            }
        );
        assert_eq!(
            d("me@box:/srv/repo").unwrap().path.as_deref(),
            Some("/srv/repo")
        );
        assert_eq!(
            d("me@box:~/w/repo").unwrap().path.as_deref(),
            Some("~/w/repo")
        );
        assert_eq!(d("ssh://box/~/r").unwrap().path.as_deref(), Some("~/r"));
        let u = d("ssh://me@box:2222/srv/repo").unwrap();
        assert_eq!(u.host, "ssh://me@box:2222");
        assert_eq!(u.path.as_deref(), Some("/srv/repo"));
        assert_eq!(d("ssh://me@box:2222").unwrap().path, None);
        for bad in [
            "",
            "-oProxyCommand=x",
            "box:relative/path",
            "box:",
            "a b",
            "@box",
            "box;rm",
            "box:/srv/../etc",
        ] {
            assert!(d(bad).is_err(), "{bad:?}");
        }
    }

    fn hosts() -> BTreeMap<String, HostConfig> {
        BTreeMap::from([
            (
                "devbox".to_owned(),
                HostConfig {
                    ssh: "me@10.0.0.7".into(),
                    dir: Some("/srv/handoff".into()),
                    max_runs: Some(3),
                },
            ),
            (
                "plain".to_owned(),
                HostConfig {
                    ssh: "plain".into(),
                    dir: None,
                    max_runs: None,
                },
            ),
        ])
    }

    #[test]
    fn a_configured_name_wins_over_an_ssh_alias() {
        let h = resolve_host("devbox", &hosts()).unwrap();
        assert_eq!(h.name.as_deref(), Some("devbox"));
        assert_eq!(
            (h.ssh.as_str(), h.dir.as_str(), h.max_runs),
            ("me@10.0.0.7", "/srv/handoff", 3)
        );
        let p = resolve_host("plain", &hosts()).unwrap();
        assert_eq!((p.dir.as_str(), p.max_runs), (DEFAULT_HOST_DIR, 1));
        let alias = resolve_host("me@other:/w", &hosts()).unwrap();
        assert_eq!(alias.name, None);
        assert_eq!((alias.ssh.as_str(), alias.dir.as_str()), ("me@other", "/w"));
        assert_eq!(alias.label(), "me@other");
    }

    #[test]
    fn bad_host_tables_are_named() {
        let table = |ssh: &str, dir: Option<&str>, max_runs: Option<u32>| HostConfig {
            ssh: ssh.into(),
            dir: dir.map(str::to_owned),
            max_runs,
        };
        for (name, host, named) in [
            ("-x", table("box", None, None), "host name"),
            ("ok", table("-oProxyCommand=x", None, None), "ssh"),
            ("ok", table("box:/srv", None, None), "dir = "),
            ("ok", table("box", Some("relative"), None), "dir"),
            ("ok", table("box", Some("/a/../b"), None), "'..'"),
            ("ok", table("box", None, Some(0)), "max_runs"),
            ("ok", table("box", None, Some(65)), "max_runs"),
        ] {
            let err = check_host(name, &host).unwrap_err();
            assert!(err.contains(named), "{err}");
            assert!(!err.contains('\n'));
        }
        check_host(
            "dev-box.2",
            &table("ssh://me@box:2222", Some("~/w"), Some(64)),
        )
        .unwrap();
    }

    proptest! {
        #[test]
        fn parsing_never_panics_and_never_accepts_an_option(s in ".{0,40}") {
            if let Ok(d) = parse_destination(&s) {
                prop_assert!(!d.host.starts_with('-'));
                prop_assert!(!d.host.chars().any(char::is_whitespace));
            }
        }
    }
}
