//! `cargo xtask e2e-real`: the real agent CLIs (Claude Code, Codex, OpenCode, the community Grok
//! CLI) from the npm registry, pinned, driven through the `handoff` binary against the testkit's
//! scripted model server on 127.0.0.1, and `continue --on` over a real OpenSSH server on
//! 127.0.0.1 (Debian's openssh-server and openssh-client, installed when missing). A failed
//! install fails the suite; nothing is skipped silently.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The pinned CLIs: npm package, version, executable.
pub const PINNED: &[(&str, &str, &str)] = &[
    ("@anthropic-ai/claude-code", "2.1.197", "claude"),
    ("@openai/codex", "0.171.0", "codex"),
    ("opencode-ai", "1.18.33", "opencode"),
    // The community Grok CLI (its `--version` prints 1.0.1), driven as `grok-community`.
    ("@vibe-kit/grok-cli", "0.0.34", "grok"),
];

fn installed_version(prefix: &Path, package: &str) -> Option<String> {
    let manifest = prefix
        .join("node_modules")
        .join(package)
        .join("package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["version"].as_str().map(str::to_owned)
}

/// Installs the pinned CLIs under `prefix` (kept between runs) and returns their bin directory.
pub fn install_clis(prefix: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(prefix)?;
    let missing: Vec<String> = PINNED
        .iter()
        .filter(|(pkg, version, _)| installed_version(prefix, pkg).as_deref() != Some(*version))
        .map(|(pkg, version, _)| format!("{pkg}@{version}"))
        .collect();
    if !missing.is_empty() {
        eprintln!("==> npm install {}", missing.join(" "));
        if !prefix.join("package.json").exists() {
            std::fs::write(
                prefix.join("package.json"),
                "{\"name\":\"handoff-e2e-real\",\"private\":true}\n",
            )?;
        }
        let out = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--no-save",
                "--prefix",
            ])
            .arg(prefix)
            // Every pinned package, not only the missing ones: with `--no-save`, npm removes
            // what it installed before as extraneous.
            .args(
                PINNED
                    .iter()
                    .map(|(pkg, version, _)| format!("{pkg}@{version}")),
            )
            .output()
            .context("cannot run npm (Node.js and npm are needed for the real-CLI suite)")?;
        if !out.status.success() {
            bail!(
                "npm install failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let bin = prefix.join("node_modules/.bin");
    for (pkg, version, exe) in PINNED {
        if installed_version(prefix, pkg).as_deref() != Some(*version) {
            bail!(
                "{pkg}@{version} is not installed under {}",
                prefix.display()
            );
        }
        if !bin.join(exe).exists() {
            bail!(
                "{} is missing after installing {pkg}",
                bin.join(exe).display()
            );
        }
    }
    Ok(bin)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Installs the Debian packages whose `(path or tool on PATH, package)` is missing, with
/// `apt-get`; a failure names the packages to install by hand.
fn apt_install(needs: &[(&str, &str)]) -> Result<()> {
    let mut missing: Vec<&str> = needs
        .iter()
        .filter(|(tool, _)| {
            if tool.starts_with('/') {
                !Path::new(tool).is_file()
            } else {
                !on_path(tool)
            }
        })
        .map(|(_, pkg)| *pkg)
        .collect();
    missing.dedup();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("==> apt-get install {}", missing.join(" "));
    let update = Command::new("apt-get").args(["update", "-qq"]).status();
    if !update.is_ok_and(|s| s.success()) {
        bail!(
            "apt-get update failed; install {} by hand",
            missing.join(" ")
        );
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "-qq"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("cannot run apt-get")?;
    if !status.success() {
        bail!("apt-get install {} failed ({status})", missing.join(" "));
    }
    Ok(())
}

/// Claude Code's sandbox needs Debian's bubblewrap and socat.
pub fn install_sandbox_tools() -> Result<()> {
    apt_install(&[("bwrap", "bubblewrap"), ("socat", "socat")])
}

/// `continue --on` over a real OpenSSH (`handoff_testkit::ssh::SshHost`) needs Debian's
/// openssh-server (`/usr/sbin/sshd`) and openssh-client (`ssh`, `ssh-keygen`).
pub fn install_openssh() -> Result<()> {
    apt_install(&[
        ("/usr/sbin/sshd", "openssh-server"),
        ("ssh", "openssh-client"),
        ("ssh-keygen", "openssh-client"),
    ])
}

/// Installs everything, then runs the real-CLI test binary of handoff-cli.
pub fn e2e_real(root: &Path, cargo: impl Fn() -> Command) -> Result<()> {
    let started = std::time::Instant::now();
    let bin = install_clis(&root.join("target/e2e-real/npm"))?;
    install_sandbox_tools()?;
    install_openssh()?;
    for (_, _, exe) in PINNED {
        let out = Command::new(bin.join(exe)).arg("--version").output()?;
        eprintln!("    {exe}: {}", String::from_utf8_lossy(&out.stdout).trim());
    }
    let status = cargo()
        .args([
            "test",
            "-p",
            "handoff-cli",
            "--test",
            "real",
            "--",
            "--include-ignored",
            "--test-threads=2",
        ])
        .env("HANDOFF_REAL_BIN", &bin)
        .status()
        .context("cannot run cargo test")?;
    if !status.success() {
        bail!("the real-CLI suite failed ({status})");
    }
    // The testkit's throwaway sshd itself (the hermetic suite reaches "the other machine"
    // through its ssh stand-in instead).
    let status = cargo()
        .args([
            "test",
            "-p",
            "handoff-testkit",
            "--test",
            "it",
            "--",
            "--ignored",
            "ssh::ssh_",
        ])
        .status()
        .context("cannot run cargo test")?;
    if !status.success() {
        bail!("the real OpenSSH tests of handoff-testkit failed ({status})");
    }
    eprintln!(
        "==> real-CLI suite passed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
