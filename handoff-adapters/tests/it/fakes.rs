//! The testkit's fake CLIs for the adapter tests: plans run against them as the engine would,
//! and preflight probing them, table-driven over the agents.

use std::collections::BTreeMap;
use std::path::Path;

use camino::Utf8PathBuf;
use handoff_core::{Invocation, ProbeEnv, RawOutput, RunInput, StdinSource};
use handoff_testkit::FakeAgents;
use serde_json::{Value, json};

use crate::harness::*;
use crate::support::*;

/// Runs `inv` as the engine would (its dirs and private files created first), with `program`
/// instead of the planned executable.
pub(crate) fn run_planned(inv: &Invocation, program: &Path, prompt: &str) -> RawOutput {
    use std::io::Write as _;
    for d in &inv.dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    for f in &inv.files {
        std::fs::write(&f.path, &f.contents).unwrap();
    }
    let mut child = std::process::Command::new(program)
        .args(&inv.args)
        .env_clear()
        .envs(&inv.env)
        .current_dir(&inv.cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if inv.stdin == StdinSource::Prompt {
        stdin.write_all(prompt.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    // The engine removes the run directory afterwards; the next run starts clean.
    for f in &inv.files {
        let _ = std::fs::remove_file(&f.path);
    }
    RawOutput {
        stdout: out.stdout,
        stderr: out.stderr,
        exit_code: out.status.code(),
        answer_file: None,
    }
}

/// The testkit's fake CLIs installed next to a fixture, recording what they are run with.
pub(crate) struct Fakes<'a> {
    fx: &'a Fixture,
    pub agents: FakeAgents,
}

impl Fakes<'_> {
    pub fn install(fx: &Fixture) -> Fakes<'_> {
        let agents = FakeAgents::install(fx.root.join("agents").as_std_path());
        agents.record_dir();
        Fakes { fx, agents }
    }

    /// The fake executable `exe`.
    pub fn fake(&self, exe: &str) -> Utf8PathBuf {
        Utf8PathBuf::from_path_buf(self.agents.bin(exe)).unwrap()
    }

    /// Plans `input` for the fake of `agent` and runs it; the plan must be accepted.
    pub fn run(&self, agent: &Agent, input: &RunInput) -> RawOutput {
        let fake = self.fake(agent.fake);
        let (inv, run) = plan_full(self.fx, input, fake.as_str(), parent_env())
            .unwrap_or_else(|e| panic!("{}: {e}", agent.harness));
        run_planned(&inv, fake.as_std_path(), &run.prompt)
    }

    /// Runs every mode (`input` makes its request) against the fake of `agent`: each run must
    /// exit 0, pass the runtime check, and write the worktree exactly when its mode writes;
    /// `each` checks the rest.
    pub fn every_mode(
        &self,
        agent: &Agent,
        input: impl Fn(Option<&str>) -> RunInput,
        mut each: impl FnMut(&str, Option<&str>, &RawOutput),
    ) {
        let p = provider(agent.harness);
        for (mode_name, mode) in MODES {
            let out = self.run(agent, &input(*mode));
            assert_eq!(
                out.exit_code,
                Some(0),
                "{mode_name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(p.runtime_check(&out), None, "{mode_name}");
            // The fakes edit only when their CLI's controls allow it.
            let wrote = self.fx.cwd.join(format!("fake-{mode_name}.txt")).exists();
            assert_eq!(wrote, writes(*mode), "{mode_name}: wrote a file");
            each(mode_name, *mode, &out);
        }
    }

    /// The recorded runs whose argument `at` is `arg`.
    pub fn calls_with(&self, at: usize, arg: &str) -> Vec<Value> {
        self.agents
            .invocations()
            .into_iter()
            .filter(|r| r["argv"].get(at) == Some(&json!(arg)))
            .collect()
    }
}

/// Fake agent CLIs in a temporary directory, and the probe environment handoff would use.
pub(crate) struct ProbeWorld {
    _tmp: tempfile::TempDir,
    pub agents: FakeAgents,
    pub root: Utf8PathBuf,
    pub probe: ProbeEnv,
}

impl ProbeWorld {
    pub fn new() -> ProbeWorld {
        let tmp = tempfile::Builder::new()
            .prefix("handoff-adapters-preflight-")
            .tempdir()
            .unwrap();
        let root = Utf8PathBuf::from_path_buf(std::fs::canonicalize(tmp.path()).unwrap()).unwrap();
        let agents = FakeAgents::install(root.as_std_path());
        let scratch = root.join("scratch");
        let home = root.join("user-home");
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let env: BTreeMap<String, String> = [
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("HOME", home.as_str()),
            ("NO_COLOR", "1"),
            ("TERM", "dumb"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        ProbeWorld {
            _tmp: tmp,
            agents,
            root,
            probe: ProbeEnv { env, scratch },
        }
    }

    pub fn fake(&self, exe: &str) -> Utf8PathBuf {
        Utf8PathBuf::from_path_buf(self.agents.bin(exe)).unwrap()
    }

    /// An executable `<root>/<dir>/bin/<name>` shell script with `body`; `$FAKE` is the fake
    /// CLI of that name.
    pub fn script(&self, dir: &str, name: &str, body: &str) -> Utf8PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let bin = self.root.join(dir).join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let path = bin.join(name);
        let text = format!("#!/bin/sh\nFAKE='{}'\n{body}\n", self.fake(name));
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Entries left in the scratch directory.
    pub fn scratch_entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.probe.scratch)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

pub(crate) fn fake_version(exe: &str) -> String {
    format!("{exe} {}", handoff_testkit::fixtures::OTHER_VERSION)
}

/// A help text that lacks one required flag fails preflight, naming the flag and the help
/// command, with the version read.
#[tokio::test]
async fn preflight_names_a_flag_missing_from_the_help() {
    let w = ProbeWorld::new();
    w.agents.set("HANDOFF_FAKE_HELP", "missing");
    for (harness, exe, expected) in [
        ("grok", "grok", "`grok --help` does not list --json-schema"),
        (
            "kiro",
            "kiro-cli",
            "`kiro-cli chat --help` does not list --trust-tools",
        ),
        (
            "cursor",
            "cursor-agent",
            "`cursor-agent --help` does not list --force",
        ),
        (
            "opencode",
            "opencode",
            "`opencode --help` does not list --pure",
        ),
    ] {
        let result = provider(harness).preflight(&w.fake(exe), &w.probe).await;
        assert_eq!(result.version, Some(fake_version(exe)), "{harness}");
        let failure = result
            .failure
            .unwrap_or_else(|| panic!("{harness} must fail"));
        assert!(failure.contains(expected), "{harness}: {failure}");
    }
}

/// A fake CLI behind a wrapper script (`$FAKE` is the fake) that changes one answer:
/// (agent, executable, case, script, the failure expected or `None` for a pass).
const ALTERED: &[(&str, &str, &str, &str, Option<&str>)] = &[
    (
        "grok",
        "grok",
        "schema-accepted",
        "case \"$*\" in *handoff-invalid-json*) echo '{}' ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some(
            "the --sandbox workspace / --json-schema probe did not behave as expected (exit Some(0))",
        ),
    ),
    (
        "grok",
        "grok",
        "read-only-sandbox-broken",
        "case \"$*\" in *read-only*handoff-invalid-json*) echo 'Error: sandbox read-only profile unavailable on this system' >&2; exit 1 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some(
            "Grok's read-only sandbox is not usable: Error: sandbox read-only profile unavailable",
        ),
    ),
    (
        "grok",
        "grok",
        "sandbox-warning-with-schema-error",
        "case \"$*\" in *handoff-invalid-json*) echo 'warning: sandbox could not be applied' >&2; exec \"$FAKE\" \"$@\" ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some("Grok's workspace sandbox is not usable: warning: sandbox could not be applied"),
    ),
    (
        "grok",
        "grok",
        "help-fails",
        "case \"$1\" in --help) echo boom >&2; exit 2 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some("--help` exited with Some(2): boom"),
    ),
    (
        "grok",
        "grok",
        "no-verbatim",
        "case \"$1\" in --help) \"$FAKE\" --help | grep -v -- --verbatim ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some("does not list --verbatim"),
    ),
    // --allow-paths does not let the command write (virtualised writes).
    (
        "cursor",
        "cursor-agent",
        "no-write",
        "case \"$*\" in *--allow-paths*) exit 0 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some("did not let a command write an --allow-paths directory"),
    ),
    // --readonly-paths lets the command write: the last argument is the probe file.
    (
        "cursor",
        "cursor-agent",
        "read-only-writes",
        "case \"$*\" in *--readonly-paths*/bin/sh*) for a; do f=\"$a\"; done; touch \"$f\"; exit 0 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some("let a command write a --readonly-paths directory"),
    ),
    (
        "cursor",
        "cursor-agent",
        "sandbox-fails",
        "case \"$*\" in *--allow-paths*/bin/sh*) echo 'sandbox: landlock unavailable' >&2; exit 7 ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some("the --allow-paths sandbox probe exited with Some(7): sandbox: landlock unavailable"),
    ),
    (
        "cursor",
        "cursor-agent",
        "sandbox-help-lacks-readonly",
        "case \"$*\" in \"sandbox run --help\") \"$FAKE\" \"$@\" | grep -v -- --readonly-paths ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some("`cursor-agent sandbox run --help` does not list --readonly-paths"),
    ),
    // Kiro's --require-mcp-startup is not used, so a CLI without it is fine.
    (
        "kiro",
        "kiro-cli",
        "no-mcp-startup",
        "case \"$*\" in \"chat --help\") \"$FAKE\" chat --help | grep -v -- --require-mcp-startup ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        None,
    ),
    (
        "kiro",
        "kiro-cli",
        "no-wrap",
        "case \"$*\" in \"chat --help\") \"$FAKE\" chat --help | grep -v -- --wrap ;; *) exec \"$FAKE\" \"$@\" ;; esac",
        Some("does not list --wrap"),
    ),
];

/// Preflight judges each altered CLI as expected, reads its version, and leaves its scratch
/// directory empty.
#[tokio::test]
async fn preflight_judges_clis_that_do_not_behave() {
    let w = ProbeWorld::new();
    for (harness, exe, name, body, expected) in ALTERED {
        let script = w.script(&format!("{harness}-{name}"), exe, body);
        let result = provider(harness).preflight(&script, &w.probe).await;
        assert_eq!(result.version, Some(fake_version(exe)), "{harness} {name}");
        match (expected, result.failure) {
            (None, None) => {}
            (Some(want), Some(got)) => assert!(got.contains(want), "{harness} {name}: {got}"),
            (want, got) => panic!("{harness} {name}: expected failure {want:?}, got {got:?}"),
        }
        let left = w.scratch_entries();
        assert!(left.is_empty(), "{harness} {name}: {left:?}");
    }
}

#[tokio::test]
async fn preflight_fails_without_a_working_executable() {
    let w = ProbeWorld::new();
    for agent in AGENTS {
        let missing = w.root.join("nowhere").join(agent.fake);
        let result = provider(agent.harness).preflight(&missing, &w.probe).await;
        assert_eq!(result.version, None, "{}", agent.harness);
        assert!(result.failure.is_some(), "{}", agent.harness);
    }
}
