//! Finding (and if needed building) the testkit's binaries (`fake-agent`, `fake-ssh`) from
//! another crate's tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

/// The path of the built `fake-agent` binary.
///
/// Test executables live in `target/<profile>/deps/`, so the binary is looked up in
/// `target/<profile>/`. When it is missing, or older than this crate's sources (a dev-dependency
/// does not get its binaries built), `cargo build -p handoff-testkit --bins` is run once per
/// test process for the same target directory and profile.
///
/// # Panics
///
/// When the binary cannot be found or built.
pub fn fake_agent_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| locate_or_build("fake-agent")).clone()
}

/// The path of the built `fake-ssh` binary (the `ssh` stand-in of
/// [`FakeSshHost`](crate::fake_ssh::FakeSshHost)), found or built like [`fake_agent_bin`].
///
/// # Panics
///
/// When the binary cannot be found or built.
pub fn fake_ssh_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| locate_or_build("fake-ssh")).clone()
}

fn locate_or_build(name: &str) -> PathBuf {
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| panic!("handoff-testkit: cannot find the current executable: {e}"));
    let mut profile_dir = exe
        .parent()
        .unwrap_or_else(|| panic!("handoff-testkit: {} has no parent", exe.display()))
        .to_path_buf();
    if profile_dir.file_name().is_some_and(|n| n == "deps") {
        profile_dir.pop();
    }
    let candidate = profile_dir.join(name);
    if candidate.is_file() && !is_stale(&candidate) {
        return candidate;
    }
    build(&profile_dir);
    if candidate.is_file() {
        return candidate;
    }
    panic!(
        "handoff-testkit: built {name} but {} does not exist",
        candidate.display()
    );
}

/// Whether the binary is older than a source file of this crate.
fn is_stale(bin: &Path) -> bool {
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return true;
    };
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let newest = [
        crate_dir.join("src"),
        crate_dir.join("fixtures"),
        crate_dir.join("Cargo.toml"),
    ]
    .iter()
    .filter_map(|p| newest_mtime(p))
    .max();
    newest.is_some_and(|n| n > built)
}

fn newest_mtime(path: &Path) -> Option<SystemTime> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_dir() {
        return meta.modified().ok();
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| newest_mtime(&e.path()))
        .max()
}

fn build(profile_dir: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "build",
        "--quiet",
        "-p",
        "handoff-testkit",
        "--bins",
    ]);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    // `target/<profile>` or `target/<triple>/<profile>`.
    if let Some(parent) = profile_dir.parent() {
        if parent.join("CACHEDIR.TAG").exists() {
            cmd.env("CARGO_TARGET_DIR", parent);
        } else if let Some(root) = parent.parent()
            && root.join("CACHEDIR.TAG").exists()
        {
            cmd.env("CARGO_TARGET_DIR", root);
            if let Some(triple) = parent.file_name() {
                cmd.arg("--target").arg(triple);
            }
        }
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("handoff-testkit: cannot run cargo to build its binaries: {e}"));
    assert!(
        status.success(),
        "handoff-testkit: `cargo build -p handoff-testkit --bins` failed: {status}"
    );
}
