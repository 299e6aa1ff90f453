//! The live status line: drawn on a terminal (a pty here), never off one or with `--quiet`.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::Stdio;

use crate::support::Sandbox;

/// Runs a build on the fake Codex with stderr on `stderr`.
fn build_output(sb: &Sandbox, stderr: Stdio, extra: &[&str]) -> std::process::Output {
    let ins = sb.instructions("Make the change.");
    let cwd = sb.cwd();
    let mut cmd = sb.command();
    cmd.args(["run", "--caller-harness", "claude", "--harness", "codex"])
        .args(["--mode", "build", "--cwd", &cwd, "--instructions", &ins])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(stderr);
    cmd.output().unwrap()
}

/// [`build_output`]'s exit code and stdout.
fn build(sb: &Sandbox, stderr: Stdio, extra: &[&str]) -> (i32, String) {
    let out = build_output(sb, stderr, extra);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// A pty `columns` wide whose two ends are not inherited by processes other tests start
/// meanwhile.
fn pty(columns: u16) -> nix::pty::OpenptyResult {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    for fd in [&pty.master, &pty.slave] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).unwrap();
    }
    pty
}

/// Everything written to the pty until its slave side is closed by the child's exit.
fn drain(master: OwnedFd) -> String {
    let mut file = std::fs::File::from(master);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match file.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_terminal_gets_a_status_line_and_a_summary() {
    let sb = Sandbox::new();
    let pty = pty(200);
    let reader = std::thread::spawn(move || drain(pty.master));
    let (code, stdout) = build(&sb, Stdio::from(pty.slave), &[]);
    let drawn = reader.join().unwrap();
    assert_eq!(code, 0, "{drawn}");
    // stdout is still exactly the one JSON line.
    assert_eq!(stdout.lines().count(), 1);
    assert!(serde_json::from_str::<serde_json::Value>(&stdout).is_ok());
    assert!(drawn.contains("handoff: codex build · 0s"), "{drawn:?}");
    assert!(
        drawn.contains("\r\u{1b}[2K"),
        "the line is cleared: {drawn:?}"
    );
    assert!(
        drawn.contains("handoff: succeeded · codex build · 1 changed file(s): fake-build.txt"),
        "{drawn:?}"
    );
}

#[test]
fn a_continuation_on_a_terminal_ends_with_a_summary_and_the_resume_command() {
    let sb = crate::continuation::sandbox();
    let note = crate::continuation::note_file(&sb, "note.md", &crate::note::SECTIONS);
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    7\n}\n");
    let pty = pty(200);
    let reader = std::thread::spawn(move || drain(pty.master));
    let cwd = sb.cwd();
    let out = sb
        .command()
        .args([
            "continue",
            "codex",
            "--from",
            "claude",
            "--fallback",
            "fresh-agent",
        ])
        .args(["--cwd", &cwd, "--note-file", &note])
        .stdout(Stdio::piped())
        .stderr(Stdio::from(pty.slave))
        .output()
        .unwrap();
    let drawn = reader.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{drawn}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    assert!(
        drawn.contains("handoff: started · codex (implement) · checkpoint "),
        "{drawn:?}"
    );
    assert!(drawn.contains("continuity fresh-agent"), "{drawn:?}");
    assert!(drawn.contains("  resume it: cd "), "{drawn:?}");
}

#[test]
fn quiet_or_off_a_terminal_stderr_has_only_diagnostics() {
    let sb = Sandbox::new();
    let pty = pty(200);
    let reader = std::thread::spawn(move || drain(pty.master));
    let (code, _) = build(&sb, Stdio::from(pty.slave), &["--quiet"]);
    let drawn = reader.join().unwrap();
    assert_eq!(code, 0);
    assert_eq!(drawn, "", "--quiet draws nothing on a success");

    let sb = Sandbox::new();
    let out = build_output(&sb, Stdio::piped(), &[]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "a pipe gets no status line"
    );
    // A failure is still reported.
    sb.agents.set("HANDOFF_FAKE_MODE", "no-change");
    let out = build_output(&sb, Stdio::piped(), &[]);
    assert_eq!(out.status.code(), Some(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("handoff: "), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
}

/// The status line fits the terminal's width, as the terminal reports it (not `$COLUMNS`).
#[test]
fn the_status_line_fits_the_terminal() {
    let sb = Sandbox::new();
    let pty = pty(30);
    let reader = std::thread::spawn(move || drain(pty.master));
    let ins = sb.instructions("Make the change.");
    let cwd = sb.cwd();
    let out = sb
        .command()
        .args(["run", "--caller-harness", "claude", "--harness", "codex"])
        .args(["--mode", "build", "--cwd", &cwd, "--instructions", &ins])
        .env("COLUMNS", "200")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(pty.slave))
        .output()
        .unwrap();
    let drawn = reader.join().unwrap();
    assert!(out.status.success(), "{drawn}");
    let lines: Vec<&str> = drawn
        .split("\r\u{1b}[2K")
        .filter(|l| l.starts_with("handoff: codex build"))
        .collect();
    assert!(!lines.is_empty(), "{drawn:?}");
    for line in lines {
        assert!(
            line.chars().count() <= 29,
            "{line:?} is wider than the terminal"
        );
    }
}
