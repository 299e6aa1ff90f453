//! The `Provider` trait (what an agent CLI adapter implements), the optional [`Receiver`] and
//! [`Sessions`] an adapter offers through it, and the registry of adapters.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use camino::{Utf8Path, Utf8PathBuf};

use crate::config::AgentConfig;
use crate::continuation::{ReceiverReport, ReceiverRequest};
use crate::mcp::McpDescriptor;
use crate::names::AgentId;
use crate::output::OutputError;
use crate::progress::ProgressEvent;
use crate::request::Request;
use crate::result::{GrantCapabilities, IsolationCapabilities, SelectionCapabilities, Usage};

/// Static facts about an agent CLI: what it is called, what it accepts, how it is isolated.
#[derive(Debug, Clone)]
pub struct ProviderSpec {
    /// The agent's id (`--harness` value).
    pub id: AgentId,
    /// Executable name looked up on PATH.
    pub executable: &'static str,
    /// Extra directories searched after PATH (`~/` is the user's home).
    pub extra_dirs: &'static [&'static str],
    /// Accepted `--effort` values; empty when the CLI has no exact effort control.
    pub effort: &'static [&'static str],
    /// Default effort for advice (`operation-default`), if any.
    pub advice_effort: Option<&'static str>,
    /// Whether `--max-turns` is supported, with the defaults for handoff and advice.
    pub max_turns: Option<TurnDefaults>,
    /// Grant controls.
    pub grants: GrantCapabilities,
    /// Native isolation.
    pub native_filesystem_isolation: bool,
    /// Native shell sandbox.
    pub native_bash_sandbox: bool,
    /// Environment variables this CLI needs for its login and endpoint, passed through when set
    /// (in addition to the common allowlist). A trailing `*` matches a prefix.
    pub env_passthrough: &'static [&'static str],
}

/// Default turn limits when `--max-turns` is not given.
#[derive(Debug, Clone, Copy)]
pub struct TurnDefaults {
    /// For handoff runs.
    pub handoff: u32,
    /// For advice.
    pub advice: u32,
}

impl ProviderSpec {
    /// The selection part of the capability report.
    pub fn selection_capabilities(&self) -> SelectionCapabilities {
        SelectionCapabilities {
            model: true,
            effort: self.effort.iter().map(|s| s.to_string()).collect(),
            max_turns: self.max_turns.is_some(),
        }
    }
}

/// Everything an adapter may use to plan one run. Built by the engine; read-only for adapters.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// A private (0700) directory that exists for this run only and is removed afterwards.
    pub path: Utf8PathBuf,
    /// Absolute path of the agent executable found by preflight.
    pub executable: Utf8PathBuf,
    /// The prompt the agent must receive.
    pub prompt: String,
    /// The provider-output JSON Schema (before any adapter-specific transform).
    pub output_schema: serde_json::Value,
    /// The private MCP servers of this run, if any.
    pub mcp: Option<McpDescriptor>,
    /// handoff's own environment, from which the allowlist and MCP secret references are taken.
    pub parent_env: BTreeMap<String, String>,
    /// The user's configuration for this agent (`[agents.<id>]`).
    pub agent_config: AgentConfig,
    /// Set when the agent may ask for nested advice: what its sandbox must let it reach.
    pub nested: Option<NestedAccess>,
    /// Whether handoff's own sandbox can run here ([`crate::sandbox::bubblewrap_here`]): an
    /// adapter that asks for it plans the CLI's state for it.
    pub handoff_sandbox: bool,
    /// Whether handoff's sandbox is to hold this run although the adapter would not ask for it
    /// ([`crate::RunShape::confined`]): a nested adviser confined against its worker.
    pub confined: bool,
}

/// What a worker with nested advice needs to reach from inside its sandbox: its mailbox to
/// the supervisor — [`NestedAccess::inbox`] writable, [`NestedAccess::outbox`] readable, the
/// only path its sandbox opens for this — and the `handoff` binary. No socket, no network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestedAccess {
    /// The worker's mailbox directory (private to the user, in the supervisor's directory).
    pub mailbox: Utf8PathBuf,
    /// The `handoff` binary the worker runs.
    pub handoff_exe: Utf8PathBuf,
}

impl NestedAccess {
    /// Where the worker posts its requests: the one path its sandbox must let it write.
    pub fn inbox(&self) -> Utf8PathBuf {
        self.mailbox.join(crate::supervisor::INBOX)
    }

    /// Where the supervisor's answers arrive: readable, never writable, by the worker.
    pub fn outbox(&self) -> Utf8PathBuf {
        self.mailbox.join(crate::supervisor::OUTBOX)
    }
}

impl RunDir {
    /// A file inside the run directory.
    pub fn file(&self, name: &str) -> Utf8PathBuf {
        self.path.join(name)
    }

    /// The agent's temporary directory for this run: its `TMPDIR` (and `TMP`, `TEMP`), made
    /// before it starts and removed with the run directory, so that nothing written there
    /// outlives the run. An adapter whose CLI keeps a temporary area of its own moves it here
    /// when the CLI allows it.
    pub fn temp(&self) -> Utf8PathBuf {
        self.path.join(RUN_TEMP)
    }
}

/// The name of the run's temporary directory inside its run directory ([`RunDir::temp`]).
pub const RUN_TEMP: &str = "tmp";

/// Points `invocation`'s temporary-directory variables at `temp` and has it made before the
/// agent starts. handoff's own sandbox, where it wraps the agent, replaces them with a `/tmp`
/// of the run's own.
pub fn give_run_temp(invocation: &mut Invocation, temp: &Utf8Path) {
    for k in ["TMPDIR", "TMP", "TEMP"] {
        invocation.env.insert(k.into(), temp.to_string());
    }
    if !invocation.dirs.iter().any(|d| d == temp) {
        invocation.dirs.push(temp.to_owned());
    }
}

/// A finished run that ran under handoff's sandbox, as [`Provider::import_sandboxed_state`]
/// sees it.
#[derive(Debug)]
pub struct SandboxedState<'a> {
    /// The CLI.
    pub executable: &'a Utf8Path,
    /// The agent's environment as the adapter planned it.
    pub env: &'a BTreeMap<String, String>,
    /// handoff's own environment.
    pub parent_env: &'a BTreeMap<String, String>,
    /// The run's private directory (still there).
    pub run_dir: &'a Utf8Path,
    /// The agent's working directory.
    pub cwd: &'a Utf8Path,
    /// What the agent printed (bounded).
    pub stdout: &'a [u8],
}

/// What the agent's stdin receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinSource {
    /// The prompt, then EOF.
    Prompt,
    /// Nothing (closed at once).
    Null,
}

/// Where the agent's answer is read from after it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerSource {
    /// Its stdout.
    Stdout,
    /// A file it writes.
    File(Utf8PathBuf),
    /// Its stdout, with a report the CLI writes beside it (e.g. its token counts) read into
    /// [`RawOutput::answer_file`].
    StdoutWithReport(Utf8PathBuf),
}

/// A private file the engine writes (0600, exclusive create) before launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateFile {
    /// Where (inside the run directory).
    pub path: Utf8PathBuf,
    /// Contents.
    pub contents: Vec<u8>,
}

/// A planned agent process: built by a pure function, so it can be snapshot-tested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Absolute program path.
    pub program: Utf8PathBuf,
    /// Arguments (without the program).
    pub args: Vec<String>,
    /// The complete environment of the child (never the whole parent environment).
    pub env: BTreeMap<String, String>,
    /// Working directory of the child.
    pub cwd: Utf8PathBuf,
    /// What stdin receives.
    pub stdin: StdinSource,
    /// Private directories (0700) created before launch, e.g. configuration roots.
    pub dirs: Vec<Utf8PathBuf>,
    /// Files written before launch.
    pub files: Vec<PrivateFile>,
    /// Where the answer is.
    pub answer: AnswerSource,
    /// The policy receipt: how each grant is enforced for this run.
    pub policy: serde_json::Value,
    /// Secret values placed in the child's env or files, to be masked wherever they appear.
    pub secrets: Vec<String>,
    /// Set when the agent is to run under handoff's own sandbox ([`crate::sandbox`]) where one
    /// can run: what the adapter needs in it beyond the worktree.
    pub sandbox: Option<crate::sandbox::SandboxSpec>,
}

/// Why an invocation could not be planned: always a rejection before launch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvocationError {
    /// A control this CLI cannot express.
    #[error("{0}")]
    Unsupported(String),
    /// An MCP secret reference names a variable that is not set.
    #[error("MCP environment reference '{name}' is not set")]
    MissingMcpEnv {
        /// The variable.
        name: String,
    },
}

/// What the agent process left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawOutput {
    /// Captured stdout (bounded).
    pub stdout: Vec<u8>,
    /// Captured stderr (bounded).
    pub stderr: Vec<u8>,
    /// Exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// Contents of the file the answer source names ([`AnswerSource::File`] or
    /// [`AnswerSource::StdoutWithReport`]), when it exists.
    pub answer_file: Option<Vec<u8>>,
}

/// What the adapter saw in the agent's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// A candidate answer (checked against the provider-output contract by the engine).
    Answer {
        /// The answer JSON or text, as the model produced it.
        payload: Vec<u8>,
        /// Usage counted by the CLI, if any (source `provider-envelope`).
        usage: Option<Usage>,
    },
    /// The agent ran and reported its own failure (API error, turn limit, …).
    AgentFailure {
        /// What the CLI said.
        message: String,
        /// Usage counted by the CLI, if any.
        usage: Option<Usage>,
        /// Why, as the adapter read it.
        reason: crate::FailureReason,
    },
    /// The CLI refused to start for an environmental reason (e.g. its sandbox is unavailable).
    Unavailable {
        /// What the CLI said.
        message: String,
    },
}

/// Result of a preflight.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Preflight {
    /// First line of `--version`.
    pub version: Option<String>,
    /// `None` when every probe passed; else why not.
    pub failure: Option<String>,
}

/// The environment probes run in.
#[derive(Debug, Clone)]
pub struct ProbeEnv {
    /// The allowlisted environment (plus `NO_COLOR=1`, `TERM=dumb`).
    pub env: BTreeMap<String, String>,
    /// A private scratch directory probes may use as cwd.
    pub scratch: Utf8PathBuf,
}

/// An agent CLI adapter: delegation (plan the process, read its output, preflight). Receiving a
/// continued task and reading or writing its sessions are offered through [`Provider::receiver`]
/// and [`Provider::sessions`], so what an agent can do is known without asking it to refuse.
#[async_trait]
pub trait Provider: Send + Sync {
    /// Static facts.
    fn spec(&self) -> &ProviderSpec;

    /// Plans the agent process. Pure: same inputs, same invocation.
    fn invocation(&self, request: &Request, run: &RunDir) -> Result<Invocation, InvocationError>;

    /// Reads the agent's output. Pure; never panics on any input.
    fn parse(&self, raw: &RawOutput) -> Result<Observation, OutputError>;

    /// Proves, without a model call or credentials, that the installed CLI has what the
    /// invocation needs.
    async fn preflight(&self, executable: &Utf8Path, probe: &ProbeEnv) -> Preflight;

    /// Everything besides the executable itself that the preflight outcome depends on
    /// (e.g. helper programs found on PATH). `None` means the outcome can't be keyed and must
    /// not be cached.
    fn preflight_key(&self, _probe: &ProbeEnv) -> Option<Vec<String>> {
        Some(Vec::new())
    }

    /// How isolated a run of this shape is, from the configuration [`Provider::invocation`]
    /// builds for it. Pure. An adapter that does not rank its runs is taken to be unconfined,
    /// so a nested adviser never runs on it for a caller that is confined at all.
    fn isolation(&self, _shape: &crate::isolation::RunShape) -> crate::isolation::Isolation {
        crate::isolation::Isolation::unconfined()
    }

    /// Whether this CLI's runs ask for handoff's own sandbox where it can run (the default).
    /// One that never does (it holds its runs with a sandbox of its own) says so, and its root
    /// runs skip finding out whether bubblewrap works here; a confined adviser
    /// ([`crate::RunShape::confined`]) finds out all the same.
    fn asks_for_handoff_sandbox(&self) -> bool {
        true
    }

    /// What [`Provider::import_sandboxed_state`] would carry of a run under handoff's sandbox
    /// that printed `stdout`, said as the receipt says it ("session … in the user's … store");
    /// `None`: nothing to carry, and no import is started. An adapter that imports says what.
    fn state_to_import(&self, _stdout: &[u8]) -> Option<String> {
        None
    }

    /// After a run under handoff's sandbox ([`Invocation::sandbox`]), whose CLI kept its
    /// state in the run's private directory: carries what the user needs of it (e.g. the
    /// session, so that it can be resumed and continued) into the user's own store, before the
    /// run directory is removed. Returns what was carried, for the receipt; an error is
    /// reported in the receipt and does not change the run's verdict. Where the engine knows
    /// the handoff binary, this runs in a detached importer after the run's result is out
    /// ([`crate::state_import`]), only when [`Provider::state_to_import`] names something.
    async fn import_sandboxed_state(
        &self,
        _state: &SandboxedState<'_>,
    ) -> Result<Option<String>, String> {
        Ok(None)
    }

    /// What this CLI's own sandbox leaves in repositories (empty mount points), per version:
    /// swept after its runs when still bare ([`crate::ArtifactWatch`]). `None` for a CLI
    /// without a sandbox of its own.
    fn sandbox_artifacts(&self) -> Option<&'static crate::SandboxArtifacts> {
        None
    }

    /// The versions of this CLI the real-CLI suite last passed on; `None` when it is not run
    /// there.
    fn tested_versions(&self) -> Option<crate::TestedRange> {
        None
    }

    /// Checks the finished process for signs that isolation was not enforced.
    /// Returns the reason to block, if any.
    fn runtime_check(&self, _raw: &RawOutput) -> Option<String> {
        None
    }

    /// What one line of the agent's streaming output says it is doing. Pure; never panics;
    /// empty for lines that say nothing worth showing (and for CLIs without an event stream).
    fn progress(&self, _line: &[u8]) -> Vec<ProgressEvent> {
        Vec::new()
    }

    /// For a CLI with no turn limit of its own: whether handoff enforces the spec's
    /// [`ProviderSpec::max_turns`] itself, counting the [`ProgressEvent::Turn`] events of the
    /// CLI's stream ([`Provider::progress`]) and stopping the CLI as a turn past the limit
    /// starts. The run then ends as the agent's own failure at its turn limit.
    fn turns_counted_by_handoff(&self) -> bool {
        false
    }

    /// Receiving a continued task (`handoff continue --to`): `None` when this CLI can't own
    /// one.
    fn receiver(&self) -> Option<&dyn Receiver> {
        None
    }

    /// Why this CLI can't receive a continued task, said when [`Provider::receiver`] is `None`.
    fn why_no_receiver(&self) -> &str {
        "handoff does not know how to keep and resume its sessions"
    }

    /// Its session store: `None` when handoff can't read this CLI's sessions.
    fn sessions(&self) -> Option<&dyn Sessions> {
        None
    }
}

impl dyn Provider {
    /// The isolation part of the capability report: the spec's flags and every ranked case
    /// ([`crate::isolation::cases`]).
    pub fn isolation_capabilities(&self) -> IsolationCapabilities {
        self.isolation_capabilities_where(true)
    }

    /// [`Self::isolation_capabilities`] on a machine where handoff's own sandbox can run
    /// (`handoff_sandbox`) or cannot.
    pub fn isolation_capabilities_where(&self, handoff_sandbox: bool) -> IsolationCapabilities {
        let spec = self.spec();
        let cases = crate::isolation::cases_where(self, handoff_sandbox);
        IsolationCapabilities {
            native_filesystem_isolation: spec.native_filesystem_isolation,
            native_bash_sandbox: spec.native_bash_sandbox,
            mutation_guarantee: if spec.native_filesystem_isolation {
                "native-and-final-state".into()
            } else {
                "final-state-detection-only".into()
            },
            enforcement: cases
                .first()
                .map_or(crate::isolation::Enforcement::None, |c| {
                    c.isolation.enforcement
                }),
            cases,
        }
    }

    /// [`Provider::sessions`], or the error that says this CLI's sessions can't be read.
    pub fn session_store(&self) -> Result<&dyn Sessions, crate::transcript::TranscriptError> {
        self.sessions().ok_or_else(|| {
            crate::transcript::TranscriptError::Unsupported(format!(
                "handoff cannot read {} sessions yet",
                self.spec().id
            ))
        })
    }
}

/// An agent CLI that can take a task over: a headless first turn in the worktree whose session
/// the CLI keeps, and the command that resumes that session interactively.
pub trait Receiver: Send + Sync {
    /// Plans a continuation receiver's first turn: a headless run in the worktree whose session
    /// the CLI persists (no ephemeral or no-persistence switch, no result contract), with
    /// `run.prompt` as its first prompt and the role's grants. Pure.
    fn receiver_invocation(
        &self,
        request: &ReceiverRequest,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError>;

    /// Reads a receiver's output: its session id, last message and failure. Pure; never panics.
    fn parse_receiver(&self, raw: &RawOutput) -> ReceiverReport;

    /// The program and arguments that resume `session_id` interactively, run in the worktree
    /// (the program as the user would type it, found on their PATH), with the settings of the
    /// agent's configuration the receiver ran with that are not credentials (a gateway, say),
    /// so the session resumes against the same model provider.
    fn resume_command(&self, session_id: &str, config: &AgentConfig) -> Vec<String>;

    /// Variables the resume command needs besides the configuration's `env` (which the engine
    /// adds itself): e.g. the configuration's model providers. Never a credential.
    fn resume_env(&self, config: &AgentConfig) -> BTreeMap<String, String> {
        let _ = config;
        BTreeMap::new()
    }

    /// Whether this CLI, at `version` (first line of its `--version`), can resume a carried
    /// session as a receiver.
    fn resume_support(&self, version: Option<&str>) -> Result<(), String>;

    /// Whether the receiver invocation can fork a session natively
    /// ([`crate::ResumeFrom::fork`]) into a chosen id.
    fn native_fork(&self) -> bool {
        false
    }

    /// For a CLI that keys its conversations by directory and reports no session id: the
    /// program and arguments that resume the newest conversation of the worktree, run there.
    /// `None` (the default) when resuming needs the session id.
    fn resume_latest(&self, config: &AgentConfig) -> Option<Vec<String>> {
        let _ = config;
        None
    }

    /// What it receives: [`crate::ReceiverLevel::Full`] when its [`Sessions`] can write a
    /// carried conversation into its store, [`crate::ReceiverLevel::FreshAgent`] when a
    /// continuation can only start it from the note and a recap.
    fn level(&self) -> crate::ReceiverLevel {
        crate::ReceiverLevel::Full
    }

    /// How this receiver was verified (an embedder's: [`crate::Verified::Recorded`] unless it
    /// says otherwise).
    fn verified(&self) -> crate::Verified {
        crate::Verified::Recorded
    }
}

/// An agent CLI's session store, as handoff reads it and carries conversations into it.
#[async_trait]
pub trait Sessions: Send + Sync {
    /// Reads one of this CLI's sessions (the file `path`) into a neutral transcript, without
    /// writing anything. A partly readable session is read with warnings; only a session with
    /// nothing readable is an error.
    fn read_transcript(
        &self,
        path: &Utf8Path,
    ) -> Result<crate::transcript::Transcript, crate::transcript::TranscriptError>;

    /// Finds one of this CLI's sessions in its store, without writing to it. `Ok(None)` when
    /// there is no such session.
    async fn find_session(
        &self,
        store: &crate::carry::StoreEnv,
        query: &crate::carry::SessionQuery,
    ) -> Result<Option<crate::carry::SessionRef>, crate::transcript::TranscriptError>;

    /// Writes `transcript` (from any CLI) into this CLI's store as a new session its receiver
    /// resumes from `target.cwd`. In a dry run, plans the files without writing. Never touches
    /// another session.
    async fn write_session(
        &self,
        store: &crate::carry::StoreEnv,
        transcript: &crate::transcript::Transcript,
        target: &crate::carry::CarryTarget,
    ) -> Result<crate::carry::CarriedSession, crate::transcript::TranscriptError>;

    /// Copies one of this CLI's own sessions losslessly into a new session (new id, every cwd
    /// re-rooted at `target.cwd`). The source is only read.
    async fn copy_session(
        &self,
        store: &crate::carry::StoreEnv,
        source: &crate::carry::SessionRef,
        target: &crate::carry::CarryTarget,
    ) -> Result<crate::carry::CarriedSession, crate::transcript::TranscriptError>;
}

/// The set of providers a program can run, by id.
#[derive(Clone, Default)]
pub struct Registry {
    providers: Vec<Arc<dyn Provider>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds (or replaces) a provider.
    pub fn register(&mut self, provider: Arc<dyn Provider>) -> &mut Registry {
        let id = provider.spec().id.clone();
        self.providers.retain(|p| p.spec().id != id);
        self.providers.push(provider);
        self
    }

    /// Looks a provider up by id.
    pub fn get(&self, id: &AgentId) -> Option<&Arc<dyn Provider>> {
        self.providers.iter().find(|p| &p.spec().id == id)
    }

    /// All providers, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Provider>> {
        self.providers.iter()
    }

    /// Registered ids.
    pub fn ids(&self) -> Vec<AgentId> {
        self.providers.iter().map(|p| p.spec().id.clone()).collect()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.ids()).finish()
    }
}
