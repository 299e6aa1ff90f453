//! The reaper with a real, unsandboxed CLI: OpenCode's bash tool starts a `setsid` orphan that
//! leaves the agent's process group and session, and handoff still returns only once it is gone.

use std::path::Path;
use std::process::Command;

use handoff_testkit::model_server::{Script, Step, provider_output};

use super::Rig;

/// Kills the orphan if an assertion fails first, so a failing test leaves no `sleep 300`.
struct Orphan(Option<u32>);

impl Drop for Orphan {
    fn drop(&mut self) {
        let Some(pid) = self.0 else { return };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).starts_with("sleep\x00300") {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// The process is gone, or a zombie nobody has reaped yet.
fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_build_setsid_orphan_is_reaped_before_the_run_returns() {
    let rig = Rig::new("opencode", Script::text("unused"));
    let pid_file = rig.root.join("orphan.pid");
    let edited = rig.file("edited.txt");
    rig.server.set_script(Script::new([
        Step::shell(format!(
            "printf 'edited by the agent\\n' > {edited} && \
             (setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {pid})",
            pid = pid_file.display()
        )),
        Step::Answer(provider_output("edited, and left a sleeper behind")),
    ]));
    let run = rig.run("build", &[]);
    // Checked before anything else: handoff has returned, nothing may still be waited for.
    let pid: Option<u32> = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let gone = pid.map(is_gone);
    let stat = pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok());
    let _orphan = Orphan(pid);

    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded", "{}", run.json);
    assert!(
        run.changed().contains(&"edited.txt".to_string()),
        "{:?}",
        run.changed()
    );
    assert!(Path::new(&edited).exists());
    let pid = pid.unwrap_or_else(|| {
        panic!(
            "the bash tool never wrote {}: {}",
            pid_file.display(),
            run.json
        )
    });
    assert_eq!(
        gone,
        Some(true),
        "the setsid orphan {pid} outlived the run: {stat:?}"
    );
    let processes = &run.json["processes"];
    assert_eq!(processes["containment"], "reaper", "{}", run.json);
    assert_eq!(processes["treeGone"], true, "{}", run.json);
    assert!(
        processes["leftover"].as_u64().is_some_and(|n| n >= 1),
        "{}",
        run.json
    );
    rig.assert_no_process_left();
}
