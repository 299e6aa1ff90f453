use proptest::prelude::*;

use super::merge::{Raised, merge_raised};
use super::*;
use crate::names::{AgentId, Verdict};
use crate::output::{Finding, Severity};
use crate::result::{Diagnostics, ExitInfo, OutputInfo, TargetInfo};

fn members(text: &str) -> Result<Vec<PanelMember>, PanelSpecError> {
    parse_members_among(text, &AgentId::BUILTIN)
}

fn ids(text: &str) -> Vec<String> {
    members(text).unwrap().iter().map(PanelMember::id).collect()
}

// Member lists.

#[test]
fn member_lists_parse() {
    assert_eq!(
        ids("codex,claude:opus,opencode"),
        ["codex", "claude:opus", "opencode"]
    );
    assert_eq!(ids(" codex , claude "), ["codex", "claude"]);
    assert_eq!(
        ids("codex:gpt-5.5,codex,codex:o3"),
        ["codex:gpt-5.5", "codex", "codex:o3"]
    );
    // The model is everything after the first colon.
    let m = members("opencode:ollama/llama3:8b").unwrap();
    assert_eq!(m[0].harness, AgentId::OPENCODE);
    assert_eq!(m[0].model.as_deref(), Some("ollama/llama3:8b"));
    let eight = (1..=8)
        .map(|i| format!("codex:m{i}"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(members(&eight).unwrap().len(), MAX_PANEL_MEMBERS);
}

#[test]
fn bad_member_lists_are_refused() {
    use PanelSpecError as E;
    type Expect = fn(&PanelSpecError) -> bool;
    let cases: &[(&str, Expect)] = &[
        ("", |e| *e == E::Empty),
        ("  ", |e| *e == E::Empty),
        ("codex,,claude", |e| *e == E::EmptyEntry { position: 2 }),
        ("codex,", |e| *e == E::EmptyEntry { position: 2 }),
        (",codex", |e| *e == E::EmptyEntry { position: 1 }),
        ("codex:", |e| {
            e.to_string() == "--harness entry 1 (\"codex:\") names no model after its ':'"
        }),
        ("claude, :opus", |e| {
            e.to_string() == "--harness entry 2 (\":opus\") names no agent before its ':'"
        }),
        (
            "codex,aider",
            |e| matches!(e, E::UnknownAgent { entry, .. } if entry == "aider"),
        ),
        ("Codex", |e| matches!(e, E::UnknownAgent { .. })),
        (
            "codex:-x",
            |e| matches!(e, E::BadModel { entry, .. } if entry == "codex:-x"),
        ),
        ("codex:a\u{7}b", |e| matches!(e, E::BadModel { .. })),
        ("codex,claude,codex", |e| {
            *e == E::Duplicate {
                member: "codex".into(),
            }
        }),
        ("claude:opus,claude:opus", |e| {
            *e == E::Duplicate {
                member: "claude:opus".into(),
            }
        }),
        (
            "codex,codex,codex,codex,codex,codex,codex,codex,codex",
            |e| *e == E::TooMany { count: 9 },
        ),
    ];
    for (text, expected) in cases {
        let err = members(text).expect_err(text);
        assert!(expected(&err), "{text:?}: {err:?}");
        assert_eq!(err.field(), "--harness");
        let message = err.to_string();
        assert!(
            !message.contains('\n') && message.contains("--harness"),
            "{message}"
        );
    }
}

#[test]
fn unknown_agents_name_the_known_ones() {
    let err = parse_members_among("gemini", &[AgentId::CODEX, AgentId::CLAUDE]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"--harness "gemini" is not a known agent; expected one of: codex, claude"#
    );
}

#[test]
fn quorum_defaults_to_every_member() {
    assert_eq!(check_quorum(None, 3), Ok(3));
    assert_eq!(check_quorum(Some(1), 3), Ok(1));
    assert_eq!(check_quorum(Some(3), 3), Ok(3));
    for bad in [0, 4] {
        let err = check_quorum(Some(bad), 3).unwrap_err();
        assert_eq!(
            err,
            PanelSpecError::Quorum {
                quorum: bad,
                members: 3
            }
        );
        assert_eq!(err.field(), "--quorum");
    }
}

fn entry() -> impl Strategy<Value = String> {
    (
        prop::sample::select(AgentId::BUILTIN.to_vec()),
        prop::option::of("[a-z0-9][a-z0-9./:-]{0,11}"),
    )
        .prop_map(|(a, m)| match m {
            Some(m) => format!("{a}:{m}"),
            None => a.to_string(),
        })
}

proptest! {
    #[test]
    fn member_parsing_never_panics(text in "\\PC{0,64}") {
        if let Ok(parsed) = members(&text) {
            prop_assert_eq!(members(&render_members(&parsed)), Ok(parsed));
        }
    }

    #[test]
    fn accepted_member_lists_round_trip(entries in prop::collection::vec(entry(), 1..10)) {
        let text = entries.join(",");
        match members(&text) {
            Ok(parsed) => {
                prop_assert_eq!(render_members(&parsed), text.clone());
                prop_assert_eq!(members(&render_members(&parsed)), Ok(parsed));
            }
            Err(e) => prop_assert!(
                matches!(e, PanelSpecError::Duplicate { .. } | PanelSpecError::TooMany { .. }),
                "{text}: {e:?}"
            ),
        }
    }
}

// Merging.

fn raised(member: &str, path: &str, lines: (u64, u64), title: &str) -> Raised {
    Raised::normalised(
        member,
        Some(path),
        Some(LineRange {
            start: lines.0,
            end: lines.1,
        }),
        None,
        Severity::Medium,
        title,
        None,
    )
}

fn groups(found: &[PanelFinding]) -> Vec<Vec<String>> {
    found.iter().map(|f| f.agreed_by.clone()).collect()
}

#[test]
fn agreeing_findings_merge() {
    let found = merge_raised(vec![
        raised(
            "codex",
            "./src//lib.rs",
            (10, 12),
            "Unchecked index panics on empty input",
        ),
        Raised::normalised(
            "claude:opus",
            Some("src/lib.rs"),
            Some(LineRange { start: 12, end: 20 }),
            Some(" General "),
            Severity::High,
            "Index panics when the input is empty",
            Some("`v[0]` with an empty `v`."),
        ),
    ]);
    assert_eq!(found.len(), 1);
    let f = &found[0];
    assert_eq!(f.path.as_deref(), Some("src/lib.rs"));
    assert_eq!(f.lines, Some(LineRange { start: 10, end: 20 }));
    assert_eq!(f.category, GENERAL_CATEGORY);
    assert_eq!(f.severity, Severity::High);
    assert_eq!(f.title, "Index panics when the input is empty");
    assert_eq!(f.agreed_by, ["claude:opus", "codex"]);
    assert_eq!(f.wordings[0].member, "claude:opus");
    assert_eq!(
        f.wordings[0].body.as_deref(),
        Some("`v[0]` with an empty `v`.")
    );
    assert_eq!(f.wordings[1].title, "Unchecked index panics on empty input");
}

#[test]
fn near_misses_stay_apart() {
    let base = || {
        raised(
            "codex",
            "src/a.rs",
            (10, 12),
            "Unchecked index panics on empty input",
        )
    };
    let near: Vec<(&str, Raised)> = vec![
        (
            "other path",
            raised(
                "claude",
                "src/b.rs",
                (10, 12),
                "Unchecked index panics on empty input",
            ),
        ),
        (
            "disjoint lines",
            raised(
                "claude",
                "src/a.rs",
                (13, 20),
                "Unchecked index panics on empty input",
            ),
        ),
        (
            "other category",
            Raised::normalised(
                "claude",
                Some("src/a.rs"),
                Some(LineRange { start: 10, end: 12 }),
                Some("security"),
                Severity::Medium,
                "Unchecked index panics on empty input",
                None,
            ),
        ),
        (
            "lines on one side only",
            Raised::normalised(
                "claude",
                Some("src/a.rs"),
                None,
                None,
                Severity::Medium,
                "Unchecked index panics on empty input",
                None,
            ),
        ),
        (
            "low title overlap",
            raised("claude", "src/a.rs", (10, 12), "Index name is misleading"),
        ),
        (
            "same member",
            raised(
                "codex",
                "src/a.rs",
                (10, 12),
                "Unchecked index panics on empty input",
            ),
        ),
    ];
    for (why, other) in near {
        let found = merge_raised(vec![base(), other]);
        assert_eq!(found.len(), 2, "{why}");
        assert_eq!(
            Agreement::of(&[], &found).single_member_findings,
            [0, 1],
            "{why}"
        );
    }
}

#[test]
fn findings_without_path_or_lines_merge_on_the_title() {
    let general =
        |m: &str, t: &str| Raised::normalised(m, None, None, None, Severity::Low, t, None);
    let found = merge_raised(vec![
        general("codex", "The README misses the install step"),
        general("claude", "README misses install step"),
        general("opencode", "Tests are slow"),
    ]);
    assert_eq!(groups(&found), [vec!["claude", "codex"], vec!["opencode"]]);
}

#[test]
fn title_overlap_is_a_jaccard_index_of_at_least_a_half() {
    // {alpha, beta} and {alpha, gamma}: 1 shared of 3.
    assert!(!titles_agree("alpha beta", "alpha gamma"));
    // {alpha, beta} and {alpha, beta, gamma, delta}: 2 of 4.
    assert!(titles_agree("Alpha, beta!", "alpha beta gamma delta"));
    // Short words and stop words do not count.
    assert_eq!(
        title_tokens("The fn in x.rs should NOT panic on an empty Vec"),
        ["empty", "panic", "vec"].map(String::from).into()
    );
    assert!(titles_agree("the fix", "fix"));
    // No word that counts: equal up to case and spacing.
    assert!(titles_agree("A  B", "a b"));
    assert!(!titles_agree("a b", "a c"));
}

#[test]
fn merging_is_transitive() {
    // a~b and b~c, but not a~c: one finding.
    let found = merge_raised(vec![
        raised("codex", "a.rs", (1, 3), "alpha beta gamma"),
        raised("claude", "a.rs", (3, 5), "beta gamma delta"),
        raised("opencode", "a.rs", (5, 9), "gamma delta epsilon"),
    ]);
    assert_eq!(groups(&found), [vec!["claude", "codex", "opencode"]]);
    assert_eq!(found[0].lines, Some(LineRange { start: 1, end: 9 }));
    // Two findings of one member joined through another member's.
    let found = merge_raised(vec![
        raised("codex", "a.rs", (1, 1), "alpha beta"),
        raised("codex", "a.rs", (1, 1), "alpha beta gamma"),
        raised("claude", "a.rs", (1, 1), "alpha beta"),
    ]);
    assert_eq!(groups(&found), [vec!["claude", "codex"]]);
    assert_eq!(found[0].wordings.len(), 3);
}

#[test]
fn provider_findings_merge_by_file_and_line() {
    let f = |file: &str, line: u64, severity, summary: &str| Finding {
        file: Some(file.into()),
        line: Some(line),
        end_line: None,
        category: None,
        severity,
        title: None,
        summary: summary.into(),
    };
    let a = [f(
        "src/a.rs",
        4,
        Severity::Low,
        "Missing error context on open",
    )];
    let b = [
        f(
            "./src/a.rs",
            4,
            Severity::Blocker,
            "Error context missing when open fails",
        ),
        f(
            "src/a.rs",
            5,
            Severity::Nit,
            "Missing error context on open",
        ),
    ];
    let found = merge_findings(
        a.iter()
            .map(|x| ("codex", x))
            .chain(b.iter().map(|x| ("claude", x))),
    );
    assert_eq!(groups(&found), [vec!["claude", "codex"], vec!["claude"]]);
    assert_eq!(found[0].severity, Severity::Blocker);
    assert_eq!(found[0].lines, Some(LineRange { start: 4, end: 4 }));
    assert_eq!(found[1].lines, Some(LineRange { start: 5, end: 5 }));
}

fn arbitrary_raised() -> impl Strategy<Value = Raised> {
    let word = prop::sample::select(vec!["alpha", "beta", "gamma", "delta", "the", "x"]);
    (
        prop::sample::select(vec!["codex", "claude:opus", "opencode"]),
        prop::option::of(prop::sample::select(vec!["a.rs", "./a.rs", "b.rs"])),
        prop::option::of((1u64..6, 0u64..3)),
        prop::option::of(prop::sample::select(vec!["Bug", "bug ", "style"])),
        prop::sample::select(vec![
            Severity::Blocker,
            Severity::High,
            Severity::Medium,
            Severity::Low,
            Severity::Nit,
        ]),
        prop::collection::vec(word, 1..4),
        prop::option::of(prop::sample::select(vec!["why", "because"])),
    )
        .prop_map(|(member, path, lines, category, severity, words, body)| {
            Raised::normalised(
                member,
                path,
                lines.map(|(start, len)| LineRange {
                    start,
                    end: start + len,
                }),
                category,
                severity,
                &words.join(" "),
                body,
            )
        })
}

proptest! {
    #[test]
    fn merging_ignores_the_order_of_members_and_findings(
        (all, shuffled) in prop::collection::vec(arbitrary_raised(), 0..24)
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle()))
    ) {
        let merged = merge_raised(all.clone());
        prop_assert_eq!(&merged, &merge_raised(shuffled));
        // Every finding is kept exactly once.
        let kept: usize = merged.iter().map(|f| f.wordings.len()).sum();
        prop_assert_eq!(kept, all.len());
        for f in &merged {
            prop_assert!(f.wordings.iter().all(|w| f.agreed_by.contains(&w.member)));
        }
    }
}

// Status and exit code.

#[test]
fn panel_status_follows_the_precedence() {
    use Status::*;
    let ok = (Succeeded, 0);
    let failed = (Failed, 2);
    let invalid = (Failed, 7);
    let timed_out = (TimedOut, 8);
    let cancelled = (Cancelled, 9);
    let policy = (Blocked, 10);
    let blocked = (Blocked, 2);
    let not_run = (NotRun, 3);
    // Members, quorum, the panel cancelled, the expected verdict.
    type Row<'a> = (&'a [(Status, u8)], Option<usize>, bool, Verdict);
    let table: &[Row] = &[
        (&[], None, false, Verdict::REJECTED),
        (&[ok, ok], Some(0), false, Verdict::REJECTED),
        (&[ok, ok], Some(3), false, Verdict::REJECTED),
        (&[ok, ok, ok], None, false, Verdict::SUCCEEDED),
        // Quorum: default all.
        (&[ok, ok, failed], None, false, Verdict::AGENT_FAILED),
        (&[ok, ok, failed], Some(2), false, Verdict::SUCCEEDED),
        (
            &[ok, timed_out, invalid],
            Some(2),
            false,
            Verdict::AGENT_FAILED,
        ),
        (
            &[ok, timed_out, invalid],
            Some(1),
            false,
            Verdict::SUCCEEDED,
        ),
        (&[ok, blocked], Some(1), false, Verdict::SUCCEEDED),
        (&[ok, not_run], Some(1), false, Verdict::SUCCEEDED),
        (&[ok, not_run], None, false, Verdict::AGENT_FAILED),
        // Every member not run.
        (&[not_run, not_run], Some(1), false, Verdict::NOT_RUN),
        (&[not_run, failed], Some(1), false, Verdict::AGENT_FAILED),
        // Cancellation beats not run and the quorum.
        (&[not_run, not_run], None, true, Verdict::CANCELLED),
        (&[ok, ok], Some(1), true, Verdict::CANCELLED),
        (&[ok, cancelled], Some(1), false, Verdict::CANCELLED),
        // A policy block beats everything that ran.
        (&[ok, policy], Some(1), false, Verdict::POLICY_BLOCKED),
        (&[cancelled, policy], None, true, Verdict::POLICY_BLOCKED),
        (&[not_run, policy], None, false, Verdict::POLICY_BLOCKED),
    ];
    for (i, (members, quorum, cancel, expected)) in table.iter().enumerate() {
        assert_eq!(
            decide_panel(members, *quorum, *cancel),
            *expected,
            "row {i}: {members:?} quorum {quorum:?} cancelled {cancel}"
        );
    }
}

// Whole results.

/// A whole result of `harness` (other tests build on it too).
pub(crate) fn result(
    harness: AgentId,
    status: Status,
    code: u8,
    findings: Vec<Finding>,
) -> HandoffResult {
    HandoffResult {
        schema_version: crate::result::RESULT_SCHEMA.into(),
        driver_version: crate::result::DRIVER_VERSION.into(),
        operation: Some(crate::names::Operation::Advice),
        caller: None,
        target: TargetInfo {
            harness: Some(harness),
            version: None,
        },
        mode: None,
        request_hash: None,
        intent_hash: None,
        selection: None,
        grants: None,
        delegation: None,
        lineage: None,
        status,
        exit: ExitInfo {
            driver: code,
            provider: Some(0),
            signal: None,
            timed_out: false,
            cancelled: false,
        },
        output: OutputInfo {
            response: Some("done".into()),
            evidence: vec![],
            findings,
            verdict: None,
        },
        git: None,
        timing: Timing {
            started_at: "2025-01-31T12:00:00.000Z".into(),
            finished_at: "2025-01-31T12:00:01.000Z".into(),
            duration_ms: 1000,
        },
        usage: Usage::not_observed(),
        policy: serde_json::Value::Null,
        dag: None,
        processes: None,
        view: None,
        snapshot: None,
        host: None,
        diagnostics: Diagnostics::default(),
        attempts: Vec::new(),
    }
}

fn finding(severity: Severity, summary: &str) -> Finding {
    Finding {
        file: Some("src/a.rs".into()),
        line: Some(3),
        end_line: None,
        category: None,
        severity,
        title: None,
        summary: summary.into(),
    }
}

fn member(text: &str) -> PanelMember {
    members(text).unwrap().remove(0)
}

#[test]
fn a_panel_assembles_its_members() {
    let mut codex = result(
        AgentId::CODEX,
        Status::Succeeded,
        0,
        vec![finding(Severity::High, "Off-by-one in the loop bound")],
    );
    codex.usage = Usage {
        source: UsageSource::ProviderEnvelope,
        input_tokens: Some(100),
        output_tokens: Some(10),
        total_tokens: Some(110),
        cache_read_tokens: None,
        cache_write_tokens: None,
        cost_usd: Some(0.25),
        premium_requests: None,
    };
    let mut claude = result(
        AgentId::CLAUDE,
        Status::Succeeded,
        0,
        vec![
            finding(Severity::Medium, "Loop bound is off by one"),
            finding(Severity::Nit, "Rename the loop variable"),
        ],
    );
    claude.usage = Usage {
        input_tokens: Some(50),
        cost_usd: Some(0.5),
        premium_requests: None,
        ..codex.usage.clone()
    };
    claude.timing = Timing {
        started_at: "2025-01-31T12:00:00.500Z".into(),
        finished_at: "2025-01-31T12:00:03.000Z".into(),
        duration_ms: 2500,
    };
    let mut opencode = result(AgentId::OPENCODE, Status::TimedOut, 8, vec![]);
    opencode.usage.source = UsageSource::NotReported;
    let again = result(AgentId::CLAUDE, Status::Succeeded, 0, vec![]);

    let panel = PanelResult::assemble(
        "run-panel",
        vec![
            (member("codex"), codex),
            (member("claude"), claude),
            (member("opencode"), opencode),
            (member("claude:haiku"), again),
        ],
        Some(3),
        false,
    );
    assert_eq!((panel.status, panel.exit.driver), (Status::Succeeded, 0));
    assert_eq!(panel.quorum, 3);
    assert_eq!(panel.members.len(), 4);
    assert_eq!(
        groups(&panel.findings),
        [vec!["claude", "codex"], vec!["claude"]]
    );
    assert_eq!(panel.findings[0].severity, Severity::High);

    let a = &panel.agreement;
    assert_eq!(a.single_member_findings, [1]);
    let verdicts: Vec<_> = a
        .verdicts
        .iter()
        .map(|v| (v.member.as_str(), v.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("codex", ReviewVerdict::ChangesRequested),
            ("claude", ReviewVerdict::ChangesRequested),
            ("opencode", ReviewVerdict::Unsure),
            ("claude:haiku", ReviewVerdict::Approve),
        ]
    );
    assert_eq!(a.majority, Some(ReviewVerdict::ChangesRequested));
    assert!(a.verdicts_differ);
    assert_eq!(a.dissenting, ["claude:haiku"]);
    assert_eq!(
        a.failed,
        [FailedMember {
            member: "opencode".into(),
            status: Status::TimedOut,
            exit: 8,
        }]
    );
    assert_eq!(
        panel.message.as_deref(),
        Some("3 of 4 members succeeded (quorum 3); not succeeded: opencode (timed_out)")
    );

    assert_eq!(panel.usage.source, UsageSource::ProviderEnvelope);
    assert_eq!(panel.usage.input_tokens, Some(150));
    assert_eq!(panel.usage.total_tokens, Some(220));
    assert_eq!(panel.usage.cache_read_tokens, None);
    assert_eq!(panel.usage.cost_usd, Some(0.75));
    assert_eq!(panel.timing.started_at, "2025-01-31T12:00:00.000Z");
    assert_eq!(panel.timing.finished_at, "2025-01-31T12:00:03.000Z");
    assert_eq!(panel.timing.duration_ms, 3000);

    let json = serde_json::to_value(&panel).unwrap();
    assert_eq!(json["schemaVersion"], PANEL_SCHEMA);
    assert_eq!(json["findings"][0]["agreedBy"][1], "codex");
    assert_eq!(json["agreement"]["verdicts"][3]["verdict"], "approve");
    assert_eq!(json["agreement"]["verdictsDiffer"], true);
    assert_eq!(json["members"][2]["schemaVersion"], "handoff.result.v1");
    let back: PanelResult = serde_json::from_value(json).unwrap();
    assert_eq!(back, panel);
}

#[test]
fn a_panel_below_its_quorum_fails_and_names_the_failed() {
    let panel = PanelResult::assemble(
        "run-panel",
        vec![
            (
                member("codex"),
                result(AgentId::CODEX, Status::Succeeded, 0, vec![]),
            ),
            (
                member("claude"),
                result(AgentId::CLAUDE, Status::Failed, 7, vec![]),
            ),
        ],
        None,
        false,
    );
    assert_eq!((panel.status, panel.exit.driver), (Status::Failed, 2));
    assert_eq!(panel.quorum, 2);
    assert_eq!(panel.agreement.majority, Some(ReviewVerdict::Approve));
    assert!(!panel.agreement.verdicts_differ);
    assert_eq!(panel.usage.source, UsageSource::NotObserved);
    assert_eq!(panel.usage.input_tokens, None);
    assert_eq!(
        panel.message.as_deref(),
        Some("1 of 2 members succeeded (quorum 2); not succeeded: claude (failed)")
    );
}

#[test]
fn a_policy_block_or_a_cancel_decides_the_panel() {
    let two = |a: (Status, u8), b: (Status, u8)| {
        vec![
            (member("codex"), result(AgentId::CODEX, a.0, a.1, vec![])),
            (member("claude"), result(AgentId::CLAUDE, b.0, b.1, vec![])),
        ]
    };
    let p = PanelResult::assemble(
        "run-panel",
        two((Status::Succeeded, 0), (Status::Blocked, 10)),
        Some(1),
        false,
    );
    assert_eq!((p.status, p.exit.driver), (Status::Blocked, 10));
    assert_eq!(p.message.as_deref(), Some("a policy check blocked claude"));
    let p = PanelResult::assemble(
        "run-panel",
        two((Status::Succeeded, 0), (Status::Cancelled, 9)),
        None,
        true,
    );
    assert_eq!(
        (p.status, p.exit.driver, p.exit.cancelled),
        (Status::Cancelled, 9, true)
    );
    let p = PanelResult::assemble(
        "run-panel",
        two((Status::NotRun, 3), (Status::NotRun, 3)),
        None,
        false,
    );
    assert_eq!((p.status, p.exit.driver), (Status::NotRun, 3));
    assert_eq!(p.agreement.majority, None);
    assert_eq!(
        p.message.as_deref(),
        Some("no member could run: codex (not_run), claude (not_run)")
    );
}

#[test]
fn a_refused_panel_is_a_usage_error() {
    let err = members("codex,codex").unwrap_err();
    let p = PanelResult::rejected(&err, "2025-01-31T12:00:00.000Z");
    assert_eq!((p.status, p.exit.driver), (Status::Rejected, 5));
    assert_eq!(p.message.as_deref(), Some("--harness names codex twice"));
    assert!(p.members.is_empty() && p.agreement.verdicts.is_empty());
}

#[test]
fn majority_ties_go_to_the_more_cautious_verdict() {
    let r = |id: AgentId, sev: Option<Severity>| {
        result(
            id,
            Status::Succeeded,
            0,
            sev.map(|s| finding(s, "x y z")).into_iter().collect(),
        )
    };
    let codex = r(AgentId::CODEX, None);
    let claude = r(AgentId::CLAUDE, Some(Severity::Blocker));
    let a = Agreement::of(&[("codex".into(), &codex), ("claude".into(), &claude)], &[]);
    assert_eq!(a.majority, Some(ReviewVerdict::ChangesRequested));
    assert_eq!(a.dissenting, ["codex"]);
    let low = r(AgentId::CODEX, Some(Severity::Low));
    assert_eq!(
        member_verdict(&low),
        (ReviewVerdict::Approve, VerdictSource::Findings)
    );
}

#[test]
fn a_stated_verdict_wins_over_the_findings_but_not_over_the_status() {
    let mut stated = result(
        AgentId::CODEX,
        Status::Succeeded,
        0,
        vec![finding(Severity::High, "the loop never ends")],
    );
    stated.output.verdict = Some(ReviewVerdict::Approve);
    assert_eq!(
        member_verdict(&stated),
        (ReviewVerdict::Approve, VerdictSource::Stated)
    );
    let mut unsure = result(AgentId::CLAUDE, Status::Succeeded, 0, vec![]);
    unsure.output.verdict = Some(ReviewVerdict::Unsure);
    assert_eq!(
        member_verdict(&unsure),
        (ReviewVerdict::Unsure, VerdictSource::Stated)
    );
    let mut failed = result(AgentId::OPENCODE, Status::Failed, 7, vec![]);
    failed.output.verdict = Some(ReviewVerdict::Approve);
    assert_eq!(
        member_verdict(&failed),
        (ReviewVerdict::Unsure, VerdictSource::Status)
    );
    let derived = result(
        AgentId::CODEX,
        Status::Succeeded,
        0,
        vec![finding(Severity::Medium, "x")],
    );
    assert_eq!(
        member_verdict(&derived),
        (ReviewVerdict::ChangesRequested, VerdictSource::Findings)
    );

    // Two members state `approve`, one states `unsure`: the stated verdicts decide, though the
    // approving member raised a high finding.
    let mut other = result(AgentId::OPENCODE, Status::Succeeded, 0, vec![]);
    other.output.verdict = Some(ReviewVerdict::Approve);
    let a = Agreement::of(
        &[
            ("codex".into(), &stated),
            ("claude".into(), &unsure),
            ("opencode".into(), &other),
        ],
        &[],
    );
    assert_eq!(a.majority, Some(ReviewVerdict::Approve));
    assert_eq!(a.dissenting, ["claude"]);
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["verdicts"][0]["verdictSource"], "stated");
    assert_eq!(json["verdicts"][1]["verdict"], "unsure");
}

#[test]
fn titles_categories_and_line_spans_of_the_contract_decide_the_merge() {
    let f =
        |line: u64, end: Option<u64>, category: Option<&str>, title: &str, body: &str| Finding {
            file: Some("src/a.rs".into()),
            line: Some(line),
            end_line: end,
            category: category.map(str::to_owned),
            severity: Severity::Medium,
            title: Some(title.into()),
            summary: body.into(),
        };
    // Different explanations, the same title words, overlapping spans: one finding whose lines
    // are the union and whose wordings keep each body.
    let codex = [f(
        10,
        Some(20),
        Some("Correctness"),
        "Retry loop never terminates",
        "The loop in fetch() retries forever on a 500.",
    )];
    let claude = [f(
        18,
        Some(24),
        Some("correctness"),
        "The retry loop never terminates",
        "No back-off and no limit: a persistent error spins the CPU.",
    )];
    let merged = merge_findings(
        codex
            .iter()
            .map(|x| ("codex", x))
            .chain(claude.iter().map(|x| ("claude", x))),
    );
    assert_eq!(merged.len(), 1, "{merged:#?}");
    assert_eq!(merged[0].lines, Some(LineRange { start: 10, end: 24 }));
    assert_eq!(merged[0].category, "correctness");
    assert_eq!(merged[0].agreed_by, ["claude", "codex"]);
    assert_eq!(
        merged[0].wordings[1].body.as_deref(),
        Some("The loop in fetch() retries forever on a 500.")
    );
    assert_eq!(merged[0].wordings[1].title, "Retry loop never terminates");

    // The same title, but spans that do not meet, or another category: kept apart.
    for other in [
        f(
            21,
            Some(30),
            Some("correctness"),
            "Retry loop never terminates",
            "b",
        ),
        f(
            5,
            None,
            Some("correctness"),
            "Retry loop never terminates",
            "b",
        ),
        f(
            12,
            Some(14),
            Some("performance"),
            "Retry loop never terminates",
            "b",
        ),
    ] {
        let a = f(
            10,
            Some(20),
            Some("correctness"),
            "Retry loop never terminates",
            "a",
        );
        let b = if other.line == Some(21) {
            f(
                1,
                Some(9),
                Some("correctness"),
                "Retry loop never terminates",
                "a",
            )
        } else {
            a
        };
        let merged = merge_findings([("codex", &b), ("claude", &other)]);
        assert_eq!(merged.len(), 2, "{other:?}");
    }
}

#[test]
fn members_are_nodes_under_the_panel_with_their_advisers_below_them() {
    use crate::request::{BudgetLimits, BudgetRemaining, DelegationMode};
    use crate::result::{DAG_SCHEMA, Dag, DagNode, DagStatus, NodeState};
    let node = |id: &str, parent: Option<&str>, depth: u32, target: AgentId| DagNode {
        run_id: id.into(),
        parent_run_id: parent.map(str::to_owned),
        depth,
        operation: crate::names::Operation::Advice,
        caller_harness: AgentId::CLAUDE,
        target_harness: target,
        mode: None,
        delegation: DelegationMode::AdviceOnly,
        intent_hash: "sha256:i".into(),
        dependencies: vec![],
        state: NodeState::Succeeded,
        request_hash: parent.map(|_| "sha256:nested".to_owned()),
        result_hash: parent.map(|_| "sha256:nested-result".to_owned()),
        started_at: None,
        finished_at: None,
        isolation: None,
        view: None,
        attenuated: None,
    };
    let with_dag = |mut r: HandoffResult, nodes: Vec<DagNode>| {
        r.request_hash = Some(format!("sha256:{}", nodes[0].run_id));
        r.dag = Some(Dag {
            schema_version: DAG_SCHEMA.into(),
            root_run_id: nodes[0].run_id.clone(),
            revision: 3,
            status: DagStatus::Succeeded,
            limits: BudgetLimits::default(),
            remaining: BudgetRemaining {
                nodes: 1,
                advice_nodes: 1,
                handoff_nodes: 0,
            },
            active_count: 0,
            nodes,
        });
        r
    };
    let codex = with_dag(
        result(AgentId::CODEX, Status::Succeeded, 0, vec![]),
        vec![
            node("run-codex", None, 0, AgentId::CODEX),
            node("run-adviser", Some("run-codex"), 1, AgentId::OPENCODE),
        ],
    );
    let claude = with_dag(
        result(AgentId::CLAUDE, Status::Succeeded, 0, vec![]),
        vec![node("run-claude", None, 0, AgentId::CLAUDE)],
    );
    // A member refused before its request was built has no DAG, and no node.
    let refused = result(AgentId::OPENCODE, Status::Rejected, 5, vec![]);
    let panel = PanelResult::assemble(
        "run-panel",
        vec![
            (member("codex"), codex.clone()),
            (member("claude"), claude),
            (member("opencode"), refused),
        ],
        Some(1),
        false,
    );
    assert_eq!(panel.run_id.as_deref(), Some("run-panel"));
    let shape: Vec<(&str, Option<&str>, u32)> = panel
        .nodes
        .iter()
        .map(|n| (n.run_id.as_str(), n.parent_run_id.as_deref(), n.depth))
        .collect();
    assert_eq!(
        shape,
        [
            ("run-codex", Some("run-panel"), 1),
            ("run-adviser", Some("run-codex"), 2),
            ("run-claude", Some("run-panel"), 1),
        ]
    );
    // A member's node names its request and its result as embedded in `members`.
    assert_eq!(
        panel.nodes[0].request_hash.as_deref(),
        Some("sha256:run-codex")
    );
    let embedded = serde_json::to_vec(&panel.members[0]).unwrap();
    assert_eq!(
        panel.nodes[0].result_hash,
        Some(format!(
            "sha256:{}",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&embedded))
        ))
    );
    // The adviser keeps its own hashes; each member's own result keeps its own DAG.
    assert_eq!(
        panel.nodes[1].result_hash.as_deref(),
        Some("sha256:nested-result")
    );
    assert_eq!(panel.members[0].dag, codex.dag);
    let json = serde_json::to_value(&panel).unwrap();
    assert_eq!(json["runId"], "run-panel");
    assert_eq!(json["nodes"][0]["parentRunId"], "run-panel");
}
