//! `cargo xtask check-macos`: the whole workspace, every target, type-checked for
//! `aarch64-apple-darwin` from this machine (the target's standard library from rustup). No
//! macOS C toolchain is here, so the few C sources of dependencies (BLAKE3's SIMD kernels,
//! SQLite) are "compiled" by a stand-in that writes empty objects: type-checking needs none of
//! their code. What this proves is that every Rust line compiles for macOS; not that it links,
//! nor that it runs. Where rustup cannot fetch the target, the check says it was skipped.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::{cargo, run};

/// The target checked.
pub const TARGET: &str = "aarch64-apple-darwin";

const STAND_IN_CC: &str = "#!/bin/sh\n\
# Stands in for a macOS C compiler when only type-checking: writes empty objects.\n\
out=\"\"\n\
while [ $# -gt 0 ]; do\n\
  case \"$1\" in\n\
    -o) out=\"$2\"; shift ;;\n\
    --version|-v) echo 'stand-in cc'; exit 0 ;;\n\
  esac\n\
  shift\n\
done\n\
[ -n \"$out\" ] && : > \"$out\"\n\
exit 0\n";

const STAND_IN_AR: &str = "#!/bin/sh\n\
# Stands in for a macOS archiver when only type-checking: writes empty archives.\n\
for a in \"$@\"; do case \"$a\" in *.a) printf '!<arch>\\n' > \"$a\"; exit 0;; esac; done\n\
exit 0\n";

fn write_script(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// Entry point; on macOS itself, where `cargo xtask ci` builds natively, there is nothing to do.
pub fn check_macos(root: &Path) -> Result<()> {
    if handoff_core::platform::NAME == "macOS" {
        eprintln!("==> check-macos: this is macOS; ci builds natively");
        return Ok(());
    }
    // The target's standard library comes from rustup's servers, which not every machine that
    // runs `ci` reaches: without it the check is skipped, loudly.
    if let Err(e) = run(
        &format!("rustup target add {TARGET}"),
        Command::new("rustup").args(["target", "add", TARGET]),
    ) {
        eprintln!(
            "==> check-macos SKIPPED: the {TARGET} standard library cannot be installed here ({e:#})"
        );
        return Ok(());
    }
    let stand_ins = root.join("target/macos-check");
    std::fs::create_dir_all(&stand_ins)?;
    let cc = stand_ins.join("cc");
    let ar = stand_ins.join("ar");
    write_script(&cc, STAND_IN_CC)?;
    write_script(&ar, STAND_IN_AR)?;
    let var = TARGET.replace('-', "_");
    run(
        &format!("cargo check --target {TARGET} --workspace --all-targets"),
        cargo()
            .args(["check", "--target", TARGET, "--workspace", "--all-targets"])
            .env(format!("CC_{var}"), &cc)
            .env(format!("AR_{var}"), &ar)
            .current_dir(root),
    )
}
