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

/// The default engine in the sandbox's environment, recording runs in `store`.
fn engine_for(sb: &Sandbox, store: Option<handoff_core::SharedTaskStore>) -> handoff_core::Engine {
    engine_with(options_for(sb, store))
}

/// The default engine with `options`.
pub fn engine_with(options: handoff_core::EngineOptions) -> handoff_core::Engine {
    handoff_core::Engine::new(
        handoff_adapters::default_registry(),
        std::sync::Arc::new(handoff_git::GitWorkspace::new()),
        options,
    )
}

/// The default engine's options in the sandbox's environment, recording runs in `store`.
pub fn options_for(
    sb: &Sandbox,
    store: Option<handoff_core::SharedTaskStore>,
) -> handoff_core::EngineOptions {
    let mut options = handoff_core::EngineOptions::from_process();
    options.env = env_of(sb);
    options.preflight_cache = None;
    options.tmp_dir = Some(sb.tmp.to_string_lossy().into_owned().into());
    options.task_store = store;
    // Leases of its own: this test process becomes a root run while the engine runs, and
    // `handoff` processes other tests start meanwhile must not be taken for runs inside it.
    options.runtime_dir = Some(
        camino::Utf8PathBuf::from_path_buf(sb.root.join("runtime")).expect("UTF-8 sandbox path"),
    );
    options
}

/// `run --caller-harness claude --harness codex --mode <mode>` in the sandbox's repository.
pub fn run_input(sb: &Sandbox, mode: &str) -> handoff_core::RunInput {
    let mut input = handoff_core::RunInput::new(handoff_core::Verb::Run);
    input.caller_harness = Some("claude".into());
    input.harness = Some("codex".into());
    input.mode = Some(mode.into());
    input.cwd = Some(sb.cwd());
    input.instructions = Some(handoff_core::Instructions::Stdin(
        b"Change something.".to_vec(),
    ));
    input
}

fn run_on(engine: &handoff_core::Engine, sb: &Sandbox, mode: &str) -> handoff_core::RunOutcome {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (_keep, cancel) = tokio::sync::watch::channel(false);
    runtime.block_on(engine.run(run_input(sb, mode), cancel))
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
    // This test process holds the lease while it continues: in a runtime directory of its
    // own, so that `handoff` processes other tests start meanwhile are not taken for runs
    // inside it.
    let leases = tempfile::tempdir().unwrap();
    let env = env_of(&by_library);
    let engine = handoff_examples::continue_task::engine_with(&env, |o| {
        o.runtime_dir = Some(camino::Utf8PathBuf::from_path_buf(leases.path().to_owned()).unwrap());
    })
    .unwrap();
    let library = runtime
        .block_on(handoff_examples::continue_task::continue_on(
            &engine, env, &request,
        ))
        .unwrap();
    let library = serde_json::to_value(&library).unwrap();

    assert_eq!(library["outcome"], "started", "{library:#}");
    assert_eq!(
        normalized(&library, &by_library),
        normalized(&cli.json, &by_cli)
    );
}

/// A program that embeds the engine with a task store gets its root runs in the worktree's
/// timeline, as `handoff run` does.
#[test]
fn an_embedders_runs_reach_the_timeline() {
    use std::sync::Arc;

    use handoff_core::{SharedTaskStore, TaskStore, TimelineEvent};

    let sb = sandbox();
    let env = env_of(&sb);
    let store = Arc::new(handoff_store::SqliteStore::open_default(&env).unwrap());
    let engine = engine_for(
        &sb,
        Some(SharedTaskStore::new(
            Arc::clone(&store) as Arc<dyn TaskStore>
        )),
    );
    let outcome = run_on(&engine, &sb, "build");
    assert_eq!(outcome.exit_code, 0, "{}", outcome.line);
    assert_eq!(outcome.record_warning, None);

    let task = store
        .task_for_worktree(camino::Utf8Path::new(&sb.cwd()))
        .unwrap()
        .expect("a task for the worktree");
    assert_eq!(task.agent.provider.as_str(), "claude");
    let runs: Vec<_> = store
        .timeline(&task.id)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            TimelineEvent::DelegatedRun(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        Some(&runs[0].run_id),
        outcome.result.lineage.as_ref().map(|l| &l.run_id)
    );
    assert_eq!(runs[0].target.as_str(), "codex");
}

/// An embedder learns which input validation refused, beside the result the CLI prints for it.
#[test]
fn an_embedder_learns_which_input_was_refused() {
    use handoff_core::InputRejection;

    let sb = sandbox();
    let engine = engine_for(&sb, None);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let input = run_input(&sb, "fix");
    let outcome = run_on(&engine, &sb, "fix");
    assert_eq!(outcome.exit_code, 5, "{}", outcome.line);
    assert_eq!(outcome.rejected_field, Some("--mode"));
    let message = "--mode must be one of build, phase, review, verify; got \"fix\"";
    assert_eq!(outcome.result.diagnostics.message.as_deref(), Some(message));

    let rejection = InputRejection::new("--mode", message);
    let early = runtime.block_on(engine.reject_input(input.clone(), rejection));
    assert_eq!(early.rejected_field, Some("--mode"));
    assert_eq!(early.result.diagnostics.message.as_deref(), Some(message));
    let plain = runtime.block_on(engine.reject(input, message.to_owned()));
    assert_eq!(plain.rejected_field, None);
    assert_eq!(plain.result.status, early.result.status);
}
