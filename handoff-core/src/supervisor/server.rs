//! The supervisor of one root run: listens on a private Unix socket, admits nested advice
//! requests into the budgeted DAG and runs each adviser through the same engine, on the asking
//! worker's worktree read-only or on a snapshot of it (see [`super::view`]).
//!
//! One request per connection: the client writes one [`NestedRequest`] line and reads one
//! [`NestedReply`] line. The connection stays open while the adviser runs; if the client goes
//! away (its worker was stopped), the adviser is cancelled. Nothing outlives the supervisor:
//! [`Supervisor::shutdown`] cancels every adviser still running and waits for it.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::dag::{DagError, DagStore, NodeRequest};
use super::token::{Capability, TokenAudit, TokenBook};
use super::view::AdviserWorktree;
use super::wire::*;
use crate::engine::{Engine, Launch, RunOutcome};
use crate::input::{Instructions, NestedParent, RunInput, Verb, intent_hash, request_hash};
use crate::isolation::{Confinement, Isolation};
use crate::mcp::McpDescriptor;
use crate::names::{AgentId, Operation};
use crate::redact::quote;
use crate::request::{BudgetLimits, DelegationMode, GrantsResolved, Request};

/// Time kept back from a nested node's budget when the root deadline bounds it, so that its
/// `timed_out` reply reaches the asking worker before the deadline stops that worker too.
const REPLY_MARGIN: Duration = Duration::from_millis(500);

/// How long a client may take to send its request line.
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What the supervisor knows of a node that may ask for advice.
#[derive(Debug, Clone)]
struct NodeInfo {
    /// Where the node's agent works: the root's worktree, or a nested node's view of its
    /// asking node's (that worktree itself when live, else a snapshot).
    worktree: Utf8PathBuf,
    /// The root's worktree, which every view shows: intents are computed on paths in it, so
    /// that an adviser re-asking its parent's question is caught by the loop guard.
    origin: Utf8PathBuf,
    target: AgentId,
    depth: u32,
    grants: GrantsResolved,
    mcp: Option<McpDescriptor>,
    /// The isolation the node runs under: the ceiling of its advisers'.
    isolation: Isolation,
}

struct Shared {
    engine: Engine,
    dag: Mutex<DagStore>,
    tokens: Mutex<TokenBook>,
    nodes: Mutex<HashMap<String, NodeInfo>>,
    handlers: Mutex<Vec<JoinHandle<()>>>,
    endpoint: Utf8PathBuf,
    handoff_exe: Utf8PathBuf,
    snapshots: Utf8PathBuf,
    deadline_unix_ms: u64,
    limits: BudgetLimits,
    /// Becomes true when the root is cancelled or the supervisor shuts down.
    stop: watch::Receiver<bool>,
}

/// A running supervisor. Dropping it without [`Supervisor::shutdown`] aborts its tasks.
pub(crate) struct Supervisor {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    stop_tx: watch::Sender<bool>,
    forward: JoinHandle<()>,
    _socket_dir: tempfile::TempDir,
    _snapshot_dir: crate::private_dir::PrivateDir,
    root_context: SupervisorContext,
}

/// What is left once a supervisor has shut down.
pub(crate) struct Finished {
    /// The DAG, every nested node terminal (the root still running).
    pub dag: DagStore,
    /// Refused token attempts.
    pub audit: Vec<TokenAudit>,
    /// Refusals not kept in `audit`.
    pub audit_dropped: u64,
}

/// Where a supervisor lives and what it serves.
pub(crate) struct SupervisorSetup<'a> {
    pub engine: Engine,
    pub root: &'a Request,
    pub root_mcp: Option<McpDescriptor>,
    pub worktree: Utf8PathBuf,
    pub started_at: &'a str,
    pub started: std::time::Instant,
    pub handoff_exe: Utf8PathBuf,
    /// Parent of the 0700 socket directory (short: socket paths are limited to 107 bytes).
    pub socket_parent: Utf8PathBuf,
    /// The private directory advisers' snapshots go in (held for the supervisor's life).
    pub snapshot_dir: crate::private_dir::PrivateDir,
    pub cancel: watch::Receiver<bool>,
}

/// A new directory in `parent`, 0700 from the moment it exists (the umask can only take bits
/// away, which the chmod gives back), removed when dropped.
fn private_dir(parent: &Utf8Path, prefix: &str) -> std::io::Result<tempfile::TempDir> {
    let private = std::fs::Permissions::from_mode(0o700);
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(private.clone())
        .tempdir_in(parent.as_std_path())?;
    std::fs::set_permissions(dir.path(), private)?;
    Ok(dir)
}

fn utf8(dir: &tempfile::TempDir) -> std::io::Result<Utf8PathBuf> {
    Utf8Path::from_path(dir.path())
        .map(Utf8Path::to_owned)
        .ok_or_else(|| std::io::Error::other("the directory path is not UTF-8"))
}

fn unix_ms(at: time::OffsetDateTime) -> u64 {
    u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

impl Supervisor {
    /// Creates the socket and the DAG, mints the root's token and starts serving.
    pub(crate) fn start(setup: SupervisorSetup<'_>) -> Result<Supervisor, String> {
        let SupervisorSetup {
            engine,
            root,
            root_mcp,
            worktree,
            started_at,
            started,
            handoff_exe,
            socket_parent,
            snapshot_dir,
            mut cancel,
        } = setup;
        let socket_dir = private_dir(&socket_parent, "sup-").map_err(|e| {
            format!("cannot create the supervisor directory in {socket_parent}: {e}")
        })?;
        let endpoint = utf8(&socket_dir).map_err(|e| e.to_string())?.join("s");
        if endpoint.as_str().len() > 107 {
            return Err(format!(
                "the supervisor socket path {endpoint} is longer than 107 bytes"
            ));
        }
        let listener = std::os::unix::net::UnixListener::bind(endpoint.as_std_path())
            .and_then(|l| {
                l.set_nonblocking(true)?;
                Ok(l)
            })
            .and_then(UnixListener::from_std)
            .map_err(|e| format!("cannot listen on {endpoint}: {e}"))?;
        let _ = std::fs::set_permissions(
            endpoint.as_std_path(),
            std::fs::Permissions::from_mode(0o600),
        );

        let root_isolation = crate::isolation::of_request(engine.registry(), root);
        let dag = DagStore::new(root, started_at, started).with_root_isolation(root_isolation);
        let deadline_unix_ms =
            unix_ms(time::OffsetDateTime::now_utc()) + dag.time_left().as_millis() as u64;
        let limits = dag.limits();
        let mut tokens = TokenBook::new(&root.lineage.root_run_id);
        let token = tokens
            .mint(
                Capability {
                    parent_run_id: root.lineage.run_id.clone(),
                    caller_harness: root.target.harness.clone(),
                    parent_grants: root.grants.resolved.clone(),
                    parent_mcp_servers: root.grants.mcp.servers.clone(),
                },
                limits.max_nodes,
            )
            .map_err(|e| format!("cannot make the root's capability token: {e}"))?;
        let root_context = SupervisorContext {
            schema_version: CONTEXT_SCHEMA.into(),
            endpoint: endpoint.to_string(),
            token: token.expose().to_owned(),
            caller_harness: root.target.harness.clone(),
            root_run_id: root.lineage.root_run_id.clone(),
            run_id: root.lineage.run_id.clone(),
            allowed_operations: vec![Operation::Advice],
            deadline_unix_ms,
        };
        let nodes = HashMap::from([(
            root.lineage.run_id.clone(),
            NodeInfo {
                origin: worktree.clone(),
                worktree,
                target: root.target.harness.clone(),
                depth: 0,
                grants: root.grants.resolved.clone(),
                mcp: root_mcp,
                isolation: root_isolation.unwrap_or_else(Isolation::unconfined),
            },
        )]);

        let (stop_tx, stop_rx) = watch::channel(false);
        // The root's cancellation stops every adviser too.
        let forward = {
            let stop_tx = stop_tx.clone();
            tokio::spawn(async move {
                while !*cancel.borrow() {
                    if cancel.changed().await.is_err() {
                        return;
                    }
                }
                let _ = stop_tx.send(true);
            })
        };
        let shared = Arc::new(Shared {
            engine,
            dag: Mutex::new(dag),
            tokens: Mutex::new(tokens),
            nodes: Mutex::new(nodes),
            handlers: Mutex::new(Vec::new()),
            endpoint,
            handoff_exe,
            snapshots: snapshot_dir.path().to_owned(),
            deadline_unix_ms,
            limits,
            stop: stop_rx,
        });
        let accept = tokio::spawn(accept_loop(Arc::clone(&shared), listener));
        Ok(Supervisor {
            shared,
            accept: Some(accept),
            stop_tx,
            forward,
            _socket_dir: socket_dir,
            _snapshot_dir: snapshot_dir,
            root_context,
        })
    }

    /// The root worker's context (its token is a secret: redact it).
    pub(crate) fn root_context(&self) -> &SupervisorContext {
        &self.root_context
    }

    /// The socket and binary the root worker must reach.
    pub(crate) fn access(&self) -> crate::provider::NestedAccess {
        crate::provider::NestedAccess {
            endpoint: self.shared.endpoint.clone(),
            handoff_exe: self.shared.handoff_exe.clone(),
        }
    }

    /// The prompt text that tells the root worker how to ask for advice.
    pub(crate) fn root_prompt_text(&self, root: &Request) -> String {
        nested_prompt(&self.shared, &root.cwd)
    }

    /// Stops accepting, cancels every adviser still running, waits for all of them, and
    /// returns the DAG.
    pub(crate) async fn shutdown(mut self) -> Finished {
        let _ = self.stop_tx.send(true);
        if let Some(accept) = self.accept.take() {
            accept.abort();
            let _ = accept.await;
        }
        loop {
            let handlers: Vec<JoinHandle<()>> = std::mem::take(&mut *lock(&self.shared.handlers));
            if handlers.is_empty() {
                break;
            }
            for h in handlers {
                let _ = h.await;
            }
        }
        self.forward.abort();
        let mut tokens = lock(&self.shared.tokens);
        tokens.revoke_all();
        Finished {
            dag: lock(&self.shared.dag).clone(),
            audit: tokens.audit().to_vec(),
            audit_dropped: tokens.audit_dropped(),
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let _ = self.stop_tx.send(true);
        if let Some(a) = self.accept.take() {
            a.abort();
        }
        self.forward.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn accept_loop(shared: Arc<Shared>, listener: UnixListener) {
    let mut stop = shared.stop.clone();
    loop {
        tokio::select! {
            conn = listener.accept() => {
                let Ok((stream, _)) = conn else { continue };
                let handler = tokio::spawn(serve_connection(Arc::clone(&shared), stream));
                let mut handlers = lock(&shared.handlers);
                handlers.retain(|h| !h.is_finished());
                handlers.push(handler);
            }
            _ = stop.changed() => {
                if *stop.borrow() {
                    return;
                }
            }
        }
    }
}

async fn serve_connection(shared: Arc<Shared>, stream: UnixStream) {
    // Only processes of this user may talk to the supervisor.
    let uid = nix::unistd::geteuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == uid => {}
        _ => return,
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    let mut limited = (&mut reader).take(MAX_REQUEST_BYTES as u64 + 1);
    let read_line = limited.read_until(b'\n', &mut line);
    let mut stop = shared.stop.clone();
    // A client that never sends its request must not hold up the supervisor's shutdown.
    let read = tokio::select! {
        r = tokio::time::timeout(REQUEST_READ_TIMEOUT, read_line) => r,
        _ = stop.wait_for(|s| *s) => return,
    };
    drop(limited);
    let reply = match read {
        Ok(Ok(_)) if line.len() > MAX_REQUEST_BYTES => {
            refusal(
                &shared,
                None,
                None,
                format!("the request exceeds {MAX_REQUEST_BYTES} bytes"),
            )
            .await
        }
        Ok(Ok(_)) => {
            // The client closing its end while the adviser runs means its worker is gone.
            let (gone_tx, gone_rx) = watch::channel(false);
            let watcher = tokio::spawn(async move {
                let mut sink = [0u8; 64];
                loop {
                    match reader.read(&mut sink).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                let _ = gone_tx.send(true);
            });
            let reply = serve(&shared, &line, gone_rx).await;
            watcher.abort();
            reply
        }
        Ok(Err(e)) => refusal(&shared, None, None, format!("cannot read the request: {e}")).await,
        Err(_) => refusal(&shared, None, None, "no request arrived in time".into()).await,
    };
    let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
    bytes.push(b'\n');
    let _ = write.write_all(&bytes).await;
    let _ = write.shutdown().await;
}

/// A refusal: nothing ran, no node was added. `caller`, when known, is echoed in the result.
async fn refusal(
    shared: &Shared,
    input: Option<RunInput>,
    caller: Option<&AgentId>,
    message: String,
) -> NestedReply {
    let mut input = input.unwrap_or_else(|| RunInput::new(Verb::Advice));
    input.caller_harness = caller.map(ToString::to_string);
    let outcome = shared.engine.reject(input, message).await;
    reply(false, None, &outcome)
}

fn reply(accepted: bool, run_id: Option<String>, outcome: &RunOutcome) -> NestedReply {
    NestedReply {
        schema_version: NESTED_REPLY_SCHEMA.into(),
        accepted,
        run_id,
        exit_code: outcome.exit_code,
        result: outcome.line.trim_end_matches('\n').to_owned(),
        result_hash: result_hash(&outcome.line),
    }
}

fn input_of(req: &NestedRequest) -> RunInput {
    let mut input = RunInput::new(Verb::Advice);
    input.harness = req.target_harness.clone();
    input.cwd = req.cwd.clone();
    input.instructions = req
        .instructions
        .as_ref()
        .map(|t| Instructions::Stdin(t.as_bytes().to_vec()));
    input.model = req.model.clone();
    input.effort = req.effort.clone();
    input.max_turns = req.max_turns.clone();
    input.bash = req.bash.clone();
    input.web_search = req.web_search.clone();
    input.timeout_ms = req.timeout_ms.clone();
    input.mcp_inline = req.mcp.as_ref().map(|m| m.as_bytes().to_vec());
    input.dependencies = req.dependencies.clone();
    input
}

async fn serve(shared: &Shared, line: &[u8], gone: watch::Receiver<bool>) -> NestedReply {
    let req: NestedRequest = match serde_json::from_slice(line) {
        Ok(r) => r,
        Err(e) => {
            return refusal(
                shared,
                None,
                None,
                format!("the nested request is not valid: {e}"),
            )
            .await;
        }
    };
    if req.schema_version != NESTED_REQUEST_SCHEMA {
        return refusal(
            shared,
            None,
            None,
            format!(
                "the nested request has schemaVersion {:?}; expected {NESTED_REQUEST_SCHEMA}",
                quote(&req.schema_version)
            ),
        )
        .await;
    }
    // 1. The token and nonce (nothing is spent yet).
    let checked = lock(&shared.tokens)
        .check(&req.token, &req.nonce)
        .map(|ticket| ticket.capability().clone());
    let capability = match checked {
        Ok(c) => c,
        Err(e) => return refusal(shared, None, None, e.to_string()).await,
    };
    let input = input_of(&req);
    let caller = Some(&capability.caller_harness);
    if req.operation != Operation::Advice {
        return refusal(
            shared,
            Some(input),
            caller,
            "nested handoff permits advice only".into(),
        )
        .await;
    }
    let Some(parent) = lock(&shared.nodes).get(&capability.parent_run_id).cloned() else {
        return refusal(
            shared,
            Some(input),
            caller,
            "the asking run is unknown".into(),
        )
        .await;
    };

    // 2. The request itself, validated like a root's, attenuated from the parent.
    let validated = {
        let nested = NestedParent {
            caller: &parent.target,
            depth: parent.depth,
            limits: shared.limits,
            grants: &parent.grants,
            mcp: parent.mcp.as_ref(),
        };
        match input.validate_nested(shared.engine.registry(), shared.engine.config(), nested) {
            Ok(v) => v,
            Err(m) => return refusal(shared, Some(input), caller, m).await,
        }
    };
    let mut request = validated.request;

    // The adviser is never less isolated than the worker that asks (nothing is spent yet).
    let isolation = match admit_isolation(shared, &parent, &request) {
        Ok(i) => i,
        Err(e) => return refusal(shared, Some(input), caller, e.to_string()).await,
    };
    let asked_cwd = Utf8PathBuf::from(&request.cwd);
    let Ok(rel) = asked_cwd
        .strip_prefix(&parent.worktree)
        .map(Utf8Path::to_owned)
    else {
        let m = format!(
            "nested --cwd {asked_cwd} is outside the worktree of the run that asks ({})",
            parent.worktree
        );
        return refusal(shared, Some(input), caller, m).await;
    };

    // The adviser's view of the asking node's worktree follows from its isolation.
    let view = AdviserWorktree::new(
        super::view::choose(&isolation),
        &parent.worktree,
        &shared.snapshots,
    );
    let exec_cwd = view.join(&rel);

    // 3. Admission: token, DAG and budgets decided together, so that a refusal spends nothing.
    // The intent names the place in the root's worktree, wherever the asker runs.
    request.cwd = if rel.as_str().is_empty() {
        parent.origin.to_string()
    } else {
        parent.origin.join(&rel).to_string()
    };
    request.intent_hash = intent_hash(&request);
    let admitted = {
        let mut tokens = lock(&shared.tokens);
        match tokens.check(&req.token, &req.nonce) {
            Err(e) => Err(e.to_string()),
            Ok(ticket) => {
                let mut dag = lock(&shared.dag);
                let node = NodeRequest {
                    parent_run_id: capability.parent_run_id.clone(),
                    operation: Operation::Advice,
                    caller_harness: parent.target.clone(),
                    target_harness: request.target.harness.clone(),
                    mode: None,
                    delegation: request.delegation.mode,
                    intent_hash: request.intent_hash.clone(),
                    dependencies: request.lineage.dependencies.clone(),
                    isolation: Some(isolation),
                    view: Some(view.view()),
                };
                let outcome = dag.register(node, |admission| {
                    request.lineage = admission.lineage().clone();
                    request.budgets.remaining = admission.remaining();
                    request.cwd = exec_cwd.to_string();
                    request_hash(&request)
                });
                if outcome.is_ok() {
                    // Checked under the same locks: this commit cannot fail.
                    let _ = tokens.commit(ticket);
                }
                outcome.map_err(|e| e.to_string())
            }
        }
    };
    let registered = match admitted {
        Ok(r) => r,
        Err(m) => return refusal(shared, Some(input), caller, m).await,
    };
    let run_id = registered.node.run_id.clone();

    // 4. The adviser's own capability, when it may ask further.
    // A token the system cannot draw leaves the adviser unstarted (below), not the handler dead.
    let child_context = if request.delegation.mode == DelegationMode::AdviceOnly {
        let capability = Capability {
            parent_run_id: run_id.clone(),
            caller_harness: request.target.harness.clone(),
            parent_grants: request.grants.resolved.clone(),
            parent_mcp_servers: request.grants.mcp.servers.clone(),
        };
        let minted = lock(&shared.tokens).mint(capability, shared.limits.max_nodes);
        minted.map(|token| {
            Some(SupervisorContext {
                schema_version: CONTEXT_SCHEMA.into(),
                endpoint: shared.endpoint.to_string(),
                token: token.expose().to_owned(),
                caller_harness: request.target.harness.clone(),
                root_run_id: request.lineage.root_run_id.clone(),
                run_id: run_id.clone(),
                allowed_operations: vec![Operation::Advice],
                deadline_unix_ms: shared.deadline_unix_ms,
            })
        })
    } else {
        Ok(None)
    };
    lock(&shared.nodes).insert(
        run_id.clone(),
        NodeInfo {
            worktree: view.root().to_owned(),
            origin: parent.origin.clone(),
            target: request.target.harness.clone(),
            depth: request.lineage.depth,
            grants: request.grants.resolved.clone(),
            mcp: validated.mcp.clone(),
            isolation,
        },
    );

    // 5. The adviser's view (a snapshot, when it needs one), then the adviser, bounded by its
    //    time budget and cancelled with the root, the supervisor or the client.
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let relay = {
        let mut stop = shared.stop.clone();
        let mut gone = gone.clone();
        tokio::spawn(async move {
            loop {
                if *stop.borrow() || *gone.borrow() {
                    let _ = cancel_tx.send(true);
                    return;
                }
                tokio::select! {
                    r = stop.changed() => if r.is_err() { return },
                    r = gone.changed() => if r.is_err() { return },
                }
            }
        })
    };
    let per_node = Duration::from_millis(request.budgets.limits.timeout_ms);
    let timeout = if registered.timeout < per_node {
        registered.timeout.saturating_sub(REPLY_MARGIN)
    } else {
        per_node
    };
    let outcome = match child_context {
        Err(e) => {
            shared
                .engine
                .nested_not_run(
                    request,
                    format!("cannot make the adviser's capability token: {e}"),
                )
                .await
        }
        Ok(child_context) => {
            let made = view.prepare(shared.engine.workspace(), &asked_cwd).await;
            match made {
                Ok(made) => {
                    let launch = Launch {
                        nested_text: child_context
                            .as_ref()
                            .map(|_| nested_prompt(shared, &request.cwd)),
                        context: child_context.clone(),
                        access: child_context
                            .as_ref()
                            .map(|_| crate::provider::NestedAccess {
                                endpoint: shared.endpoint.clone(),
                                handoff_exe: shared.handoff_exe.clone(),
                            }),
                        timeout,
                        view: Some(made),
                    };
                    shared
                        .engine
                        .run_nested(request, validated.mcp, launch, cancel_rx)
                        .await
                }
                Err(m) => shared.engine.nested_not_run(request, m).await,
            }
        }
    };
    relay.abort();

    // 6. Record the node's end and clean up.
    let hash = result_hash(&outcome.line);
    {
        let mut dag = lock(&shared.dag);
        let _ = dag.terminalize(&run_id, outcome.result.status, Some(hash));
    }
    lock(&shared.tokens).revoke(&run_id);
    view.remove().await;
    reply(true, Some(run_id), &outcome)
}

/// The isolation the adviser of `request` runs under, or why it may not run: its adapter's
/// ranking of the request, confined against the asking node's ([`crate::isolation::confine`]).
fn admit_isolation(
    shared: &Shared,
    parent: &NodeInfo,
    request: &Request,
) -> Result<Isolation, DagError> {
    let configured = crate::isolation::of_request(shared.engine.registry(), request)
        .unwrap_or_else(Isolation::unconfined);
    match crate::isolation::confine(&parent.isolation, configured) {
        Confinement::AsConfigured(isolation) => Ok(isolation),
        Confinement::Refused(weaker) => Err(DagError::WeakerIsolation {
            caller: parent.target.clone(),
            target: request.target.harness.clone(),
            weaker,
        }),
    }
}

/// `s` as one word for `sh`: bare when every byte is safe, else quoted.
///
/// The words quoted here are the handoff executable and a `--cwd` checked on disk: paths, which
/// cannot hold the NUL byte no shell word can carry. Should one ever hold it, the word is `''`,
/// which both `sh` (as a command) and handoff (as `--cwd`) refuse, so the nested command fails
/// instead of running with a different argument.
fn sh_word(s: &str) -> std::borrow::Cow<'_, str> {
    shlex::try_quote(s).unwrap_or(std::borrow::Cow::Borrowed("''"))
}

fn nested_prompt(shared: &Shared, cwd: &str) -> String {
    let ids: Vec<String> = shared
        .engine
        .registry()
        .ids()
        .iter()
        .map(ToString::to_string)
        .collect();
    let deadline = time::OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(shared.deadline_unix_ms) * 1_000_000,
    )
    .map(crate::timestamp::iso)
    .unwrap_or_default();
    nested_text(&shared.handoff_exe, cwd, &ids, &shared.limits, &deadline)
}

/// The prompt text of a worker that may ask for advice: the exact command, what it prints,
/// the flags it takes and the limits.
pub(crate) fn nested_text(
    handoff_exe: &Utf8Path,
    cwd: &str,
    agents: &[String],
    limits: &BudgetLimits,
    deadline: &str,
) -> String {
    format!(
        "Nested advice is available: you may ask another agent for a read-only opinion while you \
         work. Run this shell command with your question on standard input, replacing AGENT with \
         one of {agents}:\n    {exe} advice --harness AGENT --cwd {cwd} --instructions -\n\
         It prints one result JSON line (handoff.result.v1): the answer is in output.response, and \
         exit code 0 with status \"succeeded\" means the adviser answered. Optional flags: --model \
         NAME, --effort LEVEL, --bash false, --web-search true (only if you have web search), \
         --timeout-ms N, --dependency advises:<runId> (a lineage.runId from an earlier result). \
         Do not pass --caller-harness or budget flags. The adviser reads this worktree as it is \
         while you wait (read-only: in place, or a snapshot when its sandbox could write) and \
         cannot change your files; change nothing until it answers: a change made meanwhile, \
         even by a process you left running, fails the advice. Limits for the \
         whole run: {advice} advice nodes, depth {depth}, {conc} nodes running at once (you \
         included); every nested call ends by {deadline}.",
        agents = agents.join(", "),
        exe = sh_word(handoff_exe.as_str()),
        cwd = sh_word(cwd),
        advice = limits.max_advice_nodes,
        depth = limits.max_depth,
        conc = limits.max_concurrency,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line of the nested-advice prompt, run by `sh` with `AGENT` filled in, reaches
    /// the program with every path as one argument, whatever it holds.
    #[test]
    fn the_nested_command_survives_sh() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("it's a \"handoff\" $HOME");
        std::fs::write(
            &exe,
            "#!/bin/sh\nfor a in \"$@\"; do printf '<%s>' \"$a\"; done\n",
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = Utf8PathBuf::from_path_buf(exe).unwrap();
        let cwd = "/w/a b/~it's\\ *";
        let text = nested_text(
            &exe,
            cwd,
            &["codex".into()],
            &BudgetLimits::default(),
            "now",
        );
        let line = text
            .lines()
            .find(|l| l.contains(" advice --harness AGENT "))
            .unwrap()
            .trim()
            .replace("AGENT", "codex");
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &line])
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}: {out:?}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("<advice><--harness><codex><--cwd><{cwd}><--instructions><->")
        );
    }

    #[test]
    fn private_dirs_are_owner_only_and_removed_when_dropped() {
        let parent = tempfile::tempdir().unwrap();
        let parent = Utf8Path::from_path(parent.path()).unwrap();
        let dir = private_dir(parent, "handoff-sv-").unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn plain_paths_stay_bare_and_nul_is_refused() {
        assert_eq!(sh_word("/usr/local/bin/handoff"), "/usr/local/bin/handoff");
        assert_eq!(sh_word("/w/a b"), "'/w/a b'");
        assert_eq!(sh_word("/w/a\0b"), "''");
    }
}
