//! `try_continue_task` on the fake agents: a refusal names the input it refused and changes
//! nothing; a failure after the checkpoint names its phase and is never a refusal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use handoff_continue::{
    ContinueContext, ContinueError, ContinueRequest, Failed, Fallback, NoteInput, Phase, Rejection,
    Stopped, try_continue_task,
};
use handoff_core::{ContinueOutcome, Engine, EngineOptions, TaskStore};
use handoff_store::SqliteStore;
use handoff_testkit::{FakeAgents, ScratchRepo};

const SECTIONS: [&str; 9] = [
    "Goal",
    "Current state",
    "Done and verified",
    "In progress",
    "Next steps",
    "Decisions and constraints",
    "Open questions",
    "How to verify",
    "Git state",
];

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    repo: ScratchRepo,
    _agents: FakeAgents,
    env: BTreeMap<String, String>,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::Builder::new()
            .prefix("handoff-typed-")
            .tempdir()
            .unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let agents = FakeAgents::install(&root).with_sandbox_tools();
        for dir in ["home", "tmp"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        let repo = ScratchRepo::new();
        for (k, v) in [
            ("user.name", "handoff test"),
            ("user.email", "test@example.invalid"),
            ("commit.gpgsign", "false"),
        ] {
            repo.git(&["config", k, v]);
        }
        let env = [
            ("PATH", agents.path_env().to_string_lossy().into_owned()),
            ("HOME", root.join("home").to_string_lossy().into_owned()),
            ("TMPDIR", root.join("tmp").to_string_lossy().into_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        World {
            _tmp: tmp,
            root,
            repo,
            _agents: agents,
            env,
        }
    }

    fn note(&self, sections: &[&str]) -> NoteInput {
        let mut text = String::from("# Handoff note\n");
        for s in sections {
            text.push_str(&format!("\n## {s}\n\nAbout {s}.\n"));
        }
        NoteInput::Bytes {
            label: "note".into(),
            bytes: text.into_bytes(),
        }
    }

    fn request(&self) -> ContinueRequest {
        let mut r = ContinueRequest::new(
            "codex",
            self.repo.path().to_string_lossy(),
            self.note(&SECTIONS),
        );
        r.from = Some("claude".into());
        r.fallback = Some(Fallback::FreshAgent);
        r
    }

    fn run(
        &self,
        request: &ContinueRequest,
    ) -> (Result<handoff_core::ContinueResult, Stopped>, SqliteStore) {
        let mut options = EngineOptions::from_process();
        options.env = self.env.clone();
        options.preflight_cache = None;
        options.tmp_dir = Some(self.root.join("tmp").to_string_lossy().into_owned().into());
        let engine = Engine::new(
            handoff_adapters::default_registry(),
            Arc::new(handoff_git::GitWorkspace::new()),
            options,
        );
        let store = SqliteStore::open_default(&self.env).unwrap();
        let state_dir = self.root.join("home/.local/state/handoff");
        let ctx = ContinueContext {
            engine: &engine,
            store: &store,
            state_dir: state_dir.to_string_lossy().into_owned().into(),
            env: self.env.clone(),
        };
        let (_keep, cancel) = tokio::sync::watch::channel(false);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let out = runtime.block_on(try_continue_task(request, &ctx, cancel));
        (out, store)
    }

    fn worktree(&self) -> camino::Utf8PathBuf {
        camino::Utf8PathBuf::from(self.repo.path().to_string_lossy().into_owned())
    }

    fn head(&self) -> String {
        self.repo.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }
}

/// The field a refusal names; panics unless the continuation was refused.
fn refused(out: Result<handoff_core::ContinueResult, Stopped>) -> &'static str {
    match out {
        Err(Stopped {
            result,
            error: ContinueError::Rejected(Rejection { field, reason }),
        }) => {
            assert_eq!(result.outcome, ContinueOutcome::Rejected);
            assert_eq!(result.exit_code, 5);
            assert_eq!(result.reason.as_deref(), Some(reason.as_str()));
            assert!(result.handoff_id.is_none());
            field
        }
        other => panic!("not refused: {other:?}"),
    }
}

/// A change to a valid request.
type Change = Box<dyn Fn(&mut ContinueRequest)>;

#[test]
fn each_refusal_names_its_input_and_changes_nothing() {
    let w = World::new();
    w.repo.write("README.md", "# changed\n");
    let head = w.head();
    let cases: Vec<(&str, Change)> = vec![
        ("--to", Box::new(|r| r.to = Some("nobody".into()))),
        (
            "destination",
            Box::new(|r| r.destination = Some("codex hgih".into())),
        ),
        (
            "destination",
            Box::new(|r| r.destination = Some("claude on this machine".into())),
        ),
        (
            "--account",
            Box::new(|r| r.account = Some("no such/name".into())),
        ),
        ("--message", Box::new(|r| r.message = Some("  ".into()))),
        ("--from", Box::new(|r| r.from = None)),
        ("--from", Box::new(|r| r.from = Some("nobody".into()))),
        ("note", {
            let short = w.note(&SECTIONS[..8]);
            Box::new(move |r| r.note = short.clone())
        }),
        ("--cwd", Box::new(|r| r.cwd = "relative/dir".into())),
        ("--push", Box::new(|r| r.push = true)),
        ("--on", Box::new(|r| r.on = Some("-oProxyCommand=x".into()))),
    ];
    for (field, change) in cases {
        let mut request = w.request();
        change(&mut request);
        let (out, store) = w.run(&request);
        assert_eq!(refused(out), field, "{request:?}");
        assert_eq!(w.head(), head, "{field}: HEAD moved");
        let task = store.task_for_worktree(&w.worktree());
        assert!(
            matches!(task, Ok(None)),
            "{field}: a task was made: {task:?}"
        );
    }
}

#[test]
fn a_request_for_a_destination_phrase_plans_the_receiver_it_names() {
    let w = World::new();
    w.repo.write("README.md", "# changed\n");
    let head = w.head();
    let mut request = ContinueRequest::to_destination(
        "codex gpt-5 high",
        w.repo.path().to_string_lossy(),
        w.note(&SECTIONS),
    );
    request.from = Some("claude".into());
    request.fallback = Some(Fallback::FreshAgent);
    request.dry_run = true;
    let (out, _) = w.run(&request);
    let result = out.expect("a dry run");
    assert_eq!(result.outcome, ContinueOutcome::DryRun);
    let target = result.target.expect("a target");
    assert_eq!(target.provider.as_str(), "codex");
    assert_eq!(target.model.as_deref(), Some("gpt-5"));
    assert_eq!(target.effort.as_deref(), Some("high"));
    let read = result.destination.expect("the reading");
    assert_eq!(read.phrase, "codex gpt-5 high");
    assert_eq!(w.head(), head);
}

#[test]
fn a_detached_head_is_a_refusal_of_the_repository() {
    let w = World::new();
    let head = w.head();
    w.repo.git(&["checkout", "-q", "--detach", &head]);
    let (out, _) = w.run(&w.request());
    assert_eq!(refused(out), "repository");
}

#[test]
fn a_failed_push_after_the_checkpoint_is_a_failure_of_the_push_not_a_refusal() {
    let w = World::new();
    let missing = w.root.join("no-such-remote.git");
    w.repo
        .git(&["remote", "add", "origin", &missing.to_string_lossy()]);
    w.repo.write("README.md", "# changed\n");
    let before = w.head();
    let mut request = w.request();
    request.push = true;
    let (out, store) = w.run(&request);
    let Err(Stopped {
        result,
        error: ContinueError::Failed(Failed { phase, message }),
    }) = out
    else {
        panic!("not a failure: {out:?}");
    };
    assert_eq!(phase, Phase::Push, "{message}");
    assert_eq!(result.outcome, ContinueOutcome::NotStarted);
    assert_eq!(result.exit_code, 1);
    // The checkpoint was made and recorded before the push failed.
    let checkpoint = result.checkpoint.and_then(|c| c.commit).unwrap();
    assert_ne!(checkpoint, before);
    assert_eq!(w.head(), checkpoint);
    assert!(
        message.contains(&format!("checkpoint {checkpoint} kept")),
        "{message}"
    );
    let task = store.task_for_worktree(&w.worktree()).unwrap().unwrap();
    assert_eq!(result.task_id, Some(task.id));
}

#[test]
fn a_receiver_that_ran_is_ok_whatever_its_continuity() {
    let w = World::new();
    w.repo.write("README.md", "# changed\n");
    let (out, _) = w.run(&w.request());
    let result = out.unwrap_or_else(|s| panic!("stopped: {:?}", s.error));
    assert_eq!(result.outcome, ContinueOutcome::Started);
    assert_eq!(result.exit_code, 0);
}
