//! Test controls: `HANDOFF_FAKE_*` environment variables, plus the `fake-agent.env` file next to
//! the executable (handoff scrubs the environment of the agents it launches, so tests put their
//! switches in the file). Real environment variables win over the file.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The name of the settings file looked up next to the executable.
pub const ENV_FILE_NAME: &str = "fake-agent.env";

/// Behaviour switch, `success` by default.
pub const MODE: &str = "HANDOFF_FAKE_MODE";
/// Where `hang`/`grandchild` write the agent's own pid.
pub const READY_FILE: &str = "HANDOFF_FAKE_READY_FILE";
/// Where `grandchild` writes the grandchild's pid.
pub const GRANDCHILD_PID_FILE: &str = "HANDOFF_FAKE_GRANDCHILD_PID_FILE";
/// When set, a run first starts `sleep 1000` that escapes its process group and session
/// (`(setsid sleep 1000 &)`: its parent exits at once), and writes the sleep's pid here.
pub const ESCAPEE_PID_FILE: &str = "HANDOFF_FAKE_ESCAPEE_PID_FILE";
/// A shell command a run executes first with `$SHELL -c` (`/bin/sh` when unset), as
/// OpenCode's bash tool does, in its working directory (its output goes to stderr; a failure
/// does not stop the run): the model using its shell tool.
pub const SHELL: &str = "HANDOFF_FAKE_SHELL";
/// Space-separated connections the CLI process itself attempts first (not through its
/// shell), as its own HTTP client or an MCP server it starts would: `direct:HOST:PORT` (a
/// plain TCP connection), `http:HOST:PORT` (a GET sent straight there), `get:URL` (an HTTP GET through `$HTTP_PROXY`), `connect:HOST:PORT`
/// (a `CONNECT` through `$HTTPS_PROXY`). Each outcome goes to stderr as
/// `fake-agent: net <attempt> -> <outcome>`.
pub const NET: &str = "HANDOFF_FAKE_NET";
/// Paths a run leaves in the git directories of the repository holding its working directory,
/// before it answers: `claude-sandbox` creates, each only when absent (with any missing
/// parents), the empty files and directories Claude Code 2.1.332 creates as bubblewrap mount
/// points for its Bash tool and does not remove; `hostile` writes content under the same names
/// instead, overwriting existing files. Unset: nothing. See the crate docs for the paths.
pub const LEFTOVERS: &str = "HANDOFF_FAKE_LEFTOVERS";
/// `1`: a run sends SIGKILL to its parent process first (an agent killing what watches it);
/// `STOP`: SIGSTOP (an agent freezing it).
pub const KILL_PARENT: &str = "HANDOFF_FAKE_KILL_PARENT";
/// Exit code for `exit` mode (default 23).
pub const EXIT: &str = "HANDOFF_FAKE_EXIT";
/// Directory receiving one JSON record per invocation.
pub const RECORD_DIR: &str = "HANDOFF_FAKE_RECORD_DIR";
/// `missing`: help output omits one flag the adapter requires.
pub const HELP: &str = "HANDOFF_FAKE_HELP";
/// `community`: `grok` is the community `@vibe-kit/grok-cli` (`-p`, JSONL messages, no
/// sandbox) instead of xAI's CLI.
pub const GROK: &str = "HANDOFF_FAKE_GROK";
/// Overrides the version number printed by `--version`.
pub const VERSION: &str = "HANDOFF_FAKE_VERSION";
/// Comma-separated harnesses (`codex,claude,grok`) a run asks for nested advice, one after
/// another, before it answers: through the prompt's `… advice --harness AGENT … --instructions -`
/// line, `AGENT` replaced by the target, run with `/bin/sh -c`.
pub const ADVICE: &str = "HANDOFF_FAKE_ADVICE";
/// Raw shell words (`--bash true`, `--dependency advises:run-x`) inserted right before
/// `--instructions -` in every nested advice command.
pub const ADVICE_ARGS: &str = "HANDOFF_FAKE_ADVICE_ARGS";
/// The question sent on stdin to nested advice (default `What is the riskiest part of this
/// change? (asked by <exe>)`); ` [to <target>]` is always appended.
pub const ADVICE_QUESTION: &str = "HANDOFF_FAKE_ADVICE_QUESTION";
/// `1`: nested advice runs without `HANDOFF_SUPERVISOR_CONTEXT` in its environment (a worker
/// trying to escape its supervisor).
pub const ADVICE_STRIP: &str = "HANDOFF_FAKE_ADVICE_STRIP";
/// Which runs act on the nested-advice switches (`HANDOFF_FAKE_ADVICE`, `…_CONTEXT_FILE`,
/// `…_WAIT_FILE`): `root` (default) — only a worker whose supervisor context names the root run
/// (or that has no context), so advisers started by the supervisor (which read the same settings
/// file) don't ask again; `any` — every run, advisers included.
pub const ADVICE_FROM: &str = "HANDOFF_FAKE_ADVICE_FROM";
/// Where a run writes the value of `HANDOFF_SUPERVISOR_CONTEXT` (empty when unset) as it starts.
pub const CONTEXT_FILE: &str = "HANDOFF_FAKE_CONTEXT_FILE";
/// A run waits (polling every 20 ms) until this file exists before it answers, after writing
/// the context file and asking for nested advice.
pub const WAIT_FILE: &str = "HANDOFF_FAKE_WAIT_FILE";
/// Milliseconds an advice run (an `Operation: advice` prompt) sleeps before it answers, after
/// the nested-advice steps: an adviser that takes its time.
pub const ADVICE_DELAY_MS: &str = "HANDOFF_FAKE_ADVICE_DELAY_MS";
/// A JSON array of provider-output findings (`[{"file": "src/a.rs", "line": 3, "severity":
/// "high", "summary": "…"}]`) the answer carries instead of none.
pub const FINDINGS: &str = "HANDOFF_FAKE_FINDINGS";
/// The `verdict` the answer states, as given (unset: the answer states none).
pub const VERDICT: &str = "HANDOFF_FAKE_VERDICT";
/// A model API failure the run ends with, as the real CLI reports it for that error, in its
/// own output format: `rate_limited`, `usage_limit`, `auth`, `billing`, `model_not_found`,
/// `server_error`, `overloaded`, `context_length` (the names of
/// `model_server::ApiError::name`), or `network` (the API cannot be reached). The run does its
/// preliminaries first (leftovers, context file, nested advice, wait file, advice delay, and
/// the side effects of `HANDOFF_FAKE_MODE`: `hang`, `exit`, … happen as usual), then fails in
/// place of the mode's work and answer: Claude Code 2.1.332 an assistant event from model
/// `<synthetic>` with `error`, `is_api_error_message`, `api_error_status`, `api_error_type`,
/// then an `is_error` result with the same fields and its `terminal_reason` (exit 1); Codex
/// 0.171 `error` and `turn.failed` events with its message (`ERROR: …` on stderr without
/// `--json`; a usage limit names the local clock time 1200 s from now), exit 1; OpenCode an
/// `error` event with the AI SDK's `APIError` (status, `isRetryable`, `responseHeaders` with
/// `retry-after: 1200` on a limit, the OpenAI body as `responseBody`) or `UnknownError`, exit
/// 1; Grok its envelope with `error: {message, status, code}` (OpenAI texts), exit 1; Kiro and
/// Cursor an `Error: <status> <reason>: <detail>` line on stderr, exit 1; the community Grok
/// CLI `Sorry, I encountered an error: Grok API error: <status> <OpenAI message>` as its last
/// assistant message, exit 0. A continuation receiver fails the same way, except when it
/// answers the probe question. An unknown value prints `fake-agent: unknown
/// HANDOFF_FAKE_API_ERROR=<value>` and exits 2, as an unknown mode does.
pub const API_ERROR: &str = "HANDOFF_FAKE_API_ERROR";
/// `1`: with `HANDOFF_FAKE_API_ERROR`, a run that may write (not advice, and writable under the
/// same rule as `fake-<mode>.txt`) first writes `fake-partial-<exe>.txt` (one line naming the
/// CLI) in its target directory, reported like any file the CLI wrote, then fails: an agent
/// that made part of a change before it hit its limit.
pub const API_ERROR_AFTER_WRITE: &str = "HANDOFF_FAKE_API_ERROR_AFTER_WRITE";

/// A continuation receiver whose prompt contains `What were you last working on? Answer in one or
/// two sentences.` answers with this text (instead of the last assistant text of the session it
/// resumed, or `I don't know.`).
pub const PROBE_ANSWER: &str = "FAKE_AGENT_PROBE_ANSWER";
/// Milliseconds a continuation receiver sleeps before it writes anything to its session store
/// (a receiver that is still starting).
pub const RECEIVER_DELAY_MS: &str = "FAKE_AGENT_RECEIVER_DELAY_MS";
/// `1`: a continuation receiver ignores the session it was told to resume (Claude `--resume`,
/// Codex `exec resume`, OpenCode `--session`) and starts a new one (a receiver that did not
/// continue).
pub const RECEIVER_FRESH: &str = "FAKE_AGENT_RECEIVER_FRESH";
/// `opencode import` waits (polling every 20 ms) until this file exists before it writes the
/// session: an import that takes its time.
pub const IMPORT_WAIT_FILE: &str = "HANDOFF_FAKE_IMPORT_WAIT_FILE";
/// `1`: `opencode import` fails (exit 1) without writing anything.
pub const IMPORT_FAIL: &str = "HANDOFF_FAKE_IMPORT_FAIL";

/// Settings resolved from the environment and the env file.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    file: BTreeMap<String, String>,
    /// The CLI this process imitates (the basename of `argv[0]`): the suffix of its own keys.
    exe: String,
}

impl Settings {
    /// Loads the env file located next to `argv0` (or the current executable).
    pub(crate) fn load(argv0: &OsStr) -> Settings {
        let file = env_file_location(argv0)
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|text| parse_env_file(&text))
            .unwrap_or_default();
        let exe = Path::new(argv0)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Settings { file, exe }
    }

    /// Settings with these file entries (for unit tests).
    #[cfg(test)]
    pub(crate) fn with(entries: &[(&str, &str)]) -> Settings {
        Settings {
            file: entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            exe: String::new(),
        }
    }

    /// The value of `key`: the real environment first, then the env file, where `key@<exe>`
    /// (`HANDOFF_FAKE_MODE@codex`) wins over `key` for the CLI named `<exe>`, so that agents
    /// sharing the file can behave differently. Empty values count as unset.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        std::env::var(key)
            .ok()
            .or_else(|| {
                self.file
                    .get(&format!("{key}@{}", self.exe))
                    .or_else(|| self.file.get(key))
                    .cloned()
            })
            .filter(|v| !v.is_empty())
    }
}

/// Parses `KEY=VALUE` lines (key and value trimmed); blank lines and `#` comments are skipped; a
/// later line wins.
pub(crate) fn parse_env_file(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = trimmed.split_once('=') {
            let k = k.trim();
            if !k.is_empty() {
                out.insert(k.to_owned(), v.trim().to_owned());
            }
        }
    }
    out
}

/// The directory the fake considers "its own": the directory of `argv[0]` when it contains a `/`;
/// otherwise the first `$PATH` entry holding an executable of that name (this is where a shell or
/// `Command::new("claude")` found it, and symlinks are not resolved); otherwise the directory of
/// `current_exe()`.
pub(crate) fn own_dir(argv0: &OsStr) -> Option<PathBuf> {
    let argv0_path = Path::new(argv0);
    if argv0.as_encoded_bytes().contains(&b'/') {
        let abs = if argv0_path.is_absolute() {
            argv0_path.to_path_buf()
        } else {
            std::env::current_dir().ok()?.join(argv0_path)
        };
        return abs.parent().map(Path::to_path_buf);
    }
    if !argv0.is_empty()
        && let Some(found) = super::util::which(argv0)
    {
        return found.parent().map(Path::to_path_buf);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
}

fn env_file_location(argv0: &OsStr) -> Option<PathBuf> {
    own_dir(argv0).map(|d| d.join(ENV_FILE_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comments_blank_lines_and_equals_in_values() {
        let map = parse_env_file("# c\n\nA=1\n  B = x=y\nA=2\nnovalue\n");
        assert_eq!(map.get("A").map(String::as_str), Some("2"));
        assert_eq!(map.get("B").map(String::as_str), Some("x=y"));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn a_key_for_this_cli_wins_over_the_plain_key() {
        let mut set = Settings::with(&[("K_FAKE_TEST", "plain"), ("K_FAKE_TEST@codex", "mine")]);
        assert_eq!(set.get("K_FAKE_TEST").as_deref(), Some("plain"));
        set.exe = "codex".to_owned();
        assert_eq!(set.get("K_FAKE_TEST").as_deref(), Some("mine"));
        set.exe = "claude".to_owned();
        assert_eq!(set.get("K_FAKE_TEST").as_deref(), Some("plain"));
    }
}
