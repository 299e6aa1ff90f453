//! Cursor agent (`cursor-agent sandbox run … cursor-agent -p --output-format json`).
//!
//! Isolation is Cursor's own command sandbox: the agent runs *inside* `cursor-agent sandbox run
//! --sandbox --network`, with the worktree the one writable path (`--allow-paths`, writing runs)
//! or a read-only path (`--readonly-paths`, read-only runs; `--force` is then omitted too).
//! Cursor's state (HOME and the XDG roots) points into the private run directory, so the only
//! MCP configuration it can see is the one handoff writes there, which makes `--approve-mcps`
//! safe. Cursor has no effort control, no way to withhold its shell and no web control, so those
//! grants are refused. The answer is the `result` text of Cursor's JSON result envelope (the
//! schema is in the prompt only); usage is the model's self-report.

mod invocation;
mod parse;
mod receiver;
mod sessions;
mod transcript;

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, GrantCapabilities, Invocation, InvocationError, Observation, OutputError, Preflight,
    ProbeEnv, Provider, ProviderSpec, RawOutput, Request, RunDir, Sessions,
};

use crate::probe;

use parse::{parse, runtime_check};

/// The Cursor adapter.
#[derive(Debug, Default, Clone)]
pub struct Cursor;

/// Static facts about Cursor.
pub static SPEC: std::sync::LazyLock<ProviderSpec> = std::sync::LazyLock::new(|| ProviderSpec {
    id: AgentId::CURSOR,
    executable: "cursor-agent",
    extra_dirs: &[
        "~/.local/bin",
        "~/.cursor/bin",
        "/opt/homebrew/bin",
        "/usr/local/bin",
    ],
    effort: &[],
    advice_effort: None,
    max_turns: None,
    grants: GrantCapabilities {
        bash: true,
        bash_disable: false,
        web_search: false,
        mcp: true,
        write: true,
        nested_source: true,
    },
    native_filesystem_isolation: true,
    native_bash_sandbox: true,
    env_passthrough: &["CURSOR_API_KEY"],
});

/// Flags `cursor-agent --help` must mention.
pub const REQUIRED_FLAGS: &[&str] = &["--approve-mcps", "--force", "--output-format", "--print"];

/// Flags `cursor-agent sandbox run --help` must mention.
pub const REQUIRED_SANDBOX_FLAGS: &[&str] = &[
    "--allow-paths",
    "--network",
    "--readonly-paths",
    "--sandbox",
];

/// The directory in the run directory that holds Cursor's private state.
pub const STATE_DIR: &str = "cursor-sandbox";

/// The sandbox script of the behaviour probe (`/bin/sh -c SCRIPT handoff-cursor-probe EXPECT
/// DIR FILE`): DIR must be listable, and writing FILE must succeed iff EXPECT is 1. Only the
/// shell's built-ins and `ls` are used, so the probe needs no Node or other runtime.
pub const PROBE_SCRIPT: &str = r#"expect="$1"; dir="$2"; file="$3"
ls -a "$dir" >/dev/null 2>&1 || { echo "handoff-cursor-probe: cannot list $dir" >&2; exit 3; }
if ( printf 'handoff cursor sandbox probe\n' > "$file" ) 2>/dev/null; then wrote=1; else wrote=0; fi
if [ "$wrote" != "$expect" ]; then echo "handoff-cursor-probe: write=$wrote, expected $expect" >&2; exit 4; fi
exit 0"#;

/// The probe file's name inside the probe directory.
pub const PROBE_FILE: &str = ".handoff-cursor-target-probe";

/// One behaviour probe: in a fresh directory under the probe's scratch directory, a shell run
/// inside `cursor-agent sandbox run --sandbox` with that directory as `--allow-paths` (writable)
/// or `--readonly-paths` must be able to list it, and its write must succeed exactly when the
/// path is writable; the file's existence afterwards must agree.
///
/// The reference probed inside the user's worktree (a stray file there, after the "before"
/// fingerprint, if anything went wrong). Here it runs in handoff's own scratch directory, so
/// preflight never touches the worktree. What it proves is the semantics of Cursor's path
/// flags, which do not depend on which directory is named; should a Cursor sandbox treat the
/// scratch location specially (e.g. always allow writes under a temporary directory), the
/// read-only probe fails and the run is `not_run`: the error is on the safe side.
async fn behaviour_probe(exe: &Utf8Path, probe: &ProbeEnv, writable: bool) -> Result<(), String> {
    let label = if writable { "write" } else { "read" };
    let dir = probe.scratch.join(format!("cursor-probe-{label}"));
    if dir.as_str().contains(',') {
        return Err(format!(
            "the probe directory {dir} contains a comma, which Cursor's sandbox path lists cannot express"
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {dir}: {e}"))?;
    let file = dir.join(PROBE_FILE);
    let expect = if writable { "1" } else { "0" };
    let mut env = probe.env.clone();
    env.insert("HANDOFF_CURSOR_SANDBOX_PROBE".into(), "1".into());
    env.insert("HANDOFF_CURSOR_EXPECT_WRITE".into(), expect.into());
    let probe_env = ProbeEnv {
        env,
        scratch: probe.scratch.clone(),
    };
    let flag = if writable {
        "--allow-paths"
    } else {
        "--readonly-paths"
    };
    let args = [
        "sandbox",
        "run",
        "--sandbox",
        flag,
        dir.as_str(),
        "/bin/sh",
        "-c",
        PROBE_SCRIPT,
        "handoff-cursor-probe",
        expect,
        dir.as_str(),
        file.as_str(),
    ];
    let result = probe::run(exe, &args, &probe_env, b"").await;
    let exists = file.exists();
    let _ = std::fs::remove_dir_all(&dir);
    let out = result?;
    if out.code != Some(0) {
        return Err(format!(
            "the {flag} sandbox probe exited with {:?}: {}",
            out.code,
            probe::first_line(&out.text()).unwrap_or_default()
        ));
    }
    if exists != writable {
        return Err(if writable {
            "Cursor's sandbox did not let a command write an --allow-paths directory (this version may virtualise writes)".to_owned()
        } else {
            "Cursor's sandbox let a command write a --readonly-paths directory".to_owned()
        });
    }
    Ok(())
}

#[async_trait]
impl Provider for Cursor {
    fn spec(&self) -> &ProviderSpec {
        &SPEC
    }

    fn sandbox_artifacts(&self) -> Option<&'static handoff_core::SandboxArtifacts> {
        Some(&crate::compat::CURSOR)
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
    }

    /// Never: its own sandbox holds its runs.
    fn asks_for_handoff_sandbox(&self) -> bool {
        false
    }

    fn isolation(&self, shape: &handoff_core::RunShape) -> handoff_core::Isolation {
        invocation::isolation(shape)
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        parse(raw)
    }

    fn runtime_check(&self, raw: &RawOutput) -> Option<String> {
        runtime_check(raw)
    }

    async fn preflight(&self, exe: &Utf8Path, probe: &ProbeEnv) -> Preflight {
        let version = match probe::version_and_flags(exe, probe, &["--help"], REQUIRED_FLAGS).await
        {
            Ok(v) => v,
            Err(failed) => return failed,
        };
        let fail = |failure: String| Preflight {
            version: Some(version.clone()),
            failure: Some(failure),
        };
        match probe::missing_flags(
            exe,
            &["sandbox", "run", "--help"],
            REQUIRED_SANDBOX_FLAGS,
            probe,
        )
        .await
        {
            Ok(m) if m.is_empty() => {}
            Ok(m) => {
                return fail(format!(
                    "`cursor-agent sandbox run --help` does not list {}; this version is not supported",
                    m.join(", ")
                ));
            }
            Err(e) => return fail(e),
        }
        for writable in [true, false] {
            if let Err(e) = behaviour_probe(exe, probe, writable).await {
                return fail(e);
            }
        }
        Preflight {
            version: Some(version),
            failure: None,
        }
    }

    fn receiver(&self) -> Option<&dyn handoff_core::Receiver> {
        Some(self)
    }

    fn sessions(&self) -> Option<&dyn Sessions> {
        Some(self)
    }
}
