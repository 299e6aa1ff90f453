//! A non-interactive Kiro chat: exactly the tools the grants allow are trusted, never all.

use handoff_core::{
    AnswerSource, Enforcement, FilesystemRead, FilesystemWrite, Invocation, InvocationError,
    Isolation, Network, Request, RunDir, RunShape, StdinSource, UnixSockets, agent_env,
    process_containment,
};
use serde_json::json;

use super::{Kiro, SPEC};
use crate::common::PROVIDER_DEFAULT_STR;

/// The trusted tools of a run, in order: `fs_read`, then `fs_write` (writing runs), then
/// `execute_bash` (bash granted).
pub fn trusted_tools(request: &Request) -> Vec<&'static str> {
    let g = &request.grants.resolved;
    let mut t = vec!["fs_read"];
    if g.write {
        t.push("fs_write");
    }
    if g.bash {
        t.push("execute_bash");
    }
    t
}

/// What a run of `shape` can do under the configuration [`Kiro::plan`] builds. Kiro has no
/// sandbox: the trusted tools take any path, and a trusted `execute_bash` runs any command.
/// Where handoff's own sandbox can run, Kiro runs under it: it writes the worktree only in
/// writing runs (never its git directories) and its own data directory (its database of logins
/// and conversations, kept in place), and its processes die with a PID namespace. What it reads
/// includes its own state under the home directory, and nothing proves that its shell goes
/// through the network-less wrapper, so reads and the network rank as open.
pub(super) fn isolation(shape: &RunShape) -> Isolation {
    let g = &shape.grants;
    if shape.handoff_sandbox {
        return Isolation {
            enforcement: Enforcement::Handoff,
            // Its own data directory counts as the CLI's state, like temporary directories;
            // without a shell or `fs_write`, nothing the model has can write at all.
            filesystem_write: match (g.write, g.bash) {
                (true, _) => FilesystemWrite::WorktreeAndTemp,
                (false, true) => FilesystemWrite::Temp,
                (false, false) => FilesystemWrite::None,
            },
            filesystem_read: FilesystemRead::Anywhere,
            network: if g.bash { Network::Any } else { Network::None },
            unix_sockets: if g.bash {
                UnixSockets::All
            } else {
                UnixSockets::None
            },
            process: handoff_core::ProcessContainment::PidNamespace,
        };
    }
    if g.bash {
        // A shell and no sandbox: everything is open but its processes, which handoff's
        // reaper contains.
        return Isolation {
            process: handoff_core::process_containment(),
            ..Isolation::unconfined()
        };
    }
    Isolation {
        enforcement: Enforcement::None,
        filesystem_write: if g.write {
            FilesystemWrite::Anywhere
        } else {
            FilesystemWrite::None
        },
        filesystem_read: FilesystemRead::Anywhere,
        network: Network::None,
        unix_sockets: UnixSockets::None,
        process: process_containment(),
    }
}

/// What Kiro needs in handoff's sandbox: `~/.kiro` (settings, agents, MCP configuration)
/// read-only, so that no run plants configuration for the next; its data directory
/// (`$XDG_DATA_HOME/kiro-cli`, its logins and conversations) writable in place, so that its
/// conversations stay where `kiro-cli chat --resume` finds them.
pub(super) fn sandbox_spec(
    env: &std::collections::BTreeMap<String, String>,
) -> handoff_core::sandbox::SandboxSpec {
    let home = crate::common::home_dir(env);
    let data = crate::common::xdg_dir(env, "XDG_DATA_HOME", ".local/share");
    let mut binds = Vec::new();
    if let Some(home) = &home {
        binds.push(handoff_core::sandbox::Bind {
            source: home.join(".kiro"),
            dest: home.join(".kiro"),
            writable: false,
            secret: false,
        });
    }
    if let Some(data) = data {
        binds.push(handoff_core::sandbox::Bind {
            source: data.join("kiro-cli"),
            dest: data.join("kiro-cli"),
            writable: true,
            secret: false,
        });
    }
    handoff_core::sandbox::SandboxSpec {
        binds,
        state: "Kiro's data directory (logins, conversations) writable in place; ~/.kiro \
                read-only"
            .into(),
        offline_shell: true,
        // Nothing shows that Kiro's client honours a proxy: the host's network.
        network: None,
        packages: None,
    }
}

impl Kiro {
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        // Validation refuses these before a plan is made; refusing here too keeps the plan
        // fail-closed if a caller skips validation.
        if run.mcp.as_ref().is_some_and(|m| !m.servers.is_empty()) {
            return Err(InvocationError::Unsupported(
                "Kiro private MCP isolation was not proved; --mcp-config is unsupported for kiro"
                    .into(),
            ));
        }
        if request.grants.resolved.web_search {
            return Err(InvocationError::Unsupported(
                "webSearch is unsupported for kiro".into(),
            ));
        }
        let mut env = agent_env(spec, &run.parent_env);
        // Plain output: fewer escape sequences to strip, no terminal-width wrapping.
        env.insert("NO_COLOR".into(), "1".into());
        env.insert("TERM".into(), "dumb".into());
        let tools = trusted_tools(request);
        let mut args: Vec<String> = vec![
            "chat".into(),
            "--no-interactive".into(),
            "--wrap".into(),
            "never".into(),
            format!("--trust-tools={}", tools.join(",")),
        ];
        let sel = &request.selection.resolved;
        if sel.model != PROVIDER_DEFAULT_STR {
            args.extend(["--model".into(), sel.model.clone()]);
        }
        if sel.effort != PROVIDER_DEFAULT_STR {
            args.extend(["--effort".into(), sel.effort.clone()]);
        }
        let write = request.writes();
        let policy = json!({
            "enforcement": "tool-permission-allowlist",
            "filesystem": if write { "permission-only-workspace-write" } else { "permission-only-read-only-intent" },
            "trustedTools": tools,
            "trustAllTools": false,
            "untrustedTools": "not run (no one can approve them in --no-interactive mode)",
            "nativeFilesystemIsolation": false,
            "nativeBashSandbox": false,
            "mutationGuarantee": "final-state-detection-only",
            "bash": match (request.grants.resolved.bash, run.handoff_sandbox) {
                (true, true) => "trusted, under handoff's sandbox",
                (true, false) => "trusted, unsandboxed",
                (false, _) => "not trusted",
            },
            "webSearch": "unsupported",
            "mcpServers": [],
            "structuredResult": "driver-extracted: the one JSON object ending the final `> ` answer block",
            "environment": "allowlist",
        });
        let sandbox = run.handoff_sandbox.then(|| sandbox_spec(&env));
        let mut policy = policy;
        if sandbox.is_none() {
            policy["sandbox"] = handoff_core::sandbox::unavailable_receipt();
        }
        Ok(Invocation {
            sandbox,
            program: run.executable.clone(),
            args,
            env,
            // Kiro has no directory flag: it works in its process's directory.
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs: vec![],
            files: vec![],
            answer: AnswerSource::Stdout,
            policy,
            secrets: vec![],
        })
    }
}
