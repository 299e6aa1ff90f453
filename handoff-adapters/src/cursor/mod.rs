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

mod transcript;

use std::collections::BTreeMap;

use async_trait::async_trait;
use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, AnswerSource, GrantCapabilities, Invocation, InvocationError, Observation,
    OutputError, Preflight, PrivateFile, ProbeEnv, Provider, ProviderSpec, RawOutput, Request,
    RunDir, Sessions, StdinSource, agent_env,
};
use serde_json::{Value, json};

use crate::common::{PROVIDER_DEFAULT_STR, ResolvedMcp, render_mcp};
use crate::grok::{no_stdout, sandbox_block};
use crate::probe;

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

/// Cursor's private state root (`<run>/cursor-sandbox/home`).
fn home(run: &RunDir) -> Utf8PathBuf {
    run.file(STATE_DIR).join("home")
}

fn mcp_config(
    run: &RunDir,
    secrets: &mut Vec<String>,
) -> Result<Option<(PrivateFile, Vec<String>)>, InvocationError> {
    if run.mcp.as_ref().is_none_or(|m| m.servers.is_empty()) {
        return Ok(None);
    }
    let (servers, names) = render_mcp(run, secrets, |server| match server {
        ResolvedMcp::Stdio { command, args, env } => {
            json!({"command": command, "args": args, "env": env})
        }
        ResolvedMcp::Remote { url, headers, .. } => json!({"url": url, "headers": headers}),
    })?;
    // Secret values go into a 0600 file inside the private run directory (removed after the
    // run), never into argv or the environment.
    let file = PrivateFile {
        path: home(run).join(".cursor").join("mcp.json"),
        contents: serde_json::to_vec(&json!({"mcpServers": servers})).unwrap_or_default(),
    };
    Ok(Some((file, names)))
}

/// Cursor's state roots inside `home`: HOME itself and the four XDG roots.
fn state_env(env: &mut BTreeMap<String, String>, home: &Utf8Path) {
    env.insert("HOME".into(), home.to_string());
    for (var, dir) in [
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
    ] {
        env.insert(var.into(), home.join(dir).to_string());
    }
}

impl Cursor {
    fn plan(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let g = &request.grants.resolved;
        // The sandbox's path flags take comma-separated lists: a comma in the worktree path
        // would split it into other paths. Refused before launch (the reference threw at launch
        // and reported failed/2).
        if request.cwd.contains(',') {
            return Err(InvocationError::Unsupported(format!(
                "cursor's sandbox takes comma-separated path lists, so --cwd {} (which contains a comma) cannot be confined",
                request.cwd
            )));
        }
        // Validation refuses these before a plan is made; refusing here too keeps the plan
        // fail-closed if a caller skips validation.
        let sel = &request.selection.resolved;
        if sel.effort != PROVIDER_DEFAULT_STR {
            return Err(InvocationError::Unsupported(
                "--effort is unsupported for cursor".into(),
            ));
        }
        if !g.bash {
            return Err(InvocationError::Unsupported(
                "bash=false is unsupported for cursor".into(),
            ));
        }
        if g.web_search {
            return Err(InvocationError::Unsupported(
                "webSearch is unsupported for cursor".into(),
            ));
        }
        let write = request.writes();
        let mut secrets = Vec::new();
        let mcp = mcp_config(run, &mut secrets)?;
        let mcp_names = mcp.as_ref().map(|(_, n)| n.clone()).unwrap_or_default();
        let home = home(run);
        let mut env = agent_env(spec, &run.parent_env);
        state_env(&mut env, &home);
        let mut dirs = vec![run.file(STATE_DIR), home.clone()];
        dirs.extend(
            ["config", "cache", "state", "data"]
                .iter()
                .map(|d| home.join(d)),
        );
        if mcp.is_some() {
            dirs.push(home.join(".cursor"));
        }
        let paths_flag = if write {
            "--allow-paths"
        } else {
            "--readonly-paths"
        };
        // The process starts in the worktree and `sandbox run` hands that directory to the
        // command it runs, so the agent needs no `/usr/bin/env -C <cwd>` (GNU coreutils ≥ 8.28
        // only; missing from BSD and macOS `env`) as the reference used. The worktree is the
        // path the sandbox grants, so starting there is within what it allows.
        let mut args: Vec<String> = vec![
            "sandbox".into(),
            "run".into(),
            "--sandbox".into(),
            "--network".into(),
            paths_flag.into(),
            request.cwd.clone(),
            run.executable.to_string(),
            "-p".into(),
            "--output-format".into(),
            "json".into(),
        ];
        if write {
            args.push("--force".into());
        }
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if mcp.is_some() {
            args.push("--approve-mcps".into());
        }
        let policy = json!({
            "enforcement": "native-command-sandbox",
            "filesystem": if write { "target-worktree-write" } else { "target-worktree-read-only" },
            "sandboxPaths": {"flag": paths_flag, "paths": [request.cwd]},
            "applyMode": if write { "force" } else { "force-omitted-native-read-only" },
            "nativeFilesystemIsolation": true,
            "nativeBashSandbox": true,
            "network": "enabled (--network)",
            "webSearch": "unsupported",
            "bash": "always available inside the sandbox (Cursor cannot withhold it)",
            "workingDirectory": "process cwd is the worktree (no env -C)",
            "providerState": "HOME and XDG roots are private to the run; file-based Cursor logins there are not visible, so use CURSOR_API_KEY or a keychain login",
            "mcpServers": mcp_names,
            "approveMcps": mcp.is_some(),
            "projectConfiguration": "the worktree's own .cursor/ configuration stays visible to Cursor (its MCP servers, if any, run inside the same sandbox and are approved too when --approve-mcps is given)",
            "structuredResult": "driver-read from the result text of Cursor's JSON envelope (schema in the prompt)",
            "environment": "allowlist",
        });
        Ok(Invocation {
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs,
            files: mcp.map(|(f, _)| vec![f]).unwrap_or_default(),
            answer: AnswerSource::Stdout,
            policy,
            secrets,
        })
    }
}

/// Reads Cursor's stdout: exactly one JSON result envelope. `is_error: true` or a `subtype`
/// other than `success` is the agent's own failure; otherwise `is_error` must be `false` and
/// the trimmed `result` string is the answer.
pub fn parse(raw: &RawOutput) -> Result<Observation, OutputError> {
    let trimmed = raw.stdout.trim_ascii();
    if trimmed.is_empty() {
        return no_stdout(raw);
    }
    let value: Value = serde_json::from_slice(trimmed).map_err(|e| OutputError::Envelope {
        reason: format!("Cursor's stdout is not exactly one JSON envelope: {e}"),
    })?;
    if value.get("type").and_then(Value::as_str) != Some("result") {
        return Err(OutputError::Envelope {
            reason: "Cursor's stdout is not a result envelope".into(),
        });
    }
    let subtype = value.get("subtype").and_then(Value::as_str);
    let is_error = value.get("is_error").and_then(Value::as_bool);
    if is_error == Some(true) || subtype.is_some_and(|s| s != "success") {
        let detail = ["error", "result", "message"]
            .iter()
            .filter_map(|k| value.get(*k))
            .map(|v| match v {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string()),
                Value::Null => String::new(),
                other => other.to_string(),
            })
            .find(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "no detail".into());
        let message = match subtype {
            Some(s) if s != "success" => format!("{s}: {detail}"),
            _ => detail,
        };
        return Ok(Observation::AgentFailure {
            message: message.chars().take(1024).collect(),
            usage: None,
        });
    }
    if subtype.is_none() || is_error.is_none() {
        return Err(OutputError::Envelope {
            reason: "Cursor's result envelope lacks subtype or is_error".into(),
        });
    }
    match value.get("result") {
        Some(Value::String(text)) => Ok(Observation::Answer {
            payload: text.trim().as_bytes().to_vec(),
            // Cursor reports no usage: the model's self-report is recorded by the engine.
            usage: None,
        }),
        _ => Err(OutputError::Envelope {
            reason: "Cursor's result envelope has no result text".into(),
        }),
    }
}

/// Signs on stderr that the sandbox was not applied although the run went on (see
/// `grok::sandbox_block`). The reference ran its regex over stdout too, where the model's own
/// answer lives, so a review that merely discussed a sandbox failure was falsely blocked; only
/// stderr is read here.
pub fn runtime_check(raw: &RawOutput) -> Option<String> {
    static DISABLED: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)sandbox.{0,200}disabled").ok());
    if let Some(reason) = sandbox_block(raw, "Cursor") {
        return Some(reason);
    }
    let stderr = String::from_utf8_lossy(&raw.stderr);
    let re = DISABLED.as_ref()?;
    stderr.lines().find(|l| re.is_match(l)).map(|l| {
        format!(
            "Cursor reported that its requested sandbox was not enforced: {}",
            l.trim()
        )
    })
}

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

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        self.plan(request, run)
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

    fn sessions(&self) -> Option<&dyn Sessions> {
        Some(self)
    }
}

#[async_trait]
impl Sessions for Cursor {
    fn read_transcript(
        &self,
        path: &Utf8Path,
    ) -> Result<handoff_core::Transcript, handoff_core::TranscriptError> {
        crate::cursor::transcript::read(path)
    }

    async fn find_session(
        &self,
        store: &handoff_core::StoreEnv,
        query: &handoff_core::SessionQuery,
    ) -> Result<Option<handoff_core::SessionRef>, handoff_core::TranscriptError> {
        let (store, query) = (store.clone(), query.clone());
        tokio::task::spawn_blocking(move || crate::cursor::transcript::find(&store, &query))
            .await
            .map_err(|e| {
                handoff_core::TranscriptError::Unsupported(format!("the store task failed: {e}"))
            })?
    }

    // Cursor is never a receiver, so nothing is carried into its store.
    async fn write_session(
        &self,
        _store: &handoff_core::StoreEnv,
        _transcript: &handoff_core::Transcript,
        _target: &handoff_core::CarryTarget,
    ) -> Result<handoff_core::CarriedSession, handoff_core::TranscriptError> {
        Err(handoff_core::TranscriptError::Unsupported(format!(
            "handoff cannot write {} sessions",
            SPEC.id
        )))
    }

    async fn copy_session(
        &self,
        _store: &handoff_core::StoreEnv,
        _source: &handoff_core::SessionRef,
        _target: &handoff_core::CarryTarget,
    ) -> Result<handoff_core::CarriedSession, handoff_core::TranscriptError> {
        Err(handoff_core::TranscriptError::Unsupported(format!(
            "handoff cannot copy {} sessions",
            SPEC.id
        )))
    }
}
