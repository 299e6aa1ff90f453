//! The supervisor of one root run: watches the mailbox of every node that may ask (see
//! [`super::mailbox`]), admits nested advice requests into the budgeted DAG and runs each
//! adviser through the same engine, on the asking worker's worktree read-only or on a snapshot
//! of it (see [`super::view`]).
//!
//! One request per file: the client posts one [`NestedRequest`] as `in/<nonce>.json` and reads
//! one [`NestedReply`] from `out/<nonce>.json`. A request is bound to its mailbox: its token
//! must be the one minted for that mailbox's node. The adviser is cancelled when the client
//! withdraws the request (`in/<nonce>.cancel`: its worker was interrupted or gave up) and when
//! the asking node ends. Nothing outlives the supervisor: [`Supervisor::shutdown`] cancels every
//! adviser still running, waits for it, and the mailboxes go with the supervisor's directory.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::confinement::admit_isolation;
use super::dag::{DagStore, NodeRequest};
use super::mailbox::{Mailbox, Taken, Watcher, Wd};
use super::prompt::nested_text;
use super::token::{Capability, TokenAudit, TokenBook};
use super::view::AdviserWorktree;
use super::wire::*;
use crate::engine::{Engine, Launch, RunOutcome};
use crate::input::{Instructions, NestedParent, RunInput, Verb, intent_hash, request_hash};
use crate::isolation::Isolation;
use crate::mcp::McpDescriptor;
use crate::names::{AgentId, Operation};
use crate::redact::quote;
use crate::request::{BudgetLimits, DelegationMode, GrantsResolved, Request};

/// Time kept back from a nested node's budget when the root deadline bounds it, so that its
/// `timed_out` reply reaches the asking worker before the deadline stops that worker too.
const REPLY_MARGIN: Duration = Duration::from_millis(500);

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

/// The mailbox of a node that may ask, with the requests it has in flight.
struct Inbox {
    /// The node whose worker posts here: the only node its requests may come from.
    node: String,
    mailbox: Mailbox,
    wd: Wd,
    /// Each request being served, by nonce: send `true` to cancel its adviser.
    pending: Mutex<HashMap<String, watch::Sender<bool>>>,
}

struct Shared {
    engine: Engine,
    dag: Mutex<DagStore>,
    tokens: Mutex<TokenBook>,
    nodes: Mutex<HashMap<String, NodeInfo>>,
    handlers: Mutex<Vec<JoinHandle<()>>>,
    /// Where the mailboxes are made (the supervisor's private directory).
    mailboxes: Utf8PathBuf,
    watcher: Watcher,
    inboxes: Mutex<HashMap<Wd, Arc<Inbox>>>,
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
    _mailbox_dir: crate::private_dir::PrivateDir,
    _snapshot_dir: crate::private_dir::PrivateDir,
    root_context: SupervisorContext,
    root_mailbox: Utf8PathBuf,
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
    /// The private directory the mailboxes go in (held for the supervisor's life).
    pub mailbox_dir: crate::private_dir::PrivateDir,
    /// The private directory advisers' snapshots go in (held for the supervisor's life).
    pub snapshot_dir: crate::private_dir::PrivateDir,
    pub cancel: watch::Receiver<bool>,
}

fn unix_ms(at: time::OffsetDateTime) -> u64 {
    u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

impl Supervisor {
    /// Creates the root's mailbox and the DAG, mints the root's token and starts serving.
    pub(crate) fn start(setup: SupervisorSetup<'_>) -> Result<Supervisor, String> {
        let SupervisorSetup {
            engine,
            root,
            root_mcp,
            worktree,
            started_at,
            started,
            handoff_exe,
            mailbox_dir,
            snapshot_dir,
            mut cancel,
        } = setup;
        let watcher =
            Watcher::new().map_err(|e| format!("cannot watch the supervisor's mailboxes: {e}"))?;

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
        let root_inbox = open_inbox(&watcher, mailbox_dir.path(), &root.lineage.run_id)?;
        let root_mailbox = root_inbox.mailbox.path().to_owned();
        let root_context = SupervisorContext {
            schema_version: CONTEXT_SCHEMA.into(),
            mailbox: root_mailbox.to_string(),
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
            mailboxes: mailbox_dir.path().to_owned(),
            inboxes: Mutex::new(HashMap::from([(root_inbox.wd, Arc::new(root_inbox))])),
            watcher,
            handoff_exe,
            snapshots: snapshot_dir.path().to_owned(),
            deadline_unix_ms,
            limits,
            stop: stop_rx,
        });
        let accept = tokio::spawn(watch_loop(Arc::clone(&shared)));
        Ok(Supervisor {
            shared,
            accept: Some(accept),
            stop_tx,
            forward,
            _mailbox_dir: mailbox_dir,
            _snapshot_dir: snapshot_dir,
            root_context,
            root_mailbox,
        })
    }

    /// The root worker's context (its token is a secret: redact it).
    pub(crate) fn root_context(&self) -> &SupervisorContext {
        &self.root_context
    }

    /// The mailbox and binary the root worker must reach.
    pub(crate) fn access(&self) -> crate::provider::NestedAccess {
        crate::provider::NestedAccess {
            mailbox: self.root_mailbox.clone(),
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
        let inboxes: Vec<Arc<Inbox>> = lock(&self.shared.inboxes).drain().map(|(_, i)| i).collect();
        for inbox in inboxes {
            self.shared.watcher.unwatch(inbox.wd);
            inbox.mailbox.remove();
        }
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

/// Makes a mailbox for `node` in `dir` and starts watching its `in/`.
fn open_inbox(watcher: &Watcher, dir: &Utf8Path, node: &str) -> Result<Inbox, String> {
    let mailbox =
        Mailbox::create(dir).map_err(|e| format!("cannot create a mailbox in {dir}: {e}"))?;
    let wd = match watcher.watch(&mailbox.inbox_path()) {
        Ok(wd) => wd,
        Err(e) => {
            mailbox.remove();
            return Err(format!("cannot watch the mailbox {}: {e}", mailbox.path()));
        }
    };
    Ok(Inbox {
        node: node.to_owned(),
        mailbox,
        wd,
        pending: Mutex::new(HashMap::new()),
    })
}

/// Opens the mailbox of `node`, an adviser that may ask further, while it runs.
fn add_inbox(shared: &Shared, node: &str) -> Result<Utf8PathBuf, String> {
    let inbox = open_inbox(&shared.watcher, &shared.mailboxes, node)?;
    let path = inbox.mailbox.path().to_owned();
    lock(&shared.inboxes).insert(inbox.wd, Arc::new(inbox));
    Ok(path)
}

/// Closes the mailbox of `node` once it has ended: what it asked and is still running is
/// cancelled (nobody is left to read the answer), and the mailbox is removed.
fn close_inbox(shared: &Shared, node: &str) {
    let inbox = {
        let mut inboxes = lock(&shared.inboxes);
        let wd = inboxes
            .iter()
            .find(|(_, i)| i.node == node)
            .map(|(wd, _)| *wd);
        wd.and_then(|wd| inboxes.remove(&wd))
    };
    if let Some(inbox) = inbox {
        shared.watcher.unwatch(inbox.wd);
        for cancel in lock(&inbox.pending).values() {
            let _ = cancel.send(true);
        }
        inbox.mailbox.remove();
    }
}

/// Takes what arrives in the mailboxes until the supervisor stops. Taking an entry never
/// blocks (see [`Mailbox::take`]); each request is then served by a task of its own.
async fn watch_loop(shared: Arc<Shared>) {
    let mut stop = shared.stop.clone();
    loop {
        let events = tokio::select! {
            e = shared.watcher.next() => e,
            _ = stop.wait_for(|s| *s) => return,
        };
        let Ok(events) = events else { return };
        for event in events {
            if event.overflow {
                // Events were lost: look at every entry of every mailbox again.
                let inboxes: Vec<Arc<Inbox>> = lock(&shared.inboxes).values().cloned().collect();
                for inbox in inboxes {
                    for name in inbox.mailbox.names() {
                        take(&shared, &inbox, &name, false);
                    }
                }
                continue;
            }
            let Some(name) = event.name else { continue };
            let Some(inbox) = lock(&shared.inboxes).get(&event.wd).cloned() else {
                continue;
            };
            take(&shared, &inbox, &name, event.created);
        }
    }
}

fn spawn_handler(
    shared: &Arc<Shared>,
    task: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let handler = tokio::spawn(task);
    let mut handlers = lock(&shared.handlers);
    handlers.retain(|h| !h.is_finished());
    handlers.push(handler);
}

/// Takes the entry `name` of `inbox` and acts on it.
fn take(shared: &Arc<Shared>, inbox: &Arc<Inbox>, name: &OsStr, created: bool) {
    match inbox.mailbox.take(name, created) {
        Taken::Nothing => {}
        Taken::Cancel { nonce } => {
            if let Some(cancel) = lock(&inbox.pending).get(&nonce) {
                let _ = cancel.send(true);
            }
        }
        Taken::Refused { nonce, why } => {
            lock(&shared.tokens).record_malformed(&inbox.node, nonce.as_deref());
            if let Some(nonce) = nonce {
                let (shared2, inbox) = (Arc::clone(shared), Arc::clone(inbox));
                spawn_handler(shared, async move {
                    let reply = refusal(&shared2, None, None, why).await;
                    answer(&inbox, &nonce, &reply);
                });
            }
        }
        Taken::Request { nonce, body } => {
            let (cancel_tx, cancel_rx) = watch::channel(false);
            let fresh = {
                let mut pending = lock(&inbox.pending);
                let fresh = !pending.contains_key(&nonce);
                if fresh {
                    pending.insert(nonce.clone(), cancel_tx);
                }
                fresh
            };
            let (shared2, inbox) = (Arc::clone(shared), Arc::clone(inbox));
            spawn_handler(shared, async move {
                let reply = if fresh {
                    let reply = serve_entry(&shared2, &inbox, &nonce, &body, cancel_rx).await;
                    lock(&inbox.pending).remove(&nonce);
                    reply
                } else {
                    // Its answer would land where the first one's goes.
                    lock(&shared2.tokens).record_malformed(&inbox.node, Some(&nonce));
                    let m = "a request with this nonce is already being served".to_owned();
                    refusal(&shared2, None, None, m).await
                };
                answer(&inbox, &nonce, &reply);
            });
        }
    }
}

/// Writes `reply` as the answer to `nonce` (dropped when the mailbox is already gone).
fn answer(inbox: &Inbox, nonce: &str, reply: &NestedReply) {
    let mut bytes = serde_json::to_vec(reply).unwrap_or_default();
    bytes.push(b'\n');
    let _ = inbox.mailbox.answer(nonce, &bytes);
}

/// Serves one request read from `inbox`: it must parse, carry the nonce it is named after, and
/// come from the mailbox's node.
async fn serve_entry(
    shared: &Shared,
    inbox: &Inbox,
    nonce: &str,
    body: &[u8],
    gone: watch::Receiver<bool>,
) -> NestedReply {
    let req: NestedRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            lock(&shared.tokens).record_malformed(&inbox.node, Some(nonce));
            return refusal(
                shared,
                None,
                None,
                format!("the nested request is not valid: {e}"),
            )
            .await;
        }
    };
    if req.nonce != nonce {
        lock(&shared.tokens).record_malformed(&inbox.node, Some(nonce));
        return refusal(
            shared,
            None,
            None,
            "the request's nonce is not the name it was posted under".into(),
        )
        .await;
    }
    serve(shared, &inbox.node, req, gone).await
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

async fn serve(
    shared: &Shared,
    node: &str,
    req: NestedRequest,
    gone: watch::Receiver<bool>,
) -> NestedReply {
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
    // 1. The token and nonce, and that the token is the mailbox's node's (nothing is spent
    //    yet).
    let checked = lock(&shared.tokens)
        .check_from(&req.token, &req.nonce, node)
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
    let mut mcp = validated.mcp;

    // The adviser is never less isolated than the worker that asks: it runs with fewer grants
    // when that is enough, and is refused when it is not (nothing is spent yet).
    let (isolation, attenuated) = match admit_isolation(
        shared.engine.registry(),
        &parent.target,
        &parent.isolation,
        &mut request,
        &mut mcp,
    ) {
        Ok(i) => i,
        Err(e) => return refusal(shared, Some(input), caller, e.to_string()).await,
    };
    let confined = attenuated.as_ref().is_some_and(|a| a.handoff_sandbox);
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
                    attenuated,
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

    // 4. The adviser's own capability and mailbox, when it may ask further.
    // A token the system cannot draw, or a mailbox it cannot make, leaves the adviser unstarted
    // (below), not the handler dead.
    let child_context = if request.delegation.mode == DelegationMode::AdviceOnly {
        let capability = Capability {
            parent_run_id: run_id.clone(),
            caller_harness: request.target.harness.clone(),
            parent_grants: request.grants.resolved.clone(),
            parent_mcp_servers: request.grants.mcp.servers.clone(),
        };
        let minted = lock(&shared.tokens)
            .mint(capability, shared.limits.max_nodes)
            .map_err(|e| format!("cannot make the adviser's capability token: {e}"));
        let mailbox = minted.and_then(|token| Ok((token, add_inbox(shared, &run_id)?)));
        mailbox.map(|(token, mailbox)| {
            Some(SupervisorContext {
                schema_version: CONTEXT_SCHEMA.into(),
                mailbox: mailbox.to_string(),
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
            mcp: mcp.clone(),
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
        Err(m) => shared.engine.nested_not_run(request, m).await,
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
                            .map(|c| crate::provider::NestedAccess {
                                mailbox: Utf8PathBuf::from(&c.mailbox),
                                handoff_exe: shared.handoff_exe.clone(),
                            }),
                        timeout,
                        view: Some(made),
                        confined,
                    };
                    shared
                        .engine
                        .run_nested(request, mcp, launch, cancel_rx)
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
    close_inbox(shared, &run_id);
    view.remove().await;
    reply(true, Some(run_id), &outcome)
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
