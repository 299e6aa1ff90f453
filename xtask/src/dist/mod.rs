//! `cargo xtask dist [--debug]`: the npm packages of `handoff`, as tarballs in
//! `target/dist/npm/`: the launcher `handoff-cli` and this machine's platform package, at the
//! workspace's version, carrying the release binary (`--debug`: the dev build's, in
//! `target/dist/npm-debug/`, which tests install so that they need no release build).
//!
//! `cargo xtask npm-e2e` ([`e2e`]) installs them the way a user does, from a local registry.

pub mod e2e;
pub mod npm;
mod registry;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use npm::{Meta, Platform, Tarballs};

/// Which build of `handoff` the platform package carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `cargo build --release`: what is published.
    Release,
    /// The dev build the hermetic suite already made: for tests.
    Debug,
}

/// Where cargo builds, and what the `handoff-cli` crate says of itself.
struct Workspace {
    target: PathBuf,
    meta: Meta,
}

fn workspace() -> Result<Workspace> {
    let out = crate::cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("cargo metadata printed no JSON")?;
    let target = v["target_directory"]
        .as_str()
        .context("cargo metadata names no target directory")?;
    let cli = v["packages"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "handoff-cli"))
        .context("cargo metadata lists no handoff-cli package")?;
    let text = |key: &str| cli[key].as_str().map(str::to_owned);
    Ok(Workspace {
        target: PathBuf::from(target),
        meta: Meta {
            version: text("version").context("handoff-cli has no version")?,
            description: text("description").context("handoff-cli has no description")?,
            license: text("license").context("handoff-cli has no license")?,
            repository: text("repository"),
        },
    })
}

/// Builds `handoff` in `profile` and returns its path.
fn build(profile: Profile, target: &Path) -> Result<PathBuf> {
    match profile {
        Profile::Debug => crate::build_binaries(),
        Profile::Release => {
            crate::run(
                "cargo build --release (handoff)",
                crate::cargo().args([
                    "build",
                    "--release",
                    "-p",
                    "handoff-cli",
                    "--bin",
                    "handoff",
                ]),
            )?;
            let bin = target.join("release/handoff");
            if !bin.is_file() {
                bail!("{} was not built", bin.display());
            }
            Ok(bin)
        }
    }
}

/// What `dist` made.
pub struct Made {
    /// The tarballs.
    pub tarballs: Tarballs,
    /// Their version.
    pub version: String,
    /// The platform they are for.
    pub platform: Platform,
    /// The binary the platform package carries.
    pub binary: PathBuf,
    /// Cargo's target directory.
    pub target: PathBuf,
}

/// Builds `handoff` in `profile` and makes the npm tarballs in `target/dist/npm/` (`Debug`:
/// `target/dist/npm-debug/`).
pub fn make(profile: Profile) -> Result<Made> {
    let ws = workspace()?;
    let platform = Platform::host()?;
    let binary = build(profile, &ws.target)?;
    eprintln!(
        "==> npm packages {} {} ({})",
        npm::LAUNCHER,
        ws.meta.version,
        platform.package()
    );
    // The dev build's tarballs apart from the release's, so a test never replaces them.
    let out = match profile {
        Profile::Release => "dist/npm",
        Profile::Debug => "dist/npm-debug",
    };
    let tarballs = npm::make(
        &binary,
        &platform,
        &ws.meta,
        &ws.target.join(format!("{out}-stage")),
        &ws.target.join(out),
    )?;
    Ok(Made {
        tarballs,
        version: ws.meta.version,
        platform,
        binary,
        target: ws.target,
    })
}

/// Entry point: `cargo xtask dist [--debug]`.
pub fn dist(args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: cargo xtask dist [--debug]";
    let profile = match args {
        [] => Profile::Release,
        [flag] if flag == "--debug" => Profile::Debug,
        _ => bail!("{USAGE}"),
    };
    let made = make(profile)?;
    for t in [&made.tarballs.launcher, &made.tarballs.platform] {
        eprintln!("    {}", t.display());
    }
    Ok(())
}
