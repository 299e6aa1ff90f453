//! Processes die with the run, with a real CLI: OpenCode's bash tool starts a `setsid` orphan
//! that leaves the agent's process group and session, and handoff still returns only once it
//! is gone. OpenCode runs under handoff's sandbox here, inside the reaper: the orphan dies with
//! the sandbox's PID namespace.

use std::path::Path;
use std::process::Command;

use handoff_testkit::model_server::{Script, Step, provider_output};

use super::Rig;

/// Kills the orphan if an assertion fails first, so a failing test leaves no sleeper.
struct Orphans(&'static str);

impl Drop for Orphans {
    fn drop(&mut self) {
        for pid in sleepers(self.0) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// Live processes whose command line is exactly `sleep <secs>` (zombies aside).
fn sleepers(secs: &str) -> Vec<u32> {
    let wanted = format!("sleep\x00{secs}\x00");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted.as_bytes())
                && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    s.rsplit_once(") ")
                        .is_some_and(|(_, rest)| !rest.starts_with('Z'))
                })
        })
        .collect()
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn opencode_build_setsid_orphan_is_gone_before_the_run_returns() {
    const SECS: &str = "313";
    let _guard = Orphans(SECS);
    let rig = Rig::new("opencode", Script::text("unused"));
    let edited = rig.file("edited.txt");
    let started = rig.file("started.txt");
    rig.server.set_script(Script::new([
        Step::shell(format!(
            "printf 'edited by the agent\\n' > {edited} && \
             (setsid sleep {SECS} </dev/null >/dev/null 2>&1 &) && \
             sleep 0.2 && pgrep -x sleep > {started}"
        )),
        Step::Answer(provider_output("edited, and left a sleeper behind")),
    ]));
    let run = rig.run("build", &[]);
    // Checked before anything else: handoff has returned, nothing may still be waited for.
    let left = sleepers(SECS);

    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "succeeded", "{}", run.json);
    assert!(
        run.changed().contains(&"edited.txt".to_string()),
        "{:?}",
        run.changed()
    );
    assert!(Path::new(&edited).exists());
    assert!(
        std::fs::read_to_string(&started).is_ok_and(|s| !s.trim().is_empty()),
        "the sleeper never started: {}",
        run.json
    );
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "the setsid orphan outlived the run"
    );
    let processes = &run.json["processes"];
    assert_eq!(processes["containment"], "reaper", "{}", run.json);
    assert_eq!(processes["treeGone"], true, "{}", run.json);
    assert_eq!(
        run.json["policy"]["sandbox"]["enforcement"], "handoff",
        "{}",
        run.json
    );
    rig.assert_no_process_left();
}
