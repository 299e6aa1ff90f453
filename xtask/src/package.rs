//! `cargo xtask package`: every crate of the workspace but this task runner packages (`cargo
//! package --workspace --exclude xtask`), those a user or an embedder installs (without
//! `publish = false`) as crates.io would take them, and the packaged `handoff-cli`
//! installs with `cargo install --path` of its unpacked `.crate` — what `cargo install
//! handoff-cli` does once the crates are published. Until then its sibling crates come from
//! their unpacked `.crate`s too (a `[patch.crates-io]` per crate), never from the workspace.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{cargo, run};

/// A crate of the workspace that is published.
struct Published {
    name: String,
    version: String,
}

/// The workspace's published crates (`publish` not `false`), from `cargo metadata`.
fn published(root: &Path) -> Result<Vec<Published>> {
    let out = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(root)
        .output()
        .context("cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout)?;
    let mut crates = Vec::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        // `publish = false` reads as an empty list of registries.
        if p["publish"].as_array().is_some_and(Vec::is_empty) {
            continue;
        }
        crates.push(Published {
            name: p["name"].as_str().unwrap_or_default().to_owned(),
            version: p["version"].as_str().unwrap_or_default().to_owned(),
        });
    }
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(crates)
}

/// `cargo xtask package`.
pub fn package(root: &Path) -> Result<()> {
    let crates = published(root)?;
    let names: Vec<&str> = crates.iter().map(|c| c.name.as_str()).collect();
    eprintln!(
        "==> packaging the workspace; published: {}",
        names.join(", ")
    );
    // Every crate packages, the unpublished testkit and examples too; all but this task runner,
    // whose dependency on the unpublished testkit no package could resolve.
    let mut cmd = cargo();
    cmd.args([
        "package",
        "--workspace",
        "--exclude",
        "xtask",
        "--no-verify",
        "--allow-dirty",
    ])
    .current_dir(root);
    run("cargo package --workspace --exclude xtask", &mut cmd)?;

    // Unpacked outside the workspace, as a registry would hand them out.
    let tmp = Unpacked::new(root)?;
    let mut dirs = Vec::new();
    for c in &crates {
        let file = root
            .join("target/package")
            .join(format!("{}-{}.crate", c.name, c.version));
        run(
            &format!("unpack {}", file.display()),
            Command::new("tar")
                // Fresh times: the files are new to cargo, which would otherwise take the
                // previous run's build at the same paths as up to date.
                .args(["-x", "-m", "-z", "-f"])
                .arg(&file)
                .arg("-C")
                .arg(tmp.path()),
        )?;
        dirs.push((c, tmp.path().join(format!("{}-{}", c.name, c.version))));
    }
    // An unpacked crate is a workspace of its own, with cargo's default dev profile (full
    // debug info): without the workspace's profile it would build every dependency a second
    // time, at several times the size.
    let profile = dev_profile(root)?;
    let with_patches = |cmd: &mut Command, dir: &Path| {
        for p in patches_for(dir, &dirs).iter().chain(&profile) {
            cmd.args(["--config", p]);
        }
        // The dependencies the test suite built are reused; the packaged crates, from other
        // sources, are built beside the workspace's own.
        cmd.env("CARGO_TARGET_DIR", root.join("target"));
    };

    let Some((cli, cli_dir)) = dirs.iter().find(|(c, _)| c.name == "handoff-cli") else {
        bail!("handoff-cli is not among the published crates");
    };
    let bin_root: PathBuf = tmp.path().join("installed");
    let mut install = cargo();
    install
        .args(["install", "--debug", "--path"])
        .arg(cli_dir)
        .arg("--root")
        .arg(&bin_root);
    with_patches(&mut install, cli_dir);
    run("cargo install --path <unpacked handoff-cli>", &mut install)?;
    let handoff = bin_root.join("bin/handoff");
    let out = Command::new(&handoff)
        .arg("--version")
        .output()
        .with_context(|| format!("running {}", handoff.display()))?;
    let version = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !version.contains(&cli.version) {
        bail!(
            "the installed handoff says {version:?} (exit {:?}), not version {}",
            out.status.code(),
            cli.version
        );
    }
    eprintln!("==> installed from the package: {}", version.trim());

    // The published crates the binary does not depend on build from their packages too.
    for (c, dir) in &dirs {
        if c.name == "handoff-cli" {
            continue;
        }
        let mut check = cargo();
        check
            .args(["check", "--manifest-path"])
            .arg(dir.join("Cargo.toml"));
        with_patches(&mut check, dir);
        run(&format!("cargo check <unpacked {}>", c.name), &mut check)?;
    }
    eprintln!("==> every published crate packages, builds and installs from its package");
    Ok(())
}

/// Where the packages are unpacked: a directory of the system's temporary directory named
/// after the workspace, so that the next run builds at the same paths and replaces what this
/// one left in the target directory instead of adding to it. Emptied first, removed on drop.
struct Unpacked(PathBuf);

impl Unpacked {
    fn new(root: &Path) -> Result<Self> {
        use sha2::Digest as _;
        use std::os::unix::fs::DirBuilderExt as _;
        let digest = sha2::Sha256::digest(root.to_string_lossy().as_bytes());
        let dir =
            std::env::temp_dir().join(format!("handoff-package-{}", hex::encode(&digest[..8])));
        // A symlink there is removed, never followed; the directory is then made anew, private,
        // and the make fails if anything took its name in between.
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&dir),
            Ok(_) => std::fs::remove_file(&dir),
            Err(_) => Ok(()),
        }
        .with_context(|| format!("cannot clear {}", dir.display()))?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Self(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The workspace's `[profile.dev]`, as `--config` values (`profile.dev.debug="…"`,
/// `profile.dev.package."*".debug=false`).
fn dev_profile(root: &Path) -> Result<Vec<String>> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let doc: toml::Table = toml::from_str(&manifest).context("the workspace's Cargo.toml")?;
    let mut out = Vec::new();
    if let Some(dev) = doc
        .get("profile")
        .and_then(|p| p.get("dev"))
        .and_then(toml::Value::as_table)
    {
        flatten("profile.dev", dev, &mut out);
    }
    Ok(out)
}

/// Appends `prefix.key=value` for every leaf of `table`, quoting keys that are not bare.
fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<String>) {
    for (key, value) in table {
        let bare = key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let path = if bare {
            format!("{prefix}.{key}")
        } else {
            format!("{prefix}.{key:?}")
        };
        match value {
            toml::Value::Table(t) => flatten(&path, t, out),
            leaf => out.push(format!("{path}={leaf}")),
        }
    }
}

/// The `[patch.crates-io]` entries (as `--config` values) that make the packaged crate in
/// `dir` take each packaged sibling it depends on (dev- and build-dependencies included),
/// directly or through another, from `dirs`.
fn patches_for(dir: &Path, dirs: &[(&Published, PathBuf)]) -> Vec<String> {
    let depends = |manifest: &Path, name: &str| {
        std::fs::read_to_string(manifest.join("Cargo.toml"))
            .is_ok_and(|m| m.contains(&format!("dependencies.{name}]")))
    };
    let mut wanted: Vec<&str> = Vec::new();
    let mut frontier = vec![dir.to_path_buf()];
    while let Some(at) = frontier.pop() {
        for (c, d) in dirs {
            if !wanted.contains(&c.name.as_str()) && depends(&at, &c.name) {
                wanted.push(&c.name);
                frontier.push(d.clone());
            }
        }
    }
    dirs.iter()
        .filter(|(c, _)| wanted.contains(&c.name.as_str()))
        .map(|(c, d)| {
            format!(
                "patch.crates-io.{}.path={:?}",
                c.name,
                d.display().to_string()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::flatten;

    #[test]
    fn a_dev_profile_becomes_config_values_cargo_takes() {
        let doc: toml::Table = toml::from_str(
            "[profile.dev]\ndebug = \"line-tables-only\"\n\
             [profile.dev.package.\"*\"]\ndebug = false\nopt-level = 1\n",
        )
        .unwrap();
        let dev = doc["profile"]["dev"].as_table().unwrap();
        let mut out = Vec::new();
        flatten("profile.dev", dev, &mut out);
        out.sort();
        assert_eq!(
            out,
            [
                "profile.dev.debug=\"line-tables-only\"",
                "profile.dev.package.\"*\".debug=false",
                "profile.dev.package.\"*\".opt-level=1",
            ]
        );
    }
}
