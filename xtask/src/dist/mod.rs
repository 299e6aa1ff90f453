//! `cargo xtask dist [--debug | --from-archives DIR]`: the npm packages of `handoff`, as
//! tarballs in `target/dist/npm/`, at the workspace's version: the launcher `handoff-cli` and
//! this machine's platform package carrying the release binary (`--debug`: the dev build's, in
//! `target/dist/npm-debug/`, which tests install so that they need no release build), or every
//! platform's package made from the release archives `dist` built (`--from-archives`: what the
//! release workflow publishes).
//!
//! `cargo xtask npm-e2e` ([`e2e`]) installs them the way a user does, from a local registry.

pub mod archives;
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
    /// This machine's platform.
    pub platform: Platform,
    /// The binary this machine's platform package carries.
    pub binary: PathBuf,
    /// Cargo's target directory.
    pub target: PathBuf,
}

/// Where the tarballs of `profile` go, under cargo's target directory: the dev build's apart
/// from the release's, so a test never replaces them.
fn out_dir(profile: Profile) -> &'static str {
    match profile {
        Profile::Release => "dist/npm",
        Profile::Debug => "dist/npm-debug",
    }
}

/// Builds `handoff` in `profile` and makes the launcher's and this machine's tarballs in
/// `target/dist/npm/` (`Debug`: `target/dist/npm-debug/`).
pub fn make(profile: Profile) -> Result<Made> {
    let ws = workspace()?;
    let platform = Platform::host()?;
    let binary = build(profile, &ws.target)?;
    let out = out_dir(profile);
    let tarballs = pack(&ws, &[(platform, binary.clone())], out)?;
    Ok(Made {
        tarballs,
        version: ws.meta.version,
        platform,
        binary,
        target: ws.target,
    })
}

/// Makes the launcher's tarball and every platform's from the release archives in `archives`,
/// into `target/<out>/`. `host_binary` is the binary this machine's archive holds.
fn make_from_archives(archives: &Path, profile: Profile) -> Result<Made> {
    let ws = workspace()?;
    let platform = Platform::host()?;
    let stage = ws.target.join(format!("{}-archives", out_dir(profile)));
    let binaries = archives::binaries(archives, &stage)?;
    let binary = binaries
        .iter()
        .find(|(p, _)| *p == platform)
        .map(|(_, b)| b.clone())
        .context("no binary for this machine among the archives")?;
    let tarballs = pack(&ws, &binaries, out_dir(profile))?;
    Ok(Made {
        tarballs,
        version: ws.meta.version,
        platform,
        binary,
        target: ws.target,
    })
}

/// The dev build in release archives as `dist` lays them out (this machine's carrying it, every
/// other platform's a stand-in that only says what it is), then every package made from them
/// the way the release workflow makes them: for `cargo xtask npm-e2e`.
pub fn make_release_shaped() -> Result<Made> {
    let ws = workspace()?;
    let host = Platform::host()?;
    let binary = build(Profile::Debug, &ws.target)?;
    let dir = ws.target.join("dist/archives-debug");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let stand_in = dir.join("stand-in");
    for platform in npm::PLATFORMS {
        if *platform == host {
            archives::write(&binary, platform, &dir)?;
        } else {
            std::fs::write(
                &stand_in,
                format!(
                    "#!/bin/sh\necho 'a stand-in for {}' >&2\nexit 126\n",
                    platform.triple
                ),
            )?;
            archives::write(&stand_in, platform, &dir)?;
        }
    }
    make_from_archives(&dir, Profile::Debug)
}

fn pack(ws: &Workspace, binaries: &[(Platform, PathBuf)], out: &str) -> Result<Tarballs> {
    let names: Vec<String> = binaries.iter().map(|(p, _)| p.package()).collect();
    eprintln!(
        "==> npm packages {} {} ({})",
        npm::LAUNCHER,
        ws.meta.version,
        names.join(", ")
    );
    npm::make(
        binaries,
        &ws.meta,
        &ws.target.join(format!("{out}-stage")),
        &ws.target.join(out),
    )
}

/// Entry point: `cargo xtask dist [--debug | --from-archives DIR]`.
pub fn dist(args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: cargo xtask dist [--debug | --from-archives DIR]";
    let made = match args {
        [] => make(Profile::Release)?,
        [flag] if flag == "--debug" => make(Profile::Debug)?,
        [flag, dir] if flag == "--from-archives" => {
            make_from_archives(Path::new(dir), Profile::Release)?
        }
        _ => bail!("{USAGE}"),
    };
    let t = &made.tarballs;
    for path in t.platforms.iter().map(|(_, p)| p).chain([&t.launcher]) {
        eprintln!("    {}", path.display());
    }
    Ok(())
}
