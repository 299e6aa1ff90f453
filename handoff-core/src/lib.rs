//! handoff-core: the contracts, the `Provider` trait, the delegation engine and the process
//! supervisor of handoff.
//!
//! The engine turns a [`RunInput`] (flags or a library call) into a validated [`Request`],
//! plans the agent process through a [`Provider`] (pure [`Provider::invocation`]), runs it under
//! the process supervisor, reads its output (pure [`Provider::parse`]), compares git
//! [`Fingerprint`]s taken through a [`Workspace`], and returns one [`HandoffResult`] with a
//! documented exit code. A [`PanelResult`] puts several read-only runs of the same question
//! side by side (see `parse_members` and [`PanelResult::assemble`]). Core knows no agent CLI, no git library and no database: adapters and
//! workspaces are plugged in by the program that embeds it.
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod allocator;
mod artifacts;
mod carry;
mod compat;
mod config;
mod continuation;
mod engine;
mod env;
mod failover;
mod failure;
pub mod flags;
mod hosts;
mod input;
mod isolation;
mod jobs;
mod lease;
mod mask;
mod mcp;
mod names;
mod note;
mod output;
mod panel;
mod paths;
pub mod platform;
mod preflight;
mod printable;
mod private_dir;
mod process;
mod programs;
mod progress;
mod prompt;
mod provider;
pub mod reaper;
mod redact;
mod request;
mod result;
pub mod sandbox;
pub mod seatbelt;
pub mod state_import;
mod stop_signals;
pub mod summary;
mod supervisor;
mod task;
mod timestamp;
mod transcript;
mod trust;
mod workspace;

pub use artifacts::{
    ArtifactKind, ArtifactPath, ArtifactRule, ArtifactWatch, ArtifactsChecked, GitDir,
    KeptArtifact, SandboxArtifacts, Sweep, SweptArtifact,
};
pub use carry::{
    CarriedSession, CarryTarget, PROBE_MATCH_SCORE, PROBE_QUESTION, ProbeComparison, ResumeFrom,
    Resumption, SessionQuery, SessionRef, SourceSnapshot, StoreEnv, compare_probe, resumed_after,
    same_message,
};
pub use compat::{TestedRange, Version, VersionRange, VersionReport, VersionStatus, tested_ranges};
pub use config::{
    AccountConfig, AgentConfig, Config, ConfigError, LoadedConfig, check_codex_override,
    config_secrets, known_secrets, valid_account_name,
};
pub use continuation::{
    CONTINUE_SCHEMA, CarryMode, CarrySource, ContinueCarry, ContinueCheckpoint,
    ContinueDestination, ContinueMessage, ContinueNote, ContinueOutcome, ContinuePush,
    ContinueRecap, ContinueReceiver, ContinueRemote, ContinueResult, ContinueTarget,
    ContinueWorktree, Continuity, ContinuityChecks, ContinuityProbe, ContinuityResult,
    ReceiverReport, ReceiverRequest, ReceiverRole, ResumeCommand, shell_word,
};
pub use engine::{
    Engine, EngineOptions, PanelOptions, PanelOutcome, PreparedReceiver, ReceiverRun, RunOutcome,
    SharedTaskStore, WorkerAdvice, provider_output_schema,
};
pub use env::{COMMON_ENV, agent_env, allowed as env_allowed};
pub use failover::{
    Attempt, CLAUDE_STOP_ERRORS, FailoverConfig, FailoverEntry, MAX_FAILOVER_ENTRIES, OnLimit,
    continued_instructions, parse_failover,
};
pub use failure::{FailureCause, FailureReason, retry_after_in_text};
pub use hosts::{
    DEFAULT_HOST_DIR, Destination, Host, HostConfig, MAX_HOST_RUNS, RunHost, check_host,
    parse_destination, resolve_host, valid_host_name,
};
pub use input::{
    InputRejection, Instructions, RunInput, Validated, Verb, intent_hash, registered, request_hash,
};
pub use isolation::{
    Attenuation, Confinement, Dimension, Enforcement, FilesystemRead, FilesystemWrite, Isolation,
    IsolationCase, IsolationRow, Network, ProcessContainment, RunShape, UnixSockets,
    WeakerDimension, WeakerLevel, cases as isolation_cases, confine, of_request as isolation_of,
    process_containment, render_markdown as render_isolation_table, table as isolation_table,
};
pub use jobs::{
    Cancel, DetachError, Detached, EXIT_STILL_RUNNING, JOB_SCHEMA, JOB_VERB, Job, JobOrigin,
    JobReport, JobState, NewJob, ProcessRef, SUPERVISOR_GRACE, cancel_job, descends_from,
    detach_job, flag_value, list_jobs, parent_pid, supervise_job, wait_job,
};
pub use lease::{
    Holder, HolderRecord, LeaseError, RootLease, Wait, WorkingAgent, adopt_orphans,
    agents_working_in, check_ancestry, default_runtime_dir, private_dir_base, private_work_dir,
};
pub use mask::{
    KeptRecord, MIN_FREE_LEN, Masked, Masker, MaskerError, REDACTED, REDACTED_PRIVATE_KEY,
    REDACTED_TOKEN, codex_secret_key, is_credential_name,
};
pub use mcp::{
    MAX_MCP_BYTES, MCP_SCHEMA, MCP_SCHEMA_V03, McpDescriptor, McpServer, RemoteServer, SecretRef,
    StdioServer, valid_env_name,
};
pub use names::{AgentId, Mode, Operation, Status, Verdict, check_model, exit};
pub use note::{
    FrontMatter, FrontMatterError, GitRemote, GitState, MAX_LISTED_UNCOMMITTED, MAX_NOTE_BYTES,
    Markdown, MarkdownKind, MarkdownPiece, MarkdownSection, NOTE_CHECK_SCHEMA, NOTE_SCHEMA, Note,
    NoteCheck, NoteErrors, NoteOrigin, NoteReadError, NoteSection, RECEIVER_INSTRUCTIONS, Section,
    check as check_note, decode_note, parse as parse_note, read_note, render as render_note,
    status_words, strip_url_credentials, template as note_template,
};
pub use output::{
    Evidence, Finding, MAX_PROVIDER_OUTPUT_BYTES, OutputError, PROVIDER_OUTPUT_SCHEMA,
    ProviderOutput, ProviderStatus, ReviewVerdict, SelfReportedUsage, Severity, check_repo_path,
};
pub use panel::{
    Agreement, FailedMember, GENERAL_CATEGORY, LineRange, MAX_PANEL_MEMBERS, MemberStance,
    PANEL_SCHEMA, PanelExit, PanelFinding, PanelMember, PanelResult, PanelSpecError, VerdictSource,
    Wording, check_quorum, decide_panel, member_verdict, merge_findings, normalise_category,
    normalise_path, parse_members, parse_members_among, render_members, title_tokens, titles_agree,
};
pub use paths::{
    MAX_INSTRUCTIONS_BYTES, ResultFile, check_cwd, check_lexical, read_input_file,
    read_regular_file,
};
pub use preflight::{PreflightCache, file_identity, is_executable, locate, locate_on_path};
pub use printable::printable;
pub use private_dir::{PrivateDir, PrivateDirKind};
pub use process::{
    Containment, Ending, OUTPUT_LIMIT, ProcessReport, ReaperSpec, run_command, supervise,
    supervise_with_tap,
};
pub use programs::{
    guard_dir, guard_worktrees_of, is_guarded, original_path, program, program_or_missing,
    sanitize_process_path, worktrees_of,
};
pub use progress::{MAX_DETAIL_CHARS, ProgressEvent, ProgressHook, ProgressSink, ProgressUpdate};
pub use prompt::build_prompt;
pub use provider::{
    AnswerSource, Invocation, InvocationError, NestedAccess, Observation, Preflight, PrivateFile,
    ProbeEnv, Provider, ProviderSpec, RawOutput, Receiver, Registry, RunDir, SandboxedState,
    Sessions, StdinSource, TurnDefaults,
};
pub use redact::{
    DIAGNOSTIC_LIMIT, credential_name, credential_values, redact, redact_known, truncate_tail,
};
pub use request::*;
pub use result::*;
pub use stop_signals::unblock_stop_signals;
pub use supervisor::{
    AUDIT_LIMIT, Admission, CLIENT_GRACE_MS, CONTEXT_ENV, CONTEXT_SCHEMA, Capability, Clock,
    DagError, DagStore, GrantRequest, INBOX, MAX_CONTEXT_BYTES, MAX_NONCE_BYTES, MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES, NESTED_REPLY_SCHEMA, NESTED_REQUEST_SCHEMA, NestedReply, NestedRequest,
    NodeRequest, OUTBOX, RedeemError, RegisteredNode, SupervisorContext, TOKEN_PREFIX, Ticket,
    Token, TokenAudit, TokenBook, TokenError, ask_supervisor, attenuate, check_dag_invariants,
    result_hash,
};
pub use task::{
    AgentRef, CheckRun, Checkpoint, DelegatedRun, Fork, ForkMarker, HandoffContext, HandoffId,
    HandoffOutcome, HandoffRow, JobId, MAX_NAME_BYTES, NewHandoff, NewTask, Record, Route,
    StoreError, Task, TaskAgent, TaskId, TaskStore, TimelineEntry, TimelineEvent, Turn, check_name,
    check_timestamp,
};
pub use timestamp::{iso_from_unix_ms, now_iso, parse_iso};
pub use transcript::{
    MAX_TOOL_TEXT_BYTES, Message, Part, Recap, Role, TRANSCRIPT_SCHEMA, Transcript,
    TranscriptError, TranscriptSource, bounded, recap,
};
pub use trust::{ConfigChanges, ConfigState};
pub use workspace::{
    Baseline, ChangeCounts, Entries, FINGERPRINT_SCHEMA, Fingerprint, FingerprintBasis,
    GitEvidence, IGNORED_COUNT_LIMIT, IGNORED_CREATED_LIMIT, IgnoredTree, ParkedError,
    ParkedFingerprint, RECORD_PAGE, RecordLookup, RecordedId, Snapshot, Stamp, StatRecord,
    StateFile, StatesReader, StatesWriter, StatusChange, Workspace, WorkspaceError,
    WorktreeLocation, WorktreeView,
};
