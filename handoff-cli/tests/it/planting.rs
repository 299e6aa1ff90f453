//! A program planted where a developer's PATH looks (`node_modules/.bin`, relative or
//! absolute, inside the worktree an agent writes) never runs: every program handoff starts is
//! found outside the repository's worktrees.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::{Run, Sandbox};

/// Plants `git`, `codex`, `bwrap` and `socat` in the worktree's `node_modules/.bin`; each
/// leaves a marker in the sandbox root when run.
fn plant(sb: &Sandbox) -> std::path::PathBuf {
    let bin = sb.repo.path().join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["git", "codex", "bwrap", "socat"] {
        let p = bin.join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$0 $*\" >> '{}'\nexit 1\n",
                sb.root.join(format!("ran-planted-{name}")).display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

fn run_in_repo(sb: &Sandbox, bin: &Path, args: &[&str]) -> Run {
    let mut cmd = sb.command();
    let path = format!(
        "{}:node_modules/.bin:{}",
        bin.display(),
        sb.agents.path_env().to_string_lossy()
    );
    cmd.env("PATH", path).current_dir(sb.repo.path()).args(args);
    sb.exec(&mut cmd)
}

fn planted_runs(sb: &Sandbox) -> Vec<String> {
    std::fs::read_dir(&sb.root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ran-planted-"))
        .collect()
}

#[test]
fn programs_planted_in_the_worktree_never_run() {
    let sb = crate::continuation::sandbox();
    sb.record();
    let bin = plant(&sb);
    let caps = run_in_repo(&sb, &bin, &["capabilities", "--json"]);
    assert_eq!(caps.code, 0, "{caps:?}");
    let codex = caps.json["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "codex")
        .unwrap();
    let path = codex["preflight"]["path"].as_str().unwrap_or("");
    assert!(!path.contains("node_modules"), "{path}");
    let doctor = run_in_repo(&sb, &bin, &["doctor", "--json"]);
    let git = doctor.json["programs"]["git"].as_str().unwrap_or("");
    assert!(
        git.starts_with('/') && !git.contains("node_modules"),
        "{}",
        doctor.json["programs"]
    );
    assert!(
        !doctor.stdout.contains("node_modules/.bin/codex"),
        "{doctor:?}"
    );

    let cwd = sb.cwd();
    let ins = sb.instructions("Make the change described here, then report.");
    let build = run_in_repo(
        &sb,
        &bin,
        &[
            "run",
            "--caller-harness",
            "claude",
            "--harness",
            "codex",
            "--mode",
            "build",
            "--cwd",
            &cwd,
            "--instructions",
            &ins,
        ],
    );
    assert_eq!(build.code, 0, "{build:?}");
    // The agent itself still runs with the PATH the person gave (its tools are there).
    let runs = sb.runs();
    let agent_path = runs[0]["env"]["PATH"].as_str().unwrap_or("");
    assert!(agent_path.contains("node_modules/.bin"), "{agent_path}");
    let checkpoint = run_in_repo(
        &sb,
        &bin,
        &[
            "checkpoint",
            "--cwd",
            &cwd,
            "fake-build.txt",
            "-m",
            "the build",
            "--agent",
            "codex",
        ],
    );
    assert_eq!(checkpoint.code, 0, "{checkpoint:?}");
    let log = run_in_repo(&sb, &bin, &["log", "--cwd", &cwd]);
    assert_eq!(log.code, 0, "{log:?}");
    let attribute = run_in_repo(&sb, &bin, &["attribute", "--cwd", &cwd]);
    assert_eq!(attribute.code, 0, "{attribute:?}");
    assert_eq!(planted_runs(&sb), Vec::<String>::new());
}

/// File names and note bodies an agent wrote reach the terminal escaped: an OSC 52 clipboard
/// write or a screen clear in them is shown, not obeyed.
#[test]
fn attribute_and_note_render_print_agent_text_escaped() {
    let sb = crate::continuation::sandbox();
    let cwd = sb.cwd();
    let build = sb.delegate("claude", "codex", "build", &[]);
    assert_eq!(build.code, 0, "{build:?}");
    let hostile = "osc\u{1b}]52;c;aGk=\u{7}clear\u{1b}[2J.txt";
    sb.repo.write(hostile, "x\n");
    let attribute = sb.run(&["attribute", "--cwd", &cwd]);
    assert!(
        !attribute.stdout.contains('\u{1b}'),
        "{:?}",
        attribute.stdout
    );
    assert!(
        !attribute.stderr.contains('\u{1b}'),
        "{:?}",
        attribute.stderr
    );

    let mut note = String::from("# Handoff note\n");
    for section in crate::note::SECTIONS {
        note.push_str(&format!(
            "\n## {section}\n\nText \u{1b}[2J with an escape.\n"
        ));
    }
    let file = sb.private.join("hostile-note.md");
    std::fs::write(&file, note).unwrap();
    let rendered = sb.run(&["note", "render", &file.to_string_lossy(), "--cwd", &cwd]);
    assert_eq!(rendered.code, 0, "{rendered:?}");
    assert!(!rendered.stdout.contains('\u{1b}'), "{:?}", rendered.stdout);
    assert!(
        rendered.stdout.contains("\\x1b[2J"),
        "{:?}",
        rendered.stdout
    );
    let bad = sb.run(&["attribute", "--task", "task-\u{1b}[2J"]);
    assert!(!bad.stderr.contains('\u{1b}'), "{:?}", bad.stderr);
}
