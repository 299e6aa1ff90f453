//! The nested client: what `handoff advice` does inside a worker. It posts one request to the
//! mailbox named in its context and waits for the answer — no longer than the root deadline
//! (plus a short grace for the answer's way back). Interrupted (SIGINT, SIGTERM) or out of
//! time, it withdraws the request, and the supervisor cancels the adviser.

use std::time::Duration;

use camino::Utf8Path;
use tokio::signal::unix::{SignalKind, signal};

use super::mailbox::{self, Watcher};
use super::wire::*;
use crate::redact::quote;
use crate::result::RESULT_SCHEMA;

/// Why the client stopped waiting.
enum Stopped {
    Failed(String),
    TimedOut,
    Signal(&'static str),
}

/// Asks the supervisor of `context` for nested advice and returns its verified reply.
///
/// Refuses a mailbox that is not a private directory of the current user's holding `in/` and
/// `out/`, a nonce that cannot name a mailbox entry, an answer that is not
/// [`NESTED_REPLY_SCHEMA`], whose hash does not match its result, or whose result is not a
/// `handoff.result.v1` object. While it waits, SIGINT and SIGTERM withdraw the request (the
/// adviser is cancelled) and end the wait with an error.
pub async fn ask_supervisor(
    context: &SupervisorContext,
    request: &NestedRequest,
) -> Result<NestedReply, String> {
    let mailbox = Utf8Path::new(&context.mailbox);
    mailbox::check(mailbox)?;
    let nonce = request.nonce.as_str();
    if !mailbox::nonce_ok(nonce) {
        return Err(format!(
            "the request nonce {:?} cannot name a mailbox entry",
            quote(nonce)
        ));
    }
    let now_ms = u64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000)
        .unwrap_or(0);
    if now_ms >= context.deadline_unix_ms {
        return Err("the root deadline has passed; no nested node can start".into());
    }
    let wait = Duration::from_millis(context.deadline_unix_ms - now_ms + CLIENT_GRACE_MS);
    let mut body = serde_json::to_vec(request).map_err(|e| e.to_string())?;
    body.push(b'\n');
    if body.len() > MAX_REQUEST_BYTES {
        return Err(format!("the request exceeds {MAX_REQUEST_BYTES} bytes"));
    }
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot handle SIGINT: {e}"))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    // Watch out/ before posting, so that no answer can come unseen.
    let watcher = Watcher::new().map_err(|e| format!("cannot watch the mailbox: {e}"))?;
    let outbox = mailbox.join(mailbox::OUTBOX);
    watcher
        .watch(&outbox)
        .map_err(|e| format!("cannot watch {outbox}: {e}"))?;
    mailbox::post(mailbox, nonce, &mailbox::request_name(nonce), &body)
        .map_err(|e| format!("cannot post the request to the mailbox {mailbox}: {e}"))?;

    let answer = async {
        loop {
            if let Some(bytes) = mailbox::read_answer(mailbox, nonce)? {
                return Ok(bytes);
            }
            let events = watcher
                .next()
                .await
                .map_err(|e| format!("cannot watch the mailbox: {e}"))?;
            if events.iter().any(|e| e.gone) {
                return Err("the supervisor's mailbox is gone (its root run ended)".to_owned());
            }
        }
    };
    let waited = tokio::select! {
        r = tokio::time::timeout(wait, answer) => match r {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(m)) => Err(Stopped::Failed(m)),
            Err(_) => Err(Stopped::TimedOut),
        },
        _ = interrupt.recv() => Err(Stopped::Signal("SIGINT")),
        _ = terminate.recv() => Err(Stopped::Signal("SIGTERM")),
    };
    let line = match waited {
        Ok(bytes) => bytes,
        Err(stopped) => {
            let withdrawn = mailbox::post(mailbox, nonce, &mailbox::cancel_name(nonce), b"");
            let how = match withdrawn {
                Ok(()) => "the request was withdrawn".to_owned(),
                Err(e) => format!("the request could not be withdrawn: {e}"),
            };
            return Err(match stopped {
                Stopped::Failed(m) => format!("{m}; {how}"),
                Stopped::TimedOut => {
                    format!("the supervisor did not answer before the root deadline; {how}")
                }
                Stopped::Signal(s) => format!("interrupted by {s} while waiting; {how}"),
            });
        }
    };
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    if line.is_empty() {
        return Err("the supervisor's answer is empty".into());
    }
    if line.len() > MAX_REPLY_BYTES {
        return Err(format!(
            "the supervisor's reply exceeds {MAX_REPLY_BYTES} bytes"
        ));
    }
    let reply: NestedReply = serde_json::from_slice(line)
        .map_err(|e| format!("the supervisor's reply is not valid: {e}"))?;
    if reply.schema_version != NESTED_REPLY_SCHEMA {
        return Err(format!(
            "the supervisor replied with schemaVersion {:?}; expected {NESTED_REPLY_SCHEMA}",
            quote(&reply.schema_version)
        ));
    }
    if result_hash(&format!("{}\n", reply.result)) != reply.result_hash {
        return Err("the supervisor's reply does not match its result hash".into());
    }
    let result: serde_json::Value = serde_json::from_str(&reply.result)
        .map_err(|e| format!("the supervisor's result is not JSON: {e}"))?;
    if result.get("schemaVersion").and_then(|v| v.as_str()) != Some(RESULT_SCHEMA) {
        return Err(format!("the supervisor's result is not {RESULT_SCHEMA}"));
    }
    Ok(reply)
}
