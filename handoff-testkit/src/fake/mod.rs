//! The `fake-agent` binary: one executable that imitates each agent CLI handoff drives.
//!
//! Tests install it under a CLI's executable name (`claude`, `codex`, `grok`, `kiro-cli`,
//! `opencode`, `cursor-agent`, `copilot`, `gemini`, `qwen`); it dispatches on the basename of `argv[0]`. Invoked as
//! `fake-agent <name> ARGS…` it behaves as `<name> ARGS…`.
//!
//! Everything here is behaviour for tests, not product code: see the crate docs for the switches.

pub(crate) mod advice;
pub(crate) mod api_error;
pub(crate) mod args;
pub(crate) mod json;
pub(crate) mod receiver;
pub(crate) mod record;
pub mod settings;
pub(crate) mod util;

mod claude;
mod claude_store;
mod codex;
mod codex_store;
mod copilot;
mod cursor;
mod gemini;
mod grok;
mod grok_community;
mod kiro;
mod leftovers;
mod opencode;
mod qwen;
mod task;

use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use record::Recorder;
use settings::Settings;

/// The executable names the fake answers to.
pub const EXECUTABLES: [&str; 9] = [
    "claude",
    "codex",
    "grok",
    "kiro-cli",
    "opencode",
    "cursor-agent",
    "copilot",
    "gemini",
    "qwen",
];

/// Which CLI this process imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exe {
    Claude,
    Codex,
    Grok,
    Kiro,
    OpenCode,
    Cursor,
    Copilot,
    Gemini,
    Qwen,
}

impl Exe {
    fn from_name(name: &str) -> Option<Exe> {
        Some(match name {
            "claude" => Exe::Claude,
            "codex" => Exe::Codex,
            "grok" => Exe::Grok,
            "kiro-cli" => Exe::Kiro,
            "opencode" => Exe::OpenCode,
            "cursor-agent" => Exe::Cursor,
            "copilot" => Exe::Copilot,
            "gemini" => Exe::Gemini,
            "qwen" => Exe::Qwen,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Exe::Claude => "claude",
            Exe::Codex => "codex",
            Exe::Grok => "grok",
            Exe::Kiro => "kiro-cli",
            Exe::OpenCode => "opencode",
            Exe::Cursor => "cursor-agent",
            Exe::Copilot => "copilot",
            Exe::Gemini => "gemini",
            Exe::Qwen => "qwen",
        }
    }
}

/// One invocation: who we are, the arguments after `argv[0]`, the settings and the record.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) exe: Exe,
    pub(crate) args: Vec<String>,
    pub(crate) settings: Settings,
    recorder: Recorder,
    /// The CLI runs its model's shell commands with `/bin/sh`, whatever `$SHELL` says.
    pub(crate) plain_sh: bool,
}

impl Ctx {
    /// The version number to report: `HANDOFF_FAKE_VERSION` or `default`.
    pub(crate) fn version(&self, default: &str) -> String {
        self.settings
            .get(settings::VERSION)
            .unwrap_or_else(|| default.to_owned())
    }

    /// `HANDOFF_FAKE_HELP=missing`: help output must omit one flag the adapter requires.
    pub(crate) fn help_missing(&self) -> bool {
        self.settings.get(settings::HELP).as_deref() == Some("missing")
    }

    /// Prints `help` (minus `required_flag` when `HANDOFF_FAKE_HELP=missing`).
    pub(crate) fn print_help(&self, help: &str, required_flag: &str) -> ExitCode {
        if self.help_missing() {
            util::out(util::help_without(help, required_flag).as_bytes());
        } else {
            util::out(help.as_bytes());
        }
        ExitCode::SUCCESS
    }

    /// Reads all of stdin and stores it in the invocation record.
    pub(crate) fn read_stdin(&mut self) -> Vec<u8> {
        let mut buf = Vec::new();
        if let Err(e) = std::io::stdin().lock().read_to_end(&mut buf) {
            util::err_line(&format!("fake-agent: cannot read stdin: {e}"));
        }
        self.recorder.set_stdin(&buf);
        buf
    }
}

/// Entry point of the `fake-agent` binary.
pub fn main() -> ExitCode {
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    let argv0 = if argv.is_empty() {
        OsString::new()
    } else {
        argv.remove(0)
    };
    let settings = Settings::load(&argv0);
    let base = basename(&argv0);
    let exe = match Exe::from_name(&base) {
        Some(exe) => exe,
        None => {
            // `fake-agent <name> ARGS…`
            let named = argv
                .first()
                .and_then(|a| a.to_str())
                .and_then(Exe::from_name);
            match named {
                Some(exe) => {
                    argv.remove(0);
                    exe
                }
                None => {
                    util::err_line(&format!(
                        "fake-agent: invoked as `{base}`; install it as one of {} (or run `fake-agent <name> ARGS…`)",
                        EXECUTABLES.join(", ")
                    ));
                    return ExitCode::from(2);
                }
            }
        }
    };
    let recorder = Recorder::start(settings.get(settings::RECORD_DIR), exe.name(), &argv);
    let args = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut ctx = Ctx {
        exe,
        args,
        settings,
        recorder,
        plain_sh: false,
    };
    match exe {
        Exe::Claude => claude::run(&mut ctx),
        Exe::Codex => codex::run(&mut ctx),
        Exe::Grok if ctx.settings.get(settings::GROK).as_deref() == Some("community") => {
            grok_community::run(&mut ctx)
        }
        Exe::Grok => grok::run(&mut ctx),
        Exe::Kiro => kiro::run(&mut ctx),
        Exe::OpenCode => opencode::run(&mut ctx),
        Exe::Cursor => cursor::run(&mut ctx),
        Exe::Copilot => copilot::run(&mut ctx),
        Exe::Gemini => gemini::run(&mut ctx),
        Exe::Qwen => qwen::run(&mut ctx),
    }
}

fn basename(argv0: &OsStr) -> String {
    Path::new(argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
