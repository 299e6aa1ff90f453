//! Did the receiver continue: the source still as carried, the receiver's store, the probe.

use super::*;

/// Whether the source still holds what was carried: its bytes unchanged (it may have grown),
/// and, read again, the carried messages first.
pub async fn original_appended(
    engine: &Engine,
    source: &Source,
    account: Option<&str>,
    scratch: &Utf8Path,
) -> bool {
    if let Some(snapshot) = &source.snapshot
        && !snapshot.still_prefix().unwrap_or(false)
    {
        return false;
    }
    let Some(adapter) = engine.provider(&source.session.provider) else {
        return false;
    };
    let Ok(sessions) = adapter.session_store() else {
        return false;
    };
    let store = engine.user_store(&source.session.provider, scratch, account);
    let path = if source.snapshot.is_some() {
        source.session.path.clone()
    } else {
        match sessions
            .find_session(&store, &SessionQuery::Id(source.session.session_id.clone()))
            .await
        {
            Ok(Some(s)) => s.path,
            _ => return false,
        }
    };
    match sessions.read_transcript(&path) {
        Ok(now) => {
            now.messages.len() >= source.transcript.messages.len()
                && source
                    .transcript
                    .messages
                    .iter()
                    .zip(&now.messages)
                    .all(|(a, b)| same_message(a, b))
        }
        Err(_) => false,
    }
}

/// What the receiver's store says after its turn.
pub enum StoreVerdict {
    /// Read: how the session compares with the carried one.
    Read(Resumption),
    /// The session the receiver was to resume is not in its store.
    Missing,
    /// The store can't be read.
    Unreadable(String),
}

/// Reads the receiver's session and compares it with the carried baseline.
pub async fn store_verdict(receiver: &PreparedReceiver, carried: &Carried) -> StoreVerdict {
    match read_session(receiver, &carried.session_id).await {
        Ok(Some(now)) => StoreVerdict::Read(resumed_after(&carried.baseline, &now)),
        Ok(None) => StoreVerdict::Missing,
        Err(e) => StoreVerdict::Unreadable(e.to_string()),
    }
}

/// The note's Current state and Next steps: what a probe answer is compared with.
pub fn probe_reference(note: &handoff_core::Note) -> String {
    [
        handoff_core::Section::CurrentState,
        handoff_core::Section::NextSteps,
    ]
    .into_iter()
    .filter_map(|s| note.body(s))
    .collect::<Vec<_>>()
    .join("\n")
}

/// Asks the receiver the probe question in its session and compares the answer.
pub async fn probe(
    engine: &Engine,
    receiver: &PreparedReceiver,
    session_id: &str,
    reference: &str,
    timeout: Duration,
    cancel: tokio::sync::watch::Receiver<bool>,
    account: Option<&str>,
) -> Result<ContinuityProbe, String> {
    let mut request = receiver.request.clone();
    request.role = handoff_core::ReceiverRole::Review;
    request.resume = Some(ResumeFrom {
        session_id: session_id.to_owned(),
        fork: false,
    });
    let prepared = engine
        .prepare_receiver(&request, PROBE_QUESTION, account)
        .await?;
    let run = engine.start_receiver(&prepared, timeout, cancel).await;
    if let Some(failure) = run.failure() {
        return Err(failure);
    }
    let answer = run.report.last_message.clone();
    let comparison = compare_probe(answer.as_deref().unwrap_or(""), reference);
    Ok(ContinuityProbe {
        question: PROBE_QUESTION.to_owned(),
        answer,
        comparison,
    })
}

/// A continuity verdict.
pub fn continuity(
    result: ContinuityResult,
    reason: impl Into<String>,
    next: Option<String>,
    checks: ContinuityChecks,
) -> Continuity {
    Continuity {
        result,
        reason: reason.into(),
        next,
        last_message: None,
        probe: None,
        checks,
    }
}

/// The continuity details kept in the timeline.
pub fn timeline_details(c: &Continuity) -> serde_json::Value {
    serde_json::to_value(c).unwrap_or_default()
}

/// The handoff row's carried-turn listing, for `handoff log`.
pub fn carried_turns(h: &HandoffRow) -> Vec<String> {
    let Some(carry) = h.context.details.as_ref().and_then(|d| d.get("carry")) else {
        return Vec::new();
    };
    let Some(turns) = carry
        .get("turns")
        .and_then(|t| t.get("turns"))
        .and_then(|t| t.as_array())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(n) = carry
        .get("turns")
        .and_then(|t| t.get("omitted"))
        .and_then(serde_json::Value::as_u64)
        .filter(|n| *n > 0)
    {
        out.push(format!("({n} earlier carried turns not listed)"));
    }
    for t in turns {
        let s = |k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or("");
        let who = match t.get("model").and_then(|v| v.as_str()) {
            Some(m) => format!("{}/{m}", s("provider")),
            None => s("provider").to_owned(),
        };
        let at = if s("at").is_empty() {
            String::new()
        } else {
            format!(" {}", s("at"))
        };
        out.push(format!(
            "carried {} by {who}{at}: {}",
            s("role"),
            s("summary")
        ));
    }
    out
}
