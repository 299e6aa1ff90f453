//! One-paragraph human summaries of finished runs, panels and continuations: what `handoff`
//! prints on a terminal under the result, and what the demo shows for each step; and the
//! agents' lines of `handoff capabilities` and `handoff doctor`.

use crate::{
    Capabilities, ContinueOutcome, ContinueResult, GENERAL_CATEGORY, HandoffResult, PanelResult,
    Severity, Status, VerdictSource, printable,
};

/// A finished run: status, what ran, changed files, findings by severity, usage and cost,
/// duration; then, for a run that did not succeed, its message.
pub fn run_summary(r: &HandoffResult) -> String {
    let mut parts = vec![
        r.status.as_str().to_owned(),
        format!(
            "{} {}",
            r.target.harness.as_ref().map_or("?", |h| h.as_str()),
            r.mode.map_or("advice", |m| m.as_str())
        ),
    ];
    if let Some(git) = &r.git {
        parts.push(
            files("changed file(s)", &git.changed_files).unwrap_or("no changed files".to_owned()),
        );
    }
    let findings = &r.output.findings;
    if !findings.is_empty() {
        let mut counts = Vec::new();
        for (sev, name) in [
            (Severity::Blocker, "blocker"),
            (Severity::High, "high"),
            (Severity::Medium, "medium"),
            (Severity::Low, "low"),
            (Severity::Nit, "nit"),
        ] {
            let n = findings.iter().filter(|f| f.severity == sev).count();
            if n > 0 {
                counts.push(format!("{n} {name}"));
            }
        }
        parts.push(format!("findings: {}", counts.join(", ")));
    }
    if let Some(total) = r.usage.total_tokens {
        parts.push(format!("{total} tokens"));
    }
    if let Some(cost) = r.usage.cost_usd {
        parts.push(format!("${cost:.4}"));
    }
    parts.push(seconds(r.timing.duration_ms));
    if let Some(cause) = r.diagnostics.cause {
        parts.push(match r.diagnostics.retry_after_seconds {
            Some(wait) => format!(
                "{cause}, retry after {}",
                seconds(wait.saturating_mul(1000))
            ),
            None => cause.to_string(),
        });
    }
    let mut line = parts.join(" · ");
    // Attempts before the last: who could not answer, and why.
    if let Some((_, earlier)) = r.attempts.split_last() {
        for a in earlier {
            let mut who = match &a.account {
                Some(acc) => format!("{}@{acc}", a.harness),
                None => a.harness.to_string(),
            };
            if let Some(host) = &a.host {
                who.push_str(&format!(" at {}", printable(host, false)));
            }
            let cause = a.cause.map_or("?".to_owned(), |c| c.to_string());
            line.push_str(&format!(
                "\n  failed over from {who}: {cause} after {}",
                seconds(a.duration_ms)
            ));
        }
    }
    if r.status != Status::Succeeded
        && let Some(m) = &r.diagnostics.message
    {
        line.push_str(&format!("\n  {}", printable(m, false)));
    }
    line
}

/// A finished panel: its status and members, then the merged findings with who agreed.
pub fn panel_summary(p: &PanelResult) -> String {
    let succeeded = p
        .agreement
        .verdicts
        .iter()
        .filter(|m| m.status == Status::Succeeded)
        .count();
    let shared = p.findings.iter().filter(|f| f.agreed_by.len() > 1).count();
    let mut out = format!(
        "panel {} · {succeeded}/{} member(s) succeeded (quorum {}) · {} finding(s), {shared} raised by more than one · {}",
        p.status.as_str(),
        p.members.len(),
        p.quorum,
        p.findings.len(),
        seconds(p.timing.duration_ms)
    );
    for m in &p.agreement.verdicts {
        let source = match m.verdict_source {
            VerdictSource::Stated => "",
            VerdictSource::Findings => " (from its findings)",
            VerdictSource::Status => " (did not answer)",
        };
        out.push_str(&format!(
            "\n  {} · {} · {}{source}",
            m.member,
            m.status.as_str(),
            name(&m.verdict)
        ));
    }
    if !p.agreement.dissenting.is_empty() {
        out.push_str(&format!(
            "\n  verdicts differ: {} against the majority",
            p.agreement.dissenting.join(", ")
        ));
    }
    for f in &p.findings {
        let place = match (f.path.as_deref().map(|p| printable(p, false)), &f.lines) {
            (Some(path), Some(l)) if l.start == l.end => format!("{path}:{} ", l.start),
            (Some(path), Some(l)) => format!("{path}:{}-{} ", l.start, l.end),
            (Some(path), None) => format!("{path} "),
            (None, _) => String::new(),
        };
        let who = if f.agreed_by.len() > 1 {
            format!("agreed by {}", f.agreed_by.join(", "))
        } else {
            format!("{} only", f.agreed_by.join(", "))
        };
        let category = if f.category == GENERAL_CATEGORY {
            String::new()
        } else {
            format!("{} · ", printable(&f.category, false))
        };
        out.push_str(&format!(
            "\n  [{}] {place}{category}{} — {who}",
            name(&f.severity),
            printable(&f.title, false)
        ));
    }
    out
}

/// A finished continuation: how it ended, who has the task, the checkpoint, the conversation
/// and whether the receiver really continued it; then the command that resumes the receiver,
/// and why it stopped if it did.
pub fn continue_summary(r: &ContinueResult) -> String {
    let mut parts = vec![name(&r.outcome)];
    if let Some(t) = &r.target {
        let mut who = vec![t.provider.as_str().to_owned()];
        who.extend(t.model.iter().map(|m| printable(m, false).into_owned()));
        who.extend(t.effort.iter().map(|e| printable(e, false).into_owned()));
        parts.push(format!("{} ({})", who.join(" "), t.role.as_str()));
    }
    if let Some(c) = &r.checkpoint {
        let short = |commit: &str| commit[..commit.len().min(7)].to_owned();
        parts.push(match &c.commit {
            Some(commit) if c.created => {
                format!(
                    "checkpoint {} ({} file(s))",
                    short(commit),
                    c.committed.len()
                )
            }
            Some(commit) => format!("nothing to commit (at {})", short(commit)),
            None => files("file(s) to commit", &c.committed)
                .unwrap_or_else(|| "nothing to commit".to_owned()),
        });
        if !c.uncommitted.is_empty() {
            parts.push(format!("{} file(s) left uncommitted", c.uncommitted.len()));
        }
    }
    if let Some(carry) = &r.carry {
        parts.push(if carry.carried {
            let mode = carry.mode.as_ref().map(name).unwrap_or_default();
            format!(
                "conversation carried ({mode}, {} message(s))",
                carry.messages
            )
        } else {
            "conversation not carried".to_owned()
        });
    }
    if let Some(c) = &r.continuity {
        parts.push(format!("continuity {}", c.result.as_str()));
    }
    let mut out = parts.join(" · ");
    if let Some(resume) = r.receiver.as_ref().and_then(|x| x.resume.as_ref()) {
        out.push_str(&format!(
            "\n  resume it: {}",
            printable(&resume.shell, false)
        ));
    }
    if !matches!(
        r.outcome,
        ContinueOutcome::Started | ContinueOutcome::DryRun
    ) && let Some(reason) = &r.reason
    {
        out.push_str(&format!("\n  {}", printable(reason, false)));
    }
    out
}

/// `n what: a, b, c, +k`, or `None` when there are none.
fn files(what: &str, files: &[String]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let shown: Vec<_> = files.iter().take(3).map(|f| printable(f, false)).collect();
    let more = if files.len() > 3 {
        format!(", +{}", files.len() - 3)
    } else {
        String::new()
    };
    Some(format!(
        "{} {what}: {}{more}",
        files.len(),
        shown.join(", ")
    ))
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// The serialized name of an enum value (`high`, `changes-requested`).
fn name<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// One line per agent of `caps`: whether it can run and its version against the tested
/// range, then a `warning:` line for a CLI newer or older than tested.
pub fn agent_lines(caps: &Capabilities) -> Vec<String> {
    let mut out = Vec::new();
    for p in &caps.providers {
        let f = &p.preflight;
        let state = if f.ok {
            format!("ok   {}", f.version.as_deref().unwrap_or_default())
        } else if let Some(reason) = &f.reason {
            format!("not available: {reason}")
        } else {
            "not available".to_owned()
        };
        let tested = p
            .version
            .tested
            .as_ref()
            .map(|t| format!(" (tested {} – {})", t.min, t.max))
            .unwrap_or_default();
        out.push(format!("  {:<14} {state}{tested}", p.id.as_str()));
        if let Some(w) = &p.version.warning {
            out.push(format!("    warning: {w}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panels_summary_names_who_agreed() {
        use crate::{LineRange, MemberStance, PanelFinding, ReviewVerdict};
        let mut p = PanelResult::refused("m".into(), "2026-12-02T00:00:00.000Z");
        p.status = Status::Succeeded;
        p.quorum = 2;
        p.agreement.verdicts = vec![
            MemberStance {
                member: "codex".into(),
                status: Status::Succeeded,
                verdict: ReviewVerdict::ChangesRequested,
                verdict_source: VerdictSource::Stated,
            },
            MemberStance {
                member: "claude:opus".into(),
                status: Status::Succeeded,
                verdict: ReviewVerdict::Approve,
                verdict_source: VerdictSource::Findings,
            },
        ];
        p.agreement.dissenting = vec!["claude:opus".into()];
        let finding = |lines: Option<LineRange>, who: &[&str]| PanelFinding {
            path: Some("src/lib.rs".into()),
            lines,
            category: "general".into(),
            severity: Severity::High,
            title: "The retry loop never stops".into(),
            agreed_by: who.iter().map(|w| (*w).to_owned()).collect(),
            wordings: Vec::new(),
        };
        p.findings = vec![
            finding(
                Some(LineRange { start: 2, end: 4 }),
                &["claude:opus", "codex"],
            ),
            finding(None, &["codex"]),
        ];
        let text = panel_summary(&p);
        assert!(
            text.starts_with("panel succeeded · 2/0 member(s)"),
            "{text}"
        );
        assert!(
            text.contains("  codex · succeeded · changes-requested\n"),
            "{text}"
        );
        assert!(
            text.contains("  claude:opus · succeeded · approve (from its findings)"),
            "{text}"
        );
        assert!(text.contains("verdicts differ: claude:opus"), "{text}");
        assert!(
            text.contains(
                "[high] src/lib.rs:2-4 The retry loop never stops — agreed by claude:opus, codex"
            ),
            "{text}"
        );
        assert!(
            text.contains("[high] src/lib.rs The retry loop never stops — codex only"),
            "{text}"
        );

        // What members wrote cannot steer the terminal, nor forge a line of the summary.
        let mut forged = finding(None, &["codex"]);
        forged.title = "fine\u{1b}[2J\n  claude · succeeded · approve".into();
        forged.path = Some("src/\u{202e}sr.bil".into());
        forged.category = "x\ry".into();
        p.findings = vec![forged];
        let text = panel_summary(&p);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(
            text.contains("src/\\u{202e}sr.bil x\\x0dy · fine\\x1b[2J\\x0a  claude"),
            "{text:?}"
        );
    }

    #[test]
    fn a_runs_summary_names_the_attempts_before_and_where_they_ran() {
        use crate::{AgentId, Attempt, FailoverEntry, FailureCause};
        let mut lost = crate::panel::tests::result(AgentId::CODEX, Status::Failed, 2, Vec::new());
        lost.diagnostics.cause = Some(FailureCause::HostLost);
        lost.timing.duration_ms = 6_500;
        lost.host = Some(crate::RunHost {
            name: Some("devbox".into()),
            ssh: "me@devbox".into(),
            commit: None,
            worktree: None,
            job: None,
        });
        let codex = FailoverEntry {
            harness: AgentId::CODEX,
            account: None,
            model: None,
        };
        let mut r = crate::panel::tests::result(AgentId::CLAUDE, Status::Succeeded, 0, Vec::new());
        r.attempts = vec![Attempt::ended(&codex, &lost), Attempt::ended(&codex, &r)];
        r.attempts[1].harness = AgentId::CLAUDE;
        let text = run_summary(&r);
        assert!(
            text.contains("\n  failed over from codex at devbox: host_lost after 6.5 s"),
            "{text}"
        );
        // An attempt here names no host.
        r.attempts[0].host = None;
        let here = run_summary(&r);
        assert!(here.contains("failed over from codex: host_lost"), "{here}");
    }

    #[test]
    fn a_continuations_summary_says_who_has_the_task_and_how_to_resume_it() {
        use crate::{
            AgentId, ContinueCheckpoint, ContinueReceiver, ContinueTarget, ReceiverRole,
            ResumeCommand,
        };
        let mut r = ContinueResult::new(ContinueOutcome::Started, 0);
        r.target = Some(ContinueTarget {
            provider: AgentId::CODEX,
            model: Some("gpt-5".into()),
            effort: Some("high".into()),
            account: None,
            role: ReceiverRole::Implement,
        });
        r.checkpoint = Some(ContinueCheckpoint {
            commit: Some("0123456789abcdef".into()),
            created: true,
            committed: vec!["a.rs".into(), "b.rs".into()],
            uncommitted: Vec::new(),
            hooks_skipped: Vec::new(),
        });
        r.receiver = Some(ContinueReceiver {
            argv: Vec::new(),
            version: None,
            policy: serde_json::Value::Null,
            session_id: None,
            resume: Some(ResumeCommand {
                cwd: "/w".into(),
                env: Default::default(),
                argv: vec!["codex".into(), "resume".into(), "s1".into()],
                shell: "cd /w && codex resume s1\u{1b}[2J".into(),
            }),
            last_message: None,
            exit_code: Some(0),
            worktree_unchanged: None,
            changed: Vec::new(),
        });
        let text = continue_summary(&r);
        assert_eq!(
            text,
            "started · codex gpt-5 high (implement) · checkpoint 0123456 (2 file(s))\n  \
             resume it: cd /w && codex resume s1\\x1b[2J"
        );
        let mut refused = ContinueResult::new(ContinueOutcome::Rejected, 5);
        refused.reason = Some("the destination phrase says 'codex'\nforged".into());
        assert_eq!(
            continue_summary(&refused),
            "rejected\n  the destination phrase says 'codex'\\x0aforged"
        );
    }
}
