//! Agents whose adapters are not part of this build yet: Grok, Kiro, Cursor.
//!
//! They are registered with their real capability tables, so `handoff capabilities` and
//! request validation describe them exactly, but their preflight always fails: a run on them
//! is `not_run` (exit 3) with a reason that says so. Nothing is ever launched.

use async_trait::async_trait;
use camino::Utf8Path;
use handoff_core::{
    AgentId, AnswerSource, GrantCapabilities, Invocation, InvocationError, Observation,
    OutputError, Preflight, ProbeEnv, Provider, ProviderSpec, RawOutput, Request, RunDir,
    StdinSource, TurnDefaults,
};

/// An agent known by its capabilities whose adapter is not available in this build.
#[derive(Debug, Clone)]
pub struct Pending {
    spec: ProviderSpec,
}

impl Pending {
    fn message(&self) -> String {
        format!(
            "the {} adapter is not available in this build of handoff",
            self.spec.id
        )
    }

    /// Grok (xAI's `grok` CLI).
    pub fn grok() -> Pending {
        Pending {
            spec: ProviderSpec {
                id: AgentId::GROK,
                executable: "grok",
                extra_dirs: &["~/.grok/bin", "/opt/homebrew/bin", "/usr/local/bin"],
                effort: &["low", "medium", "high"],
                advice_effort: None,
                max_turns: Some(TurnDefaults {
                    handoff: 12,
                    advice: 32,
                }),
                grants: GrantCapabilities {
                    bash: true,
                    bash_disable: true,
                    web_search: true,
                    mcp: false,
                    write: true,
                    nested_source: true,
                },
                native_filesystem_isolation: true,
                native_bash_sandbox: true,
                env_passthrough: &["GROK_API_KEY", "XAI_API_KEY"],
            },
        }
    }

    /// Kiro (`kiro-cli`).
    pub fn kiro() -> Pending {
        Pending {
            spec: ProviderSpec {
                id: AgentId::KIRO,
                executable: "kiro-cli",
                extra_dirs: &["~/.local/bin", "/opt/homebrew/bin", "/usr/local/bin"],
                effort: &["low", "medium", "high", "xhigh", "max"],
                advice_effort: Some("max"),
                max_turns: None,
                grants: GrantCapabilities {
                    bash: true,
                    bash_disable: true,
                    web_search: false,
                    mcp: false,
                    write: true,
                    nested_source: true,
                },
                native_filesystem_isolation: false,
                native_bash_sandbox: false,
                env_passthrough: &["KIRO_API_KEY"],
            },
        }
    }

    /// Cursor (`cursor-agent`).
    pub fn cursor() -> Pending {
        Pending {
            spec: ProviderSpec {
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
            },
        }
    }
}

#[async_trait]
impl Provider for Pending {
    fn spec(&self) -> &ProviderSpec {
        &self.spec
    }

    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError> {
        // Never launched: preflight fails first. The plan is empty on purpose.
        Ok(Invocation {
            program: run.executable.clone(),
            args: Vec::new(),
            env: Default::default(),
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Null,
            dirs: vec![],
            files: Vec::new(),
            answer: AnswerSource::Stdout,
            policy: serde_json::json!({"enforcement": "not-established", "reason": self.message()}),
            secrets: Vec::new(),
        })
    }

    fn parse(&self, _raw: &RawOutput) -> Result<Observation, OutputError> {
        Err(OutputError::Envelope {
            reason: self.message(),
        })
    }

    fn preflight_key(&self, _probe: &ProbeEnv) -> Option<Vec<String>> {
        None
    }

    async fn preflight(&self, _exe: &Utf8Path, _probe: &ProbeEnv) -> Preflight {
        Preflight {
            version: None,
            failure: Some(self.message()),
        }
    }
}
