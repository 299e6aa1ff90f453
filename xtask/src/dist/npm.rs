//! The npm packages, the way the agent CLIs ship theirs: the launcher `handoff-cli`, whose `bin`
//! is `handoff` (a dependency-free Node.js script, `launcher.js`), and one package per platform
//! carrying the binary, named in the launcher's `optionalDependencies` so npm installs only the
//! one that fits (`os`, `cpu`, `libc`). Nothing is downloaded at install time.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// The name of the launcher package; each platform package is `<LAUNCHER>-<os>-<cpu>`.
pub const LAUNCHER: &str = "handoff-cli";

/// The launcher script, the launcher package's `bin/handoff`.
const LAUNCHER_JS: &str = include_str!("launcher.js");

/// A platform a package is published for, in npm's words (`process.platform`,
/// `process.arch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Platform {
    /// npm's `os` (Node.js's `process.platform`).
    pub os: &'static str,
    /// npm's `cpu` (Node.js's `process.arch`).
    pub cpu: &'static str,
    /// Rust's target triple, which names the release archive.
    pub triple: &'static str,
    /// How the platform reads in a description.
    title: &'static str,
}

/// Every platform the launcher knows: `cargo xtask dist` builds the package of the one it runs
/// on, `cargo xtask dist --from-archives` all of them (the release's targets in
/// `dist-workspace.toml`).
pub const PLATFORMS: &[Platform] = &[
    Platform {
        os: "linux",
        cpu: "x64",
        triple: "x86_64-unknown-linux-gnu",
        title: "Linux x64 (glibc)",
    },
    Platform {
        os: "linux",
        cpu: "arm64",
        triple: "aarch64-unknown-linux-gnu",
        title: "Linux arm64 (glibc)",
    },
    Platform {
        os: "darwin",
        cpu: "x64",
        triple: "x86_64-apple-darwin",
        title: "macOS x64",
    },
    Platform {
        os: "darwin",
        cpu: "arm64",
        triple: "aarch64-apple-darwin",
        title: "macOS arm64",
    },
];

impl Platform {
    /// The platform this program runs on, when a package is published for it.
    pub fn host() -> Result<Platform> {
        let os = match std::env::consts::OS {
            "macos" => "darwin",
            other => other,
        };
        let cpu = match std::env::consts::ARCH {
            "x86_64" => "x64",
            "aarch64" => "arm64",
            other => other,
        };
        PLATFORMS
            .iter()
            .copied()
            .find(|p| p.os == os && p.cpu == cpu)
            .with_context(|| format!("no npm package is made for {os}-{cpu}"))
    }

    /// The name of the platform's package.
    pub fn package(&self) -> String {
        format!("{LAUNCHER}-{}-{}", self.os, self.cpu)
    }
}

/// What the packages say of themselves, read from the `handoff-cli` crate.
#[derive(Debug, Clone)]
pub struct Meta {
    /// The version of every package (the workspace's).
    pub version: String,
    /// The crate's description.
    pub description: String,
    /// The crate's license expression.
    pub license: String,
    /// The crate's repository, when it names one.
    pub repository: Option<String>,
}

fn common(name: &str, description: &str, meta: &Meta) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("name".into(), json!(name));
    m.insert("version".into(), json!(meta.version));
    m.insert("description".into(), json!(description));
    m.insert("license".into(), json!(meta.license));
    if let Some(url) = &meta.repository {
        m.insert("repository".into(), json!({"type": "git", "url": url}));
    }
    m
}

/// The launcher's `package.json`: `bin` is `handoff`, every platform package an optional
/// dependency at the same version.
pub fn launcher_manifest(meta: &Meta) -> Value {
    let mut m = common(LAUNCHER, &meta.description, meta);
    m.insert("bin".into(), json!({"handoff": "bin/handoff"}));
    m.insert("files".into(), json!(["bin/handoff"]));
    m.insert("engines".into(), json!({"node": ">=18"}));
    let deps: serde_json::Map<String, Value> = PLATFORMS
        .iter()
        .map(|p| (p.package(), json!(meta.version)))
        .collect();
    m.insert("optionalDependencies".into(), Value::Object(deps));
    Value::Object(m)
}

/// A platform package's `package.json`: installed only where `os`, `cpu` (and on Linux `libc`)
/// match; the binary is `bin/handoff`.
pub fn platform_manifest(platform: &Platform, meta: &Meta) -> Value {
    let description = format!(
        "The handoff binary for {}, installed by {LAUNCHER}",
        platform.title
    );
    let mut m = common(&platform.package(), &description, meta);
    m.insert("os".into(), json!([platform.os]));
    m.insert("cpu".into(), json!([platform.cpu]));
    if platform.os == "linux" {
        m.insert("libc".into(), json!(["glibc"]));
    }
    m.insert("files".into(), json!(["bin/handoff"]));
    m.insert("preferUnplugged".into(), json!(true));
    Value::Object(m)
}

/// Writes a package's tree under `stage/<name>`: its `package.json` and `bin/handoff` (mode
/// 0755) with `bin` as its content.
fn stage_package(stage: &Path, manifest: &Value, bin: &[u8]) -> Result<PathBuf> {
    let name = manifest["name"]
        .as_str()
        .context("a manifest without a name")?;
    let dir = stage.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir.join("bin"))?;
    std::fs::write(
        dir.join("package.json"),
        format!("{}\n", serde_json::to_string_pretty(manifest)?),
    )?;
    let exe = dir.join("bin/handoff");
    std::fs::write(&exe, bin).with_context(|| format!("cannot write {}", exe.display()))?;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// `npm pack` of a staged package into `out`; returns the tarball.
fn pack(dir: &Path, out: &Path) -> Result<PathBuf> {
    let output = Command::new("npm")
        .args(["pack", "--json", "--ignore-scripts", "--pack-destination"])
        .arg(out)
        .current_dir(dir)
        .output()
        .context("cannot run npm (Node.js and npm are needed to make the npm packages)")?;
    if !output.status.success() {
        bail!(
            "npm pack of {} failed ({}): {}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let report: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("npm pack of {} printed no JSON report", dir.display()))?;
    let file = report[0]["filename"]
        .as_str()
        .with_context(|| format!("npm pack of {} named no tarball", dir.display()))?;
    let tarball = out.join(file);
    if !tarball.is_file() {
        bail!("npm pack reported {} but it is missing", tarball.display());
    }
    Ok(tarball)
}

/// The tarballs `cargo xtask dist` makes.
#[derive(Debug, Clone)]
pub struct Tarballs {
    /// The launcher package.
    pub launcher: PathBuf,
    /// The platform packages, in the order they were given.
    pub platforms: Vec<(Platform, PathBuf)>,
}

/// Makes the launcher's tarball and each platform's, carrying its binary, in `out` (emptied of
/// earlier tarballs first), staging the trees under `stage`.
pub fn make(
    binaries: &[(Platform, PathBuf)],
    meta: &Meta,
    stage: &Path,
    out: &Path,
) -> Result<Tarballs> {
    std::fs::create_dir_all(out)?;
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "tgz") {
            std::fs::remove_file(&path)?;
        }
    }
    let mut platforms = Vec::new();
    for (platform, binary) in binaries {
        let bytes =
            std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
        let dir = stage_package(stage, &platform_manifest(platform, meta), &bytes)?;
        platforms.push((*platform, pack(&dir, out)?));
    }
    let launcher_dir = stage_package(stage, &launcher_manifest(meta), LAUNCHER_JS.as_bytes())?;
    Ok(Tarballs {
        launcher: pack(&launcher_dir, out)?,
        platforms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            version: "1.2.3".into(),
            description: "Delegates work between agent CLIs".into(),
            license: "MIT OR Apache-2.0".into(),
            repository: None,
        }
    }

    #[test]
    fn the_launcher_names_every_platform_at_its_own_version() {
        let m = launcher_manifest(&meta());
        assert_eq!(m["bin"]["handoff"], "bin/handoff");
        let deps = m["optionalDependencies"].as_object().unwrap();
        let names: Vec<&str> = deps.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "handoff-cli-darwin-arm64",
                "handoff-cli-darwin-x64",
                "handoff-cli-linux-arm64",
                "handoff-cli-linux-x64"
            ]
        );
        assert!(deps.values().all(|v| v == "1.2.3"), "{deps:?}");
    }

    #[test]
    fn a_platform_package_installs_only_on_its_platform() {
        let linux = platform_manifest(&PLATFORMS[0], &meta());
        assert_eq!(linux["name"], "handoff-cli-linux-x64");
        assert_eq!(linux["os"], json!(["linux"]));
        assert_eq!(linux["cpu"], json!(["x64"]));
        assert_eq!(linux["libc"], json!(["glibc"]));
        let mac = platform_manifest(&PLATFORMS[3], &meta());
        assert_eq!(mac["name"], "handoff-cli-darwin-arm64");
        assert_eq!(mac["cpu"], json!(["arm64"]));
        assert!(mac.get("libc").is_none(), "{mac}");
    }

    #[test]
    fn the_platforms_are_the_release_targets() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist-workspace.toml");
        let config: toml::Value = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut targets: Vec<&str> = config["dist"]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let mut triples: Vec<&str> = PLATFORMS.iter().map(|p| p.triple).collect();
        targets.sort_unstable();
        triples.sort_unstable();
        assert_eq!(triples, targets);
    }

    #[test]
    fn the_launcher_finds_the_package_these_manifests_name() {
        // The launcher derives the package from its own name, process.platform and
        // process.arch: the names here must read the same way.
        assert!(LAUNCHER_JS.contains("`${manifest.name}-${platform}`"));
        assert!(LAUNCHER_JS.contains("`${process.platform}-${process.arch}`"));
        assert_eq!(PLATFORMS[1].package(), "handoff-cli-linux-arm64");
    }
}
