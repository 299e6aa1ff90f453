//! What an agent writes never steers the user's terminal: its stderr, the names of the files it
//! creates and its answer reach handoff's stderr with every control character and bidirectional
//! override shown as an escape (an OSC 52 sequence would otherwise set the clipboard, `ESC[2J`
//! clear the screen, a carriage return overwrite the line handoff printed).

use handoff_testkit::keys::{MODE, SHELL};

use crate::support::Sandbox;

/// No raw control character other than newline, and no bidirectional control.
fn assert_inert(stderr: &str) {
    let bad: Vec<char> = stderr
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(
        bad.is_empty(),
        "raw {bad:?} reached the terminal: {stderr:?}"
    );
}

#[test]
fn an_agents_stderr_cannot_steer_the_terminal() {
    let sb = Sandbox::new();
    sb.agents.set(MODE, "failed");
    // Sets the clipboard (OSC 52), returns to the start of the line, reverses what follows.
    sb.agents.set(
        SHELL,
        r"printf '\033]52;c;ZXZpbA==\007 \r\342\200\256gnp.exe\n'",
    );
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "failed", "{run:?}");
    assert!(
        run.stderr.contains("\\x1b]52;c;ZXZpbA==\\x07"),
        "the sequence is shown, escaped: {:?}",
        run.stderr
    );
    assert!(run.stderr.contains("\\u{202e}gnp.exe"), "{:?}", run.stderr);
    assert_inert(&run.stderr);
}

#[test]
fn a_file_name_an_agent_chose_cannot_steer_the_terminal() {
    let sb = Sandbox::new();
    // A review that creates a file whose name clears the screen: blocked, and the message that
    // names the file shows the name escaped.
    sb.agents
        .set(SHELL, r#"printf x > "$(printf 'evil\033[2Jname')""#);
    let run = sb.delegate("claude", "codex", "review", &[]);
    assert_eq!(run.status(), "blocked", "{run:?}");
    assert!(
        run.json["git"]["changedFiles"][0]
            .as_str()
            .is_some_and(|f| f.contains('\u{1b}')),
        "the result keeps the real name: {run:?}"
    );
    assert!(run.stderr.contains("evil\\x1b[2Jname"), "{:?}", run.stderr);
    assert_inert(&run.stderr);
}

#[test]
fn the_timeline_shows_what_was_recorded_without_steering_the_terminal() {
    let sb = Sandbox::new();
    sb.repo.git(&["config", "user.name", "t"]);
    sb.repo.git(&["config", "user.email", "t@t"]);
    sb.repo.write("notes.txt", "x\n");
    let cwd = sb.cwd();
    let run = sb.run(&[
        "checkpoint",
        "--cwd",
        &cwd,
        "--agent",
        "claude",
        "notes.txt",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    // A turn whose summary an agent wrote, as a continuation records it.
    let env = std::collections::BTreeMap::from([(
        "HOME".to_owned(),
        sb.root.join("home").to_string_lossy().into_owned(),
    )]);
    let store = handoff_store::SqliteStore::open_default(&env).unwrap();
    use handoff_core::TaskStore as _;
    let task = store.tasks(None).unwrap().remove(0);
    let turn = handoff_core::Turn {
        author: handoff_core::AgentRef {
            provider: handoff_core::AgentId::CODEX,
            model: None,
        },
        summary: "done \u{1b}]52;c;ZXZpbA==\u{7}\u{202e}txt.exe".into(),
    };
    store.append(&task.id, &turn.into()).unwrap();
    drop(store);
    let log = sb.run(&["log", "--cwd", &cwd]);
    assert_eq!(log.code, 0, "{log:?}");
    assert!(log.stdout.contains("\\x1b]52"), "{:?}", log.stdout);
    assert_inert(&log.stdout);
}
