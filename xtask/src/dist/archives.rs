//! The release archives `dist` makes, read back for the npm packages: one
//! `handoff-cli-<target>.tar.xz` per platform, holding `handoff-cli-<target>/handoff`, with
//! `dist`'s checksum file `<archive>.sha256` beside it. The release workflow's npm job makes
//! every platform package from them, so npm ships the very binaries the release does.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::npm::{PLATFORMS, Platform};

/// What `dist` calls the app in its archive names: the `handoff-cli` crate.
const APP: &str = "handoff-cli";

/// The name `dist` gives `platform`'s archive.
pub fn archive_name(platform: &Platform) -> String {
    format!("{APP}-{}.tar.xz", platform.triple)
}

/// The binary of every platform the launcher names, extracted under `stage` from the archives
/// in `dir`. A platform without its archive, an archive whose checksum file disagrees with it,
/// or an archive without the binary, stops everything: the launcher must never name a package
/// that was not published.
pub fn binaries(dir: &Path, stage: &Path) -> Result<Vec<(Platform, PathBuf)>> {
    PLATFORMS
        .iter()
        .map(|platform| {
            let archive = dir.join(archive_name(platform));
            if !archive.is_file() {
                bail!(
                    "no release archive {} in {} (every platform the npm launcher names needs one)",
                    archive_name(platform),
                    dir.display()
                );
            }
            check_sum(&archive)?;
            Ok((*platform, extract(&archive, platform, stage)?))
        })
        .collect()
}

/// Checks `archive` against `dist`'s `<archive>.sha256` (`<hex> *<name>`), when there is one.
fn check_sum(archive: &Path) -> Result<()> {
    let sum_file = PathBuf::from(format!("{}.sha256", archive.display()));
    let Ok(text) = std::fs::read_to_string(&sum_file) else {
        return Ok(());
    };
    let wanted = text
        .split_whitespace()
        .next()
        .with_context(|| format!("{} is empty", sum_file.display()))?;
    let bytes =
        std::fs::read(archive).with_context(|| format!("cannot read {}", archive.display()))?;
    let got = hex::encode(Sha256::digest(&bytes));
    if !got.eq_ignore_ascii_case(wanted) {
        bail!(
            "{} does not match its checksum file ({got} != {wanted})",
            archive.display()
        );
    }
    Ok(())
}

/// Extracts `<app>-<target>/handoff` from `archive` into `stage/<target>/` and returns it.
fn extract(archive: &Path, platform: &Platform, stage: &Path) -> Result<PathBuf> {
    let root = format!("{APP}-{}", platform.triple);
    let into = stage.join(platform.triple);
    if into.exists() {
        std::fs::remove_dir_all(&into)?;
    }
    std::fs::create_dir_all(&into)?;
    let member = format!("{root}/handoff");
    tar(Command::new("tar")
        .arg("-xJf")
        .arg(archive)
        .arg("-C")
        .arg(&into)
        .arg(&member))
    .with_context(|| format!("{} holds no {member}", archive.display()))?;
    let bin = into.join(&member);
    let meta = std::fs::symlink_metadata(&bin)?;
    if !meta.file_type().is_file() {
        bail!("{member} in {} is not a regular file", archive.display());
    }
    Ok(bin)
}

/// Writes `platform`'s archive into `dir` as `dist` lays it out, carrying `binary`, with its
/// checksum file: what the release makes, for tests of the path from archives to packages.
pub fn write(binary: &Path, platform: &Platform, dir: &Path) -> Result<PathBuf> {
    let root = format!("{APP}-{}", platform.triple);
    let stage = dir.join(format!("{root}.stage"));
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    std::fs::create_dir_all(stage.join(&root))?;
    std::fs::copy(binary, stage.join(&root).join("handoff"))
        .with_context(|| format!("cannot copy {}", binary.display()))?;
    let archive = dir.join(archive_name(platform));
    // The fastest preset: these archives are for tests, and xz's default takes a minute on a
    // debug build.
    tar(Command::new("tar")
        .env("XZ_OPT", "-0 -T0")
        .arg("-cJf")
        .arg(&archive)
        .arg("-C")
        .arg(&stage)
        .arg(&root))?;
    std::fs::remove_dir_all(&stage)?;
    let sum = hex::encode(Sha256::digest(std::fs::read(&archive)?));
    std::fs::write(
        format!("{}.sha256", archive.display()),
        format!("{sum} *{}\n", archive_name(platform)),
    )?;
    Ok(archive)
}

fn tar(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .output()
        .context("cannot run tar (tar and xz-utils are needed for the release archives)")?;
    if !out.status.success() {
        bail!(
            "tar failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_platform_comes_from_its_archive_and_a_bad_one_stops_everything() {
        let dir = tempfile::tempdir().unwrap();
        let archives = dir.path().join("archives");
        std::fs::create_dir_all(&archives).unwrap();
        for p in PLATFORMS {
            let bin = dir.path().join(format!("bin-{}", p.triple));
            std::fs::write(&bin, format!("handoff for {}", p.triple)).unwrap();
            write(&bin, p, &archives).unwrap();
        }
        let stage = dir.path().join("stage");
        let got = binaries(&archives, &stage).unwrap();
        assert_eq!(got.len(), PLATFORMS.len());
        for (p, bin) in &got {
            let text = std::fs::read_to_string(bin).unwrap();
            assert_eq!(text, format!("handoff for {}", p.triple));
        }

        // A changed archive disagrees with its checksum.
        let name = archive_name(&PLATFORMS[2]);
        let mut bytes = std::fs::read(archives.join(&name)).unwrap();
        bytes.push(0);
        std::fs::write(archives.join(&name), bytes).unwrap();
        let err = binaries(&archives, &stage).unwrap_err().to_string();
        assert!(err.contains("does not match its checksum"), "{err}");

        // A missing platform is named.
        std::fs::remove_file(archives.join(&name)).unwrap();
        let err = binaries(&archives, &stage).unwrap_err().to_string();
        assert!(err.contains(&name), "{err}");
    }
}
