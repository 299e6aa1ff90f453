//! The nested client: what `handoff advice` does inside a worker. It sends one request to the
//! supervisor named in its context and waits for the reply — no longer than the root deadline
//! (plus a short grace for the reply's way back).

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::wire::*;
use crate::redact::quote;
use crate::result::RESULT_SCHEMA;

/// Asks the supervisor of `context` for nested advice and returns its verified reply.
///
/// Refuses an endpoint that is not a socket owned by the current user, a peer running as
/// another user, a reply that is not [`NESTED_REPLY_SCHEMA`], whose hash does not match its
/// result, or whose result is not a `handoff.result.v1` object.
pub async fn ask_supervisor(
    context: &SupervisorContext,
    request: &NestedRequest,
) -> Result<NestedReply, String> {
    let uid = nix::unistd::geteuid().as_raw();
    let meta = std::fs::symlink_metadata(&context.endpoint).map_err(|e| {
        format!(
            "the supervisor socket {} is unusable: {e}",
            context.endpoint
        )
    })?;
    {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() || meta.uid() != uid {
            return Err(format!(
                "{} is not a supervisor socket owned by this user",
                context.endpoint
            ));
        }
    }
    let now_ms = u64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000)
        .unwrap_or(0);
    if now_ms >= context.deadline_unix_ms {
        return Err("the root deadline has passed; no nested node can start".into());
    }
    let wait = Duration::from_millis(context.deadline_unix_ms - now_ms + CLIENT_GRACE_MS);

    let exchange = async {
        let stream = UnixStream::connect(&context.endpoint)
            .await
            .map_err(|e| format!("cannot reach the supervisor at {}: {e}", context.endpoint))?;
        match stream.peer_cred() {
            Ok(c) if c.uid() == uid => {}
            _ => return Err("the supervisor socket belongs to another user".to_owned()),
        }
        let (read, mut write) = stream.into_split();
        let mut frame = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        frame.push(b'\n');
        write
            .write_all(&frame)
            .await
            .map_err(|e| format!("cannot send the request to the supervisor: {e}"))?;
        let mut line = Vec::new();
        let mut limited = BufReader::new(read).take(MAX_REPLY_BYTES as u64 + 1);
        limited
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| format!("cannot read the supervisor's reply: {e}"))?;
        drop(write);
        Ok::<Vec<u8>, String>(line)
    };
    let line = tokio::time::timeout(wait, exchange)
        .await
        .map_err(|_| "the supervisor did not answer before the root deadline".to_owned())??;
    if line.is_empty() {
        return Err("the supervisor closed the connection without a reply".into());
    }
    if line.len() > MAX_REPLY_BYTES {
        return Err(format!(
            "the supervisor's reply exceeds {MAX_REPLY_BYTES} bytes"
        ));
    }
    let reply: NestedReply = serde_json::from_slice(&line)
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
