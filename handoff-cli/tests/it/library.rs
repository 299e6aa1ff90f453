//! The library does what the CLI does: `handoff_continue::continue_task`, called the way
//! `examples/continue_task.rs` calls it, prints the same `handoff.continue.v1` result as
//! `handoff continue` for the same inputs on the same kind of repository.

use std::collections::BTreeMap;
use std::time::Duration;

use handoff_continue::{ContinueRequest, Fallback, NoteInput};
use regex::Regex;
use serde_json::Value;

use crate::continuation::{note_file, sandbox};
use crate::note::SECTIONS;
use crate::support::Sandbox;

/// The environment `Sandbox::command` gives `handoff`.
fn env_of(sb: &Sandbox) -> BTreeMap<String, String> {
    [
        ("PATH", sb.agents.path_env().to_string_lossy().into_owned()),
        ("HOME", sb.root.join("home").to_string_lossy().into_owned()),
        ("TMPDIR", sb.tmp.to_string_lossy().into_owned()),
        ("LANG", "C.UTF-8".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The result with what differs between two runs (the sandbox's path, ids, commits, times,
/// digests) replaced by placeholders.
fn normalized(result: &Value, sb: &Sandbox) -> String {
    let text = serde_json::to_string_pretty(result).unwrap();
    let text = text
        .replace(&sb.cwd(), "<REPO>")
        .replace(&*sb.root.to_string_lossy(), "<ROOT>");
    let rules = [
        (r"sha256:[0-9a-f]{64}", "<DIGEST>"),
        (r"\b[0-9a-f]{40}\b", "<COMMIT>"),
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "<UUID>",
        ),
        (r"\d{4}-\d\d-\d\dT[0-9:.]+Z", "<TIME>"),
        (r"\d{8}T\d{6,}Z", "<TIME>"),
        (r#""durationMs": \d+"#, r#""durationMs": 0"#),
    ];
    rules.iter().fold(text, |text, (pattern, to)| {
        Regex::new(pattern)
            .unwrap()
            .replace_all(&text, *to)
            .into_owned()
    })
}

fn prepared() -> Sandbox {
    let sb = sandbox();
    sb.repo.write(
        "src/lib.rs",
        "pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    2\n}\n",
    );
    sb
}

#[test]
fn the_library_continues_a_task_exactly_as_the_cli_does() {
    let by_cli = prepared();
    let note = note_file(&by_cli, "note.md", &SECTIONS);
    let cwd = by_cli.cwd();
    let cli = by_cli.run(&[
        "continue",
        "--cwd",
        &cwd,
        "--note-file",
        &note,
        "--from",
        "claude",
        "--to",
        "codex",
        "--message",
        "finish two()",
        "--fallback",
        "fresh-agent",
        "--quiet",
    ]);
    assert_eq!(cli.code, 0, "{cli:#?}");

    let by_library = prepared();
    let note = note_file(&by_library, "note.md", &SECTIONS);
    let mut request = ContinueRequest::new("codex", by_library.cwd(), NoteInput::File(note));
    request.from = Some("claude".into());
    request.message = Some("finish two()".into());
    request.fallback = Some(Fallback::FreshAgent);
    assert_eq!(request.timeout, Duration::from_secs(30 * 60));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let library = runtime
        .block_on(handoff_examples::continue_task::continue_with(
            env_of(&by_library),
            &request,
        ))
        .unwrap();
    let library = serde_json::to_value(&library).unwrap();

    assert_eq!(library["outcome"], "started", "{library:#}");
    assert_eq!(
        normalized(&library, &by_library),
        normalized(&cli.json, &by_cli)
    );
}
