use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::agents::agent_name;
use super::ancestry::parse_entry_name;
use super::process::proc_stat;
use super::*;

/// Runtime directory for the child process that runs [`ancestry_probe`].
const PROBE_DIR: &str = "HANDOFF_LEASE_TEST_DIR";
/// For [`ancestry_probe`]: wait until this pid is the parent before checking.
const PROBE_PARENT: &str = "HANDOFF_LEASE_TEST_PARENT";
/// For [`ancestry_probe`]: write `<exit code> <pid>` here.
const PROBE_OUT: &str = "HANDOFF_LEASE_TEST_OUT";
/// Worktree for [`orphaning_root`].
const PROBE_WORKTREE: &str = "HANDOFF_LEASE_TEST_WORKTREE";
/// Probe exit codes.
const ALLOWED: i32 = 0;
const REFUSED: i32 = 3;
const FAILED: i32 = 4;

fn test_name(name: &str) -> String {
    let module = module_path!();
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    format!("{module}::{name}")
}

fn utf8(dir: &tempfile::TempDir) -> Utf8PathBuf {
    Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).unwrap()
}

fn holder(run_id: &str) -> Holder {
    Holder {
        run_id: run_id.to_owned(),
        verb: "run".into(),
        cwd: "/somewhere".into(),
    }
}

/// A runtime directory and a worktree.
fn setup() -> (
    tempfile::TempDir,
    Utf8PathBuf,
    tempfile::TempDir,
    Utf8PathBuf,
) {
    let rt = tempfile::tempdir().unwrap();
    let wt = tempfile::tempdir().unwrap();
    // tempfile's directories follow the umask; the runtime directory is created inside.
    let (rt_path, wt_path) = (utf8(&rt).join("rt"), utf8(&wt));
    (rt, rt_path, wt, wt_path)
}

fn entries(dir: &Utf8Path, sub: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.join(sub))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Runs [`ancestry_probe`] in a child process, through `sh -c` when `via_shell` (so the
/// probe is a grandchild), and returns its exit code.
fn probe(dir: &Utf8Path, via_shell: bool) -> i32 {
    let exe = std::env::current_exe().unwrap();
    let name = test_name("ancestry_probe");
    let mut command = if via_shell {
        let mut c = Command::new("/bin/sh");
        // Not the last command, so the shell forks instead of exec'ing the probe.
        c.arg("-c")
            .arg(r#""$0" --exact "$1" --ignored --test-threads=1; rc=$?; exit $rc"#)
            .arg(&exe)
            .arg(&name);
        c
    } else {
        let mut c = Command::new(&exe);
        c.args(["--exact", &name, "--ignored", "--test-threads=1"]);
        c
    };
    let output = command
        .env(PROBE_DIR, dir)
        .env_remove(PROBE_PARENT)
        .env_remove(PROBE_OUT)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    output.status.code().unwrap()
}

/// Helper run in a child process: checks its ancestry and exits [`ALLOWED`], [`REFUSED`] or
/// [`FAILED`]. Does nothing when run directly.
#[test]
fn agent_names_come_from_the_program_or_its_script() {
    let names = ["claude", "codex"];
    assert_eq!(agent_name(b"/usr/bin/codex\0exec\0", &names), Some("codex"));
    assert_eq!(
        agent_name(b"node\0--no-warnings\0/usr/local/bin/claude\0-p\0", &names),
        Some("claude")
    );
    assert_eq!(agent_name(b"bash\0claude\0", &names), None);
    assert_eq!(agent_name(b"", &names), None);
}

#[test]
fn agents_working_in_finds_a_process_by_its_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(dir.path())
        .unwrap()
        .canonicalize_utf8()
        .unwrap();
    let sub = root.join("sub");
    fs::create_dir(&sub).unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .current_dir(&sub)
        .spawn()
        .unwrap();
    let pid = child.id();
    // Until the child has exec'd, its command line is still this test's.
    while !fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep")) {
        std::thread::yield_now();
    }
    let found = agents_working_in(&root, &["sleep"]);
    let elsewhere = agents_working_in(&root.join("other"), &["sleep"]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        found
            .iter()
            .any(|a| a.pid == pid && a.name == "sleep" && a.cwd == sub),
        "{found:?}"
    );
    assert!(elsewhere.iter().all(|a| a.pid != pid));
    // The process itself is never reported.
    let exe = std::env::current_exe().unwrap();
    let me = exe.file_name().unwrap().to_str().unwrap().to_owned();
    let mine = agents_working_in(Utf8Path::new("/"), &[me.as_str()]);
    assert!(mine.iter().all(|a| a.pid != std::process::id()), "{mine:?}");
}

#[test]
#[ignore = "helper: run in a child process by the ancestry tests"]
fn ancestry_probe() {
    let Ok(dir) = std::env::var(PROBE_DIR) else {
        return;
    };
    if let Ok(parent) = std::env::var(PROBE_PARENT) {
        let parent: i32 = parent.parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while nix::unistd::getppid().as_raw() != parent && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let code = match check_ancestry(Utf8Path::new(&dir)) {
        Ok(()) => ALLOWED,
        Err(LeaseError::InsideRoot { .. }) => REFUSED,
        Err(_) => FAILED,
    };
    if let Ok(out) = std::env::var(PROBE_OUT) {
        let tmp = format!("{out}.tmp");
        fs::write(&tmp, format!("{code} {}", std::process::id())).unwrap();
        fs::rename(&tmp, &out).unwrap();
    }
    std::process::exit(code);
}

#[test]
fn second_acquire_on_the_same_worktree_is_refused_naming_the_holder() {
    let (_rt, dir, _wt, worktree) = setup();
    let first = RootLease::try_acquire(&dir, &worktree, &holder("run-first")).unwrap();
    // Another spelling of the same worktree is the same worktree.
    let other_spelling = worktree.join(".");
    let err = RootLease::try_acquire(&dir, &other_spelling, &holder("run-second")).unwrap_err();
    let LeaseError::Busy {
        worktree: busy,
        holder: Some(record),
    } = &err
    else {
        panic!("expected Busy with a holder, got {err:?}");
    };
    assert_eq!(busy, first.worktree());
    assert_eq!(**record, *first.record());
    assert_eq!(record.pid, std::process::id());
    assert_eq!(record.run_id, "run-first");
    assert_eq!(record.verb, "run");
    assert!(err.to_string().contains("run-first"), "{err}");
}

#[test]
fn different_worktrees_are_leased_independently() {
    let (_rt, dir, _wt, worktree) = setup();
    let other = tempfile::tempdir().unwrap();
    let a = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    let b = RootLease::try_acquire(&dir, &utf8(&other), &holder("run-b")).unwrap();
    assert_ne!(a.worktree(), b.worktree());
    assert_eq!(entries(&dir, ROOTS).len(), 2);
}

#[test]
fn release_then_reacquire() {
    let (_rt, dir, _wt, worktree) = setup();
    let first = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    drop(first);
    // The lease file stays, emptied; the registry entry goes.
    let leases = entries(&dir, LEASES);
    assert_eq!(leases.len(), 1);
    assert_eq!(fs::read(dir.join(LEASES).join(&leases[0])).unwrap(), b"");
    assert!(entries(&dir, ROOTS).is_empty());
    let again = RootLease::try_acquire(&dir, &worktree, &holder("run-b")).unwrap();
    assert_eq!(again.record().run_id, "run-b");
}

#[test]
fn lease_files_are_private() {
    let (_rt, dir, _wt, worktree) = setup();
    let _lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    for sub in [LEASES, ROOTS] {
        let mode = fs::metadata(dir.join(sub)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{sub}");
        for name in entries(&dir, sub) {
            let mode = fs::metadata(dir.join(sub).join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{sub}");
        }
    }
}

#[tokio::test]
async fn waiting_acquires_once_the_holder_releases() {
    let (_rt, dir, _wt, worktree) = setup();
    let first = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    let (_cancel, wait) = watch::channel(false);
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(first);
    });
    let second = tokio::time::timeout(
        Duration::from_secs(5),
        RootLease::acquire(&dir, &worktree, &holder("run-b"), Wait::Until(wait)),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(second.record().run_id, "run-b");
    releaser.join().unwrap();
}

#[tokio::test]
async fn waiting_stops_on_cancel() {
    let (_rt, dir, _wt, worktree) = setup();
    let _first = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    let (cancel, wait) = watch::channel(false);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.send(true).unwrap();
    });
    let err = tokio::time::timeout(
        Duration::from_secs(5),
        RootLease::acquire(&dir, &worktree, &holder("run-b"), Wait::Until(wait)),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert!(matches!(err, LeaseError::Cancelled { .. }), "{err:?}");
}

#[tokio::test]
async fn refuse_mode_does_not_wait() {
    let (_rt, dir, _wt, worktree) = setup();
    let _first = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    let err = RootLease::acquire(&dir, &worktree, &holder("run-b"), Wait::Refuse)
        .await
        .unwrap_err();
    assert!(matches!(err, LeaseError::Busy { .. }), "{err:?}");
}

#[test]
fn spawned_processes_do_not_inherit_the_locks() {
    let (_rt, dir, _wt, worktree) = setup();
    let lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    let mut child = Command::new("sleep").arg("10").spawn().unwrap();
    drop(lease);
    let again = RootLease::try_acquire(&dir, &worktree, &holder("run-b"));
    child.kill().unwrap();
    child.wait().unwrap();
    again.unwrap();
}

#[test]
fn a_child_of_a_root_is_refused_until_the_lease_is_dropped() {
    let (_rt, dir, _wt, worktree) = setup();
    assert_eq!(probe(&dir, false), ALLOWED);
    let lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    assert_eq!(probe(&dir, false), REFUSED);
    assert_eq!(probe(&dir, true), REFUSED, "grandchild through sh -c");
    drop(lease);
    assert_eq!(probe(&dir, false), ALLOWED);
    assert_eq!(probe(&dir, true), ALLOWED);
}

#[test]
fn a_root_whose_entry_was_deleted_still_refuses_its_children() {
    let (_rt, dir, _wt, worktree) = setup();
    let _lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    for name in entries(&dir, ROOTS) {
        fs::remove_file(dir.join(ROOTS).join(name)).unwrap();
    }
    assert_eq!(probe(&dir, true), REFUSED);
}

#[test]
fn the_refusal_names_the_root_run() {
    let (_rt, dir, _wt, worktree) = setup();
    let lease = RootLease::try_acquire(&dir, &worktree, &holder("run-a")).unwrap();
    // In-process, the current process is not its own ancestor: allowed.
    check_ancestry(&dir).unwrap();
    let message = inside_root_message(&7, &Some(Box::new(lease.record().clone())));
    assert!(
        message.contains("run-a") && message.contains("pid 7"),
        "{message}"
    );
}

#[test]
fn a_stale_entry_does_not_refuse_and_is_removed() {
    let (_rt, dir, _wt, _worktree) = setup();
    ensure_private_dir(&dir).unwrap();
    ensure_private_dir(&dir.join(ROOTS)).unwrap();
    // An entry for this (live) process whose lock nobody holds: not a root, kept.
    let me = format!(
        "{}-{}-{}.lock",
        std::process::id(),
        own_start_time().unwrap(),
        "0".repeat(64)
    );
    fs::write(dir.join(ROOTS).join(&me), b"{}").unwrap();
    // An entry for a process that cannot exist (above any pid_max): removed.
    let gone = format!("4194999-1-{}.lock", "0".repeat(64));
    fs::write(dir.join(ROOTS).join(&gone), b"{}").unwrap();
    assert_eq!(probe(&dir, false), ALLOWED);
    assert_eq!(entries(&dir, ROOTS), vec![me]);
}

#[test]
fn unsafe_runtime_dirs_are_refused() {
    let base = tempfile::tempdir().unwrap();
    let base_path = utf8(&base);
    let (_wt, worktree) = {
        let wt = tempfile::tempdir().unwrap();
        let p = utf8(&wt);
        (wt, p)
    };

    let open = base_path.join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let err = RootLease::try_acquire(&open, &worktree, &holder("run-a")).unwrap_err();
    assert!(matches!(err, LeaseError::UnsafeDir { .. }), "{err:?}");

    let good = base_path.join("good");
    let link = base_path.join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    fs::create_dir(&good).unwrap();
    fs::set_permissions(&good, fs::Permissions::from_mode(0o700)).unwrap();
    let err = RootLease::try_acquire(&link, &worktree, &holder("run-a")).unwrap_err();
    assert!(matches!(err, LeaseError::UnsafeDir { .. }), "{err:?}");
    let err = check_ancestry(&link).unwrap_err();
    assert!(matches!(err, LeaseError::UnsafeDir { .. }), "{err:?}");

    // A subdirectory opened up later is refused too.
    fs::create_dir(good.join(LEASES)).unwrap();
    fs::set_permissions(good.join(LEASES), fs::Permissions::from_mode(0o755)).unwrap();
    let err = RootLease::try_acquire(&good, &worktree, &holder("run-a")).unwrap_err();
    assert!(matches!(err, LeaseError::UnsafeDir { .. }), "{err:?}");

    // A missing directory is created private.
    let fresh = base_path.join("fresh");
    let _lease = RootLease::try_acquire(&fresh, &worktree, &holder("run-a")).unwrap();
    let mode = fs::metadata(&fresh).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn stat_parsing_survives_odd_command_names() {
    let me = proc_stat("self").unwrap();
    assert_eq!(me.ppid, nix::unistd::getppid().as_raw() as u32);
    assert_eq!(parse_entry_name("12-345-abc.lock"), Some((12, 345)));
    assert_eq!(parse_entry_name("12-345.lock"), None);
    assert_eq!(parse_entry_name("x-345-abc.lock"), None);
}

/// Helper run in a child process: a root that adopts orphans, takes a lease, orphans a
/// probe through `sh -c 'probe &'`, and exits 0 when the reparented probe was refused.
#[test]
#[ignore = "helper: run in a child process by the orphan test"]
fn orphaning_root() {
    let (Ok(dir), Ok(worktree)) = (std::env::var(PROBE_DIR), std::env::var(PROBE_WORKTREE)) else {
        return;
    };
    let dir = Utf8PathBuf::from(dir);
    adopt_orphans().unwrap();
    let lease = RootLease::try_acquire(&dir, worktree.as_ref(), &holder("run-a")).unwrap();
    let out = dir.join("probe-result");
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#""$0" --exact "$1" --ignored --test-threads=1 >/dev/null 2>&1 &"#)
        .arg(std::env::current_exe().unwrap())
        .arg(test_name("ancestry_probe"))
        .env(PROBE_DIR, &dir)
        .env(PROBE_PARENT, std::process::id().to_string())
        .env(PROBE_OUT, &out)
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let result = loop {
        if let Ok(text) = fs::read_to_string(&out) {
            break text;
        }
        assert!(Instant::now() < deadline, "the probe never reported");
        std::thread::sleep(Duration::from_millis(10));
    };
    let (code, pid) = result.split_once(' ').unwrap();
    // The probe is our child now: reap it.
    let pid = nix::unistd::Pid::from_raw(pid.parse().unwrap());
    let _ = nix::sys::wait::waitpid(pid, None);
    drop(lease);
    std::process::exit(if code.parse::<i32>().unwrap() == REFUSED {
        0
    } else {
        1
    });
}

#[test]
fn an_orphaned_descendant_of_a_root_that_adopts_orphans_is_refused() {
    let (_rt, dir, _wt, worktree) = setup();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name("orphaning_root"),
            "--ignored",
            "--test-threads=1",
        ])
        .env(PROBE_DIR, &dir)
        .env(PROBE_WORKTREE, &worktree)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
