//! Packages a CLI loads as it starts (OpenCode's AI SDK provider packages), kept by handoff in a
//! cache of its own and shown to the agent read-only.
//!
//! Without it, a CLI under the sandbox has a cache private to the run, so every run fetches
//! the same packages again through the proxy. With it, handoff fetches each package once,
//! outside the sandbox, with the user's own `npm` (`--ignore-scripts`: nothing of the package
//! runs), into `<cache>/npm/<name>/`, and mounts that directory read-only where the CLI looks
//! for it. The agent can read the package and never write it, so no run can change what the
//! next one loads.
//!
//! Next to each package directory (outside what is mounted) handoff keeps a manifest of every
//! entry it fetched: path, kind, mode, and the BLAKE3 digest of each file's content or each
//! link's target. Before a package is mounted its directory is compared with the manifest; an
//! entry added, changed or missing (a planted file, an interrupted fetch) means the directory
//! is not used: the package is fetched anew (replacing it), and when that fails the run goes
//! without it (the CLI then fetches into its private cache, as without this cache).

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::process::{Command, Stdio};

use camino::{Utf8Path, Utf8PathBuf};

use super::Bind;
use crate::preflight::locate_on_path;

/// The npm packages a CLI loads, and where it looks for them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packages {
    /// Package names, as the CLI asks for them (`@ai-sdk/openai-compatible`).
    pub names: Vec<String>,
    /// Where the CLI looks: `<dest>/<name>/node_modules/<name>` is the package.
    pub dest: Utf8PathBuf,
}

/// What [`prepare`] did for one package, for the receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The package name.
    pub name: String,
    /// Where it is kept on the host.
    pub source: Utf8PathBuf,
    /// `reused`, `fetched`, or why it is not shared (the CLI then fetches it itself).
    pub outcome: String,
}

/// The manifest file of a package directory (a sibling of it, never mounted).
fn manifest_path(dir: &Utf8Path) -> Utf8PathBuf {
    let name = dir.file_name().unwrap_or("package");
    dir.with_file_name(format!("{name}.manifest"))
}

/// Whether `name` is an npm package name handoff will fetch: lowercase letters, digits and
/// `-._~`, optionally under one `@scope/`; never `.` or `..` as a component.
pub fn valid_name(name: &str) -> bool {
    let parts: Vec<&str> = match name.strip_prefix('@') {
        Some(rest) => {
            let parts: Vec<&str> = rest.split('/').collect();
            if parts.len() != 2 {
                return false;
            }
            parts
        }
        None => vec![name],
    };
    name.len() <= 214
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._~".contains(c))
        })
}

/// Makes each of `packages` available from `cache` (handoff's own directory, never the agent's):
/// reuses a package whose directory matches its manifest, fetches one that is missing or does
/// not, with the `npm` of `env`'s `PATH`. Returns the read-only binds for the packages that
/// are ready and what happened to each.
pub fn prepare(
    cache: &Utf8Path,
    packages: &Packages,
    env: &std::collections::BTreeMap<String, String>,
) -> (Vec<Bind>, Vec<Prepared>) {
    let mut binds = Vec::new();
    let mut report = Vec::new();
    for name in &packages.names {
        let source = cache.join("npm").join(name);
        let outcome = if !valid_name(name) {
            "not shared: not a package name handoff fetches".to_owned()
        } else {
            match ready(&source) {
                Ok(()) => "reused".to_owned(),
                Err(_) => match fetch(cache, name, &source, env) {
                    Ok(()) => "fetched".to_owned(),
                    Err(e) => format!("not shared: {e}"),
                },
            }
        };
        if outcome == "reused" || outcome == "fetched" {
            binds.push(Bind {
                source: source.clone(),
                dest: packages.dest.join(name),
                writable: false,
                secret: false,
            });
        }
        report.push(Prepared {
            name: name.clone(),
            source,
            outcome,
        });
    }
    (binds, report)
}

/// `Ok` when `dir` holds exactly what its manifest lists.
pub fn ready(dir: &Utf8Path) -> Result<(), String> {
    let want = std::fs::read_to_string(manifest_path(dir))
        .map_err(|e| format!("no manifest for {dir}: {e}"))?;
    let have = manifest(dir)?;
    if want == have {
        Ok(())
    } else {
        Err(format!("{dir} differs from its manifest"))
    }
}

/// Fetches `name` into `dest` (replacing whatever is there) with `npm install
/// --ignore-scripts`, in a new directory that is renamed into place once complete, its
/// manifest written last.
fn fetch(
    cache: &Utf8Path,
    name: &str,
    dest: &Utf8Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let npm = locate_on_path("npm", env).ok_or("no npm on PATH")?;
    let root = cache.join("npm");
    std::fs::create_dir_all(&root).map_err(|e| format!("cannot create {root}: {e}"))?;
    let _ = std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700));
    let staging = tempfile::Builder::new()
        .prefix(".fetch-")
        .tempdir_in(&root)
        .map_err(|e| format!("cannot create a directory in {root}: {e}"))?;
    let dir = Utf8Path::from_path(staging.path())
        .ok_or("the cache directory is not UTF-8")?
        .join("package");
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {dir}: {e}"))?;
    let out = Command::new(npm.as_std_path())
        .env_clear()
        .envs(env)
        .current_dir(&dir)
        .args([
            "install",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--no-update-notifier",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(dir.as_str())
        .arg(name)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {npm}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "npm install {name} failed ({}): {}",
            out.status,
            err.lines().last().unwrap_or_default()
        ));
    }
    if !dir.join("node_modules").join(name).is_dir() {
        return Err(format!("npm install {name} did not install it"));
    }
    let listing = manifest(&dir)?;
    // Out with what was there (its manifest first, so that nothing half-replaced is trusted),
    // in with the new directory, then its manifest.
    let manifest_file = manifest_path(dest);
    let _ = std::fs::remove_file(&manifest_file);
    if dest.exists() {
        let old = staging.path().join("old");
        std::fs::rename(dest, &old).map_err(|e| format!("cannot move {dest} away: {e}"))?;
    }
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {parent}: {e}"))?;
    }
    std::fs::rename(&dir, dest).map_err(|e| format!("cannot move the package to {dest}: {e}"))?;
    let tmp = staging.path().join("manifest");
    std::fs::write(&tmp, listing).map_err(|e| format!("cannot write a manifest: {e}"))?;
    std::fs::rename(&tmp, &manifest_file)
        .map_err(|e| format!("cannot write {manifest_file}: {e}"))?;
    Ok(())
}

/// The manifest of `dir`: one line per entry under it, sorted by path, never following a link:
/// `<kind> <mode> <digest> <path>` (`d` directories with no digest, `f` files with their
/// content's, `l` links with their target's).
pub fn manifest(dir: &Utf8Path) -> Result<String, String> {
    let mut lines = Vec::new();
    let mut stack = vec![Utf8PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let entries = here
            .read_dir_utf8()
            .map_err(|e| format!("cannot read {here}: {e}"))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {here}: {e}"))?;
            let path = rel.join(entry.file_name());
            let meta = entry
                .path()
                .symlink_metadata()
                .map_err(|e| format!("cannot stat {}: {e}", entry.path()))?;
            let mode = meta.mode() & 0o7777;
            let ft = meta.file_type();
            let line = if ft.is_dir() {
                stack.push(path.clone());
                format!("d {mode:o} - {path}")
            } else if ft.is_symlink() {
                let target = std::fs::read_link(entry.path())
                    .map_err(|e| format!("cannot read {}: {e}", entry.path()))?;
                let digest = blake3::hash(target.as_os_str().as_encoded_bytes());
                format!("l {mode:o} {digest} {path}")
            } else if ft.is_file() {
                format!("f {mode:o} {} {path}", file_digest(entry.path())?)
            } else {
                return Err(format!(
                    "{} is neither a file, a directory nor a link",
                    entry.path()
                ));
            };
            lines.push((path, line));
        }
    }
    lines.sort();
    let mut text = lines
        .into_iter()
        .map(|(_, line)| line)
        .collect::<Vec<_>>()
        .join("\n");
    text.push('\n');
    Ok(text)
}

fn file_digest(path: &Utf8Path) -> Result<blake3::Hash, String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("cannot read {path}: {e}"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache holding `name` as handoff would have fetched it: the package and its manifest.
    fn cached(cache: &Utf8Path, name: &str) -> Utf8PathBuf {
        let dir = cache.join("npm").join(name);
        let pkg = dir.join("node_modules").join(name);
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("index.js"), "module.exports = 1;\n").unwrap();
        std::fs::write(dir.join("package.json"), "{}\n").unwrap();
        std::fs::write(manifest_path(&dir), manifest(&dir).unwrap()).unwrap();
        dir
    }

    fn no_npm() -> std::collections::BTreeMap<String, String> {
        [("PATH".to_owned(), "/nonexistent".to_owned())].into()
    }

    #[test]
    fn package_names() {
        for (name, ok) in [
            ("@ai-sdk/openai-compatible", true),
            ("left-pad", true),
            ("a.b_c~d", true),
            ("", false),
            ("..", false),
            ("@scope/../x", false),
            ("@scope", false),
            ("a/b", false),
            ("Upper", false),
            ("@s/.hidden", false),
        ] {
            assert_eq!(valid_name(name), ok, "{name}");
        }
    }

    #[test]
    fn a_verified_package_is_shared_read_only() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Utf8Path::from_path(tmp.path()).unwrap();
        let dir = cached(cache, "@scope/pkg");
        let packages = Packages {
            names: vec!["@scope/pkg".into()],
            dest: "/run/cache/opencode/packages".into(),
        };
        let (binds, report) = prepare(cache, &packages, &no_npm());
        assert_eq!(report[0].outcome, "reused");
        assert_eq!(
            binds,
            vec![Bind {
                source: dir,
                dest: "/run/cache/opencode/packages/@scope/pkg".into(),
                writable: false,
                secret: false,
            }]
        );
    }

    #[test]
    fn a_planted_or_changed_file_is_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Utf8Path::from_path(tmp.path()).unwrap();
        let packages = Packages {
            names: vec!["pkg".into()],
            dest: "/run/packages".into(),
        };
        type Tamper = fn(&Utf8Path);
        let tampers: [(&str, Tamper); 5] = [
            ("planted file", |d| {
                std::fs::write(d.join("node_modules/pkg/evil.js"), "x").unwrap()
            }),
            ("changed file", |d| {
                std::fs::write(d.join("node_modules/pkg/index.js"), "evil();\n").unwrap()
            }),
            ("removed file", |d| {
                std::fs::remove_file(d.join("package.json")).unwrap()
            }),
            ("planted link", |d| {
                std::os::unix::fs::symlink("/etc/passwd", d.join("node_modules/pkg/l")).unwrap()
            }),
            ("no manifest", |d| {
                std::fs::remove_file(manifest_path(d)).unwrap()
            }),
        ];
        for (what, tamper) in tampers {
            let _ = std::fs::remove_dir_all(cache.join("npm"));
            let dir = cached(cache, "pkg");
            assert_eq!(ready(&dir), Ok(()));
            tamper(&dir);
            assert!(ready(&dir).is_err(), "{what}");
            // Not fetchable again here (no npm): the run goes without it.
            let (binds, report) = prepare(cache, &packages, &no_npm());
            assert!(binds.is_empty(), "{what}");
            assert!(report[0].outcome.starts_with("not shared"), "{what}");
        }
    }

    #[test]
    fn an_invalid_name_is_never_fetched() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Utf8Path::from_path(tmp.path()).unwrap();
        let packages = Packages {
            names: vec!["../../etc".into()],
            dest: "/run/packages".into(),
        };
        let (binds, report) = prepare(cache, &packages, &no_npm());
        assert!(binds.is_empty());
        assert!(report[0].outcome.starts_with("not shared"));
        assert!(!cache.join("npm").exists());
    }
}
