//! Registers an agent of our own next to the built-in ones: `shell-agent`, a `/bin/sh` script
//! that "does" a build by writing a file and answers with the provider-output JSON. Shows the
//! whole `Provider` contract: static spec, pure invocation, pure parse, preflight. It can't
//! receive a continued task and has no session store, so `receiver()` and `sessions()` keep
//! their `None` defaults.
//!
//! ```sh
//! cargo run -p handoff-examples --example custom-provider
//! ```
#![allow(clippy::print_stdout)]

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, AnswerSource, Engine, EngineOptions, GrantCapabilities, Instructions, Invocation,
    InvocationError, Observation, OutputError, Preflight, ProbeEnv, Provider, ProviderSpec,
    RawOutput, Request, RunDir, RunInput, StdinSource, Verb, agent_env,
};

struct ShellAgent {
    spec: ProviderSpec,
}

impl ShellAgent {
    fn new() -> ShellAgent {
        ShellAgent {
            spec: ProviderSpec {
                id: AgentId::from_static("shell-agent"),
                executable: "sh",
                extra_dirs: &["/bin"],
                effort: &[],
                advice_effort: None,
                max_turns: None,
                grants: GrantCapabilities {
                    bash: true,
                    bash_disable: false,
                    web_search: false,
                    mcp: false,
                    write: true,
                    nested_source: false,
                },
                native_filesystem_isolation: false,
                native_bash_sandbox: false,
                env_passthrough: &[],
            },
        }
    }
}

const SCRIPT: &str = r#"
cat > /dev/null   # the prompt arrives on stdin
if [ "$WRITE" = 1 ]; then echo "written by shell-agent" > shell-agent.txt; fi
printf '{"schemaVersion":"handoff.provider-output.v1","status":"completed","response":"shell-agent finished","evidence":[],"findings":[],"usage":{}}'
"#;

#[async_trait]
impl Provider for ShellAgent {
    fn spec(&self) -> &ProviderSpec {
        &self.spec
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        let mut env = agent_env(&self.spec, &run.parent_env);
        env.insert(
            "WRITE".into(),
            if request.writes() { "1" } else { "0" }.into(),
        );
        Ok(Invocation {
            sandbox: None,
            program: run.executable.clone(),
            args: vec!["-c".into(), SCRIPT.into()],
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs: vec![],
            files: vec![],
            answer: AnswerSource::Stdout,
            policy: serde_json::json!({"enforcement": "none (example)"}),
            secrets: vec![],
        })
    }

    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError> {
        Ok(Observation::Answer {
            payload: raw.stdout.clone(),
            usage: None,
        })
    }

    async fn preflight(&self, _exe: &Utf8Path, _probe: &ProbeEnv) -> Preflight {
        Preflight {
            version: Some("posix sh".into()),
            failure: None,
        }
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let base = std::env::temp_dir().join(format!("handoff-custom-{}", std::process::id()));
    std::fs::create_dir_all(&base)?;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))?;
    let repo = std::fs::canonicalize(&base)?;
    for args in [
        vec!["init", "-q", "-b", "main"],
        vec!["commit", "-q", "--allow-empty", "-m", "initial"],
    ] {
        let ok = Command::new("git")
            .args([
                "-c",
                "user.name=example",
                "-c",
                "user.email=example@example.invalid",
            ])
            .args(&args)
            .current_dir(&repo)
            .status()
            .context("git is needed")?
            .success();
        if !ok {
            bail!("git {} failed", args.join(" "));
        }
    }

    let mut registry = handoff_adapters::default_registry();
    registry.register(Arc::new(ShellAgent::new()));
    let engine = Engine::new(
        registry,
        Arc::new(handoff_git::GitWorkspace::new()),
        EngineOptions::from_process(),
    );

    let mut input = RunInput::new(Verb::Run);
    input.caller_harness = Some("codex".into());
    input.harness = Some("shell-agent".into());
    input.mode = Some("build".into());
    input.cwd = Some(repo.to_string_lossy().into_owned());
    input.instructions = Some(Instructions::Stdin(b"Write shell-agent.txt.".to_vec()));
    let (_keep, cancel) = tokio::sync::watch::channel(false);
    let outcome = engine.run(input, cancel).await;
    print!("{}", outcome.line);
    std::fs::remove_dir_all(&repo).ok();
    if outcome.exit_code != 0 {
        bail!(
            "shell-agent did not succeed: {:?}",
            outcome.result.diagnostics.message
        );
    }
    println!(
        "custom provider succeeded; changed files: {:?}",
        outcome.result.git.map(|g| g.changed_files)
    );
    Ok(())
}
