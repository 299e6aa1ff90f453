//! `cargo xtask e2e-real [--latest]`: the real agent CLIs (Claude Code, Codex, OpenCode, GitHub
//! Copilot CLI, Gemini CLI, Qwen Code, the community Grok CLI) from the npm registry, driven through the
//! `handoff` binary against the testkit's scripted model server on 127.0.0.1, and
//! `continue --on` over a real OpenSSH server on 127.0.0.1 (Debian's openssh-server and
//! openssh-client, installed when missing). A failed install fails the suite; nothing is
//! skipped silently.
//!
//! Two lanes run the same suite: the pinned one ([`PINNED`], in `target/e2e-real/npm`) and,
//! with `--latest`, each CLI's npm `latest` release (in `target/e2e-real/npm-latest`), which
//! runs only when a latest release differs from its pin. In each lane the known breaks of
//! `compat/known-breaks.toml` that apply to the installed versions are left out of the suite
//! and run alone, expected to fail; a green lane widens `handoff-adapters/tested-versions.toml`
//! by the installed versions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use handoff_core::Version;

use crate::compat::{self, KnownBreak};

/// A pinned CLI: its npm package and version, its executable, and the handoff agent id it is
/// driven as.
pub struct Pin {
    /// The npm package.
    pub package: &'static str,
    /// The pinned version of the package.
    pub version: &'static str,
    /// The executable the package installs.
    pub exe: &'static str,
    /// The handoff agent id.
    pub agent: &'static str,
}

/// The pinned CLIs.
pub const PINNED: &[Pin] = &[
    Pin {
        package: "@anthropic-ai/claude-code",
        version: "2.1.332",
        exe: "claude",
        agent: "claude",
    },
    Pin {
        package: "@openai/codex",
        version: "0.171.0",
        exe: "codex",
        agent: "codex",
    },
    Pin {
        package: "opencode-ai",
        version: "1.18.33",
        exe: "opencode",
        agent: "opencode",
    },
    // GitHub Copilot CLI (its `--version` prints "GitHub Copilot CLI 1.0.102."). Its first run
    // extracts a 235 MB package into the user's cache, outside handoff's sandbox.
    Pin {
        package: "@github/copilot",
        version: "1.0.102",
        exe: "copilot",
        agent: "copilot",
    },
    // Gemini CLI (its `--version` prints 0.61.0).
    Pin {
        package: "@google/gemini-cli",
        version: "0.61.0",
        exe: "gemini",
        agent: "gemini",
    },
    // Qwen Code. It declares Node >= 22 but runs on Node 20 (the lanes use the machine's Node,
    // 20.20.2); npm warns EBADENGINE as it installs.
    Pin {
        package: "@qwen-code/qwen-code",
        version: "0.24.4",
        exe: "qwen",
        agent: "qwen",
    },
    // The community Grok CLI (its `--version` prints 1.0.1).
    Pin {
        package: "@vibe-kit/grok-cli",
        version: "0.0.34",
        exe: "grok",
        agent: "grok-community",
    },
];

/// Which releases of the CLIs a run installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// The versions of [`PINNED`].
    Pinned,
    /// Each package's npm `latest` dist-tag.
    Latest,
}

impl Lane {
    fn name(self) -> &'static str {
        match self {
            Lane::Pinned => "pinned",
            Lane::Latest => "latest",
        }
    }

    /// The npm prefix of the lane, under `target/e2e-real`.
    fn dir(self) -> &'static str {
        match self {
            Lane::Pinned => "npm",
            Lane::Latest => "npm-latest",
        }
    }
}

/// A CLI to install: a pinned package at `version` (its pin, or another release).
struct Cli {
    pin: &'static Pin,
    version: String,
}

/// Installs `clis` under `prefix` (kept between runs) and returns their bin directory.
fn install_clis(prefix: &Path, clis: &[Cli]) -> Result<PathBuf> {
    let wanted: Vec<(&str, &str)> = clis
        .iter()
        .map(|c| (c.pin.package, c.version.as_str()))
        .collect();
    crate::npm_prefix::install(prefix, &wanted, "the real-CLI suite")?;
    let bin = prefix.join("node_modules/.bin");
    for c in clis {
        if !bin.join(c.pin.exe).exists() {
            bail!(
                "{} is missing after installing {}",
                bin.join(c.pin.exe).display(),
                c.pin.package
            );
        }
    }
    Ok(bin)
}

/// Each pinned package at its npm `latest` dist-tag.
fn latest_clis() -> Result<Vec<Cli>> {
    PINNED
        .iter()
        .map(|pin| {
            let query = format!("npm view {} dist-tags.latest", pin.package);
            let out = Command::new("npm")
                .args(["view", pin.package, "dist-tags.latest"])
                .output()
                .with_context(|| format!("cannot run `{query}` (Node.js and npm are needed)"))?;
            let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if !out.status.success() {
                bail!(
                    "cannot resolve the latest version of {}: `{query}` failed ({}):\n{}",
                    pin.package,
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            if version.is_empty() || version.contains(char::is_whitespace) {
                bail!(
                    "cannot resolve the latest version of {}: `{query}` printed {version:?}",
                    pin.package
                );
            }
            Ok(Cli { pin, version })
        })
        .collect()
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
    // Both sandboxes that need them run only where bubblewrap does.
    if !handoff_core::platform::BUBBLEWRAP {
        return Ok(());
    }
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

/// Installs the CLIs of `lane` and everything else the suite needs, then runs the real-CLI
/// suite with the applicable known breaks left out and run alone; a green run widens the tested
/// versions. The latest lane returns at once when every latest release equals its pin.
pub fn e2e_real(root: &Path, cargo: impl Fn() -> Command, lane: Lane) -> Result<()> {
    let started = std::time::Instant::now();
    let agents: Vec<&str> = PINNED.iter().map(|p| p.agent).collect();
    let breaks = compat::read_known_breaks(root, &agents)?;
    let clis = match lane {
        Lane::Pinned => PINNED
            .iter()
            .map(|pin| Cli {
                pin,
                version: pin.version.to_owned(),
            })
            .collect(),
        Lane::Latest => {
            let latest = latest_clis()?;
            let differ: Vec<String> = latest
                .iter()
                .filter(|c| c.version != c.pin.version)
                .map(|c| format!("{} {} (pinned {})", c.pin.exe, c.version, c.pin.version))
                .collect();
            if differ.is_empty() {
                let pins: Vec<String> = PINNED
                    .iter()
                    .map(|p| format!("{} {}", p.exe, p.version))
                    .collect();
                eprintln!(
                    "==> latest equals the pinned versions ({}): the latest lane does not run twice",
                    pins.join(", ")
                );
                return Ok(());
            }
            eprintln!(
                "==> latest differs from the pinned versions: {}",
                differ.join(", ")
            );
            latest
        }
    };
    let bin = install_clis(&root.join("target/e2e-real").join(lane.dir()), &clis)?;
    install_sandbox_tools()?;
    install_openssh()?;
    let versions = cli_versions(&bin, &clis)?;
    let installed: BTreeMap<String, Version> = versions
        .iter()
        .map(|(agent, v)| ((*agent).to_owned(), v.clone()))
        .collect();
    let breaks = compat::applicable(&breaks, &installed);
    if !breaks.is_empty() {
        compat::check_tests_exist(&breaks, &list_real_tests(&cargo)?)?;
    }
    let skips: Vec<&str> = breaks.iter().map(|b| b.test.as_str()).collect();
    run_suite(&cargo, &bin, &skips)?;
    run_known_breaks(&cargo, &bin, &breaks, &installed)?;
    compat::record_tested(root, &versions)?;
    eprintln!(
        "==> real-CLI suite passed ({} lane) in {:.1}s",
        lane.name(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Prints each CLI's `--version` and returns its agent id and the version number in it.
fn cli_versions(bin: &Path, clis: &[Cli]) -> Result<Vec<(&'static str, Version)>> {
    clis.iter()
        .map(|c| {
            let out = Command::new(bin.join(c.pin.exe))
                .arg("--version")
                .output()
                .with_context(|| format!("cannot run {} --version", c.pin.exe))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let line = match stdout.trim() {
                "" => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                line => line.to_owned(),
            };
            eprintln!("    {}: {line}", c.pin.exe);
            let version = Version::find(&line).with_context(|| {
                format!(
                    "`{} --version` printed no version ({})",
                    c.pin.exe, out.status
                )
            })?;
            Ok((c.pin.agent, version))
        })
        .collect()
}

/// `cargo test` of the `real` test binary of handoff-cli, ready for libtest's arguments.
fn real_tests(cargo: &impl Fn() -> Command) -> Command {
    let mut c = cargo();
    c.args(["test", "-p", "handoff-cli", "--test", "real", "--"]);
    c
}

/// The names of the tests of the `real` test binary, ignored ones included.
fn list_real_tests(cargo: &impl Fn() -> Command) -> Result<BTreeSet<String>> {
    let out = real_tests(cargo)
        .args(["--list", "--include-ignored"])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo test")?;
    if !out.status.success() {
        bail!("listing the real-CLI tests failed ({})", out.status);
    }
    Ok(compat::listed_tests(&String::from_utf8_lossy(&out.stdout)))
}

/// Runs the real-CLI suite but the tests of `skips` (exact names), then the real OpenSSH tests
/// of handoff-testkit.
fn run_suite(cargo: &impl Fn() -> Command, bin: &Path, skips: &[&str]) -> Result<()> {
    let mut cmd = real_tests(cargo);
    cmd.env("HANDOFF_REAL_BIN", bin)
        .args(["--include-ignored", "--test-threads=2"]);
    // `--exact` applies to filters and skips alike; there is no filter, so it only makes each
    // skip match one test.
    if !skips.is_empty() {
        cmd.arg("--exact");
        for test in skips {
            cmd.args(["--skip", test]);
        }
    }
    let status = cmd.status().context("cannot run cargo test")?;
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
    Ok(())
}

/// Runs the test of each break alone; each must fail. A test that passes fails the run, asking
/// for its entry to be removed.
fn run_known_breaks(
    cargo: &impl Fn() -> Command,
    bin: &Path,
    breaks: &[&KnownBreak],
    installed: &BTreeMap<String, Version>,
) -> Result<()> {
    let mut done = BTreeSet::new();
    for b in breaks {
        let version = installed
            .get(&b.agent)
            .map(Version::to_string)
            .unwrap_or_default();
        if done.insert(b.test.as_str()) {
            let status = real_tests(cargo)
                .env("HANDOFF_REAL_BIN", bin)
                .args(["--include-ignored", "--exact", &b.test])
                .status()
                .context("cannot run cargo test")?;
            if status.success() {
                bail!(
                    "known break {} ({} {}) now passes on {version}: remove its entry from {}",
                    b.test,
                    b.agent,
                    b.range(),
                    compat::KNOWN_BREAKS
                );
            }
        }
        eprintln!(
            "==> known break still failing as expected: {} on {} {version} ({})",
            b.test, b.agent, b.what
        );
    }
    Ok(())
}
