//! The tool inputs of `handoff mcp` and how each maps to the `handoff` command's flags.

use std::fmt::Display;

use schemars::JsonSchema;
use serde::Deserialize;

use super::jobs::Launch;

/// `harness`: one agent, or the members of a panel.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Harness {
    /// One agent.
    One(String),
    /// A panel's members, each `agent` or `agent:model`.
    Panel(Vec<String>),
}

impl Default for Harness {
    fn default() -> Self {
        Harness::One(String::new())
    }
}

impl Harness {
    /// The value of `--harness`: the agent, or the members joined with commas.
    pub(super) fn flag(&self) -> Result<String, String> {
        match self {
            Harness::One(h) => Ok(h.clone()),
            Harness::Panel(members) => {
                if let Some(bad) = members.iter().find(|m| m.contains(',')) {
                    return Err(format!("harness: the member {bad:?} holds a comma"));
                }
                Ok(members.join(","))
            }
        }
    }
}

/// The fields `handoff run`, `run-with-advice` and `advice` share, mirroring their flags.
macro_rules! delegate_input {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Default, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            /// The agent that does the work: codex, claude, grok, kiro, opencode, cursor, copilot,
            /// gemini or qwen (`--harness`); or, for a read-only request (advice, review, verify),
            /// a list of agents, each optionally `agent:model`, asked as a panel (one
            /// `handoff.panel.v1` result with the members' findings merged).
            pub harness: Harness,
            /// A panel succeeds when at least this many members succeed (`--quorum`; default:
            /// all of them).
            pub quorum: Option<u32>,
            /// The agent that is asking (`--caller-harness`): codex or claude for runs, any
            /// agent for advice. Self-asserted, recorded in the result.
            pub caller_harness: Option<String>,
            /// Absolute, normalized path inside a git worktree, without symlinks (`--cwd`).
            pub cwd: String,
            /// The task (or question) as text; written to a private file and passed as
            /// `--instructions`. Give this or `instructionsFile`.
            pub instructions: Option<String>,
            /// Absolute path of a private UTF-8 file with the task (`--instructions`).
            pub instructions_file: Option<String>,
            /// Exact model name for the agent CLI (`--model`).
            pub model: Option<String>,
            /// Reasoning effort; accepted values depend on the agent (`--effort`).
            pub effort: Option<String>,
            /// Turn limit 1-100, Claude Code and Grok only (`--max-turns`).
            pub max_turns: Option<u32>,
            /// Allow shell commands (`--bash`, default true).
            pub bash: Option<bool>,
            /// Allow web search (`--web-search`, default false).
            pub web_search: Option<bool>,
            /// Absolute path of a `handoff.mcp.v1` descriptor: the only MCP servers the agent
            /// sees (`--mcp-config`).
            pub mcp_config: Option<String>,
            /// Wall-clock limit of the agent in ms, 100-3600000 (`--timeout-ms`, default
            /// 600000).
            pub timeout_ms: Option<u64>,
            /// Also write the result JSON to this new file in a private directory (`--result`).
            pub result_file: Option<String>,
            /// If another root run holds the worktree, wait for it instead of being refused
            /// (`--wait`).
            pub wait: Option<bool>,
            /// A build or phase run may add or change git hooks and git settings that run a
            /// program (`--allow-git-config`); otherwise such a change blocks it.
            pub allow_git_config: Option<bool>,
            /// Cover ignored files in the evidence too (`--ignored`).
            pub ignored: Option<bool>,
            /// Agents that take the same request, in order, when an attempt ends rate-limited,
            /// with a server error, without credit, not installed or failing preflight:
            /// `AGENT[@ACCOUNT][:MODEL],…` (`--failover`; `none` turns the configured default
            /// off).
            pub failover: Option<String>,
            /// Advice DAG budget: deepest nesting, 0-32 (`--max-depth`, default 3).
            pub max_depth: Option<u32>,
            /// Advice DAG budget: most nodes, 1-256 (`--max-nodes`, default 16).
            pub max_nodes: Option<u32>,
            /// Advice DAG budget: most advice nodes, 0-256 (`--max-advice-nodes`, default 12).
            pub max_advice_nodes: Option<u32>,
            /// Advice DAG budget: most handoff nodes, 0-256 (`--max-handoff-nodes`, default 4).
            pub max_handoff_nodes: Option<u32>,
            /// Advice DAG budget: most nodes running at once, 1-32 (`--max-concurrency`,
            /// default 4).
            pub max_concurrency: Option<u32>,
            /// Advice DAG budget: wall-clock limit of the whole DAG in ms (`--root-timeout-ms`,
            /// default 1800000).
            pub root_timeout_ms: Option<u64>,
        }

        impl $name {
            pub(super) fn shared_flags(&self, launch: &mut Launch) -> Result<(), String> {
                launch.value("--harness", Some(&self.harness.flag()?));
                // A list is a panel even of one member: `--quorum` (all of them, unless given)
                // says so.
                let quorum = match (&self.quorum, &self.harness) {
                    (Some(q), _) => Some(q.to_string()),
                    (None, Harness::Panel(members)) => Some(members.len().to_string()),
                    (None, Harness::One(_)) => None,
                };
                launch.value("--quorum", quorum.as_ref());
                launch.value("--caller-harness", self.caller_harness.as_ref());
                launch.value("--cwd", Some(&self.cwd));
                launch.text_or_file(
                    "--instructions",
                    ("instructions", self.instructions.as_ref()),
                    ("instructionsFile", self.instructions_file.as_ref()),
                )?;
                launch.value("--model", self.model.as_ref());
                launch.value("--effort", self.effort.as_ref());
                launch.value("--max-turns", self.max_turns.as_ref());
                launch.value("--bash", self.bash.as_ref());
                launch.value("--web-search", self.web_search.as_ref());
                launch.value("--mcp-config", self.mcp_config.as_ref());
                launch.value("--timeout-ms", self.timeout_ms.as_ref());
                launch.value("--result", self.result_file.as_ref());
                launch.switch("--wait", self.wait);
                launch.switch("--allow-git-config", self.allow_git_config);
                launch.switch("--ignored", self.ignored);
                launch.value("--failover", self.failover.as_ref());
                launch.value("--max-depth", self.max_depth.as_ref());
                launch.value("--max-nodes", self.max_nodes.as_ref());
                launch.value("--max-advice-nodes", self.max_advice_nodes.as_ref());
                launch.value("--max-handoff-nodes", self.max_handoff_nodes.as_ref());
                launch.value("--max-concurrency", self.max_concurrency.as_ref());
                launch.value("--root-timeout-ms", self.root_timeout_ms.as_ref());
                Ok(())
            }
        }
    };
}

delegate_input!(
    /// `handoff run` (or `run-with-advice` with `withAdvice`).
    RunInput {
        /// build | phase (must change the worktree) or review | verify (must not) (`--mode`).
        mode: String,
        /// Let the worker ask other agents for read-only advice through a budgeted supervisor
        /// (`handoff run-with-advice`).
        with_advice: Option<bool>,
    }
);

delegate_input!(
    /// `handoff advice`: a read-only answer.
    AdviceInput {}
);

/// `handoff continue`: hand the task itself to another agent.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContinueInput {
    /// The receiver in one phrase, as the person said it: "<agent> [model] [effort] [on
    /// <machine>[:<path>] | on this machine]", e.g. "codex gpt-5 high on devbox" (the
    /// positional argument of `handoff continue`; give this or `to`).
    pub destination: Option<String>,
    /// The agent that takes the task over (`--to`): claude, codex, opencode, copilot, gemini or
    /// qwen with the carried conversation; cursor or kiro from the note and a recap (`fallback:
    /// fresh-agent`).
    pub to: Option<String>,
    /// Absolute path of a directory in the worktree; HEAD must be on a branch with a commit
    /// (`--cwd`).
    pub cwd: String,
    /// The handoff note as text (all nine sections of `handoff note template`); written to a
    /// private file and passed as `--note-file`. Give this or `noteFile`.
    pub note: Option<String>,
    /// Path of the handoff note (`--note-file`).
    pub note_file: Option<String>,
    /// A message for the receiver, sent after the note (`--message`).
    pub message: Option<String>,
    /// implement (default: may edit and run commands) or review (read-only) (`--role`).
    pub role: Option<String>,
    /// Who has the task now; needed for a worktree's first handoff (`--from`).
    pub from: Option<String>,
    /// The model the current agent runs (`--from-model`).
    pub from_model: Option<String>,
    /// The receiver's model (`--model`).
    pub model: Option<String>,
    /// The receiver's reasoning effort (`--effort`).
    pub effort: Option<String>,
    /// The receiver's account from the configuration (`--account`).
    pub account: Option<String>,
    /// Start the receiver on a new task in a new linked worktree and branch (`--new-thread`).
    pub new_thread: Option<bool>,
    /// Checkpoint and write the note, but start no receiver (`--note-only`).
    pub note_only: Option<bool>,
    /// Validate and plan everything, change nothing (`--dry-run`).
    pub dry_run: Option<bool>,
    /// Push the branch to its remote after the checkpoint, never forced (`--push`).
    pub push: Option<bool>,
    /// Wait while another run or agent holds the worktree instead of refusing (`--wait`).
    pub wait: Option<bool>,
    /// Seconds the receiver's first turn may take, 1-86400 (`--timeout`, default 1800).
    pub timeout: Option<u64>,
    /// The session to carry: an id in the source CLI's store or the absolute path of its file
    /// (`--session`; default: the caller's own session, else the newest in the worktree).
    pub session: Option<String>,
    /// `fresh-agent`: when the conversation can't be carried, start the receiver from the note
    /// and a recap alone instead of refusing (`--fallback`).
    pub fallback: Option<String>,
    /// Seconds the receiver may take to show it resumed the carried conversation, 1-86400
    /// (`--ready-timeout`, default 120).
    pub ready_timeout: Option<u64>,
    /// Also ask the receiver what it was last working on and compare with the note (`--probe`).
    pub probe: Option<bool>,
    /// Continue on another machine: an ssh destination and optionally the repository's path
    /// there, `host[:path]` (`--on`).
    pub on: Option<String>,
}

/// What `handoff_start` runs in the background: exactly one of `run`, `advice`, `continue`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartInput {
    /// The arguments of `handoff_run`.
    pub run: Option<RunInput>,
    /// The arguments of `handoff_advice`.
    pub advice: Option<AdviceInput>,
    /// The arguments of `handoff_continue`.
    #[serde(rename = "continue")]
    pub continue_: Option<ContinueInput>,
}

/// A job of this server.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobInput {
    /// The id `handoff_start` returned.
    pub job_id: String,
}

/// `handoff_status`: one job, or every job when `jobId` is left out.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusInput {
    /// The id `handoff_start` returned; leave out to list every job of this server.
    pub job_id: Option<String>,
}

/// `handoff_result`: the final result of a job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultInput {
    /// The id `handoff_start` returned.
    pub job_id: String,
    /// Wait up to this many seconds (at most 600) for a running job to finish; default 0.
    pub wait_seconds: Option<u64>,
}

impl RunInput {
    pub(super) fn launch(&self) -> Result<Launch, String> {
        let verb = if self.with_advice == Some(true) {
            "run-with-advice"
        } else {
            "run"
        };
        let mut launch = Launch::new(verb);
        launch.value("--mode", Some(&self.mode));
        self.shared_flags(&mut launch)?;
        Ok(launch)
    }
}

impl AdviceInput {
    pub(super) fn launch(&self) -> Result<Launch, String> {
        let mut launch = Launch::new("advice");
        self.shared_flags(&mut launch)?;
        Ok(launch)
    }
}

impl ContinueInput {
    pub(super) fn launch(&self) -> Result<Launch, String> {
        let mut launch = Launch::new("continue");
        if let Some(phrase) = &self.destination {
            // A phrase starts with the agent's name; one that starts with '-' would be read as
            // a flag.
            if phrase.trim_start().starts_with('-') {
                return Err("destination starts with the agent's name, not '-'".into());
            }
            launch.args.push(phrase.clone());
        }
        if self.destination.is_none() && self.to.is_none() {
            return Err("give destination (\"codex gpt-5 high\") or to".into());
        }
        launch.value("--to", self.to.as_ref());
        launch.value("--cwd", Some(&self.cwd));
        launch.text_or_file(
            "--note-file",
            ("note", self.note.as_ref()),
            ("noteFile", self.note_file.as_ref()),
        )?;
        // Through a private file, never on the job's command line, which other local users
        // can read.
        if let Some(message) = &self.message {
            launch.inline.push(("--message-file", message.clone()));
        }
        launch.value("--role", self.role.as_ref());
        launch.value("--from", self.from.as_ref());
        launch.value("--from-model", self.from_model.as_ref());
        launch.value("--model", self.model.as_ref());
        launch.value("--effort", self.effort.as_ref());
        launch.value("--account", self.account.as_ref());
        launch.switch("--new-thread", self.new_thread);
        launch.switch("--note-only", self.note_only);
        launch.switch("--dry-run", self.dry_run);
        launch.switch("--push", self.push);
        launch.switch("--wait", self.wait);
        launch.value("--timeout", self.timeout.as_ref());
        launch.value("--session", self.session.as_ref());
        launch.value("--fallback", self.fallback.as_ref());
        launch.value("--ready-timeout", self.ready_timeout.as_ref());
        launch.switch("--probe", self.probe);
        launch.value("--on", self.on.as_ref());
        Ok(launch)
    }
}

impl StartInput {
    pub(super) fn launch(&self) -> Result<Launch, String> {
        match (&self.run, &self.advice, &self.continue_) {
            (Some(r), None, None) => r.launch(),
            (None, Some(a), None) => a.launch(),
            (None, None, Some(c)) => c.launch(),
            _ => Err("give exactly one of run, advice, continue".into()),
        }
    }
}

impl Launch {
    fn value<T: Display>(&mut self, flag: &str, value: Option<&T>) {
        if let Some(v) = value {
            self.args.push(flag.to_owned());
            self.args.push(v.to_string());
        }
    }

    fn switch(&mut self, flag: &str, on: Option<bool>) {
        if on == Some(true) {
            self.args.push(flag.to_owned());
        }
    }

    /// `flag` with a path, or with inline text the job writes to a private file.
    fn text_or_file(
        &mut self,
        flag: &'static str,
        (text_name, text): (&str, Option<&String>),
        (file_name, file): (&str, Option<&String>),
    ) -> Result<(), String> {
        match (text, file) {
            (Some(_), Some(_)) => Err(format!("give {text_name} or {file_name}, not both")),
            (Some(t), None) => {
                self.inline.push((flag, t.clone()));
                Ok(())
            }
            (None, f) => {
                self.value(flag, f);
                Ok(())
            }
        }
    }
}
