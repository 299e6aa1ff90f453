//! Whether handoff's own sandbox can run here: a `bwrap` on `PATH` that runs a command in
//! namespaces like the ones [`super::wrap`] builds. Proving it starts a sandbox (about 15 ms on
//! a loaded machine), so the answer is kept for the life of the process and, once proven, on
//! disk beside the preflight cache: keyed by the `bwrap` file (path, size, mtime, inode),
//! handoff's version, the user and the boot. Only a success is kept on disk. A kept success
//! that has become false (namespaces closed since) makes the next sandboxed run fail as bwrap
//! fails, never run unconfined; a failure is proven again every time, so nothing written to
//! the disk can make handoff run an agent without its sandbox.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use camino::{Utf8Path, Utf8PathBuf};
use sha2::{Digest, Sha256};

use super::{Mount, PROBE_EXIT, push_flags, push_mount};
use crate::preflight::{file_identity, locate_on_path};

/// Where proofs are kept on disk, once the embedding program says ([`remember_proofs_in`]).
static PROOF_DIR: OnceLock<Utf8PathBuf> = OnceLock::new();

/// Keeps proofs in `dir` (made 0700 on first write) from now on, for this process; the first
/// call wins. The engine calls it with its preflight cache.
pub fn remember_proofs_in(dir: Utf8PathBuf) {
    let _ = PROOF_DIR.set(dir);
}

/// The bubblewrap of this machine, when it can run a sandbox here: found on `env`'s `PATH`,
/// and proved by running a command in a PID namespace (so a stub or a `bwrap` that cannot
/// create namespaces, e.g. inside some containers, is not taken).
pub fn bubblewrap(env: &BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    if !crate::platform::BUBBLEWRAP {
        return None;
    }
    let bwrap = locate_on_path("bwrap", env)?;
    static PROVED: OnceLock<Mutex<HashMap<Utf8PathBuf, bool>>> = OnceLock::new();
    let proved = PROVED.get_or_init(Default::default);
    if let Some(&ok) = proved.lock().unwrap_or_else(|e| e.into_inner()).get(&bwrap) {
        return ok.then_some(bwrap);
    }
    let kept = PROOF_DIR.get().map(|dir| dir.join(proof_name(&bwrap)));
    let ok = kept.as_deref().is_some_and(is_kept) || {
        let ok = probe(&bwrap);
        if let (true, Some(file)) = (ok, &kept) {
            // A proof that cannot be kept only costs the next process a probe.
            let _ = keep(file);
        }
        ok
    };
    proved
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(bwrap.clone(), ok);
    ok.then_some(bwrap)
}

/// [`bubblewrap`] on handoff's own `PATH`: the one answer every run and every ranking of
/// this process uses.
pub fn bubblewrap_here() -> Option<Utf8PathBuf> {
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k == "PATH")
        .collect();
    bubblewrap(&env)
}

/// The file that proves `bwrap` works, for this version of handoff, this user and this boot.
fn proof_name(bwrap: &Utf8Path) -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let mut h = Sha256::new();
    for part in [
        crate::result::DRIVER_VERSION.to_owned(),
        file_identity(bwrap),
        nix::unistd::getuid().to_string(),
        boot.trim().to_owned(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    format!("bwrap-{}.proven", &hex::encode(h.finalize())[..32])
}

/// Whether `file` is a kept proof: a regular file of this user's, in a directory of its own.
fn is_kept(file: &Utf8Path) -> bool {
    std::fs::symlink_metadata(file).is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.is_file() && m.uid() == nix::unistd::getuid().as_raw()
    })
}

fn keep(file: &Utf8Path) -> std::io::Result<()> {
    let Some(dir) = file.parent() else {
        return Ok(());
    };
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

/// Whether `bwrap` runs a command in a sandbox like the ones [`super::wrap`] builds.
fn probe(bwrap: &Utf8Path) -> bool {
    let mut args: Vec<String> = Vec::new();
    push_flags(&mut args);
    for m in [
        Mount::ReadOnly("/".into(), "/".into()),
        Mount::Proc,
        Mount::Dev,
        Mount::Tmpfs("/tmp".into()),
    ] {
        push_mount(&mut args, &m);
    }
    args.extend([
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        format!("exit {PROBE_EXIT}"),
    ]);
    Command::new(bwrap.as_std_path())
        .args(&args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.code() == Some(PROBE_EXIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_names_the_binary_and_is_kept_only_as_a_file_of_this_user() {
        let dir = tempfile::tempdir().unwrap();
        let dir = Utf8Path::from_path(dir.path()).unwrap();
        let a = dir.join("a");
        let b = dir.join("b");
        std::fs::write(&a, "one").unwrap();
        std::fs::write(&b, "other").unwrap();
        assert_ne!(proof_name(&a), proof_name(&b));
        assert_eq!(proof_name(&a), proof_name(&a));
        let file = dir.join("proofs").join(proof_name(&a));
        assert!(!is_kept(&file));
        keep(&file).unwrap();
        assert!(is_kept(&file));
        // A changed binary is proven again.
        std::fs::write(&a, "changed").unwrap();
        assert_ne!(dir.join("proofs").join(proof_name(&a)), file);
        // A link is not a proof.
        let link = dir.join("proofs/link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(!is_kept(&link));
    }
}
