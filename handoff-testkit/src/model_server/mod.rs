//! A scripted model server for driving the *real* agent CLIs offline.
//!
//! [`ModelServer`] listens on `127.0.0.1` and speaks the four wire protocols the CLIs use:
//!
//! | endpoint | protocol | client |
//! |---|---|---|
//! | `POST …/v1/messages` (`?beta=true`) | Anthropic Messages, SSE or JSON | Claude Code |
//! | `POST …/v1/messages/count_tokens` | `{"input_tokens": N}` | Claude Code |
//! | `POST …/v1/responses` | OpenAI Responses, SSE or JSON | Codex |
//! | `POST …/v1/chat/completions` | Chat Completions, SSE or JSON | OpenCode, Grok |
//! | `POST …/models/<model>:streamGenerateContent?alt=sse`, `…:generateContent` | the Gemini API, SSE or JSON | Gemini CLI |
//! | `POST …/models/<model>:countTokens` | `{"totalTokens": N}` | Gemini CLI |
//! | `GET …/v1/models` | a small model list (OpenAI and Anthropic fields) | |
//! | `HEAD <any>` | 200 (Claude's connectivity probe) | |
//!
//! Any path prefix is accepted before these suffixes (`/anthropic/v1/messages`). Anything else is
//! 404; a `GET` of a model endpoint is 405, or 426 when it is a WebSocket upgrade (Codex then
//! falls back to HTTP). What the model answers is decided by the [`Script`] from each request
//! alone (see there). Every request is logged ([`ModelServer::requests`]) before it is answered,
//! and optionally appended as JSONL to a file ([`ModelServer::with_log_file`]).
//!
//! Usage numbers are estimated (about four bytes a token, at least one); Anthropic usage carries
//! zero cache fields.

mod anthropic;
mod chat;
mod errors;
mod gemini;
mod log;
mod responses;
mod script;
mod wire;

use std::fs::File;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::watch;

pub use errors::{ApiError, RETRY_AFTER_SECONDS};
pub use log::{Endpoint, LoggedRequest, Reply};
pub use script::{
    DEFAULT_SIDE_TEXT, NESTED_PLACEHOLDER, NESTED_YIELD_MS, NO_NESTED_COMMAND, NO_SUITABLE_TOOL,
    Route, SHELL_TOOLS, STRUCTURED_OUTPUT_TOOL, Script, Step, ToolChoice, WRITE_FILE_TOOLS,
    provider_output,
};

use script::{Conversation, Plan};
use wire::{Ctx, Turn};

/// The model ids `GET …/v1/models` lists.
pub const MODELS: [&str; 4] = [
    "fake-model",
    "claude-sonnet-4-5",
    "gpt-5.5",
    "grok-code-fast-1",
];

/// Largest request body accepted.
const BODY_LIMIT: usize = 256 * 1024 * 1024;

/// How long dropping a [`ModelServer::start_blocking`] server waits for its thread.
const DROP_WAIT: Duration = Duration::from_secs(5);

/// A scripted model server on `127.0.0.1`. Shuts down when dropped (hanging requests are then
/// answered 503 and their connections closed).
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// For [`ModelServer::start_blocking`]: signalled when its runtime thread ends.
    thread_done: Option<std::sync::mpsc::Receiver<()>>,
}

impl std::fmt::Debug for ModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

struct Shared {
    script: Mutex<Script>,
    log: Mutex<Vec<LoggedRequest>>,
    log_file: Mutex<Option<File>>,
    seq: AtomicUsize,
    shutdown: watch::Sender<bool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn record(&self, entry: LoggedRequest) {
        if let Some(file) = lock(&self.log_file).as_mut() {
            write_jsonl(file, &entry);
        }
        lock(&self.log).push(entry);
    }
}

fn write_jsonl(file: &mut File, entry: &LoggedRequest) {
    if let Ok(mut line) = serde_json::to_string(entry) {
        line.push('\n');
        // Best effort: the log file is a debugging aid.
        let _ = file.write_all(line.as_bytes());
        let _ = file.flush();
    }
}

impl ModelServer {
    /// Binds `127.0.0.1:0` and serves `script` on the current Tokio runtime.
    ///
    /// # Panics
    ///
    /// When the port cannot be bound, or outside a Tokio runtime.
    pub async fn start(script: Script) -> ModelServer {
        let (shared, addr, serve) = bind(script)
            .await
            .unwrap_or_else(|e| panic!("model server: cannot bind 127.0.0.1:0: {e}"));
        tokio::spawn(serve);
        ModelServer {
            addr,
            shared,
            thread_done: None,
        }
    }

    /// As [`ModelServer::start`], on a runtime of its own in a new thread: for synchronous tests
    /// and tools.
    ///
    /// # Panics
    ///
    /// When the thread or runtime cannot be created or the port cannot be bound.
    pub fn start_blocking(script: Script) -> ModelServer {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("model-server".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match bind(script).await {
                        Ok((shared, addr, serve)) => {
                            let _ = ready_tx.send(Ok((shared, addr)));
                            serve.await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
                drop(runtime);
                let _ = done_tx.send(());
            });
        if let Err(e) = spawned {
            panic!("model server: cannot spawn its thread: {e}");
        }
        match ready_rx.recv() {
            Ok(Ok((shared, addr))) => ModelServer {
                addr,
                shared,
                thread_done: Some(done_rx),
            },
            Ok(Err(e)) => panic!("model server: cannot start: {e}"),
            Err(_) => panic!("model server: its thread died while starting"),
        }
    }

    /// Also appends every request (those already logged first) as one JSON line to `path`
    /// (created or appended to).
    ///
    /// # Panics
    ///
    /// When the file cannot be opened.
    pub fn with_log_file(self, path: impl AsRef<Path>) -> ModelServer {
        let path = path.as_ref();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap_or_else(|e| panic!("model server: cannot open {}: {e}", path.display()));
        // Hold the log lock so no request is written twice or skipped.
        let log = lock(&self.shared.log);
        for entry in log.iter() {
            write_jsonl(&mut file, entry);
        }
        *lock(&self.shared.log_file) = Some(file);
        drop(log);
        self
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (Claude's `ANTHROPIC_BASE_URL`, Gemini CLI's
    /// `GOOGLE_GEMINI_BASE_URL`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1` (Codex `base_url`, OpenCode `baseURL`, Grok `GROK_BASE_URL`).
    pub fn v1_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// Replaces the script; later requests follow the new one.
    pub fn set_script(&self, script: Script) {
        *lock(&self.shared.script) = script;
    }

    /// The current script.
    pub fn script(&self) -> Script {
        lock(&self.shared.script).clone()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.log).clone()
    }

    /// The requests that asked the model for a turn (POSTs to a model endpoint).
    pub fn model_calls(&self) -> Vec<LoggedRequest> {
        self.requests()
            .into_iter()
            .filter(LoggedRequest::is_model_call)
            .collect()
    }

    /// Empties the log (the file, if any, is kept).
    pub fn clear_log(&self) {
        lock(&self.shared.log).clear();
    }

    /// The offered tool names of each model call.
    pub fn offered_tools(&self) -> Vec<Vec<String>> {
        self.model_calls()
            .iter()
            .map(LoggedRequest::offered_tools)
            .collect()
    }

    /// The distinct `model` names requested, in first-seen order.
    pub fn models_requested(&self) -> Vec<String> {
        let mut models: Vec<String> = Vec::new();
        for request in self.model_calls() {
            if let Some(model) = request.model()
                && !models.iter().any(|m| m == model)
            {
                models.push(model.to_owned());
            }
        }
        models
    }

    /// The names of the tools the model called, in order.
    pub fn tool_calls(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter_map(|r| r.tool_called().map(str::to_owned))
            .collect()
    }

    /// The output the client sent back for the tool call `call_id` (see
    /// [`LoggedRequest::tool_output`]), from the first request that carries it.
    pub fn tool_output(&self, call_id: &str) -> Option<String> {
        self.requests().iter().find_map(|r| r.tool_output(call_id))
    }

    /// The model calls answered [`NO_SUITABLE_TOOL`] because no tool the step could use was
    /// offered.
    pub fn refused_tool_calls(&self) -> Vec<LoggedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| matches!(r.reply, Reply::NoSuitableTool { .. }))
            .collect()
    }

    /// Waits until at least `n` requests are logged; false on timeout.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if lock(&self.shared.log).len() >= n {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// As [`ModelServer::wait_for_requests`], blocking the thread (do not use it on the runtime
    /// serving a [`ModelServer::start`] server).
    pub fn wait_for_requests_blocking(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if lock(&self.shared.log).len() >= n {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops accepting connections, answers hanging requests 503, and lets the server task
    /// end. Dropping the server does the same.
    pub fn shutdown(&self) {
        self.shared.shutdown.send_replace(true);
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.shutdown();
        if let Some(done) = self.thread_done.take() {
            let _ = done.recv_timeout(DROP_WAIT);
        }
    }
}

async fn bind(
    script: Script,
) -> std::io::Result<(
    Arc<Shared>,
    SocketAddr,
    impl std::future::Future<Output = ()> + Send + 'static,
)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let (shutdown, _) = watch::channel(false);
    let shared = Arc::new(Shared {
        script: Mutex::new(script),
        log: Mutex::new(Vec::new()),
        log_file: Mutex::new(None),
        seq: AtomicUsize::new(0),
        shutdown,
    });
    let app = Router::new()
        .fallback(handle)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(Arc::clone(&shared));
    let mut stop = shared.shutdown.subscribe();
    let serve = async move {
        let signal = async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        };
        // Serving only ends on shutdown; an accept error is not worth reporting to a test.
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(signal)
            .await;
    };
    Ok((shared, addr, serve))
}

fn parse_body(body: &Bytes) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

fn empty(status: StatusCode) -> Response {
    status.into_response()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let endpoint = Endpoint::from_path(uri.path());
    let body = parse_body(&raw);
    let mut entry = LoggedRequest {
        seq: shared.seq.fetch_add(1, Ordering::SeqCst),
        method: method.as_str().to_owned(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
        endpoint,
        reply: Reply::Http { status: 200 },
        route: None,
    };
    let simple = |status: StatusCode, response: Response, entry: &mut LoggedRequest| {
        entry.reply = Reply::Http {
            status: status.as_u16(),
        };
        response
    };
    let response = match (&method, endpoint) {
        (&Method::HEAD, _) => simple(StatusCode::OK, empty(StatusCode::OK), &mut entry),
        (&Method::GET, Endpoint::Models) => simple(StatusCode::OK, models_response(), &mut entry),
        (&Method::GET, Endpoint::Responses) if headers.contains_key(header::UPGRADE) => simple(
            StatusCode::UPGRADE_REQUIRED,
            empty(StatusCode::UPGRADE_REQUIRED),
            &mut entry,
        ),
        (&Method::POST, Endpoint::CountTokens) => {
            let tokens = wire::tokens_for_len(raw.len());
            let response = if gemini::method(uri.path()).is_some() {
                gemini::count_tokens(tokens)
            } else {
                anthropic::count_tokens(tokens)
            };
            simple(StatusCode::OK, response, &mut entry)
        }
        (&Method::POST, ep) if ep.is_model_call() => {
            return model_call(&shared, entry, raw.len()).await;
        }
        (_, Endpoint::Other) => simple(
            StatusCode::NOT_FOUND,
            empty(StatusCode::NOT_FOUND),
            &mut entry,
        ),
        _ => simple(
            StatusCode::METHOD_NOT_ALLOWED,
            empty(StatusCode::METHOD_NOT_ALLOWED),
            &mut entry,
        ),
    };
    shared.record(entry);
    response
}

fn models_response() -> Response {
    let data: Vec<Value> = MODELS
        .iter()
        .map(|id| {
            json!({
                "id": id,
                "object": "model",
                "type": "model",
                "created": 0,
                "created_at": "2026-01-01T00:00:00Z",
                "display_name": id,
                "owned_by": "handoff-testkit",
            })
        })
        .collect();
    wire::json_response(
        StatusCode::OK,
        &json!({
            "object": "list",
            "data": data,
            "has_more": false,
            "first_id": MODELS.first(),
            "last_id": MODELS.last(),
        }),
    )
}

async fn model_call(shared: &Shared, mut entry: LoggedRequest, body_len: usize) -> Response {
    let endpoint = entry.endpoint;
    let error = |status: StatusCode| match endpoint {
        Endpoint::Messages => anthropic::error(status),
        Endpoint::GenerateContent => gemini::error(status),
        _ => wire::openai_error(status),
    };
    if !entry.body.is_object() {
        entry.reply = Reply::Http { status: 400 };
        shared.record(entry);
        return error(StatusCode::BAD_REQUEST);
    }
    let body = &entry.body;
    let (offered, tool_results, last_call, text) = match endpoint {
        Endpoint::Messages => (
            anthropic::offered_tools(body),
            anthropic::tool_results(body),
            anthropic::last_call(body),
            anthropic::prompt_text(body),
        ),
        Endpoint::Responses => (
            responses::offered_tools(body),
            responses::tool_results(body),
            responses::last_call(body),
            responses::prompt_text(body),
        ),
        Endpoint::GenerateContent => (
            gemini::offered_tools(body),
            gemini::tool_results(body),
            gemini::last_call(body),
            gemini::prompt_text(body),
        ),
        _ => (
            chat::offered_tools(body),
            chat::tool_results(body),
            chat::last_call(body),
            chat::prompt_text(body),
        ),
    };
    let conversation = Conversation {
        offered: &offered,
        tool_results,
        last_call,
        text,
    };
    let prefix = match endpoint {
        Endpoint::Messages => "toolu_",
        _ => "call_",
    };
    let mut new_call_id = || format!("{prefix}{}", uuid::Uuid::new_v4().simple());
    let decision = script::decide(&lock(&shared.script), &conversation, &mut new_call_id);
    let plan = decision.plan;
    let mut ctx = Ctx::new(body, body_len, uuid::Uuid::new_v4().simple().to_string());
    if endpoint == Endpoint::GenerateContent {
        ctx.model = gemini::model(&entry.path)
            .unwrap_or("fake-model")
            .to_owned();
        ctx.stream = gemini::is_stream(&entry.path);
    }
    entry.reply = decision.reply;
    entry.route = decision.route;
    shared.record(entry);
    let turn = match &plan {
        Plan::Text(text) => Turn::Text(text),
        Plan::Call(call) => Turn::Call(call),
        Plan::Status(status) => return error(wire::status_code(*status)),
        Plan::Fail(failure) => return failure.response(endpoint, &ctx.model),
        Plan::Hang => {
            let mut stop = shared.shutdown.subscribe();
            let _ = stop.wait_for(|stopped| *stopped).await;
            return error(StatusCode::SERVICE_UNAVAILABLE);
        }
    };
    match endpoint {
        Endpoint::Messages => anthropic::render(&turn, &ctx),
        Endpoint::Responses => responses::render(&turn, &ctx),
        Endpoint::GenerateContent => gemini::render(&turn, &ctx),
        _ => chat::render(&turn, &ctx),
    }
}
